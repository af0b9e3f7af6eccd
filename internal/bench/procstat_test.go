package bench

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	// A command name with spaces and parentheses: fields count from the last ')'.
	line := "4242 (stint (x) y) S 1 4242 4242 0 -1 4194560 9181 0 0 0 1234 567 0 0 20 0 12 0 1234567 1585348608 20187 18446744073709551615\n"
	ticks, err := parseStat([]byte(line))
	require.NoError(t, err)
	require.Equal(t, uint64(1234+567), ticks)

	_, err = parseStat([]byte("4242 stint S 1"))
	require.ErrorContains(t, err, "no command name")
	_, err = parseStat([]byte("4242 (stint) S 1 2 3"))
	require.ErrorContains(t, err, "fields")
	_, err = parseStat([]byte("4242 (stint) S 1 4242 4242 0 -1 4194560 9181 0 0 0 x 567 0"))
	require.ErrorContains(t, err, "cpu time")
}

func TestParseStatus(t *testing.T) {
	t.Parallel()
	status := "Name:\tstint\nVmPeak:\t 1600000 kB\nVmHWM:\t   81234 kB\nVmRSS:\t   80000 kB\nThreads:\t12\n"
	rss, hwm, err := parseStatus([]byte(status))
	require.NoError(t, err)
	require.Equal(t, int64(80000*1024), rss)
	require.Equal(t, int64(81234*1024), hwm)

	_, _, err = parseStatus([]byte("Name:\tkthreadd\nThreads:\t1\n"))
	require.ErrorContains(t, err, "missing")
	_, _, err = parseStatus([]byte("VmHWM:\t 1 MB\nVmRSS:\t 1 kB\n"))
	require.ErrorContains(t, err, "kB")
}

func TestParseMachineStat(t *testing.T) {
	t.Parallel()
	// user nice system idle iowait irq softirq steal guest guest_nice; then one line per CPU.
	stat := "cpu  1000 20 300 5000 40 5 6 70 99 0\ncpu0 500 10 150 2500 20 2 3 35 0 0\nintr 1 2\n"
	busy, total, err := parseMachineStat([]byte(stat))
	require.NoError(t, err)
	require.Equal(t, uint64(1000+20+300+5+6), busy, "guest is in user already; steal is not work")
	require.Equal(t, busy+5000+40+70, total)

	_, _, err = parseMachineStat([]byte("cpu0 1 2 3 4 5 6 7 8\n"))
	require.ErrorContains(t, err, "first line")
	_, _, err = parseMachineStat([]byte("cpu 1 2 3\n"))
	require.ErrorContains(t, err, "columns")
	_, _, err = parseMachineStat([]byte("cpu 1 2 x 4 5 6 7 8\n"))
	require.ErrorContains(t, err, "column 3")

	u := machineBetween(machineSample{busy: time.Second, total: 4 * time.Second}, machineSample{busy: 4 * time.Second, total: 8 * time.Second})
	require.Equal(t, 3*time.Second, u.busy)
	require.InDelta(t, 75.0, u.share, 1e-9)
	require.Zero(t, machineBetween(machineSample{}, machineSample{}).share)
	backwards := machineBetween(machineSample{busy: time.Second, total: 4 * time.Second}, machineSample{busy: 3 * time.Second, total: 5 * time.Second})
	require.Equal(t, 100.0, backwards.share, "iowait stepped back")
}

// TestReadProc reads this test process, which has used some CPU and holds some memory.
func TestReadProc(t *testing.T) {
	t.Parallel()
	before, err := readProc(os.Getpid())
	require.NoError(t, err)
	require.Positive(t, before.rss)
	require.GreaterOrEqual(t, before.hwm, before.rss)
	// Spin until the kernel has counted more CPU time (ticks of 10 ms).
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := readProc(os.Getpid())
		require.NoError(t, err)
		if s.cpu > before.cpu {
			break
		}
		require.True(t, time.Now().Before(deadline), "no CPU time counted in 30 s of spinning")
		for i := 0; i < 1e6; i++ {
			_ = i * i
		}
	}
	_, err = readProc(-1)
	require.Error(t, err)
	require.InDelta(t, 50.0, cpuShare(500*time.Millisecond, time.Second), 1e-9)
	require.Zero(t, cpuShare(time.Second, 0))
}

func TestBackendCPU(t *testing.T) {
	t.Parallel()
	before := map[int]procSample{1: {cpu: time.Second}, 2: {cpu: 2 * time.Second}, 3: {cpu: 5 * time.Second}}
	after := map[int]procSample{
		1: {cpu: 1500 * time.Millisecond}, // 0.5 s in the window
		2: {cpu: 2 * time.Second},         // idle
		4: {cpu: 300 * time.Millisecond},  // connected in the window: all of it
		// 3 ended in the window: what it used since the first sample is lost
	}
	used, n := backendCPU(before, after)
	require.Equal(t, 800*time.Millisecond, used)
	require.Equal(t, 3, n)
}

// TestMemoryGrowth: the arithmetic of "servers memory per 10,000 queued runs" and "per
// connected worker".
func TestMemoryGrowth(t *testing.T) {
	t.Parallel()
	require.Equal(t, int64(300<<20), rssOf([]procSample{{rss: 100 << 20}, {rss: 200 << 20}}), "servers summed")
	require.Zero(t, rssOf(nil))

	// 100,000 runs queued grew three servers by 40 MiB: 4 MiB per 10,000.
	require.InDelta(t, 4.0, growthPer(300<<20, 340<<20, 100000, 10000)/(1<<20), 1e-9)
	// 2,000 agents grew the servers by 50 MiB: 25.6 KiB each.
	require.InDelta(t, 25.6, growthPer(100<<20, 150<<20, 2000, 1)/(1<<10), 1e-9)
	require.InDelta(t, -1.0, growthPer(10<<20, 9<<20, 10000, 10000)/(1<<20), 1e-9, "memory given back stays negative")
	require.Zero(t, growthPer(1, 2, 0, 10000), "no runs: no figure to divide by")
}
