// Package version names the build a binary was made from: the release, the commit, the
// build date and the Go toolchain.
package version

import (
	"runtime"
	"runtime/debug"

	"github.com/stint-dev/stint/apitype"
)

// The release build sets these with -ldflags "-X github.com/stint-dev/stint/internal/version.Version=v0.1.0"
// (and .Commit, .Date); see the Makefile. Unset, Get falls back to what Go stamps itself.
var (
	Version = "dev" // the release, e.g. v0.1.0
	Commit  = ""    // the VCS revision
	Date    = ""    // when it was built (RFC 3339)
)

// Build describes the running binary.
type Build struct {
	Version   string
	Commit    string // the VCS revision, with "-dirty" when the tree was modified; "unknown" without VCS stamping
	Date      string // the build date set by the release, else the commit's time; "" when neither is known
	GoVersion string
}

// Wire is b as GET /v1/version and `stint version --json` show it, with the newest store
// schema version the binary knows.
func (b Build) Wire(schema int) apitype.Version {
	return apitype.Version{Version: b.Version, Commit: b.Commit, Date: b.Date, GoVersion: b.GoVersion, Schema: schema}
}

// Get returns the running binary's build: the variables the linker set, completed by the
// VCS settings Go embeds in a binary built from a checkout.
func Get() Build {
	b := Build{Version: Version, Commit: Commit, Date: Date, GoVersion: runtime.Version()}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	return fromInfo(b, info)
}

// fromInfo fills what b lacks (Commit "unknown", Date "") from the VCS settings of info.
func fromInfo(b Build, info *debug.BuildInfo) Build {
	var rev, at string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if b.Commit == "unknown" && rev != "" {
		b.Commit = rev
		if dirty {
			b.Commit += "-dirty"
		}
	}
	if b.Date == "" {
		b.Date = at
	}
	return b
}
