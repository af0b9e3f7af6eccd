package app

import (
	"bufio"
	"context"
	"io"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/internal/cli"
)

// startDev runs `stint dev args...` on host h until the test ends and returns its URL, read
// from the line it prints once ready.
func startDev(t *testing.T, h *fakeHost, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	root := cli.NewRoot(newDevCommand(h.host(), nil))
	pr, pw := io.Pipe()
	root.SetOut(io.Discard)
	root.SetErr(pw)
	root.SetArgs(append([]string{"dev", "--addr", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "data"), "--log-level", "error"}, args...))
	done := make(chan int, 1)
	go func() {
		done <- cli.Execute(ctx, root)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		go func() { _, _ = io.Copy(io.Discard, pr) }()
		require.Equal(t, 0, <-done)
	})
	ready := regexp.MustCompile(`ready on (http://\S+)`)
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if m := ready.FindStringSubmatch(sc.Text()); m != nil {
			go func() { _, _ = io.Copy(io.Discard, pr) }()
			return m[1]
		}
	}
	t.Fatalf("stint dev ended before it was ready: %v", sc.Err())
	return ""
}

// TestDevLocalWorkerCapacity: stint dev's local worker offers the host's CPUs and memory
// (the fake host: 1.5 CPUs and 2048 MB under cgroup limits), so a job asking memory runs;
// --memory and --slots override.
func TestDevLocalWorkerCapacity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want apitype.Capacity
	}{
		{name: "detected", want: apitype.Capacity{CPU: 1.5, MemoryMB: 2048, Slots: 8}},
		{name: "given", args: []string{"--memory", "4096", "--slots", "3", "--cpu", "2"}, want: apitype.Capacity{CPU: 2, MemoryMB: 4096, Slots: 3}},
		{name: "memory with a unit", args: []string{"--memory", "6G"}, want: apitype.Capacity{CPU: 1.5, MemoryMB: 6144, Slots: 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := startDev(t, &fakeHost{}, tc.args...)
			c, err := client.New(url, client.WithPollInterval(20*time.Millisecond))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			created, _, err := c.CreateJob(ctx, &apitype.JobSpec{Shell: "true",
				Requirements: &apitype.Requirements{CPU: 1, MemoryMB: 1024}})
			require.NoError(t, err)
			run, err := c.WaitRun(ctx, created.Run.ID, func(r *apitype.Run) bool { return r.FinishedAt != nil })
			require.NoError(t, err)
			require.Equal(t, "succeeded", run.Status, "a job asking 1024 MB ran on the local worker: %+v", run)
			ws, err := c.ListWorkers(ctx)
			require.NoError(t, err)
			require.Len(t, ws.Items, 1)
			require.Equal(t, tc.want, ws.Items[0].Capacity)
		})
	}
}
