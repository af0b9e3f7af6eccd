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
	base := Build{Version: "v1", Commit: "unknown", GoVersion: "go1.26"}
	for _, c := range []struct {
		name     string
		settings []debug.BuildSetting
		want     string
	}{
		{"no vcs", nil, "unknown"},
		{"clean", []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}, "abc123"},
		{"dirty", []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}, "abc123-dirty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := fromInfo(base, &debug.BuildInfo{Settings: c.settings})
			require.Equal(t, c.want, got.Commit)
			require.Equal(t, "v1", got.Version)
		})
	}
}
