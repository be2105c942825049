#!/usr/bin/env python3
"""Benchmarks 2 and 3a: `corral mcp` throughput, latency and memory per running sandbox.

One server process is driven over stdio (newline-delimited JSON-RPC, as MCP's stdio transport
specifies): initialize, notifications/initialized, then tools/call run_command. Concurrency is
the number of calls in flight, kept by that many client threads. The floor, bare
fork+exec+wait of /bin/true, is measured by the same threads with os.posix_spawn + waitpid,
so the harness's own overhead is in both numbers.

The server command is `corral mcp --max-concurrent 100` (falling back to `corral mcp` if the
option is refused); CORRAL_MCP_CMD overrides the whole command line (shell words), e.g. to
check the harness against bench/mock_mcp.py. When no server answers `initialize`, the section
is skipped and the reason recorded.
"""
import io
import json
import os
import shlex
import signal
import subprocess
import threading
import time

from common import (CORRAL, QUICK, RESULTS, WORKSPACE, descendants, log, mem_of, median,
                    percentile, proc_status, proc_table, proc_uss_pss, wait_until,
                    write_result)

PROTOCOL = "2025-06-18"
N_CALLS = int(os.environ.get("BENCH_MCP_CALLS", "200" if QUICK else "2000"))
N_SLEEP = int(os.environ.get("BENCH_MCP_SLEEPERS", "100"))
# Calls spaced like an agent's (the model thinks between calls): how many, how far apart.
N_SPACED = int(os.environ.get("BENCH_SPACED_CALLS", "60" if QUICK else "300"))
GAP_MS = float(os.environ.get("BENCH_SPACED_GAP_MS", "20"))
PREBUILD = os.environ.get("BENCH_PREBUILD", "2")
MCP_FLOOR = "floor: a minimal MCP server (bench/mcpfloor.c: JSON-RPC + posix_spawn, no isolation)"


class McpError(Exception):
    pass


class McpClient:
    def __init__(self, argv, cwd, stderr_path):
        self.argv = argv
        self.stderr_path = stderr_path
        self.err = open(stderr_path, "wb")
        # bufsize=0: each request is written at once. The replies are read through a
        # buffer of their own: readline() on the unbuffered pipe reads one byte per system
        # call (about 1,400 for one run_command reply), which took the client's CPU from the
        # server on this 2-core machine and was counted as the server's latency.
        self.proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, bufsize=0)
        self.out = io.BufferedReader(self.proc.stdout, buffer_size=65536)
        self.wlock = threading.Lock()
        self.plock = threading.Lock()
        self.pending = {}   # id -> [Event, response]
        self.next_id = 0
        self.closed = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        f = self.out
        for line in iter(f.readline, b""):
            line = line.strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "id" not in msg or ("method" in msg):
                continue  # notifications and server->client requests: not used here
            with self.plock:
                slot = self.pending.pop(msg["id"], None)
            if slot:
                slot[1] = msg
                slot[0].set()
        self.closed.set()
        with self.plock:
            for slot in self.pending.values():
                slot[0].set()

    def _send(self, obj):
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        with self.wlock:
            self.proc.stdin.write(data)

    def start_request(self, method, params):
        with self.plock:
            self.next_id += 1
            rid = self.next_id
            slot = [threading.Event(), None]
            self.pending[rid] = slot
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return slot

    def wait(self, slot, timeout):
        if not slot[0].wait(timeout):
            raise McpError(f"no answer within {timeout}s")
        if slot[1] is None:
            raise McpError("the server closed its stdout")
        if "error" in slot[1]:
            raise McpError(f"JSON-RPC error: {slot[1]['error']}")
        return slot[1]["result"]

    def request(self, method, params, timeout=30):
        return self.wait(self.start_request(method, params), timeout)

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)

    def handshake(self, timeout=10):
        init = self.request("initialize", {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "corral-bench", "version": "1"}}, timeout)
        self.notify("notifications/initialized")
        tools = self.request("tools/list", {}, timeout)
        names = [t.get("name") for t in tools.get("tools", [])]
        if "run_command" not in names:
            raise McpError(f"no run_command tool (tools: {names})")
        return init

    def stderr_tail(self):
        try:
            with open(self.stderr_path, "rb") as f:
                lines = f.read().decode(errors="replace").strip().splitlines()
            return lines[-1] if lines else ""
        except OSError:
            return ""

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.err.close()


def call_args(argv):
    return {"name": "run_command", "arguments": {"argv": argv}}


def server_argvs(max_concurrent, extra=()):
    override = os.environ.get("CORRAL_MCP_CMD")
    if override:
        return [shlex.split(override) + ["--max-concurrent", str(max_concurrent)],
                shlex.split(override)]
    return [[CORRAL, "mcp", "--max-concurrent", str(max_concurrent)] + list(extra),
            [CORRAL, "mcp"] + list(extra)]


def start_server(max_concurrent, tag, extra=()):
    """A handshaken client, or (None, reason)."""
    reasons = []
    for argv in server_argvs(max_concurrent, extra):
        c = McpClient(argv, WORKSPACE, os.path.join(RESULTS, f"mcp-{tag}.stderr"))
        try:
            c.handshake()
            return c, None
        except (McpError, OSError) as e:
            c.proc.poll()
            if c.proc.returncode is not None:
                why = f"exited with status {c.proc.returncode}"
            else:
                why = str(e)
            tail = c.stderr_tail()
            reasons.append(f"`{shlex.join(argv)}` {why}" + (f": {tail}" if tail else ""))
            c.close()
    return None, "no MCP server answered initialize: " + "; ".join(reasons)


# ---- load generators ----------------------------------------------------------------------

def drive(n, conc, one_call):
    """Run one_call() n times from conc threads; return per-call latencies and the wall."""
    lat = []
    errors = []
    lock = threading.Lock()
    counter = iter(range(n))

    def worker():
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            t0 = time.perf_counter()
            try:
                one_call()
            except Exception as e:  # noqa: BLE001 - recorded, not fatal
                with lock:
                    errors.append(str(e))
                continue
            dt = time.perf_counter() - t0
            with lock:
                lat.append(dt)

    threads = [threading.Thread(target=worker) for _ in range(conc)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {"calls": n, "concurrency": conc, "ok": len(lat), "errors": len(errors),
            "first_error": errors[0] if errors else None, "wall_s": wall,
            "calls_per_s": len(lat) / wall if wall else None,
            "p50_ms": percentile(lat, 50) * 1e3 if lat else None,
            "p99_ms": percentile(lat, 99) * 1e3 if lat else None,
            "mean_ms": sum(lat) / len(lat) * 1e3 if lat else None}


def bare_call():
    pid = os.posix_spawn("/bin/true", ["/bin/true"], {})
    _, st = os.waitpid(pid, 0)
    if st != 0:
        raise RuntimeError(f"/bin/true status {st}")


def mcp_call(client, counts=None):
    def one():
        res = client.wait(client.start_request("tools/call", call_args(["/bin/true"])), 60)
        if res.get("isError"):
            text = " ".join(c.get("text", "") for c in res.get("content", []))[:200]
            raise McpError(f"isError: {text}")
        if counts is not None and (res.get("structuredContent") or {}).get("prebuilt_ms") \
                is not None:
            counts["prebuilt"] = counts.get("prebuilt", 0) + 1
    return one


def ns_floor(result):
    """The kernel's floor, by bench/nsfloor.c: clone() with the default profile's namespace
    flags and exec /bin/true, nothing else. A sandbox with a fresh network namespace per
    launch cannot beat these numbers on this machine, however it is built."""
    exe = os.environ.get("BENCH_NSFLOOR")
    if not exe or not os.access(exe, os.X_OK):
        result["ns_floor_skipped"] = "bench/nsfloor was not built (run bench/run.sh)"
        return
    rows = []
    for nsset in ("all", "nonet"):
        for conc in (1, 2):
            try:
                subprocess.run([exe, "200", str(conc), nsset], check=True,
                               stdout=subprocess.DEVNULL)  # warm-up
                p = subprocess.run([exe, str(N_CALLS), str(conc), nsset], check=True,
                                   stdout=subprocess.PIPE, text=True)
                r = json.loads(p.stdout)
            except (OSError, ValueError, subprocess.CalledProcessError) as e:
                result["ns_floor_skipped"] = f"bench/nsfloor failed: {e}"
                log(f"server: kernel floor: {result['ns_floor_skipped']}")
                return
            rows.append(r)
            log(f"server: kernel floor {nsset} c={conc}: {r['per_s']:.0f}/s "
                f"p50 {r['p50_ms']:.3f} ms")
    result["ns_floor"] = rows


def throughput(result):
    rows = []
    for conc in (1, 2):
        drive(max(20, N_CALLS // 20), conc, bare_call)  # warm-up
        r = drive(N_CALLS, conc, bare_call)
        r["what"] = "bare fork+exec+wait (posix_spawn)"
        rows.append(r)
        log(f"server: bare c={conc}: {r['calls_per_s']:.0f}/s p50 {r['p50_ms']:.3f} ms")
    client, why = start_server(max(2, N_SLEEP), "throughput")
    if not client:
        result["skipped"] = why
        log(f"server: SKIPPED: {why}")
        result["throughput"] = rows
        return
    result["server_command"] = shlex.join(client.argv)
    try:
        one = mcp_call(client)
        for conc in (1, 2):
            drive(max(20, N_CALLS // 20), conc, one)  # warm-up
            r = drive(N_CALLS, conc, one)
            r["what"] = "corral mcp tools/call run_command"
            rows.append(r)
            log(f"server: mcp c={conc}: {r['calls_per_s']:.0f}/s p50 {r['p50_ms']:.3f} ms "
                f"errors {r['errors']}")
    finally:
        client.close()
    # the same, back to back, with sandboxes built ahead: they are built only while the
    # server is idle, so back-to-back calls drain them and then build their own
    if not os.environ.get("CORRAL_MCP_CMD"):
        client, why = start_server(max(2, N_SLEEP), "prebuild", ["--prebuild", PREBUILD])
        if client:
            try:
                for conc in (1, 2):
                    counts = {}
                    one = mcp_call(client, counts)
                    drive(max(20, N_CALLS // 20), conc, mcp_call(client))  # warm-up
                    time.sleep(0.2)  # idle: the pool fills
                    r = drive(N_CALLS, conc, one)
                    r["what"] = f"corral mcp --prebuild {PREBUILD}, back to back"
                    r["prebuilt"] = counts.get("prebuilt", 0)
                    rows.append(r)
                    log(f"server: mcp --prebuild c={conc}: {r['calls_per_s']:.0f}/s "
                        f"p50 {r['p50_ms']:.3f} ms prebuilt {r['prebuilt']}/{r['ok']}")
            finally:
                client.close()
    # the same without the mount template (every sandbox builds its whole tree), and with
    # each call's placeholders removed at its end instead of kept for the next call
    variants = ((["--mount-template", "off"], "notemplate", "corral mcp --mount-template off"),
                (["--placeholder-linger", "0"], "nolinger",
                 "corral mcp --placeholder-linger 0"))
    for extra, tag, what in variants:
        if os.environ.get("CORRAL_MCP_CMD"):
            break
        client, why = start_server(max(2, N_SLEEP), tag, extra)
        if not client:
            continue
        try:
            one = mcp_call(client)
            for conc in (1, 2):
                drive(max(20, N_CALLS // 20), conc, one)  # warm-up
                r = drive(N_CALLS, conc, one)
                r["what"] = what
                rows.append(r)
                log(f"server: {what[len('corral '):]} c={conc}: "
                    f"{r['calls_per_s']:.0f}/s p50 {r['p50_ms']:.3f} ms")
        finally:
            client.close()
    for conc in (1, 2):
        bare = next(r for r in rows if r["concurrency"] == conc and r["what"].startswith("bare"))
        for r in rows:
            if r["concurrency"] == conc and r["p50_ms"] and bare["p50_ms"]:
                r["p50_ratio_to_bare"] = r["p50_ms"] / bare["p50_ms"]
    result["throughput"] = rows


def memory(result):
    client, why = start_server(N_SLEEP, "memory")
    if not client:
        result["memory_skipped"] = why
        return
    spid = client.proc.pid
    running = []
    try:
        one = mcp_call(client)
        drive(50, 2, one)  # steady state: buffers, caches, the compiled filters
        time.sleep(0.3)
        before = proc_status(spid)
        before_uss, _ = proc_uss_pss(spid)
        slots = [client.start_request("tools/call", call_args(["sleep", "30"]))
                 for _ in range(N_SLEEP)]

        def sleepers():
            t = proc_table()
            return [p for p in descendants(t, spid) if t[p][1] == "sleep"]

        ok = wait_until(lambda: len(sleepers()) >= N_SLEEP, 30)
        time.sleep(0.5)
        t = proc_table()
        desc = descendants(t, spid)
        running = [p for p in desc if t[p][1] == "sleep"]
        helpers = [p for p in desc if t[p][1] != "sleep"]
        during = proc_status(spid)
        during_uss, _ = proc_uss_pss(spid)
        helper_mem = mem_of(helpers)
        answered_early = sum(1 for s in slots if s[0].is_set())
        n = len(running)
        result["memory"] = {
            "sandboxes_running": n, "all_started": ok,
            "answered_before_kill": answered_early,
            "server_rss_before_kb": before["VmRSS"], "server_rss_during_kb": during["VmRSS"],
            "server_uss_before_kb": before_uss, "server_uss_during_kb": during_uss,
            "server_rss_per_sandbox_kb": (during["VmRSS"] - before["VmRSS"]) / n if n else None,
            "server_uss_per_sandbox_kb": (during_uss - before_uss) / n if n else None,
            "helper_processes": helper_mem["n"],
            "helper_rss_per_sandbox_kb": helper_mem["rss_kb"] / n if n else None,
            "helper_uss_per_sandbox_kb": helper_mem["uss_kb"] / n if n else None,
            "helper_pss_per_sandbox_kb": helper_mem["pss_kb"] / n if n else None,
            "server_command": shlex.join(client.argv),
        }
        log(f"server: memory: {n} sandboxes, server RSS {before['VmRSS']} -> "
            f"{during['VmRSS']} kB")
    finally:
        client.close()
        wait_until(lambda: not any(proc_status(p) for p in running), 5)
        leftover = [p for p in running if proc_status(p)]
        if leftover:
            result.setdefault("memory", {})["leftover_after_server_exit"] = len(leftover)
            for p in leftover:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def spaced(result):
    """Calls as an agent makes them: one at a time, GAP_MS apart (the model's turn between
    them). Latency per call, against bare fork+exec spaced the same way (an idle machine
    wakes up for each: that costs the bare call too)."""
    rows = []

    def run(one, what, counts=None):
        for _ in range(10):  # warm-up
            time.sleep(GAP_MS / 1e3)
            one()
        if counts is not None:
            counts.clear()
        lat = []
        for _ in range(N_SPACED):
            time.sleep(GAP_MS / 1e3)
            t0 = time.perf_counter()
            one()
            lat.append(time.perf_counter() - t0)
        r = {"what": what, "calls": N_SPACED, "gap_ms": GAP_MS,
             "p50_ms": percentile(lat, 50) * 1e3, "p90_ms": percentile(lat, 90) * 1e3,
             "p99_ms": percentile(lat, 99) * 1e3, "mean_ms": sum(lat) / len(lat) * 1e3}
        if counts is not None:
            r["prebuilt"] = counts.get("prebuilt", 0)
        rows.append(r)
        log(f"server: spaced {what}: p50 {r['p50_ms']:.3f} ms p90 {r['p90_ms']:.3f} ms"
            + (f" prebuilt {r['prebuilt']}/{N_SPACED}" if counts is not None else ""))

    run(bare_call, "bare fork+exec+wait (posix_spawn)")
    # The floor of any MCP server's call: the same client's round trip to a server that only
    # parses the JSON-RPC and posix_spawns the command (bench/mcpfloor.c, no isolation).
    floor = os.environ.get("BENCH_MCPFLOOR")
    if floor and os.access(floor, os.X_OK) and not os.environ.get("CORRAL_MCP_CMD"):
        client = McpClient([floor], WORKSPACE, os.path.join(RESULTS, "mcp-floor.stderr"))
        try:
            client.handshake()
            run(mcp_call(client), MCP_FLOOR)
        except (McpError, OSError) as e:
            result["mcp_floor_skipped"] = f"bench/mcpfloor did not answer: {e}"
        finally:
            client.close()
    else:
        result["mcp_floor_skipped"] = "bench/mcpfloor was not built (run bench/run.sh)"
    for extra, what in (([], "corral mcp"),
                        (["--mount-template", "off"], "corral mcp --mount-template off"),
                        (["--prebuild", PREBUILD], f"corral mcp --prebuild {PREBUILD}")):
        if extra and os.environ.get("CORRAL_MCP_CMD"):
            continue
        client, why = start_server(4, "spaced", extra)
        if not client:
            result["spaced_skipped"] = why
            break
        try:
            counts = {}
            run(mcp_call(client, counts), what, counts)
        finally:
            client.close()
    bare = rows[0]["p50_ms"]
    for r in rows:
        r["p50_ratio_to_bare"] = r["p50_ms"] / bare if bare else None
    result["spaced"] = rows


def main():
    result = {"n_calls": N_CALLS, "n_sleepers": N_SLEEP}
    throughput(result)
    spaced(result)
    ns_floor(result)
    if "skipped" not in result:
        memory(result)
    else:
        result["memory_skipped"] = result["skipped"]
    if os.environ.get("CORRAL_MCP_CMD"):
        result["override"] = os.environ["CORRAL_MCP_CMD"]
    write_result("server", result)


if __name__ == "__main__":
    main()
