package worker

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// guardStopWait bounds how long the agent waits for its guard to exit once told to.
const guardStopWait = 10 * time.Second

// What a guard tracks.
const (
	guardGroup  = "pg"  // a process group id
	guardCgroup = "cg"  // a cgroup directory
	guardDir    = "dir" // a directory to remove
)

// guard is the agent's side of its guard process (Config.Guard): a process of its own that
// outlives the agent and, once the agent is gone, kills what the agent's attempts left
// running and removes their working directories. The agent tells it, over the guard's stdin,
// what to track and what to forget; the kernel closes that pipe when the agent's process
// ends, however it ends, SIGKILL included, and the guard acts on the end of its input.
type guard struct {
	log  *slog.Logger
	cmd  *exec.Cmd
	done chan struct{} // closed when the guard process has exited

	mu sync.Mutex
	w  io.WriteCloser // nil once the guard is gone
}

// startGuard starts argv as the agent's guard (see RunGuard).
func startGuard(argv []string, log *slog.Logger) (*guard, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("guard: empty command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("guard: %w", err)
	}
	cmd.Stderr = os.Stderr
	// Its own process group: signals meant for the worker's group (Ctrl-C) leave it alone.
	cmd.SysProcAttr = ownGroup()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("guard: %w", err)
	}
	g := &guard{log: log, cmd: cmd, w: w, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(g.done)
	}()
	return g, nil
}

func (g *guard) track(kind, v string)   { g.send('+', kind, v) }
func (g *guard) untrack(kind, v string) { g.send('-', kind, v) }

func (g *guard) send(op byte, kind, v string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w == nil {
		return
	}
	line := string(op) + kind + " " + strconv.Quote(v) + "\n"
	if _, err := io.WriteString(g.w, line); err != nil {
		g.log.Error("worker guard is gone: if the worker dies, its attempts' processes will outlive it", "err", err)
		_ = g.w.Close()
		g.w = nil
	}
}

// stop ends the guard: it has nothing left to track, and exits at the end of its input.
func (g *guard) stop() {
	if g == nil {
		return
	}
	g.mu.Lock()
	if g.w != nil {
		_ = g.w.Close()
		g.w = nil
	}
	g.mu.Unlock()
	select {
	case <-g.done:
	case <-time.After(guardStopWait):
		g.log.Warn("worker guard did not exit", "pid", g.cmd.Process.Pid)
	}
}

// RunGuard is the main loop of a worker's guard process (Config.Guard): it reads what to
// track from r, the agent's end of a pipe, until the input ends, which happens when the
// agent's process ends, whatever ends it. Then it kills every process group and every cgroup
// it still tracks with SIGKILL and removes every directory it still tracks, and returns.
//
// A program that runs the agent with a guard calls RunGuard from the command Config.Guard
// names, as `stint worker-guard` does. The guard should ignore SIGINT, SIGTERM and SIGHUP, so
// that only the end of its input (or SIGKILL) ends it.
func RunGuard(r io.Reader) error {
	tracked := map[string]map[string]bool{guardGroup: {}, guardCgroup: {}, guardDir: {}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		kind, quoted, ok := strings.Cut(line[1:], " ")
		set := tracked[kind]
		v, err := strconv.Unquote(quoted)
		if !ok || set == nil || err != nil {
			fmt.Fprintf(os.Stderr, "stint worker guard: bad line %q\n", line)
			continue
		}
		switch line[0] {
		case '+':
			set[v] = true
		case '-':
			delete(set, v)
		}
	}
	for pg := range tracked[guardGroup] {
		if id, err := strconv.Atoi(pg); err == nil && id > 1 {
			killGroup(id)
		}
	}
	for cg := range tracked[guardCgroup] {
		killCgroup(cg)
		removeCgroup(cg, cgroupDrainGuard)
	}
	for d := range tracked[guardDir] {
		if err := removeTree(d); err != nil {
			fmt.Fprintf(os.Stderr, "stint worker guard: %v\n", err)
		}
	}
	return sc.Err()
}

// cgroupDrainGuard bounds how long a guard waits for a killed cgroup to empty.
const cgroupDrainGuard = 2 * time.Second
