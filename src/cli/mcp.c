/* corral mcp: parse the server's fixed settings (workspace, limits, environment), then serve
 * the Model Context Protocol on stdin/stdout until EOF or a signal. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "internal.h"
#include "mcp/mcp.h"

void usage_mcp(FILE *f)
{
	fputs(
	    "Usage: corral mcp [OPTIONS]\n"
	    "\n"
	    "Serve the Model Context Protocol (2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)\n"
	    "on stdin/stdout for agent hosts. Tools: run_command, run_code. Every call runs in\n"
	    "a fresh sandbox with the settings below; a call can only narrow them (a shorter\n"
	    "timeout, a cwd inside the workspace, variables from the --allow-env list).\n"
	    "Logs go to stderr. See docs/mcp.md for host configuration.\n"
	    "\n"
	    "Options:\n"
	    "  -w, --workspace DIR      the read-write workspace (default: current directory)\n"
	    "  -t, --timeout DUR        per-call wall-clock timeout and its maximum (default\n"
	    "                           60s; 0 = none); DUR is 30, 1.5, 250ms, 2m or 1h\n"
	    "      --kill-after DUR     grace between SIGTERM and SIGKILL on timeout (default 2s)\n"
	    "      --memory SIZE        memory limit per call (512k, 64M, 2G)\n"
	    "      --cpu SECONDS        CPU time limit per call (0 = none)\n"
	    "      --pids N             process limit per call (default 1024; 0 = none)\n"
	    "      --nofile N           open files limit (default 1024)\n"
	    "      --fsize SIZE         largest file a call may write\n"
	    "      --tmpfs-size SIZE    size of the private /tmp (default 256M)\n"
	    "      --max-output SIZE    bytes kept per stream; head and tail kept (default 1M)\n"
	    "      --env NAME           pass NAME from corral's environment to every call\n"
	    "      --env NAME=VALUE     set NAME for every call\n"
	    "      --allow-env PATTERN  names a call may set through its env argument (glob,\n"
	    "                           repeatable; default: none)\n"
	    "      --net none|host      network: none (loopback only, default) or the host's\n"
	    "      --mode MODE          required (default), auto or none; see corral help run\n"
	    "      --max-concurrent N   sandboxes running at once (default: 2 x cores); more\n"
	    "                           calls wait in a FIFO queue\n"
	    "      --max-queue N        calls that may wait (default 10000); beyond, a call\n"
	    "                           gets a \"server busy\" error result\n"
	    "      --max-message-bytes SIZE  largest request line (default 4M); a longer one\n"
	    "                           is discarded and answered with an error\n"
	    "  -h, --help               show this help\n",
	    f);
}

enum {
	OPT_KILL_AFTER = 256,
	OPT_MEMORY,
	OPT_CPU,
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
	OPT_MAX_QUEUE,
	OPT_MAX_MESSAGE,
};

static const struct option long_opts[] = {
    {"workspace", required_argument, NULL, 'w'},
    {"timeout", required_argument, NULL, 't'},
    {"kill-after", required_argument, NULL, OPT_KILL_AFTER},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"cpu", required_argument, NULL, OPT_CPU},
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
    {"max-queue", required_argument, NULL, OPT_MAX_QUEUE},
    {"max-message-bytes", required_argument, NULL, OPT_MAX_MESSAGE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int bad_value(const char *flag, const char *value, const char *why)
{
	cli_error("invalid value '%s' for %s: %s", value, flag, why);
	return EXIT_CORRAL_FAILED;
}

static int add_env(struct mcp_options *o, const char *name, const char *value)
{
	struct mcp_env *g = realloc(o->env, (o->n_env + 1) * sizeof(*g));
	if (!g)
		return -1;
	o->env = g;
	g[o->n_env].name = strdup(name);
	g[o->n_env].value = strdup(value);
	if (!g[o->n_env].name || !g[o->n_env].value) {
		free(g[o->n_env].name);
		free(g[o->n_env].value);
		return -1;
	}
	o->n_env++;
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

/* Apply one option. cfg is a scratch configuration that validates values the way every
 * call's configuration will take them. Returns 0 or an exit code. */
static int apply_opt(int c, const char *arg, struct mcp_options *o, corral_config *cfg)
{
	struct corral_error err = {0};
	const char *why = NULL;
	uint64_t v = 0;
	const char *flag = NULL;
	enum corral_limit lim = CORRAL_LIMIT__COUNT;
	switch (c) {
	case 'w':
		if (corral_config_set_workspace(cfg, arg, &err) < 0)
			return bad_value("--workspace", arg, err.message);
		free(o->workspace);
		o->workspace = realpath(arg, NULL);
		if (!o->workspace)
			return bad_value("--workspace", arg, strerror(errno));
		return 0;
	case 't':
		if (parse_duration_ms(arg, &o->timeout_ms, &why) < 0)
			return bad_value("--timeout", arg, why);
		return 0;
	case OPT_KILL_AFTER:
		if (parse_duration_ms(arg, &o->kill_after_ms, &why) < 0)
			return bad_value("--kill-after", arg, why);
		return 0;
	case OPT_MEMORY:
	case OPT_FSIZE:
	case OPT_TMPFS:
		flag = c == OPT_MEMORY ? "--memory" : c == OPT_FSIZE ? "--fsize" : "--tmpfs-size";
		lim = c == OPT_MEMORY  ? CORRAL_LIMIT_MEMORY
		      : c == OPT_FSIZE ? CORRAL_LIMIT_FSIZE
		                       : CORRAL_LIMIT_TMPFS;
		if (parse_size(arg, &v, &why) < 0)
			return bad_value(flag, arg, why);
		break;
	case OPT_CPU:
		flag = "--cpu";
		lim = CORRAL_LIMIT_CPU_S;
		if (strcmp(arg, "0") && parse_count(arg, 366ULL * 86400, &v, &why) < 0)
			return bad_value(flag, arg, why);
		break;
	case OPT_PIDS:
	case OPT_NOFILE:
		flag = c == OPT_PIDS ? "--pids" : "--nofile";
		lim = c == OPT_PIDS ? CORRAL_LIMIT_PIDS : CORRAL_LIMIT_NOFILE;
		if ((c == OPT_NOFILE || strcmp(arg, "0")) &&
		    parse_count(arg, 1u << 22, &v, &why) < 0)
			return bad_value(flag, arg, why);
		break;
	case OPT_MAX_OUTPUT:
		if (parse_size(arg, &v, &why) < 0)
			return bad_value("--max-output", arg, why);
		if (corral_config_set_output_cap(cfg, (size_t)v, &err) < 0)
			return bad_value("--max-output", arg, err.message);
		o->output_cap = (size_t)v;
		return 0;
	case OPT_ENV: {
		const char *eq = strchr(arg, '=');
		char *name = eq ? strndup(arg, (size_t)(eq - arg)) : strdup(arg);
		const char *val = eq ? eq + 1 : getenv(arg);
		int r = 0;
		if (!name)
			r = bad_value("--env", arg, "out of memory");
		else if (!eq && !env_name_valid(name))
			r = bad_value("--env", arg, "not a valid variable name");
		else if (val && corral_config_setenv(cfg, name, val, &err) < 0)
			r = bad_value("--env", arg, err.message);
		else if (val && add_env(o, name, val) < 0)
			r = bad_value("--env", arg, "out of memory");
		/* NAME that corral's environment lacks: nothing to pass */
		free(name);
		return r;
	}
	case OPT_ALLOW_ENV:
		if (!*arg || strspn(arg, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		                         "0123456789_*?[]!-") != strlen(arg))
			return bad_value("--allow-env", arg,
			                 "expected a variable name or a glob such as 'MY_*'");
		if (add_allow(o, arg) < 0)
			return bad_value("--allow-env", arg, "out of memory");
		return 0;
	case OPT_NET:
		if (!strcmp(arg, "none"))
			o->net = CORRAL_NET_NONE;
		else if (!strcmp(arg, "host"))
			o->net = CORRAL_NET_HOST;
		else
			return bad_value("--net", arg, "expected none or host");
		return 0;
	case OPT_MODE:
		if (!strcmp(arg, "required"))
			o->mode = CORRAL_MODE_REQUIRED;
		else if (!strcmp(arg, "auto"))
			o->mode = CORRAL_MODE_AUTO;
		else if (!strcmp(arg, "none"))
			o->mode = CORRAL_MODE_NONE;
		else
			return bad_value("--mode", arg, "expected required, auto or none");
		return 0;
	case OPT_MAX_CONCURRENT:
		if (parse_count(arg, 4096, &v, &why) < 0)
			return bad_value("--max-concurrent", arg, why);
		o->max_concurrent = (unsigned)v;
		return 0;
	case OPT_MAX_QUEUE:
		if (strcmp(arg, "0") && parse_count(arg, 1u << 24, &v, &why) < 0)
			return bad_value("--max-queue", arg, why);
		o->max_queue = (size_t)v;
		return 0;
	case OPT_MAX_MESSAGE:
		if (parse_size(arg, &v, &why) < 0)
			return bad_value("--max-message-bytes", arg, why);
		if (v < 1024 || v > (1ULL << 30))
			return bad_value("--max-message-bytes", arg, "must be between 1k and 1G");
		o->max_message = (size_t)v;
		return 0;
	default:
		return EXIT_CORRAL_FAILED;
	}
	if (corral_config_set_limit(cfg, lim, v, &err) < 0)
		return bad_value(flag, arg, err.message);
	o->limits[lim] = v;
	o->limit_set[lim] = true;
	return 0;
}

static int configure(int argc, char **argv, struct mcp_options *o, corral_config *cfg)
{
	o->timeout_ms = 60000;
	o->kill_after_ms = 2000;
	o->mode = CORRAL_MODE_REQUIRED;
	o->net = CORRAL_NET_NONE;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	o->max_concurrent = (unsigned)(cores > 0 ? 2 * cores : 2);
	o->max_queue = 10000;
	o->max_message = MCP_DEFAULT_MAX_MESSAGE;
	int c;
	while ((c = getopt_long(argc, argv, "w:t:h", long_opts, NULL)) != -1) {
		if (c == 'h') {
			usage_mcp(stdout);
			return -1;
		}
		if (c == '?') {
			fprintf(stderr, "corral: run 'corral help mcp' for the list of options\n");
			return EXIT_CORRAL_FAILED;
		}
		int r = apply_opt(c, optarg, o, cfg);
		if (r)
			return r;
	}
	if (optind < argc) {
		cli_error("mcp takes no arguments ('%s'); run 'corral help mcp'", argv[optind]);
		return EXIT_CORRAL_FAILED;
	}
	if (!o->workspace) {
		char buf[PATH_MAX];
		if (!getcwd(buf, sizeof(buf))) {
			cli_error("cannot read the current directory: %s; give --workspace DIR",
			          strerror(errno));
			return EXIT_CORRAL_FAILED;
		}
		int r = apply_opt('w', buf, o, cfg);
		if (r)
			return r;
	}
	struct corral_error err = {0};
	if (corral_config_set_timeout_ms(cfg, o->timeout_ms, o->kill_after_ms, &err) < 0) {
		cli_error("%s", err.message);
		return EXIT_CORRAL_FAILED;
	}
	return 0;
}

int cmd_mcp(int argc, char **argv)
{
	struct mcp_options o;
	memset(&o, 0, sizeof(o));
	corral_config *cfg = corral_config_new();
	if (!cfg) {
		cli_error("out of memory");
		return EXIT_CORRAL_FAILED;
	}
	int r = configure(argc, argv, &o, cfg);
	corral_config_free(cfg);
	if (r) {
		mcp_options_free(&o);
		return r < 0 ? 0 : r;
	}
	r = mcp_serve(&o, STDIN_FILENO, STDOUT_FILENO);
	mcp_options_free(&o);
	return r;
}
