package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

// privatePostgres is a PostgreSQL server of one test's own: its data in a temporary
// directory, listening on a free port of 127.0.0.1. Unlike the machine's shared cluster,
// which other test packages use at the same time, a test may stop it and start it again.
type privatePostgres struct {
	bin  string // the directory of initdb and postgres
	dir  string // its data directory is dir/data, its socket in dir
	port string
	cred *syscall.Credential // the postgres user's when the test runs as root (PostgreSQL refuses root)
	log  *lockedBuffer

	cmd  *exec.Cmd
	done chan struct{}
}

// postgresBinDir returns the directory of the newest PostgreSQL server binaries installed
// (/usr/lib/postgresql/N/bin, Debian's layout), skipping the test visibly when there is none.
func postgresBinDir(t *testing.T) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	dirs = slices.DeleteFunc(dirs, func(d string) bool {
		_, err := os.Stat(filepath.Join(d, "postgres"))
		return err != nil
	})
	if len(dirs) == 0 {
		t.Skip("no PostgreSQL server binaries in /usr/lib/postgresql/*/bin: skipping the PostgreSQL fault test (.ci/run installs them)")
	}
	version := func(d string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		return n
	}
	slices.SortFunc(dirs, func(a, b string) int { return version(a) - version(b) })
	return dirs[len(dirs)-1]
}

// startPrivatePostgres makes a fresh PostgreSQL cluster (initdb, trust authentication, no
// fsync: it is thrown away) and starts it. It is stopped and removed at cleanup.
func startPrivatePostgres(t *testing.T, bin string) *privatePostgres {
	t.Helper()
	dir, err := os.MkdirTemp("", "stint-e2e-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	pg := &privatePostgres{bin: bin, dir: dir, port: portOf(t, freeAddr(t)), log: &lockedBuffer{}}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("running as root and no postgres user to run a PostgreSQL server as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		pg.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		require.NoError(t, os.Chown(dir, uid, gid))
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres",
		"--auth=trust", "--no-sync", "-E", "UTF8")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	initdb.Dir = dir
	out, err := initdb.CombinedOutput()
	require.NoError(t, err, "initdb:\n%s", out)
	t.Cleanup(func() {
		pg.stop(t)
		if t.Failed() {
			t.Logf("private PostgreSQL's log:\n%s", pg.log.String())
		}
	})
	pg.start(t)
	return pg
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	require.Positive(t, i, addr)
	return addr[i+1:]
}

// url is the stint store URL of the server's postgres database.
func (pg *privatePostgres) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", pg.port)
}

// start runs the server and waits until it accepts connections (after a crash, once its
// recovery is done).
func (pg *privatePostgres) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(filepath.Join(pg.bin, "postgres"), "-D", filepath.Join(pg.dir, "data"), "-p", pg.port,
		"-k", pg.dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: pg.cred}
	cmd.Dir = pg.dir
	cmd.Stdout, cmd.Stderr = pg.log, pg.log
	require.NoError(t, cmd.Start(), "start postgres")
	pg.cmd, pg.done = cmd, make(chan struct{})
	go func(done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(pg.done)
	waitFor(t, time.Minute, "the private PostgreSQL to accept connections", func() bool {
		select {
		case <-pg.done:
			t.Fatalf("postgres exited:\n%s", pg.log.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, pg.url())
		if err != nil {
			return false
		}
		defer conn.Close(ctx)
		return conn.Ping(ctx) == nil
	})
}

// stop stops the server as `pg_ctl stop -m immediate` does (SIGQUIT): every connection is
// dropped at once and the next start recovers from the write-ahead log, as after a crash.
// It waits until every process of the server is gone.
func (pg *privatePostgres) stop(t *testing.T) {
	t.Helper()
	if pg.cmd == nil {
		return
	}
	_ = pg.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-pg.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-pg.cmd.Process.Pid, syscall.SIGKILL)
		<-pg.done
	}
	_ = syscall.Kill(-pg.cmd.Process.Pid, syscall.SIGKILL) // a backend left behind
	pg.cmd = nil
}

// TestFaultPostgresRestart stops the PostgreSQL server under a cluster as a crash would
// (immediate shutdown: every connection dropped) and starts it again, while two servers and
// two workers run a stream of one-off jobs and two cron jobs firing every second. The
// database is the test's own (startPrivatePostgres); the machine's shared one is not touched.
//
//   - "shorter than the lease TTL": PostgreSQL is started again as soon as both servers
//     answer /readyz 503, a submission was answered 503 and a worker's heartbeat failed: an
//     outage far inside the 10 s lease TTL. No attempt that started
//     may be lost: the workers' heartbeats fail and are retried, and the leases outlive the
//     outage.
//   - "longer than the lease TTL": PostgreSQL stays down until a worker has killed an
//     attempt whose lease it could not renew, and longer than the 4 s TTL. The attempts
//     running then are lost and run again, as disruptions, not failures.
//
// A job that runs until the test releases it (after the restart) holds a lease through the
// outage: it keeps its first attempt in the short case, and is killed and run again in the
// long one.
//
// In both, every submission sent during the outage is answered 503 with Retry-After and a
// problem document saying the store is unavailable (never a 500), and sent again until a
// server accepts it; afterwards every accepted run, and every other run, succeeded, and the
// cron jobs have one run per instant with none missed.
func TestFaultPostgresRestart(t *testing.T) {
	t.Parallel()
	bin := postgresBinDir(t)
	for _, c := range []struct {
		name     string
		leaseTTL time.Duration
		long     bool
	}{
		{name: "shorter than the lease TTL", leaseTTL: 10 * time.Second},
		{name: "longer than the lease TTL", leaseTTL: 4 * time.Second, long: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pg := startPrivatePostgres(t, bin)
			r := startRig(t, rigConfig{servers: 2, workers: 2, leaseTTL: c.leaseTTL.String(), store: pg.url()})
			jobs := r.cronJobs(3)
			r.createCronJobs(jobs)
			p := r.startProducer(uint64(time.Now().UnixNano()), 250*time.Millisecond, 3)
			ctx := context.Background()
			// A job that runs until the test releases it holds a lease through the outage.
			release := filepath.Join(r.marks, "release")
			through := submitSpec(t, r.clients[0], &apitype.JobSpec{
				Shell: markScript(`; while [ ! -e "$MARKS/release" ]; do sleep 0.1; done`), Env: r.markEnv(),
				Retry: &apitype.RetryPolicy{MaxAttempts: 1, MaxDisruptions: ptr(3)}})
			waitFor(t, time.Minute, "one-off jobs running", func() bool { return r.started(through, 1) && r.runningOneOffs() >= 2 })
			running := r.runningOneOffs()

			stopped := time.Now()
			pg.stop(t)
			allReady := func(want bool) func() bool {
				return func() bool {
					for _, cl := range r.clients {
						if (cl.Ready(ctx) == nil) != want {
							return false
						}
					}
					return true
				}
			}
			waitFor(t, 30*time.Second, "both servers to answer /readyz 503", allReady(false))
			notReady := time.Since(stopped)
			// The outage lasts at least until clients and workers met it.
			waitFor(t, 30*time.Second, "a submission answered 503 and a worker's heartbeat failed", func() bool {
				return len(r.answers.all()) > 0 && r.workerLogged(`msg="heartbeat failed"`)
			})
			if c.long {
				waitFor(t, 30*time.Second, "a worker to kill the attempt whose lease it could not renew",
					func() bool { return r.workerLogged(leaseKillLog + ".* run_id=" + through) })
				if d := c.leaseTTL + time.Second - time.Since(stopped); d > 0 {
					<-time.After(d) // the outage's length is the fault itself, not a wait for a condition
				}
			}
			outage := time.Since(stopped)
			pg.start(t)
			restarted := time.Now()
			waitFor(t, time.Minute, "both servers to answer /readyz 200", allReady(true))
			ready := time.Since(restarted)
			r.acceptedSince(restarted, 4, "after PostgreSQL's restart")
			recovered := time.Since(restarted)
			require.NoError(t, os.WriteFile(release, nil, 0o644))

			p.stop()
			accepted, resent, _, abandoned, refused := p.results()
			require.Empty(t, refused, "submissions answered 4xx")
			require.Empty(t, abandoned, "submissions no server accepted within a minute")
			runs := r.quiesce(jobs, 2*time.Minute)
			requireSucceeded(t, runs, accepted)
			counts := cronSeries(t, runs, jobs)
			errs, span := r.answers.requireClear(t, `^the store is unavailable \(.+\); nothing was done: try again later$`)
			logged503 := r.requireServersUp(t)

			// Lost attempts: those that started (left their file) were killed by their
			// workers, which only a lease outliving its TTL may cause; those that never
			// started were granted by a lease poll whose answer the outage cut off.
			lostStarted, lostUnstarted := 0, 0
			for _, run := range runs {
				full, err := r.all.GetRun(ctx, run.ID)
				require.NoError(t, err)
				lost := 0
				for _, a := range full.Attempts {
					if a.Status == "succeeded" {
						continue
					}
					require.Equal(t, "lost", a.Status, "run %s attempt %d", run.ID, a.N)
					lost++
					if r.started(run.ID, a.N) {
						lostStarted++
					} else {
						lostUnstarted++
					}
				}
				require.Equal(t, lost, full.Disruptions, "run %s: each lost attempt is a disruption", run.ID)
			}
			held, err := r.all.GetRun(ctx, through)
			require.NoError(t, err)
			if c.long {
				require.Equal(t, 2, held.Attempt, "the attempt held through an outage past the TTL is lost, and run again: %+v", held.Attempts)
				require.Equal(t, "lost", held.Attempts[0].Status)
			} else {
				require.Zero(t, lostStarted, "an outage inside the lease TTL loses no attempt that started")
				require.Equal(t, 1, held.Attempt, "the attempt held through the outage kept its lease: %+v", held.Attempts)
			}
			t.Logf("lease TTL %s, %d one-off runs running at the stop; outage %s; both servers not ready %s after the stop, ready %s after the start, 4 new runs accepted %s after it",
				c.leaseTTL, running, outage.Round(time.Millisecond), notReady.Round(time.Millisecond),
				ready.Round(time.Millisecond), recovered.Round(time.Millisecond))
			t.Logf("clients got %d error answers over %s, every one a 503 saying the store is unavailable (servers logged %d); %d one-off runs accepted (%d after being sent again); cron runs %v; %d runs in all succeeded; lost attempts: %d started and killed by their workers, %d never started",
				errs, span.Round(time.Millisecond), logged503, len(accepted), resent, counts, len(runs), lostStarted, lostUnstarted)
		})
	}
}
