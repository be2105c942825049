/* User namespace: the parent writes the id maps of the child. */
#include "sandbox/sandbox.h"
#include "util.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static int write_file(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, data, strlen(data));
	int saved = errno;
	close(fd);
	if (n < 0)
		return -saved;
	return n == (ssize_t)strlen(data) ? 0 : -EIO;
}

/* The caller's ids map to themselves, so files in the workspace keep their owner and the
 * command runs as the caller. For root that means kuid 0 inside: the mount plan (no secrets
 * mounted, everything but the workspace and /tmp read-only, /proc/sys read-only), Landlock and
 * the dropped capabilities are what keep root-owned host files out of reach (docs/DESIGN.md). */
int userns_write_maps(pid_t pid, uid_t uid, gid_t gid, const char **failed_file)
{
	char path[64], map[64];
	int r;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	if ((r = write_file(path, map)) < 0) {
		*failed_file = "uid_map";
		return r;
	}
	/* setgroups must be denied before an unprivileged gid_map write; it also stops the
	 * sandbox from dropping supplementary groups to get around "deny" ACL entries. */
	snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
	if ((r = write_file(path, "deny")) < 0 && r != -ENOENT) {
		*failed_file = "setgroups";
		return r;
	}
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
	if ((r = write_file(path, map)) < 0) {
		*failed_file = "gid_map";
		return r;
	}
	return 0;
}

int userns_probe(char *why, size_t whylen)
{
	/* The only honest probe is to try: sysctls, AppArmor (Ubuntu 24.04) and seccomp policies
	 * of container runtimes all get a say. */
	pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid == 0)
		_exit(0);
	if (pid < 0) {
		int e = errno;
		FILE *f = fopen("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "re");
		int aa = 0;
		if (f) {
			if (fscanf(f, "%d", &aa) != 1)
				aa = 0;
			fclose(f);
		}
		if (aa)
			snprintf(why, whylen,
			         "user namespaces are restricted by AppArmor (%s); allow them with "
			         "'sysctl kernel.apparmor_restrict_unprivileged_userns=0' or an AppArmor "
			         "profile granting 'userns,' to corral, or run with --mode=auto",
			         strerror(e));
		else
			snprintf(why, whylen,
			         "cannot create a user namespace (%s); check the sysctls "
			         "user.max_user_namespaces and kernel.unprivileged_userns_clone, or run "
			         "with --mode=auto",
			         strerror(e));
		return 0;
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	snprintf(why, whylen, "available");
	return 1;
}

/* Can a sandbox mount a fresh /proc here? Inside a container whose /proc has covered parts
 * the kernel refuses (a procfs may only be mounted where an existing one is fully visible).
 * Tried for real in a throwaway child: user, mount and pid namespaces, then the mount. */
int userns_probe_proc(char *why, size_t whylen)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(why, whylen, "fork: %s", strerror(errno));
		return 0;
	}
	if (pid == 0) {
		char map[64];
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) < 0)
			_exit(2);
		snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
		if (write_file("/proc/self/uid_map", map) < 0)
			_exit(2);
		write_file("/proc/self/setgroups", "deny");
		snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
		if (write_file("/proc/self/gid_map", map) < 0)
			_exit(2);
		pid_t inner = fork(); /* pid 1 of the new pid namespace */
		if (inner == 0) {
			if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
				_exit(2);
			_exit(mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0
			              ? (errno == EPERM ? 3 : 2)
			              : 0);
		}
		int st;
		if (inner < 0 || waitpid(inner, &st, 0) < 0 || !WIFEXITED(st))
			_exit(2);
		_exit(WEXITSTATUS(st));
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : 2;
	if (code == 0) {
		snprintf(why, whylen, "a fresh /proc can be mounted");
		return 1;
	}
	snprintf(why, whylen,
	         code == 3 ? "the kernel refuses a fresh /proc: this host's /proc has parts covered "
	                     "by other mounts (a container or another sandbox)"
	                   : "could not test (no user namespaces)");
	return 0;
}
