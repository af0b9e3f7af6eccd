package worker

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/stint-dev/stint/apitype"
)

// Request size limits of one AppendLogs or Complete call.
const (
	maxChunksPerCall      = 512
	maxLogBytesPerCall    = 1 << 20
	maxCompletionsPerCall = 1000
)

// shipper queues log chunks and completions for the ship loop, which sends whatever is ready
// in as few calls as it can: chunks first, then completions. Both queues are taken under one
// lock, and an attempt queues its last chunks before its completion, so every chunk of an
// attempt is sent before its completion.
type shipper struct {
	mu     sync.Mutex
	chunks []apitype.LogChunk
	comps  []pendingCompletion
	dirty  []*attempt // attempts with a partial chunk, flushed by the timer
	wake   chan struct{}
}

type pendingCompletion struct {
	at *attempt
	c  apitype.Completion
}

func (s *shipper) init() { s.wake = make(chan struct{}, 1) }

func (s *shipper) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *shipper) addChunk(c apitype.LogChunk) {
	s.mu.Lock()
	s.chunks = append(s.chunks, c)
	s.mu.Unlock()
	s.signal()
}

func (s *shipper) addCompletion(at *attempt, c apitype.Completion) {
	s.mu.Lock()
	s.comps = append(s.comps, pendingCompletion{at: at, c: c})
	s.mu.Unlock()
	s.signal()
}

func (s *shipper) markDirty(at *attempt) {
	s.mu.Lock()
	s.dirty = append(s.dirty, at)
	s.mu.Unlock()
	s.signal()
}

// shipLoop sends queued chunks and completions until ctx is done, and flushes partial chunks
// every LogFlushInterval while there are any. While the agent gathers leases, it spaces its
// completion calls too (completionWait).
func (a *Agent) shipLoop(ctx context.Context) {
	s := &a.ship
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	var (
		chunks       []apitype.LogChunk
		comps        []pendingCompletion
		dirty        []*attempt
		gathered     <-chan time.Time // completions wait for it
		lastComplete time.Time        // when the last completion call began
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-gathered:
			gathered = nil
		case <-timer.C:
			armed = false
			s.mu.Lock()
			dirty, s.dirty = s.dirty, dirty[:0]
			s.mu.Unlock()
			for i, at := range dirty {
				at.flushLog()
				dirty[i] = nil
			}
		}
		busy := a.gatherBusy(a.now())
		s.mu.Lock()
		chunks, s.chunks = s.chunks, chunks[:0]
		wait := completionWait(busy, len(s.comps), a.gather.room, a.cfg.LeaseGather, lastComplete, time.Now())
		if wait <= 0 {
			comps, s.comps = s.comps, comps[:0]
		} else {
			comps = comps[:0]
		}
		flushLater := len(s.dirty) > 0
		s.mu.Unlock()
		if flushLater && !armed {
			timer.Reset(a.cfg.LogFlushInterval)
			armed = true
		}
		if wait > 0 && gathered == nil {
			gathered = time.After(wait)
		}
		a.sendLogs(ctx, chunks)
		if len(comps) > 0 {
			lastComplete = time.Now()
			a.sendCompletions(ctx, comps)
		}
		clear(chunks)
		clear(comps)
	}
}

// completionWait is how long the ship loop holds n queued completions, at now, before
// sending them: while the agent gathers leases (busy: see gatherBusy), its completion calls
// begin gather apart unless n reaches room, the room a lease poll gathers, for the same
// reason (see gatheringLocked). last is when the previous call began. Zero or less: send
// now.
func completionWait(busy bool, n, room int, gather time.Duration, last, now time.Time) time.Duration {
	if n == 0 || !busy || n >= room {
		return 0
	}
	return last.Add(gather).Sub(now)
}

// gatherBusy reports whether the agent gathers leases, at now (see gathering).
func (a *Agent) gatherBusy(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	free := a.slots - a.used
	var asked int
	var age time.Duration
	switch {
	case a.poll.aborted:
		asked = free // a poll for room is about to replace it (or the agent drains)
	case a.poll.cancel != nil:
		asked, age = a.poll.max, now.Sub(a.poll.began)
	}
	return gathering(a.gather.lastFull && !a.draining, free, a.gather.room, asked, age, a.cfg.LeaseGather)
}

// gathering is the rule gatherBusy applies: a worker gathers leases while its last poll
// got every run it asked for (full), it is not draining, and fewer of its free slots than a
// poll gathers (room) are left once the poll out now, if it is younger than the gather, has
// its answer (asked: the runs it asks for; age: how long it has been out).
//
// Counting the young poll's runs keeps the completions that end while a poll for room is
// out from going in a call of their own: that poll's answer normally fills the slots again
// within milliseconds (in bench exec, half the completion calls carried 1-30 runs before).
// A poll older than the gather is taken as held by a server with nothing to lease, so a
// worker whose slots emptied sends its completions at once; one answered with fewer runs
// than it asked for ends the gather (lastFull) and wakes the ship loop.
func gathering(full bool, free, room, asked int, age, gather time.Duration) bool {
	if !full || gather <= 0 {
		return false
	}
	if asked > 0 && age < gather {
		free -= asked
	}
	return free < room
}

// sendLogs sends chunks in calls of bounded size, retrying transient errors until ctx is
// done. Chunks the server refuses for good are dropped.
func (a *Agent) sendLogs(ctx context.Context, chunks []apitype.LogChunk) {
	for len(chunks) > 0 {
		n, size := 0, 0
		for n < len(chunks) && n < maxChunksPerCall && (n == 0 || size+len(chunks[n].Data) <= maxLogBytesPerCall) {
			size += len(chunks[n].Data)
			n++
		}
		req := &apitype.LogChunksRequest{Chunks: chunks[:n]}
		var b backoff
		for {
			err := a.srv.AppendLogs(ctx, req)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			if isPermanent(err) {
				a.log.Error("server refused log chunks; dropping them", "err", err, "chunks", n)
				break
			}
			d := b.next()
			a.log.Warn("append logs failed; retrying", "err", err, "in", d)
			if !sleep(ctx, d, nil) {
				return
			}
		}
		chunks = chunks[n:]
	}
}

// sendCompletions delivers completions in batches, retrying transient errors until ctx is
// done, and releases their leases once the server has answered.
func (a *Agent) sendCompletions(ctx context.Context, comps []pendingCompletion) {
	for len(comps) > 0 {
		n := min(len(comps), maxCompletionsPerCall)
		if !a.complete(ctx, comps[:n]) {
			return
		}
		comps = comps[n:]
	}
}

// complete sends one batch of completions. It reports false when ctx ended first.
func (a *Agent) complete(ctx context.Context, batch []pendingCompletion) bool {
	req := &apitype.CompleteRequest{Completions: make([]apitype.Completion, len(batch))}
	for i := range batch {
		req.Completions[i] = batch[i].c
	}
	var b backoff
	for {
		resp, err := a.srv.Complete(ctx, req)
		if err == nil {
			a.acknowledged(batch, resp)
			a.releaseCompleted(batch)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if isPermanent(err) {
			if len(batch) > 1 {
				// Find the completion the server refuses; deliver the others.
				for i := range batch {
					if !a.complete(ctx, batch[i:i+1]) {
						return false
					}
				}
				return true
			}
			a.log.Error("server refused a completion for good; dropping it", "err", err,
				"run_id", batch[0].c.RunID, "status", batch[0].c.Status)
			a.releaseCompleted(batch)
			return true
		}
		d := b.next()
		a.log.Warn("complete attempts failed; retrying", "err", err, "in", d, "completions", len(batch))
		if !sleep(ctx, d, nil) {
			return false
		}
	}
}

// acknowledged takes the server's answer to batch: it logs the completions it refused and
// tells Config.OnCompleted of those it accepted. The answer's results are in the batch's
// order; one that is not is found by its run.
func (a *Agent) acknowledged(batch []pendingCompletion, resp *apitype.CompleteResponse) {
	if resp == nil {
		return
	}
	for i, r := range resp.Results {
		if !r.Accepted {
			a.log.Warn("server refused a completion", "run_id", r.RunID, "err", r.Error)
			continue
		}
		if a.cfg.OnCompleted == nil {
			continue
		}
		j := i
		if j >= len(batch) || batch[j].c.RunID != r.RunID {
			j = slices.IndexFunc(batch, func(p pendingCompletion) bool { return p.c.RunID == r.RunID })
			if j < 0 {
				continue // not one of ours: nothing to tell
			}
		}
		p := &batch[j]
		a.cfg.OnCompleted(Completion{RunID: p.c.RunID, JobID: p.at.task.JobID, JobName: p.at.task.JobName,
			Attempt: p.at.task.Attempt, Status: p.c.Status, ExitCode: p.c.ExitCode, Error: p.c.Error})
	}
}

func (a *Agent) releaseCompleted(batch []pendingCompletion) {
	a.mu.Lock()
	for i := range batch {
		a.releaseLeaseLocked(batch[i].at)
	}
	a.wakePollLocked()
	a.mu.Unlock()
	a.signalChanged()
}
