package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/stint-dev/stint/apitype"
)

// The submission routes read job specs by hand before they ask encoding/json. Decoding by
// reflection was a third of POST /v1/jobs/batch's CPU; a common spec (strings, lists and
// maps of strings, args, priority, requirements, enabled) is read here without it, and its
// rarer fields (timeout, retry, schedule...) by encoding/json one value at a time.
//
// The fast path judges nothing. Whatever encoding/json might read differently or refuse (an
// escape in a string, bytes that are not UTF-8, a key not spelled as its field's tag, a
// repeated key, null, a number that is not a plain integer, malformed JSON) makes it give
// up, and the caller decodes the whole body with decodeJSON, which words every error.
// FuzzSpecReader holds it to that: what it takes, decodeJSON decodes to the same value.

// specReader reads job specs from b, from offset i on. It keeps the last string read for
// the fields a batch's entries tend to share (handler, queue...), so that they share it.
type specReader struct {
	b    []byte
	i    int
	last struct{ namespace, shell, handler, dir, queue string }
}

// readSpec decodes b, one JSON object and nothing but whitespace after it, into s, which is
// zero; it reports false, leaving s in any state, where the caller must ask decodeJSON.
func readSpec(b []byte, s *apitype.JobSpec) bool {
	p := specReader{b: b}
	return p.spec(s) && p.end()
}

// decodeSpec decodes b into s (zero) as decodeRead does, by hand where readSpec can.
func decodeSpec(b []byte, s *apitype.JobSpec) error {
	if readSpec(b, s) {
		return nil
	}
	*s = apitype.JobSpec{}
	return decodeRead(b, s, false)
}

// readBatch decodes a POST /v1/jobs/batch body, {"jobs": [spec...]}, into req, appending to
// req.Jobs (empty); it reports false, leaving req in any state, as readSpec does.
func readBatch(b []byte, req *apitype.BatchCreateJobsRequest) bool {
	p := specReader{b: b}
	if !p.take('{') {
		return false
	}
	if key, ok := p.plain(); !ok || string(key) != "jobs" || !p.take(':') || !p.take('[') {
		return false
	}
	if req.Jobs == nil {
		req.Jobs = []apitype.JobSpec{}
	}
	if !p.take(']') {
		for {
			req.Jobs = append(req.Jobs, apitype.JobSpec{})
			if !p.spec(&req.Jobs[len(req.Jobs)-1]) {
				return false
			}
			if p.take(',') {
				continue
			}
			if !p.take(']') {
				return false
			}
			break
		}
	}
	return p.take('}') && p.end()
}

// Bits of the fields a spec has set, to refuse a repeated key (encoding/json would merge or
// overwrite; which, the fast path leaves to it).
const (
	seenName = 1 << iota
	seenNamespace
	seenCommand
	seenShell
	seenHandler
	seenArgs
	seenEnv
	seenSecretEnv
	seenDir
	seenQueue
	seenPriority
	seenRequirements
	seenTimeout
	seenRetry
	seenSchedule
	seenRunAt
	seenDelay
	seenConcurrency
	seenDependsOn
	seenIdempotencyKey
	seenEnabled
	seenTags
	seenAlerts
)

// spec reads one spec object into s.
func (p *specReader) spec(s *apitype.JobSpec) bool {
	if !p.take('{') {
		return false
	}
	if p.take('}') {
		return true
	}
	seen := 0
	for {
		key, ok := p.plain()
		if !ok || !p.take(':') || p.null() {
			return false
		}
		var bit int
		switch string(key) {
		case "name":
			bit, ok = seenName, p.str(&s.Name, nil)
		case "namespace":
			bit, ok = seenNamespace, p.str(&s.Namespace, &p.last.namespace)
		case "command":
			bit, ok = seenCommand, p.strings(&s.Command)
		case "shell":
			bit, ok = seenShell, p.str(&s.Shell, &p.last.shell)
		case "handler":
			bit, ok = seenHandler, p.str(&s.Handler, &p.last.handler)
		case "args":
			var raw []byte
			raw, ok = p.raw()
			bit, s.Args = seenArgs, append(json.RawMessage(nil), raw...)
		case "env":
			bit, ok = seenEnv, p.stringMap(&s.Env)
		case "secret_env":
			bit, ok = seenSecretEnv, p.stringMap(&s.SecretEnv)
		case "dir":
			bit, ok = seenDir, p.str(&s.Dir, &p.last.dir)
		case "queue":
			bit, ok = seenQueue, p.str(&s.Queue, &p.last.queue)
		case "priority":
			var n int64
			n, ok = p.integer()
			v := int(n)
			bit, s.Priority = seenPriority, &v
		case "requirements":
			s.Requirements = new(apitype.Requirements)
			bit, ok = seenRequirements, p.requirements(s.Requirements)
		case "timeout":
			bit, ok = seenTimeout, p.delegate(&s.Timeout)
		case "retry":
			bit, ok = seenRetry, p.delegate(&s.Retry)
		case "schedule":
			bit, ok = seenSchedule, p.delegate(&s.Schedule)
		case "run_at":
			bit, ok = seenRunAt, p.delegate(&s.RunAt)
		case "delay":
			bit, ok = seenDelay, p.delegate(&s.Delay)
		case "concurrency":
			bit, ok = seenConcurrency, p.delegate(&s.Concurrency)
		case "depends_on":
			bit, ok = seenDependsOn, p.delegate(&s.DependsOn)
		case "idempotency_key":
			bit, ok = seenIdempotencyKey, p.str(&s.IdempotencyKey, nil)
		case "enabled":
			var v bool
			v, ok = p.boolean()
			bit, s.Enabled = seenEnabled, &v
		case "tags":
			bit, ok = seenTags, p.strings(&s.Tags)
		case "alerts":
			bit, ok = seenAlerts, p.delegate(&s.Alerts)
		default:
			return false // unknown, or a field spelled another way (encoding/json folds case)
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		if p.take(',') {
			continue
		}
		return p.take('}')
	}
}

// requirements reads a requirements object into r.
func (p *specReader) requirements(r *apitype.Requirements) bool {
	if !p.take('{') {
		return false
	}
	if p.take('}') {
		return true
	}
	var seen [4]bool
	for {
		key, ok := p.plain()
		if !ok || !p.take(':') || p.null() {
			return false
		}
		var f int
		switch string(key) {
		case "cpu":
			f = 0
			r.CPU, ok = p.float()
		case "memory_mb":
			f = 1
			r.MemoryMB, ok = p.integer()
		case "gpu":
			f = 2
			var n int64
			n, ok = p.integer()
			r.GPU = int(n)
		case "labels":
			f = 3
			ok = p.stringMap(&r.Labels)
		default:
			return false
		}
		if !ok || seen[f] {
			return false
		}
		seen[f] = true
		if p.take(',') {
			continue
		}
		return p.take('}')
	}
}

// ws skips whitespace.
func (p *specReader) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// take skips whitespace and consumes c if it comes next, reporting whether it did.
func (p *specReader) take(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (p *specReader) end() bool {
	p.ws()
	return p.i == len(p.b)
}

// null reports whether a null comes next, without consuming it.
func (p *specReader) null() bool {
	p.ws()
	return p.i < len(p.b) && p.b[p.i] == 'n'
}

// plain reads a string that encoding/json would take byte for byte (no escape, no control
// character, UTF-8) and returns its bytes, which are b's.
func (p *specReader) plain() ([]byte, bool) {
	if !p.take('"') {
		return nil, false
	}
	start, ascii := p.i, true
	for ; p.i < len(p.b); p.i++ {
		switch c := p.b[p.i]; {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, ascii || utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// str reads a string into dst; with last, a string equal to *last is that one (no copy),
// and *last becomes the string read.
func (p *specReader) str(dst, last *string) bool {
	b, ok := p.plain()
	if !ok {
		return false
	}
	switch {
	case last == nil:
		*dst = string(b)
	case string(b) == *last:
		*dst = *last
	default:
		*dst = string(b)
		*last = *dst
	}
	return true
}

// strings reads an array of strings into dst (empty, not nil, for []).
func (p *specReader) strings(dst *[]string) bool {
	if !p.take('[') {
		return false
	}
	out := []string{}
	if !p.take(']') {
		for {
			var s string
			if !p.str(&s, nil) {
				return false
			}
			out = append(out, s)
			if p.take(',') {
				continue
			}
			if !p.take(']') {
				return false
			}
			break
		}
	}
	*dst = out
	return true
}

// stringMap reads an object of strings into dst (empty, not nil, for {}).
func (p *specReader) stringMap(dst *map[string]string) bool {
	if !p.take('{') {
		return false
	}
	m := map[string]string{}
	if !p.take('}') {
		for {
			k, ok := p.plain()
			if !ok || !p.take(':') {
				return false
			}
			if _, dup := m[string(k)]; dup {
				return false
			}
			var v string
			if !p.str(&v, nil) {
				return false
			}
			m[string(k)] = v
			if p.take(',') {
				continue
			}
			if !p.take('}') {
				return false
			}
			break
		}
	}
	*dst = m
	return true
}

// number reads a JSON number's bytes and whether it has a fraction or an exponent.
func (p *specReader) number() (num []byte, integer, ok bool) {
	p.ws()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	lead := p.i
	// A leading zero stands alone: 0, 0.5, never 01.
	if n := p.digits(); n == 0 || (n > 1 && p.b[lead] == '0') {
		return nil, false, false
	}
	integer = true
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return nil, false, false
		}
		integer = false
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return nil, false, false
		}
		integer = false
	}
	return p.b[start:p.i], integer, true
}

// digits consumes decimal digits and returns how many.
func (p *specReader) digits() int {
	start := p.i
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

// integer reads a number that is an integer of at most 18 digits (no fraction, no
// exponent: encoding/json refuses those for an integer field, and longer ones may not fit).
func (p *specReader) integer() (int64, bool) {
	num, integer, ok := p.number()
	if !ok || !integer {
		return 0, false
	}
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	if len(num) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range num {
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// float reads a number as encoding/json reads it into a float64.
func (p *specReader) float() (float64, bool) {
	num, _, ok := p.number()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(num), 64)
	return f, err == nil
}

// boolean reads true or false.
func (p *specReader) boolean() (bool, bool) {
	p.ws()
	switch rest := p.b[p.i:]; {
	case bytes.HasPrefix(rest, []byte("true")):
		p.i += 4
		return true, true
	case bytes.HasPrefix(rest, []byte("false")):
		p.i += 5
		return false, true
	}
	return false, false
}

// raw reads any JSON value and returns its bytes, which are b's: it finds where the value
// ends, then asks json.Valid whether it is one.
func (p *specReader) raw() ([]byte, bool) {
	p.ws()
	start := p.i
	if p.i == len(p.b) {
		return nil, false
	}
	switch p.b[p.i] {
	case '"':
		if !p.skipString() {
			return nil, false
		}
	case '{', '[':
		for depth := 0; ; {
			if p.i == len(p.b) {
				return nil, false
			}
			switch p.b[p.i] {
			case '"':
				if !p.skipString() {
					return nil, false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			p.i++
			if depth == 0 {
				break
			}
		}
	default: // a number or a literal: up to what ends it
		for p.i < len(p.b) && strings.IndexByte(",}] \t\r\n", p.b[p.i]) < 0 {
			p.i++
		}
	}
	v := p.b[start:p.i]
	return v, json.Valid(v)
}

// skipString moves past the string that starts at i, escapes and all, reporting whether it
// ends.
func (p *specReader) skipString() bool {
	for p.i++; p.i < len(p.b); p.i++ {
		switch p.b[p.i] {
		case '\\':
			p.i++
		case '"':
			p.i++
			return true
		}
	}
	return false
}

// delegate reads the next value into v (a pointer to a field) with encoding/json, as
// decodeJSON would read it there.
func (p *specReader) delegate(v any) bool {
	raw, ok := p.raw()
	if !ok {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v) == nil
}
