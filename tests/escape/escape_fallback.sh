# Escape battery, fallback ladder: layers made unavailable for real with tests/nolayer.c.
# required fails closed naming the layer; auto says what it skipped and the rest still holds;
# none applies nothing but still enforces limits. Helpers: tests/escape/escape.sh.

# corral run under nolayer LAYERS, in the workspace.
crn() { # LAYERS RUN-ARGS...
	local layers=$1
	shift
	corral_via "$NOLAYER" "$layers" -- "$CORRAL" run -w "$WS" "$@"
}

# required mode with LAYER missing: exit 125, one clear message naming the layer and a fix,
# and the command never ran (host-side: its marker file does not exist).
esc_required_fails() { # LAYER FIX-WORDS...
	local layer=$1 err rc w
	shift
	err=$(crn "$layer" -- sh -c 'touch ran' 2>&1 >/dev/null)
	rc=$?
	assert_eq $rc 125 "exit status with $layer missing (message: $err)"
	assert_contains "$err" "$layer"
	for w in "$@"; do assert_contains "$err" "$w"; done
	[ ! -e "$WS/ran" ] || fail "the command ran although $layer is missing in mode required"
	local json
	json=$(crn "$layer" --json -- sh -c 'touch ran' 2>/dev/null)
	rc=$?
	# The MCP server checks Landlock and seccomp before it serves (it exits 125 with the
	# message above, and there is no result); a layer it finds missing per call is an error
	# result like the CLI's.
	if via_mcp_door && [ -z "$json" ]; then
		assert_eq $rc 125 "the MCP server's exit status with $layer missing"
	else
		assert_eq "$(jget error.step <<<"$json")" "$layer" "error.step"
	fi
	[ ! -e "$WS/ran" ] || fail "the command ran although $layer is missing (--json)"
}

escape_case_fallback_nouserns_required_fails() {
	# the fix names the sysctl to check (the AppArmor branch, userns.c, needs a host with
	# kernel.apparmor_restrict_unprivileged_userns=1 and is not reached here)
	esc_required_fails userns "--mode=auto" "user.max_user_namespaces"
}

escape_case_fallback_nolandlock_required_fails() {
	esc_required_fails landlock "--mode=auto"
}

escape_case_fallback_noseccomp_required_fails() {
	esc_required_fails seccomp "--mode=auto"
}

# --net host shares the host's abstract unix namespace: only Landlock ABI 6 scopes it. Below
# that, required refuses (the command never ran) and auto runs and records the gap.
escape_case_fallback_landlock_abi_below_net_host_needs() {
	local err rc out
	err=$(CORRAL_TEST_LANDLOCK_ABI=5 corral_via "$CORRAL" run -w "$WS" --net host -- sh -c 'touch ran' 2>&1 >/dev/null)
	rc=$?
	assert_eq $rc 125 "exit status with Landlock ABI 5 and --net host (message: $err)"
	assert_contains "$err" "landlock"
	assert_contains "$err" "ABI 6"
	assert_contains "$err" "--net none"
	[ ! -e "$WS/ran" ] || fail "the command ran although the plan needs Landlock ABI 6"
	# a private network needs no scoping: ABI 5 is enough there
	CORRAL_TEST_LANDLOCK_ABI=5 corral_via "$CORRAL" run -w "$WS" -- sh -c 'touch ran' >/dev/null 2>&1
	assert_eq $? 0 "ABI 5 with a network namespace of its own"
	[ -e "$WS/ran" ] || fail "the control run with ABI 5 and --net none did not run"
	rm -f "$WS/ran"
	out=$(CORRAL_TEST_LANDLOCK_ABI=5 corral_via "$CORRAL" run -w "$WS" --mode auto --net host --json -- sh -c 'touch ran' 2>/dev/null)
	assert_eq "$(jget isolation.landlock.applied <<<"$out")" true
	assert_contains "$(jget isolation.landlock.detail <<<"$out")" "abi 5"
	assert_contains "$(jget isolation.landlock.detail <<<"$out")" "NOT scoped"
	[ -e "$WS/ran" ] || fail "mode auto did not run the command"
}

# The no-namespace tier: Landlock, seccomp, caps and rlimits only.
escape_case_fallback_nouserns_auto_landlock_enforcing() {
	esc_probe
	esc_canary
	local out so l
	mkdir "$WS/sub"
	esc_defer_host_paths "/etc/iso-$$" "/usr/iso-$$"
	out=$(crn userns --mode auto --json -c "echo inside > made-in-ws; echo inside > sub/made-in-sub; ./probe open-write '$ESC_CANARY';
		echo pwn >> '$ESC_CANARY'; rm -f '$ESC_CANARY'; touch '$ESC_C/new'; cat '$ESC_CANARY';
		ln -s '$ESC_CANARY' link; echo pwn >> link; cat /etc/shadow; ./probe open-write /etc/iso-$$;
		./probe mkdir /usr/iso-$$; ./probe caps; ./probe nnp; ./probe seccomp-mode" 2>&1)
	assert_eq "$(jget mode <<<"$out")" auto
	for l in userns mountns pidns netns ipcns utsns cgroupns; do
		assert_eq "$(jget "isolation.$l.applied" <<<"$out")" false "isolation.$l.applied"
	done
	for l in landlock seccomp; do
		assert_eq "$(jget "isolation.$l.applied" <<<"$out")" true "isolation.$l.applied"
	done
	# root drops every capability; an unprivileged caller without a user namespace has none
	# to drop and cannot empty its bounding set: the record says so
	if is_root; then
		assert_eq "$(jget isolation.caps.applied <<<"$out")" true "isolation.caps.applied"
	else
		assert_contains "$(jget isolation.caps.detail <<<"$out")" "every capability the caller had let go"
		# and the default process limit does not hold without a user namespace (it would
		# count every process of this user): the record must not claim it does
		assert_contains "$(jget isolation.cgroup.detail <<<"$out")" "NO process limit"
		assert_not_contains "$(jget isolation.rlimits.detail <<<"$out")" "nproc"
	fi
	assert_eq "$(cat "$WS/sub/made-in-sub" 2>&1)" inside "a subdirectory of the workspace is writable in the no-namespace tier"
	assert_eq "$(cat "$WS/made-in-ws" 2>&1)" inside "the workspace root is writable in the no-namespace tier ($(jget stderr <<<"$out" 2>/dev/null | head -3))"
	assert_canary_unchanged "no-namespace tier"
	[ ! -e "$ESC_C/new" ] || fail "the sandbox created a file next to the canary"
	[ ! -e "/etc/iso-$$" ] && [ ! -e "/usr/iso-$$" ] || fail "the sandbox wrote into /etc or /usr"
	so=$(jget stdout <<<"$out")
	assert_not_contains "$so" "$ESC_SECRET"
	is_root && assert_not_contains "$so" "$(head -1 /etc/shadow)"
	# no capability to use (an unprivileged caller cannot empty its bounding set without a user
	# namespace, and no_new_privs keeps exec from using it)
	assert_contains "$so" "CapEff=0000000000000000"
	assert_contains "$so" "CapPrm=0000000000000000 CapAmb=0000000000000000 CapInh=0000000000000000"
	assert_contains "$so" $'\n1\n2'
	assert_eq "$(esc_nerr "$so")" 3 "denied opens in the no-namespace tier: $so"
	# control: the same program in mode none does change the canary
	cr --mode none -c "echo pwn >> '$ESC_CANARY'" >/dev/null 2>&1
	[ "$(esc_hash "$ESC_CANARY")" != "$ESC_CANARY_HASH" ] || fail "control: mode none could not write the canary"
}

# Without a mount namespace, host sockets outside the workspace are still there; none of them
# may be reachable: a docker.sock-style pathname socket, an abstract socket, TCP on loopback.
escape_case_fallback_nouserns_auto_host_sockets_unreachable() {
	esc_probe
	esc_canary
	esc_listen unix "$ESC_C/docker.sock" "$ESC_C/unix"
	esc_tcp_canary "$ESC_C/tcp"
	local name="corral-iso-abs-$RANDOM$RANDOM" out
	esc_abstract_canary "$name" "$ESC_C/abs"
	out=$(crn userns --mode auto -c "./probe connect-unix '$ESC_C/docker.sock'; ./probe connect-abstract $name;
		./probe connect-tcp 127.0.0.1 $ESC_PORT; ./probe connect-mptcp 127.0.0.1 $ESC_PORT;
		./probe connect-mptcp-hi 127.0.0.1 $ESC_PORT; ./probe connect-smc 127.0.0.1 $ESC_PORT;
		./probe connect-tfo 127.0.0.1 $ESC_PORT" 2>&1)
	# MPTCP, SMC and TCP Fast Open, which Landlock's TCP rules do not see, refused by seccomp
	assert_contains "$out" $'errno=EPROTONOSUPPORT\nerrno=EPROTONOSUPPORT\nerrno=EPROTONOSUPPORT\nerrno=EOPNOTSUPP'
	assert_eq "$(esc_count "$ESC_C/tcp")" 0 "TCP canary (no-namespace tier; TCP, MPTCP, SMC, Fast Open)"
	assert_eq "$(esc_count "$ESC_C/abs")" 0 "abstract canary (no-namespace tier)"
	assert_eq "$(esc_count "$ESC_C/unix")" 0 "host docker.sock reached from the no-namespace tier ($(tr '\n' ' ' <<<"$out"))"
}

# Without a mount namespace /dev/pts and /dev/shm are the host's: the sandbox must not open
# another terminal of the same user (keystrokes) or the host's shared memory.
escape_case_fallback_nouserns_auto_host_devices_unreachable() {
	esc_probe
	esc_canary
	local m out
	m=$(esc_mark)
	echo "shm-$ESC_SECRET" >"/dev/shm/$m"
	chmod 0666 "/dev/shm/$m"
	esc_defer "rm -f '/dev/shm/$m' '/dev/shm/$m-new'"
	python3 - "$ESC_C/pty" >/dev/null 2>&1 <<'PY' &
import os, pty, sys, time
m, s = pty.openpty()
open(sys.argv[1], "w").write(os.ttyname(s))
time.sleep(20)
PY
	esc_defer "kill $!"
	local i
	for i in $(seq 1 100); do [ -s "$ESC_C/pty" ] && break; sleep 0.02; done
	local pts
	pts=$(cat "$ESC_C/pty")
	[ -c "$pts" ] || fail "no host pty to test with"
	out=$(crn userns --mode auto -c "./probe open-read $pts; ./probe open-write $pts; cat /dev/shm/$m;
		./probe open-write /dev/shm/$m; touch /dev/shm/$m-new" 2>&1)
	assert_not_contains "$out" "$ESC_SECRET"
	[ ! -e "/dev/shm/$m-new" ] || fail "the no-namespace tier created a file in the host's /dev/shm"
	assert_not_contains "$out" "ok"$'\n'
}

# CLI only (the supervisor is `corral run`); the MCP twins kill the server and the client.
test_escape_cli_fallback_nouserns_auto_sigkill_supervisor_leaves_nothing() {
	ESC_ARGS="--mode auto" esc_sigkill_front_door cli "$(esc_mark)" "$NOLAYER" userns --
}

test_escape_mcp_fallback_nouserns_auto_sigkill_server_leaves_nothing() {
	ESC_ARGS="--mode auto" esc_sigkill_front_door server "$(esc_mark)" "$NOLAYER" userns --
}

test_escape_mcp_fallback_nouserns_auto_client_killed_leaves_nothing() {
	ESC_ARGS="--mode auto" esc_sigkill_front_door client "$(esc_mark)" "$NOLAYER" userns --
}

escape_case_fallback_nouserns_auto_timeout_kills_daemons() {
	local m
	m=$(esc_mark)
	cp /bin/sleep "$WS/$m"
	crn userns --mode auto -t 3 --kill-after 0.2 -c "setsid ./$m 300 & (setsid ./$m 301 &); exec ./$m 302" >/dev/null 2>&1 &
	local bg=$!
	esc_defer "kill -9 \$(pgrep -f -- '^\./$m 30') $bg"
	# control: the three daemons really ran
	await_procs "^\./$m 30[0-2]" 3 || fail "control: the sandbox did not start its three daemons: $(pgrep -af -- "$m")"
	wait "$bg"
	assert_eq $? 124 "exit status on timeout"
	assert_no_survivor "$m"
}

escape_case_fallback_nouserns_auto_supervisor_protected() {
	ESC_PRE=("$NOLAYER" userns --)
	esc_attack_supervisor --mode auto
}

escape_case_fallback_nolandlock_auto() {
	esc_probe
	esc_canary
	local out l
	out=$(crn landlock --mode auto --json -c "echo pwn >> '$ESC_CANARY'; echo ok > in-ws; ./probe keyctl")
	assert_eq "$(jget isolation.landlock.applied <<<"$out")" false
	for l in userns mountns pidns netns seccomp caps; do
		assert_eq "$(jget "isolation.$l.applied" <<<"$out")" true "isolation.$l.applied"
	done
	# the mount namespace and seccomp still hold
	assert_canary_unchanged "without Landlock"
	assert_eq "$(cat "$WS/in-ws")" ok
	assert_contains "$(jget stdout <<<"$out")" "errno=EPERM"
}

escape_case_fallback_noseccomp_auto() {
	esc_probe
	esc_canary
	local out l so
	mkdir "$WS/mnt"
	esc_defer "umount -l '$WS/mnt'"
	out=$(crn seccomp --mode auto --json -c "echo pwn >> '$ESC_CANARY'; ./probe caps; ./probe nnp; ./probe mount-tmpfs mnt")
	assert_eq "$(jget isolation.seccomp.applied <<<"$out")" false
	for l in userns mountns pidns netns landlock caps; do
		assert_eq "$(jget "isolation.$l.applied" <<<"$out")" true "isolation.$l.applied"
	done
	assert_canary_unchanged "without seccomp"
	so=$(jget stdout <<<"$out")
	assert_contains "$so" "CapEff=0000000000000000"
	assert_contains "$so" $'\n1\n'
	assert_contains "$so" "errno=EPERM" # mount: no capability left, even unfiltered
}

escape_case_fallback_mode_none_records_nothing_enforces_timeout() {
	local m out l start end
	m=$(esc_mark)
	cp /bin/sleep "$WS/$m"
	start=$(date +%s%N)
	cr --mode none --json -t 3 --kill-after 0.2 -c "(setsid ./$m 300 &); exec ./$m 301" >"$WS/.out" 2>/dev/null &
	local bg=$!
	esc_defer "kill -9 \$(pgrep -f -- '^\./$m 30') $bg"
	# control: both sleepers really ran
	await_procs "^\./$m 30[01]" 2 || fail "control: the command did not start its two sleepers: $(pgrep -af -- "$m")"
	wait "$bg"
	end=$(date +%s%N)
	out=$(cat "$WS/.out")
	assert_eq "$(jget mode <<<"$out")" none
	# caps are left out: root's are dropped even here, and the record says so (checked against
	# the kernel's view in escape_case_record_caps_claim_matches_reality)
	for l in userns mountns pidns netns ipcns utsns cgroupns landlock seccomp cgroup; do
		assert_eq "$(jget "isolation.$l.applied" <<<"$out")" false "isolation.$l.applied in mode none"
	done
	assert_eq "$(jget timed_out <<<"$out")" true
	assert_eq "$(jget limit <<<"$out")" timeout
	[ $(((end - start) / 1000000)) -lt 7000 ] || fail "the timeout took $(((end - start) / 1000000)) ms"
	assert_no_survivor "$m"
}

# CLI only: `corral check` is not a run.
test_escape_cli_fallback_ambient_caps_let_go() {
	# An unprivileged caller given capabilities by a wrapper (setpriv, a systemd unit's
	# AmbientCapabilities) in the no-namespace tier and in mode none: the command must hold
	# none of them (CAP_NET_RAW would open raw sockets past Landlock's TCP rules). Read on
	# the host from /proc of the command itself. Setting ambient capabilities needs root.
	is_root || return 0
	command -v setpriv >/dev/null || skip "needs setpriv (util-linux)"
	local how mark pid i st
	for how in auto none; do
		mark="corral-amb-$how-$RANDOM$RANDOM"
		setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps +net_raw,+dac_read_search \
			--ambient-caps +net_raw,+dac_read_search \
			"$NOLAYER" userns -- "$CORRAL" run -w /tmp --audit off --mode "$how" -t 20 -- \
			bash -c "exec -a $mark sleep 20" >/dev/null 2>&1 &
		pid=
		for i in $(seq 1 200); do
			pid=$(pgrep -f -- "^$mark") && break
			sleep 0.02
		done
		[ -n "$pid" ] || fail "the command did not start ($how)"
		st=$(grep -E '^Cap(Eff|Prm|Amb|Inh)' "/proc/$pid/status" | tr -d ':' | tr -s '\t\n' '= ')
		pkill -f -- "^$mark"
		wait
		assert_eq "$st" "CapInh=0000000000000000 CapPrm=0000000000000000 CapEff=0000000000000000 CapAmb=0000000000000000 " "capabilities of the command ($how)"
	done
}

test_escape_cli_fallback_check_json_lists_layers() {
	local out l
	out=$("$CORRAL" check --json)
	for l in $ESC_LAYERS; do
		[ "$l" = caps ] && continue
		python3 -c 'import json,sys
d = json.loads(sys.argv[1]); l = [x for x in d["layers"] if x["name"] == sys.argv[2]]
sys.exit(0 if len(l) == 1 and l[0]["available"] is True else 1)' "$out" "$l" ||
			fail "corral check: layer $l missing or unavailable: $out"
	done
	# with a layer really gone, check says so and names a fix
	for l in userns landlock seccomp; do
		out=$("$NOLAYER" "$l" -- "$CORRAL" check --json)
		python3 -c 'import json,sys
d = json.loads(sys.argv[1]); l = [x for x in d["layers"] if x["name"] == sys.argv[2]]
sys.exit(0 if len(l) == 1 and l[0]["available"] is False and l[0]["fix"] else 1)' "$out" "$l" ||
			fail "corral check under nolayer $l: $out"
	done
}

# clone3 refused with ENOSYS while clone works (a kernel before 5.3, or an older container
# runtime's seccomp profile): the launch falls back to clone and the run still gets every
# namespace, in mode required, recorded and real (the namespace ids inside differ from the
# host's). Control: under the same filter clone3 really fails, and clone does not.
escape_case_fallback_noclone3_namespaces_kept() {
	esc_probe
	assert_eq "$("$NOLAYER" clone3 -- "$WS/probe" clone3)" errno=ENOSYS "control: clone3 under nolayer clone3"
	assert_eq "$("$NOLAYER" clone3 -- "$WS/probe" clone-newuser)" ok "control: clone with CLONE_NEWUSER under nolayer clone3"
	local out l ns list="user mnt pid net ipc uts cgroup" host inside h i
	host=$(for ns in $list; do readlink "/proc/self/ns/$ns"; done)
	out=$(crn clone3 --json -c "for ns in $list; do readlink /proc/self/ns/\$ns; done")
	assert_eq "$(jget mode <<<"$out")" required
	assert_eq "$(jget exit_code <<<"$out")" 0 "$(jget error <<<"$out")"
	for l in $ESC_LAYERS; do
		assert_eq "$(jget "isolation.$l.applied" <<<"$out")" true "isolation.$l.applied without clone3"
	done
	inside=$(jget stdout <<<"$out")
	[ "$(grep -c ':\[' <<<"$inside")" -eq 7 ] || fail "could not read the namespace ids inside: $inside"
	for ns in $list; do
		h=$(grep "^$ns:" <<<"$host")
		i=$(grep "^$ns:" <<<"$inside")
		[ "$h" != "$i" ] || fail "without clone3 the sandbox shares the host's $ns namespace ($i)"
	done
}

# CLI only: `corral check` is not a run. Its last line never says "all layers available"
# after a NO line; it names what is missing and what that means for the modes.
test_escape_cli_fallback_check_summary_names_missing() {
	local out last l
	out=$("$CORRAL" check)
	last=$(tail -1 <<<"$out")
	if grep -qE '^[a-z]+ +NO ' <<<"$out"; then
		assert_not_contains "$last" "all layers available"
		for l in $(awk '$2 == "NO" {print $1}' <<<"$out"); do assert_contains "$last" "$l"; done
	else
		assert_eq "$last" "all layers available: --mode required will work"
	fi
	for l in userns landlock seccomp; do
		out=$("$NOLAYER" "$l" -- "$CORRAL" check)
		last=$(tail -1 <<<"$out")
		assert_contains "$last" "missing: "
		assert_contains "$last" "$l"
		assert_contains "$last" "--mode required fails"
		assert_not_contains "$last" "all layers available"
		assert_not_contains "$last" "all required layers available"
	done
	# cgroup alone missing: required still works (limits fall back to rlimits), and says so
	out=$(CORRAL_TEST_DISABLE=cgroup "$CORRAL" check)
	if grep -qE '^cgroup +NO ' <<<"$out" && ! grep -vE '^cgroup' <<<"$out" | grep -qE '^[a-z]+ +NO '; then
		last=$(tail -1 <<<"$out")
		assert_contains "$last" "all required layers available"
		assert_contains "$last" "missing: cgroup"
		assert_contains "$last" "rlimits"
	fi
}

# CLI only: the test hooks only ever weaken a run, so a process the kernel runs with
# AT_SECURE ignores them (here a setgid copy of corral: egid != gid). Control: the same
# hooks on the ordinary binary take effect. --dry-run shows the plan without running.
# Making a setgid copy for another group needs root: the unprivileged pass has nothing to
# check here (not a skip: CORRAL_MUST_WORK would count it as a failure).
test_escape_cli_fallback_test_hooks_ignored_when_secure() {
	is_root || return 0
	local sg="$WS/corral-sgid" out abi
	[ "$(id -g)" != 65534 ] || fail "the test's group is 65534: pick another group for the setgid copy"
	cp "$CORRAL" "$sg"
	chgrp 65534 "$sg" && chmod 2755 "$sg" || fail "cannot make the setgid copy"
	findmnt -no OPTIONS -T "$WS" 2>/dev/null | grep -qw nosuid &&
		fail "the workspace's file system is nosuid: no AT_SECURE exec there (use a TMPDIR without nosuid)"
	abi=$("$CORRAL" check | sed -nE 's/^landlock +yes +abi ([0-9]+).*/\1/p')
	[ -n "$abi" ] || fail "no Landlock ABI in corral check"
	# control: the hooks work on the ordinary binary
	out=$(CORRAL_TEST_DISABLE=userns "$CORRAL" run -w "$WS" --dry-run -- true 2>&1)
	assert_contains "$out" "disabled by CORRAL_TEST_DISABLE"
	if [ "$abi" -gt 1 ]; then
		out=$(CORRAL_TEST_LANDLOCK_ABI=$((abi - 1)) "$CORRAL" run -w "$WS" --dry-run -- true 2>&1)
		assert_contains "$(grep '^ *landlock ' <<<"$out")" "abi $((abi - 1))" "control: the ABI cap on the ordinary binary"
	fi
	# AT_SECURE: both ignored
	out=$(CORRAL_TEST_DISABLE=userns,landlock,seccomp "$sg" run -w "$WS" --dry-run -- true 2>&1)
	assert_not_contains "$out" "CORRAL_TEST_DISABLE"
	assert_not_contains "$out" "error:"
	assert_contains "$out" "userns     on"
	assert_contains "$out" "landlock   on"
	assert_contains "$out" "seccomp    on"
	out=$(CORRAL_TEST_LANDLOCK_ABI=0 "$sg" run -w "$WS" --dry-run -- true 2>&1)
	assert_contains "$(grep '^ *landlock ' <<<"$out")" "abi $abi" "the ABI cap in an AT_SECURE process"
}

# The init's helper for the network namespace cannot start (a clone that shares the init's
# memory refused, as a tool like valgrind refuses it): the init makes the namespace itself,
# and the sandbox is the same: its own fresh namespace, owned by its user namespace, with
# its loopback up, the host's canary listener unreached, and the command pid 2.
escape_case_fallback_net_helper_refused_init_makes_it() {
	esc_probe
	esc_canary
	esc_tcp_canary "$ESC_C/tcp"
	esc_nsinfo_py
	local out a host_net
	host_net=$(stat -L -c %i /proc/self/ns/net)
	# the filter does refuse the helper's clone (glibc's clone(), as corral makes it)
	assert_eq "$("$NOLAYER" nethelper -- "$PROBE" clone-vm)" "errno=EPERM" "nolayer nethelper, the helper's clone"
	assert_eq "$("$PROBE" clone-vm)" ok "control: the same clone without the filter"
	out=$(CORRAL_TEST_NET_HELPER=always crn nethelper --json -c "/usr/bin/python3 nsinfo.py; ./probe connect-tcp 127.0.0.1 $ESC_PORT;
		/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(1); socket.create_connection(s.getsockname()); print(\"lo ok\")'" 2>/dev/null)
	assert_eq "$(jget exit_code <<<"$out")" 0 "the run ($out)"
	assert_eq "$(jget isolation.netns.applied <<<"$out")" true
	read -r -a a <<<"$(jget stdout <<<"$out" | head -1)"
	[ "${#a[@]}" -ge 5 ] || fail "nsinfo: $out"
	[ "${a[0]}" != "$host_net" ] || fail "the sandbox is in the host's network namespace ($out)"
	assert_eq "${a[1]}" "${a[2]}" "the network namespace's owner is the sandbox's user namespace"
	assert_eq "${a[4]}" "1,2,3" "the sandbox's processes: init, the shell, python"
	assert_contains "$(jget stdout <<<"$out")" "errno="
	assert_contains "$(jget stdout <<<"$out")" "lo ok"
	assert_eq "$(esc_count "$ESC_C/tcp")" 0 "connections seen by the host's canary"
	assert_canary_unchanged "network helper refused"
}

# A host that refuses one namespace while user namespaces work (a container runtime's seccomp
# profile, user.max_net_namespaces=0): required names it and runs nothing; auto goes on
# without that namespace and keeps the others, rather than dropping to the tier without
# namespaces. Host-side: the mount namespace still holds a protected path read-only (the
# no-namespace tier cannot), the host process and the canary file are untouched, and
# Landlock keeps TCP off the host's loopback (the canary listener saw nothing).
escape_case_fallback_netns_refused_auto_keeps_the_rest() {
	esc_probe
	esc_canary
	esc_tcp_canary "$ESC_C/tcp"
	local out err rc l cfg_h
	esc_host_sleeper "corraliso$RANDOM$RANDOM" 30
	mkdir -p "$WS/.git/hooks"
	echo "[core]" >"$WS/.git/config"
	cfg_h=$(esc_hash "$WS/.git/config")
	err=$(crn netns -- sh -c 'touch ran' 2>&1 >/dev/null)
	rc=$?
	assert_eq $rc 125 "required, with the network namespace refused ($err)"
	assert_contains "$err" "the network namespace"
	[ ! -e "$WS/ran" ] || fail "required ran the command without its network namespace"
	out=$(crn netns --mode auto --json -c "echo pwn >> .git/config; touch .git/hooks/pre-commit;
		./probe connect-tcp 127.0.0.1 $ESC_PORT; ./probe connect-mptcp 127.0.0.1 $ESC_PORT;
		./probe connect-mptcp-hi 127.0.0.1 $ESC_PORT; ./probe connect-smc 127.0.0.1 $ESC_PORT;
		./probe connect-tfo 127.0.0.1 $ESC_PORT; kill -9 $ESC_HOST_PID;
		echo pwn >> '$ESC_CANARY'; cat /proc/1/comm; touch ran" 2>/dev/null)
	assert_eq "$(jget mode <<<"$out")" auto
	[ -e "$WS/ran" ] || fail "mode auto did not run the command: $out"
	for l in userns mountns pidns ipcns utsns cgroupns landlock seccomp; do
		assert_eq "$(jget "isolation.$l.applied" <<<"$out")" true "isolation.$l.applied"
	done
	assert_eq "$(jget isolation.netns.applied <<<"$out")" false
	assert_contains "$(jget isolation.netns.detail <<<"$out")" "host network shared"
	assert_contains "$(jget isolation.netns.detail <<<"$out")" "refused by the host (Operation not permitted; mode auto)"
	assert_contains "$(jget isolation.netns.detail <<<"$out")" "UDP and other protocols NOT contained"
	assert_contains "$(jget isolation.landlock.detail <<<"$out")" "tcp denied"
	# the host's abstract unix names are shared now: Landlock ABI 6 stops connecting to them,
	# not binding one a host service has not taken; seccomp denies unix sockets
	assert_contains "$(jget isolation.seccomp.detail <<<"$out")" "unix sockets denied"
	# TCP refused by Landlock; MPTCP, SMC and Fast Open (which Landlock does not see) by
	# seccomp; and pid 1 is the sandbox's own init
	assert_eq "$(jget stdout <<<"$out")" $'errno=EACCES\nerrno=EPROTONOSUPPORT\nerrno=EPROTONOSUPPORT\nerrno=EPROTONOSUPPORT\nerrno=EOPNOTSUPP\ncorral-init' "the probes' answers, then pid 1's name"
	assert_eq "$(esc_hash "$WS/.git/config")" "$cfg_h" "a protected path with the network namespace refused"
	[ ! -e "$WS/.git/hooks/pre-commit" ] || fail "a hook was planted with the network namespace refused"
	assert_eq "$(esc_count "$ESC_C/tcp")" 0 "TCP canary with the network namespace refused"
	kill -0 "$ESC_HOST_PID" 2>/dev/null || fail "the sandbox killed a host process"
	assert_canary_unchanged "network namespace refused"
	# control: the MPTCP probe, and the Fast Open one where the host lets clients use it,
	# do reach the listener where nothing stops them (mode none)
	local n=0
	if [ "$(cat /proc/sys/net/mptcp/enabled 2>/dev/null)" = 1 ]; then
		cr --mode none -c "./probe connect-mptcp 127.0.0.1 $ESC_PORT" >/dev/null 2>&1
		n=$((n + 1))
		assert_eq "$(esc_count_at_least "$ESC_C/tcp" $n)" $n "control: MPTCP from mode none"
	fi
	if [ $(($(cat /proc/sys/net/ipv4/tcp_fastopen 2>/dev/null || echo 0) & 1)) = 1 ]; then
		cr --mode none -c "./probe connect-tfo 127.0.0.1 $ESC_PORT" >/dev/null 2>&1
		n=$((n + 1))
		assert_eq "$(esc_count_at_least "$ESC_C/tcp" $n)" $n "control: TCP Fast Open from mode none"
	fi
	# the host's abstract unix sockets, which the sandbox now shares: seccomp denies unix
	# sockets, as in the tier without namespaces, so none can be reached (here at Landlock
	# ABI 5, where nothing else would stop it) nor a host name bound
	local name="corral-iso-abs-$RANDOM$RANDOM" free="corral-iso-free-$RANDOM$RANDOM"
	esc_abstract_canary "$name" "$ESC_C/abs"
	# bind a free abstract name and hold it for 3 s; the host watches /proc/net/unix
	local bind="python3 -c 'import socket, time; s = socket.socket(socket.AF_UNIX); s.bind(b\"\\0$free\"); s.listen(1); time.sleep(3)'"
	watch_abstract() { # OUT: whether @$free is bound on the host within 4 s
		(for _ in $(seq 1 80); do
			grep -q "@$free\$" /proc/net/unix && { echo seen >"$1"; exit 0; }
			sleep 0.05
		done; echo unseen >"$1") &
		WATCH_PID=$!
	}
	out=$(CORRAL_TEST_LANDLOCK_ABI=5 crn netns --mode auto --json -- ./probe connect-abstract "$name" 2>/dev/null)
	assert_eq "$(jget isolation.mountns.applied <<<"$out")" true "ABI 5, network namespace refused"
	assert_contains "$(jget isolation.seccomp.detail <<<"$out")" "unix sockets denied"
	assert_eq "$(jget stdout <<<"$out")" errno=EPERM "the probe's answer at ABI 5"
	assert_eq "$(esc_count "$ESC_C/abs")" 0 "abstract canary at Landlock ABI 5 without a network namespace"
	# at the kernel's own ABI (scoped: connecting out is stopped anyway), binding a free name
	watch_abstract "$ESC_C/bound"
	out=$(crn netns --mode auto -c "$bind" 2>&1)
	wait "$WATCH_PID" # (a bare wait would wait for the canary listeners too)
	assert_eq "$(cat "$ESC_C/bound")" unseen "a host abstract name bound from the sandbox"
	assert_contains "$out" "PermissionError" "the bind was refused at socket(), not failed otherwise"
	# control: in mode none the same bind shows on the host
	watch_abstract "$ESC_C/bound"
	cr --mode none -c "$bind" >/dev/null 2>&1
	wait "$WATCH_PID"
	assert_eq "$(cat "$ESC_C/bound")" seen "control: the bind from mode none"
	# IPC and UTS refused: each recorded, the network namespace kept
	rm -f "$WS/ran"
	out=$(crn ipcns,utsns --mode auto --json -- sh -c 'hostname; touch ran' 2>/dev/null)
	[ -e "$WS/ran" ] || fail "mode auto did not run the command: $out"
	assert_eq "$(jget isolation.netns.applied <<<"$out")" true
	assert_eq "$(jget isolation.mountns.applied <<<"$out")" true
	for l in ipcns utsns; do
		assert_eq "$(jget "isolation.$l.applied" <<<"$out")" false "isolation.$l.applied"
		assert_contains "$(jget "isolation.$l.detail" <<<"$out")" "refused by the host"
	done
	assert_eq "$(jget stdout <<<"$out")" "$(hostname)" "the host's name without a UTS namespace"
	assert_contains "$(jget isolation.ipcns.detail <<<"$out")" "System V objects and POSIX message queues that the caller's user may use are reachable"
	# the cgroup namespace refused: as root on cgroup v1 the child makes it late, after
	# joining the run's cgroup, and reports the refusal; unprivileged it is refused at the
	# clone. Either way: required names it, auto records it and keeps the rest.
	rm -f "$WS/ran"
	err=$(crn cgroupns -- sh -c 'touch ran' 2>&1 >/dev/null)
	rc=$?
	assert_eq $rc 125 "required, with the cgroup namespace refused ($err)"
	assert_contains "$err" "the cgroup namespace"
	[ ! -e "$WS/ran" ] || fail "required ran the command without its cgroup namespace"
	out=$(crn cgroupns --mode auto --json -- sh -c 'touch ran' 2>/dev/null)
	[ -e "$WS/ran" ] || fail "mode auto did not run the command with the cgroup namespace refused: $out"
	for l in userns mountns pidns netns ipcns utsns; do
		assert_eq "$(jget "isolation.$l.applied" <<<"$out")" true "isolation.$l.applied (cgroupns refused)"
	done
	assert_eq "$(jget isolation.cgroupns.applied <<<"$out")" false
	assert_contains "$(jget isolation.cgroupns.detail <<<"$out")" "refused by the host"
}

# Register the cases for both front doors (esc_register, escape.sh; any sourcing order works).
if declare -F esc_register >/dev/null; then esc_register; fi
