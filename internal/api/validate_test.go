package api

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
)

func TestBuildJob(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

	tests := []struct {
		name string
		body string
		// want lists the fields that must be reported, in order; empty means valid.
		want []string
		// check inspects a valid result.
		check func(t *testing.T, vj *validJob)
	}{
		{
			name: "minimal command gets defaults and a queued run",
			body: `{"command": ["echo", "hi"]}`,
			check: func(t *testing.T, vj *validJob) {
				j := vj.Job
				require.Equal(t, j.ID, j.Name, "name defaults to the id")
				require.Equal(t, model.DefaultNamespace, j.Namespace)
				require.Equal(t, model.DefaultQueue, j.Spec.Queue)
				require.True(t, j.Enabled)
				require.Equal(t, 1, j.Spec.Retry.MaxAttempts)
				require.InDelta(t, 2.0, j.Spec.Retry.Multiplier, 0)
				require.Zero(t, j.Spec.Retry.Jitter, "no jitter without retries")
				require.Empty(t, j.RequestHash, "no idempotency key: nothing compares the hash")
				require.NotNil(t, vj.Run)
				require.Equal(t, model.RunQueued, vj.Run.Status)
				require.Equal(t, model.TriggerSubmit, vj.Run.Trigger)
				require.Equal(t, j.ID, vj.Run.JobID)
				require.Equal(t, now, vj.Run.ScheduledFor)
			},
		},
		{
			name: "full spec",
			body: `{"name": "nightly.backup", "namespace": "ops", "shell": "echo $X", "args": {"a": 1},
				"env": {"X": "1"}, "queue": "batch", "priority": 1000,
				"requirements": {},
				"timeout": "90s", "retry": {"max_attempts": 3, "initial_delay": "1s", "max_delay": "1m",
				"final_exit_codes": [2, 255]}, "tags": ["a"], "idempotency_key": "k1"}`,
			check: func(t *testing.T, vj *validJob) {
				j := vj.Job
				require.Equal(t, "nightly.backup", j.Name)
				require.Equal(t, "ops", j.Namespace)
				require.Equal(t, "batch", j.Spec.Queue)
				require.Equal(t, 1000, j.Spec.Priority)
				require.Equal(t, 90*time.Second, j.Spec.Timeout)
				require.Equal(t, 3, j.Spec.Retry.MaxAttempts)
				require.InDelta(t, 0.1, j.Spec.Retry.Jitter, 0, "default jitter with retries")
				require.Equal(t, time.Minute, j.Spec.Retry.MaxDelay)
				require.JSONEq(t, `{"a":1}`, string(j.Spec.Args))
				require.Equal(t, "k1", j.IdempotencyKey)
				require.Len(t, j.RequestHash, 64)
				require.Equal(t, 3, vj.Run.MaxAttempts)
				require.Equal(t, "batch", vj.Run.Queue)
				require.Equal(t, scheduler.DefaultMaxDisruptions, *j.Spec.Retry.MaxDisruptions, "left out: the default")
			},
		},
		{
			name: "max_disruptions zero is kept",
			body: `{"command": ["true"], "retry": {"max_disruptions": 0}}`,
			check: func(t *testing.T, vj *validJob) {
				require.NotNil(t, vj.Job.Spec.Retry.MaxDisruptions)
				require.Zero(t, *vj.Job.Spec.Retry.MaxDisruptions)
			},
		},
		{
			name: "handler",
			body: `{"handler": "email.send"}`,
		},
		{
			name: "run_at in the future is scheduled",
			body: `{"command": ["true"], "run_at": "2030-01-02T04:04:05+01:00"}`,
			check: func(t *testing.T, vj *validJob) {
				require.Equal(t, model.RunQueued, vj.Run.Status, "04:04+01:00 is 03:04 UTC: due now")
			},
		},
		{
			name: "delay schedules the run",
			body: `{"command": ["true"], "delay": "1h"}`,
			check: func(t *testing.T, vj *validJob) {
				require.Equal(t, model.RunScheduled, vj.Run.Status)
				require.Equal(t, model.PendingNotDue, vj.Run.PendingCode)
				require.NotEmpty(t, vj.Run.PendingReason)
				require.Equal(t, now.Add(time.Hour), vj.Run.ScheduledFor)
			},
		},
		{
			name: "disabled job gets no run",
			body: `{"command": ["true"], "enabled": false}`,
			check: func(t *testing.T, vj *validJob) {
				require.False(t, vj.Job.Enabled)
				require.Nil(t, vj.Run)
			},
		},
		{
			name: "explicit jitter zero with retries is kept",
			body: `{"command": ["true"], "retry": {"max_attempts": 5, "jitter": 0}}`,
			check: func(t *testing.T, vj *validJob) {
				require.Zero(t, vj.Job.Spec.Retry.Jitter)
			},
		},
		{name: "nothing to run", body: `{}`, want: []string{"command"}},
		{name: "command and shell", body: `{"command": ["a"], "shell": "b"}`, want: []string{"command", "shell"}},
		{name: "all three", body: `{"command": ["a"], "shell": "b", "handler": "c"}`, want: []string{"command", "shell", "handler"}},
		{name: "empty command", body: `{"command": []}`, want: []string{"command"}},
		{name: "empty program", body: `{"command": ["", "x"]}`, want: []string{"command[0]"}},
		{name: "NUL in argument", body: `{"command": ["a", "b\u0000"]}`, want: []string{"command[1]"}},
		{name: "handler with space", body: `{"handler": "a b"}`, want: []string{"handler"}},
		{name: "bad name", body: `{"command": ["a"], "name": "-x"}`, want: []string{"name"}},
		{name: "long name", body: `{"command": ["a"], "name": "` + string(slices.Repeat([]byte("a"), 129)) + `"}`, want: []string{"name"}},
		{name: "bad namespace", body: `{"command": ["a"], "namespace": "a/b"}`, want: []string{"namespace"}},
		{name: "bad queue", body: `{"command": ["a"], "queue": "a b"}`, want: []string{"queue"}},
		{name: "priority too high", body: `{"command": ["a"], "priority": 1001}`, want: []string{"priority"}},
		{name: "priority too low", body: `{"command": ["a"], "priority": -1001}`, want: []string{"priority"}},
		{name: "args not an object", body: `{"command": ["a"], "args": [1]}`, want: []string{"args"}},
		{name: "args string", body: `{"command": ["a"], "args": "x"}`, want: []string{"args"}},
		{name: "args null is none", body: `{"command": ["a"], "args": null}`},
		{name: "env key with =", body: `{"command": ["a"], "env": {"A=B": "1"}}`, want: []string{`env["A=B"]`}},
		{name: "env empty key", body: `{"command": ["a"], "env": {"": "1"}}`, want: []string{"env"}},
		{name: "negative timeout", body: `{"command": ["a"], "timeout": "-1s"}`, want: []string{"timeout"}},
		{name: "max_attempts too high", body: `{"command": ["a"], "retry": {"max_attempts": 1001}}`, want: []string{"retry.max_attempts"}},
		{name: "max_attempts negative", body: `{"command": ["a"], "retry": {"max_attempts": -1}}`, want: []string{"retry.max_attempts"}},
		{name: "negative delays", body: `{"command": ["a"], "retry": {"initial_delay": "-1s", "max_delay": "-2s"}}`, want: []string{"retry.initial_delay", "retry.max_delay"}},
		{name: "max below initial", body: `{"command": ["a"], "retry": {"initial_delay": "10s", "max_delay": "5s"}}`, want: []string{"retry.max_delay"}},
		{name: "multiplier below one", body: `{"command": ["a"], "retry": {"multiplier": 0.5}}`, want: []string{"retry.multiplier"}},
		{name: "jitter above one", body: `{"command": ["a"], "retry": {"jitter": 1.5}}`, want: []string{"retry.jitter"}},
		{name: "max_disruptions negative", body: `{"command": ["a"], "retry": {"max_disruptions": -1}}`, want: []string{"retry.max_disruptions"}},
		{name: "max_disruptions too high", body: `{"command": ["a"], "retry": {"max_disruptions": 101}}`, want: []string{"retry.max_disruptions"}},
		{name: "jitter negative", body: `{"command": ["a"], "retry": {"jitter": -0.1}}`, want: []string{"retry.jitter"}},
		{name: "exit codes out of range", body: `{"command": ["a"], "retry": {"final_exit_codes": [1, 256], "retry_exit_codes": [-1]}}`,
			want: []string{"retry.final_exit_codes[1]", "retry.retry_exit_codes[0]"}},
		{name: "run_at and delay", body: `{"command": ["a"], "run_at": "2030-01-01T00:00:00Z", "delay": "1s"}`, want: []string{"run_at"}},
		{name: "negative delay", body: `{"command": ["a"], "delay": "-1s"}`, want: []string{"delay"}},
		{name: "negative requirements", body: `{"command": ["a"], "requirements": {"cpu": -1, "memory_mb": -1, "gpu": -1}}`,
			want: []string{"requirements.cpu", "requirements.memory_mb", "requirements.gpu"}},
		{name: "empty tag", body: `{"command": ["a"], "tags": ["ok", " "]}`, want: []string{"tags[1]"}},
		{name: "cron job gets no run, a next fire", body: `{"command": ["a"], "schedule": {"cron": "0 2 * * *", "timezone": "Europe/Berlin"}}`,
			check: func(t *testing.T, vj *validJob) {
				require.Nil(t, vj.Run)
				require.Equal(t, time.Date(2030, 1, 3, 1, 0, 0, 0, time.UTC), vj.Job.NextFireAt.UTC(), "02:00 in Berlin (CET)")
			}},
		{name: "paused cron job has no next fire", body: `{"command": ["a"], "schedule": {"cron": "@hourly", "paused": true}}`,
			check: func(t *testing.T, vj *validJob) { require.Nil(t, vj.Job.NextFireAt) }},
		{name: "bad cron", body: `{"command": ["a"], "schedule": {"cron": "61 * * * *"}}`, want: []string{"schedule.cron"}},
		{name: "unknown zone", body: `{"command": ["a"], "schedule": {"cron": "@daily", "timezone": "Mars/Olympus"}}`, want: []string{"schedule.timezone"}},
		{name: "bad misfire", body: `{"command": ["a"], "schedule": {"cron": "@daily", "misfire": "maybe", "misfire_limit": -1}}`,
			want: []string{"schedule.misfire", "schedule.misfire_limit"}},
		{name: "schedule with run_at", body: `{"command": ["a"], "schedule": {"cron": "@daily"}, "delay": "1m"}`, want: []string{"schedule"}},
		{name: "depends_on", body: `{"command": ["a"], "depends_on": [{"run": "x"}, {"run": "y", "condition": "finished"}]}`,
			check: func(t *testing.T, vj *validJob) {
				require.Equal(t, []model.Dependency{{RunID: "x", Condition: model.CondSucceeded}, {RunID: "y", Condition: model.CondFinished}},
					vj.Run.DependsOn, "the condition defaults to succeeded")
			}},
		{name: "depends_on bad entries",
			body: `{"command": ["a"], "depends_on": [{"condition": "failed"}, {"run": "x", "condition": "done"}, {"ref": "b"}, {"run": "y"}, {"run": "y", "condition": "failed"}]}`,
			want: []string{"depends_on[0].run", "depends_on[1].condition", "depends_on[2].ref", "depends_on[4].run"}},
		{name: "depends_on with a schedule", body: `{"command": ["a"], "schedule": {"cron": "@daily"}, "depends_on": [{"run": "x"}]}`,
			want: []string{"depends_on", "schedule"}},
		{name: "depends_on disabled", body: `{"command": ["a"], "enabled": false, "depends_on": [{"run": "x"}]}`,
			want: []string{"depends_on", "enabled"}},
		{name: "depends_on with a concurrency limit", body: `{"command": ["a"], "concurrency": {"policy": "forbid"}, "depends_on": [{"run": "x"}]}`,
			want: []string{"depends_on", "concurrency"}},
		{name: "depends_on with a rate limit", body: `{"command": ["a"], "concurrency": {"rate": {"rate": 1, "per": "1s"}}, "depends_on": [{"run": "x"}]}`,
			want: []string{"depends_on", "concurrency"}},
		{name: "bad label keys", body: `{"command": ["a"], "requirements": {"gpu": 4, "labels": {"": "x", "a\"b": "y", "ok": "z"}}}`,
			want: []string{"requirements.labels", "requirements.labels"}},
		{name: "concurrency forbid", body: `{"command": ["a"], "concurrency": {"policy": "forbid"}}`, check: func(t *testing.T, vj *validJob) {
			require.Equal(t, &model.RunConcurrency{Key: "job:" + vj.Job.ID, Max: 1, Policy: model.ConcurrencyForbid}, vj.Run.Concurrency)
		}},
		{name: "bad concurrency", body: `{"command": ["a"], "concurrency": {"policy": "sometimes", "max": -1}}`,
			want: []string{"concurrency.policy", "concurrency.max"}},
		{name: "concurrency key", body: `{"command": ["a"], "args": {"id": 7}, "concurrency": {"key": "c-{{.id}}", "max": 2}}`, check: func(t *testing.T, vj *validJob) {
			require.Equal(t, &model.RunConcurrency{Key: "key:default:c-7", Max: 2, Policy: model.ConcurrencyAllow}, vj.Run.Concurrency)
		}},
		{name: "concurrency key the args lack", body: `{"command": ["a"], "args": {"n": 7}, "concurrency": {"key": "c-{{.id}}"}}`, want: []string{"concurrency.key"}},
		{name: "rate limit", body: `{"command": ["a"], "concurrency": {"rate": {"rate": 100, "per": "1m"}}}`, check: func(t *testing.T, vj *validJob) {
			require.Equal(t, &model.RunConcurrency{Key: "job:" + vj.Job.ID, Policy: model.ConcurrencyAllow,
				Rate: &model.RateLimit{Rate: 100, Per: time.Minute}}, vj.Run.Concurrency)
		}},
		{name: "bad rate limit", body: `{"command": ["a"], "concurrency": {"rate": {"rate": 0, "per": "-1s"}}}`,
			want: []string{"concurrency.rate.rate", "concurrency.rate.per"}},
		{name: "concurrency key that does not parse", body: `{"command": ["a"], "concurrency": {"key": "c-{{.id"}}`, want: []string{"concurrency.key"}},
		{name: "default concurrency is fine", body: `{"command": ["a"], "concurrency": {"policy": "allow"}}`},
		{name: "long idempotency key", body: `{"command": ["a"], "idempotency_key": "` + string(slices.Repeat([]byte("k"), 256)) + `"}`, want: []string{"idempotency_key"}},
		{
			name: "every bad field at once",
			body: `{"command": [""], "priority": 5000, "retry": {"max_attempts": 0, "multiplier": 0.1}, "tags": [""], "queue": "?"}`,
			want: []string{"command[0]", "queue", "priority", "retry.multiplier", "tags[0]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var spec apitype.JobSpec
			require.NoError(t, decodeJSON([]byte(tt.body), &spec))
			vj, errs := buildJob(&spec, "", now, defLim(), sealing{})
			if len(tt.want) == 0 {
				require.Empty(t, errs)
				require.NotNil(t, vj)
				if tt.check != nil {
					tt.check(t, vj)
				}
				return
			}
			require.Nil(t, vj)
			require.Equal(t, tt.want, fieldNames(errs))
			for _, e := range errs {
				require.NotEmpty(t, e.Message, e.Field)
			}
		})
	}
}

func TestBuildJobPrefix(t *testing.T) {
	t.Parallel()
	_, errs := buildJob(&apitype.JobSpec{}, "jobs[3].", time.Now(), defLim(), sealing{})
	require.Equal(t, []string{"jobs[3].command"}, fieldNames(errs))
}

func TestRequestHashIsCanonical(t *testing.T) {
	t.Parallel()
	decode := func(s string) *apitype.JobSpec {
		var spec apitype.JobSpec
		require.NoError(t, decodeJSON([]byte(s), &spec))
		return &spec
	}
	a := decode(`{"command": ["a"], "args": {"x": 1, "y": [1, 2]}, "env": {"A": "1", "B": "2"}, "run_at": "2030-01-01T01:00:00+01:00"}`)
	b := decode(`{"run_at": "2030-01-01T00:00:00Z", "env": {"B": "2", "A": "1"},
		"args": {"y": [1,2], "x": 1}, "command": ["a"]}`)
	c := decode(`{"command": ["a"], "args": {"x": 2, "y": [1, 2]}, "env": {"A": "1", "B": "2"}, "run_at": "2030-01-01T00:00:00Z"}`)
	require.Equal(t, requestHash(a, nil), requestHash(b, nil))
	require.NotEqual(t, requestHash(a, nil), requestHash(c, nil))
}

func TestPatchValidatesLikeCreate(t *testing.T) {
	t.Parallel()
	var spec apitype.JobSpec
	require.NoError(t, decodeJSON([]byte(`{"name": "j", "command": ["a"], "retry": {"max_attempts": 3}, "timeout": "5s"}`), &spec))
	vj, errs := buildJob(&spec, "", time.Now(), defLim(), sealing{})
	require.Empty(t, errs)

	// A job's own spec round-trips unchanged.
	fe := &fieldErrors{}
	require.Equal(t, vj.Job.Spec, specToModel(specFromJob(vj.Job), fe, defLim(), sealing{}))
	require.Empty(t, fe.errs)

	tests := []struct {
		name  string
		patch string
		want  []string
		check func(t *testing.T, s model.JobSpec)
	}{
		{name: "priority", patch: `{"priority": 7}`, check: func(t *testing.T, s model.JobSpec) {
			require.Equal(t, 7, s.Priority)
			require.Equal(t, []string{"a"}, s.Command)
		}},
		{name: "switch to shell", patch: `{"shell": "echo"}`, check: func(t *testing.T, s model.JobSpec) {
			require.Nil(t, s.Command)
			require.Equal(t, "echo", s.Shell)
		}},
		{name: "bad retry", patch: `{"retry": {"max_attempts": 2000}}`, want: []string{"retry.max_attempts"}},
		{name: "empty program", patch: `{"command": [""]}`, want: []string{"command[0]"}},
		{name: "schedule", patch: `{"schedule": {"cron": "@daily", "timezone": "Asia/Kolkata"}}`, check: func(t *testing.T, s model.JobSpec) {
			require.Equal(t, &model.Schedule{Cron: "@daily", Timezone: "Asia/Kolkata"}, s.Schedule)
		}},
		{name: "bad schedule", patch: `{"schedule": {"cron": "@sometimes"}}`, want: []string{"schedule.cron"}},
		{name: "bad queue", patch: `{"queue": "a b"}`, want: []string{"queue"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var p apitype.JobPatch
			require.NoError(t, decodeJSON([]byte(tt.patch), &p))
			s := specFromJob(vj.Job)
			applyPatch(s, &p)
			fe := &fieldErrors{}
			got := specToModel(s, fe, defLim(), sealing{})
			require.Equal(t, tt.want, fieldNames(fe.errs))
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

func fieldNames(errs []apitype.FieldError) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return out
}

// TestNamePatternIsItsRegexp: the hand-written name matcher accepts exactly what the
// regular expression it stands for accepts.
func TestNamePatternIsItsRegexp(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	for _, s := range []string{"", "a", "A.b_c-9", ".a", "-a", "_a", "a b", "é", strings.Repeat("a", 128), strings.Repeat("a", 129), "a\n", "a/b"} {
		require.Equal(t, re.MatchString(s), namePattern.MatchString(s), "%q", s)
	}
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringOfN(rapid.SampledFrom([]rune("aZ09._- /\né")), 0, 130, -1).Draw(t, "s")
		if re.MatchString(s) != namePattern.MatchString(s) {
			t.Fatalf("%q: regexp %v, matcher %v", s, re.MatchString(s), namePattern.MatchString(s))
		}
	})
}
