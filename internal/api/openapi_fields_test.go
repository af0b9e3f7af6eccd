package api

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// wireField is one JSON field of a Go wire type, as its struct tag names it.
type wireField struct {
	name      string
	omitempty bool
	kind      string // the JSON kind Go encodes: string, integer, number, boolean, array, object, ref:Type, any
}

// wireTypes reads the exported struct types of the apitype package from its source, each
// with its JSON fields; an embedded struct's fields are its own (encoding/json flattens
// them).
func wireTypes(t *testing.T) map[string][]wireField {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join("..", "..", "apitype", "*.go"))
	require.NoError(t, err)
	structs := map[string]*ast.StructType{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.IsExported() {
				if st, ok := ts.Type.(*ast.StructType); ok {
					structs[ts.Name.Name] = st
				}
			}
			return true
		})
	}
	var fieldsOf func(name string) []wireField
	fieldsOf = func(name string) []wireField {
		var out []wireField
		for _, f := range structs[name].Fields.List {
			tag := ""
			if f.Tag != nil {
				tag = reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("json")
			}
			jsonName, opts, _ := strings.Cut(tag, ",")
			if len(f.Names) == 0 && jsonName == "" { // embedded: its fields are the outer type's
				out = append(out, fieldsOf(f.Type.(*ast.Ident).Name)...)
				continue
			}
			if jsonName == "-" || !f.Names[0].IsExported() {
				continue
			}
			require.NotEmpty(t, jsonName, "apitype.%s.%s has no json tag", name, f.Names[0].Name)
			out = append(out, wireField{name: jsonName, omitempty: strings.Contains(opts, "omitempty"), kind: goKind(f.Type)})
		}
		return out
	}
	out := map[string][]wireField{}
	for name := range structs {
		out[name] = fieldsOf(name)
	}
	return out
}

// goKind is the JSON kind encoding/json makes of a Go type of apitype.
func goKind(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return goKind(e.X)
	case *ast.ArrayType:
		return "array"
	case *ast.MapType:
		return "object"
	case *ast.SelectorExpr:
		switch pkg := e.X.(*ast.Ident).Name + "." + e.Sel.Name; pkg {
		case "time.Time":
			return "string"
		case "json.RawMessage":
			return "any"
		default:
			return "unknown " + pkg
		}
	case *ast.Ident:
		switch e.Name {
		case "string":
			return "string"
		case "bool":
			return "boolean"
		case "int", "int32", "int64", "uint", "uint32", "uint64":
			return "integer"
		case "float32", "float64":
			return "number"
		}
		return "ref:" + e.Name
	}
	return fmt.Sprintf("unknown %T", e)
}

// schemaKind is the JSON kind an OpenAPI schema allows, "any" when it does not say (or
// allows null besides one kind: the Go side is then a pointer).
func schemaKind(s map[string]any) string {
	if r, ok := s["$ref"].(string); ok {
		return "ref:" + strings.TrimPrefix(r, "#/components/schemas/")
	}
	if alts, ok := s["anyOf"].([]any); ok {
		var kinds []string
		for _, a := range alts {
			if k := schemaKind(a.(map[string]any)); k != "null" {
				kinds = append(kinds, k)
			}
		}
		if len(kinds) == 1 {
			return kinds[0]
		}
		return "any"
	}
	switch ty := s["type"].(type) {
	case string:
		return ty
	case []any:
		var kinds []string
		for _, k := range ty {
			if k != "null" {
				kinds = append(kinds, k.(string))
			}
		}
		if len(kinds) == 1 {
			return kinds[0]
		}
	}
	return "any"
}

// schemaFields returns the properties of a component schema and the names it requires,
// following allOf (a schema made of others, as CreatedToken is Token and a secret).
func schemaFields(t *testing.T, schemas map[string]map[string]any, name string) (map[string]map[string]any, []string) {
	t.Helper()
	s, ok := schemas[name]
	require.True(t, ok, "components.schemas has no %s", name)
	props := map[string]map[string]any{}
	var required []string
	add := func(s map[string]any) {
		if ps, ok := s["properties"].(map[string]any); ok {
			for k, v := range ps {
				props[k] = v.(map[string]any)
			}
		}
		if rs, ok := s["required"].([]any); ok {
			for _, r := range rs {
				required = append(required, r.(string))
			}
		}
	}
	add(s)
	if parts, ok := s["allOf"].([]any); ok {
		for _, p := range parts {
			pm := p.(map[string]any)
			if r, ok := pm["$ref"].(string); ok {
				ps, rs := schemaFields(t, schemas, strings.TrimPrefix(r, "#/components/schemas/"))
				maps.Copy(props, ps)
				required = append(required, rs...)
				continue
			}
			add(pm)
		}
	}
	return props, required
}

// TestOpenAPIFieldsMatchWireTypes: every exported struct of apitype is a schema of the
// same name in the OpenAPI document, with exactly its JSON fields, each of the kind Go
// encodes; a field the schema requires is one Go never omits (no omitempty). So the
// document cannot drift from the code field by field.
func TestOpenAPIFieldsMatchWireTypes(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(openAPIDocument, &doc))
	schemas := doc.Components.Schemas
	types := wireTypes(t)
	require.Contains(t, types, "JobSpec", "the apitype source was read")
	for _, name := range slices.Sorted(maps.Keys(types)) {
		t.Run(name, func(t *testing.T) {
			props, required := schemaFields(t, schemas, name)
			goFields := map[string]wireField{}
			for _, f := range types[name] {
				goFields[f.name] = f
			}
			require.ElementsMatch(t, slices.Sorted(maps.Keys(goFields)), slices.Sorted(maps.Keys(props)),
				"apitype.%s's json fields (first list) against the properties of components.schemas.%s (second)", name, name)
			for _, f := range types[name] {
				want, got := f.kind, schemaKind(props[f.name])
				if want == "any" || got == "any" {
					continue
				}
				require.Equal(t, want, got, "%s.%s: the kind Go encodes against the schema's", name, f.name)
			}
			for _, r := range required {
				require.False(t, goFields[r].omitempty, "%s.%s is required by the schema, but Go omits it when empty", name, r)
			}
		})
	}
}

// TestOpenAPINoDuplicateKeys: no object of the document names a key twice (encoding/json
// keeps the last silently, so the first would be dead text).
func TestOpenAPINoDuplicateKeys(t *testing.T) {
	t.Parallel()
	_, err := keyOrders(openAPIDocument)
	require.NoError(t, err)
	_, err = keyOrders([]byte(`{"a": {"b": 1, "c": [{"b": 2, "b": 3}]}}`))
	require.ErrorContains(t, err, `#/a/c/0: key "b" twice`)
}
