#!/bin/sh
# Checks the systemd units with systemd-analyze verify, which prints what it cannot parse
# but still exits 0: any output is a failure. Units name /usr/local/bin/stint and
# /etc/stint/*.env, which verify requires to exist, so they are checked as copies pointing
# at a stint binary built here and at the example environment files.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
command -v systemd-analyze >/dev/null || { echo "verify-systemd: systemd-analyze not found" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$here/.." && CGO_ENABLED=0 go build -o "$tmp/stint" ./cmd/stint)
for u in server worker; do
	sed -e "s#/usr/local/bin/stint#$tmp/stint#" -e "s#/etc/stint/$u.env#$here/systemd/$u.env.example#" \
		"$here/systemd/stint-$u.service" >"$tmp/stint-$u.service"
done
out=$(systemd-analyze verify "$tmp/stint-server.service" "$tmp/stint-worker.service" 2>&1) || true
if [ -n "$out" ]; then
	echo "$out" >&2
	exit 1
fi
echo "verify-systemd: stint-server.service and stint-worker.service ok"
