"""A small MCP stdio client for tests (standard library only).

It starts `corral mcp`, writes JSON lines (or raw bytes) to its stdin and reads its stdout
on a thread, so a test can wait for a given response with a timeout while notifications
and other responses are kept in order.

    import mcp_client
    s = mcp_client.Server([corral, "mcp", "-w", ws])
    s.initialize()
    r = s.call("run_command", {"command": "echo hi"})
    s.close()

Every test that uses it also checks two protocol claims, without asking:
- only JSON-RPC messages reach stdout: each line the server writes must be one JSON-RPC 2.0
  object (a response with an id and exactly one of result and error, or a notification);
  close() raises if any line was not (check_protocol() asks earlier);
- structuredContent matches the tool's outputSchema: once the test has asked tools/list,
  each tools/call result is validated against that tool's outputSchema with jsonschema
  (when the module is installed), and a mismatch raises where the result is read.
"""
import io
import json
import os
import queue
import subprocess
import sys
import threading
import time


class Timeout(Exception):
    pass


def protocol_problem(line):
    """Why a line the server wrote is not one JSON-RPC 2.0 message, or None."""
    if not line.endswith(b"\n"):
        return "not a whole line (no newline)"
    try:
        msg = json.loads(line)
    except ValueError as e:
        return "not JSON (%s)" % e
    if not isinstance(msg, dict):
        return "not a JSON object"
    if msg.get("jsonrpc") != "2.0":
        return "jsonrpc is not \"2.0\""
    if "method" in msg:
        if not isinstance(msg["method"], str):
            return "method is not a string"
        return None
    if "id" not in msg:
        return "neither a request, a notification nor a response"
    if ("result" in msg) == ("error" in msg):
        return "a response needs exactly one of result and error"
    if "error" in msg:
        e = msg["error"]
        if not (isinstance(e, dict) and isinstance(e.get("code"), int)
                and isinstance(e.get("message"), str)):
            return "error is not {code: integer, message: string}"
    return None


try:
    from jsonschema import Draft7Validator as _Validator
except ImportError:     # the schema check is skipped without the module
    _Validator = None


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
        # replies through a buffer (readline on the unbuffered pipe reads a byte per call)
        self.out = io.BufferedReader(self.proc.stdout, buffer_size=65536)
        self.q = queue.Queue()
        self.raw_lines = []        # every stdout line, as bytes, in order
        self.pending = []          # messages read but not yet claimed
        self.notifications = []    # notifications, with their arrival time
        self.next_id = 1
        self.sent = {}             # id -> (method, params) of our requests
        self.output_validators = {}   # tool name -> validator of its outputSchema
        self.bad_lines = []        # lines that are not JSON-RPC messages, with why
        self.eof = False
        self.stderr_text = b""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        if self.proc.stderr is not None:
            self.err_reader = threading.Thread(target=self._read_err, daemon=True)
            self.err_reader.start()

    def _read(self):
        f = self.out
        while True:
            line = f.readline()
            if not line:
                self.q.put(None)
                return
            self.raw_lines.append(line)
            why = protocol_problem(line)
            if why:
                self.bad_lines.append((why, line[:300]))
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
        self.sent[json.dumps(id)] = (method, params)
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
            self._check_response(msg)
            self.pending.append(msg)
        return msg

    def _check_response(self, msg):
        """Remember tools/list's outputSchemas; validate tools/call results against them."""
        if "id" not in msg or not isinstance(msg.get("result"), dict):
            return
        try:
            method, params = self.sent.get(json.dumps(msg["id"]), (None, None))
        except TypeError:
            return
        r = msg["result"]
        if method == "tools/list" and _Validator is not None:
            for t in r.get("tools", []):
                if "outputSchema" in t:
                    _Validator.check_schema(t["outputSchema"])
                    self.output_validators[t["name"]] = _Validator(t["outputSchema"])
        elif method == "tools/call" and isinstance(params, dict) and "structuredContent" in r:
            v = self.output_validators.get(params.get("name"))
            if v is not None:
                errs = sorted(v.iter_errors(r["structuredContent"]), key=str)
                if errs:
                    raise AssertionError(
                        "%s: structuredContent does not match its outputSchema: %s at %s"
                        % (params.get("name"), errs[0].message, list(errs[0].absolute_path)))

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

    def check_protocol(self):
        """Raise if the server wrote anything but JSON-RPC messages to stdout so far."""
        if self.bad_lines:
            why, line = self.bad_lines[0]
            raise AssertionError("%d line(s) on the server's stdout are not JSON-RPC "
                                 "messages; the first: %s: %r"
                                 % (len(self.bad_lines), why, line))

    def close(self, timeout=10):
        self.close_stdin()
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        self.reader.join(5)     # every line the server wrote has been read
        self.check_protocol()
        return rc

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
