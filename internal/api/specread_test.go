package api

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/stint-dev/stint/apitype"
)

// specsRead are specs the fast path must read itself: the common ones, and every field.
var specsRead = []string{
	`{"handler":"noop","queue":"bench"}`,
	`{}`,
	`{"command":["echo","hi"],"args":{"n":1,"s":"a\"b\\u00e9","l":[1,2.5e3,null,true,{}]},"env":{"A":"b","":""}}`,
	` { "name" : "nightly" ,"namespace":"etl", "shell":"echo é ☃ | tr a-z A-Z","dir":"/tmp" }` + "\n\t\r ",
	`{"queue":"q","priority":-12,"enabled":false,"tags":["a","b"],"idempotency_key":"k-1"}`,
	`{"priority":0,"enabled":true,"tags":[],"command":[],"env":{},"secret_env":{"TOKEN":"x"}}`,
	`{"requirements":{"cpu":0.25,"memory_mb":512,"gpu":1,"labels":{"zone":"eu","disk":"ssd"}}}`,
	`{"requirements":{"cpu":-1e-3}}`,
	`{"requirements":{}}`,
	`{"handler":"h","timeout":"90s","delay":"5m","run_at":"2030-01-01T00:00:00Z"}`,
	`{"handler":"h","retry":{"max_attempts":3,"initial_delay":"1s","max_delay":"1m","multiplier":2,"jitter":0.2,"final_exit_codes":[2]}}`,
	`{"handler":"h","schedule":{"cron":"0 3 * * *","timezone":"Europe/Paris","misfire":"skip"}}`,
	`{"handler":"h","concurrency":{"policy":"forbid","max":2}}`,
	`{"handler":"h","depends_on":[{"run":"r1"},{"ref":"j","condition":"failed"}],"alerts":{"off":true}}`,
	`{"args":"text"}`,
	`{"args":-0.5e+7}`,
	`{"args":[]}`,
	`{"args":false}`,
	`{"args":"}"}`,
	`{"args":[{"a":"]"}]}`,
	`{"priority":999999999999999999}`,
}

// specsLeft are specs the fast path must leave to encoding/json: what it might read
// differently or refuses, and what is not a spec.
var specsLeft = []string{
	`{"handler":"a\"b"}`,                 // an escape
	`{"handler":"\u00e9"}`,               // an escape
	"{\"handler\":\"\xff\"}",             // not UTF-8: encoding/json makes it U+FFFD
	"{\"handler\":\"a\tb\"}",             // a control character: a syntax error
	`{"Handler":"noop"}`,                 // encoding/json folds case
	`{"handler":"a","handler":"b"}`,      // repeated
	`{"env":{"A":"1","A":"2"}}`,          // repeated
	`{"requirements":{"cpu":1,"cpu":2}}`, // repeated
	`{"handler":null}`,
	`{"env":{"A":null}}`,
	`{"requirements":{"labels":null}}`,
	`{"priority":1.0}`,
	`{"priority":1e2}`,
	`{"priority":01}`,
	`{"priority":-}`,
	`{"priority":9999999999999999999}`,
	`{"requirements":{"cpu":1e999}}`,
	`{"requirements":{"cpu":.5}}`,
	`{"enabled":tru}`,
	`{"enabled":"true"}`,
	`{"args":{"a":}}`,
	`{"args":[1,2}`,
	`{"args":"open`,
	`{"args":tru}`,
	`{"timeout":"soon"}`,
	`{"retry":{"bogus":1}}`,
	`{"bogus":1}`,
	`{"handler":"noop"} x`,
	`{"handler":"noop"}{}`,
	`{"handler":"noop",}`,
	`{"handler" "noop"}`,
	`{"handler":"noop"`,
	`[]`,
	`null`,
	``,
}

func TestReadSpec(t *testing.T) {
	for _, body := range specsRead {
		var got, want apitype.JobSpec
		if !readSpec([]byte(body), &got) {
			t.Errorf("the fast path left %s to encoding/json", body)
			continue
		}
		if err := decodeJSON([]byte(body), &want); err != nil {
			t.Fatalf("decodeJSON %s: %v", body, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n fast path    %+v\n encoding/json %+v", body, got, want)
		}
	}
	for _, body := range specsLeft {
		var s apitype.JobSpec
		if readSpec([]byte(body), &s) {
			t.Errorf("the fast path read %s (%+v)", body, s)
		}
		// decodeSpec answers as decodeJSON does, error or spec.
		var got, want apitype.JobSpec
		gotErr, wantErr := decodeSpec([]byte(body), &got), decodeRead([]byte(body), &want, false)
		if !reflect.DeepEqual(gotErr, wantErr) || !reflect.DeepEqual(got, want) {
			t.Errorf("decodeSpec %s: %+v, %v; decodeRead %+v, %v", body, got, gotErr, want, wantErr)
		}
	}
}

func TestReadBatch(t *testing.T) {
	read := []string{
		`{"jobs":[` + strings.Join(specsRead, ",") + `]}`,
		`{"jobs":[]}`,
		" {\n \"jobs\" : [ {\"handler\":\"a\"} , {\"handler\":\"a\"} ] } \n",
	}
	for _, body := range read {
		var got, want apitype.BatchCreateJobsRequest
		if !readBatch([]byte(body), &got) {
			t.Errorf("the fast path left %s to encoding/json", body)
			continue
		}
		if err := decodeJSON([]byte(body), &want); err != nil {
			t.Fatalf("decodeJSON %s: %v", body, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n fast path    %+v\n encoding/json %+v", body, got, want)
		}
	}
	// Entries that repeat a queue or handler share its string.
	var req apitype.BatchCreateJobsRequest
	if !readBatch([]byte(read[2]), &req) {
		t.Fatal("not read")
	}
	if a, b := req.Jobs[0].Handler, req.Jobs[1].Handler; a != "a" || b != "a" || !sameString(a, b) {
		t.Errorf("handlers %q and %q are two strings", a, b)
	}
	left := []string{
		`{"jobs":[{"handler":"a"},{"Handler":"b"}]}`,
		`{"jobs":[{"handler":"a"}],"jobs":[]}`,
		`{"Jobs":[]}`,
		`{"jobs":null}`,
		`{"jobs":[null]}`,
		`{"jobs":[{"handler":"a"},]}`,
		`{"jobs":{}}`,
		`{}`,
		`{"jobs":[]} []`,
	}
	for _, body := range left {
		var req apitype.BatchCreateJobsRequest
		if readBatch([]byte(body), &req) {
			t.Errorf("the fast path read %s (%+v)", body, req)
		}
	}
}

// sameString reports whether a and b share their bytes.
func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// FuzzSpecReader holds the fast path to encoding/json: a body it reads, as a spec or as the
// one entry of a batch, decodeJSON reads too, to the same value. (It may leave any body to
// encoding/json; TestReadSpec says which it must read.)
func FuzzSpecReader(f *testing.F) {
	for _, s := range append(specsRead, specsLeft...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got, want apitype.JobSpec
		if readSpec(body, &got) {
			if err := decodeJSON(body, &want); err != nil {
				t.Fatalf("the fast path read %q, decodeJSON refused it: %v", body, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%q:\n fast path     %#v\n encoding/json %#v", body, got, want)
			}
		}
		batch := append(append([]byte(`{"jobs":[`), body...), "]}"...)
		var gotReq, wantReq apitype.BatchCreateJobsRequest
		if readBatch(batch, &gotReq) {
			if err := decodeJSON(batch, &wantReq); err != nil {
				t.Fatalf("the fast path read %q, decodeJSON refused it: %v", batch, err)
			}
			if !reflect.DeepEqual(gotReq, wantReq) {
				t.Fatalf("%q:\n fast path     %#v\n encoding/json %#v", batch, gotReq, wantReq)
			}
		}
	})
}
