package app

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/placement"
)

func TestParseLabels(t *testing.T) {
	t.Parallel()
	got, err := parseLabels("zone=eu, disk=ssd,empty=")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"zone": "eu", "disk": "ssd", "empty": ""}, got)
	got, err = parseLabels(" ")
	require.NoError(t, err)
	require.Empty(t, got)
	for _, bad := range []string{"zone", "=eu", "a=b,,c=d"} {
		_, err := parseLabels(bad)
		require.ErrorContains(t, err, "--labels", bad)
	}
	got, err = parseLabels("k8s.io/zone=eu,gpu_model=t4,rack-2=x,9a=1")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"k8s.io/zone": "eu", "gpu_model": "t4", "rack-2": "x", "9a": "1"}, got)
	for _, key := range []string{`it's`, "a b", "zone:eu", "-lead", ".lead", "é", `q"uote`, strings.Repeat("k", 64)} {
		t.Run(key, func(t *testing.T) {
			_, err := parseLabels("ok=1," + key + "=v")
			require.Error(t, err)
			require.Equal(t, fmt.Sprintf("--labels: key %q %s", key, placement.LabelRule), err.Error())
		})
	}
	_, err = parseLabels(strings.Repeat("k", 63) + "=v")
	require.NoError(t, err, "63 characters is the longest key")
}

func TestOpenStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	dir := filepath.Join(t.TempDir(), "data")
	s, eng, err := OpenStore(ctx, "", dir, log)
	require.NoError(t, err)
	require.Equal(t, EngineSQLite, eng)
	require.NoError(t, s.Ping(ctx))
	require.NoError(t, s.Close())
	require.FileExists(t, filepath.Join(dir, "stint.db"), "the default store lives in the data directory")

	_, _, err = OpenStore(ctx, "mysql://x", dir, log)
	require.ErrorContains(t, err, "want sqlite:///path/file.db or a postgres:// URL")
}

func TestNewLogger(t *testing.T) {
	t.Parallel()
	_, err := newLogger("info", "json")
	require.NoError(t, err)
	_, err = newLogger("loud", "text")
	require.ErrorContains(t, err, "--log-level")
	_, err = newLogger("info", "xml")
	require.ErrorContains(t, err, "--log-format")
}

func TestServerClusterFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want func(t *testing.T, cfg ServerConfig)
		err  string
	}{
		{name: "defaults", want: func(t *testing.T, cfg ServerConfig) {
			require.Empty(t, cfg.ServerID, "picked by leaderDefaults")
			require.Empty(t, cfg.AdvertiseAddr, "the listen address, once listening")
			require.Zero(t, cfg.LeaderTTL, "picked by leaderDefaults")
		}},
		{name: "given", args: []string{"--id", "s1", "--advertise-addr", "10.0.0.1:8080", "--leader-ttl", "3s"},
			want: func(t *testing.T, cfg ServerConfig) {
				require.Equal(t, "s1", cfg.ServerID)
				require.Equal(t, "10.0.0.1:8080", cfg.AdvertiseAddr)
				require.Equal(t, 3*time.Second, cfg.LeaderTTL)
			}},
		{name: "leader ttl too short", args: []string{"--leader-ttl", "100ms"}, err: "--leader-ttl: must be at least 200ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f serverFlags
			cmd := &cobra.Command{Use: "server"}
			f.register(cmd)
			require.NoError(t, cmd.ParseFlags(tc.args))
			cfg, err := f.config(cmd)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			tc.want(t, cfg)
		})
	}
}

// TestLeaderDefaults: a server alone on SQLite keeps its id across restarts and a lease
// that outlives a stall; on PostgreSQL the engine's defaults hold; given flags always win.
func TestLeaderDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		eng    Engine
		id     string
		ttl    time.Duration
		wantID string
		want   time.Duration
	}{
		{eng: EngineSQLite, wantID: "host", want: soleLeaderTTL},
		{eng: EngineSQLite, id: "s1", ttl: 2 * time.Second, wantID: "s1", want: 2 * time.Second},
		{eng: EnginePostgres, wantID: "", want: 0},
		{eng: EnginePostgres, id: "s1", ttl: 3 * time.Second, wantID: "s1", want: 3 * time.Second},
	} {
		id, ttl := leaderDefaults(tc.eng, tc.id, tc.ttl, "host")
		require.Equal(t, tc.wantID, id, "%+v", tc)
		require.Equal(t, tc.want, ttl, "%+v", tc)
	}
}
