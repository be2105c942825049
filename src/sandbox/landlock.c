/* Landlock: an unprivileged, stackable access-control layer applied by the sandbox child on
 * top of the mount namespace. The mount namespace decides what the sandbox can see; Landlock
 * decides what it may do with what it sees, and keeps holding if a mount is ever got wrong.
 *
 * Model: a ruleset "handles" a set of access rights; every handled right is denied unless a
 * rule grants it beneath some path. So a deny is simply the absence of a rule: there is no
 * deny rule, and a path nobody listed (/root, /home, /proc) gets no handled right at all.
 * Rights that are not handled stay allowed, which is why we handle every right the ABI knows.
 *
 * Debian 12's <linux/landlock.h> describes ABI 2 only, while the kernels we run on offer more,
 * so the newer constants are defined here and the ruleset attribute has a local definition
 * (the kernel accepts a shorter struct from older callers and a longer one whose extra bytes
 * are zero, so we pass exactly the fields the chosen ABI understands).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/openat2.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/sandbox.h"

/* The landlock syscall numbers are the same on every architecture. */
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef __NR_landlock_add_rule
#define __NR_landlock_add_rule 445
#endif
#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif

#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13) /* ABI 2 */
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0) /* ABI 4 */
#endif
#ifndef LANDLOCK_ACCESS_NET_CONNECT_TCP
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1) /* ABI 4 */
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1) /* ABI 6 */
#endif

/* struct landlock_ruleset_attr as of ABI 6; the system header may stop after the first
 * field, hence a name of our own. */
struct ll_ruleset_attr {
	uint64_t handled_access_fs;  /* ABI 1 */
	uint64_t handled_access_net; /* ABI 4 */
	uint64_t scoped;             /* ABI 6 */
};

#define LL_FS_ABI1                                                                                 \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |                              \
	 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |                              \
	 LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |                          \
	 LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |                              \
	 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |                              \
	 LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |                            \
	 LANDLOCK_ACCESS_FS_MAKE_SYM)

/* Rights that make sense on a single file (not a directory). Adding a file rule with any
 * other right fails with EINVAL. */
#define LL_FS_FILE_RIGHTS                                                                          \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |                              \
	 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |                              \
	 LANDLOCK_ACCESS_FS_IOCTL_DEV)

/* What LL_WRITE grants. Two creation rights are handled (so denied everywhere) but never
 * granted:
 * - MAKE_BLOCK: a block device node is a door to raw disks. mknod of one needs CAP_MKNOD in
 *   the initial namespace anyway, but this layer must hold even if another one fails.
 * - MAKE_CHAR: the same for character devices; the one node an unprivileged process may
 *   create is an overlayfs whiteout (0:0), and nothing in a sandbox needs that.
 * REFER is what lets a file be linked or renamed into a different directory. Landlock only
 * allows that when the destination hierarchy grants no right the source one lacks, so a
 * file cannot gain rights by being moved; and with REFER absent on either side such a move
 * fails with EXDEV (tools like mv then fall back to copy + unlink). Renames inside one
 * directory need no REFER. */
#define LL_FS_WRITE_RIGHTS                                                                         \
	(LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |                           \
	 LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_DIR |                            \
	 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |                              \
	 LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_SYM | LANDLOCK_ACCESS_FS_REFER |   \
	 LANDLOCK_ACCESS_FS_TRUNCATE)

int landlock_probe_abi(void)
{
	/* -1: not probed yet. A race between threads only repeats the same answer. */
	static int cached = -1;
	int abi = __atomic_load_n(&cached, __ATOMIC_RELAXED);

	if (abi >= 0)
		return abi;
	abi = (int)syscall(__NR_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	/* ENOSYS: kernel without Landlock; EOPNOTSUPP: built in but disabled at boot (lsm=). */
	if (abi < 0)
		abi = 0;
	__atomic_store_n(&cached, abi, __ATOMIC_RELAXED);
	return abi;
}

static uint64_t handled_fs_for_abi(int abi)
{
	uint64_t fs = LL_FS_ABI1;

	if (abi >= 2)
		fs |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return fs;
}

static uint64_t rights_for_rule(unsigned access)
{
	uint64_t r = 0;

	if (access & LL_READ)
		r |= LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
	if (access & LL_WRITE)
		r |= LL_FS_WRITE_RIGHTS;
	if (access & LL_EXEC)
		r |= LANDLOCK_ACCESS_FS_EXECUTE;
	if (access & LL_DEV)
		r |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	if (access & LL_LIST)
		r |= LANDLOCK_ACCESS_FS_READ_DIR;
	return r;
}

/* Add one path_beneath rule. Returns 0 (also when the path does not exist or nothing of the
 * rule applies at this ABI) or -errno. */
static int add_path_rule(int ruleset_fd, const struct landlock_rule *rule, uint64_t handled_fs)
{
	struct landlock_path_beneath_attr attr = {0};
	struct stat st;
	int fd, ret = 0;

	/* O_PATH follows symlinks, so a rule on /bin covers /usr/bin when /bin is a link; the
	 * rule binds to the inode (and mount) reached now, not to the string. A rule made from
	 * a directory's entries follows none, anywhere on its path: an entry that has become a
	 * symlink since the plan was made (another sandbox in the same workspace) gets no rule. */
	if (rule->nofollow) {
		struct open_how how = {.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW,
		                       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
		fd = (int)syscall(SYS_openat2, AT_FDCWD, rule->path, &how, sizeof(how));
		if (fd < 0)
			return errno == ENOENT || errno == ELOOP ? 0 : -errno;
	} else {
		fd = (int)open(rule->path, O_PATH | O_CLOEXEC);
		if (fd < 0)
			return errno == ENOENT ? 0 : -errno;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		goto out;
	}
	if (S_ISLNK(st.st_mode))
		goto out; /* O_NOFOLLOW on the last component: the symlink itself */
	attr.allowed_access = rights_for_rule(rule->access) & handled_fs;
	if (!S_ISDIR(st.st_mode))
		attr.allowed_access &= LL_FS_FILE_RIGHTS;
	/* An empty rule is refused (ENOMSG); e.g. LL_DEV alone below ABI 5 grants nothing. */
	if (attr.allowed_access == 0)
		goto out;
	attr.parent_fd = fd;
	if (syscall(__NR_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &attr, 0) < 0)
		ret = -errno;
out:
	close(fd);
	return ret;
}

int landlock_prepare_child(const struct landlock_spec *spec, int *failed_rule)
{
	struct ll_ruleset_attr attr = {0};
	size_t attr_size = sizeof(attr.handled_access_fs);
	int ruleset_fd, ret = 0;

	if (failed_rule)
		*failed_rule = -1;
	if (!spec || spec->abi <= 0 || (spec->n_rules && !spec->rules))
		return -EINVAL;

	attr.handled_access_fs = handled_fs_for_abi(spec->abi);
	if (spec->abi >= 4 && spec->deny_tcp) {
		/* Handled with no net_port rule at all: every TCP bind and connect is denied
		 * (EACCES). UDP and other protocols are not covered; the network namespace
		 * is what isolates those. */
		attr.handled_access_net =
		    LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
		attr_size = offsetof(struct ll_ruleset_attr, scoped);
	}
	if (spec->abi >= 6 && spec->scope) {
		/* Abstract unix sockets and signals may only reach processes inside this
		 * domain (or a nested one): no connecting to a host daemon's @socket, no
		 * signalling the supervisor or anyone else outside. */
		attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
		attr_size = sizeof(attr);
	}

	ruleset_fd = (int)syscall(__NR_landlock_create_ruleset, &attr, attr_size, 0);
	if (ruleset_fd < 0)
		return -errno;

	/* The paths are opened here, in the child, after pivot_root: they must name what the
	 * sandbox sees, and the parent cannot open them before the new root exists. */
	for (size_t i = 0; i < spec->n_rules; i++) {
		ret = add_path_rule(ruleset_fd, &spec->rules[i], attr.handled_access_fs);
		if (ret < 0) {
			if (failed_rule)
				*failed_rule = (int)i;
			close(ruleset_fd);
			return ret;
		}
	}
	return ruleset_fd;
}

int landlock_restrict_child(int ruleset_fd)
{
	/* restrict_self needs no_new_privs or CAP_SYS_ADMIN in the current user namespace, so
	 * an unprivileged process cannot confuse a setuid program it execs. launch.c runs this
	 * in the command process after the fork, when no_new_privs is set and the capabilities
	 * are gone, so the sandbox's init stays outside the domain. No flags: with ABI 7 the
	 * defaults log denials of this domain until the next exec, which is what we want.
	 * The domain covers this thread only; the child is single-threaded here, and every
	 * process it later creates inherits it. */
	if (syscall(__NR_landlock_restrict_self, ruleset_fd, 0) < 0)
		return -errno;
	return 0;
}

int landlock_apply_child(const struct landlock_spec *spec, int *failed_rule)
{
	int fd = landlock_prepare_child(spec, failed_rule);
	if (fd < 0)
		return fd;
	int ret = landlock_restrict_child(fd);
	close(fd);
	return ret;
}
