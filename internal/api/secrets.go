package api

import (
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/secret"
)

// noKeyHint says how to give a server its secret key, in the answers that need one.
const noKeyHint = "start the server with STINT_SECRET_KEY or --secret-key-file (the hex or base64 of 32 random bytes; see docs/security.md)"

// sealing is what specToModel needs to seal a spec's secret_env: the server's keys (nil:
// it has none) and the sealed values of the job the spec replaces (nil for a new job),
// which an entry of apitype.SecretMask keeps.
type sealing struct {
	keys *secret.Keys
	prev map[string]string
}

// envContext binds a sealed env value to its name.
func envContext(name string) string { return "env:" + name }

// webhookContext binds a sealed webhook secret to its job or pipeline.
func webhookContext(ownerID string) string { return "webhook:" + ownerID }

// sealSecretEnv checks a spec's secret_env like env (names, NUL bytes; sizes are
// checkSizes'), refuses a name that env has too, and returns its values sealed: a value equal
// to the job's stored one keeps the stored sealed value (so an unchanged spec stays
// unchanged), SecretMask keeps it whatever it is, and a new value is sealed under the
// server's key; without a key, a new value is refused.
func sealSecretEnv(spec *apitype.JobSpec, fe *fieldErrors, sl sealing) map[string]string {
	if len(spec.SecretEnv) == 0 {
		return nil
	}
	out := make(map[string]string, len(spec.SecretEnv))
	noKey := false
	for _, k := range sortedKeys(spec.SecretEnv) {
		v := spec.SecretEnv[k]
		field := mapPath("secret_env", k)
		switch _, inEnv := spec.Env[k]; {
		case k == "":
			fe.add("secret_env", "keys must not be empty")
			continue
		case strings.ContainsAny(k, "=\x00"):
			fe.add(field, "key must not contain '=' or a NUL byte")
			continue
		case inEnv:
			fe.add(field, "is also in env: give each variable in one of env and secret_env")
			continue
		case strings.IndexByte(v, 0) >= 0:
			fe.add(field, "must not contain a NUL byte")
			continue
		}
		prev, had := sl.prev[k]
		if v == apitype.SecretMask {
			if !had {
				fe.add(field, "%q keeps the job's stored value, and the job has none by this name: give the value", apitype.SecretMask)
				continue
			}
			out[k] = prev
			continue
		}
		if had {
			if old, err := sl.keys.Open(prev, envContext(k)); err == nil && old == v {
				out[k] = prev
				continue
			}
		}
		sealed, err := sl.keys.Seal(v, envContext(k))
		if err != nil {
			if !noKey {
				fe.add("secret_env", "the server has no secret key to encrypt secret values with: %s", noKeyHint)
			}
			noKey = true
			continue
		}
		out[k] = sealed
	}
	return out
}

// keepsSecret reports whether a spec's secret env keeps a stored value (SecretMask).
func keepsSecret(env map[string]string) bool {
	for _, v := range env {
		if v == apitype.SecretMask {
			return true
		}
	}
	return false
}

// maskSecrets is a secret env as reads show it: each name with apitype.SecretMask.
func maskSecrets(sealed map[string]string) map[string]string {
	if len(sealed) == 0 {
		return nil
	}
	out := make(map[string]string, len(sealed))
	for k := range sealed {
		out[k] = apitype.SecretMask
	}
	return out
}

// openSecretEnv opens a job's sealed secret env for a lease.
func openSecretEnv(keys *secret.Keys, sealed map[string]string) (map[string]string, error) {
	if len(sealed) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(sealed))
	for _, k := range sortedKeys(sealed) {
		v, err := keys.Open(sealed[k], envContext(k))
		if errors.Is(err, secret.ErrNoKey) {
			return nil, fmt.Errorf("secret_env.%s: %w: %s", k, err, noKeyHint)
		}
		if err != nil {
			return nil, fmt.Errorf("secret_env.%s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

// secretDigests replaces the values of a secret env by their keyed digests (Keys.Digest),
// for the request hash: the hash compares two requests' secrets without revealing them.
func secretDigests(keys *secret.Keys, env map[string]string) map[string]string {
	if len(env) == 0 {
		return env
	}
	out := maps.Clone(env)
	for k, v := range out {
		if v != apitype.SecretMask {
			out[k] = keys.Digest(v)
		}
	}
	return out
}

// openWebhookSecret is the secret a stored webhook secret stands for: stored in clear
// (before a key, or by a server without one) it is itself.
func openWebhookSecret(keys *secret.Keys, ownerID, stored string) (string, error) {
	if !secret.Sealed(stored) {
		return stored, nil
	}
	clear, err := keys.Open(stored, webhookContext(ownerID))
	if err != nil {
		return "", fmt.Errorf("webhook secret of %s: %w", ownerID, err)
	}
	return clear, nil
}
