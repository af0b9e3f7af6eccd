package sqlite

import (
	"fmt"
	"os"
	"sync"
	"time"
)

var dbgOn = os.Getenv("STINT_DBG") != ""
var dbgMu sync.Mutex
var dbgT = map[string]time.Duration{}
var dbgN = map[string]int{}

func dbgTime(k string, d time.Duration) {
	if !dbgOn {
		return
	}
	dbgMu.Lock()
	dbgT[k] += d
	dbgN[k]++
	dbgMu.Unlock()
}

type dbgEv struct {
	kind        string
	t0, tb, end time.Time
}

var dbgEvs []dbgEv

func dbgEvent(kind string, t0, tb, end time.Time) {
	if !dbgOn {
		return
	}
	dbgMu.Lock()
	dbgEvs = append(dbgEvs, dbgEv{kind, t0, tb, end})
	dbgMu.Unlock()
}

func DbgDump() {
	if !dbgOn {
		return
	}
	dbgMu.Lock()
	defer dbgMu.Unlock()
	if os.Getenv("STINT_DBG_EVENTS") != "" && len(dbgEvs) > 0 {
		base := dbgEvs[0].t0
		for _, e := range dbgEvs {
			fmt.Fprintf(os.Stderr, "EV %8.1f wait %6.2f run %6.2f %s\n", float64(e.tb.Sub(base).Microseconds())/1000, float64(e.tb.Sub(e.t0).Microseconds())/1000, float64(e.end.Sub(e.tb).Microseconds())/1000, e.kind)
		}
	}
	for k, v := range dbgT {
		fmt.Fprintf(os.Stderr, "DBGT %s: n=%d total=%s avg=%s\n", k, dbgN[k], v, v/time.Duration(max(dbgN[k], 1)))
	}
}
