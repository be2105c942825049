# shellcheck shell=bash
# The result JSON of `corral run --json`, validated against docs/result.schema.json with a
# strict JSON Schema (draft 2020-12) validator, for every shape of result the CLI produces:
# success, non-zero exit, signal, timeout, not found / not executable, truncated output,
# binary output, mode none, a setup failure and the auto fallback. One test feeds broken
# documents to the same validator to prove that the check can fail.
#
# Needs python3 with the jsonschema module (Debian: python3-jsonschema); without it the
# tests SKIP, which CORRAL_MUST_WORK turns into a failure.

schema_file() { echo "${DOCS:?DOCS is set by tests/run.sh}/result.schema.json"; }

schema_need() {
	[ -f "$(schema_file)" ] || fail "schema not found: $(schema_file)"
	python3 -c 'from jsonschema import Draft202012Validator' 2>/dev/null ||
		skip "python3 has no jsonschema module (apt-get install python3-jsonschema)"
}

# schema_py MODE SCHEMA FILE...
#   validate: each FILE must hold exactly one line, a JSON object valid against SCHEMA.
#   broken:   FILE is a valid result; every mutation of it listed below must be rejected.
schema_py() {
	python3 - "$@" <<'PY'
import copy, json, sys
from jsonschema import Draft202012Validator

mode, schema_path, files = sys.argv[1], sys.argv[2], sys.argv[3:]
schema = json.load(open(schema_path))
Draft202012Validator.check_schema(schema)  # the schema itself must be valid 2020-12
validator = Draft202012Validator(schema)   # no format checker: formats are not needed

def errors(doc):
    return sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))

def load(path):
    text = open(path, encoding="utf-8", newline="").read()
    # split on "\n" only: U+0085 and U+2028 may stand unescaped inside JSON strings
    lines = text.split("\n")
    if len(lines) != 2 or lines[1] != "":
        sys.exit(f"{path}: expected one line of JSON ending in a newline, got {text[:300]!r}")
    return json.loads(lines[0])

if mode == "validate":
    bad = 0
    for path in files:
        doc = load(path)
        for e in errors(doc):
            bad += 1
            where = "/".join(str(p) for p in e.absolute_path) or "(root)"
            print(f"{path}: {where}: {e.message}", file=sys.stderr)
    sys.exit(1 if bad else 0)

if mode == "broken":
    doc = load(files[0])
    if errors(doc):
        sys.exit("the unmodified document must be valid")

    def setk(k, v):
        def f(d): d[k] = v
        return f
    def delk(k):
        def f(d): del d[k]
        return f
    def layer(name, v):
        def f(d): d["isolation"][name] = v
        return f
    mutations = {
        "exit_code as a string": setk("exit_code", "0"),
        "exit_code out of range": setk("exit_code", 256),
        "missing stdout_bytes": delk("stdout_bytes"),
        "unknown top-level key": setk("exit_status", 0),
        "negative duration": setk("duration_ms", -1),
        "unknown limit": setk("limit", "disk"),
        "unknown mode": setk("mode", "host"),
        "timed_out as a string": setk("timed_out", "false"),
        "id not a uuid": setk("id", "run-1"),
        "argv as a string": setk("argv", "true"),
        "usage with an extra key": lambda d: d["usage"].update(wall_ms=1),
        "usage missing max_rss_kb": lambda d: d["usage"].pop("max_rss_kb"),
        "unknown isolation layer": layer("apparmor", {"applied": True, "detail": ""}),
        "layer without detail": layer("seccomp", {"applied": True}),
        "layer applied as a string": layer("seccomp", {"applied": "yes", "detail": ""}),
        "error without step": setk("error", {"code": -4, "name": "x", "errno": 0,
                                             "message": "m"}),
        "error with a positive code": setk("error", {"code": 4, "name": "x", "errno": 0,
                                                     "step": "", "message": "m"}),
        "signal_name without signal": setk("signal_name", "KILL"),
        "signal without signal_name": setk("signal", 9),
        "timed_out without limit timeout": setk("timed_out", True),
        "limit timeout without timed_out": setk("limit", "timeout"),
        "NUL in stdout": setk("stdout", "a\u0000b"),
    }
    accepted = []
    for name, mutate in mutations.items():
        d = copy.deepcopy(doc)
        mutate(d)
        if not errors(d):
            accepted.append(name)
    if accepted:
        sys.exit("the schema accepted broken documents: " + "; ".join(accepted))
    sys.exit(0)

sys.exit(f"unknown mode {mode}")
PY
}

# schema_run NAME EXPECTED_EXIT [corral run options and command...]
# Runs `corral run --json` in the test workspace, checks the exit status, validates the
# result and leaves it in $WS/.results/NAME.json for field checks.
schema_run() {
	local name=$1 want=$2 rc
	shift 2
	mkdir -p "$WS/.results"
	local out="$WS/.results/$name.json"
	cr --json "$@" >"$out" 2>"$out.err"
	rc=$?
	[ "$rc" = "$want" ] || fail "$name: exit status $rc, expected $want: $(head -c 600 "$out") $(head -c 300 "$out.err")"
	schema_py validate "$(schema_file)" "$out" || fail "$name: the result does not match the schema: $(head -c 600 "$out")"
}

# Field of a stored result.
sget() { jget "$2" <"$WS/.results/$1.json"; }

test_schema_success_and_exit() {
	schema_need
	schema_run ok 0 -- true
	assert_eq "$(sget ok exit_code)" 0
	assert_eq "$(sget ok signal)" null
	assert_eq "$(sget ok command)" null
	assert_eq "$(sget ok error)" null
	assert_eq "$(sget ok argv.0)" true
	assert_eq "$(sget ok isolation.seccomp.applied)" true
	schema_run exit3 3 -- sh -c 'echo out; echo err >&2; exit 3'
	assert_eq "$(sget exit3 exit_code)" 3
	assert_eq "$(sget exit3 stdout)" out
	assert_eq "$(sget exit3 stderr_bytes)" 4
	# shellcheck disable=SC2016 # expanded by the sandbox's shell
	schema_run shell 0 -c 'echo "$((6 * 7))"'
	# shellcheck disable=SC2016
	assert_eq "$(sget shell command)" 'echo "$((6 * 7))"'
	assert_eq "$(sget shell argv.0)" /bin/sh
	assert_eq "$(sget shell stdout)" 42
}

test_schema_signal() {
	schema_need
	schema_run sig 137 -- sh -c 'kill -KILL $$'
	assert_eq "$(sget sig exit_code)" null
	assert_eq "$(sget sig signal)" 9
	assert_eq "$(sget sig signal_name)" KILL
	assert_eq "$(sget sig limit)" null
}

test_schema_timeout() {
	schema_need
	schema_run to 124 -t 0.3 -- sleep 10
	assert_eq "$(sget to timed_out)" true
	assert_eq "$(sget to limit)" timeout
	assert_eq "$(sget to exit_code)" null
}

test_schema_not_found_and_not_executable() {
	schema_need
	schema_run nf 127 -- corral-no-such-command
	assert_eq "$(sget nf error.code)" -6
	assert_eq "$(sget nf error.step)" exec
	printf 'not a program\n' >"$WS/data.txt"
	chmod 0644 "$WS/data.txt"
	schema_run nx 126 -- "$WS/data.txt"
	assert_eq "$(sget nx error.code)" -7
}

test_schema_truncated_output() {
	schema_need
	schema_run trunc 0 --max-output 100 -- seq 1 2000
	assert_eq "$(sget trunc stdout_truncated)" true
	assert_eq "$(sget trunc stderr_truncated)" false
	assert_eq "$(sget trunc stdout_bytes)" "$(seq 1 2000 | wc -c)"
	assert_contains "$(sget trunc stdout)" "bytes dropped"
}

test_schema_binary_output() {
	schema_need
	# invalid UTF-8 (ff fe), a NUL, a truncated 3-byte sequence, then valid multi-byte text
	schema_run bin 0 -- printf '\377\376abc\000x\342\202 \303\251\n'
	assert_eq "$(sget bin stdout_bytes)" 13
	assert_contains "$(sget bin stdout)" $'\xef\xbf\xbd'
	assert_contains "$(sget bin stdout)" 'é'
	schema_run binerr 0 -c 'head -c 4096 /dev/urandom >&2'
	assert_eq "$(sget binerr stderr_bytes)" 4096
}

test_schema_mode_none() {
	schema_need
	schema_run none 0 --mode none -- true
	assert_eq "$(sget none mode)" none
	assert_eq "$(sget none isolation.userns.applied)" false
	assert_eq "$(sget none isolation.rlimits.applied)" true
}

test_schema_setup_failure() {
	schema_need
	# a layer missing in mode required: nothing starts, and the error says which layer
	CORRAL_TEST_DISABLE=userns schema_run fail 125 -- true
	assert_eq "$(sget fail error.code)" -5
	assert_eq "$(sget fail error.step)" userns
	assert_eq "$(sget fail exit_code)" null
	CORRAL_TEST_DISABLE=userns schema_run auto 0 --mode auto -- true
	assert_eq "$(sget auto mode)" auto
	assert_eq "$(sget auto isolation.userns.applied)" false
}

test_schema_limit_cpu() {
	schema_need
	schema_run cpu 152 --cpu 1 -- sh -c 'while :; do :; done'
	assert_eq "$(sget cpu limit)" cpu
	assert_eq "$(sget cpu signal_name)" XCPU
}

# The validator is not a rubber stamp: broken documents are rejected.
test_schema_rejects_broken_documents() {
	schema_need
	schema_run base 0 -- true
	schema_py broken "$(schema_file)" "$WS/.results/base.json" || fail "broken documents were not all rejected"
	printf '{"id": 1}\n' >"$WS/.results/bad.json"
	if schema_py validate "$(schema_file)" "$WS/.results/bad.json" 2>/dev/null; then
		fail "a document with id 1 and no other field passed validation"
	fi
}
