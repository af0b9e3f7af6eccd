package specjson_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/specjson"
	"github.com/stint-dev/stint/internal/specjson/modelspec"
)

// The tests of modelspec are here too, beside those of specjson: both fuzzers draw their
// specs with the same gen.

var prefix = []byte(`{"x":1}`) // what a caller appended before: kept, and kept alone on error

func ptr[T any](v T) *T { return &v }

func dur(d time.Duration) *apitype.Duration { return ptr(apitype.Duration(d)) }

// oddStrings need escaping or replacing, each in its own way.
var oddStrings = []string{
	"", "plain", `quote " backslash \ slash /`, "<script>&amp;</script>", "\b\f\n\r\t\x00\x01\x1f\x7f",
	"\u2028\u2029", "é µ 日本 🙂", "\xff\xfe", "a\xc3", "\xe2\x80", "\xe2\x80\xa8x", "\xed\xa0\x80 surrogate",
	"\xf4\x90\x80\x80 past U+10FFFF", "\xc0\xaf overlong",
}

var oddFloats = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.5, 1.5, 1e-6, 9.99999e-7, 1e-7, 1.234e-10, 1e20, 1e21, 123456789e15,
	1e100, -1e-300, math.SmallestNonzeroFloat64, math.MaxFloat64, 0.1 + 0.2, 100, 2.5e-5,
}

func TestAppendJobSpecTable(t *testing.T) {
	t.Parallel()
	specs := map[string]*apitype.JobSpec{
		"nil":     nil,
		"zero":    {},
		"typical": {Handler: "noop", Queue: "bench"},
		"command": {
			Name: "nightly", Command: []string{"/bin/sh", "-c", "echo <hi> && exit 1"},
			Args: json.RawMessage(` { "a" : [1, 2.50, -0e3, true, null], "b":"<&>\u2028" , "c":{} } `),
			Env:  map[string]string{"B": "2", "A": "1", "a": "x", "": "empty key", "AB": "y"},
			Retry: &apitype.RetryPolicy{MaxAttempts: 5, InitialDelay: dur(time.Second), MaxDelay: dur(90 * time.Minute),
				Multiplier: 2, Jitter: ptr(0.0), FinalExitCodes: []int{2, -1}, MaxDisruptions: ptr(0)},
			Timeout: dur(1500 * time.Microsecond), Priority: ptr(-3), Enabled: ptr(false),
		},
		"empty collections": {Command: []string{}, Env: map[string]string{}, SecretEnv: map[string]string{},
			Args: json.RawMessage{}, Tags: []string{}, DependsOn: []apitype.Dependency{},
			Requirements: &apitype.Requirements{Labels: map[string]string{}}, Retry: &apitype.RetryPolicy{}},
		"negative zero": {Requirements: &apitype.Requirements{CPU: math.Copysign(0, -1)},
			Retry: &apitype.RetryPolicy{Multiplier: math.Copysign(0, -1), Jitter: ptr(math.Copysign(0, -1))}},
		"durations": {Timeout: dur(0), Delay: dur(-time.Nanosecond),
			Retry: &apitype.RetryPolicy{InitialDelay: dur(999 * time.Nanosecond), MaxDelay: dur(math.MinInt64)}},
		"rare fields": {
			Schedule: &apitype.Schedule{Cron: "0 * * * *", Timezone: "Europe/Berlin", Paused: true},
			RunAt:    ptr(time.Date(2030, 1, 2, 3, 4, 5, 600, time.FixedZone("x", -(3*3600+30*60)))),
			Concurrency: &apitype.Concurrency{Policy: "queue", Max: 2, Key: "<k>",
				Rate: &apitype.RateLimit{Rate: 5, Per: apitype.Duration(time.Minute)}},
			DependsOn:      []apitype.Dependency{{Run: "r1"}, {Ref: "a", Condition: "failed"}},
			IdempotencyKey: "k&1", Tags: []string{"a", "<b>"},
			Alerts: &apitype.JobAlerts{Off: true, ConsecutiveFailures: 3, LateAfter: dur(time.Hour)},
		},
		"bad args":    {Handler: "h", Args: json.RawMessage(`{"a":`)},
		"space args":  {Args: json.RawMessage(" \n")},
		"two values":  {Args: json.RawMessage(`1 2`)},
		"NaN cpu":     {Requirements: &apitype.Requirements{CPU: math.NaN()}},
		"Inf jitter":  {Retry: &apitype.RetryPolicy{Jitter: ptr(math.Inf(-1))}},
		"year 10000":  {RunAt: ptr(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))},
		"zone 24h":    {RunAt: ptr(time.Date(2030, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600)))},
		"args string": {Args: json.RawMessage(`"a\"<\\\"" `)},
	}
	for i, s := range oddStrings {
		specs["string "+s] = &apitype.JobSpec{Name: s, Command: []string{s, s}, Env: map[string]string{s: s, "k" + s: ""},
			Args: json.RawMessage(`{"s":` + string(mustMarshal(t, s)) + `,"raw":"` + s + `"}`), Tags: []string{s}}
		specs["string "+s].Queue = oddStrings[(i+1)%len(oddStrings)]
	}
	for _, f := range oddFloats {
		specs["float "+time.Duration(math.Float64bits(f)).String()] = &apitype.JobSpec{
			Requirements: &apitype.Requirements{CPU: f}, Retry: &apitype.RetryPolicy{Multiplier: f, Jitter: ptr(-f)}}
	}
	for name, s := range specs {
		t.Run(name, func(t *testing.T) {
			got, err := specjson.AppendJobSpec(clone(prefix), s)
			sameAsMarshal(t, s, prefix, got, err)
		})
	}
}

func TestAppendModelSpecTable(t *testing.T) {
	t.Parallel()
	specs := map[string]*model.JobSpec{
		"nil":     nil,
		"zero":    {},
		"typical": {Handler: "noop", Queue: "bench", Retry: model.RetryPolicy{MaxAttempts: 1}},
		"command": {
			Command: []string{"/bin/echo", "a&b"}, Args: json.RawMessage(`{"n": 1e400, "s": "\u003c"}`),
			Env: map[string]string{"Z": "z", "A": "a"}, Queue: "default", Priority: 7, Timeout: time.Minute,
			Retry: model.RetryPolicy{MaxAttempts: 3, InitialDelay: time.Second, MaxDelay: time.Hour, Multiplier: 2,
				Jitter: 0.1, RetryExitCodes: []int{75}, MaxDisruptions: ptr(3)},
		},
		"empty labels":  {Requirements: model.Requirements{Labels: map[string]string{}}},
		"negative zero": {Requirements: model.Requirements{CPU: math.Copysign(0, -1)}, Retry: model.RetryPolicy{Jitter: math.Copysign(0, -1)}},
		"requirements":  {Requirements: model.Requirements{CPU: 0.25, MemoryMB: 512, GPU: 1, Labels: map[string]string{"zone": "a", "arch": "arm64"}}},
		"rare fields": {
			Schedule:    &model.Schedule{Cron: "@hourly", Misfire: model.MisfireRunAll, MisfireLimit: 10},
			Concurrency: model.Concurrency{Rate: &model.RateLimit{Rate: 1, Per: time.Second}},
			DAG:         &model.DAGMember{ID: "d", Entry: "e", Runs: map[string]string{"b": "2", "a": "1"}},
			Alerts:      &model.JobAlerts{MaxDuration: time.Hour},
		},
		"concurrency key": {Concurrency: model.Concurrency{Key: "<{{.args.x}}>"}},
		"bad args":        {Args: json.RawMessage(`nope`)},
		"NaN multiplier":  {Retry: model.RetryPolicy{Multiplier: math.NaN()}},
		"Inf cpu":         {Requirements: model.Requirements{CPU: math.Inf(1)}},
	}
	for _, s := range oddStrings {
		specs["string "+s] = &model.JobSpec{Shell: s, Handler: s, Dir: s, Queue: s, SecretEnv: map[string]string{s: s}, Tags: []string{s, ""}}
	}
	for _, f := range oddFloats {
		specs["float "+time.Duration(math.Float64bits(f)).String()] = &model.JobSpec{
			Requirements: model.Requirements{CPU: f}, Retry: model.RetryPolicy{Multiplier: f, Jitter: -f}}
	}
	for name, s := range specs {
		t.Run(name, func(t *testing.T) {
			got, err := modelspec.Append(clone(prefix), s)
			sameAsMarshal(t, s, prefix, got, err)
			got, err = modelspec.Marshal(s)
			sameAsMarshal(t, s, nil, got, err)
		})
	}
}

func TestAppendBatchRequest(t *testing.T) {
	t.Parallel()
	for name, jobs := range map[string][]apitype.JobSpec{
		"nil":   nil,
		"empty": {},
		"one":   {{Handler: "noop", Queue: "bench"}},
		"three": {{Handler: "noop"}, {}, {Command: []string{"true"}, Args: json.RawMessage(`{"a": 1}`)}},
		"bad":   {{Handler: "noop"}, {Args: json.RawMessage(`{`)}, {Handler: "never reached"}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := specjson.AppendBatchRequest(clone(prefix), jobs)
			sameAsMarshal(t, &apitype.BatchCreateJobsRequest{Jobs: jobs}, prefix, got, err)
		})
	}
}

// FuzzAppendJobSpec: AppendJobSpec writes what json.Marshal writes for any spec, and fails
// where it fails, with its error. Seeds: below and testdata/fuzz/FuzzAppendJobSpec.
func FuzzAppendJobSpec(f *testing.F) {
	seed(f)
	f.Fuzz(func(t *testing.T, data, args []byte) {
		g := &gen{b: data}
		s := g.apiSpec(args)
		got, err := specjson.AppendJobSpec(clone(prefix), s)
		sameAsMarshal(t, s, prefix, got, err)
	})
}

// FuzzAppendModelSpec: modelspec.Append and Marshal write what json.Marshal writes for any
// spec, and fail where it fails, with its error. Seeds: below and testdata/fuzz/FuzzAppendModelSpec.
func FuzzAppendModelSpec(f *testing.F) {
	seed(f)
	f.Fuzz(func(t *testing.T, data, args []byte) {
		g := &gen{b: data}
		s := g.modelSpec(args)
		got, err := modelspec.Append(clone(prefix), s)
		sameAsMarshal(t, s, prefix, got, err)
		got, err = modelspec.Marshal(s)
		sameAsMarshal(t, s, nil, got, err)
	})
}

// seed adds inputs whose bytes set many fields, and args of every kind of JSON value.
func seed(f *testing.F) {
	var odd []byte
	for _, s := range oddStrings {
		odd = append(odd, byte(len(s)))
		odd = append(odd, s...)
	}
	all := make([]byte, 512)
	for i := range all {
		all[i] = byte(i*7 + 3)
	}
	for _, data := range [][]byte{nil, odd, all, []byte("\x02\x05<a&b>\x01\x02\x03\x04\x05\x06\x07\x08")} {
		for _, args := range []string{"", `{}`, ` { "a" : "<\u2028&>", "b":[1 , 2.5e-7, true, null, "\xff"] } `,
			`"s\"\\"`, `-0.0e+00`, `[{"x":{"y":[]}}]`, `{"a":`, "\t"} {
			f.Add(data, []byte(args))
		}
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }
