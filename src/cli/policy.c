/* corral policy: explain, validate and check a policy without running anything. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "internal.h"

static void print_layers(json_t *o)
{
	const char *name;
	json_t *l;
	json_object_foreach(json_object_get(o, "isolation"), name, l)
	{
		printf("  %-10s %-3s %s\n", name,
		       json_is_true(json_object_get(l, "applied")) ? "on" : "off",
		       json_string_value(json_object_get(l, "detail")));
	}
}

static void print_list(const char *title, json_t *arr)
{
	size_t i;
	json_t *v;
	if (!json_array_size(arr))
		return;
	printf("%s:", title);
	json_array_foreach(arr, i, v)
	{
		printf("%s%s", i ? ", " : " ", json_string_value(v));
	}
	printf("\n");
}

/* The text rendering of corral_explain's JSON. */
static void print_text(json_t *o)
{
	printf("profile:   %s\nmode:      %s\nnetwork:   %s\nworkspace: %s (%s)\n",
	       json_string_value(json_object_get(o, "profile")),
	       json_string_value(json_object_get(o, "mode")),
	       json_string_value(json_object_get(o, "network")),
	       json_string_value(json_object_get(o, "workspace")),
	       json_string_value(json_object_get(o, "workspace_access")));
	if (json_object_get(o, "error"))
		printf("error:     %s\n", json_string_value(json_object_get(o, "error")));
	printf("isolation:\n");
	print_layers(o);
	size_t i;
	json_t *v;
	printf("mounts:\n");
	json_array_foreach(json_object_get(o, "mounts"), i, v)
	{
		const char *src = json_string_value(json_object_get(v, "source"));
		const char *link = json_string_value(json_object_get(v, "link"));
		printf("  %-9s %s%s%s\n", json_string_value(json_object_get(v, "type")),
		       json_string_value(json_object_get(v, "target")),
		       src && strcmp(src, json_string_value(json_object_get(v, "target"))) ? " <- "
		       : link                                                              ? " -> "
		                                                                           : "",
		       src && strcmp(src, json_string_value(json_object_get(v, "target"))) ? src
		       : link                                                              ? link
		                                                                           : "");
	}
	print_list("protected (read-only)", json_object_get(o, "protected"));
	print_list("placeholders (created empty for the run)", json_object_get(o, "placeholders"));
	json_t *ll = json_object_get(o, "landlock");
	if (json_is_true(json_object_get(ll, "applied"))) {
		printf("landlock: abi %lld, tcp %s, scoped %s\n",
		       (long long)json_integer_value(json_object_get(ll, "abi")),
		       json_string_value(json_object_get(ll, "tcp")),
		       json_is_true(json_object_get(ll, "scoped")) ? "yes" : "no");
		json_array_foreach(json_object_get(ll, "rules"), i, v)
		{
			printf("  %-40s", json_string_value(json_object_get(v, "path")));
			size_t k;
			json_t *a;
			json_array_foreach(json_object_get(v, "access"), k, a)
			{
				printf("%s%s", k ? "," : " ", json_string_value(a));
			}
			printf("\n");
		}
	}
	json_t *sc = json_object_get(o, "seccomp");
	if (json_is_true(json_object_get(sc, "applied"))) {
		printf("seccomp: %s\n", json_string_value(json_object_get(sc, "action")));
		print_list("  denied", json_object_get(sc, "denied"));
		json_array_foreach(json_object_get(sc, "conditional"), i, v)
		{
			printf("  %s\n", json_string_value(v));
		}
		printf("  %s\n", json_string_value(json_object_get(sc, "foreign_abis")));
	}
	json_t *env = json_object_get(o, "env");
	print_list("env", json_object_get(env, "names"));
	json_array_foreach(json_object_get(env, "withheld"), i, v)
	{
		printf("  withheld: %s (rule %s; value hidden)\n",
		       json_string_value(json_object_get(v, "name")),
		       json_string_value(json_object_get(v, "rule")));
	}
	printf("limits:");
	const char *k;
	json_object_foreach(json_object_get(o, "limits"), k, v)
	{
		if (json_is_integer(v))
			printf(" %s=%lld", k, (long long)json_integer_value(v));
		else if (json_is_real(v))
			printf(" %s=%g", k, json_real_value(v));
	}
	printf("\n");
	print_list("executable (allow-list)", json_object_get(o, "executable"));
	json_t *cmd = json_object_get(o, "command");
	if (json_object_get(cmd, "decision")) {
		printf("command: %s -> %s (%s)\n",
		       json_string_value(json_array_get(json_object_get(cmd, "argv"), 0)),
		       json_string_value(json_object_get(cmd, "decision")),
		       json_string_value(json_object_get(cmd, "rule")));
		if (json_object_get(cmd, "message"))
			printf("  %s\n", json_string_value(json_object_get(cmd, "message")));
		if (json_object_get(cmd, "note"))
			printf("  %s\n", json_string_value(json_object_get(cmd, "note")));
	}
}

/* Prints the plan; 0, or EXIT_CORRAL_FAILED when the plan has an error (a run would fail
 * with it: the plan is still printed, with the error in it). */
int print_explain(const corral_config *cfg, bool json)
{
	char *doc = NULL;
	struct corral_error err = {0};
	if (corral_explain(cfg, &doc, &err) < 0) {
		cli_error("%s", err.message);
		return EXIT_CORRAL_FAILED;
	}
	json_t *o = json_loads(doc, 0, NULL);
	bool plan_error = !o || json_object_get(o, "error");
	if (json)
		puts(doc);
	else if (o)
		print_text(o);
	json_decref(o);
	free(doc);
	return plan_error ? EXIT_CORRAL_FAILED : 0;
}

/* The error a run would stop at for this profile in workspace ws, or "" when there is none:
 * the plan is built as `corral policy explain` builds it (dry run, nothing made on the host),
 * with the isolation layers off, so that what is judged is the profile and not this host. */
static int plan_error(const struct profile *p, const char *ws, char *out, size_t cap)
{
	struct corral_error err = {0};
	corral_config *cfg = corral_config_new();
	char *doc = NULL;
	out[0] = '\0';
	if (!cfg || corral_config_set_workspace(cfg, ws, &err) < 0 ||
	    policy_apply_profile(cfg, p, &err) < 0 ||
	    corral_config_set_mode(cfg, CORRAL_MODE_NONE, &err) < 0 ||
	    corral_explain(cfg, &doc, &err) < 0) {
		snprintf(out, cap, "%s", err.message[0] ? err.message : "out of memory");
		corral_config_free(cfg);
		return -1;
	}
	json_t *o = json_loads(doc, 0, NULL);
	const char *e = json_string_value(json_object_get(o, "error"));
	if (e) /* "policy: filesystem.write path ..." names the rule itself */
		snprintf(out, cap, "%s", strncmp(e, "policy: ", 8) ? e : e + 8);
	json_decref(o);
	free(doc);
	corral_config_free(cfg);
	return out[0] ? 1 : 0;
}

/* Judge each filesystem entry alone (with the rest of the profile's settings), so that an
 * error points at the entry's own line and column; then the whole profile, for what only
 * the entries together (or the default protected paths) would make a run refuse. */
static int validate_against(const char *file, const struct profile *p, const char *ws)
{
	static const char *const names[] = {"filesystem.read", "filesystem.write",
	                                    "filesystem.deny", "filesystem.protected"};
	char *const *lists[] = {p->fs_read, p->fs_write, p->fs_deny, p->protected_paths};
	const size_t counts[] = {p->n_read, p->n_write, p->n_deny, p->n_protected};
	const struct profile_pos *pos[] = {p->read_pos, p->write_pos, p->deny_pos,
	                                   p->protected_pos};
	char msg[1200];
	int errors = 0;
	for (size_t l = 0; l < 4; l++) {
		for (size_t i = 0; i < counts[l]; i++) {
			struct profile one = *p;
			char *entry[1] = {lists[l][i]};
			one.n_read = one.n_write = one.n_deny = one.n_protected = 0;
			one.protected_set = true; /* only this entry: not the default list */
			one.protected_paths = NULL;
			char ***which[] = {&one.fs_read, &one.fs_write, &one.fs_deny,
			                   &one.protected_paths};
			size_t *n[] = {&one.n_read, &one.n_write, &one.n_deny, &one.n_protected};
			*which[l] = entry;
			*n[l] = 1;
			int r = plan_error(&one, ws, msg, sizeof(msg));
			if (r == 0)
				continue;
			if (pos[l])
				fprintf(stderr, "%s:%u:%u: %s[%zu]: %s\n", file, pos[l][i].line,
				        pos[l][i].col, names[l], pos[l][i].index, msg);
			else
				fprintf(stderr, "%s: %s: %s\n", file, names[l], msg);
			errors++;
			if (r < 0)
				return errors;
		}
	}
	if (!errors && plan_error(p, ws, msg, sizeof(msg)) != 0) {
		fprintf(stderr, "%s: %s\n", file, msg);
		errors++;
	}
	return errors;
}

static int policy_validate(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"workspace", required_argument, NULL, 'w'},
	    {"syntax-only", no_argument, NULL, 's'},
	    {NULL, 0, NULL, 0},
	};
	const char *ws = NULL;
	bool syntax_only = false;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+w:", opts, NULL)) != -1) {
		if (c == 'w') {
			ws = optarg;
		} else if (c == 's') {
			syntax_only = true;
		} else {
			cli_error("usage: corral policy validate [-w DIR] [--syntax-only] FILE");
			return EXIT_CORRAL_FAILED;
		}
	}
	if (argc - optind != 1) {
		cli_error("usage: corral policy validate [-w DIR] [--syntax-only] FILE");
		return EXIT_CORRAL_FAILED;
	}
	const char *file = argv[optind];
	struct profile p;
	memset(&p, 0, sizeof(p));
	struct corral_error err = {0};
	if (profile_load_file(file, &p, &err) < 0) {
		fprintf(stderr, "%s\n", err.message);
		return EXIT_CORRAL_FAILED;
	}
	char cwd[PATH_MAX];
	if (!syntax_only && !ws && !(ws = getcwd(cwd, sizeof(cwd)))) {
		cli_error("policy validate: cannot get the current directory; give -w DIR");
		profile_free(&p);
		return EXIT_CORRAL_FAILED;
	}
	if (!syntax_only) {
		/* a workspace that is not a directory is the caller's mistake, not the profile's */
		corral_config *probe = corral_config_new();
		int r = probe ? corral_config_set_workspace(probe, ws, &err) : -1;
		corral_config_free(probe);
		if (r < 0) {
			cli_error("policy validate: -w %s: %s", ws,
			          err.message[0] ? err.message : "out of memory");
			profile_free(&p);
			return EXIT_CORRAL_FAILED;
		}
		if (validate_against(file, &p, ws) > 0) {
			profile_free(&p);
			return EXIT_CORRAL_FAILED;
		}
	}
	printf("%s: valid profile%s%s%s%s\n", file,
	       syntax_only ? " (syntax only)" : " for the workspace ", syntax_only ? "" : ws,
	       p.description ? ": " : "", p.description ? p.description : "");
	profile_free(&p);
	return 0;
}

static int policy_check(int argc, char **argv)
{
	static const struct option opts[] = {
		{"profile", required_argument, NULL, 'p'}, {"workspace", required_argument, NULL, 'w'},
		{"read", required_argument, NULL, 'r'},    {"write", required_argument, NULL, 'W'},
		{"exec", required_argument, NULL, 'x'},    {"net", required_argument, NULL, 'n'},
		{"json", no_argument, NULL, 'j'},          {NULL, 0, NULL, 0},
	};
	const char *profile = NULL, *ws = NULL;
	struct {
		const char *op, *target;
	} q[64];
	int nq = 0, c, json = 0;
	const char *why = NULL;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+w:", opts, NULL)) != -1) {
		if (c == 'p')
			profile = optarg;
		else if (c == 'w')
			ws = optarg;
		else if (c == 'j')
			json = 1;
		else if (c == 'n' && parse_hostport(optarg, &why) < 0)
			return cli_bad_value("--net", optarg, why);
		else if ((c == 'r' || c == 'W' || c == 'x' || c == 'n') && nq < 64) {
			q[nq].op = c == 'r' ? "read" : c == 'W' ? "write" : c == 'x' ? "exec" : "connect";
			q[nq++].target = optarg;
		} else {
			cli_error("usage: corral policy check [--profile P] [-w DIR] [--read PATH] "
			          "[--write PATH] [--exec CMD] [--net HOST:PORT] [--json]");
			return EXIT_CORRAL_FAILED;
		}
	}
	if (!nq) {
		cli_error("policy check: ask at least one of --read, --write, --exec, --net");
		return EXIT_CORRAL_FAILED;
	}
	corral_config *cfg = corral_config_new();
	struct corral_error err = {0};
	char cwd[PATH_MAX];
	if (!cfg || (profile && corral_config_load_profile(cfg, profile, &err) < 0) ||
	    corral_config_set_workspace(cfg, ws ? ws : getcwd(cwd, sizeof(cwd)), &err) < 0) {
		cli_error("%s", err.message[0] ? err.message : "out of memory");
		corral_config_free(cfg);
		return EXIT_CORRAL_FAILED;
	}
	int denied = 0;
	for (int i = 0; i < nq; i++) {
		char *doc = NULL;
		int r = corral_policy_query(cfg, q[i].op, q[i].target, &doc, &err);
		if (r < 0) {
			cli_error("%s", err.message);
			corral_config_free(cfg);
			return EXIT_CORRAL_FAILED;
		}
		denied |= r == 0;
		if (json) {
			puts(doc);
		} else {
			json_t *o = json_loads(doc, 0, NULL);
			const char *reason = json_string_value(json_object_get(o, "reason"));
			printf("%-7s %-30s %s  (rule: %s)%s%s\n", q[i].op, q[i].target,
			       r ? "allowed" : "DENIED",
			       json_string_value(json_object_get(o, "rule")), reason ? "\n        " : "",
			       reason ? reason : "");
			json_decref(o);
		}
		free(doc);
	}
	corral_config_free(cfg);
	/* like test(1): 0 when everything asked is allowed, 1 when something is denied */
	return denied ? 1 : 0;
}

int cmd_policy(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		FILE *f = argc < 2 ? stderr : stdout;
		fputs("Usage: corral policy explain [RUN OPTIONS] [--] COMMAND [ARG...]\n"
		      "       corral policy validate [-w DIR] [--syntax-only] FILE\n"
		      "       corral policy check [--profile P] [-w DIR] [--read PATH] [--write PATH]\n"
		      "                           [--exec CMD] [--net HOST:PORT] [--json]\n"
		      "\n"
		      "explain   print the resolved plan (same as corral run --dry-run); exits 125\n"
		      "          when the plan has an error (a run would fail)\n"
		      "validate  check a JSON profile, and what a run in the workspace (-w DIR, default\n"
		      "          the current directory) would refuse: paths that resolve to / or do\n"
		      "          not exist, symlinks, ...; --syntax-only skips that. Errors give\n"
		      "          file:line:column\n"
		      "check     ask whether an access is allowed and which rule decides; exits 0\n"
		      "          when all are allowed, 1 when one is denied\n",
		      f);
		return argc < 2 ? EXIT_CORRAL_FAILED : 0;
	}
	if (!strcmp(argv[1], "validate"))
		return policy_validate(argc - 1, argv + 1);
	if (!strcmp(argv[1], "check"))
		return policy_check(argc - 1, argv + 1);
	if (!strcmp(argv[1], "explain")) {
		/* corral run --dry-run with the same options */
		char **v = calloc((size_t)argc + 2, sizeof(char *));
		if (!v)
			return EXIT_CORRAL_FAILED;
		v[0] = "run";
		v[1] = "--dry-run";
		for (int i = 2; i < argc; i++)
			v[i] = argv[i];
		/* without a command, run's dry run explains the policy alone */
		int r = cmd_run(argc, v);
		free(v);
		return r;
	}
	cli_error("policy: unknown subcommand '%s'; use explain, validate or check", argv[1]);
	return EXIT_CORRAL_FAILED;
}
