// Package version names the build a binary was made from: the release, the commit and
// the Go toolchain.
package version

import (
	"runtime"
	"runtime/debug"
)

// Version is the release, "dev" unless the build sets it:
//
//	go build -ldflags "-X github.com/stint-dev/stint/internal/version.Version=v1.2.0" ./cmd/stint
var Version = "dev"

// Build describes the running binary.
type Build struct {
	Version   string
	Commit    string // the VCS revision, with "-dirty" when the tree was modified; "unknown" without VCS stamping
	GoVersion string
}

// Get returns the running binary's build, from Version and the build info Go embeds.
func Get() Build {
	b := Build{Version: Version, Commit: "unknown", GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	return fromInfo(b, info)
}

// fromInfo completes b with the VCS settings of info.
func fromInfo(b Build, info *debug.BuildInfo) Build {
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && b.Commit != "unknown" {
		b.Commit += "-dirty"
	}
	return b
}
