package app

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/internal/cli"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/testcert"
)

// TestServerTLS runs a server with --tls-cert, --tls-key and --client-ca: it serves HTTPS
// only (a plain HTTP request is a 400, TLS 1.1 is refused), clients verify it with its CA
// and fail without, bearer tokens work as before, and a worker's client certificate of the
// client CA acts as that worker only.
func TestServerTLS(t *testing.T) {
	t.Parallel()
	serverCA, workerCA := testcert.NewCA(t, "servers"), testcert.NewCA(t, "workers")
	dir := t.TempDir()
	certFile, keyFile := serverCA.Server(t).Write(t, dir, "server")
	const admin = "server-tls-test-admin-secret"
	url := startServer(t, ServerConfig{UserToken: admin,
		TLS: TLSFiles{Cert: certFile, Key: keyFile, ClientCA: testcert.Write(t, dir, "workers.crt", workerCA.PEM)}})
	require.True(t, strings.HasPrefix(url, "https://127.0.0.1:"), url)
	ctx := t.Context()
	newClient := func(cfg *tls.Config, opts ...client.Option) *client.Client {
		if cfg != nil {
			opts = append(opts, client.WithTLSConfig(cfg))
		}
		c, err := client.New(url, opts...)
		require.NoError(t, err)
		return c
	}

	adminC := newClient(&tls.Config{RootCAs: serverCA.Pool()}, client.WithToken(admin))
	created, _, err := adminC.CreateJob(ctx, &apitype.JobSpec{Shell: "true"})
	require.NoError(t, err, "a bearer token over TLS")

	err = newClient(nil, client.WithToken(admin)).Health(ctx)
	var unknown x509.UnknownAuthorityError
	require.ErrorAs(t, err, &unknown, "the system's roots do not hold the test CA: %v", err)

	plain, err := client.New("http://"+strings.TrimPrefix(url, "https://"), client.WithToken(admin))
	require.NoError(t, err)
	err = plain.Health(ctx)
	require.Equal(t, http.StatusBadRequest, client.StatusCode(err), "plain HTTP: %v", err)
	require.ErrorContains(t, err, "Client sent an HTTP request to an HTTPS server")

	old := newClient(&tls.Config{RootCAs: serverCA.Pool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
	err = old.Health(ctx)
	require.ErrorContains(t, err, "protocol version", "TLS 1.1 is refused")

	// A worker with a client certificate of the client CA is the worker its CN names.
	w1 := newClient(&tls.Config{RootCAs: serverCA.Pool(), Certificates: []tls.Certificate{workerCA.Client(t, "w1").TLS(t)}})
	_, err = w1.Register(ctx, &apitype.RegisterRequest{ID: "w1", Capacity: apitype.Capacity{CPU: 1, Slots: 1}, Commands: true})
	require.NoError(t, err)
	leases, err := w1.Lease(ctx, "w1", &apitype.LeaseRequest{Max: 1, Wait: durationPtr(0)})
	require.NoError(t, err)
	require.Len(t, leases.Leases, 1)
	require.Equal(t, created.Run.ID, leases.Leases[0].RunID)
	_, err = w1.Register(ctx, &apitype.RegisterRequest{ID: "w2", Capacity: apitype.Capacity{CPU: 1, Slots: 1}, Commands: true})
	require.Equal(t, http.StatusForbidden, client.StatusCode(err))
	require.ErrorContains(t, err, `the client certificate "w1" may act only as worker "w1", not "w2"`)
	_, err = w1.ListJobs(ctx, client.ListJobsOptions{})
	require.Equal(t, http.StatusForbidden, client.StatusCode(err), "a worker's certificate reads no jobs: %v", err)
	_, err = w1.Heartbeat(ctx, "w2", &apitype.HeartbeatRequest{})
	require.Equal(t, http.StatusForbidden, client.StatusCode(err))

	// A certificate of another CA (here the servers') does not get through the handshake
	// when presented whatever the server asks for, as a worker's --cert is.
	strange := serverCA.Client(t, "w1").TLS(t)
	stranger := newClient(&tls.Config{RootCAs: serverCA.Pool(),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &strange, nil }})
	_, err = stranger.Register(ctx, &apitype.RegisterRequest{ID: "w1", Capacity: apitype.Capacity{CPU: 1, Slots: 1}, Commands: true})
	require.ErrorContains(t, err, "tls: unknown certificate authority")
	// Go's client leaves out a certificate of Certificates that the server's CAs did not
	// sign: the request then has no credentials at all.
	stranger = newClient(&tls.Config{RootCAs: serverCA.Pool(), Certificates: []tls.Certificate{strange}})
	_, err = stranger.Register(ctx, &apitype.RegisterRequest{ID: "w1", Capacity: apitype.Capacity{CPU: 1, Slots: 1}, Commands: true})
	require.Equal(t, http.StatusUnauthorized, client.StatusCode(err), "%v", err)
}

// TestServerTLSRefused: a half-given or unreadable TLS configuration stops the server before
// it opens its store, with the flag named.
func TestServerTLSRefused(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "ca")
	dir := t.TempDir()
	certFile, keyFile := ca.Server(t).Write(t, dir, "server")
	_, otherKey := ca.Server(t).Write(t, dir, "other")
	junk := testcert.Write(t, dir, "junk.pem", []byte("junk"))
	for _, tc := range []struct {
		tls  TLSFiles
		want string
	}{
		{TLSFiles{Cert: certFile}, "--tls-key: needed with --tls-cert"},
		{TLSFiles{Key: keyFile}, "--tls-cert: needed with --tls-key"},
		{TLSFiles{ClientCA: certFile}, "--client-ca: needs --tls-cert and --tls-key"},
		{TLSFiles{Cert: filepath.Join(dir, "none.crt"), Key: keyFile}, "--tls-cert: open " + dir + "/none.crt"},
		{TLSFiles{Cert: certFile, Key: filepath.Join(dir, "none.key")}, "--tls-key: open " + dir + "/none.key"},
		{TLSFiles{Cert: certFile, Key: otherKey}, "--tls-cert " + certFile + ", --tls-key " + otherKey + ": tls: private key does not match public key"},
		{TLSFiles{Cert: junk, Key: keyFile}, "--tls-cert " + junk},
		{TLSFiles{Cert: certFile, Key: keyFile, ClientCA: junk}, "--client-ca: load CA bundle " + junk + ": no PEM certificate in it"},
	} {
		data := filepath.Join(t.TempDir(), "data")
		err := RunServer(t.Context(), ServerConfig{Addr: "127.0.0.1:0", DataDir: data, UserToken: "x", TLS: tc.tls,
			Logger: slog.New(slog.DiscardHandler)})
		require.ErrorContains(t, err, tc.want)
		require.NoDirExists(t, data, "nothing was opened")
	}

	// Through the command line, and stint dev off loopback without a token stays refused.
	root := cli.NewRoot(serverCommand())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"server", "--tls-cert", certFile, "--data", t.TempDir()})
	require.Equal(t, 1, cli.Execute(t.Context(), root))
	require.Contains(t, out.String(), "stint: --tls-key: needed with --tls-cert")
	err := RunServer(t.Context(), ServerConfig{Addr: "0.0.0.0:0", DataDir: t.TempDir(), OpenAuth: true,
		TLS: TLSFiles{Cert: certFile, Key: keyFile}, Logger: slog.New(slog.DiscardHandler)})
	require.ErrorContains(t, err, "authentication is off, so stint dev listens on a loopback address only")
}

// TestKeyPairReload: a certificate whose files change is read again at the first handshake
// a second or more after the last look; a pair that does not load keeps the old one.
func TestKeyPairReload(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "ca")
	dir := t.TempDir()
	first, second := ca.Server(t), ca.Server(t)
	certFile, keyFile := first.Write(t, dir, "server")
	clk := clock.NewFake(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	kp, err := loadKeyPair("--tls-cert", certFile, "--tls-key", keyFile, clk, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	serial := func() string { return kp.get().Leaf.SerialNumber.String() }
	require.Equal(t, first.Cert.SerialNumber.String(), serial())

	second.Write(t, dir, "server")
	clk.Advance(keyPairCheck - time.Millisecond)
	require.Equal(t, first.Cert.SerialNumber.String(), serial(), "within a second of the last look")
	clk.Advance(time.Millisecond)
	require.Equal(t, second.Cert.SerialNumber.String(), serial(), "renewed")

	// The certificate is written before its key: the mismatched pair is not taken.
	third := ca.Server(t)
	testcert.Write(t, dir, "server.crt", third.CertPEM)
	clk.Advance(keyPairCheck)
	require.Equal(t, second.Cert.SerialNumber.String(), serial(), "half written")
	testcert.Write(t, dir, "server.key", third.KeyPEM)
	clk.Advance(keyPairCheck)
	require.Equal(t, third.Cert.SerialNumber.String(), serial(), "whole")
}

// A TLS handshake cut off before it began (a TCP probe) is a debug line; other handshake
// failures and server errors stay warnings.
func TestServerErrorsLevel(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w := serverErrors{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, line := range []string{
		"http: TLS handshake error from 10.0.0.9:41000: EOF\n",
		"http: TLS handshake error from 10.0.0.9:41002: remote error: tls: bad certificate\n",
		"http: Accept error: accept tcp [::]:8080: accept4: too many open files; retrying in 5ms\n",
	} {
		n, err := w.Write([]byte(line))
		require.NoError(t, err)
		require.Equal(t, len(line), n)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3)
	require.Contains(t, lines[0], `level=DEBUG msg="http: TLS handshake error from 10.0.0.9:41000: EOF"`)
	require.Contains(t, lines[1], `level=WARN msg="http: TLS handshake error from 10.0.0.9:41002: remote error: tls: bad certificate"`)
	require.Contains(t, lines[2], "level=WARN")
}
