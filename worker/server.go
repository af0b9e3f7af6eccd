package worker

import (
	"context"

	"github.com/stint-dev/stint/apitype"
)

// Server is the worker protocol as the agent sees it. client.Client implements it over
// HTTP/JSON; the server's own local worker uses an in-process implementation. Methods map
// one to one onto the protocol's routes:
//
//	POST /v1/workers/register          Register
//	POST /v1/workers/{id}/lease        Lease (long poll)
//	POST /v1/workers/{id}/heartbeat    Heartbeat
//	POST /v1/attempts/logs             AppendLogs
//	POST /v1/attempts/complete         Complete
type Server interface {
	Register(ctx context.Context, req *apitype.RegisterRequest) (*apitype.RegisterResponse, error)
	Lease(ctx context.Context, workerID string, req *apitype.LeaseRequest) (*apitype.LeaseResponse, error)
	Heartbeat(ctx context.Context, workerID string, req *apitype.HeartbeatRequest) (*apitype.HeartbeatResponse, error)
	AppendLogs(ctx context.Context, req *apitype.LogChunksRequest) error
	Complete(ctx context.Context, req *apitype.CompleteRequest) (*apitype.CompleteResponse, error)
}
