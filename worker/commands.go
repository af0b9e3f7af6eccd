package worker

import (
	"fmt"
	"os"
)

// openCommands prepares what command attempts need before the first one starts: the guard,
// the base of the working directories and the cgroup.
func (a *Agent) openCommands() error {
	if len(a.cfg.Guard) > 0 {
		g, err := startGuard(a.cfg.Guard, a.log)
		if err != nil {
			a.log.Error("no worker guard: if the worker dies, what its attempts started may outlive it", "err", err)
		}
		a.guard = g
	}
	w, err := openWorkDirs(a.cfg.WorkDir, a.runAs, a.guard, a.cfg.Capacity.Slots)
	if err != nil {
		a.guard.stop()
		return err
	}
	a.work = w
	// os/exec would open and close /dev/null for each start.
	if a.devNull, err = os.Open(os.DevNull); err != nil {
		a.closeCommands()
		return fmt.Errorf("stdin for commands: %w", err)
	}
	a.starters = newStarters(startersN())
	a.paths = newPathCache(a.now)
	if w.created {
		a.guard.track(guardDir, w.base)
	}
	if a.cfg.Cgroup != "" {
		cg, warnings, err := openCgroup(a.cfg.Cgroup)
		if err != nil {
			a.closeCommands()
			return err
		}
		for _, msg := range warnings {
			a.log.Warn("cgroup: " + msg)
		}
		a.cgroup = cg
	}
	runAs := ""
	if a.runAs != nil {
		runAs = a.runAs.name
	}
	a.log.Info("running commands", "work_dir", w.base, "run_as", runAs, "allow_commands", a.allow.String(),
		"pass_env", a.cfg.PassEnv, "limits", a.cfg.Limits, "cgroup", a.cfg.Cgroup, "guard", a.guard != nil)
	return nil
}

// closeCommands ends the starters, removes the working directories' base if Run made it, and
// stops the guard.
func (a *Agent) closeCommands() {
	a.starters.close()
	if a.devNull != nil {
		_ = a.devNull.Close()
	}
	if a.work != nil {
		if err := a.work.close(); err != nil {
			a.log.Warn("removing the work dir", "err", err)
		}
		if a.work.created {
			a.guard.untrack(guardDir, a.work.base)
		}
	}
	a.guard.stop()
}
