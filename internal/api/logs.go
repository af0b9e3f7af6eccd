package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// logPage is how many chunks one store read returns.
const logPage = 1000

// runLogs serves GET /v1/runs/{id}/logs?attempt=&follow=&stream=&tail=&timestamps=: an
// attempt's output as text, its chunks in order. The attempt defaults to the run's latest.
// With follow=true the answer streams, flushed after each read, until the attempt has ended
// and all its output is written, or the client goes away. tail=N starts with the last N
// lines of what is stored (logTail), timestamps=true leads each line with the time its chunk
// came (logWriter).
func (a *API) runLogs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var errs []apitype.FieldError
	attempt := 0
	if s := q.Get("attempt"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			errs = append(errs, apitype.FieldError{Field: "attempt", Message: "must be a positive integer"})
		}
		attempt = n
	}
	follow := false
	if s := q.Get("follow"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			errs = append(errs, apitype.FieldError{Field: "follow", Message: "must be true or false"})
		}
		follow = b
	}
	stamps := false
	if s := q.Get("timestamps"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			errs = append(errs, apitype.FieldError{Field: "timestamps", Message: "must be true or false"})
		}
		stamps = b
	}
	var tail *logTail
	if s := q.Get("tail"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			errs = append(errs, apitype.FieldError{Field: "tail", Message: "must be a whole number of lines, 0 or more"})
		}
		tail = &logTail{n: n}
	}
	stream := model.LogStream(q.Get("stream"))
	if stream != "" && stream != model.Stdout && stream != model.Stderr {
		errs = append(errs, apitype.FieldError{Field: "stream", Message: "must be stdout or stderr"})
	}
	if len(errs) > 0 {
		return invalidFields(errs)
	}
	ctx := r.Context()
	runID := r.PathValue("id")
	run, err := a.findRun(ctx, runID)
	if err != nil {
		return err
	}
	if attempt == 0 {
		attempt = max(run.Attempt, 1)
	}

	started := false
	start := func() {
		if started {
			return
		}
		started = true
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if follow {
			w.Header().Set("Cache-Control", "no-cache")
			w.Header().Set("X-Accel-Buffering", "no") // tell proxies not to buffer the stream
		}
		w.WriteHeader(http.StatusOK)
	}
	// failed handles an error in the middle of the answer: before the header it becomes a
	// problem document, after it the stream just ends.
	failed := func(err error) error {
		if !started {
			return err
		}
		if ctx.Err() == nil {
			a.log.ErrorContext(ctx, "stream run logs", "run", runID, "attempt", attempt, "err", err)
		}
		return nil
	}
	rc := http.NewResponseController(w)
	if follow {
		start()
		_ = rc.Flush()
	}

	lw := &logWriter{w: w, stamps: stamps}
	var after int64
	for {
		ended := true
		var changed <-chan struct{}
		if follow {
			// Take the wake-up channel before reading, so a change between the reads and
			// the wait is not missed.
			changed = a.eng.Changes()
			cur, err := a.store.GetRun(ctx, &store.GetRunParams{ID: runID})
			if errors.Is(err, model.ErrNotFound) {
				return nil // deleted meanwhile: nothing more will come
			}
			if err != nil {
				return failed(fmt.Errorf("get run %s: %w", runID, err))
			}
			// Whether the attempt had ended is read before the chunks: everything it wrote
			// before ending is then in the reads below.
			ended = attemptEnded(cur, attempt)
		}
		for {
			chunks, err := a.store.ReadLogs(ctx, &store.ReadLogsParams{RunID: runID, Attempt: attempt, AfterSeq: after, Limit: logPage})
			if err != nil {
				return failed(fmt.Errorf("read logs of %s attempt %d: %w", runID, attempt, err))
			}
			a.writeWindow(w)
			start()
			for i := range chunks {
				c := &chunks[i]
				after = c.Seq
				switch {
				case stream != "" && c.Stream != stream:
				case tail != nil:
					tail.add(*c)
				default:
					if err := lw.write(c); err != nil {
						return nil // the client went away
					}
				}
			}
			if len(chunks) < logPage {
				break
			}
		}
		if tail != nil { // what was stored is read: its last lines, then what comes
			for _, c := range tail.lines() {
				if err := lw.write(&c); err != nil {
					return nil
				}
			}
			tail = nil
		}
		if !follow || ended {
			return nil
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// attemptEnded reports whether attempt n of run has ended (or never will start).
func attemptEnded(run *model.Run, n int) bool {
	switch {
	case run.Status.Final(), run.Attempt > n:
		return true
	case run.Attempt == n:
		return run.Status != model.RunRunning
	}
	return false // attempt n has not started yet
}
