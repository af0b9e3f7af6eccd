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

func DbgDump() {
	if !dbgOn {
		return
	}
	dbgMu.Lock()
	defer dbgMu.Unlock()
	for k, v := range dbgT {
		fmt.Fprintf(os.Stderr, "DBGT %s: n=%d total=%s avg=%s\n", k, dbgN[k], v, v/time.Duration(max(dbgN[k], 1)))
	}
}
