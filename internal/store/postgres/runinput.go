package postgres

import (
	"fmt"
	"strings"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// runInput holds new runs as column arrays, for one INSERT ... SELECT FROM unnest.
type runInput struct {
	id, jobID, jobName, namespace, status, pendingCode, pendingReason, queue []string
	priority                                                                 []int32
	trigger, handler                                                         []string
	reqCPU                                                                   []float64
	reqMemoryMB                                                              []int64
	reqGPU                                                                   []int32
	reqLabels                                                                [][]byte
	args                                                                     [][]byte
	scheduledFor, createdAt                                                  []time.Time
	finishedAt, instant                                                      []*time.Time
	attempt, maxAttempts                                                     []int32
	idempotencyKey, errMsg                                                   []string
	// spec is the job's spec of an anonymous run (store.Anonymous), nil for the others.
	spec [][]byte
}

// runInputCols names the columns of runInput.sql, in order.
const runInputCols = `id, job_id, job_name, namespace, status, pending_code, pending_reason, queue,
	priority, trigger_kind, handler, req_cpu, req_memory_mb, req_gpu, req_labels, args, scheduled_for, created_at,
	finished_at, attempt, max_attempts, idempotency_key, error, instant, spec`

var runInputTypes = []string{"text", "text", "text", "text", "text", "text", "text", "text",
	"int4", "text", "text", "float8", "int8", "int4", "jsonb", "jsonb", "timestamptz", "timestamptz",
	"timestamptz", "int4", "int4", "text", "text", "timestamptz", "jsonb"}

// sql is the unnest expression over parameters $first.. (aliased in, with runInputCols).
func (runInput) sql(first int) string {
	var b strings.Builder
	b.WriteString("unnest(")
	for i, t := range runInputTypes {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d::%s[]", first+i, t)
	}
	b.WriteString(") AS i(" + runInputCols + ")")
	return b.String()
}

// add appends r, whose job's handler kind and requirements are given (CreateRuns passes
// zeros and takes them from the job in SQL).
func (in *runInput) add(r *model.Run, handler string, req model.Requirements) {
	in.id = append(in.id, r.ID)
	in.jobID = append(in.jobID, r.JobID)
	in.jobName = append(in.jobName, r.JobName)
	in.namespace = append(in.namespace, r.Namespace)
	in.status = append(in.status, string(r.Status))
	in.pendingCode = append(in.pendingCode, string(r.PendingCode))
	in.pendingReason = append(in.pendingReason, r.PendingReason)
	in.queue = append(in.queue, r.Queue)
	in.priority = append(in.priority, int32(r.Priority))
	in.trigger = append(in.trigger, string(r.Trigger))
	in.handler = append(in.handler, handler)
	in.reqCPU = append(in.reqCPU, req.CPU)
	in.reqMemoryMB = append(in.reqMemoryMB, req.MemoryMB)
	in.reqGPU = append(in.reqGPU, int32(req.GPU))
	in.reqLabels = append(in.reqLabels, labelsDoc(req.Labels))
	var args []byte
	if len(r.Args) > 0 {
		args = r.Args
	}
	in.args = append(in.args, args)
	in.scheduledFor = append(in.scheduledFor, r.ScheduledFor)
	in.createdAt = append(in.createdAt, r.CreatedAt)
	in.finishedAt = append(in.finishedAt, r.FinishedAt)
	in.attempt = append(in.attempt, int32(r.Attempt))
	in.maxAttempts = append(in.maxAttempts, int32(r.MaxAttempts))
	in.idempotencyKey = append(in.idempotencyKey, r.IdempotencyKey)
	in.errMsg = append(in.errMsg, r.Error)
	in.instant = append(in.instant, r.Instant)
	in.spec = append(in.spec, nil)
}

func (in *runInput) len() int { return len(in.id) }

func (in *runInput) params() []any {
	return []any{in.id, in.jobID, in.jobName, in.namespace, in.status, in.pendingCode,
		in.pendingReason, in.queue, in.priority, in.trigger, in.handler, in.reqCPU,
		in.reqMemoryMB, in.reqGPU, in.reqLabels, in.args,
		in.scheduledFor, in.createdAt, in.finishedAt, in.attempt, in.maxAttempts,
		in.idempotencyKey, in.errMsg, in.instant, in.spec}
}

// labelsDoc is the req_labels value of labels: a JSON object, NULL when there are none.
func labelsDoc(labels map[string]string) []byte {
	if s := store.LabelsColumn(labels); s != "" {
		return []byte(s)
	}
	return nil
}

// normalizeRun returns a copy of r with its times in boundary form.
func normalizeRun(r *model.Run) *model.Run {
	c := *r
	c.ScheduledFor = utc(c.ScheduledFor)
	c.CreatedAt = utc(c.CreatedAt)
	c.StartedAt = utcPtr(c.StartedAt)
	c.FinishedAt = utcPtr(c.FinishedAt)
	c.Instant = utcPtr(c.Instant)
	c.LeaseExpiresAt = utcPtr(c.LeaseExpiresAt)
	c.Args = compactJSON(c.Args)
	c.Attempts = nil
	return &c
}
