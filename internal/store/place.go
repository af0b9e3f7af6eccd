package store

import (
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/placement"
)

// Placer packs the runs of one lease call for the asking worker (see placement.Pack). A
// store fills Self from the worker's row and the capacity its running runs book, offers
// each queue's candidates (the queued runs that each fit what is free, in lease order) to
// Pick, and leases what Pick returns. The other live workers, needed only to leave a young
// constrained run to a better fit, are loaded on first need.
type Placer struct {
	Self       placement.Room
	Hold       time.Duration // see LeaseRunsParams.BestFitHold
	Now        time.Time
	LoadOthers func() ([]placement.Room, error)
	// HeldUntil is the earliest end of a hold Pick made (zero when none).
	HeldUntil time.Time
	// SawConstrained is set once Pick was offered a run with requirements.
	SawConstrained bool

	others []placement.Room
	loaded bool
}

// Pick returns the indices of cands to lease, and books them on Self.
func (p *Placer) Pick(cands []placement.Candidate) ([]int, error) {
	for _, c := range cands {
		if !placement.Constrained(c.Req) {
			continue
		}
		p.SawConstrained = true
		if p.Hold > 0 && !p.loaded && p.LoadOthers != nil {
			others, err := p.LoadOthers()
			if err != nil {
				return nil, err
			}
			p.others, p.loaded = others, true
		}
		break
	}
	take, held := placement.Pack(&p.Self, p.others, cands, p.Now, p.Hold)
	if !held.IsZero() && (p.HeldUntil.IsZero() || held.Before(p.HeldUntil)) {
		p.HeldUntil = held
	}
	return take, nil
}

// NewRoom is a worker as placement sees it: declared capacity, and what is free after the
// capacity its running runs book (used).
func NewRoom(id string, labels map[string]string, declared, used model.Capacity) placement.Room {
	free := declared
	free.CPU -= used.CPU
	free.MemoryMB -= used.MemoryMB
	free.GPU -= used.GPU
	return placement.Room{WorkerID: id, Labels: labels, Capacity: declared, Free: free}
}
