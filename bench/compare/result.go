package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"
)

// result is what a workload measured, in the shape `stint bench` prints: a table of
// workload, store, params and figures (name, value, unit), or with --json one object with
// the same fields as stint's (workload, store, figures, params) and the system's name.
type result struct {
	System   string            `json:"system"`
	Workload string            `json:"workload"`
	Store    string            `json:"store"`
	Figures  []figure          `json:"figures"`
	Params   map[string]string `json:"params"`
}

type figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

func (r *result) add(name string, v float64, unit string) {
	r.Figures = append(r.Figures, figure{Name: name, Value: v, Unit: unit})
}

func (r *result) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "system\t%s\n", r.System)
	fmt.Fprintf(tw, "workload\t%s\n", r.Workload)
	fmt.Fprintf(tw, "store\t%s\n", r.Store)
	keys := make([]string, 0, len(r.Params))
	for k := range r.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\n", k, r.Params[k])
	}
	for _, f := range r.Figures {
		fmt.Fprintf(tw, "%s\t%.1f %s\n", f.Name, f.Value, f.Unit)
	}
	tw.Flush()
}

func (r *result) printJSON(w io.Writer) error {
	return json.NewEncoder(w).Encode(r)
}

// percentile of sorted durations, in milliseconds, by the rule `stint bench` uses: the
// element at index floor((len-1)·p/100); 0 for none.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return ms(sorted[i])
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
