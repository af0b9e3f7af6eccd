package version

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGet(t *testing.T) {
	t.Parallel()
	b := Get()
	require.Equal(t, "dev", b.Version, "unset at link time")
	require.Equal(t, runtime.Version(), b.GoVersion)
	require.NotEmpty(t, b.Commit)
}

func TestFromInfo(t *testing.T) {
	t.Parallel()
	vcs := func(rev, at, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: at}, {Key: "vcs.modified", Value: modified}}
	}
	for _, c := range []struct {
		name       string
		base       Build
		settings   []debug.BuildSetting
		commit, at string
	}{
		{"no vcs", Build{Commit: "unknown"}, nil, "unknown", ""},
		{"clean", Build{Commit: "unknown"}, vcs("abc123", "2026-01-02T03:04:05Z", "false"), "abc123", "2026-01-02T03:04:05Z"},
		{"dirty", Build{Commit: "unknown"}, vcs("abc123", "2026-01-02T03:04:05Z", "true"), "abc123-dirty", "2026-01-02T03:04:05Z"},
		{"set by the linker", Build{Commit: "def456", Date: "2026-02-01T00:00:00Z"}, vcs("abc123", "2026-01-02T03:04:05Z", "true"), "def456", "2026-02-01T00:00:00Z"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.base.Version = "v1"
			got := fromInfo(c.base, &debug.BuildInfo{Settings: c.settings})
			require.Equal(t, c.commit, got.Commit)
			require.Equal(t, c.at, got.Date)
			require.Equal(t, "v1", got.Version)
		})
	}
}
