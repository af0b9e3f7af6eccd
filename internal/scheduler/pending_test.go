package scheduler

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/placement"
)

// TestWaitForWorkerWhenBusy covers the reasons that depend on capacity in use, which
// registered workers only have once runs book it.
func TestWaitForWorkerWhenBusy(t *testing.T) {
	t.Parallel()
	gpus := func(id string, declared, free int) placement.Room {
		return placement.Room{WorkerID: id, Capacity: model.Capacity{CPU: 8, GPU: declared}, Free: model.Capacity{CPU: 8, GPU: free}}
	}
	rooms := []placement.Room{gpus("a", 0, 0), gpus("b", 2, 0), gpus("c", 4, 1)}

	code, reason := WaitForWorker(rooms, model.Requirements{GPU: 2})
	require.Equal(t, model.PendingNoWorker, code)
	require.Equal(t, "no worker has room now: 3 registered, 2 would fit when their running work ends (2 busy, short of gpu >= 2), 1 lacks gpu >= 2", reason)

	code, reason = WaitForWorker(rooms, model.Requirements{GPU: 1})
	require.Equal(t, model.PendingNoWorker, code)
	require.Equal(t, "waiting for a free slot: 1 worker fits (c), busy", reason)

	code, reason = WaitForWorker(nil, model.Requirements{GPU: 1})
	require.Equal(t, model.PendingNoWorker, code)
	require.Equal(t, "no worker is connected", reason)

	many := make([]placement.Room, 7)
	for i := range many {
		many[i] = gpus(string(rune('a'+i)), 1, 1)
	}
	_, reason = WaitForWorker(many, model.Requirements{GPU: 1})
	require.Equal(t, "waiting for a free slot: 7 workers fit (a, b, c, d, e and 2 more), all busy", reason)
}
