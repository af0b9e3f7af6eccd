package app

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/worker"
)

func workerCommand() *cobra.Command {
	var (
		id, labels          string
		slots               int
		cpu                 float64
		memoryMB            int64
		logLevel, logFormat string
	)
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker that executes jobs leased from a stint server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logLevel, logFormat)
			if err != nil {
				return err
			}
			server, _ := cmd.Flags().GetString("server")
			token, _ := cmd.Flags().GetString("token")
			lbls, err := parseLabels(labels)
			if err != nil {
				return err
			}
			if slots < 1 {
				return fmt.Errorf("--slots: must be at least 1, got %d", slots)
			}
			if id == "" {
				host, _ := os.Hostname()
				id = fmt.Sprintf("%s-%d", host, os.Getpid())
			}
			var opts []client.Option
			if token != "" {
				opts = append(opts, client.WithToken(token))
			}
			c, err := client.New(server, opts...)
			if err != nil {
				return fmt.Errorf("--server: %w", err)
			}
			w, err := worker.New(worker.Config{
				Server:   c,
				ID:       id,
				Labels:   lbls,
				Capacity: apitype.Capacity{CPU: cpu, MemoryMB: memoryMB, Slots: slots},
				Handlers: map[string]worker.Handler{"noop": worker.Noop},
				Commands: true,
				Logger:   log.With("worker", id),
			})
			if err != nil {
				return err
			}
			log.Info("stint worker starting", "id", id, "server", server, "slots", slots)
			return w.Run(cmd.Context())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&id, "id", os.Getenv("STINT_WORKER_ID"), "worker id (default host-pid; env STINT_WORKER_ID)")
	fl.StringVar(&labels, "labels", "", "labels as k=v,k=v")
	fl.IntVar(&slots, "slots", runtime.NumCPU(), "attempts run at once")
	fl.Float64Var(&cpu, "cpu", float64(runtime.NumCPU()), "CPUs offered")
	fl.Int64Var(&memoryMB, "memory", detectMemoryMB(), "memory offered, in MB")
	fl.StringVar(&logLevel, "log-level", envOr("STINT_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	fl.StringVar(&logFormat, "log-format", envOr("STINT_LOG_FORMAT", "text"), "log format: text or json")
	return cmd
}

// parseLabels reads "k=v,k=v".
func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--labels: %q is not key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// detectMemoryMB reads MemTotal from /proc/meminfo; 0 when it cannot.
func detectMemoryMB() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}
