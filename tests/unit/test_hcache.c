/* The host cache of a plan key's looks (src/hcache.c): every answer it gives is the kernel's
 * answer of that moment, through symlinks, missing paths and errors, and after every kind
 * of change to the host: a replaced, removed or new name, a chmod, a write or a chmod through
 * another hard link, a replaced ancestor, a mount, an overflowed event queue; and it does
 * answer from the cache (hits) while nothing it holds changes, also when other names in a
 * directory it watches do. The mount table it keeps (hc_mountinfo) is the kernel's after
 * each sync, also when longer than one read. Runs in a child with a user and mount namespace of its
 * own (for the mount), and again as uid 65534 for what permissions decide. */
#include "hcache.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char root[64];

/* Paths looked at (relative to root unless absolute) */
static const char *const probes[] = {
    "f",
    "d",
    "d/g",
    "abs",
    "abs/g",
    "rel",
    "rel/g",
    "chain",
    "chain/g",
    "dang",
    "loop1",
    "loop1/x",
    "up",
    "d/back",
    "d/back/f",
    "f/x",
    "missing",
    "missing/x",
    "h",
    "d/zzz",
    "/",
    "/etc/passwd",
    "/proc/self",
    "/proc/self/exe",
    "/dev/null",
    "/bin/true",
    "/usr/bin/true",
    "/etc/localtime",
    "/nonexistent/x",
};

static void full(const char *p, char out[PATH_MAX])
{
	if (p[0] == '/')
		snprintf(out, PATH_MAX, "%s", p);
	else
		snprintf(out, PATH_MAX, "%s/%s", root, p);
}

static bool same_stat(int ra, int ea, const struct stat *a, int rb, int eb, const struct stat *b)
{
	if (ra != rb)
		return false;
	if (ra < 0)
		return ea == eb;
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_mode == b->st_mode &&
	       a->st_uid == b->st_uid && a->st_gid == b->st_gid && a->st_rdev == b->st_rdev &&
	       (!S_ISREG(b->st_mode) || a->st_size == b->st_size);
}

/* Every kind of look at every probe, through c and from the kernel: how many differ (the
 * first is printed). /proc/self changes with the process: only its type is compared. */
static int mismatches(struct hcache *c, const char *when)
{
	int bad = 0;
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		char p[PATH_MAX];
		full(probes[i], p);
		bool procself = !strncmp(p, "/proc/self", 10);
		struct stat a, b;
		const char *what = NULL;
		int ra = hc_lstat(c, p, &a), ea = errno;
		int rb = lstat(p, &b), eb = errno;
		if (!procself && !same_stat(ra, ea, &a, rb, eb, &b))
			what = "lstat";
		ra = hc_stat(c, p, &a), ea = errno;
		rb = stat(p, &b), eb = errno;
		if (!what && !procself && !same_stat(ra, ea, &a, rb, eb, &b))
			what = "stat";
		char la[PATH_MAX], lb[PATH_MAX];
		ssize_t na = hc_readlink(c, p, la, sizeof(la));
		ea = errno;
		ssize_t nb = readlink(p, lb, sizeof(lb));
		eb = errno;
		if (!what && !procself &&
		    (na != nb || (na < 0 && ea != eb) || (na > 0 && memcmp(la, lb, (size_t)na))))
			what = "readlink";
		char *pa = hc_realpath(c, p);
		ea = errno;
		char *pb = realpath(p, NULL);
		eb = errno;
		if (!what && !procself &&
		    ((!pa) != (!pb) || (pa && strcmp(pa, pb)) || (!pa && ea != eb)))
			what = "realpath";
		free(pa);
		free(pb);
		static const int modes[] = {F_OK, R_OK, W_OK | X_OK};
		for (size_t m = 0; m < 3 && !what; m++) {
			ra = hc_access(c, p, modes[m]);
			ea = errno;
			rb = faccessat(AT_FDCWD, p, modes[m], AT_EACCESS);
			eb = errno;
			if (!procself && (ra != rb || (ra < 0 && ea != eb)))
				what = "faccessat";
		}
		if (what) {
			if (!bad)
				printf("  %s: %s of %s differs from the kernel's\n", when, what, p);
			bad++;
		}
	}
	return bad;
}

static int put(const char *rel, const char *text)
{
	char p[PATH_MAX];
	full(rel, p);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

static int at(int (*fn)(const char *, const char *), const char *a, const char *b)
{
	char pa[PATH_MAX], pb[PATH_MAX];
	full(b, pb);
	if (fn == symlink)
		return symlink(a, pb); /* a: the target, as is */
	full(a, pa);
	return fn(pa, pb);
}

static int mk(const char *rel)
{
	char p[PATH_MAX];
	full(rel, p);
	return mkdir(p, 0755);
}

static int rm(const char *rel)
{
	char p[PATH_MAX];
	full(rel, p);
	return unlink(p) == 0 || rmdir(p) == 0 ? 0 : -1;
}

static int mode(const char *rel, mode_t m)
{
	char p[PATH_MAX];
	full(rel, p);
	return chmod(p, m);
}

static int tree(void)
{
	char d[PATH_MAX];
	full("d", d);
	int r = put("f", "one") | mk("d") | put("d/g", "gee") | mk("h") | mk("d2") |
	        put("d2/g", "other") | at(symlink, d, "abs") | at(symlink, "d", "rel") |
	        at(symlink, "rel", "chain") | at(symlink, "nothing", "dang") |
	        at(symlink, "loop2", "loop1") | at(symlink, "loop1", "loop2") |
	        at(symlink, "d/../f", "up") | at(symlink, "..", "d/back");
	return r ? -1 : 0;
}

/* One change, then: the cache answers as the kernel does, and (when flush) it saw it. */
static void after(struct hcache *c, const char *name, int change_rc, bool flush)
{
	struct hcache_stats s0, s1;
	hcache_stats(c, &s0);
	hcache_sync(c);
	hcache_stats(c, &s1);
	char what[200];
	snprintf(what, sizeof(what), "hcache: after %s, every look is the kernel's", name);
	CHECK(what, change_rc == 0 && mismatches(c, name) == 0);
	if (flush) {
		snprintf(what, sizeof(what), "hcache: %s is reported (the cache starts over)",
		         name);
		CHECK(what, s1.flushes > s0.flushes);
	}
}

/* /proc/thread-self/mountinfo, read now (the test is one thread: the process's table) */
static char *fresh_mountinfo(void)
{
	FILE *f = fopen("/proc/thread-self/mountinfo", "r");
	if (!f)
		return NULL;
	char *out = NULL, buf[4096];
	size_t cap = 0, n;
	FILE *o = open_memstream(&out, &cap);
	while (o && (n = fread(buf, 1, sizeof(buf), f)) > 0)
		fwrite(buf, 1, n, o);
	fclose(f);
	if (o)
		fclose(o);
	return out;
}

/* hc_mountinfo(c) is the table of now (same) or is not (shows: whether it lists dir) */
static void check_mountinfo(struct hcache *c, const char *what, const char *dir, bool shows)
{
	char *kept = hc_mountinfo(c), *now = fresh_mountinfo(), needle[PATH_MAX + 2], name[300];
	if (dir) {
		snprintf(needle, sizeof(needle), " %s ", dir);
		snprintf(name, sizeof(name), "hcache: the mount table %s %s", what,
		         shows ? "shows the mount" : "does not show the mount");
		CHECK(name, kept && (strstr(kept, needle) != NULL) == shows);
	}
	if (!dir || shows == (now && strstr(now, needle))) {
		snprintf(name, sizeof(name), "hcache: the mount table %s is the kernel's", what);
		CHECK(name, kept && now && !strcmp(kept, now));
	}
	free(kept);
	free(now);
}

static int child_main(bool as_nobody)
{
	if (!as_nobody) {
		uid_t u = getuid();
		gid_t g = getgid();
		char map[64];
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
			return 2;
		snprintf(map, sizeof(map), "%u %u 1", (unsigned)u, (unsigned)u);
		int fd = open("/proc/self/setgroups", O_WRONLY);
		if (fd >= 0) {
			(void)!write(fd, "deny", 4);
			close(fd);
		}
		fd = open("/proc/self/uid_map", O_WRONLY);
		if (fd < 0 || write(fd, map, strlen(map)) < 0)
			return 2;
		close(fd);
		snprintf(map, sizeof(map), "%u %u 1", (unsigned)g, (unsigned)g);
		fd = open("/proc/self/gid_map", O_WRONLY);
		if (fd < 0 || write(fd, map, strlen(map)) < 0)
			return 2;
		close(fd);
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			return 2;
	}
	snprintf(root, sizeof(root), "/tmp/corral-unit-hc-XXXXXX");
	if (!mkdtemp(root) || tree() < 0)
		return 3;
	const char *who = as_nobody ? " (uid 65534)" : "";
	char what[200];
	struct hcache *c = hcache_new();
	snprintf(what, sizeof(what), "hcache: made%s", who);
	CHECK(what, c != NULL);
	if (!c)
		return 1;
	snprintf(what, sizeof(what), "hcache: the first looks are the kernel's%s", who);
	CHECK(what, mismatches(c, "first") == 0);
	struct hcache_stats s0, s1;
	hcache_stats(c, &s0);
	hcache_sync(c);
	snprintf(what, sizeof(what), "hcache: the same looks again are the kernel's%s", who);
	CHECK(what, mismatches(c, "again") == 0);
	hcache_stats(c, &s1);
	snprintf(what, sizeof(what),
	         "hcache: looked at again, answered from the cache (hits %lu -> %lu)%s", s0.hits,
	         s1.hits, who);
	CHECK(what, s1.hits > s0.hits + 100 && s1.flushes == s0.flushes);
	/* paths on procfs are never kept: a look at them is a look */
	CHECK(as_nobody ? "hcache: procfs looked up every time (uid 65534)"
	                : "hcache: procfs looked up every time",
	      s1.misses - s0.misses >= 4);

	check_mountinfo(c, as_nobody ? "as uid 65534" : "in the namespace", NULL, false);
	if (as_nobody) {
		/* permissions: a directory on the way closed */
		after(c, "chmod 000 of a directory on the way (uid 65534)", mode("d", 0), true);
		after(c, "chmod 755 back (uid 65534)", mode("d", 0755), true);
		after(c, "chmod 500 of the root of the tree (uid 65534)", mode(".", 0500), true);
		after(c, "chmod 700 back (uid 65534)", mode(".", 0700), true);
	} else {
		/* another file moved over a name */
		after(c, "a rename over d/g", put("d/g.new", "new!") | at(rename, "d/g.new", "d/g"),
		      true);
		after(c, "an unlink of f", rm("f"), true);
		after(c, "a new f", put("f", "again"), true);
		after(c, "a new missing/", mk("missing"), true);
		after(c, "a chmod of d", mode("d", 0700), true);
		after(c, "a symlink retargeted", rm("rel") | at(symlink, "d2", "rel"), true);
		after(c, "an ancestor replaced",
		      at(rename, "d", "d.old") | mk("d") | put("d/g", "third") |
		          at(symlink, "..", "d/back"),
		      true);
		/* through another hard link, in a directory nobody watches */
		after(c, "a hard link made elsewhere", at(link, "d/g", "h/g2"), true);
		after(c, "a write through the other link", put("h/g2", "longer content"), true);
		after(c, "a chmod through the other link", mode("h/g2", 0600), true);
		/* another name in a watched directory: not about anything kept */
		hcache_stats(c, &s0);
		int rc = put("d/unrelated", "x") | rm("d/unrelated");
		hcache_sync(c);
		hcache_stats(c, &s1);
		CHECK("hcache: another name in a watched directory keeps the cache",
		      rc == 0 && s1.flushes == s0.flushes && mismatches(c, "unrelated") == 0);
		/* a mount, which inotify does not see */
		char g[PATH_MAX], f2[PATH_MAX];
		full("d/g", g);
		full("d2/g", f2);
		after(c, "a bind mount over d/g", mount(f2, g, NULL, MS_BIND, NULL), true);
		after(c, "its unmount", umount(g), true);
		/* the mount table, kept until a sync takes in a change (hc_mountinfo): many
		 * mounts, so that it takes more than one read */
		char m[PATH_MAX], sub[PATH_MAX + 16];
		full("h/m", m);
		check_mountinfo(c, "at first", NULL, false);
		int mounted = mkdir(m, 0755) == 0 && mount("tmpfs", m, "tmpfs", 0, NULL) == 0;
		check_mountinfo(c, "before the sync that takes in a mount (kept)", m, false);
		hcache_sync(c);
		check_mountinfo(c, "after the sync that takes in a mount", m, true);
		for (int i = 0; mounted && i < 200; i++) {
			snprintf(sub, sizeof(sub), "%s/%d", m, i);
			mounted =
			    mkdir(sub, 0755) == 0 && mount("tmpfs", sub, "tmpfs", 0, NULL) == 0;
		}
		hcache_sync(c);
		char *big = hc_mountinfo(c);
		if (!mounted || !big || strlen(big) <= 16384)
			printf("# mounted %d (%s), table of %zu bytes\n", mounted, strerror(errno),
			       big ? strlen(big) : 0);
		CHECK("hcache: 201 mounts made, and the table is longer than two reads",
		      mounted && big && strlen(big) > 16384);
		free(big);
		check_mountinfo(c, "with 200 mounts more", m, true);
		after(c, "the unmount of the 201 mounts", umount2(m, MNT_DETACH), true);
		check_mountinfo(c, "after the unmount", m, false);
		check_mountinfo(c, "again", m, false);
		/* more events than the queue holds (16384 by default), all about other names */
		char junk[PATH_MAX];
		full("d/junk", junk);
		hcache_stats(c, &s0);
		int made = 0;
		for (int i = 0; i < 9000; i++) {
			int fd = open(junk, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
			if (fd >= 0)
				close(fd);
			made += unlink(junk) == 0;
		}
		int qmax = 0;
		FILE *q = fopen("/proc/sys/fs/inotify/max_queued_events", "r");
		if (q) {
			if (fscanf(q, "%d", &qmax) != 1)
				qmax = 0;
			fclose(q);
		}
		hcache_sync(c);
		hcache_stats(c, &s1);
		if (qmax > 0 && qmax < 2 * made)
			CHECK("hcache: an overflowed event queue starts the cache over",
			      s1.flushes > s0.flushes && mismatches(c, "overflow") == 0);
		else
			printf("  (the inotify queue holds %d events: no overflow to test)\n",
			       qmax);
	}
	hcache_free(c);
	char cmd[2 * sizeof(root) + 40];
	snprintf(cmd, sizeof(cmd), "chmod -R u+rwx %s; rm -rf %s", root, root);
	if (system(cmd) != 0)
		printf("  (could not remove %s)\n", root);
	return t_failed ? 1 : 0;
}

void test_hcache(void)
{
	/* hcache_new(NULL-safe) and the no-cache path */
	struct stat st;
	CHECK("hcache: NULL is no cache (the system call itself)",
	      hc_lstat(NULL, "/", &st) == 0 && S_ISDIR(st.st_mode) && st.st_nlink == 0);
	check_mountinfo(NULL, "without a cache", NULL, false);
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1 && geteuid() != 0)
			break; /* already unprivileged: the first pass was */
		fflush(stdout);
		pid_t p = fork();
		if (p == 0) {
			if (pass == 1 &&
			    (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
			     setresuid(65534, 65534, 65534) < 0))
				_exit(4);
			int r = child_main(pass == 1);
			fflush(stdout);
			_exit(r);
		}
		int ws = 0;
		waitpid(p, &ws, 0);
		int r = WIFEXITED(ws) ? WEXITSTATUS(ws) : 100;
		if (r == 2)
			printf("  (no user namespace for the test: this host refuses one)\n");
		CHECK(pass ? "hcache: the run as uid 65534 ended cleanly"
		           : "hcache: the run in a user and mount namespace ended cleanly",
		      r == 0);
	}
}
