#!/usr/bin/env python3
"""Turn the JSON results of a bench/run.sh run into docs/benchmarks.md and
docs/bench-launch.png. Nothing here is typed by hand: every number comes from results/."""
import datetime
import json
import os
import platform
import shlex
import subprocess

from common import BENCH_DIR, CORRAL, RESULTS, ROOT, log, read_result

DOCS = os.path.join(ROOT, "docs")
PNG = os.path.join(DOCS, "bench-launch.png")
MD = os.path.join(DOCS, "benchmarks.md")

# The targets of issue 9.
T_LAUNCH_RATIO = 0.4
T_SERVER_RATE = 1500.0
T_SERVER_P50_RATIO = 1.5
T_MEM_KB = 512.0
T_FLOOD_GBPS = 1.0


def sh(cmd):
    try:
        p = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=30, cwd=ROOT)
        out = p.stdout.decode(errors="replace").strip()
        return out.splitlines()[0].strip() if out else "(no output)"
    except Exception as e:  # noqa: BLE001
        return f"(unavailable: {e})"


def machine():
    model = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = "unknown"
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    osr = "unknown"
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    osr = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return [("CPUs (nproc)", str(os.cpu_count())), ("CPU model", model),
            ("memory", mem), ("kernel", f"{platform.release()} ({platform.machine()})"),
            ("OS", osr), ("user", "root" if os.geteuid() == 0 else f"uid {os.geteuid()}")]


def versions():
    srt_pkg = os.path.join(BENCH_DIR, "node_modules", "@anthropic-ai", "sandbox-runtime",
                           "package.json")
    try:
        with open(srt_pkg) as f:
            srt = "@anthropic-ai/sandbox-runtime " + json.load(f)["version"]
    except OSError:
        srt = "not installed"
    if subprocess.run(["git", "rev-parse", "--git-dir"], cwd=ROOT, stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode == 0:
        rev = sh("git rev-parse --short HEAD")
        dirty = sh("git status --porcelain -- src include Makefile | head -1")
        tree = f"git {rev}" + (" with uncommitted changes in src/, include/ or Makefile"
                               if dirty and dirty != "(no output)" else "")
    else:
        tree = "not a git checkout"
    src = os.environ.get("CORRAL_SOURCE", CORRAL)
    return [
        ("corral", f"{sh(shlex.quote(CORRAL) + ' version')} ({tree}; `corral` below is a copy "
                   f"of {os.path.relpath(src, ROOT) if src.startswith(ROOT) else src} taken "
                   "at the start of the run)"),
        ("bubblewrap", sh("bwrap --version")),
        ("firejail", sh("firejail --version")),
        ("srt", srt),
        ("hyperfine", sh("hyperfine --version")),
        ("util-linux unshare", sh("unshare --version")),
        ("node", sh("node --version")),
        ("socat", sh("socat -V 2>&1 | grep -m1 'socat version'")),
        ("ripgrep", sh("rg --version")),
        ("gnuplot", sh("gnuplot --version")),
        ("python3", platform.python_version()),
    ]


def measured(out, res, part):
    d = ((read_result("env") or {}).get("during") or {}).get(part)
    extra = ""
    if d:
        extra = (f" Other work took {d['others_cpu_pct']:.0f}% of the CPUs meanwhile "
                 f"({d['seconds']:.0f} s; machine busy time less this part's own).")
        if d["others_cpu_pct"] > 15:
            extra += (" **Noisy: the machine was shared with other work while this part ran "
                      "(after the retries); treat these numbers as upper bounds.**")
    out.append(f"Measured {res.get('measured_at', '?')}.{extra}\n")


def show(cmd):
    """A command as the reader would type it: the copy under test shown as `corral`."""
    return cmd.replace(CORRAL, "corral") if CORRAL else cmd


def ms(s):
    return f"{s * 1e3:.2f} ms" if s is not None else "–"


def kb(v):
    return f"{v:.0f} kB" if v is not None else "–"


def verdict(ok):
    return "**pass**" if ok else "**FAIL**"


# ---- chart -------------------------------------------------------------------------------

COLOURS = {"corral": 0xd1495b, "corral_nocg": 0xe8a0a8, "corral_none": 0xe8a0a8,
           "corral_noaudit": 0xe8a0a8,
           "bwrap": 0x2e86ab}


def chart(launch):
    rows = [r for r in launch["rows"] if r.get("median_s")]
    if not rows:
        return False
    data = os.path.join(RESULTS, "launch.dat")
    with open(data, "w") as f:
        for r in reversed(rows):  # gnuplot puts the first line at the bottom
            m = r["median_s"] * 1e3
            ann = f"{m:.2f} ms" if m < 10 else f"{m:.0f} ms"
            if r.get("ratio_to_bwrap") is not None and r["key"] != "bwrap":
                ann += f"  ({r['ratio_to_bwrap']:.2f}x bwrap)"
            label = r["label"] + (" [info]" if r["key"].startswith("corral_") else "")
            f.write(f"{label}\t{m:.6f}\t{COLOURS.get(r['key'], 0x8d99ae)}\t{ann}\n")
    lo = min(r["median_s"] for r in rows) * 1e3
    hi = max(r["median_s"] for r in rows) * 1e3
    xmin = 10 ** (int(f"{lo:e}".split("e")[1]) - 0)  # the decade below the fastest
    if xmin > lo * 0.8:
        xmin /= 10
    xmax = hi * 25
    bw = next((r for r in rows if r["key"] == "bwrap"), None)
    target = bw["median_s"] * 1e3 * T_LAUNCH_RATIO if bw else 0
    sub = f"{os.cpu_count()} CPUs, Linux {platform.release()}, {len(rows)} tools in one hyperfine run"
    cmd = ["gnuplot", "-e",
           f"data='{data}'; out='{PNG}'; n={len(rows)}; xmin={xmin}; xmax={xmax}; "
           f"target={target}; subtitle='{sub}'",
           os.path.join(BENCH_DIR, "launch.gp")]
    p = subprocess.run(cmd, stderr=subprocess.PIPE)
    if p.returncode != 0:
        log("gnuplot failed: " + p.stderr.decode(errors="replace"))
        return False
    return True


# ---- sections ----------------------------------------------------------------------------

def section_launch(out, launch, targets):
    out.append("## 1. One-shot launch of `/bin/true`\n")
    if not launch:
        out.append("Not run.\n")
        return
    measured(out, launch, "launch")
    out.append("All tools in one hyperfine run (`-N`: no intermediate shell), in the "
               "workspace directory. Median of the per-run wall times that hyperfine "
               "exported; the ratio is to bwrap's median in the same run.\n")
    out.append("| tool | median | × bwrap | mean ± σ | min | runs | what it sets up |")
    out.append("|---|---:|---:|---:|---:|---:|---|")
    for r in launch["rows"]:
        if "median_s" in r:
            ratio = f"{r['ratio_to_bwrap']:.2f}×" if "ratio_to_bwrap" in r else "–"
            out.append(f"| {r['label']} | {ms(r['median_s'])} | {ratio} | "
                       f"{ms(r['mean_s'])} ± {ms(r['stddev_s'])} | {ms(r['min_s'])} | "
                       f"{r['runs']} | {r['note']} |")
        else:
            out.append(f"| {r['label']} | not measured | – | – | – | – | "
                       f"{r.get('skipped', '')} |")
    out.append("")
    out.append("![median launch time per tool](bench-launch.png)\n")
    out.append("The exact commands, run from the workspace directory `$WS` (a fresh "
               "`mktemp -d` directory per harness run):\n")
    out.append("```sh")
    ws = launch.get("workspace")
    for r in launch["rows"]:
        out.append(f"# {r['key']}")
        cmd = show(r["command"])
        out.append(cmd.replace(ws, "$WS") if ws else cmd)
    out.append("```\n")
    out.append(f"hyperfine options: `{_hf_opts(launch['hyperfine_command'])}`.\n")
    a = launch.get("audit_store")
    if a and "executions" in a:
        out.append(f"corral's audit store, fresh at the start of the harness and shared by the "
                   f"corral rows in the order above, held {a['executions']} records after "
                   f"this part (database {a['db_bytes'] / 1e6:.1f} MB, WAL "
                   f"{a['wal_bytes'] / 1e6:.1f} MB). Compare the `--audit off` row: the "
                   "rows after the default one run against a larger store (and the spaced "
                   "runs below against a larger one still).\n")
    sp = launch.get("spaced") or {}
    if sp.get("error"):
        out.append(f"The spaced launches (below in other runs) failed here: {sp['error']}\n")
    if sp.get("rows"):
        out.append(f"**Spaced like an agent's calls**: the same commands, one at a time, "
                   f"{sp['gap_ms']:g} ms apart (hyperfine's `--prepare "
                   f"'sleep {sp['gap_ms'] / 1000:g}'`, not timed), so that the machine is "
                   "idle before each launch, as between an agent's tool calls. Back-to-back "
                   "runs keep the kernel's deferred work warm; spaced ones pay for it.\n")
        out.append("| tool | median | p90 | × bwrap | runs |")
        out.append("|---|---:|---:|---:|---:|")
        for r in sp["rows"]:
            ratio = f"{r['ratio_to_bwrap']:.2f}×" if "ratio_to_bwrap" in r else "–"
            out.append(f"| {r['label']} | {ms(r['median_s'])} | {ms(r['p90_s'])} | {ratio} | "
                       f"{r['runs']} |")
        out.append("")
        out.append(f"hyperfine options: `{_hf_opts(sp['hyperfine_command'])}`.\n")
    u = next((r for r in launch["rows"] if r["key"] == "unshare" and "ratio_to_bwrap" in r),
             None)
    if u:
        out.append(f"`unshare -Urnmpf /bin/true` creates the namespaces and nothing else (no "
                   f"root, no filters, no supervision): it takes {u['ratio_to_bwrap']:.2f}× "
                   f"bwrap in this run. A one-shot launch that builds its own fresh "
                   f"namespaces cannot go below that line, so the target of "
                   f"{T_LAUNCH_RATIO}× bwrap is "
                   f"{'below' if u['ratio_to_bwrap'] > T_LAUNCH_RATIO else 'above'} what the "
                   "kernel allows for a process that starts cold.\n")
    c = next((r for r in launch["rows"] if r["key"] == "corral"), None)
    if c and "ratio_to_bwrap" in c:
        targets.append(("One-shot `corral run -- /bin/true`, median ≤ 0.4× bwrap",
                        f"{ms(c['median_s'])} = {c['ratio_to_bwrap']:.2f}× bwrap",
                        verdict(c["ratio_to_bwrap"] <= T_LAUNCH_RATIO)))
    else:
        targets.append(("One-shot launch ≤ 0.4× bwrap", "not measured", "–"))


def _hf_opts(cmd):
    argv = shlex.split(cmd)
    opts = []
    for i, a in enumerate(argv[1:], 1):
        if a == "-n":
            break
        if a == "--export-json":
            opts += [a, "FILE"]
            continue
        if argv[i - 1] == "--export-json":
            continue
        opts.append(a)
    return shlex.join(opts)


def section_server(out, server, targets):
    out.append("## 2. Server throughput and latency\n")
    if not server:
        out.append("Not run.\n")
        return
    measured(out, server, "server")
    n = server["n_calls"]
    out.append(f"{n} calls per row, after a warm-up, from one Python client "
               "(bench/server.py) that keeps *concurrency* calls in flight with that many "
               "threads. The floor is bare `fork+exec+wait` of `/bin/true` "
               "(`os.posix_spawn` + `waitpid`) from the same threads, so the client's own "
               "overhead is in both. `corral mcp` takes every sandbox's system tree from "
               "its mount template (the default); the `--mount-template off` rows build "
               "each tree whole, as `corral run` does. A call's protected-path "
               "placeholders stay 10 ms after it for the next call to take over (the "
               "default); the `--placeholder-linger 0` rows remove them at each call's "
               "end.\n")
    if server.get("override"):
        out.append(f"> **Harness self-test only**: the server was `{server['override']}` "
                   "(CORRAL_MCP_CMD), not `corral mcp`; its numbers say nothing about "
                   "corral's server.\n")
    out.append("| what | concurrency | calls/s | p50 | p99 | mean | p50 × bare | errors | "
               "prebuilt |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in server.get("throughput", []):
        ratio = f"{r['p50_ratio_to_bare']:.2f}×" if r.get("p50_ratio_to_bare") else "–"
        pre = f"{r['prebuilt']}/{r['ok']}" if "prebuilt" in r else "–"
        out.append(f"| {r['what']} | {r['concurrency']} | {r['calls_per_s']:.0f} | "
                   f"{r['p50_ms']:.3f} ms | {r['p99_ms']:.3f} ms | {r['mean_ms']:.3f} ms | "
                   f"{ratio} | {r['errors']} | {pre} |")
    out.append("")
    sp = server.get("spaced") or []
    if sp:
        gap = sp[0]["gap_ms"]
        out.append(f"**Calls spaced like an agent's**: one call at a time, {gap:.0f} ms apart "
                   f"(the model's turn between tool calls), {sp[0]['calls']} calls per row, "
                   "after 10 warm-up calls. The bare row is spaced the same way: a machine "
                   "idle between calls wakes up for each, and that costs the bare call too. "
                   "`--prebuild N` keeps N sandboxes built while the server is idle; a call "
                   "whose plan matches only sends its command into one (docs/mcp.md).\n")
        out.append("| what | p50 | p90 | p99 | p50 × bare | prebuilt |")
        out.append("|---|---:|---:|---:|---:|---:|")
        for r in sp:
            ratio = f"{r['p50_ratio_to_bare']:.2f}×" if r.get("p50_ratio_to_bare") else "–"
            pre = f"{r['prebuilt']}/{r['calls']}" if "prebuilt" in r else "–"
            out.append(f"| {r['what']} | {r['p50_ms']:.3f} ms | {r['p90_ms']:.3f} ms | "
                       f"{r['p99_ms']:.3f} ms | {ratio} | {pre} |")
        out.append("")
        fl = next((r for r in sp if r["what"].startswith("floor:")), None)
        pb = next((r for r in sp if "--prebuild" in r["what"]), None)
        if fl and fl.get("p50_ratio_to_bare"):
            out.append(
                "The floor row is the same client's call to a server that does nothing but "
                "read the JSON-RPC line, `posix_spawn` the command, wait and write the reply: "
                "the round trip and the JSON that every MCP server pays, however it isolates "
                f"the command. It takes {fl['p50_ms']:.3f} ms = "
                f"{fl['p50_ratio_to_bare']:.2f}× bare at p50"
                + (f"; a prebuilt corral call is {pb['p50_ms'] - fl['p50_ms']:.3f} ms above it "
                   f"({pb['p50_ms'] / fl['p50_ms']:.2f}× the floor)" if pb else "")
                + ".\n")
        elif server.get("mcp_floor_skipped"):
            out.append(f"The MCP floor row was not measured: {server['mcp_floor_skipped']}.\n")
    if server.get("skipped"):
        out.append(f"**corral mcp: not measured.** {server['skipped']}. The harness is ready: "
                   "once `build/corral mcp` answers `initialize` on stdio, `bench/run.sh` "
                   "fills these rows.\n")
        targets.append(("Server ≥ 1500 launches/s on 2 cores", "not measured (no `corral mcp`)",
                        "–"))
        targets.append(("Server p50 ≤ 1.5× bare fork+exec", "not measured (no `corral mcp`)",
                        "–"))
        return
    floor = server.get("ns_floor") or []
    if floor:
        bare = {r["concurrency"]: r for r in server.get("throughput", [])
                if r["what"].startswith("bare")}
        out.append("**The kernel's floor** (`bench/nsfloor.c`, same machine, same run): "
                   "`clone()` with the default profile's namespace flags (user, mount, pid, "
                   "net, ipc, uts, cgroup; `nonet`: all but net), then exec `/bin/true` and "
                   "wait. No uid maps, mounts, filters, supervision or JSON. Whatever builds a "
                   "fresh set of namespaces per sandbox pays at least this, teardown "
                   "included.\n")
        out.append("| namespaces | workers | launches/s | p50 | p99 | p50 × bare |")
        out.append("|---|---:|---:|---:|---:|---:|")
        for r in floor:
            b = bare.get(r["workers"])
            ratio = f"{r['p50_ms'] / b['p50_ms']:.2f}×" if b and b.get("p50_ms") else "–"
            out.append(f"| {r['set']} | {r['workers']} | {r['per_s']:.0f} | "
                       f"{r['p50_ms']:.3f} ms | {r['p99_ms']:.3f} ms | {ratio} |")
        out.append("")
        full = {r["workers"]: r for r in floor if r["set"] == "all"}
        if 1 in full and 2 in full and 1 in bare and bare[1].get("p50_ms"):
            out.append(
                f"With a fresh network namespace per launch the floor is "
                f"{full[2]['per_s']:.0f} launches/s on both cores, and one launch's p50 is "
                f"{full[1]['p50_ms'] / bare[1]['p50_ms']:.2f}× bare fork+exec at "
                f"concurrency 1. The targets (≥ {T_SERVER_RATE:.0f}/s, p50 ≤ "
                f"{T_SERVER_P50_RATIO}× bare) leave "
                f"{max(0.0, 2e3 / T_SERVER_RATE - 2e3 / full[2]['per_s']):.2f} ms of CPU per "
                "sandbox above the floor for the uid maps, the mounts, Landlock, seccomp, "
                "supervision, the audit record and the JSON-RPC round trip; the p50 target "
                "is below the floor unless the namespaces are built before the call arrives, "
                "and back-to-back calls drain any such pool at the floor's rate.\n")
    out.append(f"Server command: `{show(server.get('server_command') or '')}`, driven as JSON-RPC lines: "
               "`initialize`, `notifications/initialized`, `tools/list`, then "
               "`tools/call {\"name\": \"run_command\", \"arguments\": {\"argv\": "
               "[\"/bin/true\"]}}`.\n")
    mcp = [r for r in server["throughput"] if not r["what"].startswith("bare")]
    best = max(mcp, key=lambda r: r["calls_per_s"]) if mcp else None
    if best:
        targets.append(("Server ≥ 1500 launches/s on 2 cores",
                        f"{best['calls_per_s']:.0f}/s (concurrency {best['concurrency']})",
                        verdict(best["calls_per_s"] >= T_SERVER_RATE)))
        c1 = next((r for r in mcp if r["concurrency"] == 1), None)
        if c1 and c1.get("p50_ratio_to_bare"):
            targets.append(("Server p50 ≤ 1.5× bare fork+exec (concurrency 1, back to back)",
                            f"{c1['p50_ms']:.3f} ms = {c1['p50_ratio_to_bare']:.2f}× bare",
                            verdict(c1["p50_ratio_to_bare"] <= T_SERVER_P50_RATIO)))
        pre = next((r for r in server.get("spaced") or [] if "--prebuild" in r["what"]), None)
        if pre and pre.get("p50_ratio_to_bare"):
            fl = next((r for r in server.get("spaced") or [] if r["what"].startswith("floor:")),
                      None)
            floor_note = (f"; a minimal MCP server without isolation: "
                          f"{fl['p50_ratio_to_bare']:.2f}×" if fl and fl.get("p50_ratio_to_bare")
                          else "")
            targets.append((f"… with `--prebuild`, calls {pre['gap_ms']:.0f} ms apart",
                            f"{pre['p50_ms']:.3f} ms = {pre['p50_ratio_to_bare']:.2f}× bare "
                            f"(spaced the same{floor_note})",
                            verdict(pre["p50_ratio_to_bare"] <= T_SERVER_P50_RATIO)))


def section_memory(out, server, mem, targets):
    out.append("## 3. Memory per running sandbox\n")
    out.append("RSS counts shared pages (libc, the binary) in every process that maps them; "
               "USS counts only a process's private pages, what one more sandbox really "
               "costs; PSS divides the shared pages among their users. The command itself "
               "(`sleep 30`) is never counted.\n")
    m = (server or {}).get("memory")
    out.append("### In one server: 100 concurrent `sleep 30` sandboxes\n")
    if m and "sandboxes_running" in m:
        if server.get("override"):
            out.append(f"> **Harness self-test only** (`{server['override']}`).\n")
        out.append(f"Server: `{show(m['server_command'])}`. Its RSS after a warm-up and with "
                   f"{m['sandboxes_running']} sandboxes running (each a `tools/call` of "
                   "`sleep 30` in flight):\n")
        out.append("| | before | with sandboxes | per sandbox |")
        out.append("|---|---:|---:|---:|")
        out.append(f"| server RSS | {kb(m['server_rss_before_kb'])} | "
                   f"{kb(m['server_rss_during_kb'])} | {kb(m['server_rss_per_sandbox_kb'])} |")
        out.append(f"| server USS | {kb(m['server_uss_before_kb'])} | "
                   f"{kb(m['server_uss_during_kb'])} | {kb(m['server_uss_per_sandbox_kb'])} |")
        out.append(f"| in-sandbox helpers ({m['helper_processes']} processes) RSS / USS / "
                   f"PSS | | | {kb(m['helper_rss_per_sandbox_kb'])} / "
                   f"{kb(m['helper_uss_per_sandbox_kb'])} / "
                   f"{kb(m['helper_pss_per_sandbox_kb'])} |")
        out.append("")
        targets.append(("Supervisor memory ≤ 0.5 MB per running sandbox (server RSS delta)",
                        kb(m["server_rss_per_sandbox_kb"]),
                        verdict(m["server_rss_per_sandbox_kb"] <= T_MEM_KB)))
        both = m["server_rss_per_sandbox_kb"] + (m["helper_pss_per_sandbox_kb"] or 0)
        targets.append(("… counting the sandbox's init too (server RSS delta + init PSS)",
                        kb(both), verdict(both <= T_MEM_KB)))
    else:
        why = (server or {}).get("memory_skipped", "not run")
        out.append(f"**Not measured.** {why}.\n")
        targets.append(("Supervisor memory ≤ 0.5 MB per running sandbox (server)",
                        "not measured (no `corral mcp`)", "–"))
    out.append("### One CLI process per sandbox, against bwrap\n")
    if not mem:
        out.append("Not run.\n")
        return
    measured(out, mem, "memory")
    out.append(f"{mem['n']} concurrent `corral run -- sleep 30`, then {mem['n']} concurrent "
               "`bwrap … sleep 30` with the launch benchmark's binds. Per sandbox (sum over "
               "the processes ÷ sandboxes). corral: the supervisor is the `corral run` "
               "process, the helper its `corral-init` (pid 1 of the sandbox). bwrap: the "
               "outer `bwrap` and its pid-1 `bwrap`.\n")
    out.append("| per sandbox | supervisor RSS | supervisor USS | helper RSS | helper USS | "
               "all RSS | all USS | all PSS |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for key in ("corral", "bwrap"):
        r = mem[key]
        out.append(f"| {key} ({r['running']}/{r['sandboxes']} running) | {kb(r['top_rss_kb'])} "
                   f"| {kb(r['top_uss_kb'])} | {kb(r['inner_rss_kb'])} | "
                   f"{kb(r['inner_uss_kb'])} | {kb(r['total_rss_kb'])} | "
                   f"{kb(r['total_uss_kb'])} | {kb(r['total_pss_kb'])} |")
    out.append("")
    c, b = mem["corral"], mem["bwrap"]
    out.append(f"corral ÷ bwrap, all processes: RSS {c['total_rss_kb'] / b['total_rss_kb']:.2f}×, "
               f"USS {c['total_uss_kb'] / b['total_uss_kb']:.2f}×, "
               f"PSS {c['total_pss_kb'] / b['total_pss_kb']:.2f}×. "
               f"Sandboxes left running after their supervisors were killed: "
               f"{mem['leftover_sleep_30']}.\n")
    if not (m and "sandboxes_running" in m):
        targets.append(("(CLI stand-in) supervisor USS per sandbox ≤ 0.5 MB",
                        kb(c["top_uss_kb"]) + f" (RSS {kb(c['top_rss_kb'])})",
                        verdict(c["top_uss_kb"] <= T_MEM_KB) + " (USS) / " +
                        verdict(c["top_rss_kb"] <= T_MEM_KB) + " (RSS)"))


def section_flood(out, flood, targets):
    out.append("## 4. Output flood: 1 GiB through capture\n")
    if not flood:
        out.append("Not run.\n")
        return
    measured(out, flood, "flood")
    sampled = flood.get("sampled_reps")
    how = (f"in {sampled} more runs of their own (a sampler on this 2-core machine takes CPU "
           "from the two processes that move the bytes, so the timed runs are not sampled)"
           if sampled else "in the timed runs")
    out.append(f"Median of {flood['reps']} runs after one discarded warm-up; throughput is "
               "bytes ÷ median wall time, in GB/s (10⁹ bytes/s). corral keeps the head and tail of each "
               "stream (`--max-output`, 1 MiB by default) and counts every byte; the JSON "
               "result is read and checked (`stdout_bytes` equals the bytes written). Peak "
               "RSS of the corral process: VmHWM sampled from `/proc/PID/status` every "
               f"millisecond while it runs, {how}, and `%M` (ru_maxrss) of GNU time, the "
               "largest of corral and the descendants it waited for, in all runs. The "
               "baselines' memory is that of head/cat, shown for scale.\n")
    out.append("| what | bytes | median wall | throughput | corral VmHWM | ru_maxrss | "
               "bytes counted |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    for r in flood["rows"]:
        counted = {x.get("stdout_bytes") for x in r["runs"]}
        counted = ", ".join(str(x) for x in counted if x is not None) or "–"
        tp = f"{r['gb_per_s']:.2f} GB/s" if r.get("gb_per_s") else "–"
        hwm = kb(r["vmhwm_kb_max"]) if r["label"].startswith("corral") else "–"
        cmd = show(r["command"]).replace("|", "\\|")
        out.append(f"| `{cmd}` | {r['bytes']} | {ms(r['median_wall_s'])} | {tp} | "
                   f"{hwm} | {kb(r['ru_maxrss_kb_max'])} | {counted} |")
    out.append("")
    rows = {r["label"]: r for r in flood["rows"]}
    g = rows.get("corral run --json (1G)")
    small = rows.get("corral run --json (64M)")
    if g and g.get("ok"):
        targets.append(("Output capture ≥ 1 GB/s", f"{g['gb_per_s']:.2f} GB/s",
                        verdict(g["gb_per_s"] >= T_FLOOD_GBPS)))
        if small and small.get("vmhwm_kb_max") and g.get("vmhwm_kb_max"):
            flat = g["vmhwm_kb_max"] <= small["vmhwm_kb_max"] * 1.10 + 512
            targets.append(("Output capture: flat memory (peak RSS at 1 GiB ≈ at 64 MiB)",
                            f"{kb(small['vmhwm_kb_max'])} at 64 MiB, "
                            f"{kb(g['vmhwm_kb_max'])} at 1 GiB", verdict(flat)))
    else:
        targets.append(("Output capture ≥ 1 GB/s", "failed", "**FAIL**"))


def main():
    launch = read_result("launch")
    server = read_result("server")
    mem = read_result("memory")
    flood = read_result("flood")
    have_png = chart(launch) if launch else False
    targets = []
    body = []
    section_launch(body, launch, targets)
    section_server(body, server, targets)
    section_memory(body, server, mem, targets)
    section_flood(body, flood, targets)

    out = ["# Benchmarks", "",
           "<!-- Generated by bench/run.sh (bench/report.py) from bench/results/*.json; "
           "do not edit by hand. -->", "",
           "Reproduce: `bench/deps.sh && bench/run.sh` (or `make bench` after the deps). "
           "The harness is not part of `make check`.", "",
           f"Run: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}, "
           f"{os.environ.get('BENCH_ELAPSED', '?')} s for the whole harness"
           + (" (BENCH_QUICK: fewer runs)" if os.environ.get("BENCH_QUICK") else "") + ".", ""]
    out.append("## Targets (issue 9), measured in this run\n")
    out.append("| target | measured | result |")
    out.append("|---|---|---|")
    for t in targets:
        out.append(f"| {t[0]} | {t[1]} | {t[2]} |")
    out.append("")
    out.append("## Machine\n")
    out.append("| | |")
    out.append("|---|---|")
    for k, v in machine():
        out.append(f"| {k} | {v} |")
    prim = read_result("machine")
    if prim:
        out.append(f"| a system call (getppid) | {prim['syscall_ns'] / 1000:.2f} µs |")
        out.append(f"| a page fault (first write to an anonymous page) | "
                   f"{prim['fault_ns'] / 1000:.1f} µs |")
        out.append(f"| a copy-on-write fault (a write to a page shared with a forked child) | "
                   f"{prim['cow_fault_ns'] / 1000:.1f} µs |")
        out.append(f"| fork + exit + wait | {prim['fork_exit_wait_us']:.0f} µs |")
        out.append(f"| posix_spawn /bin/true + wait | {prim['spawn_true_us']:.0f} µs |")
        if prim.get("cpuid_ns") is not None:
            out.append(f"| a CPUID instruction (trapped by a hypervisor; glibc's start-up runs "
                       f"dozens in every new program) | {prim['cpuid_ns'] / 1000:.2f} µs |")
    env = read_result("env") or {}
    for phase in ("before", "after"):
        e = env.get(phase)
        if e:
            top = ", ".join(e["top"]) if e["top"] else "nothing above 5%"
            out.append(f"| CPU busy {phase} the run (1 s sample) | {e['cpu_busy_pct']:.0f}% "
                       f"(load average {e['loadavg']}; top: {top}) |")
    out.append("")
    if prim:
        out.append("The primitives' costs (`bench/machine.c`, medians of 5 rounds at the start "
                   "of the run) differ between virtual machines by an order of magnitude, and "
                   "launch times follow them: a one-shot `corral run --audit off -- /bin/true` "
                   "makes about 1,450-1,550 system calls and takes about 210 page faults in its "
                   "three processes (270 with the audit record), bwrap about 450-600 and 125 "
                   "(`strace -fc`, GNU time's minor faults; 2026-11-27 and 2026-11-29). Each "
                   "program started also pays for glibc's CPUIDs: a static program that returns "
                   "at once took 0.41 ms here against 0.13 ms without glibc (2026-11-29), "
                   "once for corral and once for the command, as for bwrap and the bare row. "
                   "Compare runs on different machines by the ratios.\n")
    out.append("## Versions\n")
    out.append("| tool | version |")
    out.append("|---|---|")
    for k, v in versions():
        out.append(f"| {k} | {v} |")
    out.append("")
    out.extend(body)
    if not have_png:
        out.append("(The chart could not be drawn: gnuplot missing or failed.)\n")
    out.append("## Notes\n")
    out.extend(NOTES)
    with open(MD, "w") as f:
        f.write("\n".join(out).rstrip() + "\n")
    log(f"wrote {MD}" + (f" and {PNG}" if have_png else ""))


NOTES = [
    "- **Comparability.** bwrap gets the same namespaces as corral's default profile (user, "
    "mount, pid, net, ipc, uts, cgroup) and comparable binds: `/usr` read-only, the "
    "merged-usr symlinks, a few `/etc` files, `--proc /proc`, `--dev /dev`, `--tmpfs /tmp`, "
    "the workspace read-write, `--die-with-parent --new-session`. It applies no seccomp "
    "filter, no Landlock and no resource limits, which corral does on top. srt wraps bwrap "
    "(plus a seccomp helper and, with network rules, socat proxies) from a Node.js CLI, so "
    "its time is dominated by starting Node. `unshare -Urnmpf` creates namespaces only.",
    "- **firejail** is setuid root on Debian and is run here as root (the harness runs as "
    "root); `--quiet` only silences its banner. Without `--noprofile` it would load "
    "`default.profile`.",
    "- **srt settings**: an empty `allowedDomains` (no network), writes allowed to `.` (the "
    "workspace), default reads; the package is pinned in bench/package.json (the newest "
    "release whose `engines` accepts the machine's Node 20).",
    "- **Audit store**: `corral run` and `corral mcp` write one audit record (SQLite) per run "
    "by default; the harness points `XDG_STATE_HOME` at a fresh directory, so every run starts "
    "with an empty store and the user's own store is never touched. The row "
    "`corral run --audit off` shows the launch without that write.",
    "- **Shared machine**: each part runs under a monitor of the CPU time that other work "
    "took meanwhile (the machine's busy time from /proc/stat less the part's own, which "
    "includes kernel threads working for the part); a part above 15% is run again "
    "(`BENCH_RETRIES`), and one still above it is marked noisy.",
    "- **Medians, not means**: process launch times have a long right tail on a shared VM; "
    "the median is what a typical call costs.",
    "- **As root**, corral's default process limit (1024) is enforced with a per-run cgroup "
    "(`pids.max`), because the kernel exempts uid 0 from RLIMIT_NPROC; the row "
    "`corral run --pids 0` shows the launch without that cgroup, and `--mode none` without "
    "any isolation layer (informational rows, not targets).",
]


if __name__ == "__main__":
    main()
