//go:build unix

package worker

import (
	"os/exec"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Many starts at once, more than there are starters, all start, and each process runs to its
// own end.
func TestStartersManyAtOnce(t *testing.T) {
	t.Parallel()
	s := newStarters(2)
	defer s.close()
	const n = 64
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cmd := exec.Command(shellPath, "-c", "exit $0", "0")
			if i%2 == 1 {
				cmd.Args[3] = "3"
			}
			if errs[i] = s.start(cmd); errs[i] == nil {
				errs[i] = cmd.Wait()
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i%2 == 0 {
			require.NoError(t, err, "start %d", i)
		} else {
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "start %d", i)
			require.Equal(t, 3, ee.ExitCode(), "start %d", i)
		}
	}
}

// Starts asked of closed starters fail with errStartersClosed; a start that cannot begin
// says why.
func TestStartersErrors(t *testing.T) {
	t.Parallel()
	s := newStarters(1)
	err := s.start(exec.Command("/nonexistent/stint-test"))
	require.ErrorContains(t, err, "/nonexistent/stint-test")
	s.close()
	require.ErrorIs(t, s.start(exec.Command("true")), errStartersClosed)
	var none *starters
	none.close() // no starters: nothing to do
}

// At most turnsPerStarter attempts per starter prepare a start at once: another waits for a
// turn given back, and none is given once the starters closed.
func TestStarterTurns(t *testing.T) {
	t.Parallel()
	s := newStarters(1)
	var ends []func()
	for range turnsPerStarter {
		end, err := s.turn()
		require.NoError(t, err)
		ends = append(ends, end)
	}
	require.Len(t, s.turns, cap(s.turns), "every turn taken")
	got := make(chan error, 1)
	go func() {
		end, err := s.turn()
		if err == nil {
			end()
		}
		got <- err
	}()
	ends[0]()
	require.NoError(t, recv(t, got), "a turn given back goes to the one waiting")
	s.close()
	_, err := s.turn()
	require.ErrorIs(t, err, errStartersClosed)
}
