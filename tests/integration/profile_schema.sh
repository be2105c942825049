# docs/profile.schema.json against the profile parser (src/profile.c): the schema is a valid
# draft 2020-12 schema, every profile in docs/examples and every example inside the schema
# validates, and documents that the parser rejects (the same cases as tests/unit/test_profile.c)
# are rejected by the schema too, so that the two stay in step. The unit tests check that the
# parser accepts every file in docs/examples.
#
# Needs python3 with the jsonschema module; without it the tests SKIP.

profile_schema_need() {
	[ -f "${DOCS:?DOCS is set by tests/run.sh}/profile.schema.json" ] ||
		fail "schema not found: $DOCS/profile.schema.json"
	python3 -c 'from jsonschema import Draft202012Validator' 2>/dev/null ||
		skip "python3 has no jsonschema module (apt-get install python3-jsonschema)"
}

test_profile_schema_examples() {
	profile_schema_need
	python3 - "$DOCS/profile.schema.json" "$DOCS"/examples/*.json <<'PY'
import json, sys
from jsonschema import Draft202012Validator
schema = json.load(open(sys.argv[1]))
Draft202012Validator.check_schema(schema)
v = Draft202012Validator(schema)
bad = 0
docs = [(f"schema example {i}", d) for i, d in enumerate(schema.get("examples", []))]
docs += [(p, json.load(open(p))) for p in sys.argv[2:]]
if len(docs) < 4:
    sys.exit(f"expected examples in the schema and in docs/examples, found {len(docs)}")
for name, doc in docs:
    for e in v.iter_errors(doc):
        bad += 1
        print(f"{name}: {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

test_profile_schema_rejects() {
	profile_schema_need
	python3 - "$DOCS/profile.schema.json" <<'PY'
import json, sys
from jsonschema import Draft202012Validator
v = Draft202012Validator(json.load(open(sys.argv[1])))
rejected = [
    {"netwrok": "none"}, {"limits": {"memroy": "1G"}}, {"filesystem": {"read": ["a", 42]}},
    {"limits": {"memory": "12Q"}}, {"limits": {"memory": 512}}, {"limits": {"nofile": 8}},
    {"limits": {"output": 0}}, {"limits": {"tmpfs": 0}}, {"limits": {"pids": "128"}},
    {"limits": {"timeout": -1}}, {"limits": {"timeout": "5x"}}, {"limits": {"kill_after": 7200}},
    {"limits": {"cpu": 0.5}}, {"mode": "strict"}, {"network": "hots"},
    {"filesystem": {"workspace": True}}, {"filesystem": {"etc": "none"}},
    {"filesystem": {"protected": ["a/../b"]}}, {"filesystem": {"protected": ["/etc"]}},
    {"filesystem": {"protected": ["~/.bashrc"]}}, {"filesystem": {"deny": [""]}},
    {"filesystem": {"write": ["~bob/x"]}}, {"env": {"allow": ["LC-*"]}},
    {"env": {"set": {"1BAD": "x"}}}, {"env": {"set": {"N": 1}}}, {"env": {"deny_replace": "yes"}},
    {"commands": {"allow": ["bin/git"]}}, {"commands": {"deny": [{"match": "rm -rf"}]}},
    {"commands": {"deny": [{"reason": "x"}]}}, {"commands": {"deny": [{"match": "x", "reason": 5}]}},
    {"commands": {"deny": [True]}}, {"commands": {"deny": [{"match": "b", "reson": "x"}]}},
    [{}], "default", {"description": None},
    {"redact": ["x"]}, {"redact": {"strings": "secret"}}, {"redact": {"strings": ["abc"]}},
    {"redact": {"strings": ["x" * 4097]}}, {"redact": {"strings": [7]}},
    {"redact": {"mode": "flagg"}}, {"redact": {"string": []}},
]
accepted = [
    {}, {"commands": {"allow": []}}, {"filesystem": {"protected": []}},
    {"limits": {"memory": 1e9, "fsize": 0, "timeout": 0, "cpu": 5, "pids": 0}},
    {"limits": {"timeout": 1.5, "kill_after": "250ms", "memory": "512M", "cpu": "2m",
                "nofile": 64, "fsize": 1048576, "tmpfs": "1G", "output": "64k"}},
    {"filesystem": {"read": ["~", "~/x"]}}, {"env": {"set": {"A": "x", "_X1": ""}}},
    {"redact": {}}, {"redact": {"strings": [], "mode": "off"}},
    {"redact": {"strings": ["abcd", "x" * 4096], "mode": "flag"}}, {"redact": {"mode": "redact"}},
]
bad = 0
for doc in rejected:
    if v.is_valid(doc):
        bad += 1
        print(f"the schema accepts {json.dumps(doc)}, which the parser rejects", file=sys.stderr)
for doc in accepted:
    for e in v.iter_errors(doc):
        bad += 1
        print(f"the schema rejects {json.dumps(doc)}, which the parser accepts: {e.message}", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

# ---- the redact section in real runs (issue 7: "any strings the profile adds") ----------

# The secret is printed in two pieces, so that it appears whole only in the command's output,
# never in corral's own argv or the recorded command line.
profile_redact_cmd='printf "%s%s\n" wpe-custom- Zq7x-private; printf "err %s%s\n" wpe-custom- Zq7x-private >&2'
profile_redact_secret=wpe-custom-Zq7x-private

test_profile_schema_redact_strings_in_run() {
	local p=$WS/../redact-$$.json db=$WS/../redact-$$.db out
	printf '{"redact": {"strings": ["%s", "never-printed-xyz"]}}' "$profile_redact_secret" >"$p"
	# text: live stdout and stderr
	out=$("$CORRAL" run -w "$WS" --profile "$p" --audit "$db" --audit-output -c "$profile_redact_cmd" 2>&1)
	local rc=$?
	rm -f "$p"
	assert_eq $rc 0
	assert_contains "$out" "[REDACTED:custom]"
	assert_contains "$out" "err [REDACTED:custom]"
	assert_not_contains "$out" "$profile_redact_secret"
	# --json on stdout: the captured output, the count and the kind
	printf '{"redact": {"strings": ["%s"]}}' "$profile_redact_secret" >"$p"
	out=$("$CORRAL" run -w "$WS" --profile "$p" --audit off --json -c "$profile_redact_cmd" 2>/dev/null)
	rm -f "$p"
	assert_not_contains "$out" "$profile_redact_secret"
	assert_eq "$(jget stdout <<<"$out")" "[REDACTED:custom]"
	assert_eq "$(jget redactions.count <<<"$out")" 2
	assert_eq "$(jget redactions.kinds.custom <<<"$out")" 2
	# the audit store (with --audit-output) holds the redacted output only
	out=$("$CORRAL" audit --db "$db" export --json)
	rm -f "$db" "$db"-*
	assert_contains "$out" "REDACTED:custom"
	assert_not_contains "$out" "$profile_redact_secret"
}

test_profile_schema_redact_mode_and_flag_override() {
	local p=$WS/../redact-mode-$$.json out
	# control: without the profile the string is not a secret to corral (the test can fail)
	out=$("$CORRAL" run -w "$WS" --audit off -c "$profile_redact_cmd" 2>&1)
	assert_contains "$out" "$profile_redact_secret"
	# the profile's mode flag: reported, not replaced
	printf '{"redact": {"strings": ["%s"], "mode": "flag"}}' "$profile_redact_secret" >"$p"
	out=$("$CORRAL" run -w "$WS" --profile "$p" --audit off --json -c "$profile_redact_cmd" 2>/dev/null)
	assert_eq "$(jget redactions.mode <<<"$out")" flag
	assert_eq "$(jget redactions.kinds.custom <<<"$out")" 2
	assert_contains "$(jget stdout <<<"$out")" "$profile_redact_secret"
	# --redact on the command line overrides the profile's mode; the strings stay
	out=$("$CORRAL" run -w "$WS" --profile "$p" --redact redact --audit off --json -c "$profile_redact_cmd" 2>/dev/null)
	assert_eq "$(jget redactions.mode <<<"$out")" redact
	assert_not_contains "$out" "$profile_redact_secret"
	out=$("$CORRAL" run -w "$WS" --profile "$p" --redact off --audit off --json -c "$profile_redact_cmd" 2>/dev/null)
	assert_eq "$(jget redactions.mode <<<"$out")" off
	assert_contains "$(jget stdout <<<"$out")" "$profile_redact_secret"
	# a bad section is refused with its position before anything runs
	printf '{"redact": {\n  "strings": ["abc"]}}' >"$p"
	out=$("$CORRAL" run -w "$WS" --profile "$p" -- true 2>&1)
	local rc=$?
	rm -f "$p"
	assert_eq $rc 125
	assert_contains "$out" "redact-mode-$$.json:2:15: redact.strings[0]: expected a string of 4 to 4096 bytes"
}

# ---- validate against a workspace, explain's exit status (G13) ---------------------------

test_profile_schema_validate_workspace_checks() {
	local p=$WS/../val-$$.json out rc
	mkdir -p "$WS/ok" "$WS/sub"
	ln -s /tmp "$WS/lnk"
	printf '{\n  "filesystem": {\n    "write": ["/",\n      "missing-dir"],\n    "read": ["ok", "lnk/x"],\n    "deny": ["nothere"],\n    "protected": [".x", "lnk"]\n  }\n}\n' >"$p"
	out=$("$CORRAL" policy validate -w "$WS" "$p" 2>&1); rc=$?
	assert_eq $rc 125
	assert_contains "$out" "val-$$.json:3:15: filesystem.write[0]: filesystem.write path / resolves to /"
	assert_contains "$out" "val-$$.json:4:7: filesystem.write[1]: filesystem.write path missing-dir"
	assert_contains "$out" "No such file or directory"
	assert_contains "$out" "val-$$.json:5:20: filesystem.read[1]: filesystem.read path lnk/x goes through a symlink inside the workspace"
	assert_contains "$out" "val-$$.json:7:25: filesystem.protected[1]: protected path $WS/lnk is a symlink"
	# the good entries (an existing read path, a missing deny path, a missing protected path)
	# are not reported: exactly four errors
	assert_eq "$(grep -c "val-$$.json:" <<<"$out")" 4
	assert_not_contains "$out" "valid profile"
	# --syntax-only: the format alone
	out=$("$CORRAL" policy validate --syntax-only "$p" 2>&1); rc=$?
	assert_eq $rc 0
	assert_contains "$out" "valid profile (syntax only)"
	# the same profile in a workspace where everything resolves: valid. The default is the
	# current directory.
	printf '{"filesystem": {"write": ["sub"], "read": ["ok"], "protected": [".x"]}}' >"$p"
	out=$(cd "$WS" && "$CORRAL" policy validate "$p" 2>&1); rc=$?
	assert_eq $rc 0
	assert_contains "$out" "valid profile for the workspace $WS"
	out=$(cd "$WS/ok" && "$CORRAL" policy validate "$p" 2>&1); rc=$?
	assert_eq $rc 125
	assert_contains "$out" "filesystem.write[0]: filesystem.write path sub ($WS/ok/sub)"
	# what only the whole profile meets: a default protected path that is a symlink
	ln -s /etc "$WS/.bashrc"
	printf '{"description": "x"}' >"$p"
	out=$("$CORRAL" policy validate -w "$WS" "$p" 2>&1); rc=$?
	assert_eq $rc 125
	assert_contains "$out" "val-$$.json: protected path $WS/.bashrc is a symlink"
	# and a run refuses exactly that too (a policy denial: 126)
	out=$("$CORRAL" run -w "$WS" --profile "$p" -- true 2>&1); rc=$?
	assert_eq $rc 126
	assert_contains "$out" ".bashrc is a symlink"
	rm -f "$WS/.bashrc"
	# a workspace that does not exist is the caller's error
	out=$("$CORRAL" policy validate -w "$WS/nope" "$p" 2>&1); rc=$?
	rm -f "$p"
	assert_eq $rc 125
	assert_contains "$out" "-w $WS/nope"
}

test_profile_schema_validate_matches_run() {
	# every entry validate rejects, a run rejects too, and the reverse for a good profile
	local p=$WS/../vm-$$.json out rc
	printf '{"filesystem": {"write": ["/"]}}' >"$p"
	"$CORRAL" policy validate -w "$WS" "$p" >/dev/null 2>&1; assert_eq $? 125
	out=$("$CORRAL" run -w "$WS" --profile "$p" -- true 2>&1); rc=$?
	assert_eq $rc 125
	assert_contains "$out" "resolves to /"
	# explain prints the plan with the error and exits 125 (text and JSON)
	out=$("$CORRAL" policy explain -w "$WS" --profile "$p" 2>&1); rc=$?
	assert_eq $rc 125
	assert_contains "$out" "error:"
	out=$("$CORRAL" policy explain -w "$WS" --profile "$p" --json 2>/dev/null); rc=$?
	assert_eq $rc 125
	assert_contains "$(jget error <<<"$out")" "resolves to /"
	out=$("$CORRAL" run --dry-run -w "$WS" --profile "$p" -- true 2>&1); rc=$?
	assert_eq $rc 125
	printf '{"filesystem": {"read": ["/usr/share"]}}' >"$p"
	"$CORRAL" policy validate -w "$WS" "$p" >/dev/null; assert_eq $? 0
	"$CORRAL" run -w "$WS" --profile "$p" -- true; assert_eq $? 0
	"$CORRAL" policy explain -w "$WS" --profile "$p" >/dev/null; assert_eq $? 0
	rm -f "$p"
}

# ---- explain's seccomp summary names the foreign ABIs once ------------------------------

test_profile_schema_explain_seccomp_once() {
	local out
	out=$("$CORRAL" policy explain -w "$WS") || fail "explain failed: $out"
	grep -q '^seccomp:' <<<"$out" || skip "seccomp is not applied on this host"
	assert_eq "$(grep -ci 'i386' <<<"$out")" 1
	out=$("$CORRAL" policy explain -w "$WS" --json)
	assert_eq "$(grep -ci 'i386' <<<"$out")" 1
	assert_contains "$(jget seccomp.foreign_abis <<<"$out")" "kill the process"
}
