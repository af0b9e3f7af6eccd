// Package ui is stint's web UI: hand-written HTML, CSS and JavaScript modules, embedded in
// the binary and served under /ui/. There is no build step. The pages are drawn in the
// browser from the /v1 REST API, called with the user's token; a client-side router gives
// each page a stable address, so the server answers index.html for every /ui/ path that is
// not one of the files.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var files embed.FS

// Prefix is where the UI is served.
const Prefix = "/ui/"

// Handler serves the UI under Prefix: the embedded file a path names, else index.html.
// Answers are not cached without asking again, so that a new binary's UI is seen at once;
// the content security policy allows only the UI's own scripts and styles and calls to its
// own server.
func Handler() http.Handler {
	static, err := fs.Sub(files, "static")
	if err != nil {
		panic("ui: embedded files: " + err.Error()) // the embed directive guarantees the directory
	}
	fileServer := http.FileServerFS(static)
	index, err := fs.ReadFile(static, "index.html")
	if err != nil {
		panic("ui: embedded index.html: " + err.Error())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		name := strings.TrimPrefix(path.Clean(r.URL.Path), strings.TrimSuffix(Prefix, "/"))
		name = strings.TrimPrefix(name, "/")
		if name != "" && name != "index.html" && path.Ext(name) != "" {
			if _, err := fs.Stat(static, name); err == nil {
				r2 := r.Clone(r.Context())
				r2.URL.Path = "/" + name
				fileServer.ServeHTTP(w, r2)
				return
			}
			http.NotFound(w, r)
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(index)
	})
}
