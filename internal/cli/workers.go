package cli

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
)

func newWorkersCmd(cfg *config) *cobra.Command {
	// "stint workers" alone lists them, like "stint workers list".
	cmd := newWorkerListCmd(cfg)
	cmd.Use, cmd.Aliases, cmd.Args = "workers", nil, noSubcommand
	cmd.Short = "List workers; show and drain them"
	cmd.AddCommand(newWorkerListCmd(cfg), newWorkerGetCmd(cfg), newWorkerDrainCmd(cfg))
	return cmd
}

func newWorkerListCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List workers with their capacity in use",
		Args:    args(),
	}
	asJSON := addJSONFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := cfg.client(cmd)
		if err != nil {
			return err
		}
		list, err := c.ListWorkers(cmd.Context())
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), list)
		}
		t := newTable(cmd.OutOrStdout(), "ID", "STATE", "RUNNING", "SLOTS", "CPU", "MEMORY", "GPU", "LABELS", "HEARTBEAT")
		for _, w := range list.Items {
			u, c := w.Used, w.Capacity
			t.row(w.ID, w.State, fmt.Sprint(w.Running),
				fmt.Sprintf("%d/%d", u.Slots, c.Slots),
				fmt.Sprintf("%s/%s", cpu(u.CPU), cpu(c.CPU)),
				fmt.Sprintf("%d/%dMi", u.MemoryMB, c.MemoryMB),
				fmt.Sprintf("%d/%d", u.GPU, c.GPU),
				pairs(w.Labels), cfg.ago(&w.LastHeartbeat))
		}
		return t.flush()
	}
	return cmd
}

func newWorkerGetCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get WORKER_ID",
		Short: "Show a worker",
		Args:  args("WORKER_ID"),
	}
	asJSON := addJSONFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, argv []string) error {
		c, err := cfg.client(cmd)
		if err != nil {
			return err
		}
		w, err := c.GetWorker(cmd.Context(), argv[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), w)
		}
		return cfg.printWorker(cmd.OutOrStdout(), w)
	}
	return cmd
}

func newWorkerDrainCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drain WORKER_ID",
		Short: "Drain a worker: it takes no new work, finishes what runs and exits",
		Args:  args("WORKER_ID"),
	}
	asJSON := addJSONFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, argv []string) error {
		c, err := cfg.client(cmd)
		if err != nil {
			return err
		}
		w, err := c.DrainWorker(cmd.Context(), argv[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), w)
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "worker %s %s\n", w.ID, w.State)
		return err
	}
	return cmd
}

// printWorker shows one worker.
func (cfg *config) printWorker(w io.Writer, wk *apitype.Worker) error {
	t := newTable(w)
	t.row("ID:", wk.ID)
	t.row("State:", wk.State)
	t.row("Labels:", pairs(wk.Labels))
	t.row("Running:", fmt.Sprint(wk.Running))
	t.row("Slots:", fmt.Sprintf("%d of %d in use", wk.Used.Slots, wk.Capacity.Slots))
	t.row("CPU:", fmt.Sprintf("%s of %s in use", cpu(wk.Used.CPU), cpu(wk.Capacity.CPU)))
	t.row("Memory:", fmt.Sprintf("%dMi of %dMi in use", wk.Used.MemoryMB, wk.Capacity.MemoryMB))
	t.row("GPU:", fmt.Sprintf("%d of %d in use", wk.Used.GPU, wk.Capacity.GPU))
	t.row("Registered:", cfg.when(&wk.RegisteredAt))
	t.row("Last heartbeat:", cfg.when(&wk.LastHeartbeat))
	return t.flush()
}

func cpu(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
