package cli

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
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
	return listCmd(cfg, "List workers with their capacity in use", (*client.Client).ListWorkers, cfg.printWorkers)
}

func newWorkerGetCmd(cfg *config) *cobra.Command {
	return objectCmd(cfg, "get WORKER_ID", "Show a worker", (*client.Client).GetWorker, showWith(cfg.printWorker))
}

func newWorkerDrainCmd(cfg *config) *cobra.Command {
	return objectCmd(cfg, "drain WORKER_ID", "Drain a worker: it takes no new work, finishes what runs and exits",
		(*client.Client).DrainWorker, showWith(func(w io.Writer, wk *apitype.Worker) error {
			_, err := fmt.Fprintf(w, "worker %s %s\n", wk.ID, wk.State)
			return err
		}))
}

// printWorkers shows workers as a table.
func (cfg *config) printWorkers(w io.Writer, list *apitype.WorkerList) error {
	t := newTable(w, "ID", "STATE", "RUNNING", "SLOTS", "CPU", "MEMORY", "GPU", "LABELS", "HEARTBEAT")
	for _, wk := range list.Items {
		u, c := wk.Used, wk.Capacity
		t.row(wk.ID, wk.State, fmt.Sprint(wk.Running),
			fmt.Sprintf("%d/%d", u.Slots, c.Slots),
			fmt.Sprintf("%s/%s", cpu(u.CPU), cpu(c.CPU)),
			fmt.Sprintf("%d/%dMi", u.MemoryMB, c.MemoryMB),
			fmt.Sprintf("%d/%d", u.GPU, c.GPU),
			pairs(wk.Labels), cfg.ago(&wk.LastHeartbeat))
	}
	return t.flush()
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
