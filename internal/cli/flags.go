package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stint-dev/stint/apitype"
)

// kvFlag is a repeatable KEY=VALUE flag collected into a map; a later key wins.
type kvFlag struct{ m map[string]string }

func (f *kvFlag) String() string {
	if f.m == nil {
		return ""
	}
	return pairs(f.m)
}

func (f *kvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return errors.New("want KEY=VALUE")
	}
	if f.m == nil {
		f.m = map[string]string{}
	}
	f.m[k] = v
	return nil
}

func (f *kvFlag) Type() string { return "key=value" }

// json returns the pairs as a JSON object, or nil when there are none.
func (f *kvFlag) json() (json.RawMessage, error) {
	if len(f.m) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(f.m)
	if err != nil {
		return nil, fmt.Errorf("encode args: %w", err)
	}
	return b, nil
}

// timeFlag is an RFC 3339 time.
type timeFlag struct{ t *time.Time }

func (f *timeFlag) String() string {
	if f.t == nil {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f *timeFlag) Set(s string) error {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return errors.New("want an RFC 3339 time such as 2030-01-02T15:04:05Z")
	}
	f.t = &t
	return nil
}

func (f *timeFlag) Type() string { return "time" }

// MemoryFlag is a flag's amount of memory, MB in MiB: "512" (a bare number is MiB),
// "512M", "512Mi", "2G", "2GiB", "1T". Every --memory flag of the binary is one: a job's
// need (stint submit) and a worker's offer (stint worker, stint dev).
type MemoryFlag struct{ MB int64 }

func (f *MemoryFlag) String() string { return strconv.FormatInt(f.MB, 10) }

func (f *MemoryFlag) Set(s string) error {
	num := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	unit := strings.ToLower(s[len(num):])
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return errors.New("want an amount of memory such as 512 (MiB), 512M or 2G")
	}
	switch unit {
	case "", "m", "mb", "mi", "mib":
	case "g", "gb", "gi", "gib":
		n *= 1024
	case "t", "tb", "ti", "tib":
		n *= 1024 * 1024
	default:
		return fmt.Errorf("unknown unit %q: want M or G", unit)
	}
	f.MB = n
	return nil
}

func (f *MemoryFlag) Type() string { return "size" }

// parseRate reads --rate: "N/DURATION" such as 100/1m, or "0" (no limit: rate 0).
func parseRate(s string) (*apitype.RateLimit, error) {
	if s == "0" {
		return &apitype.RateLimit{}, nil
	}
	n, per, ok := strings.Cut(s, "/")
	count, err1 := strconv.Atoi(n)
	d, err2 := time.ParseDuration(per)
	if !ok || err1 != nil || err2 != nil || count < 1 || d <= 0 {
		return nil, Usagef("--rate: want N/DURATION such as 100/1m, got %q", s)
	}
	return &apitype.RateLimit{Rate: count, Per: apitype.Duration(d)}, nil
}
