#!/usr/bin/env python3
"""`corral run`, through the MCP server: the escape battery's second front door.

    via_mcp.py [WRAPPER...] CORRAL run [RUN-OPTIONS] [--] COMMAND [ARG...]
    via_mcp.py [WRAPPER...] CORRAL run [RUN-OPTIONS] -c 'SHELL STRING'

Takes the command line the battery would run (everything before the word `run` starts the
server, so `nolayer userns -- corral run ...` becomes `nolayer userns -- corral mcp ...`),
starts `corral mcp` with the policy flags (workspace, mode, net, limits, env, profile,
paths), sends initialize and notifications/initialized, makes one tools/call run_command
with {argv} or {command} (plus cwd, timeout_s and stdin), closes the server's stdin and
waits for it to exit. Then it prints like the CLI: the command's stdout and stderr (or, with
--json, the structuredContent: the same document `corral run --json` prints) and exits by
the CLI's rules: the error's 125/126/127, 124 on timeout, 128+N on signal N, else the
command's status.

Standard library only. Environment:
  VIA_MCP_TRANSCRIPT=FILE      append every line the server wrote to stdout and stderr
                               (the raw protocol stream) to FILE
  VIA_MCP_SERVER_PID_ENV=NAME  give the call the server's pid in variable NAME (the server
                               is then started with --allow-env NAME); the CLI tests pass
                               their supervisor's pid as --env SUP=$$ the same way
  VIA_MCP_PIDFILE=FILE         write the server's pid to FILE once it runs
  VIA_MCP_PREBUILT=1           the fast path (the battery's third door): the server runs with
                               --prebuild 1, a primer call of the same arguments (argv
                               ["true"], no stdin) sets the plan the server builds ahead, the
                               driver waits until that sandbox exists (a new child of the
                               server), and the real call must then report prebuilt_ms: a
                               call that was not served by the parked sandbox fails (125).
                               A call that cannot use one (stdin data), or a server that
                               builds none (no user namespace here), runs as usual.

Every call whose sandbox has a mount namespace must also report that its tree is a copy of
the server's mount template (the server's default; DESIGN §18): the battery's MCP doors run
with the template, the CLI door without.
"""
import json
import os
import re
import select
import subprocess
import sys
import time

# Options of `corral run` that `corral mcp` takes as they are (policy of every call).
SERVER_VALUE = {
    "-w": "--workspace", "--workspace": "--workspace",
    "-t": "--timeout", "--timeout": "--timeout",
    "--kill-after": "--kill-after", "--memory": "--memory", "--cpu": "--cpu",
    "--pids": "--pids", "--nofile": "--nofile", "--fsize": "--fsize",
    "--tmpfs-size": "--tmpfs-size", "--max-output": "--max-output", "--env": "--env",
    "--profile": "--profile", "--ro": "--ro", "--rw": "--rw", "--hide": "--hide",
    "--redact": "--redact", "--net": "--net", "--mode": "--mode", "--audit": "--audit",
}
SERVER_FLAG = {"--audit-output": "--audit-output"}
# Options of the call itself (or of how this driver prints).
CALL_VALUE = {"-c": "command", "--shell": "command", "-C": "cwd", "--cwd": "cwd"}
CALL_FLAG = {"-i": "stdin", "--stdin": "stdin", "--json": "json", "--quiet": "quiet"}

EXIT_FAILED, EXIT_NOEXEC, EXIT_NOTFOUND, EXIT_TIMEOUT = 125, 126, 127, 124


def inherited_fds():
    """The descriptors above 2 this process started with (read before it opens any)."""
    fds = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                os.fstat(fd)  # the listing's own descriptor is closed by now
                fds.append(fd)
            except OSError:
                pass
    return tuple(fds)


INHERITED = inherited_fds()


def die(msg, code=EXIT_FAILED):
    sys.stderr.write("via_mcp: %s\n" % msg)
    sys.exit(code)


def parse(argv):
    """-> (server prefix argv, server flags, call dict, driver flags)"""
    try:
        at = argv.index("run")
    except ValueError:
        die("usage: via_mcp.py [WRAPPER...] CORRAL run [OPTIONS] [--] COMMAND...")
    prefix, rest = argv[:at], argv[at + 1:]
    if not prefix:
        die("no corral binary before 'run'")
    server, call, flags = [], {}, set()
    i = 0
    while i < len(rest):
        a = rest[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break  # getopt's '+': the command starts here
        name, eq, val = a.partition("=") if a.startswith("--") else (a, "", "")
        if name in SERVER_VALUE or name in CALL_VALUE:
            if not eq:
                i += 1
                if i >= len(rest):
                    die("option %s needs a value" % name)
                val = rest[i]
            if name in SERVER_VALUE:
                server += [SERVER_VALUE[name], val]
                if name in ("-t", "--timeout"):
                    call["timeout"] = val
            else:
                call[CALL_VALUE[name]] = val
        elif name in SERVER_FLAG:
            server.append(SERVER_FLAG[name])
        elif name in CALL_FLAG:
            flags.add(CALL_FLAG[name])
        elif name == "--dry-run":
            die("--dry-run has no MCP equivalent")
        else:
            die("unknown option %s" % a)
        i += 1
    cmd = rest[i:]
    if "command" in call and cmd:
        die("give either -c 'SHELL STRING' or a COMMAND, not both")
    if "command" not in call:
        if not cmd:
            die("no command given")
        call["argv"] = cmd
    return prefix, server, call, flags


def seconds(dur):
    """corral's DUR (30, 1.5, 250ms, 2m, 1h) in seconds, or None when not a positive number."""
    m = re.fullmatch(r"(\d+(?:\.\d*)?)(ms|s|m|h)?", dur.strip())
    if not m:
        return None
    v = float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]
    return v if v > 0 else None


class Server:
    """`corral mcp` on pipes; every line it writes is kept (and copied to the transcript)."""

    def __init__(self, argv):
        self.transcript = os.environ.get("VIA_MCP_TRANSCRIPT")
        # Like `corral run` started from the same shell, the server inherits the descriptors
        # the driver was given beyond 0, 1 and 2 (the leaked-descriptor cases need them there).
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, bufsize=0, pass_fds=INHERITED)
        pidfile = os.environ.get("VIA_MCP_PIDFILE")
        if pidfile:
            with open(pidfile + ".tmp", "w") as f:
                f.write(str(self.proc.pid))
            os.rename(pidfile + ".tmp", pidfile)
        self.out = b""
        self.err = b""
        self.messages = []
        self.out_eof = self.err_eof = False

    def send(self, obj):
        try:
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        except BrokenPipeError:
            pass

    def close_input(self):
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass

    def _log(self, data):
        if self.transcript and data:
            with open(self.transcript, "ab") as f:
                f.write(data)

    def pump(self, deadline):
        """Read what is there (until deadline); False once both streams are at EOF."""
        fds = [f for f, eof in ((self.proc.stdout, self.out_eof), (self.proc.stderr, self.err_eof))
               if not eof]
        if not fds:
            return False
        ready, _, _ = select.select(fds, [], [], max(0.0, min(0.5, deadline - time.monotonic())))
        for f in ready:
            data = os.read(f.fileno(), 65536)
            self._log(data)
            if f is self.proc.stdout:
                if not data:
                    self.out_eof = True
                self.out += data
                while b"\n" in self.out:
                    line, self.out = self.out.split(b"\n", 1)
                    if line.strip():
                        try:
                            self.messages.append(json.loads(line))
                        except ValueError:
                            self.messages.append({"_unparseable": line.decode("utf-8", "replace")})
            else:
                if not data:
                    self.err_eof = True
                self.err += data
        return True

    def wait_response(self, rid, deadline):
        while time.monotonic() < deadline:
            for m in self.messages:
                if m.get("id") == rid and ("result" in m or "error" in m):
                    return m
            if not self.pump(deadline):
                for m in self.messages:
                    if m.get("id") == rid and ("result" in m or "error" in m):
                        return m
                return None
        return None

    def finish(self, timeout=15):
        """EOF on the server's stdin, then wait for it to exit (it kills what still runs)."""
        self.close_input()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.pump(deadline):
            pass
        try:
            return self.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def server_log_lines(err):
    """The server's stderr minus its own start/shutdown log lines (the CLI prints neither)."""
    keep = []
    for line in err.decode("utf-8", "replace").splitlines(True):
        if line.startswith("corral mcp: serving MCP") or line.startswith("corral mcp: shut down") \
                or line.startswith("corral mcp: --prebuild"):
            continue
        keep.append(line)
    return "".join(keep)


def exit_code_for(res):
    err = res.get("error")
    if err:
        code = err.get("code")
        if code == -6:
            return EXIT_NOTFOUND
        if code in (-7, -8):
            return EXIT_NOEXEC
        return EXIT_FAILED
    if res.get("timed_out"):
        return EXIT_TIMEOUT
    if res.get("signal"):
        return 128 + int(res["signal"])
    return int(res.get("exit_code") or 0)


def procs():
    """Every process: pid -> (comm, state, ppid), from /proc/PID/stat."""
    stats = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                st = f.read()
        except OSError:
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        rest = st.rsplit(")", 1)[1].split()
        stats[int(name)] = (comm, rest[0], int(rest[1]))
    return stats


def alive(pid):
    """Whether pid runs (not a zombie)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return False
    return st.rsplit(")", 1)[1].split()[0] != "Z"


def gone_soon(pids, timeout=5):
    """pids that are still alive after timeout."""
    until = time.monotonic() + timeout
    while time.monotonic() < until and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def parked(pid):
    """The server's parked sandboxes: children named corral-init, alive (not zombies), whose
    one child is their command process still waiting for its command (named corral-parked;
    exec gives it the command's name)."""
    stats = procs()
    kids = {}
    for p, (comm, state, ppid) in stats.items():
        kids.setdefault(ppid, []).append((comm, state))
    return {p for p, (comm, state, ppid) in stats.items()
            if ppid == pid and comm == "corral-init" and state != "Z"
            and [c for c, s in kids.get(p, []) if s != "Z"] == ["corral-parked"]}


def waiting(inits):
    """The command processes of parked inits: their children named corral-parked."""
    return {p for p, (comm, state, ppid) in procs().items()
            if ppid in inits and comm == "corral-parked"}


def prime(srv, args, deadline):
    """The prebuilt door: make the server build a sandbox for args, and wait until it has.
    True when one was built (the real call must then use it)."""
    primer = {k: v for k, v in args.items() if k not in ("argv", "command", "stdin")}
    primer["argv"] = ["true"]
    # The server builds one at its start too (for its own policy, once idle for 10 ms): wait
    # for it, so that it is in `before`. Left out, it could look like the primer's: the
    # primer uses it (and its init lingers, childless, while its namespaces are torn down)
    # or kills it (the primer's plan differs), and on a loaded machine either still looks
    # parked 50 ms later.
    before = set()
    until = time.monotonic() + 10
    while not before and time.monotonic() < until:
        srv.pump(time.monotonic() + 0.02)
        if b"--prebuild" in srv.err:
            break  # it cannot build here: judged below
        before = parked(srv.proc.pid)
    srv.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
              "params": {"name": "run_command", "arguments": primer}})
    r = srv.wait_response(3, deadline)
    if r is None or "result" not in r:
        die("the prebuilt door: the primer call failed: %s" % json.dumps(r))
    res = r["result"].get("structuredContent")
    if res is None or res.get("error"):
        return False  # refused (a bad cwd, say): the real call is refused the same way
    # The server builds once it has been idle for 10 ms: a parked sandbox it did not have
    # before the primer is the one built for this call's plan.
    until = time.monotonic() + 10
    while time.monotonic() < until:
        srv.pump(time.monotonic() + 0.02)
        if b"--prebuild" in srv.err:
            if expect_no_prebuild():
                return False  # it cannot build here, as expected (no user namespaces)
            die("the prebuilt door: the server could not build ahead: %s"
                % srv.err.decode("utf-8", "replace").strip())
        new = parked(srv.proc.pid) - before
        if new:
            time.sleep(0.05)
            if new & parked(srv.proc.pid):
                return True
    die("the prebuilt door: the server built no sandbox ahead within 10 s")


def expect_no_prebuild():
    """Whether this run has no pid namespace to park in: the battery's no-namespace cases
    (a nolayer wrapper, or the test hook) run through the door as plain calls."""
    disabled = os.environ.get("CORRAL_TEST_DISABLE", "")
    return any(os.path.basename(a) == "nolayer" for a in sys.argv[1:sys.argv.index("run")]) \
        or "userns" in disabled.split(",")


def main():
    prefix, server_flags, call, flags = parse(sys.argv[1:])
    prebuilt = os.environ.get("VIA_MCP_PREBUILT") == "1"
    if prebuilt:
        server_flags += ["--prebuild", "1"]
    args = {}
    for k in ("argv", "command", "cwd"):
        if k in call:
            args[k] = call[k]
    t = seconds(call["timeout"]) if "timeout" in call else None
    if t is not None:
        args["timeout_s"] = t
    if "stdin" in flags:
        args["stdin"] = sys.stdin.buffer.read().decode("utf-8", "replace")
    pid_env = os.environ.get("VIA_MCP_SERVER_PID_ENV")
    if pid_env:
        server_flags += ["--allow-env", pid_env]

    # The driver's own limits: the call's timeout plus the kill grace and slack.
    budget = (t if t is not None else 60.0) + 30.0
    # Ours die with us: a killed driver closes the server's stdin, and EOF stops the server.
    srv = Server(prefix + ["mcp"] + server_flags)
    if pid_env:
        args["env"] = {pid_env: str(srv.proc.pid)}
    deadline = time.monotonic() + budget
    srv.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "corral-escape-battery", "version": "1"}}})
    init = srv.wait_response(1, time.monotonic() + 15)
    if init is None or "result" not in init:
        rc = srv.finish()
        sys.stderr.write(server_log_lines(srv.err))
        # a bad flag, profile or policy: the server refused to start (exit 125), as the CLI does
        sys.exit(rc if rc else EXIT_FAILED)
    srv.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    parkable = "stdin" not in args and not re.search(r"--mode\x00none", "\x00".join(server_flags))
    must_prebuild = prebuilt and parkable and prime(srv, args, deadline)
    # a progress token, so that the progress path (which carries output) is in the transcript
    srv.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "run_command", "arguments": args,
                         "_meta": {"progressToken": "escape"}}})
    resp = srv.wait_response(2, deadline)
    rc = srv.finish()
    log = server_log_lines(srv.err)
    if resp is None:
        sys.stderr.write(log)
        die("no response to tools/call (server exit status %s)" % rc)
    if "error" in resp:
        sys.stderr.write(log)
        die("tools/call: protocol error %s" % json.dumps(resp["error"]))
    result = resp["result"]
    res = result.get("structuredContent")
    if must_prebuild and (res is None or res.get("prebuilt_ms") is None):
        sys.stderr.write(log)
        die("the prebuilt door: the call was not served by the sandbox built ahead for it "
            "(prebuilt_ms %s)" % (None if res is None else res.get("prebuilt_ms")))
    # The server takes every sandbox's system tree from its mount template (the default):
    # the battery's calls must have run in such a copy wherever they had a mount namespace.
    mnt = ((res or {}).get("isolation") or {}).get("mountns") or {}
    if (mnt.get("applied") and "--mount-template" not in server_flags
            and "a copy of a template" not in (mnt.get("detail") or "")):
        sys.stderr.write(log)
        die("the template door: the call's mount namespace was not a copy of the server's "
            "mount template (%s)" % mnt.get("detail"))
    if res is None:
        # a refused argument: a tool error with only a text item
        text = "".join(c.get("text", "") for c in result.get("content", []))
        sys.stderr.write(log)
        sys.stderr.write("corral: %s\n" % text.strip())
        sys.exit(EXIT_FAILED)
    if "json" in flags:
        sys.stdout.write(json.dumps(res, separators=(",", ":")) + "\n")
        sys.stderr.write(log)
    else:
        sys.stdout.write(res.get("stdout") or "")
        sys.stdout.flush()
        sys.stderr.write(res.get("stderr") or "")
        sys.stderr.write(log)
        if res.get("error"):
            sys.stderr.write("corral: %s\n" % res["error"].get("message", ""))
        elif res.get("timed_out"):
            sys.stderr.write("corral: timed out; the sandbox was stopped after %s ms\n"
                             % res.get("duration_ms"))
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(exit_code_for(res))


if __name__ == "__main__":
    main()
