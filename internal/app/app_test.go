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

	"github.com/stint-dev/stint/internal/api"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/model"
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

func TestServerLimitFlags(t *testing.T) {
	parse := func(t *testing.T, args ...string) (ServerConfig, error) {
		t.Helper()
		var f serverFlags
		cmd := &cobra.Command{Use: "server"}
		f.register(cmd)
		registerConfig(cmd, serverEnv)
		require.NoError(t, cmd.ParseFlags(args))
		if _, err := loadSettings(cmd, serverEnv); err != nil {
			return ServerConfig{}, err
		}
		return f.config(cmd)
	}
	t.Run("defaults", func(t *testing.T) {
		cfg, err := parse(t)
		require.NoError(t, err)
		require.Equal(t, api.DefaultLimits(), cfg.Limits)
		require.Equal(t, DefaultHTTPLimits(), cfg.HTTP.resolved())
		require.Equal(t, &model.RateLimit{Rate: 1000, Per: time.Second}, cfg.SubmitRate)
		require.Equal(t, Retention{
			Policy: engine.RetentionPolicy{Runs: 30 * 24 * time.Hour, KeepPerJob: 10, Workers: 24 * time.Hour},
			Batch:  500, Pause: 100 * time.Millisecond,
		}, cfg.Retention)
	})
	t.Run("retention", func(t *testing.T) {
		t.Setenv("STINT_RETAIN_WORKERS", "1h")
		cfg, err := parse(t, "--retain-runs", "0", "--retain-runs-max", "100", "--retain-batch", "50")
		require.NoError(t, err)
		require.Equal(t, engine.RetentionPolicy{KeepPerJob: 10, MaxPerJob: 100, Workers: time.Hour}, cfg.Retention.Policy)
		require.Equal(t, 50, cfg.Retention.Batch)
		t.Setenv("STINT_RETAIN_RUNS", "a month")
		_, err = parse(t)
		require.ErrorContains(t, err, "STINT_RETAIN_RUNS")
	})
	t.Run("given", func(t *testing.T) {
		cfg, err := parse(t, "--max-body", "2MiB", "--max-shell-bytes", "100000", "--max-args-bytes", "8k",
			"--max-dag-runs", "50", "--write-timeout", "0", "--max-conns", "0", "--max-pending-per-ip", "16",
			"--submit-rate", "20/1m")
		require.NoError(t, err)
		require.Equal(t, int64(2<<20), cfg.Limits.MaxBodyBytes)
		require.Equal(t, 100000, cfg.Limits.MaxShellBytes)
		require.Equal(t, 8<<10, cfg.Limits.MaxArgsBytes)
		require.Equal(t, 50, cfg.Limits.MaxDAGRuns)
		h := cfg.HTTP.resolved()
		require.Zero(t, h.WriteTimeout, "0 on the command line is no limit")
		require.Zero(t, h.MaxConns)
		require.Equal(t, 16, h.MaxPendingPerIP)
		require.Equal(t, 10*time.Second, h.ReadHeaderTimeout)
		require.Equal(t, &model.RateLimit{Rate: 20, Per: time.Minute}, cfg.SubmitRate)
		cfg, err = parse(t, "--submit-rate", "0")
		require.NoError(t, err)
		require.Nil(t, cfg.SubmitRate)
	})
	t.Run("env", func(t *testing.T) {
		t.Setenv("STINT_MAX_BODY", "3MiB")
		t.Setenv("STINT_SUBMIT_RATE", "5/1s")
		cfg, err := parse(t)
		require.NoError(t, err)
		require.Equal(t, int64(3<<20), cfg.Limits.MaxBodyBytes)
		require.Equal(t, &model.RateLimit{Rate: 5, Per: time.Second}, cfg.SubmitRate)
		cfg, err = parse(t, "--max-body", "4MiB")
		require.NoError(t, err)
		require.Equal(t, int64(4<<20), cfg.Limits.MaxBodyBytes, "the flag wins over the env")
		t.Setenv("STINT_MAX_ENV_BYTES", "lots")
		_, err = parse(t)
		require.ErrorContains(t, err, "STINT_MAX_ENV_BYTES")
	})
	for _, bad := range []struct{ args []string }{
		{[]string{"--max-page-size", "0"}},
		{[]string{"--max-body", "0"}},
		{[]string{"--max-conns", "-1"}},
		{[]string{"--read-timeout", "-1s"}},
		{[]string{"--submit-rate", "fast"}},
		{[]string{"--submit-rate", "10/0s"}},
		{[]string{"--retain-runs", "-1h"}},
		{[]string{"--retain-runs-keep", "-1"}},
		{[]string{"--retain-batch", "0"}},
		{[]string{"--retain-pause", "0s"}},
	} {
		t.Run(strings.Join(bad.args, " "), func(t *testing.T) {
			_, err := parse(t, bad.args...)
			require.ErrorContains(t, err, bad.args[0])
		})
	}
}

func TestByteSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"65536": 65536, "64KiB": 64 << 10, "64k": 64 << 10, "1MiB": 1 << 20, "2MB": 2 << 20,
		"1G": 1 << 30, "10 MiB": 10 << 20, "7B": 7} {
		var b byteSize
		require.NoError(t, b.Set(in), in)
		require.Equal(t, want, int64(b), in)
	}
	for _, bad := range []string{"", "MiB", "-1", "1.5MiB", "1TiB", "99999999999GiB"} {
		var b byteSize
		require.Error(t, b.Set(bad), bad)
	}
	b := byteSize(64 << 10)
	require.Equal(t, "64KiB", b.String())
	b = byteSize(1000)
	require.Equal(t, "1000", b.String())
}
