#!/usr/bin/env python3
"""Drive a program on a pseudo-terminal, as a person at a terminal would (tests/integration/
shell_pty.sh). The program gets a new session whose controlling terminal is the pty; this
harness keeps the master side.

Usage: pty_harness.py [--rows R] [--cols C] [--transcript FILE] -- PROGRAM [ARG...]

The script comes on stdin (so that nothing in it shows in any process's command line), one
step a line; blank lines and lines starting with '#' are skipped:
    send TEXT       type TEXT (Python escapes: \\n, \\x03 for Ctrl-C, ...)
    expect REGEX    wait until the output since the last match matches REGEX
    resize R C      set the terminal's size (the kernel sends SIGWINCH to the program)
    proc MARK       wait until a process whose command line contains MARK runs (not stopped)
    noproc MARK     wait until no process's command line contains MARK
    signal NAME     send signal NAME (TERM, HUP, INT) to the program
    hangup          close the master side (the terminal goes away)
    sleep SECS
Then the harness waits for the program to exit, checks that it left the terminal in cooked
mode (ICANON and ECHO on, as it was handed over; unless it hung up), and exits with the program's status
(128+N when killed by signal N). A step that times out, a program that does not exit, or a
terminal left raw exits 200 or above, with the transcript's tail on stderr.
"""
import codecs
import fcntl
import os
import re
import select
import signal
import struct
import sys
import termios
import time

STEP_TIMEOUT = float(os.environ.get("PTY_STEP_TIMEOUT", "15"))


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def procs_with(mark, running=False):
    """Processes whose command line contains mark (running: and that are not stopped)."""
    found = []
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ")
        except OSError:
            continue
        if mark.encode() in cmd:
            if running:
                try:
                    with open(f"/proc/{pid}/stat", "rb") as f:
                        state = f.read().rsplit(b")", 1)[1].split()[0]
                except (OSError, IndexError):
                    continue
                if state in (b"T", b"t", b"Z", b"X"):
                    continue
            found.append(pid)
    return found


class Harness:
    def __init__(self, argv, rows, cols):
        self.master, self.slave = os.openpty()
        set_size(self.slave, rows, cols)
        self.out = b""
        self.pos = 0
        self.status = None
        self.pid = os.fork()
        if self.pid == 0:
            try:
                os.close(self.master)
                os.setsid()
                fcntl.ioctl(self.slave, termios.TIOCSCTTY, 0)
                for fd in (0, 1, 2):
                    os.dup2(self.slave, fd)
                if self.slave > 2:
                    os.close(self.slave)
                os.execvp(argv[0], argv)
            except Exception as e:  # noqa: BLE001 - report anything, then die
                os.write(2, f"exec {argv[0]}: {e}\n".encode())
            os._exit(127)
        # The slave stays open here too: its settings are checked after the program exits.
        os.set_blocking(self.master, False)

    def pump(self, timeout):
        """Read what the master has, waiting at most timeout seconds for the first byte."""
        if self.master < 0:
            time.sleep(timeout)
            return
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            return
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except BlockingIOError:
                return
            except OSError:
                return
            if not chunk:
                return
            self.out += chunk

    def reap(self):
        if self.status is None:
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = st
        return self.status is not None

    def fail(self, code, why):
        sys.stderr.write(f"pty_harness: {why}\n--- transcript (tail) ---\n")
        sys.stderr.write(self.out[-3000:].decode("utf-8", "replace"))
        sys.stderr.write("\n--- end ---\n")
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
        sys.exit(code)

    def wait_for(self, what, cond):
        end = time.monotonic() + STEP_TIMEOUT
        while time.monotonic() < end:
            if cond():
                return
            self.pump(0.05)
        self.fail(201, f"timed out after {STEP_TIMEOUT}s waiting for {what}")

    def step(self, line):
        op, _, arg = line.partition(" ")
        if op == "send":
            data = codecs.decode(arg, "unicode_escape").encode("latin-1")
            os.write(self.master, data)
        elif op == "expect":
            rx = re.compile(arg.encode())

            def matched():
                m = rx.search(self.out, self.pos)
                if m:
                    self.pos = m.end()
                return m is not None

            self.wait_for(f"/{arg}/", matched)
        elif op == "resize":
            rows, cols = (int(x) for x in arg.split())
            set_size(self.master, rows, cols)
        elif op == "proc":
            self.wait_for(f"a running process with '{arg}'", lambda: procs_with(arg, True))
        elif op == "noproc":
            self.wait_for(f"no process with '{arg}'", lambda: not procs_with(arg))
        elif op == "signal":
            os.kill(self.pid, getattr(signal, "SIG" + arg))
        elif op == "hangup":
            os.close(self.master)
            self.master = -1
        elif op == "sleep":
            end = time.monotonic() + float(arg)
            while time.monotonic() < end:
                self.pump(0.05)
        else:
            self.fail(200, f"unknown step: {line}")

    def finish(self):
        self.wait_for("the program to exit", self.reap)
        self.pump(0.05)
        # (after a hang-up the terminal has no settings left to check)
        lflag = termios.tcgetattr(self.slave)[3] if self.master >= 0 else ~0
        if not (lflag & termios.ICANON and lflag & termios.ECHO):
            self.fail(203, "the terminal was left in raw mode")
        st = self.status
        return os.WEXITSTATUS(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st)


def main():
    args = sys.argv[1:]
    rows, cols, transcript = 24, 80, None
    while args and args[0] != "--":
        if args[0] == "--rows":
            rows = int(args[1])
        elif args[0] == "--cols":
            cols = int(args[1])
        elif args[0] == "--transcript":
            transcript = args[1]
        else:
            sys.exit(f"pty_harness: unknown option {args[0]}")
        args = args[2:]
    if not args[1:]:
        sys.exit(__doc__)
    script = [ln.rstrip("\n") for ln in sys.stdin]
    h = Harness(args[1:], rows, cols)
    try:
        for line in script:
            if line.strip() and not line.lstrip().startswith("#"):
                h.step(line.lstrip())
        code = h.finish()
    finally:
        if transcript:
            with open(transcript, "wb") as f:
                f.write(h.out)
    sys.exit(code)


if __name__ == "__main__":
    main()
