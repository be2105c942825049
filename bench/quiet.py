#!/usr/bin/env python3
"""Record how busy the machine is before (and after) the benchmarks, and optionally wait for
it to become quiet: on 2 cores, anything else running (a test suite, a fuzzer) moves every
number. Usage: quiet.py before|after. BENCH_WAIT_QUIET=SECONDS waits up to that long for
the CPUs to be less than 10% busy before starting."""
import os
import sys
import time

from common import log, read_result, write_result


def cpu_busy(interval=1.0):
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + v[4]
        return sum(v), idle
    t1, i1 = snap()
    time.sleep(interval)
    t2, i2 = snap()
    return 100.0 * (1 - (i2 - i1) / max(1, t2 - t1))


def top_procs(n=3, interval=0.5):
    """The processes that used the most CPU over interval, as 'comm (pct%)'."""
    def snap():
        out = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    s = f.read()
            except OSError:
                continue
            rp = s.rindex(")")
            comm = s[s.index("(") + 1:rp]
            f = s[rp + 2:].split()
            out[int(d)] = (comm, int(f[11]) + int(f[12]))
        return out
    a = snap()
    time.sleep(interval)
    b = snap()
    hz = os.sysconf("SC_CLK_TCK")
    use = []
    for pid, (comm, t) in b.items():
        if pid in a and pid != os.getpid():
            pct = 100.0 * (t - a[pid][1]) / hz / interval
            if pct >= 5:
                use.append((pct, comm))
    use.sort(reverse=True)
    return [f"{c} ({p:.0f}%)" for p, c in use[:n]]


def main():
    phase = sys.argv[1] if len(sys.argv) > 1 else "before"
    wait = float(os.environ.get("BENCH_WAIT_QUIET", "0"))
    busy = cpu_busy()
    end = time.monotonic() + wait
    while phase == "before" and busy >= 10 and time.monotonic() < end:
        log(f"machine {busy:.0f}% busy ({', '.join(top_procs()) or '?'}); waiting for quiet")
        busy = cpu_busy(2.0)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    env = read_result("env") or {}
    env[phase] = {"cpu_busy_pct": busy, "loadavg": load, "top": top_procs()}
    if busy >= 10:
        log(f"WARNING: the machine is {busy:.0f}% busy {phase} the run "
            f"({', '.join(env[phase]['top']) or 'short-lived processes'}); numbers will be "
            "noisy. BENCH_WAIT_QUIET=300 waits for quiet.")
    write_result("env", env)


if __name__ == "__main__":
    main()
