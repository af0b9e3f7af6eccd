package progress

import (
	"io"
	"sync"
)

// Phases shows work that goes through phases one after the other (a benchmark's inserts,
// then the drain of what it inserted): a bar per phase, the one before finished when the next
// starts. Its methods are safe for concurrent use and do nothing on a nil *Phases.
type Phases struct {
	mu    sync.Mutex
	w     io.Writer
	opts  []Option
	phase string
	bar   *Bar
}

// NewPhases returns phases whose bars are drawn on w with opts.
func NewPhases(w io.Writer, opts ...Option) *Phases {
	return &Phases{w: w, opts: opts}
}

// Update says that done of total units of phase are done: it moves phase's bar, after
// finishing the bar of the phase before if phase is a new one.
func (p *Phases) Update(phase string, done, total int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar == nil || phase != p.phase {
		p.bar.Finish()
		p.phase, p.bar = phase, New(p.w, phase, total, p.opts...)
	}
	p.bar.SetTotal(total)
	p.bar.Set(done)
}

// Finish finishes the bar of the last phase.
func (p *Phases) Finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bar.Finish()
}
