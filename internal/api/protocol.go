package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/model"
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
type Protocol struct {
	eng *engine.Engine
}

// NewProtocol returns the worker protocol over e.
func NewProtocol(e *engine.Engine) *Protocol { return &Protocol{eng: e} }

// Register records a worker and starts a new session for it (POST /v1/workers/register).
func (p *Protocol) Register(ctx context.Context, req *apitype.RegisterRequest) (*apitype.RegisterResponse, error) {
	params, err := registerParams(req)
	if err != nil {
		return nil, wireError(err)
	}
	reg, err := p.eng.Register(ctx, params)
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
	if len(req.Held) > maxHeldLeases {
		fe.add("held", "must list at most %d leases, got %d", maxHeldLeases, len(req.Held))
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
	res, err := p.eng.Lease(ctx, workerID, params)
	if err != nil {
		return nil, wireError(workerNotFound(workerID, err))
	}
	out := &apitype.LeaseResponse{Leases: make([]apitype.Lease, len(res.Leases)), Cancel: res.Cancel, Lost: res.Lost, Drain: res.Drain}
	for i, l := range res.Leases {
		out.Leases[i] = leaseToAPI(l)
	}
	return out, nil
}

// leaseParams checks a lease request.
func leaseParams(req *apitype.LeaseRequest) (*engine.LeaseParams, error) {
	fe := &fieldErrors{}
	if req.Max < 0 || req.Max > maxLeaseBatch {
		fe.add("max", "must be between 0 and %d", maxLeaseBatch)
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
	res, err := p.eng.Heartbeat(ctx, workerID, params)
	if err != nil {
		return nil, wireError(workerNotFound(workerID, err))
	}
	return &apitype.HeartbeatResponse{Lost: res.Lost, Ended: res.Ended, Cancel: res.Cancel, Drain: res.Drain}, nil
}

// heartbeatParams checks a heartbeat.
func heartbeatParams(req *apitype.HeartbeatRequest) (*engine.HeartbeatParams, error) {
	fe := &fieldErrors{}
	if len(req.Held) > maxHeldLeases {
		fe.add("held", "must list at most %d leases, got %d", maxHeldLeases, len(req.Held))
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

// AppendLogs stores chunks of attempts' output (POST /v1/attempts/logs).
func (p *Protocol) AppendLogs(ctx context.Context, req *apitype.LogChunksRequest) error {
	chunks, err := logChunks(req)
	if err != nil {
		return wireError(err)
	}
	if len(chunks) == 0 {
		return nil
	}
	return wireError(p.eng.AppendLogs(ctx, chunks))
}

// logChunks checks a worker's chunks of output.
func logChunks(req *apitype.LogChunksRequest) ([]model.LogChunk, error) {
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
		stream := model.LogStream(c.Stream)
		if stream != model.Stdout && stream != model.Stderr {
			fe.add(fmt.Sprintf("chunks[%d].stream", i), "must be stdout or stderr")
		}
		chunks[i] = model.LogChunk{RunID: c.RunID, Attempt: c.Attempt, Seq: c.Seq, Stream: stream, Data: []byte(c.Data)}
	}
	if len(fe.errs) > 0 {
		return nil, invalidFields(fe.errs)
	}
	return chunks, nil
}

// Complete records the ends of attempts (POST /v1/attempts/complete). A completion with a
// stale lease token is refused in its result (accepted false) and changes nothing; the
// others are recorded.
func (p *Protocol) Complete(ctx context.Context, req *apitype.CompleteRequest) (*apitype.CompleteResponse, error) {
	cs, err := completions(req)
	if err != nil {
		return nil, wireError(err)
	}
	out := &apitype.CompleteResponse{Results: make([]apitype.CompletionResult, len(cs))}
	if len(cs) == 0 {
		return out, nil
	}
	res, err := p.eng.Complete(ctx, cs)
	if err != nil {
		return nil, wireError(err)
	}
	for i, r := range res {
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
