# Escape battery, network group: no way out but the sandbox's own loopback.
# Helpers: tests/escape/escape.sh.

escape_case_net_egress_tcp_blocked() {
	esc_probe
	esc_canary
	esc_tcp_canary "$ESC_C/tcp"
	local port=$ESC_PORT out
	# a second listener on every address, reached through the host's own non-loopback IPs
	esc_listen tcp 0.0.0.0 "$ESC_C/any"
	local any_port addrs a
	any_port=$(cat "$ESC_C/any.port")
	addrs=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9.]+$' | head -3)
	# and the wrapper's canary listener (tests/escape/escape.sh), which must count nothing
	out=$(cr -c "./probe connect-tcp 127.0.0.1 $port; ./probe connect-tcp ::1 $port;
		for a in $(echo $addrs); do ./probe connect-tcp \$a $any_port; done;
		./probe connect-tcp 127.0.0.1 $any_port; ./probe connect-tcp 127.0.0.1 $ESC_EV_PORT" 2>&1)
	assert_not_contains "$out" "ok"$'\n'
	[ "$(esc_nerr "$out")" -ge 4 ] || fail "expected the connections to fail: $out"
	assert_eq "$(esc_count "$ESC_C/tcp")" 0 "connections seen by the host's 127.0.0.1 canary"
	assert_eq "$(esc_count "$ESC_C/any")" 0 "connections seen by the host's 0.0.0.0 canary"
}

escape_case_net_host_loopback_listeners_unreachable() {
	esc_canary
	esc_tcp_canary "$ESC_C/tcp"
	# every TCP port the host listens on (any address family), plus the canary
	local ports out
	ports=$(ss -Hltn 2>/dev/null | awk '{n=split($4,a,":"); print a[n]}' | sort -un | head -50 | tr '\n' ' ')
	ports="$ports $ESC_PORT $ESC_EV_PORT"
	cat >"$WS/scan.py" <<'PY'
import socket, sys
opened = []
for p in sys.argv[1:]:
    for host in ("127.0.0.1", "::1"):
        try:
            socket.create_connection((host, int(p)), timeout=0.5).close()
            opened.append("%s:%s" % (host, p))
        except OSError:
            pass
print("open=" + ",".join(opened))
PY
	out=$(cr -- /usr/bin/python3 scan.py $ports 2>&1)
	assert_eq "$out" "open=" "host listeners reached from the sandbox (ports: $ports)"
	assert_eq "$(esc_count "$ESC_C/tcp")" 0 "connections seen by the canary"
	# control: the same scan from the host does reach at least the canary
	cp "$WS/scan.py" "$ESC_C/scan.py"
	assert_contains "$(python3 "$ESC_C/scan.py" "$ESC_PORT")" "127.0.0.1:$ESC_PORT"
}

escape_case_net_abstract_unix_unreachable() {
	esc_probe
	esc_canary
	local name="corral-iso-abs-$RANDOM$RANDOM"
	esc_abstract_canary "$name" "$ESC_C/abs"
	local out
	out=$(cr -- ./probe connect-abstract "$name")
	[[ $out == errno=* ]] || fail "connect to the host's abstract socket: $out"
	out=$(cr -- ./probe connect-abstract "$ESC_EV_ABSTRACT") # the wrapper's, counted there
	[[ $out == errno=* ]] || fail "connect to the host's abstract socket @$ESC_EV_ABSTRACT: $out"
	assert_eq "$(esc_count "$ESC_C/abs")" 0 "connections seen by the abstract canary"
	# control: without isolation the canary counts the connection
	assert_eq "$(cr --mode none -- ./probe connect-abstract "$name")" ok "control connect"
	assert_eq "$(esc_count_at_least "$ESC_C/abs" 1)" 1 "control: connection counted"
}

escape_case_net_pathname_unix_unreachable() {
	esc_probe
	esc_canary
	esc_listen unix "$ESC_C/host.sock" "$ESC_C/unix"
	local out
	out=$(cr -c "./probe connect-unix '$ESC_C/host.sock'; /usr/bin/python3 -c \"
import socket; s = socket.socket(socket.AF_UNIX); s.connect('$ESC_C/host.sock'); print('ok')\"" 2>&1)
	assert_not_contains "$out" "ok"$'\n'
	assert_eq "$(esc_count "$ESC_C/unix")" 0 "connections seen by the host's unix socket"
	cr --mode none -- ./probe connect-unix "$ESC_C/host.sock" >/dev/null
	assert_eq "$(esc_count_at_least "$ESC_C/unix" 1)" 1 "control: connection counted"
}

escape_case_net_udp_egress_blocked() {
	esc_canary
	esc_listen udp 127.0.0.1 "$ESC_C/udp"
	local port
	port=$(cat "$ESC_C/udp.port")
	cat >"$WS/send.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(3):
    try:
        s.sendto(b"x", ("127.0.0.1", int(sys.argv[1])))
    except OSError as e:
        print("errno", e.errno)
print("sent")
PY
	cr -- /usr/bin/python3 send.py "$port" >/dev/null 2>&1
	assert_eq "$(esc_count "$ESC_C/udp")" 0 "datagrams seen by the host's UDP canary"
	# control: with the host's network the datagrams arrive
	cr --net host -- /usr/bin/python3 send.py "$port" >/dev/null 2>&1
	[ "$(esc_count_at_least "$ESC_C/udp" 1)" -ge 1 ] || fail "control: --net host datagrams not seen"
}

# The sandbox has a loopback of its own: a server and a client inside can talk over
# 127.0.0.1, even on a port the host is using (a different network stack).
escape_case_net_sandbox_loopback_works() {
	esc_probe
	esc_canary
	esc_tcp_canary "$ESC_C/tcp"
	local out
	out=$(cr -- /usr/bin/python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
c = socket.create_connection(s.getsockname(), timeout=2)
a, _ = s.accept(); c.sendall(b"ping"); print(a.recv(4).decode())
' "$ESC_PORT" 2>&1)
	assert_eq "$out" ping "loopback inside the sandbox (bound the host canary's port $ESC_PORT)"
	assert_eq "$(cr -- ./probe bind-tcp 0)" ok "bind inside the sandbox"
	assert_eq "$(esc_count "$ESC_C/tcp")" 0 "connections seen by the host canary on the same port"
}

# The sandbox's network namespace is its own: not the host's, not another sandbox's running
# at the same time, and owned by the sandbox's own user namespace (NS_GET_USERNS answers
# for it; for a namespace of the host's it fails with EPERM). Since 2026-11-29 a helper of
# the init makes it beside the mount setup (DESIGN §18); the helper is gone before the
# command starts, which is pid 2 with nothing but its init beside it.
esc_nsinfo_py() {
	cat >"$WS/nsinfo.py" <<'PY'
import fcntl, os, sys
fd = os.open("/proc/self/ns/net", os.O_RDONLY)
try:
    owner = os.fstat(fcntl.ioctl(fd, 0xB701)).st_ino  # NS_GET_USERNS
except OSError as e:
    owner = "errno=%d" % e.errno
procs = ",".join(sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int))
print(os.stat("/proc/self/ns/net").st_ino, owner, os.stat("/proc/self/ns/user").st_ino,
      os.getpid(), procs)
PY
}

escape_case_net_namespace_own_fresh_and_owned() {
	esc_nsinfo_py
	local host_net host_user out a b i h pid
	host_net=$(stat -L -c %i /proc/self/ns/net)
	host_user=$(stat -L -c %i /proc/self/ns/user)
	# with the helper (what an idle machine gets), and without it (the clone makes the
	# namespace: CPUs all busy, or one CPU)
	for h in always never; do
		out=$(CORRAL_TEST_NET_HELPER=$h cr -- /usr/bin/python3 nsinfo.py 2>&1)
		read -r -a a <<<"$out"
		[ "${#a[@]}" -ge 5 ] || fail "$h: nsinfo: $out"
		[ "${a[0]}" != "$host_net" ] || fail "$h: the sandbox is in the host's network namespace ($out)"
		[ "${a[2]}" != "$host_user" ] || fail "$h: the sandbox is in the host's user namespace ($out)"
		assert_eq "${a[1]}" "${a[2]}" "$h: the network namespace's owner is the sandbox's user namespace ($out)"
		# pid 2 back from the helper through ns_last_pid, where the host's /proc/sys can
		# be written (a container's read-only /proc/sys leaves the command pid 3)
		pid=2
		if [ $h = always ] && findmnt -rn -o OPTIONS /proc/sys 2>/dev/null | grep -qE '(^|,)ro(,|$)'; then
			pid=3
		fi
		assert_eq "${a[3]}" $pid "$h: the command's pid ($out)"
		assert_eq "${a[4]}" 1,$pid "$h: the sandbox's processes: its init and the command, no helper left ($out)"
	done
	# two at the same time: one waits (its namespace alive) while the other looks
	rm -f "$WS/a.txt" "$WS/b.txt" "$WS/go"
	CORRAL_TEST_NET_HELPER=always cr -c '/usr/bin/python3 nsinfo.py > a.txt; i=0; while [ ! -e go ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done' >/dev/null 2>&1 &
	local bg=$!
	for i in $(seq 200); do [ -s "$WS/a.txt" ] && break; sleep 0.05; done
	CORRAL_TEST_NET_HELPER=always cr -- /usr/bin/python3 nsinfo.py >"$WS/b.txt" 2>&1
	touch "$WS/go"
	wait $bg
	read -r -a a <"$WS/a.txt"
	read -r -a b <"$WS/b.txt"
	[ "${#a[@]}" -ge 5 ] && [ "${#b[@]}" -ge 5 ] || fail "nsinfo: $(cat "$WS/a.txt" "$WS/b.txt")"
	[ "${a[0]}" != "${b[0]}" ] || fail "two sandboxes running at once share a network namespace (${a[0]})"
	[ "${b[0]}" != "$host_net" ] || fail "the second sandbox is in the host's network namespace"
	assert_eq "${b[1]}" "${b[2]}" "the second sandbox's network namespace is its user namespace's"
}

escape_case_net_only_loopback_interface() {
	local inside host none
	host=$(awk 'NR>2{print $1}' /proc/net/dev | sort)
	inside=$(cr -c "awk 'NR>2{print \$1}' /proc/net/dev")
	assert_eq "$inside" "lo:" "interfaces inside the sandbox (host has: $(echo $host))"
	# control: without isolation the host's interfaces are there
	none=$(cr --mode none -c "awk 'NR>2{print \$1}' /proc/net/dev" | sort)
	assert_eq "$none" "$host" "control: --mode none sees the host's interfaces"
}

escape_case_net_host_mode_recorded_and_reaches_canary() {
	esc_probe
	esc_canary
	esc_tcp_canary "$ESC_C/tcp"
	local name="corral-iso-abs-$RANDOM$RANDOM" out
	esc_abstract_canary "$name" "$ESC_C/abs"
	out=$(cr --net host --json -- ./probe connect-tcp 127.0.0.1 "$ESC_PORT")
	assert_contains "$(jget isolation.netns.detail <<<"$out")" host
	assert_eq "$(jget isolation.netns.applied <<<"$out")" false
	assert_eq "$(jget stdout <<<"$out")" ok "connect with --net host"
	assert_eq "$(esc_count_at_least "$ESC_C/tcp" 1)" 1 "the canary saw the --net host connection"
	# the other layers still hold: abstract unix sockets stay scoped by Landlock
	assert_eq "$(jget isolation.landlock.applied <<<"$out")" true
	out=$(cr --net host -c "./probe connect-abstract $name; ./probe connect-abstract $ESC_EV_ABSTRACT")
	[ "$(esc_nerr "$out")" -eq 2 ] || fail "--net host reached the host's abstract socket: $out"
	assert_eq "$(esc_count "$ESC_C/abs")" 0 "abstract canary with --net host"
}

# Register the cases for both front doors (esc_register, escape.sh; any sourcing order works).
if declare -F esc_register >/dev/null; then esc_register; fi
