package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/stint-dev/stint/internal/app"
)

// benchCluster is `stint server` processes the bench started
// on one fresh store, for the workloads run with --servers: its processes' CPU and memory
// can be read from /proc, and several servers share one PostgreSQL database.
type benchCluster struct {
	urls      []string // each server's base URL
	pids      []int    // each server's process id
	storeURL  string   // the scratch PostgreSQL database; empty on SQLite
	storeName string
	token     string     // the servers' admin token
	seeded    *seedStats // the history written before the servers started (Config.SeedFinished)
	stop      func()
}

// startCluster starts cfg.Servers server processes on a fresh store (a scratch PostgreSQL
// database, or SQLite in a temp directory for a single server). Their workers are the
// bench's (see Run). With cfg.SeedFinished the history is written before the servers start
// (the bench migrates the scratch database itself), so that under cfg.Retention the
// leader's first pass of retention finds it: a `stint server` looks again only a minute
// after a pass that found nothing, and has no flag to shorten that. cfg.Retention is passed
// to every server as --retain-runs, no run kept per job, with --retain-pause.
func startCluster(ctx context.Context, cfg Config) (*benchCluster, error) {
	n := cfg.Servers
	bin := cfg.WorkerBinary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the stint binary: %w", err)
		}
		bin = exe
	}
	dataDir, err := os.MkdirTemp("", "stint-bench-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	cl := &benchCluster{token: token}
	cleanups := []func(){func() { os.RemoveAll(dataDir) }}
	cl.stop = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	engine := "sqlite (synchronous=FULL, WAL)"
	switch {
	case isPostgres(cfg.Store):
		u, drop, err := scratchDatabase(ctx, cfg.Store)
		if err != nil {
			cl.stop()
			return nil, err
		}
		cleanups = append(cleanups, drop)
		cl.storeURL, engine = u, "postgres"
		if cfg.SeedFinished > 0 {
			if cl.seeded, err = seedBeforeStart(ctx, u, cfg.SeedFinished); err != nil {
				cl.stop()
				return nil, err
			}
		}
	case cfg.Store == "sqlite" && n == 1:
	default:
		cl.stop()
		return nil, errors.New("--servers: needs --store sqlite (one server) or a postgres:// URL")
	}
	for i := 1; i <= n; i++ {
		id := "s" + strconv.Itoa(i)
		// No cap on submissions (--submit-rate 0), as the in-process server has none: every
		// request of the bench carries one token, and the default, 1000 a second per client,
		// would cap steady's producers and count as submit errors what is over it.
		extra := append([]string{"--submit-rate", "0"}, retentionArgs(cfg.Retention, cfg.RetentionPause)...)
		if cfg.ServerProfile != "" {
			extra = append(extra, "--cpuprofile", cfg.ServerProfile+"."+id)
		}
		p, err := startServerProc(ctx, bin, id, cl.storeURL, dataDir, token, extra...)
		if err != nil {
			cl.stop()
			return nil, err
		}
		cleanups = append(cleanups, p.terminate)
		cl.urls = append(cl.urls, p.url)
		cl.pids = append(cl.pids, p.cmd.Process.Pid)
	}
	cl.storeName = fmt.Sprintf("%s, %d server processes", engine, n)
	return cl, nil
}

// seedBeforeStart migrates the empty scratch database at url, as a server would on its
// start, and writes the history of runs finished runs into it.
func seedBeforeStart(ctx context.Context, url string, runs int) (*seedStats, error) {
	st, _, err := app.OpenStore(ctx, url, "", slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, fmt.Errorf("migrate the scratch database: %w", err)
	}
	if err := st.Close(); err != nil {
		return nil, fmt.Errorf("migrate the scratch database: %w", err)
	}
	return seedStore(ctx, url, runs, time.Now())
}

// retentionArgs are the `stint server` flags of the bench's retention (see benchRetention):
// none when d is 0.
func retentionArgs(d, pause time.Duration) []string {
	if d <= 0 {
		return nil
	}
	args := []string{"--retain-runs", d.String(), "--retain-runs-keep", "0"}
	if pause > 0 {
		args = append(args, "--retain-pause", pause.String())
	}
	return args
}

// terminate stops the server with SIGTERM (it shuts down gracefully) and waits, or kills it
// after 30 s.
func (p *serverProc) terminate() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}

// sampleAll reads the processes pids; missing is the first error.
func sampleAll(pids []int) ([]procSample, error) {
	out := make([]procSample, len(pids))
	for i, pid := range pids {
		s, err := readProc(pid)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// cpuUsed is the CPU time the processes used between two samples of each.
func cpuUsed(before, after []procSample) time.Duration {
	var d time.Duration
	for i := range before {
		d += after[i].cpu - before[i].cpu
	}
	return d
}
