# MCP server (issue: mcp): `corral mcp` driven over stdio by scripted JSON lines
# (tests/mcp_client.py, standard library only) and by the official TypeScript SDK client
# (tests/e2e). Process claims are judged on the host: pgrep of a unique marker.

# Run a python test script (stdin) with the driver importable. CORRAL, WS and MARK are in
# the environment.
mcp_py() {
	PYTHONPATH="$TESTDIR" CORRAL="$CORRAL" WS="$WS" python3 - "$@"
}

test_mcp_initialize_version_negotiation() {
	mcp_py <<'PY'
import os, mcp_client as M
for asked, want in [("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"),
                    ("2025-03-26", "2025-03-26"), ("2024-11-05", "2024-11-05"),
                    ("2024-10-07", "2025-11-25"), ("1999-01-01", "2025-11-25")]:
    s = M.Server(M.corral_argv(["-w", os.environ["WS"]]))
    r = s.initialize(asked)["result"]
    assert r["protocolVersion"] == want, (asked, r)
    assert r["serverInfo"]["name"] == "corral" and r["serverInfo"]["version"], r
    assert r["capabilities"] == {"tools": {"listChanged": False}}, r
    assert "instructions" in r and os.environ["WS"] in r["instructions"], r
    # initialize twice is an invalid request, the session stays usable
    id = s.request("initialize", {"protocolVersion": asked, "capabilities": {},
                                  "clientInfo": {"name": "t", "version": "1"}})
    e = s.response(id)
    assert e["error"]["code"] == -32600 and "already initialized" in e["error"]["message"], e
    assert s.response(s.request("ping"))["result"] == {}
    assert s.close() == 0
PY
}

test_mcp_request_before_initialize() {
	mcp_py <<'PY'
import os, mcp_client as M
s = M.Server(M.corral_argv(["-w", os.environ["WS"]]))
r = s.response(s.request("ping"))
assert r["result"] == {}, r            # ping is allowed before initialize
for method in ("tools/list", "tools/call"):
    r = s.response(s.request(method, {"name": "run_command", "arguments": {"command": "true"}}))
    assert r["error"]["code"] == -32002, r
    assert "initialize" in r["error"]["message"], r
# initialize without protocolVersion: -32602 naming the field
r = s.response(s.request("initialize", {"capabilities": {}}))
assert r["error"]["code"] == -32602 and "protocolVersion" in r["error"]["message"], r
r = s.response(s.request("initialize", ["x"]))
assert r["error"]["code"] == -32602, r
s.initialize()
assert "tools" in s.response(s.request("tools/list"))["result"]
assert s.close() == 0
PY
}

test_mcp_tools_list_schemas_by_version() {
	mcp_py <<'PY'
import os, shutil, mcp_client as M
for v in ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"):
    s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--allow-env", "MY_*"]))
    s.initialize(v)
    tools = {t["name"]: t for t in s.response(s.request("tools/list"))["result"]["tools"]}
    assert set(tools) == {"run_command", "run_code", "can_i"}, tools.keys()
    new = v >= "2025-06-18"
    for t in tools.values():
        assert t["inputSchema"]["type"] == "object", t
        assert t["description"], t
        assert ("outputSchema" in t) == new, (v, t.keys())
        assert ("title" in t) == new, (v, t.keys())
        assert ("annotations" in t) == (v >= "2025-03-26"), (v, t.keys())
        if new:
            assert t["outputSchema"]["type"] == "object"
            assert ("exit_code" if t["name"] != "can_i" else "allowed") in t["outputSchema"]["properties"]
    if v >= "2025-03-26":   # can_i only reads the policy
        a = tools["can_i"]["annotations"]
        assert a["readOnlyHint"] and not a["destructiveHint"] and a["idempotentHint"], a
        assert not tools["run_command"]["annotations"]["readOnlyHint"]
    assert set(tools["can_i"]["inputSchema"]["properties"]) == {"op", "target", "queries"}
    props = tools["run_command"]["inputSchema"]["properties"]
    assert set(props) == {"command", "argv", "cwd", "timeout_s", "stdin", "env"}, props.keys()
    assert "MY_*" in props["env"]["description"]
    # run_code offers exactly the interpreters the sandbox can find
    want = [l for l, exe in (("python", "python3"), ("node", "node"), ("bash", "bash"), ("sh", "sh"))
            if any(os.access(d + "/" + exe, os.X_OK) for d in
                   ("/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin"))]
    assert tools["run_code"]["inputSchema"]["properties"]["language"]["enum"] == want, want
    # structuredContent only from 2025-06-18; before that the JSON is a second text item
    r = s.call("run_command", {"command": "echo hi"})
    if new:
        assert r["structuredContent"]["stdout"] == "hi\n" and len(r["content"]) == 1, r
    else:
        import json
        assert "structuredContent" not in r and len(r["content"]) == 2, r
        assert json.loads(r["content"][1]["text"])["stdout"] == "hi\n"
    assert s.close() == 0
# without --allow-env the env argument is not offered
s = M.Server(M.corral_argv(["-w", os.environ["WS"]]))
s.initialize()
tools = {t["name"]: t for t in s.response(s.request("tools/list"))["result"]["tools"]}
assert "env" not in tools["run_command"]["inputSchema"]["properties"]
s.close()
PY
}

test_mcp_structured_content_matches_result_schema() {
	python3 -c 'from jsonschema import Draft202012Validator' 2>/dev/null ||
		skip "python3 has no jsonschema module (apt-get install python3-jsonschema)"
	DOCS="$DOCS" mcp_py <<'PY'
import json, os, mcp_client as M
from jsonschema import Draft202012Validator
full = Draft202012Validator(json.load(open(os.environ["DOCS"] + "/result.schema.json")))
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "-t", "5"]))
s.initialize()
tools = {t["name"]: t for t in s.response(s.request("tools/list"))["result"]["tools"]}
out = Draft202012Validator(tools["run_command"]["outputSchema"])
for args in ({"command": "echo ok"}, {"command": "exit 4"}, {"argv": ["no-such-cmd"]},
             {"command": "kill -9 $$"}, {"command": "sleep 3", "timeout_s": 0.2},
             {"command": "head -c 3000000 /dev/zero"}):
    r = s.call("run_command", args)
    sc = r["structuredContent"]
    for v in (full, out):
        errs = list(v.iter_errors(sc))
        assert not errs, (args, errs[0].message)
s.close()
PY
}

test_mcp_run_command_results() {
	mkdir -p "$WS/sub"
	mcp_py <<'PY'
import os, mcp_client as M
ws = os.environ["WS"]
s = M.Server(M.corral_argv(["-w", ws, "-t", "20", "--allow-env", "MY_*", "--env", "FIXED=1"]))
s.initialize()
r = s.call("run_command", {"command": "echo out; echo err >&2"})
t = M.text_of(r)
lines = t.split("\n")
assert lines[0] == "$ echo out; echo err >&2", t
assert lines[1] == "exit: 0" and lines[2].startswith("duration: ") and lines[2].endswith(" ms"), t
assert "--- stdout ---\nout\n--- stderr ---\nerr\n" in t, t
assert r["isError"] is False and r["structuredContent"]["exit_code"] == 0, r
r = s.call("run_command", {"command": "exit 3"})
assert r["isError"] is True and "exit: 3" in M.text_of(r), r
assert "--- stdout ---\n(empty)" in M.text_of(r)
r = s.call("run_command", {"command": "kill -KILL $$"})
assert r["isError"] and "killed by signal 9 (KILL)" in M.text_of(r), M.text_of(r)
# something the sandbox stopped comes with a hint for the model
r = s.call("run_command", {"command": "touch /etc/corral-mcp-test"})
assert r["isError"] and "\nhint: " in M.text_of(r), M.text_of(r)
# argv form, quoting in the headline
r = s.call("run_command", {"argv": ["printf", "%s|", "a b", "c"]})
assert r["structuredContent"]["stdout"] == "a b|c|" and M.text_of(r).startswith("$ printf '%s|' 'a b' c"), M.text_of(r)
# cwd inside the workspace; outside is refused
r = s.call("run_command", {"command": "pwd", "cwd": "sub"})
assert r["structuredContent"]["stdout"].strip().endswith("/sub"), r
r = s.call("run_command", {"command": "pwd", "cwd": "/etc"})
assert r["isError"] and "cwd" in M.text_of(r) and "structuredContent" not in r, r
r = s.call("run_command", {"command": "pwd", "cwd": "../.."})
assert r["isError"] and "cwd" in M.text_of(r), r
# stdin
r = s.call("run_command", {"command": "tr a-z A-Z", "stdin": "shout\n"})
assert r["structuredContent"]["stdout"] == "SHOUT\n", r
# env: the fixed one is there; allowed names pass; others are refused by name
r = s.call("run_command", {"command": "echo $FIXED $MY_VAR", "env": {"MY_VAR": "v"}})
assert r["structuredContent"]["stdout"] == "1 v\n", r
r = s.call("run_command", {"command": "true", "env": {"SECRET": "x"}})
assert r["isError"] and "env.SECRET: not allowed" in M.text_of(r), M.text_of(r)
# timeout_s narrows only
r = s.call("run_command", {"command": "true", "timeout_s": 21})
assert r["isError"] and "timeout_s" in M.text_of(r) and "20" in M.text_of(r), M.text_of(r)
for bad, field in (({"command": "true", "timeout_s": "5"}, "timeout_s"),
                   ({"command": "true", "timeout_s": -1}, "timeout_s"),
                   ({"command": 5}, "command"), ({}, "command"),
                   ({"command": "true", "argv": ["true"]}, "not both"),
                   ({"argv": []}, "argv"), ({"argv": ["a", 1]}, "argv[1]"),
                   ({"command": "true", "stdin": 1}, "stdin"),
                   ({"command": "true", "env": []}, "env"),
                   ({"command": "true", "timeout": 1}, "unknown argument 'timeout'")):
    r = s.call("run_command", bad)
    assert r["isError"] and field in M.text_of(r), (bad, M.text_of(r))
    assert M.text_of(r).startswith("invalid arguments for run_command: "), M.text_of(r)
# output truncation is noted
s2 = M.Server(M.corral_argv(["-w", ws, "--max-output", "1k"]))
s2.initialize()
r = s2.call("run_command", {"command": "seq 1 5000"})
assert "[stdout truncated: " in M.text_of(r) and "kept head and tail]" in M.text_of(r), M.text_of(r)[-300:]
assert r["structuredContent"]["stdout_truncated"] is True
s2.close()
assert s.close() == 0
PY
}

# JSON text is UTF-8, paths and output are bytes: nothing may break a reply.
test_mcp_non_utf8_paths_output_and_long_commands() {
	mcp_py <<'PY'
import os, mcp_client as M
ws = os.environ["WS"].encode() + b"/ws-\xff-dir"
os.mkdir(ws)
s = M.Server([os.environ["CORRAL"].encode(), b"mcp", b"-w", ws])
r = s.initialize()["result"]
assert "/ws-\ufffd-dir" in r["instructions"], r["instructions"]
assert len(s.response(s.request("tools/list"))["result"]["tools"]) == 3
r = s.call("run_command", {"command": "pwd; printf 'bin\\377\\000ary\\n'; printf '\\303' >&2"})
t = M.text_of(r)
assert not r["isError"] and "/ws-\ufffd-dir" in t and "bin\ufffd\ufffdary" in t, t
assert r["structuredContent"]["stderr"] == "\ufffd", r["structuredContent"]["stderr"]
long_cmd = "echo " + "\u00e9" * 3000
r = s.call("run_command", {"command": long_cmd})
head = M.text_of(r).split("\n")[0]
assert head.startswith("$ echo \u00e9") and head.endswith(" bytes]") and len(head.encode()) < 1100, head[-80:]
assert r["structuredContent"]["command"] == long_cmd
assert s.close() == 0
PY
}

test_mcp_run_command_timeout_and_not_found() {
	mcp_py <<'PY'
import os, time, mcp_client as M
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "-t", "10", "--kill-after", "0.2"]))
s.initialize()
t0 = time.monotonic()
r = s.call("run_command", {"command": "sleep 30", "timeout_s": 0.5})
assert time.monotonic() - t0 < 5
t = M.text_of(r)
assert r["isError"] and "timed out after 0.5s" in t, t
assert r["structuredContent"]["timed_out"] is True and r["structuredContent"]["limit"] == "timeout"
# the server's own timeout applies without timeout_s
s2 = M.Server(M.corral_argv(["-w", os.environ["WS"], "-t", "0.3"]))
s2.initialize()
r = s2.call("run_command", {"command": "sleep 30"})
assert r["isError"] and "timed out after 0.3s" in M.text_of(r), M.text_of(r)
s2.close()
r = s.call("run_command", {"argv": ["no-such-command-xyz"]})
t = M.text_of(r)
assert r["isError"] and "exit: 127" in t and "error: command not found" in t, t
assert "\nhint: " in t and "no-such-command-xyz" in t, t
r = s.call("run_command", {"command": "no-such-command-xyz"})
assert r["isError"] and "exit: 127" in M.text_of(r), M.text_of(r)
assert s.close() == 0
PY
}

test_mcp_run_code_languages() {
	mcp_py <<'PY'
import os, mcp_client as M
s = M.Server(M.corral_argv(["-w", os.environ["WS"]]))
s.initialize()
tools = {t["name"]: t for t in s.response(s.request("tools/list"))["result"]["tools"]}
langs = tools["run_code"]["inputSchema"]["properties"]["language"]["enum"]
assert "sh" in langs and "bash" in langs, langs
progs = {
    "python": "import sys, os\nprint('py', 6*7)\nprint(os.path.dirname(__file__))\nprint(sys.stdin.read())",
    "node": "console.log('js', 6*7); console.log(require('path').dirname(__filename)); process.stdin.on('data', d => process.stdout.write(String(d)))",
    "bash": "echo sh $((6*7)); dirname \"$0\"; cat",
    "sh": "echo sh $((6*7)); dirname \"$0\"; cat",
}
for lang in langs:
    # code through stdin (no stdin argument)
    r = s.call("run_code", {"language": lang, "code": progs[lang]})
    out = r["structuredContent"]["stdout"]
    assert not r["isError"] and "42" in out and "/tmp" in out, (lang, M.text_of(r))
    assert M.text_of(r).startswith("$ "), M.text_of(r)
    # with the call's own stdin the code travels in the environment, which is then unset
    r = s.call("run_code", {"language": lang, "code": progs[lang] + ("\nprint(os.environ.get('CORRAL_CODE'))" if lang == "python" else ""),
                            "stdin": "from-stdin"})
    out = r["structuredContent"]["stdout"]
    assert not r["isError"] and "42" in out and "from-stdin" in out, (lang, M.text_of(r))
    if lang == "python":
        assert "None" in out, out
# failures and argument errors
r = s.call("run_code", {"language": "sh", "code": "echo bad >&2; exit 5"})
assert r["isError"] and "exit: 5" in M.text_of(r)
r = s.call("run_code", {"language": "cobol", "code": "x"})
assert r["isError"] and "language: 'cobol' is not available" in M.text_of(r), M.text_of(r)
r = s.call("run_code", {"language": "sh"})
assert r["isError"] and "code: required" in M.text_of(r), M.text_of(r)
r = s.call("run_code", {"language": "sh", "code": "x" * 200000, "stdin": "a"})
assert r["isError"] and "too long together with stdin" in M.text_of(r), M.text_of(r)
r = s.call("run_code", {"language": "sh", "code": "echo " + "y" * 200000 + " | wc -c"})
assert not r["isError"] and r["structuredContent"]["stdout"].strip() == "200001", M.text_of(r)[:300]
assert s.close() == 0
PY
}

test_mcp_concurrent_calls_overlap_and_ids() {
	mcp_py <<'PY'
import os, time, mcp_client as M
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--max-concurrent", "4"]))
s.initialize()
ids = []
t0 = time.monotonic()
for i in range(20):
    # mixed id types: strings and numbers must come back exactly
    id = "call-%d" % i if i % 2 else 1000 + i
    ids.append(id)
    s.call_async("run_command", {"command": "s=$(date +%%s.%%N); sleep 1; echo %d $s $(date +%%s.%%N)" % i}, id=id)
spans = {}
for i, id in enumerate(ids):
    r = s.response(id, timeout=30)
    out = r["result"]["structuredContent"]["stdout"].split()
    assert out[0] == str(i), (id, out)          # the right answer for the right id
    spans[i] = (float(out[1]), float(out[2]))
total = time.monotonic() - t0
# 20 one-second calls, 4 at a time: about 5 s; sequential would be 20 s
assert 4.5 < total < 12, total
events = sorted([(a, 1) for a, b in spans.values()] + [(b, -1) for a, b in spans.values()],
                key=lambda e: (e[0], e[1]))
cur = peak = 0
for _, d in events:
    cur += d
    peak = max(peak, cur)
assert peak == 4, peak                          # they overlap, but never more than 4
assert s.close() == 0
print("20 calls in %.2fs, peak concurrency %d" % (total, peak))
PY
}

test_mcp_slow_call_does_not_block_ping() {
	mcp_py <<'PY'
import os, time, mcp_client as M
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--max-concurrent", "1"]))
s.initialize()
slow = s.call_async("run_command", {"command": "sleep 3; echo done"})
queued = s.call_async("run_command", {"command": "echo queued"})
time.sleep(0.3)
for _ in range(5):
    t0 = time.monotonic()
    r = s.response(s.request("ping"), timeout=2)
    dt = time.monotonic() - t0
    assert r["result"] == {} and dt < 0.2, dt
    t0 = time.monotonic()
    s.response(s.request("tools/list"), timeout=2)
    assert time.monotonic() - t0 < 0.2
r = s.response(slow, timeout=10)
assert r["result"]["structuredContent"]["stdout"] == "done\n"
r = s.response(queued, timeout=10)
assert r["result"]["structuredContent"]["stdout"] == "queued\n"
assert s.close() == 0
PY
}

test_mcp_cancellation_kills_sandbox() {
	local mark="corral-mcp-cancel-$RANDOM$RANDOM"
	MARK=$mark mcp_py <<'PY'
import os, subprocess, time, mcp_client as M
mark = os.environ["MARK"]
def alive(tag):
    return subprocess.run(["pgrep", "-f", tag], stdout=subprocess.DEVNULL).returncode == 0
def wait_for(cond, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--max-concurrent", "1"]))
s.initialize()
run = s.call_async("run_command", {"argv": ["bash", "-c", "exec -a %s-run sleep 300" % mark]}, id="c1")
queued = s.call_async("run_command", {"argv": ["bash", "-c", "exec -a %s-queued sleep 300" % mark]}, id=2)
assert wait_for(lambda: alive(mark + "-run"), 10), "the command never started"
# a queued call is dropped without ever starting
s.notify("notifications/cancelled", {"requestId": 2, "reason": "test"})
s.notify("notifications/cancelled", {"requestId": "c1", "reason": "test"})
assert wait_for(lambda: not alive(mark), 5), "the cancelled command survived"
assert not alive(mark + "-queued")
# no response for either id; the server keeps serving
after = s.call_async("run_command", {"command": "echo after"})
r = s.response(after, timeout=10)
assert r["result"]["structuredContent"]["stdout"] == "after\n"
s.drain(1.0)
assert not [m for m in s.pending if m.get("id") in ("c1", 2)], s.pending
assert not alive(mark)
# cancelling unknown or finished ids is ignored
s.notify("notifications/cancelled", {"requestId": "nope"})
s.notify("notifications/cancelled", {"requestId": after})
s.notify("notifications/cancelled", {})
assert s.response(s.request("ping"))["result"] == {}
assert s.close() == 0
PY
	assert_no_survivor "$mark"
}

test_mcp_progress_notifications() {
	mcp_py <<'PY'
import os, mcp_client as M
s = M.Server(M.corral_argv(["-w", os.environ["WS"]]))
s.initialize()
r = s.call("run_command", {"command": "for i in 1 2 3 4 5 6 7 8; do echo line$i; sleep 0.3; done"},
           progress_token="tok-1")
assert not r["isError"]
prog = [(t, m["params"]) for t, m in s.notifications if m["method"] == "notifications/progress"]
assert len(prog) >= 3, prog
vals = [p["progress"] for _, p in prog]
assert all(p["progressToken"] == "tok-1" for _, p in prog), prog
assert vals == sorted(vals) and len(set(vals)) == len(vals), vals
gaps = [b[0] - a[0] for a, b in zip(prog, prog[1:])]
assert min(gaps) > 0.4, gaps                     # rate limited: at most every 500 ms
last = prog[-1][1]["message"]
assert last.startswith("elapsed ") and " bytes out, last: line" in last, last
# no progress after the response, none without a token
s.notifications.clear()
s.call("run_command", {"command": "sleep 1.2"})
s.drain(0.7)
assert not s.notifications, s.notifications
# an integer token works too
s.call("run_command", {"command": "sleep 1.2"}, progress_token=7)
assert [m for _, m in s.notifications if m["params"]["progressToken"] == 7]
# and 2024-11-05 gets no message field (it did not exist then)
s2 = M.Server(M.corral_argv(["-w", os.environ["WS"]]))
s2.initialize("2024-11-05")
s2.call("run_command", {"command": "sleep 1.2"}, progress_token="old")
assert s2.notifications and "message" not in s2.notifications[0][1]["params"]
s2.close()
assert s.close() == 0
PY
}

test_mcp_protocol_errors_keep_serving() {
	mcp_py <<'PY'
import os, json, mcp_client as M
s = M.Server(M.corral_argv(["-w", os.environ["WS"]]))
s.initialize()
def raw(line):
    s.send_raw(line + "\n")
    return s.recv()
# malformed JSON, then a good request
r = raw("{this is not json")
assert r["error"]["code"] == -32700 and r["id"] is None, r
assert s.response(s.request("ping"))["result"] == {}
r = raw('[{"jsonrpc":"2.0","id":1,"method":"ping"}]')
assert r["error"]["code"] == -32600 and "batch" in r["error"]["message"], r
r = raw('{"jsonrpc":"2.0","id":null,"method":"ping"}')
assert r["error"]["code"] == -32600 and r["id"] is None, r
r = raw('{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}')
assert r["error"]["code"] == -32600 and r["id"] is None, r
r = raw('{"jsonrpc":"1.0","id":"v","method":"ping"}')
assert r["error"]["code"] == -32600 and r["id"] == "v", r
r = raw('"just a string"')
assert r["error"]["code"] == -32600, r
r = raw('{"jsonrpc":"2.0","id":5,"method":"no/such"}')
assert r["error"]["code"] == -32601 and r["id"] == 5 and "no/such" in r["error"]["message"], r
r = raw('{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{}}}')
assert r["error"]["code"] == -32602 and "params.name" in r["error"]["message"], r
r = raw('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"nope"}}')
assert r["error"]["code"] == -32602 and "unknown tool 'nope'" in r["error"]["message"], r
r = raw('{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"run_command","arguments":"x"}}')
assert r["error"]["code"] == -32602 and "params.arguments" in r["error"]["message"], r
r = raw('{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"true"},"_meta":{"progressToken":true}}}')
assert r["error"]["code"] == -32602 and "progressToken" in r["error"]["message"], r
r = raw('{"jsonrpc":"2.0","id":10,"method":"tools/list","params":5}')
assert r["error"]["code"] == -32600 and r["id"] == 10, r
r = raw('{"jsonrpc":"2.0","id":"big","method":"ping"}')
assert r == {"jsonrpc": "2.0", "id": "big", "result": {}}, r
# a duplicate in-flight id is refused
a = s.call_async("run_command", {"command": "sleep 1"}, id="dup")
r = raw('{"jsonrpc":"2.0","id":"dup","method":"tools/call","params":{"name":"run_command","arguments":{"command":"true"}}}')
assert r["error"]["code"] == -32600 and r["id"] == "dup", r
assert s.response("dup", timeout=10)["result"]["isError"] is False
# invalid UTF-8, NUL bytes, and notifications/responses get no reply
s.send_raw(b'{"jsonrpc":"2.0","id":11,"method":"\xff"}\n')
r = s.recv()
assert r["error"]["code"] == -32700, r
raw_quiet = ['{"jsonrpc":"2.0","method":"notifications/whatever"}',
             '{"jsonrpc":"2.0","id":99,"result":{}}', '', '   ']
for l in raw_quiet:
    s.send_raw(l + "\n")
assert s.response(s.request("ping"))["result"] == {}
assert not s.pending
# every stdout line was one complete JSON message
for l in s.raw_lines:
    assert l.endswith(b"\n") and l.count(b"\n") == 1
    json.loads(l)
assert s.close() == 0
PY
}

test_mcp_oversized_message_rejected() {
	mcp_py <<'PY'
import os, mcp_client as M
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--max-message-bytes", "64k"]))
s.initialize()
big = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo %s"}}}' % ("x" * 100000)
s.send_raw(big + "\n")
r = s.recv()
assert r["error"]["code"] == -32600 and r["id"] is None and "too large" in r["error"]["message"], r
assert "65536" in r["error"]["message"], r
# just under the limit is fine
ok = s.call("run_command", {"command": "echo %s | wc -c" % ("y" * 60000)})
assert ok["structuredContent"]["stdout"].strip() == "60001", ok
# a huge line in many writes, with the next request in the same write as its end
s.send_raw("z" * 3000000)
s.send_raw("z" * 3000000 + '\n{"jsonrpc":"2.0","id":"after","method":"ping"}\n')
r = s.recv()
assert r["error"]["code"] == -32600 and "6000000 bytes" in r["error"]["message"], r
assert s.response("after")["result"] == {}
assert s.close() == 0
# the default limit is 4 MiB
s = M.Server(M.corral_argv(["-w", os.environ["WS"]]))
s.initialize()
s.send_raw('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"%s"}}\n' % ("p" * (4 << 20)))
r = s.recv()
assert r["error"]["code"] == -32600 and "4194304" in r["error"]["message"], r
s.send_raw('{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"%s"}}\n' % ("p" * ((4 << 20) - 100)))
assert s.response(2)["result"] == {}
assert s.close() == 0
PY
}

# A sandbox that cannot be started (here: the server is out of descriptors) is a tool result
# with isError and the reason; the server keeps serving, leaks nothing, and recovers.
test_mcp_spawn_failure_is_tool_error() {
	mcp_py <<'PY'
import os, resource, mcp_client as M
def lower():
    resource.setrlimit(resource.RLIMIT_NOFILE, (24, 4096))
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--max-concurrent", "8"]), preexec_fn=lower)
s.initialize()
fds = lambda: len(os.listdir("/proc/%d/fd" % s.proc.pid))
before = fds()
for round in range(3):
    ids = [s.call_async("run_command", {"command": "echo ok"}) for _ in range(8)]
    for i in ids:
        r = s.response(i, timeout=30)["result"]
        t = M.text_of(r)
        assert r["isError"] and "not started: " in t and "Too many open files" in t, t
        assert "\nhint: " in t and r["structuredContent"]["error"]["errno"] == 24, r
    assert s.response(s.request("ping"))["result"] == {}
assert fds() == before, (before, fds())
# with descriptors back, calls work again
resource.prlimit(s.proc.pid, resource.RLIMIT_NOFILE, (1024, 4096))
r = s.call("run_command", {"command": "echo again"})
assert r["structuredContent"]["stdout"] == "again\n", M.text_of(r)
assert s.close() == 0
PY
}

mcp_shutdown_case() { # how: eof|TERM|INT
	local how=$1 mark="corral-mcp-$1-$RANDOM$RANDOM"
	HOW=$how MARK=$mark mcp_py <<'PY'
import os, signal, subprocess, time, mcp_client as M
mark, how = os.environ["MARK"], os.environ["HOW"]
def alive():
    return subprocess.run(["pgrep", "-f", mark], stdout=subprocess.DEVNULL).returncode == 0
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--max-concurrent", "3"]))
s.initialize()
for i in range(5):   # three running, two queued
    s.call_async("run_command", {"argv": ["bash", "-c", "exec -a %s-%d sleep 300" % (mark, i)]})
end = time.monotonic() + 10
while time.monotonic() < end and int(subprocess.run(["sh", "-c", "pgrep -f %s | wc -l" % mark],
                                   capture_output=True, text=True).stdout) < 3:
    time.sleep(0.05)
assert alive(), "the commands never started"
t0 = time.monotonic()
if how == "eof":
    s.close_stdin()
else:
    s.proc.send_signal(getattr(signal, "SIG" + how))
rc = s.wait(timeout=5)
dt = time.monotonic() - t0
assert rc == 0, (rc, s.stderr_text)
assert dt < 2, dt
assert not alive(), subprocess.run(["pgrep", "-af", mark], capture_output=True, text=True).stdout
s.drain(0.2)
assert not s.pending, s.pending       # no responses for the killed calls
print("%s: exited 0 in %.2fs" % (how, dt))
PY
	assert_no_survivor "$mark"
}

test_mcp_shutdown_on_eof() { mcp_shutdown_case eof; }
test_mcp_shutdown_on_sigterm() { mcp_shutdown_case TERM; }
test_mcp_shutdown_on_sigint() { mcp_shutdown_case INT; }

test_mcp_cli_usage() {
	local out
	out=$("$CORRAL" help mcp); assert_contains "$out" "--max-concurrent"
	out=$("$CORRAL" mcp --help); assert_contains "$out" "--max-message-bytes"
	"$CORRAL" mcp -w /no/such/dir </dev/null 2>/dev/null; assert_eq $? 125
	"$CORRAL" mcp --max-concurrent 0 </dev/null 2>/dev/null; assert_eq $? 125
	"$CORRAL" mcp --bogus </dev/null 2>/dev/null; assert_eq $? 125
	"$CORRAL" mcp extra </dev/null 2>/dev/null; assert_eq $? 125
	# stdin that cannot be polled (a regular file, /dev/null) works too
	printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"ping"}' >"$WS/in.jsonl"
	out=$("$CORRAL" mcp -w "$WS" <"$WS/in.jsonl" 2>/dev/null); assert_eq $? 0
	assert_eq "$out" '{"jsonrpc":"2.0","id":1,"result":{}}'
	out=$("$CORRAL" mcp -w "$WS" </dev/null 2>/dev/null); assert_eq $? 0
	assert_eq "$out" ""
	# stdout that cannot be polled (a regular file)
	"$CORRAL" mcp -w "$WS" <"$WS/in.jsonl" >"$WS/out.jsonl" 2>/dev/null; assert_eq $? 0
	assert_eq "$(cat "$WS/out.jsonl")" '{"jsonrpc":"2.0","id":1,"result":{}}'
}

# The official TypeScript SDK client (tests/e2e, pinned by package-lock.json).
test_mcp_e2e_typescript_sdk() {
	command -v node >/dev/null || skip "node is not installed (the e2e test needs Node 18+)"
	command -v npm >/dev/null || skip "npm is not installed (the e2e test installs the MCP SDK with npm ci)"
	local dir="$TESTDIR/e2e"
	if [ ! -d "$dir/node_modules/@modelcontextprotocol/sdk" ]; then
		# tests/ is a scratch copy: install there, from the lockfile
		(cd "$dir" && HOME="${HOME:-/tmp}" npm ci --prefer-offline --no-audit --no-fund \
			--loglevel=error >"$WS/npm.log" 2>&1) ||
			fail "npm ci failed in tests/e2e: $(tail -5 "$WS/npm.log")"
	fi
	CORRAL="$CORRAL" WS="$WS" node "$dir/mcp_e2e.mjs" || fail "the TypeScript SDK e2e test failed"
}
