package engine

import (
	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
)

// LeaseToAPI turns a lease into its wire form.
func LeaseToAPI(l *model.Lease) apitype.Lease {
	out := apitype.Lease{
		RunID:     l.Run.ID,
		JobID:     l.Run.JobID,
		JobName:   l.Run.JobName,
		Attempt:   l.Run.Attempt,
		Token:     l.Token,
		ExpiresAt: l.ExpiresAt.UTC(),
		Command:   l.Spec.Command,
		Shell:     l.Spec.Shell,
		Handler:   l.Spec.Handler,
		Args:      l.Run.Args,
		Env:       l.Spec.Env,
		Dir:       l.Spec.Dir,
	}
	if l.Spec.Timeout > 0 {
		d := apitype.Duration(l.Spec.Timeout)
		out.Timeout = &d
	}
	if r := l.Run.Requirements; r.CPU > 0 || r.MemoryMB > 0 || r.GPU > 0 || len(r.Labels) > 0 {
		out.Requirements = &apitype.Requirements{CPU: r.CPU, MemoryMB: r.MemoryMB, GPU: r.GPU, Labels: r.Labels}
	}
	return out
}

// WorkerToAPI turns a worker into its wire form.
func WorkerToAPI(w *model.Worker) *apitype.Worker {
	return &apitype.Worker{
		ID:            w.ID,
		Labels:        w.Labels,
		Capacity:      apitype.Capacity(w.Capacity),
		Used:          apitype.Capacity(w.Used),
		Running:       w.Running,
		State:         string(w.State),
		RegisteredAt:  w.RegisteredAt.UTC(),
		LastHeartbeat: w.LastHeartbeat.UTC(),
	}
}
