# Escape battery, kernel surface group: the seccomp filter, capabilities, no_new_privs and
# the terminal. Helpers: tests/escape/escape.sh.

# Run `probe ARGS` in the sandbox and require errno=EXPECT. With CONTROL=1, also run it with
# --mode none and require a different answer there: the check is then known to be able to
# fail (only for calls that are harmless on the host).
esc_deny() { # EXPECT CONTROL ARGS...
	local want=$1 control=$2 out none
	shift 2
	out=$(cr -- ./probe "$@" 2>/dev/null)
	assert_eq "$out" "errno=$want" "probe $*"
	if [ "$control" = 1 ]; then
		none=$(cr --mode none -- ./probe "$@" 2>/dev/null)
		[ "$none" != "$out" ] || fail "control: probe $* also gives '$none' with --mode none"
	fi
}

# A call gated by a capability: --mode none drops every capability, so there the kernel's own
# check says EPERM too and cannot serve as the control. The control is then the probe run
# directly on the host, and only when this test holds the capability (as root): the kernel must
# answer something else (a bad argument, a missing path). Only for calls that change nothing
# on the host even unfiltered (the probe's arguments are chosen so; see tests/probe.c).
# Without the capability there is no control: the kernel itself refuses with EPERM.
esc_deny_hostctl() { # CAP-BIT ARGS...
	local bit=$1 out host eff
	shift
	out=$(cr -- ./probe "$@" 2>/dev/null)
	assert_eq "$out" "errno=EPERM" "probe $*"
	eff=$(awk '/^CapEff:/{print $2}' /proc/self/status)
	if (((0x$eff >> bit) & 1)); then
		host=$("$PROBE" "$@" 2>/dev/null)
		[ "$host" != "$out" ] || fail "control: probe $* on the host, with capability $bit, also gives '$host'"
	fi
}

# The host's mounts where the mount-family case aims (the workspace and below, and the root,
# which a pivot_root would change): make check's other pass mounts tmpfs elsewhere as root
# meanwhile (mcp_faults.sh, prebuild.sh, audit.sh), which must not count against this case.
esc_mountinfo() {
	awk -v ws="$WS" '$5 == "/" || $5 == ws || index($5, ws "/") == 1' /proc/self/mountinfo |
		sed 's/^[0-9]* [0-9]* //' | sort
}

escape_case_kernel_deny_ptrace() {
	esc_probe
	esc_deny EPERM 1 ptrace-traceme
	# attach to a sibling inside: denied, and the sibling is not traced
	local out
	out=$(cr -c './probe sleep 2 & p=$!; ./probe ptrace-attach $p; grep TracerPid /proc/$p/status; kill $p')
	assert_contains "$out" "errno=EPERM"
	assert_contains "$out" $'TracerPid:\t0'
}

escape_case_kernel_deny_process_vm_readv() {
	esc_probe
	# its own pid: an unfiltered call succeeds (same process), a filtered one is EPERM
	assert_eq "$(cr -c 'exec ./probe process-vm-readv $$')" "errno=EPERM"
	assert_eq "$(cr --mode none -c 'exec ./probe process-vm-readv $$')" ok "control"
}

# The writing twin, into its own memory (harmless; unfiltered it works) and into a sibling
# inside the sandbox (which lives on unharmed).
escape_case_kernel_deny_process_vm_writev() {
	esc_probe
	esc_deny EPERM 1 process-vm-writev
	local out
	out=$(cr -c './probe sleep 0.3 & p=$!; ./probe process-vm-writev $p; wait $p; echo "sleeper=$?"')
	assert_eq "$out" $'errno=EPERM\nok\nsleeper=0' "write into a sibling's memory"
	assert_eq "$(cr --mode none -- ./probe process-vm-writev)" ok "control"
}

escape_case_kernel_deny_mount_family() {
	esc_probe
	local before after inside
	before=$(esc_mountinfo)
	[ -n "$before" ] || fail "control: no mount at / or $WS in the host's mount table"
	# targets in the workspace only: were the filter and the namespaces both broken, these
	# would run on the host
	mkdir "$WS/mnt"
	esc_defer "umount -l '$WS/mnt'"
	# No --mode none control for mount and umount: as root, unfiltered, they would really
	# change the host's mount table (and the case compares it). pivot_root to a missing path
	# cannot change anything, so it gets the host control.
	esc_deny EPERM 0 mount-tmpfs "$WS/mnt"
	esc_deny EPERM 0 umount "$WS/mnt"
	esc_deny EPERM 0 umount "$WS"
	esc_deny_hostctl 21 pivot-root # CAP_SYS_ADMIN
	esc_deny EPERM 0 pivot-root "$WS/mnt" "$WS/mnt"
	# the new mount API is in the same family
	inside=$(cr -- /usr/bin/python3 -c '
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
for name, nr, args in (("fsopen", 430, (b"tmpfs", 0)), ("open_tree", 428, (-100, b"mnt", 1)),
                       ("move_mount", 429, (-1, b"", -1, b"", 0)), ("fspick", 433, (-100, b"mnt", 0)),
                       ("mount_setattr", 442, (-100, b"mnt", 0, None, 0))):
    r = libc.syscall(nr, *args)
    print(name, "ok" if r >= 0 else ctypes.get_errno())
' 2>&1)
	assert_eq "$(grep -c ' 1$' <<<"$inside")" 5 "the new mount API (errno 1 = EPERM): $inside"
	# inside, the mount table did not change either
	assert_eq "$(cr -c 'wc -l < /proc/self/mountinfo; ./probe mount-tmpfs mnt >/dev/null; ./probe umount "$PWD" >/dev/null; wc -l < /proc/self/mountinfo' | uniq | wc -l)" 1 "sandbox mount table changed"
	after=$(esc_mountinfo)
	assert_eq "$after" "$before" "host mount table"
}

escape_case_kernel_deny_new_userns() {
	esc_probe
	esc_deny EPERM 1 unshare-user
	esc_deny EPERM 1 clone-newuser
	# clone3 hides its flags from BPF: it must not succeed with CLONE_NEWUSER
	local out
	out=$(cr -- ./probe clone3 10000000)
	[[ $out == errno=* ]] || fail "clone3(CLONE_NEWUSER) inside the sandbox: $out"
	assert_eq "$(cr --mode none -- ./probe clone3 10000000)" ok "control clone3"
	# and the usual tools fail too
	out=$(cr -c 'unshare -Ur true 2>&1 && echo UNSHARED')
	assert_not_contains "$out" UNSHARED
}

escape_case_kernel_deny_setns() {
	esc_probe
	# setns(-1): filtered -> EPERM, unfiltered -> EBADF (so this tells the filter apart from
	# the missing capability)
	local prog='import ctypes; l = ctypes.CDLL(None, use_errno=True); r = l.setns(-1, 0); print("ok" if r == 0 else ctypes.get_errno())'
	assert_eq "$(cr -- /usr/bin/python3 -c "$prog")" 1 "setns(-1) errno"
	assert_eq "$(cr --mode none -- /usr/bin/python3 -c "$prog")" 9 "control setns(-1) errno"
	# joining pid 1's network namespace: were it to work, the probe connects to the host's
	# canary listener from there (the wrapper's evidence counts it)
	local out
	out=$(cr -- ./probe setns-net 127.0.0.1 "$ESC_EV_PORT")
	[[ $out == errno=* ]] || fail "setns into pid 1's net namespace: $out"
}

escape_case_kernel_deny_kexec_and_modules() {
	esc_probe
	local mods
	mods=$(cat /proc/modules 2>/dev/null | wc -l)
	esc_deny_hostctl 22 kexec-load  # CAP_SYS_BOOT; an invalid flag: EINVAL past the check
	esc_deny_hostctl 16 init-module # CAP_SYS_MODULE; an empty image: nothing is loaded
	local prog='import ctypes; l = ctypes.CDLL(None, use_errno=True); l.syscall.restype = ctypes.c_long
for name, nr in (("finit_module", 313), ("delete_module", 176), ("kexec_file_load", 320)):
    r = l.syscall(nr, -1, 0, 0, 0, 0); print(name, ctypes.get_errno())'
	local out
	out=$(cr -- /usr/bin/python3 -c "$prog" 2>&1)
	assert_eq "$(grep -c ' 1$' <<<"$out")" 3 "finit_module/delete_module/kexec_file_load: $out"
	assert_eq "$(cat /proc/modules 2>/dev/null | wc -l)" "$mods" "host module count"
}

escape_case_kernel_deny_bpf() {
	esc_probe
	# control: unfiltered, the kernel rejects the empty map with EINVAL (it checks privilege
	# first where unprivileged BPF is off; then the host run with CAP_BPF is the control)
	esc_deny_hostctl 39 bpf # CAP_BPF
	local none
	none=$(cr --mode none -- ./probe bpf)
	[[ $none == errno=* ]] || fail "control: bpf map create succeeded unfiltered: $none"
}

escape_case_kernel_deny_perf_event_open() {
	esc_probe
	esc_deny EPERM 1 perf-event-open
}

escape_case_kernel_deny_keyrings() {
	esc_probe
	esc_deny EPERM 1 keyctl
	esc_deny EPERM 1 add-key
	# request_key without a callout: unfiltered ENOKEY (searched, not found)
	esc_deny EPERM 1 request-key
}

escape_case_kernel_deny_userfaultfd() {
	esc_probe
	esc_deny EPERM 1 userfaultfd
}

# All three io_uring calls: a ring runs its operations (connect, openat, write...) without
# the filter seeing them, so none may be reachable. enter and register on fd -1: unfiltered the
# kernel says EBADF (or EINVAL), filtered EPERM.
escape_case_kernel_deny_io_uring() {
	esc_probe
	esc_deny EPERM 1 io-uring-setup
	esc_deny EPERM 1 io-uring-enter
	esc_deny EPERM 1 io-uring-register
}

escape_case_kernel_deny_open_by_handle_at() {
	esc_probe
	esc_deny_hostctl 2 open-by-handle-at # CAP_DAC_READ_SEARCH; a bogus handle: ESTALE
	# name_to_handle_at goes with it; unfiltered it works for anyone on most filesystems
	local prog='import ctypes; l = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(8 + 128); ctypes.c_uint.from_buffer(buf).value = 128
mid = ctypes.c_int(); r = l.name_to_handle_at(-100, b"/usr", buf, ctypes.byref(mid), 0)
print("ok" if r == 0 else ctypes.get_errno())'
	assert_eq "$(cr -- /usr/bin/python3 -c "$prog")" 1 "name_to_handle_at errno"
	[ "$(cr --mode none -- /usr/bin/python3 -c "$prog")" != 1 ] || fail "control: name_to_handle_at EPERM unfiltered"
}

escape_case_kernel_deny_personality_flags() {
	esc_probe
	esc_deny EPERM 1 personality 0040000 # ADDR_NO_RANDOMIZE
	esc_deny EPERM 1 personality 0008    # PER_LINUX32
	esc_deny EPERM 1 personality 0400000 # READ_IMPLIES_EXEC
	# high bits above the int the kernel reads must not smuggle a flag past the filter
	local prog='import ctypes; l = ctypes.CDLL(None, use_errno=True); l.syscall.restype = ctypes.c_long
r = l.syscall(ctypes.c_long(135), ctypes.c_ulong(0x100040000)); print("ok" if r >= 0 else ctypes.get_errno())'
	assert_eq "$(cr -- /usr/bin/python3 -c "$prog")" 1 "personality(1<<32 | ADDR_NO_RANDOMIZE)"
	# the query and PER_LINUX stay allowed (programs call them)
	assert_eq "$(cr -- ./probe personality ffffffff)" ok
	assert_eq "$(cr -- ./probe personality 0)" ok
	# evidence inside: ASLR stays on for what runs next
	assert_eq "$(cr -c './probe personality 0040000 >/dev/null; cat /proc/self/personality')" 00000000
}

escape_case_kernel_deny_socket_families() {
	esc_probe
	# netlink (route, audit...), packet, vsock, alg, key, bluetooth, can, xdp
	local fam
	for fam in "16 3" "16 2" "17 3" "17 2" "40 1" "38 5" "15 3" "31 1" "29 3" "44 3"; do
		assert_eq "$(cr -- ./probe socket $fam)" errno=EAFNOSUPPORT "socket($fam)"
	done
	# the allowed families still work
	assert_eq "$(cr -- ./probe socket 1 1)" ok "AF_UNIX"
	assert_eq "$(cr -- ./probe socket 2 2)" ok "AF_INET"
	assert_eq "$(cr -- ./probe socket 10 2)" ok "AF_INET6"
	# a family with high bits set (truncated to netlink by the kernel) is denied too
	local prog='import ctypes; l = ctypes.CDLL(None, use_errno=True); l.syscall.restype = ctypes.c_long
out = []
for fam in (0x100000010, 0xffffffff00000010, 0x10000000a):
    r = l.syscall(ctypes.c_long(41), ctypes.c_ulong(fam), ctypes.c_ulong(3), ctypes.c_ulong(0))
    out.append("ok" if r >= 0 else str(ctypes.get_errno()))
print(" ".join(out))'
	local hb
	hb=$(cr -- /usr/bin/python3 -c "$prog")
	assert_eq "${hb%% *}" 97 "socket(1<<32 | AF_NETLINK) errno (97 = EAFNOSUPPORT): $hb"
	assert_eq "$(cut -d' ' -f2 <<<"$hb")" 97 "socket(-1<<32 | AF_NETLINK): $hb"
	# control: netlink works unfiltered, for anyone
	assert_eq "$(cr --mode none -- ./probe socket 16 3)" ok "control netlink"
	assert_contains "$(cr --mode none -- /usr/bin/python3 -c "$prog")" "ok"
	# the families that stay allowed reach nothing of the host: the canary listeners (TCP on
	# the host's 127.0.0.1, an abstract unix socket) are not there; the wrapper checks that
	# they counted no connection
	local out
	out=$(cr -c "./probe connect-tcp 127.0.0.1 $ESC_EV_PORT; ./probe connect-tcp ::1 $ESC_EV_PORT;
		./probe connect-abstract $ESC_EV_ABSTRACT")
	[ "$(esc_nerr "$out")" -eq 3 ] || fail "an allowed family reached a host canary: $out"
}

# TIOCLINUX with bits above the 32 the kernel reads: the filter compares the low 32 bits, so
# the call is still EPERM. fd 0 is not a terminal here, so unfiltered the kernel says ENOTTY
# (the pty form is test_escape_cli_kernel_tiocsti_denied_under_pty).
escape_case_kernel_deny_tioclinux_highbits() {
	esc_probe
	esc_deny EPERM 1 tioclinux
	esc_deny EPERM 1 tioclinux-highbits
	esc_deny EPERM 1 tiocsti-highbits
}

escape_case_kernel_x32_and_i386_killed() {
	esc_probe
	local out
	out=$(cr -- ./probe x32-getpid)
	[ "$out" != ok ] || fail "an x32 system call went through the filter"
	# the filter's bad-arch action kills an x32 call whatever the kernel's config: an errno
	# here would be the kernel's own ENOSYS (no CONFIG_X86_X32_ABI), which the filter never saw
	assert_eq "$out" signal=SIGSYS "x32-getpid must be killed by the filter"
	# control: without the filter the call is not killed (ok with the x32 ABI, ENOSYS without)
	local x32none
	x32none=$(cr --mode none -- ./probe x32-getpid)
	[[ $x32none == ok || $x32none == errno=ENOSYS ]] || fail "control: x32-getpid without the filter: $x32none"
	out=$(cr -- ./probe i386-getpid)
	# SIGSYS from the filter's bad-arch action (a kernel without IA32 emulation kills with
	# SIGSEGV before any filter; either way the call never runs)
	[[ $out == signal=* ]] || fail "int 0x80 must kill the caller: $out"
	# control: without the filter int 0x80 works where the kernel has IA32 emulation
	local none
	none=$(cr --mode none -- ./probe i386-getpid)
	[ "$none" != signal=SIGSYS ] || fail "control: i386 getpid killed without the filter"
}

escape_case_kernel_caps_nnp_seccomp() {
	esc_probe
	local out
	out=$(cr -c './probe caps; ./probe nnp; ./probe seccomp-mode; ./probe getuid')
	assert_eq "$(sed -n 1p <<<"$out")" "CapEff=0000000000000000 CapBnd=0000000000000000 CapPrm=0000000000000000 CapAmb=0000000000000000 CapInh=0000000000000000"
	assert_eq "$(sed -n 2p <<<"$out")" 1 "NoNewPrivs"
	assert_eq "$(sed -n 3p <<<"$out")" 2 "Seccomp"
	assert_eq "$(sed -n 4p <<<"$out")" "$(id -u)" "uid inside (mapped 1:1)"
	# the capability-gated calls fail with the sets empty, even for uid 0 inside
	out=$(cr -c './probe unshare-net; ./probe mknod-char ./x; chown 1:1 probe 2>&1; echo done')
	assert_contains "$out" "errno=EPERM"
	[ ! -e "$WS/x" ] || fail "mknod worked inside"
	assert_eq "$(stat -c %u:%g "$WS/probe")" "$(id -u):$(id -g)" "chown inside changed the owner"
	# control: the seccomp mode is 0 without the filter
	assert_eq "$(cr --mode none -- ./probe seccomp-mode)" 0 "control seccomp mode"
}

# TIOCSTI through a terminal the sandbox was given as stdin (-i): even after making it its
# controlling terminal, nothing the sandbox injects reaches the terminal's input queue.
# Evidence: the host reads the pty after the run and finds nothing; a control without
# isolation does find the injected bytes.
esc_tiocsti_run() { # MODE -> "child: ... | host read: b'...'"
	cat >"$WS/sti.py" <<'PY'
import ctypes, fcntl, os, termios
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
pid = os.fork()
if pid == 0:
    os.setsid()
    try:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        print("ctty=ok", flush=True)
    except OSError as e:
        print("ctty=%d" % e.errno, flush=True)
    for ch in b"IJ":
        try:
            fcntl.ioctl(0, termios.TIOCSTI, bytes([ch]))
            print("sti=ok", flush=True)
        except OSError as e:
            print("sti=%d" % e.errno, flush=True)
    c = ctypes.c_char(b"K")
    r = libc.syscall(ctypes.c_long(16), ctypes.c_long(0), ctypes.c_ulong(termios.TIOCSTI | (1 << 32)), ctypes.byref(c))
    print("sti-high=%s" % ("ok" if r == 0 else ctypes.get_errno()), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
PY
	python3 - "$CORRAL" "$WS" "$1" <<'PY'
import os, pty, subprocess, sys, tty
corral, ws, mode = sys.argv[1:4]
m, s = pty.openpty()
tty.setraw(s)
p = subprocess.run([corral, "run", "-w", ws, "--mode", mode, "-i", "--", "/bin/sh", "-c",
                    "./probe tiocsti; ./probe tiocsti-highbits; ./probe tioclinux; ./probe tioclinux-highbits; /usr/bin/python3 sti.py"],
                   stdin=s, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20)
os.set_blocking(s, False)
os.set_blocking(m, False)
got = b""
for fd in (s, m):
    try:
        got += os.read(fd, 100)
    except BlockingIOError:
        pass
print("child: " + p.stdout.decode(errors="replace").replace("\n", " ") + "| host read: " + repr(got))
PY
}

# CLI only: -i hands the pty itself to the sandbox; an MCP call's stdin is a string. The
# controlling-terminal form (CVE-2017-5226) runs through both doors below.
test_escape_cli_kernel_tiocsti_denied_under_pty() {
	esc_probe
	local out none
	out=$(esc_tiocsti_run required)
	assert_contains "$out" "| host read: b''"
	assert_not_contains "$out" "sti=ok"
	assert_not_contains "$out" "sti-high=ok"
	# the probe's own calls on fd 0 (the pty) are EPERM: the filter, not ENOTTY
	[[ $out == "child: errno=EPERM errno=EPERM errno=EPERM errno=EPERM "* ]] || fail "probe tiocsti/tiocsti-highbits/tioclinux/tioclinux-highbits: $out"
	assert_contains "$out" "sti=1"
	assert_contains "$out" "sti-high=1"
	# control: with --mode none the same program types into the terminal
	if [ "$(cat /proc/sys/dev/tty/legacy_tiocsti 2>/dev/null || echo 1)" = 1 ]; then
		none=$(esc_tiocsti_run none)
		assert_contains "$none" "sti=ok"
		assert_not_contains "$none" "| host read: b''"
	fi
}

# ---- history: core-dump helpers, the controlling terminal ---------------------------------

# A crash inside must not hand a core to the host: no core file in the workspace or the
# front door's directory, the host's core_pattern unchanged, and the core limit stays at most 1
# inside even when the command raises it (ulimit -c unlimited). (A limit of 1 also keeps the
# kernel from starting a piped core_pattern helper; 0 keeps only a file from being written.)
# Control: on the host, the same crash with the limit raised does dump (where core_pattern is
# a plain file name and the hard limit allows it).
escape_case_kernel_core_dump_contained() {
	esc_probe
	local cp_h out lim m
	m=$(esc_mark)
	cp_h=$(cat /proc/sys/kernel/core_pattern)
	# the crash in /tmp happens in a directory of its own (the host's, were /tmp not private)
	esc_defer "rm -rf '/tmp/$m'"
	out=$(cr -c "ulimit -c unlimited; ulimit -c; ./probe crash SEGV; ./probe crash ABRT;
		mkdir /tmp/$m && cd /tmp/$m && \"\$OLDPWD/probe\" crash SEGV; ls /tmp/$m" 2>&1)
	assert_contains "$out" "signal=SIGSEGV dumped=0"
	assert_contains "$out" "signal=SIGABRT dumped=0"
	assert_not_contains "$out" "dumped=1"
	for lim in $(grep -o 'core=[a-z0-9]*' <<<"$out"); do
		[ "${lim#core=}" = 0 ] || [ "${lim#core=}" = 1 ] || fail "the core limit inside is ${lim#core=}: $out"
	done
	assert_not_contains "$(grep '^unlimited$' <<<"$out")" unlimited
	local cores
	cores=$(find "$WS" "$PWD" "/tmp/$m" -maxdepth 1 -name 'core*' 2>/dev/null)
	[ -z "$cores" ] || fail "core files on the host: $cores"
	assert_eq "$(cat /proc/sys/kernel/core_pattern)" "$cp_h" "host core_pattern"
	# control: the same crash on the host, in a directory of its own
	if [[ $cp_h != "|"* && $cp_h != */* ]] && [ "$(ulimit -Hc)" = unlimited ]; then
		mkdir "$WS/.ctl"
		out=$(cd "$WS/.ctl" && ulimit -c unlimited && "$PROBE" crash SEGV)
		assert_contains "$out" "dumped=1"
		[ -n "$(find "$WS/.ctl" -name 'core*')" ] || fail "control: the host crash left no core file"
		rm -rf "$WS/.ctl"
	fi
}

# CVE-2017-5226 (bubblewrap): the sandboxed program shared the user's controlling terminal and
# typed into it with TIOCSTI. The front door here runs in a session whose controlling terminal
# is a pty (its stdin, stdout and stderr too), like a user's shell; the sandbox tries TIOCSTI
# on /dev/tty and on its descriptors 0-2. Evidence: the host reads the pty's input queue after
# the run and finds nothing. Control: the same program run on the host in that session does
# type into the terminal (where the kernel still allows TIOCSTI).
esc_ctty_run() { # FRONT-DOOR-ARGV... -> "out: ... | host read: b'...'"
	python3 - "$@" <<'PY'
import fcntl, os, pty, select, sys, termios, time, tty
m, s = pty.openpty()
tty.setraw(s)
pid = os.fork()
if pid == 0:
    os.setsid()
    fcntl.ioctl(s, termios.TIOCSCTTY, 0)
    for fd in (0, 1, 2):
        os.dup2(s, fd)
    os.close(m)
    os.close(s)
    os.execvp(sys.argv[1], sys.argv[1:])
out = b""
deadline = time.monotonic() + 40
done = False
while time.monotonic() < deadline:
    r, _, _ = select.select([m], [], [], 0.05)
    if r:
        try:
            out += os.read(m, 65536)
        except OSError:
            pass
    if not done:
        wpid, _ = os.waitpid(pid, os.WNOHANG)
        done = wpid != 0
    elif not r:
        break
os.set_blocking(s, False)
got = b""
try:
    got = os.read(s, 100)
except BlockingIOError:
    pass
print("out: " + out.decode(errors="replace").replace("\r", "").replace("\n", " ") + "| host read: " + repr(got))
PY
}

escape_case_kernel_tiocsti_controlling_terminal() {
	esc_probe
	cat >"$WS/sti_ctty.py" <<'PY'
import errno, fcntl, os, termios
res = []
try:
    fd = os.open("/dev/tty", os.O_RDWR)
    res.append("tty=ok")
except OSError as e:
    fd = None
    res.append("tty=" + errno.errorcode[e.errno])
for t in [0, 1, 2] + ([fd] if fd is not None else []):
    try:
        fcntl.ioctl(t, termios.TIOCSTI, b"I")
        res.append("sti%d=ok" % t)
    except OSError as e:
        res.append("sti%d=%s" % (t, errno.errorcode[e.errno]))
print(" ".join(res), flush=True)
PY
	local out door=()
	via_mcp_door && door=(env VIA_MCP_PREBUILT=$([ "$CORRAL_VIA" = mcp-prebuilt ] && echo 1) python3 "$TESTDIR/escape/via_mcp.py")
	out=$(esc_ctty_run "${door[@]}" "$CORRAL" run -w "$WS" -c './probe tiocsti 0; ./probe tiocsti 1; ./probe tiocsti 2; /usr/bin/python3 sti_ctty.py')
	assert_contains "$out" "| host read: b''"
	assert_not_contains "$out" "=ok"
	assert_contains "$out" "tty=ENXIO"
	[ "$(esc_nerr "$out")" -eq 3 ] || fail "probe tiocsti on fds 0-2: $out"
	# control: on the host, in the same kind of session, the program types into the terminal
	if [ "$(cat /proc/sys/dev/tty/legacy_tiocsti 2>/dev/null || echo 1)" = 1 ]; then
		out=$(cd "$WS" && esc_ctty_run python3 sti_ctty.py)
		assert_contains "$out" "sti0=ok"
		assert_not_contains "$out" "| host read: b''"
	fi
}

# Register the cases for both front doors (esc_register, escape.sh; any sourcing order works).
if declare -F esc_register >/dev/null; then esc_register; fi
