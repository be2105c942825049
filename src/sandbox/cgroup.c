/* Per-run cgroups: memory, process and CPU limits that hold for the whole process tree, OOM
 * and fork-limit detection, and a kill that nothing in the tree can outrun.
 *
 * Layout. Every run gets <our cgroup>/corral/corral-<pid>-<n>, in each v1 hierarchy we use
 * (memory, pids, freezer when mounted, cpu when a CPU limit is asked for) or once in the v2
 * tree. The shared "corral" parent lets many runs coexist under one supervisor and is removed
 * when the last run goes.
 *
 * v2 and the no-internal-process rule. A v2 cgroup can only hand controllers to its children
 * (cgroup.subtree_control) while it holds no processes itself; the root cgroup is exempt. The
 * supervisor normally lives in the cgroup it was given (a systemd scope or service), so when
 * enabling controllers there fails with EBUSY we move this process into a sibling leaf,
 * <our cgroup>/corral.sup, and try again; this is what crun and systemd do with their "init"
 * / "supervisor" leaves. The process stays there for its lifetime (later runs find it there
 * and use the parent as the base). If other processes still share the cgroup, we move back,
 * leaving things as found, and report the cgroup as unusable: corral should then be started
 * in a scope of its own (systemd-run --user --scope -p Delegate=yes).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "hcache.h"
#include "sandbox/sandbox.h"
#include "util.h"

enum cg_ctl { CTL_MEMORY, CTL_PIDS, CTL_FREEZER, CTL_CPU, CTL_N };
static const char *const ctl_names[CTL_N] = {"memory", "pids", "freezer", "cpu"};

#define DELEGATE_HINT                                                                              \
	"run as root or delegate a cgroup subtree: systemd-run --user --scope -p Delegate=yes "    \
	"corral ..."
#define OWN_SCOPE_HINT                                                                             \
	"start corral in a cgroup of its own: systemd-run --user --scope -p Delegate=yes corral "  \
	"..."
#define KILL_TIMEOUT_MS 2000
#define RMDIR_TIMEOUT_MS 1000

struct cgroup_handle {
	int version;
	/* v1: the run directory in each hierarchy (NULL: not used); v2: dir[0] only. */
	char *dir[CTL_N];
	int fd; /* v2: O_DIRECTORY fd of dir[0] for CLONE_INTO_CGROUP; else -1 */
	char desc[256];
};

/* Where our own cgroups are, as seen through this mount namespace. */
struct cg_layout {
	char v2[PATH_MAX];        /* base of our v2 subtree, "" without a cgroup2 mount */
	char v2root[PATH_MAX];    /* where the cgroup2 mount shows its root ("" if none) */
	char v1[CTL_N][PATH_MAX]; /* our cgroup in each v1 hierarchy, "" when not mounted */
};

static unsigned run_counter;

/* ---- small file helpers ------------------------------------------------------------------ */

/* Read what is left of a (pseudo-)file into a NUL-terminated malloc'ed buffer; NULL with errno
 * set. */
static char *slurp_fd(int fd)
{
	size_t cap = 4096, len = 0;
	autofree char *buf = malloc(cap);
	if (!buf)
		return NULL;
	for (;;) {
		if (len + 1 >= cap) {
			char *nbuf = realloc(buf, cap * 2);
			if (!nbuf)
				return NULL;
			buf = nbuf;
			cap *= 2;
		}
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return NULL;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	return steal_pointer(&buf);
}

/* Read a whole (pseudo-)file into a NUL-terminated malloc'ed buffer; NULL with errno set. */
static char *slurp(const char *path)
{
	autoclose int fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? NULL : slurp_fd(fd);
}

static int join(char *out, const char *dir, const char *name)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", dir, name);
	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/* cgroupfs reports errors (EBUSY, EINVAL, ENOENT) from write(), so one write per value. */
static int write_at(const char *dir, const char *file, const char *val)
{
	char path[PATH_MAX];
	if (join(path, dir, file) < 0)
		return -ENAMETOOLONG;
	autoclose int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = strlen(val);
	ssize_t n = write(fd, val, len);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

static char *read_at(const char *dir, const char *file)
{
	char path[PATH_MAX];
	if (join(path, dir, file) < 0) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	return slurp(path);
}

/* Is word one of the sep-separated tokens of list? */
static int list_has(const char *list, const char *word, char sep)
{
	size_t wl = strlen(word);
	for (const char *p = list; p && *p;) {
		const char *end = strchr(p, sep);
		size_t tl = end ? (size_t)(end - p) : strcspn(p, "\n");
		if (tl == wl && memcmp(p, word, wl) == 0)
			return 1;
		p = end ? end + 1 : NULL;
	}
	return 0;
}

/* The value N of a "key N" line in a flat-keyed file (memory.events, pids.events). */
static uint64_t key_value_at(const char *dir, const char *file, const char *key)
{
	autofree char *text = dir ? read_at(dir, file) : NULL;
	size_t kl = strlen(key);
	for (char *line = text; line && *line;) {
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
			return strtoull(line + kl + 1, NULL, 10);
		line = strchr(line, '\n');
		line = line ? line + 1 : NULL;
	}
	return 0;
}

/* Walk a cgroup.procs text: the next pid at *pos, or 0 at the end. */
static long next_pid(char **pos)
{
	char *end;
	long pid = *pos ? strtol(*pos, &end, 10) : 0;
	*pos = *pos && end != *pos ? end : NULL;
	return *pos ? pid : 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

/* ---- discovery --------------------------------------------------------------------------- */

/* The directory of cgroup `path` under a mount of its hierarchy whose root is `root` (not "/"
 * for bind-mounted subtrees). Fails when the cgroup is outside what the mount shows. */
static int mount_path(char *out, const char *mnt, const char *root, const char *path)
{
	size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
	if (strncmp(path, root, rl) != 0 || (path[rl] != '/' && path[rl] != '\0'))
		return -ENOENT;
	const char *rest = strcmp(path + rl, "/") == 0 ? "" : path + rl;
	int n = snprintf(out, PATH_MAX, "%s%s", mnt, rest);
	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/* /proc/self/cgroup lines are "id:controllers:path"; v2 is "0::path". */
static int read_own_cgroups(char *v2path, char (*v1path)[PATH_MAX])
{
	autofree char *text = slurp("/proc/self/cgroup");
	if (!text)
		return -errno;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *ctls = strchr(line, ':');
		char *path = ctls ? strchr(ctls + 1, ':') : NULL;
		if (!path || strlen(path + 1) >= PATH_MAX)
			continue;
		/* "/.." prefixes a cgroup outside our cgroup namespace: not ours to manage. */
		if (strncmp(path + 1, "/..", 3) == 0 && (path[4] == '/' || path[4] == '\0'))
			continue;
		*path++ = '\0';
		*ctls++ = '\0';
		if (*ctls == '\0' && strcmp(line, "0") == 0)
			strcpy(v2path, path);
		for (int c = 0; c < CTL_N; c++)
			if (list_has(ctls, ctl_names[c], ','))
				strcpy(v1path[c], path);
	}
	return 0;
}

/* ---- the cgroup mounts ------------------------------------------------------------------ */

/* Drop all but the cgroup and cgroup2 mounts of a mountinfo text, in place. */
static void keep_cgroup_lines(char *text)
{
	char *w = text;
	for (char *line = text; *line;) {
		char *end = strchrnul(line, '\n');
		size_t len = (size_t)(end - line) + (*end ? 1 : 0);
		const char *sep = memmem(line, (size_t)(end - line), " - ", 3);
		if (sep && (!strncmp(sep + 3, "cgroup ", 7) || !strncmp(sep + 3, "cgroup2 ", 8))) {
			memmove(w, line, len);
			w += len;
		}
		line += len;
	}
	*w = '\0';
}

/* The layout comes from the cgroup and cgroup2 lines of mountinfo. The kernel formats the
 * whole table for every read (each mount of the namespace: 24 on the 2-core machine,
 * hundreds on a host with containers or snaps), and a server makes a cgroup per call: its
 * launches pass their host cache (hc), which keeps the table until the mount table changes
 * (hc_mountinfo). Without one (NULL: the CLI, a library caller), it is read each time. */
static int find_layout(struct cg_layout *l, struct hcache *hc)
{
	char v2path[PATH_MAX] = "", v1path[CTL_N][PATH_MAX] = {{0}};
	int rc = read_own_cgroups(v2path, v1path);
	if (rc < 0)
		return rc;
	autofree char *text = hc_mountinfo(hc);
	if (!text)
		return -errno;
	keep_cgroup_lines(text);
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		/* id parent maj:min root mountpoint options [optional...] - fstype source super */
		char *f[5] = {0}, *sep = strstr(line, " - "), *fs_save = NULL;
		if (!sep)
			continue;
		*sep = '\0';
		char *fstype = strtok_r(sep + 3, " ", &fs_save);
		strtok_r(NULL, " ", &fs_save);
		char *super = strtok_r(NULL, " ", &fs_save);
		char *tok_save = NULL;
		int i = 0;
		for (char *t = strtok_r(line, " ", &tok_save); t && i < 5;
		     t = strtok_r(NULL, " ", &tok_save))
			f[i++] = t;
		if (i < 5 || !fstype || !super)
			continue;
		mountinfo_unescape(f[3]);
		mountinfo_unescape(f[4]);
		if (strcmp(fstype, "cgroup2") == 0 && v2path[0] && !l->v2[0])
			if (mount_path(l->v2, f[4], f[3], v2path) < 0)
				l->v2[0] = '\0';
		if (strcmp(fstype, "cgroup2") == 0 && !strcmp(f[3], "/") && !l->v2root[0] &&
		    strlen(f[4]) < PATH_MAX)
			strcpy(l->v2root, f[4]);
		for (int c = 0; strcmp(fstype, "cgroup") == 0 && c < CTL_N; c++)
			if (v1path[c][0] && !l->v1[c][0] && list_has(super, ctl_names[c], ','))
				if (mount_path(l->v1[c], f[4], f[3], v1path[c]) < 0)
					l->v1[c][0] = '\0';
	}
	/* After an earlier run moved us into the corral.sup leaf, the base is its parent. */
	char *slash = strrchr(l->v2, '/');
	if (slash && strcmp(slash, "/corral.sup") == 0)
		*slash = '\0';
	return 0;
}

static int writable(const char *dir, const char *file)
{
	char path[PATH_MAX];
	if (join(path, dir, file) < 0)
		return -ENAMETOOLONG;
	return faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0 ? 0 : -errno;
}

/* Would enabling controllers in base trip the no-internal-process rule? Only when they are
 * not on yet, base is not the root (exempt; the only cgroup without cgroup.type), and some
 * process besides us lives there (we alone can move to a leaf). */
static int shared_v2_base(const char *base)
{
	autofree char *cur = read_at(base, "cgroup.subtree_control");
	if ((cur && list_has(cur, "memory", ' ') && list_has(cur, "pids", ' ')) ||
	    writable(base, "cgroup.type") == -ENOENT)
		return 0;
	autofree char *procs = read_at(base, "cgroup.procs");
	char *pos = procs;
	for (long pid; (pid = next_pid(&pos)) > 0;)
		if (pid != getpid())
			return 1;
	return 0;
}

/* Can we build runs in our v2 cgroup? 1 yes; 0 no with the reason in why. */
static int v2_usable(const struct cg_layout *l, char *why, size_t len)
{
	if (!l->v2[0]) {
		snprintf(why, len, "v2: no cgroup2 mount shows our cgroup");
		return 0;
	}
	autofree char *ctls = read_at(l->v2, "cgroup.controllers");
	if (!ctls || !list_has(ctls, "memory", ' ') || !list_has(ctls, "pids", ' ')) {
		if (ctls)
			ctls[strcspn(ctls, "\n")] = '\0';
		snprintf(why, len, "v2: %s lacks the memory and pids controllers (has: %s)", l->v2,
		         ctls && *ctls ? ctls : "none");
		return 0;
	}
	int rc = writable(l->v2, "cgroup.subtree_control");
	if (rc == 0)
		rc = writable(l->v2, "cgroup.procs");
	if (rc < 0) {
		snprintf(why, len, "v2: %s not writable: %s (%s)", l->v2, strerror(-rc),
		         DELEGATE_HINT);
		return 0;
	}
	if (shared_v2_base(l->v2)) {
		snprintf(why, len,
		         "v2: %s holds other processes, so controllers can't be enabled below it "
		         "(no-internal-process rule); " OWN_SCOPE_HINT,
		         l->v2);
		return 0;
	}
	snprintf(why, len, "v2 memory,pids%s", list_has(ctls, "cpu", ' ') ? " (+cpu)" : "");
	return 1;
}

static int v1_usable(const struct cg_layout *l, char *why, size_t len)
{
	for (int c = CTL_MEMORY; c <= CTL_PIDS; c++) {
		if (!l->v1[c][0]) {
			snprintf(why, len, "v1: the %s controller is not mounted", ctl_names[c]);
			return 0;
		}
		int rc = writable(l->v1[c], ".");
		if (rc < 0) {
			snprintf(why, len, "v1: %s not writable: %s (%s)", l->v1[c], strerror(-rc),
			         DELEGATE_HINT);
			return 0;
		}
	}
	const char *extra = l->v1[CTL_FREEZER][0] && l->v1[CTL_CPU][0] ? " (+freezer,cpu)"
	                    : l->v1[CTL_FREEZER][0]                    ? " (+freezer)"
	                    : l->v1[CTL_CPU][0]                        ? " (+cpu)"
	                                                               : "";
	snprintf(why, len, "v1 memory,pids%s", extra);
	return 1;
}

/* Decide which version to use; 0 when neither, with both reasons in detail. */
static int choose(struct cg_layout *l, struct hcache *hc, char *detail, size_t len)
{
	char why2[PATH_MAX + 256], why1[PATH_MAX + 256];
	int rc = find_layout(l, hc);
	if (rc < 0) {
		snprintf(detail, len, "none: cannot read /proc/self/cgroup or mountinfo: %s",
		         strerror(-rc));
		return 0;
	}
	if (v2_usable(l, why2, sizeof(why2))) {
		snprintf(detail, len, "%s", why2);
		return 2;
	}
	/* Root whose own cgroup is shared (a login session or a service's scope, the usual case
	 * on a v2 host) makes its own subtree under the hierarchy's root, which the
	 * no-internal-process rule exempts. Without it root would get no process limit at all:
	 * the kernel exempts uid 0 from RLIMIT_NPROC. */
	if (geteuid() == 0 && l->v2[0] && l->v2root[0] && strcmp(l->v2root, l->v2) != 0) {
		struct cg_layout *r = malloc(sizeof(*r));
		char whyr[PATH_MAX + 256];
		if (r) {
			*r = *l;
			strcpy(r->v2, r->v2root);
			if (v2_usable(r, whyr, sizeof(whyr))) {
				strcpy(l->v2, l->v2root);
				snprintf(detail, len, "%s (root's own subtree under %s)", whyr, l->v2root);
				free(r);
				return 2;
			}
			free(r);
		}
	}
	if (v1_usable(l, why1, sizeof(why1))) {
		snprintf(detail, len, "%s", why1);
		return 1;
	}
	snprintf(detail, len, "none: %s; %s", why2, why1);
	return 0;
}

int cgroup_probe(char *detail, size_t len, bool *cpu)
{
	if (cpu)
		*cpu = false;
	autofree struct cg_layout *l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(detail, len, "none: out of memory");
		return 0;
	}
	int v = choose(l, NULL, detail, len);
	if (cpu && v == 2) {
		autofree char *ctls = read_at(l->v2, "cgroup.controllers");
		*cpu = ctls && list_has(ctls, "cpu", ' ');
	} else if (cpu && v == 1) {
		*cpu = l->v1[CTL_CPU][0] && writable(l->v1[CTL_CPU], ".") == 0;
	}
	return v;
}

/* ---- creation ---------------------------------------------------------------------------- */

static int fail(struct corral_error *err, int e, const char *what, const char *path,
                const char *fix)
{
	int code = e == EACCES || e == EPERM || e == EROFS ? CORRAL_EUNAVAIL : CORRAL_ESYS;
	return corral_set_error(err, code, e, "cgroup", "cgroup: %s %s: %s; %s", what, path,
	                        strerror(e), fix);
}

/* mkdir base/corral/name. enable (v2) is written to the parent's subtree_control first. A
 * concurrent destroy may remove an empty parent between our steps, so ENOENT retries. */
/* Run directories whose supervisor died by SIGKILL stay behind, empty (nothing else can
 * remove them). When the shared parent holds more than a handful of children, remove the
 * empty ones whose supervisor (the pid in the name) is gone: rmdir refuses a populated one,
 * so a live run elsewhere is never touched. kernfs counts subdirectories in st_nlink, so
 * the check costs one stat.
 *
 * The pid answers for this pid namespace only, and the parent can be shared with corral
 * instances in other ones (root's host-wide corral/, a delegated subtree shared with
 * containers): their runs look gone from here. A run directory is empty between its mkdir
 * and the attach (or CLONE_INTO_CGROUP), and again between the run's end and the read of
 * its OOM and pids events; removing it then would fail the run or lose that evidence. So
 * only directories made (mtime) more than STALE_MIN_AGE_S ago are swept: a run that has
 * just made its directory is never touched. The end of a run longer than that, in another
 * pid namespace, is the window left (its OOM and pids evidence, not its limits). */
#define STALE_SWEEP_AT 16
#define STALE_MIN_AGE_S 300
static void sweep_stale(const char *parent)
{
	struct stat st;
	if (stat(parent, &st) < 0 || st.st_nlink < 2 + STALE_SWEEP_AT)
		return;
	DIR *d = opendir(parent);
	if (!d)
		return;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	for (struct dirent *e; (e = readdir(d));) {
		int pid = 0;
		unsigned n = 0;
		char tail;
		if (sscanf(e->d_name, "corral-%d-%u%c", &pid, &n, &tail) != 2 || pid <= 0 ||
		    pid == getpid())
			continue;
		if (kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		struct stat ds;
		if (fstatat(dirfd(d), e->d_name, &ds, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(ds.st_mode) || ds.st_mtime > now.tv_sec - STALE_MIN_AGE_S)
			continue;
		char dir[PATH_MAX];
		if (join(dir, parent, e->d_name) == 0)
			rmdir(dir);
	}
	closedir(d);
}

static int make_run_dir(const char *base, const char *name, const char *enable, char **out,
                        struct corral_error *err)
{
	char parent[PATH_MAX], dir[PATH_MAX];
	if (join(parent, base, "corral") < 0 || join(dir, parent, name) < 0)
		return fail(err, ENAMETOOLONG, "create", base, "use a shorter cgroup path");
	for (int tries = 0;; tries++) {
		if (mkdir(parent, 0755) < 0 && errno != EEXIST)
			return fail(err, errno, "create", parent, DELEGATE_HINT);
		int rc = enable ? write_at(parent, "cgroup.subtree_control", enable) : 0;
		if (rc == -ENOENT && tries < 5)
			continue;
		if (rc < 0)
			return fail(err, -rc, "enable controllers in", parent,
			            "check cgroup.controllers of its parent");
		if (tries == 0)
			sweep_stale(parent);
		if (mkdir(dir, 0755) == 0)
			break;
		/* EEXIST: left by a crashed supervisor that had our pid; rmdir works if empty. */
		int e = errno;
		if ((e == ENOENT || (e == EEXIST && rmdir(dir) == 0)) && tries < 5)
			continue;
		return fail(err, e, "create", dir, DELEGATE_HINT);
	}
	*out = strdup(dir);
	return *out ? 0 : corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "cgroup", "out of memory");
}

/* Make memory/pids(/cpu) available to base's children, evacuating ourselves into a leaf when
 * base holds processes (see the top of the file). */
static int v2_enable_base(const char *base, const char *want, struct corral_error *err)
{
	autofree char *cur = read_at(base, "cgroup.subtree_control");
	if (cur && list_has(cur, "memory", ' ') && list_has(cur, "pids", ' ') &&
	    (!strstr(want, "cpu") || list_has(cur, "cpu", ' ')))
		return 0;
	int rc = write_at(base, "cgroup.subtree_control", want);
	if (rc != -EBUSY)
		return rc == 0 ? 0 : fail(err, -rc, "enable controllers in", base, DELEGATE_HINT);
	char sup[PATH_MAX];
	if (join(sup, base, "corral.sup") < 0)
		return fail(err, ENAMETOOLONG, "create", base, "use a shorter cgroup path");
	if (mkdir(sup, 0755) < 0 && errno != EEXIST)
		return fail(err, errno, "create", sup, DELEGATE_HINT);
	rc = write_at(sup, "cgroup.procs", "0");
	if (rc < 0)
		return fail(err, -rc, "move the supervisor into", sup, DELEGATE_HINT);
	rc = write_at(base, "cgroup.subtree_control", want);
	if (rc == 0)
		return 0;
	/* Other processes share base: go back so the host is left as we found it. */
	write_at(base, "cgroup.procs", "0");
	rmdir(sup);
	return corral_set_error(err, CORRAL_EUNAVAIL, -rc, "cgroup",
	                        "cgroup: enable controllers in %s: %s; it holds other processes "
	                        "(no-internal-process rule), so " OWN_SCOPE_HINT,
	                        base, strerror(-rc));
}

/* Write one limit file; optional files (absent on older kernels or without swap
 * accounting) may be missing. */
__attribute__((format(printf, 5, 6))) static int set_limit(struct corral_error *err, int optional,
                                                           const char *dir, const char *file,
                                                           const char *fmt, ...)
{
	char val[64], path[PATH_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(val, sizeof(val), fmt, ap);
	va_end(ap);
	int rc = write_at(dir, file, val);
	if (rc == 0 || (optional && rc == -ENOENT))
		return 0;
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	return fail(err, -rc, "set", path, "check the limit value and the parent's limits");
}

static uint64_t cpu_quota_us(uint64_t pct)
{
	/* 100 % = one CPU = the whole 100 ms period; saturate so the kernel rejects nonsense. */
	return pct > UINT64_MAX / 1000 ? UINT64_MAX : pct * 1000;
}

static int v2_prepare(struct cgroup_handle *cg, const char *base, const char *name,
                      const struct cgroup_limits *lim, struct corral_error *err)
{
	const char *want = lim->cpu_pct ? "+memory +pids +cpu" : "+memory +pids";
	autofree char *ctls = read_at(base, "cgroup.controllers");
	if (lim->cpu_pct && !(ctls && list_has(ctls, "cpu", ' ')))
		return corral_set_error(err, CORRAL_EUNAVAIL, 0, "cgroup",
		                        "cgroup: no cpu controller in %s; delegate it (systemd: "
		                        "Delegate=cpu memory pids) or drop the CPU limit",
		                        base);
	int rc = v2_enable_base(base, want, err);
	if (rc == 0)
		rc = make_run_dir(base, name, want, &cg->dir[0], err);
	if (rc < 0)
		return rc;
	const char *d = cg->dir[0];
	/* Swap off, so the memory limit can't be stretched by swapping. */
	if (lim->memory_bytes &&
	    ((rc = set_limit(err, 0, d, "memory.max", "%" PRIu64, lim->memory_bytes)) < 0 ||
	     (rc = set_limit(err, 1, d, "memory.swap.max", "0")) < 0))
		return rc;
	/* On OOM kill the whole sandbox rather than leave a half-dead process tree. */
	if ((rc = set_limit(err, 1, d, "memory.oom.group", "1")) < 0)
		return rc;
	if (lim->pids && (rc = set_limit(err, 0, d, "pids.max", "%" PRIu64, lim->pids)) < 0)
		return rc;
	if (lim->cpu_pct && (rc = set_limit(err, 0, d, "cpu.max", "%" PRIu64 " 100000",
	                                    cpu_quota_us(lim->cpu_pct))) < 0)
		return rc;
	cg->fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg->fd < 0)
		return fail(err, errno, "open", d, "check that the cgroup still exists");
	snprintf(cg->desc, sizeof(cg->desc), "v2 memory,pids%s", lim->cpu_pct ? ",cpu" : "");
	return 0;
}

static int v1_prepare(struct cgroup_handle *cg, const struct cg_layout *l, const char *name,
                      const struct cgroup_limits *lim, struct corral_error *err)
{
	int rc;
	if (lim->cpu_pct && !l->v1[CTL_CPU][0])
		return corral_set_error(err, CORRAL_EUNAVAIL, 0, "cgroup",
		                        "cgroup: the v1 cpu controller is not mounted; mount it or "
		                        "drop the CPU limit");
	strcpy(cg->desc, "v1");
	/* Only the hierarchies a limit needs: each v1 directory costs a mkdir, a migration and
	 * an rmdir per run, and a memory cgroup also its own memcg. The freezer only serves the
	 * tree kill without a pid namespace (with one, the init's death ends everything). */
	const bool want[CTL_N] = {[CTL_MEMORY] = lim->memory_bytes != 0,
	                          [CTL_PIDS] = lim->pids != 0,
	                          [CTL_FREEZER] = lim->tree_kill,
	                          [CTL_CPU] = lim->cpu_pct != 0};
	for (int c = 0; c < CTL_N; c++) {
		if (!l->v1[c][0] || !want[c])
			continue;
		if ((rc = make_run_dir(l->v1[c], name, NULL, &cg->dir[c], err)) < 0)
			return rc;
		strcat(cg->desc, strlen(cg->desc) == 2 ? " " : ",");
		strcat(cg->desc, ctl_names[c]);
	}
	const char *mem = cg->dir[CTL_MEMORY], *cpu = cg->dir[CTL_CPU];
	/* memsw (memory + swap) must stay >= limit_in_bytes, so it is set second. */
	if (lim->memory_bytes && ((rc = set_limit(err, 0, mem, "memory.limit_in_bytes", "%" PRIu64,
	                                          lim->memory_bytes)) < 0 ||
	                          (rc = set_limit(err, 1, mem, "memory.memsw.limit_in_bytes",
	                                          "%" PRIu64, lim->memory_bytes)) < 0))
		return rc;
	if (lim->pids &&
	    (rc = set_limit(err, 0, cg->dir[CTL_PIDS], "pids.max", "%" PRIu64, lim->pids)) < 0)
		return rc;
	if (lim->cpu_pct && ((rc = set_limit(err, 0, cpu, "cpu.cfs_period_us", "100000")) < 0 ||
	                     (rc = set_limit(err, 0, cpu, "cpu.cfs_quota_us", "%" PRIu64,
	                                     cpu_quota_us(lim->cpu_pct))) < 0))
		return rc;
	return 0;
}

int cgroup_prepare(const struct cgroup_limits *lim, struct hcache *hc, struct cgroup_handle **out,
                   struct corral_error *err)
{
	static const struct cgroup_limits none = {0};
	char detail[700], name[64];
	*out = NULL;
	lim = lim ? lim : &none;
	autofree struct cg_layout *l = calloc(1, sizeof(*l));
	struct cgroup_handle *cg = calloc(1, sizeof(*cg));
	if (!l || !cg) {
		free(cg);
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "cgroup", "out of memory");
	}
	cg->fd = -1;
	cg->version = choose(l, hc, detail, sizeof(detail));
	if (cg->version == 0) {
		free(cg);
		return corral_set_error(
		    err, CORRAL_EUNAVAIL, 0, "cgroup",
		    "cgroup: no usable cgroup (%s); memory and process limits fall back to rlimits",
		    strncmp(detail, "none: ", 6) == 0 ? detail + 6 : detail);
	}
	snprintf(name, sizeof(name), "corral-%d-%u", (int)getpid(),
	         __atomic_fetch_add(&run_counter, 1, __ATOMIC_RELAXED));
	int rc = cg->version == 2 ? v2_prepare(cg, l->v2, name, lim, err)
	                          : v1_prepare(cg, l, name, lim, err);
	if (rc < 0) {
		cgroup_destroy(cg); /* removes whatever was created */
		return rc;
	}
	*out = cg;
	return 0;
}

/* ---- use --------------------------------------------------------------------------------- */

int cgroup_clone_fd(const struct cgroup_handle *cg)
{
	return cg ? cg->fd : -1;
}

size_t cgroup_join_paths(const struct cgroup_handle *cg, char **out, size_t max)
{
	/* v1: the hierarchy's `tasks` file, not `cgroup.procs`. The child writes "0" while it
	 * has one thread, so both move the same whole process, but a write to cgroup.procs
	 * write-locks the kernel's threadgroup rwsem first, and taking that lock waits for an
	 * RCU grace period whenever no migration happened lately: 10-15 ms on an idle machine,
	 * every spaced one-shot run paid it as root. Moving one thread that is the writer
	 * itself skips that lock. v2 has no such file outside threaded subtrees (and joins by
	 * CLONE_INTO_CGROUP where the kernel has it). */
	const char *file = cg && cg->version == 2 ? "/cgroup.procs" : "/tasks";
	size_t n = 0;
	for (int c = 0; cg && c < CTL_N; c++) {
		if (!cg->dir[c])
			continue;
		char *p = n < max ? malloc(strlen(cg->dir[c]) + strlen(file) + 1) : NULL;
		if (!p) {
			while (n)
				free(out[--n]);
			return (size_t)-1;
		}
		strcpy(p, cg->dir[c]);
		strcat(p, file);
		out[n++] = p;
	}
	return n;
}

/* The directory holding ctl's files: per hierarchy on v1, the one directory on v2. */
static const char *ctl_dir(const struct cgroup_handle *cg, enum cg_ctl c)
{
	return cg->version == 2 ? cg->dir[0] : cg->dir[c];
}

int cgroup_oom_killed(struct cgroup_handle *cg)
{
	if (!cg)
		return 0;
	const char *d = ctl_dir(cg, CTL_MEMORY);
	if (cg->version == 2)
		return key_value_at(d, "memory.events", "oom_kill") > 0 ||
		       key_value_at(d, "memory.events", "oom_group_kill") > 0;
	/* oom_kill counts real kills (4.13+); failcnt only counts reclaim attempts at the limit. */
	return key_value_at(d, "memory.oom_control", "oom_kill") > 0;
}

uint64_t cgroup_oom_count(struct cgroup_handle *cg)
{
	if (!cg)
		return 0;
	const char *d = ctl_dir(cg, CTL_MEMORY);
	if (cg->version == 2)
		return key_value_at(d, "memory.events", "oom_kill") +
		       key_value_at(d, "memory.events", "oom_group_kill");
	return key_value_at(d, "memory.oom_control", "oom_kill");
}

int cgroup_pids_hit(struct cgroup_handle *cg)
{
	const char *d = cg ? ctl_dir(cg, CTL_PIDS) : NULL;
	/* "max" counts forks refused in this cgroup (v1, and v2 before 6.13 or with
	 * pids_localevents) whichever cgroup's limit refused them: a parent's budget running
	 * out (the server's, the host's) counts here too. The peak tells them apart: only a
	 * peak at our own pids.max means our limit was the one reached. */
	if (!d || key_value_at(d, "pids.events", "max") == 0)
		return 0;
	autofree char *max = read_at(d, "pids.max");
	autofree char *peak = read_at(d, "pids.peak");
	/* no limit of our own (--pids 0 with a memory limit): only a parent's can have refused */
	if (max && !strncmp(max, "max", 3))
		return 2;
	if (!max || !peak) /* older kernels lack pids.peak: which limit refused is unknown */
		return 3;
	return strtoull(peak, NULL, 10) >= strtoull(max, NULL, 10) ? 1 : 2;
}

uint64_t cgroup_peak_kb(struct cgroup_handle *cg)
{
	if (!cg)
		return 0;
	const char *d = ctl_dir(cg, CTL_MEMORY);
	if (!d)
		return 0;
	autofree char *text =
	    read_at(d,
	            cg->version == 2 ? "memory.peak" : "memory.max_usage_in_bytes");
	return text ? strtoull(text, NULL, 10) / 1024 : 0;
}

int cgroup_count_procs(struct cgroup_handle *cg)
{
	int most = 0;
	for (int c = 0; cg && c < CTL_N; c++) {
		if (!cg->dir[c])
			continue;
		autofree char *text = read_at(cg->dir[c], "cgroup.procs");
		if (!text && errno != ENOENT)
			return -errno;
		int n = 0;
		for (char *pos = text; next_pid(&pos) > 0;)
			n++;
		most = n > most ? n : most;
	}
	return most;
}

/* Freeze the cgroup so no process in it can fork or exit while we collect pids. Returns 1
 * when frozen (or stuck freezing; kill works either way), 0 when there is no freezer. */
static int freeze(struct cgroup_handle *cg, int on)
{
	const char *d = cg->version == 2 ? cg->dir[0] : cg->dir[CTL_FREEZER];
	const char *file = cg->version == 2 ? "cgroup.freeze" : "freezer.state";
	const char *val = cg->version == 2 ? (on ? "1" : "0") : (on ? "FROZEN" : "THAWED");
	if (!d || write_at(d, file, val) < 0)
		return 0;
	/* Freezing is asynchronous; wait (bounded: a task in D state may delay it). */
	for (int64_t end = (int64_t)mono_ms() + 100; on && (int64_t)mono_ms() < end; sleep_ms(1)) {
		if (cg->version == 2 && key_value_at(d, "cgroup.events", "frozen") == 1)
			break;
		autofree char *state = cg->version == 1 ? read_at(d, "freezer.state") : NULL;
		if (state && strncmp(state, "FROZEN", 6) == 0)
			break;
	}
	return 1;
}

/* SIGKILL every listed process. With the cgroup frozen the pids can't exit and be reused
 * under us; without a freezer that race is as small as with any pid-based kill. */
static int kill_listed(struct cgroup_handle *cg)
{
	int n = 0;
	for (int c = 0; c < CTL_N; c++) {
		autofree char *text = cg->dir[c] ? read_at(cg->dir[c], "cgroup.procs") : NULL;
		char *pos = text;
		for (long pid; (pid = next_pid(&pos)) > 0;)
			n += pid != getpid() && kill((pid_t)pid, SIGKILL) == 0;
	}
	return n;
}

static int wait_empty(struct cgroup_handle *cg, int64_t until)
{
	while (cgroup_count_procs(cg) > 0) {
		if ((int64_t)mono_ms() >= until)
			return -EBUSY;
		sleep_ms(2);
	}
	return 0;
}

int cgroup_kill_all(struct cgroup_handle *cg)
{
	if (!cg)
		return 0;
	int64_t deadline = (int64_t)mono_ms() + KILL_TIMEOUT_MS;
	/* cgroup.kill (5.14+) kills the whole tree atomically, forks in flight included. */
	if (cg->version == 2 && write_at(cg->dir[0], "cgroup.kill", "1") == 0)
		return wait_empty(cg, deadline);
	/* Otherwise freeze, kill, thaw: frozen processes can't fork (a double-forking daemon
	 * can't outrun us) and die on thaw. Repeat for anything that slipped in meanwhile. */
	while (cgroup_count_procs(cg) > 0) {
		if ((int64_t)mono_ms() >= deadline)
			return -EBUSY;
		int frozen = freeze(cg, 1);
		kill_listed(cg);
		if (frozen)
			freeze(cg, 0);
		int64_t settle = (int64_t)mono_ms() + 50;
		wait_empty(cg, settle < deadline ? settle : deadline);
	}
	return 0;
}

const char *cgroup_describe(const struct cgroup_handle *cg)
{
	return cg ? cg->desc : "none";
}

void cgroup_note(struct cgroup_handle *cg, const char *note)
{
	size_t n = strlen(cg->desc);
	snprintf(cg->desc + n, sizeof(cg->desc) - n, "%s", note);
}

/* rmdir fails with EBUSY for a moment after the last process has exited. */
static void remove_dir(const char *dir)
{
	int64_t end = (int64_t)mono_ms() + RMDIR_TIMEOUT_MS;
	while (rmdir(dir) < 0 && errno == EBUSY && (int64_t)mono_ms() < end)
		sleep_ms(5);
	/* The shared parent goes with its last run; busy or not empty means others use it. */
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", dir);
	char *slash = strrchr(parent, '/');
	if (slash) {
		*slash = '\0';
		rmdir(parent);
	}
}

void cgroup_destroy(struct cgroup_handle *cg)
{
	if (!cg)
		return;
	cgroup_kill_all(cg);
	for (int c = 0; c < CTL_N; c++) {
		if (cg->dir[c])
			remove_dir(cg->dir[c]);
		free(cg->dir[c]);
	}
	if (cg->fd >= 0)
		close(cg->fd);
	free(cg);
}
