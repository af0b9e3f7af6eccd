package progress

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/stint-dev/stint/internal/clock"
)

const (
	// redrawEvery bounds how often a bar is redrawn: at most ten times a second.
	redrawEvery = 100 * time.Millisecond
	// DefaultWindow is how far back the rate looks.
	DefaultWindow = 10 * time.Second
	// barCells is the width of the bar itself, between its brackets.
	barCells = 20
)

// Bar shows the progress of one piece of work of a known size (total; 0 when it is not
// known). Its methods are safe for concurrent use, and do nothing on a nil *Bar, so code
// that draws a bar only on a terminal calls them all the same.
type Bar struct {
	mu     sync.Mutex
	w      io.Writer
	clk    clock.Clock
	label  string
	total  int
	done   int
	start  time.Time
	window time.Duration
	// samples are (time, done) readings, oldest first, at least window/64 apart: the oldest
	// is the last one at or before the window's start, which the rate is measured from.
	samples []sample
	drawnAt time.Time // when the bar was last drawn; zero: never
	shown   bool      // a bar line is on the terminal, not ended by a newline
	ended   bool
}

type sample struct {
	at   time.Time
	done int
}

// Option sets up a Bar.
type Option func(*Bar)

// WithClock makes the bar read c (default: the wall clock).
func WithClock(c clock.Clock) Option { return func(b *Bar) { b.clk = c } }

// WithWindow sets how far back the rate looks (default DefaultWindow).
func WithWindow(d time.Duration) Option {
	return func(b *Bar) {
		if d > 0 {
			b.window = d
		}
	}
}

// New returns a bar for total units of work named label, drawn on w. Nothing is drawn
// until the first Set or Add.
func New(w io.Writer, label string, total int, opts ...Option) *Bar {
	b := &Bar{w: w, clk: clock.Real{}, label: label, total: max(total, 0), window: DefaultWindow}
	for _, o := range opts {
		o(b)
	}
	b.start = b.clk.Now()
	b.samples = []sample{{at: b.start}}
	return b
}

// Set says that done units are done, and redraws the bar unless it was drawn less than
// 100ms ago (the last unit is always drawn).
func (b *Bar) Set(done int) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.update(done)
}

// Add says that n more units are done (see Set).
func (b *Bar) Add(n int) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.update(b.done + n)
}

// SetTotal changes the size of the work, for work that grows or is known late.
func (b *Bar) SetTotal(total int) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total = max(total, 0)
}

func (b *Bar) update(done int) {
	if b.ended {
		return
	}
	b.done = max(done, 0)
	now := b.clk.Now()
	if last := b.samples[len(b.samples)-1]; now.Sub(last.at) >= b.window/64 {
		b.samples = append(b.samples, sample{at: now, done: b.done})
	}
	// Keep one sample at or before the window's start: the rate spans the whole window.
	from := now.Add(-b.window)
	for len(b.samples) > 1 && !b.samples[1].at.After(from) {
		b.samples = b.samples[1:]
	}
	if !b.drawnAt.IsZero() && now.Sub(b.drawnAt) < redrawEvery && (b.total == 0 || b.done < b.total) {
		return
	}
	b.draw(now)
}

// draw writes the bar over the line it is on.
func (b *Bar) draw(now time.Time) {
	fmt.Fprintf(b.w, "\r%s\x1b[K", b.line(now))
	b.drawnAt, b.shown = now, true
}

// clear erases the bar's line, so that something else can be written there.
func (b *Bar) clear() {
	if b.shown {
		io.WriteString(b.w, "\r\x1b[K")
		b.shown = false
	}
}

// Rate returns the units done per second over the last window (see WithWindow), or 0 before
// any time passed.
func (b *Bar) Rate() float64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rate(b.clk.Now())
}

func (b *Bar) rate(now time.Time) float64 {
	base := b.samples[0]
	span := now.Sub(base.at).Seconds()
	if span <= 0 {
		return 0
	}
	return float64(b.done-base.done) / span
}

// ETA returns how long the rest of the work will take at the current rate; false when that
// is not known (no total, or nothing done in the window).
func (b *Bar) ETA() (time.Duration, bool) {
	if b == nil {
		return 0, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.eta(b.clk.Now())
}

func (b *Bar) eta(now time.Time) (time.Duration, bool) {
	r := b.rate(now)
	if b.total == 0 || r <= 0 {
		return 0, false
	}
	left := max(b.total-b.done, 0)
	return time.Duration(float64(left) / r * float64(time.Second)), true
}

// String returns the bar's line as it would be drawn now:
// "apply  37/120 [======>             ]  31%  12.5/s  ETA 7s".
func (b *Bar) String() string {
	if b == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.line(b.clk.Now())
}

func (b *Bar) line(now time.Time) string {
	var s strings.Builder
	s.WriteString(b.label)
	if b.total == 0 {
		fmt.Fprintf(&s, "  %d  %s/s", b.done, rateText(b.rate(now)))
		return s.String()
	}
	frac := min(float64(b.done)/float64(b.total), 1)
	full := int(frac * barCells)
	cells := strings.Repeat("=", full)
	if full < barCells {
		cells += ">" + strings.Repeat(" ", barCells-full-1)
	}
	fmt.Fprintf(&s, "  %d/%d [%s] %3d%%  %s/s", b.done, b.total, cells, int(frac*100), rateText(b.rate(now)))
	if b.done < b.total {
		eta := "-"
		if d, ok := b.eta(now); ok {
			eta = durationText(d)
		}
		s.WriteString("  ETA " + eta)
	}
	return s.String()
}

// Finish ends the bar: its line is replaced by a last one that stays, with the units done,
// how long they took and their mean rate: "apply  120/120 in 9.6s (12.5/s)". Later calls,
// and Set, do nothing.
func (b *Bar) Finish() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return
	}
	b.ended = true
	took := b.clk.Now().Sub(b.start)
	n := fmt.Sprint(b.done)
	if b.total > 0 {
		n += fmt.Sprintf("/%d", b.total)
	}
	mean := 0.0
	if took > 0 {
		mean = float64(b.done) / took.Seconds()
	}
	fmt.Fprintf(b.w, "\r%s  %s in %s (%s/s)\x1b[K\n", b.label, n, durationText(took), rateText(mean))
	b.shown = false
}

// Writer returns a writer for lines that go on the same terminal as the bar (the results of
// the work, say): each write clears the bar's line first and draws it again below what was
// written, when that ends a line. On a nil *Bar it returns w.
func (b *Bar) Writer(w io.Writer) io.Writer {
	if b == nil {
		return w
	}
	return &above{b: b, w: w}
}

type above struct {
	b *Bar
	w io.Writer
}

func (a *above) Write(p []byte) (int, error) {
	b := a.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clear()
	n, err := a.w.Write(p)
	if !b.ended && !b.drawnAt.IsZero() && len(p) > 0 && p[len(p)-1] == '\n' {
		b.draw(b.clk.Now())
	}
	return n, err
}

// rateText shows a rate with one decimal below 100 a second, else none: "3.5", "120".
func rateText(r float64) string {
	if r < 100 {
		return fmt.Sprintf("%.1f", r)
	}
	return fmt.Sprintf("%.0f", r)
}

// durationText shows a duration for a person: "850ms", "7.2s", "3m05s", "2h07m".
func durationText(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	default:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
}
