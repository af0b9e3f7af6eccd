package api

import (
	"bufio"
	"bytes"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
)

// FuzzJobSpec feeds arbitrary bodies through the POST /v1/jobs parser: decoding and
// validation. Whatever the input, it must not panic; it is either a valid job (with a run
// whose status is queued or scheduled) or a 400 that names at least one field or says where
// the JSON broke. Seeds live in testdata/fuzz/FuzzJobSpec; run with
// `go test -fuzz FuzzJobSpec ./internal/api/`.
func FuzzJobSpec(f *testing.F) {
	seeds := []string{
		`{"command":["echo","hi"]}`,
		`{"shell":"echo hi | tr a-z A-Z","queue":"q","priority":5}`,
		`{"handler":"noop","retry":{"max_attempts":3,"initial_delay":"1s","max_delay":"1m","multiplier":2,"jitter":0.2}}`,
		`{"command":["true"],"run_at":"2030-01-01T00:00:00Z"}`,
		`{"command":["true"],"delay":"5m","timeout":"90s","args":{"k":"v"},"env":{"A":"b"}}`,
		`{"command":["true"],"shell":"x"}`,
		`{"command":[""],"priority":100000}`,
		`{"command":["true"],"bogus":1}`,
		`{"command":["true"],"requirements":{"cpu":-1,"memory_mb":256,"labels":{"zone":"eu"}}}`,
		`{"command":["true"],"timeout":"soon"}`,
		`{"command":["true"],"args":[1,2]}`,
		`{"shell":"true","concurrency":{"key":"{{range 100}}{{range 100}}{{range 100}}{{range 100}}x{{end}}{{end}}{{end}}{{end}}","max":1}}`,
		`{"command":`,
		`{} {}`,
		`[]`,
		``,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte) {
		var spec apitype.JobSpec
		if err := decodeJSON(body, &spec); err != nil {
			requireBadRequest(t, err)
			return
		}
		vj, errs := buildJob(&spec, "", now, defLim(), sealing{})
		if len(errs) > 0 {
			for _, e := range errs {
				if e.Field == "" || e.Message == "" {
					t.Fatalf("field error without field or message: %+v", e)
				}
			}
			return
		}
		if vj.Job == nil || vj.Job.ID == "" || vj.Job.Name == "" {
			t.Fatalf("valid spec gave no job: %+v", vj)
		}
		if vj.Run != nil && vj.Run.Status != "queued" && vj.Run.Status != "scheduled" {
			t.Fatalf("new run in state %q", vj.Run.Status)
		}
	})
}

func requireBadRequest(t *testing.T, err error) {
	t.Helper()
	var he *httpError
	if !errors.As(err, &he) || he.status != http.StatusBadRequest {
		t.Fatalf("decode error is not a 400: %v", err)
	}
	if he.detail == "" && len(he.fields) == 0 {
		t.Fatalf("400 says nothing: %+v", he)
	}
}

// FuzzDAG feeds arbitrary bodies through the POST /v1/dags parser and the checks that need
// no store: decoding, every entry's spec, refs and cycles. It never panics; a refused body
// is a 400 naming a field or saying where the JSON broke; an accepted one has a job and a
// run per entry, edges only to entries that exist, and an order (no cycle). Seeds:
// testdata/fuzz/FuzzDAG.
func FuzzDAG(f *testing.F) {
	for _, s := range []string{
		`{"runs": {"extract": {"command": ["./extract"]}, "load": {"shell": "load", "depends_on": [{"ref": "extract"}]}}}`,
		`{"namespace": "etl", "runs": {"a": {"handler": "noop", "depends_on": [{"ref": "b", "condition": "failed"}]}, "b": {"handler": "noop", "depends_on": [{"ref": "a"}]}}}`,
		`{"runs": {"a": {"handler": "noop", "depends_on": [{"ref": "a"}]}}}`,
		`{"runs": {"a": {"handler": "noop", "depends_on": [{"run": "r1"}, {"ref": "nope"}]}}}`,
		`{"runs": {"a b": {"handler": "noop"}, "c": {"handler": "noop", "schedule": {"cron": "@daily"}}}}`,
		`{"runs": {}}`,
		`{"runs": {"a": {"handler": "noop", "concurrency": {"key": "{{range 100}}{{range 100}}{{range 100}}{{range 100}}x{{end}}{{end}}{{end}}{{end}}"}}}}`,
	} {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lim := DefaultLimits()
	lim.MaxDAGRuns = 100
	f.Fuzz(func(t *testing.T, body []byte) {
		var req apitype.DAGRequest
		if err := decodeJSON(body, &req); err != nil {
			requireBadRequest(t, err)
			return
		}
		plan, err := buildDAG(&req, now, &lim, nil)
		if err != nil {
			requireBadRequest(t, err)
			return
		}
		if len(plan.entries) != len(req.Runs) || len(plan.names) != len(req.Runs) {
			t.Fatalf("%d entries for %d runs", len(plan.entries), len(req.Runs))
		}
		for i, en := range plan.entries {
			if en.Job == nil || en.Run == nil {
				t.Fatalf("entry %q without a job or a run", plan.names[i])
			}
			for _, d := range en.Deps {
				if d.RunID == "" && (d.Entry < 0 || d.Entry >= len(plan.entries) || d.Entry == i) {
					t.Fatalf("entry %q depends on entry %d", plan.names[i], d.Entry)
				}
			}
		}
		if _, err := scheduler.OrderGraph(plan.entries); err != nil {
			t.Fatalf("accepted a graph that has no order: %v", err)
		}
	})
}

// FuzzWorkerProtocol feeds arbitrary bodies through the decoders and checks of the worker
// protocol's routes (kind picks the route): register, lease, heartbeat, logs, complete. It
// never panics, and refuses with a 400 that names a field or where the JSON broke. Seeds:
// testdata/fuzz/FuzzWorkerProtocol.
func FuzzWorkerProtocol(f *testing.F) {
	for _, s := range []struct {
		kind uint8
		body string
	}{
		{0, `{"id": "w1", "capacity": {"cpu": 2, "memory_mb": 1024, "gpu": 0, "slots": 2}, "labels": {"zone": "a"}, "handlers": ["noop"], "commands": true}`},
		{0, `{"id": "w1", "session": "s", "held": [{"run_id": "r", "token": "t"}], "capacity": {"cpu": 1e308, "slots": -1}}`},
		{1, `{"max": 10, "wait": "30s", "session": "s"}`},
		{1, `{"max": -1, "wait": "-1s"}`},
		{2, `{"session": "s", "held": [{"run_id": "r1", "token": "t1"}, {"run_id": ""}]}`},
		{3, `{"chunks": [{"run_id": "r", "attempt": 1, "seq": 1, "stream": "stdout", "data": "hi\n", "token": "t"}]}`},
		{3, `{"chunks": [{"run_id": "r", "attempt": 0, "seq": -1, "stream": "stdin", "data": "\u0000"}]}`},
		{4, `{"completions": [{"run_id": "r", "token": "t", "status": "failed", "exit_code": 1, "error": "boom"}]}`},
		{4, `{"completions": [{"run_id": "r", "status": "done"}]}`},
	} {
		f.Add(s.kind, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		var err error
		switch kind % 5 {
		case 0:
			var req apitype.RegisterRequest
			if err = decodeJSON(body, &req); err == nil {
				_, err = registerParams(&req)
			}
		case 1:
			var req apitype.LeaseRequest
			if err = decodeJSON(body, &req); err == nil {
				_, err = leaseParams(&req)
			}
		case 2:
			var req apitype.HeartbeatRequest
			if err = decodeJSON(body, &req); err == nil {
				_, err = heartbeatParams(&req)
			}
		case 3:
			var req apitype.LogChunksRequest
			if err = decodeJSON(body, &req); err == nil {
				var chunks []model.LogChunk
				chunks, err = logChunks(&req, "")
				if err == nil && len(chunks) != len(req.Chunks) {
					t.Fatalf("%d chunks for %d", len(chunks), len(req.Chunks))
				}
			}
		case 4:
			var req apitype.CompleteRequest
			if err = decodeJSON(body, &req); err == nil {
				_, err = completions(&req)
			}
		}
		if err != nil {
			requireBadRequest(t, err)
		}
	})
}

// FuzzJobStream feeds arbitrary bodies through the reader of POST /v1/jobs/stream (with a
// tiny buffer and line limit, so long lines take their own path) and checks it against
// POST /v1/jobs's parser line by line: every non-blank line is answered once, in order,
// with its number; a line over the limit is a 413; any other line is refused exactly as
// decodeJSON and buildJob refuse it, or gives the same job spec. Seeds:
// testdata/fuzz/FuzzJobStream.
func FuzzJobStream(f *testing.F) {
	for _, s := range []string{
		"{\"command\":[\"a\"]}\n{\"shell\":\"b\"}\n",
		"{\"command\":[\"a\"]}\r\n\n  \n{\"handler\":\"h\",\"queue\":\"q\"}",
		"{\"command\":[\"" + strings.Repeat("x", 80) + "\"]}\n{\"command\":[\"b\"]}\n",
		"{\"command\":\n[\"a\"]}\n",
		"{} {}\n{\"command\":[\"a\"]} x\n{\"command\":[\"b\"]}\n",
		"{\"command\":[\"a\"],\"bogus\":1}\n{\"command\":[\"a\"]}\n",
		"[1]\nnull\n\"s\"\n{\"shell\":\"a\",\"args\":{\"k\":[1,{\"x\":null}]}}\n",
	} {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lim := DefaultLimits()
	const maxLine = 64
	a := &API{clock: clock.NewFake(now), lim: &lim}
	f.Fuzz(func(t *testing.T, body []byte) {
		rd := &streamReader{a: a, ctx: t.Context(), body: bytes.NewReader(body), lines: lineReader{max: maxLine}}
		rd.lines.br = bufio.NewReaderSize(deadlineReader{rd}, 16)
		out := make(chan streamChunk)
		go rd.run(out)
		var got []streamItem
		for chunk := range out {
			got = append(got, chunk.items...)
		}
		if rd.err != nil {
			t.Fatalf("reading a whole body: %v", rd.err)
		}
		segs := bytes.SplitAfter(body, []byte("\n"))
		k := 0
		for i, seg := range segs {
			line := i + 1
			content := bytes.TrimSuffix(seg, []byte("\n"))
			tooLong := len(content) > maxLine
			if !tooLong && len(bytes.TrimSpace(content)) == 0 {
				continue
			}
			if k == len(got) {
				t.Fatalf("line %d (%q) not answered", line, seg)
			}
			it := got[k]
			k++
			if it.line != line {
				t.Fatalf("answer %d is for line %d, want %d", k, it.line, line)
			}
			if tooLong {
				if it.err == nil || problemFor(it.err).Status != http.StatusRequestEntityTooLarge {
					t.Fatalf("line %d is %d bytes, answered %v", line, len(content), it.err)
				}
				continue
			}
			var spec apitype.JobSpec
			want := decodeJSON(seg, &spec)
			var vj *validJob
			if want == nil {
				var errs []apitype.FieldError
				if vj, errs = buildJob(&spec, "", now, &lim, sealing{}); len(errs) > 0 {
					want = invalidFields(errs)
				}
			}
			switch {
			case (want == nil) != (it.err == nil):
				t.Fatalf("line %d %q: the stream says %v, POST /v1/jobs %v", line, seg, it.err, want)
			case want != nil:
				if g, w := problemFor(it.err), problemFor(want); !reflect.DeepEqual(g, w) {
					t.Fatalf("line %d %q: the stream says %+v, POST /v1/jobs %+v", line, seg, g, w)
				}
			case !reflect.DeepEqual(it.job.Job.Spec, vj.Job.Spec) || it.job.Job.Namespace != vj.Job.Namespace:
				t.Fatalf("line %d %q: the stream made %+v, POST /v1/jobs %+v", line, seg, it.job.Job.Spec, vj.Job.Spec)
			}
		}
		if k != len(got) {
			t.Fatalf("%d answers for %d lines", len(got), k)
		}
	})
}
