#!/usr/bin/env python3
"""Benchmark 3b: memory of the processes that keep a sandbox running, CLI against bwrap.

100 concurrent `corral run -- sleep 30` and then 100 concurrent `bwrap ... sleep 30` (the same
binds as the launch benchmark). Counted: corral's supervisor process (the `corral run` CLI) and
separately its in-sandbox init; bwrap's two processes (the outer bwrap and the pid-1 bwrap of
the new pid namespace). The sleep itself is never counted. RSS counts shared pages (libc, the
binary) in every process; USS (private pages, from smaps_rollup) is what one more sandbox
really costs; PSS shares the shared pages out.
"""
import os
import signal
import subprocess
import time

from common import (CORRAL, WORKSPACE, descendants, log, mem_of, proc_table,
                    wait_until, write_result)
from launch import bwrap_argv

N = int(os.environ.get("BENCH_MEM_SANDBOXES", "100"))


def measure(tag, argv, helper_names):
    procs = [subprocess.Popen(argv, cwd=WORKSPACE, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for _ in range(N)]
    tops = [p.pid for p in procs]

    def sleepers():
        t = proc_table()
        return sum(1 for top in tops for d in descendants(t, top) if t[d][1] == "sleep")

    try:
        ok = wait_until(lambda: sleepers() >= N, 30)
        time.sleep(0.5)
        t = proc_table()
        inner = [d for top in tops for d in descendants(t, top) if t[d][1] in helper_names]
        sup = mem_of(tops)
        hlp = mem_of(inner)
        n = sleepers()
        out = {"command": " ".join(argv), "sandboxes": N, "running": n, "all_started": ok,
               "top_processes": sup["n"], "inner_processes": hlp["n"]}
        for k in ("rss_kb", "uss_kb", "pss_kb"):
            out["top_" + k] = sup[k] / N
            out["inner_" + k] = hlp[k] / N
            out["total_" + k] = (sup[k] + hlp[k]) / N
        log(f"memory: {tag}: {n}/{N} running; per sandbox: top RSS {out['top_rss_kb']:.0f} kB, "
            f"inner RSS {out['inner_rss_kb']:.0f} kB, total USS {out['total_uss_kb']:.0f} kB")
        return out
    finally:
        # SIGTERM, as a user's Ctrl-C or a supervisor's stop would: corral cancels the run
        # and removes what it made on the host (its run cgroup; a supervisor killed by
        # SIGKILL leaves that directory behind, and every later run as root scans the
        # leftovers until they are 5 minutes old: src/sandbox/cgroup.c sweep_stale).
        # SIGKILL only for what has not ended 10 s later.
        for p in procs:
            p.send_signal(signal.SIGTERM)
        end = time.monotonic() + 10
        for p in procs:
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGKILL)
                p.wait()


def main():
    res = {"n": N}
    res["corral"] = measure("corral", [CORRAL, "run", "--", "sleep", "30"], {"corral-init"})
    argv = bwrap_argv(WORKSPACE)
    argv[-1:] = ["sleep", "30"]
    res["bwrap"] = measure("bwrap", argv, {"bwrap"})
    # Nothing may survive: the sandboxes die with their supervisors (PDEATHSIG, pid ns).
    time.sleep(0.5)
    t = proc_table()
    res["leftover_sleep_30"] = sum(1 for p in t if _cmdline(p) == "sleep\x0030\x00")
    write_result("memory", res)


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read()
    except OSError:
        return ""


if __name__ == "__main__":
    main()
