package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/stint-dev/stint/internal/auth"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// loopbackAddr reports whether a listen address names a loopback host only (127.0.0.0/8,
// ::1 or localhost); an address without a host listens on every interface.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listensOnLoopback reports whether a listener accepts loopback connections only.
func listensOnLoopback(ln net.Listener) bool {
	a, ok := ln.Addr().(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// errOpenOffLoopback refuses `stint dev` without authentication on an address others reach.
func errOpenOffLoopback(addr string) error {
	return fmt.Errorf("authentication is off, so stint dev listens on a loopback address only "+
		"(127.0.0.1, ::1, localhost), and --addr %s is not one: anyone who reached it could run commands as this user. "+
		"Turn authentication on with STINT_BOOTSTRAP_TOKEN or --api-token, or run stint server", addr)
}

// bootstrapName names the admin token the server creates for itself.
const bootstrapName = "bootstrap"

// bootstrapToken makes sure an administrator can get in once authentication is on:
//
//   - with STINT_BOOTSTRAP_TOKEN (secret), an admin token with that secret exists afterwards
//     (created unless it is already stored; a revoked one stays revoked, with a warning);
//   - else, unless the static --api-token (an admin token) is set, a store holding no token
//     at all gets a new admin token, printed once on out with how to use it. Servers that
//     start together on one store create one between them.
func bootstrapToken(ctx context.Context, e *engine.Engine, secret, userToken string, out io.Writer, log *slog.Logger) error {
	now := e.Clock().Now()
	if secret != "" {
		if len(secret) < auth.MinSecretLen {
			return fmt.Errorf("STINT_BOOTSTRAP_TOKEN: must be at least %d characters (a stint_ token from `stint tokens create`, or 32 random bytes in hex), got %d",
				auth.MinSecretLen, len(secret))
		}
		tk := &model.Token{ID: id.New(now), Name: bootstrapName, Role: model.RoleAdmin, Hash: auth.Hash(secret), CreatedAt: now}
		_, err := e.CreateToken(ctx, &store.CreateTokenParams{Token: tk})
		if errors.Is(err, model.ErrConflict) {
			have, ferr := e.Store().FindToken(ctx, &store.FindTokenParams{Hash: tk.Hash})
			if ferr != nil {
				return fmt.Errorf("bootstrap token: %w", ferr)
			}
			switch {
			case have.RevokedAt != nil:
				log.Warn("STINT_BOOTSTRAP_TOKEN names a revoked token: it stays revoked; unset it or choose another", "token", have.ID)
			case have.Role != model.RoleAdmin:
				log.Warn("STINT_BOOTSTRAP_TOKEN is the secret of a token that is not an admin's; it keeps its role", "token", have.ID, "role", string(have.Role))
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("bootstrap token: %w", err)
		}
		log.Info("admin token from STINT_BOOTSTRAP_TOKEN stored", "token", tk.ID)
		return nil
	}
	if userToken != "" {
		return nil
	}
	fresh, err := auth.NewSecret()
	if err != nil {
		return err
	}
	tk := &model.Token{ID: id.New(now), Name: bootstrapName, Role: model.RoleAdmin, Hash: auth.Hash(fresh), CreatedAt: now}
	created, err := e.CreateToken(ctx, &store.CreateTokenParams{Token: tk, OnlyIfNone: true})
	if err != nil {
		return fmt.Errorf("first admin token: %w", err)
	}
	if !created {
		return nil
	}
	log.Info("created the first admin token; its secret is printed once on stderr", "token", tk.ID)
	_, err = fmt.Fprintf(out, `
stint: authentication is on. The first admin token (shown only this once; store it now):

    %s

  use it:  export STINT_TOKEN=<token>   (stint CLI), or send Authorization: Bearer <token>
  then:    stint tokens create --role viewer --name ci   (narrower tokens; see docs/security.md)

`, fresh)
	return err
}
