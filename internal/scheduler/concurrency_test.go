package scheduler

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
)

// nestedLoopKey is the kind of key template issue 12 found: four nested loops of 100 that,
// unbounded, write 10^8 bytes (it took 16 s of CPU and 2 GB while holding the SQLite writer).
const nestedLoopKey = "{{range 100}}{{range 100}}{{range 100}}{{range 100}}x{{end}}{{end}}{{end}}{{end}}"

func keyJob(key, args string) *model.Job {
	j := &model.Job{ID: "j1", Namespace: "ns", Spec: model.JobSpec{Concurrency: model.Concurrency{Key: key, Max: 1}}}
	if args != "" {
		j.Spec.Args = json.RawMessage(args)
	}
	return j
}

func TestRenderKeyBudgets(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", MaxKeyBytes)
	tests := []struct {
		name, key, args string
		want            string // the key, when it renders
		err             string // what the error says, when it does not
	}{
		{name: "plain field", key: "c-{{.id}}", args: `{"id": 7}`, want: "c-7"},
		{name: "a short loop renders as before", key: "{{range .tags}}{{.}}-{{end}}", args: `{"tags": ["a", "b"]}`, want: "a-b-"},
		{name: "escaping functions still work", key: `{{urlquery .q}}|{{html .h}}|{{js .j}}`, args: `{"q": "a b", "h": "<", "j": "'"}`,
			want: `a+b|&lt;|\'`},
		{name: "printf with a small width", key: `{{printf "%05s" .n}}`, args: `{"n": "42"}`, want: "00042"},
		{name: "a key of the maximum length", key: `{{range 2}}` + long[:MaxKeyBytes/2] + `{{end}}`, want: long},
		{name: "exactly the step budget", key: fmt.Sprintf("{{range %d}}{{end}}x", MaxKeySteps-1), want: "x"},
		{name: "a loop left early still costs its length", key: fmt.Sprintf("{{range %d}}x{{break}}{{end}}", MaxKeySteps), err: "steps"},
		{name: "a range over a map", key: "{{range $k, $v := .m}}{{$k}}{{$v}}{{end}}", args: `{"m": {"b": 2, "a": 1}}`, want: "a1b2"},

		{name: "nested loops of issue 12", key: nestedLoopKey, err: fmt.Sprintf("more than %d steps", MaxKeySteps)},
		{name: "silent nested loops", key: "{{range 100}}{{range 100}}{{range 100}}{{range 100}}{{end}}{{end}}{{end}}{{end}}x",
			err: fmt.Sprintf("more than %d steps", MaxKeySteps)},
		{name: "one step over the budget", key: fmt.Sprintf("{{range %d}}{{end}}x", MaxKeySteps), err: "steps"},
		{name: "the key calling itself", key: `{{template "key" .}}{{template "key" .}}`, err: "steps"},
		{name: "a silent loop", key: "{{range 1000000000}}{{end}}x", err: "steps"},
		{name: "loops over the args", key: "{{range .a}}{{range $.a}}{{range $.a}}{{end}}{{end}}{{end}}x",
			args: `{"a": [` + strings.Repeat("0,", 19) + `0]}`, err: "steps"},
		{name: "a range over a long list", key: "{{range .a}}{{end}}x", args: `{"a": [` + strings.Repeat("0,", MaxKeySteps) + `0]}`, err: "steps"},
		{name: "strings built in a loop", key: `{{range 300}}{{$x := printf "%500s" "y"}}{{end}}x`, err: "renders longer"},
		{name: "recursion through a defined template", key: `{{define "r"}}{{template "r" .}}{{end}}{{template "r" .}}`, err: "steps"},
		{name: "one byte over the key length", key: `{{range 2}}` + strings.Repeat("k", MaxKeyBytes/2) + `{{end}}k`,
			err: fmt.Sprintf("renders longer than %d bytes", MaxKeyBytes)},
		{name: "a loop that writes too much", key: "{{range 300}}abc{{end}}", err: "renders longer"},
		{name: "a string doubled in a variable", key: `{{$x := "aaaaaaaa"}}{{range 40}}{{$x = print $x $x}}{{end}}{{$x}}`, err: "renders longer"},
		{name: "printf doubling", key: `{{$x := "aaaaaaaa"}}{{range 40}}{{$x = printf "%s%s" $x $x}}{{end}}x`, err: "renders longer"},
		{name: "html doubling", key: `{{$x := "<<<<"}}{{range 40}}{{$x = html $x $x}}{{end}}x`, err: "renders longer"},
		{name: "a huge printf width", key: `{{printf "%999999999d" 1}}`, err: "width or precision over"},
		{name: "a huge printf precision", key: `{{printf "%.999999999f" 1.0}}`, err: "width or precision over"},
		{name: "a width from an argument", key: `{{printf "%*d" 999999999 1}}`, err: "'*'"},
		{name: "a template over the source limit", key: strings.Repeat("k", MaxKeyTemplateBytes+1), err: fmt.Sprintf("more than the %d allowed", MaxKeyTemplateBytes)},
		{name: "a missing field", key: "c-{{.customer}}", args: `{}`, err: "customer"},
		{name: "ranging over a number from the args", key: "{{range .n}}{{end}}x", args: `{"n": 2}`,
			err: `concurrency key: in template "key": range can't iterate over 2`},
		{name: "empty", key: "{{if .x}}y{{end}}", args: `{"x": false}`, err: "renders empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := RenderKey(keyJob(tt.key, tt.args), nil)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				require.Empty(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// A template over budget does not render, so the run counts against the job's own key: the
// limit still holds.
func TestRunConcurrencyOverBudgetFallsBack(t *testing.T) {
	t.Parallel()
	rc := RunConcurrency(keyJob(nestedLoopKey, ""), nil)
	require.Equal(t, &model.RunConcurrency{Key: "job:j1", Max: 1, Policy: model.ConcurrencyAllow}, rc)
}

func TestCheckFormat(t *testing.T) {
	t.Parallel()
	for format, ok := range map[string]bool{
		"%d": true, "%%d%s": true, "%[1]d": true, "%-512s": true, "%+.3f": true, "100%%": true, "%": true,
		"%513s": false, "%.600f": false, "%*d": false, "%.*f": false, "%5.9999d": false, "%[2]*d": false,
	} {
		require.Equal(t, ok, checkFormat(format) == "", "format %q", format)
	}
}

// FuzzRenderKey: whatever the template and the args, rendering ends within the budget (it
// never panics, never returns a key longer than MaxKeyBytes or an empty one), and a template
// that parses renders the same way twice.
func FuzzRenderKey(f *testing.F) {
	for _, s := range []struct{ key, args string }{
		{"c-{{.id}}", `{"id": 7}`},
		{"{{range .tags}}{{.}}-{{end}}", `{"tags": ["a", "b"]}`},
		{nestedLoopKey, ``},
		{"{{range 1000000000}}{{end}}x", ``},
		{`{{define "r"}}{{template "r" .}}{{end}}{{template "r" .}}`, ``},
		{`{{$x := "aaaaaaaa"}}{{range 40}}{{$x = print $x $x}}{{end}}{{$x}}`, ``},
		{`{{printf "%999999999d" 1}}`, ``},
		{`{{printf "%*d" 999999999 1}}`, ``},
		{`{{with .a}}{{index . 0}}{{else}}none{{end}}`, `{"a": [1]}`},
		{`{{range $i, $e := .m}}{{$i}}={{$e}};{{end}}`, `{"m": {"x": 1, "y": 2}}`},
		{`{{block "b" .}}{{.id}}{{end}}`, `{"id": "z"}`},
		{`{{slice .s 1 3}}{{len .s}}`, `{"s": "abcdef"}`},
		{`{{.}}`, `{"a": [[[[1]]]]}`},
		{`{{template "key" .}}{{template "key" .}}`, ``},
		{"{{", ``},
	} {
		f.Add(s.key, s.args)
	}
	f.Fuzz(func(t *testing.T, key, args string) {
		job := keyJob(key, "")
		k, err := RenderKey(job, json.RawMessage(args))
		if err != nil {
			if k != "" {
				t.Fatalf("an error with a key: %q, %v", k, err)
			}
			return
		}
		if k == "" || len(k) > MaxKeyBytes {
			t.Fatalf("key of %d bytes: %q", len(k), k)
		}
		again, err := RenderKey(job, json.RawMessage(args))
		if err != nil || again != k {
			t.Fatalf("rendered %q, then %q, %v", k, again, err)
		}
	})
}
