package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/secret"
	"github.com/stint-dev/stint/internal/store"
)

// Protocol is the worker protocol over the engine, with worker.Server's method set: the one
// translation between the protocol's wire types and the engine's. Each method checks the
// request's fields, calls the engine and turns its answer into the wire form. The HTTP
// worker routes decode a body into a Protocol call and encode what it returns; the local
// worker of `stint dev` and `stint server` calls a Protocol in-process, so both kinds of
// worker see the same answers.
//
// An error is the *apitype.Problem a client of the HTTP route reads (wrapping the cause,
// which the server logs), so the agent tells permanent from transient errors and an
// unknown worker (404) the same way in both cases; the end of the caller's context is
// returned as it is.
//
// Identity: a call from an HTTP route carries the caller's principal in its context (the
// route's middleware put it there), and may act only as the worker ids it may (a worker
// token bound to w1 registers, leases, heartbeats, writes logs and completes as w1 only; 403
// otherwise). A call without a principal comes from inside the server (the local worker of
// `stint dev`) and is trusted.
type Protocol struct {
	eng  *engine.Engine
	keys *secret.Keys // open the secret env of the runs it leases
}

// NewProtocol returns the worker protocol over e; keys open the secret env of leased runs.
func NewProtocol(e *engine.Engine, keys *secret.Keys) *Protocol { return &Protocol{eng: e, keys: keys} }

// Register records a worker and starts a new session for it (POST /v1/workers/register).
func (p *Protocol) Register(ctx context.Context, req *apitype.RegisterRequest) (*apitype.RegisterResponse, error) {
	params, err := registerParams(req)
	if err != nil {
		return nil, wireError(err)
	}
	if err := actAs(ctx, req.ID); err != nil {
		return nil, wireError(err)
	}
	// Only a caller that proves it is the worker replaces a live session of its id.
	params.Takeover = true
	if pr := principalOf(ctx); pr != nil {
		params.Takeover = pr.Proves(req.ID)
	}
	reg, err := p.eng.Register(ctx, params)
	if errors.Is(err, model.ErrConflict) {
		return nil, wireError(&httpError{status: http.StatusConflict, detail: fmt.Sprintf(
			"worker id %q is in use by a live session, which heartbeated within the lease TTL: a second process with this id is refused. "+
				"Stop the other process and wait for its session to end (one lease TTL without heartbeats), or register with a token bound to this worker id", req.ID),
			fields: []apitype.FieldError{{Field: "id", Message: "in use by a live session"}}})
	}
	if err != nil {
		return nil, wireError(err)
	}
	return &apitype.RegisterResponse{
		Worker:            workerToAPI(reg.Worker),
		Session:           reg.Session,
		HeartbeatInterval: apitype.Duration(reg.HeartbeatInterval),
		LeaseTTL:          apitype.Duration(reg.LeaseTTL),
		Resumed:           reg.Resumed,
		Lost:              reg.Lost,
		Ended:             reg.Ended,
		Cancel:            reg.Cancel,
	}, nil
}

// registerParams checks a registration: a 400 naming every bad field, or the engine's
// params.
func registerParams(req *apitype.RegisterRequest) (*engine.RegisterParams, error) {
	fe := &fieldErrors{}
	if !workerIDPattern.MatchString(req.ID) {
		fe.add("id", "must be 1 to 128 letters, digits, '.', '_', ':', '@' or '-', starting with a letter or digit")
	}
	if c := req.Capacity.CPU; c < 0 || c > maxWorkerCPU {
		fe.add("capacity.cpu", "must be between 0 and %d", maxWorkerCPU)
	}
	if m := req.Capacity.MemoryMB; m < 0 || m > maxWorkerMemoryMB {
		fe.add("capacity.memory_mb", "must be between 0 and %d (MB)", maxWorkerMemoryMB)
	}
	if g := req.Capacity.GPU; g < 0 || g > maxWorkerGPU {
		fe.add("capacity.gpu", "must be between 0 and %d", maxWorkerGPU)
	}
	if s := req.Capacity.Slots; s < 0 || s > maxWorkerSlots {
		fe.add("capacity.slots", "must be between 0 and %d", maxWorkerSlots)
	}
	for _, k := range sortedKeys(req.Labels) {
		if k == "" {
			fe.add("labels", "keys must not be empty")
		}
	}
	checkLabels(req.Labels, "labels", fe)
	if len(req.Handlers) > maxHandlers {
		fe.add("handlers", "must list at most %d handler kinds, got %d", maxHandlers, len(req.Handlers))
	}
	for i, h := range req.Handlers {
		if h == "" || len(h) > maxHandlerBytes {
			fe.add(fmt.Sprintf("handlers[%d]", i), "must be 1 to %d bytes", maxHandlerBytes)
		}
	}
	if len(req.Held) > apitype.MaxHeldLeases {
		fe.add("held", "must list at most %d leases, got %d", apitype.MaxHeldLeases, len(req.Held))
	}
	held := leaseRefs(fe, "held", req.Held)
	if len(fe.errs) > 0 {
		return nil, invalidFields(fe.errs)
	}
	return &engine.RegisterParams{
		ID:       req.ID,
		Labels:   req.Labels,
		Capacity: model.Capacity(req.Capacity),
		Handlers: req.Handlers,
		Commands: req.Commands,
		Resume:   req.Session,
		Held:     held,
	}, nil
}

// Lease is a worker's long poll for up to req.Max runs (POST /v1/workers/{id}/lease): it
// answers when runs are leased, something is pushed to the worker, the wait ends, or ctx
// ends.
func (p *Protocol) Lease(ctx context.Context, workerID string, req *apitype.LeaseRequest) (*apitype.LeaseResponse, error) {
	params, err := leaseParams(req)
	if err != nil {
		return nil, wireError(err)
	}
	if err := actAs(ctx, workerID); err != nil {
		return nil, wireError(err)
	}
	res, err := p.eng.Lease(ctx, workerID, params)
	if err != nil {
		return nil, wireError(workerNotFound(workerID, err))
	}
	out := &apitype.LeaseResponse{Leases: make([]apitype.Lease, 0, len(res.Leases)), Cancel: res.Cancel, Lost: res.Lost, Drain: res.Drain}
	var unopened []store.Completion
	for _, l := range res.Leases {
		wl := leaseToAPI(l)
		if wl.SecretEnv, err = openSecretEnv(p.keys, l.Spec.SecretEnv); err != nil {
			unopened = append(unopened, store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptFailed,
				Error: "the server cannot decrypt the job's secret env: " + err.Error()})
			continue
		}
		out.Leases = append(out.Leases, wl)
	}
	if len(unopened) > 0 {
		// An attempt that cannot have its secrets must not run without them: it ends failed
		// here, and the worker never sees it.
		if _, err := p.eng.Complete(ctx, unopened); err != nil {
			return nil, wireError(fmt.Errorf("fail attempts without their secrets: %w", err))
		}
	}
	return out, nil
}

// leaseParams checks a lease request.
func leaseParams(req *apitype.LeaseRequest) (*engine.LeaseParams, error) {
	fe := &fieldErrors{}
	if req.Max < 0 || req.Max > apitype.MaxLeaseBatch {
		fe.add("max", "must be between 0 and %d", apitype.MaxLeaseBatch)
	}
	if req.Wait != nil && req.Wait.Std() < 0 {
		fe.add("wait", "must not be negative")
	}
	if len(fe.errs) > 0 {
		return nil, invalidFields(fe.errs)
	}
	params := &engine.LeaseParams{Session: req.Session, Max: req.Max, Wait: engine.LongestLeaseWait}
	if req.Wait != nil {
		params.Wait = req.Wait.Std()
	}
	return params, nil
}

// Heartbeat renews the leases a worker holds and tells it which to stop
// (POST /v1/workers/{id}/heartbeat).
func (p *Protocol) Heartbeat(ctx context.Context, workerID string, req *apitype.HeartbeatRequest) (*apitype.HeartbeatResponse, error) {
	params, err := heartbeatParams(req)
	if err != nil {
		return nil, wireError(err)
	}
	if err := actAs(ctx, workerID); err != nil {
		return nil, wireError(err)
	}
	res, err := p.eng.Heartbeat(ctx, workerID, params)
	if err != nil {
		return nil, wireError(workerNotFound(workerID, err))
	}
	return &apitype.HeartbeatResponse{Lost: res.Lost, Ended: res.Ended, Cancel: res.Cancel, Drain: res.Drain}, nil
}

// Leave ends a worker's session at its clean exit (POST /v1/workers/{id}/leave): it is
// listed as drained from then on.
func (p *Protocol) Leave(ctx context.Context, workerID string, req *apitype.LeaveRequest) error {
	if req.Session == "" {
		fe := &fieldErrors{}
		fe.add("session", "is required: the session that leaves")
		return wireError(invalidFields(fe.errs))
	}
	if err := actAs(ctx, workerID); err != nil {
		return wireError(err)
	}
	if err := p.eng.Leave(ctx, workerID, req.Session); err != nil {
		return wireError(workerNotFound(workerID, err))
	}
	return nil
}

// heartbeatParams checks a heartbeat.
func heartbeatParams(req *apitype.HeartbeatRequest) (*engine.HeartbeatParams, error) {
	fe := &fieldErrors{}
	if len(req.Held) > apitype.MaxHeldLeases {
		fe.add("held", "must list at most %d leases, got %d", apitype.MaxHeldLeases, len(req.Held))
	}
	held := leaseRefs(fe, "held", req.Held)
	if len(fe.errs) > 0 {
		return nil, invalidFields(fe.errs)
	}
	return &engine.HeartbeatParams{Session: req.Session, Held: held}, nil
}

// leaseRefs checks and converts the leases a worker says it holds (field names them).
func leaseRefs(fe *fieldErrors, field string, refs []apitype.LeaseRef) []store.LeaseRef {
	held := make([]store.LeaseRef, len(refs))
	for i, h := range refs {
		if h.RunID == "" {
			fe.add(fmt.Sprintf("%s[%d].run_id", field, i), "is required")
		}
		if h.Token == "" {
			fe.add(fmt.Sprintf("%s[%d].token", field, i), "is required: the lease's fencing token")
		}
		held[i] = store.LeaseRef{RunID: h.RunID, Token: h.Token}
	}
	return held
}

// AppendLogs stores chunks of attempts' output (POST /v1/attempts/logs). Each chunk carries
// its attempt's lease token: only the worker that holds the lease writes the attempt's log.
// Chunks that do not hold theirs (the attempt ended or was taken back, the token is wrong)
// are refused with a 409 naming each, and the others are stored: a worker drops the refused
// ones, which it could never deliver. Chunks that take an attempt past the server's cap
// (engine.Config.MaxLogBytes) are dropped without an error, so that nobody resends them.
func (p *Protocol) AppendLogs(ctx context.Context, req *apitype.LogChunksRequest) error {
	bound := ""
	if pr := principalOf(ctx); pr != nil && pr.Role == model.RoleWorker {
		bound = pr.WorkerID
	}
	chunks, err := logChunks(req, bound)
	if err != nil {
		return wireError(err)
	}
	if len(chunks) == 0 {
		return nil
	}
	refused, err := p.eng.AppendLogs(ctx, chunks)
	if err != nil {
		return wireError(err)
	}
	var bad []apitype.FieldError
	for i, e := range refused {
		switch {
		case e == nil:
		case errors.Is(e, model.ErrNotFound):
			bad = append(bad, apitype.FieldError{Field: fmt.Sprintf("chunks[%d].run_id", i), Message: "no run with this id"})
		default:
			bad = append(bad, apitype.FieldError{Field: fmt.Sprintf("chunks[%d].token", i),
				Message: fmt.Sprintf("does not hold the lease of run %s attempt %d (it ended, was taken back, or the token is wrong)", chunks[i].RunID, chunks[i].Attempt)})
		}
	}
	if len(bad) > 0 {
		return wireError(&httpError{status: http.StatusConflict, fields: bad,
			detail: fmt.Sprintf("%d of %d chunk(s) refused: a chunk is stored only with its attempt's lease; the others were stored", len(bad), len(chunks))})
	}
	return nil
}

// logChunks checks a worker's chunks of output; bound is the worker id the caller's token
// is bound to ("" for none), which each chunk carries for the store's lease check.
func logChunks(req *apitype.LogChunksRequest, bound string) ([]model.LogChunk, error) {
	fe := &fieldErrors{}
	chunks := make([]model.LogChunk, len(req.Chunks))
	for i, c := range req.Chunks {
		if c.RunID == "" {
			fe.add(fmt.Sprintf("chunks[%d].run_id", i), "is required")
		}
		if c.Attempt < 1 {
			fe.add(fmt.Sprintf("chunks[%d].attempt", i), "must be at least 1")
		}
		if c.Seq < 1 {
			fe.add(fmt.Sprintf("chunks[%d].seq", i), "must be at least 1")
		}
		if c.Token == "" {
			fe.add(fmt.Sprintf("chunks[%d].token", i), "is required: the attempt's lease token")
		}
		stream := model.LogStream(c.Stream)
		if stream != model.Stdout && stream != model.Stderr {
			fe.add(fmt.Sprintf("chunks[%d].stream", i), "must be stdout or stderr")
		}
		chunks[i] = model.LogChunk{RunID: c.RunID, Attempt: c.Attempt, Seq: c.Seq, Stream: stream, Data: []byte(c.Data),
			Token: c.Token, WorkerID: bound}
	}
	if len(fe.errs) > 0 {
		return nil, invalidFields(fe.errs)
	}
	return chunks, nil
}

// Complete records the ends of attempts (POST /v1/attempts/complete). A completion with a
// stale lease token is refused in its result (accepted false) and changes nothing; the
// others are recorded. A worker bound to an id completes only the runs leased to it.
func (p *Protocol) Complete(ctx context.Context, req *apitype.CompleteRequest) (*apitype.CompleteResponse, error) {
	cs, err := completions(req)
	if err != nil {
		return nil, wireError(err)
	}
	out := &apitype.CompleteResponse{Results: make([]apitype.CompletionResult, len(cs))}
	if len(cs) == 0 {
		return out, nil
	}
	// A bound worker's completions of runs not leased to it are refused here; the rest go on.
	send := make([]int, 0, len(cs))
	if pr := principalOf(ctx); pr != nil && pr.Role == model.RoleWorker && pr.WorkerID != "" {
		mine, err := p.runningOn(ctx, pr.WorkerID)
		if err != nil {
			return nil, wireError(err)
		}
		for i, c := range cs {
			if mine[c.RunID] {
				send = append(send, i)
			} else {
				out.Results[i] = apitype.CompletionResult{RunID: c.RunID,
					Error: fmt.Sprintf("run %s is not leased to worker %q", c.RunID, pr.WorkerID)}
			}
		}
	} else {
		for i := range cs {
			send = append(send, i)
		}
	}
	if len(send) == 0 {
		return out, nil
	}
	batch := make([]store.Completion, len(send))
	for k, i := range send {
		batch[k] = cs[i]
	}
	res, err := p.eng.Complete(ctx, batch)
	if err != nil {
		return nil, wireError(err)
	}
	for k, r := range res {
		i := send[k]
		out.Results[i] = apitype.CompletionResult{RunID: cs[i].RunID, Accepted: r.Err == nil}
		if r.Err != nil {
			out.Results[i].Error = r.Err.Error()
		}
	}
	return out, nil
}

// completions checks the ends of attempts a worker reports.
func completions(req *apitype.CompleteRequest) ([]store.Completion, error) {
	fe := &fieldErrors{}
	cs := make([]store.Completion, len(req.Completions))
	for i, c := range req.Completions {
		if c.RunID == "" {
			fe.add(fmt.Sprintf("completions[%d].run_id", i), "is required")
		}
		if c.Token == "" {
			fe.add(fmt.Sprintf("completions[%d].token", i), "is required")
		}
		status := model.AttemptStatus(c.Status)
		if !status.Valid() {
			fe.add(fmt.Sprintf("completions[%d].status", i), "must be one of succeeded, failed, timed_out, lost, cancelled")
		}
		cs[i] = store.Completion{RunID: c.RunID, Token: c.Token, Status: status, ExitCode: c.ExitCode, Error: c.Error}
	}
	if len(fe.errs) > 0 {
		return nil, invalidFields(fe.errs)
	}
	return cs, nil
}

// runningOn returns the ids of the runs leased to worker id now.
func (p *Protocol) runningOn(ctx context.Context, workerID string) (map[string]bool, error) {
	mine := map[string]bool{}
	params := &store.ListRunsParams{WorkerID: workerID, Status: model.RunRunning, Limit: apitype.MaxLeaseBatch}
	for {
		page, err := p.eng.Store().ListRuns(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("runs of worker %s: %w", workerID, err)
		}
		for _, r := range page.Runs {
			mine[r.ID] = true
		}
		if page.NextCursor == "" {
			return mine, nil
		}
		params.Cursor = page.NextCursor
	}
}

// actAs refuses (403) a caller that may not speak the worker protocol as worker id.
func actAs(ctx context.Context, id string) error {
	pr := principalOf(ctx)
	if pr == nil || pr.ActsAs(id) {
		return nil
	}
	return &httpError{status: http.StatusForbidden,
		detail: fmt.Sprintf("%s may act only as worker %q, not %q", pr.Via(), pr.WorkerID, id)}
}

// problemError is an error as a protocol client sees it: the problem document of the HTTP
// answer, and the cause the server logs. errors.As finds the *apitype.Problem in it, and
// errors.Is the cause's sentinels.
type problemError struct {
	problem *apitype.Problem
	cause   error
}

func (e *problemError) Error() string   { return e.cause.Error() }
func (e *problemError) Unwrap() []error { return []error{e.problem, e.cause} }

// wireError is err as a protocol client sees it: the problem the HTTP route answers it
// with, or err itself when it is the end of the caller's context (an HTTP client, too,
// sees its own context's end rather than an answer). nil stays nil.
func wireError(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &problemError{problem: problemFor(err), cause: err}
}
