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
	json_t *cond = json_pack("[sssssss]", "clone/unshare with CLONE_NEWUSER: EPERM (clone3: ENOSYS)",
	                         "ioctl TIOCSTI, TIOCLINUX: EPERM (low 32 bits compared)",
	                         "socket: only AF_UNIX, AF_INET, AF_INET6",
	                         "personality: only the default persona",
	                         "chmod/fchmod/fchmodat/open/openat/creat/mknod with a setuid or "
	                         "setgid mode: EPERM (openat2: ENOSYS)",
	                         "prlimit64 on another process: EPERM",
	                         "x32 and i386 system calls: the process is killed");
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
	static const char *const names[CORRAL_LIMIT__COUNT] = {"cpu_s", "memory", "pids", "nofile",
	                                                       "fsize", "tmpfs"};
	json_t *o = json_object();
	for (int i = 0; i < CORRAL_LIMIT__COUNT; i++)
		json_object_set_new(o, names[i], cfg->limits[i] ? json_integer((json_int_t)cfg->limits[i])
		                                                : json_null());
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
	json_object_set_new(o, "network",
	                    json_string(cfg->net == CORRAL_NET_HOST ? "host (shared with the host!)"
	                                                            : "none (loopback only)"));
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

static bool is_protected(const struct corral_config *cfg, const char *path, char *which)
{
	const char *const *list = cfg->protected_set ? (const char *const *)cfg->protected_paths
	                                             : policy_default_protected;
	size_t n = cfg->protected_set ? cfg->n_protected : 0;
	if (!cfg->protected_set)
		while (list[n])
			n++;
	for (size_t i = 0; i < n; i++) {
		char p[PATH_MAX];
		size_t len = strlen(list[i]);
		snprintf(p, sizeof(p), "%s/%.*s", cfg->workspace,
		         (int)(len && list[i][len - 1] == '/' ? len - 1 : len), list[i]);
		if (path_within(path, p)) {
			snprintf(which, PATH_MAX, "%s", list[i]);
			return true;
		}
	}
	return false;
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

static void query_exec(const struct corral_config *cfg, const char *target, struct answer *a)
{
	struct exec_decision d;
	policy_decide_exec(cfg, target, &d);
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
	struct answer a;
	memset(&a, 0, sizeof(a));
	if (!strcmp(op, "read"))
		query_path(cfg, false, target, &a);
	else if (!strcmp(op, "write"))
		query_path(cfg, true, target, &a);
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
