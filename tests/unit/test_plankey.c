/* The plan key (launch_plan_key, DESIGN §18): the same for the same host, and another when a
 * system file the sandbox binds is replaced. The replacement is made in a user and mount
 * namespace of the test's own (a bind over /etc/passwd), so the host is not touched. */
#include "internal.h"
#include "test.h"

#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

static int put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* exit status of the child: 0 ok, else which step failed */
enum { K_OK, K_NS, K_CFG, K_KEY, K_UNSTABLE, K_BIND, K_SAME_AFTER_BIND, K_NOT_BACK };

static int key_child(const char *ws, const char *alt)
{
	uid_t u = getuid();
	gid_t g = getgid();
	char map[64];
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return K_NS;
	snprintf(map, sizeof(map), "%u %u 1", (unsigned)u, (unsigned)u);
	if (put("/proc/self/setgroups", "deny") < 0 || put("/proc/self/uid_map", map) < 0)
		return K_NS;
	snprintf(map, sizeof(map), "%u %u 1", (unsigned)g, (unsigned)g);
	if (put("/proc/self/gid_map", map) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return K_NS;
	struct corral_error err = {0};
	corral_config *cfg = corral_config_new();
	const char *argv[] = {"/bin/true", NULL};
	if (!cfg || corral_config_set_argv(cfg, argv, &err) < 0 ||
	    corral_config_set_workspace(cfg, ws, &err) < 0)
		return K_CFG;
	uint8_t k1[32], k2[32], k3[32], k4[32];
	if (launch_plan_key(cfg, k1, &err) < 0 || launch_plan_key(cfg, k2, &err) < 0) {
		printf("  launch_plan_key: %s\n", err.message);
		return K_KEY;
	}
	if (memcmp(k1, k2, 32))
		return K_UNSTABLE;
	if (mount(alt, "/etc/passwd", NULL, MS_BIND, NULL) < 0)
		return K_BIND;
	if (launch_plan_key(cfg, k3, &err) < 0)
		return K_KEY;
	if (!memcmp(k1, k3, 32))
		return K_SAME_AFTER_BIND;
	if (umount("/etc/passwd") < 0 || launch_plan_key(cfg, k4, &err) < 0 || memcmp(k1, k4, 32))
		return K_NOT_BACK;
	corral_config_free(cfg);
	return K_OK;
}

void test_plankey(void)
{
	char ws[] = "/tmp/corral-unit-key-XXXXXX";
	char alt[] = "/tmp/corral-unit-passwd-XXXXXX";
	int afd = mkstemp(alt);
	if (!mkdtemp(ws) || afd < 0) {
		CHECK("plan key: scratch files", false);
		return;
	}
	close(afd);
	fflush(stdout);
	pid_t c = fork();
	if (c == 0)
		_exit(key_child(ws, alt));
	int st = 0;
	waitpid(c, &st, 0);
	int r = WIFEXITED(st) ? WEXITSTATUS(st) : 100;
	if (r == K_NS)
		printf(
		    "  (this host refuses a user namespace to an unprivileged process; the sandbox "
		    "needs one too)\n");
	CHECK("plan key: a user and mount namespace for the test", r != K_NS && r != K_BIND);
	CHECK("plan key: computed", r != K_CFG && r != K_KEY);
	CHECK("plan key: the same twice for the same host", r != K_UNSTABLE);
	CHECK("plan key: another once /etc/passwd is another file", r != K_SAME_AFTER_BIND);
	CHECK("plan key: the first again once the file is back", r == K_OK);
	unlink(alt);
	rmdir(ws);
}
