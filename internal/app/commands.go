package app

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/internal/capacity"
)

// Commands returns the subcommands that run stint processes: dev, server and worker.
func Commands() []*cobra.Command {
	return []*cobra.Command{devCommand(), serverCommand(), workerCommand(), newGuardCommand()}
}

type serverFlags struct {
	addr, data, store   string
	id, advertise       string
	leaseTTL, leaderTTL time.Duration
	userToken, wkrToken string
	logLevel, logFormat string
	tls                 TLSFiles
	bootstrap           string
	secretKey           string
	secretKeyFile       string
	limits              limitFlags
	retention           retentionFlags
	alerts              alertFlags
}

func (f *serverFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen address")
	fl.StringVar(&f.data, "data", "./stint-data", "data directory for the embedded store")
	fl.StringVar(&f.store, "store", "", "store URL: sqlite:///path/file.db or a postgres:// URL (default: SQLite in --data)")
	fl.StringVar(&f.id, "id", "", "this server's id in the cluster (default hostname-pid, or hostname with SQLite)")
	fl.StringVar(&f.advertise, "advertise-addr", "", "address clients and workers reach this server at, shown by stint cluster (default the listen address)")
	fl.DurationVar(&f.leaderTTL, "leader-ttl", 0, "leader lease: a dead leader is replaced within about 1.25 x this; renewed every quarter of it (default 1s with PostgreSQL, 10s with SQLite)")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", 15*time.Second, "how long a worker may go without a heartbeat before its attempts are lost")
	fl.StringVar(&f.userToken, "api-token", "", "a static bearer token that acts as an admin token; API tokens: stint tokens create")
	fl.StringVar(&f.wkrToken, "worker-token", "", "a static bearer token that acts as a worker token for any worker id")
	fl.StringVar(&f.bootstrap, "bootstrap-token", "", "an admin token's secret (at least 32 characters) the server makes sure is stored")
	hideFromCommandLine(fl, "bootstrap-token")
	fl.StringVar(&f.tls.Cert, "tls-cert", "", "serve HTTPS only with this certificate (PEM, the chain after it; reloaded when it changes); needs --tls-key")
	fl.StringVar(&f.tls.Key, "tls-key", "", "the private key of --tls-cert (PEM)")
	fl.StringVar(&f.tls.ClientCA, "client-ca", "", "CA bundle (PEM) of workers' client certificates: one it signed authenticates a worker as its Common Name; needs --tls-cert")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	registerSecretKey(fl, &f.secretKey, &f.secretKeyFile)
	f.limits.register(fl)
	f.retention.register(fl)
	f.alerts.register(fl)
}

func (f *serverFlags) config(cmd *cobra.Command) (ServerConfig, error) {
	log, err := newLogger(f.logLevel, f.logFormat)
	if err != nil {
		return ServerConfig{}, err
	}
	if f.leaseTTL < time.Second {
		return ServerConfig{}, fmt.Errorf("--lease-ttl: must be at least 1s, got %s", f.leaseTTL)
	}
	if f.leaderTTL != 0 && f.leaderTTL < 200*time.Millisecond {
		return ServerConfig{}, fmt.Errorf("--leader-ttl: must be at least 200ms, got %s", f.leaderTTL)
	}
	lim, h, rate, err := f.limits.config()
	if err != nil {
		return ServerConfig{}, err
	}
	retention, err := f.retention.config()
	if err != nil {
		return ServerConfig{}, err
	}
	keys, err := loadSecretKeys(f.secretKey, f.secretKeyFile)
	if err != nil {
		return ServerConfig{}, err
	}
	alerts, err := f.alerts.config()
	if err != nil {
		return ServerConfig{}, err
	}
	return ServerConfig{
		Addr: f.addr, DataDir: f.data, StoreURL: f.store, LeaseTTL: f.leaseTTL,
		ServerID: f.id, AdvertiseAddr: f.advertise, LeaderTTL: f.leaderTTL,
		UserToken: f.userToken, WorkerToken: f.wkrToken, BootstrapToken: f.bootstrap, TLS: f.tls,
		Logger: log, Stderr: cmd.ErrOrStderr(),
		Limits: lim, HTTP: h, SubmitRate: rate, Secrets: keys, Retention: retention,
		Alerts: alerts, AlertRetry: f.alerts.retryBase, AlertRetryMax: f.alerts.retryLimit,
	}, nil
}

func devCommand() *cobra.Command { return newDevCommand(capacity.OS(), guardCommand()) }

// newDevCommand returns stint dev, whose local worker offers what host has and starts guard
// as its guard process (none when nil).
func newDevCommand(host capacity.Host, guard []string) *cobra.Command {
	var f serverFlags
	var local capacityFlags
	var cmds commandFlags
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a server with a local worker on the embedded store: a first try in one command",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set, err := loadSettings(cmd, serverEnv)
			if err != nil || set.print {
				return printSettings(cmd, set, err)
			}
			cfg, err := f.config(cmd)
			if err != nil {
				return err
			}
			if err := local.validate(cmd); err != nil {
				return err
			}
			cfg.LocalWorker, cfg.LocalCapacity = true, local.detect(cmd, host, cfg.Logger, localSlotsPerCPU)
			keyNote := ""
			if cfg.Secrets == nil { // works out of the box: a key of its own, kept with the data
				keys, path, created, err := devSecretKeys(cfg.DataDir)
				if err != nil {
					return err
				}
				cfg.Secrets, keyNote = keys, "  secret env values are encrypted with the key in "+path
				if created {
					keyNote += " (made now; keep it with the data)"
				}
			}
			cfg.LocalPassEnv, cfg.LocalGuard = cmds.passEnv, guard
			// Without any token, stint dev stays open, on loopback only (RunServer refuses
			// another address); any token turns authentication on as for stint server.
			cfg.OpenAuth = cfg.UserToken == "" && cfg.WorkerToken == "" && cfg.BootstrapToken == ""
			cfg.Ready = func(addr string) {
				scheme := "http"
				if cfg.TLS.Cert != "" {
					scheme = "https"
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "stint dev: server and local worker ready on %s://%s\n", scheme, addr)
				fmt.Fprintf(cmd.ErrOrStderr(), "  web UI: %s://%s/ui/\n", scheme, addr)
				if cfg.OpenAuth {
					fmt.Fprintf(cmd.ErrOrStderr(), "  authentication is OFF: any process of this machine that reaches %s can run commands as this user\n"+
						"  (set STINT_BOOTSTRAP_TOKEN or --api-token to turn it on; stint server always has it on)\n", addr)
				}
				if keyNote != "" {
					fmt.Fprintln(cmd.ErrOrStderr(), keyNote)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "  try: stint submit --shell 'echo hello from stint'\n")
			}
			return RunServer(cmd.Context(), cfg)
		},
	}
	f.register(cmd)
	local.register(cmd.Flags(), "4 per CPU offered")
	cmds.registerPassEnv(cmd.Flags())
	registerConfig(cmd, serverEnv)
	return cmd
}

func serverCommand() *cobra.Command {
	var (
		f       serverFlags
		profile string
	)
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a stint server (API, worker protocol, scheduler loops); workers run separately",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set, err := loadSettings(cmd, serverEnv)
			if err != nil || set.print {
				return printSettings(cmd, set, err)
			}
			cfg, err := f.config(cmd)
			if err != nil {
				return err
			}
			if profile != "" {
				out, err := os.Create(profile)
				if err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer out.Close()
				if err := pprof.StartCPUProfile(out); err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			return RunServer(cmd.Context(), cfg)
		},
	}
	f.register(cmd)
	// stint bench --cpuprofile sets it for the server processes it starts.
	cmd.Flags().StringVar(&profile, "cpuprofile", "", "write a CPU profile of the server to this file when it stops")
	registerConfig(cmd, serverEnv)
	return cmd
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not text or json", format)
}
