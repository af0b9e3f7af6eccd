package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

func TestWorkerProtocol(t *testing.T) {
	t.Parallel()
	b := setup(t)

	r := b.do(t, "POST", "/v1/workers/register", `{"id": "w1", "capacity": {"cpu": 2, "memory_mb": 1024, "gpu": 0, "slots": 2}, "commands": true, "labels": {"zone": "a"}}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var reg apitype.RegisterResponse
	r.decode(t, &reg)
	require.Equal(t, "w1", reg.Worker.ID)
	require.NotEmpty(t, reg.Session)
	require.Positive(t, reg.LeaseTTL.Std())

	created := b.createJob(t, `{"name": "p", "command": ["false"], "env": {"A": "1"}, "timeout": "1m"}`)
	lr := b.lease(t, "w1", 5)
	require.Len(t, lr.Leases, 1)
	l := lr.Leases[0]
	require.Equal(t, created.Run.ID, l.RunID)
	require.Equal(t, 1, l.Attempt)
	require.NotEmpty(t, l.Token)
	require.Equal(t, []string{"false"}, l.Command)
	require.Equal(t, map[string]string{"A": "1"}, l.Env)
	require.Equal(t, time.Minute, l.Timeout.Std())
	run := b.getRun(t, l.RunID)
	require.Equal(t, "running", run.Status)
	require.Equal(t, "w1", run.WorkerID)

	heartbeat := func(token string) apitype.HeartbeatResponse {
		t.Helper()
		r := b.do(t, "POST", "/v1/workers/w1/heartbeat", apitype.HeartbeatRequest{Held: []apitype.LeaseRef{{RunID: l.RunID, Token: token}}})
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		var out apitype.HeartbeatResponse
		r.decode(t, &out)
		return out
	}
	require.Empty(t, heartbeat(l.Token).Lost)
	require.Equal(t, []string{l.RunID}, heartbeat("stale-token").Lost, "a stale token is refused")

	// A completion with a stale token is refused and changes nothing.
	res := b.complete(t, apitype.Completion{RunID: l.RunID, Token: "stale-token", Status: "succeeded"})
	require.False(t, res.Accepted)
	require.NotEmpty(t, res.Error)
	require.Equal(t, "running", b.getRun(t, l.RunID).Status)

	exit1 := 1
	res = b.complete(t, apitype.Completion{RunID: l.RunID, Token: l.Token, Status: "failed", ExitCode: &exit1, Error: "exit status 1"})
	require.True(t, res.Accepted, "error: %s", res.Error)
	run = b.getRun(t, l.RunID)
	require.Equal(t, "failed", run.Status)
	require.Len(t, run.Attempts, 1)
	require.Equal(t, "failed", run.Attempts[0].Status)
	require.Equal(t, &exit1, run.Attempts[0].ExitCode)
	require.Equal(t, "w1", run.Attempts[0].WorkerID)

	// The same token again: the attempt is over.
	res = b.complete(t, apitype.Completion{RunID: l.RunID, Token: l.Token, Status: "succeeded"})
	require.False(t, res.Accepted)

	// A manual retry reopens the failed run as attempt 2.
	r = b.do(t, "POST", "/v1/runs/"+l.RunID+"/retry", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	lr = b.lease(t, "w1", 5)
	require.Len(t, lr.Leases, 1)
	require.Equal(t, 2, lr.Leases[0].Attempt)
	res = b.complete(t, apitype.Completion{RunID: l.RunID, Token: lr.Leases[0].Token, Status: "succeeded"})
	require.True(t, res.Accepted, "error: %s", res.Error)
	run = b.getRun(t, l.RunID)
	require.Equal(t, "succeeded", run.Status)
	require.Equal(t, 2, run.Attempt)
	require.Len(t, run.Attempts, 2)

	// Workers and drain.
	r = b.do(t, "GET", "/v1/workers", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var wl apitype.WorkerList
	r.decode(t, &wl)
	require.Len(t, wl.Items, 1)
	require.Equal(t, "active", wl.Items[0].State)
	require.Equal(t, map[string]string{"zone": "a"}, wl.Items[0].Labels)
	r = b.do(t, "POST", "/v1/workers/w1/drain", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var wk apitype.Worker
	r.decode(t, &wk)
	require.Equal(t, "draining", wk.State)
	require.True(t, b.lease(t, "w1", 1).Drain)
	r = b.do(t, "GET", "/v1/workers/w1", nil)
	require.Equal(t, http.StatusOK, r.status)

	// Errors.
	tests := []struct {
		name, method, path, body string
		status                   int
		fields                   []string
	}{
		{"unknown worker lease", "POST", "/v1/workers/nobody/lease", `{"max": 1}`, 404, nil},
		{"unknown worker heartbeat", "POST", "/v1/workers/nobody/heartbeat", `{}`, 404, nil},
		{"unknown worker get", "GET", "/v1/workers/nobody", ``, 404, nil},
		{"unknown worker drain", "POST", "/v1/workers/nobody/drain", ``, 404, nil},
		{"register without id", "POST", "/v1/workers/register", `{"capacity": {"slots": -1}}`, 400, []string{"id", "capacity.slots"}},
		{"register bad id", "POST", "/v1/workers/register", `{"id": "a/b"}`, 400, []string{"id"}},
		{"register unknown field", "POST", "/v1/workers/register", `{"id": "w", "capacity": {"cores": 1}}`, 400, []string{"capacity.cores"}},
		{"register beyond any machine", "POST", "/v1/workers/register",
			`{"id": "w", "capacity": {"cpu": 1e9, "memory_mb": 17179869184, "gpu": 100000, "slots": 9999999}}`, 400,
			[]string{"capacity.cpu", "capacity.memory_mb", "capacity.gpu", "capacity.slots"}},
		{"register with an oversize handler", "POST", "/v1/workers/register", `{"id": "w", "handlers": ["` + strings.Repeat("h", 257) + `"]}`, 400,
			[]string{"handlers[0]"}},
		{"lease negative max", "POST", "/v1/workers/w1/lease", `{"max": -1}`, 400, []string{"max"}},
		{"complete bad status", "POST", "/v1/attempts/complete", `{"completions": [{"run_id": "r", "token": "t", "status": "done"}]}`, 400, []string{"completions[0].status"}},
		{"complete missing token", "POST", "/v1/attempts/complete", `{"completions": [{"run_id": "r", "status": "failed"}]}`, 400, []string{"completions[0].token"}},
		{"heartbeat lease without token", "POST", "/v1/workers/w1/heartbeat", `{"held": [{"run_id": "r"}, {"token": "t"}]}`, 400, []string{"held[0].token", "held[1].run_id"}},
		{"logs bad stream", "POST", "/v1/attempts/logs", `{"chunks": [{"run_id": "r", "attempt": 1, "token": "t", "seq": 1, "stream": "stdin", "data": "x"}]}`, 400, []string{"chunks[0].stream"}},
		{"logs bad seq", "POST", "/v1/attempts/logs", `{"chunks": [{"run_id": "r", "attempt": 0, "seq": 0, "stream": "stdout", "data": "x"}]}`, 400, []string{"chunks[0].attempt", "chunks[0].seq", "chunks[0].token"}},
		{"logs of an unknown run", "POST", "/v1/attempts/logs", `{"chunks": [{"run_id": "r", "attempt": 1, "token": "t", "seq": 1, "stream": "stdout", "data": "x"}]}`, 409, []string{"chunks[0].run_id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body any
			if tt.body != "" {
				body = tt.body
			}
			r := b.do(t, tt.method, tt.path, body)
			require.Equal(t, tt.status, r.status, "body: %s", r.body)
			p := r.problem(t)
			if tt.fields != nil {
				require.Equal(t, tt.fields, fieldNames(p.Errors))
			}
		})
	}
}

// TestLeaseLongPoll checks that a lease request waits for work, and ends when its client goes
// away.
func TestLeaseLongPoll(t *testing.T) {
	t.Parallel()
	entered, left := make(chan struct{}, 1), make(chan struct{}, 1)
	b := setupWrapped(t, watch("/lease", entered, left))
	b.register(t, "w1")

	post := func(ctx context.Context) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", b.srv.URL+"/v1/workers/w1/lease", strings.NewReader(`{"max": 1, "wait": "1m"}`))
		if err != nil {
			return nil, err
		}
		return b.srv.Client().Do(req)
	}

	// Work arriving wakes the poll.
	got := make(chan apitype.LeaseResponse, 1)
	go func() {
		var out apitype.LeaseResponse
		if resp, err := post(context.Background()); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
		}
		got <- out
	}()
	within(t, entered, 10*time.Second, "the lease request")
	created := b.createJob(t, `{"command": ["true"]}`)
	select {
	case out := <-got:
		require.Len(t, out.Leases, 1)
		require.Equal(t, created.Run.ID, out.Leases[0].RunID)
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll did not return the new run")
	}
	within(t, left, 10*time.Second, "the lease handler to return")

	// A client that goes away ends the poll (the engine would otherwise hold it 30s).
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if resp, err := post(ctx); err == nil {
			resp.Body.Close()
		}
	}()
	within(t, entered, 10*time.Second, "the second lease request")
	cancel()
	within(t, left, 10*time.Second, "the lease handler to notice the client left")
}

// A worker that leaves is listed as drained; a leave without a session changes nothing.
func TestWorkerLeave(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, "POST", "/v1/workers/register", `{"id": "w1", "capacity": {"slots": 1}, "commands": true}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var reg apitype.RegisterResponse
	r.decode(t, &reg)

	r = b.do(t, "POST", "/v1/workers/w1/leave", `{}`)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, "session", r.problem(t).Errors[0].Field)
	r = b.do(t, "POST", "/v1/workers/w1/leave", apitype.LeaveRequest{Session: "old"})
	require.Equal(t, http.StatusNotFound, r.status, "body: %s", r.body)
	var w apitype.Worker
	b.do(t, "GET", "/v1/workers/w1", nil).decode(t, &w)
	require.Equal(t, "active", w.State)

	r = b.do(t, "POST", "/v1/workers/w1/leave", apitype.LeaveRequest{Session: reg.Session})
	require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
	b.do(t, "GET", "/v1/workers/w1", nil).decode(t, &w)
	require.Equal(t, "drained", w.State)
}
