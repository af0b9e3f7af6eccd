package e2e

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/internal/testcert"
)

// TestTLS runs a real `stint server` over HTTPS with a client CA, and a real `stint worker`
// that proves its id with a client certificate alone (no token): it runs a shell job to
// success as the certificate's Common Name. The CLI reads the logs with --ca and fails
// without it; plain HTTP is refused; a worker whose certificate names another id is
// refused (403) and stops.
func TestTLS(t *testing.T) {
	t.Parallel()
	serverCA, workerCA := testcert.NewCA(t, "stint e2e servers"), testcert.NewCA(t, "stint e2e workers")
	dir := t.TempDir()
	certFile, keyFile := serverCA.Server(t).Write(t, dir, "server")
	caFile := testcert.Write(t, dir, "ca.crt", serverCA.PEM)
	srv := startServer(t, "server", "--data", t.TempDir(), "--tls-cert", certFile, "--tls-key", keyFile,
		"--client-ca", testcert.Write(t, dir, "workers.crt", workerCA.PEM))
	require.True(t, strings.HasPrefix(srv.url(), "https://"))
	ctx := context.Background()

	admin, err := client.New(srv.url(), client.WithToken(adminToken),
		client.WithTLSConfig(&tls.Config{RootCAs: serverCA.Pool()}))
	require.NoError(t, err)

	w1Cert, w1Key := workerCA.Client(t, "w1").Write(t, dir, "w1")
	w := runWorker(t, srv, "", "--id", "w1", "--slots", "2", "--ca", caFile, "--cert", w1Cert, "--key", w1Key)
	created, _, err := admin.CreateJob(ctx, &apitype.JobSpec{Shell: `echo "hello over mutual TLS from $STINT_JOB_ID"`})
	require.NoError(t, err)
	run := waitRun(t, admin, created.Run.ID, 30*time.Second)
	require.Equal(t, "succeeded", run.Status, "worker output:\n%s", w.out.String())
	require.Len(t, run.Attempts, 1)
	require.Equal(t, "w1", run.Attempts[0].WorkerID)

	out, errOut, code := cli(t, srv, "--ca", caFile, "logs", run.ID)
	require.Zero(t, code, errOut)
	require.Equal(t, "hello over mutual TLS from "+created.Job.ID+"\n", out)
	_, errOut, code = cli(t, srv, "logs", run.ID)
	require.Equal(t, 4, code, "an untrusted server is unreachable")
	require.Contains(t, errOut, "x509: certificate signed by unknown authority")
	require.Contains(t, errOut, "--ca (env STINT_CA)")

	plain, err := client.New("http://"+srv.addr, client.WithToken(adminToken))
	require.NoError(t, err)
	err = plain.Health(ctx)
	require.Equal(t, http.StatusBadRequest, client.StatusCode(err), "plain HTTP to the HTTPS server: %v", err)

	// The certificate of w1 may not register w2: the registration is refused for good.
	w2 := runWorker(t, srv, "", "--id", "w2", "--ca", caFile, "--cert", w1Cert, "--key", w1Key)
	select {
	case <-w2.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("a worker registering as w2 with w1's certificate did not stop:\n%s", w2.out.String())
	}
	require.Contains(t, w2.out.String(), `the client certificate "w1" may act only as worker "w1", not "w2"`)
	workers, err := admin.ListWorkers(ctx)
	require.NoError(t, err)
	require.Len(t, workers.Items, 1)
	require.Equal(t, "w1", workers.Items[0].ID)
}
