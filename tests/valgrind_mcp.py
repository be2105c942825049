#!/usr/bin/env python3
"""Run `corral mcp` under valgrind memcheck through a scripted session that touches every
path of the server: protocol errors, lifecycle, every tool, argument errors, oversized lines,
progress, concurrency, queueing, cancellation (running and queued) and EOF with calls still
running. Exits non-zero on any valgrind error or leak.

    python3 tests/valgrind_mcp.py build/corral

Valgrind runs the cloned sandbox child on its emulated CPU too, and it emulates neither
seccomp, Landlock nor openat2, and it refuses any setrlimit(RLIMIT_NOFILE) whose hard limit
differs from its own. So the session uses --mode none (no isolation layers) and
--nofile 1048576 (clamped to valgrind's own limit), and --child-silent-after-fork; what is
checked is the server, not the sandbox. Not part of `make check` (about a minute).
"""
import os, shutil, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcp_client as M  # noqa: E402


def main():
    corral = sys.argv[1] if len(sys.argv) > 1 else "build/corral"
    ws = tempfile.mkdtemp(prefix="corral-vg-")
    log = os.path.join(ws, "valgrind.log")
    argv = ["valgrind", "--leak-check=full", "--show-leak-kinds=definite,indirect,possible",
            "--errors-for-leak-kinds=definite,indirect,possible", "--error-exitcode=1",
            "--child-silent-after-fork=yes", "--log-file=" + log,
            corral, "mcp", "-w", ws, "--max-concurrent", "2", "--allow-env", "MY_*",
            "--max-message-bytes", "64k", "--mode", "none", "--nofile", "1048576"]
    s = M.Server(argv)
    T = 120
    s.send_raw("{bad json\n")
    assert s.recv(timeout=T)["error"]["code"] == -32700
    assert s.response(s.request("tools/list"), timeout=T)["error"]["code"] == -32002
    s.initialize()
    s.response(s.request("tools/list"), timeout=T)
    assert "exit: 2" in M.text_of(s.call("run_command", {"command": "echo hi; exit 2"}, timeout=T))
    assert s.call("run_command", {"argv": ["no-such-command"]}, timeout=T)["isError"]
    assert s.call("run_command", {"command": "sleep 5", "timeout_s": 0.3}, timeout=T)["isError"]
    assert "truncated" in M.text_of(s.call("run_command", {"command": "seq 1 400000"}, timeout=T))
    progs = {"python": "print(1)", "node": "console.log(1)", "bash": "echo 1", "sh": "echo 1"}
    tools = {t["name"]: t for t in s.response(s.request("tools/list"), timeout=T)["result"]["tools"]}
    for lang in tools["run_code"]["inputSchema"]["properties"]["language"]["enum"]:
        r = s.call("run_code", {"language": lang, "code": progs[lang]}, timeout=T)
        assert r["structuredContent"]["stdout"] == "1\n", M.text_of(r)
    r = s.call("run_code", {"language": "sh", "code": "cat", "stdin": "in"}, timeout=T)
    assert r["structuredContent"]["stdout"] == "in", M.text_of(r)
    r = s.call("run_command", {"command": "echo $MY_X", "env": {"MY_X": "y"}, "cwd": "."}, timeout=T)
    assert r["structuredContent"]["stdout"] == "y\n"
    for bad in ({"command": 1}, {"command": "x", "env": {"NO": "1"}}, {"command": "x", "cwd": "/etc"},
                {"zzz": 1}, {"argv": ["a", 2]}, {"command": "x", "timeout_s": 1e9}):
        assert s.call("run_command", bad, timeout=T)["isError"]
    s.send_raw('{"jsonrpc":"2.0","id":"u","method":"tools/call","params":{"name":"nope"}}\n')
    assert s.response("u", timeout=T)["error"]["code"] == -32602
    s.send_raw("x" * 100000 + "\n")
    assert s.recv(timeout=T)["error"]["code"] == -32600
    s.send_raw('[1,2]\n{"jsonrpc":"2.0","id":null,"method":"ping"}\n')
    assert s.recv(timeout=T)["error"]["code"] == -32600 and s.recv(timeout=T)["error"]["code"] == -32600
    p = s.call_async("run_command", {"command": "for i in 1 2 3 4; do echo l$i; sleep 0.5; done"},
                     progress_token="t")
    s.call_async("run_command", {"command": "sleep 30"}, id="c1")
    s.call_async("run_command", {"command": "sleep 30"}, id="c2")   # queued
    time.sleep(1.5)
    s.notify("notifications/cancelled", {"requestId": "c2"})
    s.notify("notifications/cancelled", {"requestId": "c1"})
    assert not s.response(p, timeout=T)["result"]["isError"] and s.notifications
    ids = [s.call_async("run_command", {"command": "echo %d" % i}) for i in range(10)]
    got = sorted(int(s.response(i, timeout=T)["result"]["structuredContent"]["stdout"]) for i in ids)
    assert got == list(range(10)), got
    for _ in range(3):   # still running (two) and queued (one) at EOF
        s.call_async("run_command", {"command": "sleep 30"})
    time.sleep(2)
    rc = s.close(timeout=T)
    text = open(log).read()
    summary = [l for l in text.splitlines() if "ERROR SUMMARY" in l or "heap blocks" in l or "total heap usage" in l]
    print("\n".join(summary))
    print("valgrind exit status %d" % rc)
    shutil.rmtree(ws, ignore_errors=True)
    print("PASS valgrind" if rc == 0 else "FAIL valgrind (see the log above)")
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
