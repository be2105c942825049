# Denial reports (issue: audit/redaction/denials): each kind produced by a real sandboxed run,
# and none for a clean run or for an error the policy does not explain.

vkinds() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join(v["kind"]+":"+v["object"]+":"+str(v["inferred"]) for v in d["violations"]))'; }

test_viol_clean_run_has_none() {
	local out
	out=$(cr --json -c 'echo fine; ls / >/dev/null')
	assert_eq "$(vkinds <<<"$out")" ""
	out=$(cr --json -c 'echo "cat: ./x: Permission denied" >&2; mkdir -p sub; exit 1')
	assert_eq "$(vkinds <<<"$out")" "" "an error the policy does not explain must not be reported"
}

test_viol_fs_write() {
	local out
	out=$(cr --json -c 'echo x > /usr/share/evil')
	assert_contains "$(vkinds <<<"$out")" "fs_write:/usr/share/evil:True"
	assert_contains "$(jget violations.0.hint <<<"$out")" "workspace"
	mkdir -p "$WS/.git"
	out=$(cr --json -c 'echo x > .git/config')
	assert_contains "$(vkinds <<<"$out")" "fs_write:$WS/.git/config:True"
	assert_contains "$(jget violations.0.rule <<<"$out")" "protected"
}

test_viol_fs_read() {
	mkdir -p "$WS/secret"; echo s >"$WS/secret/k"
	local out
	out=$(cr --json --hide secret -c 'cat secret/k')
	assert_contains "$(vkinds <<<"$out")" "fs_read:$WS/secret/k:True"
	assert_contains "$(jget violations.0.rule <<<"$out")" "filesystem.deny"
}

test_viol_network() {
	local out
	out=$(cr --json -- python3 -c 'import urllib.request; urllib.request.urlopen("http://pypi.org/simple", timeout=5)')
	local k; k=$(vkinds <<<"$out")
	assert_contains "$k" "network:"
	assert_contains "$(jget violations.0.hint <<<"$out")" "Network access is disabled"
}

test_viol_exec_allowlist() {
	cat >"$WS/p.json" <<'J'
{"commands": {"allow": ["sh", "echo"]}}
J
	local out
	out=$(cr --json --profile "$WS/p.json" -c '/usr/bin/touch x')
	assert_contains "$(vkinds <<<"$out")" "exec:/usr/bin/touch:True"
	# preflight: observed, not inferred
	out=$(cr --json --profile "$WS/p.json" -- touch x)
	assert_contains "$(vkinds <<<"$out")" "exec:touch:False"
	assert_eq "$(jget error.code <<<"$out")" -8
}

test_viol_syscall() {
	local out
	out=$(cr --json -- unshare -U true)
	assert_contains "$(vkinds <<<"$out")" "syscall:unshare:True"
}

test_viol_limits_and_timeout() {
	local out
	out=$(cr --json -t 0.3 -- sleep 5)
	assert_contains "$(vkinds <<<"$out")" "timeout:"
	assert_contains "$(vkinds <<<"$out")" ":False"
	out=$(cr --json --cpu 1 -c 'while :; do :; done')
	assert_contains "$(vkinds <<<"$out")" "limit:1 s:False"
	out=$(cr --json --memory 64M -- python3 -c 'x = bytearray(400 << 20)')
	if [ "$(jget isolation.cgroup.applied <<<"$out")" = true ]; then
		assert_contains "$(vkinds <<<"$out")" "limit:67108864 bytes:False"
	else
		# RLIMIT_DATA: the program failed to allocate; nothing was killed: no claim
		assert_not_contains "$(vkinds <<<"$out")" "limit:"
	fi
}

test_viol_cli_prints_hints() {
	local err
	err=$(cr -c 'echo x > /usr/share/evil' 2>&1 >/dev/null)
	assert_contains "$err" "does not allow writing /usr/share/evil"
	err=$(cr --quiet -c 'echo x > /usr/share/evil' 2>&1 >/dev/null)
	assert_not_contains "$err" "does not allow"
}
