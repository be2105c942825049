"""A small MCP stdio client for tests (standard library only).

It starts `corral mcp`, writes JSON lines (or raw bytes) to its stdin and reads its stdout
on a thread, so a test can wait for a given response with a timeout while notifications
and other responses are kept in order.

    import mcp_client
    s = mcp_client.Server([corral, "mcp", "-w", ws])
    s.initialize()
    r = s.call("run_command", {"command": "echo hi"})
    s.close()
"""
import json
import os
import queue
import subprocess
import sys
import threading
import time


class Timeout(Exception):
    pass


class Server:
    def __init__(self, argv, env=None, stderr=None, preexec_fn=None):
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr if stderr is not None else subprocess.PIPE,
            env=env,
            bufsize=0,
            preexec_fn=preexec_fn,
        )
        self.q = queue.Queue()
        self.raw_lines = []        # every stdout line, as bytes, in order
        self.pending = []          # messages read but not yet claimed
        self.notifications = []    # notifications, with their arrival time
        self.next_id = 1
        self.eof = False
        self.stderr_text = b""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        if self.proc.stderr is not None:
            self.err_reader = threading.Thread(target=self._read_err, daemon=True)
            self.err_reader.start()

    def _read(self):
        f = self.proc.stdout
        while True:
            line = f.readline()
            if not line:
                self.q.put(None)
                return
            self.raw_lines.append(line)
            t = time.monotonic()
            try:
                msg = json.loads(line)
            except ValueError:
                msg = {"_unparseable": line.decode("utf-8", "replace")}
            self.q.put((t, msg))

    def _read_err(self):
        for chunk in iter(lambda: self.proc.stderr.read(4096), b""):
            self.stderr_text += chunk

    # ---- sending -------------------------------------------------------------------------
    def send_raw(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, obj):
        self.send_raw(json.dumps(obj) + "\n")

    def request(self, method, params=None, id=None):
        if id is None:
            id = self.next_id
            self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return id

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    # ---- receiving -----------------------------------------------------------------------
    def _pull(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise Timeout("timed out")
        try:
            item = self.q.get(timeout=left)
        except queue.Empty:
            raise Timeout("timed out")
        if item is None:
            self.eof = True
            raise EOFError("server closed stdout")
        t, msg = item
        if "method" in msg and "id" not in msg:
            self.notifications.append((t, msg))
        else:
            self.pending.append(msg)
        return msg

    def recv(self, timeout=10):
        """The next response (not notification) in arrival order."""
        deadline = time.monotonic() + timeout
        while True:
            if self.pending:
                return self.pending.pop(0)
            self._pull(deadline)

    def response(self, id, timeout=30):
        """Wait for the response to request id."""
        deadline = time.monotonic() + timeout
        while True:
            for i, m in enumerate(self.pending):
                if "id" in m and m["id"] == id and type(m["id"]) is type(id):
                    return self.pending.pop(i)
            self._pull(deadline)

    def drain(self, seconds):
        """Read everything that arrives within the given time."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                self._pull(deadline)
        except (Timeout, EOFError):
            pass

    # ---- MCP helpers ---------------------------------------------------------------------
    def initialize(self, version="2025-11-25"):
        id = self.request("initialize", {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "corral-tests", "version": "0"},
        })
        r = self.response(id)
        if "result" not in r:
            raise RuntimeError("initialize failed: %r" % (r,))
        self.notify("notifications/initialized")
        self.version = r["result"]["protocolVersion"]
        return r

    def call_async(self, name, arguments, id=None, progress_token=None):
        params = {"name": name, "arguments": arguments}
        if progress_token is not None:
            params["_meta"] = {"progressToken": progress_token}
        return self.request("tools/call", params, id=id)

    def call(self, name, arguments, timeout=60, **kw):
        id = self.call_async(name, arguments, **kw)
        r = self.response(id, timeout)
        if "result" not in r:
            raise RuntimeError("tools/call failed: %r" % (r,))
        return r["result"]

    # ---- shutdown ------------------------------------------------------------------------
    def close_stdin(self):
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass

    def wait(self, timeout=10):
        return self.proc.wait(timeout=timeout)

    def close(self, timeout=10):
        self.close_stdin()
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0


def text_of(result):
    return "\n".join(c.get("text", "") for c in result.get("content", []))


def corral_argv(extra=()):
    corral = os.environ.get("CORRAL", "build/corral")
    return [corral, "mcp"] + list(extra)


if __name__ == "__main__":
    # Interactive use: python3 tests/mcp_client.py build/corral mcp -w DIR
    s = Server(sys.argv[1:], stderr=sys.stderr)
    print(json.dumps(s.initialize()["result"], indent=2))
    for line in sys.stdin:
        s.send_raw(line)
        s.drain(1.0)
        for m in s.pending:
            print(json.dumps(m))
        s.pending.clear()
    s.close()
