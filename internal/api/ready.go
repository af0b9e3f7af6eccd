package api

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// Readiness: GET /readyz answers 200 only while the store is reachable and takes writes.
//
//   - The store must answer a ping (readyTimeout).
//   - A store that implements store.WriteProber makes one small write at most every
//     probeEvery (and at most every probeMinGap after a write failed): while that write is
//     refused as unavailable (disk full, a read-only or unreachable database) the server is
//     not ready. A probe that only ran out of time (a writer busy with a big batch) changes
//     nothing: readiness must not take servers out of a load balancer for being busy.
//   - A write of a request that failed as unavailable makes the server not ready for
//     failWindow, unless a write has succeeded since: the probe can pass while real writes
//     fail (SQLite's write-ahead log has room for the probe's page, not for a batch).
type readiness struct {
	mu       sync.Mutex
	probedAt time.Time
	probeErr error     // the last probe's unavailability (nil: it wrote)
	failedAt time.Time // the last request whose write was unavailable
	failErr  error     // its error
	wroteAt  time.Time // the last request that wrote
}

const (
	// readyTimeout bounds the store ping and the write probe of GET /readyz.
	readyTimeout = 2 * time.Second
	// probeEvery is how often /readyz writes at most; probeMinGap when writes fail.
	probeEvery  = 5 * time.Second
	probeMinGap = time.Second
	// failWindow is how long a failed write keeps the server not ready.
	failWindow = 15 * time.Second
)

// noteWrite records the outcome of a request that writes: err is what it failed with (nil:
// it succeeded).
func (rd *readiness) noteWrite(err error, now time.Time) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if errors.Is(err, model.ErrUnavailable) {
		rd.failedAt, rd.failErr = now, err
	} else if err == nil {
		rd.wroteAt = now
	}
}

// checkWrites returns why the store cannot take writes, or nil.
func (a *API) checkWrites(ctx context.Context) error {
	rd := &a.ready
	now := a.clock.Now()
	rd.mu.Lock()
	defer rd.mu.Unlock()
	prober, ok := a.store.(store.WriteProber)
	due := now.Sub(rd.probedAt) >= probeEvery ||
		(!rd.failedAt.IsZero() && !rd.failedAt.Before(rd.probedAt) || rd.probeErr != nil) && now.Sub(rd.probedAt) >= probeMinGap
	if ok && due {
		// One probe at a time: concurrent readiness checks wait for it (they are cheap,
		// and the lock keeps the write rate bounded).
		pctx, cancel := context.WithTimeout(ctx, readyTimeout)
		err := prober.ProbeWrite(pctx)
		cancel()
		switch {
		case err == nil:
			rd.probedAt, rd.probeErr = now, nil
		case errors.Is(err, model.ErrUnavailable):
			rd.probedAt, rd.probeErr = now, err
		default: // out of time, or another error: no news about the disk
			a.log.WarnContext(ctx, "readiness write probe", "err", err)
		}
	}
	if rd.probeErr != nil {
		return rd.probeErr
	}
	if rd.failedAt.After(rd.wroteAt) && now.Sub(rd.failedAt) < failWindow {
		return rd.failErr
	}
	return nil
}

// writes reports whether a request may write: the methods other than GET and HEAD.
func writes(r *http.Request) bool { return r.Method != http.MethodGet && r.Method != http.MethodHead }
