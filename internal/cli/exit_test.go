package cli

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

func TestExitCode(t *testing.T) {
	t.Parallel()
	problem := func(status int) error { return fmt.Errorf("call: %w", &apitype.Problem{Title: "x", Status: status}) }
	tests := []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errRunFailed, ExitFailed},
		{Usagef("--limit: bad"), ExitUsage},
		{problem(400), ExitUsage},
		{problem(404), ExitNotFound},
		{&client.HTTPError{StatusCode: 404}, ExitNotFound},
		{problem(401), ExitUnauthorized},
		{problem(403), ExitUnauthorized},
		{problem(409), ExitConflict},
		{problem(500), ExitFailed},
		{problem(503), ExitFailed},
		{fmt.Errorf("GET x: %w", &net.OpError{Op: "dial", Err: fmt.Errorf("connection refused")}), ExitUnreachable},
		{fmt.Errorf("GET x: %w", &net.DNSError{Name: "nohost", IsNotFound: true}), ExitUnreachable},
		{fmt.Errorf("wait: %w", context.DeadlineExceeded), ExitTimeout},
		{fmt.Errorf("wait: %w", context.Canceled), ExitInterrupted},
		{fmt.Errorf("decode answer: unexpected EOF"), ExitFailed},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, exitCode(tt.err), "%v", tt.err)
	}
}
