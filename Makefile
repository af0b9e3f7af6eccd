# Builds, tests and releases stint. The release itself is scripts/release.sh; docs/release.md
# describes the steps around it.

VERSION ?=
GO ?= go

.PHONY: build test release clean

# build: a stint binary for this machine, as the release builds it (version "dev").
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o stint ./cmd/stint

# test: every test, as the README says (PostgreSQL suites run when STINT_TEST_DATABASE_URL is set).
# A plain go test ./... prints only "ok" for a package that passes, whatever its tests print;
# the store's test helper (pgtest) tells a terminal, and this target says it in any case.
PGSKIP = [ -n "$$STINT_TEST_DATABASE_URL" ] || echo "make test: PostgreSQL suites skipped: STINT_TEST_DATABASE_URL not set"
test:
	@$(PGSKIP)
	$(GO) test ./...
	@$(PGSKIP)

# release: static binaries for linux and darwin on amd64 and arm64, and SHA256SUMS, in dist/.
release:
	VERSION=$(VERSION) scripts/release.sh

clean:
	rm -rf dist stint
