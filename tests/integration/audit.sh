# Audit store (issue 7): records of every kind of execution, list/show/export/stats, the hash
# chain catching edits and deletions, retention that keeps the chain verifiable, concurrent
# writers, and a store that is unavailable failing fast with the path and the fix.
# Records are made by tests/audit_tool.c through src/audit.h (no sandbox needed); tampering
# is done with the sqlite3 CLI, as an attacker with write access to the file would.

# The test helper: beside corral in the test copy, else in the build tree.
audit_tool_path() {
	local t=${AUDIT_TOOL:-}
	[ -n "$t" ] || t=$(dirname "$CORRAL")/audit_tool
	[ -x "$t" ] || t=${BUILD:-build}/tests/audit_tool
	[ -x "$t" ] || fail "audit_tool is not built: make ${BUILD:-build}/tests/audit_tool (tests/run.sh copies it beside corral)"
	echo "$t"
}
audit_tool() {
	local t
	t=$(audit_tool_path) || exit 1
	"$t" "$@"
}
aud() { "$CORRAL" audit --db "$WS/audit.db" "$@"; }
need_sqlite3() { command -v sqlite3 >/dev/null || fail "the sqlite3 CLI is needed (apt-get install sqlite3)"; }
# Run as a user without CAP_DAC_OVERRIDE, so that file modes apply to root too.
no_dac() {
	if is_root; then setpriv --inh-caps=-all --bounding-set=-all -- "$@"; else "$@"; fi
}
ms_now() { date +%s%3N; }

test_audit_records_every_kind() {
	local db=$WS/audit.db mcp run job
	mcp=$(audit_tool "$db" record --kind mcp_call --no-result --id mcp-call-1 --client mcp \
		--client-info '{"name":"test-client","version":"1.2"}' --cmd 'tools/call run') || fail "record mcp_call"
	run=$(audit_tool "$db" record --kind run --cmd 'make test' --exit 0) || fail "record run"
	audit_tool "$db" record --kind session_cmd --parent "$mcp" --client mcp --cmd 'cd src && ls' --exit 2 >/dev/null || fail "record session_cmd"
	job=$(audit_tool "$db" record --kind job --parent "$mcp" --client mcp --cmd 'sleep 999' --timeout) || fail "record job"
	audit_tool "$db" record --kind pipeline_stage --parent "$mcp" --client mcp --cmd 'grep x' --limit memory >/dev/null || fail "record stage"
	audit_tool "$db" record --kind nonsense 2>/dev/null && fail "an unknown kind was accepted"

	local list
	list=$(aud list --json)
	assert_eq "$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' <<<"$list")" 5
	# newest first
	assert_eq "$(jget 0.kind <<<"$list")" pipeline_stage
	assert_eq "$(jget 4.kind <<<"$list")" mcp_call
	assert_eq "$(jget 4.command <<<"$list")" "tools/call run"
	assert_eq "$(jget 3.id <<<"$list")" "$run"
	assert_eq "$(jget 3.argv.2 <<<"$list")" "make test"
	assert_eq "$(jget 3.exit_code <<<"$list")" 0
	assert_eq "$(jget 2.exit_code <<<"$list")" 2
	assert_eq "$(jget 2.parent <<<"$list")" "$mcp"
	assert_eq "$(jget 1.timed_out <<<"$list")" true
	assert_eq "$(jget 0.limit_hit <<<"$list")" memory
	# every kind in the human table, with the status column
	local table
	table=$(aud list)
	for k in run session_cmd job pipeline_stage mcp_call; do assert_contains "$table" "$k"; done
	assert_contains "$table" "timeout"
	assert_contains "$table" "exit 2"
	assert_contains "$table" "memory"
	assert_contains "$table" "${run:0:8}"
	assert_eq "$(aud list --kind job --json | jget 0.id)" "$job"
	# the MCP call shows its client and its children
	local show
	show=$(aud show mcp-call --json)
	assert_eq "$(jget client_info.name <<<"$show")" test-client
	assert_eq "$(jget client <<<"$show")" mcp
	assert_eq "$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["children"]))' <<<"$show")" 3
	aud verify >/dev/null || fail "a fresh store does not verify: $(aud verify)"
}

test_audit_security_events() {
	local db=$WS/audit.db id
	audit_tool "$db" record --timeout >/dev/null
	audit_tool "$db" record --limit memory >/dev/null
	audit_tool "$db" record --limit cpu --signal 9 >/dev/null
	audit_tool "$db" record --error denied --cmd curl >/dev/null
	audit_tool "$db" record --error setup >/dev/null
	id=$(audit_tool "$db" record --signal 15 --cancelled)
	audit_tool "$db" record --violations '[{"kind":"fs_write","object":"/etc/passwd"}]' --exit 1 >/dev/null
	audit_tool "$db" event preflight_denied "" '{"rule":"commands.deny","command":"nc"}' || fail "record event"
	audit_tool "$db" event 'Bad Kind' 2>/dev/null && fail "a malformed event kind was accepted"
	local ev
	ev=$(aud stats --json | jget events)
	for k in timeout oom_kill limit_kill setup_failed cancelled violation; do
		assert_eq "$(jget "$k" <<<"$ev")" 1 "event $k"
	done
	assert_eq "$(jget preflight_denied <<<"$ev")" 2 "the denied run and the standalone denial"
	local show
	show=$(aud show "$id" --json)
	assert_eq "$(jget events.0.kind <<<"$show")" cancelled
	assert_eq "$(jget events.0.detail.signal <<<"$show")" 15
	assert_contains "$(aud show "$id")" "event:      cancelled"
	aud verify >/dev/null || fail "events broke the chain: $(aud verify)"
}

test_audit_list_filters() {
	local db=$WS/audit.db
	audit_tool "$db" record --ago 7200000 --cmd 'old one' >/dev/null   # 2 hours ago
	audit_tool "$db" record --cmd 'ok one' >/dev/null
	audit_tool "$db" record --cmd 'failing one' --exit 1 >/dev/null
	audit_tool "$db" record --cmd 'killed one' --signal 9 >/dev/null
	local out
	out=$(aud list --since 1h)
	assert_not_contains "$out" "old one"
	assert_contains "$out" "ok one"
	out=$(aud list --failed)
	assert_contains "$out" "failing one"
	assert_contains "$out" "killed one"
	assert_contains "$out" "SIGKILL"
	assert_not_contains "$out" "ok one"
	assert_eq "$(aud list --limit 1 --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" 1
	assert_eq "$(aud list --limit 0 --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" 4
	# bad values are usage errors naming the flag
	out=$(aud list --since soon 2>&1); assert_eq $? 125
	assert_contains "$out" "--since"
	out=$(aud list --max-rows 3 2>&1); assert_eq $? 125
	out=$(aud frobnicate 2>&1); assert_eq $? 125
	assert_contains "$out" "unknown command"
	# an unknown kind is a usage error naming the value and the kinds, not an empty list
	for sub in list stats; do
		out=$(aud $sub --kind bogus 2>&1); assert_eq $? 125 "$sub --kind bogus: $out"
		assert_eq "$(wc -l <<<"$out")" 1 "$out"
		assert_contains "$out" "'bogus' for --kind"
		assert_contains "$out" "run, session_cmd, job, pipeline_stage, mcp_call"
		assert_not_contains "$out" "no executions"
		aud $sub --kind pipeline_stage >/dev/null || fail "control: $sub --kind pipeline_stage"
	done
}

test_audit_show_output_and_prefix() {
	local db=$WS/audit.db a b
	a=$(audit_tool "$db" record --output --cmd 'echo hello')
	b=$(audit_tool "$db" record --cmd 'echo quiet')
	local out
	out=$(aud show "${a:0:6}")
	assert_contains "$out" "$a"
	assert_contains "$out" "stdout:"
	assert_contains "$out" "  hello"
	assert_contains "$out" "profile:    default"
	out=$(aud show "$a" --json)
	assert_eq "$(jget stdout <<<"$out")" "hello
world"
	# invalid UTF-8 in the output is stored as U+FFFD, so the JSON stays valid
	assert_contains "$(jget stderr <<<"$out")" $'\xef\xbf\xbd'
	assert_eq "$(aud show "$b" --json | jget stdout)" null "output stored without --output"
	assert_contains "$(aud show "$b")" "(not stored)"
	out=$(aud show no-such-id 2>&1); assert_eq $? 125
	assert_contains "$out" "no execution or event"
	# a one-character prefix shared by both ids (when it is) is ambiguous
	if [ "${a:0:1}" = "${b:0:1}" ]; then
		out=$(aud show "${a:0:1}" 2>&1); assert_eq $? 125
		assert_contains "$out" "ambiguous"
	fi
	out=$(aud show 2>&1); assert_eq $? 125
}

test_audit_export_json_lines() {
	local db=$WS/audit.db
	audit_tool "$db" record --exit 0 >/dev/null
	audit_tool "$db" record --timeout >/dev/null  # + a timeout event
	audit_tool "$db" record --kind job >/dev/null
	local out
	out=$(aud export --json) || fail "export failed"
	assert_eq "$(wc -l <<<"$out")" 4
	python3 - "$out" <<'PY' || fail "export is not a chain of JSON lines: $out"
import json, sys
rows = [json.loads(l) for l in sys.argv[1].splitlines()]
assert [r["seq"] for r in rows] == [1, 2, 3, 4], [r["seq"] for r in rows]
assert [r["type"] for r in rows] == ["execution", "execution", "event", "execution"]
assert rows[2]["kind"] == "timeout" and rows[2]["execution_id"] == rows[1]["id"]
for prev, row in zip(rows, rows[1:]):
    assert row["prev_hash"] == prev["row_hash"]
assert rows[0]["prev_hash"] == "0" * 64
assert rows[0]["isolation"]["landlock"]["detail"] == "abi 4"
PY
}

test_audit_stats_percentiles() {
	local db=$WS/audit.db i
	for i in $(seq 1 20); do
		audit_tool "$db" record --duration $((i * 100)) --exit $((i % 5 == 0)) >/dev/null || fail "record $i"
	done
	audit_tool "$db" record --duration 5000 --timeout >/dev/null
	local s
	s=$(aud stats --json)
	assert_eq "$(jget executions <<<"$s")" 21
	assert_eq "$(jget failed <<<"$s")" 5 "4 non-zero exits and a timeout"
	assert_eq "$(jget timeouts <<<"$s")" 1
	# nearest rank: p50 of 21 values is the 11th (1100 ms), p95 the 20th (2000 ms)
	assert_eq "$(jget duration_ms.p50 <<<"$s")" 1100
	assert_eq "$(jget duration_ms.p95 <<<"$s")" 2000
	assert_eq "$(jget duration_ms.max <<<"$s")" 5000
	assert_eq "$(jget by_kind.run <<<"$s")" 21
	python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert abs(d['failure_rate']-5/21)<1e-9 and abs(d['timeout_rate']-1/21)<1e-9, d" "$s" || fail "rates: $s"
	local h
	h=$(aud stats)
	assert_contains "$h" "executions: 21 (failed 5, 23.8%; timed out 1, 4.8%)"
	assert_contains "$h" "p50 1.1s, p95 2.0s"
	# an empty window
	assert_eq "$(aud stats --since 1ms --json | jget executions)" 0
}

test_audit_verify_catches_edit() {
	need_sqlite3
	local db=$WS/audit.db ids
	audit_tool "$db" bulk 5 --exit 1 >/dev/null || fail "bulk"
	aud verify >/dev/null || fail "not intact before the edit"
	local victim
	victim=$(sqlite3 "$db" "SELECT id FROM executions WHERE seq = 3")
	sqlite3 "$db" "UPDATE executions SET exit_code = 0 WHERE seq = 3"
	local out
	out=$(aud verify); assert_eq $? 1 "verify must fail on an edited row"
	assert_contains "$out" "TAMPERED: seq 3"
	assert_contains "$out" "$victim"
	assert_contains "$out" "changed after it was recorded"
	out=$(aud verify --json)
	assert_eq "$(jget ok <<<"$out")" false
	assert_eq "$(jget first_bad.seq <<<"$out")" 3
	assert_eq "$(jget first_bad.table <<<"$out")" executions
	# undoing the edit restores the chain: the hash is over the values, nothing else
	sqlite3 "$db" "UPDATE executions SET exit_code = 1 WHERE seq = 3"
	aud verify >/dev/null || fail "restoring the value did not restore the chain"
	# a stored output and an event detail are covered too
	audit_tool "$db" record --output --timeout >/dev/null
	sqlite3 "$db" "UPDATE executions SET stdout = 'nothing to see' WHERE stdout IS NOT NULL"
	aud verify >/dev/null; assert_eq $? 1 "an edited stdout went unnoticed"
	sqlite3 "$db" "UPDATE executions SET stdout = 'hello' || char(10) || 'world' || char(10) WHERE stdout IS NOT NULL"
	aud verify >/dev/null || fail "restored stdout: $(aud verify)"
	sqlite3 "$db" "UPDATE events SET detail = '{}'"
	out=$(aud verify); assert_eq $? 1 "an edited event went unnoticed"
	assert_contains "$out" "in events"
}

test_audit_verify_catches_deletion() {
	need_sqlite3
	local db=$WS/audit.db
	audit_tool "$db" bulk 6 >/dev/null || fail "bulk"
	sqlite3 "$db" "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null
	cp "$db" "$WS/copy.db"
	# a middle row
	sqlite3 "$db" "DELETE FROM executions WHERE seq = 4"
	local out
	out=$(aud verify); assert_eq $? 1 "verify must fail on a deleted row"
	assert_contains "$out" "seq 4"
	assert_contains "$out" "deleted"
	# the newest row: caught by the chain head
	sqlite3 "$WS/copy.db" "DELETE FROM executions WHERE seq = 6"
	out=$("$CORRAL" audit --db "$WS/copy.db" verify); assert_eq $? 1 "verify must fail on a deleted last row"
	assert_contains "$out" "deleted at the end"
	# a deleted row whose successor was renumbered to close the gap
	sqlite3 "$WS/copy.db" "DELETE FROM executions WHERE seq = 2; UPDATE executions SET seq = seq - 1 WHERE seq > 2; UPDATE chain SET head_seq = 4"
	out=$("$CORRAL" audit --db "$WS/copy.db" verify); assert_eq $? 1
	assert_contains "$out" "prev_hash does not match"
}

# A dropped table: verify names it (exit 1, a finding like a deleted row, not a permission
# problem); a writer refuses the store with a warning naming the table and appends nothing;
# a reader that needs the table says the store is damaged.
test_audit_verify_missing_table() {
	need_sqlite3
	local db=$WS/audit.db t out err rc
	audit_tool "$db" bulk 3 >/dev/null || fail "bulk"
	audit_tool "$db" record --timeout >/dev/null || fail "record" # an event row too
	sqlite3 "$db" "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null
	for t in events chain executions; do
		cp "$db" "$WS/$t.db"
		sqlite3 "$WS/$t.db" "DROP TABLE $t"
		out=$("$CORRAL" audit --db "$WS/$t.db" verify 2>"$WS/err"); rc=$?
		err=$(cat "$WS/err")
		assert_eq "$rc" 1 "verify with $t dropped: $out $err"
		assert_contains "$out" "TAMPERED: table $t is missing"
		assert_not_contains "$out$err" "writable"
		out=$("$CORRAL" audit --db "$WS/$t.db" verify --json); assert_eq $? 1
		assert_eq "$(jget ok <<<"$out")" false
		assert_eq "$(jget first_bad.table <<<"$out")" "$t"
		# a run with that store runs, warns once naming the table, and records nothing
		out=$("$CORRAL" run -w "$WS" --audit "$WS/$t.db" -- echo still-runs 2>"$WS/err"); rc=$?
		err=$(cat "$WS/err")
		assert_eq "$rc" 0 "corral run with $t dropped"
		assert_eq "$out" still-runs
		assert_eq "$(wc -l <"$WS/err")" 1 "stderr lines: $err"
		assert_contains "$err" "table '$t' is missing"
		assert_contains "$err" "the run itself is not affected"
		assert_not_contains "$err" "writable"
		[ "$t" = executions ] ||
			assert_eq "$(sqlite3 "$WS/$t.db" 'SELECT count(*) FROM executions')" 4 "rows after the run"
		[ "$t" = executions ] || continue
		# a reader that needs the table
		err=$("$CORRAL" audit --db "$WS/$t.db" list 2>&1); assert_eq $? 125
		assert_contains "$err" "no such table: executions"
		assert_contains "$err" "damaged"
		assert_not_contains "$err" "writable"
	done
	# control: the store itself still verifies
	aud verify >/dev/null || fail "$(aud verify)"
}

# The chain table's row deleted (DELETE FROM chain) is tampering: verify names it (exit 1, a
# finding naming the table), not "cannot vouch" (125 stays for a store it cannot read); a
# writer refuses the store with one warning and appends nothing.
test_audit_verify_chain_head_row_deleted() {
	need_sqlite3
	local db=$WS/audit.db out err rc
	audit_tool "$db" bulk 3 >/dev/null || fail "bulk"
	sqlite3 "$db" "DELETE FROM chain"
	assert_eq "$(sqlite3 "$db" 'SELECT count(*) FROM chain')" 0
	out=$(aud verify 2>"$WS/err"); rc=$?
	err=$(cat "$WS/err")
	assert_eq "$rc" 1 "verify with the chain row deleted: $out $err"
	assert_contains "$out" "audit store $db: TAMPERED: the chain head row is missing (deleted outside corral)"
	assert_eq "$err" "" "verify's stderr"
	out=$(aud verify --json); assert_eq $? 1
	assert_eq "$(jget ok <<<"$out")" false
	assert_eq "$(jget first_bad.table <<<"$out")" chain
	assert_contains "$(jget first_bad.reason <<<"$out")" "the chain head row is missing"
	# the other readers still read the rows
	out=$(aud list --json) || fail "list: $out"
	assert_eq "$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' <<<"$out")" 3
	# a run with that store runs, warns once, and records nothing
	out=$("$CORRAL" run -w "$WS" --audit "$db" -- echo still-runs 2>"$WS/err"); rc=$?
	err=$(cat "$WS/err")
	assert_eq "$rc" 0 "corral run with the chain row deleted"
	assert_eq "$out" still-runs
	assert_eq "$(wc -l <"$WS/err")" 1 "stderr lines: $err"
	assert_contains "$err" "the chain head row is missing"
	assert_contains "$err" "'corral audit verify' reports it"
	assert_eq "$(sqlite3 "$db" 'SELECT count(*) FROM executions')" 3 "rows after the run"
	# control: a store verify cannot read is still 125, not a finding
	chmod 0 "$db"
	out=$(no_dac "$CORRAL" audit --db "$db" verify 2>&1); rc=$?
	chmod 0600 "$db"
	assert_eq "$rc" 125 "verify of an unreadable store: $out"
	assert_not_contains "$out" "TAMPERED"
}

# Output that cannot be written (a full disk) is corral's failure: exit 125 and one line
# naming the reason, whatever the subcommand's own status (verify's 1 included).
test_audit_output_write_failure() {
	need_sqlite3
	local db=$WS/audit.db sub err rc
	audit_tool "$db" bulk 2 >/dev/null || fail "bulk"
	for sub in verify "verify --json" list "list --json" stats "stats --json" export \
		"export --json" "show $(sqlite3 "$db" 'SELECT id FROM executions LIMIT 1')" path; do
		# shellcheck disable=SC2086
		aud $sub >/dev/null || fail "control: audit $sub failed"
		# shellcheck disable=SC2086
		err=$(aud $sub 2>&1 >/dev/full); rc=$?
		assert_eq "$rc" 125 "audit $sub >/dev/full: $err"
		assert_eq "$err" "corral: writing the output: No space left on device" "audit $sub"
	done
	# an export longer than stdio's buffer fails in the middle, said once
	audit_tool "$db" bulk 100 >/dev/null || fail "bulk"
	[ "$(aud export | wc -c)" -gt 65536 ] || fail "control: the export is too short"
	err=$(aud export 2>&1 >/dev/full); rc=$?
	assert_eq "$rc" 125
	assert_eq "$err" "corral: writing the output: No space left on device"
	# verify's own finding does not hide a lost report
	sqlite3 "$db" "UPDATE executions SET exit_code = 7 WHERE seq = 1"
	aud verify >/dev/null; assert_eq $? 1 "control: the edit is a finding"
	err=$(aud verify 2>&1 >/dev/full); assert_eq $? 125
	assert_contains "$err" "No space left on device"
}

test_audit_prune_by_age_keeps_chain() {
	need_sqlite3
	local db=$WS/audit.db
	audit_tool "$db" bulk 5 --ago $((40 * 86400000)) --timeout >/dev/null || fail "old rows"
	audit_tool "$db" bulk 3 >/dev/null || fail "new rows"
	assert_eq "$(sqlite3 "$db" 'SELECT count(*) FROM executions') $(sqlite3 "$db" 'SELECT count(*) FROM events')" "8 5"
	local out
	out=$(aud prune) || fail "prune failed: $out"
	assert_contains "$out" "pruned 10 rows"
	assert_eq "$(sqlite3 "$db" 'SELECT count(*) FROM executions') $(sqlite3 "$db" 'SELECT count(*) FROM events')" "3 0"
	out=$(aud verify --json) || fail "not verifiable after pruning: $out"
	assert_eq "$(jget rows <<<"$out")" 3
	assert_eq "$(jget anchor_seq <<<"$out")" 10
	# nothing more to prune; new rows chain on
	assert_contains "$(aud prune --max-age 1d)" "pruned 0 rows"
	audit_tool "$db" record >/dev/null
	aud verify >/dev/null || fail "not verifiable after pruning and recording: $(aud verify)"
	# a deletion below the anchor's successor is still caught
	sqlite3 "$db" "DELETE FROM executions WHERE seq = (SELECT min(seq) FROM executions)"
	aud verify >/dev/null; assert_eq $? 1 "deleting the first row after the anchor went unnoticed"
}

test_audit_prune_by_count_keeps_chain() {
	need_sqlite3
	local db=$WS/audit.db
	audit_tool "$db" bulk 30 >/dev/null || fail "bulk"
	local out
	out=$(aud prune --max-rows 10) || fail "prune failed: $out"
	assert_contains "$out" "pruned 20 rows"
	assert_eq "$(sqlite3 "$db" 'SELECT min(seq) || "-" || max(seq) FROM executions')" "21-30"
	aud verify >/dev/null || fail "not verifiable after pruning: $(aud verify)"
	# everything pruned: the anchor is the head, and recording continues from it
	aud prune --max-age 0 --max-rows 1 >/dev/null
	assert_eq "$(sqlite3 "$db" 'SELECT count(*) FROM executions')" 1
	audit_tool "$db" record >/dev/null
	aud verify >/dev/null || fail "after pruning to one row: $(aud verify)"
	# the opportunistic prune (every 100th row) applies the retention of the writer
	audit_tool "$WS/auto.db" bulk 250 --keep-rows 50 >/dev/null || fail "bulk 250"
	local n
	n=$(sqlite3 "$WS/auto.db" 'SELECT count(*) FROM executions')
	[ "$n" -le 150 ] && [ "$n" -ge 50 ] || fail "opportunistic prune kept $n rows (expected 50..150)"
	"$CORRAL" audit --db "$WS/auto.db" verify >/dev/null || fail "auto prune broke the chain"
}

test_audit_prune_keeps_tampered_evidence() {
	need_sqlite3
	local db=$WS/audit.db
	audit_tool "$db" bulk 10 >/dev/null || fail "bulk"
	sqlite3 "$db" "UPDATE executions SET command = 'innocent' WHERE seq = 2"
	local out
	out=$(aud prune --max-rows 3 2>&1); assert_eq $? 125 "prune of a tampered prefix must refuse"
	assert_contains "$out" "do not verify"
	assert_eq "$(sqlite3 "$db" 'SELECT count(*) FROM executions')" 10 "nothing may be pruned"
	aud verify >/dev/null; assert_eq $? 1
}

test_audit_concurrent_writers() {
	local db=$WS/audit.db
	audit_tool "$db" open >/dev/null || fail "open"
	audit_tool "$db" bulk 200 --kind job >"$WS/a.out" 2>&1 &
	local p1=$!
	audit_tool "$db" bulk 200 --kind session_cmd >"$WS/b.out" 2>&1 &
	local p2=$!
	wait $p1 || fail "writer 1: $(tail -3 "$WS/a.out")"
	wait $p2 || fail "writer 2: $(tail -3 "$WS/b.out")"
	assert_contains "$(cat "$WS/a.out")" "recorded 200, failed 0"
	assert_contains "$(cat "$WS/b.out")" "recorded 200, failed 0"
	local out
	out=$(aud verify --json) || fail "concurrent writers broke the chain: $out"
	assert_eq "$(jget rows <<<"$out")" 400
	assert_eq "$(jget head_seq <<<"$out")" 400
	local s
	s=$(aud stats --json)
	assert_eq "$(jget by_kind.job <<<"$s") $(jget by_kind.session_cmd <<<"$s")" "200 200"
}

# "LIVE SIZE": the frames of a WAL's current generation (those its header's salts mark, the
# ones a reader that rebuilds the index reads) and its size in bytes.
WAL_FRAMES_PY='
import struct, sys
d = open(sys.argv[1], "rb").read()
if len(d) < 32:
    print(0, len(d)); sys.exit()
page = struct.unpack(">I", d[8:12])[0]
salts = d[16:24]
n, off = 0, 32
while off + 24 + page <= len(d) and d[off + 8:off + 16] == salts:
    n += 1
    off += 24 + page
print(n, len(d))
'
wal_frames() { python3 -c "$WAL_FRAMES_PY" "$1"; }

# One-shot writers (as corral run is) checkpoint the WAL once it holds 256 frames and restart
# it at once, so the next process that opens the store rebuilds its index from few frames:
# the frames of the WAL's current generation (its header's salts) stay below 256 plus one
# record's, however many records are written. The WAL is reused in place, not truncated
# (docs/audit.md, Concurrency), and stays under its 2 MiB limit.
test_audit_wal_restarts_in_one_shot_writers() {
	local db=$WS/audit.db i
	for i in $(seq 90); do
		audit_tool "$db" record --cmd "run $i" >/dev/null || fail "record $i"
	done
	local frames
	frames=$(wal_frames "$db-wal") || fail "reading the WAL"
	local live=${frames% *} size=${frames#* }
	[ "$live" -gt 0 ] || fail "no frames in the WAL's current generation: $frames"
	[ "$live" -lt 300 ] || fail "the WAL was not restarted: $live frames in its current generation"
	[ "$size" -le $((2 * 1024 * 1024)) ] || fail "WAL of $size bytes, above its 2 MiB limit"
	local out
	out=$(aud verify --json) || fail "chain: $out"
	assert_eq "$(jget rows <<<"$out")" 90
	if command -v sqlite3 >/dev/null; then
		assert_eq "$(sqlite3 "$db" 'PRAGMA integrity_check')" ok
	fi
}

# A long-lived writer (corral mcp) leaves the store's upkeep to its idle time
# (audit_defer_upkeep): the WAL checkpoint, whose syncs cost 5-19 ms here every 30-odd
# records, and the retention prune. Bounded for a writer that is never idle: the WAL stays
# under its 2 MiB limit, the prune comes at the next retention boundary at the latest.
test_audit_upkeep_deferred() {
	local out live size n
	# no idle time: 40 records (about 300 frames) and no checkpoint, the WAL whole
	audit_tool "$WS/a.db" bulk 40 --defer >/dev/null || fail "bulk a"
	read -r live size < <(wal_frames "$WS/a.db-wal") || fail "reading the WAL"
	[ "$live" -ge 256 ] || fail "checkpointed although deferred: $live frames live"
	# then the upkeep: it was due, and the WAL starts over
	out=$(audit_tool "$WS/b.db" bulk 40 --defer --upkeep) || fail "bulk b"
	assert_contains "$out" "upkeep was due: yes"
	read -r live size < <(wal_frames "$WS/b.db-wal")
	assert_eq "$live" 1 "frames live after the upkeep"
	out=$(audit_tool "$WS/b2.db" bulk 3 --defer --upkeep) || fail "bulk b2"
	assert_contains "$out" "upkeep was due: no"
	# never idle: checkpointed by the writes themselves before the WAL outgrows 2 MiB
	audit_tool "$WS/c.db" bulk 300 --defer >/dev/null || fail "bulk c"
	read -r live size < <(wal_frames "$WS/c.db-wal")
	[ "$live" -lt 460 ] || fail "$live frames live in a never-idle writer's WAL"
	[ "$size" -le $((2 * 1024 * 1024)) ] || fail "WAL of $size bytes, above its 2 MiB limit"
	out=$("$CORRAL" audit --db "$WS/c.db" verify --json) || fail "chain: $out"
	assert_eq "$(jget rows <<<"$out")" 300
	if command -v sqlite3 >/dev/null; then
		assert_eq "$(sqlite3 "$WS/c.db" 'PRAGMA integrity_check')" ok
	fi
	# the prune: bounded without idle time, exact after the upkeep
	audit_tool "$WS/d.db" bulk 250 --keep-rows 50 --defer >/dev/null || fail "bulk d"
	n=$("$CORRAL" audit --db "$WS/d.db" verify --json | jget rows)
	[ "$n" -ge 50 ] && [ "$n" -le 60 ] || fail "deferred prune kept $n rows (expected 50..60)"
	audit_tool "$WS/e.db" bulk 250 --keep-rows 50 --defer --upkeep >/dev/null || fail "bulk e"
	out=$("$CORRAL" audit --db "$WS/e.db" verify --json) || fail "chain after the upkeep's prune: $out"
	assert_eq "$(jget rows <<<"$out")" 50
}

# The server replies before the store's upkeep and does it once idle: after some reply the
# WAL holds more than the checkpoint's 256 frames (the record is written, the checkpoint is
# not); once it is idle, the server still serving, the WAL is checkpointed and restarted.
test_audit_mcp_upkeep_when_idle() {
	local db=$WS/mcp-upkeep.db calls out
	calls=$(DB=$db mcp_py <<'PY'
import os, struct, time, mcp_client as M
db = os.environ["DB"]
def live():
    """the WAL's live frames (as wal_frames), read at once: the server idles 10 ms"""
    d = open(db + "-wal", "rb").read()
    if len(d) < 32:
        return 0
    page = struct.unpack(">I", d[8:12])[0]
    n, off = 0, 32
    while off + 24 + page <= len(d) and d[off + 8:off + 16] == d[16:24]:
        n, off = n + 1, off + 24 + page
    return n
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--audit", db]))
s.initialize()
seen = None
for i in range(200):
    r = s.call("run_command", {"argv": ["true"]})
    assert r["structuredContent"]["exit_code"] == 0, r
    n = live()
    if n >= 256:
        seen = (i + 1, n)
        break
assert seen, "no reply ever came before the checkpoint (the WAL never held 256 frames)"
# the server idles 10 ms, then checkpoints (a few ms; more on a loaded CI machine)
until = time.monotonic() + 5
while live() != 1 and time.monotonic() < until:
    time.sleep(0.02)
n = live()
assert n == 1, "after %s calls and 5 s idle the WAL still holds %d live frames" % (seen[0], n)
r = s.call("run_command", {"argv": ["true"]})
assert r["structuredContent"]["exit_code"] == 0, r
assert s.close() == 0
print(seen[0] + 1)
PY
	) || fail "the MCP session failed (see the traceback above)"
	out=$("$CORRAL" audit --db "$db" verify --json) || fail "chain: $out"
	assert_eq "$(jget rows <<<"$out")" "$calls" "one record a call"
}

test_audit_store_readonly_fails_fast() {
	local dir=$WS/store out t0 t1
	mkdir -p "$dir"
	audit_tool "$dir/audit.db" record >/dev/null || fail "record"
	# the store's files (the database and its persistent WAL) and its directory
	chmod 0400 "$dir"/audit.db*
	chmod 0500 "$dir"
	t0=$(ms_now)
	out=$(no_dac "$(audit_tool_path)" "$dir/audit.db" record 2>&1 || true)
	t1=$(ms_now)
	chmod 0700 "$dir"
	chmod 0600 "$dir"/audit.db*
	[ $((t1 - t0)) -lt 1000 ] || fail "took $((t1 - t0)) ms"
	assert_contains "$out" "$dir/audit.db"
	assert_contains "$out" "--audit off"
	assert_contains "$out" "--audit PATH"
	# a store in a read-only directory that does not exist yet
	chmod 0500 "$dir"
	out=$(no_dac "$(audit_tool_path)" "$dir/new/audit.db" record 2>&1) && fail "recorded into a read-only directory"
	chmod 0700 "$dir"
	assert_contains "$out" "$dir/new"
	assert_contains "$out" "--audit off"
	# a path through a regular file
	touch "$WS/file"
	out=$(audit_tool "$WS/file/audit.db" record 2>&1) && fail "recorded under a file"
	assert_contains "$out" "$WS/file is not a directory"
	# not a database
	echo garbage >"$WS/garbage.db"
	out=$(audit_tool "$WS/garbage.db" record 2>&1) && fail "recorded into garbage"
	assert_contains "$out" "$WS/garbage.db"
	assert_contains "$out" "not a corral audit store"
	# another application's database is left alone
	need_sqlite3
	sqlite3 "$WS/other.db" "CREATE TABLE notes (t TEXT)"
	out=$(audit_tool "$WS/other.db" record 2>&1) && fail "recorded into another database"
	assert_contains "$out" "not a corral audit store"
	assert_eq "$(sqlite3 "$WS/other.db" "SELECT group_concat(name) FROM sqlite_master WHERE type = 'table'")" notes
	assert_eq "$(sqlite3 "$WS/other.db" "PRAGMA journal_mode")" delete "its journal mode was changed"
}

# Another process holds the store's write lock (BEGIN IMMEDIATE) for SECONDS: returns once it
# is held; its pid is in LOCK_HOLDER (wait for it).
hold_store_lock() {
	rm -f "$WS/locked"
	python3 - "$1" "$WS/locked" "$2" <<'PY' &
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN IMMEDIATE")
open(sys.argv[2], "w").write("1")
time.sleep(float(sys.argv[3]))
c.execute("COMMIT")
PY
	LOCK_HOLDER=$!
	for _ in $(seq 1 50); do [ -s "$WS/locked" ] && return 0; sleep 0.05; done
	fail "the lock holder did not take the write lock of $1 within 2.5 s"
}

test_audit_store_locked_fails_fast_then_records_gap() {
	local db=$WS/audit.db
	audit_tool "$db" record >/dev/null || fail "record"
	hold_store_lock "$db" 1.2
	local t0 t1 out
	t0=$(ms_now)
	out=$(audit_tool "$db" record 2>&1) && fail "recorded into a locked store"
	t1=$(ms_now)
	[ $((t1 - t0)) -lt 1000 ] || fail "a locked store held the writer for $((t1 - t0)) ms"
	assert_contains "$out" "locked"
	assert_contains "$out" "$db"
	assert_contains "$out" "--audit off"
	# one process that fails while the lock is held and then succeeds records the gap
	out=$(audit_tool "$db" bulk 8 --pause 300 2>&1)
	wait "$LOCK_HOLDER"
	assert_contains "$out" "recorded"
	local n
	n=$(aud stats --json | jget events.store_unavailable)
	[ "$n" = 1 ] || fail "expected one store_unavailable event, got $n ($out)"
	aud show "$(aud export | python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l)
    if r.get("kind") == "store_unavailable": print(r["id"])')" | grep -q '"missed"' || fail "the gap event has no count"
	aud verify >/dev/null || fail "$(aud verify)"
}

# The exit path of corral mcp (audit_flush_gap): records lost to a failing store are written
# as one store_unavailable event with their count; while the store is still locked the flush
# fails and the count is kept, not dropped; a flush with nothing lost writes nothing.
test_audit_gap_flush_at_exit() {
	local db=$WS/audit.db out
	audit_tool "$db" record >/dev/null || fail "record"
	assert_eq "$(audit_tool "$db" gap 0)" nothing
	[ -z "$(aud export | grep store_unavailable)" ] || fail "a flush with nothing lost wrote an event"
	hold_store_lock "$db" 1.0
	out=$(audit_tool "$db" gap 4 "disk full (test)" 2>&1) && fail "flushed into a locked store: $out"
	assert_contains "$out" "locked"
	assert_contains "$out" "still missed: 4"
	wait "$LOCK_HOLDER"
	assert_eq "$(audit_tool "$db" gap 7 "disk full (test)")" recorded
	local ev
	ev=$(aud export | python3 -c 'import json,sys
g = [json.loads(l) for l in sys.stdin]
g = [r for r in g if r.get("kind") == "store_unavailable"]
print(len(g), g[0]["detail"]["missed"], g[0]["detail"]["error"])')
	assert_eq "$ev" "1 7 disk full (test)"
	aud verify >/dev/null || fail "$(aud verify)"
}

test_audit_default_path() {
	local out
	out=$(cd "$WS" && env -u XDG_STATE_HOME HOME="$WS" "$CORRAL" audit path)
	assert_eq "$out" "$WS/.local/state/corral/audit.db"
	(env -u XDG_STATE_HOME HOME="$WS" "$(audit_tool_path)" - record >/dev/null) || fail "record to the default store"
	[ -f "$WS/.local/state/corral/audit.db" ] || fail "no store at the default path"
	assert_eq "$(stat -c %a "$WS/.local/state/corral")" 700
	assert_eq "$(stat -c %a "$WS/.local/state/corral/audit.db")" 600
	out=$(env -u XDG_STATE_HOME HOME="$WS" "$CORRAL" audit list --json)
	assert_eq "$(jget 0.kind <<<"$out")" run
	assert_eq "$(XDG_STATE_HOME=$WS/xdg "$CORRAL" audit path)" "$WS/xdg/corral/audit.db"
	# a relative XDG_STATE_HOME is ignored, as the spec says
	assert_eq "$(XDG_STATE_HOME=rel HOME=$WS "$CORRAL" audit path)" "$WS/.local/state/corral/audit.db"
	# reading a store that does not exist creates nothing and says so
	out=$("$CORRAL" audit --db "$WS/none/audit.db" list 2>&1); assert_eq $? 125
	assert_contains "$out" "$WS/none/audit.db"
	[ ! -e "$WS/none" ] || fail "a reader created the store"
}

# A message about the store says "audit" once, and its fix names the flag of the command at
# hand: a writer's (corral run) --audit PATH / --audit off, a reader's (corral audit) --db PATH.
test_audit_messages_name_the_flag_in_use() {
	need_sqlite3
	local out rc
	echo garbage >"$WS/garbage.db"
	# a writer: one warning, "audit store" once, its own flags
	out=$("$CORRAL" run -w "$WS" --audit "$WS/garbage.db" -- true 2>&1); rc=$?
	assert_eq "$rc" 0 "corral run: $out"
	assert_eq "$out" "corral: audit store $WS/garbage.db: cannot read: file is not a database; it is damaged or not a corral audit store; move it aside, or record elsewhere with --audit PATH, or not at all with --audit off (the run itself is not affected)"
	out=$(env -u XDG_STATE_HOME -u HOME "$CORRAL" run -w "$WS" -- true 2>&1); rc=$?
	assert_eq "$rc" 0 "corral run without a default store: $out"
	assert_contains "$out" "corral: audit: no default store"
	assert_contains "$out" "--audit PATH"
	assert_not_contains "$out" "audit: audit"
	# a reader (every subcommand opens the store the same way): --db, never --audit
	out=$("$CORRAL" audit --db "$WS/garbage.db" list 2>&1); assert_eq $? 125
	assert_eq "$out" "corral: audit store $WS/garbage.db: cannot read: file is not a database; it is damaged or not a corral audit store; move it aside, or name another store with --db PATH"
	sqlite3 "$WS/other.db" "CREATE TABLE notes (t TEXT)"
	out=$("$CORRAL" audit --db "$WS/other.db" verify 2>&1); assert_eq $? 125
	assert_contains "$out" "not a corral audit store; or name another store with --db PATH"
	assert_not_contains "$out" "--audit"
	audit_tool "$WS/audit.db" bulk 2 >/dev/null || fail "bulk"
	sqlite3 "$WS/audit.db" "DELETE FROM chain"
	out=$(aud prune 2>&1); assert_eq $? 125
	assert_contains "$out" "the chain head row is missing"
	assert_contains "$out" "--db PATH"
	assert_not_contains "$out" "--audit"
	local sub
	for sub in list path; do
		out=$(env -u XDG_STATE_HOME -u HOME "$CORRAL" audit "$sub" 2>&1); assert_eq $? 125 "$sub"
		assert_contains "$out" "corral: audit: no default store"
		assert_contains "$out" "or give the store with --db PATH"
		assert_not_contains "$out" "--audit"
	done
}

# The documented serialization (docs/audit.md) reproduces every row_hash: an auditor can
# check an export without corral.
test_audit_hash_format_documented() {
	local db=$WS/audit.db
	audit_tool "$db" record --output --timeout --client-info '{"name":"x"}' >/dev/null
	audit_tool "$db" record --kind mcp_call --no-result --id m1 --cwd $'/odd\xffdir' >/dev/null
	audit_tool "$db" event preflight_denied "" '{"rule":"r"}' >/dev/null
	python3 - "$db" <<'PY' || fail "the documented hash does not match"
import hashlib, sqlite3, sys
db = sqlite3.connect(sys.argv[1]); db.text_factory = bytes
def enc(v):
    if v is None: return b"n;"
    if isinstance(v, int): return b"i%d;" % v
    return b"s%d:" % len(v) + v
rows = []
for table in ("executions", "events"):
    cur = db.execute(f"SELECT * FROM {table} ORDER BY seq")
    cols = [d[0] for d in cur.description]
    for r in cur:
        d = dict(zip(cols, r))
        hashed = [c for c in cols if c != "row_hash"]
        data = b"corral-audit-1\n" + table.encode() + b"\n" + b"".join(enc(d[c]) for c in hashed)
        assert hashlib.sha256(data).hexdigest().encode() == d["row_hash"], (table, d["seq"])
        rows.append((d["seq"], d["prev_hash"], d["row_hash"]))
rows.sort()
prev = b"0" * 64
for seq, p, h in rows:
    assert p == prev, seq
    prev = h
assert len(rows) == 4, rows  # a run and its timeout event, an MCP call, a denial
PY
}

# Real `corral run` records (not audit_tool's): the row a run writes carries kind run, client
# cli, argv, cwd, profile, policy hash, status, byte counts, usage, isolation and violations;
# a preflight denial, a command that is not found, a timeout, a memory kill (with a cgroup)
# and a Ctrl-C each add their security event. `aud` reads the rows back through corral audit.
test_audit_cli_run_records() {
	local db=$WS/audit.db
	mkdir -p "$WS/sub"
	cat >"$WS/deny.json" <<'J'
{"commands": {"deny": [{"match": "curl", "reason": "no downloads here"}]}}
J
	cr --audit "$db" -C sub -- echo hi >/dev/null || fail "the ok run failed"
	cr --audit "$db" --audit-output -c 'echo out; echo err >&2; exit 3' >/dev/null 2>&1; assert_eq $? 3
	cr --audit "$db" --profile "$WS/deny.json" -- curl http://example.com >/dev/null 2>&1; assert_eq $? 126
	cr --audit "$db" -- corral-no-such-command >/dev/null 2>&1; assert_eq $? 127
	cr --audit "$db" -t 300ms -- sleep 5 >/dev/null 2>&1; assert_eq $? 124
	# Ctrl-C: SIGINT to corral run cancels the sandbox, which ends in a result
	local m="$RANDOM$RANDOM"
	"$CORRAL" run -w "$WS" --audit "$db" -- sleep "30.$m" >/dev/null 2>&1 &
	local pid=$!
	# once the command runs (a fixed wait could send the signal before corral handles it)
	for _ in $(seq 1 200); do pgrep -f "^sleep 30.$m" >/dev/null && break; sleep 0.05; done
	pgrep -f "^sleep 30.$m" >/dev/null || fail "control: the sandboxed sleep did not start"
	kill -INT $pid
	wait $pid
	local rc=$?
	[ $rc -gt 128 ] || fail "Ctrl-C: exit status $rc, expected 128+N (the sandbox killed by the cancel)"
	local mem=0
	if [ "$(cr --audit off --json -- true | jget isolation.cgroup.applied)" = true ]; then
		mem=1
		cr --audit "$db" --memory 48M -- python3 -c 'b = b"x" * (256 << 20)' >/dev/null 2>&1
	fi
	DB=$db WS=$WS MEM=$mem python3 - "$CORRAL" <<'PY' || fail "the records do not match the runs (see above)"
import json, os, subprocess, sys
corral, db, ws = sys.argv[1], os.environ["DB"], os.path.realpath(os.environ["WS"])
out = subprocess.run([corral, "audit", "--db", db, "export"], capture_output=True, text=True, check=True).stdout
rows = [json.loads(l) for l in out.splitlines()]
ex = [r for r in rows if r["type"] == "execution"]
ev = [r for r in rows if r["type"] == "event"]
def events(e):
    return sorted(v["kind"] for v in ev if v["execution_id"] == e["id"])
want = 7 if os.environ["MEM"] == "1" else 6
assert len(ex) == want, [(e["argv"], e["command"]) for e in ex]
ok, fail3, denied, notfound, timeout, intr = ex[:6]
for e in ex:
    assert e["kind"] == "run" and e["client"] == "cli" and e["parent"] is None, e
    assert len(e["policy_hash"]) == 64 and all(c in "0123456789abcdef" for c in e["policy_hash"]), e
    assert e["started_at"] <= e["ended_at"] and e["duration_ms"] >= 0, e
    assert e["cwd"].startswith(ws), e["cwd"]
# the ok run: argv, cwd, status, byte counts, usage, isolation, no violations, no output
assert ok["argv"] == ["echo", "hi"] and ok["command"] is None, ok
assert ok["cwd"] == ws + "/sub", ok["cwd"]
assert ok["exit_code"] == 0 and ok["signal"] is None and not ok["timed_out"] and ok["limit_hit"] is None, ok
assert ok["stdout_bytes"] == 3 and ok["stderr_bytes"] == 0 and ok["stdout"] is None, ok
assert ok["max_rss_kb"] > 0 and ok["error"] is None, ok
assert ok["isolation"]["userns"]["applied"] in (True, False) and "seccomp" in ok["isolation"], ok["isolation"]
assert ok["violations"] == [] and ok["redactions"] == 0 and events(ok) == [], ok
assert ok["profile"] == "default" and denied["profile"] not in (None, "default"), (ok["profile"], denied["profile"])
# the same policy hashes the same; another profile does not
assert fail3["policy_hash"] == ok["policy_hash"] and denied["policy_hash"] != ok["policy_hash"]
# a shell string, exit 3, its output stored with --audit-output
assert fail3["command"] == "echo out; echo err >&2; exit 3" and fail3["argv"][:2] == ["/bin/sh", "-c"], fail3
assert fail3["exit_code"] == 3 and fail3["stdout"] == "out\n" and fail3["stderr"] == "err\n", fail3
# the preflight denial: nothing ran; the error, the violation and the event
assert denied["exit_code"] is None and denied["error"]["name"] == "denied by policy", denied
assert "no downloads here" in denied["error"]["message"], denied["error"]
assert any(v["kind"] in ("exec", "policy") for v in denied["violations"]), denied["violations"]
assert "preflight_denied" in events(denied), events(denied)
d = [v for v in ev if v["execution_id"] == denied["id"] and v["kind"] == "preflight_denied"][0]["detail"]
assert "no downloads here" in d["message"], d
# not found: a setup failure
assert notfound["error"]["name"] == "command not found" and events(notfound) == ["setup_failed"], (notfound["error"], events(notfound))
# the timeout
assert timeout["timed_out"] and timeout["limit_hit"] == "timeout" and timeout["signal"], timeout
assert "timeout" in events(timeout) and any(v["kind"] == "timeout" for v in timeout["violations"]), events(timeout)
assert 250 <= timeout["duration_ms"] < 5000, timeout["duration_ms"]
# Ctrl-C: cancelled, with the signal that ended it
assert intr["signal"] and not intr["timed_out"] and events(intr) == ["cancelled"], (intr, events(intr))
if os.environ["MEM"] == "1":
    mem = ex[6]
    assert mem["limit_hit"] == "memory" and mem["signal"] == 9, mem
    assert "oom_kill" in events(mem), events(mem)
print("ok: %d runs recorded%s" % (len(ex), "" if want == 7 else " (no cgroup: memory kill not checked)"))
PY
	aud verify >/dev/null || fail "$(aud verify)"
}

# A read-only store: `corral run` and `corral run --pipe` still run and print their output,
# and each says so in exactly one line on stderr (the store's path and the fix). The store
# is made read-only by its modes (an unprivileged user), or by a read-only bind mount of its
# directory (root, whom modes do not stop; corral needs its capabilities to map root).
test_audit_cli_readonly_store() {
	local dir=$WS/store db=$WS/store/audit.db out err
	mkdir -p "$dir"
	"$CORRAL" run -w "$WS" --audit "$db" -- true || fail "the first run failed"
	local before
	before=$("$CORRAL" audit --db "$db" verify --json | jget rows)
	if is_root; then
		mount --bind "$dir" "$dir" && mount -o remount,bind,ro "$dir" || fail "cannot bind-mount $dir read-only"
	else
		chmod 0444 "$dir"/audit.db*
		chmod 0555 "$dir"
	fi
	out=$("$CORRAL" run -w "$WS" --audit "$db" -- echo still-runs 2>"$WS/err1")
	local rc=$?
	err=$(cat "$WS/err1")
	assert_eq "$rc" 0 "corral run with a read-only store"
	assert_eq "$out" still-runs
	assert_eq "$(wc -l <"$WS/err1")" 1 "stderr lines: $err"
	assert_contains "$err" "$db"
	assert_contains "$err" "the run itself is not affected"
	out=$("$CORRAL" run -w "$WS" --audit "$db" --pipe 'echo piped' --pipe 'tr a-z A-Z' 2>"$WS/err2")
	rc=$?
	if is_root; then umount "$dir"; else chmod 0755 "$dir"; chmod 0644 "$dir"/audit.db*; fi
	err=$(cat "$WS/err2")
	assert_eq "$rc" 0 "corral run --pipe with a read-only store"
	assert_eq "$out" PIPED
	assert_eq "$(wc -l <"$WS/err2")" 1 "stderr lines: $err"
	assert_contains "$err" "$db"
	# nothing was written, and what was there still verifies
	assert_eq "$("$CORRAL" audit --db "$db" verify --json | jget rows)" "$before"
}

# Retention for the commands that record: --audit-max-rows and --audit-max-age apply at the
# run's own record (corral run, corral run --pipe, corral mcp); the chain still verifies from
# the moved anchor; bad values are refused with one line naming the flag.
test_audit_cli_retention_flags() {
	local db=$WS/audit.db i out
	for i in 1 2 3 4 5 6; do cr --audit "$db" -- true || fail "run $i"; done
	assert_eq "$(aud verify --json | jget rows)" 6
	cr --audit "$db" --audit-max-rows 2 -- echo newest >/dev/null || fail "the run with a row limit failed"
	out=$(aud verify --json) || fail "the pruned store does not verify: $out"
	assert_eq "$(jget rows <<<"$out")" 2
	assert_eq "$(aud list --json | jget 0.argv.1)" newest "the newest row must be kept"
	# by age: what is older than 1s goes, this run's record stays
	cr --audit "$db" --audit-max-rows 0 -- true
	sleep 1.2
	cr --audit "$db" --audit-max-age 1s -- echo young >/dev/null || fail "the run with an age limit failed"
	out=$(aud verify --json) || fail "the pruned store does not verify: $out"
	assert_eq "$(jget rows <<<"$out")" 1
	assert_eq "$(aud list --json | jget 0.argv.1)" young
	# a pipeline: its stages and its parent are within the limit
	cr --audit "$db" --audit-max-rows 3 --pipe 'echo a' --pipe 'cat' >/dev/null || fail "pipeline"
	assert_eq "$(aud verify --json | jget rows)" 3
	assert_eq "$(aud list --json --kind run | jget 0.command)" "echo a | cat"
	# the MCP server: applied at its first record
	for i in 1 2 3; do cr --audit "$db" -- true; done
	DB=$db mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, mcp_client as M
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--audit", os.environ["DB"], "--audit-max-rows", "1"]))
s.initialize()
assert s.call("run_command", {"command": "echo via-mcp"})["structuredContent"]["stdout"] == "via-mcp\n"
assert s.close() == 0
PY
	assert_eq "$(aud verify --json | jget rows)" 1
	assert_eq "$(aud list --json | jget 0.kind)" mcp_call
	# bad values: one line, the flag named, exit 125, nothing run
	local args
	for cmd in run mcp shell; do
		args=(-- true)
		[ $cmd = mcp ] && args=()
		out=$("$CORRAL" $cmd -w "$WS" --audit "$db" --audit-max-rows lots "${args[@]}" 2>&1 </dev/null)
		assert_eq $? 125 "$cmd --audit-max-rows lots"
		assert_eq "$(wc -l <<<"$out")" 1 "$cmd: $out"
		assert_contains "$out" "--audit-max-rows"
		out=$("$CORRAL" $cmd -w "$WS" --audit "$db" --audit-max-age soon "${args[@]}" 2>&1 </dev/null)
		assert_eq $? 125 "$cmd --audit-max-age soon"
		assert_contains "$out" "--audit-max-age"
	done
	for cmd in run mcp shell; do
		assert_contains "$("$CORRAL" $cmd --help)" "--audit-max-age DUR, --audit-max-rows N"
	done
}
