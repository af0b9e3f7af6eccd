package specjson_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/specjson"
	"github.com/stint-dev/stint/internal/specjson/modelspec"
)

// The specs of the benchmarks: the bench's own (a handler on a queue), and a command with
// args, env and a retry policy.
var (
	benchAPISpecs = map[string]*apitype.JobSpec{
		"small": {Handler: "noop", Queue: "bench"},
		"command": {
			Name: "report-7", Command: []string{"/usr/local/bin/report", "--format", "csv"},
			Args:  json.RawMessage(`{"customer":"c-1042","since":"2030-01-01","limit":500}`),
			Env:   map[string]string{"REGION": "eu-west-1", "LOG_LEVEL": "info", "TZ": "UTC"},
			Queue: "reports", Timeout: ptr(apitype.Duration(10 * time.Minute)),
			Retry: &apitype.RetryPolicy{MaxAttempts: 5, InitialDelay: ptr(apitype.Duration(time.Second)),
				MaxDelay: ptr(apitype.Duration(5 * time.Minute)), Multiplier: 2, Jitter: ptr(0.2)},
		},
	}
	benchModelSpecs = map[string]*model.JobSpec{
		"small": {Handler: "noop", Queue: "bench", Retry: model.RetryPolicy{MaxAttempts: 1}},
		"command": {
			Command: []string{"/usr/local/bin/report", "--format", "csv"},
			Args:    json.RawMessage(`{"customer":"c-1042","since":"2030-01-01","limit":500}`),
			Env:     map[string]string{"REGION": "eu-west-1", "LOG_LEVEL": "info", "TZ": "UTC"},
			Queue:   "reports", Timeout: 10 * time.Minute,
			Retry: model.RetryPolicy{MaxAttempts: 5, InitialDelay: time.Second, MaxDelay: 5 * time.Minute,
				Multiplier: 2, Jitter: 0.2},
		},
	}
)

// BenchmarkJobSpec compares AppendJobSpec, appending to a buffer used again (as a batch
// or a stream appends spec after spec), with json.Marshal.
func BenchmarkJobSpec(b *testing.B) {
	for _, name := range []string{"small", "command"} {
		s := benchAPISpecs[name]
		b.Run(name+"/json.Marshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(s); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/AppendJobSpec", func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				var err error
				if buf, err = specjson.AppendJobSpec(buf[:0], s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkModelSpec compares modelspec.Marshal (as the stores' encodeSpec calls it) with
// json.Marshal.
func BenchmarkModelSpec(b *testing.B) {
	for _, name := range []string{"small", "command"} {
		s := benchModelSpecs[name]
		b.Run(name+"/json.Marshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(s); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/modelspec.Marshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := modelspec.Marshal(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBatch compares AppendBatchRequest with json.Marshal on the body of a batch of
// 1000 small specs, each into a fresh buffer as the SDK and the bench encode it.
func BenchmarkBatch(b *testing.B) {
	req := &apitype.BatchCreateJobsRequest{Jobs: make([]apitype.JobSpec, 1000)}
	for i := range req.Jobs {
		req.Jobs[i] = *benchAPISpecs["small"]
	}
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendBatchRequest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := specjson.AppendBatchRequest(make([]byte, 0, 16+64*len(req.Jobs)), req.Jobs); err != nil {
				b.Fatal(err)
			}
		}
	})
}
