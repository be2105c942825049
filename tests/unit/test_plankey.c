/* The plan key (launch_plan_key, DESIGN §18): the same for the same host, and another when a
 * system file the sandbox binds is replaced. The replacement is made in a user and mount
 * namespace of the test's own (a bind over /etc/passwd), so the host is not touched. */
#include "hcache.h"
#include "internal.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
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

/* The key with the host cache (hcache.h) against the key without, after a change to the
 * host: the same outcome (the same key, or the same error), and whether the key moved. */
struct keys {
	int rc, code;
	uint8_t k[32];
};

static void key_of(corral_config *cfg, struct hcache *hc, struct keys *out)
{
	struct corral_error err = {0};
	out->rc = launch_plan_key(cfg, hc, out->k, &err);
	out->code = out->rc < 0 ? err.code : 0;
	if (out->rc < 0)
		memset(out->k, 0, sizeof(out->k));
}

/* moved: 1 the key must differ from prev, 0 it must equal it, -1 either */
static void cached_step(corral_config *cfg, struct hcache *hc, const char *what, int change,
                        int moved, struct keys *prev)
{
	struct keys kc, kr;
	key_of(cfg, hc, &kc);
	key_of(cfg, NULL, &kr);
	char name[200];
	snprintf(name, sizeof(name), "plan key with the host cache: %s: as without it", what);
	CHECK(name, change == 0 && kc.rc == kr.rc && kc.code == kr.code && !memcmp(kc.k, kr.k, 32));
	if (moved >= 0) {
		bool differs = kc.rc != prev->rc || memcmp(kc.k, prev->k, 32) != 0;
		snprintf(name, sizeof(name), "plan key with the host cache: %s: %s", what,
		         moved ? "another key" : "the same key");
		CHECK(name, differs == (moved == 1));
	}
	*prev = kc;
}

static void in_ws(const char *ws, const char *rel, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "%s/%s", ws, rel);
}

static void cached_keys(corral_config *cfg, const char *ws, const char *alt)
{
	struct hcache *hc = hcache_new();
	CHECK("plan key with the host cache: made", hc != NULL);
	if (!hc)
		return;
	char a[PATH_MAX], b[PATH_MAX];
	struct keys base, prev;
	cached_step(cfg, hc, "as the host is", 0, -1, &prev);
	base = prev;
	struct hcache_stats s0, s1;
	hcache_stats(hc, &s0);
	cached_step(cfg, hc, "again", 0, 0, &prev);
	hcache_stats(hc, &s1);
	CHECK("plan key with the host cache: the second key is taken from the cache",
	      s1.hits > s0.hits + 50 && s1.misses - s0.misses < 20);
	in_ws(ws, ".vscode", a);
	cached_step(cfg, hc, "a .vscode made", mkdir(a, 0755), 1, &prev);
	cached_step(cfg, hc, "and removed", rmdir(a), -1, &prev);
	CHECK("plan key with the host cache: back to the first key", !memcmp(prev.k, base.k, 32));
	in_ws(ws, ".git", a);
	in_ws(ws, ".git/hooks", b);
	cached_step(cfg, hc, "a .git with hooks made", mkdir(a, 0755) | mkdir(b, 0755), 1, &prev);
	char old[PATH_MAX];
	in_ws(ws, ".git/hooks.old", old);
	cached_step(cfg, hc, ".git/hooks replaced", rename(b, old) | mkdir(b, 0755), 1, &prev);
	cached_step(cfg, hc, "/etc/passwd another file (a bind)",
	            mount(alt, "/etc/passwd", NULL, MS_BIND, NULL), 1, &prev);
	cached_step(cfg, hc, "/etc/passwd back", umount("/etc/passwd"), 1, &prev);
	in_ws(ws, ".claude", a);
	cached_step(cfg, hc, "a symlink planted at .claude", symlink("/tmp", a), 1, &prev);
	CHECK("plan key with the host cache: the planted symlink refuses the plan",
	      prev.rc < 0 && prev.code == CORRAL_EDENIED);
	cached_step(cfg, hc, "the symlink removed", unlink(a), 1, &prev);
	snprintf(a, sizeof(a), "%s.old", ws);
	cached_step(cfg, hc, "the workspace replaced", rename(ws, a) | mkdir(ws, 0700), 1, &prev);
	cached_step(cfg, hc, "the first workspace back", rmdir(ws) | rename(a, ws), 1, &prev);
	hcache_free(hc);
	in_ws(ws, ".git/hooks", b);
	rmdir(b);
	rmdir(old);
	in_ws(ws, ".git", a);
	rmdir(a);
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
	if (launch_plan_key(cfg, NULL, k1, &err) < 0 || launch_plan_key(cfg, NULL, k2, &err) < 0) {
		printf("  launch_plan_key: %s\n", err.message);
		return K_KEY;
	}
	if (memcmp(k1, k2, 32))
		return K_UNSTABLE;
	if (mount(alt, "/etc/passwd", NULL, MS_BIND, NULL) < 0)
		return K_BIND;
	if (launch_plan_key(cfg, NULL, k3, &err) < 0)
		return K_KEY;
	if (!memcmp(k1, k3, 32))
		return K_SAME_AFTER_BIND;
	if (umount("/etc/passwd") < 0 || launch_plan_key(cfg, NULL, k4, &err) < 0 ||
	    memcmp(k1, k4, 32))
		return K_NOT_BACK;
	cached_keys(cfg, ws, alt);
	corral_config_free(cfg);
	fflush(stdout);
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
