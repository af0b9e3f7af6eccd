package engine

import (
	"fmt"
	"os"
	"sync"
)

var dbgMu sync.Mutex
var dbg = map[string][]int{}

func dbgAdd(k string, n int) {
	if os.Getenv("STINT_DBG") == "" {
		return
	}
	dbgMu.Lock()
	dbg[k] = append(dbg[k], n)
	dbgMu.Unlock()
}

func DbgDump() {
	if os.Getenv("STINT_DBG") == "" {
		return
	}
	dbgMu.Lock()
	defer dbgMu.Unlock()
	for k, v := range dbg {
		sum := 0
		hist := map[string]int{}
		for _, x := range v {
			sum += x
			switch {
			case x == 0:
				hist["0"]++
			case x < 10:
				hist["1-9"]++
			case x < 100:
				hist["10-99"]++
			case x < 500:
				hist["100-499"]++
			default:
				hist["500+"]++
			}
		}
		fmt.Fprintf(os.Stderr, "DBG %s: calls=%d sum=%d avg=%.1f hist=%v\n", k, len(v), sum, float64(sum)/float64(max(len(v), 1)), hist)
	}
}
