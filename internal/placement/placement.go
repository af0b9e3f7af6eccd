// Package placement decides which runs fit which workers. A run's requirements (cpu,
// memory, gpu, labels) are matched against a worker's labels and its free capacity (what it
// declared minus what its running runs need); among the workers a run fits, the best fit is
// the one it leaves least room on, so that small work does not spread over the big
// workers that the big work needs. When nothing fits, Explain says why, counted per
// constraint the way Nomad reports placement failures.
//
// Slots are not placement's business: a worker asks for as many runs as it has free slots.
package placement

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/stint-dev/stint/internal/model"
)

// epsilon absorbs the rounding of summed fractional cpus (0.1 + 0.2 fits in 0.3).
const epsilon = 1e-9

// LabelPattern is what a label key must look like, on workers and in requirements. The
// store matches requirement labels inside SQL, where a key is spliced into a JSON path, so
// quotes and other punctuation are kept out.
var LabelPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_./-]{0,62}$`)

// LabelRule is LabelPattern in words, for error messages.
const LabelRule = "must be 1 to 63 letters, digits, '_', '.', '/' or '-', starting with a letter or digit"

// Room is one worker as placement sees it.
type Room struct {
	WorkerID string
	Labels   map[string]string
	// Capacity is what the worker declared; Free is Capacity less what its running runs
	// need. Slots are ignored.
	Capacity model.Capacity
	Free     model.Capacity
}

// Constrained reports whether req asks anything of a worker. Unconstrained runs fit every
// worker and are not placed by score.
func Constrained(req model.Requirements) bool {
	return req.CPU > 0 || req.MemoryMB > 0 || req.GPU > 0 || len(req.Labels) > 0
}

// Lacks says what w does not offer req. never lists the constraints w can never meet
// (labels it does not have, or more than it declared); busy lists those it meets by
// declaration but not with what is free now. Both are in the words Explain counts, such as
// "gpu >= 4" or "label zone=eu".
func (w *Room) Lacks(req model.Requirements) (never, busy []string) {
	for _, k := range slices.Sorted(maps.Keys(req.Labels)) {
		if v, ok := w.Labels[k]; !ok || v != req.Labels[k] {
			never = append(never, fmt.Sprintf("label %s=%s", k, req.Labels[k]))
		}
	}
	check := func(name string, need, declared, free float64) {
		switch {
		case need <= 0:
		case need > declared+epsilon:
			never = append(never, fmt.Sprintf("%s >= %s", name, num(need)))
		case need > free+epsilon:
			busy = append(busy, fmt.Sprintf("%s >= %s", name, num(need)))
		}
	}
	check("cpu", req.CPU, w.Capacity.CPU, w.Free.CPU)
	check("memory_mb", float64(req.MemoryMB), float64(w.Capacity.MemoryMB), float64(w.Free.MemoryMB))
	check("gpu", float64(req.GPU), float64(w.Capacity.GPU), float64(w.Free.GPU))
	return never, busy
}

// Fits reports whether req fits w now: its labels, and its free capacity.
func (w *Room) Fits(req model.Requirements) bool {
	for k, v := range req.Labels {
		if have, ok := w.Labels[k]; !ok || have != v {
			return false
		}
	}
	return req.CPU <= w.Free.CPU+epsilon && req.MemoryMB <= w.Free.MemoryMB && req.GPU <= w.Free.GPU
}

// Take books req on w.
func (w *Room) Take(req model.Requirements) {
	w.Free.CPU -= req.CPU
	w.Free.MemoryMB -= req.MemoryMB
	w.Free.GPU -= req.GPU
}

// Score is how much room w would have left, as a share of what it declared, after taking
// req, summed over the kinds of capacity it declares: lower is a tighter, better fit. A cpu
// job scores better on a worker without GPUs than on one whose GPUs it would leave idle.
func (w *Room) Score(req model.Requirements) float64 {
	var s float64
	add := func(free, need, declared float64) {
		if declared > 0 {
			s += (free - need) / declared
		}
	}
	add(w.Free.CPU, req.CPU, w.Capacity.CPU)
	add(float64(w.Free.MemoryMB), float64(req.MemoryMB), float64(w.Capacity.MemoryMB))
	add(float64(w.Free.GPU), float64(req.GPU), float64(w.Capacity.GPU))
	return s
}

// Best returns the index of the worker in rooms that req fits best now, or -1 when it fits
// none. Ties go to the first.
func Best(rooms []Room, req model.Requirements) int {
	best, score := -1, 0.0
	for i := range rooms {
		if !rooms[i].Fits(req) {
			continue
		}
		if s := rooms[i].Score(req); best < 0 || s < score-epsilon {
			best, score = i, s
		}
	}
	return best
}

// Candidate is a queued run offered to a worker, with when it became due.
type Candidate struct {
	Req   model.Requirements
	Since time.Time
}

// Pack picks, from cands in lease order, the runs a worker (self) takes now: each that fits
// what is still free after the ones picked before it (a run that does not fit is skipped,
// not waited for). A constrained run that another live worker (others) fits better is left
// for that worker while it is younger than hold (its Since + hold is not past), so that it
// lands on the best fit rather than on whichever worker asked first; after that any worker
// that fits takes it. heldUntil is the earliest such hold's end (zero when none was held).
// self and others are updated with what was picked or left for them.
func Pack(self *Room, others []Room, cands []Candidate, now time.Time, hold time.Duration) (take []int, heldUntil time.Time) {
	for i, c := range cands {
		if !Constrained(c.Req) {
			take = append(take, i)
			continue
		}
		if !self.Fits(c.Req) {
			continue
		}
		if until := c.Since.Add(hold); hold > 0 && now.Before(until) {
			if j := Best(others, c.Req); j >= 0 && others[j].Score(c.Req) < self.Score(c.Req)-epsilon {
				others[j].Take(c.Req)
				if heldUntil.IsZero() || until.Before(heldUntil) {
					heldUntil = until
				}
				continue
			}
		}
		self.Take(c.Req)
		take = append(take, i)
	}
	return take, heldUntil
}

// Verdict is Explain's answer.
type Verdict struct {
	// Fits lists the workers req fits now, best first.
	Fits []string
	// Code is model.PendingNoWorker when Fits is empty; empty otherwise.
	Code model.PendingCode
	// Reason is Code in words, with counts per constraint: "no worker fits: 3 registered,
	// 3 lack gpu >= 4". Empty when Fits is not.
	Reason string
	// Never counts, per constraint, the workers that can never meet it; Busy, those that
	// meet it by declaration but not with what is free now.
	Never, Busy map[string]int
}

// Explain tells where req fits among rooms (the workers taking work) and, when it fits
// nowhere, why: how many workers lack each constraint, and whether waiting can help
// (some worker would fit once its running work ends) or not.
func Explain(rooms []Room, req model.Requirements) Verdict {
	v := Verdict{Never: map[string]int{}, Busy: map[string]int{}}
	type fit struct {
		id    string
		score float64
	}
	var fits []fit
	couldFit := 0
	for i := range rooms {
		never, busy := rooms[i].Lacks(req)
		for _, c := range never {
			v.Never[c]++
		}
		if len(never) > 0 {
			continue
		}
		for _, c := range busy {
			v.Busy[c]++
		}
		if len(busy) > 0 {
			couldFit++
			continue
		}
		fits = append(fits, fit{rooms[i].WorkerID, rooms[i].Score(req)})
	}
	slices.SortStableFunc(fits, func(a, b fit) int { return cmp.Compare(a.score, b.score) })
	for _, f := range fits {
		v.Fits = append(v.Fits, f.id)
	}
	if len(v.Fits) > 0 {
		return v
	}
	v.Code = model.PendingNoWorker
	switch {
	case len(rooms) == 0:
		v.Reason = "no worker is connected"
	case couldFit > 0:
		v.Reason = fmt.Sprintf("no worker has room now: %d registered, %d would fit when their running work ends (%s)",
			len(rooms), couldFit, counts(v.Busy, "busy, short of"))
		if len(v.Never) > 0 {
			v.Reason += ", " + counts(v.Never, "")
		}
	default:
		v.Reason = fmt.Sprintf("no worker fits: %d registered, %s", len(rooms), counts(v.Never, ""))
	}
	return v
}

// counts renders constraint counts as "3 lack gpu >= 4, 1 lacks label zone=eu", most
// common first; verb replaces "lack(s)" when given.
func counts(m map[string]int, verb string) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := verb
		if v == "" {
			v = "lack"
			if m[k] == 1 {
				v = "lacks"
			}
		}
		parts[i] = fmt.Sprintf("%d %s %s", m[k], v, k)
	}
	return strings.Join(parts, ", ")
}

// num prints a requirement without a needless fraction: 4, 0.5.
func num(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", f), "0"), ".")
}
