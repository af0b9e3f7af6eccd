package worker

import (
	"context"
	"errors"

	"github.com/stint-dev/stint/apitype"
)

// ErrUnknownWorker is what a Server returns (wrapped or not) from Lease or Heartbeat when it
// does not know the worker id: the server forgot the worker or declared it lost. The agent
// registers again when it sees this error. An *apitype.Problem with status 404 from those two
// calls means the same, so an HTTP client need not translate it.
var ErrUnknownWorker = errors.New("unknown worker")

// Server is the worker protocol as the agent sees it. client.Client implements it over
// HTTP/JSON; the server's own local worker calls the server's protocol adapter in-process,
// which answers errors with the same problems as the routes. Methods map one to one onto
// the protocol's routes:
//
//	POST /v1/workers/register          Register
//	POST /v1/workers/{id}/lease        Lease (long poll)
//	POST /v1/workers/{id}/heartbeat    Heartbeat
//	POST /v1/attempts/logs             AppendLogs
//	POST /v1/attempts/complete         Complete
//	POST /v1/workers/{id}/leave        Leave
//
// A Server must be safe for concurrent use (the agent's lease poll, heartbeat and shipper call
// it at the same time) and must not keep a request after the method returns. An error that is
// an *apitype.Problem with a 4xx status other than 408 and 429 is permanent: the agent does
// not send the same request again (404 from Lease or Heartbeat means ErrUnknownWorker). Any
// other error is transient, and the agent retries with backoff.
type Server interface {
	Register(ctx context.Context, req *apitype.RegisterRequest) (*apitype.RegisterResponse, error)
	Lease(ctx context.Context, workerID string, req *apitype.LeaseRequest) (*apitype.LeaseResponse, error)
	Heartbeat(ctx context.Context, workerID string, req *apitype.HeartbeatRequest) (*apitype.HeartbeatResponse, error)
	AppendLogs(ctx context.Context, req *apitype.LogChunksRequest) error
	Complete(ctx context.Context, req *apitype.CompleteRequest) (*apitype.CompleteResponse, error)
	// Leave says the worker's session ends: the worker exits and takes no more work.
	Leave(ctx context.Context, workerID string, req *apitype.LeaveRequest) error
}
