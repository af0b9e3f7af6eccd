package store

import "github.com/stint-dev/stint/internal/model"

// Holds reports whether held names run's current lease: its id and its LeaseToken.
func Holds(held []LeaseRef, run *model.Run) bool {
	for _, h := range held {
		if h.RunID == run.ID && h.Token == run.LeaseToken {
			return true
		}
	}
	return false
}
