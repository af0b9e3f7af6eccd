package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

// streamAPI answers POST /v1/jobs/stream with answer (status 200 unless given) and records
// the request.
type streamAPI struct {
	*httptest.Server
	mu     sync.Mutex
	body   string
	header http.Header
	path   string
}

func newStreamAPI(t *testing.T, status int, contentType, answer string) *streamAPI {
	t.Helper()
	s := &streamAPI{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.body, s.header, s.path = string(b), r.Header.Clone(), r.Method+" "+r.URL.Path
		s.mu.Unlock()
		w.Header().Set("Content-Type", contentType)
		if status != 0 {
			w.WriteHeader(status)
		}
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(s.Close)
	return s
}

const batchFile = "{\"command\": [\"a\"]}\n{\"command\": []}\n\n{\"name\": \"taken\", \"shell\": \"b\"}\n{\"handler\": \"h\"}\n"

func TestSubmitBatch(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "jobs.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(batchFile), 0o600))
	rejected := `{"line":2,"error":{"title":"Bad Request","status":400,"detail":"the request has an invalid field","errors":[{"field":"command","message":"must not be empty"}]}}
{"line":4,"error":{"title":"Conflict","status":409,"detail":"a job named \"taken\" already exists","errors":[{"field":"name","message":"a job named \"taken\" already exists"}]}}
{"summary":{"accepted":2,"existing":0,"rejected":2,"last_line":5,"complete":true}}
`
	tests := []struct {
		name           string
		args           []string
		stdin          string
		answer         string
		status         int
		contentType    string
		stdout, stderr string
		code           int
	}{
		{
			name: "file, every line accepted", args: []string{"--batch", file},
			answer: `{"summary":{"accepted":3,"existing":1,"rejected":0,"last_line":5,"complete":true}}` + "\n",
			stdout: "accepted 3 (1 existing), rejected 0, of 5 lines\n",
		},
		{
			name: "stdin, lines rejected", args: []string{"--batch", "-"}, stdin: batchFile, answer: rejected,
			stdout: "accepted 2 (0 existing), rejected 2, of 5 lines\n",
			stderr: "stdin:2: command: must not be empty\nstdin:4: name: a job named \"taken\" already exists\n",
			code:   ExitUsage, // the first rejected line's: a 400
		},
		{
			name: "json", args: []string{"--batch", file, "--json"}, answer: rejected,
			stdout: rejected, stderr: file + ":2: command: must not be empty\n", code: ExitUsage,
		},
		{
			name: "quiet", args: []string{"--batch", file, "-q"}, answer: rejected,
			stderr: file + ":2: command: must not be empty\n" + file + ":4: name:", code: ExitUsage,
		},
		{
			name: "stopped early", args: []string{"--batch", file},
			answer: `{"summary":{"accepted":1,"existing":0,"rejected":0,"last_line":1,"complete":false,"error":{"title":"Service Unavailable","status":503,"detail":"the store is unavailable"}}}` + "\n",
			stdout: "accepted 1 (0 existing), rejected 0, of 1 lines\n",
			stderr: "the stream stopped after line 1; the lines after it were not submitted\nstint: Service Unavailable: the store is unavailable\n",
			code:   ExitFailed,
		},
		{
			name: "refused whole", args: []string{"--batch", file}, status: http.StatusForbidden, contentType: "application/problem+json",
			answer: `{"title":"Forbidden","status":403,"detail":"the token may not submit"}`,
			stderr: "stint: Forbidden: the token may not submit\n", code: ExitUnauthorized,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ct := tt.contentType
			if ct == "" {
				ct = apitype.JobStreamMediaType
			}
			api := newStreamAPI(t, tt.status, ct, tt.answer)
			var stdin io.Reader
			if tt.stdin != "" {
				stdin = strings.NewReader(tt.stdin)
			}
			res := runIn(t, stdin, nil, append([]string{"--server", api.URL, "submit"}, tt.args...)...)
			require.Equal(t, tt.code, res.code, "stderr: %s", res.stderr)
			require.Equal(t, tt.stdout, res.stdout)
			if tt.code == 0 {
				require.Empty(t, res.stderr)
			}
			require.True(t, strings.HasPrefix(res.stderr, tt.stderr), "stderr %q", res.stderr)
			api.mu.Lock()
			defer api.mu.Unlock()
			require.Equal(t, "POST /v1/jobs/stream", api.path)
			require.Equal(t, batchFile, api.body, "the file goes as it is")
			require.Equal(t, apitype.JobStreamMediaType, api.header.Get("Content-Type"))
			require.Equal(t, "return=minimal", api.header.Get("Prefer"))
		})
	}
}

func TestSubmitBatchUsage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"submit", "--batch", "f", "--", "ls"}, "--batch takes the jobs from f: give no command"},
		{[]string{"submit", "--batch", "f", "--queue", "q", "--wait"}, "--queue, --wait cannot go with it"},
		{[]string{"submit", "--batch", "f", "--json", "-q"}, "--json and --quiet: give one"},
		{[]string{"submit", "--batch", filepath.Join(t.TempDir(), "missing")}, "no such file"},
	} {
		res := run(t, nil, append([]string{"--server", "127.0.0.1:1"}, tt.args...)...)
		require.Equal(t, ExitUsage, res.code, "%v: %s", tt.args, res.stderr)
		require.Contains(t, res.stderr, tt.stderr, "%v", tt.args)
	}
}
