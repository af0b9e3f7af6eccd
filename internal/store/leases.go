package store

import "github.com/stint-dev/stint/internal/model"

// HoldsChunk reports whether a log chunk's writer holds its attempt's lease, given its run's
// status (running or not), current attempt, lease token and worker: the run runs the
// chunk's attempt under the chunk's token, leased to the chunk's WorkerID when that is set.
// An empty token holds nothing.
func HoldsChunk(c model.LogChunk, running bool, attempt int, token, workerID string) bool {
	return running && c.Token != "" && c.Attempt == attempt && c.Token == token &&
		(c.WorkerID == "" || c.WorkerID == workerID)
}
