package worker

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/stint-dev/stint/apitype"
)

// benchServer is a fast in-memory server: it hands out a fixed set of noop leases as fast as
// the agent asks for them and counts completions.
type benchServer struct {
	mu     sync.Mutex
	leases []apitype.Lease
	next   int
	open   chan struct{} // closed to start handing out leases
	done   chan struct{} // closed when every lease is completed
	count  int
}

func (s *benchServer) Register(context.Context, *apitype.RegisterRequest) (*apitype.RegisterResponse, error) {
	return &apitype.RegisterResponse{Worker: &apitype.Worker{ID: "bench"}}, nil
}

func (s *benchServer) Lease(ctx context.Context, _ string, req *apitype.LeaseRequest) (*apitype.LeaseResponse, error) {
	if req.Max > 0 {
		select {
		case <-s.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.mu.Lock()
		n := min(req.Max, len(s.leases)-s.next)
		leases := s.leases[s.next : s.next+n]
		s.next += n
		s.mu.Unlock()
		if n > 0 {
			return &apitype.LeaseResponse{Leases: leases}, nil
		}
	}
	<-ctx.Done() // nothing to hand out: hold the poll
	return nil, ctx.Err()
}

func (s *benchServer) Heartbeat(context.Context, string, *apitype.HeartbeatRequest) (*apitype.HeartbeatResponse, error) {
	return &apitype.HeartbeatResponse{}, nil
}

func (s *benchServer) AppendLogs(context.Context, *apitype.LogChunksRequest) error { return nil }

func (s *benchServer) Leave(context.Context, string, *apitype.LeaveRequest) error { return nil }

func (s *benchServer) Complete(_ context.Context, req *apitype.CompleteRequest) (*apitype.CompleteResponse, error) {
	res := make([]apitype.CompletionResult, len(req.Completions))
	for i, c := range req.Completions {
		res[i] = apitype.CompletionResult{RunID: c.RunID, Accepted: true}
	}
	s.mu.Lock()
	s.count += len(req.Completions)
	if s.count == len(s.leases) {
		close(s.done)
	}
	s.mu.Unlock()
	return &apitype.CompleteResponse{Results: res}, nil
}

// BenchmarkNoop measures the agent's own cost per attempt: lease, start, run the noop
// handler, complete, free the slot. Run with -cpu 2 for the figure the server's local worker
// must reach (25,000 attempts/s).
func BenchmarkNoop(b *testing.B) {
	for _, slots := range []int{16, 256, 1024} {
		b.Run("slots="+strconv.Itoa(slots), func(b *testing.B) {
			benchAgent(b, slots, apitype.Lease{Handler: "noop"})
		})
	}
}

// BenchmarkCommandTrue measures processes per second: the command `true`, as in
// `stint bench exec`.
func BenchmarkCommandTrue(b *testing.B) {
	if runtime.GOOS == "windows" {
		b.Skip("commands need process groups")
	}
	for _, slots := range []int{4, 16, 1000} {
		b.Run("slots="+strconv.Itoa(slots), func(b *testing.B) {
			benchAgent(b, slots, apitype.Lease{Command: []string{"true"}})
		})
	}
}

// benchAgent runs b.N copies of lease through an agent with the given slots.
func benchAgent(b *testing.B, slots int, lease apitype.Lease) {
	s := &benchServer{open: make(chan struct{}), done: make(chan struct{})}
	s.leases = make([]apitype.Lease, b.N)
	for i := range s.leases {
		id := strconv.Itoa(i)
		l := lease
		l.RunID, l.JobID, l.JobName, l.Attempt, l.Token = id, "j", "bench", 1, id
		s.leases[i] = l
	}
	a, err := New(Config{
		Server:   s,
		Capacity: apitype.Capacity{Slots: slots},
		Handlers: map[string]Handler{"noop": Noop},
		Commands: true,
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	close(s.open)
	<-s.done
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "attempts/s")
	if cpu := processCPU() - cpu; cpu > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "agent-cpu-µs/attempt")
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
