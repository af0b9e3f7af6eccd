package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/sqlite"
)

// nullCreates is a store whose CreateJobs writes nothing and answers every entry as
// created: with it a benchmark measures the API's own cost per job.
type nullCreates struct{ *sqlite.Store }

func (nullCreates) CreateJobs(_ context.Context, p *store.CreateJobsParams) ([]store.CreateJobResult, error) {
	out := make([]store.CreateJobResult, len(p.Jobs))
	for i, nj := range p.Jobs {
		out[i] = store.CreateJobResult{Job: nj.Job, Run: nj.Run}
	}
	return out, nil
}

// BenchmarkBulkSubmit is the server's cost of submitting 10,000 jobs through POST
// /v1/jobs/batch and POST /v1/jobs/stream, both with the minimal answer, through the whole
// handler (authentication off, audit on): "api" with a store that writes nothing (the API's
// own decoding, validation and answer), "sqlite" with a real store. Besides ns/op and
// allocs/op (per 10,000 jobs) it reports per job the wall time, the process's CPU time
// (every goroutine: the handler, the committer, the audit writer, the GC) and the
// allocations.
//
//	go test ./internal/api -run XXX -bench BulkSubmit -benchtime 20x
func BenchmarkBulkSubmit(b *testing.B) {
	const n = 10000 // a batch's most
	specs := make([]apitype.JobSpec, n)
	var stream []byte
	for i := range specs {
		specs[i] = apitype.JobSpec{Handler: "noop", Queue: "bench", Args: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)}
		line, err := json.Marshal(specs[i])
		if err != nil {
			b.Fatal(err)
		}
		stream = append(append(stream, line...), '\n')
	}
	batch, err := json.Marshal(apitype.BatchCreateJobsRequest{Jobs: specs})
	if err != nil {
		b.Fatal(err)
	}
	routes := []struct {
		name, path, contentType string
		body                    []byte
		status                  int
	}{
		{"batch", "/v1/jobs/batch", "application/json", batch, http.StatusCreated},
		{"stream", "/v1/jobs/stream", apitype.JobStreamMediaType, stream, http.StatusOK},
	}
	stores := []struct {
		name string
		wrap func(*sqlite.Store) store.Store
	}{
		{"api", func(s *sqlite.Store) store.Store { return nullCreates{s} }},
		{"sqlite", nil},
	}
	for _, st := range stores {
		for _, rt := range routes {
			b.Run(st.name+"/"+rt.name, func(b *testing.B) {
				tb := setupStore(b, clock.Real{}, st.wrap, nil)
				var mem runtime.MemStats
				runtime.ReadMemStats(&mem)
				mallocs, cpu := mem.Mallocs, cpuTime(b)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					req := httptest.NewRequest("POST", rt.path, bytes.NewReader(rt.body))
					req.Header.Set("Content-Type", rt.contentType)
					req.Header.Set("Prefer", "return=minimal")
					rec := httptest.NewRecorder()
					tb.handler.ServeHTTP(rec, req)
					if rec.Code != rt.status {
						b.Fatalf("status %d: %s", rec.Code, rec.Body)
					}
				}
				b.StopTimer()
				cpu = cpuTime(b) - cpu
				runtime.ReadMemStats(&mem)
				jobs := float64(b.N * n)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/jobs, "ns/job")
				b.ReportMetric(float64(cpu.Nanoseconds())/jobs, "cpu-ns/job")
				b.ReportMetric(float64(mem.Mallocs-mallocs)/jobs, "allocs/job")
			})
		}
	}
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
