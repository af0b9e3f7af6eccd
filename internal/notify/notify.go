// Package notify delivers alerts (internal/alerting) to notification channels: a generic
// JSON webhook, a Slack-compatible webhook and email over SMTP. A Dispatcher keeps a
// bounded queue per channel and one goroutine per channel that sends in order, retrying a
// failed send with exponential backoff; Notify only enqueues, so the Alerter (and the
// scheduler behind it) never waits on a slow or dead receiver. A queue that is full drops
// the newest message with an error in the log.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/smtp"
	"strings"
	"sync"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/alerting"
	"github.com/stint-dev/stint/internal/clock"
)

// Channel is where alerts go.
type Channel interface {
	// Name names the channel in logs ("webhook", "slack", "email").
	Name() string
	// Send delivers one alert; an error means it may be tried again.
	Send(ctx context.Context, a apitype.Alert) error
}

// Config wires a Dispatcher.
type Config struct {
	Channels []Channel
	Clock    clock.Clock  // default clock.Real
	Logger   *slog.Logger // default slog.Default()
	// LinkBase, when set, is the server's public address: alerts' links (UI paths) become
	// URLs under it.
	LinkBase string
	// MaxAttempts is how often one alert is tried per channel. Default 8.
	MaxAttempts int
	// InitialBackoff is the pause after the first failed send, doubled after each, up to
	// MaxBackoff. Defaults 1 s and 1 min.
	InitialBackoff, MaxBackoff time.Duration
	// QueueSize bounds each channel's queue. Default 1000.
	QueueSize int
}

// Dispatcher fans alerts out to the channels.
type Dispatcher struct {
	cfg    Config
	log    *slog.Logger
	queues []chan apitype.Alert
	wg     sync.WaitGroup
}

// New returns a Dispatcher; Run sends what Notify queues.
func New(cfg Config) *Dispatcher {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 8
	}
	if cfg.InitialBackoff <= 0 {
		cfg.InitialBackoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Minute
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 1000
	}
	d := &Dispatcher{cfg: cfg, log: cfg.Logger.With("component", "notify")}
	for range cfg.Channels {
		d.queues = append(d.queues, make(chan apitype.Alert, cfg.QueueSize))
	}
	return d
}

// Wire is an alert as the API and the JSON webhook show it, its link made a URL under
// base when base is set.
func Wire(a alerting.Alert, base string) apitype.Alert {
	link := a.Link
	if base != "" && link != "" {
		link = strings.TrimSuffix(base, "/") + link
	}
	return apitype.Alert{ID: a.ID, Rule: string(a.Rule), State: string(a.State), Subject: a.Subject,
		Summary: a.Summary, Link: link, StartedAt: a.StartedAt, ResolvedAt: a.ResolvedAt}
}

// Notify queues alerts for every channel; it never blocks.
func (d *Dispatcher) Notify(alerts []alerting.Alert) {
	for _, a := range alerts {
		w := Wire(a, d.cfg.LinkBase)
		for i, q := range d.queues {
			select {
			case q <- w:
			default:
				d.log.Error("notification queue full: alert dropped", "channel", d.cfg.Channels[i].Name(), "alert", a.ID)
			}
		}
	}
}

// Run sends queued alerts until ctx ends, then returns once every channel's goroutine has.
func (d *Dispatcher) Run(ctx context.Context) {
	for i, ch := range d.cfg.Channels {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case a := <-d.queues[i]:
					d.deliver(ctx, ch, a)
				}
			}
		}()
	}
	d.wg.Wait()
}

// deliver sends one alert to one channel, retrying with backoff.
func (d *Dispatcher) deliver(ctx context.Context, ch Channel, a apitype.Alert) {
	wait := d.cfg.InitialBackoff
	for attempt := 1; ; attempt++ {
		sendCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := ch.Send(sendCtx, a)
		cancel()
		if err == nil {
			d.log.Info("alert sent", "channel", ch.Name(), "alert", a.ID, "state", a.State)
			return
		}
		if attempt >= d.cfg.MaxAttempts || ctx.Err() != nil {
			d.log.Error("alert not sent: giving up", "channel", ch.Name(), "alert", a.ID, "attempts", attempt, "err", err)
			return
		}
		d.log.Warn("alert not sent: retrying", "channel", ch.Name(), "alert", a.ID, "in", wait, "err", err)
		t := d.cfg.Clock.NewTimerAt(d.cfg.Clock.Now().Add(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		wait = min(2*wait, d.cfg.MaxBackoff)
	}
}

// Webhook posts each alert as JSON (apitype.Alert) to URL.
type Webhook struct {
	URL    string
	Client *http.Client // default http.DefaultClient
}

// Name is "webhook".
func (w *Webhook) Name() string { return "webhook" }

// Send posts the alert.
func (w *Webhook) Send(ctx context.Context, a apitype.Alert) error {
	return postJSON(ctx, w.Client, w.URL, a)
}

// Slack posts each alert to a Slack-compatible incoming webhook: {"text": "..."}.
type Slack struct {
	URL    string
	Client *http.Client // default http.DefaultClient
}

// Name is "slack".
func (s *Slack) Name() string { return "slack" }

// Send posts the alert's text.
func (s *Slack) Send(ctx context.Context, a apitype.Alert) error {
	return postJSON(ctx, s.Client, s.URL, map[string]string{"text": SlackText(a)})
}

// SlackText is an alert as one line of Slack's markup.
func SlackText(a apitype.Alert) string {
	text := fmt.Sprintf("[%s] %s: %s", strings.ToUpper(a.State), a.Rule, a.Summary)
	if a.Link != "" {
		text += fmt.Sprintf(" <%s|open>", a.Link)
	}
	return text
}

func postJSON(ctx context.Context, client *http.Client, url string, v any) error {
	if client == nil {
		client = http.DefaultClient
	}
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("post %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("post: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("post %s: %w: %s", url, errStatus, resp.Status)
	}
	return nil
}

var errStatus = errors.New("receiver answered an error")

// Email sends each alert as a plain-text mail over SMTP (no authentication: a local
// relay or a smarthost that trusts the server's address).
type Email struct {
	Addr string // host:port
	From string
	To   []string
}

// Name is "email".
func (e *Email) Name() string { return "email" }

// Send mails the alert. net/smtp takes no context: the dial and the session are not
// cancelled by ctx.
func (e *Email) Send(_ context.Context, a apitype.Alert) error {
	if err := smtp.SendMail(e.Addr, nil, e.From, e.To, EmailMessage(a, e.From, e.To)); err != nil {
		return fmt.Errorf("send mail via %s: %w", e.Addr, err)
	}
	return nil
}

// EmailMessage is the mail of an alert: headers and a plain-text body.
func EmailMessage(a apitype.Alert, from string, to []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\n", from, strings.Join(to, ", "))
	fmt.Fprintf(&b, "Subject: [stint] %s %s: %s\r\n", strings.ToUpper(a.State), a.Rule, oneLine(a.Summary))
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n\r\n")
	fmt.Fprintf(&b, "%s\r\n\r\nrule: %s\r\nsubject: %s\r\nstate: %s\r\nstarted: %s\r\n",
		a.Summary, a.Rule, a.Subject, a.State, a.StartedAt.UTC().Format(time.RFC3339))
	if a.ResolvedAt != nil {
		fmt.Fprintf(&b, "resolved: %s\r\n", a.ResolvedAt.UTC().Format(time.RFC3339))
	}
	if a.Link != "" {
		fmt.Fprintf(&b, "link: %s\r\n", a.Link)
	}
	fmt.Fprintf(&b, "id: %s\r\n", a.ID)
	return []byte(b.String())
}

func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }
