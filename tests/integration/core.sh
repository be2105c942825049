# Core: launch, supervision, limits, result and CLI behaviour (issue: core).

test_core_exit_status_passthrough() {
	cr -- sh -c 'exit 3'; assert_eq $? 3
	cr -- true; assert_eq $? 0
	cr -- false; assert_eq $? 1
}

test_core_exit_not_found_127() {
	local err
	err=$(cr -- no-such-command-xyz 2>&1 >/dev/null); assert_eq $? 127
	assert_contains "$err" "no-such-command-xyz"
	assert_contains "$err" "not found"
}

test_core_exit_not_executable_126() {
	printf 'data\n' >"$WS/notexec"; chmod 644 "$WS/notexec"
	cr -- ./notexec 2>/dev/null; assert_eq $? 126
	cr -- /etc/passwd 2>/dev/null; assert_eq $? 126
}

test_core_exit_signal_128_plus_n() {
	cr -- sh -c 'kill -KILL $$'; assert_eq $? 137
	cr -- sh -c 'kill -TERM $$'; assert_eq $? 143
	local out
	out=$(cr --json -- sh -c 'kill -SEGV $$')
	assert_eq "$(jget signal <<<"$out")" 11
	assert_eq "$(jget signal_name <<<"$out")" SEGV
	assert_eq "$(jget exit_code <<<"$out")" null
}

test_core_shell_string_and_argv() {
	local out
	out=$(cr -c 'echo "a b" | tr a-z A-Z')
	assert_eq "$out" "A B"
	out=$(cr -- printf '%s|' 'x y' z)
	assert_eq "$out" "x y|z|"
	out=$(cr --json -c 'true')
	assert_eq "$(jget command <<<"$out")" "true"
	assert_eq "$(jget argv.0 <<<"$out")" "/bin/sh"
}

test_core_stdout_stderr_separate() {
	local out
	out=$(cr --json -c 'echo to-out; echo to-err >&2')
	python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["stdout"]=="to-out\n" and d["stderr"]=="to-err\n", d' <<<"$out" || fail "streams mixed"
	# live passthrough keeps the streams apart too
	local so se
	so=$(cr -c 'echo A; echo B >&2' 2>"$WS/.err")
	se=$(cat "$WS/.err")
	assert_eq "$so" A
	assert_eq "$se" B
}

test_core_timeout_kills_setsid_daemon() {
	local mark="corral-daemon-$RANDOM$RANDOM" start end
	start=$(date +%s%N)
	cr -t 0.5 --kill-after 0.2 -- bash -c "setsid bash -c 'exec -a $mark-a sleep 300' & (setsid bash -c 'exec -a $mark-b sleep 301' &) ; exec -a $mark sleep 302" 2>/dev/null
	assert_eq $? 124
	end=$(date +%s%N)
	[ $(((end - start) / 1000000)) -lt 5000 ] || fail "timeout took too long"
	assert_no_survivor "$mark"

}

test_core_timeout_sigterm_ignoring_loop() {
	local out
	out=$(cr --json -t 0.3 --kill-after 0.3 -c "trap '' TERM; while :; do :; done")
	assert_eq "$(jget timed_out <<<"$out")" true
	assert_eq "$(jget limit <<<"$out")" timeout
	assert_eq "$(jget signal <<<"$out")" 9
	local d; d=$(jget duration_ms <<<"$out")
	[ "$d" -ge 550 ] && [ "$d" -lt 3000 ] || fail "duration $d ms: the grace period was not honoured"
}

test_core_timeout_graceful_term() {
	local out
	out=$(cr --json -t 0.3 -- sleep 10)
	assert_eq "$(jget timed_out <<<"$out")" true
	assert_eq "$(jget signal <<<"$out")" 15
}

test_core_grandchild_holding_pipe() {
	local mark="corral-gc-$RANDOM$RANDOM" start end out
	start=$(date +%s%N)
	out=$(cr -t 20 -- bash -c "(exec -a $mark sleep 60 &); echo main-done")
	assert_eq $? 0
	end=$(date +%s%N)
	assert_eq "$out" main-done
	[ $(((end - start) / 1000000)) -lt 3000 ] || fail "the run waited for the grandchild"
	assert_no_survivor "$mark"
}

test_core_stdin_default_devnull() {
	local out
	out=$(echo "host-input" | cr -- cat)
	assert_eq "$out" ""
}

test_core_stdin_passthrough() {
	local out
	out=$(printf 'line1\nline2\n' | cr -i -- wc -l)
	assert_eq "$out" 2
	out=$(head -c 3000000 /dev/zero | cr -i -- wc -c)
	assert_eq "$out" 3000000
}

test_core_env_scrubbed() {
	local out
	out=$(HOST_SECRET_TOKEN=s3cr3t-value AWS_SECRET_ACCESS_KEY=aws-s3cr3t cr -- env)
	assert_not_contains "$out" "s3cr3t"
	assert_contains "$out" "HOME=$WS"
	assert_contains "$out" "PATH=/usr/local/bin:/usr/bin:/bin"
	local n; n=$(wc -l <<<"$out")
	[ "$n" -le 8 ] || fail "environment has $n variables; it must be built from scratch: $out"
}

test_core_env_pass_and_set() {
	local out
	out=$(MY_VAR=from-host cr --env MY_VAR --env OTHER=set-here --env UNSET_XYZ -- env)
	assert_contains "$out" "MY_VAR=from-host"
	assert_contains "$out" "OTHER=set-here"
	assert_not_contains "$out" "UNSET_XYZ"
}

test_core_limit_cpu() {
	local out
	out=$(cr --json --cpu 1 -c 'while :; do :; done')
	assert_eq "$(jget limit <<<"$out")" cpu
	assert_contains "$(jget signal <<<"$out")" 24
}

test_core_limit_fsize() {
	local out
	out=$(cr --json --fsize 100k -- sh -c 'head -c 1000000 /dev/zero > big')
	assert_eq "$(jget limit <<<"$out")" fsize
	local sz; sz=$(stat -c %s "$WS/big")
	[ "$sz" -le 102400 ] || fail "file grew to $sz bytes past the 100k limit"
}

test_core_limit_nofile() {
	local out
	out=$(cr --nofile 32 -- sh -c 'ulimit -n')
	assert_eq "$out" 32
}

test_core_limit_memory() {
	local out
	out=$(cr --json --memory 64M -- python3 -c 'x = bytearray(400 << 20); print("allocated")')
	assert_not_contains "$(jget stdout <<<"$out")" allocated
	if [ "$(jget isolation.cgroup.applied <<<"$out")" = true ]; then
		assert_eq "$(jget limit <<<"$out")" memory
	else
		# rlimit fallback: the allocation fails inside the program
		assert_contains "$(jget stderr <<<"$out")" MemoryError
	fi
}

test_core_limit_pids() {
	cp "$PROBE" "$WS/probe"
	local out so n
	out=$(cr --json --pids 20 -- ./probe fork-bomb 60)
	so=$(jget stdout <<<"$out")
	n=$(sed -nE 's/.*forked=([0-9]+).*/\1/p' <<<"$so")
	[ -n "$n" ] || fail "no fork count: $so"
	[ "$n" -lt 20 ] || fail "forked $n processes with --pids 20"
	[ "$n" -gt 5 ] || fail "only $n forks: the limit is not what stopped them"
	assert_contains "$so" "EAGAIN"
	if [ "$(jget isolation.cgroup.applied <<<"$out")" = true ]; then
		assert_eq "$(jget limit <<<"$out")" pids
	fi
}

test_core_output_cap_head_and_tail() {
	local out
	out=$(cr --json --max-output 1000 -c 'echo FIRST; seq 1 100000; echo LAST')
	assert_eq "$(jget stdout_truncated <<<"$out")" true
	local so; so=$(jget stdout <<<"$out")
	assert_contains "$so" FIRST
	assert_contains "$so" LAST
	assert_contains "$so" "bytes dropped"
	local total; total=$(jget stdout_bytes <<<"$out")
	assert_eq "$total" "$(( $(seq 1 100000 | wc -c) + 11 ))"
	assert_eq "$(jget stderr_truncated <<<"$out")" false
}

test_core_yes_flood_flat_memory() {
	# Max RSS of the supervisor (and its sandbox, which is tiny) for 16 MiB and 1 GiB of
	# output: flat memory means the two are about equal.
	local small big
	small=$(python3 - "$CORRAL" "$WS" 16 <<'PY'
import os, sys, subprocess
p = subprocess.Popen([sys.argv[1], "run", "-w", sys.argv[2], "--json", "-c", "yes | head -c %sM" % sys.argv[3]], stdout=subprocess.DEVNULL)
_, st, ru = os.wait4(p.pid, 0)
print(ru.ru_maxrss)
PY
)
	big=$(python3 - "$CORRAL" "$WS" 1024 <<'PY'
import os, sys, subprocess
p = subprocess.Popen([sys.argv[1], "run", "-w", sys.argv[2], "--json", "-c", "yes | head -c %sM" % sys.argv[3]], stdout=subprocess.DEVNULL)
_, st, ru = os.wait4(p.pid, 0)
print(ru.ru_maxrss)
PY
)
	[ "$big" -lt $((small + 4096)) ] || fail "max RSS grew from ${small} KiB to ${big} KiB for 1 GiB of output"
	# (a sanitizer build carries its shadow memory: only the flatness counts there)
	[ -n "${CORRAL_SANITIZED:-}" ] || [ "$big" -lt 32768 ] || fail "max RSS ${big} KiB for a 1 MiB cap"
}

test_core_flood_does_not_deadlock_both_streams() {
	local out
	out=$(cr --json -t 30 -c 'head -c 20000000 /dev/zero >&2 & head -c 20000000 /dev/zero; wait')
	assert_eq "$(jget exit_code <<<"$out")" 0
	assert_eq "$(jget stdout_bytes <<<"$out")" 20000000
	assert_eq "$(jget stderr_bytes <<<"$out")" 20000000
}

test_core_bad_flags() {
	local e
	for args in "--timeout -1" "--timeout abc" "--memory 12Q" "--cpu -1" "--pids -3" \
		"--nofile x" "--max-output 1" "--mode bogus" "--net wifi" "--bogus-flag" \
		"--fsize 1.2.3" "--kill-after -5"; do
		# shellcheck disable=SC2086
		e=$("$CORRAL" run -w "$WS" $args -- true 2>&1)
		assert_eq $? 125 "for $args"
		[ "$(wc -l <<<"$e")" -le 2 ] || fail "more than one line of error for $args: $e"
		assert_contains "$e" "corral"
	done
	e=$("$CORRAL" run -w /nonexistent/dir -- true 2>&1); assert_eq $? 125
	assert_contains "$e" "/nonexistent/dir"
	e=$("$CORRAL" run -w "$WS" 2>&1); assert_eq $? 125
	assert_contains "$e" "no command"
	e=$("$CORRAL" run -w "$WS" -C /usr -- true 2>&1); assert_eq $? 125
	assert_contains "$e" "outside the workspace"
	e=$("$CORRAL" frobnicate 2>&1); assert_eq $? 125
}

test_core_help_version_man() {
	local h
	h=$("$CORRAL" --help); assert_eq $? 0
	assert_contains "$h" "run"
	h=$("$CORRAL" help run)
	for flag in --workspace --cwd --timeout --kill-after --memory --cpu --pids --nofile \
		--fsize --max-output --env --stdin --mode --json --net; do
		assert_contains "$h" "$flag"
	done
	assert_contains "$("$CORRAL" version)" "corral "
	if command -v man >/dev/null; then
		local m
		m=$(MANWIDTH=80 man -l "$DOCS/corral.1" 2>&1)
		assert_contains "$m" "corral run"
		assert_contains "$m" "--kill-after"
	fi
}

test_core_cwd() {
	mkdir -p "$WS/sub/dir"
	assert_eq "$(cr -C sub/dir -- pwd)" "$WS/sub/dir"
	assert_eq "$(cr -- pwd)" "$WS"
}

test_core_workspace_write_visible_on_host() {
	cr -c 'echo made-inside > out.txt'
	assert_eq "$(cat "$WS/out.txt")" made-inside
}

test_core_json_usage_and_duration() {
	local out
	out=$(cr --json -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done')
	local u; u=$(jget usage.user_ms <<<"$out")
	[ "$u" -gt 0 ] || fail "user_ms is $u for a busy loop"
	[ "$(jget usage.max_rss_kb <<<"$out")" -gt 0 ] || fail "no max_rss"
	[ "$(jget duration_ms <<<"$out")" -ge "$u" ] || true
	local id; id=$(jget id <<<"$out")
	assert_eq "${#id}" 36
}
