package ui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHandler: every page address answers index.html (the client-side router draws the
// page), the UI's files are served with their types, and a missing file is a 404.
func TestHandler(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle("GET "+Prefix, Handler())
	get := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		return w
	}
	for _, path := range []string{"/ui/", "/ui/runs/01abc", "/ui/jobs/x", "/ui/pipelines/etl", "/ui/dags/r1", "/ui/index.html"} {
		w := get(path)
		require.Equal(t, http.StatusOK, w.Code, path)
		require.Equal(t, "text/html; charset=utf-8", w.Header().Get("Content-Type"), path)
		require.Contains(t, w.Body.String(), `<script type="module" src="/ui/app.js">`, path)
		require.Contains(t, w.Header().Get("Content-Security-Policy"), "script-src 'self'", path)
		require.Equal(t, "no-cache", w.Header().Get("Cache-Control"), path)
	}
	for path, ctype := range map[string]string{"/ui/app.js": "text/javascript", "/ui/pages.js": "text/javascript", "/ui/app.css": "text/css"} {
		w := get(path)
		require.Equal(t, http.StatusOK, w.Code, path)
		require.True(t, strings.HasPrefix(w.Header().Get("Content-Type"), ctype), "%s: %s", path, w.Header().Get("Content-Type"))
	}
	require.Equal(t, http.StatusNotFound, get("/ui/nope.js").Code)
	w := get("/ui")
	require.Equal(t, http.StatusTemporaryRedirect, w.Code, "the mux sends /ui to /ui/")
	require.Equal(t, "/ui/", w.Header().Get("Location"))
}
