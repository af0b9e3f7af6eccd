package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Package paths in the tables are relative to the module: "internal/engine" is that package,
// "internal/store/..." is internal/store and every package below it, "..." is the module.

// scope says which imports of a package a rule looks at.
type scope int

const (
	direct     scope = iota // the imports of its non-test files
	transitive              // every package its non-test files depend on, however indirectly
	tests                   // the imports of its _test.go files (both the package and _test)
)

// verb words the scope in a failure.
func (s scope) verb() string {
	switch s {
	case transitive:
		return "depends on"
	case tests:
		return "has tests importing"
	}
	return "imports"
}

// importRules are the import arrows the code must keep.
var importRules = []struct {
	name   string
	pkgs   []string // the packages the rule covers
	except []string // packages of pkgs it leaves out
	scope  scope
	forbid []string // what they may not import
	allow  []string // imports matching forbid that are allowed after all
	reason string
}{
	{
		name: "engine knows no wire types", pkgs: []string{"internal/engine"}, scope: transitive,
		forbid: []string{"apitype", "worker", "client"},
		reason: "the engine speaks model and store types; internal/api.Protocol translates the worker protocol",
	},
	{
		name: "client does not import the agent", pkgs: []string{"client"}, scope: transitive,
		forbid: []string{"worker"},
		reason: "an SDK user should not pull in the worker agent; the worker.Server check lives in worker's tests",
	},
	{
		name: "wire packages stay off the server", pkgs: []string{"apitype", "client", "worker"}, scope: transitive,
		forbid: []string{"internal/..."}, allow: []string{"internal/specjson", "internal/specjson/internal/jsonw"},
		reason: "the worker, CLI and SDK speak apitype over HTTP and never touch the store (the SDK " +
			"encodes its batches and streams of specs with specjson, which stands on apitype alone)",
	},
	{
		name: "the SDK's spec encoder stands on apitype", pkgs: []string{"internal/specjson", "internal/specjson/internal/jsonw"},
		scope: direct, forbid: []string{"..."}, allow: []string{"apitype", "internal/specjson/internal/jsonw"},
		reason: "the SDK imports it, and may depend on nothing of the server's",
	},
	{
		name: "apitype is stdlib only", pkgs: []string{"apitype"}, scope: direct,
		forbid: []string{"..."}, allow: []string{"apitype"},
		reason: "the wire types are shared by every side and depend on nothing of ours",
	},
	{
		name: "pure core", pkgs: []string{"internal/scheduler", "internal/cron", "internal/placement", "internal/model", "internal/alerting"},
		scope: transitive, forbid: []string{"internal/store/...", "internal/engine", "internal/api", "internal/app"},
		reason: "pure decisions take their inputs (time included) as arguments and are tested without a store",
	},
	{
		name: "leaves import only model",
		pkgs: []string{"internal/model", "internal/clock", "internal/id", "internal/cron",
			"internal/placement", "internal/capacity", "internal/testsignal", "internal/auth", "internal/secret"},
		scope: direct, forbid: []string{"..."}, allow: []string{"internal/model"},
		reason: "the bottom of the graph: everything may import them, so they import nothing of ours but model",
	},
	{
		name: "services sequence, the engine composes", pkgs: []string{"internal/service"}, scope: transitive,
		forbid: []string{"internal/engine", "internal/api", "internal/app", "internal/store/sqlite/...", "internal/store/postgres/..."},
		reason: "a service calls the store interface and pure code; the engine builds the services and hands them callbacks",
	},
	{
		name: "the decision core stands on the leaves", pkgs: []string{"internal/scheduler"},
		scope: direct, forbid: []string{"..."}, allow: []string{"internal/model", "internal/cron", "internal/placement"},
		reason: "every rule is decided from model values, cron schedules and placement rooms handed in",
	},
	{
		name: "alert rules stand on the model", pkgs: []string{"internal/alerting"},
		scope: direct, forbid: []string{"..."}, allow: []string{"internal/model"},
		reason: "every alert is decided from the facts, the open alerts and the time handed in",
	},
	{
		name: "only app picks a store", pkgs: []string{"..."},
		except: []string{"internal/app", "internal/store/sqlite/...", "internal/store/postgres/..."},
		scope:  direct, forbid: []string{"internal/store/sqlite/...", "internal/store/postgres/..."},
		reason: "the engine and the API work on the store interface; internal/app is the composition root",
	},
	{
		name: "tests that open a concrete store", pkgs: []string{"..."},
		except: []string{"internal/app", "internal/store/...", "internal/engine", "internal/service", "internal/api", "internal/sim"},
		scope:  tests, forbid: []string{"internal/store/sqlite/...", "internal/store/postgres/..."},
		reason: "engine, service, api and simulation tests run on a real SQLite store; other tests go through internal/app or the binary",
	},
	{
		name: "the simulation drives the engine", pkgs: []string{"internal/sim"}, scope: direct,
		forbid: []string{"internal/api", "internal/app", "internal/cli", "apitype", "client", "worker"},
		reason: "it runs the engine and the store as a server process does, with simulated clients and workers of its own",
	},
}

// clockRules name packages whose non-test files may not read the wall clock: their time
// comes in as an argument, so their tests are exact and need no fake clock.
var clockRules = []struct {
	pkgs   []string
	calls  []string // functions of package time that read the clock
	reason string
}{
	{
		pkgs:   []string{"internal/scheduler", "internal/cron", "internal/placement", "internal/model", "internal/store", "internal/auth", "internal/alerting"},
		calls:  []string{"Now", "Since", "Until"},
		reason: "pure code is handed the time; the engine reads it from its injected clock",
	},
}

func TestImports(t *testing.T) {
	t.Parallel()
	mod := loadModule(t)
	for _, r := range importRules {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			covered := 0
			for _, p := range mod.pkgs {
				rel := mod.rel(p.ImportPath)
				if !matchAny(r.pkgs, rel) || matchAny(r.except, rel) {
					continue
				}
				covered++
				var imports []string
				switch r.scope {
				case direct:
					imports = p.Imports
				case transitive:
					imports = p.Deps
				case tests:
					imports = append(slices.Clone(p.TestImports), p.XTestImports...)
				}
				for _, imp := range imports {
					irel, ours := mod.relOK(imp)
					if !ours || irel == rel || !matchAny(r.forbid, irel) || matchAny(r.allow, irel) {
						continue
					}
					t.Errorf("%s %s %s: %s", rel, r.scope.verb(), irel, r.reason)
				}
			}
			if covered == 0 {
				t.Errorf("the rule covers no package: are %v still there?", r.pkgs)
			}
		})
	}
}

func TestNoClockReads(t *testing.T) {
	t.Parallel()
	mod := loadModule(t)
	for _, r := range clockRules {
		for _, pattern := range r.pkgs {
			t.Run(pattern, func(t *testing.T) {
				t.Parallel()
				covered := 0
				for _, p := range mod.pkgs {
					if !match(pattern, mod.rel(p.ImportPath)) {
						continue
					}
					for _, f := range p.GoFiles {
						covered++
						for _, at := range timeCalls(t, filepath.Join(p.Dir, f), r.calls) {
							t.Errorf("%s: %s", at, r.reason)
						}
					}
				}
				if covered == 0 {
					t.Errorf("no Go files in %s", pattern)
				}
			})
		}
	}
}

// timeCalls lists where the file at path refers to one of calls of package time ("file:line:
// time.Now"), under whatever name the file imports time.
func timeCalls(t *testing.T, path string, calls []string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	name := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "time" {
			name = "time"
			if imp.Name != nil {
				name = imp.Name.Name
			}
		}
	}
	switch name {
	case "", "_":
		return nil
	case ".":
		return []string{fset.Position(f.Pos()).String() + ": dot import of time"}
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == name && slices.Contains(calls, sel.Sel.Name) {
			found = append(found, fset.Position(sel.Pos()).String()+": time."+sel.Sel.Name)
		}
		return true
	})
	return found
}

// match reports whether the module-relative package path rel matches pattern.
func match(pattern, rel string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return rel == base || strings.HasPrefix(rel, base+"/")
	}
	return rel == pattern
}

func matchAny(patterns []string, rel string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, rel) })
}

// listed is what `go list -json` says of one package.
type listed struct {
	ImportPath   string
	Dir          string
	GoFiles      []string
	Imports      []string
	Deps         []string
	TestImports  []string
	XTestImports []string
}

type module struct {
	path string
	pkgs []listed
}

// rel is a package's path relative to the module ("." for the module's root).
func (m *module) rel(importPath string) string {
	r, _ := m.relOK(importPath)
	return r
}

// relOK is rel, and whether importPath is in the module at all.
func (m *module) relOK(importPath string) (string, bool) {
	if importPath == m.path {
		return ".", true
	}
	r, ok := strings.CutPrefix(importPath, m.path+"/")
	return r, ok
}

// loadModule lists every package of the module this test is in.
func loadModule(t *testing.T) *module {
	t.Helper()
	root := goOutput(t, ".", "env", "GOMOD")
	if root == "" || root == "/dev/null" {
		t.Fatal("not in a module")
	}
	dir := filepath.Dir(root)
	m := &module{path: goOutput(t, dir, "list", "-m")}
	out := goOutput(t, dir, "list", "-e", "-json=ImportPath,Dir,GoFiles,Imports,Deps,TestImports,XTestImports", "./...")
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var p listed
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		m.pkgs = append(m.pkgs, p)
	}
	if len(m.pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return m
}

// goOutput runs the go command in dir and returns its trimmed output.
func goOutput(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}
