/* corral mcp: build the server's policy once (a profile, then the flags, as `corral run`
 * does), check it, then serve the Model Context Protocol on stdin/stdout until EOF or a
 * signal. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "audit.h"
#include "cli/cli.h"
#include "internal.h"
#include "mcp/mcp.h"

void usage_mcp(FILE *f)
{
	fputs(
	    "Usage: corral mcp [OPTIONS]\n"
	    "\n"
	    "Serve the Model Context Protocol (2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)\n"
	    "on stdin/stdout for agent hosts. Tools:\n"
	    "  run_command, run_code, run_pipeline   one-shot runs in fresh sandboxes (one per\n"
	    "      pipeline stage); run_code only for python, node, bash, sh the policy allows\n"
	    "  shell_exec, shell_close, shell_list   persistent shell sessions, a sandbox each\n"
	    "  job_start, job_output, job_kill, job_list   background jobs\n"
	    "  can_i                                 policy questions; runs nothing\n"
	    "Every sandbox runs under the policy below (the profile, then the flags, as in\n"
	    "corral run); a call can only narrow it (a shorter timeout, a cwd inside the\n"
	    "workspace, variables the policy allows); nothing a call sends can change the\n"
	    "policy. Logs go to stderr. See docs/mcp.md.\n"
	    "\n"
	    "Options:\n"
	    "  -w, --workspace DIR      the workspace (default: current directory)\n"
	    "      --profile P          a builtin profile (default, readonly, strict, network) or\n"
	    "                           a JSON profile file; the flags here override it\n"
	    "      --ro PATH            also show PATH read-only (absolute, ~/..., or relative\n"
	    "                           to the workspace)\n"
	    "      --rw PATH            also show PATH read-write\n"
	    "      --hide PATH          hide PATH, even inside a visible tree (deny wins)\n"
	    "  -t, --timeout DUR        per-call wall-clock timeout and its maximum (default: the\n"
	    "                           profile's, else 60s; 0 = none); DUR is 30, 1.5, 250ms, 2m\n"
	    "      --kill-after DUR     grace between SIGTERM and SIGKILL on timeout (default 2s)\n"
	    "      --memory SIZE        memory limit per call (512k, 64M, 2G; 0 = none)\n"
	    "      --cpu SECONDS        CPU time limit per call (0 = none)\n"
	    "      --cpus N             CPU share per call: 0.5 = half of one CPU (cgroup)\n"
	    "      --pids N             process limit per call (default 1024; 0 = none)\n"
	    "      --nofile N           open files limit of each sandbox (default 1024; 0 = none)\n"
	    "      --fsize SIZE         largest file a call may write (0 = none)\n"
	    "      --tmpfs-size SIZE    size of the private /tmp (default 256M; 0 = the default)\n"
	    "      --max-output SIZE    bytes kept per stream; head and tail kept (default 1M)\n"
	    "      --env NAME           pass NAME (or a glob like LC_*) from corral's environment\n"
	    "                           to every call, unless a deny rule withholds it; calls may\n"
	    "                           also set names it matches\n"
	    "      --env NAME=VALUE     set NAME for every call\n"
	    "      --allow-env PATTERN  names a call may set through its env argument (glob,\n"
	    "                           repeatable); deny rules (*_TOKEN, AWS_*, LD_PRELOAD, ...)\n"
	    "                           still win\n"
	    "      --redact MODE        secrets in the output: redact (default), flag, off\n"
	    "      --net none|host      network: none (loopback only, default) or the host's\n"
	    "      --mode MODE          required (default), auto or none; see corral help run\n"
	    "      --audit PATH|off     the audit store (default $XDG_STATE_HOME/corral/audit.db,\n"
	    "                           else ~/.local/state/corral/audit.db); off: no record\n"
	    "      --audit-output       also store each call's (redacted, capped) output\n"
	    "      --audit-max-age DUR, --audit-max-rows N\n"
	    "                           retention of the store: delete rows older than DUR\n"
	    "                           (default 30d) and beyond the newest N (default\n"
	    "                           100000); 0 = no limit of that kind\n"
	    "      --max-concurrent N   run_command, run_code and run_pipeline calls running at\n"
	    "                           once (default: 2 x cores; a pipeline counts as one\n"
	    "                           call, whatever its stages); more such calls wait in a\n"
	    "                           FIFO queue. Sessions, jobs, can_i and sandboxes built\n"
	    "                           ahead are not counted and never wait\n"
	    "      --prebuild N         keep N sandboxes built ahead, used once each by calls\n"
	    "                           whose plan matches (default 0: each call builds its\n"
	    "                           own); refilled when the server is idle, and beside\n"
	    "                           the running call when calls come back to back\n"
	    "      --mount-template on|off  take each sandbox's system tree (/usr, the /etc\n"
	    "                           allow-list, /dev) from a copy of one built once, on a\n"
	    "                           tmpfs read-only at its superblock (default on; shown\n"
	    "                           in the isolation record); off: each builds its own\n"
	    "      --placeholder-linger DUR  keep a call's protected-path placeholders (an\n"
	    "                           empty .envrc, .vscode/, ... where the workspace has\n"
	    "                           none) this long after it ends, for the next call to\n"
	    "                           take over (default 10ms; 0 = remove them at once;\n"
	    "                           at most 10s)\n"
	    "      --max-queue N        calls that may wait (default 10000); beyond, a call\n"
	    "                           gets a \"server busy\" error result\n"
	    "      --max-queue-bytes SIZE  request bytes the waiting calls may hold together\n"
	    "                           (default 256M; 0 = no limit); a call that would pass\n"
	    "                           it gets the same \"server busy\" result\n"
	    "      --max-sessions N     shell sessions open at once (default 8)\n"
	    "      --session-idle DUR   close a session idle this long (default 30m; 0 = never)\n"
	    "      --max-jobs N         background jobs running at once (default 16)\n"
	    "      --job-timeout DUR    stop a job after this long (default 1h; 0 = none)\n"
	    "      --max-message-bytes SIZE  largest request message, without its \\n or \\r\\n\n"
	    "                           (default 4M); a longer one is discarded and answered\n"
	    "                           with an error\n"
	    "  -h, --help               show this help\n"
	    "\n"
	    "Exit status: 0 after EOF on stdin or SIGTERM/SIGINT/SIGHUP; 125 on a bad option,\n"
	    "profile or policy (checked before serving).\n",
	    f);
}

enum {
	OPT_KILL_AFTER = 256,
	OPT_MEMORY,
	OPT_CPU,
	OPT_CPUS,
	OPT_PIDS,
	OPT_NOFILE,
	OPT_FSIZE,
	OPT_TMPFS,
	OPT_MAX_OUTPUT,
	OPT_ENV,
	OPT_ALLOW_ENV,
	OPT_NET,
	OPT_MODE,
	OPT_MAX_CONCURRENT,
	OPT_PREBUILD,
	OPT_MAX_QUEUE,
	OPT_MAX_QUEUE_BYTES,
	OPT_MAX_SESSIONS,
	OPT_SESSION_IDLE,
	OPT_PLACEHOLDER_LINGER,
	OPT_MAX_JOBS,
	OPT_JOB_TIMEOUT,
	OPT_MAX_MESSAGE,
	OPT_PROFILE,
	OPT_RO,
	OPT_RW,
	OPT_HIDE,
	OPT_REDACT,
	OPT_AUDIT,
	OPT_AUDIT_OUTPUT,
	OPT_AUDIT_MAX_AGE,
	OPT_AUDIT_MAX_ROWS,
	OPT_MOUNT_TEMPLATE,
};

static const struct option long_opts[] = {
    {"workspace", required_argument, NULL, 'w'},
    {"timeout", required_argument, NULL, 't'},
    {"kill-after", required_argument, NULL, OPT_KILL_AFTER},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"cpu", required_argument, NULL, OPT_CPU},
    {"cpus", required_argument, NULL, OPT_CPUS},
    {"pids", required_argument, NULL, OPT_PIDS},
    {"nofile", required_argument, NULL, OPT_NOFILE},
    {"fsize", required_argument, NULL, OPT_FSIZE},
    {"tmpfs-size", required_argument, NULL, OPT_TMPFS},
    {"max-output", required_argument, NULL, OPT_MAX_OUTPUT},
    {"env", required_argument, NULL, OPT_ENV},
    {"allow-env", required_argument, NULL, OPT_ALLOW_ENV},
    {"net", required_argument, NULL, OPT_NET},
    {"mode", required_argument, NULL, OPT_MODE},
    {"max-concurrent", required_argument, NULL, OPT_MAX_CONCURRENT},
    {"prebuild", required_argument, NULL, OPT_PREBUILD},
    {"mount-template", required_argument, NULL, OPT_MOUNT_TEMPLATE},
    {"max-queue", required_argument, NULL, OPT_MAX_QUEUE},
    {"max-queue-bytes", required_argument, NULL, OPT_MAX_QUEUE_BYTES},
    {"max-sessions", required_argument, NULL, OPT_MAX_SESSIONS},
    {"session-idle", required_argument, NULL, OPT_SESSION_IDLE},
    {"placeholder-linger", required_argument, NULL, OPT_PLACEHOLDER_LINGER},
    {"max-jobs", required_argument, NULL, OPT_MAX_JOBS},
    {"job-timeout", required_argument, NULL, OPT_JOB_TIMEOUT},
    {"max-message-bytes", required_argument, NULL, OPT_MAX_MESSAGE},
    {"profile", required_argument, NULL, OPT_PROFILE},
    {"ro", required_argument, NULL, OPT_RO},
    {"rw", required_argument, NULL, OPT_RW},
    {"hide", required_argument, NULL, OPT_HIDE},
    {"redact", required_argument, NULL, OPT_REDACT},
    {"audit", required_argument, NULL, OPT_AUDIT},
    {"audit-output", no_argument, NULL, OPT_AUDIT_OUTPUT},
    {"audit-max-age", required_argument, NULL, OPT_AUDIT_MAX_AGE},
    {"audit-max-rows", required_argument, NULL, OPT_AUDIT_MAX_ROWS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* What the flags give beyond the base configuration. */
struct flags {
	const char *workspace;
	uint64_t timeout_ms, kill_after_ms;
	bool timeout_set, kill_after_set;
};

/* --prebuild N, or its default from CORRAL_MCP_PREBUILD (what names the value in an error) */
static int set_prebuild(struct mcp_options *o, const char *what, const char *arg)
{
	uint64_t v = 0;
	const char *why = NULL;
	if (strcmp(arg, "0") && parse_count(arg, 64, &v, &why) < 0)
		return cli_bad_value(what, arg, "expected a number of sandboxes from 0 to 64");
	o->prebuild = (unsigned)v;
	return 0;
}

static int add_allow(struct mcp_options *o, const char *pattern)
{
	char **g = realloc(o->allow_env, (o->n_allow_env + 1) * sizeof(*g));
	if (!g)
		return -1;
	o->allow_env = g;
	if (!(g[o->n_allow_env] = strdup(pattern)))
		return -1;
	o->n_allow_env++;
	return 0;
}

/* Apply one option to the base configuration (cfg) or the server options. Returns 0 or an
 * exit code. */
static int apply_opt(int c, const char *arg, struct mcp_options *o, struct flags *fl,
                     corral_config *cfg)
{
	struct corral_error err = {0};
	const char *why = NULL;
	uint64_t v = 0;
	switch (c) {
	case 'w':
		fl->workspace = arg;
		return 0;
	case OPT_PROFILE:
		return 0; /* applied before every other option */
	case 't':
		if (parse_duration_ms(arg, &fl->timeout_ms, &why) < 0)
			return cli_bad_value("--timeout", arg, why);
		fl->timeout_set = true;
		return 0;
	case OPT_KILL_AFTER:
		if (parse_duration_ms(arg, &fl->kill_after_ms, &why) < 0)
			return cli_bad_value("--kill-after", arg, why);
		fl->kill_after_set = true;
		return 0;
	case OPT_RO:
	case OPT_RW:
	case OPT_HIDE:
		if (corral_config_add_path(cfg,
		                           c == OPT_RO   ? CORRAL_PATH_READ
		                           : c == OPT_RW ? CORRAL_PATH_WRITE
		                                         : CORRAL_PATH_DENY,
		                           arg, &err) < 0)
			return cli_bad_value(c == OPT_RO   ? "--ro"
			                     : c == OPT_RW ? "--rw"
			                                   : "--hide",
			                     arg, err.message);
		return 0;
	case OPT_REDACT:
		if (!strcmp(arg, "redact") || !strcmp(arg, "on"))
			corral_config_set_redaction(cfg, CORRAL_REDACT_ON, &err);
		else if (!strcmp(arg, "flag"))
			corral_config_set_redaction(cfg, CORRAL_REDACT_FLAG, &err);
		else if (!strcmp(arg, "off"))
			corral_config_set_redaction(cfg, CORRAL_REDACT_OFF, &err);
		else
			return cli_bad_value("--redact", arg, "expected redact, flag or off");
		return 0;
	case OPT_AUDIT:
		if (!*arg)
			return cli_bad_value("--audit", arg, "expected a file path or off");
		free(o->audit_path);
		o->audit_path = NULL;
		o->audit_off = !strcmp(arg, "off");
		if (!o->audit_off && !(o->audit_path = strdup(arg)))
			return cli_bad_value("--audit", arg, "out of memory");
		return 0;
	case OPT_AUDIT_OUTPUT:
		o->audit_output = true;
		return 0;
	case OPT_AUDIT_MAX_AGE:
	case OPT_AUDIT_MAX_ROWS:
		if (cli_parse_retention(c == OPT_AUDIT_MAX_AGE ? "--audit-max-age" : "--audit-max-rows",
		                        arg, &v))
			return EXIT_CORRAL_FAILED;
		*(c == OPT_AUDIT_MAX_AGE ? &o->audit_max_age_ms : &o->audit_max_rows) = (int64_t)v;
		o->audit_retention_set = true;
		return 0;
	case OPT_MEMORY:
		return cli_set_limit(cfg, "--memory", arg);
	case OPT_FSIZE:
		return cli_set_limit(cfg, "--fsize", arg);
	case OPT_TMPFS:
		return cli_set_limit(cfg, "--tmpfs-size", arg);
	case OPT_CPU:
		return cli_set_limit(cfg, "--cpu", arg);
	case OPT_CPUS:
		return cli_set_limit(cfg, "--cpus", arg);
	case OPT_PIDS:
		return cli_set_limit(cfg, "--pids", arg);
	case OPT_NOFILE:
		return cli_set_limit(cfg, "--nofile", arg);
	case OPT_MAX_OUTPUT:
		if (parse_size(arg, &v, &why) < 0)
			return cli_bad_value("--max-output", arg, why);
		if (corral_config_set_output_cap(cfg, (size_t)v, &err) < 0)
			return cli_bad_value("--max-output", arg, err.message);
		return 0;
	case OPT_ENV: {
		const char *eq = strchr(arg, '=');
		if (eq) {
			char *name = strndup(arg, (size_t)(eq - arg));
			int r = name ? corral_config_setenv(cfg, name, eq + 1, &err)
			             : corral_set_error(&err, CORRAL_ENOMEM, ENOMEM, "env",
			                                "out of memory");
			free(name);
			if (r < 0)
				return cli_bad_value("--env", arg, err.message);
		} else if (corral_config_env_allow(cfg, arg, &err) < 0) {
			/* passing a host variable is an allow rule: the deny globs still win */
			return cli_bad_value("--env", arg, err.message);
		}
		return 0;
	}
	case OPT_ALLOW_ENV:
		if (!*arg || strspn(arg, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		                         "0123456789_*?[]!-") != strlen(arg))
			return cli_bad_value("--allow-env", arg,
			                     "expected a variable name or a glob such as 'MY_*'");
		if (add_allow(o, arg) < 0)
			return cli_bad_value("--allow-env", arg, "out of memory");
		return 0;
	case OPT_NET:
		if (!strcmp(arg, "none"))
			corral_config_set_net(cfg, CORRAL_NET_NONE, &err);
		else if (!strcmp(arg, "host"))
			corral_config_set_net(cfg, CORRAL_NET_HOST, &err);
		else
			return cli_bad_value("--net", arg, "expected none or host");
		return 0;
	case OPT_MODE:
		if (!strcmp(arg, "required"))
			corral_config_set_mode(cfg, CORRAL_MODE_REQUIRED, &err);
		else if (!strcmp(arg, "auto"))
			corral_config_set_mode(cfg, CORRAL_MODE_AUTO, &err);
		else if (!strcmp(arg, "none"))
			corral_config_set_mode(cfg, CORRAL_MODE_NONE, &err);
		else
			return cli_bad_value("--mode", arg, "expected required, auto or none");
		return 0;
	case OPT_MAX_CONCURRENT:
		if (parse_count(arg, 4096, &v, &why) < 0)
			return cli_bad_value("--max-concurrent", arg, why);
		o->max_concurrent = (unsigned)v;
		return 0;
	case OPT_PREBUILD:
		return set_prebuild(o, "--prebuild", arg);
	case OPT_MOUNT_TEMPLATE:
		if (strcmp(arg, "on") && strcmp(arg, "off"))
			return cli_bad_value("--mount-template", arg, "expected on or off");
		o->no_mount_template = !strcmp(arg, "off");
		return 0;
	case OPT_MAX_QUEUE:
		if (strcmp(arg, "0") && parse_count(arg, 1u << 24, &v, &why) < 0)
			return cli_bad_value("--max-queue", arg, why);
		o->max_queue = (size_t)v;
		return 0;
	case OPT_MAX_QUEUE_BYTES:
		if (parse_size(arg, &v, &why) < 0)
			return cli_bad_value("--max-queue-bytes", arg, why);
		o->max_queue_bytes = (size_t)v;
		return 0;
	case OPT_MAX_SESSIONS:
		if (parse_count(arg, 1024, &v, &why) < 0)
			return cli_bad_value("--max-sessions", arg, why);
		o->max_sessions = (unsigned)v;
		return 0;
	case OPT_MAX_JOBS:
		if (parse_count(arg, 1024, &v, &why) < 0)
			return cli_bad_value("--max-jobs", arg, why);
		o->max_jobs = (unsigned)v;
		return 0;
	case OPT_SESSION_IDLE:
		if (parse_duration_ms(arg, &v, &why) < 0)
			return cli_bad_value("--session-idle", arg, why);
		o->session_idle_ms = v;
		return 0;
	case OPT_PLACEHOLDER_LINGER:
		if (parse_duration_ms(arg, &v, &why) < 0)
			return cli_bad_value("--placeholder-linger", arg, why);
		if (v > 10000)
			return cli_bad_value(
			    "--placeholder-linger", arg,
			    "at most 10s: placeholders are for the length of a call, "
			    "and this only bridges the gap to the next one");
		o->placeholder_linger_ms = (unsigned)v;
		return 0;
	case OPT_JOB_TIMEOUT:
		if (parse_duration_ms(arg, &v, &why) < 0)
			return cli_bad_value("--job-timeout", arg, why);
		o->job_timeout_ms = v;
		return 0;
	case OPT_MAX_MESSAGE:
		if (parse_size(arg, &v, &why) < 0)
			return cli_bad_value("--max-message-bytes", arg, why);
		if (v < 1024 || v > (1ULL << 30))
			return cli_bad_value("--max-message-bytes", arg,
			                     "must be between 1k and 1G");
		o->max_message = (size_t)v;
		return 0;
	default:
		return EXIT_CORRAL_FAILED;
	}
}

/* Warn about --env NAME that a deny rule withholds: the operator asked for it by name. */
static void warn_withheld(const corral_config *cfg, int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i++) {
		if (strcmp(argv[i], "--env") || strchr(argv[i + 1], '='))
			continue;
		const char *rule = policy_env_denied_by(cfg, argv[i + 1]);
		if (rule && getenv(argv[i + 1]))
			cli_error("warning: --env %s is withheld by the deny rule '%s'; pass it "
			          "explicitly with --env %s=VALUE if the sandbox really needs it",
			          argv[i + 1], rule, argv[i + 1]);
	}
}

/* The whole policy, checked once before serving: a plan that cannot be built (a layer the
 * host lacks in mode required, a protected path that cannot be held, ...) would fail every
 * call, so the server refuses to start instead. */
static int validate_policy(const corral_config *cfg)
{
	char *doc = NULL;
	struct corral_error err = {0};
	if (corral_explain(cfg, &doc, &err) < 0) {
		cli_error("the policy cannot be applied: %s", err.message);
		return EXIT_CORRAL_FAILED;
	}
	json_t *d = json_loads(doc, 0, NULL);
	free(doc);
	const char *e = json_string_value(json_object_get(d, "error"));
	int r = 0;
	if (e) {
		cli_error("the policy cannot be applied, so no call could run: %s", e);
		r = EXIT_CORRAL_FAILED;
	} else if (!d) {
		cli_error("out of memory");
		r = EXIT_CORRAL_FAILED;
	}
	json_decref(d);
	return r;
}

static int configure(int argc, char **argv, struct mcp_options *o, corral_config *cfg)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	o->max_concurrent = (unsigned)(cores > 0 ? 2 * cores : 2);
	o->max_queue = 10000;
	o->max_queue_bytes = MCP_DEFAULT_MAX_QUEUE_BYTES;
	o->max_message = MCP_DEFAULT_MAX_MESSAGE;
	o->max_sessions = 8;
	o->session_idle_ms = 30 * 60 * 1000;
	o->max_jobs = 16;
	o->job_timeout_ms = 60 * 60 * 1000;
	o->max_finished_jobs = 64;
	o->placeholder_linger_ms = MCP_DEFAULT_PLACEHOLDER_LINGER_MS;
	/* --prebuild's default from the environment (the test suite's fast-path pass uses it) */
	const char *pre = getenv("CORRAL_MCP_PREBUILD");
	if (pre && *pre && set_prebuild(o, "CORRAL_MCP_PREBUILD", pre) != 0)
		return EXIT_CORRAL_FAILED;
	o->audit_max_age_ms = AUDIT_DEFAULT_MAX_AGE_MS;
	o->audit_max_rows = AUDIT_DEFAULT_MAX_ROWS;
	struct flags fl = {0};
	const char *profile = NULL;
	struct {
		int c;
		const char *arg;
	} *seen = calloc((size_t)argc + 1, sizeof(*seen));
	int n_seen = 0, c, r = 0;
	if (!seen) {
		cli_error("out of memory");
		return EXIT_CORRAL_FAILED;
	}
	while ((c = getopt_long(argc, argv, "w:t:h", long_opts, NULL)) != -1) {
		if (c == 'h') {
			usage_mcp(stdout);
			free(seen);
			return -1;
		}
		if (c == '?') {
			fprintf(stderr, "corral: run 'corral help mcp' for the list of options\n");
			free(seen);
			return EXIT_CORRAL_FAILED;
		}
		if (c == OPT_PROFILE)
			profile = optarg;
		seen[n_seen].c = c;
		seen[n_seen++].arg = optarg;
	}
	if (optind < argc) {
		cli_error("mcp takes no arguments ('%s'); run 'corral help mcp'", argv[optind]);
		free(seen);
		return EXIT_CORRAL_FAILED;
	}
	struct corral_error err = {0};
	/* The profile first, so that every flag overrides or adds to it. */
	if (profile && corral_config_load_profile(cfg, profile, &err) < 0) {
		cli_error("%s", err.message);
		free(seen);
		return EXIT_CORRAL_FAILED;
	}
	for (int i = 0; i < n_seen && !r; i++)
		r = apply_opt(seen[i].c, seen[i].arg, o, &fl, cfg);
	free(seen);
	if (r)
		return r;
	char buf[PATH_MAX];
	const char *ws = fl.workspace;
	if (!ws && !(ws = getcwd(buf, sizeof(buf)))) {
		cli_error("cannot read the current directory: %s; give --workspace DIR",
		          strerror(errno));
		return EXIT_CORRAL_FAILED;
	}
	if (corral_config_set_workspace(cfg, ws, &err) < 0)
		return cli_bad_value("--workspace", ws, err.message);
	if (!(o->workspace = strdup(cfg->workspace))) {
		cli_error("out of memory");
		return EXIT_CORRAL_FAILED;
	}
	/* flags override the profile's timeouts; otherwise the profile (or default) stands */
	if ((fl.timeout_set || fl.kill_after_set) &&
	    corral_config_set_timeout_ms(cfg, fl.timeout_set ? fl.timeout_ms : cfg->timeout_ms,
	                                 fl.kill_after_set ? fl.kill_after_ms : cfg->kill_after_ms,
	                                 &err) < 0) {
		cli_error("%s", err.message);
		return EXIT_CORRAL_FAILED;
	}
	o->timeout_ms = cfg->timeout_ms;
	o->kill_after_ms = cfg->kill_after_ms;
	o->mode = cfg->mode;
	o->net = cfg->net;
	warn_withheld(cfg, argc, argv);
	return validate_policy(cfg);
}

int cmd_mcp(int argc, char **argv)
{
	struct mcp_options o;
	memset(&o, 0, sizeof(o));
	if (!(o.base = corral_config_new())) {
		cli_error("out of memory");
		return EXIT_CORRAL_FAILED;
	}
	int r = configure(argc, argv, &o, o.base);
	if (r) {
		mcp_options_free(&o);
		return r < 0 ? 0 : r;
	}
	if (cli_std_closed[0] || cli_std_closed[1]) {
		cli_error("%s is not open: the MCP stdio transport reads requests on stdin and "
		          "writes replies on stdout; start corral mcp with both connected to the "
		          "client",
		          cli_std_closed[0] ? "stdin" : "stdout");
		mcp_options_free(&o);
		return EXIT_CORRAL_FAILED;
	}
	r = mcp_serve(&o, STDIN_FILENO, STDOUT_FILENO);
	mcp_options_free(&o);
	return r;
}
