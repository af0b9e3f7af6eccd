package app

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/stint-dev/stint/internal/api"
	"github.com/stint-dev/stint/internal/model"
)

// HTTPLimits are the HTTP server's timeouts and connection caps. A zero field takes its
// default (DefaultHTTPLimits); a negative one turns it off.
type HTTPLimits struct {
	// ReadHeaderTimeout: a request's header must arrive within it (slowloris).
	ReadHeaderTimeout time.Duration
	// ReadTimeout: a request, body included, must arrive within it.
	ReadTimeout time.Duration
	// WriteTimeout: an answer must be written within it of the request, except that the
	// long poll and followed logs give each of their writes this long (see the api package).
	WriteTimeout time.Duration
	// IdleTimeout: a keep-alive connection with no request for this long is closed.
	IdleTimeout time.Duration
	// MaxConns caps the open connections; more are closed when accepted.
	MaxConns int
	// MaxPendingPerIP caps one address's connections that have not sent a request header yet.
	MaxPendingPerIP int
}

// DefaultHTTPLimits are the HTTP server's defaults.
func DefaultHTTPLimits() HTTPLimits {
	return HTTPLimits{
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxConns:          10000,
		MaxPendingPerIP:   256,
	}
}

// resolved is h with its zero fields defaulted and its negative ones zero (off), as
// http.Server and connGuard take them.
func (h HTTPLimits) resolved() HTTPLimits {
	d := DefaultHTTPLimits()
	dur := func(v, def time.Duration) time.Duration {
		switch {
		case v == 0:
			return def
		case v < 0:
			return 0
		}
		return v
	}
	n := func(v, def int) int {
		switch {
		case v == 0:
			return def
		case v < 0:
			return 0
		}
		return v
	}
	return HTTPLimits{
		ReadHeaderTimeout: dur(h.ReadHeaderTimeout, d.ReadHeaderTimeout),
		ReadTimeout:       dur(h.ReadTimeout, d.ReadTimeout),
		WriteTimeout:      dur(h.WriteTimeout, d.WriteTimeout),
		IdleTimeout:       dur(h.IdleTimeout, d.IdleTimeout),
		MaxConns:          n(h.MaxConns, d.MaxConns),
		MaxPendingPerIP:   n(h.MaxPendingPerIP, d.MaxPendingPerIP),
	}
}

// DefaultSubmitRate is the flag default of --submit-rate: per client, generous enough for
// any one program submitting jobs one by one, a cap on one that floods.
const DefaultSubmitRate = "1000/1s"

// limitFlags are the flags of the server's limits (docs/limits.md lists them).
type limitFlags struct {
	body, batchBody, logBody, logBytes byteSize
	streamBody                         byteSize
	spec, command, shell, args, env    byteSize
	batchJobs, dagRuns, pageSize       int
	readHeader, read, write, idle      time.Duration
	maxConns, maxPending               int
	submitRate                         string
}

func (f *limitFlags) register(fl *pflag.FlagSet) {
	lim, h := api.DefaultLimits(), DefaultHTTPLimits()
	f.body, f.batchBody, f.logBody, f.logBytes = byteSize(lim.MaxBodyBytes), byteSize(lim.MaxBatchBodyBytes),
		byteSize(lim.MaxLogBodyBytes), byteSize(lim.MaxLogBytes)
	f.streamBody = byteSize(lim.MaxStreamBodyBytes)
	f.spec, f.command, f.shell, f.args, f.env = byteSize(lim.MaxSpecBytes), byteSize(lim.MaxCommandBytes),
		byteSize(lim.MaxShellBytes), byteSize(lim.MaxArgsBytes), byteSize(lim.MaxEnvBytes)

	f.sizeFlag(fl, &f.body, "max-body", "request body, except the routes below (413)")
	f.sizeFlag(fl, &f.batchBody, "max-batch-body", "body of POST /v1/jobs/batch and POST /v1/dags (413)")
	f.sizeFlag(fl, &f.logBody, "max-log-body", "body of a worker's POST /v1/attempts/logs (413)")
	f.sizeFlag(fl, &f.streamBody, "max-stream-body", "body of POST /v1/jobs/stream: the stream stops there, what it committed kept")
	f.sizeFlag(fl, &f.logBytes, "max-log-bytes", "output stored per attempt; the rest is dropped")
	f.sizeFlag(fl, &f.spec, "max-spec-bytes", "a job spec's strings together (400)")
	f.sizeFlag(fl, &f.command, "max-command-bytes", "a job's command argv, each argument plus one (400)")
	f.sizeFlag(fl, &f.shell, "max-shell-bytes", "a job's shell script (400)")
	f.sizeFlag(fl, &f.args, "max-args-bytes", "a run's args, from a spec, trigger, webhook or pipeline (400)")
	f.sizeFlag(fl, &f.env, "max-env-bytes", "a job's env, each entry key and value plus two (400)")
	f.intFlag(fl, &f.batchJobs, lim.MaxBatchJobs, "max-batch-jobs", "entries of POST /v1/jobs/batch (400)")
	f.intFlag(fl, &f.dagRuns, lim.MaxDAGRuns, "max-dag-runs", "runs of POST /v1/dags (400)")
	f.intFlag(fl, &f.pageSize, lim.MaxPageSize, "max-page-size", "largest ?limit= of a list (400)")
	f.durFlag(fl, &f.readHeader, h.ReadHeaderTimeout, "read-header-timeout", "a request's header must arrive within this (0: no limit)")
	f.durFlag(fl, &f.read, h.ReadTimeout, "read-timeout", "a whole request must arrive within this (0: no limit)")
	f.durFlag(fl, &f.write, h.WriteTimeout, "write-timeout", "an answer must be written within this; long polls and followed logs per write (0: no limit)")
	f.durFlag(fl, &f.idle, h.IdleTimeout, "idle-timeout", "an idle keep-alive connection is closed after this (0: no limit)")
	f.intFlag(fl, &f.maxConns, h.MaxConns, "max-conns", "open connections at most; more are closed at once (0: no cap)")
	f.intFlag(fl, &f.maxPending, h.MaxPendingPerIP, "max-pending-per-ip",
		"connections from one address still sending their first request header (slowloris; 0: no cap)")
	f.submitRate = DefaultSubmitRate
	fl.StringVar(&f.submitRate, "submit-rate", DefaultSubmitRate,
		`submissions per client (bearer token, else address): "N/DURATION", over it a 429 ("0": no limit)`)
}

func (f *limitFlags) sizeFlag(fl *pflag.FlagSet, v *byteSize, name, usage string) {
	fl.Var(v, name, fmt.Sprintf("limit: %s, in bytes or with KiB, MiB, GiB", usage))
}

func (f *limitFlags) intFlag(fl *pflag.FlagSet, v *int, def int, name, usage string) {
	fl.IntVar(v, name, def, "limit: "+usage)
}

func (f *limitFlags) durFlag(fl *pflag.FlagSet, v *time.Duration, def time.Duration, name, usage string) {
	fl.DurationVar(v, name, def, usage)
}

// config checks the flags and returns the limits they set.
func (f *limitFlags) config() (api.Limits, HTTPLimits, *model.RateLimit, error) {
	for _, s := range []struct {
		name string
		v    byteSize
	}{{"max-body", f.body}, {"max-batch-body", f.batchBody}, {"max-log-body", f.logBody}, {"max-log-bytes", f.logBytes},
		{"max-stream-body", f.streamBody},
		{"max-spec-bytes", f.spec}, {"max-command-bytes", f.command}, {"max-shell-bytes", f.shell},
		{"max-args-bytes", f.args}, {"max-env-bytes", f.env}} {
		if s.v < 1 {
			return api.Limits{}, HTTPLimits{}, nil, fmt.Errorf("--%s: must be at least 1 byte", s.name)
		}
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"max-batch-jobs", f.batchJobs}, {"max-dag-runs", f.dagRuns}, {"max-page-size", f.pageSize}} {
		if c.v < 1 {
			return api.Limits{}, HTTPLimits{}, nil, fmt.Errorf("--%s: must be at least 1, got %d", c.name, c.v)
		}
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"max-conns", f.maxConns}, {"max-pending-per-ip", f.maxPending}} {
		if c.v < 0 {
			return api.Limits{}, HTTPLimits{}, nil, fmt.Errorf("--%s: must not be negative (0: no cap), got %d", c.name, c.v)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"read-header-timeout", f.readHeader}, {"read-timeout", f.read}, {"write-timeout", f.write}, {"idle-timeout", f.idle}} {
		if d.v < 0 {
			return api.Limits{}, HTTPLimits{}, nil, fmt.Errorf("--%s: must not be negative (0: no limit), got %s", d.name, d.v)
		}
	}
	rate, err := parseRate(f.submitRate)
	if err != nil {
		return api.Limits{}, HTTPLimits{}, nil, fmt.Errorf("--submit-rate: %w", err)
	}
	lim := api.Limits{
		MaxBodyBytes: int64(f.body), MaxBatchBodyBytes: int64(f.batchBody), MaxLogBodyBytes: int64(f.logBody),
		MaxStreamBodyBytes: int64(f.streamBody),
		MaxLogBytes:        int64(f.logBytes), MaxSpecBytes: int(f.spec), MaxCommandBytes: int(f.command),
		MaxShellBytes: int(f.shell), MaxArgsBytes: int(f.args), MaxEnvBytes: int(f.env),
		MaxBatchJobs: f.batchJobs, MaxDAGRuns: f.dagRuns, MaxPageSize: f.pageSize,
	}
	off := func(d time.Duration) time.Duration { // a flag's 0 is "no limit", HTTPLimits' is the default
		if d == 0 {
			return -1
		}
		return d
	}
	offN := func(n int) int {
		if n == 0 {
			return -1
		}
		return n
	}
	h := HTTPLimits{ReadHeaderTimeout: off(f.readHeader), ReadTimeout: off(f.read), WriteTimeout: off(f.write),
		IdleTimeout: off(f.idle), MaxConns: offN(f.maxConns), MaxPendingPerIP: offN(f.maxPending)}
	return lim, h, rate, nil
}

// parseRate reads "N/DURATION" ("0": none).
func parseRate(s string) (*model.RateLimit, error) {
	s = strings.TrimSpace(s)
	if s == "0" || s == "" {
		return nil, nil
	}
	n, per, ok := strings.Cut(s, "/")
	rate, err := strconv.Atoi(strings.TrimSpace(n))
	if !ok || err != nil || rate < 1 {
		return nil, fmt.Errorf("want N/DURATION such as 1000/1s, or 0 for none: got %q", s)
	}
	d, err := time.ParseDuration(strings.TrimSpace(per))
	if err != nil || d <= 0 {
		return nil, fmt.Errorf("want N/DURATION such as 1000/1s, or 0 for none: got %q", s)
	}
	return &model.RateLimit{Rate: rate, Per: d}, nil
}

// byteSize is a flag of a number of bytes: 1048576, 1024KiB, 1MiB, 1GiB (also K, KB, M, MB,
// G, GB, all powers of 1024).
type byteSize int64

func (b *byteSize) String() string {
	v := int64(*b)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v >= u.n && v%u.n == 0 {
			return strconv.FormatInt(v/u.n, 10) + u.suffix
		}
	}
	return strconv.FormatInt(v, 10)
}

func (b *byteSize) Set(s string) error {
	t := strings.TrimSpace(s)
	mult := int64(1)
	upper := strings.ToUpper(t)
	for _, u := range []struct {
		suffixes []string
		n        int64
	}{{[]string{"GIB", "GB", "G"}, 1 << 30}, {[]string{"MIB", "MB", "M"}, 1 << 20}, {[]string{"KIB", "KB", "K"}, 1 << 10}, {[]string{"B"}, 1}} {
		found := false
		for _, suf := range u.suffixes {
			if strings.HasSuffix(upper, suf) {
				t, mult, found = strings.TrimSpace(t[:len(t)-len(suf)]), u.n, true
				break
			}
		}
		if found {
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("%q is not a size such as 65536, 64KiB or 1MiB", s)
	}
	*b = byteSize(n * mult)
	return nil
}

func (b *byteSize) Type() string { return "size" }
