# MCP shell sessions and background jobs (issue: sessions): shell_exec, shell_close,
# shell_list, job_start, job_output, job_kill, job_list, driven over
# stdio by tests/mcp_client.py. Claims are judged on the host: pgrep of unique markers, a
# host-side connection attempt, files in the workspace.

mcp_py() {
	PYTHONPATH="$TESTDIR" CORRAL="$CORRAL" WS="$WS" MARK="m$$-$RANDOM-$RANDOM" python3 - "$@"
}

test_mcp_shell_state_persists() {
	mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, mcp_client as M
ws = os.environ["WS"]
s = M.Server(M.corral_argv(["-w", ws, "--audit", "off"]))
s.initialize()
r = s.call("shell_exec", {"command": "mkdir -p sub && cd sub && export GREETING=hello && "
                                     "greet() { echo \"$GREETING $1\"; } && echo made > f.txt"})
assert not r["isError"], r
sc = r["structuredContent"]
sid = sc["session"]["id"]
assert sc["exit_code"] == 0 and sc["session"] == {"id": sid, "restarted": False, "ended": False}, sc
assert r["content"][0]["text"].startswith("session " + sid + " (new"), r["content"][0]
r = s.call("shell_exec", {"session": sid, "command": "pwd; greet world; cat f.txt"})
sc = r["structuredContent"]
assert sc["stdout"] == ws + "/sub\nhello world\nmade\n", sc["stdout"]
assert "(new" not in r["content"][0]["text"]
# the file is on the host, in the workspace
assert open(ws + "/sub/f.txt").read() == "made\n"
# exit status, stderr, and a command that reads stdin gets EOF
r = s.call("shell_exec", {"session": sid, "command": "cat; read x; echo rc=$? >&2; false"})
sc = r["structuredContent"]
assert sc["exit_code"] == 1 and sc["stderr"] == "rc=1\n" and sc["stdout"] == "", sc
# a second session is separate
r = s.call("shell_exec", {"command": "echo \"[$GREETING]\"; pwd"})
sc2 = r["structuredContent"]
assert sc2["session"]["id"] != sid and sc2["stdout"] == "[]\n" + ws + "\n", sc2
# session calls do not take slots of one-shot runs (a regression: they once leaked one each)
for i in range(6):
    r = s.call("run_command", {"command": "echo %d" % i}, timeout=10)
    assert r["structuredContent"]["stdout"] == "%d\n" % i, r
assert s.close() == 0
PY
}

test_mcp_shell_timeout_keeps_session() {
	mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, subprocess, time, mcp_client as M
ws, mark = os.environ["WS"], os.environ["MARK"]
s = M.Server(M.corral_argv(["-w", ws, "--audit", "off", "--kill-after", "500ms"]))
s.initialize()
sid = s.call("shell_exec", {"command": "export KEEP=yes"})["structuredContent"]["session"]["id"]
t = time.monotonic()
r = s.call("shell_exec", {"session": sid, "timeout_s": 1,
                          "command": "sh -c 'sleep 100' %s" % mark})
sc = r["structuredContent"]
assert sc["timed_out"] and sc["limit"] == "timeout" and sc["exit_code"] == 130, sc
assert not sc["session"]["restarted"] and time.monotonic() - t < 5, sc
assert subprocess.run(["pgrep", "-f", mark], capture_output=True).returncode == 1, "sleep survived"
r = s.call("shell_exec", {"session": sid, "command": "echo $KEEP"})
assert r["structuredContent"]["stdout"] == "yes\n", r
# a shell that ignores SIGINT and spins is restarted, and says its state was lost
r = s.call("shell_exec", {"session": sid, "timeout_s": 0.5,
                          "command": "trap '' INT; while :; do :; done"})
sc = r["structuredContent"]
assert sc["timed_out"] and sc["session"]["restarted"], sc
assert "restarted" in r["content"][0]["text"] and "lost" in r["content"][0]["text"], r["content"][0]
r = s.call("shell_exec", {"session": sid, "command": "echo \"[$KEEP]\""})
assert r["structuredContent"]["stdout"] == "[]\n", r
assert s.close() == 0
PY
}

# A session's commands without timeout_s get the server's timeout, not the timeout_s of the
# call that opened the session; with --timeout 0 that is none. A timeout's message names the
# timeout that was applied.
test_mcp_shell_timeout_is_per_call() {
	mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, time, mcp_client as M
for server_timeout in ("0", "30s"):
    s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--audit", "off", "--timeout", server_timeout,
                                "--kill-after", "200ms"]))
    s.initialize()
    r = s.call("shell_exec", {"command": "true", "timeout_s": 1})
    sid = r["structuredContent"]["session"]["id"]
    t = time.monotonic()
    r = s.call("shell_exec", {"session": sid, "command": "sleep 2; echo done"}, timeout=30)
    sc = r["structuredContent"]
    assert not sc["timed_out"] and sc["stdout"] == "done\n", (server_timeout, M.text_of(r))
    assert time.monotonic() - t >= 2
    # a call's own timeout_s still applies, to that call only, and its message names it
    r = s.call("shell_exec", {"session": sid, "command": "sleep 5", "timeout_s": 0.5}, timeout=30)
    sc = r["structuredContent"]
    assert sc["timed_out"] and "timed out after 0.5s" in M.text_of(r), M.text_of(r)
    r = s.call("shell_exec", {"session": sid, "command": "sleep 1.5; echo again"}, timeout=30)
    assert r["structuredContent"]["stdout"] == "again\n", M.text_of(r)
    assert s.close() == 0
PY
}

test_mcp_shell_exit_ends_session() {
	mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, mcp_client as M
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--audit", "off"]))
s.initialize()
r = s.call("shell_exec", {"command": "exit 7"})
sc = r["structuredContent"]
sid = sc["session"]["id"]
assert sc["exit_code"] == 7 and sc["session"]["ended"], sc
assert "has ended" in r["content"][0]["text"], r["content"][0]
r = s.call("shell_exec", {"session": sid, "command": "echo x"})
assert r["isError"] and "no such session" in M.text_of(r), r
lst = s.call("shell_list", {})["structuredContent"]
assert lst["sessions"] == [], lst
assert s.close() == 0
PY
}

test_mcp_shell_close_list_and_limits() {
	mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, subprocess, time, mcp_client as M
ws, mark = os.environ["WS"], os.environ["MARK"]
s = M.Server(M.corral_argv(["-w", ws, "--audit", "off", "--max-sessions", "2"]))
s.initialize()
a = s.call("shell_exec", {"command": "sh -c 'sleep 300' %s-a &" % mark})["structuredContent"]
b = s.call("shell_exec", {"command": "true"})["structuredContent"]
ids = {a["session"]["id"], b["session"]["id"]}
r = s.call("shell_exec", {"command": "true"})
assert r["isError"] and "too many sessions" in M.text_of(r), r
lst = s.call("shell_list", {})["structuredContent"]
assert {x["session"] for x in lst["sessions"]} == ids and lst["max_sessions"] == 2, lst
for x in lst["sessions"]:
    assert x["alive"] and not x["busy"] and x["commands"] == 1 and x["shell"] in ("bash", "sh"), x
# the background sleep lives in session a until the session is closed
assert subprocess.run(["pgrep", "-f", mark + "-a"], capture_output=True).returncode == 0
r = s.call("shell_close", {"session": a["session"]["id"]})["structuredContent"]
assert r["closed"] == a["session"]["id"], r
for _ in range(50):
    if subprocess.run(["pgrep", "-f", mark + "-a"], capture_output=True).returncode == 1:
        break
    time.sleep(0.1)
else:
    raise AssertionError("a process of the closed session survived")
# closing twice, and bad arguments: tool errors, the server keeps serving
for args, want in [({"session": a["session"]["id"]}, "no such session"), ({}, "session: required"),
                   ({"session": 5}, "session: must be a string")]:
    r = s.call("shell_close", args)
    assert r["isError"] and want in M.text_of(r), (args, r)
for args, want in [({"command": ""}, "command: required"), ({"command": "x", "bogus": 1}, "bogus"),
                   ({"command": "x", "timeout_s": -1}, "timeout_s"),
                   ({"command": "x", "session": "nope"}, "no such session")]:
    r = s.call("shell_exec", args)
    assert r["isError"] and want in M.text_of(r), (args, r)
assert s.call("shell_exec", {"command": "echo ok"})["structuredContent"]["stdout"] == "ok\n"
assert s.close() == 0
PY
}

test_mcp_shell_idle_expiry() {
	mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, subprocess, time, mcp_client as M
ws, mark = os.environ["WS"], os.environ["MARK"]
s = M.Server(M.corral_argv(["-w", ws, "--audit", "off", "--session-idle", "1s"]))
s.initialize()
sid = s.call("shell_exec", {"command": "sh -c 'sleep 300' %s &" % mark})["structuredContent"]["session"]["id"]
# busy time does not count as idle: a 1.5 s command in a 1 s idle window keeps it
r = s.call("shell_exec", {"session": sid, "command": "sleep 1.5; echo still"})
assert r["structuredContent"]["stdout"] == "still\n", r
time.sleep(2.0)
lst = s.call("shell_list", {})["structuredContent"]
assert lst["sessions"] == [] and lst["idle_expiry_s"] == 1.0, lst
r = s.call("shell_exec", {"session": sid, "command": "true"})
assert r["isError"] and "no such session" in M.text_of(r), r
assert subprocess.run(["pgrep", "-f", mark], capture_output=True).returncode == 1, "survivor"
assert s.close() == 0
assert b"closed after" in s.stderr_text, s.stderr_text
PY
}

# The use case of the issue: a server started as a job in a session is reached over the
# session's own loopback; the host and other sessions cannot reach it.
test_mcp_job_http_server_in_session() {
	mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, socket, subprocess, time, mcp_client as M
ws, mark = os.environ["WS"], os.environ["MARK"]
sk = socket.socket(); sk.bind(("127.0.0.1", 0)); port = sk.getsockname()[1]; sk.close()
s = M.Server(M.corral_argv(["-w", ws, "--audit", "off"]))
s.initialize()
sid = s.call("shell_exec", {"command": "mkdir -p site && cd site && echo page > index.html"})["structuredContent"]["session"]["id"]
# http.server's own entry point, with the marker as an extra argument for pgrep
srv = ("exec python3 -c 'import http.server as h; h.test(HandlerClass=h.SimpleHTTPRequestHandler, "
       "port=%d, bind=\"127.0.0.1\")' %s" % (port, mark))
r = s.call("job_start", {"session": sid, "command": srv})
j = r["structuredContent"]
assert not r["isError"] and j["running"] and j["session"] == sid, r
fetch = ("python3 -c 'import sys,urllib.request as u\n"
         "try: print(u.urlopen(\"http://127.0.0.1:%d/index.html\", timeout=2).read().decode(), end=\"\")\n"
         "except Exception as e: print(\"unreachable\", type(e).__name__); sys.exit(3)'" % port)
for _ in range(50):
    sc = s.call("shell_exec", {"session": sid, "command": fetch})["structuredContent"]
    if sc["exit_code"] == 0:
        break
    time.sleep(0.1)
assert sc["stdout"] == "page\n", sc      # the job started in the shell's directory (site/)
# the host cannot connect: the job lives in the session's network namespace
c = socket.socket(); c.settimeout(1)
assert c.connect_ex(("127.0.0.1", port)) != 0, "the host reached the session's server"
c.close()
# another session cannot either
sc = s.call("shell_exec", {"command": fetch})["structuredContent"]
assert sc["exit_code"] == 3 and "unreachable" in sc["stdout"], sc
# its log arrives in the job's ring, read by offset
for _ in range(50):   # the server logs the request after it answered it
    o = s.call("job_output", {"job": j["job"]})["structuredContent"]
    if "GET /index.html" in o["stderr"]:
        break
    time.sleep(0.1)
assert "GET /index.html" in o["stderr"] and o["running"] and o["from_offset"] == 0, o
n = o["next_offset"]
o2 = s.call("job_output", {"job": j["job"], "since_offset": n})["structuredContent"]
assert o2["from_offset"] == n and o2["stderr"] == "" and o2["missed_bytes"] == 0, o2
lst = s.call("job_list", {})["structuredContent"]
assert [x["job"] for x in lst["jobs"]] == [j["job"]] and lst["running"] == 1, lst
assert subprocess.run(["pgrep", "-f", mark], capture_output=True).returncode == 0
k = s.call("job_kill", {"job": j["job"]})["structuredContent"]
assert not k["running"] and k["signal"] in (15, 9), k
assert subprocess.run(["pgrep", "-f", mark], capture_output=True).returncode == 1, "job survived"
# the session itself goes on
assert s.call("shell_exec", {"session": sid, "command": "echo on"})["structuredContent"]["stdout"] == "on\n"
assert s.close() == 0
assert subprocess.run(["pgrep", "-f", mark], capture_output=True).returncode == 1
PY
}

test_mcp_job_standalone_ring_and_limits() {
	mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, subprocess, time, mcp_client as M
ws, mark = os.environ["WS"], os.environ["MARK"]
s = M.Server(M.corral_argv(["-w", ws, "--audit", "off", "--max-jobs", "2", "--max-output", "64k"]))
s.initialize()
j = s.call("job_start", {"command": "echo out; echo err >&2; exit 4"})["structuredContent"]
assert j["running"] and j["session"] is None, j
for _ in range(100):
    o = s.call("job_output", {"job": j["job"]})["structuredContent"]
    if not o["running"]:
        break
    time.sleep(0.05)
assert o["stdout"] == "out\n" and o["stderr"] == "err\n" and o["exit_code"] == 4, o
# a flood overflows the 64 KiB ring: dropped and missed bytes are reported
f = s.call("job_start", {"command": "head -c 300000 /dev/zero | tr '\\0' x"})["structuredContent"]
for _ in range(100):
    o = s.call("job_output", {"job": f["job"], "max_bytes": 1000})["structuredContent"]
    if not o["running"]:
        break
    time.sleep(0.05)
o = s.call("job_output", {"job": f["job"], "max_bytes": 1000})["structuredContent"]
assert o["total_bytes"] == 300000 and o["dropped_bytes"] == 300000 - 65536, o
assert o["missed_bytes"] == o["dropped_bytes"] and o["from_offset"] == o["dropped_bytes"], o
assert len(o["stdout"]) == 1000 and o["next_offset"] == o["from_offset"] + 1000 and o["more"], o
# the job limit, then kill: nothing left on the host
a = s.call("job_start", {"command": "sh -c 'sleep 300' %s-1" % mark})["structuredContent"]
b = s.call("job_start", {"command": "sh -c 'sleep 300' %s-2" % mark})["structuredContent"]
r = s.call("job_start", {"command": "true"})
assert r["isError"] and "too many jobs" in M.text_of(r), r
for x in (a, b):
    k = s.call("job_kill", {"job": x["job"]})["structuredContent"]
    assert not k["running"], k
assert subprocess.run(["pgrep", "-f", mark], capture_output=True).returncode == 1, "job survived"
# bad arguments
for tool, args, want in [("job_output", {"job": "x"}, "no such job"),
                         ("job_output", {"job": a["job"], "since_offset": -1}, "since_offset"),
                         ("job_kill", {}, "job: required"),
                         ("job_start", {"command": "x", "session": "s", "cwd": "."}, "cwd"),
                         ("job_start", {"command": "x", "stdin": "y"}, "stdin")]:
    r = s.call(tool, args)
    assert r["isError"] and want in M.text_of(r), (tool, args, r)
assert s.close() == 0
PY
}

# A since_offset past the end of a job's output was never a next_offset the server gave: it is
# an error result naming the argument and the end (not a page silently read from the end);
# the end itself is a valid offset that reads nothing.
test_mcp_job_output_offset_past_end_is_an_error() {
	mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, time, mcp_client as M
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--audit", "off"]))
s.initialize()
j = s.call("job_start", {"command": "printf abc; printf de >&2"})["structuredContent"]["job"]
for _ in range(100):
    o = s.call("job_output", {"job": j})["structuredContent"]
    if not o["running"]:
        break
    time.sleep(0.05)
assert o["total_bytes"] == 5 and o["next_offset"] == 5 and not o["more"], o
o = s.call("job_output", {"job": j, "since_offset": 5})["structuredContent"]
assert o["stdout"] + o["stderr"] == "" and o["from_offset"] == 5 and o["next_offset"] == 5, o
for past in (6, 1000, 2**63 - 1):
    r = s.call("job_output", {"job": j, "since_offset": past})
    t = M.text_of(r)
    assert r["isError"] and "structuredContent" not in r, (past, r)
    assert ("since_offset: %d is past the end of job %s's output, which is 5 bytes so far" %
            (past, j)) in t, (past, t)
# the job and the server go on
o = s.call("job_output", {"job": j, "since_offset": 3})["structuredContent"]
assert o["stderr"] == "de" and o["from_offset"] == 3, o
assert s.close() == 0
PY
}

# job_output pages end between UTF-8 characters: a page cut at max_bytes stops before a
# character it would split (or, when the page's first character is longer than max_bytes,
# holds that character whole), so paged output joins back to the original with no U+FFFD,
# for every page size, 2-, 3- and 4-byte characters, in stdout and stderr.
test_mcp_job_output_pages_keep_utf8_whole() {
	mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, time, mcp_client as M
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--audit", "off"]))
s.initialize()
out, err = "h\u00e9llo \u20ac\U0001F600x\u00fc", "\u20ac\u00e9\U0001F600e"
cmd = "printf '%s'; sleep 0.2; printf '%s' >&2" % (
    "".join("\\%03o" % b for b in out.encode()), "".join("\\%03o" % b for b in err.encode()))
j = s.call("job_start", {"command": cmd})["structuredContent"]["job"]
# polled as a client would, until the job says it has ended: its answer then has all the
# output (the server reads the state before the bytes)
for _ in range(100):
    o = s.call("job_output", {"job": j})["structuredContent"]
    if not o["running"]:
        break
    time.sleep(0.05)
assert o["stdout"] == out and o["stderr"] == err and not o["more"], o
total = len(out.encode()) + len(err.encode())
assert o["total_bytes"] == total, o
# the report's repro: two bytes cut "h\303\251" after the \303
o = s.call("job_output", {"job": j, "max_bytes": 2})["structuredContent"]
assert o["stdout"] == "h" and o["next_offset"] == 1 and o["more"], o
o = s.call("job_output", {"job": j, "since_offset": 1, "max_bytes": 2})["structuredContent"]
assert o["stdout"] == "\u00e9" and o["next_offset"] == 3, o
for mb in range(1, 9):
    got_out = got_err = ""
    off, pages = 0, 0
    while True:
        o = s.call("job_output", {"job": j, "since_offset": off, "max_bytes": mb})["structuredContent"]
        n = o["next_offset"] - off
        assert o["from_offset"] == off and 0 < n <= max(mb, 4), (mb, off, o)
        assert "\ufffd" not in o["stdout"] + o["stderr"], (mb, off, o)
        assert len((o["stdout"] + o["stderr"]).encode()) == n, (mb, off, o)
        got_out += o["stdout"]
        got_err += o["stderr"]
        off = o["next_offset"]
        pages += 1
        if not o["more"]:
            break
    assert off == total and got_out == out and got_err == err, (mb, got_out, got_err)
assert s.close() == 0
PY
}

# Shutting the server down leaves no session, job or process behind.
test_mcp_sessions_jobs_end_with_server() {
	mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, subprocess, time, mcp_client as M
ws, mark = os.environ["WS"], os.environ["MARK"]
s = M.Server(M.corral_argv(["-w", ws, "--audit", "off"]))
s.initialize()
sid = s.call("shell_exec", {"command": "sh -c 'sleep 300' %s-bg &" % mark})["structuredContent"]["session"]["id"]
s.call("job_start", {"session": sid, "command": "sh -c 'sleep 300' %s-sj" % mark})
s.call("job_start", {"command": "sh -c 'sleep 300' %s-j" % mark})
def up(suf):  # each one's own sh (wrappers carry the mark in quotes)
    return subprocess.run(["pgrep", "-f", "sleep 300 %s-%s" % (mark, suf)], capture_output=True).returncode == 0
for _ in range(100):  # the jobs' commands start after job_start answers
    if all(up(x) for x in ("bg", "sj", "j")):
        break
    time.sleep(0.05)
assert all(up(x) for x in ("bg", "sj", "j")), [up(x) for x in ("bg", "sj", "j")]
assert s.close() == 0
for _ in range(50):
    if subprocess.run(["pgrep", "-f", mark], capture_output=True).returncode == 1:
        break
    time.sleep(0.1)
else:
    raise AssertionError("survivors after the server ended")
PY
}

test_mcp_run_pipeline() {
	mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, subprocess, time, mcp_client as M
ws, mark = os.environ["WS"], os.environ["MARK"]
s = M.Server(M.corral_argv(["-w", ws, "--audit", "off", "--kill-after", "300ms"]))
s.initialize()
r = s.call("run_pipeline", {"stages": [["printf", "b\\na\\nc\\n"], ["sort"], ["head", "-n", "2"]]})
sc = r["structuredContent"]
assert not r["isError"] and sc["stdout"] == "a\nb\n" and sc["exit_code"] == 0, r
assert [st["exit_code"] for st in sc["stages"]] == [0, 0, 0] and sc["failed_stage"] is None, sc
assert "stage 2 (sort): exit 0" in M.text_of(r), M.text_of(r)
# each stage's stderr is in the text (a model often reads only that), in stage order
r = s.call("run_pipeline", {"stages": [["sh", "-c", "echo out; echo warn-one >&2"],
                                       ["sh", "-c", "cat; echo 'grep: nope: No such file' >&2; exit 2"]]})
t = M.text_of(r)
assert r["isError"] and "--- stage 1 stderr ---\nwarn-one\n--- stage 2 stderr ---\ngrep: nope: No such file\n" in t, t
assert "--- stdout ---\nout\n" in t, t
# a failing middle stage: pipefail status, the upstream stage torn down, nothing survives
r = s.call("run_pipeline", {"stages": [["sh", "-c", "exec sleep 300", mark], ["sh", "-c", "exit 3"],
                                       ["cat"]], "timeout_s": 20})
sc = r["structuredContent"]
assert r["isError"] and sc["exit_code"] == 3 and sc["failed_stage"] == 1, sc
assert sc["stages"][0]["signal"] in (9, 15) and sc["stages"][2]["exit_code"] == 0, sc["stages"]
assert subprocess.run(["pgrep", "-f", mark], capture_output=True).returncode == 1, "stage survived"
# a stage that cannot start is named; bad stages are argument errors
r = s.call("run_pipeline", {"stages": [["echo", "x"], ["no-such-command-zz"]]})
assert r["isError"] and "stage 2" in M.text_of(r) and "no-such-command-zz" in M.text_of(r), r
for args, want in [({"stages": [["echo"]]}, "2 to 16"), ({"stages": "x"}, "stages"),
                   ({"stages": [["echo"], []]}, "stages[1]"), ({"stages": [["echo"], [1]]}, "stages[1][0]"),
                   ({}, "stages: required")]:
    r = s.call("run_pipeline", args)
    assert r["isError"] and want in M.text_of(r), (args, r)
assert s.close() == 0
PY
}

# Session commands, pipelines and jobs are in the audit store as executions: a session
# command's parent is its session; a pipeline is one mcp_call row (the pipeline's id, "A | B",
# its pipefail status) that its stage rows point at; a job is a row of kind job when it ends
# (a job of its own with its sandbox's usage and isolation; its parent the session when it
# ran in one), with what it does not know (byte counts per stream, redactions) null.
test_mcp_session_job_pipeline_audit() {
	mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import json, os, subprocess, time, mcp_client as M
ws = os.environ["WS"]
db = ws + "/audit.db"
s = M.Server(M.corral_argv(["-w", ws, "--audit", db]))
s.initialize()
sc = s.call("shell_exec", {"command": "echo audited-session"})["structuredContent"]
sid = sc["session"]["id"]
sc2 = s.call("shell_exec", {"session": sid, "command": "cd /tmp && echo again"})["structuredContent"]
pl = s.call("run_pipeline", {"stages": [["echo", "x"], ["cat"]]})["structuredContent"]
j = s.call("job_start", {"command": "echo job-out"})["structuredContent"]["job"]
js = s.call("job_start", {"session": sid, "command": "echo in-session"})["structuredContent"]["job"]
tok = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
jt = s.call("job_start", {"command": "printf 'token %%s%%s\\n' %s %s" % (tok[:20], tok[20:])})["structuredContent"]["job"]
for jid in (j, js, jt):
    for _ in range(100):
        if not s.call("job_output", {"job": jid})["structuredContent"]["running"]:
            break
        time.sleep(0.05)
assert s.close() == 0
def audit(*a):
    out = subprocess.run([os.environ["CORRAL"], "audit", "--db", db] + list(a),
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout
rows = [json.loads(l) for l in audit("export").splitlines()]
ex = {r["id"]: r for r in rows if r["type"] == "execution"}
# session commands: parent = the session, the session's policy hash, the client
cmds = [r for r in ex.values() if r["kind"] == "session_cmd"]
assert [r["id"] for r in cmds] == [sc["id"], sc2["id"]], cmds
for r in cmds:
    assert r["parent"] == sid and r["client"] == "mcp" and r["client_info"]["name"], r
    assert len(r["policy_hash"]) == 64 and r["cwd"] == os.path.realpath(ws), r
# the pipeline: its call row, and the stages under it
stages = [r for r in ex.values() if r["kind"] == "pipeline_stage"]
assert len(stages) == 2 and {r["parent"] for r in stages} == {pl["id"]}, stages
call = ex[pl["id"]]
assert call["kind"] == "mcp_call" and call["command"] == "echo x | cat" and call["exit_code"] == 0, call
assert call["policy_hash"] == stages[0]["policy_hash"] and len(call["policy_hash"]) == 64, call
show = json.loads(audit("show", pl["id"][:12], "--json"))
assert sorted(c["id"] if isinstance(c, dict) else c for c in show["children"]) == sorted(r["id"] for r in stages), show["children"]
# the jobs: a row each, no more "job" events
assert not [r for r in rows if r["type"] == "event" and r["kind"] == "job"], rows
job, sjob = ex[j], ex[js]
assert job["kind"] == "job" and job["parent"] is None and job["command"] == "echo job-out", job
assert job["exit_code"] == 0 and job["signal"] is None and not job["timed_out"], job
assert job["client"] == "mcp" and job["client_info"]["name"] and job["cwd"] == os.path.realpath(ws), job
assert len(job["policy_hash"]) == 64 and job["isolation"]["seccomp"]["applied"] is not None, job
assert job["user_ms"] is not None and job["max_rss_kb"] > 0 and job["violations"] == [], job
assert job["stdout_bytes"] is None and job["stderr_bytes"] is None and job["redactions"] == 0, job
assert job["started_at"] <= job["ended_at"], job
assert sjob["kind"] == "job" and sjob["parent"] == sid and sjob["exit_code"] == 0, sjob
assert sjob["policy_hash"] == cmds[0]["policy_hash"] and sjob["cwd"] is None, sjob
assert sjob["isolation"] and sjob["user_ms"] is None and sjob["violations"] is None, sjob
assert ex[jt]["redactions"] == 1 and tok not in json.dumps(rows), ex[jt]   # counted, never stored
stats = json.loads(audit("stats", "--json"))
assert stats["by_kind"]["job"] == 3, stats
audit("verify")   # the chain holds (audit() fails on a non-zero exit)
PY
}

# How jobs end, on the record: job_kill is a cancelled event, --job-timeout a timeout event,
# and at the server's exit every job still running (its own sandbox or a session's) is
# killed and recorded as cancelled, as are a session command and a pipeline cut off by the
# exit; the host sees none of their processes afterwards. A pipeline that could not start is
# a row with its error (a setup_failed event).
test_mcp_session_audit_job_ends() {
	MARK="corral-jobend-$RANDOM$RANDOM" mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import json, os, subprocess, time, mcp_client as M
ws, mark = os.environ["WS"], os.environ["MARK"]
db = ws + "/audit.db"
s = M.Server(M.corral_argv(["-w", ws, "--audit", db, "--job-timeout", "1s",
                            "--kill-after", "300ms"]))
s.initialize()
sid = s.call("shell_exec", {"command": "true"})["structuredContent"]["session"]["id"]
expired = s.call("job_start", {"session": sid, "command": "bash -c 'exec -a %s-t sleep 300'" % mark})["structuredContent"]["job"]
time.sleep(1.0)
for _ in range(100):  # stopped at 1 s (the duration is checked below), SIGKILL 0.3 s later
    if not s.call("job_output", {"job": expired})["structuredContent"]["running"]:
        break
    time.sleep(0.1)
assert not s.call("job_output", {"job": expired})["structuredContent"]["running"]
assert s.close() == 0
# job_kill, then what runs at the exit: a job of its own, a session job, a session
# command. A second server on the same store, without the short --job-timeout (on a slow
# machine the calls below may take longer than it: the killed job must be cancelled, not
# timed out, and the others must still be running at the exit)
s = M.Server(M.corral_argv(["-w", ws, "--audit", db, "--kill-after", "300ms"]))
s.initialize()
killed = s.call("job_start", {"command": "bash -c 'exec -a %s-k sleep 300'" % mark})["structuredContent"]["job"]
for _ in range(100):  # its command starts after job_start answers
    if subprocess.run(["pgrep", "-f", "^%s-k" % mark], capture_output=True).returncode == 0:
        break
    time.sleep(0.05)
k = s.call("job_kill", {"job": killed})["structuredContent"]
assert not k["running"], k
sid2 = s.call("shell_exec", {"command": "true"})["structuredContent"]["session"]["id"]
s2 = s.call("shell_exec", {"command": "true"})["structuredContent"]["session"]["id"]
own = s.call("job_start", {"command": "bash -c 'exec -a %s-o sleep 300'" % mark})["structuredContent"]["job"]
sj = s.call("job_start", {"session": s2, "command": "bash -c 'exec -a %s-s sleep 300'" % mark})["structuredContent"]["job"]
s.call_async("shell_exec", {"session": sid2, "command": "bash -c 'exec -a %s-c sleep 300'" % mark})
s.call_async("run_pipeline", {"stages": [["bash", "-c", "exec -a %s-p sleep 300" % mark], ["cat"]]})
bad = s.call("run_pipeline", {"stages": [["corral-no-such-prog"], ["cat"]]})
assert bad["isError"], bad
def running(suf):
    return subprocess.run(["pgrep", "-f", mark + suf], capture_output=True).returncode == 0
for _ in range(100):  # started after their calls answered (or, async, are still starting)
    if all(running(suf) for suf in ("-o", "-s", "-c", "-p")):
        break
    time.sleep(0.05)
for suf in ("-o", "-s", "-c", "-p"):
    assert running(suf), suf
assert s.close() == 0
assert subprocess.run(["pgrep", "-f", mark]).returncode == 1, "a process survived the exit"
out = subprocess.run([os.environ["CORRAL"], "audit", "--db", db, "export"], capture_output=True, text=True, check=True).stdout
rows = [json.loads(l) for l in out.splitlines()]
ex = {r["id"]: r for r in rows if r["type"] == "execution"}
def events(i):
    return sorted(r["kind"] for r in rows if r["type"] == "event" and r["execution_id"] == i)
assert ex[killed]["kind"] == "job" and ex[killed]["signal"] and events(killed) == ["cancelled"], (ex[killed], events(killed))
e = ex[expired]
assert e["timed_out"] and e["limit_hit"] == "timeout" and e["parent"] == sid and "timeout" in events(expired), (e, events(expired))
assert 1000 <= e["duration_ms"] < 5000, e["duration_ms"]
for jid, parent in ((own, None), (sj, s2)):
    r = ex[jid]
    assert r["kind"] == "job" and r["parent"] == parent and r["exit_code"] is None, r
    assert events(jid) == ["cancelled"], (r, events(jid))
cut = [r for r in ex.values() if r["kind"] == "session_cmd" and r["command"] == "bash -c 'exec -a %s-c sleep 300'" % mark]
assert len(cut) == 1 and cut[0]["parent"] == sid2 and events(cut[0]["id"]) == ["cancelled"], cut
assert cut[0]["user_ms"] is None and cut[0]["isolation"] is None, cut   # not known: no result
pipe = [r for r in ex.values() if r["kind"] == "mcp_call" and r["command"].startswith("bash -c")]
assert len(pipe) == 1 and events(pipe[0]["id"]) == ["cancelled"], pipe
stages = [r for r in ex.values() if r["parent"] == pipe[0]["id"]]
assert len(stages) == 2 and all(r["kind"] == "pipeline_stage" for r in stages), stages
# the sleep, which ends only when killed: killed and cancelled; cat downstream is killed too,
# or ends by itself (exit 0) on the EOF its upstream's end gives it first (both stages are
# killed at once: which end comes first is the kernel's)
first = [r for r in stages if r["argv"][0] == "bash"]
last = [r for r in stages if r["argv"] == ["cat"]]
assert len(first) == 1 and first[0]["signal"] and events(first[0]["id"]) == ["cancelled"], (first, [events(r["id"]) for r in first])
assert len(last) == 1 and (last[0]["signal"] or last[0]["exit_code"] == 0), last
nostart = [r for r in ex.values() if r["kind"] == "mcp_call" and "corral-no-such-prog" in r["command"]]
assert len(nostart) == 1 and nostart[0]["error"] and events(nostart[0]["id"]) == ["setup_failed"], nostart
v = subprocess.run([os.environ["CORRAL"], "audit", "--db", db, "verify"], capture_output=True, text=True)
assert v.returncode == 0, v.stdout + v.stderr
PY
}

# shell_close of a busy session: the command it was running is on the record (a session_cmd
# row, cancelled, what is not known null), and the session's running job is recorded as
# cancelled, not as a job that just ended. The host sees none of their processes afterwards.
test_mcp_session_audit_close_busy() {
	MARK="corral-closebusy-$RANDOM$RANDOM" mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import json, os, subprocess, time, mcp_client as M
ws, mark = os.environ["WS"], os.environ["MARK"]
db = ws + "/audit.db"
s = M.Server(M.corral_argv(["-w", ws, "--audit", db]))
s.initialize()
sid = s.call("shell_exec", {"command": "true"})["structuredContent"]["session"]["id"]
job = s.call("job_start", {"session": sid, "command": "bash -c 'exec -a %s-j sleep 300'" % mark})["structuredContent"]["job"]
cmd = "bash -c 'exec -a %s-c sleep 300'" % mark
pending = s.call_async("shell_exec", {"session": sid, "command": cmd})
for _ in range(100):
    if all(subprocess.run(["pgrep", "-f", mark + suf], capture_output=True).returncode == 0 for suf in ("-j", "-c")):
        break
    time.sleep(0.05)
else:
    raise AssertionError("the session's command and job did not start")
c = s.call("shell_close", {"session": sid})["structuredContent"]
assert c["closed"] == sid and c["was_busy"], c
r = s.response(pending)["result"]
assert r["isError"] and "closed while the command ran" in M.text_of(r), r
for _ in range(100):
    if not s.call("job_output", {"job": job})["structuredContent"]["running"]:
        break
    time.sleep(0.05)
else:
    raise AssertionError("the session's job outlived shell_close")
assert subprocess.run(["pgrep", "-f", mark], capture_output=True).returncode == 1, "a process survived shell_close"
assert s.close() == 0
out = subprocess.run([os.environ["CORRAL"], "audit", "--db", db, "export"], capture_output=True, text=True, check=True).stdout
rows = [json.loads(l) for l in out.splitlines()]
ex = {r["id"]: r for r in rows if r["type"] == "execution"}
def events(i):
    return sorted(r["kind"] for r in rows if r["type"] == "event" and r["execution_id"] == i)
cut = [r for r in ex.values() if r["kind"] == "session_cmd" and r["command"] == cmd]
assert len(cut) == 1, [r for r in ex.values() if r["kind"] == "session_cmd"]
assert cut[0]["parent"] == sid and events(cut[0]["id"]) == ["cancelled"], (cut, events(cut[0]["id"]))
assert cut[0]["user_ms"] is None and cut[0]["isolation"] is None and cut[0]["exit_code"] is None, cut
j = ex[job]
assert j["kind"] == "job" and j["parent"] == sid and j["exit_code"] is None, j
assert events(job) == ["cancelled"], (j, events(job))
PY
}

# The server's exit records every run it killed, also when closing sessions has used up the
# reap budget: here eleven busy sessions whose commands ignore SIGHUP take about 100 ms each
# to close (over a second in all), and a run_command and a run_pipeline were running. Each
# has its mcp_call row, cancelled (with its result, or cut off: what is not known null).
test_mcp_shutdown_audits_runs_after_slow_sessions() {
	MARK="corral-slowexit-$RANDOM$RANDOM" mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import json, os, subprocess, time, mcp_client as M
ws, mark = os.environ["WS"], os.environ["MARK"]
db = ws + "/audit.db"
s = M.Server(M.corral_argv(["-w", ws, "--audit", db, "--max-sessions", "11", "--max-concurrent", "16"]))
s.initialize()
for i in range(11):
    s.call_async("shell_exec", {"command": "trap '' HUP; exec -a %s-s%d sleep 300" % (mark, i)})
run = "bash -c 'exec -a %s-r sleep 300'" % mark
s.call_async("run_command", {"command": run})
s.call_async("run_pipeline", {"stages": [["bash", "-c", "exec -a %s-p sleep 300" % mark], ["cat"]]})
for _ in range(200):
    n = len(subprocess.run(["pgrep", "-f", mark], capture_output=True, text=True).stdout.split())
    if n >= 13:
        break
    time.sleep(0.05)
else:
    raise AssertionError("not everything started: %d processes" % n)
t0 = time.monotonic()
assert s.close() == 0
took = time.monotonic() - t0
assert took < 10, took   # bounded: session closes, one reap budget, the flush
assert subprocess.run(["pgrep", "-f", mark]).returncode == 1, "a process survived the exit"
out = subprocess.run([os.environ["CORRAL"], "audit", "--db", db, "export"], capture_output=True, text=True, check=True).stdout
rows = [json.loads(l) for l in out.splitlines()]
ex = {r["id"]: r for r in rows if r["type"] == "execution"}
def events(i):
    return sorted(r["kind"] for r in rows if r["type"] == "event" and r["execution_id"] == i)
cmds = [r for r in ex.values() if r["kind"] == "session_cmd"]
assert len(cmds) == 11 and all(events(r["id"]) == ["cancelled"] for r in cmds), cmds
runs = [r for r in ex.values() if r["kind"] == "mcp_call" and r["command"] == run]
assert len(runs) == 1 and events(runs[0]["id"]) == ["cancelled"], (runs, took)
pipe = [r for r in ex.values() if r["kind"] == "mcp_call" and mark + "-p" in r["command"]]
assert len(pipe) == 1 and "cancelled" in events(pipe[0]["id"]), (pipe, took)
v = subprocess.run([os.environ["CORRAL"], "audit", "--db", db, "verify"], capture_output=True, text=True)
assert v.returncode == 0, v.stdout + v.stderr
PY
}

# Regressions from review: a session's commands can signal its jobs (one Landlock domain);
# job_kill takes what the job left in its process group; a job past --job-timeout is
# stopped once (no spin); running jobs keep a session from idle expiry; a command refused
# on a new session does not leave the session behind. The signal and kill parts run on a
# server without --job-timeout, so that a slow machine's job cannot reach its timeout first.
test_mcp_session_job_regressions() {
	mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, subprocess, time, mcp_client as M
ws, mark = os.environ["WS"], os.environ["MARK"]
s = M.Server(M.corral_argv(["-w", ws, "--audit", "off", "--kill-after", "1s",
                            "--session-idle", "1s"]))
s.initialize()
def gone(m):
    for _ in range(50):
        if subprocess.run(["pgrep", "-f", m], capture_output=True).returncode == 1:
            return True
        time.sleep(0.1)
    return False
def started(m):  # a job's command starts after job_start answers
    for _ in range(100):
        if subprocess.run(["pgrep", "-f", m], capture_output=True).returncode == 0:
            return True
        time.sleep(0.02)
    return False
sid = s.call("shell_exec", {"command": "true"})["structuredContent"]["session"]["id"]
s.call("job_start", {"session": sid, "command": "sh -c 'sleep 300' %s-sig" % mark})
assert started("sleep 300 %s-sig" % mark)   # the job's sh itself (its wrapper has quotes)
r = s.call("shell_exec", {"session": sid, "command": "pkill -f %s-sig && echo signalled" % mark})
assert r["structuredContent"]["stdout"] == "signalled\n", r["structuredContent"]
assert gone(mark + "-sig"), "the shell could not signal its session's job"
# a job that leaves a TERM-ignoring child in its group: job_kill leaves nothing
j = s.call("job_start", {"session": sid, "command":
                         "(trap '' TERM; exec sh -c 'sleep 300' %s-grp) & wait" % mark})["structuredContent"]
assert started("sleep 300 %s-grp" % mark)   # the TERM-ignoring sh, not its wrappers
k = s.call("job_kill", {"job": j["job"]})["structuredContent"]
assert not k["running"], k
assert gone(mark + "-grp"), "a process of the killed job's group survived"
assert s.close() == 0
# --job-timeout 1s: stopped once (SIGTERM at 1 s, ignored; SIGKILL 3 s later), and the
# server does not spin meanwhile; the running job keeps its session past --session-idle 1s
s = M.Server(M.corral_argv(["-w", ws, "--audit", "off", "--kill-after", "3s",
                            "--job-timeout", "1s", "--session-idle", "1s"]))
s.initialize()
sid = s.call("shell_exec", {"command": "true"})["structuredContent"]["session"]["id"]
j = s.call("job_start", {"session": sid, "command": "trap '' TERM; sh -c 'sleep 300' %s-to" % mark})["structuredContent"]
cpu0 = sum(map(int, open("/proc/%d/stat" % s.proc.pid).read().rsplit(")", 1)[1].split()[11:13]))
time.sleep(1.2)
# past --session-idle with no command, but its job still runs: the session is kept
lst = s.call("shell_list", {})["structuredContent"]["sessions"]
assert [x["session"] for x in lst] == [sid] and lst[0]["jobs"] == 1, lst
time.sleep(1.8)
for _ in range(50):  # SIGKILL at 4 s
    o = s.call("job_output", {"job": j["job"]})["structuredContent"]
    if not o["running"]:
        break
    time.sleep(0.2)
cpu1 = sum(map(int, open("/proc/%d/stat" % s.proc.pid).read().rsplit(")", 1)[1].split()[11:13]))
assert not o["running"] and o["signal"] == 9, o
assert (cpu1 - cpu0) / os.sysconf("SC_CLK_TCK") < 0.8, "the server spun: %d ticks" % (cpu1 - cpu0)
assert gone(mark + "-to")
lst = s.call("shell_list", {})["structuredContent"]["sessions"]
assert [x["session"] for x in lst] in ([sid], []), lst   # it may have expired once the job ended
# a command refused on a new session: no session left behind
r = s.call("shell_exec", {"command": "x" * (1 << 21)})
assert r["isError"] and "too long" in M.text_of(r), M.text_of(r)[:300]
time.sleep(1.5)
assert s.call("shell_list", {})["structuredContent"]["sessions"] == []
assert s.close() == 0
PY
}
