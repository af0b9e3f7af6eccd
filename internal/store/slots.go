package store

import (
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
)

// SlotTx is what an engine's transaction offers the admission logic of concurrency limits
// and rate limits (the package doc, "Concurrency limits"): Admit and AdmitHeld decide, the
// engine reads and writes run_slots, runs and rate_limits.
type SlotTx interface {
	// LockKey serializes, until the transaction ends, the transactions that count or
	// change the slots of key (a no-op where writers are serialized anyway).
	LockKey(key string) error
	// Holders counts the runs of key that hold a slot.
	Holders(key string) (int, error)
	// Replace cancels the oldest holders of r's key so that r fits and returns them (as
	// they are after) and how many holders are left; runs it ended free their slots.
	Replace(r *model.Run, holding int, now time.Time) ([]*model.Run, int, error)
	// Reserve takes the next turn of key under rate limit rl and returns when it starts.
	Reserve(key string, rl *model.RateLimit, now time.Time) (time.Time, error)
	// NextHeld returns the oldest held run of key that may start at now (not waiting for a
	// reserved turn still ahead), or nil.
	NextHeld(key string, now time.Time) (*HeldSlot, error)
	// HeldRun reads a held run (locked for update where that means something).
	HeldRun(runID string) (*model.Run, error)
	// SetRun writes a run's status and pending reason.
	SetRun(r *model.Run) error
	// SetSlot writes a slot's state (held, active, done) and release time (nil: none).
	SetSlot(runID, state string, release *time.Time) error
}

// HeldSlot is a held row of run_slots.
type HeldSlot struct {
	RunID string
	Max   int
	Rate  *model.RateLimit
	// Reserved: the run has its turn under the rate limit (its release time has come).
	Reserved bool
}

// AdmitNew decides a new run's admission under r.Concurrency and prepares r for insertion
// accordingly (see Admit); under policy replace it cancels the oldest holders first and
// returns them. It returns when a run held by the rate limit gets its turn (zero
// otherwise), for the run's slot row.
func AdmitNew(tx SlotTx, r *model.Run, now time.Time) (replaced []*model.Run, release time.Time, err error) {
	c := r.Concurrency
	if err := tx.LockKey(c.Key); err != nil {
		return nil, time.Time{}, err
	}
	holding, err := tx.Holders(c.Key)
	if err != nil {
		return nil, time.Time{}, err
	}
	switch scheduler.Admit(c, holding) {
	case scheduler.AdmitRun:
	case scheduler.SkipRun:
		scheduler.Skip(r, holding, now)
		return nil, time.Time{}, nil
	case scheduler.HoldRun:
		scheduler.Hold(r, holding)
		return nil, time.Time{}, nil
	case scheduler.ReplaceRuns:
		if replaced, holding, err = tx.Replace(r, holding, now); err != nil {
			return nil, time.Time{}, err
		}
		if holding >= c.Max {
			scheduler.Hold(r, holding)
			return replaced, time.Time{}, nil
		}
	}
	if c.Rate != nil {
		at, err := tx.Reserve(c.Key, c.Rate, now)
		if err != nil {
			return nil, time.Time{}, err
		}
		if at.After(now) {
			scheduler.RateHold(r, at)
			return replaced, at, nil
		}
	}
	return replaced, time.Time{}, nil
}

// SlotState is the state a new run's slot row starts in, as AdmitNew left the run.
func SlotState(r *model.Run) string {
	switch {
	case r.Status == model.RunWaiting:
		return "held"
	case r.Status.Final():
		return "done"
	}
	return "active"
}

// AdmitHeld gives free slots of key to its held runs, oldest first, stopping at the first
// that does not fit (its limit is its own Max), and returns the runs it admitted as they
// are after. A run admitted under a rate limit takes its turn; when that is ahead it waits
// for it (rate_limited) and the next held run is tried. A run whose reserved turn came
// while no slot was free goes back to waiting for a slot.
func AdmitHeld(tx SlotTx, key string, now time.Time) ([]*model.Run, error) {
	if err := tx.LockKey(key); err != nil {
		return nil, err
	}
	holding, err := tx.Holders(key)
	if err != nil {
		return nil, err
	}
	var out []*model.Run
	for {
		h, err := tx.NextHeld(key, now)
		if err != nil || h == nil {
			return out, err
		}
		r, err := tx.HeldRun(h.RunID)
		if err != nil {
			return nil, fmt.Errorf("held run %s: %w", h.RunID, err)
		}
		if r.Status != model.RunWaiting {
			// Ended while held (cancelled): it takes no slot.
			if err := tx.SetSlot(h.RunID, "done", nil); err != nil {
				return nil, err
			}
			continue
		}
		r.Concurrency = &model.RunConcurrency{Key: key, Max: h.Max, Rate: h.Rate}
		if h.Max > 0 && holding >= h.Max {
			if h.Reserved { // its turn came, but no slot: it waits for a slot again
				scheduler.Hold(r, holding)
				if err := tx.SetRun(r); err != nil {
					return nil, err
				}
				if err := tx.SetSlot(h.RunID, "held", nil); err != nil {
					return nil, err
				}
			}
			return out, nil
		}
		if h.Rate != nil && !h.Reserved {
			at, err := tx.Reserve(key, h.Rate, now)
			if err != nil {
				return nil, err
			}
			if at.After(now) {
				scheduler.RateHold(r, at)
				if err := tx.SetRun(r); err != nil {
					return nil, err
				}
				if err := tx.SetSlot(h.RunID, "held", &at); err != nil {
					return nil, err
				}
				continue
			}
		}
		scheduler.Release(r, now)
		if err := tx.SetRun(r); err != nil {
			return nil, err
		}
		if err := tx.SetSlot(h.RunID, "active", nil); err != nil {
			return nil, err
		}
		holding++
		out = append(out, r)
	}
}
