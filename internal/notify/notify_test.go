package notify

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/alerting"
	"github.com/stint-dev/stint/internal/testsmtp"
)

var t0 = time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)

var fired = alerting.Alert{ID: "a1", Rule: alerting.RuleWorkerLost, Subject: "worker:w1", State: alerting.Firing,
	Summary: "worker w1 lost", Link: "/ui/workers", StartedAt: t0}

// receiver is an HTTP receiver that fails its first failures posts and hands the bodies
// of the others to the test.
func receiver(t *testing.T, failures int32) (*httptest.Server, chan []byte) {
	bodies := make(chan []byte, 10)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if n.Add(1) <= failures {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		bodies <- body
	}))
	t.Cleanup(srv.Close)
	return srv, bodies
}

func run(t *testing.T, d *Dispatcher) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func TestChannels(t *testing.T) {
	t.Parallel()
	hook, hookBodies := receiver(t, 2) // down twice: delivered by the third try
	slack, slackBodies := receiver(t, 0)
	sink := testsmtp.Start(t)
	d := New(Config{
		Channels: []Channel{&Webhook{URL: hook.URL}, &Slack{URL: slack.URL},
			&Email{Addr: sink.Addr, From: "stint@example.com", To: []string{"ops@example.com"}}},
		LinkBase: "https://stint.example.com/", InitialBackoff: time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	run(t, d)
	d.Notify([]alerting.Alert{fired})

	var got apitype.Alert
	require.NoError(t, json.Unmarshal(<-hookBodies, &got))
	require.Equal(t, apitype.Alert{ID: "a1", Rule: "worker_lost", State: "firing", Subject: "worker:w1",
		Summary: "worker w1 lost", Link: "https://stint.example.com/ui/workers", StartedAt: t0}, got)
	require.JSONEq(t, `{"text": "[FIRING] worker_lost: worker w1 lost <https://stint.example.com/ui/workers|open>"}`, string(<-slackBodies))
	m := <-sink.Mails
	require.Equal(t, "stint@example.com", m.From)
	require.Equal(t, []string{"ops@example.com"}, m.To)
	require.Contains(t, m.Data, "Subject: [stint] FIRING worker_lost: worker w1 lost\n") // the sink reads lines as LF
	require.Contains(t, m.Data, "link: https://stint.example.com/ui/workers")
}

// flaky fails every send of alert a1 and hands the ids of the others to the test.
type flaky struct {
	a1Tries atomic.Int32
	sent    chan string
}

func (f *flaky) Name() string { return "flaky" }

func (f *flaky) Send(_ context.Context, a apitype.Alert) error {
	if a.ID == "a1" {
		f.a1Tries.Add(1)
		return errStatus
	}
	f.sent <- a.ID
	return nil
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	ch := &flaky{sent: make(chan string, 1)}
	d := New(Config{Channels: []Channel{ch}, MaxAttempts: 3, InitialBackoff: time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	run(t, d)
	second := fired
	second.ID = "a2"
	d.Notify([]alerting.Alert{fired, second})
	// A channel sends in order: once a2 is sent, a1 was given up.
	require.Equal(t, "a2", <-ch.sent)
	require.Equal(t, int32(3), ch.a1Tries.Load())
}

func TestNotifyNeverBlocks(t *testing.T) {
	t.Parallel()
	d := New(Config{Channels: []Channel{&Webhook{URL: "http://127.0.0.1:1"}}, QueueSize: 2, Logger: slog.New(slog.DiscardHandler)})
	// Not running: the queue fills and further alerts are dropped, not waited for.
	d.Notify([]alerting.Alert{fired, fired, fired, fired})
	require.Len(t, d.queues[0], 2)
}
