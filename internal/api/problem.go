package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
)

// statusClientClosed is the status logged when the client went away before the answer
// (nginx's 499); the client never sees it.
const statusClientClosed = 499

// httpError is an error the API words itself: a status, a detail, and the bad fields.
type httpError struct {
	status int
	detail string
	fields []apitype.FieldError
	// retryAfter, when set, is sent as Retry-After.
	retryAfter time.Duration
}

func (e *httpError) Error() string {
	s := http.StatusText(e.status)
	if e.detail != "" {
		s += ": " + e.detail
	}
	for _, f := range e.fields {
		s += "; " + f.Field + ": " + f.Message
	}
	return s
}

func badRequest(detail string) error {
	return &httpError{status: http.StatusBadRequest, detail: detail}
}

// invalidFields is a 400 listing bad fields.
func invalidFields(fields []apitype.FieldError) error {
	detail := "the request has an invalid field"
	if len(fields) > 1 {
		detail = "the request has invalid fields"
	}
	return &httpError{status: http.StatusBadRequest, detail: detail, fields: fields}
}

// invalidField is a 400 naming one bad field (a query parameter or a body field).
func invalidField(field, message string) error {
	return invalidFields([]apitype.FieldError{{Field: field, Message: message}})
}

// conflict is a 409 naming the field that clashes.
func conflict(field, message string) error {
	return &httpError{status: http.StatusConflict, detail: message, fields: []apitype.FieldError{{Field: field, Message: message}}}
}

// problemFor maps an error to the problem document that answers it. It is the one place
// where errors become HTTP statuses.
func problemFor(err error) *apitype.Problem {
	var pe *problemError
	var he *httpError
	var tooBig *http.MaxBytesError
	var ue *model.UnavailableError
	switch {
	case errors.As(err, &pe): // worked out already, by the worker protocol
		return pe.problem
	case errors.As(err, &he):
		return newProblem(he.status, he.detail, he.fields)
	case errors.As(err, &tooBig):
		return newProblem(http.StatusRequestEntityTooLarge, "request body is too large", nil)
	case errors.As(err, &ue):
		return newProblem(http.StatusServiceUnavailable, "the store is unavailable ("+ue.What+"); nothing was done: try again later", nil)
	case errors.Is(err, model.ErrUnavailable):
		return newProblem(http.StatusServiceUnavailable, "the store is unavailable; nothing was done: try again later", nil)
	case errors.Is(err, model.ErrNotFound):
		return newProblem(http.StatusNotFound, err.Error(), nil)
	case errors.Is(err, model.ErrConflict), errors.Is(err, model.ErrInvalidState), errors.Is(err, model.ErrLeaseLost):
		return newProblem(http.StatusConflict, err.Error(), nil)
	case errors.Is(err, context.Canceled):
		return newProblem(statusClientClosed, "the request was cancelled", nil)
	case errors.Is(err, context.DeadlineExceeded):
		return newProblem(http.StatusServiceUnavailable, "the server did not answer in time; try again", nil)
	}
	return newProblem(http.StatusInternalServerError, "the server could not complete the request; see its log", nil)
}

// retryAfter is how long a client should wait before it tries again after err, answered
// with p: what the error says, else unavailableRetryAfter for a 503; 0 for none.
func retryAfter(err error, p *apitype.Problem) time.Duration {
	var he *httpError
	switch {
	case errors.As(err, &he) && he.retryAfter > 0:
		return he.retryAfter
	case p.Status == http.StatusServiceUnavailable:
		return unavailableRetryAfter
	}
	return 0
}

// unavailableRetryAfter is the Retry-After of a 503: long enough for a database failover or
// restart not to be hammered, short enough that a blip costs little.
const unavailableRetryAfter = 2 * time.Second

func newProblem(status int, detail string, fields []apitype.FieldError) *apitype.Problem {
	title := http.StatusText(status)
	if status == statusClientClosed {
		title = "Client Closed Request"
	}
	return &apitype.Problem{Type: "about:blank", Title: title, Status: status, Detail: detail, Errors: fields}
}

// writeError answers a request with the problem document for err, logging the errors that
// are the server's fault.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	p := problemFor(err)
	if d := retryAfter(err, p); d > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(d/time.Second)))
	}
	switch {
	case p.Status >= 500:
		a.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path,
			"request_id", requestID(r.Context()), "status", p.Status, "err", err)
	case p.Status == statusClientClosed:
		a.log.DebugContext(r.Context(), "client went away", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeProblem(w, p)
}

func writeProblem(w http.ResponseWriter, p *apitype.Problem) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
