#!/usr/bin/env python3
"""A stand-in MCP server for checking the harness itself before `corral mcp` exists.

It speaks the same stdio JSON-RPC as the real server (initialize, tools/list, tools/call
run_command {argv}) and runs each call as `corral run --json -- ARGV` from a thread, so its
numbers are those of the CLI plus Python, NOT of corral's server. Use it only as:

    CORRAL_MCP_CMD="python3 bench/mock_mcp.py" bench/run.sh

and the report marks every server number as coming from this mock.
"""
import json
import os
import subprocess
import sys
import threading
import ctypes
import signal

libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent():
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: nothing outlives the mock

CORRAL = os.environ.get("CORRAL", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                               "..", "build", "corral"))
limit = 8
args = sys.argv[1:]
if "--max-concurrent" in args:
    limit = int(args[args.index("--max-concurrent") + 1])
sem = threading.Semaphore(limit)
out_lock = threading.Lock()


def send(obj):
    data = json.dumps(obj) + "\n"
    with out_lock:
        sys.stdout.write(data)
        sys.stdout.flush()


def run(rid, argv):
    with sem:
        p = subprocess.run([CORRAL, "run", "--json", "--"] + argv, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           preexec_fn=die_with_parent)
    text = p.stdout.decode(errors="replace")
    send({"jsonrpc": "2.0", "id": rid, "result": {
        "content": [{"type": "text", "text": text}], "isError": p.returncode != 0}})


for line in sys.stdin:
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    if rid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "mock-corral", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [
            {"name": "run_command", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call":
        threading.Thread(target=run, args=(rid, msg["params"]["arguments"]["argv"]),
                         daemon=True).start()
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no method"}})
