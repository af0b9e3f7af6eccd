package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/clock"
)

// errStopped answers requests that reach a committer after the engine stopped.
var errStopped = errors.New("engine stopped")

// committer batches requests from concurrent callers into one flush (one store transaction).
// While a flush runs, new requests queue up and go together in the next one: the busier the
// server, the bigger the batches, and a lone request is flushed at once without waiting.
type committer[Req, Res any] struct {
	in       chan *commitCall[Req, Res]
	flush    func(ctx context.Context, reqs []Req) ([]Res, error)
	maxBatch int
	// spacing, when set, is the least time between the starts of two flushes: a request that
	// comes sooner waits for the rest of it with whatever else comes meanwhile.
	spacing time.Duration
	clock   clock.Clock
}

type commitCall[Req, Res any] struct {
	reqs []Req
	res  []Res
	err  error
	done chan struct{}
}

func newCommitter[Req, Res any](maxBatch int, flush func(context.Context, []Req) ([]Res, error)) *committer[Req, Res] {
	return &committer[Req, Res]{in: make(chan *commitCall[Req, Res], 4096), flush: flush, maxBatch: maxBatch}
}

// do commits reqs (in one batch with whatever else is waiting) and returns their results in
// order. When ctx ends first, do returns ctx's error; the requests may still commit.
func (c *committer[Req, Res]) do(ctx context.Context, stop <-chan struct{}, reqs []Req) ([]Res, error) {
	call := &commitCall[Req, Res]{reqs: reqs, done: make(chan struct{})}
	select {
	case c.in <- call:
	case <-stop:
		return nil, errStopped
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case <-call.done:
		return call.res, call.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run flushes batches until ctx ends; run it in as many goroutines as the store can use
// concurrently.
func (c *committer[Req, Res]) run(ctx context.Context) {
	var calls []*commitCall[Req, Res]
	var reqs []Req
	var last time.Time // when the previous flush began
	for {
		calls, reqs = calls[:0], reqs[:0]
		select {
		case <-ctx.Done():
			c.failPending()
			return
		case call := <-c.in:
			calls = append(calls, call)
			reqs = append(reqs, call.reqs...)
		}
		if c.spacing > 0 {
			if d := last.Add(c.spacing).Sub(c.clock.Now()); d > 0 && len(reqs) < c.maxBatch {
				t := c.clock.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					for _, call := range calls {
						call.err = errStopped
						close(call.done)
					}
					c.failPending()
					return
				case <-t.C():
				}
			}
			last = c.clock.Now()
		}
	gather:
		for len(reqs) < c.maxBatch {
			select {
			case call := <-c.in:
				calls = append(calls, call)
				reqs = append(reqs, call.reqs...)
			default:
				break gather
			}
		}
		res, err := c.flush(ctx, reqs)
		if err == nil && len(res) != len(reqs) {
			err = fmt.Errorf("commit: %d results for %d requests", len(res), len(reqs))
		}
		off := 0
		for _, call := range calls {
			if err != nil {
				call.err = err
			} else {
				call.res = res[off : off+len(call.reqs)]
			}
			off += len(call.reqs)
			close(call.done)
		}
	}
}

// failPending answers calls still queued when the committer stops.
func (c *committer[Req, Res]) failPending() {
	for {
		select {
		case call := <-c.in:
			call.err = errStopped
			close(call.done)
		default:
			return
		}
	}
}
