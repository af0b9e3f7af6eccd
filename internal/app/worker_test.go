package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/capacity"
	"github.com/stint-dev/stint/internal/cli"
	"github.com/stint-dev/stint/internal/testcert"
)

// fakeHost is a host with 4 CPUs limited to 1.5 by cgroup, 8000 MB limited to 2048, and two
// GPUs (or what smi lists); it counts the times nvidia-smi ran.
type fakeHost struct {
	smiRuns atomic.Int32
	smi     string // nvidia-smi's output; "" lists GPUs 0 and 1
}

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
			if h.smi != "" {
				return []byte(h.smi), nil
			}
			return []byte("0, Tesla T4, 15360 MiB\n1, Tesla T4, 15360 MiB\n"), nil
		},
	}
}

// runWorker runs `stint worker args...` as the stint binary would, and returns its exit code
// and error output.
func runWorker(t *testing.T, h *fakeHost, args ...string) (int, string) {
	t.Helper()
	root := cli.NewRoot(newWorkerCommand(h.host(), nil))
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
	mu    sync.Mutex
	reqs  []apitype.RegisterRequest
	auth  []string
	certs []string // the Common Name of the client certificate of each, if any
}

func newRegistrar(t *testing.T) *registrar {
	t.Helper()
	return startRegistrar(t, nil)
}

// startRegistrar starts a registrar, over TLS with tlsCfg when it is not nil.
func startRegistrar(t *testing.T, tlsCfg *tls.Config) *registrar {
	t.Helper()
	r := &registrar{}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var rr apitype.RegisterRequest
		body, _ := io.ReadAll(req.Body)
		if req.Method == http.MethodPost && req.URL.Path == "/v1/workers/register" && json.Unmarshal(body, &rr) == nil {
			cn := ""
			if req.TLS != nil && len(req.TLS.PeerCertificates) > 0 {
				cn = req.TLS.PeerCertificates[0].Subject.CommonName
			}
			r.mu.Lock()
			r.reqs = append(r.reqs, rr)
			r.auth = append(r.auth, req.Header.Get("Authorization"))
			r.certs = append(r.certs, cn)
			r.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"title":"Forbidden","status":403,"detail":"test server refuses workers"}`))
	}))
	if tlsCfg != nil {
		r.TLS = tlsCfg
		r.StartTLS()
	} else {
		r.Start()
	}
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
		{[]string{"--memory", "-5"}, `invalid argument "-5" for "--memory" flag: want an amount of memory such as 512 (MiB), 512M or 2G`},
		{[]string{"--memory", "16X"}, `invalid argument "16X" for "--memory" flag: unknown unit "x": want M or G`},
		{[]string{"--gpus", "-1"}, "--gpus: must not be negative, got -1"},
		{[]string{"--drain-timeout", "-5s"}, "--drain-timeout: must be 0 or more, or -1s for no limit, got -5s"},
		{[]string{"--drain-timeout", "soon"}, `invalid argument "soon" for "--drain-timeout" flag`},
		{[]string{"--labels", "bad"}, `--labels: "bad" is not key=value`},
		{[]string{"--labels", "zone=eu,=x"}, `--labels: "=x" is not key=value`},
		{[]string{"--labels", "zone=eu,it's=x"}, `--labels: key "it's" must be 1 to 63 letters, digits`},
		{[]string{"--labels", "a b=x"}, `--labels: key "a b" must be 1 to 63 letters`},
		{[]string{"--log-format", "xml"}, "--log-format"},
		{[]string{"--server", "ftp://host"}, "--server: new client"},
		{[]string{"--cert", "w.crt"}, "--key: needed with --cert"},
		{[]string{"--key", "w.key"}, "--cert: needed with --key"},
		{[]string{"--cert", "w.crt", "--key", "w.key", "--token", "t"}, "--cert: the client certificate is the worker's identity; give no --token"},
		{[]string{"--cert", "/nonexistent/w.crt", "--key", "w.key"}, "--cert: open /nonexistent/w.crt"},
		{[]string{"--ca", "/nonexistent/ca.crt"}, "--ca: load CA bundle: open /nonexistent/ca.crt"},
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
			require.Equal(t, 5, code, out) // the registration's 403: unauthorized
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

func TestOfferedGPUs(t *testing.T) {
	t.Parallel()
	detected := []capacity.GPU{{Index: 3, Name: "T4"}, {Index: 0, Name: "T4"}, {Index: 1, Name: "A100"}, {Index: 3}}
	for _, tc := range []struct {
		name       string
		detected   []capacity.GPU
		overridden bool
		n          int
		want       []string
	}{
		{name: "detected, ascending, once each", detected: detected, want: []string{"0", "1", "3"}},
		{name: "none detected", want: []string{}},
		{name: "--gpus N names 0 to N-1", overridden: true, n: 3, want: []string{"0", "1", "2"}},
		{name: "--gpus 0", overridden: true, want: []string{}},
		{name: "--gpus wins over detection", detected: detected, overridden: true, n: 1, want: []string{"0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, offeredGPUs(tc.detected, tc.overridden, tc.n))
		})
	}
}

// leaseServer is a worker protocol server that registers the worker, leases it one run, and
// asks it to drain once that run is complete, so that `stint worker` exits 0.
type leaseServer struct {
	*httptest.Server
	mu       sync.Mutex
	lease    *apitype.Lease // handed out on the first poll
	capacity apitype.Capacity
	logs     strings.Builder
	done     chan struct{} // closed when the completion arrives
	complete apitype.Completion
}

func newLeaseServer(t *testing.T, lease apitype.Lease) *leaseServer {
	t.Helper()
	s := &leaseServer{lease: &lease, done: make(chan struct{})}
	reply := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	drained := func() bool {
		select {
		case <-s.done:
			return true
		default:
			return false
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/workers/register", func(w http.ResponseWriter, r *http.Request) {
		var req apitype.RegisterRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		s.mu.Lock()
		s.capacity = req.Capacity
		s.mu.Unlock()
		reply(w, apitype.RegisterResponse{
			Worker:            &apitype.Worker{ID: req.ID, Capacity: req.Capacity, State: "active"},
			Session:           "s1",
			HeartbeatInterval: apitype.Duration(time.Second),
			LeaseTTL:          apitype.Duration(time.Minute),
		})
	})
	mux.HandleFunc("POST /v1/workers/{id}/lease", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		l := s.lease
		s.lease = nil
		s.mu.Unlock()
		if l != nil {
			reply(w, apitype.LeaseResponse{Leases: []apitype.Lease{*l}})
			return
		}
		select {
		case <-s.done:
			reply(w, apitype.LeaseResponse{Leases: []apitype.Lease{}, Drain: true})
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("POST /v1/workers/{id}/heartbeat", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, apitype.HeartbeatResponse{Drain: drained()})
	})
	mux.HandleFunc("POST /v1/attempts/logs", func(w http.ResponseWriter, r *http.Request) {
		var req apitype.LogChunksRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		s.mu.Lock()
		for _, c := range req.Chunks { // one attempt, shipped in order
			s.logs.WriteString(c.Data)
		}
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/attempts/complete", func(w http.ResponseWriter, r *http.Request) {
		var req apitype.CompleteRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		resp := apitype.CompleteResponse{}
		s.mu.Lock()
		for _, c := range req.Completions {
			resp.Results = append(resp.Results, apitype.CompletionResult{RunID: c.RunID, Accepted: true})
			if !drained() {
				s.complete = c
				close(s.done)
			}
		}
		s.mu.Unlock()
		reply(w, resp)
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// TestWorkerGPUDevices runs `stint worker` against a server that leases it a shell job needing
// GPUs: the job sees the devices the worker detected (or the --gpus override names) in
// CUDA_VISIBLE_DEVICES.
func TestWorkerGPUDevices(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("the worker runs commands on unix only")
	}
	for _, tc := range []struct {
		name string
		smi  string
		args []string
		need int
		want string
		gpu  int
	}{
		{name: "detected indices", smi: "3, Tesla T4, 15360 MiB\n1, Tesla T4, 15360 MiB\n", need: 2, want: "1,3|1,3", gpu: 2},
		{name: "lowest detected first", smi: "3, Tesla T4, 15360 MiB\n1, Tesla T4, 15360 MiB\n", need: 1, want: "1|1", gpu: 2},
		{name: "--gpus N offers 0 to N-1", args: []string{"--gpus", "3"}, need: 3, want: "0,1,2|0,1,2", gpu: 3},
		{name: "too many", args: []string{"--gpus", "1"}, need: 2, gpu: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newLeaseServer(t, apitype.Lease{
				RunID: "r1", JobID: "j1", JobName: "gpu-job", Attempt: 1, Token: "tok",
				Shell:        `echo "$CUDA_VISIBLE_DEVICES|$STINT_GPUS"`,
				Env:          map[string]string{"CUDA_VISIBLE_DEVICES": "job-value"},
				Requirements: &apitype.Requirements{GPU: tc.need},
			})
			code, out := runWorker(t, &fakeHost{smi: tc.smi}, append([]string{"--server", srv.URL, "--slots", "2"}, tc.args...)...)
			require.Equal(t, 0, code, out)
			srv.mu.Lock()
			defer srv.mu.Unlock()
			require.Equal(t, tc.gpu, srv.capacity.GPU)
			if tc.want == "" {
				require.Equal(t, "failed", srv.complete.Status)
				require.Equal(t, fmt.Sprintf("needs %d GPUs, %d of %d free on this worker", tc.need, tc.gpu, tc.gpu), srv.complete.Error)
				require.Empty(t, srv.logs.String(), "the job did not run")
				return
			}
			require.Equal(t, "succeeded", srv.complete.Status, srv.complete.Error)
			require.Equal(t, tc.want+"\n", srv.logs.String())
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
	require.Equal(t, 5, code, out) // the registration's 403: unauthorized
	req, _ := srv.only(t)
	require.Equal(t, 2, req.Capacity.Slots)
}

// TestWorkerTLS: stint worker verifies an https server with --ca, over every server of its
// list, and presents --cert as its identity (and no bearer token).
func TestWorkerTLS(t *testing.T) {
	t.Parallel()
	serverCA, workerCA := testcert.NewCA(t, "servers"), testcert.NewCA(t, "workers")
	dir := t.TempDir()
	srv := startRegistrar(t, &tls.Config{Certificates: []tls.Certificate{serverCA.Server(t).TLS(t)},
		ClientCAs: workerCA.Pool(), ClientAuth: tls.RequireAndVerifyClientCert})
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := strings.Replace(down.URL, "http://", "https://", 1)
	down.Close()
	certFile, keyFile := workerCA.Client(t, "w1").Write(t, dir, "w1")
	caFile := testcert.Write(t, dir, "ca.crt", serverCA.PEM)

	code, out := runWorker(t, &fakeHost{}, "--server", downURL+","+srv.URL, "--id", "w1", "--gpus", "0",
		"--ca", caFile, "--cert", certFile, "--key", keyFile)
	require.Equal(t, 5, code, out) // the registration's 403: unauthorized
	require.Contains(t, out, "test server refuses workers", "the 403 of the registration ended it")
	req, auth := srv.only(t)
	require.Equal(t, "w1", req.ID)
	require.Empty(t, auth, "no bearer token")
	require.Equal(t, []string{"w1"}, srv.certs)
}

// TestWorkerEnv checks STINT_TOKEN and STINT_SERVER reach the worker. (Not parallel: it sets
// the environment.)
func TestWorkerEnv(t *testing.T) {
	srv := newRegistrar(t)
	t.Setenv("STINT_SERVER", srv.URL)
	t.Setenv("STINT_TOKEN", "env-token")
	code, out := runWorker(t, &fakeHost{}, "--id", "env-worker")
	require.Equal(t, 5, code, out) // the registration's 403: unauthorized
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
		"--cpu", "cpu.max", "--memory size", "memory.max", "--gpus", "nvidia-smi", "--slots", "--labels", "--id",
		"CUDA_VISIBLE_DEVICES and STINT_GPUS", "devices are 0 to N-1",
		"--pass-env", "--allow-commands", "--run-as", "--work-dir", "--cgroup", "--no-limits",
		"STINT_* never passes", "RLIMIT_DATA",
		"verified against --ca (env STINT_CA)", "--cert\nand --key", "--client-ca", "Common Name", "env STINT_WORKER_CERT",
	} {
		require.Contains(t, out, want)
	}
	require.Zero(t, h.smiRuns.Load(), "--help detects nothing")
}

// TestWorkerCommandFlagsRefused: command settings the worker cannot honour stop it at start.
func TestWorkerCommandFlagsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pass-env", "HOME,STINT_TOKEN"}, `PassEnv: "STINT_TOKEN": stint's own STINT_* variables (its tokens among them) never pass to jobs`},
		{[]string{"--allow-commands", "bin/sh"}, `AllowCommands: "bin/sh" must be an absolute path or a bare command name`},
		{[]string{"--allow-commands", "stint-no-such-command"}, `AllowCommands: "stint-no-such-command"`},
		{[]string{"--run-as", "stint-no-such-user"}, `RunAs "stint-no-such-user"`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			t.Parallel()
			srv := newRegistrar(t)
			code, out := runWorker(t, &fakeHost{}, append([]string{"--server", srv.URL}, tc.args...)...)
			require.Equal(t, 1, code, out)
			require.Contains(t, out, tc.want)
			srv.mu.Lock()
			defer srv.mu.Unlock()
			require.Empty(t, srv.reqs, "refused before registering")
		})
	}
}

// TestWorkerCommandFlags runs `stint worker` with the command flags against a server that
// leases it one shell job: the job sees what --pass-env names and not the worker's token,
// runs in a directory under --work-dir that is gone afterwards, and --allow-commands refuses
// an executable it does not list. (Not parallel: it sets the environment.)
func TestWorkerCommandFlags(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the worker runs commands on unix only")
	}
	t.Setenv("STINT_TOKEN", "worker-secret-token")
	t.Setenv("STINT_TEST_PASSED", "passed-value")
	t.Setenv("TEST_PASSED", "passed-value")
	t.Setenv("TEST_KEPT", "kept-value")
	work := t.TempDir()
	srv := newLeaseServer(t, apitype.Lease{
		RunID: "r1", JobID: "j1", JobName: "env-job", Attempt: 1, Token: "tok",
		Shell: `pwd; env`,
	})
	code, out := runWorker(t, &fakeHost{}, "--server", srv.URL, "--gpus", "0",
		"--pass-env", "TEST_PASSED", "--work-dir", work, "--allow-commands", "/bin/sh")
	require.Equal(t, 0, code, out)
	srv.mu.Lock()
	logs, c := srv.logs.String(), srv.complete
	srv.mu.Unlock()
	require.Equal(t, "succeeded", c.Status, c.Error)
	require.Contains(t, logs, "TEST_PASSED=passed-value")
	require.NotContains(t, logs, "TEST_KEPT")
	require.NotContains(t, logs, "secret", "the worker's token does not reach the job")
	require.NotContains(t, logs, "STINT_TEST_PASSED")
	dir, _, _ := strings.Cut(logs, "\n")
	resolved, err := filepath.EvalSymlinks(work)
	require.NoError(t, err)
	require.Equal(t, resolved, filepath.Dir(dir), "the job ran under --work-dir")
	require.NoDirExists(t, dir)

	marker := filepath.Join(t.TempDir(), "ran")
	srv = newLeaseServer(t, apitype.Lease{
		RunID: "r2", JobID: "j2", JobName: "refused", Attempt: 1, Token: "tok",
		Command: []string{"touch", marker},
	})
	code, out = runWorker(t, &fakeHost{}, "--server", srv.URL, "--gpus", "0", "--allow-commands", "/bin/sh")
	require.Equal(t, 0, code, out)
	srv.mu.Lock()
	c = srv.complete
	srv.mu.Unlock()
	require.Equal(t, "failed", c.Status)
	require.Contains(t, c.Error, "is not allowed on this worker (allowed: /bin/sh)")
	require.NoFileExists(t, marker)
}
