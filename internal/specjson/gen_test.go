package specjson_test

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
)

// gen draws the values of a spec from the bytes a fuzzer mutates; once they run out it
// draws zeros, so that every input makes a spec.
type gen struct{ b []byte }

func (g *gen) byte() byte {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return c
}

func (g *gen) bool() bool { return g.byte()&1 == 1 }

// str is up to 31 bytes of the input as they are: invalid UTF-8, control characters, <>&
// and U+2028 all come through.
func (g *gen) str() string {
	n := min(int(g.byte()%32), len(g.b))
	s := string(g.b[:n])
	g.b = g.b[n:]
	return s
}

// int is small, negative, or any 64 bits.
func (g *gen) int() int64 {
	switch g.byte() % 4 {
	case 0:
		return 0
	case 1:
		return int64(int8(g.byte()))
	case 2:
		return int64(int16(g.byte())<<8 | int16(g.byte()))
	}
	var u uint64
	for range 8 {
		u = u<<8 | uint64(g.byte())
	}
	return int64(u)
}

// float is 0, -0, a small fraction, a power of ten at encoding/json's cutoffs, or any 64
// bits (NaN and the infinities among them).
func (g *gen) float() float64 {
	switch g.byte() % 6 {
	case 0:
		return 0
	case 1:
		return math.Copysign(0, -1)
	case 2:
		return float64(int8(g.byte())) / 8
	case 3:
		return math.Pow10(int(int8(g.byte())) % 40)
	case 4:
		return float64(int8(g.byte())) * math.Pow10(int(int8(g.byte()))%330)
	}
	return math.Float64frombits(uint64(g.int()))
}

// strs is nil, empty or a few strings.
func (g *gen) strs() []string {
	switch g.byte() % 3 {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	s := make([]string, 1+g.byte()%4)
	for i := range s {
		s[i] = g.str()
	}
	return s
}

func (g *gen) ints() []int {
	switch g.byte() % 3 {
	case 0:
		return nil
	case 1:
		return []int{}
	}
	s := make([]int, 1+g.byte()%4)
	for i := range s {
		s[i] = int(g.int())
	}
	return s
}

// smap is nil, empty or a few entries (keys that differ in one byte, or a prefix, among
// them when the input says so).
func (g *gen) smap() map[string]string {
	switch g.byte() % 3 {
	case 0:
		return nil
	case 1:
		return map[string]string{}
	}
	m := map[string]string{}
	for range 1 + g.byte()%6 {
		m[g.str()] = g.str()
	}
	return m
}

func (g *gen) dur() time.Duration { return time.Duration(g.int()) }

func (g *gen) apiDur() *apitype.Duration {
	if !g.bool() {
		return nil
	}
	d := apitype.Duration(g.dur())
	return &d
}

func (g *gen) intPtr() *int {
	if !g.bool() {
		return nil
	}
	n := int(g.int())
	return &n
}

// apiSpec is an apitype.JobSpec with args as its Args (nil when args is empty and the input
// says so).
func (g *gen) apiSpec(args []byte) *apitype.JobSpec {
	s := &apitype.JobSpec{
		Name: g.str(), Namespace: g.str(), Command: g.strs(), Shell: g.str(), Handler: g.str(),
		Env: g.smap(), SecretEnv: g.smap(), Dir: g.str(), Queue: g.str(), Priority: g.intPtr(),
		Timeout: g.apiDur(), Delay: g.apiDur(), IdempotencyKey: g.str(), Tags: g.strs(),
	}
	if len(args) > 0 || g.bool() {
		s.Args = args
	}
	if g.bool() {
		s.Requirements = &apitype.Requirements{CPU: g.float(), MemoryMB: g.int(), GPU: int(g.int()), Labels: g.smap()}
	}
	if g.bool() {
		r := &apitype.RetryPolicy{MaxAttempts: int(g.int()), InitialDelay: g.apiDur(), MaxDelay: g.apiDur(),
			Multiplier: g.float(), FinalExitCodes: g.ints(), RetryExitCodes: g.ints(), MaxDisruptions: g.intPtr()}
		if g.bool() {
			j := g.float()
			r.Jitter = &j
		}
		s.Retry = r
	}
	if g.bool() {
		s.Schedule = &apitype.Schedule{Cron: g.str(), Timezone: g.str(), Misfire: g.str(), MisfireLimit: int(g.int()), Paused: g.bool()}
	}
	if g.bool() {
		// Years outside 0 to 9999 and offsets of 24 hours or more make MarshalJSON fail.
		t := time.Unix(g.int(), g.int()%2e9).In(time.FixedZone(g.str(), int(int32(g.int()))))
		s.RunAt = &t
	}
	if g.bool() {
		c := &apitype.Concurrency{Policy: g.str(), Max: int(g.int()), Key: g.str()}
		if g.bool() {
			c.Rate = &apitype.RateLimit{Rate: int(g.int()), Per: apitype.Duration(g.dur())}
		}
		s.Concurrency = c
	}
	if n := g.byte() % 4; n > 0 {
		s.DependsOn = make([]apitype.Dependency, n-1)
		for i := range s.DependsOn {
			s.DependsOn[i] = apitype.Dependency{Run: g.str(), Ref: g.str(), Condition: g.str()}
		}
	}
	if g.bool() {
		e := g.bool()
		s.Enabled = &e
	}
	if g.bool() {
		s.Alerts = &apitype.JobAlerts{Off: g.bool(), ConsecutiveFailures: int(g.int()), LateAfter: g.apiDur(), MaxDuration: g.apiDur()}
	}
	return s
}

// modelSpec is a model.JobSpec with args as its Args (as apiSpec).
func (g *gen) modelSpec(args []byte) *model.JobSpec {
	s := &model.JobSpec{
		Command: g.strs(), Shell: g.str(), Handler: g.str(), Env: g.smap(), SecretEnv: g.smap(),
		Dir: g.str(), Queue: g.str(), Priority: int(g.int()), Timeout: g.dur(), Tags: g.strs(),
		Retry: model.RetryPolicy{MaxAttempts: int(g.int()), InitialDelay: g.dur(), MaxDelay: g.dur(),
			Multiplier: g.float(), Jitter: g.float(), FinalExitCodes: g.ints(), RetryExitCodes: g.ints(),
			MaxDisruptions: g.intPtr()},
	}
	if len(args) > 0 || g.bool() {
		s.Args = args
	}
	if g.bool() {
		s.Requirements = model.Requirements{CPU: g.float(), MemoryMB: g.int(), GPU: int(g.int()), Labels: g.smap()}
	}
	if g.bool() {
		s.Schedule = &model.Schedule{Cron: g.str(), Timezone: g.str(), Misfire: g.str(), MisfireLimit: int(g.int()), Paused: g.bool()}
	}
	if g.bool() {
		s.Concurrency = model.Concurrency{Policy: g.str(), Max: int(g.int()), Key: g.str()}
		if g.bool() {
			s.Concurrency.Rate = &model.RateLimit{Rate: int(g.int()), Per: g.dur()}
		}
	}
	if g.bool() {
		s.DAG = &model.DAGMember{ID: g.str(), Entry: g.str(), Runs: g.smap()}
	}
	if g.bool() {
		s.Alerts = &model.JobAlerts{Off: g.bool(), ConsecutiveFailures: int(g.int()), LateAfter: g.dur(), MaxDuration: g.dur()}
	}
	return s
}

// sameAsMarshal fails t unless got and gotErr, what an Append function returned for v after
// prefix, are what json.Marshal(v) gives: its bytes after prefix, or its error with prefix
// left as it was.
func sameAsMarshal(t *testing.T, v any, prefix, got []byte, gotErr error) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	switch {
	case wantErr != nil:
		if gotErr == nil || gotErr.Error() != wantErr.Error() {
			t.Fatalf("error %v, json.Marshal's is %v", gotErr, wantErr)
		}
		if !bytes.Equal(got, prefix) {
			t.Fatalf("on error got %q, want the prefix %q alone", got, prefix)
		}
	case gotErr != nil:
		t.Fatalf("error %v; json.Marshal gives %s", gotErr, want)
	case !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want):
		t.Fatalf("got\n%q\nwant (json.Marshal)\n%q", got, append(prefix[:len(prefix):len(prefix)], want...))
	}
}
