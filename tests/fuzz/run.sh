#!/bin/sh
# Build every libFuzzer target (tests/fuzz/fuzz_*.c) into build-fuzz/ and run each for a while.
#
#   tests/fuzz/run.sh [SECONDS] [TARGET...]     (default 30 s each, every target)
#   tests/fuzz/run.sh 600 jsonrpc glob          (longer, two targets)
#
# The library is compiled with coverage instrumentation (-fsanitize=fuzzer-no-link) and
# ASan+UBSan by the Makefile into build-fuzz/libcorral.a; src/mcp/jsonrpc.c (part of the
# corral binary, not of the library) likewise. Each target links against both.
#
# A target runs on a scratch copy of its committed corpus (tests/fuzz/corpus/<name>/, which
# includes regression-* reproducers of fixed bugs) with its dictionary
# (tests/fuzz/<name>.dict) when there is one. It passes when libFuzzer found no crash, leak,
# timeout (-timeout=10 per input) or excess memory (-rss_limit_mb=2048). A failure prints
# the reproducer's path; re-run it with build-fuzz/fuzz_<name> <path>.
#
# Environment: CC (a clang; default clang), FUZZ_BUILD (default build-fuzz), FUZZ_JOBS (make -j),
# FUZZ_PAR (targets run at once; default nproc).
# shellcheck disable=SC2086 # flag lists ($SAN, pkg-config output) are split on purpose
set -u

cd "$(dirname "$0")/../.." || exit 2
SECS=${1:-30}
[ $# -gt 0 ] && shift
case $SECS in
'' | *[!0-9]*)
	echo "usage: tests/fuzz/run.sh [SECONDS] [TARGET...]" >&2
	exit 2
	;;
esac
B=${FUZZ_BUILD:-build-fuzz}
FCC=${CC:-clang}
case $FCC in *clang*) ;; *) FCC=clang ;; esac # libFuzzer needs clang
PKGS="libseccomp jansson sqlite3 nettle"
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

if ! command -v "$FCC" >/dev/null 2>&1; then
	echo "fuzz: $FCC not found; install clang (and libclang-rt-dev for libFuzzer)" >&2
	exit 2
fi
if ! PKG_CFLAGS=$(pkg-config --cflags $PKGS) || ! PKG_LIBS=$(pkg-config --libs $PKGS); then
	echo "fuzz: pkg-config cannot find $PKGS; install their -dev packages" >&2
	exit 2
fi

echo "== building the instrumented library in $B/"
make -s -j"${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}" BUILD="$B" CC="$FCC" \
	CFLAGS="-g -O1 -fsanitize=fuzzer-no-link $SAN" \
	"$B/libcorral.a" "$B/src/mcp/jsonrpc.o" >/dev/null || {
	echo "fuzz: building the library failed" >&2
	exit 2
}

if [ $# -gt 0 ]; then
	TARGETS=$*
else
	TARGETS=$(for f in tests/fuzz/fuzz_*.c; do basename "$f" .c | sed 's/^fuzz_//'; done)
fi

# One target: build it, run it, print its result; the exit status says whether it passed.
fuzz_one() {
	t=$1
	src=tests/fuzz/fuzz_$t.c
	bin=$B/fuzz_$t
	if [ ! -f "$src" ]; then
		echo "fuzz_$t: FAIL (no $src)"
		return 1
	fi
	if ! $FCC -std=gnu11 -g -O1 -Wall -Wextra -fsanitize=fuzzer $SAN -D_GNU_SOURCE \
		-Iinclude -Isrc $PKG_CFLAGS "$src" "$B/src/mcp/jsonrpc.o" "$B/libcorral.a" \
		$PKG_LIBS -o "$bin" 2>"$B/fuzz_$t.build.log"; then
		echo "fuzz_$t: FAIL (does not build)"
		sed 's/^/    /' "$B/fuzz_$t.build.log"
		return 1
	fi

	# a scratch corpus: what libFuzzer adds stays out of the repository
	work=$B/work/$t
	rm -rf "$work"
	mkdir -p "$work/corpus" "$work/artifacts" "$work/tmp"
	if [ -d "tests/fuzz/corpus/$t" ]; then
		cp tests/fuzz/corpus/"$t"/* "$work/corpus/" 2>/dev/null
	fi
	set -- -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$work/artifacts/"
	[ -f "tests/fuzz/$t.dict" ] && set -- "$@" -dict="tests/fuzz/$t.dict"

	log=$work/log
	# TMPDIR: scratch files of a target (fuzz_violations' workspace) stay in $work, also
	# when a crash skips their cleanup
	case $work in /*) tmp=$work/tmp ;; *) tmp=$(pwd)/$work/tmp ;; esac
	TMPDIR=$tmp UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		"$bin" "$@" "$work/corpus" >"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | sed 's/cov: //')
	crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
	if [ $rc -eq 0 ] && [ -z "$crash" ]; then
		echo "fuzz_$t: PASS  execs ${execs:-?}  cov: ${cov:-?}  (${SECS}s)"
		return 0
	fi
	echo "fuzz_$t: FAIL (exit $rc)  execs ${execs:-?}  cov: ${cov:-?}"
	grep -m 1 -E '^==[0-9]+==ERROR|runtime error|ERROR: libFuzzer' "$log" |
		sed 's/^/    /'
	# the first frame in our code: the check that failed, or where it crashed
	grep -m 1 -E '^ +#[0-9]+ .* in .*(src|tests/fuzz)/[^ ]*:[0-9]+' "$log" |
		sed 's/^ *#[0-9]* 0x[0-9a-f]* in /    at /'
	echo "    reproducer: ${crash:-none written; see $log}"
	echo "    log: $log"
	return 1
}

# FUZZ_PAR targets at a time (default: one per CPU; each libFuzzer process uses one), in
# batches: every target runs for the same time. Results are printed in the targets' order.
PAR=${FUZZ_PAR:-$(nproc 2>/dev/null || echo 1)}
case $PAR in '' | *[!0-9]* | 0) PAR=1 ;; esac
mkdir -p "$B/work"
pass=0
fail=0
batch="" # "target:pid" of the running batch
flush() {
	for bt in $batch; do
		if wait "${bt#*:}"; then
			pass=$((pass + 1))
		else
			fail=$((fail + 1))
		fi
		cat "$B/work/${bt%%:*}.result"
	done
	batch=""
}
n=0
for t in $TARGETS; do
	fuzz_one "$t" >"$B/work/$t.result" 2>&1 &
	batch="$batch $t:$!"
	n=$((n + 1))
	[ $((n % PAR)) -ne 0 ] || flush
done
flush
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
