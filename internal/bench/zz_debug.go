package bench

import (
	"os"
	"runtime/pprof"
)

func dbgProfStart() func() { return dbgProfStartEnv("STINT_PROF_PHASE") }

func dbgProfStartEnv(env string) func() {
	p := os.Getenv(env)
	if p == "" {
		return func() {}
	}
	f, err := os.Create(p)
	if err != nil {
		panic(err)
	}
	pprof.StopCPUProfile()
	if err := pprof.StartCPUProfile(f); err != nil {
		panic(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
