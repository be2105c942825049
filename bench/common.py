"""Shared helpers for corral's benchmark harness (stdlib only).

Every benchmark script writes one JSON file into the results directory; report.py turns them
into docs/benchmarks.md. Paths and knobs come from the environment that run.sh sets up.
"""
import json
import math
import os
import statistics
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH_DIR)
CORRAL = os.environ.get("CORRAL", os.path.join(ROOT, "build", "corral"))
RESULTS = os.environ.get("BENCH_RESULTS", os.path.join(BENCH_DIR, "results"))
WORKSPACE = os.environ.get("BENCH_WORKSPACE", "")
QUICK = os.environ.get("BENCH_QUICK", "") not in ("", "0")


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def median(xs):
    return statistics.median(xs) if xs else None


def percentile(xs, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    if not xs:
        return None
    s = sorted(xs)
    k = max(0, min(len(s) - 1, math.ceil(p / 100.0 * len(s)) - 1))
    return s[k]


def write_result(name, data):
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, name + ".json")
    data = dict(data, measured_at=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    with open(path, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
    log(f"wrote {path}")


def read_result(name):
    path = os.path.join(RESULTS, name + ".json")
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


# ---- /proc -------------------------------------------------------------------------------

def proc_status(pid):
    """The fields of /proc/PID/status we use, in kB (None when the process is gone)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                    out[k] = int(v.split()[0])
                elif k in ("Name", "PPid"):
                    out[k] = v.strip()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return out


def proc_uss_pss(pid):
    """(USS, PSS) in kB from /proc/PID/smaps_rollup: USS (private pages) is what this
    process alone costs; PSS shares the shared pages out among their users."""
    uss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("Private_Clean", "Private_Dirty"):
                    uss += int(v.split()[0])
                elif k == "Pss":
                    pss += int(v.split()[0])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None, None
    return uss, pss


def proc_table():
    """{pid: (ppid, comm)} for every process visible now."""
    table = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        lp, rp = s.index("("), s.rindex(")")
        comm = s[lp + 1:rp]
        ppid = int(s[rp + 2:].split()[1])
        table[int(d)] = (ppid, comm)
    return table


def descendants(table, root):
    kids = {}
    for pid, (ppid, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def mem_of(pids):
    """Summed VmRSS, USS and PSS (kB) of the given pids."""
    rss = uss = pss = 0
    n = 0
    for p in pids:
        st = proc_status(p)
        u, s = proc_uss_pss(p)
        if st is None or u is None:
            continue
        rss += st.get("VmRSS", 0)
        uss += u
        pss += s
        n += 1
    return {"n": n, "rss_kb": rss, "uss_kb": uss, "pss_kb": pss}


def wait_until(pred, timeout, interval=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(interval)
    return pred()
