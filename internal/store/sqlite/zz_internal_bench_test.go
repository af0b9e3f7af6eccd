package sqlite

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

func BenchmarkZEmptyWrite(b *testing.B) {
	for _, sync := range []string{"OFF", "FULL"} {
		b.Run(sync, func(b *testing.B) {
			s, err := Open(b.Context(), Config{Path: filepath.Join(b.TempDir(), "x.db"), Synchronous: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for b.Loop() {
				if err := s.write(b.Context(), func(t *wtx) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkZEmptyLease(b *testing.B) {
	s, err := Open(b.Context(), Config{Path: filepath.Join(b.TempDir(), "x.db"), Synchronous: "OFF"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	s.UpdateQueue(b.Context(), &store.UpdateQueueParams{Name: "a", Now: time.Now()})
	s.UpdateQueue(b.Context(), &store.UpdateQueueParams{Name: "b", Now: time.Now()})
	for b.Loop() {
		if _, err := s.LeaseRuns(b.Context(), &store.LeaseRunsParams{WorkerID: "w", Max: 100, LeaseTTL: time.Minute, Handlers: []string{"noop"}, Commands: true, Now: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	_ = model.RunQueued
}
