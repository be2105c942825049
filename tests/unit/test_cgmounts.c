/* The cgroup mounts the cgroup layout is found from, kept while the mount table is unchanged
 * (cgroup_mount_lines, src/sandbox/cgroup.c): each case where the kept lines would be wrong
 * is made to happen, and the answer compared with what /proc/self/mountinfo says then. In a
 * child process: it forks (the kept descriptor is shared with the parent), enters a mount
 * namespace of its own (a user and cgroup namespace too, so that uid 65534 may mount a
 * cgroup2 there), mounts and unmounts a cgroup2, forks again to look after a change, and
 * closes every descriptor it did not open to reuse the numbers. Each of the checks of
 * cgroup.c (the namespace, the poll, the process, the descriptor's identity) left out fails
 * some of these. */
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
	FILE *f = fopen("/proc/self/mountinfo", "r");
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

static int child(void)
{
	/* after the fork: the parent's kept descriptor is this process's too */
	same_as_fresh("cgmounts: a forked child reads its own table");

	/* a mount namespace of its own; the lines kept were read in the parent's */
	uid_t uid = getuid();
	gid_t gid = getgid();
	int flags = CLONE_NEWNS | CLONE_NEWCGROUP | (uid ? CLONE_NEWUSER : 0);
	if (unshare(flags) < 0) {
		printf("FAIL cgmounts: unshare: %s (user namespaces are available on this "
		       "machine kind)\n",
		       strerror(errno));
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
	char dir[] = "/tmp/corral-unit-cgm-XXXXXX";
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 || !mkdtemp(dir)) {
		printf("FAIL cgmounts: private mounts or the mount point: %s\n", strerror(errno));
		return 1;
	}
	if (mount("none", dir, "cgroup2", 0, NULL) < 0) {
		printf("FAIL cgmounts: mount cgroup2 on %s: %s\n", dir, strerror(errno));
		rmdir(dir);
		return 1;
	}
	/* no lookup since the unshare: only the namespace's identity says the lines are old */
	CHECK("cgmounts: a cgroup2 mounted in a new mount namespace is seen", shows(dir));
	same_as_fresh("cgmounts: the new namespace's table");

	/* the same namespace: the mount table's poll says it changed */
	umount2(dir, MNT_DETACH);
	CHECK("cgmounts: an unmounted cgroup2 is gone", !shows(dir));
	same_as_fresh("cgmounts: the table after the unmount");
	mount("none", dir, "cgroup2", 0, NULL);
	CHECK("cgmounts: mounted again, it is seen again", shows(dir));

	/* A fork that looks after a change: the descriptor's poll state is shared, so its look
	 * must not take the change from this process's next look. */
	umount2(dir, MNT_DETACH);
	fflush(stdout);
	pid_t gc = fork();
	if (gc == 0) {
		bool gone = !shows(dir);
		_exit(gone ? 0 : 1);
	}
	int gst = 0;
	CHECK("cgmounts: a forked child sees the unmount",
	      gc > 0 && waitpid(gc, &gst, 0) == gc && WIFEXITED(gst) && WEXITSTATUS(gst) == 0);
	CHECK("cgmounts: ... and so does its parent after it", !shows(dir));
	mount("none", dir, "cgroup2", 0, NULL);
	CHECK("cgmounts: mounted again, it is seen again (2)", shows(dir));

	/* A caller that closes every descriptor it did not open, and reuses the numbers: the
	 * next lookup must neither read nor close what now has the kept one's number. */
	syscall(SYS_close_range, 3U, ~0U, 0U);
	int fds[16], n = 0;
	for (; n < 16; n++)
		if ((fds[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
			break;
	umount2(dir, MNT_DETACH);
	CHECK("cgmounts: after the descriptors were closed and reused, an unmount is seen",
	      !shows(dir));
	same_as_fresh("cgmounts: the table after the descriptors were reused");
	bool intact = n == 16;
	for (int i = 0; i < n; i++) {
		struct stat st;
		intact = intact && fstat(fds[i], &st) == 0 && S_ISCHR(st.st_mode) &&
		         st.st_rdev == makedev(1, 3);
	}
	CHECK("cgmounts: the caller's descriptors with reused numbers are left alone", intact);
	rmdir(dir);
	return t_failed ? 1 : 0;
}

void test_cgmounts(void)
{
	/* the parent keeps its lines first, so the child starts with them */
	same_as_fresh("cgmounts: the kept lines are the table's");
	same_as_fresh("cgmounts: kept, the same again");
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		_exit(child());
	int st = 0;
	CHECK("cgmounts: the child's checks passed",
	      pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* the parent's own table did not change, and its kept descriptor still works */
	same_as_fresh("cgmounts: the parent's lines after the child");
}
