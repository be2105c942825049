# shellcheck shell=bash
# Pipelines (corral run --pipe A --pipe B ...): each stage in a sandbox of its own, connected by
# pipes. Judged by host-side evidence: the supervisor's own memory and read counters while
# 100 MB flow through, surviving processes found by a unique marker, timing, exit statuses
# compared with bash's pipefail, and the JSON result validated against
# docs/pipeline.schema.json.

# corral run in the test workspace (pipelines are a CLI feature here, not through MCP)
pl() { "$CORRAL" run -w "$WS" "$@"; }

pl_schema_need() {
	[ -f "$DOCS/pipeline.schema.json" ] || fail "schema not found: $DOCS/pipeline.schema.json"
	python3 -c 'from jsonschema import Draft202012Validator' 2>/dev/null ||
		skip "python3 has no jsonschema module (apt-get install python3-jsonschema)"
}

# pl_schema_py MODE FILE...
#   validate: each FILE holds one line, a JSON object valid against docs/pipeline.schema.json
#             (whose stage items refer to docs/result.schema.json)
#   broken:   FILE is a valid pipeline result; every mutation listed below must be rejected
pl_schema_py() {
	python3 - "$DOCS" "$@" <<'PY'
import copy, json, sys
from jsonschema import Draft202012Validator

docs, mode, files = sys.argv[1], sys.argv[2], sys.argv[3:]
schema = json.load(open(docs + "/pipeline.schema.json"))
result_schema = json.load(open(docs + "/result.schema.json"))
Draft202012Validator.check_schema(schema)
try:  # jsonschema >= 4.18
    from referencing import Registry, Resource
    registry = Registry().with_resource("result.schema.json",
                                        Resource.from_contents(result_schema))
    validator = Draft202012Validator(schema, registry=registry)
except ImportError:  # older jsonschema (Debian's python3-jsonschema)
    from jsonschema import RefResolver
    resolver = RefResolver(base_uri="", referrer=schema,
                           store={"result.schema.json": result_schema})
    validator = Draft202012Validator(schema, resolver=resolver)

def errors(doc):
    return list(validator.iter_errors(doc))

def load(path):
    text = open(path, encoding="utf-8", newline="").read()
    lines = text.split("\n")
    if len(lines) != 2 or lines[1] != "":
        sys.exit(f"{path}: expected one line of JSON ending in a newline, got {text[:300]!r}")
    return json.loads(lines[0])

if mode == "validate":
    bad = 0
    for path in files:
        for e in errors(load(path)):
            bad += 1
            where = "/".join(str(p) for p in e.absolute_path) or "(root)"
            print(f"{path}: {where}: {e.message[:300]}", file=sys.stderr)
    sys.exit(1 if bad else 0)

if mode == "broken":
    doc = load(files[0])
    if errors(doc):
        sys.exit("the unmodified document must be valid")
    def setk(k, v):
        def f(d): d[k] = v
        return f
    def stage(k, v):
        def f(d): d["stages"][0][k] = v
        return f
    mutations = {
        "pipeline false": setk("pipeline", False),
        "exit_code as a string": setk("exit_code", "0"),
        "exit_code null": setk("exit_code", None),
        "failed_stage set with exit_code 0": setk("failed_stage", 0),
        "negative failed_stage": setk("failed_stage", -1),
        "unknown top-level key": setk("status", 0),
        "missing stages": lambda d: d.pop("stages"),
        "one stage": lambda d: d["stages"].pop(),
        "stopped_stages with a string": setk("stopped_stages", ["0"]),
        "stage with an unknown key": stage("pipe", 1),
        "stage exit_code out of range": stage("exit_code", 300),
        "stage without usage": lambda d: d["stages"][0].pop("usage"),
        "error without message": setk("error", {"code": -6, "name": "x", "errno": 0,
                                                "step": "exec"}),
        "no stages without an error": setk("stages", []),
        "id not a uuid": setk("id", "pipe-1"),
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

# pl_json NAME EXPECTED_EXIT [corral run options...]: run with --json, check the status,
# validate the result and keep it in $WS/.results/NAME.json.
pl_json() {
	local name=$1 want=$2 rc
	shift 2
	mkdir -p "$WS/.results"
	local out="$WS/.results/$name.json"
	pl --json "$@" >"$out" 2>"$out.err"
	rc=$?
	[ "$rc" = "$want" ] || fail "$name: exit status $rc, expected $want: $(head -c 600 "$out") $(head -c 300 "$out.err")"
	pl_schema_py validate "$out" || fail "$name: the result does not match the schema: $(head -c 600 "$out")"
}
pget() { jget "$2" <"$WS/.results/$1.json"; }

# The pipeline's output goes through corral; when corral's reader goes away, the last stage
# gets SIGPIPE on its next write, as in a shell pipeline, instead of running on (and the
# stages before it with it) until the timeout. Host-side: it ends well before the timeout,
# with the pipefail status 141, and no stage survives.
test_pipeline_reader_gone_sigpipe() {
	local mark="corral-plyes-$RANDOM$RANDOM" start end rc err
	start=$(date +%s%N)
	err=$( (pl --timeout 60 --pipe "bash -c 'exec -a $mark yes'" --pipe cat | head -1 >"$WS/.first") 2>&1)
	rc=$?
	end=$(date +%s%N)
	assert_eq "$(cat "$WS/.first")" y
	[ $(((end - start) / 1000000)) -lt 30000 ] ||
		fail "the pipeline took $(((end - start) / 1000000)) ms: its stages ran on"
	assert_contains "$err" "SIGPIPE, corral's stdout was closed"
	assert_no_survivor "$mark"
	"$CORRAL" run -w "$WS" --timeout 60 --pipe "bash -c 'exec -a $mark yes'" --pipe cat | head -1 >/dev/null
	assert_eq "${PIPESTATUS[0]}" 141
	assert_no_survivor "$mark"
}

test_pipeline_three_stages() {
	local out
	out=$(pl --pipe 'printf "b\na\nc\n"' --pipe sort --pipe 'tr a-z A-Z')
	assert_eq $? 0
	assert_eq "$out" "$(printf 'A\nB\nC')"
	pl_schema_need
	pl_json three 0 --pipe 'printf "b\na\nc\n"; echo e1 >&2' --pipe 'sort; echo e2 >&2' --pipe 'tr a-z A-Z'
	assert_eq "$(pget three pipeline)" true
	assert_eq "$(pget three exit_code)" 0
	assert_eq "$(pget three failed_stage)" null
	assert_eq "$(pget three stdout)" "$(printf 'A\nB\nC\n')"
	assert_eq "$(pget three stdout_bytes)" 6
	assert_eq "$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["stages"]))' <"$WS/.results/three.json")" 3
	# intermediate stdout went to the next stage, not through corral; stderr is each stage's
	assert_eq "$(pget three stages.0.stdout_bytes)" 0
	assert_eq "$(pget three stages.0.stderr)" "e1"
	assert_eq "$(pget three stages.1.stderr)" "e2"
	assert_eq "$(pget three stages.2.command)" "tr a-z A-Z"
	# each stage had a sandbox of its own
	assert_eq "$(pget three stages.1.isolation.pidns.applied)" true
	[ "$(pget three stages.0.id)" != "$(pget three stages.1.id)" ] || fail "stages share an id"
}

# 100 MB through three sandboxes: the bytes go kernel to kernel, so the supervisor's memory
# stays flat and it reads (almost) none of them.
test_pipeline_100mb_flat_memory() {
	local report
	report=$(python3 - "$CORRAL" "$WS" <<'PY'
import os, sys, subprocess
corral, ws = sys.argv[1], sys.argv[2]
def run(mb):
    # Each stage closes its stdout when done and stays alive a moment: when the count
    # arrives no sandbox has been reaped yet, so corral's read counter (which absorbs its
    # reaped children's) is its own.
    p = subprocess.Popen([corral, "run", "-w", ws, "-t", "120",
                          "--pipe", "head -c %dM /dev/zero; exec >&-; sleep 1" % mb,
                          "--pipe", "cat; exec >&-; sleep 1",
                          "--pipe", "wc -c; exec >&-; sleep 1"], stdout=subprocess.PIPE)
    count = p.stdout.readline().strip().decode()
    hwm = rchar = -1
    try:
        for line in open("/proc/%d/status" % p.pid):
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
        for line in open("/proc/%d/io" % p.pid):
            if line.startswith("rchar:"):
                rchar = int(line.split()[1])
    except OSError:
        pass
    p.stdout.read()
    _, st, ru = os.wait4(p.pid, 0)
    return count, os.waitstatus_to_exitcode(st), hwm, rchar, ru.ru_maxrss
small = run(1)
big = run(100)
print(*small, *big)
PY
)
	# shellcheck disable=SC2086
	set -- $report
	local s_count=$1 s_rc=$2 s_hwm=$3 s_rchar=$4 s_max=$5 b_count=$6 b_rc=$7 b_hwm=$8 b_rchar=$9 b_max=${10}
	assert_eq "$s_rc" 0 "1 MB pipeline"
	assert_eq "$b_rc" 0 "100 MB pipeline"
	assert_eq "$s_count" 1048576
	assert_eq "$b_count" 104857600
	echo "    supervisor VmHWM ${s_hwm} KiB (1 MB) / ${b_hwm} KiB (100 MB); ru_maxrss with sandboxes ${s_max} / ${b_max} KiB; bytes read by corral ${s_rchar} / ${b_rchar}" >&2
	# flat: 100 MB cost no more than 1 MB did (a few MiB of slack for the allocator)
	[ "$b_max" -lt $((s_max + 4096)) ] || fail "max RSS grew from ${s_max} KiB to ${b_max} KiB for 100 MB"
	if [ "$b_hwm" -ge 0 ]; then
		[ "$b_hwm" -lt $((s_hwm + 4096)) ] || fail "supervisor VmHWM grew from ${s_hwm} KiB to ${b_hwm} KiB"
	fi
	# and small: well under the 100 MB that flowed (a sanitizer build carries shadow memory)
	[ -n "${CORRAL_SANITIZED:-}" ] || [ "$b_max" -lt 40960 ] || fail "max RSS ${b_max} KiB for 100 MB through a pipeline"
	# the supervisor read only the last stage's few bytes and its own bookkeeping
	if [ "$b_rchar" -ge 0 ]; then
		[ "$b_rchar" -lt $((10 * 1024 * 1024)) ] || fail "the supervisor read ${b_rchar} bytes: intermediate data went through it"
	fi
}

# Output streams: the last stage's first line arrives while the first stage still runs. (With
# redaction on, the redactor may hold a line back until more output or EOF: off here, so that
# only the pipeline is measured.)
test_pipeline_streams() {
	local t
	t=$(python3 - "$CORRAL" "$WS" <<'PY'
import subprocess, sys, time
t0 = time.time()
p = subprocess.Popen([sys.argv[1], "run", "-w", sys.argv[2], "--redact", "off",
                      "--pipe", "echo first; sleep 4; echo second",
                      "--pipe", "cat", "--pipe", "cat"], stdout=subprocess.PIPE)
first = p.stdout.readline()
t1 = time.time() - t0
rest = p.stdout.read()
t2 = time.time() - t0   # the output's end, before the teardown
p.wait()
print(int(t1 * 1000), int(t2 * 1000), first.decode().strip(), rest.decode().strip(), p.returncode)
PY
)
	# shellcheck disable=SC2086
	set -- $t
	assert_eq "$3" first
	assert_eq "$4" second
	assert_eq "$5" 0
	# relative to the end, not from the start (three sandboxes are built first, and the first
	# stage sleeps while the other two are built: 1.5 s of its 4 s are left for that)
	[ $(($2 - $1)) -ge 2500 ] || fail "the first line came $1 ms in, only $(($2 - $1)) ms before the end: the pipeline buffered instead of streaming"
	[ "$2" -ge 4000 ] || fail "finished in $2 ms, before the first stage could have"
}

# pipefail: the rightmost failed stage's status, as bash computes it.
test_pipeline_pipefail_like_bash() {
	local case want got
	for case in 'echo x|exit 3|cat' 'exit 4|exit 5|true' 'false|true' 'true|false' \
		'yes|head -n 1' 'sh -c "kill -TERM \$\$"|cat' 'true|true|true'; do
		want=$(bash -o pipefail -c "$case" >/dev/null 2>&1; echo $?)
		local args=() stage
		IFS='|' read -r -a stages <<<"$case"
		for stage in "${stages[@]}"; do args+=(--pipe "$stage"); done
		pl --quiet "${args[@]}" >/dev/null 2>&1
		got=$?
		assert_eq "$got" "$want" "pipeline '$case'"
	done
	pl_schema_need
	pl_json sigpipe 141 --pipe 'exec yes' --pipe 'head -n 1'
	assert_eq "$(pget sigpipe failed_stage)" 0
	assert_eq "$(pget sigpipe stages.0.signal_name)" PIPE
	assert_eq "$(pget sigpipe stdout)" y
	assert_eq "$(pget sigpipe stopped_stages)" "[]"
	pl_json mid 3 --pipe 'echo x' --pipe 'cat >/dev/null; exit 3' --pipe 'cat'
	assert_eq "$(pget mid failed_stage)" 1
	assert_eq "$(pget mid stages.1.exit_code)" 3
	assert_eq "$(pget mid stages.2.exit_code)" 0
}

# A stage killed by SIGPIPE only says that a later stage stopped reading: the later stage is
# not stopped for it (with no grace it used to be killed at once, before its own status came),
# and goes on as in a shell. Here it closes its input, then works on and prints; the status is
# bash's pipefail one, 141 from the first stage.
test_pipeline_sigpipe_stage_leaves_the_reader_alone() {
	pl_schema_need
	local i
	for i in 1 2 3 4 5; do
		pl_json closer$i 141 --kill-after 0 --pipe 'exec yes' \
			--pipe 'exec 0<&-; sleep 0.2; echo done-$$'
		assert_contains "$(pget closer$i stdout)" "done-"
		assert_eq "$(pget closer$i stages.0.signal_name)" PIPE
		assert_eq "$(pget closer$i stages.1.exit_code)" 0
		assert_eq "$(pget closer$i failed_stage)" 0
		assert_eq "$(pget closer$i stopped_stages)" "[]"
	done
}

# A failing middle stage: the stage before it is stopped at once, the stage after it gets EOF
# and finishes; nothing survives on the host.
test_pipeline_failing_middle_tears_down() {
	local mark="corral-pipe-$RANDOM$RANDOM" start end
	pl_schema_need
	start=$(date +%s%N)
	pl_json fail 7 -t 60 --pipe "exec bash -c 'exec -a $mark-up sleep 300'" \
		--pipe 'sleep 0.3; exit 7' --pipe 'cat; echo downstream-saw-eof'
	end=$(date +%s%N)
	[ $(((end - start) / 1000000)) -lt 5000 ] || fail "took $(((end - start) / 1000000)) ms: the upstream stage was not stopped"
	assert_eq "$(pget fail failed_stage)" 1
	assert_eq "$(pget fail stages.0.signal_name)" KILL
	assert_eq "$(pget fail stopped_stages)" "[0]"
	assert_eq "$(pget fail stages.2.exit_code)" 0
	assert_eq "$(pget fail stdout)" downstream-saw-eof
	assert_eq "$(pget fail timed_out)" false
	assert_no_survivor "$mark"

	# a downstream stage that ignores EOF and SIGTERM: the kill grace, then SIGKILL
	start=$(date +%s%N)
	pl_json grace 137 -t 60 --kill-after 0.4 --pipe "exec bash -c 'exec -a $mark-up2 sleep 300'" \
		--pipe 'exit 2' \
		--pipe "cat >/dev/null; exec bash -c 'trap \"\" TERM; exec -a $mark-down sleep 301'"
	end=$(date +%s%N)
	local ms=$(((end - start) / 1000000))
	((ms >= 350 && ms < 5000)) || fail "took $ms ms: expected the 0.4 s grace"
	assert_eq "$(pget grace failed_stage)" 2
	assert_eq "$(pget grace stopped_stages)" "[0, 2]"
	assert_eq "$(pget grace stages.1.exit_code)" 2
	assert_eq "$(pget grace stages.2.signal_name)" KILL
	assert_no_survivor "$mark"

	# the human output names the failed stage and the stopped one
	local err
	err=$(pl --pipe "exec bash -c 'exec -a $mark-up3 sleep 300'" --pipe 'sleep 0.2; exit 5' 2>&1 >/dev/null)
	assert_eq $? 5
	assert_contains "$err" "stage 2 (sleep 0.2; exit 5): exit status 5"
	assert_contains "$err" "stage 1 (exec bash"
	assert_contains "$err" "stopped after another stage failed"
	assert_no_survivor "$mark"
}

# Without user (and so PID) namespaces (mode auto): the teardown still leaves nothing behind.
test_pipeline_teardown_without_pidns() {
	local mark="corral-pipenons-$RANDOM$RANDOM" out
	out=$(CORRAL_TEST_DISABLE=userns pl --json --mode auto -t 60 \
		--pipe "exec bash -c 'exec -a $mark sleep 300'" --pipe 'sleep 0.2; exit 3' \
		--pipe 'cat; echo eof')
	assert_eq $? 3
	assert_eq "$(jget stages.0.isolation.pidns.applied <<<"$out")" false
	assert_eq "$(jget stopped_stages <<<"$out")" "[0]"
	assert_eq "$(jget stdout <<<"$out")" eof
	assert_no_survivor "$mark"
	out=$(pl --mode none --pipe 'head -c 5M /dev/zero' --pipe cat --pipe 'wc -c')
	assert_eq "$out" 5242880
}

# The timeout covers the whole pipeline: the stage that finished in time keeps its status, every
# stage still running is stopped and reports the timeout.
test_pipeline_timeout_covers_whole() {
	local mark="corral-pipeto-$RANDOM$RANDOM" start end
	pl_schema_need
	start=$(date +%s%N)
	pl_json to 124 -t 2 --kill-after 0.3 --pipe 'sleep 0.2; echo a' \
		--pipe "cat; exec bash -c 'trap \"\" TERM; exec -a $mark sleep 30'" --pipe 'cat'
	end=$(date +%s%N)
	local ms=$(((end - start) / 1000000))
	# 2 s (the first stage's 0.2 s fits with room for a slow machine's setup), then 0.3 s
	# of grace for the stage that ignores SIGTERM
	((ms >= 2250 && ms < 6000)) || fail "took $ms ms for a 2 s timeout and 0.3 s of grace"
	assert_eq "$(pget to timed_out)" true
	assert_eq "$(pget to stages.0.timed_out)" false
	assert_eq "$(pget to stages.0.exit_code)" 0
	assert_eq "$(pget to stages.1.timed_out)" true
	assert_eq "$(pget to stages.1.limit)" timeout
	assert_eq "$(pget to stages.2.timed_out)" true
	assert_contains "$(pget to stopped_stages)" "1"
	assert_no_survivor "$mark"
	local err
	err=$(pl -t 0.3 --pipe 'sleep 10' --pipe cat 2>&1)
	assert_eq $? 124
	assert_contains "$err" "timed out"
}

# Ctrl-C (SIGINT to corral) cancels every stage with the kill grace and still ends in a result.
test_pipeline_sigint_cancels() {
	local mark="corral-pipeint-$RANDOM$RANDOM" out
	out=$(python3 - "$CORRAL" "$WS" "$mark" <<'PY'
import signal, subprocess, sys, time
corral, ws, mark = sys.argv[1:4]
p = subprocess.Popen([corral, "run", "-w", ws, "--json", "--kill-after", "0.3",
                      "--pipe", "exec bash -c 'exec -a %s sleep 300'" % mark,
                      "--pipe", "cat"], stdout=subprocess.PIPE)
for _ in range(200):  # until the stage runs (a slow machine builds its sandbox first)
    if subprocess.run(["pgrep", "-f", "^" + mark], capture_output=True).returncode == 0:
        break
    time.sleep(0.05)
p.send_signal(signal.SIGINT)
out = p.stdout.read().decode()
p.wait()
print(p.returncode, out)
PY
)
	assert_eq "${out%% *}" 143
	local doc=${out#* }
	assert_eq "$(jget cancelled <<<"$doc")" true
	assert_eq "$(jget timed_out <<<"$doc")" false
	assert_eq "$(jget stopped_stages <<<"$doc")" "[0, 1]"
	assert_eq "$(jget stages.0.signal_name <<<"$doc")" TERM
	assert_no_survivor "$mark"
}

test_pipeline_command_not_found_stage() {
	local err
	err=$(pl --pipe 'echo a' --pipe 'corral-no-such-cmd-xyz --flag' --pipe cat 2>&1 >/dev/null)
	assert_eq $? 127
	assert_contains "$err" "stage 2 (corral-no-such-cmd-xyz --flag)"
	assert_contains "$err" "not found"
	pl_schema_need
	pl_json nf 127 --pipe 'echo a' --pipe 'corral-no-such-cmd-xyz' --pipe cat
	assert_eq "$(pget nf failed_stage)" 1
	assert_eq "$(pget nf stages.1.exit_code)" 127
}

# A stage the policy denies: nothing starts, the error names the stage and the rule.
test_pipeline_denied_stage() {
	printf '{"commands": {"deny": [{"match": "sh", "reason": "no shells here"}]}}\n' >"$WS/deny.json"
	local err
	err=$(pl --profile "$WS/deny.json" --pipe 'touch started' --pipe cat 2>&1)
	assert_eq $? 126
	assert_contains "$err" "stage 1 (touch started)"
	assert_contains "$err" "no shells here"
	[ ! -e "$WS/started" ] || fail "a stage ran although the pipeline was denied"
	pl_schema_need
	pl_json denied 126 --profile "$WS/deny.json" --pipe 'true' --pipe cat
	assert_eq "$(pget denied stages)" "[]"
	assert_eq "$(pget denied failed_stage)" 0
	assert_eq "$(pget denied error.code)" -8
}

test_pipeline_bad_input() {
	local e
	e=$(pl --pipe 'echo a' --pipe '' 2>&1); assert_eq $? 125
	assert_contains "$e" "stage 2 is empty"
	e=$(pl --pipe 'echo a' --pipe '   ' 2>&1); assert_eq $? 125
	assert_contains "$e" "empty"
	e=$(pl --pipe 'echo a' 2>&1); assert_eq $? 125
	assert_contains "$e" "at least two"
	e=$(pl --pipe 'echo a' --pipe cat -- echo b 2>&1); assert_eq $? 125
	assert_contains "$e" "COMMAND"
	e=$(pl --pipe 'echo a' --pipe cat echo b 2>&1); assert_eq $? 125
	assert_contains "$e" "COMMAND ('echo')"
	e=$(pl -c 'echo a' --pipe 'echo a' --pipe cat 2>&1); assert_eq $? 125
	assert_contains "$e" "-c"
	local args=()
	for _ in $(seq 1 17); do args+=(--pipe cat); done
	e=$(pl "${args[@]}" 2>&1); assert_eq $? 125
	assert_contains "$e" "at most 16"
	e=$(pl --pipe 2>&1); assert_eq $? 125
	for e in "$(pl --pipe '' --pipe cat 2>&1)" "$(pl --pipe x 2>&1)"; do
		[ "$(wc -l <<<"$e")" -le 1 ] || fail "more than one line of error: $e"
		assert_contains "$e" "corral: "
	done
	# sixteen stages are fine
	args=(--pipe 'echo sixteen')
	for _ in $(seq 2 16); do args+=(--pipe cat); done
	assert_eq "$(pl "${args[@]}")" sixteen
}

test_pipeline_stdin_and_options() {
	local out
	out=$(printf 'hello\n' | pl -i --pipe cat --pipe 'tr a-z A-Z')
	assert_eq "$out" HELLO
	# the options apply to every stage: the environment, the limits, the workspace
	# shellcheck disable=SC2016 # expanded by the sandbox's shell
	out=$(pl --env GREETING=hi --pipe 'echo $GREETING' --pipe 'cat; echo $GREETING')
	assert_eq "$out" "$(printf 'hi\nhi')"
	pl --pipe 'echo data >file.txt' --pipe 'cat' >/dev/null
	assert_eq "$(cat "$WS/file.txt")" data
	# --dry-run explains every stage and runs nothing
	out=$(pl --dry-run --pipe 'touch nope' --pipe 'cat')
	assert_contains "$out" "stage 1: touch nope"
	assert_contains "$out" "stage 2: cat"
	[ ! -e "$WS/nope" ] || fail "--dry-run ran a stage"
	out=$(pl --dry-run --json --pipe 'true' --pipe cat | python3 -c 'import json,sys
text, docs, i = sys.stdin.read(), 0, 0
dec = json.JSONDecoder()
while True:
    while i < len(text) and text[i].isspace(): i += 1
    if i == len(text): break
    _, i = dec.raw_decode(text, i); docs += 1
print(docs)')
	assert_eq "$out" 2 "--dry-run --json: one plan per stage"
}

test_pipeline_schema_and_audit() {
	pl_schema_need
	pl_json ok 0 --pipe 'echo hi' --pipe cat
	pl_schema_py broken "$WS/.results/ok.json" || fail "broken pipeline documents were not all rejected"
	# stages are recorded as pipeline_stage rows whose parent is the pipeline
	local db="$WS/audit.db" id kids
	pl --audit "$db" --json --pipe 'echo a' --pipe 'cat' --pipe 'exit 3' >"$WS/.results/a.json"
	assert_eq $? 3
	id=$(jget id <"$WS/.results/a.json")
	kids=$("$CORRAL" audit --db "$db" show "$id" --json)
	assert_eq "$(jget kind <<<"$kids")" run
	assert_eq "$(jget exit_code <<<"$kids")" 3
	assert_eq "$(jget command <<<"$kids")" "echo a | cat | exit 3"
	assert_eq "$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["children"]))' <<<"$kids")" 3
	local stage0
	stage0=$(jget stages.0.id <"$WS/.results/a.json")
	assert_eq "$(jget kind <<<"$("$CORRAL" audit --db "$db" show "$stage0" --json)")" pipeline_stage
	assert_eq "$(jget parent <<<"$("$CORRAL" audit --db "$db" show "$stage0" --json)")" "$id"
	"$CORRAL" audit --db "$db" verify >/dev/null || fail "the audit chain does not verify"
}

test_pipeline_help_and_man() {
	local h
	h=$("$CORRAL" help run)
	assert_contains "$h" "--pipe STAGE"
	assert_contains "$h" "pipefail"
	if command -v man >/dev/null; then
		local m
		m=$(MANWIDTH=100 man -l "$DOCS/corral.1" 2>/dev/null)
		assert_contains "$m" "--pipe"
		assert_contains "$m" "PIPELINES"
	fi
}
