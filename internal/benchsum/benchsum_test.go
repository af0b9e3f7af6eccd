package benchsum

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSummarize(t *testing.T) {
	t.Parallel()
	require.Equal(t, Stat{Median: 5, Min: 1, Max: 9, N: 3}, Summarize([]float64{9, 1, 5}))
	require.Equal(t, Stat{Median: 2.5, Min: 1, Max: 4, N: 4}, Summarize([]float64{4, 1, 3, 2}), "even: the middle two's mean")
	require.Equal(t, Stat{Median: 7, Min: 7, Max: 7, N: 1}, Summarize([]float64{7}))
	require.Equal(t, Stat{}, Summarize(nil))
	in := []float64{3, 1, 2}
	Summarize(in)
	require.Equal(t, []float64{3, 1, 2}, in, "the caller's values stay in their order")
}

// results are runs of stint bench --json: two configurations of drain, interleaved by
// round, a third run of one lacking a figure, and a steady run.
const results = `{"workload":"drain","store":"postgres, 1 server processes, 3 HTTP workers in the bench's process","params":{"n":"1000","batch":"1000"},"figures":[{"name":"processed","value":100,"unit":"jobs/s"},{"name":"servers memory per 10,000 queued runs","value":0.5,"unit":"MiB"}]}
{"workload":"drain","store":"postgres, 2 server processes, 3 HTTP workers in the bench's process","params":{"batch":"1000","n":"1000"},"figures":[{"name":"processed","value":200,"unit":"jobs/s"},{"name":"servers memory per 10,000 queued runs","value":1.5,"unit":"MiB"}]}

{"workload":"drain","store":"postgres, 1 server processes, 3 HTTP workers in the bench's process","params":{"n":"1000","batch":"1000"},"figures":[{"name":"processed","value":300,"unit":"jobs/s"},{"name":"servers memory per 10,000 queued runs","value":-0.2,"unit":"MiB"}]}
{"workload":"drain","store":"postgres, 2 server processes, 3 HTTP workers in the bench's process","params":{"batch":"1000","n":"1000"},"figures":[{"name":"processed","value":1200,"unit":"jobs/s"},{"name":"servers memory per 10,000 queued runs","value":2,"unit":"MiB"}]}
{"workload":"drain","store":"postgres, 1 server processes, 3 HTTP workers in the bench's process","params":{"n":"1000","batch":"1000"},"figures":[{"name":"processed","value":200,"unit":"jobs/s"}]}
{"workload":"steady","store":"postgres, 1 server processes, 3 HTTP workers in the bench's process","params":{"duration":"30s"},"figures":[{"name":"submit-to-start p99","value":12.34,"unit":"ms"}]}
`

func TestRead(t *testing.T) {
	t.Parallel()
	groups, err := Read(strings.NewReader(results))
	require.NoError(t, err)
	require.Len(t, groups, 3, "grouped by workload, store and parameters, whatever their order in the JSON")
	one, two, steady := groups[0], groups[1], groups[2]
	require.Equal(t, "drain", one.Workload)
	require.Contains(t, one.Store, "1 server processes")
	require.Equal(t, 3, one.Runs)
	require.Equal(t, 2, two.Runs)
	require.Equal(t, "steady", steady.Workload)

	s, ok := one.Stat("processed")
	require.True(t, ok)
	require.Equal(t, Stat{Median: 200, Min: 100, Max: 300, N: 3}, s)
	s, _ = one.Stat("servers memory per 10,000 queued runs")
	require.Equal(t, Stat{Median: 0.15, Min: -0.2, Max: 0.5, N: 2}, s, "two of the three runs reported it")
	s, _ = two.Stat("processed")
	require.Equal(t, Stat{Median: 700, Min: 200, Max: 1200, N: 2}, s)
	_, ok = two.Stat("no such figure")
	require.False(t, ok)

	_, err = Read(strings.NewReader("{\"workload\":\"drain\"}\nnot json\n"))
	require.ErrorContains(t, err, "line 2")
	_, err = Read(strings.NewReader(`{"store":"sqlite"}`))
	require.ErrorContains(t, err, "no workload")
	_, err = Read(strings.NewReader("\n"))
	require.ErrorContains(t, err, "no results")
}

func TestWrite(t *testing.T) {
	t.Parallel()
	groups, err := Read(strings.NewReader(results))
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, Write(&b, groups, nil))
	require.Equal(t, `**drain**: postgres; 3 HTTP workers in the bench's process; batch: 1000; n: 1000

| figure | 1 server processes (3 runs) | 2 server processes (2 runs) |
| --- | --- | --- |
| processed (jobs/s) | 200 [100..300] | 700 [200..1,200] |
| servers memory per 10,000 queued runs (MiB) | 0.15 [-0.20..0.50] (2 of 3 runs) | 1.8 [1.5..2.0] |

**steady**: postgres; 1 server processes; 3 HTTP workers in the bench's process; duration: 30s

| figure | median [min..max] (1 runs) |
| --- | --- |
| submit-to-start p99 (ms) | 12.3 [12.3..12.3] |
`, b.String())

	b.Reset()
	require.NoError(t, Write(&b, groups[:1], []string{"MEMORY"}))
	require.NotContains(t, b.String(), "processed")
	require.Contains(t, b.String(), "| servers memory per 10,000 queued runs (MiB) |")
}

func TestNumber(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{0: "0.0", 0.126: "0.13", 1: "1.0", 12.34: "12.3", 99.94: "99.9",
		100: "100", 1234.5: "1,235", 1234567: "1,234,567", -2500: "-2,500", -0.5: "-0.50"} {
		require.Equal(t, want, Number(v), "%v", v)
	}
}

// TestCommand runs `summarize` on a file, and names the file it cannot read.
func TestCommand(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "scale.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(results), 0o600))
	cmd := Command()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{path, "--figure", "p99"})
	require.NoError(t, cmd.Execute())
	require.Contains(t, out.String(), "| submit-to-start p99 (ms) | 12.3 [12.3..12.3] |")
	require.NotContains(t, out.String(), "processed")

	cmd = Command()
	cmd.SetArgs([]string{filepath.Join(t.TempDir(), "missing.jsonl")})
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	require.ErrorContains(t, cmd.Execute(), "missing.jsonl")
}
