package app

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/secret"
)

// writeKey writes text to a file of mode perm.
func writeKey(t *testing.T, text string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(p, []byte(text), perm))
	require.NoError(t, os.Chmod(p, perm))
	return p
}

func TestLoadSecretKeys(t *testing.T) {
	t.Parallel()
	key := secret.Generate()
	want, err := secret.Parse(key)
	require.NoError(t, err)

	t.Run("none", func(t *testing.T) {
		k, err := loadSecretKeys("", "")
		require.NoError(t, err)
		require.Nil(t, k)
	})
	t.Run("given itself", func(t *testing.T) {
		k, err := loadSecretKeys(key, "")
		require.NoError(t, err)
		require.Equal(t, want.ID(), k.ID())
	})
	t.Run("from a file, with an older key", func(t *testing.T) {
		k, err := loadSecretKeys("", writeKey(t, key+"\n"+secret.Generate()+"\n", 0o600))
		require.NoError(t, err)
		require.Equal(t, want.ID(), k.ID(), "the first key seals")
	})
	for name, tt := range map[string]struct {
		env  string
		file func(t *testing.T) string
		err  string
	}{
		"both":               {env: key, file: func(t *testing.T) string { return writeKey(t, key, 0o600) }, err: "both set"},
		"a short key":        {env: "c2hvcnQ=", err: "STINT_SECRET_KEY: key 1: decodes to 5 bytes, want 32"},
		"a file others read": {file: func(t *testing.T) string { return writeKey(t, key, 0o644) }, err: "readable by others"},
		"no file":            {file: func(t *testing.T) string { return filepath.Join(t.TempDir(), "none") }, err: "no such file"},
		"an empty file":      {file: func(t *testing.T) string { return writeKey(t, "# nothing\n", 0o600) }, err: "no key"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			file := ""
			if tt.file != nil {
				file = tt.file(t)
			}
			_, err := loadSecretKeys(tt.env, file)
			require.ErrorContains(t, err, tt.err)
		})
	}
}

// stint dev makes its key once (0600) and keeps using it.
func TestDevSecretKeys(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	k1, path, created, err := devSecretKeys(dir)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, filepath.Join(dir, devKeyFile), path)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	k2, _, created, err := devSecretKeys(dir)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, k1.ID(), k2.ID())
}
