package worker_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/worker"
)

// A worker program passes a *client.Client as its Server; the client does not import this
// package, so the check that it implements Server lives here.
var _ worker.Server = (*client.Client)(nil)

// A Go program that serves the handler kind "greet". In a real program the Server is a
// client.Client talking to the stint server over HTTP, and the context comes from
// signal.NotifyContext so that SIGTERM drains the worker.
func Example() {
	srv := newOneRun() // stands in for the stint server
	agent, err := worker.New(worker.Config{
		Server:   srv,
		Capacity: apitype.Capacity{Slots: 4},
		Handlers: map[string]worker.Handler{
			"greet": func(ctx context.Context, t *worker.Task) error {
				var args struct {
					Name string `json:"name"`
				}
				if err := t.DecodeArgs(&args); err != nil {
					return err
				}
				fmt.Fprintf(t.Stdout, "hello, %s\n", args.Name)
				return nil
			},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		<-srv.done
		stop() // drain and return
	}()
	if err := agent.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// stdout: hello, Ada
	// run-1 attempt 1: succeeded
}

// oneRun is a worker.Server with one run of kind "greet" to hand out.
type oneRun struct {
	once sync.Once
	done chan struct{}
}

func newOneRun() *oneRun { return &oneRun{done: make(chan struct{})} }

func (s *oneRun) Register(context.Context, *apitype.RegisterRequest) (*apitype.RegisterResponse, error) {
	return &apitype.RegisterResponse{
		HeartbeatInterval: apitype.Duration(10 * time.Second),
		LeaseTTL:          apitype.Duration(30 * time.Second),
	}, nil
}

func (s *oneRun) Lease(ctx context.Context, _ string, req *apitype.LeaseRequest) (*apitype.LeaseResponse, error) {
	resp := &apitype.LeaseResponse{}
	s.once.Do(func() {
		resp.Leases = []apitype.Lease{{
			RunID: "run-1", JobName: "greeter", Attempt: 1, Token: "t1",
			Handler: "greet", Args: []byte(`{"name": "Ada"}`),
		}}
	})
	if len(resp.Leases) > 0 {
		return resp, nil
	}
	<-ctx.Done() // a long poll with nothing more to hand out
	return nil, ctx.Err()
}

func (s *oneRun) Heartbeat(context.Context, string, *apitype.HeartbeatRequest) (*apitype.HeartbeatResponse, error) {
	return &apitype.HeartbeatResponse{}, nil
}

func (s *oneRun) Leave(context.Context, string, *apitype.LeaveRequest) error { return nil }

func (s *oneRun) AppendLogs(_ context.Context, req *apitype.LogChunksRequest) error {
	for _, c := range req.Chunks {
		fmt.Printf("%s: %s", c.Stream, c.Data)
	}
	return nil
}

func (s *oneRun) Complete(_ context.Context, req *apitype.CompleteRequest) (*apitype.CompleteResponse, error) {
	resp := &apitype.CompleteResponse{}
	for _, c := range req.Completions {
		fmt.Printf("%s attempt 1: %s\n", c.RunID, c.Status)
		resp.Results = append(resp.Results, apitype.CompletionResult{RunID: c.RunID, Accepted: true})
	}
	close(s.done)
	return resp, nil
}
