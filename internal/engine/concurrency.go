package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// Concurrency keys. A job's runs count against the key "job:<id>" unless the job names a
// key template, e.g. "customer-{{.customer_id}}": then each run's key is the template
// rendered over the run's args, scoped to the job's namespace, and runs of any job of the
// namespace that render the same key share its limit.

// ParseKeyTemplate checks a concurrency key template.
func ParseKeyTemplate(key string) (*template.Template, error) {
	t, err := template.New("key").Option("missingkey=error").Parse(key)
	if err != nil {
		return nil, fmt.Errorf("parse key template:%s", strings.TrimPrefix(err.Error(), "template: key:"))
	}
	return t, nil
}

// errKey marks a key template that did not render.
var errKey = errors.New("concurrency key")

// RenderKey renders a job's concurrency key template over args (the job's own args when
// nil). It fails when the args lack a field the template names.
func RenderKey(job *model.Job, args json.RawMessage) (string, error) {
	t, err := ParseKeyTemplate(job.Spec.Concurrency.Key)
	if err != nil {
		return "", err
	}
	if args == nil {
		args = job.Spec.Args
	}
	data := map[string]any{}
	if len(bytes.TrimSpace(args)) > 0 {
		if err := json.Unmarshal(args, &data); err != nil {
			return "", fmt.Errorf("%w: args are not a JSON object: %w", errKey, err)
		}
	}
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("%w: %s", errKey, strings.TrimPrefix(err.Error(), "template: key:"))
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("%w: renders empty", errKey)
	}
	return b.String(), nil
}

// runConcurrency is the limit a new run of job with args counts against: Max runs at once
// per key (for allow, 0 means no limit; the other policies default to 1) and the job's rate
// limit; nil when the job sets neither. A key template that does not render (the API
// refuses such args before) falls back to the job's own key, so the limit still holds.
func runConcurrency(job *model.Job, args json.RawMessage) *model.RunConcurrency {
	c := job.Spec.Concurrency
	policy := model.ConcurrencyPolicy(c.Policy)
	if policy == "" {
		policy = model.ConcurrencyAllow
	}
	limit := c.Max
	if policy != model.ConcurrencyAllow && limit <= 0 {
		limit = 1
	}
	if limit == 0 && c.Rate == nil {
		return nil
	}
	key := "job:" + job.ID
	if c.Key != "" {
		if k, err := RenderKey(job, args); err == nil {
			key = "key:" + job.Namespace + ":" + k
		}
	}
	return &model.RunConcurrency{Key: key, Max: limit, Policy: policy, Rate: c.Rate}
}

// releaseLoop keeps rate limits moving without polling: it admits runs held by a key's
// rate limit when their turn comes, and wakes workers when a rate-limited queue with queued
// runs gets its next turn. It sleeps until the earlier of the two, or until a new held run
// or an underfilled lease may have brought one earlier.
func (e *Engine) releaseLoop(ctx context.Context) {
	for ctx.Err() == nil {
		wake := e.timers.Wait()
		now := e.clock.Now()
		next, ok, err := e.store.NextRelease(ctx)
		if err != nil {
			e.retryLater(ctx, "next rate-limit release", err)
			continue
		}
		if ok && !next.After(now) {
			runs, err := e.store.ReleaseDue(ctx, &store.ReleaseDueParams{Now: now})
			if err != nil {
				e.retryLater(ctx, "release rate-limited runs", err)
				continue
			}
			e.wakeFor(runs)
			continue
		}
		if e.rateQueues.Load() {
			turn, tok, err := e.store.NextQueueTurn(ctx, &store.NextQueueTurnParams{Now: now})
			if err != nil {
				e.retryLater(ctx, "next queue turn", err)
				continue
			}
			if tok && (!ok || turn.Before(next)) {
				next, ok = turn, true
			}
		}
		until := now.Add(e.cfg.MaxLeaseWait * 10) // nothing held: sleep until woken
		if ok {
			until = next
		}
		if !e.sleepUntil(ctx, wake, until) {
			return
		}
		if e.rateQueues.Load() && ok && !e.clock.Now().Before(next) {
			e.work.Notify() // a queue's turn: leases may take its runs again
		}
	}
}
