package worker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// gpuReleaseSlack is how much longer than KillGrace an attempt waits for GPU devices that
// attempts already being stopped still hold: a stopped process is SIGKILLed after KillGrace
// (a lost one at once), and its output pipes may take a moment more to close.
const gpuReleaseSlack = 5 * time.Second

// gpuShortError says an attempt needs more GPU devices than this worker can give it.
type gpuShortError struct {
	need, free, total int
	waited            time.Duration // >0: devices held by stopped attempts were not given back in time
}

func (e *gpuShortError) Error() string {
	unit := "GPUs"
	if e.need == 1 {
		unit = "GPU"
	}
	msg := fmt.Sprintf("needs %d %s, %d of %d free on this worker", e.need, unit, e.free, e.total)
	if e.waited > 0 {
		msg += fmt.Sprintf(" (stopped attempts still held the rest after %s)", e.waited)
	}
	return msg
}

// gpuDevices checks the GPU devices a Config offers and reconciles them with Capacity.GPU: no
// devices named and Capacity.GPU = n names "0".."n-1"; devices named and Capacity.GPU 0 sets
// it to their number; otherwise the two must agree.
func gpuDevices(ids []string, count int) ([]string, int, error) {
	if count < 0 {
		return nil, 0, errors.New("Capacity.GPU must not be negative")
	}
	if len(ids) == 0 {
		ids = make([]string, count)
		for i := range ids {
			ids[i] = strconv.Itoa(i)
		}
		return ids, count, nil
	}
	if count != 0 && count != len(ids) {
		return nil, 0, fmt.Errorf("Capacity.GPU is %d but GPUs names %d devices", count, len(ids))
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		switch {
		case id == "" || strings.TrimSpace(id) != id:
			return nil, 0, fmt.Errorf("GPU device id %q must be non-empty without surrounding space", id)
		case strings.ContainsAny(id, ",="):
			return nil, 0, fmt.Errorf("GPU device id %q must not contain ',' or '='", id)
		case seen[id]:
			return nil, 0, fmt.Errorf("GPU device %q is named twice", id)
		}
		seen[id] = true
	}
	return ids, len(ids), nil
}

// gpuPool hands the worker's GPU devices to attempts, each device to one attempt at a time.
type gpuPool struct {
	mu      sync.Mutex
	devices []string      // as offered; "lowest" means first here
	holder  []*attempt    // holder[i] holds devices[i]; nil when free
	freed   chan struct{} // closed and replaced whenever devices are given back
	waiting int           // attempts waiting for devices that stopped attempts hold
}

func newGPUPool(devices []string) *gpuPool {
	return &gpuPool{devices: devices, holder: make([]*attempt, len(devices)), freed: make(chan struct{})}
}

// acquire gives at n free devices, lowest first. When too few are free but enough would be
// once the attempts already being stopped give theirs back, it waits for that, until ctx is
// done (the error is then ctx's cause) or for at most wait. Otherwise it fails at once with
// a *gpuShortError.
func (p *gpuPool) acquire(ctx context.Context, at *attempt, n int, wait time.Duration) ([]string, error) {
	var deadline <-chan time.Time
	for {
		p.mu.Lock()
		free, ending := p.countLocked()
		if free >= n {
			ids := p.takeLocked(at, n)
			p.mu.Unlock()
			return ids, nil
		}
		ch := p.freed
		p.mu.Unlock()
		if free+ending < n {
			return nil, &gpuShortError{need: n, free: free, total: len(p.devices)}
		}
		if deadline == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			deadline = t.C
			p.mu.Lock()
			p.waiting++
			p.mu.Unlock()
			defer func() {
				p.mu.Lock()
				p.waiting--
				p.mu.Unlock()
			}()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-deadline:
			p.mu.Lock()
			free, _ = p.countLocked()
			p.mu.Unlock()
			return nil, &gpuShortError{need: n, free: free, total: len(p.devices), waited: wait}
		}
	}
}

// countLocked returns how many devices are free, and how many are held by attempts that were
// stopped or lost and so will give them back soon; p.mu held.
func (p *gpuPool) countLocked() (free, ending int) {
	for _, h := range p.holder {
		switch {
		case h == nil:
			free++
		case h.lost.Load() || reason(h.state.Load()) != running:
			ending++
		}
	}
	return free, ending
}

// takeLocked gives at the n lowest free devices; p.mu held and n of them free.
func (p *gpuPool) takeLocked(at *attempt, n int) []string {
	ids := make([]string, 0, n)
	for i, h := range p.holder {
		if len(ids) == n {
			break
		}
		if h == nil {
			p.holder[i] = at
			ids = append(ids, p.devices[i])
		}
	}
	return ids
}

// release gives back every device at holds.
func (p *gpuPool) release(at *attempt) {
	p.mu.Lock()
	defer p.mu.Unlock()
	freed := false
	for i, h := range p.holder {
		if h == at {
			p.holder[i] = nil
			freed = true
		}
	}
	if freed {
		close(p.freed)
		p.freed = make(chan struct{})
	}
}

// state returns the devices held, by run id of their holder, and how many attempts wait for
// devices (for tests).
func (p *gpuPool) state() (held map[string][]string, waiting int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	held = map[string][]string{}
	for i, h := range p.holder {
		if h != nil {
			held[h.lease.RunID] = append(held[h.lease.RunID], p.devices[i])
		}
	}
	return held, p.waiting
}

// gpusNeeded is how many GPU devices the attempt's lease asks for.
func (at *attempt) gpusNeeded() int {
	if r := at.lease.Requirements; r != nil && r.GPU > 0 {
		return r.GPU
	}
	return 0
}

// acquireGPUs gives the attempt the GPU devices its lease needs, if it needs any, and records
// them in its task. ok is false when the attempt must not run; o then says how it ended: failed
// when the devices are not there, or as stopped when it was stopped while waiting for them.
func (at *attempt) acquireGPUs(ctx context.Context) (o outcome, ok bool) {
	n := at.gpusNeeded()
	if n == 0 {
		return outcome{}, true
	}
	a := at.agent
	ids, err := a.gpus.acquire(ctx, at, n, a.cfg.KillGrace+gpuReleaseSlack)
	if err == nil {
		at.task.GPUs = ids
		return outcome{}, true
	}
	var short *gpuShortError
	if !errors.As(err, &short) {
		// Stopped while waiting for devices.
		if errors.Is(err, ErrTimedOut) {
			at.stop(reasonTimeout)
		}
		if r := reason(at.state.Load()); r != running {
			return at.stoppedOutcome(r), false
		}
	}
	if !at.state.CompareAndSwap(int32(running), int32(reasonDone)) {
		return at.stoppedOutcome(reason(at.state.Load())), false
	}
	a.log.Error("lease needs more GPUs than are free on this worker; failing the attempt",
		"run_id", at.lease.RunID, "attempt", at.lease.Attempt, "gpus_needed", n, "err", err)
	return outcome{status: statusFailed, err: err.Error()}, false
}
