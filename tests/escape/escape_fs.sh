# Escape battery, filesystem group: what the sandbox can see and change of the host's files.
# Helpers: tests/escape/escape.sh.

# Note for every test here: if isolation were broken these commands would run on the host, so
# they only ever write to canaries of their own or create uniquely named paths (removed at exit);
# existing system files are only opened for writing (O_APPEND, no data), never written.
escape_case_fs_write_outside_workspace_denied() {
	esc_probe
	esc_canary
	local m etc_h passwd_h
	m=$(esc_mark)
	etc_h=$(esc_hash /etc/hostname)
	passwd_h=$(esc_hash /etc/passwd)
	esc_defer_host_paths "/etc/$m" "/usr/$m" "/usr/lib/$m" "/$m"
	local out
	out=$(cr -c "./probe open-write '$ESC_CANARY'; echo pwn > '$ESC_CANARY'; echo pwn >> '$ESC_CANARY';
		rm -f '$ESC_CANARY'; touch '$ESC_C/new-$m'; ./probe open-write /etc/$m;
		./probe open-write /usr/$m; ./probe mkdir /usr/lib/$m; ./probe open-write /etc/hostname;
		./probe open-write /etc/passwd; ./probe open-write /usr/bin/env; ./probe open-write /$m" 2>&1)
	assert_canary_unchanged
	[ ! -e "$ESC_C/new-$m" ] || fail "the sandbox created $ESC_C/new-$m on the host"
	local p
	for p in /etc/$m /usr/$m /usr/lib/$m /$m; do
		[ ! -e "$p" ] || fail "the sandbox created $p on the host"
	done
	# the system files it can see are there read-only (opening them for writing fails)
	assert_eq "$(esc_nerr "$out")" 8 "denied opens: $out"
	assert_eq "$(esc_hash /etc/hostname)" "$etc_h" "host /etc/hostname"
	assert_eq "$(esc_hash /etc/passwd)" "$passwd_h" "host /etc/passwd"
	# control: without isolation the same write does reach the canary
	cr --mode none -c "echo pwn >> '$ESC_CANARY'" >/dev/null 2>&1
	[ "$(esc_hash "$ESC_CANARY")" != "$ESC_CANARY_HASH" ] ||
		fail "control: --mode none could not change the canary either; the check proves nothing"
}

escape_case_fs_host_secrets_unreadable() {
	esc_probe
	local out host_home_secret="" hf=""
	# a secret in the host user's home, readable by that user
	if [ -n "${HOME:-}" ] && [ -d "$HOME" ] && [ -w "$HOME" ]; then
		hf=$(mktemp "$HOME/.corral-iso-home.XXXXXX")
		esc_defer "rm -f '$hf'"
		host_home_secret="home-secret-$RANDOM$RANDOM"
		echo "$host_home_secret" >"$hf"
		chmod 0644 "$hf"
	fi
	out=$(cr -c "cat '${hf:-/nonexistent}' /etc/shadow /etc/gshadow /etc/sudoers /etc/../etc/shadow \
		/proc/self/root/etc/shadow /proc/1/root/etc/shadow; ls -A /root /home '${HOME:-/root}' /etc;
		./probe open-read /etc/shadow; ./probe open-read /root; ./probe open-read /home" 2>&1)
	if [ -n "$hf" ]; then
		assert_not_contains "$out" "$host_home_secret"
		local listing
		listing=$(cr -c "ls -A '$HOME' /root /home" 2>/dev/null)
		assert_not_contains "$listing" "$(basename "$hf")"
	fi
	# /etc minus secrets: the allow-list never mounts these, though the host has them
	local f
	for f in shadow gshadow sudoers; do
		if [ -e "/etc/$f" ]; then
			[[ $'\n'$out$'\n' != *$'\n'$f$'\n'* ]] || fail "/etc/$f is listed inside the sandbox"
		fi
	done
	assert_contains "$out" "errno=ENOENT"
	if is_root && [ -s /etc/shadow ]; then
		local first
		first=$(head -1 /etc/shadow)
		assert_not_contains "$out" "$first"
	fi
	# nothing of the host's /home or /root is listed
	local d e
	for d in /home /root; do
		[ -d "$d" ] || continue
		for e in $(ls -A "$d" 2>/dev/null | head -20); do
			[[ $'\n'$out$'\n' != *$'\n'$e$'\n'* ]] || fail "host entry $d/$e is visible in the sandbox"
		done
	done
	# control: without isolation the home secret is readable, so the check can fail
	if [ -n "$hf" ]; then
		assert_contains "$(cr --mode none -c "cat '$hf'" 2>&1)" "$host_home_secret"
	fi
}

# A docker.sock / ssh-agent style socket of the host, outside the workspace and world-writable:
# the sandbox must not reach it. The listener counts connections.
escape_case_fs_host_unix_sockets_absent() {
	esc_probe
	esc_canary
	esc_listen unix "$ESC_C/docker.sock" "$ESC_C/docker.n"
	esc_listen unix "$ESC_C/agent.sock" "$ESC_C/agent.n"
	local out
	out=$(SSH_AUTH_SOCK="$ESC_C/agent.sock" cr -c "./probe connect-unix '$ESC_C/docker.sock';
		./probe connect-unix '$ESC_C/agent.sock'; env; ls -la '$ESC_C' 2>&1")
	assert_not_contains "$out" "ok"$'\n'
	assert_not_contains "$out" SSH_AUTH_SOCK
	assert_eq "$(esc_count "$ESC_C/docker.n")" 0 "connections seen by the host's docker.sock"
	assert_eq "$(esc_count "$ESC_C/agent.n")" 0 "connections seen by the host's agent socket"
	# control: the same probe without isolation is counted
	cr --mode none -- ./probe connect-unix "$ESC_C/docker.sock" >/dev/null
	assert_eq "$(esc_count_at_least "$ESC_C/docker.n" 1)" 1 "control: --mode none connection counted"
}

escape_case_fs_proc1_root_not_host() {
	esc_probe
	esc_canary
	local out
	out=$(cr -c "cat /proc/1/root$ESC_CANARY /proc/self/root$ESC_CANARY; ./probe open-read /proc/1/root$ESC_CANARY;
		./probe open-read /proc/1/root/etc/shadow; ls /proc/1/root/ /proc/self/root/" 2>&1)
	assert_not_contains "$out" "$ESC_SECRET"
	assert_contains "$out" "errno="
	assert_not_contains "$out" "ok"$'\n'
	# the sandbox's root has none of the host's top-level directories beyond the plan
	local d
	for d in boot home root srv opt var; do
		if [ -d "/$d" ]; then
			[[ $'\n'$out$'\n' != *$'\n'$d$'\n'* ]] || fail "host /$d is visible through /proc/*/root"
		fi
	done
	# control: without isolation /proc/self/root is the host's root and leads to the canary
	assert_contains "$(cr --mode none -c "cat '/proc/self/root$ESC_CANARY'" 2>&1)" "$ESC_SECRET"
}

escape_case_fs_proc_shows_only_sandbox_pids() {
	esc_probe
	esc_canary
	local m pids none
	m=$(esc_mark)
	esc_host_sleeper "$m" 30
	pids=$(cr -- ./probe ls-pids)
	[ -n "$pids" ] || fail "probe ls-pids printed nothing"
	[[ " $pids " != *" $ESC_HOST_PID "* ]] || fail "host pid $ESC_HOST_PID is visible in the sandbox: $pids"
	[ "$(wc -w <<<"$pids")" -le 4 ] || fail "the sandbox sees more than its own processes: $pids"
	assert_eq "$(cr -- ./probe open-read "/proc/$ESC_HOST_PID/cmdline")" "errno=ENOENT"
	kill -0 "$ESC_HOST_PID" || fail "the host sleeper died"
	# control: without a pid namespace the host process is visible
	none=$(cr --mode none -- ./probe ls-pids)
	[[ " $none " == *" $ESC_HOST_PID "* ]] || fail "control: host pid not visible even with --mode none"
}

escape_case_fs_symlink_escape() {
	esc_probe
	esc_canary
	local rel etc_h out
	rel="..${ESC_C#/tmp}/canary"
	[[ $WS == /tmp/* ]] || fail "the workspace is not under /tmp; relative link test needs it"
	ln -s "$ESC_CANARY" "$WS/abs-link"
	ln -s "$rel" "$WS/rel-link"
	ln -s "$ESC_C" "$WS/dir-link"
	ln -s /etc/hostname "$WS/hn-link"
	ln -s /etc/shadow "$WS/shadow-link"
	etc_h=$(esc_hash /etc/hostname)
	out=$(cr -c "cat abs-link rel-link shadow-link; echo pwn > abs-link; echo pwn >> rel-link;
		echo pwn > dir-link/new; ./probe open-write abs-link; ./probe open-write rel-link;
		./probe open-write hn-link; ln -sf '$ESC_CANARY' made-link; echo pwn >> made-link" 2>&1)
	assert_not_contains "$out" "$ESC_SECRET"
	assert_canary_unchanged
	[ ! -e "$ESC_C/new" ] || fail "a write through a directory symlink landed on the host"
	assert_eq "$(esc_hash /etc/hostname)" "$etc_h" "host /etc/hostname through hn-link"
	if is_root; then
		assert_not_contains "$out" "$(head -1 /etc/shadow)"
	fi
	# control: the same relative link does reach the host without isolation
	cr --mode none -c 'echo pwn >> rel-link' >/dev/null 2>&1
	[ "$(esc_hash "$ESC_CANARY")" != "$ESC_CANARY_HASH" ] ||
		fail "control: --mode none could not write through the link; the check proves nothing"
}

# Kernel knobs that are not namespaced stay read-only. Writes use the host's current value (so
# a broken sandbox changes nothing); as root the values are restored at exit in any case.
escape_case_fs_proc_sys_writes_denied() {
	esc_probe
	local cp_h host_name out
	cp_h=$(cat /proc/sys/kernel/core_pattern)
	host_name=$(cat /proc/sys/kernel/hostname)
	if is_root; then
		printf '%s\n' "$cp_h" >"$WS/.cp"
		cp "$WS/.cp" "/tmp/$(basename "$WS").cp"
		esc_defer "grep -qxF -f '/tmp/$(basename "$WS").cp' /proc/sys/kernel/core_pattern || cat '/tmp/$(basename "$WS").cp' > /proc/sys/kernel/core_pattern; rm -f '/tmp/$(basename "$WS").cp'"
		esc_defer "[ \"\$(cat /proc/sys/kernel/hostname)\" = '$host_name' ] || echo '$host_name' > /proc/sys/kernel/hostname"
	fi
	printf '%s\n' "$cp_h" >"$WS/cp.txt"
	out=$(cr -c "cat cp.txt > /proc/sys/kernel/core_pattern && echo WROTE-core_pattern;
		./probe open-write /proc/sys/kernel/core_pattern; ./probe open-write /proc/sysrq-trigger;
		./probe open-write /proc/sys/kernel/hostname; ./probe open-write /proc/sys/vm/drop_caches;
		./probe open-write /proc/sys/kernel/sysrq; ./probe open-write /sys/kernel/uevent_helper;
		./probe open-write /proc/sys/kernel/modprobe" 2>&1)
	assert_not_contains "$out" WROTE
	assert_not_contains "$out" "ok"$'\n'
	[ "$(esc_nerr "$out")" -eq 7 ] || fail "expected seven denied opens: $out"
	assert_eq "$(cat /proc/sys/kernel/core_pattern)" "$cp_h" "host core_pattern"
	assert_eq "$(cat /proc/sys/kernel/hostname)" "$host_name" "host hostname"
}

escape_case_fs_mknod_denied() {
	esc_probe
	local out
	local m
	m=$(esc_mark)
	esc_defer_host_paths "/tmp/$m" "/dev/shm/$m" "/dev/$m"
	out=$(cr -c "./probe mknod-char ./nod; ./probe mknod-char /tmp/$m; ./probe mknod-char /dev/shm/$m;
		./probe mknod-char /dev/$m; mknod ./nod2 c 1 3; mknod ./blk b 8 0" 2>&1)
	assert_not_contains "$out" "ok"$'\n'
	[ "$(esc_nerr "$out")" -eq 4 ] || fail "expected four denied mknods: $out"
	local f
	for f in "$WS/nod" "$WS/nod2" "$WS/blk" "/tmp/$m" "/dev/shm/$m" "/dev/$m"; do
		[ ! -e "$f" ] || fail "a device node appeared on the host: $(ls -l "$f")"
	done
}

# The sandbox's /dev is the minimal one of the mount plan (src/sandbox/mount.c): the six
# device nodes bound from the host, a private devpts with the ptmx link, a private /dev/shm
# and the fd/stdin/stdout/stderr links. None of the host's other nodes (kmsg, mem, disks,
# net/tun...) is there, and a pty can still be opened.
escape_case_fs_dev_minimal() {
	local out want d
	out=$(cr -c 'ls -A /dev | tr "\n" " "; echo
		for d in null zero full random urandom tty; do stat -c "%n %F %t:%T" /dev/$d; done
		readlink /dev/ptmx /dev/fd /dev/stdin /dev/stdout /dev/stderr | tr "\n" " "; echo
		stat -f -c "%T" /dev/pts /dev/shm | tr "\n" " "; echo
		/usr/bin/python3 -c "import os, pty; m, s = pty.openpty(); os.write(m, b\"x\n\"); print(os.ttyname(s), os.read(s, 8))"' 2>&1)
	assert_eq "$(sed -n 1p <<<"$out")" "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero " "the sandbox's /dev"
	# the nodes are the host's own devices (bound, not made), all character devices
	want=$(for d in null zero full random urandom tty; do stat -c "%n %F %t:%T" "/dev/$d"; done)
	assert_eq "$(sed -n 2,7p <<<"$out")" "$want" "device nodes"
	assert_eq "$(sed -n 8p <<<"$out")" "pts/ptmx /proc/self/fd /proc/self/fd/0 /proc/self/fd/1 /proc/self/fd/2 " "the /dev links"
	assert_eq "$(sed -n 9p <<<"$out")" "devpts tmpfs " "/dev/pts and /dev/shm file systems"
	# a pty opens, in the sandbox's own devpts, and carries bytes
	[[ $(sed -n 10p <<<"$out") =~ ^/dev/pts/[0-9]+\ b\'x\\n\'$ ]] || fail "no working pty inside: $(sed -n '10,$p' <<<"$out")"
	# control: the host's /dev has more than the sandbox's
	[ "$(ls -A /dev | wc -l)" -gt 13 ] || fail "control: the host's /dev is as small as the sandbox's"
}

# nodev: a device node that exists in the workspace (made on the host by root, with
# /dev/null's numbers) cannot be opened from inside, although the file is there and its mode
# allows it; the host opens it. Only root can make the node: the unprivileged pass has
# nothing to check here (not a skip: CORRAL_MUST_WORK would count it as a failure).
escape_case_fs_workspace_nodev() {
	is_root || return 0
	esc_probe
	mknod -m 0666 "$WS/devnull" c 1 3 || fail "cannot make the device node on the host"
	assert_eq "$("$PROBE" open-read "$WS/devnull")" ok "control: the host opens the node"
	local out
	out=$(cr -c 'ls -l devnull | cut -c1; ./probe open-read devnull; ./probe open-write devnull; (echo x > devnull) 2>/dev/null; echo rc=$?' 2>&1)
	assert_eq "$(sed -n 1p <<<"$out")" c "the node is visible inside"
	assert_eq "$(sed -n 2p <<<"$out")" errno=EACCES "open for reading inside"
	assert_eq "$(sed -n 3p <<<"$out")" errno=EACCES "open for writing inside"
	[[ $(sed -n 4p <<<"$out") =~ ^rc=[1-9] ]] || fail "the shell wrote to the device inside: $out"
	# control: without the mount namespace (mode none) the same open works
	assert_eq "$(cr --mode none -- ./probe open-read devnull)" ok "control: mode none opens the node"
}

# Each mount of the plan lands where the plan puts it, with what the plan binds there: every
# target is a mount point inside, a file target holds its host source's bytes, a directory
# target lists as its source does, a device is its node. The targets are made one directory
# at a time, and the directory of the last one is kept for the next (mount.c, tdir): a target
# made in a directory that a mount covers would be a mount nobody sees, and its path would
# show the covering tree instead.
escape_case_fs_plan_mounts_land_where_the_plan_says() {
	local plan script out
	plan=$("$CORRAL" run -w "$WS" --dry-run --json -- true) || fail "dry run: $plan"
	script=$(python3 - "$plan" <<'PY'
import json, shlex, sys
plan = json.loads(sys.argv[1])
lines = ["cat /proc/self/mountinfo", "echo ---"]
for m in plan["mounts"]:
    t, kind = shlex.quote(m["target"]), m["type"]
    if kind == "file-ro":
        lines.append(f"printf 'F %s ' {t}; md5sum < {t}")
    elif kind == "bind-ro" and m["target"] != plan["workspace"] and \
            m["target"] not in plan.get("protected", []):
        lines.append(f"printf 'D %s ' {t}; ls -A {t} | md5sum")
    elif kind == "device":
        lines.append(f"stat -c 'C %n %t %T %F' {t}")
print("; ".join(lines))
PY
)
	out=$(cr -- sh -c "$script" 2>&1) || fail "the check inside failed: $out"
	python3 - "$plan" "$out" <<'PY' || fail "the sandbox's mounts differ from the plan (above)"
import hashlib, json, os, stat, subprocess, sys
plan, out = json.loads(sys.argv[1]), sys.argv[2]
info, _, checks = out.partition("---\n")
def unescape(p):
    return p.encode().decode("unicode_escape") if "\\" in p else p
points = {unescape(l.split()[4]) for l in info.splitlines() if len(l.split()) > 4}
got = {}
for l in checks.splitlines():
    f = l.split()
    if f[0] in ("F", "D"):
        got[(f[0], f[1])] = f[2]
    elif f[0] == "C":
        got[("C", f[1])] = " ".join(f[2:])
bad, n = [], 0
mounting = ("bind-ro", "bind-rw", "file-ro", "device", "tmpfs", "proc", "devpts", "read-only")
for m in plan["mounts"]:
    t, kind, src = m["target"], m["type"], m.get("source")
    if kind not in mounting:
        continue
    if src and m.get("optional") and not os.path.exists(src):
        continue
    if kind == "read-only" and not os.path.exists("/proc" + t[len("/proc"):]):
        continue
    n += 1
    if t not in points:
        bad.append(f"{t} ({kind}) is not a mount point inside")
    if kind == "file-ro":
        want = hashlib.md5(open(src, "rb").read()).hexdigest()
        if got.get(("F", t)) != want:
            bad.append(f"{t}: content {got.get(('F', t))}, host {src} {want}")
    elif ("D", t) in got:
        ls = subprocess.run(["ls", "-A", src], capture_output=True, check=True).stdout
        want = hashlib.md5(ls).hexdigest()
        if got[("D", t)] != want:
            bad.append(f"{t}: listing {got[('D', t)]}, host {src} {want}")
    elif kind == "device":
        st = os.stat(src)
        want = f"{os.major(st.st_rdev):x} {os.minor(st.st_rdev):x} character special file"
        if got.get(("C", t)) != want:
            bad.append(f"{t}: {got.get(('C', t))}, host {want}")
for p in plan.get("protected", []):
    n += 1
    if p not in points:
        bad.append(f"{p} (protected) is not a mount point inside")
if n < 40 or not any(k[0] == "F" for k in got):
    bad.append(f"only {n} mounts checked, {len(got)} contents: the plan or the check is off")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
}

# Every mount of the sandbox is nosuid, and nodev except the six bound device nodes and the
# private devpts (which hold the only devices the sandbox may open): as the mount plan says.
escape_case_fs_mounts_nosuid_nodev() {
	local out bad
	out=$(cr -- cat /proc/self/mountinfo)
	[ "$(wc -l <<<"$out")" -gt 5 ] || fail "no mountinfo inside: $out"
	bad=$(awk '$6 !~ /(^|,)nosuid(,|$)/ {print $5 " " $6}' <<<"$out")
	[ -z "$bad" ] || fail "mounts without nosuid: $bad"
	bad=$(awk '$6 !~ /(^|,)nodev(,|$)/ && $5 !~ /^\/dev\/(null|zero|full|random|urandom|tty|pts)$/ {print $5 " " $6}' <<<"$out")
	[ -z "$bad" ] || fail "mounts without nodev: $bad"
	# control: the host's mount table has mounts without nosuid (so the check can fail)
	[ -n "$(awk '$6 !~ /(^|,)nosuid(,|$)/' /proc/self/mountinfo)" ] || fail "control: every host mount is nosuid"
}

# A setuid program (even setuid root, when the suite runs as root) gains nothing: the
# workspace is nosuid, no_new_privs is set and the bounding set is empty.
escape_case_fs_setuid_grants_nothing() {
	esc_probe
	local out
	out=$(cr -c 'cp probe sp; ./probe chmod-setuid sp; ./sp caps; ./sp nnp; ./sp seccomp-mode;
		grep " $PWD " /proc/self/mountinfo' 2>&1)
	assert_contains "$out" "CapEff=0000000000000000 CapBnd=0000000000000000 CapPrm=0000000000000000 CapAmb=0000000000000000"
	local lines
	lines=$(grep -v -E '^(ok|errno=[A-Z]+)$' <<<"$out")
	assert_eq "$(sed -n 2p <<<"$lines")" 1 "NoNewPrivs after exec of a setuid file"
	assert_eq "$(sed -n 3p <<<"$lines")" 2 "Seccomp mode after exec of a setuid file"
	assert_contains "$(grep " $WS " <<<"$out")" nosuid
	# host-side: the file really is setuid (so the exec above was a setuid exec)
	[ -u "$WS/sp" ] || [ "$(esc_nerr "$out")" -gt 0 ] || fail "sp is not setuid and chmod did not fail"
}

# A sandbox run by root must not leave setuid/setgid-root programs for the host: the workspace
# is nosuid only inside the sandbox, and any host user who can reach it could run them.
escape_case_fs_no_setuid_root_planted_on_host() {
	local out
	out=$(cr -c 'cp /bin/true suid; chmod 4755 suid; cp /bin/true sgid; chmod 2755 sgid;
		cp /bin/true both; chmod 6755 both; cp /bin/true own; chown 0:0 own; chmod 4755 own;
		ls -ln suid sgid both own' 2>&1)
	local planted
	planted=$(find "$WS" -xdev -type f \( -perm -4000 -o -perm -2000 \) -user 0 2>/dev/null)
	[ -z "$planted" ] || fail "setuid/setgid-root files planted in the host workspace: $(ls -l $planted | tr '\n' ';')"
	if ! is_root; then
		# unprivileged: nothing the sandbox makes can be owned by root
		[ -z "$(find "$WS" -xdev -user 0 2>/dev/null)" ] || fail "root-owned files in the workspace"
	fi
}

escape_case_fs_workspace_writable_visible_on_host() {
	local m
	m=$(esc_mark)
	cr -c "echo $m > out.txt; mkdir -p sub/dir; echo deep > sub/dir/f; echo gone > tmpf; rm tmpf;
		echo a > ren1; mv ren1 ren2" || fail "writing in the workspace failed"
	assert_eq "$(cat "$WS/out.txt")" "$m"
	assert_eq "$(cat "$WS/sub/dir/f")" deep
	[ ! -e "$WS/tmpf" ] || fail "a deletion inside did not reach the host"
	[ -f "$WS/ren2" ] && [ ! -e "$WS/ren1" ] || fail "a rename inside did not reach the host"
	assert_eq "$(stat -c %u "$WS/out.txt")" "$(id -u)" "owner of a file written inside"
}

escape_case_fs_tmp_private() {
	esc_canary
	local m out
	m=$(esc_mark)
	esc_defer_host_paths "/tmp/$m" "/dev/shm/$m"
	out=$(cr -c "echo $m > /tmp/$m; echo $m > /dev/shm/$m; cat /tmp/$m; ls -a /tmp" 2>&1)
	assert_contains "$out" "$m"
	[ ! -e "/tmp/$m" ] || fail "a file written to /tmp inside appeared in host /tmp"
	[ ! -e "/dev/shm/$m" ] || fail "a file written to /dev/shm inside appeared on the host"
	# the host's /tmp is not what the sandbox sees
	assert_not_contains "$out" "$(basename "$ESC_C")"
	# and one run's /tmp is not the next one's
	assert_eq "$(cr -c "cat /tmp/$m 2>/dev/null || echo absent")" absent
}

escape_case_fs_root_readonly() {
	esc_probe
	local m out
	m=$(esc_mark)
	esc_defer_host_paths "/$m" "/usr/bin/$m" "/etc/$m" "/lib/$m" "/dev/$m"
	out=$(cr -c "./probe open-write /$m; ./probe mkdir /$m; ./probe open-write /usr/bin/$m;
		./probe open-write /etc/$m; ./probe mkdir /lib/$m; ./probe open-write /dev/$m;
		./probe open-write /proc/$m" 2>&1)
	assert_not_contains "$out" "ok"$'\n'
	[ "$(esc_nerr "$out")" -eq 7 ] || fail "expected seven denied writes: $out"
	assert_contains "$out" "errno=EROFS"
	local p
	for p in /$m /usr/bin/$m /etc/$m /lib/$m /dev/$m; do
		[ ! -e "$p" ] || fail "$p appeared on the host"
	done
	assert_contains "$(cr -c 'grep " / / " /proc/self/mountinfo')" " / / ro,"
}

# ---- history: runtime binary overwrite, leaked descriptors, symlinked mount targets -------

# CVE-2019-5736 (runc): a process in the container reopened /proc/self/exe (the runtime's own
# binary on the host) for writing and replaced it. Here the sandbox's pid 1 is a fork of the
# front door (its exe is the host's corral binary) and /bin/sh is the host's. The front door
# runs from a private copy of corral, so a broken sandbox could only damage that copy: the
# sandbox tries to open both for writing, directly and by reopening an O_PATH descriptor
# through /proc/self/fd, appending 16 bytes to the copy (0 bytes to the host's /bin/sh).
# Evidence: both hashes are unchanged on the host. Control: on the host the same probe does
# reach a running process's binary through /proc/PID/exe.
escape_case_fs_proc_exe_overwrite() {
	esc_probe
	esc_canary
	local c="$ESC_C/corral" c_h sh_h out
	cp "$CORRAL" "$c"
	c_h=$(esc_hash "$c")
	sh_h=$(esc_hash "$(readlink -f /bin/sh)")
	out=$(CORRAL=$c cr -c './probe open-write /proc/1/exe; ./probe reopen-write /proc/1/exe 16;
		./probe open-read /proc/1/exe; ./probe open-write /proc/self/exe;
		./probe reopen-write /proc/self/exe 0; ./probe reopen-write /proc/$$/exe 0;
		./probe reopen-write /bin/sh 0; ./probe open-write /bin/sh;
		for p in /proc/[0-9]*; do ./probe reopen-write $p/exe 0; done' 2>&1)
	assert_eq "$(esc_hash "$c")" "$c_h" "the corral binary the sandbox ran under (sandbox said: $out)"
	assert_eq "$(esc_hash "$(readlink -f /bin/sh)")" "$sh_h" "the host's /bin/sh"
	assert_not_contains "$out" "ok"$'\n'
	[ "$(esc_nerr "$out")" -ge 10 ] || fail "expected every open to fail: $out"
	# pid 1 is not even readable: the front door's binary is out of reach
	assert_eq "$(sed -n 3p <<<"$out")" "errno=EACCES" "open-read /proc/1/exe"
	# control: the probe's method works where nothing stops it
	esc_host_sleeper "esc-exe-$RANDOM" 30
	assert_eq "$("$PROBE" open-read "/proc/$ESC_HOST_PID/exe")" ok "control: a host process's exe"
}

# CVE-2024-21626 (runc): a descriptor of the host (a cgroup directory) leaked into the
# container, and /proc/self/fd/N led back to the host's filesystem (even as the working
# directory). The front door here starts with three extra descriptors: a host directory
# (/etc), the canary open for appending, and the canary's directory. Inside, only 0, 1 and 2
# exist, nothing reaches them, and a working directory through /proc/self/fd/N is refused.
escape_case_fs_leaked_fds() {
	esc_probe
	esc_canary
	local out rc
	exec 7</etc 8>>"$ESC_CANARY" 9<"$ESC_C"
	out=$(cr -c './probe ls-fds; ./probe openat 7 passwd; ./probe openat 9 canary; ./probe openat 8 .;
		./probe open-read /proc/self/fd/7/passwd; ./probe open-write /proc/self/fd/9/canary;
		./probe open-write /proc/self/fd/8; ls /proc/self/fd/7/ /proc/self/fd/9/;
		cat /proc/self/fd/9/canary; echo pwn >&8; echo pwn >> /proc/self/fd/8;
		ls -l /proc/1/fd/ /proc/self/fd/' 2>&1)
	assert_eq "$(head -1 <<<"$out")" "0 1 2" "the sandbox's descriptors ($out)"
	assert_eq "$(esc_nerr "$out")" 6 "probe calls through the leaked descriptors: $out"
	assert_not_contains "$out" "$ESC_SECRET"
	assert_not_contains "$out" "passwd"$'\n'
	assert_not_contains "$out" "$ESC_C"
	assert_canary_unchanged
	# the runc exploit's form: the working directory through a leaked descriptor
	out=$(cr -C /proc/self/fd/7 -- ./probe ls-fds 2>&1)
	rc=$?
	assert_eq $rc 125 "a working directory through /proc/self/fd/7 ($out)"
	assert_contains "$out" "outside the workspace"
	[ ! -e "$ESC_C/new" ] || fail "something was created in the canary directory"
	# control: the host process holding the descriptors does reach through them
	assert_eq "$("$PROBE" openat 7 passwd)" ok "control: openat through fd 7 on the host"
	assert_contains "$(ls /proc/self/fd/9/)" canary
	exec 7<&- 8>&- 9<&-
}

# Paths corral mounts over (protected paths: read-only inside the writable workspace) that
# are symlinks leading out of the workspace: a read-only bind of the link's target would show
# it, and a bind that follows would protect the wrong file. corral must refuse (naming the
# path) or mount without following; either way the command's write never reaches the host.
escape_case_fs_symlinked_protected_paths() {
	esc_canary
	local out rc p target
	mkdir -p "$WS/.git" "$ESC_C/fake-git/hooks" "$ESC_C/dir"
	echo "$ESC_SECRET" >"$ESC_C/fake-git/config"
	chmod -R a+rwX "$ESC_C"
	local hooks_h cfg_h
	cfg_h=$(esc_hash "$ESC_C/fake-git/config")
	for p in ".git/hooks:$ESC_C/dir" ".mcp.json:$ESC_CANARY" ".bashrc:$ESC_CANARY" \
		".git/config:$ESC_CANARY" ".vscode:$ESC_C/dir" ".envrc:$ESC_CANARY"; do
		target=${p#*:}
		p=${p%%:*}
		ln -s "$target" "$WS/$p"
		out=$(cr -c "cat '$p'; echo pwn >> '$p'; touch '$p/new'; touch ran" 2>&1)
		rc=$?
		if [ -e "$WS/ran" ]; then
			rm -f "$WS/ran"
		else
			[ "$rc" = 125 ] || [ "$rc" = 126 ] || fail "$p -> $target: exit $rc without running: $out"
			assert_contains "$out" "$p"
		fi
		assert_not_contains "$out" "$ESC_SECRET"
		assert_canary_unchanged "through the symlinked protected path $p"
		[ ! -e "$ESC_C/dir/new" ] || fail "a write through $p landed in the host directory"
		rm -f "$WS/$p"
	done
	# the link one level up: .git itself leads out, to a directory with hooks/ and config
	rmdir "$WS/.git"
	ln -s "$ESC_C/fake-git" "$WS/.git"
	out=$(cr -c 'cat .git/config; echo pwn >> .git/config; touch .git/hooks/pre-commit; touch ran' 2>&1)
	assert_not_contains "$out" "$ESC_SECRET"
	assert_eq "$(esc_hash "$ESC_C/fake-git/config")" "$cfg_h" "the host file behind .git/config"
	[ ! -e "$ESC_C/fake-git/hooks/pre-commit" ] || fail "a hook was planted through the .git symlink"
	# nothing corral made for the run (placeholders) is left behind in the host directory
	assert_eq "$(ls -A "$ESC_C/dir")" "" "placeholders left in the link's target"
}

# CVE-2024-42472 class (flatpak): a sandboxed app replaced a directory that a later run bound
# into the sandbox with a symlink, and the later run mounted the link's host target. Here a
# first run plants links in its own workspace; the user's next run names those workspace
# paths with --rw, --ro or --hide. corral must refuse with a clear error or mount without
# following the link: the canary is neither read nor changed, nothing is created next to it.
escape_case_fs_symlinked_bind_targets() {
	esc_canary
	local out rc spec flag path bad=()
	cr -c "ln -s '$ESC_C' cache; ln -s '$ESC_CANARY' notes.txt; ln -s '$ESC_C' secrets;
		ln -s ../../..$ESC_C rel" >/dev/null 2>&1
	[ -L "$WS/cache" ] && [ -L "$WS/notes.txt" ] && [ -L "$WS/rel" ] || fail "the first run could not plant its links"
	for spec in "--rw cache" "--ro cache" "--rw notes.txt" "--ro notes.txt" "--rw rel" \
		"--rw $WS/cache" "--hide secrets"; do
		flag=${spec%% *}
		path=${spec#* }
		out=$(cr "$flag" "$path" -c "cat cache/canary notes.txt rel/canary secrets/canary;
			echo pwn >> cache/canary; echo pwn >> notes.txt; echo pwn >> rel/canary;
			echo pwn >> secrets/canary; touch cache/new rel/new" 2>&1)
		rc=$?
		[[ $out != *"$ESC_SECRET"* ]] || bad+=("$spec: read the canary (exit $rc)")
		if [ "$(esc_hash "$ESC_CANARY")" != "$ESC_CANARY_HASH" ]; then
			bad+=("$spec: wrote the canary (exit $rc)")
			echo "$ESC_SECRET" >"$ESC_CANARY" # reset it for the next form
		fi
		[ ! -e "$ESC_C/new" ] || bad+=("$spec: created a file next to the canary")
		rm -f "$ESC_C/new"
	done
	[ ${#bad[@]} -eq 0 ] || fail "links planted by an earlier run were followed: $(printf '%s; ' "${bad[@]}")"
	# control: named directly (not through the workspace), the same directory is the user's
	# choice and is mounted
	out=$(cr --ro "$ESC_C" -c "cat '$ESC_CANARY'" 2>&1)
	assert_contains "$out" "$ESC_SECRET"
}

# Register the cases for both front doors (esc_register, escape.sh; any sourcing order works).
if declare -F esc_register >/dev/null; then esc_register; fi
