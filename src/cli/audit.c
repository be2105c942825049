/* corral audit: list, show, export, summarize, verify and prune the audit store
 * (docs/audit.md). A thin reader of src/audit.h: the store does the SQL, this file the
 * flags and the rendering. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "audit.h"
#include "cli/cli.h"
#include "internal.h"

void usage_audit(FILE *f)
{
	fputs("Usage: corral audit [--db PATH] COMMAND [OPTIONS]\n"
	      "\n"
	      "Read the audit store: every execution and security event, chained by SHA-256 so\n"
	      "that an edited or deleted row is detected. The store is $XDG_STATE_HOME/corral/\n"
	      "audit.db, else ~/.local/state/corral/audit.db, unless --db PATH names another.\n"
	      "\n"
	      "Commands:\n"
	      "  list [--since DUR] [--failed] [--kind KIND] [--limit N] [--json]\n"
	      "                     executions, newest first (default limit 20; 0 = all)\n"
	      "  show ID [--json]   one execution (ID or a unique prefix): its command, status,\n"
	      "                     limits, isolation, events, children and stored output\n"
	      "  export [--json]    every row in chain order as JSON lines, with the hashes\n"
	      "  stats [--since DUR] [--json]\n"
	      "                     count, failure and timeout rates, p50/p95 duration\n"
	      "  verify [--json]    recompute the hash chain; exit 1 and name the first bad row\n"
	      "                     if a row was edited or deleted (or the table, if dropped)\n"
	      "  prune [--max-age DUR] [--max-rows N]\n"
	      "                     delete the oldest rows (default 30d and 100000 rows); the\n"
	      "                     chain stays verifiable\n"
	      "  path               print the store's path\n"
	      "\n"
	      "DUR is 30s, 15m, 2h or 7d. KIND is run, session_cmd, job, pipeline_stage or\n"
	      "mcp_call.\n"
	      "Exit status: 0 ok; 1 verify found tampering; 125 error (usage, store unavailable,\n"
	      "output not written).\n",
	      f);
}

enum { O_DB = 256, O_SINCE, O_FAILED, O_KIND, O_LIMIT, O_JSON, O_MAX_AGE, O_MAX_ROWS };

static const struct option audit_opts[] = {
    {"db", required_argument, NULL, O_DB},
    {"since", required_argument, NULL, O_SINCE},
    {"failed", no_argument, NULL, O_FAILED},
    {"kind", required_argument, NULL, O_KIND},
    {"limit", required_argument, NULL, O_LIMIT},
    {"json", no_argument, NULL, O_JSON},
    {"max-age", required_argument, NULL, O_MAX_AGE},
    {"max-rows", required_argument, NULL, O_MAX_ROWS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct audit_opts {
	const char *db, *sub, *id;
	struct audit_filter filter;
	bool json, since_set;
	int64_t max_age_ms, max_rows;
};

static int bad(const char *flag, const char *value, const char *why)
{
	cli_error("invalid value '%s' for %s: %s", value, flag, why);
	return EXIT_CORRAL_FAILED;
}

int cli_parse_retention(const char *flag, const char *arg, uint64_t *out)
{
	const char *why = NULL;
	bool rows = strstr(flag, "rows") != NULL;
	*out = 0;
	if (rows ? strcmp(arg, "0") && parse_count(arg, 1u << 30, out, &why) < 0
	         : parse_duration_ms(arg, out, &why) < 0)
		return bad(flag, arg, why);
	return 0;
}

/* Which options each subcommand takes (all take --db). */
static bool opt_allowed(const char *sub, int c)
{
	static const struct {
		const char *sub;
		int opts[5];
	} table[] = {
	    {"list", {O_SINCE, O_FAILED, O_KIND, O_LIMIT, O_JSON}},
	    {"show", {O_JSON}},
	    {"export", {O_JSON}},
	    {"stats", {O_SINCE, O_KIND, O_JSON}},
	    {"verify", {O_JSON}},
	    {"prune", {O_MAX_AGE, O_MAX_ROWS}},
	};
	if (c == O_DB)
		return true;
	for (size_t i = 0; i < ARRAY_SIZE(table); i++)
		if (!strcmp(table[i].sub, sub))
			for (size_t k = 0; k < ARRAY_SIZE(table[i].opts); k++)
				if (table[i].opts[k] == c)
					return true;
	return false;
}

static int apply(int c, const char *arg, struct audit_opts *o)
{
	const char *why = NULL;
	uint64_t v = 0;
	struct timespec now;
	switch (c) {
	case O_DB:
		o->db = arg;
		return 0;
	case O_SINCE:
		if (parse_duration_ms(arg, &v, &why) < 0)
			return bad("--since", arg, why);
		clock_gettime(CLOCK_REALTIME, &now);
		o->filter.since_ms =
		    (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 - (int64_t)v;
		return 0;
	case O_FAILED:
		o->filter.failed_only = true;
		return 0;
	case O_KIND:
		if (!audit_valid_kind(arg)) {
			char kinds[128] = "";
			for (size_t i = 0; audit_kinds[i]; i++)
				snprintf(kinds + strlen(kinds), sizeof(kinds) - strlen(kinds),
				         "%s%s", i ? ", " : "expected one of ", audit_kinds[i]);
			return bad("--kind", arg, kinds);
		}
		o->filter.kind = arg;
		return 0;
	case O_LIMIT:
		if (strcmp(arg, "0") && parse_count(arg, 1u << 30, &v, &why) < 0)
			return bad("--limit", arg, why);
		o->filter.limit = (int64_t)v;
		return 0;
	case O_JSON:
		o->json = true;
		return 0;
	case O_MAX_AGE:
		if (cli_parse_retention("--max-age", arg, &v))
			return EXIT_CORRAL_FAILED;
		o->max_age_ms = (int64_t)v;
		return 0;
	case O_MAX_ROWS:
		if (cli_parse_retention("--max-rows", arg, &v))
			return EXIT_CORRAL_FAILED;
		o->max_rows = (int64_t)v;
		return 0;
	}
	return EXIT_CORRAL_FAILED;
}

/* [--db PATH] SUB [OPTIONS] [ID]: returns 0, -1 for help shown, or an exit code. */
static int parse(int argc, char **argv, struct audit_opts *o)
{
	o->filter.limit = 20;
	o->max_age_ms = AUDIT_DEFAULT_MAX_AGE_MS;
	o->max_rows = AUDIT_DEFAULT_MAX_ROWS;
	int c;
	optind = 0; /* 0, not 1: glibc re-reads the ordering ('+') only on a full reset */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+h", audit_opts, NULL)) != -1) {
		if (c == 'h') {
			usage_audit(stdout);
			return -1;
		}
		if (c != O_DB) {
			cli_error(
			    "audit: unknown option '%s' before the command; run 'corral audit "
			    "--help'",
			    argv[optind - 1]);
			return EXIT_CORRAL_FAILED;
		}
		o->db = optarg;
	}
	if (optind >= argc) {
		usage_audit(stderr);
		return EXIT_CORRAL_FAILED;
	}
	o->sub = argv[optind];
	int sub_argc = argc - optind;
	char **sub_argv = argv + optind;
	optind = 0;
	while ((c = getopt_long(sub_argc, sub_argv, "h", audit_opts, NULL)) != -1) {
		if (c == 'h') {
			usage_audit(stdout);
			return -1;
		}
		if (c == '?' || !opt_allowed(o->sub, c)) {
			cli_error(
			    "audit %s: option '%s' is unknown here or needs a value; run 'corral "
			    "audit --help'",
			    o->sub, sub_argv[optind - 1]);
			return EXIT_CORRAL_FAILED;
		}
		int r = apply(c, optarg, o);
		if (r)
			return r;
	}
	int want = !strcmp(o->sub, "show") ? 1 : 0;
	if (sub_argc - optind != want) {
		if (want)
			cli_error("audit show: give one execution id (or a unique prefix of it)");
		else
			cli_error("audit %s: unexpected argument '%s'", o->sub, sub_argv[optind]);
		return EXIT_CORRAL_FAILED;
	}
	if (want)
		o->id = sub_argv[optind];
	return 0;
}

/* ---- rendering ------------------------------------------------------------------------ */

static const char *jstr(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static long long jint(json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

static void fmt_time(long long ms, char *buf, size_t n)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	if (!localtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, n, "%lld", ms);
}

static void fmt_duration(long long ms, char *buf, size_t n)
{
	if (ms < 1000)
		snprintf(buf, n, "%lldms", ms);
	else if (ms < 60000)
		snprintf(buf, n, "%.1fs", (double)ms / 1000);
	else if (ms < 3600000)
		snprintf(buf, n, "%lldm%02llds", ms / 60000, ms / 1000 % 60);
	else
		snprintf(buf, n, "%lldh%02lldm", ms / 3600000, ms / 60000 % 60);
}

/* exit 0, SIGKILL, timeout, memory, denied, ... */
static void fmt_status(json_t *o, char *buf, size_t n)
{
	json_t *e = json_object_get(o, "error");
	if (json_is_object(e)) {
		const char *name = jstr(e, "name");
		snprintf(buf, n, "%s",
		         name && !strcmp(name, "denied by policy") ? "denied"
		         : name && strstr(name, "not found")       ? "not found"
		                                                   : "error");
	} else if (json_is_true(json_object_get(o, "timed_out"))) {
		snprintf(buf, n, "timeout");
	} else if (jstr(o, "limit_hit")) {
		snprintf(buf, n, "%s", jstr(o, "limit_hit"));
	} else if (json_is_integer(json_object_get(o, "signal"))) {
		int sig = (int)jint(o, "signal");
		const char *abbrev = sigabbrev_np(sig);
		if (abbrev)
			snprintf(buf, n, "SIG%s", abbrev);
		else
			snprintf(buf, n, "signal %d", sig);
	} else if (json_is_integer(json_object_get(o, "exit_code"))) {
		snprintf(buf, n, "exit %lld", jint(o, "exit_code"));
	} else {
		snprintf(buf, n, "-");
	}
}

/* The command as one line: the shell string, else argv joined; control characters shown
 * as spaces, cut at max bytes on a character boundary. */
static void fmt_command(json_t *o, char *buf, size_t n, size_t max)
{
	size_t len = 0;
	buf[0] = '\0';
	const char *cmd = jstr(o, "command");
	if (cmd) {
		snprintf(buf, n, "%s", cmd);
	} else {
		size_t i;
		json_t *a;
		json_array_foreach(json_object_get(o, "argv"), i, a)
		{
			len = strlen(buf);
			snprintf(buf + len, n - len, "%s%s", i ? " " : "", json_string_value(a));
		}
	}
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
	len = strlen(buf);
	if (len > max && max > 3) {
		size_t cut = max - 3;
		while (cut > 0 && ((unsigned char)buf[cut] & 0xc0) == 0x80)
			cut--;
		snprintf(buf + cut, n - cut, "...");
	}
}

static void print_list(json_t *arr)
{
	size_t i;
	json_t *o;
	printf("%-19s  %-8s  %-14s  %-9s  %8s  %s\n", "STARTED", "ID", "KIND", "STATUS", "DURATION",
	       "COMMAND");
	json_array_foreach(arr, i, o)
	{
		char t[32], st[32], d[32], cmd[4096];
		fmt_time(jint(o, "started_at"), t, sizeof(t));
		fmt_status(o, st, sizeof(st));
		fmt_duration(jint(o, "duration_ms"), d, sizeof(d));
		fmt_command(o, cmd, sizeof(cmd), 60);
		printf("%-19s  %-8.8s  %-14s  %-9s  %8s  %s\n", t, jstr(o, "id"), jstr(o, "kind"),
		       st, d, cmd);
	}
	if (!json_array_size(arr))
		printf("(no executions)\n");
}

static void print_block(const char *title, const char *text)
{
	if (!text)
		return;
	printf("%s:\n", title);
	const char *p = text;
	while (*p) {
		const char *nl = strchr(p, '\n');
		int len = nl ? (int)(nl - p) : (int)strlen(p);
		printf("  %.*s\n", len, p);
		p += len + (nl ? 1 : 0);
	}
}

static void print_show_execution(json_t *o)
{
	char buf[4096], d[32];
	printf("id:         %s\n", jstr(o, "id"));
	printf("kind:       %s (client %s)\n", jstr(o, "kind"),
	       jstr(o, "client") ? jstr(o, "client") : "-");
	if (jstr(o, "parent"))
		printf("parent:     %s\n", jstr(o, "parent"));
	json_t *ci = json_object_get(o, "client_info");
	if (json_is_object(ci)) {
		char *s = json_dumps(ci, JSON_COMPACT);
		printf("client info: %s\n", s ? s : "");
		free(s);
	}
	fmt_time(jint(o, "started_at"), buf, sizeof(buf));
	printf("started:    %s (%lld)\n", buf, jint(o, "started_at"));
	fmt_command(o, buf, sizeof(buf), sizeof(buf) - 1);
	printf("command:    %s\n", buf);
	if (jstr(o, "cwd"))
		printf("cwd:        %s\n", jstr(o, "cwd"));
	if (jstr(o, "profile"))
		printf("profile:    %s%s%s\n", jstr(o, "profile"),
		       jstr(o, "policy_hash") ? ", policy " : "",
		       jstr(o, "policy_hash") ? jstr(o, "policy_hash") : "");
	fmt_status(o, buf, sizeof(buf));
	printf("status:     %s\n", buf);
	json_t *e = json_object_get(o, "error");
	if (json_is_object(e))
		printf("error:      %s\n", jstr(e, "message"));
	fmt_duration(jint(o, "duration_ms"), d, sizeof(d));
	printf("duration:   %s (user %lldms, sys %lldms, max rss %lld kB)\n", d, jint(o, "user_ms"),
	       jint(o, "sys_ms"), jint(o, "max_rss_kb"));
	printf("output:     stdout %lld bytes, stderr %lld bytes%s\n", jint(o, "stdout_bytes"),
	       jint(o, "stderr_bytes"),
	       json_is_string(json_object_get(o, "stdout")) ? "" : " (not stored)");
	printf("isolation: ");
	const char *name;
	json_t *l;
	json_object_foreach(json_object_get(o, "isolation"), name, l)
	{
		printf(" %s%s", name, json_is_true(json_object_get(l, "applied")) ? "" : "(off)");
	}
	printf("\n");
	printf("violations: %zu, redactions: %lld\n",
	       json_array_size(json_object_get(o, "violations")), jint(o, "redactions"));
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(o, "events"), i, v)
	{
		char *s = json_dumps(json_object_get(v, "detail"), JSON_COMPACT | JSON_ENCODE_ANY);
		printf("event:      %s %s\n", jstr(v, "kind"), s ? s : "");
		free(s);
	}
	json_array_foreach(json_object_get(o, "children"), i, v)
	{
		printf("child:      %s\n", json_string_value(v));
	}
	printf("chain:      seq %lld, hash %s\n", jint(o, "seq"), jstr(o, "row_hash"));
	print_block("stdout", jstr(o, "stdout"));
	print_block("stderr", jstr(o, "stderr"));
}

static void print_show(json_t *o)
{
	if (strcmp(jstr(o, "type"), "event")) {
		print_show_execution(o);
		return;
	}
	char t[32];
	fmt_time(jint(o, "at"), t, sizeof(t));
	char *s = json_dumps(json_object_get(o, "detail"), JSON_COMPACT | JSON_ENCODE_ANY);
	printf("event:      %s\nid:         %s\nat:         %s\nexecution:  %s\ndetail:     %s\n"
	       "chain:      seq %lld, hash %s\n",
	       jstr(o, "kind"), jstr(o, "id"), t,
	       jstr(o, "execution_id") ? jstr(o, "execution_id") : "-", s ? s : "", jint(o, "seq"),
	       jstr(o, "row_hash"));
	free(s);
}

static void print_counts(const char *title, json_t *o)
{
	const char *k;
	json_t *v;
	int first = 1;
	printf("%s", title);
	json_object_foreach(o, k, v)
	{
		printf("%s%s %lld", first ? " " : ", ", k, (long long)json_integer_value(v));
		first = 0;
	}
	printf("%s\n", first ? " -" : "");
}

static void print_stats(json_t *o)
{
	char p50[32], p95[32], max[32];
	json_t *d = json_object_get(o, "duration_ms");
	fmt_duration(jint(d, "p50"), p50, sizeof(p50));
	fmt_duration(jint(d, "p95"), p95, sizeof(p95));
	fmt_duration(jint(d, "max"), max, sizeof(max));
	printf("executions: %lld (failed %lld, %.1f%%; timed out %lld, %.1f%%)\n",
	       jint(o, "executions"), jint(o, "failed"),
	       100 * json_real_value(json_object_get(o, "failure_rate")), jint(o, "timeouts"),
	       100 * json_real_value(json_object_get(o, "timeout_rate")));
	printf("duration:   p50 %s, p95 %s, max %s\n", p50, p95, max);
	print_counts("by kind:   ", json_object_get(o, "by_kind"));
	print_counts("events:    ", json_object_get(o, "events"));
}

/* ---- subcommands ---------------------------------------------------------------------- */

static int emit_json(json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!s) {
		cli_error("audit: out of memory");
		return EXIT_CORRAL_FAILED;
	}
	puts(s);
	free(s);
	return 0;
}

/* A failed write stops the export; main() says why, as for every write to stdout. */
static int print_line(void *ud, const char *line)
{
	(void)ud;
	return puts(line) < 0 ? CORRAL_ESYS : 0;
}

static int run_sub(struct audit *a, const struct audit_opts *o, struct corral_error *err)
{
	json_t *j = NULL;
	int rc = 0;
	if (!strcmp(o->sub, "list") || !strcmp(o->sub, "stats") || !strcmp(o->sub, "show")) {
		bool list = !strcmp(o->sub, "list"), show = !strcmp(o->sub, "show");
		int r = list   ? audit_list(a, &o->filter, &j, err)
		        : show ? audit_show(a, o->id, &j, err)
		               : audit_stats(a, &o->filter, &j, err);
		if (r < 0)
			return -1;
		if (o->json)
			rc = emit_json(j);
		else if (list)
			print_list(j);
		else if (show)
			print_show(j);
		else
			print_stats(j);
		json_decref(j);
		return rc;
	}
	if (!strcmp(o->sub, "export")) {
		if (audit_export(a, print_line, NULL, err) < 0)
			return err->code ? -1 : EXIT_CORRAL_FAILED; /* no code: stdout failed */
		return 0;
	}
	if (!strcmp(o->sub, "verify")) {
		char *report = NULL;
		int r = audit_verify(a, &report, err);
		if (r < 0)
			return -1;
		json_t *rep = json_loads(report, 0, NULL);
		if (o->json || !rep) {
			puts(report);
		} else if (r == 0) {
			printf(
			    "audit store %s: chain intact, %lld rows verified (head seq %lld, hash "
			    "%s)\n",
			    jstr(rep, "path"), jint(rep, "rows"), jint(rep, "head_seq"),
			    jstr(rep, "head_hash"));
		} else {
			json_t *b = json_object_get(rep, "first_bad");
			if (!json_object_get(b, "seq")) /* a missing table */
				printf("audit store %s: TAMPERED: %s\n", jstr(rep, "path"),
				       jstr(b, "reason"));
			else
				printf("audit store %s: TAMPERED: seq %lld%s%s%s%s: %s\n",
				       jstr(rep, "path"), jint(b, "seq"),
				       jstr(b, "table") ? " in " : "",
				       jstr(b, "table") ? jstr(b, "table") : "",
				       jstr(b, "id") ? ", id " : "",
				       jstr(b, "id") ? jstr(b, "id") : "", jstr(b, "reason"));
		}
		json_decref(rep);
		free(report);
		return r == 0 ? 0 : 1;
	}
	if (!strcmp(o->sub, "prune")) {
		int n = audit_prune(a, o->max_age_ms, o->max_rows, err);
		if (n < 0)
			return -1;
		printf("pruned %d row%s from %s\n", n, n == 1 ? "" : "s", audit_path(a));
		return 0;
	}
	cli_error("audit: unknown command '%s'; run 'corral audit --help'", o->sub);
	return EXIT_CORRAL_FAILED;
}

int cmd_audit(int argc, char **argv)
{
	struct audit_opts o;
	memset(&o, 0, sizeof(o));
	int r = parse(argc, argv, &o);
	if (r)
		return r < 0 ? 0 : r;
	struct corral_error err = {0};
	if (!strcmp(o.sub, "path")) {
		char *p = NULL;
		if (!o.db && audit_default_path(&p, true, &err) < 0) {
			cli_error("%s", err.message);
			return EXIT_CORRAL_FAILED;
		}
		puts(o.db ? o.db : p);
		free(p);
		return 0;
	}
	static const char *const subs[] = {"list", "show", "export", "stats", "verify", "prune"};
	bool known = false;
	for (size_t i = 0; i < ARRAY_SIZE(subs); i++)
		known = known || !strcmp(o.sub, subs[i]);
	if (!known) {
		cli_error("audit: unknown command '%s'; run 'corral audit --help'", o.sub);
		return EXIT_CORRAL_FAILED;
	}
	struct audit *a = NULL;
	if (audit_open_existing(o.db, &a, &err) < 0) {
		cli_error("%s", err.message);
		return EXIT_CORRAL_FAILED;
	}
	r = run_sub(a, &o, &err);
	if (r < 0) {
		cli_error("%s", err.message);
		r = EXIT_CORRAL_FAILED;
	}
	audit_close(a);
	return r;
}
