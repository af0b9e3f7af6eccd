package engine

import "sync"

// broadcast wakes every goroutine waiting on it. Wait returns a channel that is closed by the
// next Notify; take the channel before checking the condition, so a Notify that comes in
// between is not missed.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcast() *broadcast { return &broadcast{ch: make(chan struct{})} }

// Wait returns a channel closed by the next Notify.
func (b *broadcast) Wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

// Notify wakes every current waiter.
func (b *broadcast) Notify() {
	b.mu.Lock()
	close(b.ch)
	b.ch = make(chan struct{})
	b.mu.Unlock()
}
