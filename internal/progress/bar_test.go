package progress

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/clock"
)

var t0 = time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)

func newTestBar(total int, opts ...Option) (*Bar, *bytes.Buffer, *clock.Fake) {
	var buf bytes.Buffer
	clk := clock.NewFake(t0)
	return New(&buf, "apply", total, append([]Option{WithClock(clk)}, opts...)...), &buf, clk
}

// TestRateOverWindow: the rate is that of the last window, not the mean since the start,
// and the time left follows it.
func TestRateOverWindow(t *testing.T) {
	t.Parallel()
	b, _, clk := newTestBar(1000)
	done := 0
	for range 20 { // 10 a second for 20s
		clk.Advance(time.Second)
		done += 10
		b.Set(done)
	}
	require.InDelta(t, 10, b.Rate(), 1e-9)
	eta, ok := b.ETA()
	require.True(t, ok)
	require.Equal(t, 80*time.Second, eta, "800 left at 10/s")

	for range 10 { // then 1 a second for 10s: the window (10s) sees only those
		clk.Advance(time.Second)
		done++
		b.Set(done)
	}
	require.InDelta(t, 1, b.Rate(), 1e-9, "the mean since the start would be 7")
	eta, ok = b.ETA()
	require.True(t, ok)
	require.Equal(t, 790*time.Second, eta)

	// Nothing done for a whole window: the rate is 0 and the time left unknown.
	for range 11 {
		clk.Advance(time.Second)
		b.Set(done)
	}
	require.Zero(t, b.Rate())
	_, ok = b.ETA()
	require.False(t, ok)
}

func TestRateShorterWindow(t *testing.T) {
	t.Parallel()
	b, _, clk := newTestBar(100, WithWindow(2*time.Second))
	clk.Advance(time.Second)
	b.Set(50)
	clk.Advance(time.Second)
	b.Set(52)
	clk.Advance(time.Second)
	b.Set(54)
	require.InDelta(t, 2, b.Rate(), 1e-9, "the last 2s: 52 to 54 was 1s, 50 to 52 the second before")
}

func TestRateBeforeTimePasses(t *testing.T) {
	t.Parallel()
	b, _, _ := newTestBar(10)
	b.Set(3)
	require.Zero(t, b.Rate())
	_, ok := b.ETA()
	require.False(t, ok)
	require.Equal(t, "apply  3/10 [======>             ]  30%  0.0/s  ETA -", b.String())
}

func TestLine(t *testing.T) {
	t.Parallel()
	b, _, clk := newTestBar(20)
	clk.Advance(5 * time.Second)
	b.Set(5)
	require.Equal(t, "apply  5/20 [=====>              ]  25%  1.0/s  ETA 15s", b.String())
	clk.Advance(5 * time.Second)
	b.Set(20)
	require.Equal(t, "apply  20/20 [====================] 100%  2.0/s", b.String(), "no time left to show")

	u, _, clk := newTestBar(0) // no total: a count and a rate
	clk.Advance(2 * time.Second)
	u.Set(300)
	require.Equal(t, "apply  300  150/s", u.String())
}

// TestRedrawAtMostTenTimesASecond: updates closer than 100ms to the last drawing are not
// drawn, but the last unit always is.
func TestRedrawAtMostTenTimesASecond(t *testing.T) {
	t.Parallel()
	b, buf, clk := newTestBar(100)
	for i := 1; i <= 50; i++ {
		clk.Advance(10 * time.Millisecond)
		b.Set(i)
	}
	// 500ms of updates every 10ms: drawn at the first, then every 100ms.
	require.Equal(t, 5, strings.Count(buf.String(), "\r"), buf.String())
	buf.Reset()
	b.Set(100)
	require.Equal(t, 1, strings.Count(buf.String(), "\r"), "the last unit is drawn at once")
	require.Contains(t, buf.String(), "100/100")
}

func TestFinish(t *testing.T) {
	t.Parallel()
	b, buf, clk := newTestBar(120)
	clk.Advance(4 * time.Second)
	b.Set(60)
	clk.Advance(5600 * time.Millisecond)
	b.Set(120)
	buf.Reset()
	b.Finish()
	require.Equal(t, "\rapply  120/120 in 9.6s (12.5/s)\x1b[K\n", buf.String())
	buf.Reset()
	b.Set(130)
	b.Finish()
	require.Empty(t, buf.String(), "a finished bar draws nothing more")
}

// TestWriterAbove: lines written through Writer go above the bar, which is drawn again.
func TestWriterAbove(t *testing.T) {
	t.Parallel()
	b, buf, clk := newTestBar(2)
	var out bytes.Buffer
	w := b.Writer(&out)
	_, err := w.Write([]byte("job/a created\n"))
	require.NoError(t, err)
	require.Empty(t, buf.String(), "no bar drawn yet: nothing to clear or redraw")
	require.Equal(t, "job/a created\n", out.String())

	clk.Advance(time.Second)
	b.Set(1)
	buf.Reset()
	_, err = w.Write([]byte("job/b created\n"))
	require.NoError(t, err)
	require.Equal(t, "\r\x1b[K\rapply  1/2 [==========>         ]  50%  1.0/s  ETA 1s\x1b[K", buf.String(),
		"the bar's line cleared, then drawn again")

	b.Finish()
	buf.Reset()
	_, err = w.Write([]byte("summary\n"))
	require.NoError(t, err)
	require.Empty(t, buf.String(), "a finished bar stays as its last line")
}

func TestNilBar(t *testing.T) {
	t.Parallel()
	var b *Bar
	b.Set(1)
	b.Add(1)
	b.SetTotal(3)
	b.Finish()
	require.Zero(t, b.Rate())
	require.Empty(t, b.String())
	var out bytes.Buffer
	require.Same(t, &out, b.Writer(&out).(*bytes.Buffer))
	var p *Phases
	p.Update("x", 1, 2)
	p.Finish()
}

func TestConcurrentAdds(t *testing.T) {
	t.Parallel()
	b, _, _ := newTestBar(800)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Add(1)
			}
		})
	}
	wg.Wait()
	require.Contains(t, b.String(), "800/800")
}

func TestPhases(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	clk := clock.NewFake(t0)
	p := NewPhases(&buf, WithClock(clk))
	clk.Advance(time.Second)
	p.Update("insert", 500, 1000)
	clk.Advance(time.Second)
	p.Update("insert", 1000, 1000)
	clk.Advance(time.Second)
	p.Update("drain", 10, 1000)
	require.Contains(t, buf.String(), "\rinsert  1000/1000 in 2s (500/s)\x1b[K\n", "a new phase finishes the one before")
	clk.Advance(time.Second)
	p.Update("drain", 1000, 1000)
	buf.Reset()
	p.Finish()
	require.Equal(t, "\rdrain  1000/1000 in 1s (1000/s)\x1b[K\n", buf.String(), "the drain bar started with the phase")
}

func TestDurationText(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		850 * time.Millisecond:                    "850ms",
		7240 * time.Millisecond:                   "7.2s",
		3*time.Minute + 5*time.Second:             "3m05s",
		2*time.Hour + 7*time.Minute + time.Second: "2h07m",
	} {
		require.Equal(t, want, durationText(d), d.String())
	}
}
