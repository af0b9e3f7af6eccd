package scheduler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/stint-dev/stint/internal/model"
)

// Concurrency keys. A job's runs count against the key "job:<id>" unless the job names a
// key template, e.g. "customer-{{.customer_id}}": then each run's key is the template
// rendered over the run's args, scoped to the job's namespace, and runs of any job of the
// namespace that render the same key share its limit.
//
// A key is rendered on the request path (submit, trigger, webhook) and in the cron firer, so
// a template must never cost more than a moment, whatever it and the args say (issue 12: a
// 169-byte submission whose key nested loops rendered 100 MB, for 16 s of CPU). Its budgets:
//
//   - the template's source is at most MaxKeyTemplateBytes;
//   - one rendering takes at most MaxKeySteps steps: the rendering itself is one, each call
//     of a template (the key's own included, so recursion too) is one, and a range loop
//     costs its length before its first iteration, so nested or long loops stop at once;
//   - the rendered key, and every string a function builds on the way (print, printf,
//     println, html, js, urlquery), is at most MaxKeyBytes, and those strings together at
//     most MaxKeyBuilt: the rendering stops at the first byte over, and printf refuses a
//     width or precision over MaxKeyBytes before formatting;
//   - the args are decoded once, and are capped where they come in (the API's args limit).
//
// A template over a budget does not render: the API answers 400 naming concurrency.key (or
// args, for a trigger), and RunConcurrency falls back to the job's own key.
const (
	// MaxKeyTemplateBytes caps a key template's source.
	MaxKeyTemplateBytes = 512
	// MaxKeyBytes caps a rendered key and each string built while rendering it.
	MaxKeyBytes = 512
	// MaxKeyBuilt caps the bytes of all the strings functions build in one rendering.
	MaxKeyBuilt = 64 << 10
	// MaxKeySteps caps the steps of one rendering: one, plus the length of every range
	// loop, plus the template calls.
	MaxKeySteps = 500
)

// The functions ParseKeyTemplate adds to a key template to count its steps: a call of
// stepFunc starts every template, and every range loop passes what it ranges over through
// rangeFunc, which charges its length. Their names cannot clash with a field of the args,
// which a template reaches with a leading dot.
const (
	stepFunc  = "stintKeyStep"
	rangeFunc = "stintKeyRange"
)

// errKey marks a key template that did not render.
var errKey = errors.New("concurrency key")

// ParseKeyTemplate checks a concurrency key template and returns it ready to render: its
// loops and templates count steps (see MaxKeySteps).
func ParseKeyTemplate(key string) (*template.Template, error) {
	if len(key) > MaxKeyTemplateBytes {
		return nil, fmt.Errorf("parse key template: is %d bytes, more than the %d allowed", len(key), MaxKeyTemplateBytes)
	}
	funcs := (&keyBudget{}).funcs()
	t, err := template.New("key").Option("missingkey=error").Funcs(funcs).Parse(key)
	if err != nil {
		return nil, fmt.Errorf("parse key template:%s", strings.TrimPrefix(err.Error(), "template: key:"))
	}
	counters, err := template.New("counters").Funcs(funcs).Parse("{{" + stepFunc + "}}{{" + rangeFunc + "}}")
	if err != nil {
		return nil, fmt.Errorf("parse key template: step counters: %w", err)
	}
	step := counters.Tree.Root.Nodes[0]
	charge := counters.Tree.Root.Nodes[1].(*parse.ActionNode).Pipe.Cmds[0]
	for _, tt := range t.Templates() {
		if tt.Tree == nil || tt.Tree.Root == nil {
			continue
		}
		chargeRanges(tt.Tree.Root, charge)
		// Each execution of a template is a step: the key's own (the rendering is its first
		// step), and each call, of a defined template or of the key itself, recursive or not.
		tt.Tree.Root.Nodes = append([]parse.Node{step.Copy()}, tt.Tree.Root.Nodes...)
	}
	return t, nil
}

// chargeRanges makes every range loop under n pass what it ranges over through the range
// charge (charge, a call of rangeFunc), so that a loop costs its length in steps before its
// first iteration.
func chargeRanges(n parse.Node, charge *parse.CommandNode) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			chargeRanges(c, charge)
		}
	case *parse.RangeNode:
		n.Pipe.Cmds = append(n.Pipe.Cmds, charge.Copy().(*parse.CommandNode))
		chargeRanges(n.List, charge)
		chargeRanges(n.ElseList, charge)
	case *parse.IfNode:
		chargeRanges(n.List, charge)
		chargeRanges(n.ElseList, charge)
	case *parse.WithNode:
		chargeRanges(n.List, charge)
		chargeRanges(n.ElseList, charge)
	}
}

// RenderKey renders a job's concurrency key template over args (the job's own args when
// nil), within the budgets above. It fails when the args lack a field the template names, or
// when the template goes over a budget.
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
	budget := &keyBudget{}
	t.Funcs(budget.funcs())
	out := &cappedWriter{budget: budget}
	if err := t.Execute(out, data); err != nil {
		switch {
		case budget.tooManySteps:
			return "", fmt.Errorf("%w: the template takes more than %d steps to render (a step per loop iteration and per template call)", errKey, MaxKeySteps)
		case budget.tooLong:
			return "", fmt.Errorf("%w: renders longer than %d bytes", errKey, MaxKeyBytes)
		case budget.badFormat != "":
			return "", fmt.Errorf("%w: %s", errKey, budget.badFormat)
		}
		return "", fmt.Errorf("%w: %s", errKey, execError(err))
	}
	if out.b.Len() == 0 {
		return "", fmt.Errorf("%w: renders empty", errKey)
	}
	return out.b.String(), nil
}

// counterAt matches where an execution error names one of the counters ParseKeyTemplate
// added (its position is in their own little template): the words are the user's template's.
var counterAt = regexp.MustCompile(`template: counters:\d+:\d+: executing "([^"]*)" at <(` + stepFunc + `|` + rangeFunc + `)>: `)

// execError words a template's execution error without the text/template prefix.
func execError(err error) string {
	msg := counterAt.ReplaceAllString(err.Error(), `in template "$1": `)
	return strings.TrimPrefix(msg, "template: key:")
}

// keyBudget counts what one rendering of a key template spends; its funcs replace the
// template's string-building builtins with capped ones and add the step counters.
type keyBudget struct {
	steps        int
	built        int // bytes of the strings functions built
	tooManySteps bool
	tooLong      bool
	badFormat    string
}

var errBudget = errors.New("over the key's budget")

// spend takes n steps from the budget.
func (b *keyBudget) spend(n int) error {
	if n > MaxKeySteps-b.steps {
		b.tooManySteps = true
		return errBudget
	}
	b.steps += n
	return nil
}

func (b *keyBudget) funcs() template.FuncMap {
	return template.FuncMap{
		stepFunc: func() (string, error) { return "", b.spend(1) },
		rangeFunc: func(v any) (any, error) {
			return v, b.spend(rangeLength(reflect.ValueOf(v)))
		},
		"print":   func(args ...any) (string, error) { return b.capped(fmt.Sprint(args...)) },
		"println": func(args ...any) (string, error) { return b.capped(fmt.Sprintln(args...)) },
		"printf": func(format string, args ...any) (string, error) {
			if msg := checkFormat(format); msg != "" {
				b.badFormat = msg
				return "", errBudget
			}
			return b.capped(fmt.Sprintf(format, args...))
		},
		"html":     func(args ...any) (string, error) { return b.capped(template.HTMLEscapeString(fmt.Sprint(args...))) },
		"js":       func(args ...any) (string, error) { return b.capped(template.JSEscapeString(fmt.Sprint(args...))) },
		"urlquery": func(args ...any) (string, error) { return b.capped(url.QueryEscape(fmt.Sprint(args...))) },
	}
}

// rangeLength is how many iterations ranging over v takes (an integer n: n), saturated at
// one more than any budget.
func rangeLength(v reflect.Value) int {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Array, reflect.Slice, reflect.Map, reflect.Chan:
		return v.Len()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return int(min(max(v.Int(), 0), MaxKeySteps+1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return int(min(v.Uint(), MaxKeySteps+1))
	}
	return 0 // not rangeable: the template says so
}

// capped passes s on when it fits in a key and the strings built so far stay within
// MaxKeyBuilt.
func (b *keyBudget) capped(s string) (string, error) {
	b.built += len(s)
	if len(s) > MaxKeyBytes || b.built > MaxKeyBuilt {
		b.tooLong = true
		return "", errBudget
	}
	return s, nil
}

// checkFormat refuses a printf format whose widths or precisions could build a string
// longer than a key before it is measured: a '*' (width from an argument) or a number over
// MaxKeyBytes. It returns what is wrong, or "".
func checkFormat(format string) string {
outer:
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		for i++; i < len(format); i++ {
			c := format[i]
			switch {
			case c == '*':
				return "printf: a width or precision taken from an argument ('*') is not allowed in a key"
			case c >= '0' && c <= '9':
				n := 0
				for ; i < len(format) && format[i] >= '0' && format[i] <= '9'; i++ {
					if n = n*10 + int(format[i]-'0'); n > MaxKeyBytes {
						return fmt.Sprintf("printf: a width or precision over %d is not allowed in a key", MaxKeyBytes)
					}
				}
				i--
			case strings.IndexByte("+-# .[]", c) >= 0:
			default: // the verb ends the directive
				continue outer
			}
		}
	}
	return ""
}

// cappedWriter takes a rendered key, failing at the first byte over MaxKeyBytes.
type cappedWriter struct {
	b      strings.Builder
	budget *keyBudget
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > MaxKeyBytes {
		w.budget.tooLong = true
		return 0, errBudget
	}
	return w.b.Write(p)
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
