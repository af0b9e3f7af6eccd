package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

func TestCluster(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, "GET", "/v1/cluster", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var c apitype.Cluster
	r.decode(t, &c)
	require.Len(t, c.Servers, 1, "the one server")
	require.NotNil(t, c.Leader, "a server alone on its store leads")
	require.Equal(t, c.Servers[0].ID, c.Leader.ID)
	require.Equal(t, c.Servers[0].Addr, c.Leader.Addr)
	require.Equal(t, int64(1), c.Leader.Term)
	require.False(t, c.Leader.Since.IsZero())
	require.False(t, c.Servers[0].LastSeen.Before(c.Servers[0].StartedAt))
}
