#!/usr/bin/env python3
"""Soak test of `corral mcp`: 10,000 sequential calls, then 2,000 concurrent calls, against
one server. Every response must arrive (with the right id and output), and the server's RSS
after the soak must stay within a few MB of its RSS after warm-up.

    python3 tests/soak_mcp.py build/corral [--sequential N] [--concurrent N] [--rss-slack-kb K]

The concurrent phase runs twice (2 x N calls) to show the second burst does not grow the
server. Every call is recorded in an audit store in the soak's scratch directory (--audit off
to measure without it); at the end the store must hold every call and its chain must verify.
Not part of `make check` (it takes about a minute). Prints calls per second for both phases
and exits non-zero on any failure.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcp_client as M  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corral")
    ap.add_argument("--sequential", type=int, default=10000)
    ap.add_argument("--concurrent", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--rss-slack-kb", type=int, default=4096)
    ap.add_argument("--max-concurrent", type=int, default=0,
                    help="server --max-concurrent (default: the server's, 2 x cores)")
    ap.add_argument("--audit", default="store", help="'off' for no audit record")
    a = ap.parse_args()

    ws = tempfile.mkdtemp(prefix="corral-soak-")
    # the store outside the workspace (the sandbox can write the workspace)
    store_dir = tempfile.mkdtemp(prefix="corral-soak-audit-")
    db = os.path.join(store_dir, "audit.db")
    extra = ["-w", ws, "--max-queue", str(max(10000, a.concurrent)),
             "--audit", "off" if a.audit == "off" else db]
    if a.max_concurrent:
        extra += ["--max-concurrent", str(a.max_concurrent)]
    s = M.Server([a.corral, "mcp"] + extra)
    failures = 0
    try:
        s.initialize()

        def check(i, r, want):
            nonlocal failures
            res = r.get("result")
            if not res or res.get("isError") or res["structuredContent"]["stdout"] != want:
                failures += 1
                if failures <= 5:
                    print("bad response for call %r: %r" % (i, r)[:600], file=sys.stderr)

        # warm-up: every code path once, allocator arenas settled
        for i in range(a.warmup):
            id = s.call_async("run_command", {"argv": ["echo", str(i)]}, progress_token=i if i % 10 == 0 else None)
            check(id, s.response(id, timeout=60), "%d\n" % i)
            s.notifications.clear()
        rss_warm = s.rss_kb()

        t0 = time.monotonic()
        for i in range(a.sequential):
            id = s.call_async("run_command", {"argv": ["echo", str(i)]})
            check(id, s.response(id, timeout=60), "%d\n" % i)
            if i % 1000 == 999:
                print("  sequential %d/%d, %.0f calls/s, rss %d kB" %
                      (i + 1, a.sequential, (i + 1) / (time.monotonic() - t0), s.rss_kb()), flush=True)
        seq_s = time.monotonic() - t0
        rss_seq = s.rss_kb()

        # the concurrent burst twice: the second must not grow the server further
        rss_bursts = []
        for burst in range(2):
            t0 = time.monotonic()
            ids = {}
            for i in range(a.concurrent):
                ids[s.call_async("run_command", {"command": "echo c%d" % i})] = i
            for id, i in ids.items():
                check(id, s.response(id, timeout=600), "c%d\n" % i)
            con_s = time.monotonic() - t0
            time.sleep(0.2)
            rss_bursts.append(s.rss_kb())
            print("  concurrent burst %d: %d calls in %.1f s, rss %d kB" %
                  (burst + 1, a.concurrent, con_s, rss_bursts[-1]), flush=True)
        s.drain(0.5)
        stray = [m for m in s.pending]
        if stray:
            failures += 1
            print("unexpected extra messages: %r" % stray[:3], file=sys.stderr)
        assert s.response(s.request("ping"))["result"] == {}
        rss_end = s.rss_kb()
        rc = s.close(timeout=10)
        recorded = None
        if a.audit != "off":
            import json, subprocess
            st = subprocess.run([a.corral, "audit", "--db", db, "stats", "--json"],
                                capture_output=True, text=True)
            v = subprocess.run([a.corral, "audit", "--db", db, "verify"], capture_output=True, text=True)
            recorded = json.loads(st.stdout)["executions"] if st.returncode == 0 else -1
            want = a.warmup + a.sequential + 2 * a.concurrent
            print("audit: %d executions recorded (want %d); %s" % (recorded, want, v.stdout.strip()))
            if recorded != want or v.returncode != 0:
                failures += 1
                print("FAIL: the audit store is incomplete or does not verify", file=sys.stderr)
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
        shutil.rmtree(ws, ignore_errors=True)
        shutil.rmtree(store_dir, ignore_errors=True)

    print("sequential: %d calls in %.1f s = %.0f calls/s" % (a.sequential, seq_s, a.sequential / seq_s))
    print("concurrent: %d calls in %.1f s = %.0f calls/s" % (a.concurrent, con_s, a.concurrent / con_s))
    print("server RSS: %d kB after warm-up, %d kB after sequential, %d kB after the concurrent bursts "
          "(%+d kB)" % (rss_warm, rss_seq, rss_end, rss_end - rss_warm))
    ok = failures == 0 and rc == 0 and rss_end - rss_warm <= a.rss_slack_kb
    if rss_end - rss_warm > a.rss_slack_kb:
        print("FAIL: RSS grew by more than %d kB" % a.rss_slack_kb)
    if failures:
        print("FAIL: %d bad or missing responses" % failures)
    if rc != 0:
        print("FAIL: the server exited %d" % rc)
    print("PASS soak" if ok else "FAIL soak")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
