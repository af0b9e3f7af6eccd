package placement

import (
	"slices"
	"testing"
	"time"

	"github.com/stint-dev/stint/internal/model"
)

func room(id string, cpu float64, mem int64, gpu int, labels map[string]string) Room {
	c := model.Capacity{CPU: cpu, MemoryMB: mem, GPU: gpu}
	return Room{WorkerID: id, Labels: labels, Capacity: c, Free: c}
}

func TestLacks(t *testing.T) {
	w := room("w", 4, 8192, 2, map[string]string{"zone": "eu"})
	w.Free.GPU = 1
	never, busy := w.Lacks(model.Requirements{CPU: 8, GPU: 2, Labels: map[string]string{"zone": "us", "disk": "ssd"}})
	if want := []string{"label disk=ssd", "label zone=us", "cpu >= 8"}; !slices.Equal(never, want) {
		t.Errorf("never = %q, want %q", never, want)
	}
	if want := []string{"gpu >= 2"}; !slices.Equal(busy, want) {
		t.Errorf("busy = %q, want %q", busy, want)
	}
	if never, busy := w.Lacks(model.Requirements{CPU: 0.5, Labels: map[string]string{"zone": "eu"}}); never != nil || busy != nil {
		t.Errorf("a fitting run lacks %q / %q", never, busy)
	}
}

func TestFitsSumsFractionalCPU(t *testing.T) {
	w := room("w", 0.3, 0, 0, nil)
	w.Take(model.Requirements{CPU: 0.1})
	w.Take(model.Requirements{CPU: 0.1})
	if !w.Fits(model.Requirements{CPU: 0.1}) {
		t.Fatal("0.1 + 0.1 + 0.1 does not fit 0.3")
	}
	w.Take(model.Requirements{CPU: 0.1})
	if w.Fits(model.Requirements{CPU: 0.1}) {
		t.Fatal("a fourth 0.1 fits 0.3")
	}
}

func TestBestPrefersTightFitAndWorkersWithoutIdleGPUs(t *testing.T) {
	rooms := []Room{
		room("gpu-box", 16, 65536, 4, nil),
		room("big", 16, 65536, 0, nil),
		room("small", 2, 4096, 0, nil),
	}
	if got := Best(rooms, model.Requirements{CPU: 1, MemoryMB: 1024}); got != 2 {
		t.Errorf("1 cpu job: best = %d, want 2 (small)", got)
	}
	if got := Best(rooms, model.Requirements{CPU: 4}); got != 1 {
		t.Errorf("4 cpu job: best = %d, want 1 (big, not the GPU box)", got)
	}
	if got := Best(rooms, model.Requirements{GPU: 1}); got != 0 {
		t.Errorf("gpu job: best = %d, want 0", got)
	}
	if got := Best(rooms, model.Requirements{GPU: 8}); got != -1 {
		t.Errorf("8 gpu job: best = %d, want -1", got)
	}
}

func TestPackSkipsWhatDoesNotFitAndTakesWhatFollows(t *testing.T) {
	self := room("w", 4, 0, 2, nil)
	now := time.Unix(1000, 0)
	cands := []Candidate{
		{Req: model.Requirements{GPU: 2}},
		{Req: model.Requirements{GPU: 1}}, // no GPU left after the first
		{Req: model.Requirements{}},       // unconstrained: always
		{Req: model.Requirements{CPU: 4}},
		{Req: model.Requirements{CPU: 0.5}}, // cpu used up by the one before
		{Req: model.Requirements{Labels: map[string]string{"a": "b"}}},
	}
	take, held := Pack(&self, nil, cands, now, time.Minute)
	if want := []int{0, 2, 3}; !slices.Equal(take, want) {
		t.Errorf("take = %v, want %v", take, want)
	}
	if !held.IsZero() {
		t.Errorf("held until %v with no other worker", held)
	}
	if self.Free.GPU != 0 || self.Free.CPU != 0 {
		t.Errorf("free after packing = %+v", self.Free)
	}
}

func TestPackLeavesYoungRunsToABetterFit(t *testing.T) {
	now := time.Unix(1000, 0)
	hold := 2 * time.Second
	cpuJob := model.Requirements{CPU: 1}
	self := room("gpu-box", 8, 0, 4, nil)
	others := []Room{room("cpu-box", 8, 0, 0, nil)}
	cands := []Candidate{{Req: cpuJob, Since: now.Add(-time.Second)}, {Req: cpuJob, Since: now.Add(-3 * time.Second)}}
	take, held := Pack(&self, others, cands, now, hold)
	if want := []int{1}; !slices.Equal(take, want) {
		t.Errorf("take = %v, want %v (the young run waits for cpu-box, the old one does not)", take, want)
	}
	if want := now.Add(time.Second); !held.Equal(want) {
		t.Errorf("held until %v, want %v", held, want)
	}
	if others[0].Free.CPU != 7 {
		t.Errorf("the run left for cpu-box is not booked on it: free %v", others[0].Free.CPU)
	}
	// Without a hold, the asking worker takes what fits.
	self = room("gpu-box", 8, 0, 4, nil)
	if take, _ := Pack(&self, []Room{room("cpu-box", 8, 0, 0, nil)}, cands, now, 0); len(take) != 2 {
		t.Errorf("hold 0: take = %v, want both", take)
	}
	// A better fit that is full does not hold anything back.
	self = room("gpu-box", 8, 0, 4, nil)
	full := room("cpu-box", 8, 0, 0, nil)
	full.Free.CPU = 0
	if take, _ := Pack(&self, []Room{full}, cands, now, hold); len(take) != 2 {
		t.Errorf("better fit full: take = %v, want both", take)
	}
}

func TestExplain(t *testing.T) {
	eu := map[string]string{"zone": "eu"}
	rooms := []Room{room("a", 4, 8192, 0, eu), room("b", 8, 16384, 2, eu), room("c", 8, 16384, 2, nil)}
	v := Explain(rooms, model.Requirements{GPU: 4})
	if v.Code != model.PendingNoWorker || v.Reason != "no worker fits: 3 registered, 3 lack gpu >= 4" {
		t.Errorf("gpu 4: %q %q", v.Code, v.Reason)
	}
	v = Explain(rooms, model.Requirements{GPU: 1, Labels: eu})
	if !slices.Equal(v.Fits, []string{"b"}) || v.Code != "" || v.Reason != "" {
		t.Errorf("gpu 1 in eu: %+v", v)
	}
	rooms[1].Free.GPU = 0
	v = Explain(rooms, model.Requirements{GPU: 1, Labels: eu})
	want := "no worker has room now: 3 registered, 1 would fit when their running work ends (1 busy, short of gpu >= 1), 1 lacks gpu >= 1, 1 lacks label zone=eu"
	if v.Reason != want {
		t.Errorf("busy:\n got %q\nwant %q", v.Reason, want)
	}
	if v.Never["label zone=eu"] != 1 || v.Never["gpu >= 1"] != 1 || v.Busy["gpu >= 1"] != 1 {
		t.Errorf("counts: never %v busy %v", v.Never, v.Busy)
	}
	if v := Explain(nil, model.Requirements{}); v.Reason != "no worker is connected" {
		t.Errorf("no workers: %q", v.Reason)
	}
	v = Explain(rooms, model.Requirements{CPU: 2})
	if !slices.Equal(v.Fits, []string{"a", "b", "c"}) {
		t.Errorf("cpu 2 fits %v, want a (tightest), b, c (idle GPUs)", v.Fits)
	}
}
