/* Explain and query the policy without running anything: `corral run --dry-run`,
 * `corral policy explain`, `corral policy check` and the MCP can_i tool. The plan shown is
 * built by the same code that launches (plan.c), with host side effects turned off. */
#include "launch.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const char *op_kind_name(enum mount_op_kind k)
{
	switch (k) {
	case MOP_BIND_RO:
		return "bind-ro";
	case MOP_BIND_RW:
		return "bind-rw";
	case MOP_BIND_DEV:
		return "device";
	case MOP_TMPFS:
		return "tmpfs";
	case MOP_PROC:
		return "proc";
	case MOP_DEVPTS:
		return "devpts";
	case MOP_SYMLINK:
		return "symlink";
	case MOP_DIR:
		return "dir";
	case MOP_RO_REMOUNT:
		return "read-only";
	case MOP_FILE_RO:
		return "file-ro";
	case MOP_MASK:
		return "mask";
	}
	return "?";
}

static json_t *access_json(unsigned a)
{
	json_t *arr = json_array();
	if (a & LL_READ)
		json_array_append_new(arr, json_string("read"));
	if (a & LL_LIST)
		json_array_append_new(arr, json_string("list"));
	if (a & LL_WRITE)
		json_array_append_new(arr, json_string("write"));
	if (a & LL_EXEC)
		json_array_append_new(arr, json_string("exec"));
	if (a & LL_DEV)
		json_array_append_new(arr, json_string("ioctl-dev"));
	return arr;
}

static json_t *mounts_json(const struct launch *L)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < L->mounts.n_ops; i++) {
		const struct mount_op *op = &L->mounts.ops[i];
		struct stat st;
		/* optional sources that do not exist are skipped by the child: leave them out */
		if (op->optional && op->src && op->kind != MOP_SYMLINK && op->kind != MOP_MASK &&
		    stat(op->src, &st) < 0)
			continue;
		json_t *m = json_object();
		json_object_set_new(m, "type", json_string(op_kind_name(op->kind)));
		json_object_set_new(m, "target", json_string(op->dst));
		if (op->optional)
			json_object_set_new(m, "optional", json_true());
		if (op->src)
			json_object_set_new(m, op->kind == MOP_SYMLINK ? "link" : "source",
			                    json_string(op->src));
		json_array_append_new(arr, m);
	}
	return arr;
}

static json_t *landlock_json(const struct launch *L)
{
	json_t *o = json_object();
	json_object_set_new(o, "applied", json_boolean(L->landlock));
	if (!L->landlock)
		return o;
	json_object_set_new(o, "abi", json_integer(L->ll.abi));
	json_object_set_new(o, "tcp", json_string(L->ll.deny_tcp && L->ll.abi >= 4 ? "denied"
	                                          : L->ll.deny_tcp            ? "not enforced (abi < 4)"
	                                                                      : "allowed"));
	json_object_set_new(o, "scoped", json_boolean(L->ll.scope && L->ll.abi >= 6));
	json_t *rules = json_array();
	for (size_t i = 0; i < L->ll.n_rules; i++) {
		json_t *r = json_object();
		json_object_set_new(r, "path", json_string(L->ll.rules[i].path));
		json_object_set_new(r, "access", access_json(L->ll.rules[i].access));
		json_array_append_new(rules, r);
	}
	json_object_set_new(o, "rules", rules);
	return o;
}

static json_t *seccomp_json(const struct launch *L)
{
	json_t *o = json_object();
	json_object_set_new(o, "applied", json_boolean(L->seccomp));
	json_object_set_new(o, "action", json_string("EPERM (deny-list; everything else allowed)"));
	const char *names[128];
	size_t n = seccomp_denied_names(names, ARRAY_SIZE(names));
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, json_string(names[i]));
	json_object_set_new(o, "denied", arr);
	/* The foreign ABIs are reported once, under "foreign_abis" (not in this list too). */
	json_t *cond = json_pack("[ssssss]", "clone/unshare with CLONE_NEWUSER: EPERM (clone3: ENOSYS)",
	                         "ioctl TIOCSTI, TIOCLINUX: EPERM (low 32 bits compared)",
	                         "socket: only AF_UNIX, AF_INET, AF_INET6",
	                         "personality: only the default persona",
	                         "chmod/fchmod/fchmodat/open/openat/creat/mknod with a setuid or "
	                         "setgid mode: EPERM (openat2: ENOSYS)",
	                         "prlimit64 on another process: EPERM");
	if (!L->userns)
		json_array_append_new(cond, json_string("socket(AF_UNIX): EPERM (no namespaces; "
		                                        "socketpair stays)"));
	json_object_set_new(o, "conditional", cond);
	json_object_set_new(o, "foreign_abis", json_string("i386 and x32 system calls kill the process"));
	return o;
}

static json_t *env_json(const struct launch *L)
{
	json_t *o = json_object();
	json_t *names = json_array();
	for (char **e = L->envp; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		json_array_append_new(names, json_stringn(*e, eq ? (size_t)(eq - *e) : strlen(*e)));
	}
	json_object_set_new(o, "names", names);
	struct env_entry *pass = NULL, *withheld = NULL;
	size_t np = 0, nw = 0;
	json_t *w = json_array();
	if (policy_env(L->cfg, &pass, &np, &withheld, &nw) == 0)
		for (size_t i = 0; i < nw; i++) {
			json_t *x = json_object();
			json_object_set_new(x, "name", json_string(withheld[i].name));
			json_object_set_new(x, "rule",
			                    json_string(policy_env_denied_by(L->cfg, withheld[i].name)));
			json_object_set_new(x, "value", json_string("(withheld)"));
			json_array_append_new(w, x);
		}
	env_entries_free_list(pass, np);
	env_entries_free_list(withheld, nw);
	json_object_set_new(o, "withheld", w);
	return o;
}

static json_t *limits_json(const struct corral_config *cfg)
{
	static const char *const names[CORRAL_LIMIT__COUNT] = {
	    [CORRAL_LIMIT_CPU_S] = "cpu_s", [CORRAL_LIMIT_MEMORY] = "memory",
	    [CORRAL_LIMIT_PIDS] = "pids",   [CORRAL_LIMIT_NOFILE] = "nofile",
	    [CORRAL_LIMIT_FSIZE] = "fsize", [CORRAL_LIMIT_TMPFS] = "tmpfs",
	    [CORRAL_LIMIT_CPUS] = "cpus"};
	json_t *o = json_object();
	for (int i = 0; i < CORRAL_LIMIT__COUNT; i++) {
		const uint64_t v = cfg->limits[i];
		/* cpus in CPUs (0.5), kept as hundredths in the config */
		json_object_set_new(o, names[i],
		                    !v                      ? json_null()
		                    : i == CORRAL_LIMIT_CPUS ? json_real((double)v / 100.0)
		                                             : json_integer((json_int_t)v));
	}
	json_object_set_new(o, "timeout_ms", json_integer((json_int_t)cfg->timeout_ms));
	json_object_set_new(o, "kill_after_ms", json_integer((json_int_t)cfg->kill_after_ms));
	json_object_set_new(o, "output_cap", json_integer((json_int_t)cfg->output_cap));
	return o;
}

static json_t *decision_json(const struct corral_config *cfg)
{
	json_t *o = json_object();
	if (!cfg->argv)
		return o;
	json_t *argv = json_array();
	for (char **a = cfg->argv; *a; a++)
		json_array_append_new(argv, json_string(*a));
	json_object_set_new(o, "argv", argv);
	struct exec_decision d;
	policy_decide_exec(cfg, cfg->argv[0], &d);
	json_object_set_new(o, "resolved", d.found ? json_string(d.path) : json_null());
	json_object_set_new(o, "real", d.found ? json_string(d.real) : json_null());
	struct corral_error e = {0};
	int r = policy_preflight(cfg, &e);
	json_object_set_new(o, "decision", json_string(r == 0 ? "allowed" : "denied"));
	/* the deciding rule: the command's, or the argument check's when that one denied */
	json_object_set_new(o, "rule", json_string(r < 0 && d.allowed ? "argument path confinement"
	                                                              : d.list));
	if (d.rule && d.rule->reason)
		json_object_set_new(o, "reason", json_string(d.rule->reason));
	if (r < 0)
		json_object_set_new(o, "message", json_string(e.message));
	if (!d.found)
		json_object_set_new(o, "note",
		                    json_string("not found in the sandbox's PATH: the run would exit "
		                                "127"));
	return o;
}

int corral_explain(const corral_config *cfg, char **json_out, struct corral_error *err)
{
	*json_out = NULL;
	if (!cfg->workspace)
		return corral_set_error(err, CORRAL_EINVAL, 0, "config",
		                        "config: no workspace set; set a workspace directory");
	struct launch L;
	memset(&L, 0, sizeof(L));
	L.cfg = cfg;
	L.dry_run = true;
	L.uid = getuid();
	L.gid = getgid();
	struct corral_result *res = result_new();
	if (!res)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "explain", "out of memory");
	json_t *o = json_object();
	json_object_set_new(o, "profile", json_string(cfg->profile_name ? cfg->profile_name
	                                                                : "default"));
	struct corral_error perr = {0};
	int r = plan_choose_layers(&L, res, &perr);
	/* The command decision is reported on its own below; the plan is built regardless. */
	if (r == 0)
		r = plan_prepare(&L, res, &perr);
	if (r == 0)
		plan_record_layers(&L, res);
	json_object_set_new(o, "mode", json_string(res->mode ? res->mode : "required"));
	/* what the plan gives, not only what was asked: mode none (or a host that refuses
	 * the namespace, mode auto) shares the host's network */
	json_object_set_new(
	    o, "network",
	    json_string(cfg->net == CORRAL_NET_HOST ? "host (shared with the host!)"
	                : r < 0 || L.netns          ? "none (loopback only)"
	                : L.landlock && L.ll.deny_tcp && L.ll.abi >= 4
	                    ? "host (shared: no network namespace; TCP denied by Landlock, UDP "
	                      "and other protocols NOT contained)"
	                    : "host (shared: no network namespace; NOT contained)"));
	json_object_set_new(o, "workspace", json_string(cfg->workspace));
	json_object_set_new(o, "workspace_access", json_string(cfg->workspace_ro ? "read-only"
	                                                                         : "read-write"));
	if (r < 0) {
		json_object_set_new(o, "error", json_string(perr.message));
	} else {
		json_t *iso = json_object();
		for (size_t i = 0; i < res->n_layers; i++) {
			json_t *l = json_object();
			json_object_set_new(l, "applied", json_boolean(res->layers[i].applied));
			json_object_set_new(l, "detail", json_string(res->layers[i].detail));
			json_object_set_new(iso, res->layers[i].name, l);
		}
		json_object_set_new(o, "isolation", iso);
		json_object_set_new(o, "mounts", L.mountns ? mounts_json(&L) : json_array());
		json_t *prot = json_array();
		for (size_t i = 0; i < L.req.n_protect; i++)
			json_array_append_new(prot, json_string(L.req.protect[i]));
		json_object_set_new(o, "protected", prot);
		json_t *ph = json_array();
		for (size_t i = 0; i < L.n_held; i++)
			if (L.held[i].created)
				json_array_append_new(ph, json_string(L.held[i].path));
		json_object_set_new(o, "placeholders", ph);
		json_object_set_new(o, "landlock", landlock_json(&L));
		json_object_set_new(o, "seccomp", seccomp_json(&L));
		json_object_set_new(o, "env", env_json(&L));
		if (cfg->cmd_allow_set) {
			json_t *ex = json_array();
			for (size_t i = 0; i < L.n_exec_files; i++)
				json_array_append_new(ex, json_string(L.exec_files[i]));
			json_object_set_new(o, "executable", ex);
		}
	}
	json_object_set_new(o, "limits", limits_json(cfg));
	json_object_set_new(o, "command", decision_json(cfg));
	plan_release_protected(L.held, L.n_held);
	free(L.private_tmp);
	plan_free(&L);
	corral_result_free(res);
	*json_out = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!*json_out)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "explain", "out of memory");
	return 0;
}

/* ---- policy queries ------------------------------------------------------------------ */

struct answer {
	bool allowed;
	char rule[PATH_MAX + 64];
	char reason[PATH_MAX + 512];
};

static bool in_list(const struct corral_config *cfg, char **list, size_t n, const char *path,
                    char *which)
{
	for (size_t i = 0; i < n; i++) {
		char res[PATH_MAX];
		if (policy_resolve_path(cfg, list[i], res, NULL) == 0 && path_within(path, res)) {
			snprintf(which, PATH_MAX, "%s", res);
			return true;
		}
	}
	return false;
}

/* Asks the same code that builds the run's protected set (dry run: nothing is created), so
 * the answer agrees with what is enforced: a missing .git is read-only as a whole, a .git
 * file is read-only, submodule git directories count. */
static bool is_protected(const struct corral_config *cfg, const char *path, char *which)
{
	struct launch L;
	memset(&L, 0, sizeof(L));
	L.cfg = cfg;
	L.dry_run = true;
	L.mountns = true; /* the set where it is enforced (no placeholders without one) */
	bool hit = false;
	(void)plan_protected_set(&L, NULL); /* a partial set still answers */
	for (size_t i = 0; i < L.req.n_protect && !hit; i++)
		if (path_within(path, L.req.protect[i])) {
			const char *rel = L.req.protect[i] + strlen(cfg->workspace);
			while (*rel == '/')
				rel++;
			bool placeholder = false;
			for (size_t k = 0; k < L.n_held; k++)
				placeholder |= !strcmp(L.held[k].path, L.req.protect[i]);
			snprintf(which, PATH_MAX, "%s%s", rel,
			         placeholder ? " (absent: an empty read-only placeholder)" : "");
			hit = true;
		}
	plan_release_protected(L.held, L.n_held);
	for (size_t i = 0; i < L.req.n_protect; i++)
		free(L.req.protect[i]);
	free((void *)L.req.protect);
	for (size_t i = 0; i < L.req.n_pin; i++)
		free(L.req.pin[i]);
	free((void *)L.req.pin);
	return hit;
}

static void query_path(const struct corral_config *cfg, bool write, const char *target,
                       struct answer *a)
{
	char path[PATH_MAX], which[PATH_MAX];
	if (policy_resolve_path(cfg, target, path, NULL) < 0) {
		snprintf(a->rule, sizeof(a->rule), "invalid path");
		return;
	}
	if (in_list(cfg, cfg->fs_deny, cfg->n_deny, path, which)) {
		snprintf(a->rule, sizeof(a->rule), "filesystem.deny %s", which);
		snprintf(a->reason, sizeof(a->reason), "%s is hidden by the policy (deny wins)", path);
		return;
	}
	static const char *const private[] = {"/tmp", "/dev/shm"};
	bool ws = path_within(path, cfg->workspace);
	if (!ws) /* the workspace is bound at its own path, even under /tmp */
		for (size_t i = 0; i < ARRAY_SIZE(private); i++)
			if (path_within(path, private[i])) {
				a->allowed = true;
				snprintf(a->rule, sizeof(a->rule), "private %s", private[i]);
				snprintf(a->reason, sizeof(a->reason),
				         "%s is the sandbox's own %s, empty at start and not the host's",
				         path, private[i]);
				return;
			}
	if (write) {
		if (ws && is_protected(cfg, path, which)) {
			snprintf(a->rule, sizeof(a->rule), "protected %s", which);
			snprintf(a->reason, sizeof(a->reason),
			         "%s is a protected path: read-only even in the writable workspace", path);
			return;
		}
		if (in_list(cfg, cfg->fs_write, cfg->n_write, path, which)) {
			a->allowed = true;
			snprintf(a->rule, sizeof(a->rule), "filesystem.write %s", which);
			return;
		}
		if (ws && !cfg->workspace_ro) {
			a->allowed = true;
			snprintf(a->rule, sizeof(a->rule), "workspace %s (read-write)", cfg->workspace);
			return;
		}
		snprintf(a->rule, sizeof(a->rule), ws ? "workspace (read-only)" : "no writable tree");
		snprintf(a->reason, sizeof(a->reason),
		         "only the workspace%s, /tmp and filesystem.write paths are writable",
		         cfg->workspace_ro ? " (read-only in this profile)" : "");
		return;
	}
	if (ws || in_list(cfg, cfg->fs_write, cfg->n_write, path, which) ||
	    in_list(cfg, cfg->fs_read, cfg->n_read, path, which)) {
		a->allowed = true;
		snprintf(a->rule, sizeof(a->rule), ws ? "workspace %s" : "filesystem path %s",
		         ws ? cfg->workspace : which);
		return;
	}
	static const char *const system[] = {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32",
	                                      "/proc", "/dev"};
	for (size_t i = 0; i < ARRAY_SIZE(system); i++)
		if (path_within(path, system[i])) {
			a->allowed = true;
			snprintf(a->rule, sizeof(a->rule), "system %s (read-only)", system[i]);
			return;
		}
	if (path_within(path, "/etc")) {
		/* ask the plan: is it on the /etc allow-list? */
		struct launch L;
		memset(&L, 0, sizeof(L));
		struct mount_request q = {.workspace = cfg->workspace, .cwd = cfg->workspace,
		                          .etc_minimal = cfg->etc_minimal};
		if (mount_plan_build(&L.mounts, &q, NULL) == 0) {
			for (size_t i = 0; i < L.mounts.n_ops && !a->allowed; i++)
				if (L.mounts.ops[i].kind != MOP_SYMLINK &&
				    path_within(path, L.mounts.ops[i].dst) &&
				    path_within(L.mounts.ops[i].dst, "/etc")) {
					a->allowed = true;
					snprintf(a->rule, sizeof(a->rule), "/etc allow-list %s",
					         L.mounts.ops[i].dst);
				}
			mount_plan_free(&L.mounts);
		}
		if (a->allowed)
			return;
		snprintf(a->rule, sizeof(a->rule), "/etc allow-list");
		snprintf(a->reason, sizeof(a->reason),
		         "%s is not among the /etc files the sandbox sees (secrets such as shadow are "
		         "never mounted)",
		         path);
		return;
	}
	snprintf(a->rule, sizeof(a->rule), "not visible");
	snprintf(a->reason, sizeof(a->reason),
	         "%s is outside every tree the sandbox can see; add it with --ro or "
	         "filesystem.read",
	         path);
}

/* Can the sandbox itself see the file at path (and where it leads)? On no, a holds the rule
 * that hides it. The host's /tmp is not the sandbox's. */
static bool exec_visible(const struct corral_config *cfg, const char *path, struct answer *a)
{
	char *real = realpath(path, NULL);
	const char *look[2] = {path, real};
	bool ok = true;
	for (int i = 0; i < 2 && ok && look[i]; i++) {
		memset(a, 0, sizeof(*a));
		query_path(cfg, false, look[i], a);
		if (a->allowed && !strncmp(a->rule, "private ", 8)) {
			a->allowed = false;
			snprintf(a->reason, sizeof(a->reason),
			         "%s is in the host's %s; the sandbox has its own, empty one", look[i],
			         a->rule + 8);
			snprintf(a->rule, sizeof(a->rule), "not visible");
		}
		ok = a->allowed;
	}
	free(real);
	return ok;
}

static bool host_exec_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
}

/* The command as the sandbox would run it: a name goes through the sandbox's PATH, where a
 * file the sandbox cannot see (hidden by filesystem.deny, or outside every visible tree) is
 * passed over as execvp passes over one it cannot execute. Then the command rules. */
static void query_exec(const struct corral_config *cfg, const char *target, struct answer *a)
{
	char found[PATH_MAX] = "";
	struct answer hidden = {0}, v;
	bool any_hidden = false;
	if (strchr(target, '/')) {
		if (policy_which(cfg, target, NULL, found) == 0 && !exec_visible(cfg, found, &v)) {
			hidden = v;
			any_hidden = true;
			found[0] = 0;
		}
	} else {
		for (const char *p = sandbox_path_env(cfg); p && *p;) {
			const char *end = strchr(p, ':');
			size_t len = end ? (size_t)(end - p) : strlen(p);
			char cand[PATH_MAX];
			if (len && (size_t)snprintf(cand, sizeof(cand), "%.*s/%s", (int)len, p, target) <
			               sizeof(cand) &&
			    host_exec_file(cand)) {
				if (exec_visible(cfg, cand, &v)) {
					snprintf(found, sizeof(found), "%s", cand);
					break;
				}
				if (!any_hidden)
					hidden = v;
				any_hidden = true;
			}
			if (!end)
				break;
			p = end + 1;
		}
	}
	if (!found[0] && any_hidden) {
		a->allowed = false;
		snprintf(a->rule, sizeof(a->rule), "%s", hidden.rule);
		snprintf(a->reason, sizeof(a->reason), "%.1024s cannot be run in the sandbox: %.2048s",
		         target, hidden.reason[0] ? hidden.reason : "the file is not visible there");
		return;
	}
	struct exec_decision d;
	policy_decide_exec(cfg, found[0] ? found : target, &d);
	a->allowed = d.allowed && d.found;
	snprintf(a->rule, sizeof(a->rule), "%s%s%s", d.list, d.rule ? " " : "",
	         d.rule ? d.rule->match : "");
	if (!d.found)
		snprintf(a->reason, sizeof(a->reason), "%s is not found in the sandbox's PATH", target);
	else if (d.rule && d.rule->reason)
		snprintf(a->reason, sizeof(a->reason), "%s", d.rule->reason);
	else if (!d.allowed)
		snprintf(a->reason, sizeof(a->reason), "%s is not on the command allow-list", target);
}

/* Mode none: no Landlock holds the command rules at execve, and every file is visible; only
 * the preflight of the top-level command applies. */
static void query_exec_none(const struct corral_config *cfg, const char *target, struct answer *a)
{
	struct exec_decision d;
	policy_decide_exec(cfg, target, &d);
	a->allowed = d.allowed && d.found;
	snprintf(a->rule, sizeof(a->rule), "mode none, %s%s%s", d.list, d.rule ? " " : "",
	         d.rule ? d.rule->match : "");
	if (!d.found)
		snprintf(a->reason, sizeof(a->reason), "%.2048s is not found in the PATH", target);
	else if (!d.allowed)
		snprintf(a->reason, sizeof(a->reason),
		         "%.2048s (mode none: refused as the top-level command only, not when "
		         "something else runs it)",
		         d.rule && d.rule->reason ? d.rule->reason
		                                  : "not on the command allow-list");
	else
		snprintf(a->reason, sizeof(a->reason),
		         "mode none applies no isolation: the command rules are checked for the "
		         "top-level command only, not for what it runs");
}

static void query_connect(const struct corral_config *cfg, const char *target, struct answer *a)
{
	if (cfg->net == CORRAL_NET_HOST) {
		a->allowed = true;
		snprintf(a->rule, sizeof(a->rule), "network host");
		snprintf(a->reason, sizeof(a->reason), "the sandbox shares the host's network");
		return;
	}
	bool local = !strncmp(target, "127.", 4) || !strncmp(target, "localhost:", 10) ||
	             !strncmp(target, "[::1]", 5);
	snprintf(a->rule, sizeof(a->rule), "network none");
	if (local)
		snprintf(a->reason, sizeof(a->reason),
		         "%s reaches only services started inside the same sandbox (its own loopback), "
		         "never the host's",
		         target);
	else
		snprintf(a->reason, sizeof(a->reason),
		         "network access is disabled in this sandbox; %s cannot be reached. Ask the "
		         "user for a profile that allows the network",
		         target);
}

int corral_policy_query(const corral_config *cfg, const char *op, const char *target,
                        char **json_out, struct corral_error *err)
{
	*json_out = NULL;
	if (!cfg->workspace)
		return corral_set_error(err, CORRAL_EINVAL, 0, "config", "config: no workspace set");
	if (!target || !*target || strlen(target) >= PATH_MAX)
		return corral_set_error(err, CORRAL_EINVAL, 0, "policy",
		                        "policy: the target is empty or too long");
	const char *why = NULL;
	if (!strcmp(op, "connect") && parse_hostport(target, &why) < 0)
		return corral_set_error(err, CORRAL_EINVAL, 0, "policy",
		                        "policy: invalid network target '%.256s': %s", target, why);
	struct answer a;
	memset(&a, 0, sizeof(a));
	bool known = !strcmp(op, "read") || !strcmp(op, "write") || !strcmp(op, "exec") ||
	             !strcmp(op, "connect");
	if (known && cfg->mode == CORRAL_MODE_NONE && strcmp(op, "exec")) {
		/* nothing isolates the command: the answer is the host's, not the policy's */
		a.allowed = true;
		snprintf(a.rule, sizeof(a.rule), "mode none");
		snprintf(
		    a.reason, sizeof(a.reason),
		    "mode none applies no isolation: the command %s %.2048s with the caller's own "
		    "access (host permissions decide); the policy's filesystem and network rules "
		    "are not enforced",
		    !strcmp(op, "connect") ? "reaches"
		    : !strcmp(op, "read")  ? "reads"
		                           : "writes",
		    target);
	} else if (!strcmp(op, "read"))
		query_path(cfg, false, target, &a);
	else if (!strcmp(op, "write"))
		query_path(cfg, true, target, &a);
	else if (!strcmp(op, "exec") && cfg->mode == CORRAL_MODE_NONE)
		query_exec_none(cfg, target, &a);
	else if (!strcmp(op, "exec"))
		query_exec(cfg, target, &a);
	else if (!strcmp(op, "connect"))
		query_connect(cfg, target, &a);
	else
		return corral_set_error(err, CORRAL_EINVAL, 0, "policy",
		                        "policy: unknown operation '%s'; use read, write, exec or "
		                        "connect",
		                        op);
	/* paths are bytes: json_bytes keeps the document valid for any of them */
	json_t *o = json_object();
	json_object_set_new(o, "op", json_string(op));
	json_object_set_new(o, "target", json_bytes(target, strlen(target)));
	json_object_set_new(o, "allowed", json_boolean(a.allowed));
	json_object_set_new(o, "rule", json_bytes(a.rule, strlen(a.rule)));
	if (a.reason[0])
		json_object_set_new(o, "reason", json_bytes(a.reason, strlen(a.reason)));
	*json_out = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!*json_out)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "policy", "out of memory");
	return a.allowed ? 1 : 0;
}
