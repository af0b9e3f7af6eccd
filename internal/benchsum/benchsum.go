// Package benchsum summarises results of `stint bench --json` taken several times each:
// the runs of one configuration (same workload, store and parameters) are grouped, and each
// figure is printed as the median of the runs with their min and max, in Markdown tables
// (one per workload, a column per configuration). bench/scale.sh writes such results.
package benchsum

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/stint-dev/stint/internal/bench"
)

// Group is the runs of one configuration: one workload, store and set of parameters.
type Group struct {
	Workload string
	Store    string
	Params   map[string]string
	Runs     int
	figures  []string             // names in the order first seen
	units    map[string]string    // by name
	values   map[string][]float64 // by name, one per run that reported it
}

// Stat is a figure over the runs of a group that reported it.
type Stat struct {
	Median, Min, Max float64
	N                int // runs
}

// Summarize returns the median, min and max of values (the mean of the two middle ones for an
// even count); the zero Stat for none.
func Summarize(values []float64) Stat {
	if len(values) == 0 {
		return Stat{}
	}
	v := slices.Clone(values)
	slices.Sort(v)
	n := len(v)
	med := v[n/2]
	if n%2 == 0 {
		med = (v[n/2-1] + v[n/2]) / 2
	}
	return Stat{Median: med, Min: v[0], Max: v[n-1], N: n}
}

// Stat returns the figure name over the group's runs, and false when none reported it.
func (g *Group) Stat(name string) (Stat, bool) {
	v, ok := g.values[name]
	return Summarize(v), ok
}

// key is what tells one configuration from another.
func key(r *bench.Result) string {
	b, _ := json.Marshal([]any{r.Workload, r.Store, r.Params}) // maps marshal in key order
	return string(b)
}

// Read reads results, one JSON object a line (blank lines skipped), and groups them by
// configuration, in the order each configuration first appears.
func Read(r io.Reader) ([]*Group, error) {
	var groups []*Group
	byKey := map[string]*Group{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20) // a result lists plans and statements too
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var res bench.Result
		if err := json.Unmarshal([]byte(text), &res); err != nil {
			return nil, fmt.Errorf("line %d: not a result of stint bench --json: %w", line, err)
		}
		if res.Workload == "" {
			return nil, fmt.Errorf("line %d: not a result of stint bench --json: no workload", line)
		}
		k := key(&res)
		g := byKey[k]
		if g == nil {
			g = &Group{Workload: res.Workload, Store: res.Store, Params: res.Params,
				units: map[string]string{}, values: map[string][]float64{}}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.Runs++
		for _, f := range res.Figures {
			if _, seen := g.units[f.Name]; !seen {
				g.figures = append(g.figures, f.Name)
				g.units[f.Name] = f.Unit
			}
			g.values[f.Name] = append(g.values[f.Name], f.Value)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	if len(groups) == 0 {
		return nil, errors.New("no results")
	}
	return groups, nil
}

// items are what describes a group: the parts of its store and its parameters.
func (g *Group) items() []string {
	out := strings.Split(g.Store, ", ")
	keys := make([]string, 0, len(g.Params))
	for k := range g.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+": "+g.Params[k])
	}
	return out
}

// Write prints a Markdown table per workload, in the order the workloads first appear: a
// column per configuration, headed by what tells it from the workload's others (what all
// share is printed above the table), and a row per figure, "median [min..max]". With
// figures, only the figures whose name contains one of them (case-insensitive) are printed.
func Write(w io.Writer, groups []*Group, figures []string) error {
	var workloads []string
	by := map[string][]*Group{}
	for _, g := range groups {
		if by[g.Workload] == nil {
			workloads = append(workloads, g.Workload)
		}
		by[g.Workload] = append(by[g.Workload], g)
	}
	bw := bufio.NewWriter(w)
	for i, wl := range workloads {
		if i > 0 {
			fmt.Fprintln(bw)
		}
		writeTable(bw, wl, by[wl], figures)
	}
	return bw.Flush()
}

func writeTable(w io.Writer, workload string, gs []*Group, figures []string) {
	count := map[string]int{}
	for _, g := range gs {
		for _, it := range g.items() {
			count[it]++
		}
	}
	var common []string
	for _, it := range gs[0].items() {
		if count[it] == len(gs) {
			common = append(common, it)
		}
	}
	fmt.Fprintf(w, "**%s**: %s\n\n", workload, escape(strings.Join(common, "; ")))
	head := []string{"figure"}
	for _, g := range gs {
		var own []string
		for _, it := range g.items() {
			if count[it] < len(gs) {
				own = append(own, it)
			}
		}
		label := strings.Join(own, "; ")
		if label == "" {
			label = "median [min..max]"
		}
		head = append(head, fmt.Sprintf("%s (%d runs)", escape(label), g.Runs))
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(head, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat(" --- |", len(head)))
	var names []string
	units := map[string]string{}
	for _, g := range gs {
		for _, n := range g.figures {
			if _, seen := units[n]; !seen && wanted(n, figures) {
				names = append(names, n)
				units[n] = g.units[n]
			}
		}
	}
	for _, n := range names {
		row := []string{escape(n)}
		if units[n] != "" {
			row[0] += " (" + escape(units[n]) + ")"
		}
		for _, g := range gs {
			row = append(row, cell(g, n))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
}

// cell is one figure of a group: "median [min..max]", the runs counted when some lack it.
func cell(g *Group, name string) string {
	s, ok := g.Stat(name)
	if !ok {
		return ""
	}
	out := fmt.Sprintf("%s [%s..%s]", Number(s.Median), Number(s.Min), Number(s.Max))
	if s.N != g.Runs {
		out += fmt.Sprintf(" (%d of %d runs)", s.N, g.Runs)
	}
	return out
}

// wanted says whether figure name is printed under the filter figures (none: all are).
func wanted(name string, figures []string) bool {
	if len(figures) == 0 {
		return true
	}
	for _, f := range figures {
		if strings.Contains(strings.ToLower(name), strings.ToLower(f)) {
			return true
		}
	}
	return false
}

// Number formats a figure as BENCHMARKS.md does: whole with thousands separators from 100
// up, one decimal from 1, two below.
func Number(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 100:
		s := strconv.FormatInt(int64(math.Round(a)), 10)
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		if v < 0 {
			s = "-" + s
		}
		return s
	case a >= 1 || v == 0:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// escape keeps text from breaking a Markdown table cell.
func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
