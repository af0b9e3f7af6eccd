package apitype

// Version is the build of a stint binary: GET /v1/version answers the server's, and
// `stint version --json` prints the CLI's.
type Version struct {
	Version   string `json:"version"`    // the release, "dev" for a build outside the release process
	Commit    string `json:"commit"`     // the VCS revision, "unknown" when not stamped
	Date      string `json:"date"`       // when it was built (RFC 3339), "" when unknown
	GoVersion string `json:"go_version"` // the Go toolchain that built it
	Schema    int    `json:"schema"`     // the newest store schema version the binary knows
}
