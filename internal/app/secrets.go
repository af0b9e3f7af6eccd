package app

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/stint-dev/stint/internal/secret"
)

// devKeyFile is the key file `stint dev` keeps in its data directory when given no key.
const devKeyFile = "secret.key"

// registerSecretKey adds the settings secret-key (environment and config file only) and
// --secret-key-file to a server's flags.
func registerSecretKey(fl *pflag.FlagSet, key, file *string) {
	fl.StringVar(key, "secret-key", "",
		"the key that encrypts secret env values and webhook secrets: the hex or base64 of 32 random bytes (or use --secret-key-file)")
	hideFromCommandLine(fl, "secret-key")
	fl.StringVar(file, "secret-key-file", "",
		"file holding the key that encrypts secret env values and webhook secrets: the hex or base64 of 32 random bytes, "+
			"then any older keys that still decrypt")
}

// loadSecretKeys reads the server's secret keys from text (secret-key) or the key file
// (not both); nil when neither is set. A key file that others may read is refused.
func loadSecretKeys(text, file string) (*secret.Keys, error) {
	switch {
	case text != "" && file != "":
		return nil, errors.New("secret key: STINT_SECRET_KEY (or the config file's secret-key) and --secret-key-file are both set: give one")
	case text != "":
		k, err := secret.Parse(text)
		if err != nil {
			return nil, fmt.Errorf("STINT_SECRET_KEY: %w", err)
		}
		return k, nil
	case file == "":
		return nil, nil
	}
	info, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("--secret-key-file: %w", err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("--secret-key-file: %s is readable by others (mode %04o): chmod 600 it", file, info.Mode().Perm())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--secret-key-file: %w", err)
	}
	k, err := secret.Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("--secret-key-file %s: %w", file, err)
	}
	return k, nil
}

// devSecretKeys are the keys of `stint dev` given none: the key file in its data directory,
// made (mode 0600) when missing. created says it was made now.
func devSecretKeys(dataDir string) (keys *secret.Keys, path string, created bool, err error) {
	path = filepath.Join(dataDir, devKeyFile)
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, "", false, fmt.Errorf("secret key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		_, werr := fmt.Fprintln(f, secret.Generate())
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, "", false, fmt.Errorf("secret key: write %s: %w", path, werr)
		}
		created = true
	case !errors.Is(err, fs.ErrExist):
		return nil, "", false, fmt.Errorf("secret key: %w", err)
	}
	keys, err = loadSecretKeys("", path)
	return keys, path, created, err
}
