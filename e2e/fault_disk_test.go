package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// smallDisk mounts a tmpfs of size bytes on a temporary directory and returns it: a disk the
// test can fill. It skips the test, saying why, where it cannot mount one (not root).
func smallDisk(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10)+",mode=0755", "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs to fill (it takes root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s; unmounting lazily", dir, err, out)
			_ = exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

// fillDisk writes a file into dir until the disk has no room left (ENOSPC) and returns its
// path: removing it frees the disk again.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4 << 10, 1} { // fill, then the last pages
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				require.True(t, errors.Is(err, syscall.ENOSPC), "fill the disk: %v", err)
				break
			}
		}
	}
	return path
}

// TestFaultDiskFull fills the disk of a SQLite store (its data directory on a small tmpfs)
// while one server and two workers run a stream of one-off jobs and two cron jobs firing
// every second, until /readyz says the store cannot take writes, submissions are answered 503
// and a worker's heartbeat failed; then frees it. Afterwards:
//
//   - every error a client saw was a 503 with Retry-After and a problem document saying
//     "the store is unavailable (disk full)", and /readyz said "disk full" while it lasted;
//   - /readyz is ready again, and the server accepts submissions, within seconds of the space
//     coming back, without a restart;
//   - every accepted run and every other run succeeded, the cron jobs have one run per
//     instant with none missed, and no attempt that started was lost (the fault lasts far
//     less than the 15 s default lease TTL).
func TestFaultDiskFull(t *testing.T) {
	t.Parallel()
	data := smallDisk(t, 64<<20)
	r := startRig(t, rigConfig{servers: 1, workers: 2, store: sqliteStore, dataDir: data})
	jobs := r.cronJobs(3)
	r.createCronJobs(jobs)
	p := r.startProducer(uint64(time.Now().UnixNano()), 100*time.Millisecond, 3)
	ctx := context.Background()
	c := r.clients[0]
	waitFor(t, time.Minute, "one-off jobs running", func() bool { return r.runningOneOffs() >= 2 })

	filled := time.Now()
	filler := fillDisk(t, data)
	waitFor(t, time.Minute, "a submission answered 503", func() bool { return len(r.answers.all()) > 0 })
	refusedAfter := time.Since(filled)
	var notReady error
	waitFor(t, 30*time.Second, "/readyz to answer 503", func() bool {
		notReady = c.Ready(ctx)
		return notReady != nil
	})
	require.ErrorContains(t, notReady, "the store cannot take writes (disk full)")
	full := time.Since(filled)
	// The disk stays full until the workers met it too and a few submissions were refused.
	waitFor(t, 30*time.Second, "a worker's heartbeat refused and three submissions", func() bool {
		return r.workerLogged(`msg="heartbeat failed"`) && len(r.answers.all()) >= 3
	})

	require.NoError(t, os.Remove(filler))
	freed := time.Now()
	waitFor(t, time.Minute, "/readyz to answer 200", func() bool { return c.Ready(ctx) == nil })
	ready := time.Since(freed)
	r.acceptedSince(freed, 4, "after the disk was freed")
	recovered := time.Since(freed)

	p.stop()
	accepted, resent, _, abandoned, refused := p.results()
	require.Empty(t, refused, "submissions answered 4xx")
	require.Empty(t, abandoned, "submissions no server accepted within a minute")
	runs := r.quiesce(jobs, 2*time.Minute)
	requireSucceeded(t, runs, accepted)
	counts := cronSeries(t, runs, jobs)
	errs, span := r.answers.requireClear(t, `^the store is unavailable \(disk full\); nothing was done: try again later$`)
	logged503 := r.requireServersUp(t)
	lost := 0
	for _, run := range runs {
		lost += run.Disruptions
	}
	require.Zero(t, lost, "no attempt lost to a full disk shorter than the lease TTL")

	t.Logf("disk full for %s: first submission refused %s after filling, /readyz not ready %s after it; ready %s after freeing, 4 new runs accepted %s after",
		freed.Sub(filled).Round(time.Millisecond), refusedAfter.Round(time.Millisecond), full.Round(time.Millisecond),
		ready.Round(time.Millisecond), recovered.Round(time.Millisecond))
	t.Logf("clients got %d error answers over %s, every one a 503 saying the disk is full (the server logged %d); %d one-off runs accepted (%d after being sent again); cron runs %v; %d runs in all succeeded, none disrupted",
		errs, span.Round(time.Millisecond), logged503, len(accepted), resent, counts, len(runs))
}
