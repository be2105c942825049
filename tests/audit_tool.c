/* Test helper for the audit store (tests/integration/audit.sh): records made-up executions
 * and events through src/audit.h, the way the run paths do, without running anything.
 *
 *   audit_tool DB open                       open (create) the store; exit 1 with the error
 *   audit_tool DB record [OPTIONS]           record one execution; prints its id
 *   audit_tool DB bulk N [OPTIONS]           record N executions; exit 1 on any failure
 *   audit_tool DB event KIND [EXEC_ID [DETAIL_JSON]]
 *   audit_tool DB gap N [WHY]                N records lost (audit_note_missed), then
 *                                            audit_flush_gap: the exit path of corral mcp;
 *                                            prints "recorded" or "nothing"; exit 1 with
 *                                            the error when the gap could not be written
 *
 * DB "-" is the default store. Options of record/bulk:
 *   --kind K --client C --client-info JSON --parent ID --id ID --no-result --cmd STR
 *   --exit N --signal N --timeout --limit NAME --error denied|setup --cancelled --output
 *   --ago MS (started MS ago) --duration MS --violations JSON --redactions N
 *   --profile P --cwd DIR --keep-rows N (retention for the opportunistic prune)
 *   --pause MS (bulk: sleep between records, to straddle a lock held by someone else)
 *   --defer (upkeep left for idle time, as corral mcp does: audit_defer_upkeep)
 *   --upkeep (after the records: audit_upkeep, then print "upkeep was due: yes|no")
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit.h"
#include "internal.h"

struct rec_opts {
	struct audit_run run;
	const char *cmd, *limit, *error;
	int exit_code, sig;
	bool timeout, no_result, defer, upkeep;
	long long ago_ms, duration_ms, keep_rows, pause_ms;
};

static enum corral_limit_hit limit_of(const char *name)
{
	static const char *const names[] = {"",      "timeout", "cpu",   "memory",
	                                    "fsize", "pids",    "output"};
	for (size_t i = 1; name && i < ARRAY_SIZE(names); i++)
		if (!strcmp(name, names[i]))
			return (enum corral_limit_hit)i;
	return CORRAL_HIT_NONE;
}

static struct corral_result *make_result(const struct rec_opts *o, unsigned n)
{
	struct corral_result *res = result_new();
	if (!res)
		return NULL;
	const char *cmd = o->cmd ? o->cmd : "echo hello";
	res->argv = calloc(4, sizeof(char *));
	res->argv[0] = strdup("/bin/sh");
	res->argv[1] = strdup("-c");
	res->argv[2] = strdup(cmd);
	res->command = strdup(cmd);
	res->exited = !o->sig && !o->timeout && !o->error;
	res->exit_code = res->exited ? o->exit_code : -1;
	res->signal = o->timeout && !o->sig ? SIGKILL : o->sig;
	res->timed_out = o->timeout;
	res->limit = o->timeout ? CORRAL_HIT_TIMEOUT : limit_of(o->limit);
	res->duration_ms = (uint64_t)(o->duration_ms >= 0 ? o->duration_ms : 10 + n % 90);
	res->stdout_buf = strdup("hello\nworld\n");
	res->stdout_len = res->stdout_bytes = 12;
	res->stderr_buf = strdup("warn\xff\n"); /* not UTF-8: stored as U+FFFD */
	res->stderr_len = res->stderr_bytes = 6;
	res->user_ms = 3;
	res->sys_ms = 2;
	res->max_rss_kb = 1234;
	res->mode = "required";
	result_add_layer(res, "userns", 1, "");
	result_add_layer(res, "landlock", 1, "abi 4");
	result_add_layer(res, "cgroup", 0, "no delegation");
	if (o->error) {
		bool denied = !strcmp(o->error, "denied");
		corral_set_error(&res->error, denied ? CORRAL_EDENIED : CORRAL_ESETUP,
		                 denied ? 0 : EPERM, denied ? "policy" : "mount",
		                 denied ? "command 'curl' is denied by commands.deny"
		                        : "mount /proc: Operation not permitted");
	}
	return res;
}

static int record(struct audit *a, struct rec_opts *o, unsigned n, bool print)
{
	struct corral_result *res = o->no_result ? NULL : make_result(o, n);
	struct audit_run r = o->run;
	r.res = res;
	if (!res)
		r.command = o->cmd ? o->cmd : "tools/call corral_policy_query";
	if (o->ago_ms > 0)
		r.started_at_ms = (long long)time(NULL) * 1000 - o->ago_ms;
	struct corral_error err = {0};
	int rc = audit_record_run(a, &r, &err);
	if (rc < 0)
		fprintf(stderr, "audit_tool: %s\n", err.message);
	else if (print)
		printf("%s\n", r.id ? r.id : res->id);
	corral_result_free(res);
	return rc;
}

static int parse_rec(int argc, char **argv, struct rec_opts *o)
{
	static const struct option opts[] = {
	    {"kind", required_argument, NULL, 'k'},
	    {"client", required_argument, NULL, 'c'},
	    {"client-info", required_argument, NULL, 'I'},
	    {"parent", required_argument, NULL, 'p'},
	    {"id", required_argument, NULL, 'i'},
	    {"no-result", no_argument, NULL, 'N'},
	    {"cmd", required_argument, NULL, 'C'},
	    {"exit", required_argument, NULL, 'e'},
	    {"signal", required_argument, NULL, 's'},
	    {"timeout", no_argument, NULL, 'T'},
	    {"limit", required_argument, NULL, 'l'},
	    {"error", required_argument, NULL, 'E'},
	    {"cancelled", no_argument, NULL, 'X'},
	    {"output", no_argument, NULL, 'o'},
	    {"ago", required_argument, NULL, 'a'},
	    {"duration", required_argument, NULL, 'd'},
	    {"violations", required_argument, NULL, 'v'},
	    {"redactions", required_argument, NULL, 'r'},
	    {"profile", required_argument, NULL, 'P'},
	    {"cwd", required_argument, NULL, 'w'},
	    {"keep-rows", required_argument, NULL, 'K'},
	    {"pause", required_argument, NULL, 'z'},
	    {"defer", no_argument, NULL, 'D'},
	    {"upkeep", no_argument, NULL, 'U'},
	    {NULL, 0, NULL, 0},
	};
	memset(o, 0, sizeof(*o));
	o->run.kind = "run";
	o->run.client = "cli";
	o->run.cwd = "/work/space";
	o->run.profile = "default";
	o->run.policy_hash = "sha256:test";
	o->duration_ms = -1;
	int c;
	optind = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'k':
			o->run.kind = optarg;
			break;
		case 'c':
			o->run.client = optarg;
			break;
		case 'I':
			o->run.client_info_json = optarg;
			break;
		case 'p':
			o->run.parent = optarg;
			break;
		case 'i':
			o->run.id = optarg;
			break;
		case 'N':
			o->no_result = true;
			break;
		case 'C':
			o->cmd = optarg;
			break;
		case 'e':
			o->exit_code = atoi(optarg);
			break;
		case 's':
			o->sig = atoi(optarg);
			break;
		case 'T':
			o->timeout = true;
			break;
		case 'l':
			o->limit = optarg;
			break;
		case 'E':
			o->error = optarg;
			break;
		case 'X':
			o->run.cancelled = true;
			break;
		case 'o':
			o->run.store_output = true;
			break;
		case 'a':
			o->ago_ms = atoll(optarg);
			break;
		case 'd':
			o->duration_ms = atoll(optarg);
			break;
		case 'v':
			o->run.violations_json = optarg;
			break;
		case 'r':
			o->run.redactions = strtoull(optarg, NULL, 10);
			break;
		case 'P':
			o->run.profile = optarg;
			break;
		case 'w':
			o->run.cwd = optarg;
			break;
		case 'K':
			o->keep_rows = atoll(optarg);
			break;
		case 'z':
			o->pause_ms = atoll(optarg);
			break;
		case 'D':
			o->defer = true;
			break;
		case 'U':
			o->upkeep = true;
			break;
		default:
			return -1;
		}
	}
	if (o->limit && !strcmp(o->limit, "memory") && !o->sig)
		o->sig = SIGKILL;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: audit_tool DB open|record|bulk|event|gap ...\n");
		return 2;
	}
	const char *db = strcmp(argv[1], "-") ? argv[1] : NULL;
	const char *cmd = argv[2];
	struct corral_error err = {0};
	struct audit *a = NULL;
	if (audit_open(db, &a, &err) < 0) {
		fprintf(stderr, "audit_tool: %s\n", err.message);
		return 1;
	}
	int rc = 0;
	if (!strcmp(cmd, "open")) {
		printf("%s\n", audit_path(a));
	} else if (!strcmp(cmd, "record") || !strcmp(cmd, "bulk")) {
		bool bulk = !strcmp(cmd, "bulk");
		unsigned n = bulk && argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 1;
		struct rec_opts o;
		if (parse_rec(argc - (bulk ? 3 : 2), argv + (bulk ? 3 : 2), &o) < 0) {
			rc = 2;
		} else {
			if (o.keep_rows)
				audit_set_retention(a, 0, o.keep_rows);
			if (o.defer)
				audit_defer_upkeep(a);
			unsigned failed = 0;
			for (unsigned i = 0; i < n; i++) {
				if (i && o.pause_ms)
					nanosleep(&(struct timespec){o.pause_ms / 1000,
					                             o.pause_ms % 1000 * 1000000},
					          NULL);
				failed += record(a, &o, i, !bulk) < 0;
			}
			if (bulk)
				printf("recorded %u, failed %u\n", n - failed, failed);
			if (o.upkeep) {
				bool due = audit_upkeep_due(a);
				audit_upkeep(a);
				printf("upkeep was due: %s\n", due ? "yes" : "no");
			}
			rc = failed ? 1 : 0;
		}
	} else if (!strcmp(cmd, "event") && argc >= 4) {
		if (audit_record_event(a, argv[3], argc > 4 ? argv[4] : NULL,
		                       argc > 5 ? argv[5] : NULL, &err) < 0) {
			fprintf(stderr, "audit_tool: %s\n", err.message);
			rc = 1;
		}
	} else if (!strcmp(cmd, "gap") && argc >= 4) {
		audit_note_missed(a, strtoull(argv[3], NULL, 10), argc > 4 ? argv[4] : NULL);
		int r = audit_flush_gap(a, &err);
		if (r < 0) {
			fprintf(stderr, "audit_tool: %s (still missed: %llu)\n", err.message,
			        (unsigned long long)audit_missed(a));
			rc = 1;
		} else {
			printf("%s\n", r ? "recorded" : "nothing");
		}
	} else {
		fprintf(stderr, "audit_tool: unknown command %s\n", cmd);
		rc = 2;
	}
	audit_close(a);
	return rc;
}
