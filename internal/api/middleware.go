package api

import (
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/stint-dev/stint/internal/id"
)

// RequestIDHeader carries the request id: taken from the request when it has a sane one,
// made up otherwise, and always echoed in the answer.
const RequestIDHeader = "X-Request-Id"

type ctxKey int

const requestIDKey ctxKey = iota

// requestID returns the id middleware gave the request.
func requestID(ctx context.Context) string {
	s, _ := ctx.Value(requestIDKey).(string)
	return s
}

// middleware wraps the mux: request id, panic recovery, request logging, and problem
// documents for the mux's own 404 and 405 answers.
func (a *API) middleware(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rid := r.Header.Get(RequestIDHeader)
		if !saneRequestID(rid) {
			rid = id.Token()
		}
		w.Header().Set(RequestIDHeader, rid)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey, rid))

		rec := &recorder{ResponseWriter: w}
		start := a.clock.Now()
		_, pattern := mux.Handler(r)
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				a.log.ErrorContext(r.Context(), "panic serving request", "method", r.Method, "path", r.URL.Path,
					"request_id", rid, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				if !rec.wroteHeader {
					writeProblem(rec, newProblem(http.StatusInternalServerError, "the server could not complete the request; see its log", nil))
				}
			}
			status := rec.status
			if status == 0 {
				status = http.StatusOK // nothing written: net/http answers 200
			}
			took := a.clock.Now().Sub(start)
			a.log.DebugContext(r.Context(), "http request", "method", r.Method, "path", r.URL.Path,
				"route", pattern, "status", status, "bytes", rec.bytes,
				"duration", took, "request_id", rid)
			if a.cfg.Requests != nil {
				_, route, _ := strings.Cut(pattern, " ") // "GET /v1/runs/{id}": the method is a label of its own
				a.cfg.Requests(route, r.Method, status, took)
			}
		}()

		if pattern == "" {
			// No route: the mux answers 404, or 405 with an Allow header; make that a
			// problem document like every other error.
			mux.ServeHTTP(&muxErrorWriter{recorder: rec}, r)
			return
		}
		mux.ServeHTTP(rec, r)
	})
}

func saneRequestID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// recorder notes the status and size of an answer for the request log. It passes Flush
// through (followed logs need it) via Unwrap, which http.ResponseController uses.
type recorder struct {
	http.ResponseWriter
	status      int
	bytes       int64
	wroteHeader bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Flush lets handlers stream through the recorder.
func (r *recorder) Flush() {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// muxErrorWriter replaces the plain-text error the mux writes for an unknown path or method
// with a problem document, keeping its status and headers (Allow).
type muxErrorWriter struct {
	*recorder
	replaced bool
}

func (m *muxErrorWriter) WriteHeader(code int) {
	if code < 400 {
		m.recorder.WriteHeader(code)
		return
	}
	m.replaced = true
	m.Header().Del("Content-Length")
	detail := "no such route"
	if code == http.StatusMethodNotAllowed {
		detail = "method not allowed; see the Allow header"
	}
	writeProblem(m.recorder, newProblem(code, detail, nil))
}

func (m *muxErrorWriter) Write(b []byte) (int, error) {
	if m.replaced {
		return len(b), nil
	}
	return m.recorder.Write(b)
}
