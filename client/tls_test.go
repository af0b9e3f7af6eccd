package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/internal/testcert"
)

// newTLSServer serves h over TLS with a certificate of ca for 127.0.0.1, asking for client
// certificates of ca (verified when given).
func newTLSServer(t *testing.T, ca *testcert.CA, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes refused on purpose
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{ca.Server(t).TLS(t)},
		ClientCAs:    ca.Pool(),
		ClientAuth:   tls.VerifyClientCertIfGiven,
		MinVersion:   tls.VersionTLS12,
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// TestTLS: an https server is verified against the system's roots (so a private CA's
// certificate is refused, with x509's reason) or the CA bundle of WithTLSConfig, over the
// whole failover list; a client certificate in the config is presented.
func TestTLS(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "test CA")
	var cn atomic.Value
	srv := newTLSServer(t, ca, func(w http.ResponseWriter, r *http.Request) {
		name := ""
		if len(r.TLS.VerifiedChains) > 0 {
			name = r.TLS.VerifiedChains[0][0].Subject.CommonName
		}
		cn.Store(name)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"w1","session":"s1"}`))
	})
	ctx := context.Background()

	plain := newClient(t, srv.URL)
	err := plain.Health(ctx)
	var verr *tls.CertificateVerificationError
	require.ErrorAs(t, err, &verr, "without the CA: %v", err)
	var unknown x509.UnknownAuthorityError
	require.ErrorAs(t, err, &unknown)
	require.ErrorContains(t, err, "GET "+srv.URL+"/healthz: tls: failed to verify certificate: x509: certificate signed by unknown authority")

	pool, err := client.LoadCA(testcert.Write(t, t.TempDir(), "ca.crt", ca.PEM))
	require.NoError(t, err)
	trusting := newClient(t, srv.URL, client.WithTLSConfig(&tls.Config{RootCAs: pool}))
	require.NoError(t, trusting.Health(ctx))
	require.Equal(t, "", cn.Load(), "no client certificate was presented")

	// Every server of a list, after a dead one; the client certificate goes along.
	leaf := ca.Client(t, "w1").TLS(t)
	cfg := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{leaf}}
	list := newClient(t, "https://"+deadAddr(t)+","+srv.URL, client.WithTLSConfig(cfg))
	_, err = list.Register(ctx, &apitype.RegisterRequest{ID: "w1"})
	require.NoError(t, err)
	require.Equal(t, "w1", cn.Load())
	require.Empty(t, cfg.NextProtos, "the caller's config is not changed")

	// Through a caller's HTTP client, whose transport keeps its own settings.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 3}}
	viaHC := newClient(t, srv.URL, client.WithHTTPClient(hc), client.WithTLSConfig(&tls.Config{RootCAs: pool}))
	require.NoError(t, viaHC.Health(ctx))
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestTLSConfigNeedsTransport(t *testing.T) {
	t.Parallel()
	hc := &http.Client{Transport: roundTripper(func(*http.Request) (*http.Response, error) { return nil, errors.New("no") })}
	_, err := client.New("https://127.0.0.1:1", client.WithHTTPClient(hc), client.WithTLSConfig(&tls.Config{}))
	require.ErrorContains(t, err, "WithTLSConfig: the HTTP client's transport is a client_test.roundTripper, not an *http.Transport")
}

func TestLoadCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := client.LoadCA(filepath.Join(dir, "missing.crt"))
	require.ErrorContains(t, err, "load CA bundle: open ")
	_, err = client.LoadCA(testcert.Write(t, dir, "junk.crt", []byte("not a certificate")))
	require.ErrorContains(t, err, "junk.crt: no PEM certificate in it")
}
