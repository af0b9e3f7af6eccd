package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/stint-dev/stint/internal/alerting"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/notify"
)

// AlertConfig is the server's alerting: the rules' thresholds and where alerts go.
type AlertConfig struct {
	Off      bool // no rule is evaluated
	Rules    alerting.Rules
	Interval time.Duration
	// Channels: a JSON webhook, a Slack-compatible webhook, email over SMTP (Addr, From, To).
	Webhook, Slack      string
	SMTPAddr, EmailFrom string
	EmailTo             []string
	// LinkBase is the server's public address, which alerts' links (UI paths) go under.
	LinkBase string
}

type alertFlags struct {
	off                   bool
	webhook, slack, smtp  string
	from, to, linkBase    string
	interval              time.Duration
	failures, backlog     int
	lateAfter, queueAge   time.Duration
	hysteresis            time.Duration
	disable               []string
	retryBase, retryLimit time.Duration
}

func (f *alertFlags) register(fl *pflag.FlagSet) {
	d := alerting.DefaultRules()
	fl.BoolVar(&f.off, "alerts-off", false, "evaluate no alert rule")
	fl.StringVar(&f.webhook, "alert-webhook", "", "POST each alert as JSON to this URL")
	fl.StringVar(&f.slack, "alert-slack", "", "POST each alert to this Slack-compatible incoming webhook")
	fl.StringVar(&f.smtp, "alert-smtp", "", "mail each alert through this SMTP server, host:port, without authentication")
	fl.StringVar(&f.from, "alert-email-from", "stint@localhost", "the From address of alert mails")
	fl.StringVar(&f.to, "alert-email-to", "", "comma-separated recipients of alert mails; needs --alert-smtp")
	fl.StringVar(&f.linkBase, "alert-link-base", "", "the server's public URL: alerts link to its web UI pages under it")
	fl.DurationVar(&f.interval, "alert-interval", 0, "how often the alert rules are evaluated (default 5s)")
	fl.IntVar(&f.failures, "alert-consecutive-failures", d.ConsecutiveFailures, "failed runs in a row of a job that fire job_failing (a job's alerts.consecutive_failures overrides it)")
	fl.DurationVar(&f.lateAfter, "alert-late-after", d.LateAfter, "how long a cron instant may go unstarted before cron_late (a job's alerts.late_after overrides it)")
	fl.IntVar(&f.backlog, "alert-queue-backlog", d.QueueMaxBacklog, "queued runs of a queue above which queue_backlog fires (a queue's alerts.max_backlog overrides it)")
	fl.DurationVar(&f.queueAge, "alert-queue-age", d.QueueMaxAge, "age of a queue's oldest queued run above which queue_backlog fires (a queue's alerts.max_age overrides it)")
	fl.DurationVar(&f.hysteresis, "alert-hysteresis", d.Hysteresis, "how long a condition stays clear before its alert resolves")
	fl.StringSliceVar(&f.disable, "alert-disable", nil, "rules to turn off: job_failing, cron_late, queue_backlog, worker_lost, run_too_long")
	fl.DurationVar(&f.retryBase, "alert-retry", time.Second, "first pause before sending a failed notification again (doubling, 8 tries)")
	fl.DurationVar(&f.retryLimit, "alert-retry-max", time.Minute, "longest pause between tries of a notification")
}

func (f *alertFlags) config() (AlertConfig, error) {
	c := AlertConfig{Off: f.off, Interval: f.interval, Webhook: f.webhook, Slack: f.slack, SMTPAddr: f.smtp,
		EmailFrom: f.from, LinkBase: f.linkBase,
		Rules: alerting.Rules{ConsecutiveFailures: f.failures, LateAfter: f.lateAfter, QueueMaxBacklog: f.backlog,
			QueueMaxAge: f.queueAge, Hysteresis: f.hysteresis}}
	for _, u := range []struct{ flag, v string }{{"--alert-webhook", f.webhook}, {"--alert-slack", f.slack}, {"--alert-link-base", f.linkBase}} {
		if u.v == "" {
			continue
		}
		if p, err := url.Parse(u.v); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return AlertConfig{}, fmt.Errorf("%s: must be an http or https URL, got %q", u.flag, u.v)
		}
	}
	if f.smtp != "" {
		if _, _, err := net.SplitHostPort(f.smtp); err != nil {
			return AlertConfig{}, fmt.Errorf("--alert-smtp: must be host:port, got %q", f.smtp)
		}
	}
	for _, to := range strings.Split(f.to, ",") {
		if to = strings.TrimSpace(to); to != "" {
			c.EmailTo = append(c.EmailTo, to)
		}
	}
	if (f.smtp == "") != (len(c.EmailTo) == 0) {
		return AlertConfig{}, fmt.Errorf("--alert-smtp and --alert-email-to: give both or neither")
	}
	if f.failures < 1 || f.failures > alerting.MaxConsecutiveFailures {
		return AlertConfig{}, fmt.Errorf("--alert-consecutive-failures: must be 1 to %d, got %d", alerting.MaxConsecutiveFailures, f.failures)
	}
	for _, v := range []struct {
		flag string
		d    time.Duration
	}{{"--alert-late-after", f.lateAfter}, {"--alert-queue-age", f.queueAge}, {"--alert-hysteresis", f.hysteresis}} {
		if v.d <= 0 {
			return AlertConfig{}, fmt.Errorf("%s: must be positive, got %s", v.flag, v.d)
		}
	}
	if f.backlog < 1 {
		return AlertConfig{}, fmt.Errorf("--alert-queue-backlog: must be at least 1, got %d", f.backlog)
	}
	for _, r := range f.disable {
		rule := alerting.Rule(strings.TrimSpace(r))
		if !containsRule(rule) {
			return AlertConfig{}, fmt.Errorf("--alert-disable: unknown rule %q", r)
		}
		if c.Rules.Disabled == nil {
			c.Rules.Disabled = map[alerting.Rule]bool{}
		}
		c.Rules.Disabled[rule] = true
	}
	return c, nil
}

func containsRule(r alerting.Rule) bool {
	for _, known := range alerting.AllRules {
		if r == known {
			return true
		}
	}
	return false
}

// startAlerts builds the engine's alert config and starts the notifiers (until ctx ends);
// nil when alerts are off.
func startAlerts(ctx context.Context, c AlertConfig, retryBase, retryMax time.Duration, log *slog.Logger) *engine.AlertsConfig {
	if c.Off {
		log.Info("alerts are off")
		return nil
	}
	var chans []notify.Channel
	if c.Webhook != "" {
		chans = append(chans, &notify.Webhook{URL: c.Webhook})
	}
	if c.Slack != "" {
		chans = append(chans, &notify.Slack{URL: c.Slack})
	}
	if c.SMTPAddr != "" {
		chans = append(chans, &notify.Email{Addr: c.SMTPAddr, From: c.EmailFrom, To: c.EmailTo})
	}
	cfg := &engine.AlertsConfig{Rules: c.Rules, Interval: c.Interval}
	if len(chans) > 0 {
		d := notify.New(notify.Config{Channels: chans, Logger: log, LinkBase: c.LinkBase,
			InitialBackoff: retryBase, MaxBackoff: retryMax})
		go d.Run(ctx)
		cfg.Notify = d.Notify
	}
	names := make([]string, len(chans))
	for i, ch := range chans {
		names[i] = ch.Name()
	}
	log.Info("alerts on", "channels", names)
	return cfg
}
