package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// doctorZone is the time zone whose data the doctor asks for: cron schedules name zones,
// and a host without the zone database cannot fire them.
const doctorZone = "America/New_York"

// maxClockAhead is how far ahead of this server's clock another server's last report may
// be before the doctor warns: servers' clocks fence nothing (the database's does), but
// times that disagree by seconds confuse logs, `stint cluster` and cron instants.
const maxClockAhead = 2 * time.Second

// doctor serves GET /v1/doctor: this server's checks of the setup, each ok, warn or fail,
// with what to fix. It answers 200 whatever they say.
func (a *API) doctor(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	now := a.clock.Now()
	out := &apitype.Doctor{Server: a.eng.ServerID(), Time: now}
	add := func(name, status, msg, fix string) {
		out.Checks = append(out.Checks, apitype.DoctorCheck{Name: name, Status: status, Message: msg, Fix: fix})
	}
	pctx, cancel := context.WithTimeout(ctx, readyTimeout)
	err := a.store.Ping(pctx)
	if err == nil {
		if p, ok := a.store.(store.WriteProber); ok {
			err = p.ProbeWrite(pctx)
		}
	}
	cancel()
	if err != nil {
		add("store", apitype.CheckFail, fmt.Sprintf("the store does not take a write: %v", err),
			"check that the database of --store is up and reachable from this server, and that its disk has room")
	} else {
		add("store", apitype.CheckOK, "reachable and writable", "")
	}

	if sr, ok := a.store.(store.SchemaReporter); ok {
		db, known, err := sr.Schema(ctx)
		switch {
		case err != nil:
			add("migrations", apitype.CheckFail, fmt.Sprintf("cannot read the schema version: %v", err), "check the store")
		case db > known:
			add("migrations", apitype.CheckFail, fmt.Sprintf("the database schema is at %04d, this server knows up to %04d: a newer stint migrated it", db, known),
				"upgrade this server to the version of the others")
		default:
			add("migrations", apitype.CheckOK, fmt.Sprintf("schema at %04d, current", db), "")
		}
	}

	if _, err := time.LoadLocation(doctorZone); err != nil {
		add("timezone", apitype.CheckFail, fmt.Sprintf("no time zone data on the server: %v", err),
			"install the tzdata package of the server's system (or build stint with -tags timetzdata)")
	} else {
		add("timezone", apitype.CheckOK, "time zone data present", "")
	}

	c, err := a.eng.Cluster(ctx)
	if err != nil {
		return err
	}
	skewed := 0
	for _, s := range c.Servers {
		if ahead := s.LastSeen.Sub(now); ahead > maxClockAhead {
			skewed++
			add("clock", apitype.CheckWarn, fmt.Sprintf("server %s reported a time %s ahead of this server's clock", s.ID, ahead.Round(time.Second)),
				"synchronise the servers' clocks (NTP, chrony)")
		}
	}
	if skewed == 0 {
		add("clock", apitype.CheckOK, fmt.Sprintf("no server of %d reports a time ahead of this server's", len(c.Servers)), "")
	}

	ws, err := a.eng.Workers(ctx)
	if err != nil {
		return err
	}
	live := 0
	for _, wk := range ws {
		if wk.State != model.WorkerLost {
			live++
		}
	}
	switch {
	case live == 0 && len(ws) == 0:
		add("workers", apitype.CheckWarn, "no workers seen: runs wait until one registers",
			"start one: stint worker --server URL --token TOKEN (a worker token: stint tokens create --role worker)")
	case live == 0:
		add("workers", apitype.CheckWarn, fmt.Sprintf("no live worker: the %d seen are all lost", len(ws)),
			"start a worker again, or check that workers reach the servers (stint workers)")
	default:
		add("workers", apitype.CheckOK, fmt.Sprintf("%d live of %d seen", live, len(ws)), "")
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
