/* Parent-side preparation of a launch: which layers apply, the mount plan, the Landlock
 * rules that mirror it, the environment, the limits. Everything here may allocate; the child
 * only reads the result. */
#include "hcache.h"
#include "launch.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/xattr.h>

/* Where this process's argv strings live (fields 48 and 49 of /proc/self/stat), read once. */
void plan_argarea(uintptr_t *start, uintptr_t *end)
{
	static uintptr_t s_start, s_end;
	static int done;
	if (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
		FILE *f = fopen("/proc/self/stat", "re");
		char buf[2048];
		if (f && fgets(buf, sizeof(buf), f)) {
			char *p = strrchr(buf, ')');
			int field = 2;
			unsigned long long a = 0, b = 0;
			for (; p && *p; p++) {
				if (*p != ' ')
					continue;
				field++;
				if (field == 48)
					a = strtoull(p + 1, NULL, 10);
				else if (field == 49)
					b = strtoull(p + 1, NULL, 10);
			}
			s_start = (uintptr_t)a;
			s_end = (uintptr_t)b;
		}
		if (f)
			fclose(f);
		__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
	}
	*start = s_start;
	*end = s_end;
}

/* The seccomp programs, prepared once per process and shared by every launch: one for
 * sandboxes with namespaces, one for the no-namespace tier and runs without their network
 * namespace (which also denies AF_UNIX sockets). seccomp_prepare() copies the program baked at
 * build time; only a build without one, or one that fails its sanity check, compiles with
 * libseccomp here. */
static pthread_mutex_t sc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct seccomp_prog sc_prog[2];
static int sc_state[2]; /* 0 not tried, 1 ready, -1 failed */
static struct corral_error sc_err[2];

const struct seccomp_prog *plan_seccomp(bool no_namespaces, struct corral_error *err)
{
	int k = no_namespaces ? 1 : 0;
	pthread_mutex_lock(&sc_lock);
	if (sc_state[k] == 0) {
		struct seccomp_opts o = {.allow_userns = 0, .deny_unix_sockets = k};
		sc_state[k] = seccomp_prepare(&o, &sc_prog[k], &sc_err[k]) == 0 ? 1 : -1;
	}
	int st = sc_state[k];
	pthread_mutex_unlock(&sc_lock);
	if (st < 0) {
		if (err)
			*err = sc_err[k];
		return NULL;
	}
	return &sc_prog[k];
}

/* The test hooks (CORRAL_TEST_DISABLE, CORRAL_TEST_LANDLOCK_ABI, CORRAL_TEST_NET_HELPER;
 * docs/DESIGN.md §11) are for the test suite only. secure_getenv() ignores them in a process
 * the kernel marked AT_SECURE (setuid, setgid, file capabilities): whoever set its
 * environment is not trusted with weakening the sandbox. */
static const char *plan_test_env(const char *name)
{
	return secure_getenv(name);
}

bool plan_test_disabled(const char *layer)
{
	const char *v = plan_test_env("CORRAL_TEST_DISABLE");
	if (!v)
		return false;
	size_t n = strlen(layer);
	for (const char *p = v; (p = strstr(p, layer)); p += n)
		if ((p == v || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
			return true;
	return false;
}

int plan_test_net_helper(void)
{
	const char *v = plan_test_env("CORRAL_TEST_NET_HELPER");
	return !v ? 0 : !strcmp(v, "always") ? 1 : !strcmp(v, "never") ? -1 : 0;
}

static int split_path(struct launch *L)
{
	const char *path = "/usr/local/bin:/usr/bin:/bin";
	for (char **e = L->envp; *e; e++)
		if (!strncmp(*e, "PATH=", 5))
			path = *e + 5;
	size_t n = 1;
	for (const char *p = path; *p; p++)
		n += *p == ':';
	L->path_dirs = calloc(n + 1, sizeof(char *));
	if (!L->path_dirs)
		return -1;
	size_t i = 0;
	for (const char *p = path;;) {
		const char *end = strchr(p, ':');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		/* an empty entry means the cwd, as in execvp */
		L->path_dirs[i] = len ? strndup(p, len) : strdup(".");
		if (!L->path_dirs[i++])
			return -1;
		if (!end)
			break;
		p = end + 1;
	}
	return 0;
}

/* Landlock rules mirror the mount plan: the same paths, as the child will see them. */

static void record(struct corral_result *res, const char *name, bool applied, const char *detail)
{
	result_add_layer(res, name, applied, detail);
}

/* Decide the layers for this run and record them. Returns <0 when mode=required and a
 * layer is missing. */
int plan_choose_layers(struct launch *L, struct corral_result *res, struct corral_error *err)
{
	const struct corral_config *cfg = L->cfg;
	enum corral_mode mode = cfg->mode;
	res->mode = mode == CORRAL_MODE_REQUIRED ? "required"
	            : mode == CORRAL_MODE_AUTO   ? "auto"
	                                         : "none";
	if (mode == CORRAL_MODE_NONE) {
		static const char *const names[] = {"userns", "mountns", "pidns", "netns", "ipcns",
		                                    "utsns",  "cgroupns", "landlock", "seccomp"};
		for (size_t i = 0; i < ARRAY_SIZE(names); i++)
			record(res, names[i], false, "mode none: isolation disabled");
		/* even here root does not keep its capabilities (launch.c child_main) */
		record(res, "caps", L->uid == 0,
		       L->uid == 0 ? "all dropped, no_new_privs (root)"
		                   : "no_new_privs; every capability the caller had let go, the "
		                     "bounding set kept (it needs CAP_SETPCAP to shrink)");
		return 0;
	}
	char why[300];
	bool userns_ok = !plan_test_disabled("userns");
	if (!userns_ok)
		snprintf(why, sizeof(why), "disabled by CORRAL_TEST_DISABLE");
	L->userns = L->mountns = L->pidns = L->ipcns = L->utsns = L->cgroupns = userns_ok;
	L->netns = userns_ok && cfg->net == CORRAL_NET_NONE;
	if (!userns_ok && mode == CORRAL_MODE_REQUIRED)
		return corral_set_error(err, CORRAL_EUNAVAIL, 0, "userns",
		                        "userns: %s; run with --mode=auto to continue without "
		                        "namespaces (Landlock, seccomp and limits still apply)",
		                        why);

	int abi = plan_test_disabled("landlock") ? 0 : landlock_probe_abi();
	/* Test hook: pretend the kernel offers at most this ABI (the ladder below an ABI cannot
	 * be reached otherwise on a current kernel). */
	const char *cap = plan_test_env("CORRAL_TEST_LANDLOCK_ABI");
	if (cap && *cap >= '0' && *cap <= '9' && abi > atoi(cap))
		abi = atoi(cap);
	L->landlock = abi > 0;
	if (!L->landlock && mode == CORRAL_MODE_REQUIRED)
		return corral_set_error(err, CORRAL_EUNAVAIL, 0, "landlock",
		                        "landlock: not supported by this kernel or disabled (needs "
		                        "Linux 5.13 with CONFIG_SECURITY_LANDLOCK and 'landlock' in "
		                        "the lsm= boot parameter); run with --mode=auto to continue "
		                        "without it");
	L->ll.abi = abi;
	/* The ABI the plan needs. Sharing the host's network namespace leaves the host's
	 * abstract unix sockets (D-Bus, X11, ssh agents bound there) reachable unless Landlock
	 * scopes them, which takes ABI 6; with a network namespace of its own the sandbox has a
	 * separate abstract namespace, and with a pid namespace it cannot name host processes to
	 * signal, so ABI 1 serves. Required mode refuses below what the plan needs. */
	int need = cfg->net == CORRAL_NET_HOST || !L->pidns ? 6 : 1;
	if (L->landlock && abi < need && mode == CORRAL_MODE_REQUIRED)
		return corral_set_error(
		    err, CORRAL_EUNAVAIL, 0, "landlock",
		    "landlock: this kernel offers ABI %d, and %s needs ABI %d (Linux 6.12) to keep "
		    "the host's abstract unix sockets and processes out of reach; upgrade the kernel, "
		    "%sor run with --mode=auto to continue with ABI %d (recorded)",
		    abi, cfg->net == CORRAL_NET_HOST ? "--net host" : "running without a pid namespace",
		    need, cfg->net == CORRAL_NET_HOST ? "use --net none (a private network), " : "",
		    abi);

	L->seccomp = !plan_test_disabled("seccomp") && seccomp_probe();
	struct corral_error scerr = {0};
	if (L->seccomp && !(L->sc = plan_seccomp(!L->userns, &scerr)))
		L->seccomp = false;
	L->sc_no_unix = L->seccomp && !L->userns;
	if (!L->seccomp && mode == CORRAL_MODE_REQUIRED) {
		if (scerr.code) {
			*err = scerr;
			return scerr.code;
		}
		return corral_set_error(err, CORRAL_EUNAVAIL, 0, "seccomp",
		                        "seccomp: filtering is not available (needs "
		                        "CONFIG_SECCOMP_FILTER); run with --mode=auto to continue "
		                        "without it");
	}
	return 0;
}

static const char *cg_not_needed(const struct launch *L);
static void record_rlimits(const struct launch *L, struct corral_result *res);

void plan_record_layers(const struct launch *L, struct corral_result *res)
{
	if (L->cfg->mode == CORRAL_MODE_NONE)
		return;
	const char *skip = "unavailable on this host (mode auto)";
	/* the namespaces the host refused while the others stayed (plan_drop_some_namespaces) */
	char why[4][96] = {{0}};
	for (int i = 0; L->ns_refused && i < 4; i++) /* (only on the fallback, not every launch) */
		snprintf(why[i], sizeof(why[i]), "refused by the host (%s; mode auto)",
		         strerror(L->ns_refused_errno[i]));
	/* the limits as they now stand (plan_drop_namespaces rebuilds them after a fall back) */
	if (L->rl.n)
		record_rlimits(L, res);
	if (!L->want_cg && !L->cfg->limits[CORRAL_LIMIT_CPUS] && !plan_test_disabled("cgroup"))
		record(res, "cgroup", false, cg_not_needed(L));
	record(res, "userns", L->userns, L->userns ? "uid and gid mapped 1:1" : skip);
	/* (a server's sandboxes: their root and system tree are a copy of its mount template) */
	char md[240];
	snprintf(md, sizeof(md), "tmpfs root, system read-only, workspace %s%s",
	         L->cfg->workspace_ro ? "read-only" : "read-write",
	         L->tpl_used ? "; root and system tree a copy of a template shared read-only "
	                       "(superblock) between sandboxes"
	                     : "");
	record(res, "mountns", L->mountns, L->mountns ? md : skip);
	record(res, "pidns", L->pidns, L->pidns ? "own pid space, init as pid 1" : skip);
	if (L->cfg->net == CORRAL_NET_HOST) {
		record(res, "netns", false, "host network (--net host)");
	} else if (!L->netns && (L->ns_refused & CLONE_NEWNET)) {
		char nd[300];
		snprintf(nd, sizeof(nd), "host network shared, %s; %s",
		         L->landlock && L->ll.deny_tcp && L->ll.abi >= 4
		             ? "TCP denied by Landlock, UDP and other protocols NOT contained"
		             : "NOT contained",
		         why[0]);
		record(res, "netns", false, nd);
	} else {
		record(res, "netns", L->netns, L->netns ? "loopback only" : skip);
	}
	char id[300] = "";
	if (L->ns_refused & CLONE_NEWIPC)
		snprintf(id, sizeof(id),
		         "host IPC shared: the host's System V objects and POSIX message queues "
		         "that the caller's user may use are reachable; %s",
		         why[1]);
	record(res, "ipcns", L->ipcns,
	       L->ipcns                       ? "private"
	       : L->ns_refused & CLONE_NEWIPC ? id
	                                      : skip);
	record(res, "utsns", L->utsns,
	       L->utsns                       ? "hostname corral"
	       : L->ns_refused & CLONE_NEWUTS ? why[2]
	                                      : skip);
	record(res, "cgroupns", L->cgroupns,
	       L->cgroupns                       ? "private"
	       : L->ns_refused & CLONE_NEWCGROUP ? why[3]
	                                         : skip);
	char d[200];
	if (L->landlock)
		snprintf(d, sizeof(d), "abi %d%s%s%s", L->ll.abi,
		         L->ll.deny_tcp && L->ll.abi >= 4 ? ", tcp denied" : "",
		         L->ll.abi >= 6 ? ", abstract unix and signals scoped"
		         : !L->netns || !L->pidns
		             ? ", abstract unix and signals NOT scoped (needs abi 6)"
		             : "",
		         L->mountns ? ""
		                    : ", no mount namespace: protected paths not enforced, "
		                      "host /proc readable");
	/* Without Landlock nothing holds a command allow-list at execve: only the preflight
	 * of the top-level command is left, which `sh -c` or a script gets around. */
	record(res, "landlock", L->landlock,
	       L->landlock            ? d
	       : L->cfg->cmd_allow_set ? "unavailable on this host (mode auto); command allow-list "
	                                 "NOT enforced (preflight only)"
	                               : skip);
	record(res, "seccomp", L->seccomp,
	       !L->seccomp      ? skip
	       : !L->sc_no_unix ? "deny-list, EPERM"
	       : L->userns      ? "deny-list, EPERM; unix sockets denied (no network namespace: "
	                          "the host's abstract ones would be in reach)"
	                        : "deny-list, EPERM; unix sockets denied (no namespaces)");
	/* Without a user namespace an unprivileged process cannot empty its bounding set; it
	 * lets go of any capability it holds (ambient ones from a wrapper); say exactly that. */
	if (L->userns || L->uid == 0)
		record(res, "caps", true, "all dropped, no_new_privs");
	else
		record(res, "caps", false,
		       "no_new_privs; every capability the caller had let go, the bounding set "
		       "kept (it needs CAP_SETPCAP to shrink)");
}

/* The environment block; without a mount namespace TMPDIR names the private host tmp. */
/* The environment block: host variables the policy passes, explicit settings, and without a
 * mount namespace TMPDIR naming the private host tmp. */
static int prepare_env(struct launch *L)
{
	const struct corral_config *cfg = L->cfg;
	env_free(L->envp);
	L->envp = NULL;
	struct env_entry *pass = NULL, *withheld = NULL;
	size_t n_pass = 0, n_withheld = 0;
	int r = policy_env(cfg, &pass, &n_pass, &withheld, &n_withheld);
	/* Withheld values are not needed here yet; redaction will take them from the policy. */
	env_entries_free_list(withheld, n_withheld);
	if (r < 0) {
		env_entries_free_list(pass, n_pass);
		return -1;
	}
	struct env_entry *ents = calloc(n_pass + cfg->n_env + 1, sizeof(*ents));
	if (!ents) {
		env_entries_free_list(pass, n_pass);
		return -1;
	}
	size_t n = 0;
	for (size_t i = 0; i < n_pass; i++)
		ents[n++] = pass[i];
	if (L->private_tmp && !L->mountns)
		ents[n++] = (struct env_entry){"TMPDIR", L->private_tmp};
	/* explicit settings last: they always apply */
	for (size_t i = 0; i < cfg->n_env; i++)
		ents[n++] = cfg->env[i];
	L->envp = env_build(ents, n, cfg->workspace);
	free(ents);
	env_entries_free_list(pass, n_pass);
	return L->envp ? 0 : -1;
}

static int make_private_tmp(struct launch *L)
{
	char tmpl[] = "/tmp/corral-tmp-XXXXXX";
	if (!mkdtemp(tmpl))
		return -1;
	L->private_tmp = strdup(tmpl);
	return L->private_tmp ? 0 : -1;
}


/* ---- Landlock rules -------------------------------------------------------------------- */

struct rules {
	struct landlock_rule *v;
	char **owned; /* paths this list allocated */
	size_t n, cap, n_owned;
};

static int rules_add(struct rules *rs, const char *path, unsigned access, bool own)
{
	if (rs->n == rs->cap) {
		size_t ncap = rs->cap ? rs->cap * 2 : 64;
		struct landlock_rule *g = realloc(rs->v, ncap * sizeof(*g));
		if (!g)
			return -1;
		rs->v = g;
		rs->cap = ncap;
	}
	const char *p = path;
	if (own) {
		char *copy = strdup(path);
		char **g = realloc(rs->owned, (rs->n_owned + 1) * sizeof(char *));
		if (!copy || !g) {
			free(copy);
			if (g)
				rs->owned = g;
			return -1;
		}
		rs->owned = g;
		rs->owned[rs->n_owned++] = copy;
		p = copy;
	}
	rs->v[rs->n].path = p;
	rs->v[rs->n].access = access;
	rs->v[rs->n].nofollow = own; /* the deny expansion's paths (expand_excluding) */
	rs->v[rs->n].own_tree = false;
	rs->n++;
	return 0;
}

/* Deny inside an allowed tree: Landlock only adds rights, so a rule on a tree that contains a
 * denied path is replaced by rules on each sibling along the way down to it. The directories
 * on the way keep only listing; what is created in them later gets no rights (documented). */
static int expand_excluding(struct rules *rs, const char *excl)
{
	for (size_t i = 0; i < rs->n; i++) {
		const char *root = rs->v[i].path;
		if (!path_within(excl, root))
			continue;
		unsigned acc = rs->v[i].access;
		if (!strcmp(root, excl)) {
			rs->v[i].access = 0; /* the denied path itself */
			continue;
		}
		char dir[PATH_MAX];
		snprintf(dir, sizeof(dir), "%s", root);
		rs->v[i].access = acc & LL_LIST ? LL_LIST : (acc & LL_READ ? LL_LIST : 0);
		/* The sandbox's own tree (its tmpfs root, /tmp) holds nothing of the host's: its
		 * entries are the plan's mount points, each with a rule of its own, and what the
		 * command makes later. Listing the host's directory at that path would only add
		 * rules that name nothing in the sandbox (all of the host's /tmp), and make a
		 * parked sandbox's key change with it. */
		bool list_host = !rs->v[i].own_tree;
		for (int depth = 0; depth < 64; depth++) {
			/* the next component of excl below dir */
			size_t dl = strlen(dir);
			const char *rest = excl + (dl == 1 ? 1 : dl + 1);
			const char *slash = strchr(rest, '/');
			size_t cl = slash ? (size_t)(slash - rest) : strlen(rest);
			DIR *d = list_host ? opendir(dir) : NULL;
			if (!d && list_host)
				return 0;
			struct dirent *de;
			while (d && (de = readdir(d))) {
				if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
					continue;
				if (strlen(de->d_name) == cl && !strncmp(de->d_name, rest, cl))
					continue;
				/* A symlink gets no rule: access through it is checked where it
				 * points. A rule on it would open the target and carry the tree's
				 * rights there (`ln -s / rootfs` in the workspace: the whole host,
				 * where Landlock is the only file system layer). */
				if (de->d_type == DT_LNK)
					continue;
				char child[PATH_MAX];
				if (snprintf(child, sizeof(child), "%s/%s", dl == 1 ? "" : dir,
				             de->d_name) >= (int)sizeof(child))
					continue;
				if (rs->n > 8192 || rules_add(rs, child, acc, true) < 0) {
					closedir(d);
					return -1;
				}
			}
			if (d)
				closedir(d);
			if (!slash)
				break;
			/* descend: the directory on the way to excl keeps listing only */
			if (dl + 1 + cl + 1 >= sizeof(dir))
				break;
			if (dl > 1)
				dir[dl++] = '/';
			memcpy(dir + dl, rest, cl);
			dir[dl + cl] = 0;
			if (acc & LL_READ && rules_add(rs, dir, LL_LIST, true) < 0)
				return -1;
		}
	}
	return 0;
}

/* Landlock rules mirror the mount plan: the same paths, as the child will see them. */
static int build_landlock(struct launch *L)
{
	const struct mount_plan *mp = &L->mounts;
	struct rules rs = {0};
	for (size_t i = 0; i < mp->n_ops; i++) {
		const struct mount_op *op = &mp->ops[i];
		if (!op->ll_access)
			continue;
		const char *path = op->dst;
		if (!L->mountns) {
			/* No mount namespace: the rules name host paths. Private mounts do not
			 * exist, so /tmp becomes a private host directory, and /proc, /dev stay
			 * the host's. */
			if (op->kind == MOP_TMPFS && !strcmp(op->dst, "/tmp"))
				path = L->private_tmp;
			else if (op->kind == MOP_TMPFS || op->kind == MOP_DEVPTS)
				path = NULL; /* the host's /dev/shm and ptys are not the sandbox's */
			else if (op->src)
				path = op->src;
			if (!path)
				continue;
		}
		if (rules_add(&rs, path, op->ll_access, false) < 0)
			goto oom;
		rs.v[rs.n - 1].own_tree =
		    L->mountns && (op->kind == MOP_TMPFS || op->kind == MOP_DEVPTS);
	}
	/* (Protected paths are not mirrored: Landlock cannot take the write right
	 * away beneath a writable tree without also forbidding new entries next to them; the
	 * read-only mounts enforce them, and the tier without a mount namespace records that
	 * they are not enforced.) */
	/* Inside the sandbox's own root every directory may be listed (it holds only what the
	 * plan put there); file contents still need a rule of their own. */
	if (L->mountns && rules_add(&rs, "/", LL_LIST, false) < 0)
		goto oom;
	if (L->mountns)
		rs.v[rs.n - 1].own_tree = true;
	/* Deny wins, in Landlock too: the mask mount alone is not enough, since a host that
	 * replaces the path (an editor's atomic save of .env) detaches the mask in every
	 * namespace. */
	for (size_t i = 0; i < L->req.n_deny; i++)
		if (expand_excluding(&rs, L->req.deny[i]) < 0)
			goto oom;

	/* A command allow-list: nothing keeps the execute right but the allowed files. */
	if (L->cfg->cmd_allow_set) {
		for (size_t i = 0; i < rs.n; i++)
			rs.v[i].access &= ~LL_EXEC;
		for (size_t i = 0; i < L->n_exec_files; i++)
			if (rules_add(&rs, L->exec_files[i], LL_READ | LL_EXEC, false) < 0)
				goto oom;
	}
	/* drop emptied rules */
	size_t o = 0;
	for (size_t i = 0; i < rs.n; i++)
		if (rs.v[i].access)
			rs.v[o++] = rs.v[i];
	rs.n = o;
	free(L->ll_rules);
	for (size_t i = 0; i < L->n_ll_owned; i++)
		free(L->ll_owned[i]);
	free(L->ll_owned);
	L->ll_rules = rs.v;
	L->ll_owned = rs.owned;
	L->n_ll_owned = rs.n_owned;
	L->ll.rules = L->ll_rules;
	L->ll.n_rules = rs.n;
	/* With a network namespace TCP reaches only the sandbox's own loopback, which servers
	 * and tests inside need; without one, Landlock is what keeps TCP off the host. */
	L->ll.deny_tcp = L->cfg->net == CORRAL_NET_NONE && !L->netns;
	L->ll.scope = 1;
	return 0;
oom:
	free(rs.v);
	for (size_t i = 0; i < rs.n_owned; i++)
		free(rs.owned[i]);
	free(rs.owned);
	return -1;
}

/* ---- policy paths ------------------------------------------------------------------------ */

static int resolve_list(const struct corral_config *cfg, char **raw, size_t n, char ***out,
                        size_t *n_out, bool must_exist, const char *what,
                        struct corral_error *err)
{
	*out = calloc(n + 1, sizeof(char *));
	*n_out = 0;
	if (!*out)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "policy", "out of memory");
	for (size_t i = 0; i < n; i++) {
		char path[PATH_MAX];
		int r = policy_lexical_path(cfg, raw[i], path, err);
		if (r < 0)
			return r;
		if (path_within(path, cfg->workspace)) {
			/* Inside the workspace the sandbox itself may have planted a symlink on an
			 * earlier run: never follow one there (the CVE-2024-42472 class). */
			const char *rel = path + strlen(cfg->workspace);
			while (*rel == '/')
				rel++;
			int wfd = open(cfg->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
			struct open_how how = {.flags = O_PATH | O_CLOEXEC,
			                       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			                                  RESOLVE_NO_MAGICLINKS};
			int fd = wfd < 0 ? -1
			         : *rel ? (int)syscall(SYS_openat2, wfd, rel, &how, sizeof(how))
			                : dup(wfd);
			int e = errno;
			if (wfd >= 0)
				close(wfd);
			if (fd >= 0)
				close(fd);
			else if (e == ELOOP || e == EXDEV)
				return corral_set_error(err, CORRAL_EDENIED, e, "policy",
				                        "policy: %s path %s goes through a symlink inside the "
				                        "workspace; the sandbox can plant those, so corral "
				                        "does not follow them: name the target itself",
				                        what, raw[i]);
			else if (must_exist)
				return corral_set_error(err, CORRAL_EINVAL, e, "policy",
				                        "policy: %s path %s (%s): %s; create it or remove "
				                        "it from the profile",
				                        what, raw[i], path, strerror(e));
		} else {
			/* outside the workspace: the caller's own host path, symlinks and all */
			r = policy_resolve_path(cfg, raw[i], path, err);
			if (r < 0)
				return r;
		}
		struct stat st;
		if (must_exist && stat(path, &st) < 0)
			return corral_set_error(err, CORRAL_EINVAL, errno, "policy",
			                        "policy: %s path %s (%s): %s; create it or remove it "
			                        "from the profile",
			                        what, raw[i], path, strerror(errno));
		if (!strcmp(path, "/"))
			return corral_set_error(err, CORRAL_EINVAL, 0, "policy",
			                        "policy: %s path %s resolves to /; that would expose the "
			                        "whole host",
			                        what, raw[i]);
		if (!((*out)[(*n_out)++] = strdup(path)))
			return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "policy", "out of memory");
	}
	return 0;
}

/* Protected paths that do not exist yet get an empty placeholder on the host for the length
 * of the run, so that a read-only mount can sit on them: the sandbox cannot create them. */
static const char *const protected_dirs[] = {".git/hooks", ".vscode", ".idea", ".claude",
                                             ".cursor", ".corral"};

/* The mark on a placeholder that corral made: an empty `.bashrc` carrying it is corral's to
 * remove, whichever run made it. Without the mark (a file system without user xattrs) only
 * the run that created it removes it. */
#define PLACEHOLDER_XATTR "user.corral.placeholder"

/* The mark on a git redirect (`commondir`, `config.worktree`) that a sandbox made: a run that
 * watched it absent finds it at its end while another run holds it read-only (that run began
 * while it was there, so it took it for the repository's own). Removing it then would detach
 * the other run's read-only mount (the host's unlink lazily unmounts it everywhere), so its
 * sandbox could write it again, and nobody would remove it. It is marked instead, and the
 * last run to let go of it removes it (plan_release_protected); a run that finds it marked
 * and held by nobody removes it before it begins. */
#define PLANTED_XATTR "user.corral.planted"

/* Hold a shared lock on a protected path for the length of the run. Whoever removes a
 * placeholder must get the exclusive lock first, so a concurrent run that sits on the same
 * path (another run in the same workspace) keeps its read-only mount: a placeholder removed
 * on the host would silently detach that mount. The last run to let go of a placeholder
 * removes it, not only the run that made it: otherwise runs that overlap in one workspace
 * (the MCP server's concurrent calls) would leave it behind when the maker ends first.
 * Returns 0, or -1 with errno (ENOENT: removed under us, make it again). */
static int lock_protected(struct launch *L, const char *path, bool created)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		if (fd < 0)
			return -1;
		struct stat a, b;
		if (flock(fd, LOCK_SH) == 0 && fstat(fd, &a) == 0 && lstat(path, &b) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
			bool ours = created;
			if (created) {
				(void)fsetxattr(fd, PLACEHOLDER_XATTR, "1", 1, 0);
			} else {
				char v[2];
				ours = fgetxattr(fd, PLACEHOLDER_XATTR, v, sizeof(v)) > 0;
			}
			struct placeholder *g = realloc(L->held, (L->n_held + 1) * sizeof(*L->held));
			if (!g) {
				close(fd);
				errno = ENOMEM;
				return -1;
			}
			L->held = g;
			g[L->n_held].path = strdup(path);
			g[L->n_held].fd = fd;
			g[L->n_held].created = ours;
			g[L->n_held].watch = 0;
			if (!g[L->n_held].path) {
				close(fd);
				errno = ENOMEM;
				return -1;
			}
			L->n_held++;
			return 0;
		}
		/* replaced or removed between open and lock: try again */
		close(fd);
	}
	errno = EAGAIN;
	return -1;
}

static int note_dry_placeholder(struct launch *L, const char *path)
{
	struct placeholder *g = realloc(L->held, (L->n_held + 1) * sizeof(*L->held));
	if (!g)
		return -1;
	L->held = g;
	g[L->n_held].path = strdup(path);
	g[L->n_held].fd = -1;
	g[L->n_held].created = true;
	g[L->n_held].watch = 0;
	if (!g[L->n_held].path)
		return -1;
	L->n_held++;
	return 0;
}

static int note_pending(struct launch *L, const char *path, bool is_dir, int how,
                        const char *origin)
{
	struct ph_pending *g = realloc(L->ph_pending, (L->n_ph_pending + 1) * sizeof(*g));
	if (!g)
		return -1;
	L->ph_pending = g;
	g += L->n_ph_pending;
	*g = (struct ph_pending){strdup(path), strdup(origin ? origin : path), is_dir, how};
	if (!g->path || !g->origin) {
		free(g->path);
		free(g->origin);
		return -1;
	}
	L->n_ph_pending++;
	return 0;
}

static void free_pending(struct launch *L)
{
	for (size_t i = 0; i < L->n_ph_pending; i++) {
		free(L->ph_pending[i].path);
		free(L->ph_pending[i].origin);
	}
	free(L->ph_pending);
	L->ph_pending = NULL;
	L->n_ph_pending = 0;
}

/* Open rel beneath the workspace without following a symlink anywhere on the way (the sandbox
 * may have planted them there): openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS. -1 with
 * errno (ELOOP or EXDEV: a symlink on the way, whatever it points at). */
static int ws_openat(const char *workspace, const char *rel, int flags)
{
	int wfd = open(workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (wfd < 0)
		return -1;
	struct open_how how = {.flags = (uint64_t)(unsigned)(flags | O_CLOEXEC),
	                       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	                                  RESOLVE_NO_MAGICLINKS};
	int fd = (int)syscall(SYS_openat2, wfd, rel, &how, sizeof(how));
	int e = errno;
	close(wfd);
	errno = e;
	return fd;
}

/* Whether the workspace's own entry name may be of the type fmt (S_IFDIR, S_IFREG), by the
 * plan's look at the host (L->hc's, when a server keys a call): false only when it surely is
 * not (missing, or of another type, a symlink included, which ws_openat would not follow). A
 * look that fails otherwise leaves it to the real open, which says why. */
static bool ws_entry_may_be(struct launch *L, const char *name, mode_t fmt)
{
	char p[PATH_MAX];
	struct stat st;
	if (snprintf(p, sizeof(p), "%s/%s", L->cfg->workspace, name) >= (int)sizeof(p))
		return true;
	if (hc_lstat(L->hc, p, &st) < 0)
		return errno != ENOENT && errno != ENOTDIR;
	return (st.st_mode & S_IFMT) == fmt;
}

/* How a protected path is taken (protect_rel). */
#define PROT_MAKE_MISSING 1 /* a missing directory on the way becomes a placeholder */
#define PROT_EXISTING 2     /* only if the path itself exists: never a placeholder for it */

/* A symlink where a protected path, or a directory on its way, should be. origin is the
 * protected-list entry the path comes from: derived paths (a submodule's config, a worktree's
 * commondir) are on no list themselves. */
static int symlink_refused(struct corral_error *err, const char *path, const char *link,
                           const char *origin)
{
	if (!link)
		return corral_set_error(err, CORRAL_EDENIED, 0, "policy",
		                        "policy: protected path %s is a symlink, which cannot be made "
		                        "read-only in place: remove the symlink (an earlier sandboxed "
		                        "run may have planted it) or take %s off the protected list",
		                        path, origin);
	return corral_set_error(err, CORRAL_EDENIED, 0, "policy",
	                        "policy: the protected path %s lies beneath the symlink %s, which "
	                        "the sandbox could replace: remove the symlink (an earlier "
	                        "sandboxed run may have planted it) and put the real directory "
	                        "there, or take %s off the protected list",
	                        path, link, origin);
}

/* A protected path (or the directory on its way) that corral cannot look at is not absent:
 * the sandbox owns the workspace and can chmod a directory to 000 in one run so that the
 * next run finds "nothing" to protect, then restore it and plant a hook. So only ENOENT and
 * ENOTDIR mean absent; anything else refuses the run. */
static bool absent_errno(int e)
{
	return e == ENOENT || e == ENOTDIR;
}

static int uninspectable(struct corral_error *err, const char *path, int e)
{
	return corral_set_error(err, CORRAL_EDENIED, e, "policy",
	                        "policy: cannot inspect the protected path %s: %s; restore the "
	                        "permissions of its directory (chmod u+rwx; an earlier sandboxed "
	                        "run may have changed them) or take it off the protected list",
	                        path, strerror(e));
}

/* The same for the directory a missing protected path's placeholder goes into (the workspace
 * itself, or a directory in it): that directory is not the protected path, and the message
 * says which is which. */
static int parent_unusable(struct corral_error *err, const char *path, const char *parent,
                           const char *origin, bool write, int e)
{
	return corral_set_error(err, CORRAL_EDENIED, e, "policy",
	                        "policy: cannot make the placeholder for the protected path %s: "
	                        "its directory %s cannot be %s (%s)%s; restore the directory's "
	                        "permissions (chmod u+rwx %s; an earlier sandboxed run may have "
	                        "changed them) or take %s off the protected list",
	                        path, parent, write ? "written" : "inspected", strerror(e),
	                        write ? ", yet this user owns it, so a sandboxed run could change "
	                                "that back and make the path itself"
	                              : "",
	                        parent, origin);
}

/* lstat of a missing protected path's parent, remembered for the next name in the same
 * directory: 0 with *st, or the errno. */
static int parent_lstat(struct launch *L, const char *parent, struct stat *st)
{
	struct ph_parent *c = &L->ph_parent;
	if (!c->path[0] || strcmp(c->path, parent) != 0) {
		snprintf(c->path, sizeof(c->path), "%s", parent);
		c->lstat_err = hc_lstat(L->hc, parent, &c->st) < 0 ? errno : 0;
		c->access_err = -1;
	}
	*st = c->st;
	return c->lstat_err;
}

/* faccessat(W_OK | X_OK, AT_EACCESS) of the parent parent_lstat looked at last: 0 or the
 * errno. */
static int parent_access(struct launch *L)
{
	struct ph_parent *c = &L->ph_parent;
	if (c->access_err < 0)
		c->access_err = hc_access(L->hc, c->path, W_OK | X_OK) < 0 ? errno : 0;
	return c->access_err;
}

/* Put one protected path under a read-only mount: hold it, making an empty placeholder
 * first when it is missing (unless PROT_EXISTING). 1: protected (path goes on the list);
 * 0: skipped (no parent, or nothing can create it); <0: error. */
static int protect_one(struct launch *L, const char *path, bool is_dir, int how,
                       const char *origin, struct corral_error *err)
{
	/* A placeholder that another run removes between our look and our lock is made again
	 * (ENOENT from the lock); a few rounds settle any interleaving. */
	for (int round = 0;; round++) {
		bool created = false;
		struct stat st;
		if (hc_lstat(L->hc, path, &st) == 0) {
			if (S_ISLNK(st.st_mode))
				return symlink_refused(err, path, NULL, origin);
		} else {
			if (!absent_errno(errno))
				return uninspectable(err, path, errno);
			/* A placeholder is a mount point: without a mount namespace (mode none, the
			 * no-namespace tier) nothing would hold it read-only, and it would only put
			 * an empty .bashrc, .vscode, ... into the user's workspace for the run. */
			if ((how & PROT_EXISTING) || !L->mountns)
				return 0;
			/* Create it only where its parent exists: inventing a .git directory
			 * would change what the host's tools see. */
			char parent[PATH_MAX];
			snprintf(parent, sizeof(parent), "%s", path);
			*strrchr(parent, '/') = 0;
			struct stat pst;
			int pe = parent_lstat(L, parent, &pst);
			if (pe)
				return absent_errno(pe)
				           ? 0
				           : parent_unusable(err, path, parent, origin, false, pe);
			if (!S_ISDIR(pst.st_mode))
				return 0;
			if (L->dry_run || L->ph_defer) {
				/* a plan key predicts the outcome below: where the placeholder
				 * could not be made, the real plan has no mount for it; so does a
				 * one-shot run that makes it later (plan_make_pending) */
				int ae = L->key_only || L->ph_defer ? parent_access(L) : 0;
				if (ae) {
					if ((ae == EACCES || ae == EPERM) && pst.st_uid == geteuid())
						return parent_unusable(err, path, parent, origin,
						                       true, ae);
					return 0;
				}
				if (L->ph_defer ? note_pending(L, path, is_dir, how, origin) < 0
				                : note_dry_placeholder(L, path) < 0)
					return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "policy",
					                        "out of memory");
				return 1;
			}
			int r;
			L->ph_parent.path[0] = 0; /* what follows may change what it saw */
			if (is_dir) {
				r = mkdir(path, 0755);
			} else { /* (close(open(...)) would report close's EBADF, not open's error)
				  */
				int nfd =
				    open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW,
				         0644);
				r = nfd < 0 ? -1 : close(nfd);
			}
			/* EEXIST: a concurrent run made it first; share it. A parent we cannot
			 * write: if it is ours, the sandbox (same owner) could chmod it back and
			 * create the path, so refuse; another owner's or a read-only file system's
			 * parent stops the sandbox as it stops us. Anything else (out of
			 * descriptors, of space) is this launch's trouble, not the sandbox's
			 * limit: an error, not a path left unbound. */
			if (r < 0 && errno != EEXIST) {
				int e = errno;
				if ((e == EACCES || e == EPERM) && pst.st_uid == geteuid())
					return parent_unusable(err, path, parent, origin, true, e);
				if (e == EACCES || e == EPERM || e == EROFS)
					return 0;
				return corral_set_error(err, CORRAL_ESYS, e, "policy",
				                        "policy: cannot make the placeholder for "
				                        "protected path %s: %s",
				                        path, strerror(e));
			}
			created = r == 0;
		}
		if (L->dry_run || lock_protected(L, path, created) == 0)
			return 1;
		if (errno != ENOENT || round >= 8)
			return corral_set_error(err, CORRAL_ESYS, errno, "policy",
			                        "policy: cannot hold protected path %s: %s", path,
			                        strerror(errno));
	}
}

/* ---- the protected set: which paths go read-only, which directories get pinned ------- */

static int strv_push(char ***v, size_t *n, const char *s)
{
	char **g = realloc(*v, (*n + 2) * sizeof(char *));
	if (!g)
		return -1;
	*v = g;
	if (!(g[*n] = strdup(s)))
		return -1;
	g[++*n] = NULL;
	return 0;
}

static bool strv_covers(char *const *v, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (path_within(path, v[i]))
			return true;
	return false;
}

static bool strv_has(char *const *v, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(path, v[i]))
			return true;
	return false;
}

/* An empty directory: another run's placeholder (its mark may not be set yet), or one that
 * holds nothing to protect. Either way it is made read-only as a whole, like a missing one.
 * So is one gone since the caller looked (another run's placeholder, let go of meanwhile):
 * the caller treats it as missing, and protect_one makes it again. */
static bool is_empty_dir(const char *path, const struct stat *st)
{
	if (!S_ISDIR(st->st_mode))
		return false;
	DIR *d = opendir(path);
	if (!d)
		return errno == ENOENT;
	struct dirent *de;
	bool empty = true;
	while (empty && (de = readdir(d)))
		empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
	closedir(d);
	return empty;
}

static int add_protected(struct launch *L, const char *path, bool is_dir, int how,
                         const char *origin, struct corral_error *err)
{
	if (strv_covers(L->req.protect, L->req.n_protect, path))
		return 0;
	int r = protect_one(L, path, is_dir, how, origin, err);
	if (r > 0 && strv_push((char ***)&L->req.protect, &L->req.n_protect, path) < 0)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "policy", "out of memory");
	return r < 0 ? r : 0;
}

/* Protect the workspace-relative path rel (origin: the protected-list entry it comes from).
 * Its ancestors inside the workspace count as much as the path itself, since whoever can
 * rename or create them controls what the path is:
 *  - an existing directory on the way is pinned (a mount point, so it cannot be renamed or
 *    removed: `mv .git .gitold; cp -r .gitold .git` would otherwise carry the read-only
 *    mounts away and leave a writable copy in place);
 *  - a file on the way (a `.git` file holding `gitdir: ...`, as in worktrees and submodule
 *    checkouts) is made read-only itself;
 *  - a missing one (no `.git` at all) becomes an empty read-only placeholder directory with
 *    PROT_MAKE_MISSING; otherwise the path is skipped. */
static int protect_rel(struct launch *L, const char *rel, bool is_dir, int how,
                       const char *origin, struct corral_error *err)
{
	char path[PATH_MAX];
	size_t wl = strlen(L->cfg->workspace);
	if (snprintf(path, sizeof(path), "%s/%s", L->cfg->workspace, rel) >= (int)sizeof(path))
		return 0;
	for (char *s = path + wl + 1; (s = strchr(s, '/')); s++) {
		*s = 0;
		if (strv_covers(L->req.protect, L->req.n_protect, path))
			return 0; /* read-only already */
		struct stat st;
		if (hc_lstat(L->hc, path, &st) < 0 || is_empty_dir(path, &st))
			return how & PROT_MAKE_MISSING ? add_protected(L, path, true, 0, origin, err)
			                               : 0;
		if (S_ISLNK(st.st_mode)) {
			char link[PATH_MAX];
			snprintf(link, sizeof(link), "%s", path);
			*s = '/';
			return symlink_refused(err, path, link, origin);
		}
		if (!S_ISDIR(st.st_mode))
			return add_protected(L, path, false, 0, origin, err);
		if (!strv_has(L->req.pin, L->req.n_pin, path) &&
		    strv_push((char ***)&L->req.pin, &L->req.n_pin, path) < 0)
			return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "policy", "out of memory");
		*s = '/';
	}
	return add_protected(L, path, is_dir, how, origin, err);
}

/* Files in a git directory that point a host git elsewhere or give it more config:
 * `commondir` (how linked worktrees share a repository: git takes config and hooks from the
 * directory it names) and `config.worktree` (read when extensions.worktreeConfig is set). One
 * that exists at the start is made read-only. No placeholder can stand in for a missing one
 * (an empty `commondir` makes every git command on the host fail), so a missing one is
 * watched instead: if it appears during the run (only the sandbox writes there), it is
 * removed when the run ends (plan_release_protected). */
static const char *const git_redirects[] = {"commondir", "config.worktree"};

/* A redirect name in the git directory dfd that a sandbox made (absent when its run began):
 * remove it when no other run holds it; when one does, mark it (PLANTED_XATTR) for the last
 * holder to remove. With only_marked, only one that carries the mark already (a run's start).
 * true when it is gone. Never follows a symlink: unlinkat removes the entry itself. */
static bool remove_planted(int dfd, const char *name, bool only_marked)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && (errno == EACCES || errno == EPERM) &&
	    fchmodat(dfd, name, S_IRUSR | S_IWUSR, 0) == 0) /* chmod 000 by the sandbox */
		fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return !only_marked && unlinkat(dfd, name, 0) == 0; /* a symlink, a socket */
	char v[2];
	struct stat a, b;
	bool gone = false;
	if (only_marked && fgetxattr(fd, PLANTED_XATTR, v, sizeof(v)) <= 0) {
		close(fd);
		return false;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
		gone = fstat(fd, &a) == 0 && fstatat(dfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
		       a.st_dev == b.st_dev && a.st_ino == b.st_ino && unlinkat(dfd, name, 0) == 0;
	} else if (!only_marked && fsetxattr(fd, PLANTED_XATTR, "1", 1, 0) < 0 &&
	           /* a user xattr needs write permission: chmod 0444 by the sandbox */
	           ((errno != EACCES && errno != EPERM) || fchmod(fd, S_IRUSR | S_IWUSR) < 0 ||
	            fsetxattr(fd, PLANTED_XATTR, "1", 1, 0) < 0)) {
		/* no user xattrs here: nobody could tell it apart later, so it goes now */
		gone = unlinkat(dfd, name, 0) == 0;
	}
	close(fd);
	return gone;
}

static bool drop_planted(int dfd, const char *name)
{
	return remove_planted(dfd, name, true);
}

static int protect_git_redirects(struct launch *L, const char *rel, const char *origin,
                                 struct corral_error *err)
{
	/* The directory as it is now, reached without following a symlink. The fd is what the
	 * release works on: it never resolves the path again through what the sandbox made. */
	int dfd = ws_openat(L->cfg->workspace, rel, O_PATH | O_DIRECTORY);
	if (dfd < 0 && (errno == EACCES || errno == EPERM))
		return uninspectable(err, rel, errno);
	if (dfd < 0)
		return 0; /* gone, or reached through a symlink: no git directory of the workspace */
	unsigned absent = 0;
	int r = 0;
	for (size_t i = 0; i < ARRAY_SIZE(git_redirects) && r >= 0; i++) {
		struct stat st;
		char sub[PATH_MAX];
		int there = fstatat(dfd, git_redirects[i], &st, AT_SYMLINK_NOFOLLOW) == 0 ? 1
		            : errno == ENOENT                                             ? 0
		                                                                          : -1;
		/* a sandbox's leftover (marked) that no run holds: gone now, watched as absent */
		if (there == 1 && S_ISREG(st.st_mode) && !L->dry_run &&
		    drop_planted(dfd, git_redirects[i]))
			there = 0;
		if (there == 1) {
			if (snprintf(sub, sizeof(sub), "%s/%s", rel, git_redirects[i]) <
			    (int)sizeof(sub))
				r = protect_rel(L, sub, false, PROT_EXISTING, origin, err);
		} else if (there == 0) {
			absent |= 1u << i;
		}
	}
	char path[PATH_MAX];
	if (r < 0 || !absent || L->dry_run ||
	    snprintf(path, sizeof(path), "%s/%s", L->cfg->workspace, rel) >= (int)sizeof(path)) {
		close(dfd);
		return r;
	}
	for (size_t i = 0; i < L->n_held; i++)
		if (L->held[i].watch && !strcmp(L->held[i].path, path)) {
			close(dfd);
			return 0;
		}
	struct placeholder *g = realloc(L->held, (L->n_held + 1) * sizeof(*L->held));
	if (g)
		L->held = g;
	if (!g || !(g[L->n_held].path = strdup(path))) {
		close(dfd);
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "policy", "out of memory");
	}
	g[L->n_held].fd = dfd;
	g[L->n_held].created = false;
	g[L->n_held].watch = absent;
	g[L->n_held].ws_len = strlen(L->cfg->workspace);
	L->n_held++;
	return 0;
}

/* The git directories below .git (submodules, linked worktrees) are found by a walk that never
 * follows a symlink (the sandbox may have planted one: `ln -s / .git/modules`) and has hard
 * bounds on depth, on the git directories taken and on everything it reads. */
#define MODULES_MAX_DEPTH 6
#define MODULES_MAX 256                  /* git directories and checkouts taken */
#define WALK_MAX_ENTRIES 4096            /* directory entries read, all told */
#define WORKTREES_MAX 256                /* entries of .git/worktrees read */
#define GITMODULES_MAX_BYTES (256 << 10) /* of .gitmodules files read, all told */

struct walk {
	int gitdirs; /* git directories and checkouts still to take */
	int entries; /* directory entries still to read */
	long bytes;  /* .gitmodules bytes still to read */
	bool config, hooks;
	const char *origin; /* the protected-list entry that asks for all this */
};

/* Linked worktrees (`git worktree add`): .git/worktrees/<id> is the git directory of a
 * checkout that may lie outside the workspace. A host git there follows its `commondir`, and
 * reads its `config.worktree`; `gitdir` names the checkout (git worktree prune and repair
 * act on it). */
static int protect_worktrees(struct launch *L, struct walk *w, struct corral_error *err)
{
	int fd = ws_openat(L->cfg->workspace, ".git/worktrees", O_RDONLY | O_DIRECTORY);
	if (fd < 0 && (errno == EACCES || errno == EPERM))
		return uninspectable(err, ".git/worktrees", errno);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	int r = 0, budget = WORKTREES_MAX;
	struct dirent *de;
	while (r >= 0 && budget > 0 && w->entries > 0 && (de = readdir(d))) {
		budget--;
		w->entries--;
		struct stat st;
		char rel[PATH_MAX], sub[PATH_MAX + 16];
		if ((de->d_name[0] == '.' &&
		     (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2]))) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) ||
		    snprintf(rel, sizeof(rel), ".git/worktrees/%s", de->d_name) >= (int)sizeof(rel))
			continue;
		r = protect_git_redirects(L, rel, w->origin, err);
		if (r >= 0 && (size_t)snprintf(sub, sizeof(sub), "%s/gitdir", rel) < sizeof(sub))
			r = protect_rel(L, sub, false, PROT_EXISTING, w->origin, err);
	}
	closedir(d);
	return r;
}

/* Submodules keep their git directories in .git/modules/<name> (a name may hold slashes;
 * nested submodules sit in <gitdir>/modules/<name>). A host `git status` in the superproject
 * reads their config and runs their hooks, so they get the same protection as .git's own.
 * dfd (a directory fd of rel, opened without following symlinks) is closed here. */
static int protect_modules(struct launch *L, const char *rel, int dfd, int depth,
                           struct walk *w, struct corral_error *err)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return 0;
	}
	int r = 0;
	struct dirent *de;
	while (r >= 0 && w->gitdirs > 0 && w->entries > 0 && (de = readdir(d))) {
		w->entries--;
		if (de->d_name[0] == '.' &&
		    (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
			continue;
		char child[PATH_MAX], sub[PATH_MAX + 16];
		if (snprintf(child, sizeof(child), "%s/%s", rel, de->d_name) >= (int)sizeof(child))
			continue;
		/* O_NOFOLLOW | O_DIRECTORY: a symlink or anything but a directory is skipped */
		int cfd = openat(dirfd(d), de->d_name,
		                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (cfd < 0 && (errno == EACCES || errno == EPERM)) {
			r = uninspectable(err, child, errno);
			break;
		}
		if (cfd < 0)
			continue;
		struct stat st;
		if (fstatat(cfd, "HEAD", &st, AT_SYMLINK_NOFOLLOW) < 0) {
			/* not a git directory: part of a name with slashes */
			if (depth < MODULES_MAX_DEPTH)
				r = protect_modules(L, child, cfd, depth + 1, w, err);
			else
				close(cfd);
			continue;
		}
		w->gitdirs--;
		int mfd = openat(cfd, "modules",
		                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		close(cfd);
		r = protect_git_redirects(L, child, w->origin, err);
		if (r >= 0 && w->config &&
		    (size_t)snprintf(sub, sizeof(sub), "%s/config", child) < sizeof(sub))
			r = protect_rel(L, sub, false, 0, w->origin, err);
		if (r >= 0 && w->hooks &&
		    (size_t)snprintf(sub, sizeof(sub), "%s/hooks", child) < sizeof(sub))
			r = protect_rel(L, sub, true, 0, w->origin, err);
		if (mfd >= 0 && r >= 0 && depth < MODULES_MAX_DEPTH &&
		    (size_t)snprintf(sub, sizeof(sub), "%s/modules", child) < sizeof(sub))
			r = protect_modules(L, sub, mfd, depth + 1, w, err);
		else if (mfd >= 0)
			close(mfd);
	}
	closedir(d);
	return r;
}

/* A `key = value` line of a git config file (p past the indent): the value, trimmed, with
 * its double quotes taken off and a comment after it (`;` or `#` outside quotes) dropped,
 * as git reads it; NULL when the line is not that key (matched regardless of case). */
static char *git_config_value(char *p, const char *key)
{
	size_t kl = strlen(key);
	if (strncasecmp(p, key, kl))
		return NULL;
	p += kl;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p++ != '=')
		return NULL;
	while (*p == ' ' || *p == '\t')
		p++;
	size_t n = 0;
	for (bool q = false; p[n] && p[n] != '\r' && p[n] != '\n'; n++) {
		if (p[n] == '"')
			q = !q;
		else if (!q && (p[n] == ';' || p[n] == '#'))
			break;
	}
	while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	if (n >= 2 && p[0] == '"' && p[n - 1] == '"') {
		p++;
		n -= 2;
	}
	p[n] = 0;
	return p;
}

/* Submodule checkouts in the workspace: each `path = X` of a .gitmodules has its own X/.git,
 * usually a file naming the git directory (`gitdir: ../.git/modules/X`), which a host git
 * follows. Nested .gitmodules are followed too, within the same bounds. Nothing is looked up
 * through a symlink: whether a host path exists never changes the outcome. */
static int protect_submodule_checkouts(struct launch *L, const char *prefix, int depth,
                                       struct walk *w, struct corral_error *err)
{
	char rel[PATH_MAX];
	if (depth > MODULES_MAX_DEPTH || w->bytes <= 0 ||
	    snprintf(rel, sizeof(rel), "%s%s.gitmodules", prefix, *prefix ? "/" : "") >=
	        (int)sizeof(rel))
		return 0;
	int fd = ws_openat(L->cfg->workspace, rel, O_RDONLY | O_NONBLOCK);
	struct stat fst;
	FILE *f = fd < 0 || fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode) ? NULL : fdopen(fd, "re");
	if (!f) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	char line[PATH_MAX];
	int r = 0;
	long start = w->bytes;
	while (r >= 0 && w->gitdirs > 0 && w->bytes > 0 && fgets(line, sizeof(line), f)) {
		long pos = ftell(f);
		w->bytes = pos < 0 ? 0 : start - pos;
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!(p = git_config_value(p, "path")))
			continue;
		size_t n = strlen(p);
		/* a relative path without .. components, inside the checkout */
		if (!n || p[0] == '/' || !strcmp(p, "..") || !strncmp(p, "../", 3) ||
		    strstr(p, "/../") || (n >= 3 && !strcmp(p + n - 3, "/..")))
			continue;
		char mod[PATH_MAX], sub[PATH_MAX + 16];
		if (snprintf(mod, sizeof(mod), "%s%s%s", prefix, *prefix ? "/" : "", p) >=
		        (int)sizeof(mod) ||
		    snprintf(sub, sizeof(sub), "%s/.git", mod) >= (int)sizeof(sub))
			continue;
		int g = ws_openat(L->cfg->workspace, sub, O_PATH);
		struct stat st;
		if (g >= 0) {
			int ok = fstat(g, &st);
			close(g);
			if (ok < 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
				continue;
		} else if (errno == ELOOP || errno == EXDEV) {
			/* a symlink on the way: refused with a message naming it (protect_rel
			 * looks at the workspace's own entries only) */
			r = protect_rel(L, sub, false, PROT_EXISTING, w->origin, err);
			continue;
		} else {
			continue; /* not checked out */
		}
		w->gitdirs--;
		if (S_ISREG(st.st_mode)) {
			r = protect_rel(L, sub, false, 0, w->origin, err);
		} else {
			r = protect_git_redirects(L, sub, w->origin, err);
			if (r >= 0 && w->config &&
			    (size_t)snprintf(sub, sizeof(sub), "%s/.git/config", mod) < sizeof(sub))
				r = protect_rel(L, sub, false, 0, w->origin, err);
			if (r >= 0 && w->hooks &&
			    (size_t)snprintf(sub, sizeof(sub), "%s/.git/hooks", mod) < sizeof(sub))
				r = protect_rel(L, sub, true, 0, w->origin, err);
		}
		if (r >= 0) {
			/* the nested walk reads on from the budget left after this file */
			long here = w->bytes;
			r = protect_submodule_checkouts(L, mod, depth + 1, w, err);
			start += w->bytes - here;
		}
	}
	fclose(f);
	return r;
}

static int cmp_depth(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);
	return la < lb ? -1 : la > lb;
}

/* The protected set of a run: L->req.protect (read-only binds, with placeholders for what
 * is missing) and L->req.pin (directories on the way, bound over themselves). A dry run
 * computes the same set without touching the host; `policy check` asks it. */
/* A read-only workspace that a write tree (--rw, filesystem.write) makes writable again, in
 * whole or in part: the protected paths are needed there as much as in a writable one. */
static bool ws_rewritten(const struct corral_config *cfg)
{
	for (size_t i = 0; i < cfg->n_write; i++) {
		char res[PATH_MAX];
		if (policy_resolve_path(cfg, cfg->fs_write[i], res, NULL) == 0 &&
		    (path_within(res, cfg->workspace) || path_within(cfg->workspace, res)))
			return true;
	}
	return false;
}

/* core.hooksPath in the repository's own config (.git/config, read-only for the run): the
 * directory a host git runs hooks from instead of .git/hooks, often in the work tree
 * (`.githooks`; husky's `.husky/_`, whose generated hooks run the scripts in `.husky`). When
 * it names a directory inside the workspace, that directory is protected as .git/hooks is
 * (a placeholder when it is missing), and for husky's layout (a last component `_`) its
 * parent too. Read within a budget, never through a symlink; include.path is not followed. */
static int protect_hooks_path(struct launch *L, struct walk *w, struct corral_error *err)
{
	int fd = ws_openat(L->cfg->workspace, ".git/config", O_RDONLY | O_NONBLOCK);
	struct stat fst;
	FILE *f = fd < 0 || fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode) ? NULL : fdopen(fd, "re");
	if (!f) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	char line[PATH_MAX], value[PATH_MAX] = "";
	bool core = false;
	long budget = GITMODULES_MAX_BYTES;
	while (budget > 0 && fgets(line, sizeof(line), f)) {
		budget -= (long)strlen(line);
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '[') {
			size_t n = strcspn(p + 1, "] \t\"");
			core = n == 4 && !strncasecmp(p + 1, "core", 4) && p[5] == ']';
			char *close = strchr(p, ']');
			if (!close)
				continue;
			p = close + 1; /* `[core] hooksPath = x` on one line */
			while (*p == ' ' || *p == '\t')
				p++;
		}
		if (!core || !(p = git_config_value(p, "hookspath")))
			continue;
		snprintf(value, sizeof(value), "%s", p); /* the last one wins, as in git */
	}
	fclose(f);
	if (!*value)
		return 0;
	/* relative to the work tree's root (where a host git runs hooks), absolute, or ~/ */
	char res[PATH_MAX];
	if (policy_lexical_path(L->cfg, value, res, NULL) < 0 ||
	    !path_within(res, L->cfg->workspace) || !strcmp(res, L->cfg->workspace))
		return 0;
	const char *rel = res + strlen(L->cfg->workspace) + 1;
	int r = protect_rel(L, rel, true, PROT_MAKE_MISSING, w->origin, err);
	size_t rl = strlen(rel);
	if (r >= 0 && rl > 2 && !strcmp(rel + rl - 2, "/_")) {
		char parent[PATH_MAX];
		snprintf(parent, sizeof(parent), "%.*s", (int)(rl - 2), rel);
		r = protect_rel(L, parent, true, 0, w->origin, err);
	}
	return r;
}

int plan_protected_set(struct launch *L, struct corral_error *err)
{
	const struct corral_config *cfg = L->cfg;
	if (cfg->workspace_ro && !ws_rewritten(cfg))
		return 0; /* everything is read-only already */
	const char *const *list = cfg->protected_set ? (const char *const *)cfg->protected_paths
	                                             : policy_default_protected;
	size_t n = 0;
	if (cfg->protected_set)
		n = cfg->n_protected;
	else
		while (list[n])
			n++;
	if (!(L->req.protect = calloc(1, sizeof(char *))) || !(L->req.pin = calloc(1, sizeof(char *))))
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "policy", "out of memory");
	L->req.n_protect = L->req.n_pin = 0;
	bool git_config = false, git_hooks = false;
	for (size_t i = 0; i < n; i++) {
		char rel[PATH_MAX];
		size_t len = strlen(list[i]);
		bool slash = len && list[i][len - 1] == '/';
		bool is_dir = slash;
		for (size_t k = 0; k < ARRAY_SIZE(protected_dirs); k++)
			is_dir |= !strcmp(list[i], protected_dirs[k]);
		if (snprintf(rel, sizeof(rel), "%.*s", (int)(slash ? len - 1 : len), list[i]) >=
		    (int)sizeof(rel))
			continue;
		git_config |= !strcmp(rel, ".git/config");
		git_hooks |= !strcmp(rel, ".git/hooks");
		int r = protect_rel(L, rel, is_dir, PROT_MAKE_MISSING, rel, err);
		if (r < 0)
			return r;
	}
	struct walk w = {.gitdirs = MODULES_MAX,
	                 .entries = WALK_MAX_ENTRIES,
	                 .bytes = GITMODULES_MAX_BYTES,
	                 .config = git_config,
	                 .hooks = git_hooks,
	                 .origin = git_config ? ".git/config" : ".git/hooks"};
	int r = 0;
	char gitdir[PATH_MAX];
	/* .git's own redirects and linked worktrees, when .git is a real directory (pinned) */
	if ((git_config || git_hooks) &&
	    snprintf(gitdir, sizeof(gitdir), "%s/.git", cfg->workspace) < (int)sizeof(gitdir) &&
	    strv_has(L->req.pin, L->req.n_pin, gitdir)) {
		r = protect_git_redirects(L, ".git", w.origin, err);
		if (r >= 0)
			r = protect_worktrees(L, &w, err);
	}
	/* what is under .git, read only when .git is a directory, and .gitmodules only when it
	 * is a file (by the plan's look, which a server's key has cached: no opens then) */
	bool git_dir = (git_config || git_hooks) && ws_entry_may_be(L, ".git", S_IFDIR);
	if (r >= 0 && git_hooks && git_dir)
		r = protect_hooks_path(L, &w, err);
	if (r >= 0 && (git_config || git_hooks)) {
		/* a symlinked .git/modules is not followed: no submodules then */
		int mfd = git_dir
		              ? ws_openat(cfg->workspace, ".git/modules", O_RDONLY | O_DIRECTORY)
		              : -1;
		if (mfd < 0 && git_dir && (errno == EACCES || errno == EPERM))
			r = uninspectable(err, ".git/modules", errno);
		else if (mfd >= 0)
			r = protect_modules(L, ".git/modules", mfd, 0, &w, err);
		if (r >= 0 && ws_entry_may_be(L, ".gitmodules", S_IFREG))
			r = protect_submodule_checkouts(L, "", 0, &w, err);
	}
	if (L->req.n_pin > 1)
		qsort((void *)L->req.pin, L->req.n_pin, sizeof(char *), cmp_depth);
	return r < 0 ? r : 0;
}

/* A watched git directory at the end of the run: remove the redirects that appeared in it.
 * Everything is done through the fd taken at the start (never by resolving the path again,
 * which the sandbox may have pointed elsewhere: `mv .git x; ln -s ~/other/.git .git`), and
 * only while that directory is still the one at its path in the workspace. */
static void release_watch(const struct placeholder *h)
{
	char ws[PATH_MAX];
	snprintf(ws, sizeof(ws), "%.*s", (int)h->ws_len, h->path);
	const char *rel = h->path + h->ws_len;
	while (*rel == '/')
		rel++;
	int now = ws_openat(ws, rel, O_PATH | O_DIRECTORY);
	struct stat a, b;
	bool same = now >= 0 && fstat(h->fd, &a) == 0 && fstat(now, &b) == 0 &&
	            a.st_dev == b.st_dev && a.st_ino == b.st_ino;
	if (now >= 0)
		close(now);
	if (!same)
		return; /* moved or replaced (only possible without a mount namespace): leave it */
	for (size_t i = 0; i < ARRAY_SIZE(git_redirects); i++) {
		struct stat st;
		/* absent at the start, there now: the sandbox made it (everything of the run has
		 * exited by now). A directory by that name only makes git fail, and may hold the
		 * user's files; anything else (a file, a symlink, a fifo) goes: unlinkat removes
		 * the entry itself, never what a symlink points at. */
		if ((h->watch & (1u << i)) &&
		    fstatat(h->fd, git_redirects[i], &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    !S_ISDIR(st.st_mode))
			(void)remove_planted(h->fd, git_redirects[i], false);
	}
}

/* A placeholder kept after its run (plan_placeholders_linger): still held (the shared lock
 * of its run's descriptor), removed by the closer when it is due, unless a run took it
 * again meanwhile. */
struct lingering {
	char *path;
	int fd;
	dev_t dev;
	ino_t ino;
	uint64_t due; /* CLOCK_MONOTONIC, ns */
};

/* The end of a removed directory placeholder, off the caller's path. The rmdir takes the
 * name away at once; the directory itself ends when its last descriptor (ours, which holds
 * the lock) is closed, and that frees its block, which on a file system mounted with
 * `discard` (ext4 on many cloud disks) waits for the device: 0.15 ms a directory on the
 * 2-core machine, six of them in a workspace that has none of the protected directories, a
 * seventh of a one-shot run. A thread of the library closes them instead, so the caller
 * goes on (a one-shot records and prints its result meanwhile). Nothing outlives the
 * process: an exit waits, in the kernel, for a close under way, and closes what is left.
 * Nothing is visible on the host either: the names are gone before the caller goes on. A
 * forked child (or a thread that cannot start) closes them itself. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int *fds;
	size_t n, cap;
	struct lingering *lg; /* one per placeholder (by inode): the latest run's descriptor */
	size_t n_lg, cap_lg;
	_Atomic uint64_t linger_ns; /* 0: placeholders go at their run's end */
	unsigned busy;              /* lingering placeholders the thread is releasing now */
	unsigned planning;          /* plans under way in this process: nothing is released */
	bool sleeping; /* the thread waits with no time set: a new lingering one must wake it */
	pthread_cond_t idle;
	/* the process whose thread it is (0: none yet); read without the lock by close_later,
	 * which must not take it in a forked child */
	_Atomic pid_t pid;
	bool failed;
} closer = {.mu = PTHREAD_MUTEX_INITIALIZER,
            .cv = PTHREAD_COND_INITIALIZER,
            .idle = PTHREAD_COND_INITIALIZER};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void release_one(struct placeholder *h, bool close_now);

/* A lingering placeholder that is due: released as its run would have released it. */
static void release_lingering(struct lingering *e)
{
	struct placeholder h = {.path = e->path, .fd = e->fd, .created = true};
	release_one(&h, true);
}

static void *closer_main(void *unused)
{
	(void)unused;
	int batch[64];
	struct lingering due[32];
	pthread_mutex_lock(&closer.mu);
	for (;;) {
		uint64_t now = mono_ns(), next = UINT64_MAX;
		size_t k_lg = 0;
		bool hold = closer.planning > 0;
		for (size_t i = 0; i < closer.n_lg;) {
			if (!hold && closer.lg[i].due <= now && k_lg < ARRAY_SIZE(due)) {
				due[k_lg++] = closer.lg[i];
				closer.lg[i] = closer.lg[--closer.n_lg];
				continue;
			}
			if (closer.lg[i].due < next)
				next = closer.lg[i].due;
			i++;
		}
		if (!closer.n && !k_lg) {
			if (next == UINT64_MAX || hold) {
				/* woken by close_later, linger_keep or linger_unhold */
				closer.sleeping = true;
				pthread_cond_wait(&closer.cv, &closer.mu);
				closer.sleeping = false;
			} else {
				/* not woken for a later one: they are due in the order made */
				struct timespec ts = {.tv_sec = (time_t)(next / 1000000000u),
				                      .tv_nsec = (long)(next % 1000000000u)};
				pthread_cond_clockwait(&closer.cv, &closer.mu, CLOCK_MONOTONIC,
				                       &ts);
			}
			continue;
		}
		size_t k = closer.n < ARRAY_SIZE(batch) ? closer.n : ARRAY_SIZE(batch);
		closer.n -= k;
		if (k) /* (only lingering ones due: the queue may not even be allocated) */
			memcpy(batch, closer.fds + closer.n, k * sizeof(int));
		closer.busy += (unsigned)k_lg;
		pthread_mutex_unlock(&closer.mu);
		for (size_t i = 0; i < k; i++)
			close(batch[i]);
		for (size_t i = 0; i < k_lg; i++)
			release_lingering(&due[i]);
		pthread_mutex_lock(&closer.mu);
		closer.busy -= (unsigned)k_lg;
		if (!closer.busy)
			pthread_cond_broadcast(&closer.idle);
	}
	return NULL;
}

/* Whether the thread is there for this process (started now if not); with closer.mu held. */
static bool closer_ready(pid_t me)
{
	if (atomic_load(&closer.pid) == me)
		return true;
	if (closer.failed)
		return false;
	/* no signal for it: a caller's signalfd or sigwait keeps them all */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t at;
	pthread_t t;
	bool ok = false;
	if (pthread_attr_init(&at) == 0) {
		ok = pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED) == 0 &&
		     pthread_attr_setstacksize(&at, 64 * 1024) == 0 &&
		     pthread_create(&t, &at, closer_main, NULL) == 0;
		pthread_attr_destroy(&at);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	closer.failed = !ok;
	if (ok)
		atomic_store(&closer.pid, me);
	return ok;
}

static void close_later(int fd)
{
	pid_t me = getpid();
	/* a forked child has no such thread, and the lock may have been held at the fork */
	pid_t owner = atomic_load(&closer.pid);
	if (owner && owner != me) {
		close(fd);
		return;
	}
	pthread_mutex_lock(&closer.mu);
	bool queued = false;
	if (closer_ready(me)) {
		if (closer.n == closer.cap) {
			size_t cap = closer.cap ? 2 * closer.cap : 16;
			int *g = realloc(closer.fds, cap * sizeof(int));
			if (g) {
				closer.fds = g;
				closer.cap = cap;
			}
		}
		if (closer.n < closer.cap) {
			closer.fds[closer.n++] = fd;
			pthread_cond_signal(&closer.cv);
			queued = true;
		}
	}
	pthread_mutex_unlock(&closer.mu);
	if (!queued)
		close(fd);
}

static bool is_git_redirect(const char *path)
{
	const char *base = strrchr(path, '/');
	for (size_t k = 0; base && k < ARRAY_SIZE(git_redirects); k++)
		if (!strcmp(base + 1, git_redirects[k]))
			return true;
	return false;
}

/* One protected path at its run's end: a placeholder (made by this run, or marked as
 * corral's by another) is removed if it is still the empty thing that was made and no other
 * run holds it. The descriptor is closed (a removed directory's by the closer unless
 * close_now) and the path freed. */
static void release_one(struct placeholder *h, bool close_now)
{
	if (h->watch) {
		if (h->fd >= 0) {
			release_watch(h);
			close(h->fd);
		}
		free(h->path);
		return;
	}
	char v[2];
	bool redirect = is_git_redirect(h->path);
	if (redirect && h->fd >= 0 && flock(h->fd, LOCK_EX | LOCK_NB) == 0 &&
	    fgetxattr(h->fd, PLANTED_XATTR, v, sizeof(v)) > 0) {
		/* a git redirect a sandbox made (remove_planted): the last holder removes
		 * it, whatever it holds */
		struct stat a, b;
		if (fstat(h->fd, &a) == 0 && lstat(h->path, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino && S_ISREG(b.st_mode))
			(void)unlink(h->path);
	} else if (h->fd >= 0 && flock(h->fd, LOCK_EX | LOCK_NB) == 0 &&
	           /* the mark is read again now: a run that made it may have set it only
	            * after this one looked (creation and marking are not one step) */
	           (h->created || fgetxattr(h->fd, PLACEHOLDER_XATTR, v, sizeof(v)) > 0)) {
		struct stat a, b;
		if (fstat(h->fd, &a) == 0 && lstat(h->path, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino) {
			bool dir = S_ISDIR(b.st_mode);
			bool gone = dir                                    ? rmdir(h->path) == 0
			            : S_ISREG(b.st_mode) && b.st_size == 0 ? unlink(h->path) == 0
			                                                   : false;
			/* something was put into it on the host meanwhile (the sandbox could
			 * not): it is the user's now, so drop corral's mark */
			if (!gone)
				(void)fremovexattr(h->fd, PLACEHOLDER_XATTR);
			if (gone && dir && !close_now) {
				close_later(h->fd);
				h->fd = -1;
			}
		}
	}
	if (h->fd >= 0)
		close(h->fd);
	free(h->path);
}

void plan_release_protected(struct placeholder *held, size_t n)
{
	for (size_t i = 0; i < n; i++)
		release_one(&held[i], false);
	free(held);
}

/* Keep h lingering instead of releasing it now: only a placeholder that carries the mark
 * (so that the next run shares it as corral's, and whichever run lets go of it last removes
 * it), in the process whose closer thread it is. */
static bool linger_keep(struct placeholder *h, uint64_t ns, rlim_t fd_max)
{
	if (h->watch || h->fd < 0 || !h->created || is_git_redirect(h->path))
		return false;
	pid_t me = getpid(), owner = atomic_load(&closer.pid);
	if (owner && owner != me)
		return false; /* a forked child: no thread of its own */
	if ((rlim_t)h->fd >= fd_max)
		return false;
	char v[2];
	struct stat st;
	if (fgetxattr(h->fd, PLACEHOLDER_XATTR, v, sizeof(v)) <= 0 || fstat(h->fd, &st) < 0)
		return false;
	int old_fd = -1;
	char *old_path = NULL;
	bool kept = false;
	pthread_mutex_lock(&closer.mu);
	if (closer_ready(me)) {
		struct lingering *e = NULL;
		for (size_t i = 0; i < closer.n_lg && !e; i++)
			if (closer.lg[i].dev == st.st_dev && closer.lg[i].ino == st.st_ino)
				e = &closer.lg[i];
		if (!e && closer.n_lg == closer.cap_lg) {
			size_t cap = closer.cap_lg ? 2 * closer.cap_lg : 32;
			struct lingering *g = realloc(closer.lg, cap * sizeof(*g));
			if (g) {
				closer.lg = g;
				closer.cap_lg = cap;
			}
		}
		if (!e && closer.n_lg < closer.cap_lg) {
			e = &closer.lg[closer.n_lg++];
			e->fd = -1;
			e->path = NULL;
		}
		if (e) {
			/* the same placeholder lingering from an earlier run: this run's lock
			 * holds it now, so that one's goes */
			old_fd = e->fd;
			old_path = e->path;
			*e = (struct lingering){.path = h->path,
			                        .fd = h->fd,
			                        .dev = st.st_dev,
			                        .ino = st.st_ino,
			                        .due = mono_ns() + ns};
			if (closer.sleeping) /* else it wakes by its own time, or is at work */
				pthread_cond_signal(&closer.cv);
			kept = true;
		}
	}
	pthread_mutex_unlock(&closer.mu);
	if (old_fd >= 0)
		close(old_fd);
	free(old_path);
	return kept;
}

/* While this process plans a run, the closer lets what lingers be: the plan looks at those
 * placeholders and takes them over, and one removed halfway would only be made again. */
static bool linger_hold(void)
{
	if (!atomic_load(&closer.linger_ns) || atomic_load(&closer.pid) != getpid())
		return false;
	pthread_mutex_lock(&closer.mu);
	closer.planning++;
	pthread_mutex_unlock(&closer.mu);
	return true;
}

static void linger_unhold(void)
{
	pthread_mutex_lock(&closer.mu);
	if (!--closer.planning && closer.sleeping)
		pthread_cond_signal(&closer.cv);
	pthread_mutex_unlock(&closer.mu);
}

void plan_release_protected_end(struct placeholder *held, size_t n)
{
	uint64_t ns = atomic_load(&closer.linger_ns);
	/* A lingering placeholder holds a descriptor (up to 18 with the default list), which a
	 * process short of them needs for its next run: only while three quarters of the
	 * limit are free. New descriptors take the lowest free numbers, so a descriptor's
	 * number tells about how many are open below it. */
	struct rlimit rl;
	rlim_t fd_max = 0; /* no limit known: keep nothing */
	if (ns && getrlimit(RLIMIT_NOFILE, &rl) == 0)
		fd_max = rl.rlim_cur == RLIM_INFINITY ? RLIM_INFINITY : rl.rlim_cur / 4;
	for (size_t i = 0; i < n; i++)
		if (!ns || !linger_keep(&held[i], ns, fd_max))
			release_one(&held[i], false);
	free(held);
}

void plan_placeholders_linger(unsigned ms)
{
	pthread_mutex_lock(&closer.mu);
	atomic_store(&closer.linger_ns, (uint64_t)ms * 1000000u);
	struct lingering *all = NULL;
	size_t n = 0;
	if (!ms && atomic_load(&closer.pid) == getpid()) {
		/* stopped: everything lingering goes now, and what the thread is releasing is
		 * waited for, so that nothing is left when the caller goes on */
		all = closer.lg;
		n = closer.n_lg;
		closer.lg = NULL;
		closer.n_lg = closer.cap_lg = 0;
		while (closer.busy)
			pthread_cond_wait(&closer.idle, &closer.mu);
	}
	pthread_mutex_unlock(&closer.mu);
	for (size_t i = 0; i < n; i++)
		release_lingering(&all[i]);
	free(all);
}

int plan_make_pending(struct launch *L, struct corral_error *err)
{
	int r = 0;
	L->ph_defer = false; /* protect_one makes them now */
	for (size_t i = 0; i < L->n_ph_pending && r >= 0; i++) {
		const struct ph_pending *q = &L->ph_pending[i];
		/* 0, as before the clone: the host refused to make it where the sandbox could not
		 * make it either (another owner's directory, a read-only file system, a parent
		 * that is gone; a FUSE or LSM rule that access() did not predict); the child's
		 * bind of a missing source is skipped then, as the plan's would have been. Any
		 * other failure is an error and ends the launch. */
		r = protect_one(L, q->path, q->is_dir, q->how, q->origin, err);
	}
	free_pending(L);
	return r < 0 ? r : 0;
}

/* The trees bound read-write (the workspace, each filesystem.write path) bring every mount
 * below them along (the binds are recursive), and Landlock allows what is beneath them: one
 * of the kernel's interface file systems there (a chroot's /proc, a build root's /sys or
 * /dev) would hand the command the host kernel's settings or the host's device nodes.
 * Refused by name before anything is built; a filesystem.write path that is itself on one
 * too (the workspace's setter checks its own). */
static int check_kernel_trees(struct launch *L, struct corral_error *err)
{
	const struct corral_config *cfg = L->cfg;
	const struct mount_request *q = &L->req;
	autofree char *mi = hc_mountinfo(L->hc_sys);
	int r = kernel_tree_check("workspace", cfg->workspace, false, mi, err);
	for (size_t i = 0; r == 0 && i < q->n_write; i++)
		r = kernel_tree_check("filesystem.write", q->write[i], true, mi, err);
	return r;
}

static int prepare_paths(struct launch *L, struct corral_error *err)
{
	const struct corral_config *cfg = L->cfg;
	struct mount_request *q = &L->req;
	int r;
	if ((r = resolve_list(cfg, cfg->fs_read, cfg->n_read, (char ***)&q->read, &q->n_read, true,
	                      "filesystem.read", err)) < 0 ||
	    (r = resolve_list(cfg, cfg->fs_write, cfg->n_write, (char ***)&q->write, &q->n_write,
	                      true, "filesystem.write", err)) < 0 ||
	    (r = resolve_list(cfg, cfg->fs_deny, cfg->n_deny, (char ***)&q->deny, &q->n_deny, false,
	                      "filesystem.deny", err)) < 0 ||
	    /* (only where the hiding is enforced: mode none hides nothing) */
	    ((L->mountns || L->landlock) && (r = policy_check_cwd(cfg, err)) < 0) ||
	    ((L->mountns || L->landlock) && (r = check_kernel_trees(L, err)) < 0))
		return r;
	bool held = !L->dry_run && linger_hold();
	r = plan_protected_set(L, err);
	if (held)
		linger_unhold();
	if (r < 0)
		return r;
	q->hc = L->hc ? L->hc : L->hc_sys;
	q->workspace = cfg->workspace;
	q->cwd = cfg->cwd ? cfg->cwd : cfg->workspace;
	q->tmpfs_size = cfg->limits[CORRAL_LIMIT_TMPFS] ? cfg->limits[CORRAL_LIMIT_TMPFS]
	                                                : 256ULL << 20;
	q->workspace_ro = cfg->workspace_ro;
	q->etc_minimal = cfg->etc_minimal;
	q->proc_fallback = cfg->mode == CORRAL_MODE_AUTO;
	return 0;
}

static void free_strv(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

/* ---- cgroup and limits ----------------------------------------------------------------- */

/* How this process's last attempt to make a cgroup for a run went (before any: made in full).
 * A plan key's dry run makes none; it plans as that attempt went (whether the run is in a
 * cgroup, and so which rlimit fallbacks it needs; whether the CPU share was dropped), so its
 * key matches a sandbox built since. If the host changed meanwhile, the key misses, which only
 * costs a build. explain's dry run asks the host instead (cgroup_probe), so that it shows the
 * limits a run would get. */
enum { CG_NONE, CG_NO_CPU, CG_FULL };
static _Atomic int cg_last = CG_FULL;

/* explain's dry run: whether a run would get its cgroup (and so which rlimit stand-ins it
 * needs, and whether its CPU share holds), asked of the host (cgroup_probe) and decided as a
 * real attempt decides: without the cpu controller, mode auto retries without the share only
 * for a memory or process limit, and mode required refuses the run. */
/* A CPU share in mode required without a cgroup that enforces it: the run is refused (a real
 * attempt, and explain's prediction of one, say the same). */
static int cpu_share_refused(struct corral_error *err, int sys_errno, const char *why)
{
	return corral_set_error(
	    err, CORRAL_EUNAVAIL, sys_errno, "cgroup",
	    "cgroup: a CPU share (--cpus) needs a cgroup: run as root, delegate a "
	    "v2 subtree with the cpu controller, or drop --cpus (--mode auto runs "
	    "without it, recorded); why none is usable: %.300s",
	    why);
}

static int predict_cgroup(struct launch *L, struct corral_result *res, uint64_t cpus,
                          bool pids_need_cg, struct corral_error *err)
{
	const struct corral_config *cfg = L->cfg;
	char why[PATH_MAX + 600];
	bool cpu_ok = false, probe = cgroup_probe(why, sizeof(why), &cpu_ok) != 0;
	cpu_ok = cpu_ok && !plan_test_disabled("cgroup-cpu");
	bool retry =
	    cfg->mode == CORRAL_MODE_AUTO && (cfg->limits[CORRAL_LIMIT_MEMORY] || pids_need_cg);
	L->in_cg = probe && (!cpus || cpu_ok || retry);
	L->cg_no_cpu = cpus && L->in_cg && !cpu_ok;
	if (cpus && !L->in_cg && cfg->mode == CORRAL_MODE_REQUIRED) {
		char r[sizeof(why) + 40];
		if (!probe)
			snprintf(r, sizeof(r), "cgroup: no usable cgroup (%s)",
			         strncmp(why, "none: ", 6) ? why : why + 6);
		else
			snprintf(r, sizeof(r), "cgroup: no cpu controller%s",
			         plan_test_disabled("cgroup-cpu")
			             ? " (disabled by CORRAL_TEST_DISABLE=cgroup-cpu)"
			             : "");
		return cpu_share_refused(err, 0, r);
	}
	char d[sizeof(why) + 160];
	if (L->in_cg)
		snprintf(d, sizeof(d), "%s",
		         L->cg_no_cpu ? "a cgroup for the memory and process limits; the CPU share "
		                        "is NOT enforced (no cpu controller)"
		         : cpus       ? "a cgroup for the memory, process and CPU limits"
		                      : "a cgroup for the memory and process limits");
	else if (probe)
		snprintf(d, sizeof(d),
		         "no cpu controller for the CPU share (--cpus): no cgroup; "
		         "the limits fall back to rlimits; the CPU share is NOT "
		         "enforced");
	else
		snprintf(d, sizeof(d), "none usable, the limits fall back to rlimits: %s%s",
		         strncmp(why, "none: ", 6) ? why : why + 6,
		         cpus ? "; the CPU share is NOT enforced" : "");
	record(res, "cgroup", L->in_cg, d);
	return 0;
}

static int prepare_limits(struct launch *L, struct corral_result *res,
                          struct corral_error *err)
{
	const struct corral_config *cfg = L->cfg;
	/* A cgroup is made only when a limit needs it. Inside a user namespace RLIMIT_NPROC
	 * counts per sandbox, so an unprivileged caller's process limit needs no cgroup; but the
	 * kernel exempts kuid 0 from RLIMIT_NPROC, so root's sandboxes need pids.max. */
	bool pids_need_cg = cfg->limits[CORRAL_LIMIT_PIDS] &&
	                    (L->uid == 0 || (!L->userns && !cfg->pids_default));
	/* A CPU share has no rlimit to fall back on: without a cgroup it cannot be had. */
	const uint64_t cpus = cfg->limits[CORRAL_LIMIT_CPUS];
	L->want_cg = cfg->mode != CORRAL_MODE_NONE && !plan_test_disabled("cgroup") &&
	             (cfg->limits[CORRAL_LIMIT_MEMORY] || pids_need_cg || cpus);
	if (L->want_cg && L->dry_run && L->key_only) {
		/* a plan key (on every call): as this process's last attempt went */
		int last = atomic_load(&cg_last);
		L->in_cg = last != CG_NONE;
		L->cg_no_cpu = cpus && last == CG_NO_CPU;
		record(res, "cgroup", L->in_cg, "as this process's last attempt went");
	} else if (L->want_cg && L->dry_run) {
		int r = predict_cgroup(L, res, cpus, pids_need_cg, err);
		if (r < 0)
			return r;
	} else if (L->want_cg) {
		struct cgroup_limits lim = {.memory_bytes = cfg->limits[CORRAL_LIMIT_MEMORY],
		                            .pids =
		                                plan_pids_budget(cfg->limits[CORRAL_LIMIT_PIDS]),
		                            .cpu_pct = cpus,
		                            .tree_kill = !L->pidns};
		struct corral_error cgerr = {0};
		int rc = cpus && plan_test_disabled("cgroup-cpu")
		             ? corral_set_error(&cgerr, CORRAL_EUNAVAIL, 0, "cgroup",
		                                "cgroup: no cpu controller (disabled by "
		                                "CORRAL_TEST_DISABLE=cgroup-cpu)")
		             : cgroup_prepare(&lim, L->hc_sys, &L->cg, &cgerr);
		/* Mode auto: what failed may be the CPU share alone (no cpu controller in v1, a
		 * delegated v2 subtree without it, +cpu refused while RT tasks run). The memory and
		 * process limits must not go with it: root has no RLIMIT_NPROC to fall back on, and
		 * RLIMIT_DATA is a weaker memory limit. So try again without the share, and record
		 * that the share alone is not enforced. */
		if (rc < 0 && cpus && cfg->mode == CORRAL_MODE_AUTO &&
		    (cfg->limits[CORRAL_LIMIT_MEMORY] || pids_need_cg)) {
			struct corral_error again = {0};
			lim.cpu_pct = 0;
			if (cgroup_prepare(&lim, L->hc_sys, &L->cg, &again) == 0) {
				char note[200];
				snprintf(note, sizeof(note), "; the CPU share is NOT enforced (%.150s)",
				         strncmp(cgerr.message, "cgroup: ", 8) ? cgerr.message
				                                               : cgerr.message + 8);
				cgroup_note(L->cg, note);
				L->cg_no_cpu = true;
				rc = 0;
			}
		}
		L->in_cg = rc == 0;
		atomic_store(&cg_last, rc < 0 ? CG_NONE : L->cg_no_cpu ? CG_NO_CPU : CG_FULL);
		if (rc < 0) {
			L->cg = NULL;
			if (cpus && cfg->mode == CORRAL_MODE_REQUIRED)
				return cpu_share_refused(err, cgerr.sys_errno, cgerr.message);
			char d[sizeof(cgerr.message) + 40];
			snprintf(d, sizeof(d), "%s%s", cgerr.message,
			         cpus ? "; the CPU share is NOT enforced" : "");
			record(res, "cgroup", false, d);
		}
	} else if (cpus && cfg->mode != CORRAL_MODE_NONE) {
		/* the test hook disabled cgroups */
		if (cfg->mode == CORRAL_MODE_REQUIRED)
			return corral_set_error(err, CORRAL_EUNAVAIL, 0, "cgroup",
			                        "cgroup: disabled, and a CPU share (--cpus) needs one");
		record(res, "cgroup", false,
		       "disabled by CORRAL_TEST_DISABLE; the CPU share is NOT enforced");
	} else {
		record(res, "cgroup", false,
		       cfg->mode == CORRAL_MODE_NONE  ? "mode none"
		       : plan_test_disabled("cgroup") ? "disabled by CORRAL_TEST_DISABLE"
		                                      : cg_not_needed(L));
	}
	/* RLIMIT_NPROC counts per user namespace; without one it would count every process
	 * of the host user, so the default process limit only applies inside a userns. */
	uint64_t nproc = plan_pids_budget(cfg->limits[CORRAL_LIMIT_PIDS]);
	if (!L->userns && cfg->pids_default)
		nproc = 0;
	rlimit_plan_build(&L->rl, cfg->limits[CORRAL_LIMIT_CPU_S], cfg->limits[CORRAL_LIMIT_MEMORY],
	                  nproc, cfg->limits[CORRAL_LIMIT_NOFILE], cfg->limits[CORRAL_LIMIT_FSIZE],
	                  L->in_cg, L->in_cg);
	record_rlimits(L, res);
	return 0;
}

/* Why a run without a memory limit or a CPU share makes no cgroup, as its tier has it. */
static const char *cg_not_needed(const struct launch *L)
{
	if (!L->cfg->limits[CORRAL_LIMIT_PIDS])
		return "not needed: no memory limit, and NO process limit (pids 0)";
	if (L->userns || L->uid == 0)
		return "not needed: no memory limit, and processes are limited by RLIMIT_NPROC per "
		       "user namespace";
	if (L->cfg->pids_default)
		return "not needed: no memory limit; NO process limit (without a user namespace "
		       "RLIMIT_NPROC would count every process of this user)";
	return "not needed: no memory limit; processes are limited by RLIMIT_NPROC, counted over "
	       "every process of this user (no user namespace)";
}

/* The rlimits as set (rlimit_plan_build), named one by one. */
static void record_rlimits(const struct launch *L, struct corral_result *res)
{
	char d[160] = "";
	size_t o = 0;
	for (size_t i = 0; i < L->rl.n && o < sizeof(d) - 32; i++) {
		const char *nm = L->rl.resource[i] == RLIMIT_CORE     ? "core=1 (no core files, no core helper)"
		                 : L->rl.resource[i] == RLIMIT_CPU    ? "cpu"
		                 : L->rl.resource[i] == RLIMIT_DATA   ? "data (memory fallback)"
		                 : L->rl.resource[i] == RLIMIT_NPROC  ? (L->uid == 0 ? "nproc (not enforced for uid 0)" : "nproc")
		                 : L->rl.resource[i] == RLIMIT_NOFILE ? "nofile"
		                 : L->rl.resource[i] == RLIMIT_FSIZE  ? "fsize"
		                                                      : "?";
		o += (size_t)snprintf(d + o, sizeof(d) - o, "%s%s", i ? ", " : "", nm);
	}
	record(res, "rlimits", true, d);
}

/* ---- the whole preparation -------------------------------------------------------------- */

int plan_prepare(struct launch *L, struct corral_result *res, struct corral_error *err)
{
	const struct corral_config *cfg = L->cfg;
	int r;
	L->cwd = cfg->cwd ? cfg->cwd : cfg->workspace;
	/* Early, clear errors before anything is built (explain reports the decision itself). */
	/* (a parked sandbox's argv is a stand-in: each call's own plan key runs its preflight) */
	if (!L->dry_run && !cfg->park && (r = policy_preflight(cfg, err)) < 0)
		return r;
	/* A parked sandbox's key names its placeholders' inodes: made before, as before. */
	L->ph_defer = !L->dry_run && !cfg->park && L->mountns;
	if ((r = prepare_paths(L, err)) < 0)
		return r;
	if ((r = mount_plan_build(&L->mounts, &L->req, err)) < 0)
		return r;
	if (L->dry_run && !L->mountns && cfg->mode != CORRAL_MODE_NONE)
		L->private_tmp = strdup("/tmp/corral-tmp-XXXXXX");
	else if (!L->mountns && cfg->mode != CORRAL_MODE_NONE && make_private_tmp(L) < 0)
		return corral_set_error(err, CORRAL_ESYS, errno, "tmp",
		                        "tmp: cannot create a private /tmp directory: %s",
		                        strerror(errno));
	if (cfg->cmd_allow_set &&
	    (r = policy_exec_files(cfg, &L->exec_files, &L->n_exec_files, err)) < 0)
		return r;
	if (L->landlock && build_landlock(L) < 0)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "landlock", "out of memory");
	if ((r = prepare_limits(L, res, err)) < 0)
		return r;
	L->argv = cfg->argv;
	L->exec_buf = malloc(PATH_MAX);
	if (prepare_env(L) < 0 || !L->exec_buf || split_path(L) < 0)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "env", "out of memory");
	return 0;
}

int plan_drop_some_namespaces(struct launch *L, int flags, const int errnos[4],
                              struct corral_error *err)
{
	static const int order[] = {CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP};
	L->ns_refused = flags;
	for (size_t i = 0; i < ARRAY_SIZE(order); i++)
		L->ns_refused_errno[i] = flags & order[i] ? errnos[i] : 0;
	if (flags & CLONE_NEWIPC)
		L->ipcns = false;
	if (flags & CLONE_NEWUTS)
		L->utsns = false;
	if (flags & CLONE_NEWCGROUP)
		L->cgroupns = L->cgroupns_late = false;
	if (flags & CLONE_NEWNET) {
		L->netns = false;
		/* Landlock now keeps TCP off the host's network (seccomp refuses what it does
		 * not see: MPTCP, SMC, Fast Open) */
		L->ll.deny_tcp = L->cfg->net == CORRAL_NET_NONE;
		/* The host's abstract unix sockets are per network namespace, so now shared:
		 * Landlock ABI 6 keeps the sandbox from connecting to them, but not from
		 * binding a name a host service has not taken yet (an X11 display, a D-Bus
		 * address), which host clients would then reach. Deny unix sockets, as the
		 * tier without namespaces does (pathname ones stay out of view, in the mount
		 * namespace, but socket() cannot tell them apart). */
		if (L->seccomp && !L->sc_no_unix) {
			if (!(L->sc = plan_seccomp(true, err)))
				return err ? err->code : CORRAL_ESYS;
			L->sc_no_unix = true;
		}
	}
	return 0;
}

int plan_drop_namespaces(struct launch *L, struct corral_error *err)
{
	L->ns_refused = 0;
	L->userns = L->mountns = L->pidns = L->netns = L->ipcns = L->utsns = L->cgroupns = false;
	/* No placeholder without a mount namespace (protect_one): the ones made for the first
	 * attempt are removed now, not after the run. The rest stays held, the watched git
	 * directories too (a redirect planted there is still removed at the end). */
	struct placeholder *made = calloc(L->n_held ? L->n_held : 1, sizeof(*made));
	if (!made)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "policy", "out of memory");
	size_t n_made = 0, kept = 0;
	for (size_t i = 0; i < L->n_held; i++) {
		if (L->held[i].created && !L->held[i].watch)
			made[n_made++] = L->held[i];
		else
			L->held[kept++] = L->held[i];
	}
	L->n_held = kept;
	plan_release_protected(made, n_made);
	free_pending(L);
	L->ph_defer = false;
	/* RLIMIT_NPROC would now count every process of the host user: the default process
	 * limit does not apply without a user namespace (an explicit one still does). */
	const struct corral_config *cfg = L->cfg;
	uint64_t nproc = cfg->pids_default ? 0 : plan_pids_budget(cfg->limits[CORRAL_LIMIT_PIDS]);
	rlimit_plan_build(&L->rl, cfg->limits[CORRAL_LIMIT_CPU_S], cfg->limits[CORRAL_LIMIT_MEMORY],
	                  nproc, cfg->limits[CORRAL_LIMIT_NOFILE], cfg->limits[CORRAL_LIMIT_FSIZE],
	                  L->cg != NULL, L->cg != NULL);
	if (!L->private_tmp && make_private_tmp(L) < 0)
		return corral_set_error(err, CORRAL_ESYS, errno, "tmp", "tmp: %s", strerror(errno));
	if (L->landlock && build_landlock(L) < 0)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "landlock", "out of memory");
	if (L->seccomp && !(L->sc = plan_seccomp(true, err)))
		return err ? err->code : CORRAL_ESYS;
	L->sc_no_unix = L->seccomp;
	if (prepare_env(L) < 0)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "env", "out of memory");
	return 0;
}

void plan_free(struct launch *L)
{
	free_pending(L);
	mount_plan_free(&L->mounts);
	free(L->ll_rules);
	free_strv(L->ll_owned, L->n_ll_owned);
	env_free(L->envp);
	if (L->path_dirs) {
		for (char **p = L->path_dirs; *p; p++)
			free(*p);
		free(L->path_dirs);
	}
	free(L->exec_buf);
	free_strv(L->exec_files, L->n_exec_files);
	free_strv((char **)L->req.read, L->req.n_read);
	free_strv((char **)L->req.write, L->req.n_write);
	free_strv((char **)L->req.deny, L->req.n_deny);
	free_strv((char **)L->req.protect, L->req.n_protect);
	free_strv((char **)L->req.pin, L->req.n_pin);
	/* placeholders and private_tmp are handed to the supervisor (or removed on failure) */
}
