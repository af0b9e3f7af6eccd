package capacity

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

const memInfo = `MemTotal:       16314236 kB
MemFree:         1234567 kB
MemAvailable:    8000000 kB
`

// host returns a Host with 8 CPUs, 15931 MB of memory, the given files added, and no
// nvidia-smi.
func host(files map[string]string) Host {
	fsys := fstest.MapFS{memInfoPath: {Data: []byte(memInfo)}}
	for name, data := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	return Host{
		FS:     fsys,
		NumCPU: func() int { return 8 },
		Run: func(_ context.Context, name string, _ ...string) ([]byte, error) {
			return nil, fmt.Errorf("run %s: %w", name, &exec.Error{Name: name, Err: exec.ErrNotFound})
		},
	}
}

// debugLog returns a logger that writes every level to the returned buffer.
func debugLog() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

func TestCPU(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		cpuMax *string // nil: no cpu.max file
		want   float64
	}{
		{name: "no cgroup", want: 8},
		{name: "no limit", cpuMax: new("max 100000\n"), want: 8},
		{name: "one and a half CPUs", cpuMax: new("150000 100000\n"), want: 1.5},
		{name: "two CPUs", cpuMax: new("200000 100000\n"), want: 2},
		{name: "quota over the CPU count", cpuMax: new("1600000 100000\n"), want: 8},
		{name: "quota without period", cpuMax: new("50000"), want: 0.5},
		{name: "malformed: ignored", cpuMax: new("lots 100000"), want: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{}
			if tc.cpuMax != nil {
				files[cpuMaxPath] = *tc.cpuMax
			}
			log, _ := debugLog()
			require.InDelta(t, tc.want, host(files).CPU(log), 1e-9)
		})
	}
}

func TestCPUMalformedIsLogged(t *testing.T) {
	t.Parallel()
	log, buf := debugLog()
	require.InDelta(t, 8, host(map[string]string{cpuMaxPath: "0 100000"}).CPU(log), 1e-9)
	require.Contains(t, buf.String(), "level=WARN")
	require.Contains(t, buf.String(), "quota is not a positive number")
}

func TestMemoryMB(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		files map[string]string
		noMem bool // remove /proc/meminfo
		want  int64
	}{
		{name: "no cgroup", want: 15931},
		{name: "memory.max is max", files: map[string]string{memoryMaxPath: "max\n"}, want: 15931},
		{name: "memory.max is a number", files: map[string]string{memoryMaxPath: "2147483648\n"}, want: 2048},
		{name: "memory.max above MemTotal", files: map[string]string{memoryMaxPath: "68719476736\n"}, want: 15931},
		{name: "malformed memory.max: ignored", files: map[string]string{memoryMaxPath: "2G\n"}, want: 15931},
		{name: "no meminfo, a limit", files: map[string]string{memoryMaxPath: "536870912"}, noMem: true, want: 512},
		{name: "no meminfo, no limit", noMem: true, want: 0},
		{name: "meminfo without MemTotal", files: map[string]string{memInfoPath: "MemFree: 12 kB\n"}, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := host(tc.files)
			if tc.noMem {
				delete(h.FS.(fstest.MapFS), memInfoPath)
			}
			log, _ := debugLog()
			require.Equal(t, tc.want, h.MemoryMB(log))
		})
	}
}

func TestGPUs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const twoGPUs = "0, NVIDIA A100-SXM4-40GB, 40960 MiB\n1, NVIDIA A100-SXM4-40GB, 40960 MiB\n"
	h := host(nil)
	var gotName string
	var gotArgs []string
	h.Run = func(_ context.Context, name string, args ...string) ([]byte, error) {
		gotName, gotArgs = name, args
		return []byte(twoGPUs), nil
	}
	require.Equal(t, []GPU{
		{Index: 0, Name: "NVIDIA A100-SXM4-40GB", MemoryMB: 40960},
		{Index: 1, Name: "NVIDIA A100-SXM4-40GB", MemoryMB: 40960},
	}, h.GPUs(ctx, nil))
	require.Equal(t, "nvidia-smi", gotName)
	require.Equal(t, []string{"--query-gpu=index,name,memory.total", "--format=csv,noheader"}, gotArgs)

	t.Run("CUDA_VISIBLE_DEVICES limits the offer", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			env  string
			set  bool
			want []int
		}{
			{set: false, want: []int{0, 1}},
			{env: "1", set: true, want: []int{1}},
			{env: " 1 , 0 ,7", set: true, want: []int{0, 1}},
			{env: "", set: true, want: nil},
			{env: "GPU-8a1b,1", set: true, want: []int{1}},
		} {
			h := host(nil)
			h.Run = func(context.Context, string, ...string) ([]byte, error) { return []byte(twoGPUs), nil }
			h.LookupEnv = func(k string) (string, bool) {
				require.Equal(t, "CUDA_VISIBLE_DEVICES", k)
				return tc.env, tc.set
			}
			var got []int
			for _, g := range h.GPUs(ctx, nil) {
				got = append(got, g.Index)
			}
			require.Equal(t, tc.want, got, "CUDA_VISIBLE_DEVICES=%q set=%v", tc.env, tc.set)
		}
	})
	t.Run("nvidia-smi missing", func(t *testing.T) {
		t.Parallel()
		log, buf := debugLog()
		require.Empty(t, host(nil).GPUs(ctx, log))
		require.Contains(t, buf.String(), "level=DEBUG")
		require.Contains(t, buf.String(), "nvidia-smi is not on PATH")
	})
	t.Run("nvidia-smi fails", func(t *testing.T) {
		t.Parallel()
		h := host(nil)
		h.Run = func(context.Context, string, ...string) ([]byte, error) {
			return nil, errors.New("run nvidia-smi: exit status 9: NVIDIA-SMI has failed")
		}
		log, buf := debugLog()
		require.Empty(t, h.GPUs(ctx, log))
		require.Contains(t, buf.String(), "level=DEBUG")
		require.Contains(t, buf.String(), "NVIDIA-SMI has failed")
		require.NotContains(t, buf.String(), "level=WARN")
	})
	t.Run("unexpected output", func(t *testing.T) {
		t.Parallel()
		h := host(nil)
		h.Run = func(context.Context, string, ...string) ([]byte, error) {
			return []byte("No devices were found\n"), nil
		}
		require.Empty(t, h.GPUs(ctx, nil))
	})
	t.Run("no output: no GPUs", func(t *testing.T) {
		t.Parallel()
		h := host(nil)
		h.Run = func(context.Context, string, ...string) ([]byte, error) { return nil, nil }
		require.Empty(t, h.GPUs(ctx, nil))
	})
}

func TestParseNvidiaSMI(t *testing.T) {
	t.Parallel()
	got, err := parseNvidiaSMI("3, Tesla T4, [N/A]\n")
	require.NoError(t, err)
	require.Equal(t, []GPU{{Index: 3, Name: "Tesla T4"}}, got)
	for _, bad := range []string{"x, Tesla T4, 15360 MiB", "0, Tesla T4", "-1, a, 1 MiB"} {
		_, err := parseNvidiaSMI(bad)
		require.Error(t, err, bad)
	}
}

// TestOS checks the real host's figures are sane; it needs no GPU.
func TestOS(t *testing.T) {
	t.Parallel()
	h := OS()
	require.Positive(t, h.CPU(nil))
	require.GreaterOrEqual(t, h.MemoryMB(nil), int64(0))
	_, err := h.Run(context.Background(), "stint-no-such-command-for-test")
	require.ErrorIs(t, err, exec.ErrNotFound)
}
