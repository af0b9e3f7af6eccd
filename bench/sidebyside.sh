#!/usr/bin/env bash
# sidebyside.sh: stint against River, and a stint build against the one before it, on the
# workloads of issue 15, interleaved: per round and workload each side runs once, one after
# the other, never two at once, so that a machine's drift spreads over all of them.
#
#   NEW=/tmp/stint-new OLD=/tmp/stint-old CMP=/tmp/cmp ROUNDS=3 OUT=/tmp/side.jsonl \
#     bash bench/sidebyside.sh
#
# NEW and OLD are `stint` binaries (OLD may be empty: no before/after rows), CMP the
# harness of bench/compare (`cd bench/compare && go build -o /tmp/cmp .`; empty: no River
# rows). PG is the PostgreSQL server (a scratch database per run is made on it). Each run
# appends one line to OUT: {"label", "round", "load" (the 1-minute load average before
# it), "result" (the run's --json object)}. Drain runs once more per store with --insert
# stream (label "stint STORE drain (stream)"). A run that fails appends "error": true instead
# (its stderr's tail goes to OUT.errors) and the script goes on. WORKLOADS narrows the workloads (default: all below).
set -euo pipefail

PG=${PG:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
NEW=${NEW:?NEW: the stint binary measured}
OLD=${OLD:-}
CMP=${CMP:-}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-/tmp/side.jsonl}
WORKLOADS=${WORKLOADS:-"drain steady scheduled cron exec"}

# one LABEL CMD...: runs CMD (which prints one JSON object) and appends its line to OUT.
one() {
  local label=$1 round=$2
  shift 2
  local load out
  load=$(cut -d' ' -f1 /proc/loadavg)
  echo "round $round $label (load $load)" >&2
  if out=$("$@" 2>/tmp/sidebyside.err); then
    printf '{"label":"%s","round":%d,"load":%s,"result":%s}\n' "$label" "$round" "$load" "$out" >>"$OUT"
  else
    printf '{"label":"%s","round":%d,"load":%s,"error":true}\n' "$label" "$round" "$load" >>"$OUT"
    { echo "== round $round $label"; tail -n 20 /tmp/sidebyside.err; } >>"$OUT.errors"
  fi
}

# sides WORKLOAD ROUND: River, then each stint build on PostgreSQL and on SQLite.
sides() {
  local w=$1 r=$2
  if [ -n "$CMP" ] && [ "$w" != cron ]; then one "river $w" "$r" "$CMP" river "$w" --json; fi
  for store in pg sqlite; do
    local url=$PG
    [ $store = sqlite ] && url=sqlite
    if [ -n "$OLD" ]; then one "stint-old $store $w" "$r" "$OLD" bench "$w" --store "$url" --json; fi
    one "stint $store $w" "$r" "$NEW" bench "$w" --store "$url" --json
    # drain again, inserting through streams of jobs (POST /v1/jobs/stream, the bulk path)
    # instead of batches.
    if [ "$w" = drain ]; then
      one "stint $store drain (stream)" "$r" "$NEW" bench drain --store "$url" --insert stream --json
    fi
  done
}

for r in $(seq 1 "$ROUNDS"); do
  for w in $WORKLOADS; do
    sides "$w" "$r"
  done
done
