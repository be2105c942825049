#!/usr/bin/env python3
"""Benchmark 1: one-shot launch of /bin/true, every tool in ONE hyperfine run.

Each command is smoke-tested first; a tool that is missing or fails here keeps its row in the
report with the reason, and is left out of the hyperfine run (hyperfine stops at the first
failing command otherwise). Medians are computed here from hyperfine's per-run times.
"""
import json
import os
import shlex
import shutil
import subprocess
import sys

from common import (BENCH_DIR, CORRAL, QUICK, RESULTS, WORKSPACE, log, median, percentile,
                    write_result)

BWRAP_BINDS = [
    "--ro-bind", "/usr", "/usr",
    "--symlink", "usr/bin", "/bin",
    "--symlink", "usr/lib", "/lib",
    "--symlink", "usr/lib64", "/lib64",
    "--symlink", "usr/sbin", "/sbin",
]
BWRAP_ETC = ["passwd", "group", "hosts", "nsswitch.conf", "ld.so.cache", "localtime",
             "resolv.conf"]


def srt_settings():
    """No network (an empty allow-list), writes only to the workspace, reads as default."""
    path = os.path.join(RESULTS, "srt-settings.json")
    os.makedirs(RESULTS, exist_ok=True)
    with open(path, "w") as f:
        json.dump({"network": {"allowedDomains": [], "deniedDomains": []},
                   "filesystem": {"denyRead": [], "allowWrite": ["."], "denyWrite": []}}, f)
    return path


def bwrap_argv(ws):
    argv = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session"] + BWRAP_BINDS
    for e in BWRAP_ETC:
        p = "/etc/" + e
        if os.path.exists(p):
            argv += ["--ro-bind", p, p]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
             "--bind", ws, ws, "--chdir", ws, "/bin/true"]
    return argv


def candidates(ws):
    srt = os.path.join(BENCH_DIR, "node_modules", ".bin", "srt")
    return [
        # (key, label, argv, tool binary, note)
        ("corral", "corral run (default profile)", [CORRAL, "run", "--", "/bin/true"],
         CORRAL, "all layers: user, mount, pid, net, ipc, uts, cgroup ns; Landlock; seccomp; "
         "rlimits; as root also a per-run cgroup for pids.max"),
        ("bwrap", "bwrap --unshare-all", bwrap_argv(ws), "bwrap",
         "user, mount, pid, net, ipc, uts, cgroup ns; comparable binds; no seccomp, no Landlock"),
        ("firejail", "firejail --noprofile --net=none",
         ["firejail", "--quiet", "--noprofile", "--net=none", "/bin/true"], "firejail",
         "setuid root; run as root here"),
        ("srt", "srt (sandbox-runtime)", [srt, "--settings", srt_settings(), "/bin/true"], srt,
         "Node.js CLI wrapping bwrap + seccomp; empty network allow-list"),
        ("unshare", "unshare -Urnmpf", ["unshare", "-Urnmpf", "/bin/true"], "unshare",
         "namespaces only: no mounts, no filters"),
        ("bare", "bare /bin/true", ["/bin/true"], "/bin/true", "the floor"),
        # Informational rows that split corral's own cost; not targets.
        ("corral_nocg", "corral run --pids 0 (no cgroup)",
         [CORRAL, "run", "--pids", "0", "--", "/bin/true"], CORRAL,
         "informational: as the default profile but no per-run cgroup (no process limit)"),
        ("corral_noaudit", "corral run --audit off",
         [CORRAL, "run", "--audit", "off", "--", "/bin/true"], CORRAL,
         "informational: as the default profile but no audit record (SQLite) written"),
        ("corral_none", "corral run --mode none",
         [CORRAL, "run", "--mode", "none", "--", "/bin/true"], CORRAL,
         "informational: no isolation layers, limits only (supervisor + init + command)"),
    ]


def audit_store_stats():
    """Rows and file sizes of corral's audit store after the run (run.sh gives every harness
    run a fresh XDG_STATE_HOME), since a write per run is part of the default profile."""
    state = os.environ.get("XDG_STATE_HOME")
    if not state:
        return None
    db = os.path.join(state, "corral", "audit.db")
    if not os.path.exists(db):
        return None
    out = {"path": db, "db_bytes": os.path.getsize(db)}
    wal = db + "-wal"
    out["wal_bytes"] = os.path.getsize(wal) if os.path.exists(wal) else 0
    try:
        import sqlite3
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        out["executions"] = c.execute("select count(*) from executions").fetchone()[0]
        c.close()
    except Exception as e:  # noqa: BLE001 - the schema is corral's, not ours
        out["error"] = str(e)
    return out


def smoke(argv, ws):
    try:
        p = subprocess.run(argv, cwd=ws, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    if p.returncode != 0:
        err = (p.stderr or p.stdout).decode(errors="replace").strip().splitlines()
        return f"exit {p.returncode}: " + (err[-1] if err else "no output")
    return None


def main():
    ws = WORKSPACE
    rows = []
    run = []
    for key, label, argv, tool, note in candidates(ws):
        row = {"key": key, "label": label, "command": shlex.join(argv), "note": note}
        if not (shutil.which(tool) or os.access(tool, os.X_OK)):
            row["skipped"] = f"{tool} is not installed (run bench/deps.sh)"
        else:
            why = smoke(argv, ws)
            if why:
                row["skipped"] = f"failed its smoke run here: {why}"
        if "skipped" in row:
            log(f"launch: skipping {key}: {row['skipped']}")
        else:
            run.append(row)
        rows.append(row)

    hf, by_name = run_hyperfine(
        "launch", run, ws, "hyperfine-launch.json",
        ["--warmup", "3" if QUICK else "10",
         "--min-runs", "10" if QUICK else "30",
         "--max-runs", "200" if QUICK else "2000"])
    for r in run:
        res = by_name.get(r["key"])
        if not res:
            r["skipped"] = "no result from hyperfine"
            continue
        times = res["times"]
        r.update({
            "runs": len(times),
            "median_s": median(times),
            "mean_s": res["mean"],
            "stddev_s": res.get("stddev"),
            "min_s": res["min"],
            "max_s": res["max"],
            "user_mean_s": res.get("user"),
            "system_mean_s": res.get("system"),
        })
    audit = audit_store_stats()
    bw = next((r for r in rows if r["key"] == "bwrap" and "median_s" in r), None)
    for r in rows:
        if bw and "median_s" in r:
            r["ratio_to_bwrap"] = r["median_s"] / bw["median_s"]
    result = {"hyperfine_command": shlex.join(hf), "workspace": ws, "rows": rows,
              "audit_store": audit}
    write_result("launch", result)  # kept even if the spaced pass fails
    try:
        spaced, hf_spaced = spaced_run(
            [r for r in run if r["key"] in SPACED_KEYS and "median_s" in r], ws)
        result["spaced"] = {"gap_ms": GAP_MS, "hyperfine_command": hf_spaced, "rows": spaced}
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        result["spaced"] = {"gap_ms": GAP_MS, "error": str(e)}
        log(f"launch (spaced): failed: {e}")
    write_result("launch", result)


# Launches spaced like an agent's (the model's turn between two tool calls), where the
# machine is idle before each one: what an agent waits for, as against back-to-back runs that
# keep the kernel's caches and deferred work warm. Only the tools that start in a few ms.
SPACED_KEYS = ("corral", "bwrap", "unshare", "bare", "corral_nocg", "corral_none")
GAP_MS = float(os.environ.get("BENCH_SPACED_GAP_MS", "20"))


def spaced_run(run, ws):
    if not run:
        return [], None
    hf, by_name = run_hyperfine(
        "launch (spaced)", run, ws, "hyperfine-launch-spaced.json",
        ["--warmup", "3", "--runs", "30" if QUICK else "150",
         "--prepare", f"sleep {GAP_MS / 1000:g}"])
    rows = []
    for r in run:
        res = by_name.get(r["key"])
        if not res:
            continue
        times = res["times"]
        rows.append({"key": r["key"], "label": r["label"], "runs": len(times),
                     "median_s": median(times), "p90_s": percentile(times, 90)})
    bw = next((r for r in rows if r["key"] == "bwrap"), None)
    for r in rows:
        if bw:
            r["ratio_to_bwrap"] = r["median_s"] / bw["median_s"]
    return rows, shlex.join(hf)


def run_hyperfine(what, run, ws, export_name, opts):
    """One hyperfine run over the rows in run (each named by its key), from the workspace.
    Returns the command line and hyperfine's results by row key."""
    export = os.path.join(RESULTS, export_name)
    hf = ["hyperfine", "-N", "--style", "basic"] + opts + ["--export-json", export]
    for r in run:
        hf += ["-n", r["key"], r["command"]]
    log(f"{what}: " + " ".join(hf[:12]) + " ...")
    subprocess.run(hf, cwd=ws, check=True, stdout=sys.stderr)
    with open(export) as f:
        data = json.load(f)
    return hf, {r["command"]: r for r in data["results"]}


if __name__ == "__main__":
    main()
