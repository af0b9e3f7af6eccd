package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/worker"
)

// startWorkers starts cfg.Workers `stint worker` processes (the failover workload's workers), worker i given servers(i) (a
// server's URL, or a comma-separated list of a cluster's), the slots split among them, and
// waits until all have registered. token (empty: none, for a server without
// authentication) goes to them in STINT_TOKEN, never on their command line. The returned
// function stops them (SIGTERM: they drain; they have no work left by then).
func startWorkers(ctx context.Context, cfg Config, servers func(i int) string, token string) (func(), error) {
	bin := cfg.WorkerBinary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("workers: find the stint binary: %w", err)
		}
		bin = exe
	}
	slots := max(cfg.Slots/cfg.Workers, 1)
	var procs []*exec.Cmd
	stop := func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			_ = p.Wait()
		}
	}
	prefix := fmt.Sprintf("bench-%d-", os.Getpid())
	for i := range cfg.Workers {
		cmd := exec.Command(bin, "worker", "--server", servers(i), "--slots", strconv.Itoa(slots),
			"--id", prefix+strconv.Itoa(i), "--log-level", "warn")
		cmd.Stderr = os.Stderr
		if token != "" {
			cmd.Env = append(os.Environ(), "STINT_TOKEN="+token)
		}
		if err := cmd.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("start worker %d: %w", i, err)
		}
		procs = append(procs, cmd)
	}
	if err := awaitRegistered(ctx, servers(0), token, prefix, cfg.Workers); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// startBenchWorkers runs n workers in the bench's process, each an agent of the worker package
// that polls the servers servers(i) names over HTTP, as a user's own worker does, the slots
// split among them. Each runs handler kind with rec's handler, which notes when each run
// started, and commands when commands is true. It waits until all have registered; the
// returned function stops them.
func startBenchWorkers(ctx context.Context, cfg Config, n int, servers func(i int) string, token, kind string,
	commands bool, rec *recorder) (func(), error) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	stop := func() {
		cancel()
		wg.Wait()
	}
	slots := max(cfg.Slots/n, 1)
	prefix := fmt.Sprintf("bench-%d-", os.Getpid())
	for i := range n {
		c, err := client.New(servers(i), client.WithToken(token))
		if err != nil {
			stop()
			return nil, fmt.Errorf("worker %d: %w", i, err)
		}
		a, err := worker.New(worker.Config{
			Server:   c,
			ID:       prefix + strconv.Itoa(i),
			Capacity: apitype.Capacity{Slots: slots},
			Handlers: map[string]worker.Handler{kind: rec.handler},
			Commands: commands,
			Logger:   cfg.Logger.With("worker", prefix+strconv.Itoa(i)),
		})
		if err != nil {
			stop()
			return nil, fmt.Errorf("worker %d: %w", i, err)
		}
		wg.Go(func() {
			if err := a.Run(wctx); err != nil && wctx.Err() == nil {
				cfg.Logger.Error("bench worker stopped", "worker", a.ID(), "err", err)
			}
		})
	}
	if err := awaitRegistered(ctx, servers(0), token, prefix, n); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// awaitRegistered waits until n workers whose ids start with prefix are active on the
// server at url.
func awaitRegistered(ctx context.Context, url, token, prefix string, n int) error {
	c, err := client.New(url, client.WithToken(token))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ws, err := c.ListWorkers(ctx)
		if err != nil {
			return fmt.Errorf("workers: %w", err)
		}
		active := 0
		for _, w := range ws.Items {
			if w.State == "active" && strings.HasPrefix(w.ID, prefix) {
				active++
			}
		}
		if active == n {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("workers: not all registered within 30s")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // another process's (or goroutine's) registration: no signal to wait on
		}
	}
}
