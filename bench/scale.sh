#!/usr/bin/env bash
# bench/scale.sh: the cost of scale (issue 15; BENCHMARKS.md, "Cost of scale"), one command
# for the whole matrix.
#
#   bench/scale.sh STINT_BINARY POSTGRES_URL [OUT]
#
# Runs, ROUNDS times each, interleaved by round (round 1 runs every configuration once,
# then round 2...), each a fresh scratch database on the PostgreSQL server of POSTGRES_URL:
#
#   drain and steady, --servers S --workers WORKERS, for each S of SERVERS (1 2 3);
#   drain and steady, --servers 1, over a store seeded with SEED finished runs;
#   drain and steady, the same, with the server's retention deleting that history
#     (--retain-runs RETAIN, no run kept per job, 500 runs per batch every 100 ms);
#   agents: AGENTS simulated workers on one server, for memory per connected worker.
#
# Every run is `stint bench WORKLOAD --store POSTGRES_URL --json`: its result, one JSON line,
# is appended to OUT (default scale-DATE.jsonl in the current directory). At the end the
# script prints `stint bench summarize OUT` (median [min..max] of the rounds, per
# configuration and figure, as Markdown tables) and writes it to OUT.md. A run that fails
# is reported on stderr and the matrix goes on; the script then exits 1.
#
# Settings, from the environment (defaults: the figures of BENCHMARKS.md):
#   ROUNDS=3  N=100000 (drain's jobs)  DURATION=30s (steady's)  SERVERS="1 2 3"  WORKERS=3
#   SEED=1000000 (finished runs)  RETAIN=10m  AGENTS=2000  AGENTS_DURATION=60s
#
# RETAIN must be shorter than the seeded history's age (its runs finished an hour or more
# before the bench) and longer than a workload takes to read its own runs back after its
# window: with --retain-runs 1s the server would delete the workload's runs before the bench
# counts them. Without SEED, retention would have no history to delete.
#
# A full matrix takes about 35 minutes on the 2-core machine of BENCHMARKS.md (seeding a
# million runs is 25-85 s of each of the 4 seeded runs a round). A quick check of the
# script itself:
#
#   ROUNDS=1 N=300 DURATION=2s SEED=3000 AGENTS=20 AGENTS_DURATION=2s \
#     bench/scale.sh /tmp/stint "$PG" /tmp/scale-smoke.jsonl
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
	echo "usage: $0 STINT_BINARY POSTGRES_URL [OUT]" >&2
	exit 2
fi
bin=$1
pg=$2
out=${3:-scale-$(date -u +%Y%m%dT%H%M%SZ).jsonl}
if [[ ! -x $bin ]]; then
	echo "$0: STINT_BINARY $bin: not an executable" >&2
	exit 2
fi
case $pg in
postgres://* | postgresql://*) ;;
*)
	echo "$0: POSTGRES_URL: want a postgres:// URL, got $pg" >&2
	exit 2
	;;
esac

rounds=${ROUNDS:-3}
n=${N:-100000}
duration=${DURATION:-30s}
servers=${SERVERS:-1 2 3}
workers=${WORKERS:-3}
seed=${SEED:-1000000}
retain=${RETAIN:-10m}
agents=${AGENTS:-2000}
agents_duration=${AGENTS_DURATION:-60s}

# The configurations of one round, one a line: the workload and its flags.
configs=()
for s in $servers; do
	configs+=("drain --servers $s --workers $workers --n $n")
	configs+=("steady --servers $s --workers $workers --duration $duration")
done
configs+=(
	"drain --servers 1 --workers $workers --n $n --seed-finished $seed"
	"steady --servers 1 --workers $workers --duration $duration --seed-finished $seed"
	"drain --servers 1 --workers $workers --n $n --seed-finished $seed --retain-runs $retain"
	"steady --servers 1 --workers $workers --duration $duration --seed-finished $seed --retain-runs $retain"
	"agents --servers 1 --agents $agents --duration $agents_duration"
)

failed=0
for ((round = 1; round <= rounds; round++)); do
	for c in "${configs[@]}"; do
		read -r -a args <<<"$c"
		echo "$(date -u +%H:%M:%S) round $round/$rounds: bench $c (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
		if ! "$bin" bench "${args[@]}" --store "$pg" --json >>"$out"; then
			echo "$(date -u +%H:%M:%S) round $round/$rounds: bench $c FAILED" >&2
			failed=$((failed + 1))
		fi
	done
done

"$bin" bench summarize "$out" | tee "$out.md"
if ((failed > 0)); then
	echo "$0: $failed runs failed; their configurations have fewer runs in $out" >&2
	exit 1
fi
