#!/usr/bin/env bash
# corral's benchmark harness (issue 9). Regenerates docs/benchmarks.md and
# docs/bench-launch.png from a real run on this machine; `make bench` calls it.
#   bench/deps.sh && bench/run.sh
# Environment:
#   CORRAL=PATH           the corral binary (default: build/corral, built here with make)
#   BENCH_QUICK=1         fewer runs, for checking the harness itself (~1 minute)
#   BENCH_WAIT_QUIET=S    wait up to S seconds for the CPUs to be idle before each part
#   BENCH_RETRIES=N       rerun a part that shared the CPUs with >15% foreign load (default 2)
#   CORRAL_MCP_CMD=CMD    drive another MCP server (e.g. "python3 bench/mock_mcp.py")
#   BENCH_ONLY="launch server memory flood"   run only these parts (the report is still
#                         written from the results found in bench/results/)
set -euo pipefail
BENCH="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$BENCH")"
cd "$BENCH"
start=$(date +%s)

if [ -z "${CORRAL:-}" ]; then
	make -C "$ROOT" -s build/corral
	export CORRAL="$ROOT/build/corral"
fi
for t in python3 hyperfine gnuplot; do
	command -v "$t" >/dev/null || { echo "run.sh: $t is missing; run bench/deps.sh" >&2; exit 1; }
done
[ -x "$CORRAL" ] || { echo "run.sh: $CORRAL is not executable" >&2; exit 1; }

# A fresh workspace for every sandbox; results next to the scripts.
tmp="$(mktemp -d /tmp/corral-bench.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
# Benchmark a copy, so that a rebuild during the run cannot swap the binary under test.
mkdir -p "$tmp/bin"
cp "$CORRAL" "$tmp/bin/corral"
# The kernel's floor for a launch with a fresh set of namespaces (bench/nsfloor.c).
cc -O2 -Wall -Wextra -Werror -o "$tmp/bin/nsfloor" "$BENCH/nsfloor.c"
export BENCH_NSFLOOR="$tmp/bin/nsfloor"
# The floor of an MCP server's call: JSON-RPC on stdio and posix_spawn, no isolation.
cc -O2 -Wall -Wextra -Werror -o "$tmp/bin/mcpfloor" "$BENCH/mcpfloor.c" -ljansson
export BENCH_MCPFLOOR="$tmp/bin/mcpfloor"
# What this machine charges for a system call, a page fault, fork and spawn (bench/machine.c).
cc -O2 -Wall -Wextra -Werror -o "$tmp/bin/machine" "$BENCH/machine.c"
export CORRAL_SOURCE="$CORRAL" CORRAL="$tmp/bin/corral"
export BENCH_WORKSPACE="$tmp/ws"
# corral's audit store (SQLite) starts empty for every run and never touches the user's own.
export XDG_STATE_HOME="$tmp/state"
mkdir -p "$XDG_STATE_HOME"
mkdir -p "$BENCH_WORKSPACE"
export BENCH_RESULTS="$BENCH/results"
mkdir -p "$BENCH_RESULTS"

parts="${BENCH_ONLY:-launch server memory flood}"
python3 "$BENCH/quiet.py" before
"$tmp/bin/machine" >"$BENCH_RESULTS/machine.json" || rm -f "$BENCH_RESULTS/machine.json"
# Each part runs under a monitor of the CPU that other users' processes take meanwhile; on a
# shared 2-core machine a part that ran alongside more than 15% of foreign load is run again
# (up to BENCH_RETRIES times, default 2), after waiting for quiet when BENCH_WAIT_QUIET is set.
export BENCH_ROOT_PID=$$
failed=()
for part in $parts; do
	rm -f "$BENCH_RESULTS/$part.json"
	for try in $(seq 0 "${BENCH_RETRIES:-2}"); do
		echo "== $part" >&2
		if [ -n "${BENCH_WAIT_QUIET:-}" ]; then python3 "$BENCH/quiet.py" wait; fi
		python3 "$BENCH/quiet.py" monitor "$part" >"$tmp/monitor" &
		mon=$!
		ok=1
		python3 "$BENCH/$part.py" || ok=0
		kill -TERM "$mon"
		wait "$mon" || true
		others=$(cat "$tmp/monitor" 2>/dev/null || echo 0)
		if [ "$ok" = 0 ]; then failed+=("$part"); break; fi
		if [ "${others:-0}" -le 15 ]; then break; fi
		echo "run.sh: other processes took ${others}% of the CPUs during $part" >&2
	done
done
python3 "$BENCH/quiet.py" after
export BENCH_ELAPSED=$(( $(date +%s) - start ))
python3 "$BENCH/report.py"
echo "run.sh: done in ${BENCH_ELAPSED}s; see docs/benchmarks.md" >&2
if [ "${#failed[@]}" -gt 0 ]; then
	echo "run.sh: these parts failed: ${failed[*]}" >&2
	exit 1
fi
