package cli

import (
	"testing"
)

// FuzzApplyFile feeds arbitrary files through the parser of `stint apply -f` (YAML or
// JSON). It never panics; a file it accepts has a name on every job and every pipeline,
// each once, and no job or pipeline in another namespace than the file's. Seeds:
// testdata/fuzz/FuzzApplyFile.
func FuzzApplyFile(f *testing.F) {
	for _, s := range []string{
		"namespace: reports\njobs:\n  - name: nightly\n    command: [python3, report.py]\n    schedule: {cron: \"0 2 * * *\", timezone: Europe/Berlin, misfire: skip}\n    concurrency: {policy: forbid}\n",
		"jobs:\n  - name: a\n    shell: echo a\npipelines:\n  - name: etl\n    steps:\n      extract: {command: [./extract.sh]}\n      load: {command: [./load.sh], depends_on: [{ref: extract}]}\n",
		"jobs:\n  - name: a\n    shell: x\n  - name: a\n    shell: y\n",
		"jobs:\n  - shell: nameless\n",
		"jobs:\n  - name: a\n    namespace: other\n    shell: x\n",
		"jobs:\n  - name: a\n    shell: x\n    bogus: 1\n",
		`{"jobs": [{"name": "a", "handler": "noop", "args": {"n": 1}}]}`,
		"a: &a [x, x, x]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n",
		"jobs:\n  - name: k\n    shell: x\n    concurrency: {key: \"{{range 100}}{{range 100}}{{range 100}}{{range 100}}x{{end}}{{end}}{{end}}{{end}}\"}\n",
		"\t- not yaml: [",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		jf, err := readJobFile(b)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error that says nothing")
			}
			return
		}
		jobs := map[string]bool{}
		for i, j := range jf.Jobs {
			if j.Name == "" || jobs[j.Name] {
				t.Fatalf("jobs[%d]: name %q accepted", i, j.Name)
			}
			jobs[j.Name] = true
			if j.Namespace != "" && j.Namespace != jf.Namespace {
				t.Fatalf("jobs[%d]: namespace %q in a file of %q", i, j.Namespace, jf.Namespace)
			}
		}
		pipelines := map[string]bool{}
		for i, p := range jf.Pipelines {
			if p.Name == "" || pipelines[p.Name] {
				t.Fatalf("pipelines[%d]: name %q accepted", i, p.Name)
			}
			pipelines[p.Name] = true
			if p.Namespace != "" && p.Namespace != jf.Namespace {
				t.Fatalf("pipelines[%d]: namespace %q in a file of %q", i, p.Namespace, jf.Namespace)
			}
		}
	})
}
