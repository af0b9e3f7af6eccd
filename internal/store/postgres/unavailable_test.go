package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// tcpProxy forwards connections to a PostgreSQL server until it is cut: then it closes
// every connection it carries and refuses new ones, as a database that went away.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(p.cut)
	return p
}

func (p *tcpProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		d, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, d)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(d, c); _ = d.Close() }()
		go func() { _, _ = io.Copy(c, d); _ = c.Close() }()
	}
}

func (p *tcpProxy) cut() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// TestUnreachableIsUnavailable: once the database cannot be reached, reads, writes, the
// write probe and pings all fail with model.ErrUnavailable (the API's 503), not a bare
// driver error (its 500).
func TestUnreachableIsUnavailable(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(newSchema(t))
	require.NoError(t, err)
	proxy := startProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	s := openURL(t, u.String())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.ProbeWrite(ctx))
	_, err = s.GetJob(ctx, &store.GetJobParams{IDOrName: "nothing"})
	require.ErrorIs(t, err, model.ErrNotFound)

	proxy.cut()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	j := &model.Job{ID: id.New(now), Namespace: model.DefaultNamespace, Name: "j",
		Spec: model.JobSpec{Shell: "true", Queue: model.DefaultQueue}, Enabled: true, CreatedAt: now, UpdatedAt: now}
	for name, op := range map[string]func() error{
		"get job":   func() error { _, err := s.GetJob(ctx, &store.GetJobParams{IDOrName: "nothing"}); return err },
		"list runs": func() error { _, err := s.ListRuns(ctx, &store.ListRunsParams{Limit: 10}); return err },
		"create": func() error {
			_, err := s.CreateJobs(ctx, &store.CreateJobsParams{Jobs: []store.NewJob{{Job: j}}, Now: now})
			return err
		},
		"queues": func() error { _, err := s.ListQueues(ctx); return err },
		"probe":  func() error { return s.ProbeWrite(ctx) },
		"ping":   func() error { return s.Ping(ctx) },
		"heartbeat": func() error {
			_, err := s.Heartbeat(ctx, &store.HeartbeatParams{Beats: []store.Beat{{WorkerID: "w"}}, Now: now, LeaseTTL: time.Second})
			return err
		},
	} {
		err := op()
		require.ErrorIs(t, err, model.ErrUnavailable, "%s: %v", name, err)
		var ue *model.UnavailableError
		require.ErrorAs(t, err, &ue)
		require.Contains(t, []string{"database unreachable", "database connection lost"}, ue.What, name)
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		what string
	}{
		{&pgconn.PgError{Code: "53100", Message: "could not extend file"}, "database disk full"},
		{&pgconn.PgError{Code: "53300", Message: "too many connections"}, "database out of resources"},
		{&pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, "database shutting down or starting"},
		{&pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}, "database shutting down or starting"},
		{&pgconn.PgError{Code: "08006"}, "database unreachable"},
		{&pgconn.PgError{Code: "25006"}, "database is read-only"},
		{fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}), "database connection lost"},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), "database connection lost"},
		{&pgconn.PgError{Code: "23505"}, ""},
		{&pgconn.PgError{Code: "40001"}, ""},
		{context.DeadlineExceeded, ""},
		{fmt.Errorf("scan: %w", context.Canceled), ""},
		{errors.New("decode job spec"), ""},
	} {
		err := classify(tc.err)
		if tc.what == "" {
			require.Equal(t, tc.err, err, "%v", tc.err)
			continue
		}
		var ue *model.UnavailableError
		require.ErrorAs(t, err, &ue, "%v", tc.err)
		require.Equal(t, tc.what, ue.What, "%v", tc.err)
		require.ErrorIs(t, err, tc.err)
	}
}
