/* The cgroup mounts the cgroup layout is found from, kept while the mount table is unchanged
 * (cgroup_mount_lines, src/sandbox/cgroup.c): each case where the kept lines would be wrong
 * is made to happen, and the answer compared with what mountinfo says then. In a
 * child process: it forks (the kept descriptor is shared with the parent), enters a mount
 * namespace of its own (a user and cgroup namespace too, so that uid 65534 may mount a
 * cgroup2 there), keeps its own lines as a server does, mounts and unmounts a cgroup2,
 * enters a second mount namespace, forks again to look after a change, closes every
 * descriptor it did not open and opens other files (another at the kept offset, then the
 * same file) at the reused numbers, and ends in a chroot. Each check of cgroup.c left out
 * (the poll, the mount namespace, the root, the descriptor's identity and offset, the switch
 * emptied in a child) fails some of these. */
#include "internal.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The cgroup and cgroup2 lines of mountinfo, read now. */
static char *fresh_lines(void)
{
	FILE *f = fopen("/proc/thread-self/mountinfo", "r");
	if (!f)
		return NULL;
	char *out = NULL, *line = NULL;
	size_t n = 0, cap = 0;
	FILE *o = open_memstream(&out, &cap);
	while (o && getline(&line, &n, f) > 0) {
		const char *sep = strstr(line, " - ");
		if (sep && (!strncmp(sep + 3, "cgroup ", 7) || !strncmp(sep + 3, "cgroup2 ", 8)))
			fputs(line, o);
	}
	free(line);
	fclose(f);
	if (o)
		fclose(o);
	return out;
}

/* The kept answer is the fresh one. */
static bool same_as_fresh(const char *name)
{
	char *kept = cgroup_mount_lines(), *fresh = fresh_lines();
	bool same = kept && fresh && !strcmp(kept, fresh);
	if (!same)
		printf("# %s: kept:\n%s# fresh:\n%s", name, kept ? kept : "(null)\n",
		       fresh ? fresh : "(null)\n");
	CHECK(name, same);
	free(kept);
	free(fresh);
	return same;
}

static bool shows(const char *dir)
{
	char *kept = cgroup_mount_lines();
	char needle[PATH_MAX + 2];
	snprintf(needle, sizeof(needle), " %s ", dir);
	bool r = kept && strstr(kept, needle);
	free(kept);
	return r;
}

static bool write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok;
}

/* Close every descriptor from 3 up (the kept one among them) and open file at the freed
 * numbers, each at offset off; then unmount dir: the lookup must see that, and leave the
 * caller's descriptors as they were. */
static void reuse_numbers(const char *file, off_t off, const char *what, const char *dir)
{
	char name[200];
	syscall(SYS_close_range, 3U, ~0U, 0U);
	int fds[16], n = 0;
	for (; n < 16; n++)
		if ((fds[n] = open(file, O_RDONLY | O_CLOEXEC)) < 0 ||
		    lseek(fds[n], off, SEEK_SET) != off)
			break;
	umount2(dir, MNT_DETACH);
	snprintf(name, sizeof(name), "cgmounts: %s at the reused numbers: an unmount is seen",
	         what);
	CHECK(name, !shows(dir));
	snprintf(name, sizeof(name), "cgmounts: %s at the reused numbers: the table", what);
	same_as_fresh(name);
	bool intact = n == 16;
	for (int i = 0; i < n; i++)
		intact = intact && lseek(fds[i], 0, SEEK_CUR) == off && fcntl(fds[i], F_GETFD) >= 0;
	snprintf(name, sizeof(name), "cgmounts: %s at the reused numbers: left alone", what);
	CHECK(name, intact);
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

static int child(char *dir, const char *rdir)
{
	/* after the fork: the parent's switch is off here (its page emptied), so this process
	 * reads its own table, and leaves the parent's descriptor alone */
	same_as_fresh("cgmounts: a forked child reads its own table");

	/* a mount namespace of its own */
	uid_t uid = getuid();
	gid_t gid = getgid();
	int flags = CLONE_NEWNS | CLONE_NEWCGROUP | (uid ? CLONE_NEWUSER : 0);
	if (unshare(flags) < 0) {
		if (uid && !getenv("CORRAL_MUST_WORK")) {
			printf(
			    "SKIP cgmounts: unshare(CLONE_NEWUSER): %s: this host refuses "
			    "unprivileged user namespaces, which uid %u needs to mount a cgroup2 "
			    "here\n",
			    strerror(errno), (unsigned)uid);
			return 0;
		}
		printf("FAIL cgmounts: unshare: %s\n", strerror(errno));
		return 1;
	}
	if (uid) {
		char map[64];
		snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)uid);
		write_file("/proc/self/setgroups", "deny");
		write_file("/proc/self/uid_map", map);
		snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)gid);
		write_file("/proc/self/gid_map", map);
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		printf("FAIL cgmounts: private mounts or the mount point: %s\n", strerror(errno));
		return 1;
	}
	/* From here this process keeps its lines, as a server does; read before the mount. */
	cgroup_keep_mounts(true);
	same_as_fresh("cgmounts: kept in the new namespace");
	if (mount("none", dir, "cgroup2", 0, NULL) < 0) {
		printf("FAIL cgmounts: mount cgroup2 on %s: %s\n", dir, strerror(errno));
		return 1;
	}
	CHECK("cgmounts: a cgroup2 mounted after the lines were kept is seen", shows(dir));
	same_as_fresh("cgmounts: the table after the mount");
	umount2(dir, MNT_DETACH);
	CHECK("cgmounts: an unmounted cgroup2 is gone", !shows(dir));
	same_as_fresh("cgmounts: the table after the unmount");

	/* Another mount namespace, entered after the lines were kept: its mount is not reported
	 * on the kept descriptor (that is the old namespace's). */
	CHECK("cgmounts: kept before the second namespace", !shows(dir));
	if (unshare(CLONE_NEWNS) < 0 || mount("none", dir, "cgroup2", 0, NULL) < 0) {
		printf("FAIL cgmounts: a second mount namespace and mount: %s\n", strerror(errno));
		return 1;
	}
	CHECK("cgmounts: a cgroup2 mounted in a newer mount namespace is seen", shows(dir));

	/* A fork that looks after a change: it must neither use the kept descriptor nor take its
	 * poll's report of the change from this process. */
	umount2(dir, MNT_DETACH);
	fflush(stdout);
	pid_t gc = fork();
	if (gc == 0)
		_exit(shows(dir) ? 1 : 0);
	int gst = 0;
	CHECK("cgmounts: a forked child sees the unmount",
	      gc > 0 && waitpid(gc, &gst, 0) == gc && WIFEXITED(gst) && WEXITSTATUS(gst) == 0);
	CHECK("cgmounts: ... and so does its parent after it", !shows(dir));
	mount("none", dir, "cgroup2", 0, NULL);
	CHECK("cgmounts: mounted again, it is seen again", shows(dir));

	/* A caller that closes every descriptor it did not open and opens other files at the
	 * reused numbers, left where the kept one was (another file at the same offset), then
	 * the same file: the next lookup must neither read, poll nor close those. */
	char *all = NULL;
	size_t len = 0;
	FILE *f = fopen("/proc/thread-self/mountinfo", "r");
	while (f && getline(&all, &len, f) > 0)
		;
	off_t off = f ? ftello(f) : -1;
	if (f)
		fclose(f);
	free(all);
	CHECK("cgmounts: the table's size", off > 0);
	reuse_numbers("/etc/passwd", off, "another file at the kept offset", dir);
	mount("none", dir, "cgroup2", 0, NULL);
	CHECK("cgmounts: mounted again, it is seen again (2)", shows(dir));
	reuse_numbers("/proc/thread-self/mountinfo", 0, "the same file", dir);

	cgroup_keep_mounts(false);
	mount("none", dir, "cgroup2", 0, NULL);
	CHECK("cgmounts: no longer kept, a mount is seen", shows(dir));
	umount2(dir, MNT_DETACH);

	/* Another root: mountinfo's paths are the reader's, and a chroot shows only the mounts
	 * beneath it (here /proc, bound in, and no cgroup): the lines kept before name others. */
	char proc[PATH_MAX];
	snprintf(proc, sizeof(proc), "%s/proc", rdir);
	if (mkdir(proc, 0755) < 0 || mount("/proc", proc, NULL, MS_BIND | MS_REC, NULL) < 0) {
		printf("FAIL cgmounts: /proc bound into %s: %s\n", rdir, strerror(errno));
		return 1;
	}
	cgroup_keep_mounts(true);
	same_as_fresh("cgmounts: kept before the chroot");
	if (chroot(rdir) < 0 || chdir("/") < 0) {
		printf("FAIL cgmounts: chroot %s: %s\n", rdir, strerror(errno));
		return 1;
	}
	same_as_fresh("cgmounts: after a chroot, the new root's lines");
	cgroup_keep_mounts(false);
	return t_failed ? 1 : 0;
}

void test_cgmounts(void)
{
	same_as_fresh("cgmounts: not kept, the lines are the table's");
	/* the parent keeps its lines, so the child starts with them (and their descriptor) */
	cgroup_keep_mounts(true);
	same_as_fresh("cgmounts: kept, the lines are the table's");
	same_as_fresh("cgmounts: kept, the same again");
	char dir[] = "/tmp/corral-unit-cgm-XXXXXX", rdir[] = "/tmp/corral-unit-cgr-XXXXXX";
	if (!mkdtemp(dir) || !mkdtemp(rdir)) {
		printf("FAIL cgmounts: mkdtemp in /tmp: %s\n", strerror(errno));
		t_failed++;
		return;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		int r = child(dir, rdir);
		fflush(stdout);
		_exit(r);
	}
	int st = 0;
	CHECK("cgmounts: the child's checks passed",
	      pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	char proc[PATH_MAX];
	snprintf(proc, sizeof(proc), "%s/proc", rdir);
	rmdir(proc);
	rmdir(rdir);
	rmdir(dir);
	/* the parent's own table did not change, and its kept descriptor still works */
	same_as_fresh("cgmounts: the parent's lines after the child");
	cgroup_keep_mounts(false);
}
