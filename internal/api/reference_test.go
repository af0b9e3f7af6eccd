package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/auth"
	"github.com/stint-dev/stint/internal/doccheck"
	"github.com/stint-dev/stint/internal/model"
)

var update = flag.Bool("update", false, "rewrite docs/api.md from the OpenAPI document")

// referencePath is the REST reference that TestAPIReference keeps.
var referencePath = filepath.Join("..", "..", "docs", "api.md")

// TestAPIReference: docs/api.md is the reference generated from the OpenAPI document and the
// route table (the permission of each route). It fails when the file is stale; run
//
//	go test ./internal/api -run TestAPIReference -update
//
// to write it again.
func TestAPIReference(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(openAPIDocument, &doc))
	got := renderReference(t, doc)
	if *update {
		require.NoError(t, os.WriteFile(referencePath, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(referencePath)
	require.NoError(t, err)
	require.True(t, string(want) == got,
		"docs/api.md is stale: run go test ./internal/api -run TestAPIReference -update")
}

// TestAPIReferenceCoversFields: the reference lists every field of every schema and every
// route, so nothing of the document is left out of it.
func TestAPIReferenceCoversFields(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(openAPIDocument, &doc))
	ref := renderReference(t, doc)
	for _, rt := range routeTable() {
		require.Contains(t, ref, "\n### "+rt.Method+" "+rt.Path+"\n")
		require.Contains(t, ref, "Permission: **"+rt.Perm.String()+"**")
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for name, s := range schemas {
		require.Contains(t, ref, "\n### "+name+"\n")
		for field := range properties(s.(map[string]any)) {
			require.Contains(t, ref, "| `"+field+"` |", "%s.%s", name, field)
		}
	}
}

// refdoc builds the reference of one document.
type refdoc struct {
	b     strings.Builder
	root  map[string]any
	order map[string][]string // keyOrders of the document
}

func (d *refdoc) printf(format string, a ...any) { fmt.Fprintf(&d.b, format, a...) }

// renderReference writes the Markdown reference of the OpenAPI document root: the routes
// in the route table's order, grouped by their first tag, then every schema with its
// fields.
func renderReference(t *testing.T, root map[string]any) string {
	t.Helper()
	order, err := keyOrders(openAPIDocument)
	require.NoError(t, err)
	d := &refdoc{root: root, order: order}
	info := root["info"].(map[string]any)
	d.printf("# REST API reference\n\n")
	d.printf("<!-- Generated from internal/api/openapi.json by `go test ./internal/api -run TestAPIReference -update`. Do not edit. -->\n\n")
	d.printf("This is the %s, version %v, as the OpenAPI 3.1 document describes it: the server\n", info["title"], info["version"])
	d.printf("serves the document at `GET /v1/openapi.json`, and it lives in\n")
	d.printf("[internal/api/openapi.json](../internal/api/openapi.json). Tests check it against the route\n")
	d.printf("table (every route, its answers) and against the Go wire types of `apitype` (every field),\n")
	d.printf("and that this page is generated from it.\n\n")
	d.printf("%s\n\n", info["description"])
	d.printf("Every route needs a bearer token whose role holds the route's permission (see\n")
	d.printf("[security.md](security.md)):\n\n")
	d.printf("| permission | roles |\n| --- | --- |\n")
	for _, p := range []auth.Perm{auth.Open, auth.Read, auth.Operate, auth.Admin, auth.Worker} {
		d.printf("| %s | %s |\n", p, rolesFor(p))
	}
	d.printf("\n")

	// Routes, by tag in the document's tag order.
	paths := root["paths"].(map[string]any)
	byTag := map[string][]route{}
	for _, rt := range routeTable() {
		op := paths[rt.Path].(map[string]any)[strings.ToLower(rt.Method)].(map[string]any)
		tag := op["tags"].([]any)[0].(string)
		byTag[tag] = append(byTag[tag], rt)
	}
	var tags []string
	for _, t := range root["tags"].([]any) {
		tags = append(tags, t.(map[string]any)["name"].(string))
	}
	d.printf("## Contents\n\n")
	for _, tag := range tags {
		var links []string
		for _, rt := range byTag[tag] {
			title := rt.Method + " " + rt.Path
			links = append(links, "["+title+"](#"+doccheck.Slug(title)+")")
		}
		d.printf("- **%s**: %s\n", tag, strings.Join(links, " · "))
	}
	d.printf("- [Schemas](#schemas)\n\n")
	for _, tag := range tags {
		d.printf("## %s\n\n", capitalize(tag))
		for _, rt := range byTag[tag] {
			d.route(rt, paths[rt.Path].(map[string]any), "#/paths/"+pointerEscape.Replace(rt.Path))
		}
	}

	d.printf("## Schemas\n\n")
	d.printf("Fields in request bodies that a schema does not list are refused with a 400. A field\n")
	d.printf("that is not required may be left out; in an answer, it is left out when empty.\n\n")
	schemas := root["components"].(map[string]any)["schemas"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(schemas)) {
		s := schemas[name].(map[string]any)
		d.printf("### %s\n\n", name)
		if desc, ok := s["description"].(string); ok {
			d.printf("%s\n\n", desc)
		}
		if parts, ok := s["allOf"].([]any); ok {
			var of []string
			for _, p := range parts {
				if r, ok := p.(map[string]any)["$ref"].(string); ok {
					of = append(of, d.typeOf(map[string]any{"$ref": r}))
				}
			}
			d.printf("Every field of %s, and:\n\n", strings.Join(of, ", "))
		}
		if props := properties(s); len(props) > 0 {
			d.fields(s, "#/components/schemas/"+pointerEscape.Replace(name))
		} else if _, ok := s["allOf"]; !ok {
			d.printf("A %s.%s\n\n", d.typeOf(s), d.constraints(s))
		}
	}
	return strings.TrimRight(d.b.String(), "\n") + "\n"
}

// route writes one route: summary, description, permission, parameters, body, answers.
func (d *refdoc) route(rt route, item map[string]any, ptr string) {
	op := item[strings.ToLower(rt.Method)].(map[string]any)
	d.printf("### %s %s\n\n", rt.Method, rt.Path)
	d.printf("%s.", strings.TrimSuffix(op["summary"].(string), "."))
	if desc, ok := op["description"].(string); ok {
		d.printf(" %s", desc)
	}
	d.printf("\n\nPermission: **%s**", rt.Perm)
	if rt.Perm != auth.Open {
		d.printf(" (%s)", rolesFor(rt.Perm))
	}
	d.printf(".\n\n")

	var params []map[string]any
	for _, src := range []map[string]any{item, op} {
		ps, _ := src["parameters"].([]any)
		for _, p := range ps {
			params = append(params, d.resolve(p.(map[string]any)))
		}
	}
	if len(params) > 0 {
		d.printf("| parameter | in | type | required | description |\n| --- | --- | --- | --- | --- |\n")
		for _, p := range params {
			s, _ := p["schema"].(map[string]any)
			desc, _ := p["description"].(string)
			d.printf("| `%s` | %s | %s | %s | %s |\n", p["name"], p["in"], d.typeOf(s), yesNo(p["required"] == true),
				cell(desc+d.constraints(s)))
		}
		d.printf("\n")
	}

	if body, ok := op["requestBody"].(map[string]any); ok {
		for _, ct := range slices.Sorted(maps.Keys(body["content"].(map[string]any))) {
			s := body["content"].(map[string]any)[ct].(map[string]any)["schema"].(map[string]any)
			req := "optional"
			if body["required"] == true {
				req = "required"
			}
			d.printf("Request body (%s, `%s`): %s.\n\n", req, ct, d.typeOf(s))
			d.bodyFields(s, ptr+"/"+strings.ToLower(rt.Method)+"/requestBody/content/"+pointerEscape.Replace(ct)+"/schema")
		}
	}

	responses := op["responses"].(map[string]any)
	d.printf("| answer | body | description |\n| --- | --- | --- |\n")
	for _, status := range slices.Sorted(maps.Keys(responses)) {
		r := d.resolve(responses[status].(map[string]any))
		var bodies []string
		content, _ := r["content"].(map[string]any)
		for _, ct := range slices.Sorted(maps.Keys(content)) {
			s, _ := content[ct].(map[string]any)["schema"].(map[string]any)
			bodies = append(bodies, d.typeOf(s)+" (`"+ct+"`)")
		}
		desc, _ := r["description"].(string)
		if hs, ok := r["headers"].(map[string]any); ok {
			desc += " Headers: " + strings.Join(slices.Sorted(maps.Keys(hs)), ", ") + "."
		}
		d.printf("| %s | %s | %s |\n", status, cell(strings.Join(bodies, ", ")), cell(desc))
	}
	d.printf("\n")

	// The fields of the successful answers' bodies, each schema once.
	shown := map[string]bool{}
	for _, status := range slices.Sorted(maps.Keys(responses)) {
		if !strings.HasPrefix(status, "2") {
			continue
		}
		content, _ := d.resolve(responses[status].(map[string]any))["content"].(map[string]any)
		for _, ct := range slices.Sorted(maps.Keys(content)) {
			s, _ := content[ct].(map[string]any)["schema"].(map[string]any)
			if key := jsonText(s); !shown[key] && d.hasFields(s) {
				shown[key] = true
				d.printf("Answer %s: %s.\n\n", status, d.typeOf(s))
				d.bodyFields(s, ptr+"/"+strings.ToLower(rt.Method)+"/responses/"+status+"/content/"+pointerEscape.Replace(ct)+"/schema")
			}
		}
	}
}

// hasFields reports whether a body schema (or the schemas it is one of) has fields.
func (d *refdoc) hasFields(s map[string]any) bool {
	if r, ok := s["$ref"].(string); ok {
		return d.hasFields(d.resolve(map[string]any{"$ref": r}))
	}
	for _, key := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := s[key].([]any); ok {
			return slices.ContainsFunc(alts, func(a any) bool { return d.hasFields(a.(map[string]any)) })
		}
	}
	return len(properties(s)) > 0
}

// bodyFields writes the field table of a body's schema at ptr: its own, or those of the
// component schema it names, or of each schema it may be.
func (d *refdoc) bodyFields(s map[string]any, ptr string) {
	if r, ok := s["$ref"].(string); ok {
		target := d.resolve(map[string]any{"$ref": r})
		name := r[strings.LastIndex(r, "/")+1:]
		if parts, ok := target["allOf"].([]any); ok {
			for i, p := range parts {
				d.bodyFields(p.(map[string]any), r+"/allOf/"+strconv.Itoa(i))
			}
			return
		}
		if len(properties(target)) > 0 {
			d.fields(target, "#/components/schemas/"+pointerEscape.Replace(name))
		}
		return
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[key].([]any); ok {
			for i, a := range alts {
				if d.hasFields(a.(map[string]any)) {
					d.printf("As %s:\n\n", d.typeOf(a.(map[string]any)))
					d.bodyFields(a.(map[string]any), ptr+"/"+key+"/"+strconv.Itoa(i))
				}
			}
			return
		}
	}
	if len(properties(s)) > 0 {
		d.fields(s, ptr)
	}
}

// fields writes the field table of an object schema.
func (d *refdoc) fields(s map[string]any, ptr string) {
	required := map[string]bool{}
	if rs, ok := s["required"].([]any); ok {
		for _, r := range rs {
			required[r.(string)] = true
		}
	}
	d.printf("| field | type | required | description |\n| --- | --- | --- | --- |\n")
	props := properties(s)
	names := d.order[ptr+"/properties"]
	if len(names) != len(props) {
		panic(fmt.Sprintf("%s: no order of its %d properties", ptr, len(props)))
	}
	for _, name := range names {
		p := props[name]
		desc, _ := p["description"].(string)
		d.printf("| `%s` | %s | %s | %s |\n", name, d.typeOf(p), yesNo(required[name]), cell(desc+d.constraints(p)))
	}
	d.printf("\n")
}

// typeOf names a schema's type, linking the schemas it refers to.
func (d *refdoc) typeOf(s map[string]any) string {
	if s == nil {
		return "any"
	}
	if r, ok := s["$ref"].(string); ok {
		name := r[strings.LastIndex(r, "/")+1:]
		return "[" + name + "](#" + doccheck.Slug(name) + ")"
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[key].([]any); ok {
			var out []string
			for _, a := range alts {
				out = append(out, d.typeOf(a.(map[string]any)))
			}
			return strings.Join(out, " or ")
		}
	}
	var kinds []string
	switch ty := s["type"].(type) {
	case string:
		kinds = []string{ty}
	case []any:
		for _, k := range ty {
			kinds = append(kinds, k.(string))
		}
	default:
		return "any"
	}
	for i, k := range kinds {
		switch k {
		case "array":
			items, _ := s["items"].(map[string]any)
			kinds[i] = "array of " + d.typeOf(items)
		case "object":
			if ap, ok := s["additionalProperties"].(map[string]any); ok {
				kinds[i] = "map of " + d.typeOf(ap)
			}
		case "string":
			if f, ok := s["format"].(string); ok {
				kinds[i] = "string (" + f + ")"
			}
		}
	}
	return strings.Join(kinds, " or ")
}

// constraints says what a schema allows besides its type: values, bounds, default.
func (d *refdoc) constraints(s map[string]any) string {
	if s == nil {
		return ""
	}
	var out []string
	if vs, ok := s["enum"].([]any); ok {
		var names []string
		for _, v := range vs {
			names = append(names, "`"+jsonText(v)+"`")
		}
		out = append(out, "One of "+strings.Join(names, ", ")+".")
	}
	for _, b := range []struct{ key, word string }{
		{"minimum", "At least"}, {"maximum", "At most"}, {"minLength", "Length at least"}, {"maxLength", "Length at most"},
		{"minItems", "Items at least"}, {"maxItems", "Items at most"}, {"minProperties", "Entries at least"}, {"maxProperties", "Entries at most"},
	} {
		if v, ok := s[b.key]; ok {
			out = append(out, b.word+" "+jsonText(v)+".")
		}
	}
	if v, ok := s["default"]; ok {
		out = append(out, "Default `"+jsonText(v)+"`.")
	}
	if vs, ok := s["examples"].([]any); ok && len(vs) > 0 {
		out = append(out, "Example: `"+jsonText(vs[0])+"`.")
	}
	if len(out) == 0 {
		return ""
	}
	return " " + strings.Join(out, " ")
}

// resolve follows a local $ref (of a parameter or an answer) to what it names.
func (d *refdoc) resolve(m map[string]any) map[string]any {
	r, ok := m["$ref"].(string)
	if !ok {
		return m
	}
	var node any = d.root
	for _, part := range strings.Split(strings.TrimPrefix(r, "#/"), "/") {
		node = node.(map[string]any)[part]
	}
	return node.(map[string]any)
}

// properties returns an object schema's fields.
func properties(s map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	if ps, ok := s["properties"].(map[string]any); ok {
		for k, v := range ps {
			out[k] = v.(map[string]any)
		}
	}
	return out
}

// keyOrders walks the document's tokens and returns the keys of each object in the order
// it writes them, by the object's JSON pointer ("#/components/schemas/Job/properties").
// encoding/json's maps forget that order, and a field table follows it (the Go types'
// order). An object that names a key twice is an error: encoding/json would keep the last
// silently.
func keyOrders(doc []byte) (map[string][]string, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	orders := map[string][]string{}
	var walk func(ptr string) error
	walk = func(ptr string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				key := k.(string)
				if seen[key] {
					return fmt.Errorf("%s: key %q twice", ptr, key)
				}
				seen[key] = true
				orders[ptr] = append(orders[ptr], key)
				if err := walk(ptr + "/" + pointerEscape.Replace(key)); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(ptr + "/" + strconv.Itoa(i)); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	if err := walk("#"); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("more than one document: %v", err)
	}
	return orders, nil
}

// pointerEscape escapes a key as a JSON pointer token.
var pointerEscape = strings.NewReplacer("~", "~0", "/", "~1")

// cell makes text fit in a table cell.
func cell(s string) string {
	return strings.TrimSpace(strings.NewReplacer("|", `\|`, "\n", " ").Replace(s))
}

// jsonText is v as JSON.
func jsonText(v any) string {
	b, _ := json.Marshal(v) // values decoded from JSON encode again
	return string(b)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func capitalize(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// rolesFor lists the roles that hold perm.
func rolesFor(p auth.Perm) string {
	if p == auth.Open {
		return "anyone, no token"
	}
	var roles []string
	for _, r := range []model.Role{model.RoleAdmin, model.RoleOperator, model.RoleViewer, model.RoleWorker} {
		if auth.Allows(r, p) {
			roles = append(roles, string(r))
		}
	}
	return strings.Join(roles, ", ")
}
