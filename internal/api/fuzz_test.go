package api

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stint-dev/stint/apitype"
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
		vj, errs := buildJob(&spec, "", now, defLim())
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
