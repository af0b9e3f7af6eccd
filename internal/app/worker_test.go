package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/capacity"
	"github.com/stint-dev/stint/internal/cli"
)

// fakeHost is a host with 4 CPUs limited to 1.5 by cgroup, 8000 MB limited to 2048, and two
// GPUs; it counts the times nvidia-smi ran.
type fakeHost struct{ smiRuns atomic.Int32 }

func (h *fakeHost) host() capacity.Host {
	return capacity.Host{
		FS: fstest.MapFS{
			"proc/meminfo":             {Data: []byte("MemTotal: 8192000 kB\n")},
			"sys/fs/cgroup/cpu.max":    {Data: []byte("150000 100000\n")},
			"sys/fs/cgroup/memory.max": {Data: []byte("2147483648\n")},
		},
		NumCPU: func() int { return 4 },
		Run: func(context.Context, string, ...string) ([]byte, error) {
			h.smiRuns.Add(1)
			return []byte("0, Tesla T4, 15360 MiB\n1, Tesla T4, 15360 MiB\n"), nil
		},
	}
}

// runWorker runs `stint worker args...` as the stint binary would, and returns its exit code
// and error output.
func runWorker(t *testing.T, h *fakeHost, args ...string) (int, string) {
	t.Helper()
	root := cli.NewRoot(newWorkerCommand(h.host()))
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"worker", "--log-level", "error"}, args...))
	code := cli.Execute(t.Context(), root)
	return code, out.String()
}

// registrar is a server that refuses every registration for good (so the worker stops) and
// records what it was sent.
type registrar struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []apitype.RegisterRequest
	auth []string
}

func newRegistrar(t *testing.T) *registrar {
	t.Helper()
	r := &registrar{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var rr apitype.RegisterRequest
		body, _ := io.ReadAll(req.Body)
		if req.Method == http.MethodPost && req.URL.Path == "/v1/workers/register" && json.Unmarshal(body, &rr) == nil {
			r.mu.Lock()
			r.reqs = append(r.reqs, rr)
			r.auth = append(r.auth, req.Header.Get("Authorization"))
			r.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"title":"Forbidden","status":403,"detail":"test server refuses workers"}`))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *registrar) only(t *testing.T) (apitype.RegisterRequest, string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Len(t, r.reqs, 1, "one registration")
	return r.reqs[0], r.auth[0]
}

func TestWorkerFlagsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--slots", "0"}, "--slots: must be at least 1, got 0"},
		{[]string{"--cpu", "-1"}, "--cpu: must be a number of CPUs above 0, got -1"},
		{[]string{"--cpu", "0"}, "--cpu: must be a number of CPUs above 0"},
		{[]string{"--cpu", "NaN"}, "--cpu: must be a number of CPUs above 0"},
		{[]string{"--cpu", "two"}, `invalid argument "two" for "--cpu" flag`},
		{[]string{"--memory", "-5"}, "--memory: must not be negative, got -5"},
		{[]string{"--memory", "16Gi"}, `invalid argument "16Gi" for "--memory" flag: want a whole number of MB such as 16384`},
		{[]string{"--gpus", "-1"}, "--gpus: must not be negative, got -1"},
		{[]string{"--labels", "bad"}, `--labels: "bad" is not key=value`},
		{[]string{"--labels", "zone=eu,=x"}, `--labels: "=x" is not key=value`},
		{[]string{"--log-format", "xml"}, "--log-format"},
		{[]string{"--server", "ftp://host"}, "--server: new client"},
		{[]string{"extra"}, `unknown command "extra"`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			t.Parallel()
			h := &fakeHost{}
			code, out := runWorker(t, h, append([]string{"--server", "http://127.0.0.1:1"}, tc.args...)...)
			require.Equal(t, 2, code, out)
			require.Contains(t, out, tc.want)
			require.Contains(t, out, "Run 'stint worker --help' for usage.")
		})
	}
}

func TestWorkerCapacity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		args      []string
		want      apitype.Capacity
		labels    map[string]string // nil: none
		smiRuns   int32
		id        string // "" : any
		authorize string
	}{
		{
			name: "all detected", want: apitype.Capacity{CPU: 1.5, MemoryMB: 2048, GPU: 2, Slots: 2},
			smiRuns: 1,
		},
		{
			name: "all given",
			args: []string{"--cpu", "4", "--memory", "1024", "--gpus", "0", "--slots", "8",
				"--labels", "zone=eu,disk=ssd", "--id", "w-1", "--token", "flag-token"},
			want:   apitype.Capacity{CPU: 4, MemoryMB: 1024, GPU: 0, Slots: 8},
			labels: map[string]string{"zone": "eu", "disk": "ssd"}, id: "w-1", authorize: "Bearer flag-token",
		},
		{
			name: "slots follow the CPUs given", args: []string{"--cpu", "2.5", "--gpus", "1"},
			want: apitype.Capacity{CPU: 2.5, MemoryMB: 2048, GPU: 1, Slots: 3},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newRegistrar(t)
			h := &fakeHost{}
			code, out := runWorker(t, h, append([]string{"--server", srv.URL}, tc.args...)...)
			require.Equal(t, 1, code, out)
			require.Contains(t, out, "stint: Forbidden: test server refuses workers")
			req, auth := srv.only(t)
			require.Equal(t, tc.want, req.Capacity)
			require.Equal(t, tc.labels, req.Labels)
			if tc.id != "" {
				require.Equal(t, tc.id, req.ID)
			}
			require.Equal(t, tc.authorize, auth)
			require.Equal(t, tc.smiRuns, h.smiRuns.Load(), "nvidia-smi runs only when --gpus is not given")
		})
	}
}

// TestWorkerServerList checks --server takes a list: the first server is down, the second answers.
func TestWorkerServerList(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	srv := newRegistrar(t)
	code, out := runWorker(t, &fakeHost{}, "--server", downURL+","+srv.URL, "--gpus", "0")
	require.Equal(t, 1, code, out)
	req, _ := srv.only(t)
	require.Equal(t, 2, req.Capacity.Slots)
}

// TestWorkerEnv checks STINT_TOKEN and STINT_SERVER reach the worker. (Not parallel: it sets
// the environment.)
func TestWorkerEnv(t *testing.T) {
	srv := newRegistrar(t)
	t.Setenv("STINT_SERVER", srv.URL)
	t.Setenv("STINT_TOKEN", "env-token")
	code, out := runWorker(t, &fakeHost{}, "--id", "env-worker")
	require.Equal(t, 1, code, out)
	req, auth := srv.only(t)
	require.Equal(t, "env-worker", req.ID)
	require.Equal(t, "Bearer env-token", auth)
}

func TestWorkerHelp(t *testing.T) {
	t.Parallel()
	h := &fakeHost{}
	code, out := runWorker(t, h, "--help")
	require.Equal(t, 0, code)
	for _, want := range []string{
		"a comma-separated list of the servers of one cluster", "env STINT_SERVER",
		"--token (env STINT_TOKEN)", "--worker-token",
		"--cpu", "cpu.max", "--memory MB", "memory.max", "--gpus", "nvidia-smi", "--slots", "--labels", "--id",
	} {
		require.Contains(t, out, want)
	}
	require.Zero(t, h.smiRuns.Load(), "--help detects nothing")
}
