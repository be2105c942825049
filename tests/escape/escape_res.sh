# Escape battery, resources group: limits hold, the host stays responsive, nothing is left.
# Helpers: tests/escape/escape.sh.

# Does `corral check` say cgroups are available to this user? Then a run must use them.
esc_cgroup_available() {
	"$CORRAL" check --json | python3 -c 'import json,sys
d = json.load(sys.stdin)
sys.exit(0 if any(l["name"] == "cgroup" and l["available"] for l in d["layers"]) else 1)'
}

# A uniquely named copy of the probe, so that pgrep finds exactly this test's processes.
esc_marked_probe() { ESC_M=$(esc_mark); cp "$PROBE" "$WS/$ESC_M"; }

escape_case_res_fork_bomb_pids() {
	esc_marked_probe
	local out start end so n
	start=$(date +%s%N)
	out=$(cr --json -t 20 --pids 64 -- "./$ESC_M" fork-bomb 2000)
	end=$(date +%s%N)
	so=$(jget stdout <<<"$out")
	n=$(sed -nE 's/^forked=([0-9]+).*/\1/p' <<<"$so")
	[ -n "$n" ] || fail "no fork-bomb report: $so $(jget error <<<"$out")"
	[ "$n" -lt 64 ] || fail "forked $n processes with --pids 64"
	assert_contains "$so" "errno=EAGAIN"
	[ $(((end - start) / 1000000)) -lt 10000 ] || fail "the run took $(((end - start) / 1000000)) ms"
	if [ "$(jget isolation.cgroup.applied <<<"$out")" = true ]; then
		assert_eq "$(jget limit <<<"$out")" pids
	elif esc_cgroup_available; then
		fail "corral check offers cgroups but the run did not use them: $(jget isolation.cgroup.detail <<<"$out")"
	fi
	assert_no_survivor "$ESC_M"
	# the host is responsive and can fork at once
	timeout 2 sh -c 'for i in 1 2 3 4 5; do /bin/true & done; wait' || fail "the host cannot fork after the bomb"
}

escape_case_res_memory_bomb() {
	esc_marked_probe
	local out so
	out=$(cr --json -t 20 --memory 64M -- "./$ESC_M" mem-hog 256)
	so=$(jget stdout <<<"$out")
	if [ "$(jget isolation.cgroup.applied <<<"$out")" = true ]; then
		assert_eq "$(jget limit <<<"$out")" memory "limit ($so)"
		assert_eq "$(jget signal <<<"$out")" 9
		local rss
		rss=$(jget usage.max_rss_kb <<<"$out")
		[ "$rss" -le $((80 * 1024)) ] || fail "max_rss ${rss} KiB is past the 64M limit"
	else
		esc_cgroup_available && fail "corral check offers cgroups but the run did not use them"
		# the RLIMIT_DATA fallback: the allocation fails inside, well below 256 MB
		local mb
		mb=$(sed -nE 's/^allocated_mb=([0-9]+).*/\1/p' <<<"$so")
		[ -n "$mb" ] || fail "no mem-hog report: $so"
		[ "$mb" -lt 100 ] || fail "allocated $mb MB with --memory 64M"
		assert_contains "$so" "errno=ENOMEM"
		assert_contains "$(jget isolation.rlimits.detail <<<"$out")" data
	fi
	assert_no_survivor "$ESC_M"
}

escape_case_res_tmpfs_fill() {
	esc_marked_probe
	local before after out so w
	# unique names, removed at exit: if the private /tmp were ever the host's, this test must
	# not leave a GiB behind
	esc_defer "rm -f '/tmp/$ESC_M.big' '/dev/shm/$ESC_M.big'"
	before=$(df -k --output=used /tmp | tail -1)
	out=$(cr --json -t 20 --tmpfs-size 32M -c "./$ESC_M write-file /tmp/$ESC_M.big 1024; ./$ESC_M write-file /dev/shm/$ESC_M.big 1024")
	after=$(df -k --output=used /tmp | tail -1)
	so=$(jget stdout <<<"$out")
	for w in $(sed -nE 's/^written=([0-9]+).*/\1/p' <<<"$so"); do
		[ "$w" -le $((33 << 20)) ] || fail "wrote $w bytes into a 32M tmpfs"
		[ "$w" -ge $((24 << 20)) ] || fail "only $w bytes fit in a 32M tmpfs"
	done
	[ "$(grep -c 'errno=ENOSPC' <<<"$so")" -eq 2 ] || fail "expected ENOSPC twice: $so"
	# An escape would grow the host's /tmp by up to 1 GiB (its /dev/shm is memory); the
	# slack allows for other writers on it meanwhile (make check's other pass, npm's cache).
	[ $((after - before)) -lt $((256 * 1024)) ] || fail "host /tmp grew by $((after - before)) KiB"
	[ ! -e "/tmp/$ESC_M.big" ] && [ ! -e "/dev/shm/$ESC_M.big" ] || fail "the fill landed on the host"
	assert_no_survivor "$ESC_M"
}

escape_case_res_fd_exhaustion() {
	esc_probe
	local out n
	out=$(cr -t 20 --nofile 64 -- ./probe fd-hog)
	n=$(sed -nE 's/^opened=([0-9]+).*/\1/p' <<<"$out")
	[ -n "$n" ] || fail "no fd-hog report: $out"
	[ "$n" -le 64 ] && [ "$n" -ge 50 ] || fail "opened $n files with --nofile 64"
	assert_contains "$out" "errno=EMFILE"
	# control: without --nofile the default (1024) is what stops it
	n=$(cr -t 20 -- ./probe fd-hog | sed -nE 's/^opened=([0-9]+).*/\1/p')
	[ "$n" -gt 64 ] || fail "control: only $n files without --nofile"
}

escape_case_res_cpu_limit() {
	local m out start end
	m=$(esc_mark)
	cp /bin/sh "$WS/$m"
	start=$(date +%s%N)
	out=$(cr --json -t 20 --cpu 1 -- "./$m" -c 'while :; do :; done')
	end=$(date +%s%N)
	assert_eq "$(jget limit <<<"$out")" cpu
	local sig
	sig=$(jget signal <<<"$out")
	[ "$sig" = 24 ] || [ "$sig" = 9 ] || fail "signal $sig for the CPU limit"
	# a 1 s CPU limit against a 20 s timeout (limit cpu above says which one fired)
	[ $(((end - start) / 1000000)) -lt 15000 ] || fail "the CPU limit took $(((end - start) / 1000000)) ms"
	assert_no_survivor "$m"
}

escape_case_res_fsize_limit() {
	esc_probe
	local out sz
	out=$(cr --json -t 20 --fsize 1M -- ./probe write-file big 10)
	assert_eq "$(jget limit <<<"$out")" fsize
	assert_eq "$(jget signal <<<"$out")" 25
	sz=$(stat -c %s "$WS/big")
	[ "$sz" -le $((1 << 20)) ] || fail "the file grew to $sz bytes past the 1M limit"
}

# A disk bomb: a file in the workspace stops at --fsize (SIGXFSZ, reported as limit fsize), a
# fill of /tmp and /dev/shm stops at --tmpfs-size (ENOSPC), and the host's free space shrinks
# by no more than the limit allows, though the command tried to write 256 MiB to each.
# (--fsize bounds each file, not their sum: many files below it are not stopped.)
escape_case_res_disk_bomb() {
	esc_marked_probe
	local before after out so w sz
	esc_defer "rm -f '/tmp/$ESC_M.big' '/dev/shm/$ESC_M.big' '/tmp/$ESC_M.2'"
	before=$(df -k --output=avail "$WS" | tail -1)
	out=$(cr --json -t 30 --fsize 8M -- "./$ESC_M" write-file big 256)
	assert_eq "$(jget limit <<<"$out")" fsize "$(jget stdout <<<"$out")"
	assert_eq "$(jget signal <<<"$out")" 25
	sz=$(stat -c %s "$WS/big")
	[ "$sz" -le $((8 << 20)) ] || fail "the workspace file grew to $sz bytes past --fsize 8M"
	out=$(cr --json -t 30 --tmpfs-size 16M -c "./$ESC_M write-file /tmp/$ESC_M.big 256;
		./$ESC_M write-file /dev/shm/$ESC_M.big 256; ./$ESC_M write-file /tmp/$ESC_M.2 256")
	so=$(jget stdout <<<"$out")
	[ "$(grep -c 'errno=ENOSPC' <<<"$so")" -eq 3 ] || fail "expected ENOSPC three times: $so"
	for w in $(sed -nE 's/^written=([0-9]+).*/\1/p' <<<"$so"); do
		[ "$w" -le $((17 << 20)) ] || fail "wrote $w bytes into a 16M tmpfs"
	done
	after=$(df -k --output=avail "$WS" | tail -1)
	# the 8 MiB file is on the host's disk; an escape of the /tmp fills would take 512 MiB
	# more, and the slack allows for other writers meanwhile (make check's other pass, npm)
	[ $((before - after)) -lt $((256 * 1024)) ] || fail "the host lost $((before - after)) KiB of free space"
	[ ! -e "/tmp/$ESC_M.big" ] && [ ! -e "/dev/shm/$ESC_M.big" ] || fail "the fill landed on the host"
	assert_no_survivor "$ESC_M"
}

# Register the cases for both front doors (esc_register, escape.sh; any sourcing order works).
if declare -F esc_register >/dev/null; then esc_register; fi
