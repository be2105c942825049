/* Launch: prepare everything in the parent, clone3 the sandbox, run the ordered setup
 * sequence in the child, and start the command under a tiny init.
 *
 * Process model: supervisor (the caller) -> init (the cloned child; pid 1 of the new pid
 * namespace) -> command. The init carries out the setup steps, forks the command, reaps
 * every process in the sandbox, forwards SIGTERM/SIGINT/SIGHUP to the command's process group,
 * and when the command exits kills whatever is left and reports the status on the report
 * pipe. Without a pid namespace (mode none, or auto on a host without user namespaces) the
 * init is a child subreaper and sweeps its descendants by walking /proc instead.
 *
 * After clone the child only makes raw system calls on memory prepared here: no malloc, no
 * stdio, no locks (the supervisor may be multithreaded).
 */
#include "internal.h"

#include <dirent.h>
#include <nettle/sha2.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

enum setup_step {
	STEP_NONE = 0,
	STEP_CLONE,
	STEP_USERNS,
	STEP_CGROUP,
	STEP_SYNC,
	STEP_FDS,
	STEP_SETSID,
	STEP_HOSTNAME,
	STEP_MOUNT,
	STEP_CWD,
	STEP_RLIMIT,
	STEP_LOOPBACK,
	STEP_NETNS,
	STEP_NNP,
	STEP_LANDLOCK,
	STEP_CAPS,
	STEP_SECCOMP,
	STEP_FORK,
	STEP_EXEC,
	STEP__COUNT
};

static const char *const step_names[STEP__COUNT] = {
    [STEP_NONE] = "",
    [STEP_CLONE] = "clone",
    [STEP_USERNS] = "userns",
    [STEP_CGROUP] = "cgroup",
    [STEP_SYNC] = "sync",
    [STEP_FDS] = "fds",
    [STEP_SETSID] = "setsid",
    [STEP_HOSTNAME] = "hostname",
    [STEP_MOUNT] = "mount",
    [STEP_CWD] = "cwd",
    [STEP_RLIMIT] = "rlimit",
    [STEP_LOOPBACK] = "loopback",
    [STEP_NETNS] = "netns",
    [STEP_NNP] = "no_new_privs",
    [STEP_LANDLOCK] = "landlock",
    [STEP_CAPS] = "caps",
    [STEP_SECCOMP] = "seccomp",
    [STEP_FORK] = "fork",
    [STEP_EXEC] = "exec",
};

const char *launch_step_name(int step)
{
	return step > 0 && step < STEP__COUNT ? step_names[step] : "setup";
}

/* Descriptor numbers in the child after the fd shuffle. */
enum {
	CFD_REPORT = 3,
	CFD_SYNC = 4,
	CFD_FD3 = 5,
	CFD_CTL = 6,
	CFD_TPL = 7,
	/* the network namespace the helper made (net_helper_main): taken after child_fds, which
	 * closes everything from CFD_FIRST_FREE on */
	CFD_NET = 8,
	CFD_FIRST_FREE = 8,
	CFD_N = 8
};

#include "hcache.h"
#include "launch.h"
/* ---- the child ------------------------------------------------------------------------ */

static void child_report(int fd, int kind, int step, int err, int detail, int status)
{
	struct report r = {
	    .kind = kind, .step = step, .err = err, .detail = detail, .status = status};
	ssize_t n;
	do
		n = write(fd, &r, sizeof(r));
	while (n < 0 && errno == EINTR);
}

/* Report a failed step on fd (the report pipe from the init, the exec pipe from the
 * command) and exit. */
static _Noreturn void fail_on(int fd, int step, int err, int detail, const char *path)
{
	if (fd < 0) {
		/* a job in a session: its stderr is its ring, so a line of text there */
		char msg[96] = "corral: the job could not start: ";
		size_t n = strlen(msg);
		const char *what = launch_step_name(step);
		for (size_t i = 0; what[i] && n < 70; i++)
			msg[n++] = what[i];
		const char *tail = ": errno ";
		for (size_t i = 0; tail[i]; i++)
			msg[n++] = tail[i];
		int e = err < 0 ? -err : err;
		char d[12];
		int nd = 0;
		do
			d[nd++] = (char)('0' + e % 10);
		while ((e /= 10) && nd < 11);
		while (nd)
			msg[n++] = d[--nd];
		msg[n++] = '\n';
		ssize_t w = write(2, msg, n);
		(void)w;
		_exit(step == STEP_EXEC ? (err == ENOENT || err == -ENOENT ? 127 : 126) : 125);
	}
	struct report r = {
	    .kind = REPORT_FAIL, .step = step, .err = err < 0 ? -err : err, .detail = detail};
	for (size_t i = 0; path && path[i] && i + 1 < sizeof(r.path); i++)
		r.path[i] = path[i];
	ssize_t n;
	do
		n = write(fd, &r, sizeof(r));
	while (n < 0 && errno == EINTR);
	_exit(step == STEP_EXEC ? (err == ENOENT || err == -ENOENT ? 127 : 126) : 125);
}

static _Noreturn void child_fail(int step, int err, int detail)
{
	fail_on(CFD_REPORT, step, err, detail, NULL);
}

/* Move the descriptors the child needs (stdin, stdout, stderr, report, sync, and for a
 * session the command's fd 3 and the init's control socket) to fixed numbers and close every
 * other one: the supervisor may hold pipes of other sandboxes, and an init that kept them
 * would keep those runs from ever seeing EOF.
 *
 * This runs on a copy of the supervisor's descriptor table under the supervisor's
 * RLIMIT_NOFILE, and both may be tight (a server with many runs in flight, a low ulimit -n):
 * so it needs no free descriptor number above the table's top. Everything but the wanted
 * ones is closed first, which makes room; then each one is moved out of 0..CFD_N-1 (to
 * CFD_FIRST_FREE or above) and into place. *report_fd follows the report pipe, so that a
 * failure here still reaches the supervisor (CFD_REPORT is some other descriptor until the
 * move is done). Absent optional descriptors (-1) stay closed. */
static int child_fds(const struct launch *L, int *report_fd)
{
	int src[CFD_N] = {L->fd_in,   L->fd_out, L->fd_err, L->fd_report,
	                  L->fd_sync, L->fd_fd3, L->fd_ctl, L->fd_tpl};
	int tmp[CFD_N];
	*report_fd = L->fd_report;
	/* close the gaps between the wanted ones (ascending; duplicates are harmless) */
	int sorted[CFD_N], ns = 0;
	for (int i = 0; i < CFD_N; i++)
		if (src[i] >= 0)
			sorted[ns++] = src[i];
	for (int i = 1; i < ns; i++)
		for (int k = i; k > 0 && sorted[k - 1] > sorted[k]; k--) {
			int t = sorted[k];
			sorted[k] = sorted[k - 1];
			sorted[k - 1] = t;
		}
	unsigned lo = 0;
	for (int i = 0; i < ns; i++) {
		if ((unsigned)sorted[i] > lo &&
		    syscall(SYS_close_range, lo, (unsigned)sorted[i] - 1, 0) < 0)
			return -errno;
		if ((unsigned)sorted[i] + 1 > lo)
			lo = (unsigned)sorted[i] + 1;
	}
	if (syscall(SYS_close_range, lo, ~0U, 0) < 0)
		return -errno;
	for (int i = 0; i < CFD_N; i++) {
		tmp[i] = src[i] < 0 ? -1 : fcntl(src[i], F_DUPFD_CLOEXEC, CFD_FIRST_FREE);
		if (src[i] >= 0 && tmp[i] < 0)
			return -errno;
	}
	*report_fd = tmp[3];
	for (int i = 0; i < CFD_N; i++) {
		if (tmp[i] < 0) {
			close(i);
			continue;
		}
		if (dup3(tmp[i], i, i >= 3 ? O_CLOEXEC : 0) < 0)
			return -errno;
	}
	*report_fd = CFD_REPORT;
	if (syscall(SYS_close_range, CFD_FIRST_FREE, ~0U, 0) < 0)
		return -errno;
	return 0;
}

/* Every disposition back to the default: none of the supervisor's handlers or ignored
 * signals (SIGPIPE, a nohup's SIGHUP) reach the sandbox. Done once by the init, which
 * installs none of its own (it takes its signals blocked, with sigwaitinfo, and the kernel
 * never discards a blocked signal), so the command and the jobs it forks start with them
 * (for a parked sandbox, before its command arrives). The command unblocks them all
 * (reset_signals: glibc's sigprocmask with an empty set clears 32 and 33 too). */
static void reset_dispositions(void)
{
	/* The kernel's struct, by raw system call: glibc's sigaction() refuses the two
	 * real-time signals it keeps for itself (32 and 33), and a caller may have them ignored
	 * too. The handler comes first and everything after it is zero, which reads the same
	 * whether the architecture's struct has a restorer field or not; SIG_DFL with no flags
	 * needs none. */
	struct {
		void (*handler)(int);
		unsigned long flags;
		void (*restorer)(void);
		uint64_t mask;
	} ka = {SIG_DFL, 0, NULL, 0};
	for (int s = 1; s < _NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			syscall(SYS_rt_sigaction, s, &ka, NULL, sizeof(ka.mask));
	/* The clone blocked every signal but those two (glibc will not block them either):
	 * block them too, so that the init takes no signal it does not wait for. */
	uint64_t all = ~0ULL;
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, sizeof(all));
}

/* The init's processes start with its dispositions (the defaults, see reset_dispositions)
 * and its mask (everything blocked): unblock. */
static void reset_signals(void)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* A session's init applies Landlock itself (see child_main), so that its shell and its jobs
 * share one domain and can signal each other; this process-local flag (set in the cloned
 * child only) tells the command and the jobs not to add a sibling domain of their own. */
static bool landlock_in_init;
/* A parked init loads the command's seccomp filter itself before it waits (DESIGN §18): the
 * kernel's work for it (checking, translating and caching the program: tens of microseconds)
 * is done before the call, and the command inherits the filter. Nothing the init does after
 * its setup needs a call the filter denies. */
static bool seccomp_in_init;
/* The command's Landlock ruleset, built by the init once its own setup is done (-1: none;
 * the command then builds it itself, as session jobs without one do). */
static int ll_ready_fd = -1;
/* Parked (DESIGN §18): the command that came on the sync pipe, instead of the plan's. */
static char park_buf[PARK_MAX_ARGV_BYTES];
static char *park_argv[PARK_MAX_ARGC + 1];

/* Landlock and seccomp, which bind the command and everything it starts. */
static void confine(const struct launch *L, int exec_fd)
{
	int r, detail = -1;
	/* Landlock and seccomp bind the command and everything it starts, but not the init:
	 * with Landlock's signal scoping the command cannot signal its init, which matters
	 * where there is no pid namespace to protect it. */
	if (L->landlock && !landlock_in_init) {
		r = ll_ready_fd >= 0 ? landlock_restrict_child(ll_ready_fd)
		                     : landlock_apply_child(&L->ll, &detail);
		if (r < 0)
			fail_on(exec_fd, STEP_LANDLOCK, r, detail,
			        detail >= 0 ? L->ll.rules[detail].path : "the ruleset");
	}
	/* seccomp last: it denies mount, setns and friends that the steps before used. */
	if (L->seccomp && !seccomp_in_init && (r = seccomp_apply_child(L->sc)) < 0)
		fail_on(exec_fd, STEP_SECCOMP, r, -1, NULL);
}

/* exec argv, searching PATH in the sandbox's view. */
static _Noreturn void exec_argv(const struct launch *L, char *const *argv, int exec_fd)
{
	const char *prog = argv[0];
	int err = ENOENT;
	bool has_slash = false;
	for (const char *p = prog; *p; p++)
		if (*p == '/')
			has_slash = true;
	/* ENOENT from an execve of a file that is there: its interpreter (the #! line's
	 * program, an ELF binary's loader) is missing; detail 1 says so */
	int detail = -1;
	if (has_slash) {
		execve(prog, argv, L->envp);
		err = errno;
		if (err == ENOENT && access(prog, F_OK) == 0)
			detail = 1;
	} else {
		bool eacces = false;
		for (char **d = L->path_dirs; *d; d++) {
			size_t a = strlen(*d), b = strlen(prog);
			if (a + b + 2 > PATH_MAX)
				continue;
			memcpy(L->exec_buf, *d, a);
			L->exec_buf[a] = '/';
			memcpy(L->exec_buf + a + 1, prog, b + 1);
			execve(L->exec_buf, argv, L->envp);
			if (errno == EACCES)
				eacces = true;
			else if (errno == ENOENT && detail < 0 && access(L->exec_buf, F_OK) == 0)
				detail = 1;
			else if (errno != ENOENT && errno != ENOTDIR) {
				err = errno;
				break;
			}
		}
		if (err == ENOENT && eacces)
			err = EACCES;
	}
	fail_on(exec_fd, STEP_EXEC, err, err == ENOENT ? detail : -1, NULL);
}

static _Noreturn void confine_and_exec(const struct launch *L, char *const *argv, int exec_fd)
{
	confine(L, exec_fd);
	exec_argv(L, argv, exec_fd);
}

static char *const *park_wait(void);

/* The command process: stdio in place, default signals, then exec. Any failure goes to
 * exec_fd, whose EOF tells the init that exec worked. */
static _Noreturn void command_exec(const struct launch *L, int exec_fd)
{
	if (L->cfg->tty) {
		/* A terminal session of its own: its stdin (a pty slave) becomes the controlling
		 * terminal, so the shell's job control and the terminal's Ctrl-C work. */
		if (setsid() < 0 || ioctl(0, TIOCSCTTY, 0) < 0)
			fail_on(exec_fd, STEP_SETSID, errno, -1, "the terminal");
	} else {
		/* Its own process group, so that signals reach pipelines and children as a
		 * unit. */
		setpgid(0, 0);
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* A session's out-of-band status descriptor: fd 3 of the shell, of nothing else. */
	if (L->fd_fd3 >= 0 && dup2(CFD_FD3, 3) < 0)
		fail_on(exec_fd, STEP_FDS, errno, -1, NULL);
	confine(L, exec_fd);
	/* Parked (DESIGN §18): this process is made with the sandbox, confined, and waits
	 * here for its command, so that a call's only work in the sandbox is the exec. */
	char *const *argv = L->argv;
	if (L->cfg->park) {
		/* the host sees a parked sandbox as corral-init and this (exec renames it) */
		prctl(PR_SET_NAME, "corral-parked");
		argv = park_wait();
	}
	if (!argv)
		fail_on(exec_fd, STEP_SYNC, EPIPE, -1, NULL);
	reset_signals();
	exec_argv(L, argv, exec_fd);
}

/* The command process is started the way posix_spawn starts one: it shares the init's
 * memory (CLONE_VM) on a stack of its own (CMD_STACK bytes, mapped by the init), and the
 * init waits (CLONE_VFORK) until it has exec'd or failed. Nothing of the init's address
 * space is copied for a process that only makes system calls before exec (the init is a
 * copy of the supervisor, megabytes of it). It has its own descriptor table, signal
 * handlers and credentials: what it changes there (stdio, its process group, Landlock,
 * seccomp) stays its own. */
struct cmd_start {
	const struct launch *L;
	int ep0, ep1;
};
#if defined(__SANITIZE_ADDRESS__)
#define CORRAL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CORRAL_ASAN 1
#endif
#endif
#ifndef CORRAL_ASAN
#define CORRAL_ASAN 0
#endif
#define CMD_STACK (128 * 1024)

static int command_start(void *arg)
{
	const struct cmd_start *cs = arg;
	close(cs->ep0);
	command_exec(cs->L, cs->ep1);
}

/* ---- jobs inside a running sandbox (sessions) -------------------------------------------
 * The supervisor sends CTL_START with a shell command and two descriptors (stdout, stderr)
 * on the control socket; the init forks the job under the same confinement as the command
 * (Landlock, seccomp, caps, rlimits, cgroup), in the shell's current directory, and reports
 * CTL_EXITED when it ends. CTL_SIGNAL signals a job's process group. */
#define INIT_MAX_JOBS 64
static struct {
	uint32_t id;
	pid_t pid;
} init_jobs[INIT_MAX_JOBS];
static char init_ctl_buf[sizeof(struct ctl_msg) + CTL_MAX_COMMAND + 1];

static void ctl_reply(int op, uint32_t id, int32_t arg)
{
	struct ctl_msg m = {.op = op, .id = id, .arg = arg, .len = 0};
	ssize_t n;
	do
		n = send(CFD_CTL, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
}

static _Noreturn void job_exec(const struct launch *L, pid_t shell, int ofd, int efd, char *cmd)
{
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (nul < 0 || dup2(nul, 0) < 0 || dup2(ofd, 1) < 0 || dup2(efd, 2) < 0)
		_exit(125);
	/* the shell's current directory, when /proc shows it; else the command's start */
	char path[40] = "/proc/", digits[16];
	int len = 6, nd = 0;
	for (pid_t v = shell; v > 0; v /= 10)
		digits[nd++] = (char)('0' + v % 10);
	while (nd)
		path[len++] = digits[--nd];
	memcpy(path + len, "/cwd", 5);
	if (chdir(path) < 0 && !L->mountns && L->cwd)
		(void)chdir(L->cwd);
	reset_signals();
	char *argv[] = {L->argv[0], (char *)"-c", cmd, NULL};
	/* failures: a line on the job's stderr and the status 125/126/127 */
	confine_and_exec(L, argv, -1);
}

static void ctl_drain(const struct launch *L, pid_t shell)
{
	for (;;) {
		char cbuf[CMSG_SPACE(2 * sizeof(int))];
		struct iovec iov = {.iov_base = init_ctl_buf, .iov_len = sizeof(init_ctl_buf) - 1};
		struct msghdr mh = {.msg_iov = &iov,
		                    .msg_iovlen = 1,
		                    .msg_control = cbuf,
		                    .msg_controllen = sizeof(cbuf)};
		ssize_t n = recvmsg(CFD_CTL, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		int fds[2] = {-1, -1}, nfds = 0;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
				int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
				for (int i = 0; i < k; i++) {
					int fd;
					memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
					if (nfds < 2)
						fds[nfds++] = fd;
					else
						close(fd);
				}
			}
		struct ctl_msg m;
		if ((size_t)n < sizeof(m)) {
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			continue;
		}
		memcpy(&m, init_ctl_buf, sizeof(m));
		if (m.op == CTL_SIGNAL) {
			for (int i = 0; i < INIT_MAX_JOBS; i++)
				if (init_jobs[i].pid > 0 && init_jobs[i].id == m.id)
					kill(-init_jobs[i].pid, m.arg);
		} else if (m.op == CTL_START) {
			int slot = -1;
			for (int i = 0; i < INIT_MAX_JOBS && slot < 0; i++)
				if (init_jobs[i].pid <= 0)
					slot = i;
			size_t clen = (size_t)n - sizeof(m);
			init_ctl_buf[sizeof(m) + clen] = 0;
			if (nfds != 2 || slot < 0 || m.len < 0 || (size_t)m.len != clen) {
				ctl_reply(CTL_START_FAILED, m.id,
				          nfds != 2  ? EBADF
				          : slot < 0 ? EAGAIN
				                     : EINVAL);
			} else {
				pid_t pid =
				    (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, NULL);
				if (pid == 0)
					job_exec(L, shell, fds[0], fds[1],
					         init_ctl_buf + sizeof(m));
				if (pid < 0) {
					ctl_reply(CTL_START_FAILED, m.id, errno);
				} else {
					init_jobs[slot].id = m.id;
					init_jobs[slot].pid = pid;
					ctl_reply(CTL_STARTED, m.id, (int32_t)pid);
				}
			}
		}
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
	}
}

/* Kill every other process of the sandbox. In a pid namespace kill(-1) means exactly that.
 * Without one, walk /proc for children of ours (we are their subreaper, so orphans come to
 * us) until none is left; a process forking while we walk is caught by the next round. The
 * walk reaps as it goes: the command's status, when it is among them, goes to *status (a
 * command killed by the supervisor's SIGUSR1 is reaped here, before its SIGCHLD is taken). */
static void init_kill_all(const struct launch *L, pid_t cmd, int *status)
{
	if (L->pidns) {
		kill(-1, SIGKILL);
		return;
	}
	pid_t self = getpid();
	char buf[4096], path[64];
	for (int round = 0; round < 100; round++) {
		/* No child at all (none running, none to reap, of any exit signal): then there is
		 * no descendant either, since an orphan comes to us. The usual end of a run, and
		 * it skips a read of every process's stat (about 1 ms on a host with 150). */
		siginfo_t si;
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT | __WALL) < 0 &&
		    errno == ECHILD)
			return;
		int found = 0;
		int dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			return;
		for (;;) {
			long n = syscall(SYS_getdents64, dfd, buf, sizeof(buf));
			if (n <= 0)
				break;
			for (long off = 0; off < n;) {
				struct dirent64 *de = (struct dirent64 *)(buf + off);
				off += de->d_reclen;
				pid_t pid = 0;
				const char *c = de->d_name;
				for (; *c >= '0' && *c <= '9'; c++)
					pid = pid * 10 + (*c - '0');
				if (*c || pid <= 0 || pid == self)
					continue;
				/* /proc/PID/stat: "pid (comm) S ppid ..."; comm may hold ')' */
				int len = 0;
				const char *pre = "/proc/";
				for (; pre[len]; len++)
					path[len] = pre[len];
				char digits[16];
				int nd = 0;
				for (pid_t v = pid; v; v /= 10)
					digits[nd++] = (char)('0' + v % 10);
				while (nd)
					path[len++] = digits[--nd];
				memcpy(path + len, "/stat", 6);
				int sfd = open(path, O_RDONLY | O_CLOEXEC);
				if (sfd < 0)
					continue;
				char st[512];
				ssize_t m = read(sfd, st, sizeof(st) - 1);
				close(sfd);
				if (m <= 0)
					continue;
				st[m] = 0;
				char *rp = NULL;
				for (char *q = st; *q; q++)
					if (*q == ')')
						rp = q;
				if (!rp || !rp[1] || !rp[2] || !rp[3])
					continue;
				pid_t ppid = 0;
				for (char *q = rp + 4; *q >= '0' && *q <= '9'; q++)
					ppid = ppid * 10 + (*q - '0');
				if (ppid == self) {
					kill(pid, SIGKILL);
					found++;
				}
			}
		}
		close(dfd);
		int st;
		pid_t p;
		while ((p = waitpid(-1, &st, WNOHANG)) > 0)
			if (p == cmd && status)
				*status = st;
		if (!found)
			return;
	}
}

/* The init's /proc is the outer one (mode auto in a container that refuses a fresh /proc):
 * /proc/PID there names another process than the command's PID, so the init asks it
 * nothing about the command. */
static bool init_outer_proc;

/* Read /proc/PID/NAME of the command into buf, NUL-terminated (async-signal-safe: the init
 * is a forked copy). False when it cannot be read. */
static bool read_proc(pid_t cmd, const char *name, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)cmd, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	return true;
}

/* Whether the command has ended, without reaping it: a zombie, or on its way out (PF_EXITING
 * in /proc/PID/stat: it called exit before the signal came, which then does nothing to it). */
static bool cmd_ended(pid_t cmd)
{
	siginfo_t si;
	si.si_pid = 0;
	if (waitid(P_PID, (id_t)cmd, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == cmd)
		return true;
	if (init_outer_proc)
		return false;
	char st[512];
	if (!read_proc(cmd, "stat", st, sizeof(st)))
		return false;
	/* "pid (comm) state ppid pgrp session tty_nr tpgid flags ... num_threads ..."; comm may
	 * hold ')'. PF_EXITING counts only for a single thread: a leader that called
	 * pthread_exit has it while its other threads run on. */
	char *f = strrchr(st, ')');
	unsigned long flags = 0, threads = 0;
	for (int field = 0; f && field < 18; field++) {
		f = strchr(f + 1, ' ');
		if (f && field == 6)
			flags = strtoul(f + 1, NULL, 10);
		if (f && field == 17)
			threads = strtoul(f + 1, NULL, 10);
	}
	return (flags & 0x4 /* PF_EXITING */) && threads == 1;
}

/* A "Name:\tvalue" line of a /proc status text, as a number in base; false when absent. */
static bool status_field(const char *st, const char *name, int base, unsigned long long *v)
{
	const char *m = strstr(st, name);
	if (!m)
		return false;
	*v = strtoull(m + strlen(name), NULL, base);
	return true;
}

/* The command is not waiting in rt_sigtimedwait (sigwait, sigwaitinfo, sigtimedwait), as far
 * as /proc/PID/syscall tells: "NR args... sp pc" while in a system call, "running", or
 * "-1 sp pc". False when it cannot tell. */
static bool not_in_sigwait(pid_t cmd)
{
	char st[72];
	if (!read_proc(cmd, "syscall", st, sizeof(st)))
		return false;
	if (!strncmp(st, "running", 7))
		return true;
	char *end;
	long nr = strtol(st, &end, 10);
	return end != st && nr != SYS_rt_sigtimedwait;
}

/* Whether a signal would end the command if it arrived now: SIGKILL, or one whose default
 * action (every stop signal the init forwards ends a process by default) is sure to apply: a
 * single thread, not traced, that neither blocks, ignores nor catches it, and is not waiting
 * for it in sigwait/sigtimedwait (which unblocks it in SigBlk for the wait and then takes it
 * as a value: tini and dumb-init wait like that). A command for which this held, and which
 * still exited normally after the signal, was already exiting when it came: exit_group had
 * begun, the kernel drops signals to such a process, and PF_EXITING (cmd_ended) is set only
 * a little later. False whenever /proc cannot tell. */
static bool sig_would_end(pid_t cmd, int sig)
{
	if (sig == SIGKILL)
		return true;
	/* before and after the masks: a command that entered or left the wait in between
	 * would show one thing in each */
	if (init_outer_proc || !not_in_sigwait(cmd))
		return false;
	char st[8192];
	if (!read_proc(cmd, "status", st, sizeof(st)))
		return false;
	unsigned long long v;
	if (!status_field(st, "\nThreads:", 10, &v) || v != 1 ||
	    !status_field(st, "\nTracerPid:", 10, &v) || v != 0)
		return false;
	static const char *const masks[] = {"\nSigBlk:", "\nSigIgn:", "\nSigCgt:"};
	for (size_t i = 0; i < ARRAY_SIZE(masks); i++)
		if (!status_field(st, masks[i], 16, &v) || (v & (1ULL << (sig - 1))))
			return false;
	return not_in_sigwait(cmd);
}

/* The init loop: signals stay blocked and are taken with sigwaitinfo, so there are no
 * handlers and no races; in a pid namespace the kernel also drops signals the sandbox sends
 * to its init unless they are blocked-and-waited for like these. */
static _Noreturn void init_loop(const struct launch *L, pid_t cmd)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	sigaddset(&set, SIGUSR1); /* from the supervisor: kill everything now */
	bool ctl = L->fd_ctl >= 0;
	if (ctl) {
		/* requests on the control socket arrive as SIGIO, taken like the others */
		sigaddset(&set, SIGIO);
		fcntl(CFD_CTL, F_SETOWN, getpid());
		fcntl(CFD_CTL, F_SETFL, O_ASYNC | O_NONBLOCK);
		ctl_drain(L, cmd);
	}
	int status = 0;
	bool done = false;
	/* The command ended before any stop (a signal to forward, or the supervisor's SIGUSR1)
	 * could touch it: none came before its end, or the first found it ended (signals are
	 * taken lowest first, so a stop is handled before the SIGCHLD that came with it). The
	 * EXIT report says so, and a timeout that fired as it ended is then not one. */
	bool ended_first = false, stopped = false;
	/* The first stop's signal would have ended the command had it still been running: a
	 * normal exit after it is the command's own (see sig_would_end). */
	bool stop_fatal = false;
	while (!done) {
		siginfo_t si;
		int sig = sigwaitinfo(&set, &si);
		if (sig < 0)
			continue;
		if (sig == SIGCHLD) {
			int st;
			pid_t p;
			while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
				if (p == cmd) {
					status = st;
					done = true;
				}
				for (int i = 0; ctl && i < INIT_MAX_JOBS; i++)
					if (init_jobs[i].pid == p) {
						/* a job ends with its command: what it left in
						 * its process group goes too (the group still
						 * exists, so its id is not reused yet) */
						kill(-p, SIGKILL);
						ctl_reply(CTL_EXITED, init_jobs[i].id, st);
						init_jobs[i].pid = 0;
					}
			}
		} else if (sig == SIGIO) {
			ctl_drain(L, cmd);
		} else if (sig == SIGUSR1) {
			if (!stopped) {
				ended_first = cmd_ended(cmd);
				stop_fatal = true; /* SIGKILL */
			}
			stopped = true;
			init_kill_all(L, cmd, &status);
			int st;
			pid_t p;
			while ((p = waitpid(-1, &st, 0)) > 0)
				if (p == cmd)
					status = st;
			done = true;
		} else {
			if (!stopped) {
				ended_first = cmd_ended(cmd);
				/* kill(-cmd) reaches the command only in its own group */
				stop_fatal =
				    !ended_first && getpgid(cmd) == cmd && sig_would_end(cmd, sig);
				/* Once more, just before the kill: a command that began to exit
				 * meanwhile also makes /proc refuse the reads above (without its mm
				 * its files belong to root: EACCES unless the init is root), so an
				 * undecided answer may mean just that. */
				if (!ended_first && !stop_fatal)
					ended_first = cmd_ended(cmd);
			}
			stopped = true;
			kill(-cmd, sig);
			/* as timeout(1): a stopped process would only take the signal when
			 * continued, after the grace, by the SIGKILL */
			kill(-cmd, SIGCONT);
		}
	}
	/* Nothing outlives the command: background jobs, setsid daemons, double forks. */
	init_kill_all(L, 0, NULL);
	int st;
	while (waitpid(-1, &st, 0) > 0 || errno == EINTR)
		;
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	struct report r = {.kind = REPORT_EXIT,
	                   .status = status,
	                   .detail = ended_first || !stopped || (stop_fatal && WIFEXITED(status))};
	r.user_us = (int64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec;
	r.sys_us = (int64_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
	r.maxrss_kb = ru.ru_maxrss;
	ssize_t n = write(CFD_REPORT, &r, sizeof(r));
	(void)n;
	/* Our exit tears the namespaces down (the mount tree, the network), a millisecond of
	 * kernel work on this CPU, where the write above has just woken the supervisor:
	 * without this it waited behind the teardown for its result (DESIGN §18). */
	sched_yield();
	_exit(0);
}

static bool read_all(int fd, void *buf, size_t n)
{
	for (size_t done = 0; done < n;) {
		ssize_t r = read(fd, (char *)buf + done, n - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		done += (size_t)r;
	}
	return true;
}

/* A parked sandbox's command process waits here, confined, for its command: {u32 bytes,
 * u32 argc} and argc NUL-terminated strings (proc_unpark). EOF or anything malformed means
 * the supervisor dropped this sandbox (or died): NULL, and nothing is run. */
static char *const *park_wait(void)
{
	uint32_t h[2];
	if (!read_all(CFD_SYNC, h, sizeof(h)) || h[0] == 0 || h[0] > sizeof(park_buf) ||
	    h[1] == 0 || h[1] > PARK_MAX_ARGC || !read_all(CFD_SYNC, park_buf, h[0]) ||
	    park_buf[h[0] - 1] != 0)
		return NULL;
	close(CFD_SYNC);
	size_t k = 0, off = 0;
	while (off < h[0] && k < h[1]) {
		park_argv[k++] = park_buf + off;
		off += strlen(park_buf + off) + 1;
	}
	if (k != h[1] || off != h[0])
		return NULL;
	park_argv[k] = NULL;
	return park_argv;
}

/* ---- the network namespace, made beside the init's setup ------------------------------- */

/* Creating a network namespace is the kernel's largest single cost of a launch (its sysctl
 * tables, the loopback device: about 0.5 ms on the 2-core machine of DESIGN §18). Made by
 * the clone, it delays everything after it; so the init starts a helper process that makes
 * it on the supervisor's CPU while the init builds its mount tree on the other, and enters it
 * before it drops its capabilities (net_helper_join). The helper shares the init's memory
 * and descriptor table (CLONE_VM | CLONE_FILES: no copy of the page tables of a copy of the
 * supervisor), runs on a stack of its own here, and makes its system calls without errno
 * (net_make_child). The namespace is the sandbox's own, as before: made in its user
 * namespace, used by this sandbox only, loopback up. */
static char net_helper_stack[16384] __attribute__((aligned(64)));
static struct {
	int err, step;
} net_helper_out;

/* (no AddressSanitizer here: the helper runs on the init's thread-local storage, and the
 * sanitizer's per-thread fake stack is not made for two tasks at once) */
CORRAL_NO_ASAN static int net_helper_main(void *arg)
{
	const struct launch *L = arg;
	int step = 0;
	int r = net_make_child(L->cpus_moved ? L->cpu_here : -1, CFD_NET, &step);
	net_helper_out.err = -r;
	net_helper_out.step = step;
	return r < 0;
}

/* The helper's pid, or -1 when it cannot be started (a tool that runs the supervisor, such
 * as valgrind, may refuse the clone): the init then makes the namespace itself. */
static pid_t net_helper_start(const struct launch *L)
{
	/* the number held now, so that nothing the init opens meanwhile lands on it */
	if (dup3(CFD_REPORT, CFD_NET, O_CLOEXEC) < 0)
		return -1;
	/* no exit signal: the init waits for it by pid (__WALL) */
	pid_t pid = clone(net_helper_main, net_helper_stack + sizeof(net_helper_stack),
	                  CLONE_VM | CLONE_FILES, (void *)L);
	if (pid < 0)
		close(CFD_NET);
	return pid;
}

/* Wait for the helper and enter its namespace: true. False when the init must make the
 * namespace itself (the helper failed after it made one: its end of lo, the descriptor, or
 * the setns; that namespace goes with the helper). A namespace the host refuses to the
 * helper it refuses to the init too: that fails the run, as a refused clone did. */
static bool net_helper_join(pid_t pid, int last_pid)
{
	int st;
	pid_t w;
	do
		w = waitpid(pid, &st, __WALL);
	while (w < 0 && errno == EINTR);
	bool ok = w == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	/* (its unshare answered with an error; one killed before it said nothing) */
	if (w == pid && WIFEXITED(st) && WEXITSTATUS(st) != 0 && net_helper_out.step == 0)
		child_fail(STEP_NETNS, net_helper_out.err > 0 ? net_helper_out.err : ECHILD, -1);
	if (ok && setns(CFD_NET, CLONE_NEWNET) < 0)
		ok = false;
	close(CFD_NET);
	if (last_pid >= 0) {
		/* (the writer's own pid namespace, the sandbox's; needs CAP_SYS_ADMIN over it) */
		ssize_t n = write(last_pid, "1", 1);
		(void)n;
		close(last_pid);
	}
	return ok;
}

/* The setup sequence. Each step has an id for errors; the order is the contract. */
static _Noreturn void child_main(const struct launch *L)
{
	int r, detail = -1;
	char c;

	/* Die with the supervisor. The sync read below closes the race where the supervisor
	 * died before this was set: its end of the pipe is then closed and the read sees EOF. */
	/* Without a pid namespace the kernel would not take the command down with the init:
	 * there the init's death signal asks it to sweep its descendants first. */
	prctl(PR_SET_PDEATHSIG, L->pidns ? SIGKILL : SIGUSR1);
	int report_fd;
	if ((r = child_fds(L, &report_fd)) < 0)
		fail_on(report_fd, STEP_FDS, r, -1, NULL);
	reset_dispositions();
	/* the network namespace, made meanwhile (net_helper_main) */
	pid_t nh = L->netns_late ? net_helper_start(L) : -1;
	/* The helper took pid 2 of the sandbox's pid namespace; the command gets it back
	 * (net_helper_join), through the pid namespace's counter, opened while the host's /proc
	 * is still in view (-1 if it is not: the command is pid 3, nothing else changes). */
	int last_pid = nh > 0 ? open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC) : -1;
	/* Wait until the parent has written our uid/gid maps and put us into the cgroup:
	 * mounts need the mapped ids, and limits must hold before anything runs. */
	if (read(CFD_SYNC, &c, 1) != 1)
		_exit(125);
	/* (still needed: a parked sandbox's command comes this way, and deferred placeholders'
	 * go before the protected binds) */
	if (!L->cfg->park && !L->n_ph_pending)
		close(CFD_SYNC);
	/* Not cloned into our cgroup (v1, or no CLONE_INTO_CGROUP): join it now, before
	 * anything else runs. Done here rather than by the parent, because a v1 migration
	 * waits for an RCU grace period (milliseconds on an idle machine): the init waits,
	 * the supervisor (a server's event loop) does not. The mount namespace is still a
	 * copy of the host's, so the paths name the host's cgroup files. "0" is the writer;
	 * on v1 the file is `tasks`, which skips that grace period (cgroup_join_paths). */
	for (size_t i = 0; L->cg_join && i < L->n_cg_join; i++) {
		int fd = open(L->cg_join_paths[i], O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, "0", 1) != 1)
			fail_on(CFD_REPORT, STEP_CGROUP, errno, -1, L->cg_join_paths[i]);
		close(fd);
	}
	/* Joined only now: a cgroup namespace made at clone time would show the host's cgroup
	 * path. */
	if (L->cgroupns_late && unshare(CLONE_NEWCGROUP) < 0) {
		/* mode auto goes on without one the host refuses, as with a refused clone
		 * (drop_refused): the record says so */
		if (L->cfg->mode == CORRAL_MODE_AUTO &&
		    (errno == EPERM || errno == EINVAL || errno == ENOSPC || errno == EACCES))
			child_report(CFD_REPORT, REPORT_NOTE, STEP_CGROUP, errno,
			             NOTE_CGROUPNS_REFUSED, 0);
		else
			child_fail(STEP_CGROUP, errno, -1);
	}
	/* A new session: no controlling terminal of the host, so TIOCSTI has nothing to push
	 * into (seccomp also denies it). */
	if (setsid() < 0)
		child_fail(STEP_SETSID, errno, -1);
	if (L->utsns && sethostname("corral", 6) < 0)
		child_fail(STEP_HOSTNAME, errno, -1);
	/* Mounts need CAP_SYS_ADMIN in our user namespace, so they come before the caps drop;
	 * pivot_root also ends any path back to the host root. */
	if (L->mountns) {
		int notes = 0;
		r = mount_setup_child(&L->mounts, L->n_ph_pending ? CFD_SYNC : -1,
		                      L->fd_tpl >= 0 ? CFD_TPL : -1, &detail, &notes);
		if (L->fd_tpl >= 0)
			close(CFD_TPL);
		if (L->n_ph_pending && !L->cfg->park)
			close(CFD_SYNC);
		if (notes)
			child_report(CFD_REPORT, REPORT_NOTE, STEP_MOUNT, 0, notes, 0);
		init_outer_proc = notes & MOUNT_NOTE_OUTER_PROC;
		if (r < 0)
			fail_on(CFD_REPORT, STEP_MOUNT, r, detail,
			        detail >= 0 ? L->mounts.ops[detail].dst : "the new root");
	} else {
		if (L->fd_tpl >= 0)
			close(CFD_TPL); /* (taken before a fall back to no mount namespace) */
		if (chdir(L->cwd) < 0)
			child_fail(STEP_CWD, errno, -1);
	}
	if ((r = rlimit_apply_child(&L->rl, &detail)) < 0)
		child_fail(STEP_RLIMIT, r, detail);
	bool net_joined = nh > 0 && net_helper_join(nh, last_pid);
	/* no helper, or one that failed past the namespace: made here, as by the clone */
	if (L->netns_late && !net_joined && unshare(CLONE_NEWNET) < 0)
		child_fail(STEP_NETNS, errno, -1);
	if (L->netns && !net_joined && (r = net_loopback_up_child()) < 0)
		child_fail(STEP_LOOPBACK, r, -1);
	/* Not dumpable: the command cannot ptrace or read the memory of its init. Its
	 * command line is the supervisor's (a copy of its memory): blank it, since
	 * /proc/1/cmdline is readable by anyone in the sandbox. */
	prctl(PR_SET_DUMPABLE, 0);
	if (L->argarea_start && L->argarea_end > L->argarea_start)
		memset((void *)L->argarea_start, 0, L->argarea_end - L->argarea_start);
	prctl(PR_SET_NAME, "corral-init");
	if (!L->pidns)
		prctl(PR_SET_CHILD_SUBREAPER, 1);
	/* no_new_privs before Landlock and seccomp (applied in the command, see command_exec;
	 * a parked init loads seccomp itself before it waits): both need it once CAP_SYS_ADMIN
	 * is gone, and setuid binaries must not regain what is dropped here. */
	if ((r = caps_no_new_privs_child()) < 0)
		child_fail(STEP_NNP, r, -1);
	if ((r = L->userns || getuid() == 0 ? caps_drop_all_child() : caps_clear_child()) < 0)
		child_fail(STEP_CAPS, r, -1);
	/* A session: its shell and its jobs (forked by this init later) must be able to signal
	 * each other, and Landlock's signal scoping forbids that between sibling domains. So
	 * the init enters the domain first and they inherit it. Only with a pid namespace: there
	 * the kernel ignores what the sandbox sends its init, but for the signals it waits for,
	 * which can only end the sandbox's own session. */
	if (L->fd_ctl >= 0 && L->pidns && L->landlock) {
		if ((r = landlock_apply_child(&L->ll, &detail)) < 0)
			fail_on(CFD_REPORT, STEP_LANDLOCK, r, detail,
			        detail >= 0 ? L->ll.rules[detail].path : "the ruleset");
		landlock_in_init = true;
	}

	/* The command's ruleset, built here: with the init's own steps done, the paths open as
	 * the command would open them (no capabilities left), and a parked sandbox has it
	 * ready before its command arrives. The init itself stays outside the domain. */
	if (L->landlock && !landlock_in_init) {
		ll_ready_fd = landlock_prepare_child(&L->ll, &detail);
		if (ll_ready_fd < 0)
			fail_on(CFD_REPORT, STEP_LANDLOCK, ll_ready_fd, detail,
			        detail >= 0 ? L->ll.rules[detail].path : "the ruleset");
	}
#if !CORRAL_ASAN
	/* the command's stack (command_start), with a guard page below it: an overflow faults
	 * rather than writing over the init's memory */
	char *stk = mmap(NULL, CMD_STACK + 4096, PROT_READ | PROT_WRITE,
	                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stk != MAP_FAILED && mprotect(stk, 4096, PROT_NONE) < 0) {
		munmap(stk, CMD_STACK + 4096);
		stk = MAP_FAILED;
	}
	/* (none: a tight RLIMIT_DATA, the memory limit's fallback; the command is forked) */
#endif
	/* The setup is done: back to the supervisor's CPU set, which the command and anything
	 * the init starts later inherit (see setup_elsewhere). */
	if (L->cpus_moved)
		(void)sched_setaffinity(0, sizeof(L->cpus), &L->cpus);
	/* Parked: everything is in place; the command process is started now and waits,
	 * confined, for its command on the sync pipe (command_exec). Meanwhile the init waits
	 * for it as for any command: in the clone below until it has exec'd, or (forked) in the
	 * read of the exec pipe. */
	if (L->cfg->park && L->seccomp) {
		if ((r = seccomp_apply_child(L->sc)) < 0)
			child_fail(STEP_SECCOMP, r, -1);
		seccomp_in_init = true;
	}

	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0)
		child_fail(STEP_FORK, errno, -1);
	struct cmd_start cs = {L, ep[0], ep[1]};
	pid_t cmd;
#if !CORRAL_ASAN
	if (stk != MAP_FAILED)
		cmd = clone(command_start, stk + 4096 + CMD_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD,
		            &cs);
	else
#endif
	{
		/* AddressSanitizer does not know the command's stack and warns on it (into the
		 * command's stderr): the sanitizer build forks, as does an init that could not
		 * map the stack */
		cmd = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, NULL);
		if (cmd == 0)
			command_start(&cs);
	}
	if (cmd < 0)
		child_fail(STEP_FORK, errno, -1);
	if (L->cfg->park)
		close(CFD_SYNC);
	close(ep[1]);
	if (L->fd_fd3 >= 0)
		close(CFD_FD3); /* the status pipe's writers are the shell and its children */
	/* The init keeps no stdio: the pipes' EOF must depend on the command's side only. */
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; fd < 3; fd++) {
		if (devnull >= 0)
			dup2(devnull, fd);
		else
			close(fd);
	}
	if (devnull > 2)
		close(devnull);
	struct report er;
	ssize_t n;
	do
		n = read(ep[0], &er, sizeof(er));
	while (n < 0 && errno == EINTR);
	close(ep[0]);
	if (n == (ssize_t)sizeof(er)) {
		ssize_t w = write(CFD_REPORT, &er, sizeof(er)); /* forwarded as it came */
		(void)w;
	} else
		child_report(CFD_REPORT, REPORT_EXEC_OK, 0, 0, (int)cmd, 0);
	init_loop(L, cmd);
}

/* ---- the parent ----------------------------------------------------------------------- */

/* The plan key (launch_plan_key): SHA-256 over what the sandbox is made of. Strings go in
 * with their length, so that no two different lists hash alike. */
static void key_bytes(struct sha256_ctx *h, const void *p, size_t n)
{
	uint64_t len = n;
	sha256_update(h, sizeof(len), (const uint8_t *)&len);
	if (n)
		sha256_update(h, n, (const uint8_t *)p);
}

static void key_str(struct sha256_ctx *h, const char *s)
{
	if (!s) {
		uint64_t none = UINT64_MAX;
		sha256_update(h, sizeof(none), (const uint8_t *)&none);
		return;
	}
	key_bytes(h, s, strlen(s));
}

static void key_u64(struct sha256_ctx *h, uint64_t v)
{
	sha256_update(h, sizeof(v), (const uint8_t *)&v);
}

/* Which file a path is now: a parked sandbox bound the files that were there when it was
 * built; a path replaced since (a recreated .git/hooks, a workspace moved away and made
 * again) must not match. */
static void key_identity(struct sha256_ctx *h, int rc, const struct stat *st)
{
	if (rc < 0) {
		key_u64(h, (uint64_t)errno | 1ULL << 63);
		return;
	}
	key_u64(h, (uint64_t)st->st_dev);
	key_u64(h, (uint64_t)st->st_ino);
	key_u64(h, (uint64_t)st->st_mode);
}

/* The identity of a mount op's source as the plan saw it a moment ago (an lstat, kept in
 * the op), or as an lstat sees it now. */
static void key_op_identity(struct sha256_ctx *h, const struct launch *L, const struct mount_op *op)
{
	if (op->has_id) {
		key_u64(h, (uint64_t)op->id_dev);
		key_u64(h, (uint64_t)op->id_ino);
		key_u64(h, (uint64_t)op->id_mode);
		return;
	}
	struct stat st;
	key_identity(h, hc_lstat(L->hc, op->src, &st), &st);
}

/* The identity of a Landlock rule's path (a stat): a mount op whose source is the same host
 * path and which the plan saw as no symlink already knows it (stat and lstat agree there). */
static void key_rule_identity(struct sha256_ctx *h, const struct launch *L, const char *path)
{
	for (size_t i = 0; i < L->mounts.n_ops; i++) {
		const struct mount_op *op = &L->mounts.ops[i];
		if (op->has_id && !S_ISLNK(op->id_mode) && op->src && !strcmp(op->src, path)) {
			key_op_identity(h, L, op);
			return;
		}
	}
	struct stat st;
	key_identity(h, hc_stat(L->hc, path, &st), &st);
}

/* A mount op as the child will carry it out. */
static void key_op(struct sha256_ctx *h, const struct mount_op *op)
{
	key_u64(h, (uint64_t)op->kind);
	key_str(h, op->src);
	key_str(h, op->dst);
	key_u64(h, (uint64_t)op->optional);
	key_u64(h, (uint64_t)op->no_symlinks);
	key_u64(h, op->size);
}

static void plan_key_compute(const struct launch *L, uint8_t out[32])
{
	const struct corral_config *cfg = L->cfg;
	struct sha256_ctx h;
	sha256_init(&h);
	key_str(&h, "corral plan key 1");
	bool flags[] = {L->userns,  L->mountns, L->pidns,        L->netns,
	                L->ipcns,   L->utsns,   L->cgroupns,     L->landlock,
	                L->seccomp, cfg->tty,   cfg->init_ctl,   cfg->cmd_fd3 >= 0,
	                L->want_cg, cfg->pids_default, cfg->workspace_ro, cfg->etc_minimal,
	                L->in_cg,   L->cg_no_cpu};
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++)
		key_u64(&h, flags[i]);
	key_u64(&h, (uint64_t)(uintptr_t)L->sc); /* one compiled program per tier, per process */
	key_u64(&h, L->uid);
	key_u64(&h, L->gid);
	key_u64(&h, (uint64_t)cfg->mode);
	key_u64(&h, (uint64_t)cfg->net);
	for (int i = 0; i < CORRAL_LIMIT__COUNT; i++)
		key_u64(&h, cfg->limits[i]);
	key_str(&h, cfg->workspace);
	key_str(&h, L->cwd);
	struct stat st;
	key_identity(&h, hc_stat(L->hc, cfg->workspace, &st), &st);
	/* the mounts, in order; the identity of every source that is writable or inside the
	 * workspace (pins, protected paths, placeholders) */
	key_u64(&h, L->mounts.n_ops);
	for (size_t i = 0; i < L->mounts.n_ops; i++) {
		const struct mount_op *op = &L->mounts.ops[i];
		key_op(&h, op);
		key_u64(&h, op->ll_access);
		/* every source a mount takes from the host, and every path a mask hides (its
		 * existence decides whether it is masked at all) */
		if (op->src && op->kind != MOP_SYMLINK)
			key_op_identity(&h, L, op);
		if (op->kind == MOP_MASK && op->dst)
			key_identity(&h, hc_lstat(L->hc, op->dst, &st), &st);
	}
	key_str(&h, L->mounts.cwd);
	key_u64(&h, (uint64_t)L->mounts.proc_fallback);
	/* Landlock */
	key_u64(&h, (uint64_t)L->ll.abi);
	key_u64(&h, (uint64_t)L->ll.deny_tcp);
	key_u64(&h, (uint64_t)L->ll.scope);
	key_u64(&h, L->ll.n_rules);
	/* a ruleset holds the files its paths named when it was built: which files they are
	 * (a rule path inside the sandbox names the same file on the host where the sandbox
	 * binds it at the same path; where it does not, the host's file only adds a cause
	 * to rebuild) */
	for (size_t i = 0; i < L->ll.n_rules; i++) {
		key_str(&h, L->ll.rules[i].path);
		key_u64(&h, L->ll.rules[i].access);
		key_rule_identity(&h, L, L->ll.rules[i].path);
	}
	key_u64(&h, L->n_exec_files);
	for (size_t i = 0; i < L->n_exec_files; i++) {
		key_str(&h, L->exec_files[i]);
		key_identity(&h, hc_stat(L->hc, L->exec_files[i], &st), &st);
	}
	/* rlimits, environment, PATH */
	key_u64(&h, L->rl.n);
	for (size_t i = 0; i < L->rl.n; i++) {
		key_u64(&h, (uint64_t)L->rl.resource[i]);
		key_u64(&h, (uint64_t)L->rl.value[i].rlim_cur);
		key_u64(&h, (uint64_t)L->rl.value[i].rlim_max);
	}
	for (char **e = L->envp; e && *e; e++)
		key_str(&h, *e);
	key_str(&h, NULL);
	for (char **d = L->path_dirs; d && *d; d++)
		key_str(&h, *d);
	key_str(&h, NULL);
	/* The protected paths are in the mounts above, each with the identity of the file at
	 * its path (a parked sandbox's placeholders exist when the call's plan looks). Not what
	 * is held: a call's key is taken as a dry run, which holds nothing. */
	sha256_digest(&h, 32, out);
}

/* The template key: what a mount template built from L's plan holds (the system tree's ops
 * with the identity of every source, and what it makes for the plan's own ops), for the ids
 * its holder maps. Two plans with the same key get the same tree from it. */
void tpl_key_compute(const struct launch *L, uint8_t out[32])
{
	struct sha256_ctx h;
	sha256_init(&h);
	key_str(&h, "corral mount template 1");
	key_u64(&h, L->uid);
	key_u64(&h, L->gid);
	for (size_t i = 0; i < L->mounts.n_ops; i++) {
		const struct mount_op *op = &L->mounts.ops[i];
		if (op->tpl) {
			key_op(&h, op);
			key_u64(&h, op->has_id);
			if (op->has_id)
				key_op_identity(&h, L, op);
		} else if (op->tpl_make) {
			key_u64(&h, (uint64_t)op->tpl_make);
			key_str(&h, op->dst);
		}
	}
	sha256_digest(&h, 32, out);
}

static int clone_sandbox(struct launch *L, uint64_t flags, int cgfd, int *pidfd)
{
	struct clone_args args;
	memset(&args, 0, sizeof(args));
	args.flags = flags | CLONE_PIDFD;
	args.pidfd = (uint64_t)(uintptr_t)pidfd;
	/* exit_signal 0: no SIGCHLD for the caller, and a caller's waitpid(-1) cannot reap our
	 * init by accident; we wait through the pidfd. */
	args.exit_signal = 0;
	if (cgfd >= 0) {
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)cgfd;
	}
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0 && errno == ENOSYS && cgfd < 0) {
		/* clone3 missing (or filtered): the old clone returns the pidfd the same way. */
		pid = syscall(SYS_clone, (unsigned long)(flags | CLONE_PIDFD), NULL, pidfd, NULL,
		              NULL);
	}
	if (pid == 0)
		child_main(L);
	(void)L;
	return (int)pid;
}

static int make_pipes(const struct corral_config *cfg, int p_in[2], int p_out[2], int p_err[2],
                      int p_rep[2], int p_sync[2], struct corral_error *err)
{
	/* stdout / stderr to a descriptor of the caller's: no pipe, nothing to read */
	if (cfg->stdout_fd >= 0 && (p_out[1] = fcntl(cfg->stdout_fd, F_DUPFD_CLOEXEC, 3)) < 0)
		return corral_set_error(err, CORRAL_ESYS, errno, "stdout", "stdout: %s",
		                        strerror(errno));
	if (cfg->stderr_fd >= 0 && (p_err[1] = fcntl(cfg->stderr_fd, F_DUPFD_CLOEXEC, 3)) < 0)
		return corral_set_error(err, CORRAL_ESYS, errno, "stderr", "stderr: %s",
		                        strerror(errno));
	if ((cfg->stdout_fd < 0 && pipe2(p_out, O_CLOEXEC) < 0) ||
	    (cfg->stderr_fd < 0 && pipe2(p_err, O_CLOEXEC) < 0) || pipe2(p_rep, O_CLOEXEC) < 0 ||
	    pipe2(p_sync, O_CLOEXEC) < 0)
		return corral_set_error(err, CORRAL_ESYS, errno, "pipe",
		                        "pipe: %s; raise the open-files limit of the supervisor",
		                        strerror(errno));
	if (cfg->stdin_is_data) {
		if (pipe2(p_in, O_CLOEXEC) < 0)
			return corral_set_error(err, CORRAL_ESYS, errno, "pipe", "pipe: %s",
			                        strerror(errno));
	} else if (cfg->stdin_fd >= 0) {
		p_in[0] = fcntl(cfg->stdin_fd, F_DUPFD_CLOEXEC, 3);
	} else {
		p_in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	if (p_in[0] < 0)
		return corral_set_error(err, CORRAL_ESYS, errno, "stdin", "stdin: %s",
		                        strerror(errno));
	return 0;
}

static uint64_t clone_flags(const struct launch *L)
{
	uint64_t flags = 0;
	if (L->userns)
		flags |= CLONE_NEWUSER;
	if (L->mountns)
		flags |= CLONE_NEWNS;
	if (L->pidns)
		flags |= CLONE_NEWPID;
	if (L->netns && !L->netns_late)
		flags |= CLONE_NEWNET;
	if (L->ipcns)
		flags |= CLONE_NEWIPC;
	if (L->utsns)
		flags |= CLONE_NEWUTS;
	if (L->cgroupns && !L->cgroupns_late)
		flags |= CLONE_NEWCGROUP;
	return flags;
}

static bool userns_refused(int e)
{
	return e == EPERM || e == EINVAL || e == ENOSPC || e == EACCES;
}

/* After a refused clone while a bare user namespace can be made: which of the plan's other
 * namespaces the host refuses, each tried on its own in a throwaway child. Returns their
 * clone flags, names them in out, and puts each one's errno in errs (mount, pid, net, ipc,
 * uts, cgroup; 0 where allowed). */
static int refused_namespaces(const struct launch *L, char *out, size_t len, int errs[6])
{
	static const struct {
		int flag;
		const char *name;
	} ns[] = {{CLONE_NEWNS, "the mount namespace"},   {CLONE_NEWPID, "the pid namespace"},
	          {CLONE_NEWNET, "the network namespace"}, {CLONE_NEWIPC, "the IPC namespace"},
	          {CLONE_NEWUTS, "the UTS namespace"},     {CLONE_NEWCGROUP, "the cgroup namespace"}};
	const bool want[] = {L->mountns, L->pidns, L->netns, L->ipcns, L->utsns, L->cgroupns};
	size_t o = 0;
	int refused = 0;
	out[0] = 0;
	for (size_t i = 0; i < ARRAY_SIZE(ns); i++) {
		errs[i] = 0;
		if (!want[i])
			continue;
		pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | ns[i].flag | SIGCHLD, NULL, NULL,
		                           NULL, NULL);
		if (pid == 0)
			_exit(0);
		if (pid > 0) {
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
			continue;
		}
		errs[i] = errno;
		refused |= ns[i].flag;
		if (o < len)
			o += (size_t)snprintf(out + o, len - o, "%s%s (%s)", o ? ", " : "",
			                      ns[i].name, strerror(errno));
	}
	return refused;
}

/* mode auto, after the host refused the clone: the namespaces the sandbox can do without
 * while keeping the rest (its own network, IPC, UTS and cgroup namespaces). Returns whether
 * the plan now drops them (the caller clones again); false sends it down to the tier without
 * namespaces: user namespaces themselves refused, or the mount or pid namespace, which the
 * plan's file system view and process containment are built on. */
static bool drop_refused(struct launch *L, struct corral_error *err, int *r)
{
	const int optional = CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
	char why[300];
	int errs[6];
	if (!userns_probe(why, sizeof(why)))
		return false;
	int refused = refused_namespaces(L, why, sizeof(why), errs);
	if (!refused || (refused & ~optional))
		return false;
	*r = plan_drop_some_namespaces(L, refused, errs + 2, err);
	return true;
}

/* Signals blocked across the clone: the child must not run a handler of the caller's before
 * it has reset them, and its init waits for signals with sigwaitinfo. */
static pid_t clone_blocked(struct launch *L, int *cgfd, int *pidfd, int *clone_errno)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	L->cgroupns_late = L->cgroupns && L->cg && *cgfd < 0;
	L->cg_join = L->cg && *cgfd < 0;
	/* The network namespace by the init's helper (net_helper_main): with a pid namespace
	 * (the helper dies with the init), in a user namespace of the sandbox's own (which
	 * owns the namespace, so the init may enter it), where the architecture lets the
	 * helper leave errno alone, and only in mode required: mode auto drops a namespace
	 * the host refuses before the clone (drop_refused), and its plan changes with it. */
	L->netns_late = L->netns && L->pidns && L->userns && L->net_helper &&
	                L->cfg->mode == CORRAL_MODE_REQUIRED && net_helper_supported();
	pid_t pid = clone_sandbox(L, clone_flags(L), *cgfd, pidfd);
	if (pid < 0 && *cgfd >= 0 && (errno == EINVAL || errno == ENOSYS || errno == EBUSY)) {
		*cgfd = -1; /* CLONE_INTO_CGROUP unsupported: the child joins after the clone */
		L->cgroupns_late = L->cgroupns;
		L->cg_join = true;
		pid = clone_sandbox(L, clone_flags(L), -1, pidfd);
	}
	*clone_errno = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return pid;
}

/* Whether a CPU of set is idle now: fewer tasks runnable on the whole machine, this one
 * included (the fourth field of /proc/loadavg, "runnable/total"), than set has CPUs. The
 * network namespace's helper (net_helper_main) gains only then: on CPUs that are all busy
 * (a server's calls at full load) it would add its process and its wake-ups to the same
 * work, about a tenth fewer calls per second at concurrency 2 on the machine of DESIGN §18.
 * Without /proc, yes. */
static bool cpu_to_spare(const cpu_set_t *set)
{
	char buf[128];
	int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	unsigned running, total;
	double l1, l5, l15;
	if (sscanf(buf, "%lf %lf %lf %u/%u", &l1, &l5, &l15, &running, &total) != 5)
		return true;
	return running < (unsigned)CPU_COUNT(set);
}

/* Whether the child should build itself on another CPU than this one (launch_start), with
 * *here this CPU and L->cpus this process's CPU set. The supervisor has work of its own after
 * the clone (the maps, the deferred placeholders, the audit store's open, the relay); a
 * scheduler that packs tasks onto few CPUs (the 2-core machine of DESIGN §18 keeps a new task,
 * and a task woken through a pipe, on the waker's CPU while the other idles) would run the
 * two one after the other. Only the setup moves: the init takes the set back before the
 * command starts (child_main). */
static bool setup_elsewhere(struct launch *L, int *here)
{
	*here = sched_getcpu();
	return *here >= 0 && *here < CPU_SETSIZE &&
	       sched_getaffinity(0, sizeof(L->cpus), &L->cpus) == 0 && CPU_COUNT(&L->cpus) > 1 &&
	       CPU_ISSET(*here, &L->cpus);
}

int launch_start(const struct corral_config *cfg, struct corral_result *res, struct launch_out *out,
                 struct corral_error *err)
{
	struct launch L;
	memset(&L, 0, sizeof(L));
	L.cfg = cfg;
	/* A server's looks at the system paths, cached (cfg->hc): brought up to date with what
	 * inotify and the mount table reported since the last use. The workspace's protected
	 * names are looked at every time: a run makes and removes placeholders there, whose
	 * events would drop the whole cache at each call. */
	hcache_sync(cfg->hc);
	L.hc_sys = cfg->hc;
	plan_argarea(&L.argarea_start, &L.argarea_end);
	L.uid = getuid();
	L.gid = getgid();
	int r;
	int p_in[2] = {-1, -1}, p_out[2] = {-1, -1}, p_err[2] = {-1, -1};
	int p_rep[2] = {-1, -1}, p_sync[2] = {-1, -1}, p_ctl[2] = {-1, -1}, fd3 = -1;
	int pidfd = -1;
	out->pid = -1;
	out->ctl_fd = -1;
	out->go_fd = -1;
	L.fd_fd3 = L.fd_ctl = L.fd_tpl = -1;

	if ((r = plan_choose_layers(&L, res, err)) < 0 || (r = plan_prepare(&L, res, err)) < 0 ||
	    (r = make_pipes(cfg, p_in, p_out, p_err, p_rep, p_sync, err)) < 0)
		goto fail;
	L.fd_in = p_in[0];
	L.fd_out = p_out[1];
	L.fd_err = p_err[1];
	L.fd_report = p_rep[1];
	L.fd_sync = p_sync[0];
	if (cfg->cmd_fd3 >= 0 && (fd3 = fcntl(cfg->cmd_fd3, F_DUPFD_CLOEXEC, 3)) < 0) {
		r = corral_set_error(err, CORRAL_ESYS, errno, "fds", "fd 3: %s", strerror(errno));
		goto fail;
	}
	if (cfg->init_ctl && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p_ctl) < 0) {
		r = corral_set_error(err, CORRAL_ESYS, errno, "fds",
		                     "control socket: %s; raise the open-files limit",
		                     strerror(errno));
		goto fail;
	}
	L.fd_fd3 = fd3;
	L.fd_ctl = p_ctl[1];

	if (L.cg) {
		L.n_cg_join = cgroup_join_paths(L.cg, L.cg_join_paths, ARRAY_SIZE(L.cg_join_paths));
		if (L.n_cg_join == (size_t)-1) {
			L.n_cg_join = 0;
			r = corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "cgroup", "out of memory");
			goto fail;
		}
	}
	if (cfg->park) {
		/* Parked only with a pid namespace: killing its init then ends everything in it,
		 * at once (a parked init without one would wait out a sweep). The key is taken
		 * before the child exists, so a path replaced meanwhile makes the key miss, never
		 * match a sandbox that bound the old file. */
		if (!L.pidns) {
			r = corral_set_error(err, CORRAL_EUNAVAIL, 0, "park",
			                     "park: no pid namespace here; sandboxes are built per call");
			goto fail;
		}
		plan_key_compute(&L, out->key);
	}
	/* The system part of the tree from a template when the caller keeps one (a server):
	 * a copy of it for this plan's key, or none, and then maybe a holder for the next
	 * launches (mtpl_offer, once this one is on its way). */
	uint8_t tkey[32];
	bool tpl_ok = cfg->mtpl && L.mountns && mount_template_prepare(&L.mounts, L.hc_sys) == 0;
	if (tpl_ok) {
		tpl_key_compute(&L, tkey);
		L.fd_tpl = mtpl_take(cfg->mtpl, tkey);
	}
	int cgfd = L.cg ? cgroup_clone_fd(L.cg) : -1, clone_errno, here;
	L.cpus_moved = setup_elsewhere(&L, &here);
	L.cpu_here = here;
	int nh_test = plan_test_net_helper();
	L.net_helper = nh_test ? nh_test > 0
	                       : L.cpus_moved && L.netns && cfg->mode == CORRAL_MODE_REQUIRED &&
	                             cpu_to_spare(&L.cpus);
	pid_t pid = clone_blocked(&L, &cgfd, &pidfd, &clone_errno);
	/* (a parked sandbox is only built with its namespaces: see proc_park) */
	if (pid < 0 && L.userns && cfg->mode == CORRAL_MODE_AUTO && userns_refused(clone_errno) &&
	    !cfg->park) {
		/* The host refuses a namespace: without the ones it can do without if that
		 * is all, else down to the tier without namespaces; either is recorded. */
		r = 0;
		if (drop_refused(&L, err, &r)) {
			if (r < 0)
				goto fail;
			pid = clone_blocked(&L, &cgfd, &pidfd, &clone_errno);
		}
		if (pid < 0 && L.userns && userns_refused(clone_errno)) {
			if ((r = plan_drop_namespaces(&L, err)) < 0)
				goto fail;
			pid = clone_blocked(&L, &cgfd, &pidfd, &clone_errno);
		}
	}
	if (pid < 0) {
		char why[300], which[300];
		int errs[6];
		if (L.userns && userns_refused(clone_errno) && !userns_probe(why, sizeof(why))) {
			r = corral_set_error(err, CORRAL_EUNAVAIL, clone_errno, "userns",
			                     "userns: %s", why);
		} else if (L.userns && userns_refused(clone_errno) &&
		           refused_namespaces(&L, which, sizeof(which), errs) != 0) {
			/* user namespaces work: another namespace is what the host refuses */
			r = corral_set_error(err, CORRAL_EUNAVAIL, clone_errno, "clone",
			                     "clone: the host refuses %s although user namespaces work; "
			                     "raise the matching user.max_*_namespaces sysctl, check the "
			                     "container's seccomp policy, or run with --mode=auto",
			                     which);
		} else {
			r = corral_set_error(err, CORRAL_ESYS, clone_errno, "clone",
			                     "clone: %s; the host refused to create the sandbox "
			                     "process",
			                     strerror(clone_errno));
		}
		goto fail;
	}
	out->pid = pid;
	out->pidfd = pidfd;
	if (L.fd_tpl >= 0) { /* the child has it */
		close(L.fd_tpl);
		L.tpl_used = L.mountns;
		L.fd_tpl = -1;
	}
	if (L.cpus_moved) {
		/* (a failure leaves the child where the scheduler put it: only slower) */
		cpu_set_t away = L.cpus;
		CPU_CLR(here, &away);
		(void)sched_setaffinity(pid, sizeof(away), &away);
	}
	plan_record_layers(&L, res);

	/* Parent-side setup, then release the child through the sync pipe. */
	if (L.userns) {
		const char *which = "";
		if ((r = userns_write_maps(pid, L.uid, L.gid, &which)) < 0) {
			r = corral_set_error(err, CORRAL_ESETUP, -r, "userns",
			                     "userns: writing %s of the sandbox: %s", which,
			                     strerror(-r));
			goto fail_kill;
		}
	}
	if (L.cg)
		result_add_layer(res, "cgroup", true, cgroup_describe(L.cg));
	if (write(p_sync[1], "x", 1) != 1) {
		r = corral_set_error(err, CORRAL_ESYS, errno, "sync", "sync: %s", strerror(errno));
		goto fail_kill;
	}
	/* The child builds its mount tree now; the placeholders it binds last are made
	 * meanwhile, and 'p' lets it go on to them. */
	if (L.n_ph_pending) {
		if ((r = plan_make_pending(&L, err)) < 0)
			goto fail_kill;
		/* A child that failed before (its report says why) has closed the pipe: no
		 * SIGPIPE for the caller. */
		sigset_t pipe_set, old_set;
		sigemptyset(&pipe_set);
		sigaddset(&pipe_set, SIGPIPE);
		pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
		if (write(p_sync[1], "p", 1) != 1) {
			struct timespec zero = {0, 0};
			sigtimedwait(&pipe_set, NULL, &zero);
		}
		pthread_sigmask(SIG_SETMASK, &old_set, NULL);
	}

	if (tpl_ok && !L.tpl_used)
		mtpl_offer(cfg->mtpl, &L, tkey);
	close(p_sync[0]);
	if (cfg->park) {
		/* the command goes this way later (proc_unpark), without blocking the supervisor */
		out->go_fd = p_sync[1];
		fcntl(out->go_fd, F_SETFL, O_NONBLOCK);
	} else {
		close(p_sync[1]);
	}
	close(p_in[0]);
	close(p_out[1]);
	close(p_err[1]);
	close(p_rep[1]);
	if (fd3 >= 0)
		close(fd3);
	if (p_ctl[1] >= 0)
		close(p_ctl[1]);
	out->ctl_fd = p_ctl[0];
	out->out_fd = p_out[0];
	out->err_fd = p_err[0];
	out->in_fd = p_in[1];
	out->report_fd = p_rep[0];
	out->pidns = L.pidns;
	out->cg = L.cg;
	out->private_tmp = L.private_tmp;
	out->held = L.held;
	out->n_held = L.n_held;
	for (size_t i = 0; i < L.n_cg_join; i++)
		free(L.cg_join_paths[i]);
	plan_free(&L);
	return 0;

fail_kill:
	syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	{
		siginfo_t si;
		while (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED | __WALL) < 0 && errno == EINTR)
			;
	}
fail:
	if (L.fd_tpl >= 0)
		close(L.fd_tpl);
	for (int i = 0; i < 2; i++) {
		int *fds[] = {&p_in[i], &p_out[i], &p_err[i], &p_rep[i], &p_sync[i], &p_ctl[i]};
		for (size_t k = 0; k < ARRAY_SIZE(fds); k++)
			if (*fds[k] >= 0)
				close(*fds[k]);
	}
	if (pidfd >= 0)
		close(pidfd);
	out->pidfd = -1; /* closed here: the caller's cleanup must not close it again */
	if (fd3 >= 0)
		close(fd3);
	if (L.cg)
		cgroup_destroy(L.cg);
	if (L.private_tmp) {
		rmdir(L.private_tmp);
		free(L.private_tmp);
	}
	plan_release_protected(L.held, L.n_held);
	for (size_t i = 0; i < L.n_cg_join; i++)
		free(L.cg_join_paths[i]);
	plan_free(&L);
	out->pid = -1;
	return r;
}

/* The plan as a run would build it now, with no host side effect: no placeholder made or
 * held, no cgroup made, no private /tmp (a call's key is taken on its path; a parked sandbox
 * already holds all of these). What the host would decide is predicted (a placeholder it
 * would refuse, the cgroup as the last attempt went). With preflight, the policy's preflight
 * runs first. 0 and *res set (dry_plan_end frees it), or an error. */
static int dry_plan(const struct corral_config *cfg, struct hcache *hc, struct launch *L,
                    bool preflight, struct corral_result **res, struct corral_error *err)
{
	memset(L, 0, sizeof(*L));
	L->cfg = cfg;
	L->hc = hc;
	L->uid = getuid();
	L->gid = getgid();
	L->fd_fd3 = L->fd_ctl = L->fd_tpl = -1;
	L->dry_run = L->key_only = true;
	if (!(*res = result_new()))
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "plan", "out of memory");
	int r = preflight ? policy_preflight(cfg, err) : 0;
	if (r == 0)
		r = plan_choose_layers(L, *res, err);
	if (r == 0)
		r = plan_prepare(L, *res, err);
	return r;
}

static void dry_plan_end(struct launch *L, struct corral_result *res)
{
	free(L->private_tmp);
	plan_release_protected(L->held, L->n_held);
	plan_free(L);
	corral_result_free(res);
}

int launch_template_warm(const struct corral_config *cfg)
{
	if (!cfg->mtpl)
		return -1;
	/* the template's part of a plan does not depend on what a real one would make or
	 * hold on the host (placeholders, the cgroup) */
	struct launch L;
	struct corral_result *res = NULL;
	struct corral_error err = {0};
	int r = dry_plan(cfg, NULL, &L, false, &res, &err);
	if (r == 0 && L.mountns && mount_template_prepare(&L.mounts, NULL) == 0) {
		uint8_t tkey[32];
		tpl_key_compute(&L, tkey);
		mtpl_offer(cfg->mtpl, &L, tkey);
	} else if (r == 0) {
		r = -1;
	}
	dry_plan_end(&L, res);
	return r;
}

int launch_plan_key(const struct corral_config *cfg, struct hcache *hc, uint8_t key[32],
                    struct corral_error *err)
{
	/* The preflight runs: a command the policy refuses never reaches a parked sandbox. */
	struct launch L;
	struct corral_result *res = NULL;
	hcache_sync(hc);
	int r = dry_plan(cfg, hc, &L, !cfg->park, &res, err);
	if (r == 0)
		plan_key_compute(&L, key);
	dry_plan_end(&L, res);
	return r;
}

int launch_report_error(const struct report *rep, const struct corral_config *cfg,
                        struct corral_error *err)
{
	const char *step = launch_step_name(rep->step);
	int e = rep->err;
	if (rep->step == STEP_EXEC) {
		const char *prog = cfg->argv[0];
		if (e == ENOENT && rep->detail == 1)
			return corral_set_error(
			    err, CORRAL_ENOEXEC, e, "exec",
			    "exec: %s: its interpreter was not found in the sandbox (the program "
			    "on "
			    "its #! line, or an ELF binary's loader); fix that line, or make the "
			    "interpreter visible (the host's /home, /opt and other paths outside "
			    "the plan are not)",
			    prog);
		if (e == ENOENT)
			return corral_set_error(
			    err, CORRAL_ENOTFOUND, e, "exec",
			    "exec: %s: command not found in the sandbox (PATH is "
			    "searched inside it; the host's /home, /opt and other "
			    "paths outside the plan are not visible)",
			    prog);
		if (e == E2BIG)
			return corral_set_error(
			    err, CORRAL_ENOEXEC, e, "exec",
			    "exec: %s: %s: the arguments and environment are over the kernel's "
			    "limit (each string at most 128 KiB); pass large data on stdin or in a "
			    "file in the workspace",
			    prog, strerror(e));
		return corral_set_error(err, CORRAL_ENOEXEC, e, "exec",
		                        "exec: %s: %s (not executable in the sandbox)", prog,
		                        strerror(e));
	}
	if (rep->step == STEP_MOUNT && e == EPERM && !strcmp(rep->path, "/proc"))
		return corral_set_error(
		    err, CORRAL_EUNAVAIL, e, "proc",
		    "proc: the kernel refuses a fresh /proc here: this host's /proc "
		    "has parts covered by other mounts (corral runs inside a "
		    "container or another sandbox); run corral outside it, or use "
		    "--mode auto to show the outer /proc read-only");
	if (rep->step == STEP_MOUNT)
		return corral_set_error(
		    err, CORRAL_ESETUP, e, step,
		    "mount: cannot set up %.200s in the sandbox: %s; check that "
		    "the path is accessible to this user, or run 'corral check'",
		    rep->path, strerror(e));
	if (rep->step == STEP_LANDLOCK)
		return corral_set_error(err, CORRAL_ESETUP, e, step,
		                        "landlock: cannot add the rule for %.200s: %s; run with "
		                        "--mode=auto to continue without Landlock",
		                        rep->path, strerror(e));
	if (rep->step == STEP_CGROUP && rep->path[0])
		return corral_set_error(err, CORRAL_ESETUP, e, step,
		                        "cgroup: the sandbox cannot join its cgroup (%.200s): %s; "
		                        "check that the cgroup is writable, or run 'corral check'",
		                        rep->path, strerror(e));
	if (rep->step == STEP_CGROUP && (e == EPERM || e == EINVAL || e == ENOSPC || e == EACCES))
		return corral_set_error(
		    err, CORRAL_EUNAVAIL, e, "clone",
		    "clone: the host refuses the cgroup namespace (%s) although "
		    "user namespaces work; check the container's seccomp policy "
		    "or the user.max_cgroup_namespaces sysctl, or run with "
		    "--mode=auto",
		    strerror(e));
	if (rep->step == STEP_NETNS && (e == EPERM || e == EINVAL || e == ENOSPC || e == EACCES))
		return corral_set_error(
		    err, CORRAL_EUNAVAIL, e, "clone",
		    "clone: the host refuses the network namespace (%s) although user "
		    "namespaces work; raise the user.max_net_namespaces sysctl, check the "
		    "container's seccomp policy, or run with --mode=auto",
		    strerror(e));
	if (rep->step == STEP_CWD)
		return corral_set_error(err, CORRAL_ESETUP, e, step,
		                        "cwd: cannot enter the working directory: %s", strerror(e));
	return corral_set_error(err, CORRAL_ESETUP, e, step,
	                        "%s: sandbox setup failed: %s; run 'corral check' to see what "
	                        "this host supports",
	                        step, strerror(e));
}
