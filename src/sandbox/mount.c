/* Mount namespace: the sandbox's root is a fresh tmpfs holding read-only binds of the system,
 * an allow-list of /etc, the workspace read-write, a private /tmp, a fresh /proc and a minimal
 * /dev. The parent builds the plan (mount_plan_build); the child carries it out
 * (mount_setup_child) with raw system calls only.
 *
 * Binds use the new mount API (open_tree + mount_setattr + move_mount, Linux >= 5.12) so that
 * read-only/nosuid/nodev apply recursively to submounts and locked flags need no restating.
 * Targets are resolved with openat2(RESOLVE_NO_SYMLINKS) below the new root, so a symlink
 * planted in the workspace cannot redirect a later mount (the CVE-2024-42472 class).
 */
#include "hcache.h"
#include "sandbox/sandbox.h"
#include "util.h"

#include <fcntl.h>
#include <stdbool.h>
#include <limits.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
#define MOUNT_ATTR_NOEXEC 0x00000008
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

/* The scratch directory where the new root is assembled. It lives in the sandbox's own mount
 * namespace, so covering it with a tmpfs changes nothing on the host. */
#define SCRATCH "/tmp"
#define NEWROOT "/newroot"
#define OLDROOT "/oldroot"

/* ---- parent: the plan ------------------------------------------------------------------- */

/* Files and directories of /etc that programs need; everything else (shadow, gshadow,
 * sudoers, ssh host keys, ssl/private, machine-id, ...) is simply never mounted. */
static const char *const etc_allow[] = {
	"passwd", "group", "hosts", "hostname", "resolv.conf", "nsswitch.conf", "host.conf",
	"gai.conf", "protocols", "services", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"localtime", "timezone", "ssl/certs", "ca-certificates", "ca-certificates.conf",
	"alternatives", "os-release", "debian_version", "bash.bashrc", "profile", "profile.d",
	"inputrc", "mime.types", "terminfo", "locale.alias", "python3", "python3.11", "shells",
};

static int plan_add(struct mount_plan *p, size_t *cap, enum mount_op_kind kind, const char *src,
                    const char *dst, int optional, unsigned ll, uint64_t size)
{
	if (p->n_ops == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		struct mount_op *grown = realloc(p->ops, ncap * sizeof(*grown));
		if (!grown)
			return -1;
		p->ops = grown;
		*cap = ncap;
	}
	struct mount_op *op = &p->ops[p->n_ops];
	memset(op, 0, sizeof(*op));
	op->kind = kind;
	op->src = src ? strdup(src) : NULL;
	op->dst = dst ? strdup(dst) : NULL;
	op->optional = optional;
	op->ll_access = ll;
	op->size = size;
	if ((src && !op->src) || (dst && !op->dst)) {
		free((char *)op->src);
		free((char *)op->dst);
		return -1;
	}
	p->n_ops++;
	return 0;
}

/* plan_add for a source the plan has just looked at: st (an lstat of src) is kept for the
 * plan key (launch.c), which hashes the identity of every source. */
static int plan_add_seen(struct mount_plan *p, size_t *cap, enum mount_op_kind kind,
                         const char *src, const char *dst, int optional, unsigned ll,
                         const struct stat *st)
{
	if (plan_add(p, cap, kind, src, dst, optional, ll, 0) < 0)
		return -1;
	struct mount_op *op = &p->ops[p->n_ops - 1];
	op->has_id = true;
	op->id_dev = st->st_dev;
	op->id_ino = st->st_ino;
	op->id_mode = st->st_mode;
	return 0;
}

/* Add a top-level system path: a directory is bound read-only; a symlink (merged /usr:
 * /bin -> usr/bin) is recreated as the same symlink. */
static int plan_system(struct mount_plan *p, size_t *cap, struct hcache *hc, const char *path)
{
	struct stat st;
	if (hc_lstat(hc, path, &st) < 0)
		return 0;
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = hc_readlink(hc, path, target, sizeof(target) - 1);
		if (n <= 0)
			return 0;
		target[n] = 0;
		return plan_add(p, cap, MOP_SYMLINK, target, path, 0, 0, 0);
	}
	if (S_ISDIR(st.st_mode))
		return plan_add_seen(p, cap, MOP_BIND_RO, path, path, 1, LL_READ | LL_EXEC, &st);
	return 0;
}

/* What the dynamic loader needs from /etc; nothing else for the "strict" profile. */
static const char *const etc_minimal[] = {"ld.so.cache", "ld.so.conf", "ld.so.conf.d"};

static int plan_etc_list(struct mount_plan *p, size_t *cap, struct hcache *hc,
                         const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char path[PATH_MAX];
		struct stat st;
		snprintf(path, sizeof(path), "/etc/%s", names[i]);
		if (hc_lstat(hc, path, &st) < 0)
			continue;
		const char *src = path;
		char *real = NULL;
		if (S_ISLNK(st.st_mode)) {
			/* resolv.conf and localtime are often symlinks into /run or /usr: bind what
			 * they point to, at the /etc name, so no host path outside the plan has to
			 * exist in the sandbox. */
			real = hc_realpath(hc, path);
			if (!real || hc_stat(hc, real, &st) < 0) {
				free(real);
				continue;
			}
			src = real;
		}
		/* st is what an lstat of src gives: src is the path lstat'ed above, or a realpath
		 * (no symlink in it), where stat and lstat agree */
		int r = plan_add_seen(p, cap, S_ISDIR(st.st_mode) ? MOP_BIND_RO : MOP_FILE_RO, src,
		                      path, 1, LL_READ, &st);
		free(real);
		if (r < 0)
			return -1;
	}
	return 0;
}

struct tree {
	const char *path;
	int kind; /* 0: extra read-only, 1: extra read-write, 2: pin */
};

static int cmp_tree(const void *a, const void *b)
{
	const struct tree *x = a, *y = b;
	size_t la = strlen(x->path), lb = strlen(y->path);
	return la != lb ? (la < lb ? -1 : 1) : x->kind - y->kind;
}

/* The extra read and write trees and the pins, shallowest first so a deeper bind lands on
 * top of the shallower one that contains it. Write wins over read for the very same path.
 *
 * The pins (the directories on the way to a protected path, bound read-write over
 * themselves) are sorted in with the extra trees. Every bind clones the host's tree, which
 * holds no pin: a write tree over a pinned directory (`--rw .`, a filesystem.write entry
 * that contains the workspace or a submodule checkout) bound after the pins would hide them.
 * (The rename of .git would then still fail, but only because the kernel refuses to rename
 * a dentry that is a mount point anywhere in the namespace, hidden or not; the pins are not
 * to depend on that.) A pin inside a read-only tree is left out: that
 * tree is read-only already (and a read-write pin over it would undo that), and a pin at
 * the very path of an extra tree is that tree's own mount point. */
static int plan_extra(struct mount_plan *p, size_t *cap, const struct mount_request *req)
{
	size_t n = req->n_read + req->n_write + req->n_pin, m = 0;
	if (!n)
		return 0;
	struct tree *all = calloc(n, sizeof(*all));
	if (!all)
		return -1;
	for (size_t i = 0; i < req->n_read + req->n_write; i++) {
		const char *t = i < req->n_read ? req->read[i] : req->write[i - req->n_read];
		int kind = i >= req->n_read;
		size_t k = 0;
		while (k < m && strcmp(all[k].path, t))
			k++;
		if (k < m) {
			all[k].kind |= kind; /* write wins over read */
			continue;
		}
		all[m++] = (struct tree){t, kind};
	}
	size_t extras = m;
	for (size_t i = 0; i < req->n_pin; i++) {
		const struct tree *deepest = NULL;
		for (size_t k = 0; k < extras; k++)
			if (path_within(req->pin[i], all[k].path) &&
			    (!deepest || strlen(all[k].path) > strlen(deepest->path)))
				deepest = &all[k];
		if (deepest && (deepest->kind == 0 || !strcmp(deepest->path, req->pin[i])))
			continue;
		all[m++] = (struct tree){req->pin[i], 2};
	}
	qsort(all, m, sizeof(*all), cmp_tree);
	int r = 0;
	for (size_t i = 0; i < m && r == 0; i++) {
		if (all[i].kind == 2)
			r = plan_add(p, cap, MOP_BIND_RW, all[i].path, all[i].path, 1, 0, 0);
		else
			r = plan_add(p, cap, all[i].kind ? MOP_BIND_RW : MOP_BIND_RO, all[i].path,
			             all[i].path, 0,
			             all[i].kind ? LL_READ | LL_WRITE | LL_EXEC : LL_READ | LL_EXEC, 0);
		if (r == 0)
			p->ops[p->n_ops - 1].no_symlinks = 1;
	}
	free(all);
	return r;
}

int mount_plan_build(struct mount_plan *plan, const struct mount_request *req,
                     struct corral_error *err)
{
	size_t cap = 0;
	memset(plan, 0, sizeof(*plan));
	uint64_t tmpfs_size = req->tmpfs_size;
	static const char *const system[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32",
	                                     "/lib64", "/libx32"};
	for (size_t i = 0; i < ARRAY_SIZE(system); i++)
		if (plan_system(plan, &cap, req->hc, system[i]) < 0)
			goto oom;
	if (req->etc_minimal
	        ? plan_etc_list(plan, &cap, req->hc, etc_minimal, ARRAY_SIZE(etc_minimal))
	        : plan_etc_list(plan, &cap, req->hc, etc_allow, ARRAY_SIZE(etc_allow)) < 0)
		goto oom;
	if (plan_add(plan, &cap, MOP_TMPFS, NULL, "/dev", 0, 0, 1u << 20) < 0)
		goto oom;
	static const char *const devs[] = {"null", "zero", "full", "random", "urandom", "tty"};
	for (size_t i = 0; i < ARRAY_SIZE(devs); i++) {
		char d[32];
		snprintf(d, sizeof(d), "/dev/%s", devs[i]);
		if (plan_add(plan, &cap, MOP_BIND_DEV, d, d, 1, LL_READ | LL_WRITE | LL_DEV, 0) < 0)
			goto oom;
	}
	if (plan_add(plan, &cap, MOP_DEVPTS, NULL, "/dev/pts", 0, LL_READ | LL_WRITE | LL_DEV,
	             0) < 0 ||
	    plan_add(plan, &cap, MOP_TMPFS, NULL, "/dev/shm", 0, LL_READ | LL_WRITE,
	             tmpfs_size) < 0 ||
	    plan_add(plan, &cap, MOP_SYMLINK, "/proc/self/fd", "/dev/fd", 0, 0, 0) < 0 ||
	    plan_add(plan, &cap, MOP_SYMLINK, "/proc/self/fd/0", "/dev/stdin", 0, 0, 0) < 0 ||
	    plan_add(plan, &cap, MOP_SYMLINK, "/proc/self/fd/1", "/dev/stdout", 0, 0, 0) < 0 ||
	    plan_add(plan, &cap, MOP_SYMLINK, "/proc/self/fd/2", "/dev/stderr", 0, 0, 0) < 0)
		goto oom;
	/* The system tree so far is the same for every run of a host: a template holder can
	 * build it once (tpl). Not devpts and /dev/shm: each sandbox has its own. */
	for (size_t i = 0; i < plan->n_ops; i++)
		plan->ops[i].tpl =
		    plan->ops[i].kind != MOP_DEVPTS &&
		    !(plan->ops[i].kind == MOP_TMPFS && !strcmp(plan->ops[i].dst, "/dev/shm"));
	if (plan_add(plan, &cap, MOP_PROC, NULL, "/proc", 0, LL_READ, 0) < 0)
		goto oom;
	/* Kernel knobs that are not namespaced stay read-only even for a sandbox running as
	 * uid 0 (a write to core_pattern or sysrq-trigger would reach the host). */
	static const char *const proc_ro[] = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq",
	                                      "/proc/bus", "/proc/fs", "/proc/acpi",
	                                      "/proc/scsi", "/proc/keys", "/proc/kcore"};
	for (size_t i = 0; i < ARRAY_SIZE(proc_ro); i++)
		if (plan_add(plan, &cap, MOP_RO_REMOUNT, NULL, proc_ro[i], 1, 0, 0) < 0)
			goto oom;
	if (plan_add(plan, &cap, MOP_TMPFS, NULL, "/tmp", 0, LL_READ | LL_WRITE | LL_EXEC,
	             tmpfs_size) < 0)
		goto oom;
	/* The workspace after the system: everything after it that lands inside it resolves
	 * without following the symlinks the sandbox may have planted there. */
	if (plan_add(plan, &cap, req->workspace_ro ? MOP_BIND_RO : MOP_BIND_RW, req->workspace,
	             req->workspace, 0,
	             req->workspace_ro ? LL_READ | LL_EXEC : LL_READ | LL_WRITE | LL_EXEC, 0) < 0)
		goto oom;
	plan->ops[plan->n_ops - 1].no_symlinks = 1;
	/* The extra trees, and the directories on the way to a protected path as mount points
	 * of their own (read-write, as in the workspace), so renaming or removing them fails with
	 * EBUSY: a renamed .git would carry the read-only mounts of its hooks and config away
	 * with it. */
	if (plan_extra(plan, &cap, req) < 0)
		goto oom;
	/* Protected paths: read-only over themselves. Landlock does not mirror these (it cannot
	 * take a right away beneath a tree that has it); the read-only mount is the layer. */
	plan->protect_op = plan->n_ops;
	for (size_t i = 0; i < req->n_protect; i++) {
		if (plan_add(plan, &cap, MOP_BIND_RO, req->protect[i], req->protect[i], 1, 0, 0) < 0)
			goto oom;
		plan->ops[plan->n_ops - 1].no_symlinks = 1;
	}
	/* Masks last: deny wins over every allow above. */
	for (size_t i = 0; i < req->n_deny; i++)
		if (plan_add(plan, &cap, MOP_MASK, req->deny[i], req->deny[i], 1, 0, 0) < 0)
			goto oom;
	plan->proc_fallback = req->proc_fallback;
	plan->cwd = strdup(req->cwd ? req->cwd : req->workspace);
	plan->buf1 = malloc(PATH_MAX);
	plan->buf2 = malloc(PATH_MAX);
	if (!plan->cwd || !plan->buf1 || !plan->buf2)
		goto oom;
	return 0;
oom:
	mount_plan_free(plan);
	return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "mount", "mount: out of memory");
}

void mount_plan_free(struct mount_plan *plan)
{
	for (size_t i = 0; i < plan->n_ops; i++) {
		free((char *)plan->ops[i].src);
		free((char *)plan->ops[i].dst);
	}
	free(plan->ops);
	free((char *)plan->cwd);
	free(plan->buf1);
	free(plan->buf2);
	memset(plan, 0, sizeof(*plan));
}

/* ---- child: carrying it out ------------------------------------------------------------- */

static size_t s_len(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

static int s_join(char *out, const char *a, const char *b)
{
	size_t la = s_len(a), lb = s_len(b);
	if (la + lb + 1 > PATH_MAX)
		return -ENAMETOOLONG;
	for (size_t i = 0; i < la; i++)
		out[i] = a[i];
	for (size_t i = 0; i <= lb; i++)
		out[la + i] = b[i];
	return 0;
}

static int sys_openat2(int dirfd, const char *path, int flags, uint64_t resolve)
{
	struct open_how how = {.flags = (uint64_t)flags, .mode = 0, .resolve = resolve};
	int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
	return fd < 0 ? -errno : fd;
}

static int sys_open_tree(int dirfd, const char *path, unsigned flags)
{
	int fd = (int)syscall(SYS_open_tree, dirfd, path, flags);
	return fd < 0 ? -errno : fd;
}

static int sys_move_mount(int from_dfd, const char *from, int to_dfd, const char *to,
                          unsigned flags)
{
	return syscall(SYS_move_mount, from_dfd, from, to_dfd, to, flags) < 0 ? -errno : 0;
}

static int sys_mount_setattr(int dfd, const char *path, unsigned flags, uint64_t set)
{
	struct mount_attr attr = {.attr_set = set};
	return syscall(SYS_mount_setattr, dfd, path, flags, &attr, sizeof(attr)) < 0 ? -errno : 0;
}

/* Whether a relative path has a "." or ".." component (the walk below treats those one by
 * one, a single lookup as a whole). */
static int has_dot_component(const char *p)
{
	for (;;) {
		if (p[0] == '.' && (p[1] == 0 || p[1] == '/' ||
		                    (p[1] == '.' && (p[2] == 0 || p[2] == '/'))))
			return 1;
		while (*p && *p != '/')
			p++;
		while (*p == '/')
			p++;
		if (!*p)
			return 0;
	}
}

/* The directory the last walk made a target in (an O_PATH fd below the new root, and its
 * path relative to it): the next target in the same directory (/etc's files, /dev's
 * devices, one after the other in the plan) is made there without walking to it again. A
 * mount onto a directory could cover it or a directory above it, so every mount onto
 * anything but a file just made here drops it (tdir_drop), as does the end of a build. */
static struct {
	int fd, root;
	size_t len;
	char path[PATH_MAX];
} tdir = {.fd = -1};

static void tdir_drop(void)
{
	if (tdir.fd >= 0)
		close(tdir.fd);
	tdir.fd = -1;
}

/* Create the target (a directory, or an empty file when is_file) below rootfd, one component
 * at a time, never following a symlink, and return a descriptor of it: O_PATH, or for a file
 * it just made, the descriptor it was made with (*fresh set). */
static int make_target(int rootfd, const char *abs, int is_file, char *buf, bool *fresh)
{
	*fresh = false;
	const char *p = abs;
	while (*p == '/')
		p++;
	/* The parent's length, when the path is plain (no ".", "..", "//" or trailing slash):
	 * only such a parent is kept in tdir or looked up there. */
	size_t n = s_len(p), plen = 0;
	bool plain = n > 0 && p[n - 1] != '/' && !has_dot_component(p);
	for (size_t i = 0; plain && i < n; i++) {
		if (p[i] == '/' && p[i + 1] == '/')
			plain = false;
		else if (p[i] == '/')
			plen = i;
	}
	if (plain && plen > 0 && n - plen - 1 <= NAME_MAX && tdir.fd >= 0 && tdir.root == rootfd &&
	    tdir.len == plen && !memcmp(tdir.path, p, plen)) {
		const char *name = p + plen + 1;
		if (is_file) {
			int fd = openat(tdir.fd, name,
			                O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
			if (fd >= 0) {
				*fresh = true;
				return fd;
			}
			if (errno != EEXIST)
				return -errno;
		} else if (mkdirat(tdir.fd, name, 0755) < 0 && errno != EEXIST) {
			return -errno;
		}
		return sys_openat2(tdir.fd, name, O_PATH | O_CLOEXEC,
		                   RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH);
	}
	/* Most other targets exist already (in a tree bound by an earlier op, or made by one):
	 * then one lookup under the same rules finds what the walk would, without its two or
	 * three calls per component. An existing one is used as it is either way, whatever its
	 * type. */
	if (*p && !has_dot_component(p)) {
		int fd = sys_openat2(rootfd, p, O_PATH | O_CLOEXEC,
		                     RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH);
		if (fd >= 0)
			return fd;
	}
	const char *p0 = p;
	int dirfd = rootfd, r = -EINVAL;
	for (;;) {
		const char *end = p;
		while (*end && *end != '/')
			end++;
		size_t len = (size_t)(end - p);
		if (len == 0 || len >= NAME_MAX + 1) {
			r = len ? -ENAMETOOLONG : -EINVAL;
			break;
		}
		for (size_t i = 0; i < len; i++)
			buf[i] = p[i];
		buf[len] = 0;
		int last = *end == 0;
		if (last && is_file) {
			/* O_EXCL: an existing file (a proc entry) is used as is, never opened
			 * for writing */
			int fd = openat(dirfd, buf, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC,
			                0644);
			if (fd >= 0) {
				*fresh = true;
				r = fd;
			} else if (errno != EEXIST) {
				r = -errno;
				break;
			}
		} else if (mkdirat(dirfd, buf, 0755) < 0 && errno != EEXIST) {
			r = -errno;
			break;
		}
		if (!*fresh)
			r = sys_openat2(dirfd, buf, O_PATH | O_CLOEXEC,
			                RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			                    RESOLVE_BENEATH);
		if (last && r >= 0 && plain && dirfd != rootfd && (size_t)(p - 1 - p0) == plen &&
		    plen < sizeof(tdir.path)) {
			/* kept for the next target in this directory */
			tdir_drop();
			tdir.fd = dirfd;
			tdir.root = rootfd;
			tdir.len = plen;
			memcpy(tdir.path, p0, plen);
			return r;
		}
		if (dirfd != rootfd)
			close(dirfd);
		if (r < 0 || last)
			return r;
		dirfd = r;
		p = end;
		while (*p == '/')
			p++;
		if (!*p)
			return dirfd;
	}
	if (dirfd != rootfd)
		close(dirfd);
	return r;
}

/* Attach a clone of the tree at srcfd onto the target tfd, with attributes applied to every
 * submount of the clone before it becomes visible. Unless the target is a file just made,
 * the mount may cover a directory, and the kept one goes. */
static int attach_clone_at(int srcfd, int tfd, bool fresh, uint64_t attrs)
{
	int tree = sys_open_tree(srcfd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH |
	                                        AT_RECURSIVE);
	if (tree < 0)
		return tree;
	int r = sys_mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, attrs);
	if (r == 0) {
		if (!fresh)
			tdir_drop();
		r = sys_move_mount(tree, "", tfd, "",
		                   MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
	}
	close(tree);
	return r;
}

/* The same onto dst below rootfd, made first (a directory, or a file when is_file). */
static int attach_clone(int srcfd, int rootfd, const char *dst, int is_file, uint64_t attrs,
                        char *buf)
{
	bool fresh;
	int tfd = make_target(rootfd, dst, is_file, buf, &fresh);
	if (tfd < 0)
		return tfd;
	int r = attach_clone_at(srcfd, tfd, fresh, attrs);
	close(tfd);
	return r;
}

/* Set in a template holder (mount_template_child): a bind's source must be the file the
 * plan saw (its identity), or the build fails; the sandboxes that attach the template are
 * the ones whose plan saw that file. */
static bool verify_sources;

static int do_bind(const struct mount_op *op, int rootfd, const struct mount_plan *plan,
                   uint64_t attrs)
{
	int r = s_join(plan->buf2, OLDROOT, op->src);
	if (r < 0)
		return r;
	/* System paths are trusted host paths; user-given ones (the workspace) must not be
	 * swapped for a symlink between the parent's check and this open. */
	uint64_t resolve = op->no_symlinks ? RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS : 0;
	int src = sys_openat2(AT_FDCWD, plan->buf2, O_PATH | O_CLOEXEC, resolve);
	if (src < 0)
		return (src == -ENOENT && op->optional) ? 0 : src;
	struct stat st;
	if (fstat(src, &st) < 0) {
		r = -errno;
		close(src);
		return r;
	}
	if (verify_sources && (!op->has_id || st.st_dev != op->id_dev || st.st_ino != op->id_ino ||
	                       (st.st_mode & S_IFMT) != (op->id_mode & S_IFMT))) {
		close(src);
		return -ESTALE;
	}
	r = attach_clone(src, rootfd, op->dst, !S_ISDIR(st.st_mode), attrs, plan->buf1);
	close(src);
	return r;
}

static int do_fs(const struct mount_op *op, int rootfd, const char *fstype, unsigned long flags,
                 const char *data, char *buf, char *pathbuf)
{
	bool fresh;
	int tfd = make_target(rootfd, op->dst, 0, buf, &fresh);
	if (tfd < 0)
		return tfd;
	close(tfd);
	int r = s_join(pathbuf, NEWROOT, op->dst);
	if (r < 0)
		return r;
	tdir_drop(); /* a mount onto a directory */
	return mount(fstype, pathbuf, fstype, flags, data) < 0 ? -errno : 0;
}

static void fmt_tmpfs_opts(char *out, uint64_t size, const char *mode)
{
	/* "mode=1777,size=NNNN" without snprintf */
	const char *pre = "mode=";
	size_t o = 0;
	for (size_t i = 0; pre[i]; i++)
		out[o++] = pre[i];
	for (size_t i = 0; mode[i]; i++)
		out[o++] = mode[i];
	if (size) {
		const char *s = ",size=";
		for (size_t i = 0; s[i]; i++)
			out[o++] = s[i];
		char digits[24];
		int n = 0;
		do {
			digits[n++] = (char)('0' + size % 10);
			size /= 10;
		} while (size);
		while (n)
			out[o++] = digits[--n];
	}
	out[o] = 0;
}

static int do_op(const struct mount_op *op, int rootfd, const struct mount_plan *plan,
                 int *notes)
{
	char opts[64];
	char *buf = plan->buf1, *pbuf = plan->buf2;
	int r;
	switch (op->kind) {
	case MOP_BIND_RO:
	case MOP_FILE_RO:
		return do_bind(op, rootfd, plan,
		               MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	case MOP_BIND_RW:
		return do_bind(op, rootfd, plan, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	case MOP_BIND_DEV:
		return do_bind(op, rootfd, plan, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
	case MOP_TMPFS:
		/* /dev holds only what the plan puts there; /tmp and /dev/shm are for all */
		fmt_tmpfs_opts(opts, op->size, op->ll_access & LL_WRITE ? "1777" : "0755");
		return do_fs(op, rootfd, "tmpfs", MS_NOSUID | MS_NODEV, opts, buf, pbuf);
	case MOP_PROC:
		r = do_fs(op, rootfd, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, buf, pbuf);
		/* Inside a container whose /proc has parts covered by other mounts the kernel
		 * refuses a fresh procfs (mnt_already_visible). Only where the plan allows it
		 * (mode auto): the outer /proc, read-only. */
		if (r == -EPERM && plan->proc_fallback) {
			int src = sys_openat2(AT_FDCWD, OLDROOT "/proc", O_PATH | O_CLOEXEC, 0);
			if (src < 0)
				return r;
			r = attach_clone(src, rootfd, op->dst, 0,
			                 MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
			                         MOUNT_ATTR_NOEXEC,
			                 buf);
			close(src);
			if (r == 0)
				*notes |= MOUNT_NOTE_OUTER_PROC;
		}
		return r;
	case MOP_DEVPTS:
		r = do_fs(op, rootfd, "devpts", MS_NOSUID | MS_NOEXEC,
		          "newinstance,ptmxmode=0666,mode=620", buf, pbuf);
		if (r < 0)
			return r;
		r = s_join(pbuf, NEWROOT, "/dev/ptmx");
		if (r < 0)
			return r;
		return symlink("pts/ptmx", pbuf) < 0 && errno != EEXIST ? -errno : 0;
	case MOP_SYMLINK: {
		/* make the parent, then the link itself */
		r = s_join(pbuf, NEWROOT, op->dst);
		if (r < 0)
			return r;
		size_t n = s_len(op->dst);
		while (n > 0 && op->dst[n - 1] != '/')
			n--;
		if (n > 1) {
			char *parent = buf + PATH_MAX / 2;
			for (size_t i = 0; i < n - 1; i++)
				parent[i] = op->dst[i];
			parent[n - 1] = 0;
			bool fresh;
			int pfd = make_target(rootfd, parent, 0, buf, &fresh);
			if (pfd < 0)
				return pfd;
			close(pfd);
		}
		return symlink(op->src, pbuf) < 0 && errno != EEXIST ? -errno : 0;
	}
	case MOP_MASK: {
		/* Only what exists (and is thus visible through an allowed tree) needs hiding. */
		int fd = sys_openat2(rootfd, op->dst + 1, O_PATH | O_CLOEXEC,
		                     RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH);
		if (fd < 0)
			return fd == -ENOENT ? 0 : fd;
		struct stat st;
		r = fstat(fd, &st) < 0 ? -errno : 0;
		if (r < 0 || S_ISDIR(st.st_mode))
			close(fd);
		if (r < 0)
			return r;
		if (S_ISDIR(st.st_mode)) {
			r = s_join(pbuf, NEWROOT, op->dst);
			tdir_drop();
			if (r == 0 && mount("tmpfs", pbuf, "tmpfs",
			                    MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
			                    "mode=0000,size=4k") < 0)
				r = -errno;
			return r;
		}
		/* a file: bind the empty file made in the scratch root onto it */
		int src = sys_openat2(AT_FDCWD, "/empty", O_PATH | O_CLOEXEC, 0);
		if (src < 0) {
			close(fd);
			return src;
		}
		r = attach_clone_at(src, fd, false,
		                    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
		                        MOUNT_ATTR_NOEXEC);
		close(src);
		close(fd);
		return r;
	}
	case MOP_DIR: {
		bool fresh;
		int fd = make_target(rootfd, op->dst, 0, buf, &fresh);
		if (fd < 0)
			return fd;
		close(fd);
		return 0;
	}
	case MOP_RO_REMOUNT: {
		/* bind the path onto itself read-only */
		int fd = sys_openat2(rootfd, op->dst + 1, O_PATH | O_CLOEXEC,
		                     RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH);
		if (fd < 0)
			return (fd == -ENOENT && op->optional) ? 0 : fd;
		r = attach_clone_at(fd, fd, false,
		                    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
		                        MOUNT_ATTR_NOEXEC);
		close(fd);
		return r;
	}
	}
	return -EINVAL;
}

/* The scratch root the host is reached from: mounts made private, a tmpfs with newroot and
 * oldroot, pivoted into, so that every host path is /oldroot/<path> even when the scratch
 * directory shadowed it (a workspace under /tmp). */
static int scratch_root(void)
{
	/* Nothing we mount may propagate back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	if (mount("tmpfs", SCRATCH, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0)
		return -errno;
	if (chdir(SCRATCH) < 0)
		return -errno;
	if (mkdir("newroot", 0755) < 0 || mkdir("oldroot", 0755) < 0)
		return -errno;
	if (syscall(SYS_pivot_root, ".", "oldroot") < 0)
		return -errno;
	if (chdir("/") < 0)
		return -errno;
	return 0;
}

int mount_setup_child(const struct mount_plan *plan, int wait_fd, int tpl_fd, int *failed_op,
                      int *notes)
{
	*failed_op = -1;
	*notes = 0;
	int r = scratch_root();
	if (r < 0)
		return r;
	/* The new root: a copy of the template (the system tree, on a tmpfs read-only at the
	 * superblock, with the targets of this plan's own ops made), or a tmpfs of our own. */
	if (tpl_fd >= 0)
		r = sys_move_mount(tpl_fd, "", AT_FDCWD, NEWROOT, MOVE_MOUNT_F_EMPTY_PATH);
	else if (mount("tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m") < 0)
		r = -errno;
	if (r < 0)
		return r;
	/* The source of file masks: an empty file outside the new root. */
	int efd = open("/empty", O_CREAT | O_EXCL | O_RDONLY | O_CLOEXEC, 0444);
	if (efd < 0)
		return -errno;
	close(efd);
	int rootfd = sys_openat2(AT_FDCWD, NEWROOT, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
	if (rootfd < 0)
		return rootfd;
	tdir.fd = -1; /* (never kept by the process this one was cloned from) */
	for (size_t i = 0; i < plan->n_ops; i++) {
		if (tpl_fd >= 0 && plan->ops[i].tpl)
			continue; /* in the template */
		/* The supervisor makes the placeholders meanwhile: 'p' when they are there. */
		if (i == plan->protect_op && wait_fd >= 0) {
			char c = 0;
			ssize_t n;
			while ((n = read(wait_fd, &c, 1)) < 0 && errno == EINTR)
				;
			if (n != 1 || c != 'p') {
				*failed_op = (int)i;
				tdir_drop();
				close(rootfd);
				return -ECANCELED;
			}
		}
		r = do_op(&plan->ops[i], rootfd, plan, notes);
		if (r < 0) {
			*failed_op = (int)i;
			tdir_drop();
			close(rootfd);
			return r;
		}
	}
	tdir_drop();
	close(rootfd);
	/* Drop the host: make the new root "/" with the pivot_root(".", ".") idiom, and detach
	 * the scratch tmpfs stacked above it, which takes the old root (mounted beneath it, at
	 * oldroot) with it in the same lazy unmount. */
	if (chdir(NEWROOT) < 0)
		return -errno;
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return -errno;
	if (umount2(".", MNT_DETACH) < 0)
		return -errno;
	if (chdir("/") < 0)
		return -errno;
	/* The root itself is read-only: the sandbox writes only where the plan says. */
	r = sys_mount_setattr(AT_FDCWD, "/", 0,
	                      MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (r < 0)
		return r;
	if (chdir(plan->cwd) < 0)
		return -errno;
	return 0;
}

/* ---- the mount template (DESIGN §18) ---------------------------------------------------- */

static bool mounts_at_dst(enum mount_op_kind k)
{
	return k != MOP_SYMLINK && k != MOP_DIR;
}

/* a is b, or a directory above it */
static bool path_contains(const char *a, const char *b)
{
	size_t n = strlen(a);
	if (n == 1 && a[0] == '/')
		return true;
	return !strncmp(a, b, n) && (b[n] == 0 || b[n] == '/');
}

int mount_template_prepare(struct mount_plan *plan, struct hcache *hc)
{
	for (size_t i = 0; i < plan->n_ops; i++) {
		struct mount_op *op = &plan->ops[i];
		struct stat st;
		op->tpl_make = 0;
		if (op->tpl) {
			/* the holder checks what it binds against this (a source missing now stays
			 * without one: skipped if optional, as the plan's bind would be) */
			if (op->src && op->kind != MOP_SYMLINK && !op->has_id &&
			    hc_lstat(hc, op->src, &st) == 0) {
				op->has_id = true;
				op->id_dev = st.st_dev;
				op->id_ino = st.st_ino;
				op->id_mode = st.st_mode;
			}
			continue;
		}
		/* Where dst lands: on the deepest earlier mount that contains it. Only a target on
		 * the template's own tmpfs (its root, its /dev) must be made by the template, which
		 * is read-only once built; one inside a bound host tree is where the plan's own
		 * tree has it, and one in a tmpfs of the sandbox's own is made there. */
		const struct mount_op *in = NULL;
		for (size_t j = 0; j < i; j++)
			if (mounts_at_dst(plan->ops[j].kind) &&
			    path_contains(plan->ops[j].dst, op->dst) &&
			    (!in || strlen(plan->ops[j].dst) >= strlen(in->dst)))
				in = &plan->ops[j];
		if (in && !(in->tpl && in->kind == MOP_TMPFS))
			continue;
		switch (op->kind) {
		case MOP_BIND_RO:
		case MOP_BIND_RW:
		case MOP_BIND_DEV:
		case MOP_FILE_RO: {
			/* a directory or a file, as do_bind will find the source (a source missing
			 * fails or is skipped there, before any target is made) */
			int rc = 0;
			mode_t m = op->id_mode;
			if (!op->has_id) {
				rc = lstat(op->src, &st);
				m = st.st_mode;
			}
			if (rc == 0 && S_ISLNK(m)) {
				rc = stat(op->src, &st);
				m = st.st_mode;
			}
			if (rc == 0)
				op->tpl_make = S_ISDIR(m) ? TPL_MAKE_DIR : TPL_MAKE_FILE;
			break;
		}
		case MOP_TMPFS:
		case MOP_PROC:
		case MOP_DIR:
			op->tpl_make = TPL_MAKE_DIR;
			break;
		case MOP_DEVPTS:
			op->tpl_make = TPL_MAKE_DIR | TPL_MAKE_PTMX;
			break;
		case MOP_MASK:
		case MOP_RO_REMOUNT:
			break; /* only over what is there */
		case MOP_SYMLINK:
			return -1; /* (the plan has none of its own) */
		}
	}
	return 0;
}

static void tpl_send(int sock, char kind, int fd, int32_t err, int32_t op)
{
	char msg[9] = {kind};
	memcpy(msg + 1, &err, sizeof(err));
	memcpy(msg + 5, &op, sizeof(op));
	struct iovec iov = {msg, sizeof(msg)};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	if (sendmsg(sock, &mh, MSG_NOSIGNAL) < 0)
		_exit(0); /* the supervisor is gone */
}

_Noreturn void mount_template_child(const struct mount_plan *plan, int sock)
{
	int r = scratch_root(), failed = -1, notes = 0, rootfd = -1;
	if (r == 0 &&
	    mount("tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m") < 0)
		r = -errno;
	if (r == 0 &&
	    (rootfd = sys_openat2(AT_FDCWD, NEWROOT, O_PATH | O_DIRECTORY | O_CLOEXEC, 0)) < 0)
		r = rootfd;
	verify_sources = true;
	for (size_t i = 0; r == 0 && i < plan->n_ops; i++) {
		const struct mount_op *op = &plan->ops[i];
		if (op->tpl) {
			r = do_op(op, rootfd, plan, &notes);
		} else if (op->tpl_make) {
			bool fresh;
			int fd = make_target(rootfd, op->dst, op->tpl_make & TPL_MAKE_FILE,
			                     plan->buf1, &fresh);
			r = fd < 0 ? fd : 0;
			if (fd >= 0)
				close(fd);
			if (r == 0 && (op->tpl_make & TPL_MAKE_PTMX) &&
			    (r = s_join(plan->buf2, NEWROOT, "/dev/ptmx")) == 0 &&
			    symlink("pts/ptmx", plan->buf2) < 0 && errno != EEXIST)
				r = -errno;
		}
		if (r < 0)
			failed = (int)i;
	}
	tdir_drop();
	/* Read-only at the superblock, the root and each tmpfs of the template: a sandbox that
	 * got past its seccomp filter could remount its own mount of it read-write, but not the
	 * superblock, which belongs to this user namespace, where no sandbox has a capability. */
	if (r == 0 &&
	    mount(NULL, NEWROOT, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
		r = -errno;
	for (size_t i = 0; r == 0 && i < plan->n_ops; i++) {
		const struct mount_op *op = &plan->ops[i];
		if (!op->tpl || op->kind != MOP_TMPFS)
			continue;
		if ((r = s_join(plan->buf2, NEWROOT, op->dst)) == 0 &&
		    mount(NULL, plan->buf2, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
		          NULL) < 0)
			r = -errno;
		if (r < 0)
			failed = (int)i;
	}
	if (rootfd >= 0)
		close(rootfd);
	if (r < 0) {
		tpl_send(sock, 'E', -1, -r, failed);
		_exit(1);
	}
	/* nothing more of the host is needed: the copies come from the new root */
	if (umount2(OLDROOT, MNT_DETACH) < 0) {
		tpl_send(sock, 'E', -1, errno, -1);
		_exit(1);
	}
	/* two copies ahead, then one for each request */
	for (int ahead = 2;;) {
		while (ahead > 0) {
			int t = sys_open_tree(AT_FDCWD, NEWROOT,
			                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
			if (t < 0) {
				tpl_send(sock, 'E', -1, -t, -1);
				_exit(1);
			}
			tpl_send(sock, 'T', t, 0, 0);
			close(t);
			ahead--;
		}
		char c;
		ssize_t n = read(sock, &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0);
		ahead = 1;
	}
}
