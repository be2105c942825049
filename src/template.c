/* The mount template's holder (DESIGN §18).
 *
 * Every sandbox of a host binds the same system tree: /usr, the /etc allow-list, /dev's
 * nodes, about forty mounts of a dozen system calls each, 1.3-1.5 ms of each launch's setup
 * on the 2-core machine. A server keeps one holder: a process in a user and mount namespace
 * of its own that builds that tree once, on a tmpfs it makes read-only at the superblock,
 * and hands out detached copies of it (open_tree(OPEN_TREE_CLONE | AT_RECURSIVE), passed
 * with SCM_RIGHTS). A sandbox's init attaches its copy as its new root in one move_mount
 * and does only its own mounts on top. A copy serves the plans with its template key
 * (tpl_key_compute: the tree's ops, the identity of every source, the targets it makes for
 * the plan's own ops); a launch whose key differs builds its whole tree, and a holder for
 * the new key replaces the old one. */
#include "internal.h"
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TPL_RETRY_MS 1000     /* after a failed holder, or a key change: no new one before */
#define TPL_MAX_FAILS 3       /* failed holders in a row: the template is off */
#define TPL_FIRST_WAIT_MS 100 /* the longest a launch waits for a new holder's first copy */

struct mtpl {
	pid_t pid;
	int pidfd, sock; /* pidfd >= 0: a holder runs (built, building, or failed unseen) */
	uint8_t key[32]; /* the running holder's */
	bool ready;      /* it has sent a copy */
	bool waited;     /* a launch has waited for its first copy */
	uint64_t retry_at, spawned_at;
	unsigned fails;
	bool off;
	char why[200]; /* the last failure */
};

struct mtpl *mtpl_new(void)
{
	struct mtpl *t = calloc(1, sizeof(*t));
	if (t) {
		t->pid = -1;
		t->pidfd = t->sock = -1;
	}
	return t;
}

static void holder_stop(struct mtpl *t)
{
	if (t->sock >= 0)
		close(t->sock); /* the copies still queued go with it */
	if (t->pidfd >= 0) {
		syscall(SYS_pidfd_send_signal, t->pidfd, SIGKILL, NULL, 0);
		siginfo_t si;
		while (waitid(P_PIDFD, (id_t)t->pidfd, &si, WEXITED | __WALL) < 0 && errno == EINTR)
			;
		close(t->pidfd);
	}
	t->sock = t->pidfd = -1;
	t->pid = -1;
	t->ready = t->waited = false;
}

void mtpl_free(struct mtpl *t)
{
	if (!t)
		return;
	holder_stop(t);
	free(t);
}

const char *mtpl_off_reason(const struct mtpl *t)
{
	return t && t->off ? t->why : NULL;
}

/* No descriptor left for a new holder's socket or pipe: the server's trouble, which passes;
 * not counted as the holder's failure (the template is not turned off for it). */
static bool no_room(struct mtpl *t, int e)
{
	if (e != EMFILE && e != ENFILE)
		return false;
	t->retry_at = mono_ms() + TPL_RETRY_MS;
	return true;
}

static void holder_failed(struct mtpl *t, const char *what, int e, int op)
{
	if (op >= 0)
		snprintf(t->why, sizeof(t->why), "%s: %s (mount op %d)", what, strerror(e), op);
	else
		snprintf(t->why, sizeof(t->why), "%s: %s", what, strerror(e));
	holder_stop(t);
	t->retry_at = mono_ms() + TPL_RETRY_MS;
	if (++t->fails >= TPL_MAX_FAILS)
		t->off = true;
}

int mtpl_take(struct mtpl *t, const uint8_t key[32])
{
	if (!t || t->off || t->pidfd < 0 || memcmp(key, t->key, 32))
		return -1;
	char msg[9];
	struct iovec iov = {msg, sizeof(msg)};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.buf;
	mh.msg_controllen = sizeof(u.buf);
	/* A holder that has not sent its first copy is building (a few milliseconds): the
	 * first launch waits for it, rather than build the same tree itself meanwhile (once: a
	 * holder that is slower than that does not slow every launch down). */
	if (!t->ready && !t->waited) {
		t->waited = true;
		struct pollfd pfd = {.fd = t->sock, .events = POLLIN};
		while (poll(&pfd, 1, TPL_FIRST_WAIT_MS) < 0 && errno == EINTR)
			;
	}
	ssize_t n;
	do
		n = recvmsg(t->sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return -1; /* still building */
	int fd = -1;
	struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	if (n == (ssize_t)sizeof(msg) && msg[0] == 'T' && fd >= 0) {
		t->fails = 0;
		t->ready = true;
		/* one more copy for the next launch (the holder makes it meanwhile) */
		if (send(t->sock, "c", 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
			/* gone: this copy still serves; the next take sees the EOF */
		}
		return fd;
	}
	if (n == (ssize_t)sizeof(msg) && msg[0] == 'T' && (mh.msg_flags & MSG_CTRUNC)) {
		/* A copy came without its descriptor: this process had none left (EMFILE). The
		 * server's trouble, not the holder's: not a failure, and another copy is asked
		 * for in place of the lost one. */
		if (send(t->sock, "c", 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
			/* gone: the next take sees the EOF */
		}
		return -1;
	}
	if (fd >= 0)
		close(fd);
	int32_t e = 0, op = -1;
	if (n == (ssize_t)sizeof(msg) && msg[0] == 'E') {
		memcpy(&e, msg + 1, sizeof(e));
		memcpy(&op, msg + 5, sizeof(op));
		holder_failed(t, "the template holder could not build the tree", e, op);
	} else {
		holder_failed(t, "the template holder ended", n < 0 ? errno : EPIPE, -1);
	}
	return -1;
}

/* The holder, in the clone: its own user and mount namespace (the parent writes the maps,
 * then a byte on sync). It keeps only its socket: the supervisor's other descriptors (a
 * server's stdio, other sandboxes' pipes, the audit store) would otherwise stay open as long
 * as it lives. */
static _Noreturn void holder_main(const struct launch *L, int sock, int sync)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* to 3 and 4 by way of numbers above both (either may be 3 or 4 already) */
	int s2 = fcntl(sock, F_DUPFD_CLOEXEC, 5), y2 = fcntl(sync, F_DUPFD_CLOEXEC, 5);
	if (s2 < 0 || y2 < 0 || dup3(s2, 3, O_CLOEXEC) < 0 || dup3(y2, 4, O_CLOEXEC) < 0)
		_exit(1);
	syscall(SYS_close_range, 5, ~0U, 0);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; fd < 3; fd++)
		if (null < 0 || dup2(null, fd) < 0)
			close(fd);
	if (null > 2)
		close(null);
	char c;
	/* EOF: the supervisor died before the maps (the death signal was not set yet) */
	if (read(4, &c, 1) != 1)
		_exit(1);
	close(4);
	prctl(PR_SET_NAME, "corral-template");
	prctl(PR_SET_DUMPABLE, 0);
	mount_template_child(&L->mounts, 3);
}

void mtpl_offer(struct mtpl *t, const struct launch *L, const uint8_t key[32])
{
	if (!t || t->off)
		return;
	uint64_t now = mono_ms();
	if (t->pidfd >= 0 && !memcmp(key, t->key, 32))
		return; /* this key's holder is building */
	if (now < t->retry_at)
		return;
	/* a new key replaces the holder, but not more often than TPL_RETRY_MS: plans that
	 * alternate would otherwise rebuild at every launch */
	if (t->pidfd >= 0 && now < t->spawned_at + TPL_RETRY_MS)
		return;
	holder_stop(t);
	int sv[2], sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		if (!no_room(t, errno))
			holder_failed(t, "socketpair", errno, -1);
		return;
	}
	if (pipe2(sp, O_CLOEXEC) < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		if (!no_room(t, e))
			holder_failed(t, "pipe", e, -1);
		return;
	}
	struct clone_args args;
	memset(&args, 0, sizeof(args));
	int pidfd = -1;
	args.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_PIDFD;
	args.pidfd = (uint64_t)(uintptr_t)&pidfd;
	args.exit_signal = 0; /* waited for through the pidfd, like the sandboxes */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0 && errno == ENOSYS) /* clone3 missing (or filtered: valgrind) */
		pid = (pid_t)syscall(SYS_clone,
		                     (unsigned long)(CLONE_NEWUSER | CLONE_NEWNS | CLONE_PIDFD),
		                     NULL, &pidfd, NULL, NULL);
	if (pid == 0)
		holder_main(L, sv[1], sp[0]);
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	close(sv[1]);
	close(sp[0]);
	t->sock = sv[0];
	if (pid < 0) {
		close(sp[1]);
		holder_failed(t, "clone of the template holder", e, -1);
		return;
	}
	/* a clone without CLONE_PIDFD: not kept, as it could not be waited for */
	if (pidfd < 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
			;
		close(sp[1]);
		holder_failed(t, "clone of the template holder", ENOSYS, -1);
		return;
	}
	t->pid = pid;
	t->pidfd = pidfd;
	memcpy(t->key, key, 32);
	t->spawned_at = now;
	const char *which = "";
	int r = userns_write_maps(pid, L->uid, L->gid, &which);
	if (r < 0 || write(sp[1], "x", 1) != 1) {
		close(sp[1]);
		holder_failed(t, "writing the template holder's maps", r < 0 ? -r : errno, -1);
		return;
	}
	close(sp[1]);
}
