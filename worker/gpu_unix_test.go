//go:build unix

package worker

import (
	"context"
	"errors"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stretchr/testify/require"
)

// A command given devices sees them in CUDA_VISIBLE_DEVICES and STINT_GPUS, whatever the
// job's env says; a command that needs no GPU keeps the job's (or the worker's) value and gets
// no STINT_GPUS.
func TestGPUCommandEnv(t *testing.T) {
	t.Parallel()
	const script = `echo "${CUDA_VISIBLE_DEVICES-unset}|${STINT_GPUS-unset}|${CUDA_DEVICE_ORDER-unset}"`
	inherited, order := "unset", "unset"
	if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
		inherited = v
	}
	if v, ok := os.LookupEnv("CUDA_DEVICE_ORDER"); ok {
		order = v
	}
	tests := []struct {
		name  string
		lease apitype.Lease
		want  string
	}{
		{name: "shell", lease: gpuLease(shellLease("r", script), 2), want: "5,7|5,7|PCI_BUS_ID"},
		{name: "argv", lease: gpuLease(apitype.Lease{RunID: "r", Token: "t", Command: []string{"sh", "-c", script}}, 1), want: "5|5|PCI_BUS_ID"},
		{name: "overrides the job's env", lease: func() apitype.Lease {
			l := gpuLease(shellLease("r", script), 3)
			l.Env = map[string]string{"CUDA_VISIBLE_DEVICES": "0,1,2,3", "STINT_GPUS": "x"}
			return l
		}(), want: "5,7,9|5,7,9|PCI_BUS_ID"},
		{name: "no requirements: the job's value", lease: func() apitype.Lease {
			l := shellLease("r", script)
			l.Env = map[string]string{"CUDA_VISIBLE_DEVICES": "job"}
			return l
		}(), want: "job|unset|" + order},
		{name: "no GPU needed: the worker's value", lease: func() apitype.Lease {
			l := shellLease("r", script)
			l.Requirements = &apitype.Requirements{CPU: 1, MemoryMB: 64}
			return l
		}(), want: inherited + "|unset|" + order},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFake()
			startAgent(t, s, func(c *Config) { c.GPUs = []string{"5", "7", "9"} })
			s.add(tt.lease)
			c := s.awaitCompletion(t, "r")
			require.Equal(t, statusSucceeded, c.Status, c.Error)
			require.Equal(t, tt.want+"\n", s.log("r", "stdout"))
		})
	}
}

// Commands running at once get disjoint devices; the devices come back when they end.
func TestGPUCommandsGetDisjointDevices(t *testing.T) {
	t.Parallel()
	s := newFake()
	a, _, _ := startAgent(t, s, func(c *Config) { c.GPUs = []string{"0", "1", "2", "3"} })
	script := `echo "$CUDA_VISIBLE_DEVICES"; exec sleep 100`
	s.add(gpuLease(shellLease("a", script), 2), gpuLease(shellLease("b", script), 1), gpuLease(shellLease("c", script), 1))
	var all []string
	for _, id := range []string{"a", "b", "c"} {
		s.await(t, "devices of "+id, func() bool { return strings.HasSuffix(s.logLocked(id, "stdout"), "\n") })
		all = append(all, strings.Split(strings.TrimSpace(s.log(id, "stdout")), ",")...)
	}
	sort.Strings(all)
	require.Equal(t, []string{"0", "1", "2", "3"}, all, "each device given once")
	require.Len(t, strings.Split(strings.TrimSpace(s.log("a", "stdout")), ","), 2)

	s.push(func(s *fakeServer) { s.cancel = append(s.cancel, "a", "b", "c") })
	for _, id := range []string{"a", "b", "c"} {
		require.Equal(t, statusCancelled, s.awaitCompletion(t, id).Status)
	}
	held, _ := a.gpus.state()
	require.Empty(t, held, "devices come back before the completions are sent")
	s.add(gpuLease(shellLease("all", `echo "$CUDA_VISIBLE_DEVICES"`), 4))
	require.Equal(t, statusSucceeded, s.awaitCompletion(t, "all").Status)
	require.Equal(t, "0,1,2,3\n", s.log("all", "stdout"))
}

// However an attempt ends, its devices come back: the next run that needs every device gets
// them.
func TestGPUReleasedWhateverTheOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		lease  apitype.Lease
		stop   func(s *fakeServer) // pushed once the attempt has started; nil: it ends by itself
		status string              // "": lost, no completion
	}{
		{name: "success", lease: shellLease("r", "echo started"), status: statusSucceeded},
		{name: "failure", lease: shellLease("r", "echo started; exit 3"), status: statusFailed},
		{name: "start failure", lease: apitype.Lease{RunID: "r", Token: "t", Command: []string{"/nonexistent/stint-test"}}, status: statusFailed},
		{name: "timeout", lease: func() apitype.Lease {
			l := shellLease("r", "echo started; exec sleep 100")
			l.Timeout = timeout(200 * time.Millisecond)
			return l
		}(), status: statusTimedOut},
		{name: "cancel", lease: shellLease("r", "echo started; exec sleep 100"),
			stop: func(s *fakeServer) { s.cancel = append(s.cancel, "r") }, status: statusCancelled},
		{name: "lost", lease: shellLease("r", "echo started; exec sleep 100"),
			stop: func(s *fakeServer) { s.hbLost = append(s.hbLost, "r") }},
		{name: "handler error", lease: handlerLease("r", "fail"), status: statusFailed},
		{name: "handler panic", lease: handlerLease("r", "panic"), status: statusFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFake()
			a, _, _ := startAgent(t, s, func(c *Config) {
				c.GPUs = []string{"0", "1"}
				c.Handlers["fail"] = func(_ context.Context, _ *Task) error { return errors.New("boom") }
				c.Handlers["panic"] = func(_ context.Context, _ *Task) error { panic("kaboom") }
			})
			s.add(gpuLease(tt.lease, 2))
			if tt.stop != nil {
				s.awaitLog(t, "r", "started\n")
				held, _ := a.gpus.state()
				require.Equal(t, map[string][]string{"r": {"0", "1"}}, held)
				s.push(tt.stop)
			}
			if tt.status != "" {
				c := s.awaitCompletion(t, "r")
				require.Equal(t, tt.status, c.Status, c.Error)
			} else {
				eventually(t, "attempt released", func() bool { l, u := a.holding(); return l == 0 && u == 0 })
			}
			held, _ := a.gpus.state()
			require.Empty(t, held)
			s.add(gpuLease(shellLease("next", `echo "$CUDA_VISIBLE_DEVICES"`), 2))
			c := s.awaitCompletion(t, "next")
			require.Equal(t, statusSucceeded, c.Status, c.Error)
			require.Equal(t, "0,1\n", s.log("next", "stdout"))
		})
	}
}

// When the server takes a lease back it frees the lease's GPUs at once and may hand them out
// again in the same answer, before the worker has killed the old process: the new attempt
// waits for the devices instead of failing.
func TestGPUNewLeaseWaitsForLostAttempt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		push func(s *fakeServer)
	}{
		{name: "lost and leased in one answer", push: func(s *fakeServer) {
			s.lost = append(s.lost, "old")
			s.queue = append(s.queue, gpuLease(shellLease("new", `echo "$CUDA_VISIBLE_DEVICES"`), 2))
		}},
		{name: "same run leased again", push: func(s *fakeServer) {
			l := gpuLease(shellLease("old", `echo "again $CUDA_VISIBLE_DEVICES"`), 2)
			l.Token = "tok-2"
			s.queue = append(s.queue, l)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFake()
			// The old process ignores SIGTERM; it holds both devices until it is killed and reaped.
			a, _, _ := startAgent(t, s, func(c *Config) { c.GPUs = []string{"0", "1"} })
			s.add(gpuLease(shellLease("old", `trap "" TERM; echo started; exec sleep 100`), 2))
			s.awaitLog(t, "old", "started\n")
			s.push(tt.push)
			var c apitype.Completion
			switch tt.name {
			case "same run leased again":
				s.await(t, "completion of the second lease", func() bool {
					for _, cc := range s.completions {
						if cc.Token == "tok-2" {
							c = cc
							return true
						}
					}
					return false
				})
				require.Equal(t, statusSucceeded, c.Status, c.Error)
				require.Contains(t, s.log("old", "stdout"), "again 0,1\n")
			default:
				c = s.awaitCompletion(t, "new")
				require.Equal(t, statusSucceeded, c.Status, c.Error)
				require.Equal(t, "0,1\n", s.log("new", "stdout"))
			}
			for _, cc := range s.completionsSnapshot() {
				require.NotEqual(t, "tok-old", cc.Token, "the lost attempt is not completed")
			}
			held, _ := a.gpus.state()
			require.Empty(t, held)
		})
	}
}
