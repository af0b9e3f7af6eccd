package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPanicRecovery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, err := New(Config{Engine: b.eng})
	require.NoError(t, err)
	var logged bytes.Buffer
	a.log = newTestLogger(&logged)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /boom", func(http.ResponseWriter, *http.Request) { panic("boom") })
	rec := httptest.NewRecorder()
	a.middleware(mux).ServeHTTP(rec, httptest.NewRequest("GET", "/boom", nil))
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	require.NotContains(t, rec.Body.String(), "boom")
	require.Contains(t, logged.String(), "boom")
}
