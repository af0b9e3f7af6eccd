package api

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/auth"
)

// TestOpenAPIMatchesRoutes checks that the OpenAPI document describes exactly the routes the
// API registers, and that it is well formed.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI    string                                `json:"openapi"`
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(openAPIDocument, &doc), "openapi.json is not valid JSON")
	require.Equal(t, "3.1.0", doc.OpenAPI)

	methods := map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true, "trace": true}
	documented := map[string]bool{}
	for path, item := range doc.Paths {
		for m := range item {
			if methods[m] {
				documented[strings.ToUpper(m)+" "+path] = true
			}
		}
	}
	registered := map[string]bool{}
	for _, rt := range routeTable() {
		key := rt.Method + " " + rt.Path
		require.False(t, registered[key], "route %s declared twice", key)
		registered[key] = true
	}
	for k := range registered {
		require.True(t, documented[k], "route %s is not in openapi.json", k)
	}
	for k := range documented {
		require.True(t, registered[k], "openapi.json documents %s, which is not a route", k)
	}

	for _, name := range []string{"JobSpec", "Job", "Run", "Attempt", "Problem", "Queue", "Worker", "Lease"} {
		require.Contains(t, doc.Components.Schemas, name, "components.schemas")
	}

	// Every reference resolves.
	var generic map[string]any
	require.NoError(t, json.Unmarshal(openAPIDocument, &generic))
	refs := regexp.MustCompile(`"\$ref":\s*"#/([^"]+)"`).FindAllStringSubmatch(string(openAPIDocument), -1)
	require.NotEmpty(t, refs)
	for _, m := range refs {
		var node any = generic
		for _, part := range strings.Split(m[1], "/") {
			obj, ok := node.(map[string]any)
			require.True(t, ok, "ref %s", m[1])
			node, ok = obj[part]
			require.True(t, ok, "ref #/%s does not resolve", m[1])
		}
	}

	// Every path parameter of a route is declared for its path.
	params := regexp.MustCompile(`\{(\w+)\}`)
	for _, rt := range routeTable() {
		want := params.FindAllStringSubmatch(rt.Path, -1)
		if len(want) == 0 {
			continue
		}
		doc := string(mustJSON(t, doc.Paths[rt.Path]))
		for _, w := range want {
			require.Contains(t, resolveParamNames(t, generic, rt.Path), w[1], "path %s: %s", rt.Path, doc)
		}
	}
}

// TestOpenAPIAnswersFollowRouteTable: the answers each route documents follow what the route
// table declares of it: a route that needs a token documents 401 and 403, a submission 429
// (and nothing else does), and every route but three 503: the health check, the metrics
// (which report a failing store as stint_scrape_errors) and the document itself.
func TestOpenAPIAnswersFollowRouteTable(t *testing.T) {
	t.Parallel()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(openAPIDocument, &doc))
	never503 := map[string]bool{"GET /healthz": true, "GET /metrics": true, "GET /v1/openapi.json": true}
	for _, rt := range routeTable() {
		key := rt.Method + " " + rt.Path
		var op struct {
			Responses map[string]json.RawMessage `json:"responses"`
		}
		require.NoError(t, json.Unmarshal(doc.Paths[rt.Path][strings.ToLower(rt.Method)], &op), key)
		answers := slices.Sorted(maps.Keys(op.Responses)) // the status codes
		if rt.Perm != auth.Open {
			require.Contains(t, answers, "401", key)
			require.Contains(t, answers, "403", key)
		}
		if rt.Submit {
			require.Contains(t, answers, "429", "%s counts against the submission rate", key)
		} else {
			require.NotContains(t, answers, "429", "%s is not a submission", key)
		}
		if !never503[key] {
			require.Contains(t, answers, "503", key)
		}
	}
}

// resolveParamNames lists the names of the path parameters declared on a path item.
func resolveParamNames(t *testing.T, root map[string]any, path string) []string {
	t.Helper()
	item := root["paths"].(map[string]any)[path].(map[string]any)
	comps := root["components"].(map[string]any)["parameters"].(map[string]any)
	var names []string
	var list []any
	if ps, ok := item["parameters"].([]any); ok {
		list = append(list, ps...)
	}
	for _, m := range slices.Sorted(maps.Keys(item)) {
		if op, ok := item[m].(map[string]any); ok {
			if ps, ok := op["parameters"].([]any); ok {
				list = append(list, ps...)
			}
		}
	}
	for _, p := range list {
		pm := p.(map[string]any)
		if r, ok := pm["$ref"].(string); ok {
			pm = comps[strings.TrimPrefix(r, "#/components/parameters/")].(map[string]any)
		}
		if pm["in"] == "path" {
			names = append(names, pm["name"].(string))
		}
	}
	return names
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
