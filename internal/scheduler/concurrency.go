package scheduler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"

	"github.com/stint-dev/stint/internal/model"
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

// RunConcurrency is the limit a new run of job with args counts against: Max runs at once
// per key (for allow, 0 means no limit; the other policies default to 1) and the job's rate
// limit; nil when the job sets neither. A key template that does not render (the API
// refuses such args before) falls back to the job's own key, so the limit still holds.
func RunConcurrency(job *model.Job, args json.RawMessage) *model.RunConcurrency {
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
