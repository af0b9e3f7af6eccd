package app

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/internal/clock"
)

// keyPairCheck is how often a certificate's files are read again, at most: at a TLS
// handshake, when this long has passed since the last look.
const keyPairCheck = time.Second

// keyPair is a certificate and its key read from PEM files, read again when they change, so
// that a renewed certificate is served (or presented) without a restart. The files are
// compared with what was loaded at most once per keyPairCheck, at a handshake; a new pair
// that does not load (its certificate written and its key not yet) leaves the old one in use
// and is tried again at the next look.
type keyPair struct {
	certFile, keyFile string
	certFlag, keyFlag string // the flags that named them, for messages
	clock             clock.Clock
	log               *slog.Logger

	mu       sync.Mutex
	cert     *tls.Certificate
	certPEM  []byte
	keyPEM   []byte
	lookedAt time.Time
	failed   string // the last failure logged, so that one is logged once
}

// loadKeyPair reads the pair of certFile and keyFile, named by the flags certFlag and
// keyFlag in its errors.
func loadKeyPair(certFlag, certFile, keyFlag, keyFile string, clk clock.Clock, log *slog.Logger) (*keyPair, error) {
	k := &keyPair{certFile: certFile, keyFile: keyFile, certFlag: certFlag, keyFlag: keyFlag, clock: clk, log: log}
	certPEM, keyPEM, err := k.read()
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s %s, %s %s: %w", certFlag, certFile, keyFlag, keyFile, err)
	}
	k.cert, k.certPEM, k.keyPEM, k.lookedAt = &cert, certPEM, keyPEM, clk.Now()
	return k, nil
}

func (k *keyPair) read() (certPEM, keyPEM []byte, err error) {
	certPEM, err = os.ReadFile(k.certFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", k.certFlag, err)
	}
	keyPEM, err = os.ReadFile(k.keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", k.keyFlag, err)
	}
	return certPEM, keyPEM, nil
}

// get returns the current certificate, after reading the files again when keyPairCheck has
// passed since the last look.
func (k *keyPair) get() *tls.Certificate {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.clock.Now()
	if now.Sub(k.lookedAt) < keyPairCheck && !now.Before(k.lookedAt) {
		return k.cert
	}
	k.lookedAt = now
	certPEM, keyPEM, err := k.read()
	if err == nil && bytes.Equal(certPEM, k.certPEM) && bytes.Equal(keyPEM, k.keyPEM) {
		return k.cert
	}
	var cert tls.Certificate
	if err == nil {
		cert, err = tls.X509KeyPair(certPEM, keyPEM)
	}
	if err != nil {
		if msg := err.Error(); msg != k.failed {
			k.failed = msg
			k.log.Warn("TLS certificate changed but does not load; keeping the one in use", "cert", k.certFile, "key", k.keyFile, "err", err)
		}
		return k.cert
	}
	k.cert, k.certPEM, k.keyPEM, k.failed = &cert, certPEM, keyPEM, ""
	k.log.Info("TLS certificate reloaded", "cert", k.certFile, "subject", cert.Leaf.Subject.String(), "not_after", cert.Leaf.NotAfter)
	return k.cert
}

// TLSFiles are the PEM files of a server's TLS: its certificate and key, and the CA bundle
// of the client certificates it accepts (optional).
type TLSFiles struct {
	Cert, Key string
	ClientCA  string
}

// check refuses a half-given configuration, naming the flag that is missing.
func (f TLSFiles) check() error {
	switch {
	case f.Cert != "" && f.Key == "":
		return errors.New("--tls-key: needed with --tls-cert (the certificate's private key, PEM)")
	case f.Key != "" && f.Cert == "":
		return errors.New("--tls-cert: needed with --tls-key (the server's certificate, PEM)")
	case f.ClientCA != "" && f.Cert == "":
		return errors.New("--client-ca: needs --tls-cert and --tls-key: client certificates are asked for over TLS only")
	}
	return nil
}

// serverTLS returns the server's TLS config for f (nil when f has no certificate): TLS 1.2
// and later, HTTP/1.1, the certificate reloaded as it changes, and with a client CA,
// client certificates verified against it when given (tls.VerifyClientCertIfGiven: a
// client without one still authenticates with a bearer token).
func serverTLS(f TLSFiles, clk clock.Clock, log *slog.Logger) (*tls.Config, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	if f.Cert == "" {
		return nil, nil
	}
	kp, err := loadKeyPair("--tls-cert", f.Cert, "--tls-key", f.Key, clk, log)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// HTTP/1.1 only: the connection caps and write deadlines are per connection.
		NextProtos:     []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return kp.get(), nil },
	}
	if f.ClientCA != "" {
		pool, err := client.LoadCA(f.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("--client-ca: %w", err)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// clientTLS returns the TLS config of a worker's client (nil when no file is given): the
// servers' certificates verified against the CA bundle caFile (empty: the system's roots),
// and, with certFile and keyFile, that client certificate presented (mutual TLS), reloaded
// as it changes.
func clientTLS(caFile, certFile, keyFile string, clk clock.Clock, log *slog.Logger) (*tls.Config, error) {
	switch {
	case certFile != "" && keyFile == "":
		return nil, errors.New("--key: needed with --cert (the client certificate's private key, PEM)")
	case keyFile != "" && certFile == "":
		return nil, errors.New("--cert: needed with --key (the worker's client certificate, PEM)")
	case caFile == "" && certFile == "":
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := client.LoadCA(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca: %w", err)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" {
		kp, err := loadKeyPair("--cert", certFile, "--key", keyFile, clk, log)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return kp.get(), nil }
	}
	return cfg, nil
}
