/* What a plan key looked at on the host, kept while inotify shows it unchanged (DESIGN §18).
 *
 * A server's call is matched to a parked sandbox by its plan key (launch_plan_key), which
 * looks at about 110 host paths on every call (the system directories, the /etc allow-list,
 * /dev's nodes, the workspace's protected names, the identity of every source): 0.2-0.3 ms
 * of a prebuilt call's 1.6 ms on the 2-core machine; and every run a server launches looks
 * at the system part of them (cfg->hc: the system directories, the /etc allow-list, the
 * mount template's sources: 0.07-0.09 ms of a call, paired, as uid 65534). Between two
 * calls these paths almost never change, and when one does the kernel says so: an inotify
 * watch on a directory reports every name made, removed, renamed or changed in it, and a
 * watch on an inode every change of its attributes or contents, whichever path the change
 * came through. So the results are kept by path, each with watches on:
 *  - every directory on its way, with the name looked up there (the path is resolved one
 *    component at a time through the cache, so a symlink on the way is followed by the same
 *    rules and its own name is watched too; a renamed or replaced ancestor is reported);
 *  - the inode itself (a chmod, a new link count, a write to a regular file).
 * A watch is added before the look it covers, and an inode's watch is checked to be on the
 * inode looked at (a second lstat, after the watch), so a change in between is either seen
 * by the look or reported. hcache_sync() reads the events before each use: an event about a
 * kept name or inode drops the whole cache (events about other names in a watched directory,
 * such as the workspace's other files, are ignored), and so does an overflowed event queue
 * or a change of the mount table (/proc/self/mountinfo polls readable on any mount or
 * unmount in the namespace, which inotify does not see).
 *
 * Only local file systems are cached: a change made by another host on NFS, or behind a FUSE
 * daemon, makes no event here. A stat result keeps only what no change can alter without an
 * event: type and mode, device and inode, owner and group, rdev, and a regular file's size
 * (a directory's size and link count, and all times, change with entries it holds or reads
 * and writes nobody watches); the plan uses nothing else. */
#include "hcache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/statfs.h>
#include <unistd.h>

#define HC_BUCKETS 512
#define HC_MAX_ENTRIES 8192 /* then the cache starts over: bounded memory */
#define HC_MAX_LINKS 40     /* as the kernel's MAXSYMLINKS */

/* What a directory's watch reports about the names in it, and an inode's about itself. */
#define DIR_MASK                                                                                   \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF |        \
	 IN_MOVE_SELF)
/* A write to a regular file changes its size; a write to a device node (every `> /dev/null`
 * on the host) changes nothing kept, and is not asked for. */
#define FILE_MASK (IN_ATTRIB | IN_MODIFY | IN_DELETE_SELF | IN_MOVE_SELF)
#define NODE_MASK (IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)

/* HC_WALK: a path's physical form (amode: enum walk), the answer of a walk that the cache
 * held all the way. The looks it was made of are kept entries, so any change that would
 * alter it drops it with them (everything goes at once). */
enum hc_kind { HC_LSTAT, HC_READLINK, HC_ACCESS, HC_WALK };
enum walk { WALK_FOLLOW, WALK_PARENT };

struct hc_ent {
	struct hc_ent *next;
	uint32_t hash;
	uint8_t kind;
	bool real; /* not cacheable (its file system, a watch refused): always looked up */
	int amode; /* HC_ACCESS: the mode asked */
	int err;   /* 0: the call succeeded; else its errno */
	struct stat st;
	char *link; /* HC_READLINK: the target; HC_WALK: the physical path */
	size_t link_len;
	char path[];
};

struct hc_watch {
	int wd;
	bool bad; /* on a file system whose changes inotify may not see */
	char **names;
	size_t n, cap;
};

struct hcache {
	int ifd, mfd;
	struct hc_ent *tab[HC_BUCKETS];
	size_t n_ent;
	struct hc_watch *w;
	size_t n_w, cap_w;
	unsigned long hits, misses, flushes;
	char *minfo; /* the mount table as read through mfd since its last change; NULL: none */
};

static uint32_t hash_of(int kind, int amode, const char *s)
{
	uint32_t h = 2166136261u ^ (uint32_t)kind ^ ((uint32_t)amode << 8);
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

struct hcache *hcache_new(void)
{
	struct hcache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	c->mfd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (c->ifd < 0 || c->mfd < 0) {
		hcache_free(c);
		return NULL;
	}
	return c;
}

static void drop_all(struct hcache *c)
{
	for (size_t i = 0; i < HC_BUCKETS; i++) {
		while (c->tab[i]) {
			struct hc_ent *e = c->tab[i];
			c->tab[i] = e->next;
			free(e->link);
			free(e);
		}
	}
	c->n_ent = 0;
	for (size_t i = 0; i < c->n_w; i++) {
		for (size_t k = 0; k < c->w[i].n; k++)
			free(c->w[i].names[k]);
		free(c->w[i].names);
	}
	free(c->w);
	c->w = NULL;
	c->n_w = c->cap_w = 0;
}

void hcache_free(struct hcache *c)
{
	if (!c)
		return;
	drop_all(c);
	free(c->minfo);
	if (c->ifd >= 0)
		close(c->ifd);
	if (c->mfd >= 0)
		close(c->mfd);
	free(c);
}

/* Everything goes, watches too: what is still queued for them (their IN_IGNORED among it)
 * names watches no longer known, and is skipped. The descriptors stay: a server short of
 * descriptors must not lose its cache to a flush. */
static void flush(struct hcache *c)
{
	for (size_t i = 0; i < c->n_w; i++)
		inotify_rm_watch(c->ifd, c->w[i].wd);
	drop_all(c);
	c->flushes++;
}

static struct hc_watch *watch_of(struct hcache *c, int wd)
{
	for (size_t i = 0; i < c->n_w; i++)
		if (c->w[i].wd == wd)
			return &c->w[i];
	return NULL;
}

static bool watched_name(const struct hc_watch *w, const char *name)
{
	for (size_t i = 0; i < w->n; i++)
		if (!strcmp(w->names[i], name))
			return true;
	return false;
}

void hcache_sync(struct hcache *c)
{
	if (!c)
		return;
	bool stale = false;
	{
		char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
		for (;;) {
			ssize_t n = read(c->ifd, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break; /* EAGAIN: all read */
			for (char *p = buf; p < buf + n;) {
				const struct inotify_event *ev = (const struct inotify_event *)p;
				p += sizeof(*ev) + ev->len;
				if (ev->mask & IN_Q_OVERFLOW) {
					stale = true;
					continue;
				}
				const struct hc_watch *w = watch_of(c, ev->wd);
				/* an event without a name is about the watched inode itself
				 * (IN_IGNORED: its watch is gone, the inode deleted or unmounted)
				 */
				if (w && !w->bad && (!ev->len || watched_name(w, ev->name)))
					stale = true;
			}
		}
	}
	/* (a poll that reports a change also takes it in: the next one is quiet until another
	 * mount or unmount) */
	struct pollfd p = {.fd = c->mfd, .events = POLLPRI};
	if (poll(&p, 1, 0) > 0 && (p.revents & (POLLPRI | POLLERR))) {
		stale = true;
		free(c->minfo); /* read again at its next use, after this poll */
		c->minfo = NULL;
	}
	if (stale || c->n_ent >= HC_MAX_ENTRIES)
		flush(c);
}

/* All of fd's file from its start, NUL-terminated; NULL with errno. */
static char *read_all(int fd)
{
	size_t len = 0, cap = 8192;
	char *buf = malloc(cap);
	while (buf) {
		if (len + 1 >= cap) {
			char *more = realloc(buf, cap *= 2);
			if (!more)
				break;
			buf = more;
		}
		ssize_t n = pread(fd, buf + len, cap - len - 1, (off_t)len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		if (n == 0) {
			buf[len] = '\0';
			return buf;
		}
		len += (size_t)n;
	}
	int e = errno;
	free(buf);
	errno = e ? e : ENOMEM;
	return NULL;
}

char *hc_mountinfo(struct hcache *c)
{
	if (!c) {
		/* the calling thread's table (a library caller's thread may have a mount
		 * namespace of its own) */
		int fd = open("/proc/thread-self/mountinfo", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return NULL;
		char *text = read_all(fd);
		int e = errno;
		close(fd);
		errno = e;
		return text;
	}
	/* read through the polled descriptor itself: the table of the namespace and root the
	 * poll reports on */
	if (!c->minfo && !(c->minfo = read_all(c->mfd)))
		return NULL;
	char *copy = strdup(c->minfo);
	if (!copy)
		errno = ENOMEM;
	return copy;
}

void hcache_stats(const struct hcache *c, struct hcache_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!c)
		return;
	out->hits = c->hits;
	out->misses = c->misses;
	out->flushes = c->flushes;
	out->entries = c->n_ent;
	out->watches = c->n_w;
}

/* ---- what is kept ------------------------------------------------------------------------- */

static void reduce(struct stat *st)
{
	struct stat r;
	memset(&r, 0, sizeof(r));
	r.st_dev = st->st_dev;
	r.st_ino = st->st_ino;
	r.st_mode = st->st_mode;
	r.st_uid = st->st_uid;
	r.st_gid = st->st_gid;
	r.st_rdev = st->st_rdev;
	if (S_ISREG(st->st_mode))
		r.st_size = st->st_size;
	*st = r;
}

/* File systems where every change to a file is made through this kernel, and so reported by
 * inotify. */
static bool local_fs(long type)
{
	switch ((unsigned long)type) {
	case EXT4_SUPER_MAGIC: /* also ext2 and ext3 */
	case XFS_SUPER_MAGIC:
	case BTRFS_SUPER_MAGIC:
	case TMPFS_MAGIC:
	case RAMFS_MAGIC:
	case OVERLAYFS_SUPER_MAGIC:
	case F2FS_SUPER_MAGIC:
	case 0xca451a4eUL: /* bcachefs */
	case 0x2fc12fc1UL: /* zfs */
		return true;
	default:
		return false;
	}
}

/* A watch on path (mask added to any it has): its record, or NULL when inotify refuses (out
 * of watches: ENOSPC) or the file system is not local. */
static struct hc_watch *watch_path(struct hcache *c, const char *path, uint32_t mask, bool check_fs)
{
	if (c->ifd < 0)
		return NULL;
	int wd = inotify_add_watch(c->ifd, path, mask | IN_MASK_ADD | IN_DONT_FOLLOW);
	if (wd < 0)
		return NULL;
	struct hc_watch *w = watch_of(c, wd);
	if (!w) {
		if (c->n_w == c->cap_w) {
			size_t cap = c->cap_w ? 2 * c->cap_w : 32;
			struct hc_watch *g = realloc(c->w, cap * sizeof(*g));
			if (!g)
				return NULL;
			c->w = g;
			c->cap_w = cap;
		}
		w = &c->w[c->n_w++];
		memset(w, 0, sizeof(*w));
		w->wd = wd;
		struct statfs sf;
		w->bad = check_fs && (statfs(path, &sf) < 0 || !local_fs(sf.f_type));
	}
	return w->bad ? NULL : w;
}

static int watch_name(struct hcache *c, const char *dir, const char *name)
{
	struct hc_watch *w = watch_path(c, dir, DIR_MASK | IN_ONLYDIR, true);
	if (!w)
		return -1;
	if (watched_name(w, name))
		return 0;
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 8;
		char **g = realloc(w->names, cap * sizeof(*g));
		if (!g)
			return -1;
		w->names = g;
		w->cap = cap;
	}
	if (!(w->names[w->n] = strdup(name)))
		return -1;
	w->n++;
	return 0;
}

static struct hc_ent *find(struct hcache *c, int kind, int amode, const char *path, uint32_t h)
{
	for (struct hc_ent *e = c->tab[h % HC_BUCKETS]; e; e = e->next)
		if (e->hash == h && e->kind == kind && e->amode == amode && !strcmp(e->path, path))
			return e;
	return NULL;
}

static struct hc_ent *add(struct hcache *c, int kind, int amode, const char *path, uint32_t h)
{
	if (c->n_ent >= HC_MAX_ENTRIES)
		return NULL; /* not kept; hcache_sync starts over */
	size_t n = strlen(path) + 1;
	struct hc_ent *e = calloc(1, sizeof(*e) + n);
	if (!e)
		return NULL;
	memcpy(e->path, path, n);
	e->hash = h;
	e->kind = (uint8_t)kind;
	e->amode = amode;
	e->next = c->tab[h % HC_BUCKETS];
	c->tab[h % HC_BUCKETS] = e;
	c->n_ent++;
	return e;
}

/* Only what an error says about the path is kept: not an EINTR, ENOMEM or the like. */
static bool lasting_errno(int e)
{
	return e == ENOENT || e == ENOTDIR || e == EACCES || e == ELOOP || e == ENAMETOOLONG ||
	       e == EINVAL || e == EROFS || e == EPERM;
}

/* dir and name of an absolute path other than "/" (dir "/" for a top-level name) */
static void split(const char *path, char dir[PATH_MAX], const char **name)
{
	const char *slash = strrchr(path, '/');
	size_t dl = (size_t)(slash - path);
	if (!dl)
		dl = 1;
	memcpy(dir, path, dl);
	dir[dl] = 0;
	*name = slash + 1;
}

/* Whether what lies under dir can be kept: dir is kept itself (so every directory on its
 * way is watched, with the name looked up in it), or it is the root. */
static bool parent_kept(struct hcache *c, const char *dir)
{
	if (!strcmp(dir, "/"))
		return true;
	const struct hc_ent *e = find(c, HC_LSTAT, 0, dir, hash_of(HC_LSTAT, 0, dir));
	return e && !e->real && !e->err && S_ISDIR(e->st.st_mode);
}

/* Marks path as looked up every time (its file system, a watch refused), when there is room. */
static void mark_real(struct hcache *c, int kind, int amode, const char *path, uint32_t h)
{
	struct hc_ent *e = add(c, kind, amode, path, h);
	if (e)
		e->real = true;
}

static int real_lstat(const char *path, struct stat *st)
{
	if (lstat(path, st) < 0)
		return -1;
	reduce(st);
	return 0;
}

/* lstat of a path that is absolute and physical (no symlink before its last component, no
 * "." or ".."): from the cache, or looked up and kept. */
static int p_lstat(struct hcache *c, const char *path, struct stat *st)
{
	uint32_t h = hash_of(HC_LSTAT, 0, path);
	const struct hc_ent *e = find(c, HC_LSTAT, 0, path, h);
	if (e && !e->real) {
		c->hits++;
		if (e->err) {
			errno = e->err;
			return -1;
		}
		*st = e->st;
		return 0;
	}
	c->misses++;
	if (e)
		return real_lstat(path, st);
	bool root = !strcmp(path, "/");
	if (!root) {
		char dir[PATH_MAX];
		const char *name;
		split(path, dir, &name);
		if (!parent_kept(c, dir) || watch_name(c, dir, name) < 0) {
			mark_real(c, HC_LSTAT, 0, path, h);
			return real_lstat(path, st);
		}
	}
	struct stat a;
	if (lstat(path, &a) < 0) {
		int err = errno;
		struct hc_ent *n;
		/* its directory's watch reports it when it appears */
		if (!root && lasting_errno(err) && (n = add(c, HC_LSTAT, 0, path, h)))
			n->err = err;
		errno = err;
		return -1;
	}
	/* the inode's own watch, then a second look: the watch is on the inode looked at, and
	 * a change before the watch shows in this look */
	if (!watch_path(c, path, S_ISREG(a.st_mode) ? FILE_MASK : NODE_MASK, !S_ISLNK(a.st_mode))) {
		mark_real(c, HC_LSTAT, 0, path, h);
		return real_lstat(path, st);
	}
	if (real_lstat(path, st) < 0)
		return -1;
	struct hc_ent *n;
	if (st->st_dev == a.st_dev && st->st_ino == a.st_ino && (n = add(c, HC_LSTAT, 0, path, h)))
		n->st = *st; /* (replaced meanwhile: reported, and this look not kept) */
	return 0;
}

static ssize_t link_out(const char *link, size_t len, char *buf, size_t size)
{
	size_t k = len < size ? len : size;
	memcpy(buf, link, k);
	return (ssize_t)k;
}

/* readlink of a physical path, kept as p_lstat keeps it (a symlink's target never changes:
 * a new one is a new symlink, made under the name). */
static ssize_t p_readlink(struct hcache *c, const char *path, char *buf, size_t size)
{
	uint32_t h = hash_of(HC_READLINK, 0, path);
	struct hc_ent *e = find(c, HC_READLINK, 0, path, h);
	if (e && !e->real) {
		c->hits++;
		if (e->err) {
			errno = e->err;
			return -1;
		}
		return link_out(e->link, e->link_len, buf, size);
	}
	c->misses++;
	if (e || !strcmp(path, "/"))
		return readlink(path, buf, size);
	char dir[PATH_MAX], tmp[PATH_MAX];
	const char *name;
	split(path, dir, &name);
	if (!parent_kept(c, dir) || watch_name(c, dir, name) < 0) {
		mark_real(c, HC_READLINK, 0, path, h);
		return readlink(path, buf, size);
	}
	ssize_t n = readlink(path, tmp, sizeof(tmp));
	int err = n < 0 ? errno : 0;
	char *copy = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if ((n >= 0 ? copy != NULL : lasting_errno(err)) && (e = add(c, HC_READLINK, 0, path, h))) {
		e->err = err;
		e->link = copy;
		e->link_len = n >= 0 ? (size_t)n : 0;
		if (copy)
			memcpy(copy, tmp, (size_t)n);
	} else {
		free(copy);
	}
	if (n < 0) {
		errno = err;
		return -1;
	}
	return link_out(tmp, (size_t)n, buf, size);
}

/* Whether path can be taken from the cache as it is: absolute, and no empty, "." or ".."
 * component and no slash at the end (those go to the kernel, which has the last word on
 * what they mean). */
static bool plain_path(const char *path)
{
	if (path[0] != '/' || strlen(path) >= PATH_MAX)
		return false;
	if (!path[1])
		return true;
	for (const char *s = path; *s; s++) {
		if (*s != '/')
			continue;
		const char *n = s + 1;
		if (*n == '/' || !*n || (n[0] == '.' && (!n[1] || n[1] == '/')) ||
		    (n[0] == '.' && n[1] == '.' && (!n[2] || n[2] == '/')))
			return false;
	}
	return true;
}

/* Whether the look at a physical path is held by the cache (not looked up every time). */
static bool kept(struct hcache *c, int kind, const char *path)
{
	const struct hc_ent *e = find(c, kind, 0, path, hash_of(kind, 0, path));
	return e && !e->real;
}

/* faccessat(AT_EACCESS) of a physical path; *held: the answer is (now) the cache's. What
 * decides it: the inode's mode, owner and ACL (its watch, made by its lstat, and its name's
 * in its directory), the directories on the way and a read-only mount (the mount table).
 * Kept only where that lstat is. */
static int p_access(struct hcache *c, const char *p, int mode, bool *held)
{
	uint32_t h = hash_of(HC_ACCESS, mode, p);
	struct hc_ent *e = find(c, HC_ACCESS, mode, p, h);
	*held = false;
	if (e && !e->real) {
		c->hits++;
		*held = true;
		errno = e->err;
		return e->err ? -1 : 0;
	}
	c->misses++;
	struct stat st;
	bool keep = !e && p_lstat(c, p, &st) == 0 && kept(c, HC_LSTAT, p);
	int r = faccessat(AT_FDCWD, p, mode, AT_EACCESS);
	int err = r < 0 ? errno : 0;
	if (keep && (!err || lasting_errno(err)) && (e = add(c, HC_ACCESS, mode, p, h))) {
		e->err = err;
		*held = true;
	}
	errno = err;
	return r;
}

/* The physical path of path (every symlink followed, the last one too), as
 * the kernel resolves it: one component at a time, each looked at through the cache. Only
 * what the cache holds all the way: NULL (and the caller asks the kernel) when a step is not
 * held (on procfs, for one: its magic links are not what readlink says), when a look fails
 * (the kernel's own error is the answer), or where the kernel applies a rule this walk does
 * not (a symlink in a sticky world-writable directory: fs.protected_symlinks). A "." or ".."
 * needs search permission on the directory it is in, as the kernel's walk does. */
static char *walk(struct hcache *c, const char *path)
{
	char out[PATH_MAX], rest[2 * PATH_MAX];
	size_t ol = 0;
	int links = 0;
	out[0] = 0;
	if (strlen(path) >= sizeof(rest)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	strcpy(rest, path);
	char *r = rest;
	for (;;) {
		while (*r == '/')
			r++;
		if (!*r)
			break;
		char *end = strchr(r, '/');
		size_t cl = end ? (size_t)(end - r) : strlen(r);
		bool last = true;
		for (const char *t = r + cl; *t; t++)
			if (*t != '/') {
				last = false;
				break;
			}
		bool dot = cl == 1 && r[0] == '.', dotdot = cl == 2 && r[0] == '.' && r[1] == '.';
		if (dot || dotdot) {
			bool held;
			if (p_access(c, ol ? out : "/", X_OK, &held) < 0 || !held)
				return NULL;
			while (dotdot && ol > 0 && out[ol - 1] != '/')
				ol--;
			if (dotdot && ol > 0)
				ol--; /* the slash */
			out[ol] = 0;
			r += cl;
			continue;
		}
		if (ol + 1 + cl >= sizeof(out)) {
			errno = ENAMETOOLONG;
			return NULL;
		}
		size_t prev = ol;
		out[ol++] = '/';
		memcpy(out + ol, r, cl);
		ol += cl;
		out[ol] = 0;
		r += cl;
		/* known not to be held (procfs, say): the kernel answers, without a look here */
		const struct hc_ent *known = find(c, HC_LSTAT, 0, out, hash_of(HC_LSTAT, 0, out));
		if (known && known->real) {
			c->misses++;
			return NULL;
		}
		struct stat st;
		if (p_lstat(c, out, &st) < 0 || !kept(c, HC_LSTAT, out))
			return NULL;
		if (S_ISLNK(st.st_mode)) {
			struct stat ds;
			out[prev] = 0;
			int dr = p_lstat(c, prev ? out : "/", &ds);
			out[prev] = '/';
			if (dr < 0 || (ds.st_mode & (S_ISVTX | S_IWOTH)) == (S_ISVTX | S_IWOTH) ||
			    ++links > HC_MAX_LINKS)
				return NULL;
			char target[PATH_MAX];
			ssize_t n = p_readlink(c, out, target, sizeof(target) - 1);
			if (n <= 0 || !kept(c, HC_READLINK, out))
				return NULL;
			target[n] = 0;
			size_t rl = strlen(r);
			if ((size_t)n + 1 + rl >= sizeof(rest)) {
				errno = ENAMETOOLONG;
				return NULL;
			}
			/* the target, then what was left, in place of what was left */
			char next[2 * PATH_MAX];
			memcpy(next, target, (size_t)n);
			next[n] = '/';
			memcpy(next + n + 1, r, rl + 1);
			memcpy(rest, next, (size_t)n + 1 + rl + 1);
			r = rest;
			ol = target[0] == '/' ? 0 : prev;
			out[ol] = 0;
			continue;
		}
		if (!last && !S_ISDIR(st.st_mode)) {
			errno = ENOTDIR;
			return NULL;
		}
	}
	return strdup(ol ? out : "/");
}

/* The physical path of path's directory, and its last name after it: for a look at path
 * itself (lstat, readlink) with its last component not followed. */
static char *resolve(struct hcache *c, const char *path, enum walk how);

static char *walk_parent(struct hcache *c, const char *path)
{
	char dir[PATH_MAX];
	const char *name;
	split(path, dir, &name);
	char *pd = resolve(c, dir, WALK_FOLLOW);
	if (!pd)
		return NULL;
	size_t dl = strlen(pd), nl = strlen(name);
	char *full = malloc(dl + 1 + nl + 1);
	if (full) {
		memcpy(full, pd, dl);
		if (dl > 1)
			full[dl++] = '/';
		memcpy(full + dl, name, nl + 1);
	}
	free(pd);
	return full;
}

/* A walk, from the cache when this one was made before (the same path, the same way) and
 * kept; a key asks for the same hundred paths each time, and this is one look instead of a
 * look per component. */
static char *resolve(struct hcache *c, const char *path, enum walk how)
{
	uint32_t h = hash_of(HC_WALK, (int)how, path);
	const struct hc_ent *m = find(c, HC_WALK, (int)how, path, h);
	if (m && m->link) {
		c->hits++;
		return strdup(m->link);
	}
	char *p = how == WALK_PARENT ? walk_parent(c, path) : walk(c, path);
	struct hc_ent *e;
	if (p && !m && (e = add(c, HC_WALK, (int)how, path, h)))
		e->link = strdup(p); /* (NULL, out of memory: walked every time) */
	return p;
}

/* p_lstat of p, which it frees (errno kept) */
static int lstat_freeing(struct hcache *c, char *p, struct stat *st)
{
	int r = p_lstat(c, p, st);
	int e = errno;
	free(p);
	errno = e;
	return r;
}

/* (Where the walk cannot take a path, or cannot finish it, the kernel's own answer.) */
int hc_lstat(struct hcache *c, const char *path, struct stat *st)
{
	char *p = c && plain_path(path) && strcmp(path, "/") ? resolve(c, path, WALK_PARENT) : NULL;
	return p ? lstat_freeing(c, p, st) : real_lstat(path, st);
}

int hc_stat(struct hcache *c, const char *path, struct stat *st)
{
	char *p = c && plain_path(path) ? resolve(c, path, WALK_FOLLOW) : NULL;
	if (p)
		return lstat_freeing(c, p, st);
	if (stat(path, st) < 0)
		return -1;
	reduce(st);
	return 0;
}

ssize_t hc_readlink(struct hcache *c, const char *path, char *buf, size_t size)
{
	char *p = c && plain_path(path) && strcmp(path, "/") ? resolve(c, path, WALK_PARENT) : NULL;
	if (!p)
		return readlink(path, buf, size);
	ssize_t n = p_readlink(c, p, buf, size);
	int e = errno;
	free(p);
	errno = e;
	return n;
}

char *hc_realpath(struct hcache *c, const char *path)
{
	char *p = c && plain_path(path) ? resolve(c, path, WALK_FOLLOW) : NULL;
	return p ? p : realpath(path, NULL);
}

int hc_access(struct hcache *c, const char *path, int mode)
{
	char *p = c && plain_path(path) ? resolve(c, path, WALK_FOLLOW) : NULL;
	if (!p)
		return faccessat(AT_FDCWD, path, mode, AT_EACCESS);
	bool held;
	int r = p_access(c, p, mode, &held);
	int e = errno;
	free(p);
	errno = e;
	return r;
}
