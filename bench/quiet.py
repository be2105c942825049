#!/usr/bin/env python3
"""Record how busy the machine is before (and after) the benchmarks, and optionally wait for
it to become quiet: on 2 cores, anything else running (a test suite, a fuzzer) moves every
number. Usage: quiet.py before|wait|after, or quiet.py monitor PART (until SIGTERM: how much
CPU other users' processes took while PART ran; prints the percentage). BENCH_WAIT_QUIET=SECONDS waits up to that long
for the CPUs to be less than 10% busy before the run ("before") and before each part
("wait", which records nothing)."""
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


def _ticks_total_busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4], sum(v)


def _tree_ticks(pid):
    """CPU ticks of pid itself plus every child it has reaped (utime+stime+cutime+cstime)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return 0
    f = s[s.rindex(")") + 2:].split()
    return int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])


def monitor(part):
    """Wait for SIGTERM, sent once PART has finished and been reaped by run.sh; then record
    how much of the CPUs went to anything but PART: the machine's busy time (from
    /proc/stat) less what run.sh's reaped children used (exact once they are all reaped;
    this monitor's own few ticks count as foreign). Kernel threads working for the part
    (namespace teardown) count as foreign too, so a quiet machine reads a few percent."""
    import signal
    root = int(os.environ.get("BENCH_ROOT_PID", os.getppid()))
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    t0 = time.monotonic()
    busy0, all0 = _ticks_total_busy()
    ours0 = _tree_ticks(root)
    while not stop:
        time.sleep(0.2)
    busy1, all1 = _ticks_total_busy()
    ours = _tree_ticks(root) - ours0
    elapsed = time.monotonic() - t0
    pct = 100.0 * max(0, (busy1 - busy0) - ours) / max(1, all1 - all0)
    env = read_result("env") or {}
    env.setdefault("during", {})[part] = {"others_cpu_pct": pct, "seconds": elapsed}
    write_result("env", env)
    print(f"{pct:.0f}")


def main():
    phase = sys.argv[1] if len(sys.argv) > 1 else "before"
    if phase == "monitor":
        monitor(sys.argv[2])
        return
    wait = float(os.environ.get("BENCH_WAIT_QUIET", "0"))
    busy = cpu_busy()
    end = time.monotonic() + wait
    while phase in ("before", "wait") and busy >= 10 and time.monotonic() < end:
        log(f"machine {busy:.0f}% busy ({', '.join(top_procs()) or '?'}); waiting for quiet")
        busy = cpu_busy(2.0)
    if phase == "wait":
        return
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
