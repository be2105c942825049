# Escape battery, environment and secret leakage group: what of the host's secrets reaches the
# sandbox, and what of a secret the command prints reaches the host's screen, the JSON result,
# the MCP stream or the audit store. Helpers: tests/escape/escape.sh.

# Secrets in the front door's environment, in the forms agents' hosts really have. Sets
# ESC_TOKEN (a GitHub token), ESC_AWS (an AWS secret key) and exports them with others.
esc_host_secrets() {
	ESC_TOKEN=ghp_$(python3 -c 'import random,string; r=random.SystemRandom(); print("".join(r.choice(string.ascii_letters+string.digits) for _ in range(36)))')
	ESC_AWS=$(python3 -c 'import random,string; r=random.SystemRandom(); print("".join(r.choice(string.ascii_letters+string.digits+"/+") for _ in range(40)))')
	export GITHUB_TOKEN=$ESC_TOKEN AWS_SECRET_ACCESS_KEY=$ESC_AWS AWS_ACCESS_KEY_ID=AKIA$RANDOM$RANDOM
	export OPENAI_API_KEY="sk-esc-$ESC_AWS" DATABASE_PASSWORD="pw-$ESC_AWS" NPM_TOKEN="npm_$ESC_AWS"
	export CORRAL_ESC_PLAIN="plain-$RANDOM"
}

# What the sandbox sees of the secret variables, printed without redaction (--redact off), so
# that a leak shows as the value itself: its environment, /proc/self/environ, every process's
# environ, and the variables' lengths.
ESC_ENV_DUMP='env; tr "\0" "\n" < /proc/self/environ; for p in /proc/[0-9]*; do tr "\0" "\n" < $p/environ; done 2>/dev/null
	echo "len=${#GITHUB_TOKEN}:${#AWS_SECRET_ACCESS_KEY}:${#OPENAI_API_KEY}:${#DATABASE_PASSWORD}:${#NPM_TOKEN}"'

# The output minus corral's own warnings (which name the withheld variables).
esc_no_warnings() { grep -v '^corral: warning: '; }

esc_assert_no_secret() { # OUT WHAT
	local v
	for v in "$ESC_TOKEN" "$ESC_AWS"; do
		[[ $1 != *"$v"* ]] || fail "a host secret reached $2: ${1:0:300}"
	done
	for v in GITHUB_TOKEN AWS_SECRET_ACCESS_KEY AWS_ACCESS_KEY_ID OPENAI_API_KEY DATABASE_PASSWORD NPM_TOKEN; do
		[[ $1 != *"$v="* ]] || fail "the host variable $v reached $2"
	done
}

escape_case_env_host_secrets_not_inherited() {
	esc_host_secrets
	local out
	# also the wrapper's canary (escape.sh): its secret is exported in the front door's
	# environment, and the file sits in the host's /tmp
	out=$(cr --redact off -c "$ESC_ENV_DUMP; cat /proc/1/environ; cat '$ESC_EV_FILE'" 2>&1)
	esc_assert_no_secret "$out" "the sandbox's environment"
	assert_contains "$out" "len=0:0:0:0:0"
	assert_not_contains "$out" "$CORRAL_ESC_PLAIN" # nothing is inherited unless asked for
	assert_not_contains "$out" "$ESC_EV_SECRET"
	# control: a value passed explicitly is there (so the dump would show one)
	out=$(cr --redact off --env "GITHUB_TOKEN=$ESC_TOKEN" -c "$ESC_ENV_DUMP" 2>&1)
	assert_contains "$out" "len=40:0:0:0:0"
	assert_contains "$out" "GITHUB_TOKEN=$ESC_TOKEN"
}

# Asking for them by name or by glob does not pass them: the deny rules win, with a warning
# that names the rule. A glob does pass the names no rule denies (the control).
escape_case_env_withheld_even_when_named() {
	esc_host_secrets
	local out
	out=$(cr --redact off --env GITHUB_TOKEN --env AWS_SECRET_ACCESS_KEY --env 'AWS_*' \
		--env OPENAI_API_KEY --env '*_PASSWORD' --env NPM_TOKEN --env '*' -c "$ESC_ENV_DUMP" 2>&1)
	assert_contains "$out" "withheld by the deny rule"
	out=$(esc_no_warnings <<<"$out")
	esc_assert_no_secret "$out" "the sandbox (asked for by name)"
	assert_contains "$out" "len=0:0:0:0:0"
	assert_contains "$out" "CORRAL_ESC_PLAIN=$CORRAL_ESC_PLAIN"
}

# The command prints secrets anyway (a token file it was given, a PEM key, a value split over
# two writes 0.1 s apart, on stdout and stderr). They are redacted in the live stream the host
# captures, in the JSON result, in the MCP protocol stream (results and progress messages) and
# in the audit store with --audit-output; only [REDACTED:...] markers arrive. Control: with
# --redact off the same run does show the value.
escape_case_env_printed_secrets_redacted_everywhere() {
	esc_host_secrets
	esc_canary
	local pem other out json tr="$ESC_C/transcript" db="$ESC_C/audit.db"
	other=ghp_$(python3 -c 'import secrets,string; print("".join(secrets.choice(string.ascii_letters+string.digits) for _ in range(36)))')
	pem=$(python3 -c 'import base64,os; b=base64.b64encode(os.urandom(600)).decode(); print("\n".join(b[i:i+64] for i in range(0,len(b),64)))')
	printf '%s\n' "$ESC_TOKEN" >"$WS/token.txt"
	printf '%s\n' "$other" >"$WS/other.txt"
	printf -- '-----BEGIN RSA PRIVATE KEY-----\n%s\n-----END RSA PRIVATE KEY-----\n' "$pem" >"$WS/id_rsa"
	printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\n%s\n-----END OPENSSH PRIVATE KEY-----\n' "$pem" >"$WS/id_ed25519"
	local cmd='cat token.txt; cat other.txt >&2; cat id_rsa; cat id_ed25519 >&2; echo "aws=$(cat aws.txt)";
		printf "%s" "$(head -c 11 token.txt)"; sleep 0.1; printf "%s\n" "$(tail -c +12 token.txt)";
		printf "x %s" "$(head -c 7 other.txt)" >&2; sleep 0.1; printf "%s\n" "$(tail -c +8 other.txt)" >&2;
		sleep 0.7; echo done'
	printf '%s\n' "$ESC_AWS" >"$WS/aws.txt"
	local body1 body2
	body1=$(sed -n 2p <<<"$pem")
	body2=$(tail -1 <<<"$pem")
	# the live stream, as the host captures it (stdout and stderr)
	out=$(VIA_MCP_TRANSCRIPT=$tr cr --audit "$db" --audit-output -c "$cmd" 2>&1)
	for v in "$ESC_TOKEN" "$ESC_AWS" "$other" "$body1" "$body2"; do
		[[ $out != *"$v"* ]] || fail "a secret reached the host's captured output: $v"
	done
	assert_contains "$out" "[REDACTED:"
	assert_contains "$out" done
	[ "$(grep -o '\[REDACTED:[a-z_]*\]' <<<"$out" | wc -l)" -ge 7 ] || fail "expected seven redactions: $out"
	# the JSON result
	json=$(VIA_MCP_TRANSCRIPT=$tr cr --json -c "$cmd" 2>&1)
	for v in "$ESC_TOKEN" "$ESC_AWS" "$other" "$body1" "$body2"; do
		[[ $json != *"$v"* ]] || fail "a secret reached the JSON result: $v"
	done
	[ "$(jget redactions.count <<<"$json")" -ge 7 ] || fail "redactions: $(jget redactions <<<"$json")"
	# the MCP stream, every byte of it (results, progress notifications, server log)
	if via_mcp_door; then
		[ -s "$tr" ] || fail "no MCP transcript"
		for v in "$ESC_TOKEN" "$ESC_AWS" "$other" "$body1" "$body2"; do
			! grep -qF -- "$v" "$tr" || fail "a secret reached the MCP stream: $v"
		done
		grep -q 'notifications/progress' "$tr" || fail "the call sent no progress (the path that carries output)"
	fi
	# the audit store (database and journal files), byte for byte
	ls "$db"* >/dev/null 2>&1 || fail "no audit store was written"
	for v in "$ESC_TOKEN" "$ESC_AWS" "$other" "$body1" "$body2"; do
		! grep -qaF -- "$v" "$db"* || fail "a secret reached the audit store: $v"
	done
	grep -qaF '[REDACTED:' "$db"* || fail "the audit store holds no redacted output (--audit-output)"
	# control: without redaction the value does come through
	assert_contains "$(cr --redact off -c 'cat token.txt' 2>&1)" "$ESC_TOKEN"
}

# The supervisor's command line (its flags, paths, a hidden path's name) is not visible
# inside: the sandbox's pid 1 is corral's init, not the front door. Control: --mode none sees
# the front door's command line.
escape_case_env_supervisor_cmdline_hidden() {
	local m out
	m=$(esc_mark)
	mkdir "$WS/hidden-$m"
	out=$(cr --hide "$WS/hidden-$m" -c 'cat /proc/1/cmdline; echo; for p in /proc/[0-9]*; do tr "\0" " " < $p/cmdline; echo; done;
		ps -eo args; cat /proc/1/comm' 2>&1)
	assert_not_contains "$out" "hidden-$m"
	assert_contains "$out" corral-init
	out=$(cr --mode none --hide "$WS/hidden-$m" -c 'for p in /proc/[0-9]*; do tr "\0" " " < $p/cmdline; echo; done' 2>&1)
	assert_contains "$out" "hidden-$m"
}

# HOME is the workspace, not the host's home: the host home's files are not there, no
# variable points into it, and tools that write to ~ write into the workspace.
escape_case_env_home_is_workspace() {
	local out hf="" m
	m=$(esc_mark)
	if [ -n "${HOME:-}" ] && [ -d "$HOME" ] && [ -w "$HOME" ] && [[ $WS != "$HOME"/* ]] && [ "$HOME" != / ]; then
		hf=$(mktemp "$HOME/.corral-esc-home.XXXXXX")
		esc_defer "rm -f '$hf'"
		echo "home-$RANDOM$RANDOM" >"$hf"
	fi
	out=$(XDG_CONFIG_HOME="$HOME/.config" XDG_DATA_HOME="$HOME/.local/share" cr -c "echo \"HOME=\$HOME\"; cd ~ && pwd; ls -A ~; env; echo x > ~/.written-$m" 2>&1)
	assert_contains "$out" "HOME=$WS"$'\n'"$WS"
	assert_not_contains "$out" XDG_CONFIG_HOME
	assert_not_contains "$out" XDG_DATA_HOME
	[ -f "$WS/.written-$m" ] || fail "a write to ~ did not land in the workspace"
	if [ -n "$hf" ]; then
		assert_not_contains "$out" "$(basename "$hf")"
		assert_not_contains "$(grep -v "^PWD=\|^HOME=" <<<"$out")" "$HOME/"
		[ ! -e "$HOME/.written-$m" ] || { rm -f "$HOME/.written-$m"; fail "a write to ~ landed in the host's home"; }
	fi
}

# Variables that make a shell or the loader run code of the host's choosing (BASH_ENV, ENV,
# PROMPT_COMMAND, LD_PRELOAD...) are not passed, even by name or by glob. Evidence: the script
# BASH_ENV names would leave a marker in the workspace; it does not. Control: set explicitly,
# it runs.
escape_case_env_shell_and_loader_variables_withheld() {
	local out
	# only a shell inside the sandbox (CORRAL_SANDBOX=1) leaves the marker: on the host, shells
	# of the test machinery itself (a python shim, say) read BASH_ENV too
	printf '[ "$CORRAL_SANDBOX" = 1 ] && echo ran > "%s/bash_env_ran"\n' "$WS" >"$WS/evil.sh"
	out=$(BASH_ENV="$WS/evil.sh" ENV="$WS/evil.sh" PROMPT_COMMAND="touch $WS/pc_ran" GLIBC_TUNABLES=glibc.malloc.check=3 \
		cr --env BASH_ENV --env ENV --env PROMPT_COMMAND --env GLIBC_TUNABLES --env LD_PRELOAD --env '*' \
		-c 'bash -c true; bash -ic true </dev/null; sh -ic true </dev/null; env' 2>&1)
	assert_contains "$out" "withheld by the deny rule"
	out=$(esc_no_warnings <<<"$out")
	[ ! -e "$WS/bash_env_ran" ] || fail "BASH_ENV of the host ran inside the sandbox"
	[ ! -e "$WS/pc_ran" ] || fail "PROMPT_COMMAND of the host ran inside the sandbox"
	assert_not_contains "$out" "BASH_ENV="
	assert_not_contains "$out" "GLIBC_TUNABLES="
	# control: given explicitly, the same file does run
	cr --env "BASH_ENV=$WS/evil.sh" -c 'bash -c true' >/dev/null 2>&1
	[ -e "$WS/bash_env_ran" ] || fail "control: BASH_ENV set explicitly did not run"
}

# Register the cases for both front doors (esc_register, escape.sh; any sourcing order works).
if declare -F esc_register >/dev/null; then esc_register; fi
