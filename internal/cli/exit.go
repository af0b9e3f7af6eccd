package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"

	"github.com/stint-dev/stint/client"
)

// Exit codes of the stint command: what happened, for scripts. README's CLI section lists
// them; keep the two in step.
const (
	ExitOK           = 0   // success (a waited-for run succeeded)
	ExitFailed       = 1   // the run failed, or the call failed in a way no code below names
	ExitUsage        = 2   // bad usage, or the server refused the request's fields (400)
	ExitNotFound     = 3   // what the command names does not exist (404)
	ExitUnreachable  = 4   // no server answered: connection refused, unknown host, TLS failure
	ExitUnauthorized = 5   // the token is missing, wrong, or not allowed this (401, 403)
	ExitConflict     = 6   // the object is not in a state that allows this (409)
	ExitTimeout      = 7   // a deadline passed (--wait-timeout) before the command was done
	ExitInterrupted  = 130 // interrupted (Ctrl-C)
)

// errRunFailed ends a command that waited for a run that ended other than succeeded: exit
// code ExitFailed, with nothing more printed (the outcome is).
var errRunFailed error = &exitError{code: ExitFailed}

// notFoundError is something the command names that does not exist, found out by the CLI
// rather than answered by the server with a 404: exit code ExitNotFound.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

// exitCode maps an error to the exit code that says what happened.
func exitCode(err error) int {
	var exit *exitError
	var usage *usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &exit):
		return exit.code
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	case errors.Is(err, context.DeadlineExceeded):
		return ExitTimeout
	case errors.As(err, &usage):
		return ExitUsage
	case errors.As(err, new(*notFoundError)):
		return ExitNotFound
	}
	switch client.StatusCode(err) {
	case 0:
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return ExitUsage
	case http.StatusNotFound:
		return ExitNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		return ExitUnauthorized
	case http.StatusConflict:
		return ExitConflict
	default:
		return ExitFailed
	}
	if unreachable(err) {
		return ExitUnreachable
	}
	return ExitFailed
}

// unreachable tells whether err is a failure to reach a server: a dial, name lookup or TLS
// handshake that failed, or a connection that broke.
func unreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	var cert *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	return errors.As(err, &op) || errors.As(err, &dns) || errors.As(err, &cert) || errors.As(err, &unknownCA)
}
