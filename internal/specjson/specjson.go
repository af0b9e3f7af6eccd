// Package specjson writes the JSON encodings of job specs without reflection, byte for byte
// what encoding/json writes: the SDK's batch and stream submissions (apitype.JobSpec) and,
// in package modelspec, the stores' stored form of a job (model.JobSpec). It imports only
// apitype and the standard library, so that the SDK (package client) may use it.
package specjson

import (
	"encoding/json"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/specjson/internal/jsonw"
)

// AppendJobSpec appends to dst the bytes json.Marshal(s) returns, and json.Marshal's error
// when it fails (invalid Args, a NaN or infinite float, a RunAt outside the years 0 to
// 9999): dst is then returned as it was.
func AppendJobSpec(dst []byte, s *apitype.JobSpec) ([]byte, error) {
	if b, ok := appendJobSpec(dst, s); ok {
		return b, nil
	}
	return appendMarshal(dst, s)
}

// AppendBatchRequest appends to dst the bytes json.Marshal returns for an
// apitype.BatchCreateJobsRequest of jobs (the body of POST /v1/jobs/batch), and its error
// when it fails (see AppendJobSpec): dst is then returned as it was.
func AppendBatchRequest(dst []byte, jobs []apitype.JobSpec) ([]byte, error) {
	n := len(dst)
	if jobs == nil {
		return append(dst, `{"jobs":null}`...), nil
	}
	dst = append(dst, `{"jobs":[`...)
	for i := range jobs {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = AppendJobSpec(dst, &jobs[i]); err != nil {
			return dst[:n], err
		}
	}
	return append(dst, "]}"...), nil
}

// appendMarshal appends json.Marshal(v): the way out for what the hand-written encoders
// leave to encoding/json, errors above all (its error, with dst as it was).
func appendMarshal(dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// appendJobSpec writes s field by field in the order and under the omitempty rules of
// apitype.JobSpec's tags; the rarely set nested fields go through encoding/json. ok is false
// where encoding/json would fail (AppendJobSpec then asks it for its error); what it
// appended to dst by then is garbage.
func appendJobSpec(dst []byte, s *apitype.JobSpec) (_ []byte, ok bool) {
	if s == nil {
		return append(dst, "null"...), true
	}
	o := jsonw.Object(dst)
	if s.Name != "" {
		o = o.String("name", s.Name)
	}
	if s.Namespace != "" {
		o = o.String("namespace", s.Namespace)
	}
	if len(s.Command) > 0 {
		o = o.Strings("command", s.Command)
	}
	if s.Shell != "" {
		o = o.String("shell", s.Shell)
	}
	if s.Handler != "" {
		o = o.String("handler", s.Handler)
	}
	if len(s.Args) > 0 {
		if o, ok = o.Raw("args", s.Args); !ok {
			return dst, false
		}
	}
	if len(s.Env) > 0 {
		o = o.StringMap("env", s.Env)
	}
	if len(s.SecretEnv) > 0 {
		o = o.StringMap("secret_env", s.SecretEnv)
	}
	if s.Dir != "" {
		o = o.String("dir", s.Dir)
	}
	if s.Queue != "" {
		o = o.String("queue", s.Queue)
	}
	if s.Priority != nil {
		o = o.Int("priority", int64(*s.Priority))
	}
	if r := s.Requirements; r != nil {
		o = o.Key("requirements")
		if o.B, ok = jsonw.Requirements(o.B, r.CPU, r.MemoryMB, r.GPU, r.Labels); !ok {
			return dst, false
		}
	}
	if s.Timeout != nil {
		o = o.Duration("timeout", s.Timeout.Std())
	}
	if r := s.Retry; r != nil {
		o = o.Key("retry")
		if o.B, ok = appendRetry(o.B, r); !ok {
			return dst, false
		}
	}
	if s.Schedule != nil {
		if o, ok = o.Marshal("schedule", s.Schedule); !ok {
			return dst, false
		}
	}
	if s.RunAt != nil {
		b, err := s.RunAt.MarshalJSON() // a quoted RFC 3339 time: nothing to compact or escape
		if err != nil {
			return dst, false
		}
		o = o.Key("run_at")
		o.B = append(o.B, b...)
	}
	if s.Delay != nil {
		o = o.Duration("delay", s.Delay.Std())
	}
	if s.Concurrency != nil {
		if o, ok = o.Marshal("concurrency", s.Concurrency); !ok {
			return dst, false
		}
	}
	if len(s.DependsOn) > 0 {
		if o, ok = o.Marshal("depends_on", s.DependsOn); !ok {
			return dst, false
		}
	}
	if s.IdempotencyKey != "" {
		o = o.String("idempotency_key", s.IdempotencyKey)
	}
	if s.Enabled != nil {
		o = o.Bool("enabled", *s.Enabled)
	}
	if len(s.Tags) > 0 {
		o = o.Strings("tags", s.Tags)
	}
	if s.Alerts != nil {
		if o, ok = o.Marshal("alerts", s.Alerts); !ok {
			return dst, false
		}
	}
	return o.End(), true
}

// appendRetry writes apitype.RetryPolicy.
func appendRetry(dst []byte, r *apitype.RetryPolicy) (_ []byte, ok bool) {
	o := jsonw.Object(dst)
	if r.MaxAttempts != 0 {
		o = o.Int("max_attempts", int64(r.MaxAttempts))
	}
	if r.InitialDelay != nil {
		o = o.Duration("initial_delay", r.InitialDelay.Std())
	}
	if r.MaxDelay != nil {
		o = o.Duration("max_delay", r.MaxDelay.Std())
	}
	if r.Multiplier != 0 {
		if o, ok = o.Float("multiplier", r.Multiplier); !ok {
			return dst, false
		}
	}
	if r.Jitter != nil {
		if o, ok = o.Float("jitter", *r.Jitter); !ok {
			return dst, false
		}
	}
	if len(r.FinalExitCodes) > 0 {
		o = o.Ints("final_exit_codes", r.FinalExitCodes)
	}
	if len(r.RetryExitCodes) > 0 {
		o = o.Ints("retry_exit_codes", r.RetryExitCodes)
	}
	if r.MaxDisruptions != nil {
		o = o.Int("max_disruptions", int64(*r.MaxDisruptions))
	}
	return o.End(), true
}
