package cli

import (
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/testcert"
)

// TestCA: against an https server whose certificate a private CA signed, the CLI succeeds
// with that CA's bundle (--ca or STINT_CA) and without it fails with x509's reason and a
// hint naming --ca; a --ca that holds no certificate is bad usage.
func TestCA(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "cli test CA")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"items":[{"name":"default"}]}`)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes refused on purpose
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS(t)}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	caFile := testcert.Write(t, dir, "ca.crt", ca.PEM)

	res := run(t, nil, "--server", srv.URL, "--ca", caFile, "queues", "list")
	require.Equal(t, 0, res.code, res.stderr)
	require.Contains(t, res.stdout, "default")
	res = run(t, map[string]string{"STINT_CA": caFile}, "--server", srv.URL, "queues", "list")
	require.Equal(t, 0, res.code, res.stderr)

	res = run(t, nil, "--server", srv.URL, "queues", "list")
	require.Equal(t, ExitUnreachable, res.code, "a server this machine cannot trust is not reached")
	require.Contains(t, res.stderr, "tls: failed to verify certificate: x509: certificate signed by unknown authority")
	require.Contains(t, res.stderr, "give the CA bundle that signed it with --ca (env STINT_CA)")

	res = run(t, nil, "--server", srv.URL, "--ca", testcert.Write(t, dir, "empty.crt", nil), "queues", "list")
	require.Equal(t, 2, res.code)
	require.Contains(t, res.stderr, "stint: --ca: load CA bundle "+dir+"/empty.crt: no PEM certificate in it")
}
