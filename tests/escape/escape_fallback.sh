# Isolation battery, fallback ladder: layers made unavailable for real with tests/nolayer.c.
# required fails closed naming the layer; auto says what it skipped and the rest still holds;
# none applies nothing but still enforces limits. Helpers: tests/integration/isolation.sh.

# corral run under nolayer LAYERS, in the workspace.
crn() { # LAYERS RUN-ARGS...
	local layers=$1
	shift
	"$NOLAYER" "$layers" -- "$CORRAL" run -w "$WS" "$@"
}

# required mode with LAYER missing: exit 125, one clear message naming the layer and a fix,
# and the command never ran (host-side: its marker file does not exist).
iso_required_fails() { # LAYER FIX-WORDS...
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
	assert_eq "$(jget error.step <<<"$json")" "$layer" "error.step"
	[ ! -e "$WS/ran" ] || fail "the command ran although $layer is missing (--json)"
}

test_iso_fallback_nouserns_required_fails() {
	iso_required_fails userns "--mode=auto"
}

test_iso_fallback_nolandlock_required_fails() {
	iso_required_fails landlock "--mode=auto"
}

test_iso_fallback_noseccomp_required_fails() {
	iso_required_fails seccomp "--mode=auto"
}

# The no-namespace tier: Landlock, seccomp, caps and rlimits only.
test_iso_fallback_nouserns_auto_landlock_enforcing() {
	iso_probe
	iso_canary
	local out so l
	mkdir "$WS/sub"
	iso_defer_host_paths "/etc/iso-$$" "/usr/iso-$$"
	out=$(crn userns --mode auto --json -c "echo inside > made-in-ws; echo inside > sub/made-in-sub; ./probe open-write '$ISO_CANARY';
		echo pwn >> '$ISO_CANARY'; rm -f '$ISO_CANARY'; touch '$ISO_C/new'; cat '$ISO_CANARY';
		ln -s '$ISO_CANARY' link; echo pwn >> link; cat /etc/shadow; ./probe open-write /etc/iso-$$;
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
		assert_contains "$(jget isolation.caps.detail <<<"$out")" "no_new_privs only"
	fi
	assert_eq "$(cat "$WS/sub/made-in-sub" 2>&1)" inside "a subdirectory of the workspace is writable in the no-namespace tier"
	assert_eq "$(cat "$WS/made-in-ws" 2>&1)" inside "the workspace root is writable in the no-namespace tier ($(jget stderr <<<"$out" 2>/dev/null | head -3))"
	assert_canary_unchanged "no-namespace tier"
	[ ! -e "$ISO_C/new" ] || fail "the sandbox created a file next to the canary"
	[ ! -e "/etc/iso-$$" ] && [ ! -e "/usr/iso-$$" ] || fail "the sandbox wrote into /etc or /usr"
	so=$(jget stdout <<<"$out")
	assert_not_contains "$so" "$ISO_SECRET"
	is_root && assert_not_contains "$so" "$(head -1 /etc/shadow)"
	# no capability to use (an unprivileged caller cannot empty its bounding set without a user
	# namespace, and no_new_privs keeps exec from using it)
	assert_contains "$so" "CapEff=0000000000000000"
	assert_contains "$so" "CapPrm=0000000000000000 CapAmb=0000000000000000 CapInh=0000000000000000"
	assert_contains "$so" $'\n1\n2'
	assert_eq "$(iso_nerr "$so")" 3 "denied opens in the no-namespace tier: $so"
	# control: the same program in mode none does change the canary
	"$CORRAL" run -w "$WS" --mode none -c "echo pwn >> '$ISO_CANARY'" >/dev/null 2>&1
	[ "$(iso_hash "$ISO_CANARY")" != "$ISO_CANARY_HASH" ] || fail "control: mode none could not write the canary"
}

# Without a mount namespace, host sockets outside the workspace are still there; none of them
# may be reachable: a docker.sock-style pathname socket, an abstract socket, TCP on loopback.
test_iso_fallback_nouserns_auto_host_sockets_unreachable() {
	iso_probe
	iso_canary
	iso_listen unix "$ISO_C/docker.sock" "$ISO_C/unix"
	iso_tcp_canary "$ISO_C/tcp"
	local name="corral-iso-abs-$RANDOM$RANDOM" out
	iso_abstract_canary "$name" "$ISO_C/abs"
	out=$(crn userns --mode auto -c "./probe connect-unix '$ISO_C/docker.sock'; ./probe connect-abstract $name;
		./probe connect-tcp 127.0.0.1 $ISO_PORT" 2>&1)
	assert_eq "$(iso_count "$ISO_C/tcp")" 0 "TCP canary (no-namespace tier)"
	assert_eq "$(iso_count "$ISO_C/abs")" 0 "abstract canary (no-namespace tier)"
	assert_eq "$(iso_count "$ISO_C/unix")" 0 "host docker.sock reached from the no-namespace tier ($(tr '\n' ' ' <<<"$out"))"
}

# Without a mount namespace /dev/pts and /dev/shm are the host's: the sandbox must not open
# another terminal of the same user (keystrokes) or the host's shared memory.
test_iso_fallback_nouserns_auto_host_devices_unreachable() {
	iso_probe
	iso_canary
	local m out
	m=$(iso_mark)
	echo "shm-$ISO_SECRET" >"/dev/shm/$m"
	chmod 0666 "/dev/shm/$m"
	iso_defer "rm -f '/dev/shm/$m' '/dev/shm/$m-new'"
	python3 - "$ISO_C/pty" >/dev/null 2>&1 <<'PY' &
import os, pty, sys, time
m, s = pty.openpty()
open(sys.argv[1], "w").write(os.ttyname(s))
time.sleep(20)
PY
	iso_defer "kill $!"
	local i
	for i in $(seq 1 100); do [ -s "$ISO_C/pty" ] && break; sleep 0.02; done
	local pts
	pts=$(cat "$ISO_C/pty")
	[ -c "$pts" ] || fail "no host pty to test with"
	out=$(crn userns --mode auto -c "./probe open-read $pts; ./probe open-write $pts; cat /dev/shm/$m;
		./probe open-write /dev/shm/$m; touch /dev/shm/$m-new" 2>&1)
	assert_not_contains "$out" "$ISO_SECRET"
	[ ! -e "/dev/shm/$m-new" ] || fail "the no-namespace tier created a file in the host's /dev/shm"
	assert_not_contains "$out" "ok"$'\n'
}

test_iso_fallback_nouserns_auto_sigkill_supervisor_leaves_nothing() {
	ISO_ARGS="--mode auto" iso_sigkill_supervisor "$(iso_mark)" "$NOLAYER" userns --
}

test_iso_fallback_nouserns_auto_timeout_kills_daemons() {
	local m
	m=$(iso_mark)
	cp /bin/sleep "$WS/$m"
	crn userns --mode auto -t 0.5 --kill-after 0.2 -c "setsid ./$m 300 & (setsid ./$m 301 &); exec ./$m 302" >/dev/null 2>&1
	assert_eq $? 124 "exit status on timeout"
	assert_no_survivor "$m"
}

test_iso_fallback_nouserns_auto_supervisor_protected() {
	ISO_PRE=("$NOLAYER" userns --)
	iso_attack_supervisor --mode auto
}

test_iso_fallback_nolandlock_auto() {
	iso_probe
	iso_canary
	local out l
	out=$(crn landlock --mode auto --json -c "echo pwn >> '$ISO_CANARY'; echo ok > in-ws; ./probe keyctl")
	assert_eq "$(jget isolation.landlock.applied <<<"$out")" false
	for l in userns mountns pidns netns seccomp caps; do
		assert_eq "$(jget "isolation.$l.applied" <<<"$out")" true "isolation.$l.applied"
	done
	# the mount namespace and seccomp still hold
	assert_canary_unchanged "without Landlock"
	assert_eq "$(cat "$WS/in-ws")" ok
	assert_contains "$(jget stdout <<<"$out")" "errno=EPERM"
}

test_iso_fallback_noseccomp_auto() {
	iso_probe
	iso_canary
	local out l so
	mkdir "$WS/mnt"
	iso_defer "umount -l '$WS/mnt'"
	out=$(crn seccomp --mode auto --json -c "echo pwn >> '$ISO_CANARY'; ./probe caps; ./probe nnp; ./probe mount-tmpfs mnt")
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

test_iso_fallback_mode_none_records_nothing_enforces_timeout() {
	local m out l start end
	m=$(iso_mark)
	cp /bin/sleep "$WS/$m"
	start=$(date +%s%N)
	out=$("$CORRAL" run -w "$WS" --mode none --json -t 0.5 --kill-after 0.2 -c "(setsid ./$m 300 &); exec ./$m 301")
	end=$(date +%s%N)
	assert_eq "$(jget mode <<<"$out")" none
	# caps are left out: root's are dropped even here, and the record says so (checked against
	# the kernel's view in test_iso_record_caps_claim_matches_reality)
	for l in userns mountns pidns netns ipcns utsns cgroupns landlock seccomp cgroup; do
		assert_eq "$(jget "isolation.$l.applied" <<<"$out")" false "isolation.$l.applied in mode none"
	done
	assert_eq "$(jget timed_out <<<"$out")" true
	assert_eq "$(jget limit <<<"$out")" timeout
	[ $(((end - start) / 1000000)) -lt 5000 ] || fail "the timeout took $(((end - start) / 1000000)) ms"
	assert_no_survivor "$m"
}

test_iso_fallback_check_json_lists_layers() {
	local out l
	out=$("$CORRAL" check --json)
	for l in $ISO_LAYERS; do
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
