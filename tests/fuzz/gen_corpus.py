#!/usr/bin/env python3
"""Write the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/.

The seeds are small, realistic inputs in each target's input layout (see the header comment
of tests/fuzz/fuzz_<target>.c). Re-running this rewrites the generated seeds and leaves other
files (regression-* reproducers, the redact corpus) alone.

    python3 tests/fuzz/gen_corpus.py
"""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- jsonrpc: byte 0 = cap (bits 0-1) | read size 2^n (bits 2-5) | initialized (bit 6);
# byte 1 = read-size seed; then the client's byte stream.


def rpc(cap=0, shift=10, init=False, seed=1, pad=False):
    return bytes([cap | shift << 2 | (0x40 if init else 0) | (0x80 if pad else 0), seed])


def lines(*msgs, end="\n"):
    out = []
    for m in msgs:
        out.append(m if isinstance(m, str) else json.dumps(m, separators=(",", ":")))
    return (end.join(out) + end).encode()


INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "fuzz", "version": "1"}}}
INITED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "run_command", "arguments": {"command": "ls -la", "timeout": 10}}}

write("jsonrpc", "session", rpc() + lines(
    INIT, INITED, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, CALL,
    {"jsonrpc": "2.0", "id": "p", "method": "ping"}))
write("jsonrpc", "before-initialize", rpc() + lines(
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
    {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": "1999-01-01"}},
    {"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": {"protocolVersion": 7}},
    {"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": []},
    {"jsonrpc": "2.0", "id": 6, "method": "initialize"}))
write("jsonrpc", "batch", rpc(init=True) + lines(
    [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "method": "x"}], "[]"))
write("jsonrpc", "garbage", rpc() + b"hello\n{\"jsonrpc\":\n\x00\xff\xfe{}\n"
      b"Content-Length: 52\r\n\r\n{\"a\"\n]]]\n\"str\"\n42\nnull\ntrue\n")
write("jsonrpc", "bad-envelopes", rpc(init=True) + lines(
    {"id": 1, "method": "ping"},
    {"jsonrpc": "1.0", "id": 1, "method": "ping"},
    {"jsonrpc": 2.0, "id": 1, "method": "ping"},
    {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"},
    {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
    {"jsonrpc": "2.0", "id": None, "method": "ping"},
    {"jsonrpc": "2.0", "id": 1},
    {"jsonrpc": "2.0", "id": 1, "method": 5},
    {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": "x"},
    '{"jsonrpc":"2.0","id":1,"method":"pi\\u0000ng"}'))
write("jsonrpc", "responses", rpc(init=True) + lines(
    {"jsonrpc": "2.0", "id": 1, "result": {}},
    {"jsonrpc": "2.0", "id": "a", "error": {"code": -1, "message": "no"}},
    {"jsonrpc": "2.0", "id": [1], "result": None},
    {"result": 1}))
write("jsonrpc", "handlers", rpc(init=True) + lines(
    {"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"s": "\u00e9\u0000\ud83d\ude00", "n": [1, 2.5, True, None]}},
    {"jsonrpc": "2.0", "id": 2, "method": "fail", "params": {"code": -32000}},
    {"jsonrpc": "2.0", "id": 3, "method": "defer"},
    {"jsonrpc": "2.0", "id": 4, "method": "silent"},
    {"jsonrpc": "2.0", "id": 5, "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 6, "method": "nope"},
    {"jsonrpc": "2.0", "method": "nope"},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}},
    {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "run_code"}},
    {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "run_command", "arguments": []}},
    {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "run_command", "arguments": {"command": "a\u0000b"}}},
    {"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "run_command", "arguments": {"command": "echo \u00e9\u4e2d\ud83d\ude00"}}}))
write("jsonrpc", "fail-raw-bytes", rpc(init=True) +
      b'{"jsonrpc":"2.0","id":1,"method":"fail","params":{"code":-32602},"x":"\xc3\xa9"}\x00\xff\x01\r\n'
      b'{"jsonrpc":"2.0","id":2,"method":"fail"} \xe2\x82\n')
write("jsonrpc", "ids", rpc(init=True) + lines(
    '{"jsonrpc":"2.0","id":9223372036854775807,"method":"ping"}',
    '{"jsonrpc":"2.0","id":-9223372036854775808,"method":"ping"}',
    '{"jsonrpc":"2.0","id":99999999999999999999,"method":"ping"}',
    '{"jsonrpc":"2.0","id":-0,"method":"ping"}',
    '{"jsonrpc":"2.0","id":"","method":"ping"}',
    '{"jsonrpc":"2.0","id":"\\u0000\\n\\"","method":"ping"}',
    '{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
    '{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}'))
write("jsonrpc", "too-long-small-cap", rpc(cap=1, shift=3, init=True) + lines(
    {"jsonrpc": "2.0", "id": 1, "method": "ping"}, '{"id":1}', "x" * 30) + b"y" * 40)
write("jsonrpc", "crlf-blank-noeol", rpc(shift=0, init=True) +
      b'\r\n\n  \t\r\n{"jsonrpc":"2.0","id":1,"method":"ping"}\r\n\r\r\n'
      b'{"jsonrpc":"2.0","id":2,"method":"ping"}')
write("jsonrpc", "deep-nesting", rpc(cap=3, init=True) + b"[" * 1400 + b"\n" +
      b'{"jsonrpc":"2.0","id":1,"method":"echo","params":' + b"[" * 600 + b"]" * 600 + b"}\n")
write("jsonrpc", "long-first-line", rpc(shift=15, pad=True, init=True, seed=0xff) + lines(
    {"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"s": "x" * 200}},
    {"jsonrpc": "2.0", "id": 2, "method": "ping"}))
write("jsonrpc", "cancel-and-unicode", rpc(cap=2, shift=5, init=True) + lines(
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "user"}},
    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 1}},
    '{"jsonrpc":"2.0","id":"\xc3\xa9","method":"ping"}',
    '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"\xff":1}}'))
# integers beyond 64 bits: -32600 (the id's, or another's with the id kept), a response ignored
write("jsonrpc", "big-integers", rpc(init=True) + lines(
    '{"jsonrpc":"2.0","id":99999999999999999999,"method":"ping"}',
    '{"jsonrpc":"2.0","id":-9223372036854775809,"method":"ping"}',
    '{"jsonrpc":"2.0","id":7,"method":"ping","params":{"n":123456789012345678901234567890}}',
    '{"jsonrpc":"2.0","id":9007199254740993,"method":"x","params":[-99999999999999999999]}',
    '{"jsonrpc":"2.0","id":3,"result":{"n":99999999999999999999}}',
    '{"jsonrpc":"2.0","id":99999999999999999999,'))

# ---- mcp: byte 0 = --max-concurrent (bits 0-1: 1, 4, 0, 0) | --max-queue (bits 2-3: 0, 2,
# 100, 10000) | policy (bit 4) | 300-byte messages (bit 5); byte 1 = read size; then the
# client's lines (see fuzz_mcp.c).


def mcp(conc=0, queue=3, policy=0, small=False, rd=0xff):
    return bytes([conc | queue << 2 | policy << 4 | (0x20 if small else 0), rd])


def init(version="2025-11-25", id=0):
    return [{"jsonrpc": "2.0", "id": id, "method": "initialize",
             "params": {"protocolVersion": version, "capabilities": {},
                        "clientInfo": {"name": "fuzz", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"}]


def call(id, name, args, token=None):
    params = {"name": name, "arguments": args}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}


def cancel(id):
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "x"}}


EVERY_TOOL = [
    ("run_command", {"command": "echo hi", "cwd": "src", "timeout_s": 5, "stdin": "in", "env": {"APP_X": "1", "FZ_Y": "2"}}),
    ("run_command", {"argv": ["ls", "-la", "a b"]}),
    ("run_code", {"language": "python", "code": "print(1)", "stdin": "x"}),
    ("run_code", {"language": "sh", "code": "echo " + "y" * 300}),
    ("can_i", {"op": "write", "target": "src/main.c"}),
    ("can_i", {"queries": [{"op": "read", "target": "/etc/shadow"}, {"op": "exec", "target": "python3"},
                           {"op": "connect", "target": "pypi.org:443"}]}),
    ("shell_exec", {"command": "cd /tmp; export A=1", "timeout_s": 2}),
    ("shell_exec", {"command": "echo $A", "session": "00000000-0000-4000-8000-000000000000"}),
    ("shell_close", {"session": "00000000-0000-4000-8000-000000000000"}),
    ("shell_list", {}),
    ("job_start", {"command": "sleep 30", "cwd": "src", "env": {"APP_Z": "z"}}),
    ("job_start", {"command": "sleep 30", "session": "s1"}),
    ("job_output", {"job": "j1", "since_offset": 10, "max_bytes": 100}),
    ("job_kill", {"job": "j1"}),
    ("job_list", {}),
    ("run_pipeline", {"stages": [["echo", "a b"], ["wc", "-w"]], "timeout_s": 3, "stdin": ""}),
]
write("mcp", "every-tool", mcp(conc=1) + lines(
    *init(), {"jsonrpc": "2.0", "id": "l", "method": "tools/list", "params": {}},
    *[call(i + 1, n, a, token="t%d" % i if i % 3 == 0 else None) for i, (n, a) in enumerate(EVERY_TOOL)],
    {"jsonrpc": "2.0", "id": "p", "method": "ping"}))
write("mcp", "every-tool-allow-list", mcp(conc=1, policy=1) + lines(
    *init("2025-06-18"), {"jsonrpc": "2.0", "id": "l", "method": "tools/list"},
    *[call(i + 1, n, a) for i, (n, a) in enumerate(EVERY_TOOL)],
    call(90, "run_code", {"language": "node", "code": "1"}),
    call(91, "run_code", {"language": "bash", "code": "1"})))
BAD_ARGS = [
    ("run_command", {}), ("run_command", {"command": ""}), ("run_command", {"command": "x", "argv": ["y"]}),
    ("run_command", {"argv": []}), ("run_command", {"argv": ["", 1]}), ("run_command", {"argv": ["a\u0000b"]}),
    ("run_command", {"command": "x", "cwd": "/etc"}), ("run_command", {"command": "x", "cwd": "../.."}),
    ("run_command", {"command": "x", "timeout_s": 1e308}), ("run_command", {"command": "x", "timeout_s": -1}),
    ("run_command", {"command": "x", "timeout_s": "5"}), ("run_command", {"command": "x", "stdin": 5}),
    ("run_command", {"command": "x", "env": {"LD_PRELOAD": "x"}}), ("run_command", {"command": "x", "env": {"AWS_TOKEN": "x"}}),
    ("run_command", {"command": "x", "env": {"1BAD": "x"}}), ("run_command", {"command": "x", "env": {"APP_A": 1}}),
    ("run_command", {"command": "x", "env": []}), ("run_command", {"command": "x", "bogus": 1}),
    ("run_code", {"language": "cobol", "code": "x"}), ("run_code", {"code": "x"}), ("run_code", {"language": "sh"}),
    ("run_code", {"language": "sh", "code": 7}), ("run_code", {"language": "sh", "code": "x" * 2000, "stdin": "a"}),
    ("can_i", {}), ("can_i", {"op": "fly", "target": "x"}), ("can_i", {"op": "read", "target": ""}),
    ("can_i", {"op": "read", "target": "x", "queries": []}), ("can_i", {"queries": [1]}),
    ("can_i", {"queries": [{"op": "read"}]}), ("can_i", {"queries": [{"op": "read", "target": "x", "y": 1}]}),
    ("shell_exec", {}), ("shell_exec", {"command": "x", "session": ""}), ("shell_exec", {"command": "x", "cwd": "."}),
    ("shell_close", {}), ("job_output", {"job": "j", "since_offset": -1}), ("job_output", {"job": "j", "max_bytes": 0}),
    ("job_start", {"command": "x", "session": "s", "cwd": "x"}), ("job_start", {"command": "x", "session": "s", "env": {}}),
    ("job_kill", {"job": "x" * 100}), ("run_pipeline", {"stages": [["a"]]}), ("run_pipeline", {"stages": [["a"], []]}),
    ("run_pipeline", {"stages": [["a"], [""]]}), ("run_pipeline", {"stages": [["a"], [1]]}), ("run_pipeline", {"stages": "x"}),
]
write("mcp", "bad-arguments", mcp(conc=1) + lines(
    *init(), *[call(i + 1, n, a) for i, (n, a) in enumerate(BAD_ARGS)]))
write("mcp", "queue-cancel", mcp(conc=2, queue=1, rd=40) + lines(
    *init(), *[call("c%d" % i, "run_command", {"command": "sleep 1; echo %d" % i}, token=i) for i in range(4)],
    cancel("c0"), cancel("c1"), cancel("nope"), cancel(None),
    call("c2", "run_command", {"command": "dup"}), call(7, "run_pipeline", {"stages": [["a"], ["b"]]}, token="pt"),
    {"jsonrpc": "2.0", "id": 8, "method": "ping"}, cancel(7)))
write("mcp", "versions-old", mcp(conc=1, rd=0x90) + lines(
    *init("2024-11-05"), {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    call(2, "run_command", {"command": "echo"}, token="x"), call(3, "can_i", {"op": "exec", "target": "sh"})))
write("mcp", "versions-0326", mcp(conc=1) + lines(
    *init("2025-03-26"), {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    call(2, "job_list", {}), call(3, "can_i", {"queries": [{"op": "read", "target": "~/.ssh"}]})))
write("mcp", "protocol-errors", mcp(conc=1, rd=3) + lines(
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"capabilities": []}},
    {"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": {"protocolVersion": 5}},
    *init("1999-01-01", id=5), *init(id=6),
    {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"cursor": "c"}},
    {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": 5}},
    {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "run_command", "arguments": None}},
    {"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "run_command", "arguments": [], "_meta": 1}},
    {"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "x", "_meta": {"progressToken": 1.5}}},
    '{"jsonrpc":"2.0","id":99999999999999999999,"method":"ping"}',
    '{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"job_output","arguments":{"job":"j","since_offset":123456789012345678901234}}}',
    '{"jsonrpc":"2.0","id":13,"result":{"n":99999999999999999999}}', "{bad", "[]"))
write("mcp", "small-messages", mcp(conc=1, small=True, rd=7) + lines(
    *init(), call(1, "run_command", {"command": "x" * 400}), call(2, "can_i", {"op": "read", "target": "a"})))
write("mcp", "progress-output", mcp(conc=2, queue=2, rd=0x8f) + lines(
    *init(), call(1, "run_command", {"command": "x"}, token="a"), call(2, "run_code", {"language": "sh", "code": "y"}, token=2)) +
    b"line one\nline two\n\n" + b"\xe2\x82" + b"z" * 1500 + b"\npartial\xf0\x9f")

# ---- parse: the text; after a NUL, 8 bytes of a max for parse_count

for i, s in enumerate(["512", "64k", "1.5M", "2GiB", "0.5kb", "1T", "1024tib", "99999999T",
                       "30", "1.5", "250ms", "2m", "1h", "7d", "366d", "367d", "0", ".5", "5.",
                       "1e3", "-1", "+5", " 5", "5 ", "1.2.3", "00000000000000000000000000000001",
                       "18446744073709551615", "1152921504606846976", "4096", "0.0000000000000000000000000000001d"]):
    write("parse", "seed-%02d" % i, s)
write("parse", "count-max", b"123456\x00" + struct.pack("<Q", 100000))
write("parse", "count-max-huge", b"18446744073709551615\x00" + struct.pack("<Q", 2**64 - 1))

# ---- glob: pattern NUL name

for i, (p, n) in enumerate([("AWS_*", "AWS_SECRET_ACCESS_KEY"), ("*TOKEN*", "GITHUB_TOKEN"),
                            ("*_KEY", "API_KEY"), ("?ATH", "PATH"), ("LC_*", "LANG"),
                            ("*SECRET*", "MY_SECRET_THING"), ("**a*b*?c", "xaxbxyc"),
                            ("*[A-Z]*", "X"), ("a\\*", "a*"), ("", ""), ("*", ""),
                            ("*a*a*a*a*a*a*a*a*b", "a" * 60), ("?" * 10, "abcdefghi")]):
    write("glob", "seed-%02d" % i, p.encode() + b"\x00" + n.encode())

# ---- result_json: see fuzz_result_json.c for the layout


def s8(b):
    return bytes([len(b)]) + b


def result(flags, argv, command=b"", exit_code=0, sig=0, limit=0, stdout=b"", stderr=b"",
           layers=(), err=None, viols=(), kinds=None):
    out = bytes([flags | (1 if command else 0) | (32 if err else 0) | (64 if kinds else 0)])
    out += bytes([len(argv)]) + b"".join(s8(a) for a in argv)
    if command:
        out += s8(command)
    out += struct.pack("<i", exit_code) if flags & 2 else bytes([sig])
    out += bytes([limit]) + struct.pack("<Q", 1234)[:6]
    out += struct.pack("<H", len(stdout)) + stdout + struct.pack("<H", len(stderr)) + stderr
    out += struct.pack("<I", 0) + struct.pack("<I", 0)
    out += struct.pack("<Q", 12)[:5] + struct.pack("<Q", 3)[:5] + struct.pack("<Q", 5120)[:5]
    out += bytes([1])  # mode required
    out += bytes([len(layers)])
    for i, (detail, applied) in enumerate(layers):
        out += bytes([i]) + s8(bytes(c - 32 for c in detail)) + bytes([applied])
    if err:
        out += bytes([err[0], err[1], err[2]]) + s8(err[3])
    out += bytes([len(viols)])
    for kind, obj, rule, hint in viols:
        out += bytes([kind]) + s8(obj) + s8(rule) + s8(hint) + bytes([7])
    out += struct.pack("<I", 2)
    if kinds:
        out += bytes(kinds)
    out += bytes([1])
    return out


write("result_json", "ls-ok", result(2, [b"ls", b"-la"], stdout=b"total 0\n-rw-r--r-- 1 u u 0 a\n",
                                     layers=[(b"uid and gid mapped 1:1", 1), (b"private", 1), (b"own pid space", 1)]))
write("result_json", "shell-killed", result(4 | 8, [b"/bin/sh", b"-c", b"yes"], command=b"yes", sig=9,
                                            limit=1, stdout=b"y\n" * 40, stderr=b"Killed\n"))
write("result_json", "invalid-utf8", result(2, [b"cat", b"\xff\xfe.bin"], exit_code=1,
                                            stdout=b"\x00\x01\xc3\xa9\xc3\x28\xe2\x82\xa1\xe2\x82\xf0\x9f\x98\x80\xf0\x9f\x98\xed\xa0\x80\xc0\xaf",
                                            stderr=b"cat: \xff: No such file or directory\n"))
write("result_json", "setup-error", result(0, [b"python3"], err=(5, 2, 3, b"exec: python3: not found; install it \xff"),
                                           sig=0))
write("result_json", "violations", result(2, [b"sh"], exit_code=1, stderr=b"x: Permission denied\n",
                                          viols=[(0, b"/home/u/.ssh/id_rsa", b"filesystem.deny", b"do not"),
                                                 (3, b"pypi.org", b"network none", b"offline"),
                                                 (3, b"pypi.org", b"network none", b"dup"),
                                                 (4, b"ptrace", b"seccomp", b"\xe2\x80\x94 blocked")],
                                          kinds=[1, 0, 3] + [0] * 13))

# ---- violations: byte 0 = config (bits 0-1) | exited (4) | status 0 (8) | denial error (16) |
# layers applied (32) | clone EAGAIN (64); byte 1 = limit; stderr and stdout with 16-bit lengths


def viol(cfg, stderr, stdout=b"", exited=True, ok=False, limit=0, denial=None, layers=True,
         eagain=False):
    b0 = cfg | (4 if exited else 0) | (8 if ok else 0) | (16 if denial else 0)
    b0 |= (32 if layers else 0) | (64 if eagain else 0)
    out = bytes([b0, limit])
    if denial:
        out += s8(denial)
    return out + struct.pack("<H", len(stderr)) + stderr + struct.pack("<H", len(stdout)) + stdout


WS_ERRORS = (b"cat: /root/.bashrc: Permission denied\n"
             b"sh: 1: cannot create .git/config: Read-only file system\n"
             b"touch: cannot touch '/usr/bin/x': Read-only file system\n"
             b"PermissionError: [Errno 13] Permission denied: '/home/u/.ssh/id_rsa'\n"
             b"ls: cannot access 'secret/key': No such file or directory\n")
write("violations", "fs-default", viol(0, WS_ERRORS))
write("violations", "fs-readonly-allowlist", viol(1, b"sh: 1: curl: Permission denied\n"
                                                    b"sh: 1: /usr/bin/python3: Permission denied\n"
                                                    b"cp: cannot create regular file 'src/main.c': Read-only file system\n"))
write("violations", "network", viol(0, b"curl: (6) Could not resolve host: pypi.org\n"
                                       b"pip: Temporary failure in name resolution\n"
                                       b"ssh: connect to host github.com port 22: Network is unreachable\n"))
write("violations", "network-host", viol(2, b"curl: (6) Could not resolve host: example.com\n"))
write("violations", "syscalls", viol(0, b"strace: ptrace(PTRACE_TRACEME, ...): Operation not permitted\n"
                                        b"mount: /mnt: Operation not permitted\n"
                                        b"unshare: unshare failed: Operation not permitted\n", exited=False))
write("violations", "mode-none", viol(3, WS_ERRORS))
write("violations", "clean-exit", viol(0, WS_ERRORS, ok=True))
write("violations", "limits-timeout", viol(0, b"", exited=False, limit=1))
write("violations", "limits-memory", viol(1, b"Killed\n", exited=False, limit=3))
write("violations", "denied", viol(1, b"", denial=b"policy: command curl denied by rule commands.deny 'curl': no downloads"))
write("violations", "stdout-only", viol(0, b"", b"open('/etc/shadow'): Permission denied\n"))
write("violations", "real-and-printed-tools", viol(0, b"strace: attach: Operation not permitted\n"
                                                       b"mount: /tmp/m: permission denied.\n"
                                                       b"chroot: cannot change root directory to '/tmp': Operation not permitted\n"
                                                       b"ptrace: Operation not permitted.\n"))
write("violations", "enoent-and-creates", viol(0, b"cat: /var/lib/nothere/x: No such file or directory\n"
                                                   b"touch: cannot touch 'secret/new': Permission denied\n"
                                                   b"sh: 1: cannot create /opt/x/y: Directory nonexistent\n"
                                                   b"ls: cannot access 'secret/a/b': Permission denied\n"))
write("violations", "fork-and-eagain", viol(0, b"sh: 0: Cannot fork\nbash: fork: retry: Resource temporarily unavailable\n",
                                            eagain=True))
write("violations", "no-layers", viol(0, WS_ERRORS, layers=False))
write("violations", "escapes", viol(0, b"cat: a\\:b/c: Permission denied\n\"/x y\": No such file or directory: '/etc-link/passwd'\n"
                                       b"\x00cat: /root/x: Permission denied\n"))

# ---- profile: the documented examples

os.makedirs(os.path.join(HERE, "corpus", "profile"), exist_ok=True)
for f in sorted(os.listdir(os.path.join(ROOT, "docs", "examples"))):
    if f.endswith(".json"):
        shutil.copy(os.path.join(ROOT, "docs", "examples", f), os.path.join(HERE, "corpus", "profile", f))
write("profile", "minimal", '{"mode":"auto"}')
write("profile", "errors", '{"filesystem":{"read":[1]},"limits":{"memory":"12Q"},"unknown":true}')
write("profile", "limits-env", '{"limits":{"timeout":"1.5","kill_after":"250ms","cpu":"30","nofile":64,'
      '"fsize":"1G","output":"64k"},"env":{"allow":["LC_*"],"deny":["*_TOKEN"],"set":{"A":"b"}},'
      '"commands":{"allow":["ls",{"match":"/usr/bin/git","reason":"vcs"}]},"network":"none"}')
# the merge: entries that meet the fuzz target's scratch workspace (src, out, secrets, .env,
# .bashrc, etc-link, home/.cache as "~/.cache"), and the redact section
write("profile", "merge-workspace", '{"mode":"none","filesystem":{"read":["src","~/.cache","/usr/share"],'
      '"write":["out","~"],"deny":["secrets",".env","~/.ssh","src/main.c"],'
      '"protected":[".git/hooks",".bashrc","newdir/x"],"workspace":"rw"},'
      '"env":{"deny":["FOO*"],"deny_replace":true,"set":{"FOO":"1","PATH":"/usr/bin:/bin"}},'
      '"commands":{"allow":["ls","/bin/sh"],"deny":["ls","curl"]}}')
write("profile", "merge-errors", '{"filesystem":{"write":["/","missing"],"read":["etc-link/x"],'
      '"protected":["etc-link"]},"commands":{"allow":[]}}')
write("profile", "redact", '{"redact":{"strings":["s3cret-value","corp.example"],"mode":"flag"},'
      '"network":"host","mode":"auto"}')
