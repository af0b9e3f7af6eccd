package api

import (
	"net/http"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/store"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, "GET", "/v1/version", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var v apitype.Version
	r.decode(t, &v)
	require.Equal(t, "dev", v.Version, "a test binary is not a release")
	require.NotEmpty(t, v.Commit)
	require.Equal(t, runtime.Version(), v.GoVersion)
	require.Equal(t, store.SchemaVersion, v.Schema)
}
