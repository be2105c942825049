/* Denial reports: turn what the sandbox stopped into {kind, object, rule, hint} entries a
 * model can act on. Evidence first (the preflight decision, the limit that fired, the OOM kill,
 * the timeout); then inference from the command's error output, matched against the policy so
 * that a denial is reported only where the policy really denies it. Never claims a denial the
 * policy does not explain. */
#include "internal.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

int result_add_violation(struct corral_result *res, const char *kind, const char *object,
                         const char *rule, const char *hint, int inferred)
{
	for (size_t i = 0; i < res->n_violations; i++) /* one entry per (kind, object) */
		if (!strcmp(res->violations[i].kind, kind) &&
		    !strcmp(res->violations[i].object, object ? object : ""))
			return 0;
	if (res->n_violations >= 16)
		return 0; /* enough to act on; the output has the rest */
	struct corral_violation *g =
	        realloc(res->violations, (res->n_violations + 1) * sizeof(*res->violations));
	if (!g)
		return CORRAL_ENOMEM;
	res->violations = g;
	struct corral_violation *v = &g[res->n_violations];
	v->kind = strdup(kind);
	v->object = strdup(object ? object : "");
	v->rule = strdup(rule ? rule : "");
	v->hint = strdup(hint ? hint : "");
	v->inferred = inferred;
	if (!v->kind || !v->object || !v->rule || !v->hint) {
		free((char *)v->kind);
		free((char *)v->object);
		free((char *)v->rule);
		free((char *)v->hint);
		return CORRAL_ENOMEM;
	}
	res->n_violations++;
	return 0;
}

void result_free_violations(struct corral_result *res)
{
	for (size_t i = 0; i < res->n_violations; i++) {
		free((char *)res->violations[i].kind);
		free((char *)res->violations[i].object);
		free((char *)res->violations[i].rule);
		free((char *)res->violations[i].hint);
	}
	free(res->violations);
	res->violations = NULL;
	res->n_violations = 0;
}

/* ---- evidence --------------------------------------------------------------------------- */

static void from_limits(const struct corral_config *cfg, struct corral_result *res)
{
	char obj[64], hint[300];
	switch (res->limit) {
	case CORRAL_HIT_NONE:
	case CORRAL_HIT_OUTPUT:
		return;
	case CORRAL_HIT_TIMEOUT:
		snprintf(obj, sizeof(obj), "%llu ms", (unsigned long long)cfg->timeout_ms);
		result_add_violation(res, "timeout", obj, "timeout",
		                     "The command ran past its time limit and was stopped; make it "
		                     "faster, run a smaller piece, or ask for a longer timeout.",
		                     0);
		return;
	case CORRAL_HIT_CPU:
		snprintf(obj, sizeof(obj), "%llu s", (unsigned long long)cfg->limits[CORRAL_LIMIT_CPU_S]);
		result_add_violation(res, "limit", obj, "cpu",
		                     "The command used up its CPU-time limit and was killed; reduce "
		                     "the work or ask for a higher --cpu limit.",
		                     0);
		return;
	case CORRAL_HIT_MEMORY:
		snprintf(obj, sizeof(obj), "%llu bytes",
		         (unsigned long long)cfg->limits[CORRAL_LIMIT_MEMORY]);
		result_add_violation(res, "limit", obj, "memory",
		                     "The command ran out of its memory limit and was killed by the "
		                     "kernel; process less data at once or ask for a higher memory "
		                     "limit.",
		                     0);
		return;
	case CORRAL_HIT_FSIZE:
		snprintf(obj, sizeof(obj), "%llu bytes",
		         (unsigned long long)cfg->limits[CORRAL_LIMIT_FSIZE]);
		result_add_violation(res, "limit", obj, "fsize",
		                     "A file grew past the file-size limit and the writer was killed; "
		                     "write smaller files or ask for a higher --fsize.",
		                     0);
		return;
	case CORRAL_HIT_PIDS:
		snprintf(obj, sizeof(obj), "%llu processes",
		         (unsigned long long)cfg->limits[CORRAL_LIMIT_PIDS]);
		snprintf(hint, sizeof(hint),
		         "Starting a new process failed at the limit of %llu processes; run fewer "
		         "things in parallel.",
		         (unsigned long long)cfg->limits[CORRAL_LIMIT_PIDS]);
		result_add_violation(res, "limit", obj, "pids", hint, 0);
		return;
	}
}

static void from_error(const struct corral_config *cfg, struct corral_result *res)
{
	if (res->error.code != CORRAL_EDENIED)
		return;
	const char *msg = res->error.message;
	bool cmd = strstr(msg, "commands.deny") || strstr(msg, "allow-list");
	char hint[400];
	if (cmd)
		snprintf(hint, sizeof(hint),
		         "The policy does not allow running %s here; use an allowed command instead, "
		         "or ask the user to change the profile.",
		         cfg->argv ? cfg->argv[0] : "this command");
	else if (strstr(msg, "symlink"))
		snprintf(hint, sizeof(hint),
		         "A protected path in the workspace is a symlink, so the sandbox cannot keep it "
		         "read-only; ask the user to remove the symlink or change the profile.");
	else
		snprintf(hint, sizeof(hint),
		         "An argument points outside what the sandbox can see; use a path inside the "
		         "workspace, or ask the user to add it to the profile.");
	/* the rule is in the message: "policy: ... rule commands.deny 'curl': reason; ..." */
	result_add_violation(res, cmd ? "exec" : "policy", cfg->argv ? cfg->argv[0] : "",
	                     msg, hint, 0);
}

/* ---- inference from output -------------------------------------------------------------- */

/* The path a tool names with an error. The common shapes:
 *   cat: /x/y: Permission denied            (the token right before ": <error>")
 *   sh: 1: cannot create .git/config: Read-only file system
 *   touch: cannot touch '/x': Read-only file system
 *   PermissionError: [Errno 13] Permission denied: '/x'   (quoted after the error) */
static bool take_token(const char *start, size_t n, char *out, size_t outlen)
{
	while (n && (*start == '\'' || *start == '"' || *start == '`')) {
		start++;
		n--;
	}
	while (n && (start[n - 1] == '\'' || start[n - 1] == '"'))
		n--;
	if (!n || n + 1 > outlen)
		return false;
	/* a path: absolute, ./ ../, or a relative name with a slash or a dot file */
	if (!(start[0] == '/' || start[0] == '.' || memchr(start, '/', n)))
		return false;
	memcpy(out, start, n);
	out[n] = 0;
	return true;
}

static bool path_of(const char *line, const char *err_at, const char *err_text, char *out,
                    size_t outlen)
{
	/* after the error: ": '/x'" */
	const char *after = err_at + strlen(err_text);
	if (after[0] == ':' && after[1] == ' ') {
		const char *t = after + 2;
		size_t n = strcspn(t, " \t,");
		if (take_token(t, n, out, outlen))
			return true;
	}
	/* before the error: walk back over ": " and take the token */
	const char *e = err_at;
	while (e > line && (e[-1] == ' ' || e[-1] == ':'))
		e--;
	const char *b = e;
	while (b > line && b[-1] != ' ' && !(b[-1] == ':' && b - 1 > line && b[-2] != '\\'))
		b--;
	return take_token(b, (size_t)(e - b), out, outlen);
}

struct needle {
	const char *text;
	int kind; /* 0 fs (exec, read or write by query), 1 fs write, 2 network, 3 syscall,
	             4 fs read (ENOENT: hidden or not visible) */
};

static const struct needle needles[] = {
	{"Read-only file system", 1},
	{"Permission denied", 0},
	{"No such file or directory", 4},
	{"Operation not permitted", 3},
	{"Could not resolve host", 2},
	{"Temporary failure in name resolution", 2},
	{"Name or service not known", 2},
	{"Network is unreachable", 2},
	{"nodename nor servname", 2},
};

static bool report_exec(const struct corral_config *cfg, struct corral_result *res,
                        const char *path)
{
	char *doc = NULL;
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	char found[PATH_MAX];
	bool denied = false;
	/* only for things that are programs */
	if (policy_which(cfg, path[0] == '/' ? path : base, sandbox_path_env(cfg), found) == 0 &&
	    corral_policy_query(cfg, "exec", path[0] == '/' ? path : base, &doc, NULL) == 0) {
		char hint[PATH_MAX + 200];
		snprintf(hint, sizeof(hint),
		         "%s is not on the command allow-list of this sandbox; use an allowed "
		         "command instead.",
		         path);
		result_add_violation(res, "exec", path, "commands.allow", hint, 1);
		denied = true;
	}
	free(doc);
	return denied;
}

/* mode: 0 "Permission denied" (exec, read or write), 1 a write (EROFS), 4 ENOENT (a read of
 * something hidden or not visible) */
static void infer_fs(const struct corral_config *cfg, struct corral_result *res, const char *line,
                     const char *at, const char *text, int mode)
{
	char path[PATH_MAX];
	if (!path_of(line, at, text, path, sizeof(path)))
		return;
	if (mode == 0 && cfg->cmd_allow_set && report_exec(cfg, res, path))
		return;
	/* Ask the policy; report only what it denies. */
	const char *ops[2];
	size_t n_ops = 0;
	if (mode == 1)
		ops[n_ops++] = "write";
	else if (mode == 4)
		ops[n_ops++] = "read";
	else {
		/* EACCES in the sandbox is mostly Landlock: a read with no rule, or a write */
		ops[n_ops++] = "read";
		ops[n_ops++] = "write";
	}
	for (size_t i = 0; i < n_ops; i++) {
		char *doc = NULL;
		int r = corral_policy_query(cfg, ops[i], path, &doc, NULL);
		if (r == 0) {
			bool w = !strcmp(ops[i], "write");
			json_t *o = json_loads(doc, 0, NULL);
			const char *rule = json_string_value(json_object_get(o, "rule"));
			char hint[PATH_MAX + 300];
			if (w)
				snprintf(hint, sizeof(hint),
				         "The sandbox does not allow writing %s (%s); write inside the "
				         "workspace or /tmp instead, or ask the user to allow it.",
				         path, rule ? rule : "policy");
			else
				snprintf(hint, sizeof(hint),
				         "The sandbox does not let the command read %s (%s); use files in "
				         "the workspace, or ask the user to add the path with --ro.",
				         path, rule ? rule : "policy");
			/* the object as the policy resolved it */
			char obj[PATH_MAX];
			if (policy_resolve_path(cfg, path, obj, NULL) < 0)
				snprintf(obj, sizeof(obj), "%s", path);
			result_add_violation(res, w ? "fs_write" : "fs_read", obj, rule ? rule : "",
			                     hint, 1);
			json_decref(o);
			free(doc);
			return;
		}
		free(doc);
	}
}

static void infer_network(const struct corral_config *cfg, struct corral_result *res,
                          const char *line)
{
	if (cfg->net != CORRAL_NET_NONE)
		return;
	/* "Could not resolve host: pypi.org" and friends: the host is the word after ':' */
	char host[256] = "";
	const char *p = strstr(line, "host: ");
	if (!p)
		p = strstr(line, "host ");
	if (p) {
		p = strchr(p, ' ') + 1;
		size_t n = 0;
		while (p[n] && p[n] != ' ' && p[n] != '\'' && p[n] != ')' && n + 1 < sizeof(host))
			n++;
		memcpy(host, p, n);
		host[n] = 0;
	}
	char hint[600];
	snprintf(hint, sizeof(hint),
	         "Network access is disabled in this sandbox; the command cannot reach %s. Work "
	         "offline, or ask the user to run with a profile that allows the network.",
	         host[0] ? host : "the network");
	result_add_violation(res, "network", host[0] ? host : "network", "network none", hint, 1);
}

static const struct {
	const char *tool;
	const char *syscall;
} tools[] = {
	{"strace", "ptrace"},   {"gdb", "ptrace"},        {"ltrace", "ptrace"},
	{"mount", "mount"},     {"umount", "umount2"},    {"unshare", "unshare"},
	{"nsenter", "setns"},   {"perf", "perf_event_open"}, {"bpftool", "bpf"},
	{"keyctl", "keyctl"},   {"ptrace", "ptrace"},     {"chroot", "chroot"},
	{"setcap", "capabilities"},
};

static void infer_syscall(struct corral_result *res, const char *line)
{
	for (size_t i = 0; i < ARRAY_SIZE(tools); i++) {
		size_t n = strlen(tools[i].tool);
		const char *p = strstr(line, tools[i].tool);
		if (!p || (p != line && p[-1] != ' ' && p[-1] != '/') ||
		    !(p[n] == ':' || p[n] == ' ' || p[n] == '('))
			continue;
		char hint[300];
		snprintf(hint, sizeof(hint),
		         "The sandbox blocks %s (the %s system call family) for security; this "
		         "cannot be done here, so find a way that does not need it.",
		         tools[i].tool, tools[i].syscall);
		result_add_violation(res, "syscall", tools[i].syscall, "seccomp", hint, 1);
		return;
	}
}

static void infer(const struct corral_config *cfg, struct corral_result *res, const char *text,
                  size_t len)
{
	const char *end = text + len;
	for (const char *line = text; line < end && res->n_violations < 16;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		size_t ll = nl ? (size_t)(nl - line) : (size_t)(end - line);
		if (ll < 2048) {
			char buf[2048];
			memcpy(buf, line, ll);
			buf[ll] = 0;
			for (size_t i = 0; i < ARRAY_SIZE(needles); i++) {
				const char *at = strstr(buf, needles[i].text);
				if (!at)
					continue;
				if (needles[i].kind == 0 || needles[i].kind == 1 || needles[i].kind == 4)
					infer_fs(cfg, res, buf, at, needles[i].text, needles[i].kind);
				else if (needles[i].kind == 2)
					infer_network(cfg, res, buf);
				else {
					infer_syscall(res, buf);
					infer_fs(cfg, res, buf, at, needles[i].text, 0);
				}
				break;
			}
		}
		line = nl ? nl + 1 : end;
	}
}

void violations_collect(const struct corral_config *cfg, struct corral_result *res)
{
	from_error(cfg, res);
	from_limits(cfg, res);
	if (cfg->mode == CORRAL_MODE_NONE || !cfg->workspace)
		return; /* nothing is denied there: no inference */
	/* Inference only for runs that failed: a clean run's output may quote errors. */
	if (res->exited && res->exit_code == 0)
		return;
	if (res->stderr_buf)
		infer(cfg, res, res->stderr_buf, res->stderr_len);
	if (res->stdout_buf && res->n_violations == 0)
		infer(cfg, res, res->stdout_buf, res->stdout_len);
}
