/* Denial reports: turn what the sandbox stopped into {kind, object, rule, hint} entries a
 * model can act on. Evidence first (the preflight decision, the limit that fired, the OOM kill,
 * the timeout); then inference from the command's error output, matched against the policy and
 * the host so that a denial is reported only where the sandbox really caused it (docs/DESIGN.md
 * §14). Never claims a denial the policy and the host do not explain. */
#include "internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

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

/* Was the isolation layer name applied to this run? */
static bool layer_on(const struct corral_result *res, const char *name)
{
	for (size_t i = 0; i < res->n_layers; i++)
		if (res->layers[i].name && !strcmp(res->layers[i].name, name))
			return res->layers[i].applied;
	return false;
}

/* ---- evidence --------------------------------------------------------------------------- */

#define OBJ_BUDGET "process budget outside the run"

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
		/* set only when the run's own cgroup reached its pids.max (supervise.c) */
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

void violations_pids_elsewhere(const struct corral_config *cfg, struct corral_result *res,
                               int known)
{
	char hint[400];
	/* without a process limit of its own only a parent's budget can have refused the fork */
	if (known || !cfg->limits[CORRAL_LIMIT_PIDS]) {
		result_add_violation(res, "limit", OBJ_BUDGET, "pids.max of a parent cgroup",
		                     "Starting a new process failed because the process budget of "
		                     "the server or the host ran out (other work is using it), not "
		                     "this run's own limit; retry when that work is done, or run "
		                     "fewer processes at once.",
		                     1);
		return;
	}
	/* a fork was refused in the run's cgroup, but this kernel cannot say at which level */
	snprintf(hint, sizeof(hint),
	         "Starting a new process failed at a process limit: this run's %llu processes or "
	         "the budget of the server or host (this kernel does not tell which); run fewer "
	         "processes at once, or retry later.",
	         (unsigned long long)cfg->limits[CORRAL_LIMIT_PIDS]);
	result_add_violation(res, "limit", "processes", "pids (this run's or a parent cgroup's)",
	                     hint, 1);
}

/* The text between pre and the first post after it, or false. */
static bool between(const char *s, const char *pre, const char *post, char *out, size_t len)
{
	const char *a = strstr(s, pre);
	if (!a)
		return false;
	a += strlen(pre);
	const char *b = strstr(a, post);
	if (!b || (size_t)(b - a) + 1 > len || b == a)
		return false;
	memcpy(out, a, (size_t)(b - a));
	out[b - a] = 0;
	return true;
}

/* A path as the sandbox's processes name it, made absolute: relative to the run's working
 * directory (the workspace unless -C), "." and ".." resolved lexically. */
static bool abs_path(const struct corral_config *cfg, const char *path, char *out)
{
	char joined[PATH_MAX];
	const char *p = path;
	if (path[0] != '/' && !(path[0] == '~' && (path[1] == '/' || !path[1]))) {
		int n = snprintf(joined, sizeof(joined), "%s/%s", cfg->cwd ? cfg->cwd : cfg->workspace,
		                 path);
		if (n < 0 || n >= (int)sizeof(joined))
			return false;
		p = joined;
	}
	return policy_lexical_path(cfg, p, out, NULL) == 0;
}

static void from_error(const struct corral_config *cfg, struct corral_result *res)
{
	if (res->error.code != CORRAL_EDENIED)
		return;
	const char *msg = res->error.message;
	char obj[PATH_MAX], arg[PATH_MAX], rule[PATH_MAX + 64], hint[2 * PATH_MAX + 300];
	/* The command decision first (the preflight's order): the rule that decided, asked
	 * again rather than read back from the message. */
	if (cfg->argv && cfg->argv[0] &&
	    (strstr(msg, "commands.deny") || strstr(msg, "command allow-list"))) {
		struct exec_decision d;
		if (policy_decide_exec(cfg, cfg->argv[0], &d) == 0 && !d.allowed) {
			if (d.rule) {
				snprintf(rule, sizeof(rule), "commands.deny %s", d.rule->match);
				snprintf(hint, sizeof(hint),
				         "The policy does not allow running %s here (%s%s%s); use a "
				         "different command, or ask the user to change the profile.",
				         cfg->argv[0], rule, d.rule->reason ? ": " : "",
				         d.rule->reason ? d.rule->reason : "");
			} else {
				snprintf(rule, sizeof(rule), "commands.allow");
				snprintf(hint, sizeof(hint),
				         "%s is not on the command allow-list of this sandbox; use an "
				         "allowed command instead, or ask the user to change the profile.",
				         cfg->argv[0]);
			}
			result_add_violation(res, "exec", cfg->argv[0], rule, hint, 0);
			return;
		}
	}
	/* Argument confinement (policy.c check_arg_paths): the object is the argument as a path. */
	if (between(msg, "argument '", "' is inside ", arg, sizeof(arg)) ||
	    between(msg, "argument '", "' resolves to ", arg, sizeof(arg))) {
		const char *a = arg[0] == '-' && strchr(arg, '=') ? strchr(arg, '=') + 1 : arg;
		if (!abs_path(cfg, a, obj))
			snprintf(obj, sizeof(obj), "%s", a);
		char root[PATH_MAX];
		if (strstr(msg, "' is inside ") &&
		    between(msg, "' is inside ", ", which the policy hides", root, sizeof(root))) {
			snprintf(rule, sizeof(rule), "argument confinement (filesystem.deny %s)", root);
			snprintf(hint, sizeof(hint),
			         "The argument %s is inside %s, which this sandbox hides; leave it out, "
			         "or ask the user to change the profile.",
			         obj, root);
		} else {
			snprintf(rule, sizeof(rule), "argument confinement (not visible)");
			snprintf(hint, sizeof(hint),
			         "The argument %s is outside what the sandbox can see; use a path inside "
			         "the workspace, or ask the user to add it with --ro.",
			         obj);
		}
		result_add_violation(res, "policy", obj, rule, hint, 0);
		return;
	}
	/* A protected path that is a symlink (plan.c). */
	if (between(msg, "protected path ", " is a symlink", obj, sizeof(obj))) {
		snprintf(hint, sizeof(hint),
		         "The protected path %s in the workspace is a symlink, so the sandbox cannot "
		         "keep it read-only; ask the user to remove the symlink or change the profile.",
		         obj);
		result_add_violation(res, "policy", obj, "protected path (a symlink)", hint, 0);
		return;
	}
	/* A profile path through a symlink inside the workspace (plan.c). */
	if (between(msg, " path ", " goes through a symlink inside the workspace", obj,
	            sizeof(obj))) {
		snprintf(hint, sizeof(hint),
		         "The policy path %s goes through a symlink inside the workspace, which the "
		         "sandbox does not follow; ask the user to name the target itself.",
		         obj);
		result_add_violation(res, "policy", obj, "symlink inside the workspace", hint, 0);
		return;
	}
	/* Anything else the policy refused (the error says what): the command and the step. */
	result_add_violation(res, "policy", cfg->argv ? cfg->argv[0] : "",
	                     res->error.step[0] ? res->error.step : "policy",
	                     "The policy refused to start this command (the error says why); "
	                     "change the command, or ask the user to change the profile.",
	                     0);
}

/* ---- inference from output -------------------------------------------------------------- */

/* The path a tool names with an error. The common shapes:
 *   cat: /x/y: Permission denied            (the token right before ": <error>")
 *   sh: 1: cannot create .git/config: Read-only file system
 *   touch: cannot touch '/x': Read-only file system
 *   PermissionError: [Errno 13] Permission denied: '/x'   (quoted after the error) */
static bool take_token(const char *start, size_t n, char *out, size_t outlen)
{
	bool quoted = false;
	while (n && (*start == '\'' || *start == '"' || *start == '`')) {
		start++;
		n--;
		quoted = true;
	}
	/* GNU tools quote with U+2018 / U+2019 in UTF-8 locales */
	if (n >= 3 && !memcmp(start, "\xe2\x80\x98", 3)) {
		start += 3;
		n -= 3;
		quoted = true;
	}
	if (n >= 3 && !memcmp(start + n - 3, "\xe2\x80\x99", 3))
		n -= 3;
	while (n && (start[n - 1] == '\'' || start[n - 1] == '"'))
		n--;
	if (!n || n + 1 > outlen)
		return false;
	/* a path: absolute, ./ ../, a relative name with a slash or a dot file, or any name
	 * the tool quoted */
	if (!(quoted || start[0] == '/' || start[0] == '.' || memchr(start, '/', n)))
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

enum infer_kind {
	K_EACCES,  /* Landlock or a mask: exec, read or write, by the line's shape */
	K_EROFS,   /* a read-only mount: always a write */
	K_ENOENT,  /* not visible: only for paths the host has */
	K_NODIR,   /* dash's "Directory nonexistent": a create whose directory is not visible */
	K_NET,     /* name resolution with the network off */
	K_EPERM,   /* a tool's system call (seccomp) or a dropped capability */
	K_PERMLOW, /* util-linux "permission denied." (mount, umount) */
	K_FORK,    /* fork refused: a process limit */
};

struct needle {
	const char *text;
	enum infer_kind kind;
};

static const struct needle needles[] = {
	{"Read-only file system", K_EROFS},
	{"Permission denied", K_EACCES},
	{"No such file or directory", K_ENOENT},
	{"Directory nonexistent", K_NODIR},
	{"Operation not permitted", K_EPERM},
	{"permission denied.", K_PERMLOW},
	{"Could not resolve host", K_NET},
	{"Temporary failure in name resolution", K_NET},
	{"Name or service not known", K_NET},
	{"Network is unreachable", K_NET},
	{"nodename nor servname", K_NET},
	{"Cannot fork", K_FORK},
	{"Resource temporarily unavailable", K_FORK},
};

/* What the failing operation was, from the wording of the tool's message: 'w' a write
 * (create, touch, remove, ...), 'r' a read or a lookup, 0 cannot tell. */
static char op_of(const char *line)
{
	static const char *const writes[] = {
	    "cannot create", "can't create",  "cannot touch",     "cannot remove", "cannot move",
	    "cannot rename", "cannot overwrite", "failed to create", "for writing",  "cannot make",
	    "cannot link",   "cannot write",  "can't write",      "cannot mkdir",
	};
	static const char *const reads[] = {
	    "cannot open", "cannot access", "cannot read", "cannot stat",    "can't open",
	    "can't read",  "cannot cd",     "can't cd",    "cannot execute",
	};
	for (size_t i = 0; i < ARRAY_SIZE(writes); i++)
		if (strcasestr(line, writes[i]))
			return 'w';
	for (size_t i = 0; i < ARRAY_SIZE(reads); i++)
		if (strcasestr(line, reads[i]))
			return 'r';
	return 0;
}

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

/* The policy's answer for op on path: 1 denied (rule filled), 0 allowed or no answer. */
static int policy_denies(const struct corral_config *cfg, const char *op, const char *path,
                         char *rule, size_t len)
{
	char *doc = NULL;
	int r = corral_policy_query(cfg, op, path, &doc, NULL);
	if (r == 0 && doc) {
		json_t *o = json_loads(doc, 0, NULL);
		const char *found = json_string_value(json_object_get(o, "rule"));
		snprintf(rule, len, "%s", found ? found : "policy");
		json_decref(o);
	}
	free(doc);
	return r == 0;
}

static bool host_has(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static bool host_has_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The path itself when the host has it, else its nearest ancestor the host has. */
static void nearest_existing(const char *path, char *out)
{
	snprintf(out, PATH_MAX, "%s", path);
	while (!host_has(out)) {
		char *slash = strrchr(out, '/');
		if (!slash || slash == out) {
			snprintf(out, PATH_MAX, "/");
			return;
		}
		*slash = 0;
	}
}

static void add_fs(const struct corral_config *cfg, struct corral_result *res, bool w,
                   const char *path, const char *rule)
{
	char hint[PATH_MAX + 300], obj[PATH_MAX];
	if (policy_resolve_path(cfg, path, obj, NULL) < 0) /* the object as the policy sees it */
		snprintf(obj, sizeof(obj), "%s", path);
	if (w)
		snprintf(hint, sizeof(hint),
		         "The sandbox does not allow writing %s (%s); write inside the workspace or "
		         "/tmp instead, or ask the user to allow it.",
		         obj, rule);
	else
		snprintf(hint, sizeof(hint),
		         "The sandbox does not let the command read %s (%s); use files in the "
		         "workspace, or ask the user to add the path with --ro.",
		         obj, rule);
	result_add_violation(res, w ? "fs_write" : "fs_read", obj, rule, hint, 1);
}

static void infer_fs(const struct corral_config *cfg, struct corral_result *res, const char *line,
                     const char *at, const char *text, enum infer_kind kind)
{
	char raw[PATH_MAX], path[PATH_MAX], rule[PATH_MAX + 64];
	if (!path_of(line, at, text, raw, sizeof(raw)))
		return;
	if (kind == K_EACCES && cfg->cmd_allow_set && report_exec(cfg, res, raw))
		return;
	if (!abs_path(cfg, raw, path))
		return;
	char op = kind == K_EROFS || kind == K_NODIR ? 'w' : op_of(line);
	switch (kind) {
	case K_EROFS:
		/* a read-only mount refused a write: the policy must deny writing there */
		if (policy_denies(cfg, "write", path, rule, sizeof(rule)))
			add_fs(cfg, res, true, path, rule);
		return;
	case K_EACCES:
		/* Landlock (or a mask) refused. A write when the message says so, or when it does
		 * not say and the host has the directory but not the file (a create). Otherwise a
		 * read or a lookup, reported on the path or, when the host lacks it, on the
		 * nearest ancestor it has (where the lookup was refused), and only where the
		 * policy denies reading: a readable path refused for another reason (its mode,
		 * /proc's ptrace check) is not the sandbox's doing. */
		if (op == 0 && !host_has(path)) {
			char parent[PATH_MAX];
			snprintf(parent, sizeof(parent), "%s", path);
			char *slash = strrchr(parent, '/');
			if (slash && slash != parent) {
				*slash = 0;
				if (host_has_dir(parent))
					op = 'w';
			}
		}
		if (op == 'w') {
			if (policy_denies(cfg, "write", path, rule, sizeof(rule)))
				add_fs(cfg, res, true, path, rule);
		} else {
			char near[PATH_MAX];
			nearest_existing(path, near);
			if (policy_denies(cfg, "read", near, rule, sizeof(rule)))
				add_fs(cfg, res, false, near, rule);
		}
		return;
	case K_ENOENT:
	case K_NODIR: {
		/* The sandbox hides a path by leaving it out: only a path the host has (a read),
		 * or a create in a directory the host has (a write), is a denial. A path missing
		 * on the host as well is just missing. */
		if (op == 'w') {
			char parent[PATH_MAX];
			snprintf(parent, sizeof(parent), "%s", path);
			char *slash = strrchr(parent, '/');
			if (!slash || slash == parent)
				return;
			*slash = 0;
			char prule[PATH_MAX + 64];
			if (host_has_dir(parent) && policy_denies(cfg, "read", parent, prule, sizeof(prule)) &&
			    policy_denies(cfg, "write", path, rule, sizeof(rule)))
				add_fs(cfg, res, true, path, rule);
		} else if (host_has(path) && policy_denies(cfg, "read", path, rule, sizeof(rule))) {
			add_fs(cfg, res, false, path, rule);
		}
		return;
	}
	default:
		return;
	}
}

static void infer_network(const struct corral_config *cfg, struct corral_result *res,
                          const char *line)
{
	if (cfg->net != CORRAL_NET_NONE || !layer_on(res, "netns"))
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

/* The real error shapes of tools whose system call the sandbox refuses. A line counts only
 * when it starts with the tool's own prefix (or, for gdb, its fixed text), carries the word
 * the real message has, and ends in the error; the layer is then looked up, not assumed. */
static const struct tool_shape {
	const char *tool;    /* the program, which must exist in the sandbox */
	const char *prefix;  /* the line starts with it ("strace: "), or NULL: anywhere */
	const char *word;    /* the real message also has this (case-insensitive), or NULL */
	enum infer_kind err; /* K_EPERM: "Operation not permitted"; K_PERMLOW: "permission denied." */
	const char *syscall;
} shapes[] = {
    /* strace: ptrace(PTRACE_TRACEME, ...): Operation not permitted
     * strace: attach: ptrace(PTRACE_SEIZE, 1): Operation not permitted */
    {"strace", "strace: ", "ptrace", K_EPERM, "ptrace"},
    {"ltrace", "ltrace: ", "ptrace", K_EPERM, "ptrace"},
    /* gdb: "ptrace: Operation not permitted." */
    {"gdb", NULL, "ptrace: Operation not permitted", K_EPERM, "ptrace"},
    /* unshare: unshare failed: Operation not permitted */
    {"unshare", "unshare: ", "unshare failed", K_EPERM, "unshare"},
    /* nsenter: reassociate to namespace 'ns/mnt' failed: Operation not permitted */
    {"nsenter", "nsenter: ", "reassociate to namespace", K_EPERM, "setns"},
    /* perf: ... perf_event_open(..., PERF_FLAG_FD_CLOEXEC) failed with unexpected error 1
     * (Operation not permitted) */
    {"perf", NULL, "perf_event_open", K_EPERM, "perf_event_open"},
    /* util-linux 2.38: mount: /tmp/m: permission denied. */
    {"mount", "mount: ", NULL, K_PERMLOW, "mount"},
    {"umount", "umount: ", NULL, K_PERMLOW, "umount2"},
    /* chroot: cannot change root directory to '/tmp': Operation not permitted */
    {"chroot", "chroot: ", "cannot change root directory", K_EPERM, "chroot"},
};

static bool in_seccomp_denylist(const char *syscall)
{
	const char *names[128];
	size_t n = seccomp_denied_names(names, ARRAY_SIZE(names));
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], syscall))
			return true;
	return false;
}

/* Does the command ask unshare for a user namespace (-U, -r, -c, --user, --map-...)? 1 yes,
 * 0 no, -1 unshare is not in the command's text (a script ran it): unknown. */
static int unshare_wants_userns(const struct corral_result *res)
{
	char text[4096] = "";
	if (res->command)
		snprintf(text, sizeof(text), "%s", res->command);
	else
		for (size_t i = 0, o = 0; res->argv && res->argv[i] && o < sizeof(text); i++)
			o += (size_t)snprintf(text + o, sizeof(text) - o, "%s ", res->argv[i]);
	const char *p = text;
	while ((p = strstr(p, "unshare")) && p != text && p[-1] != ' ' && p[-1] != '/' &&
	       p[-1] != ';' && p[-1] != '&' && p[-1] != '|' && p[-1] != '(')
		p += 7;
	if (!p)
		return -1;
	p += 7;
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p != '-')
			return 0;
		size_t n = strcspn(p, " \t;&|)");
		if (p[1] == '-') {
			if (!strncmp(p, "--user", 6) || !strncmp(p, "--map-", 6))
				return 1;
		} else {
			for (size_t i = 1; i < n; i++)
				if (p[i] == 'U' || p[i] == 'r' || p[i] == 'c')
					return 1;
		}
		p += n;
	}
}

static void infer_syscall(const struct corral_config *cfg, struct corral_result *res,
                          const char *line, enum infer_kind err)
{
	for (size_t i = 0; i < ARRAY_SIZE(shapes); i++) {
		const struct tool_shape *t = &shapes[i];
		char found[PATH_MAX];
		if (t->err != err || (t->prefix && strncmp(line, t->prefix, strlen(t->prefix))) ||
		    (t->word && !strcasestr(line, t->word)))
			continue;
		if (policy_which(cfg, t->tool, sandbox_path_env(cfg), found) < 0)
			return; /* the tool is not in the sandbox: the line is someone's text */
		/* the layer that refused: seccomp when the call is on its deny-list (unshare:
		 * only for a new user namespace), else the dropped capabilities */
		bool sec = layer_on(res, "seccomp") && in_seccomp_denylist(t->syscall);
		const char *rule = NULL;
		if (!strcmp(t->syscall, "unshare") && layer_on(res, "seccomp")) {
			int u = unshare_wants_userns(res);
			rule = u == 1   ? "seccomp (new user namespaces)"
			       : u == 0 ? (layer_on(res, "caps") ? "capabilities (dropped)" : NULL)
			                : "seccomp (new user namespaces) or capabilities (dropped)";
		} else if (sec) {
			rule = "seccomp";
		} else if (layer_on(res, "caps")) {
			rule = "capabilities (dropped)";
		}
		if (!rule)
			return; /* nothing in this sandbox refuses it: not ours to report */
		char hint[400];
		snprintf(hint, sizeof(hint),
		         "The sandbox does not allow the %s system call (%s), so this cannot be done "
		         "here; find a way that does not need it.",
		         t->syscall, rule);
		result_add_violation(res, "syscall", t->syscall, rule, hint, 1);
		return;
	}
}

/* The shapes of a refused process creation: "bash: fork: Resource temporarily unavailable",
 * "bash: fork: retry: Resource temporarily unavailable", "sh: 1: Cannot fork",
 * "make: vfork: Resource ...", "pthread_create: Resource ...", "... pthread_create failed:
 * Resource ...", "clone: Resource ...". The call's name must stand as a word right before
 * ": " (or " failed: "), so an EAGAIN line that merely mentions a clone (a `git clone`
 * transport error, a path like /srv/clone-cache: ...) claims nothing. */
static bool fork_refused(const char *line)
{
	if (strstr(line, "Cannot fork"))
		return true;
	static const char *const calls[] = {"fork", "vfork", "clone", "clone3", "pthread_create",
	                                    "posix_spawn"};
	static const char *const tails[] = {": Resource temporarily unavailable", ": retry: ",
	                                    " failed: Resource temporarily unavailable"};
	for (size_t i = 0; i < ARRAY_SIZE(calls); i++) {
		size_t n = strlen(calls[i]);
		for (const char *p = line; (p = strstr(p, calls[i])); p += n) {
			if (p > line && p[-1] != ' ' && p[-1] != ':')
				continue; /* part of a longer word or a path */
			for (size_t t = 0; t < ARRAY_SIZE(tails); t++)
				if (!strncmp(p + n, tails[t], strlen(tails[t])))
					return true;
		}
	}
	return false;
}

/* A refused process creation (fork_refused): a process limit. With the run's own cgroup the
 * evidence is already in (supervise.c); this covers runs whose limit is RLIMIT_NPROC, and
 * budgets outside the run. */
static void infer_fork(const struct corral_config *cfg, struct corral_result *res,
                       const char *line, enum infer_kind k)
{
	(void)k;
	if (!fork_refused(line))
		return;
	if (res->limit == CORRAL_HIT_PIDS)
		return; /* already reported from the evidence */
	for (size_t i = 0; i < res->n_violations; i++)
		if (!strcmp(res->violations[i].kind, "limit") && strstr(res->violations[i].rule, "pids"))
			return;
	const struct corral_layer *cg = NULL;
	for (size_t i = 0; i < res->n_layers; i++)
		if (!strcmp(res->layers[i].name, "cgroup") && res->layers[i].applied)
			cg = &res->layers[i];
	bool cg_pids = cg && cg->detail && strstr(cg->detail, "pids");
	/* RLIMIT_NPROC, when the run has it and it is enforced (not for uid 0) */
	bool nproc = false;
	for (size_t i = 0; !cg_pids && i < res->n_layers; i++)
		if (!strcmp(res->layers[i].name, "rlimits") && res->layers[i].applied &&
		    res->layers[i].detail && strstr(res->layers[i].detail, "nproc") &&
		    !strstr(res->layers[i].detail, "not enforced"))
			nproc = true;
	uint64_t n = cfg->limits[CORRAL_LIMIT_PIDS];
	if (nproc && n) {
		/* counted per user in the sandbox's own user namespace, so then the run's own
		 * processes; without one, all of the host user's processes count */
		char obj[64], hint[400];
		bool own = layer_on(res, "userns");
		snprintf(obj, sizeof(obj), "%llu processes", (unsigned long long)n);
		snprintf(hint, sizeof(hint),
		         own ? "Starting a new process failed, most likely at this run's limit of %llu "
		               "processes (RLIMIT_NPROC); run fewer things in parallel."
		             : "Starting a new process failed, most likely at the limit of %llu "
		               "processes (RLIMIT_NPROC), which counts every process of this user on "
		               "the host; run fewer things in parallel.",
		         (unsigned long long)n);
		result_add_violation(res, "limit", obj, "pids (RLIMIT_NPROC)", hint, 1);
		return;
	}
	if (cg_pids && res->session_id) {
		/* a session's cgroup is not checked per command: either limit may have refused */
		violations_pids_elsewhere(cfg, res, 0);
		return;
	}
	/* The run's own cgroup refused no fork (supervise.c would have said), and no rlimit of
	 * the run's counts processes: what ran out is outside the run (the server's
	 * RLIMIT_NPROC, the host's threads-max or pid_max). */
	result_add_violation(res, "limit", OBJ_BUDGET, "outside the run (server or host)",
	                     "Starting a new process failed because a process budget outside this "
	                     "run ran out (the server's or the host's), not this run's own limit; "
	                     "retry when other work is done, or run fewer processes at once.",
	                     1);
}

static void infer(const struct corral_config *cfg, struct corral_result *res, const char *text,
                  size_t len)
{
	bool fs = layer_on(res, "mountns") || layer_on(res, "landlock");
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
				enum infer_kind k = needles[i].kind;
				if (k == K_EACCES || k == K_EROFS || k == K_ENOENT || k == K_NODIR) {
					if (fs)
						infer_fs(cfg, res, buf, at, needles[i].text, k);
				} else if (k == K_NET) {
					infer_network(cfg, res, buf);
				} else if (k == K_EPERM || k == K_PERMLOW) {
					infer_syscall(cfg, res, buf, k);
				} else {
					infer_fork(cfg, res, buf, k);
				}
				break;
			}
		}
		line = nl ? nl + 1 : end;
	}
}

/* The sandbox could not be started because a fork or clone was refused (EAGAIN): no limit of
 * the run applied yet, so a budget outside it ran out. */
static void from_setup(struct corral_result *res)
{
	if (res->error.code == 0 || res->error.code == CORRAL_EDENIED ||
	    res->error.sys_errno != EAGAIN ||
	    (strcmp(res->error.step, "clone") && strcmp(res->error.step, "fork")))
		return;
	result_add_violation(res, "limit", OBJ_BUDGET, "outside the run (server or host)",
	                     "The sandbox could not start a process because a process budget "
	                     "outside this run ran out (the server's or the host's); retry when "
	                     "other work is done.",
	                     1);
}

void violations_collect(const struct corral_config *cfg, struct corral_result *res)
{
	from_error(cfg, res);
	from_setup(res);
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
