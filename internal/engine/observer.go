package engine

import (
	"time"

	"github.com/stint-dev/stint/internal/model"
)

// Observer is told what this server's engine did, for its metrics (internal/metrics
// implements it). Each call tells of this server's own doings (its completions, its
// leases, its rescues while it leads), so that the counts of a cluster's servers add up.
// Calls come from many goroutines at once and must not block.
type Observer interface {
	// Ended is given runs that a change made here wrote; those in a final state ended by
	// it. A run that ended is given once.
	Ended(runs []*model.Run)
	// Retried is given the runs whose attempt a completion here ended; those still active
	// will be tried again.
	Retried(runs []*model.Run)
	// LeasesExpired is given the runs of a rescue pass (store.Store.RescueExpired).
	LeasesExpired(runs []*model.Run)
	// WorkerRestarted is given the runs a worker's new session ended or admitted
	// (store.Store.RegisterWorker).
	WorkerRestarted(runs []*model.Run)
	// Leased is given the leases of one lease transaction that began at now.
	Leased(leases []*model.Lease, now time.Time)
}

// nopObserver observes nothing: Config.Observer's default.
type nopObserver struct{}

func (nopObserver) Ended([]*model.Run)               {}
func (nopObserver) Retried([]*model.Run)             {}
func (nopObserver) LeasesExpired([]*model.Run)       {}
func (nopObserver) WorkerRestarted([]*model.Run)     {}
func (nopObserver) Leased([]*model.Lease, time.Time) {}
