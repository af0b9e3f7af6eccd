package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/sqlite"
)

// nullCreates is a store whose CreateJobs writes nothing and answers every entry as
// created: benchmarks of the API's own cost per job use it.
type nullCreates struct{ *sqlite.Store }

func (nullCreates) CreateJobs(_ context.Context, p *store.CreateJobsParams) ([]store.CreateJobResult, error) {
	out := make([]store.CreateJobResult, len(p.Jobs))
	for i, nj := range p.Jobs {
		out[i] = store.CreateJobResult{Job: nj.Job, Run: nj.Run}
	}
	return out, nil
}

var _ model.Job

func benchSpecs(n int) []apitype.JobSpec {
	out := make([]apitype.JobSpec, n)
	for i := range out {
		out[i] = apitype.JobSpec{Handler: "noop", Queue: "bench", Args: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)}
	}
	return out
}

func BenchmarkBatchRoute(b *testing.B) {
	tb := setupStore(b, clock.Real{}, func(s *sqlite.Store) store.Store { return nullCreates{s} }, nil)
	const n = 1000
	body, err := json.Marshal(apitype.BatchCreateJobsRequest{Jobs: benchSpecs(n)})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime(b)
	for b.Loop() {
		req := httptest.NewRequest("POST", "/v1/jobs/batch", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Prefer", "return=minimal")
		rec := httptest.NewRecorder()
		tb.handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	reportPerJob(b, start, n)
}

func BenchmarkStreamRoute(b *testing.B) {
	tb := setupStore(b, clock.Real{}, func(s *sqlite.Store) store.Store { return nullCreates{s} }, nil)
	const n = 1000
	var body []byte
	for _, s := range benchSpecs(n) {
		line, err := json.Marshal(s)
		if err != nil {
			b.Fatal(err)
		}
		body = append(append(body, line...), '\n')
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime(b)
	for b.Loop() {
		req := httptest.NewRequest("POST", "/v1/jobs/stream", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set("Prefer", "return=minimal")
		rec := httptest.NewRecorder()
		tb.handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	reportPerJob(b, start, n)
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportPerJob reports the wall and CPU time per job of b's loop of n jobs per op.
func reportPerJob(b *testing.B, cpuStart time.Duration, n int) {
	cpu := cpuTime(b) - cpuStart
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/job")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*n), "cpu-ns/job")
}
