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
#include <fcntl.h>
#include <limits.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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
	STEP_NNP,
	STEP_LANDLOCK,
	STEP_CAPS,
	STEP_SECCOMP,
	STEP_FORK,
	STEP_EXEC,
	STEP__COUNT
};

static const char *const step_names[STEP__COUNT] = {
	[STEP_NONE] = "",           [STEP_CLONE] = "clone",       [STEP_USERNS] = "userns",
	[STEP_CGROUP] = "cgroup",   [STEP_SYNC] = "sync",         [STEP_FDS] = "fds",
	[STEP_SETSID] = "setsid",   [STEP_HOSTNAME] = "hostname", [STEP_MOUNT] = "mount",
	[STEP_CWD] = "cwd",         [STEP_RLIMIT] = "rlimit",     [STEP_LOOPBACK] = "loopback",
	[STEP_NNP] = "no_new_privs", [STEP_LANDLOCK] = "landlock", [STEP_CAPS] = "caps",
	[STEP_SECCOMP] = "seccomp", [STEP_FORK] = "fork",         [STEP_EXEC] = "exec",
};

const char *launch_step_name(int step)
{
	return step > 0 && step < STEP__COUNT ? step_names[step] : "setup";
}

/* Descriptor numbers in the child after the fd shuffle. */
enum { CFD_REPORT = 3, CFD_SYNC = 4, CFD_FIRST_FREE = 5 };

/* Everything the child reads. Built in the parent; the child only reads it. */
struct launch {
	const struct corral_config *cfg;
	bool userns, mountns, pidns, netns, ipcns, utsns, cgroupns;
	bool landlock, seccomp;
	uid_t uid;
	gid_t gid;
	int fd_in, fd_out, fd_err, fd_report, fd_sync; /* parent-side numbers */
	struct mount_plan mounts;
	struct landlock_spec ll;
	struct landlock_rule *ll_rules;
	const struct seccomp_prog *sc;
	struct rlimit_plan rl;
	char **envp;
	char **argv;
	char **path_dirs;      /* PATH split, for resolving argv[0] in the sandbox */
	char *exec_buf;        /* PATH_MAX scratch for the child */
	const char *cwd;       /* chdir target when there is no mount namespace */
	char *private_tmp;     /* host dir used as /tmp when there is no mount namespace */
	uintptr_t argarea_start, argarea_end; /* the supervisor's argv strings */
};

/* Where this process's argv strings live (fields 48 and 49 of /proc/self/stat), read once. */
static void argarea(uintptr_t *start, uintptr_t *end)
{
	static uintptr_t s_start, s_end;
	static int done;
	if (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
		FILE *f = fopen("/proc/self/stat", "re");
		char buf[2048];
		if (f && fgets(buf, sizeof(buf), f)) {
			char *p = strrchr(buf, ')');
			int field = 2;
			unsigned long long a = 0, b = 0;
			for (; p && *p; p++) {
				if (*p != ' ')
					continue;
				field++;
				if (field == 48)
					a = strtoull(p + 1, NULL, 10);
				else if (field == 49)
					b = strtoull(p + 1, NULL, 10);
			}
			s_start = (uintptr_t)a;
			s_end = (uintptr_t)b;
		}
		if (f)
			fclose(f);
		__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
	}
	*start = s_start;
	*end = s_end;
}

/* ---- the child ------------------------------------------------------------------------ */

static void child_report(int fd, int kind, int step, int err, int detail, int status)
{
	struct report r = {.kind = kind, .step = step, .err = err, .detail = detail,
	                   .status = status};
	ssize_t n;
	do
		n = write(fd, &r, sizeof(r));
	while (n < 0 && errno == EINTR);
}

static _Noreturn void child_fail_path(int step, int err, int detail, const char *path)
{
	struct report r = {.kind = REPORT_FAIL, .step = step, .err = err < 0 ? -err : err,
	                   .detail = detail};
	for (size_t i = 0; path && path[i] && i + 1 < sizeof(r.path); i++)
		r.path[i] = path[i];
	ssize_t n;
	do
		n = write(CFD_REPORT, &r, sizeof(r));
	while (n < 0 && errno == EINTR);
	_exit(125);
}

static _Noreturn void child_fail(int step, int err, int detail)
{
	child_fail_path(step, err, detail, NULL);
}

/* Move the five descriptors the child needs to fixed numbers and close every other one: the
 * supervisor may hold pipes of other sandboxes, and an init that kept them would keep those
 * runs from ever seeing EOF. */
static int child_fds(const struct launch *L)
{
	int src[5] = {L->fd_in, L->fd_out, L->fd_err, L->fd_report, L->fd_sync};
	int tmp[5];
	for (int i = 0; i < 5; i++) {
		tmp[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 64);
		if (tmp[i] < 0)
			return -errno;
	}
	for (int i = 0; i < 5; i++)
		if (dup3(tmp[i], i, i >= 3 ? O_CLOEXEC : 0) < 0)
			return -errno;
	if (syscall(SYS_close_range, CFD_FIRST_FREE, ~0U, 0) < 0)
		return -errno;
	return 0;
}

static void reset_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (int s = 1; s < _NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &sa, NULL); /* the raw syscall wrapper; no locks */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* The command process: stdio in place, default signals, then exec, searching PATH in the
 * sandbox's view. Any failure goes to exec_fd, whose EOF tells the init that exec worked. */
static _Noreturn void command_exec(const struct launch *L, int exec_fd)
{
	struct report r = {.kind = REPORT_FAIL, .step = STEP_EXEC};
	/* Its own process group, so that signals reach pipelines and children as a unit. */
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	reset_signals();
	const char *prog = L->argv[0];
	int err = ENOENT;
	bool has_slash = false;
	for (const char *p = prog; *p; p++)
		if (*p == '/')
			has_slash = true;
	if (has_slash) {
		execve(prog, L->argv, L->envp);
		err = errno;
	} else {
		bool eacces = false;
		for (char **d = L->path_dirs; *d; d++) {
			size_t a = strlen(*d), b = strlen(prog);
			if (a + b + 2 > PATH_MAX)
				continue;
			memcpy(L->exec_buf, *d, a);
			L->exec_buf[a] = '/';
			memcpy(L->exec_buf + a + 1, prog, b + 1);
			execve(L->exec_buf, L->argv, L->envp);
			if (errno == EACCES)
				eacces = true;
			else if (errno != ENOENT && errno != ENOTDIR) {
				err = errno;
				break;
			}
		}
		if (err == ENOENT && eacces)
			err = EACCES;
	}
	r.err = err;
	ssize_t n = write(exec_fd, &r, sizeof(r));
	(void)n;
	_exit(err == ENOENT ? 127 : 126);
}

/* Kill every other process of the sandbox. In a pid namespace kill(-1) means exactly that.
 * Without one, walk /proc for children of ours (we are their subreaper, so orphans come to
 * us) until none is left; a process forking while we walk is caught by the next round. */
static void init_kill_all(const struct launch *L)
{
	if (L->pidns) {
		kill(-1, SIGKILL);
		return;
	}
	pid_t self = getpid();
	char buf[4096], path[64];
	for (int round = 0; round < 100; round++) {
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
		while (waitpid(-1, &st, WNOHANG) > 0)
			;
		if (!found)
			return;
	}
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
	int status = 0;
	bool done = false;
	while (!done) {
		siginfo_t si;
		int sig = sigwaitinfo(&set, &si);
		if (sig < 0)
			continue;
		if (sig == SIGCHLD) {
			int st;
			pid_t p;
			while ((p = waitpid(-1, &st, WNOHANG)) > 0)
				if (p == cmd) {
					status = st;
					done = true;
				}
		} else if (sig == SIGUSR1) {
			init_kill_all(L);
			int st;
			pid_t p;
			while ((p = waitpid(-1, &st, 0)) > 0)
				if (p == cmd)
					status = st;
			done = true;
		} else {
			kill(-cmd, sig);
		}
	}
	/* Nothing outlives the command: background jobs, setsid daemons, double forks. */
	init_kill_all(L);
	int st;
	while (waitpid(-1, &st, 0) > 0 || errno == EINTR)
		;
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	struct report r = {.kind = REPORT_EXIT, .status = status};
	r.user_us = (int64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec;
	r.sys_us = (int64_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
	r.maxrss_kb = ru.ru_maxrss;
	ssize_t n = write(CFD_REPORT, &r, sizeof(r));
	(void)n;
	_exit(0);
}

/* The setup sequence. Each step has an id for errors; the order is the contract. */
static _Noreturn void child_main(const struct launch *L)
{
	int r, detail = -1;
	char c;

	/* Die with the supervisor. The sync read below closes the race where the supervisor
	 * died before this was set: its end of the pipe is then closed and the read sees EOF. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if ((r = child_fds(L)) < 0)
		child_fail(STEP_FDS, r, -1);
	/* Wait until the parent has written our uid/gid maps and put us into the cgroup:
	 * mounts need the mapped ids, and limits must hold before anything runs. */
	if (read(CFD_SYNC, &c, 1) != 1)
		_exit(125);
	close(CFD_SYNC);
	/* A new session: no controlling terminal of the host, so TIOCSTI has nothing to push
	 * into (seccomp also denies it). */
	if (setsid() < 0)
		child_fail(STEP_SETSID, errno, -1);
	if (L->utsns && sethostname("corral", 6) < 0)
		child_fail(STEP_HOSTNAME, errno, -1);
	/* Mounts need CAP_SYS_ADMIN in our user namespace, so they come before the caps drop;
	 * pivot_root also ends any path back to the host root. */
	if (L->mountns) {
		if ((r = mount_setup_child(&L->mounts, &detail)) < 0)
			child_fail_path(STEP_MOUNT, r, detail,
			                detail >= 0 ? L->mounts.ops[detail].dst : "the new root");
	} else if (chdir(L->cwd) < 0) {
		child_fail(STEP_CWD, errno, -1);
	}
	if ((r = rlimit_apply_child(&L->rl, &detail)) < 0)
		child_fail(STEP_RLIMIT, r, detail);
	if (L->netns && (r = net_loopback_up_child()) < 0)
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
	/* no_new_privs before Landlock and seccomp: both need it (or CAP_SYS_ADMIN, which we
	 * are about to drop), and setuid binaries must not regain what we drop. */
	if ((r = caps_no_new_privs_child()) < 0)
		child_fail(STEP_NNP, r, -1);
	if (L->landlock && (r = landlock_apply_child(&L->ll, &detail)) < 0)
		child_fail_path(STEP_LANDLOCK, r, detail,
		                detail >= 0 ? L->ll.rules[detail].path : "the ruleset");
	if ((L->userns || getuid() == 0) && (r = caps_drop_all_child()) < 0)
		child_fail(STEP_CAPS, r, -1);
	/* seccomp last: it denies mount, setns and friends that the steps above used. */
	if (L->seccomp && (r = seccomp_apply_child(L->sc)) < 0)
		child_fail(STEP_SECCOMP, r, -1);

	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0)
		child_fail(STEP_FORK, errno, -1);
	pid_t cmd = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, NULL);
	if (cmd < 0)
		child_fail(STEP_FORK, errno, -1);
	if (cmd == 0) {
		close(ep[0]);
		command_exec(L, ep[1]);
	}
	close(ep[1]);
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
	if (n == (ssize_t)sizeof(er))
		child_report(CFD_REPORT, REPORT_FAIL, STEP_EXEC, er.err, -1, 0);
	else
		child_report(CFD_REPORT, REPORT_EXEC_OK, 0, 0, (int)cmd, 0);
	init_loop(L, cmd);
}

/* ---- the parent ----------------------------------------------------------------------- */

/* The seccomp program is compiled once per process and shared by every launch. */
static pthread_mutex_t sc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct seccomp_prog sc_prog;
static int sc_state; /* 0 not tried, 1 ready, -1 failed */
static struct corral_error sc_err;

static const struct seccomp_prog *seccomp_cached(struct corral_error *err)
{
	pthread_mutex_lock(&sc_lock);
	if (sc_state == 0) {
		struct seccomp_opts o = {.allow_userns = 0};
		sc_state = seccomp_prepare(&o, &sc_prog, &sc_err) == 0 ? 1 : -1;
	}
	int st = sc_state;
	pthread_mutex_unlock(&sc_lock);
	if (st < 0) {
		if (err)
			*err = sc_err;
		return NULL;
	}
	return &sc_prog;
}

/* Test hook: CORRAL_TEST_DISABLE=userns,landlock,seccomp,cgroup makes the library treat
 * those layers as unavailable on this host, to exercise the fallback ladder without a
 * special kernel. The integration tests also make them unavailable for real with a seccomp
 * filter (tests/nolayer.c); both paths must agree. */
static bool test_disabled(const char *layer)
{
	const char *v = getenv("CORRAL_TEST_DISABLE");
	if (!v)
		return false;
	size_t n = strlen(layer);
	for (const char *p = v; (p = strstr(p, layer)); p += n)
		if ((p == v || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
			return true;
	return false;
}

static void launch_free(struct launch *L)
{
	mount_plan_free(&L->mounts);
	free(L->ll_rules);
	env_free(L->envp);
	if (L->path_dirs) {
		for (char **p = L->path_dirs; *p; p++)
			free(*p);
		free(L->path_dirs);
	}
	free(L->exec_buf);
}

static int split_path(struct launch *L)
{
	const char *path = "/usr/local/bin:/usr/bin:/bin";
	for (char **e = L->envp; *e; e++)
		if (!strncmp(*e, "PATH=", 5))
			path = *e + 5;
	size_t n = 1;
	for (const char *p = path; *p; p++)
		n += *p == ':';
	L->path_dirs = calloc(n + 1, sizeof(char *));
	if (!L->path_dirs)
		return -1;
	size_t i = 0;
	for (const char *p = path;;) {
		const char *end = strchr(p, ':');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		/* an empty entry means the cwd, as in execvp */
		L->path_dirs[i] = len ? strndup(p, len) : strdup(".");
		if (!L->path_dirs[i++])
			return -1;
		if (!end)
			break;
		p = end + 1;
	}
	return 0;
}

/* Landlock rules mirror the mount plan: the same paths, as the child will see them. */
static int build_landlock(struct launch *L, int abi)
{
	const struct mount_plan *mp = &L->mounts;
	L->ll_rules = calloc(mp->n_ops + 2, sizeof(*L->ll_rules));
	if (!L->ll_rules)
		return -1;
	size_t n = 0;
	/* Inside the sandbox's own root every directory may be listed (it holds only what the
	 * plan put there); file contents still need a rule of their own. */
	if (L->mountns)
		L->ll_rules[n++] = (struct landlock_rule){"/", LL_LIST};
	for (size_t i = 0; i < mp->n_ops; i++) {
		const struct mount_op *op = &mp->ops[i];
		if (!op->ll_access)
			continue;
		const char *path = op->dst;
		if (!L->mountns) {
			/* No mount namespace: the rules name host paths. Private mounts do not
			 * exist, so /tmp becomes a private host directory, and /proc, /dev stay
			 * the host's. */
			if (op->kind == MOP_TMPFS && !strcmp(op->dst, "/tmp"))
				path = L->private_tmp;
			else if (op->kind == MOP_TMPFS || op->kind == MOP_DEVPTS)
				path = op->dst;
			else if (op->src)
				path = op->src;
			if (!path)
				continue;
		}
		L->ll_rules[n].path = path;
		L->ll_rules[n].access = op->ll_access;
		n++;
	}
	L->ll.abi = abi;
	L->ll.rules = L->ll_rules;
	L->ll.n_rules = n;
	L->ll.deny_tcp = L->cfg->net == CORRAL_NET_NONE;
	L->ll.scope = 1;
	return 0;
}

static void record(struct corral_result *res, const char *name, bool applied, const char *detail)
{
	result_add_layer(res, name, applied, detail);
}

/* Decide the layers for this run and record them. Returns <0 when mode=required and a
 * layer is missing. */
static int choose_layers(struct launch *L, struct corral_result *res, struct corral_error *err)
{
	const struct corral_config *cfg = L->cfg;
	enum corral_mode mode = cfg->mode;
	res->mode = mode == CORRAL_MODE_REQUIRED ? "required"
	            : mode == CORRAL_MODE_AUTO   ? "auto"
	                                         : "none";
	if (mode == CORRAL_MODE_NONE) {
		static const char *const names[] = {"userns", "mountns", "pidns", "netns", "ipcns",
		                                    "utsns",  "cgroupns", "landlock", "seccomp",
		                                    "caps"};
		for (size_t i = 0; i < ARRAY_SIZE(names); i++)
			record(res, names[i], false, "mode none: isolation disabled");
		return 0;
	}
	char why[300];
	bool userns_ok = !test_disabled("userns");
	if (!userns_ok)
		snprintf(why, sizeof(why), "disabled by CORRAL_TEST_DISABLE");
	L->userns = L->mountns = L->pidns = L->ipcns = L->utsns = L->cgroupns = userns_ok;
	L->netns = userns_ok && cfg->net == CORRAL_NET_NONE;
	if (!userns_ok && mode == CORRAL_MODE_REQUIRED)
		return corral_set_error(err, CORRAL_EUNAVAIL, 0, "userns",
		                        "userns: %s; run with --mode=auto to continue without "
		                        "namespaces (Landlock, seccomp and limits still apply)",
		                        why);

	int abi = test_disabled("landlock") ? 0 : landlock_probe_abi();
	L->landlock = abi > 0;
	if (!L->landlock && mode == CORRAL_MODE_REQUIRED)
		return corral_set_error(err, CORRAL_EUNAVAIL, 0, "landlock",
		                        "landlock: not supported by this kernel or disabled (needs "
		                        "Linux 5.13 with CONFIG_SECURITY_LANDLOCK and 'landlock' in "
		                        "the lsm= boot parameter); run with --mode=auto to continue "
		                        "without it");
	L->ll.abi = abi;

	L->seccomp = !test_disabled("seccomp") && seccomp_probe();
	struct corral_error scerr = {0};
	if (L->seccomp && !(L->sc = seccomp_cached(&scerr)))
		L->seccomp = false;
	if (!L->seccomp && mode == CORRAL_MODE_REQUIRED) {
		if (scerr.code) {
			*err = scerr;
			return scerr.code;
		}
		return corral_set_error(err, CORRAL_EUNAVAIL, 0, "seccomp",
		                        "seccomp: filtering is not available (needs "
		                        "CONFIG_SECCOMP_FILTER); run with --mode=auto to continue "
		                        "without it");
	}
	return 0;
}

static void record_layers(const struct launch *L, struct corral_result *res)
{
	if (L->cfg->mode == CORRAL_MODE_NONE)
		return;
	const char *skip = "unavailable on this host (mode auto)";
	record(res, "userns", L->userns, L->userns ? "uid and gid mapped 1:1" : skip);
	record(res, "mountns", L->mountns,
	       L->mountns ? "tmpfs root, system read-only, workspace read-write" : skip);
	record(res, "pidns", L->pidns, L->pidns ? "own pid space, init as pid 1" : skip);
	if (L->cfg->net == CORRAL_NET_HOST)
		record(res, "netns", false, "host network (--net host)");
	else
		record(res, "netns", L->netns, L->netns ? "loopback only" : skip);
	record(res, "ipcns", L->ipcns, L->ipcns ? "private" : skip);
	record(res, "utsns", L->utsns, L->utsns ? "hostname corral" : skip);
	record(res, "cgroupns", L->cgroupns, L->cgroupns ? "private" : skip);
	char d[96];
	if (L->landlock)
		snprintf(d, sizeof(d), "abi %d%s%s", L->ll.abi,
		         L->ll.deny_tcp && L->ll.abi >= 4 ? ", tcp denied" : "",
		         L->ll.abi >= 6 ? ", abstract unix and signals scoped" : "");
	record(res, "landlock", L->landlock, L->landlock ? d : skip);
	record(res, "seccomp", L->seccomp, L->seccomp ? "deny-list, EPERM" : skip);
	record(res, "caps", true, "all dropped, no_new_privs");
}

/* The environment block; without a mount namespace TMPDIR names the private host tmp. */
static int prepare_env(struct launch *L)
{
	const struct corral_config *cfg = L->cfg;
	env_free(L->envp);
	L->envp = NULL;
	struct env_entry *ents = calloc(cfg->n_env + 1, sizeof(*ents));
	if (!ents)
		return -1;
	size_t n = 0;
	if (L->private_tmp && !L->mountns)
		ents[n++] = (struct env_entry){"TMPDIR", L->private_tmp};
	if (cfg->n_env)
		memcpy(ents + n, cfg->env, cfg->n_env * sizeof(*ents));
	L->envp = env_build(ents, cfg->n_env + n, cfg->workspace);
	free(ents);
	return L->envp ? 0 : -1;
}

/* Create a private /tmp on the host for runs without a mount namespace. */
static int make_private_tmp(struct launch *L)
{
	char tmpl[] = "/tmp/corral-tmp-XXXXXX";
	if (!mkdtemp(tmpl))
		return -1;
	L->private_tmp = strdup(tmpl);
	return L->private_tmp ? 0 : -1;
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
		pid = syscall(SYS_clone, (unsigned long)(flags | CLONE_PIDFD), NULL, pidfd, NULL, NULL);
	}
	if (pid == 0)
		child_main(L);
	(void)L;
	return (int)pid;
}

int launch_start(const struct corral_config *cfg, struct corral_result *res,
                 struct launch_out *out, struct corral_error *err)
{
	struct launch L;
	memset(&L, 0, sizeof(L));
	L.cfg = cfg;
	argarea(&L.argarea_start, &L.argarea_end);
	L.uid = getuid();
	L.gid = getgid();
	int r;
	int p_in[2] = {-1, -1}, p_out[2] = {-1, -1}, p_err[2] = {-1, -1};
	int p_rep[2] = {-1, -1}, p_sync[2] = {-1, -1};
	int pidfd = -1;
	struct cgroup_handle *cg = NULL;
	out->pid = -1;

	if ((r = choose_layers(&L, res, err)) < 0)
		goto fail;
	const char *cwd = cfg->cwd ? cfg->cwd : cfg->workspace;
	L.cwd = cwd;
	if ((r = mount_plan_build(&L.mounts, cfg->workspace, cwd, cfg->limits[CORRAL_LIMIT_TMPFS]
	                                                          ? cfg->limits[CORRAL_LIMIT_TMPFS]
	                                                          : 256ULL << 20,
	                          err)) < 0)
		goto fail;
	if (!L.mountns && L.landlock && cfg->mode != CORRAL_MODE_NONE) {
		if (make_private_tmp(&L) < 0) {
			r = corral_set_error(err, CORRAL_ESYS, errno, "tmp",
			                     "tmp: cannot create a private /tmp directory: %s",
			                     strerror(errno));
			goto fail;
		}
	}
	if (L.landlock && build_landlock(&L, L.ll.abi) < 0) {
		r = corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "landlock", "out of memory");
		goto fail;
	}
	/* cgroup: limits of memory and pids, and a reliable kill of the whole tree. */
	/* A cgroup is made only when a limit needs it. Inside a user namespace RLIMIT_NPROC
	 * counts per sandbox, so an unprivileged caller's process limit needs no cgroup; but the
	 * kernel exempts kuid 0 from RLIMIT_NPROC, so root's sandboxes need pids.max. */
	bool pids_need_cg = cfg->limits[CORRAL_LIMIT_PIDS] &&
	                    (L.uid == 0 || (!L.userns && !cfg->pids_default));
	bool want_cg = cfg->mode != CORRAL_MODE_NONE && !test_disabled("cgroup") &&
	               (cfg->limits[CORRAL_LIMIT_MEMORY] || pids_need_cg);
	if (want_cg) {
		struct cgroup_limits lim = {.memory_bytes = cfg->limits[CORRAL_LIMIT_MEMORY],
		                            .pids = cfg->limits[CORRAL_LIMIT_PIDS]};
		struct corral_error cgerr = {0};
		if (cgroup_prepare(&lim, &cg, &cgerr) < 0) {
			cg = NULL;
			record(res, "cgroup", false, cgerr.message);
		}
	} else {
		record(res, "cgroup", false,
		       cfg->mode == CORRAL_MODE_NONE ? "mode none"
		                                     : "not needed: no memory limit, and processes are "
		                                       "limited by RLIMIT_NPROC per user namespace");
	}
	/* RLIMIT_NPROC counts per user namespace; without one it would count every process
	 * of the host user, so the default process limit only applies inside a userns. */
	uint64_t nproc = cfg->limits[CORRAL_LIMIT_PIDS];
	if (!L.userns && cfg->pids_default)
		nproc = 0;
	rlimit_plan_build(&L.rl, cfg->limits[CORRAL_LIMIT_CPU_S], cfg->limits[CORRAL_LIMIT_MEMORY],
	                  nproc, cfg->limits[CORRAL_LIMIT_NOFILE],
	                  cfg->limits[CORRAL_LIMIT_FSIZE], cg != NULL, cg != NULL);
	prepare_env(&L);
	L.argv = cfg->argv;
	L.exec_buf = malloc(PATH_MAX);
	if (!L.envp || !L.exec_buf || split_path(&L) < 0) {
		r = corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "env", "out of memory");
		goto fail;
	}

	if (pipe2(p_out, O_CLOEXEC) < 0 || pipe2(p_err, O_CLOEXEC) < 0 ||
	    pipe2(p_rep, O_CLOEXEC) < 0 || pipe2(p_sync, O_CLOEXEC) < 0) {
		r = corral_set_error(err, CORRAL_ESYS, errno, "pipe",
		                     "pipe: %s; raise the open-files limit of the supervisor",
		                     strerror(errno));
		goto fail;
	}
	if (cfg->stdin_is_data) {
		if (pipe2(p_in, O_CLOEXEC) < 0) {
			r = corral_set_error(err, CORRAL_ESYS, errno, "pipe", "pipe: %s",
			                     strerror(errno));
			goto fail;
		}
	} else if (cfg->stdin_fd >= 0) {
		p_in[0] = fcntl(cfg->stdin_fd, F_DUPFD_CLOEXEC, 3);
	} else {
		p_in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	if (p_in[0] < 0) {
		r = corral_set_error(err, CORRAL_ESYS, errno, "stdin", "stdin: %s", strerror(errno));
		goto fail;
	}
	L.fd_in = p_in[0];
	L.fd_out = p_out[1];
	L.fd_err = p_err[1];
	L.fd_report = p_rep[1];
	L.fd_sync = p_sync[0];

	uint64_t flags = 0;
	if (L.userns)
		flags |= CLONE_NEWUSER;
	if (L.mountns)
		flags |= CLONE_NEWNS;
	if (L.pidns)
		flags |= CLONE_NEWPID;
	if (L.netns)
		flags |= CLONE_NEWNET;
	if (L.ipcns)
		flags |= CLONE_NEWIPC;
	if (L.utsns)
		flags |= CLONE_NEWUTS;
	if (L.cgroupns)
		flags |= CLONE_NEWCGROUP;

	/* Signals blocked across the clone: the child must not run a handler of the caller's
	 * before it has reset them, and its init waits for signals with sigwaitinfo. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int cgfd = cg ? cgroup_clone_fd(cg) : -1;
	pid_t pid = clone_sandbox(&L, flags, cgfd, &pidfd);
	if (pid < 0 && cgfd >= 0 && (errno == EINVAL || errno == ENOSYS || errno == EBUSY)) {
		cgfd = -1; /* CLONE_INTO_CGROUP unsupported: attach after the clone instead */
		pid = clone_sandbox(&L, flags, -1, &pidfd);
	}
	int clone_errno = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pid < 0 && L.userns && cfg->mode == CORRAL_MODE_AUTO &&
	    (clone_errno == EPERM || clone_errno == EINVAL || clone_errno == ENOSPC ||
	     clone_errno == EACCES)) {
		/* No user namespaces here: fall down one tier and say so. */
		L.userns = L.mountns = L.pidns = L.netns = L.ipcns = L.utsns = L.cgroupns = false;
		if (!L.private_tmp && make_private_tmp(&L) < 0) {
			r = corral_set_error(err, CORRAL_ESYS, errno, "tmp", "tmp: %s",
			                     strerror(errno));
			goto fail;
		}
		free(L.ll_rules);
		L.ll_rules = NULL;
		if (L.landlock && build_landlock(&L, L.ll.abi) < 0) {
			r = corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "landlock", "out of memory");
			goto fail;
		}
		if (prepare_env(&L) < 0) {
			r = corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "env", "out of memory");
			goto fail;
		}
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pid = clone_sandbox(&L, 0, cgfd, &pidfd);
		clone_errno = errno;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (pid < 0) {
		if (L.userns && (clone_errno == EPERM || clone_errno == EINVAL ||
		                 clone_errno == ENOSPC || clone_errno == EACCES)) {
			char why[300];
			userns_probe(why, sizeof(why));
			r = corral_set_error(err, CORRAL_EUNAVAIL, clone_errno, "userns",
			                     "userns: %s", why);
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
	record_layers(&L, res);

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
	if (cg) {
		if (cgfd < 0 && (r = cgroup_attach(cg, pid, err)) < 0)
			goto fail_kill;
		record(res, "cgroup", true, cgroup_describe(cg));
	} else if (want_cg) {
		/* the reason was recorded when prepare failed */
	}
	if (!cg)
		record(res, "rlimits", true, "cpu, data, nproc, nofile, fsize, core=0");
	else
		record(res, "rlimits", true, "cpu, nofile, fsize, core=0");
	if (write(p_sync[1], "x", 1) != 1) {
		r = corral_set_error(err, CORRAL_ESYS, errno, "sync", "sync: %s", strerror(errno));
		goto fail_kill;
	}

	close(p_sync[0]);
	close(p_sync[1]);
	close(p_in[0]);
	close(p_out[1]);
	close(p_err[1]);
	close(p_rep[1]);
	out->out_fd = p_out[0];
	out->err_fd = p_err[0];
	out->in_fd = p_in[1];
	out->report_fd = p_rep[0];
	out->pidns = L.pidns;
	out->cg = cg;
	out->private_tmp = L.private_tmp;
	L.private_tmp = NULL;
	launch_free(&L);
	return 0;

fail_kill:
	syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	{
		siginfo_t si;
		while (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED | __WALL) < 0 && errno == EINTR)
			;
	}
fail:
	for (int i = 0; i < 2; i++) {
		if (p_in[i] >= 0)
			close(p_in[i]);
		if (p_out[i] >= 0)
			close(p_out[i]);
		if (p_err[i] >= 0)
			close(p_err[i]);
		if (p_rep[i] >= 0)
			close(p_rep[i]);
		if (p_sync[i] >= 0)
			close(p_sync[i]);
	}
	if (pidfd >= 0)
		close(pidfd);
	if (cg)
		cgroup_destroy(cg);
	if (L.private_tmp) {
		rmdir(L.private_tmp);
		free(L.private_tmp);
	}
	launch_free(&L);
	out->pid = -1;
	return r;
}

int launch_report_error(const struct report *rep, const struct corral_config *cfg,
                        struct corral_error *err)
{
	const char *step = launch_step_name(rep->step);
	int e = rep->err;
	if (rep->step == STEP_EXEC) {
		const char *prog = cfg->argv[0];
		if (e == ENOENT)
			return corral_set_error(err, CORRAL_ENOTFOUND, e, "exec",
			                        "exec: %s: command not found in the sandbox (PATH is "
			                        "searched inside it; the host's /home, /opt and other "
			                        "paths outside the plan are not visible)",
			                        prog);
		return corral_set_error(err, CORRAL_ENOEXEC, e, "exec",
		                        "exec: %s: %s (not executable in the sandbox)", prog,
		                        strerror(e));
	}
	if (rep->step == STEP_MOUNT)
		return corral_set_error(err, CORRAL_ESETUP, e, step,
		                        "mount: cannot set up %.200s in the sandbox: %s; check that "
		                        "the path is accessible to this user, or run 'corral check'",
		                        rep->path, strerror(e));
	if (rep->step == STEP_LANDLOCK)
		return corral_set_error(err, CORRAL_ESETUP, e, step,
		                        "landlock: cannot add the rule for %.200s: %s; run with "
		                        "--mode=auto to continue without Landlock",
		                        rep->path, strerror(e));
	if (rep->step == STEP_CWD)
		return corral_set_error(err, CORRAL_ESETUP, e, step,
		                        "cwd: cannot enter the working directory: %s", strerror(e));
	return corral_set_error(err, CORRAL_ESETUP, e, step,
	                        "%s: sandbox setup failed: %s; run 'corral check' to see what "
	                        "this host supports",
	                        step, strerror(e));
}
