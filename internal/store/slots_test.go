package store

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/stint-dev/stint/internal/model"
)

// memSlots is an in-memory SlotTx over one key without a rate limit: the runs and their
// slot rows, oldest first, as the stores keep them in run_slots.
type memSlots struct {
	runs  map[string]*model.Run
	slots []*memSlot
}

type memSlot struct {
	runID, state string
	max          int
}

func (m *memSlots) LockKey(string) error { return nil }

func (m *memSlots) Holders(string) (int, error) {
	n := 0
	for _, s := range m.slots {
		if s.state == "active" {
			n++
		}
	}
	return n, nil
}

func (m *memSlots) Replace(r *model.Run, holding int, now time.Time) ([]*model.Run, int, error) {
	var out []*model.Run
	for _, s := range m.slots {
		if holding < r.Concurrency.Max || s.state != "active" {
			continue
		}
		h := m.runs[s.runID]
		if h.Status == model.RunRunning {
			if !h.CancelRequested {
				h.CancelRequested = true
				out = append(out, h)
			}
			continue // it holds its slot until it ends
		}
		h.Status, h.FinishedAt = model.RunCancelled, &now
		s.state = "done"
		holding--
		out = append(out, h)
	}
	return out, holding, nil
}

func (m *memSlots) Reserve(string, *model.RateLimit, time.Time) (time.Time, error) {
	return time.Time{}, fmt.Errorf("no rate limit here")
}

func (m *memSlots) NextHeld(string, time.Time) (*HeldSlot, error) {
	for _, s := range m.slots {
		if s.state == "held" {
			return &HeldSlot{RunID: s.runID, Max: s.max}, nil
		}
	}
	return nil, nil
}

func (m *memSlots) HeldRun(runID string) (*model.Run, error) {
	r := *m.runs[runID]
	return &r, nil
}

func (m *memSlots) SetRun(r *model.Run) error {
	m.runs[r.ID] = r
	return nil
}

func (m *memSlots) SetSlot(runID, state string, _ *time.Time) error {
	for _, s := range m.slots {
		if s.runID == runID {
			s.state = state
			return nil
		}
	}
	return fmt.Errorf("no slot of run %s", runID)
}

// end ends run id (final status) and frees its slot.
func (m *memSlots) end(id string, status model.RunStatus) {
	m.runs[id].Status = status
	if s := m.slot(id); s.state == "active" {
		s.state = "done"
	}
}

func (m *memSlots) slot(id string) *memSlot {
	i := slices.IndexFunc(m.slots, func(s *memSlot) bool { return s.runID == id })
	return m.slots[i]
}

// ids lists the runs whose slot is in state and whose run satisfies ok.
func (m *memSlots) ids(state string, ok func(*model.Run) bool) []string {
	var out []string
	for _, s := range m.slots {
		if s.state == state && ok(m.runs[s.runID]) {
			out = append(out, s.runID)
		}
	}
	return out
}

// Admission never lets more than Max runs of a key hold a slot, whatever the interleaving
// of new runs (under every policy), starts, ends and cancellations; a held run waits only
// while the key is full, and a slot holder is never a final run.
func TestAdmissionNeverExceedsMax(t *testing.T) {
	t.Parallel()
	policies := []model.ConcurrencyPolicy{model.ConcurrencyAllow, model.ConcurrencyQueue, model.ConcurrencyForbid, model.ConcurrencyReplace}
	rapid.Check(t, func(t *rapid.T) {
		const key = "job:k"
		max := rapid.IntRange(1, 4).Draw(t, "max")
		m := &memSlots{runs: map[string]*model.Run{}}
		now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		seq := 0
		all := func(*model.Run) bool { return true }
		t.Repeat(map[string]func(*rapid.T){
			"new run": func(t *rapid.T) {
				seq++
				r := &model.Run{ID: fmt.Sprintf("r%03d", seq), Status: model.RunQueued, ScheduledFor: now,
					Concurrency: &model.RunConcurrency{Key: key, Max: max, Policy: rapid.SampledFrom(policies).Draw(t, "policy")}}
				if _, _, err := AdmitNew(m, r, now); err != nil {
					t.Fatal(err)
				}
				m.runs[r.ID] = r
				m.slots = append(m.slots, &memSlot{runID: r.ID, state: SlotState(r), max: max})
			},
			"start": func(t *rapid.T) {
				queued := m.ids("active", func(r *model.Run) bool { return r.Status == model.RunQueued })
				if len(queued) == 0 {
					t.Skip("nothing queued")
				}
				m.runs[rapid.SampledFrom(queued).Draw(t, "run")].Status = model.RunRunning
			},
			"end a holder": func(t *rapid.T) {
				holders := m.ids("active", all)
				if len(holders) == 0 {
					t.Skip("no holder")
				}
				m.end(rapid.SampledFrom(holders).Draw(t, "run"), rapid.SampledFrom([]model.RunStatus{model.RunSucceeded, model.RunFailed, model.RunCancelled}).Draw(t, "status"))
				if _, err := AdmitHeld(m, key, now); err != nil {
					t.Fatal(err)
				}
			},
			"cancel a held run": func(t *rapid.T) {
				held := m.ids("held", func(r *model.Run) bool { return r.Status == model.RunWaiting })
				if len(held) == 0 {
					t.Skip("none held")
				}
				m.runs[rapid.SampledFrom(held).Draw(t, "run")].Status = model.RunCancelled
			},
			"": func(t *rapid.T) {
				holding, _ := m.Holders(key)
				if holding > max {
					t.Fatalf("%d runs hold a slot of a key with max %d", holding, max)
				}
				for _, id := range m.ids("active", all) {
					if m.runs[id].Status.Final() {
						t.Fatalf("final run %s holds a slot", id)
					}
				}
				for _, id := range m.ids("held", func(r *model.Run) bool { return r.Status == model.RunWaiting }) {
					require.Equal(t, max, holding, "run %s waits while a slot is free", id)
					require.Equal(t, model.PendingConcurrencyLimit, m.runs[id].PendingCode)
				}
			},
		})
	})
}
