#!/bin/sh
# release.sh builds the release binaries of stint: static (CGO_ENABLED=0), -trimpath, with the
# version, commit and build date linked into internal/version, one per target, into $DIST
# with their SHA-256 sums in $DIST/SHA256SUMS. `make release VERSION=v0.1.0` runs it;
# docs/release.md describes the whole release.
#
#   VERSION  the release, vMAJOR.MINOR.PATCH with an optional -suffix (required)
#   TARGETS  GOOS/GOARCH pairs (default: linux and darwin on amd64 and arm64)
#   DIST     where the binaries go (default: dist); emptied first
#   COMMIT   the commit linked in (default: git rev-parse HEAD)
#   DATE     the build date linked in (default: the commit's time in UTC, so two builds
#            of one commit are the same bytes)
#
# release.sh --targets prints the default targets; --dry-run prints the commands only.
set -eu

DEFAULT_TARGETS="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"
PKG=github.com/stint-dev/stint/internal/version

dry=
case "${1:-}" in
--targets) echo "$DEFAULT_TARGETS"; exit 0 ;;
--dry-run) dry=echo ;;
"") ;;
*) echo "release.sh: unknown argument $1 (want --targets or --dry-run)" >&2; exit 2 ;;
esac

VERSION=${VERSION:-}
if ! echo "$VERSION" | grep -Eq '^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$'; then
	echo "release.sh: VERSION=\"$VERSION\" is not a release version: give VERSION=vMAJOR.MINOR.PATCH, e.g. make release VERSION=v0.1.0" >&2
	exit 2
fi
TARGETS=${TARGETS:-$DEFAULT_TARGETS}
DIST=${DIST:-dist}
COMMIT=${COMMIT:-$(git rev-parse HEAD)}
DATE=${DATE:-$(TZ=UTC git show -s --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ "$COMMIT")}
LDFLAGS="-s -w -X $PKG.Version=$VERSION -X $PKG.Commit=$COMMIT -X $PKG.Date=$DATE"

if [ -z "$dry" ] && [ -n "$(git status --porcelain 2>/dev/null)" ]; then
	echo "release.sh: warning: the work tree has changes; the binaries are not the commit $COMMIT" >&2
fi

$dry rm -rf "$DIST"
$dry mkdir -p "$DIST"
for t in $TARGETS; do
	os=${t%/*}
	arch=${t#*/}
	out="$DIST/stint-$VERSION-$os-$arch"
	$dry env CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" go build -trimpath -ldflags "$LDFLAGS" -o "$out" ./cmd/stint
	# The binary this machine can run must say the version it was given.
	if [ -z "$dry" ] && [ "$os/$arch" = "$(go env GOOS)/$(go env GOARCH)" ]; then
		got=$("$out" version --json | sed -n 's/^  "version": "\(.*\)",$/\1/p')
		if [ "$got" != "$VERSION" ]; then
			echo "release.sh: $out says version \"$got\", want $VERSION: is $PKG.Version still the variable?" >&2
			exit 1
		fi
	fi
done
if [ -z "$dry" ]; then
	# Names relative to $DIST, so `sha256sum -c SHA256SUMS` checks them there.
	(cd "$DIST" && if command -v sha256sum >/dev/null; then sha256sum stint-*; else shasum -a 256 stint-*; fi) >"$DIST/SHA256SUMS"
	cat "$DIST/SHA256SUMS"
fi
