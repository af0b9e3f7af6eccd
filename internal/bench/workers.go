package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stint-dev/stint/client"
)

// startWorkers starts cfg.Workers `stint worker` processes, worker i given servers(i) (a
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
	c, err := client.New(servers(0), client.WithToken(token))
	if err != nil {
		stop()
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ws, err := c.ListWorkers(ctx)
		if err != nil {
			stop()
			return nil, fmt.Errorf("workers: %w", err)
		}
		n := 0
		for _, w := range ws.Items {
			if w.State == "active" && strings.HasPrefix(w.ID, prefix) {
				n++
			}
		}
		if n == cfg.Workers {
			return stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return nil, errors.New("workers: not all registered within 30s")
		}
		select {
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond): // a poll of another process: no signal to wait on
		}
	}
}
