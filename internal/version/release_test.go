package version

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// releaseScript is scripts/release.sh, run from the module's root.
func releaseScript(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("scripts/release.sh", args...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "release.sh %v:\n%s", args, out)
	return string(out)
}

// TestReleaseCommands: the release builds the four targets, each static and trimmed, and
// links exactly this package's Version, Commit and Date (a -X naming a variable that does
// not exist is silently ignored by the linker).
func TestReleaseCommands(t *testing.T) {
	t.Parallel()
	require.Equal(t, "linux/amd64 linux/arm64 darwin/amd64 darwin/arm64\n", releaseScript(t, nil, "--targets"))

	out := releaseScript(t, []string{"VERSION=v1.2.3", "COMMIT=abc", "DATE=2030-01-02T03:04:05Z"}, "--dry-run")
	var builds []string
	for line := range strings.Lines(out) {
		if strings.Contains(line, "go build") {
			builds = append(builds, line)
		}
	}
	require.Len(t, builds, 4, out)
	pkg := reflect.TypeFor[Build]().PkgPath()
	set := regexp.MustCompile(`-X (\S+)\.(\w+)=(\S+)`)
	for i, target := range []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"} {
		b := builds[i]
		os, arch, _ := strings.Cut(target, "/")
		require.Contains(t, b, "CGO_ENABLED=0 GOOS="+os+" GOARCH="+arch+" go build -trimpath ", "static and trimmed")
		require.Contains(t, b, "-o dist/stint-v1.2.3-"+os+"-"+arch+" ./cmd/stint")
		got := map[string]string{}
		for _, m := range set.FindAllStringSubmatch(b, -1) {
			require.Equal(t, pkg, m[1], "-X names a variable of %s", pkg)
			got[m[2]] = m[3]
		}
		require.Equal(t, map[string]string{"Version": "v1.2.3", "Commit": "abc", "Date": "2030-01-02T03:04:05Z"}, got)
	}
}

// TestReleaseBuild runs the release for this machine's target and checks the binary: its
// version, its checksum and (on Linux) that it is static. It builds stint from scratch with
// other flags than the tests, minutes on a busy machine, so it runs when
// STINT_TEST_RELEASE=1.
func TestReleaseBuild(t *testing.T) {
	if os.Getenv("STINT_TEST_RELEASE") != "1" {
		t.Skip("set STINT_TEST_RELEASE=1 to build a release binary (slow)")
	}
	dist := t.TempDir()
	target := runtime.GOOS + "/" + runtime.GOARCH
	releaseScript(t, []string{"VERSION=v0.0.0-test", "TARGETS=" + target, "DIST=" + dist})

	name := "stint-v0.0.0-test-" + runtime.GOOS + "-" + runtime.GOARCH
	bin := filepath.Join(dist, name)
	out, err := exec.Command(bin, "version", "--json").Output()
	require.NoError(t, err)
	var v struct{ Version, Commit, Date string }
	require.NoError(t, json.Unmarshal(out, &v))
	require.Equal(t, "v0.0.0-test", v.Version)
	require.Regexp(t, `^[0-9a-f]{40}$`, v.Commit)
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, v.Date)

	data, err := os.ReadFile(bin)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	require.NoError(t, err)
	require.Equal(t, hex.EncodeToString(sum[:])+"  "+name+"\n", string(sums))

	if runtime.GOOS == "linux" {
		f, err := elf.Open(bin)
		require.NoError(t, err)
		defer f.Close()
		libs, err := f.ImportedLibraries()
		require.NoError(t, err)
		require.Empty(t, libs, "a static binary needs no shared library")
		require.False(t, slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }), "no dynamic loader")
	}
}
