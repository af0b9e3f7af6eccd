// Package modelspec writes the stored form of a job spec, the JSON of a model.JobSpec,
// without reflection: byte for byte what encoding/json writes. Both stores write it for
// every job and for the run row of every one-off job. Its tests, table and fuzz, are in
// internal/specjson beside those of the SDK's encoder, sharing their spec generator.
package modelspec

import (
	"bytes"
	"encoding/json"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/specjson/internal/jsonw"
)

// Append appends to dst the bytes json.Marshal(s) returns, and json.Marshal's error when it
// fails (Args that is not valid JSON, a NaN or infinite float): dst is then returned as it
// was.
func Append(dst []byte, s *model.JobSpec) ([]byte, error) {
	if b, ok := appendSpec(dst, s); ok {
		return b, nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// Marshal returns json.Marshal(s): its bytes in a slice of their own length, or its error.
// A spec that fits in 512 bytes (most do) costs one allocation of its size.
func Marshal(s *model.JobSpec) ([]byte, error) {
	var buf [512]byte
	b, err := Append(buf[:0], s)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(b), nil
}

// appendSpec writes s field by field in the order and under the omitempty and omitzero
// rules of model.JobSpec's tags; the rarely set nested fields go through encoding/json. ok
// is false where encoding/json would fail (Append then asks it for its error); what it
// appended to dst by then is garbage.
func appendSpec(dst []byte, s *model.JobSpec) (_ []byte, ok bool) {
	if s == nil {
		return append(dst, "null"...), true
	}
	o := jsonw.Object(dst)
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
	o = o.String("queue", s.Queue)
	if s.Priority != 0 {
		o = o.Int("priority", int64(s.Priority))
	}
	// omitzero: reflect's IsZero, field by field (a non-nil empty Labels is not zero).
	if r := &s.Requirements; r.CPU != 0 || r.MemoryMB != 0 || r.GPU != 0 || r.Labels != nil {
		o = o.Key("requirements")
		if o.B, ok = jsonw.Requirements(o.B, r.CPU, r.MemoryMB, r.GPU, r.Labels); !ok {
			return dst, false
		}
	}
	if s.Timeout != 0 {
		o = o.Int("timeout", int64(s.Timeout))
	}
	o = o.Key("retry")
	if o.B, ok = appendRetry(o.B, &s.Retry); !ok {
		return dst, false
	}
	if s.Schedule != nil {
		if o, ok = o.Marshal("schedule", s.Schedule); !ok {
			return dst, false
		}
	}
	if s.Concurrency != (model.Concurrency{}) {
		if o, ok = o.Marshal("concurrency", &s.Concurrency); !ok {
			return dst, false
		}
	}
	if len(s.Tags) > 0 {
		o = o.Strings("tags", s.Tags)
	}
	if s.DAG != nil {
		if o, ok = o.Marshal("dag", s.DAG); !ok {
			return dst, false
		}
	}
	if s.Alerts != nil {
		if o, ok = o.Marshal("alerts", s.Alerts); !ok {
			return dst, false
		}
	}
	return o.End(), true
}

// appendRetry writes model.RetryPolicy (its durations are integers of nanoseconds).
func appendRetry(dst []byte, r *model.RetryPolicy) (_ []byte, ok bool) {
	o := jsonw.Object(dst)
	o = o.Int("max_attempts", int64(r.MaxAttempts))
	if r.InitialDelay != 0 {
		o = o.Int("initial_delay", int64(r.InitialDelay))
	}
	if r.MaxDelay != 0 {
		o = o.Int("max_delay", int64(r.MaxDelay))
	}
	if r.Multiplier != 0 {
		if o, ok = o.Float("multiplier", r.Multiplier); !ok {
			return dst, false
		}
	}
	if r.Jitter != 0 {
		if o, ok = o.Float("jitter", r.Jitter); !ok {
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
