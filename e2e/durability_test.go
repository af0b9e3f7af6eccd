package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

// TestSubmissionsSurviveServerKill is invariant 1 end to end: jobs are submitted from several
// goroutines, the server is killed with SIGKILL in the middle, restarted on the same store,
// and every submission that got a 2xx answer must exist and reach succeeded. The lease TTL
// is the default: what the kill leaves running is taken over or rescued by the restarted
// process, whatever the TTL.
func TestSubmissionsSurviveServerKill(t *testing.T) {
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			args := sc.args(t)
			srv := startServer(t, "dev", args...)
			c := srv.client(t)

			var (
				mu       sync.Mutex
				accepted []string
			)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						spec := &apitype.JobSpec{
							Handler: "noop",
							Retry:   &apitype.RetryPolicy{MaxAttempts: 5, InitialDelay: ptr(apitype.Duration(50 * time.Millisecond))},
						}
						if (g+i)%2 == 0 {
							spec = &apitype.JobSpec{
								Shell: `test -n "$STINT_RUN_ID"`,
								Retry: spec.Retry,
							}
						}
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						resp, _, err := c.CreateJob(ctx, spec)
						cancel()
						if err != nil {
							continue // the server is gone, or the request failed: not accepted
						}
						mu.Lock()
						accepted = append(accepted, resp.Run.ID)
						mu.Unlock()
					}
				}()
			}
			waitFor(t, 60*time.Second, "200 accepted submissions", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(accepted) >= 200
			})
			srv.kill() // SIGKILL while submissions are in flight
			close(stop)
			wg.Wait()

			srv2 := startServer(t, "dev", args...)
			c2 := srv2.client(t)
			mu.Lock()
			ids := append([]string(nil), accepted...)
			mu.Unlock()
			t.Logf("%d submissions accepted before the kill", len(ids))
			for _, id := range ids {
				run := waitRun(t, c2, id, 60*time.Second)
				require.Equal(t, "succeeded", run.Status, "run %s: %+v", id, run)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
