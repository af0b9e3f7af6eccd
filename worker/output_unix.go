//go:build unix

package worker

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// readersAfter is how long a command may run before the agent looks whether its output
// pipes hold anything; then it looks again at twice the interval, up to the log's flush
// interval, and gives the pipes a reader each once they do. Most commands of a busy
// worker have ended by then and wrote little or nothing, and their output is read once
// they exited, without a reader for each: os/exec's two goroutines a process, each pipe in
// the runtime's poller, cost a short command about 33 µs of CPU in bench exec, a sixth of
// the bench process's (BENCHMARKS.md, "Output read once the process ended"). A command
// that writes more than a pipe holds (64 KiB on Linux) before its readers start waits for
// the next look.
const readersAfter = 20 * time.Millisecond

// pipeGrace is how long the agent waits for the output pipes to close after the process
// exited: a process that left the group (setsid) may still hold them.
const pipeGrace = 2 * time.Second

// outputs are the pipes of a command's stdout and stderr. The command gets the write
// ends; the agent reads the read ends once the command exited (finish), or from a reader
// goroutine each as the output comes once a pipe of a command still running holds some
// (look).
type outputs struct {
	streams [2]*streamWriter
	w       [2]*os.File // the child's ends, closed once it started

	mu      sync.Mutex
	r       [2]int      // read ends while no reader has them; -1 after
	files   [2]*os.File // the read ends the readers hold
	reading bool        // readers were started
	timer   *time.Timer // runs look
	every   time.Duration
	most    time.Duration // of every
	readers sync.WaitGroup
}

// openOutputs makes the pipes of an attempt's stdout and stderr; flush is the log's flush
// interval, the longest the agent leaves output in a pipe of a command that runs on.
func openOutputs(stdout, stderr *streamWriter, flush time.Duration) (*outputs, error) {
	flush = max(flush, time.Millisecond)
	o := &outputs{streams: [2]*streamWriter{stdout, stderr}, r: [2]int{-1, -1},
		every: min(readersAfter, flush), most: flush}
	for i := range o.r {
		r, w, err := pipeCloexec()
		if err != nil {
			o.close()
			return nil, fmt.Errorf("output pipe: %w", err)
		}
		o.r[i], o.w[i] = r, os.NewFile(uintptr(w), "|1")
	}
	return o, nil
}

// started closes the write ends, the child's now, and has look run after readersAfter.
func (o *outputs) started() {
	for i, f := range o.w {
		_ = f.Close()
		o.w[i] = nil
	}
	o.mu.Lock()
	o.timer = time.AfterFunc(o.every, o.look)
	o.mu.Unlock()
}

// look starts the readers if a pipe holds output, else has itself run again later, unless
// the command ended (finish reads the pipes then).
func (o *outputs) look() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.r[0] < 0 {
		return // finished, or read already
	}
	fds := []unix.PollFd{{Fd: int32(o.r[0]), Events: unix.POLLIN}, {Fd: int32(o.r[1]), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
		if (fds[0].Revents|fds[1].Revents)&unix.POLLIN != 0 {
			o.startReadersLocked()
		}
		return // POLLHUP alone: the writers are gone, the command with them
	}
	o.every = min(2*o.every, o.most)
	o.timer.Reset(o.every)
}

// startReadersLocked hands the read ends to a reader goroutine each, which copies what
// comes into the attempt's log until the pipe's writers all closed it or finish gives up
// on it; o.mu held.
func (o *outputs) startReadersLocked() {
	for i, fd := range o.r {
		if fd < 0 {
			continue
		}
		o.r[i] = -1
		// Non-blocking, so that the file is in the runtime's poller and a reader waiting
		// for output holds no thread.
		if err := syscall.SetNonblock(fd, true); err != nil {
			_ = syscall.Close(fd)
			continue
		}
		f := os.NewFile(uintptr(fd), "|0")
		o.files[i], o.reading = f, true
		o.readers.Go(func() {
			_, _ = o.streams[i].ReadFrom(f)
		})
	}
}

// finish reads what is left of the output once the process exited and its group was
// killed, and closes the pipes. It reports false when a process the command left behind
// still held a pipe after pipeGrace (what it writes later is lost).
func (o *outputs) finish() bool {
	o.mu.Lock()
	if o.timer != nil {
		o.timer.Stop()
	}
	if o.r[0] >= 0 && !o.drainLocked() {
		o.startReadersLocked() // a writer is left: wait for it, within the grace
	}
	reading := o.reading
	o.mu.Unlock()
	if !reading {
		return true // drained
	}
	done := make(chan struct{})
	go func() { o.readers.Wait(); close(done) }()
	clean := true
	select {
	case <-done:
	case <-time.After(pipeGrace):
		clean = false
		for _, f := range o.files {
			if f != nil {
				_ = f.SetReadDeadline(time.Now())
			}
		}
		<-done
	}
	o.close()
	return clean
}

// drainLocked reads both pipes without waiting, while there is anything to read, and
// reports whether both ended (no writer holds them any more); then it closes them. It
// gives up after a few pipes' worth, in case a process left behind keeps writing: the
// readers take it from there.
func (o *outputs) drainLocked() bool {
	fds := []unix.PollFd{{Fd: int32(o.r[0]), Events: unix.POLLIN}, {Fd: int32(o.r[1]), Events: unix.POLLIN}}
	ended := [2]bool{}
	for range drainPolls {
		if ended[0] && ended[1] {
			break
		}
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return false // nothing to read, and a writer is left
		}
		for i := range fds {
			switch ev := fds[i].Revents; {
			case ended[i], ev == 0:
			case ev&unix.POLLIN != 0:
				// The read cannot wait: the pipe holds something, or no writer is left.
				n, err := o.streams[i].readOnce(int(fds[i].Fd))
				ended[i] = n == 0 || err != nil && !errors.Is(err, unix.EINTR)
			default: // POLLHUP: no writer and nothing left; POLLERR, POLLNVAL
				ended[i] = true
			}
			if ended[i] {
				fds[i].Fd = -1 // poll ignores it
			}
		}
	}
	if !ended[0] || !ended[1] {
		return false
	}
	for i, fd := range o.r {
		_ = syscall.Close(fd)
		o.r[i] = -1
	}
	return true
}

// drainPolls bounds drainLocked's polls: each is followed by a read of up to readBufSize
// from each pipe that has something, so that this is several times what two pipes hold.
const drainPolls = 16

// close closes the pipes' ends still open.
func (o *outputs) close() {
	for i, f := range o.w {
		if f != nil {
			_ = f.Close()
			o.w[i] = nil
		}
	}
	for i, fd := range o.r {
		if fd >= 0 {
			_ = syscall.Close(fd)
			o.r[i] = -1
		}
	}
	for i, f := range o.files {
		if f != nil {
			_ = f.Close()
			o.files[i] = nil
		}
	}
}

// readOnce reads what fd holds now, with one read, into the log: how many bytes (0 at the
// end of the pipe).
func (w *streamWriter) readOnce(fd int) (int, error) {
	bp := w.at.agent.readBuf()
	defer w.at.agent.readBufs.Put(bp)
	n, err := syscall.Read(fd, *bp)
	if n > 0 {
		w.at.writeLog(w.stream, (*bp)[:n])
	}
	return max(n, 0), err
}
