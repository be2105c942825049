#!/usr/bin/env python3
"""Benchmark 4: an output flood through corral's capture.

`corral run --json -- head -c SIZE /dev/zero`: corral reads every byte (keeping the head and
tail within --max-output, 1 MiB by default) and prints one JSON result. Measured: wall time
(throughput = SIZE / wall), the corral process's peak RSS two ways:
  - VmHWM of the corral process itself, sampled from /proc/PID/status every millisecond while
    it runs (the high-water mark only grows, so the last sample is within ~1 ms of the end),
    in runs of their own: the sampler takes CPU from the two processes that move the bytes on
    a 2-core machine, so the timed runs are not sampled;
  - ru_maxrss from wait4(): the largest of corral and every descendant it waited for (its
    init, and head), so an upper bound.
Run at 64 MiB and at 1 GiB: flat memory means the same peak for both. Baselines: head into
/dev/null, and head through a pipe into cat.
"""
import json
import os
import shlex
import subprocess
import threading
import time

from common import CORRAL, QUICK, RESULTS, WORKSPACE, log, median, wait_until, write_result

TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []

GIB = 1 << 30
REPS = 1 if QUICK else 5
SAMPLED_REPS = 1 if QUICK else 3


def run_once(argv, shell=False, parse_json=False, sampled=False):
    # ru_maxrss of a child spawned straight from Python starts at Python's own RSS (the
    # hiwater mark survives exec, and a vfork child shares the parent's mm), so the command
    # runs under GNU time, whose small RSS is what the child inherits; time reports %M.
    rss_file = os.path.join(RESULTS, "flood-time.txt")
    if shell:
        argv = ["/bin/sh", "-c", argv]
    if TIME:
        argv = [TIME, "-o", rss_file, "-f", "%M"] + argv
    p = subprocess.Popen(argv, cwd=WORKSPACE, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE if parse_json else subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    t0 = time.perf_counter()
    hwm = [0]
    done = threading.Event()

    def sample():
        pid = p.pid
        if TIME:  # the command is time's only child
            wait_until(lambda: _children(p.pid) or done.is_set(), 5, 0.0002)
            kids = _children(p.pid)
            if not kids:
                return
            pid = kids[0]
        path = f"/proc/{pid}/status"
        while not done.is_set():
            try:
                with open(path) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            hwm[0] = max(hwm[0], int(line.split()[1]))
                            break
            except OSError:
                return
            time.sleep(0.001)

    sampler = threading.Thread(target=sample, daemon=True)
    if sampled:
        sampler.start()
    out = []
    reader = None
    if parse_json:
        reader = threading.Thread(target=lambda: out.append(p.stdout.read()), daemon=True)
        reader.start()
    err = []
    ereader = threading.Thread(target=lambda: err.append(p.stderr.read()), daemon=True)
    ereader.start()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    p.returncode = os.waitstatus_to_exitcode(status)
    if reader:
        reader.join()
    ereader.join()
    if sampled:
        sampler.join()
    maxrss = ru.ru_maxrss
    if TIME:
        try:
            with open(rss_file) as f:
                maxrss = int(f.read().split()[-1])
        except (OSError, ValueError, IndexError):
            maxrss = None
    r = {"wall_s": wall, "status": p.returncode, "vmhwm_kb": hwm[0] or None,
         "ru_maxrss_kb": maxrss, "sampled": sampled}
    if p.returncode != 0:
        r["stderr"] = err[0].decode(errors="replace")[-300:] if err else ""
    if parse_json and out and out[0]:
        try:
            j = json.loads(out[0])
            r["stdout_bytes"] = j.get("stdout_bytes")
            r["stdout_truncated"] = j.get("stdout_truncated")
            r["captured_len"] = len(j.get("stdout") or "")
            r["json_len"] = len(out[0])
        except ValueError as e:
            r["json_error"] = str(e)
    return r


def bench(label, argv, size, shell=False, parse_json=False):
    run_once(argv, shell, parse_json)  # warm-up, discarded
    runs = [run_once(argv, shell, parse_json) for _ in range(REPS)]
    walls = [r["wall_s"] for r in runs]
    runs += [run_once(argv, shell, parse_json, sampled=True) for _ in range(SAMPLED_REPS)]
    res = {"label": label, "command": argv if isinstance(argv, str) else shlex.join(argv),
           "bytes": size, "runs": runs, "median_wall_s": median(walls),
           "gb_per_s": size / median(walls) / 1e9 if size else None,
           "gib_per_s": size / median(walls) / GIB if size else None,
           "ok": all(r["status"] == 0 for r in runs)}
    hwms = [r["vmhwm_kb"] for r in runs if r["vmhwm_kb"]]
    res["vmhwm_kb_max"] = max(hwms) if hwms else None
    rss = [r["ru_maxrss_kb"] for r in runs if r["ru_maxrss_kb"]]
    res["ru_maxrss_kb_max"] = max(rss) if rss else None
    log(f"flood: {label}: {res['median_wall_s'] * 1e3:.1f} ms, VmHWM {res['vmhwm_kb_max']} kB, "
        f"ru_maxrss {res['ru_maxrss_kb_max']} kB")
    return res


def main():
    rows = []
    for size, tag in ((0, "0"), (64 << 20, "64M"), (GIB, "1G")):
        rows.append(bench(f"corral run --json ({tag})",
                          [CORRAL, "run", "--json", "--", "head", "-c", tag, "/dev/zero"],
                          size, parse_json=True))
    rows.append(bench("head > /dev/null", "head -c 1G /dev/zero > /dev/null", GIB, shell=True))
    rows.append(bench("head | cat > /dev/null", "head -c 1G /dev/zero | cat > /dev/null", GIB,
                      shell=True))
    write_result("flood", {"rows": rows, "reps": REPS, "sampled_reps": SAMPLED_REPS})


if __name__ == "__main__":
    main()
