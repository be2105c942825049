/* probe: run inside a sandbox by the test suite to make one exact system call and print
 * what happened. Built static so it needs nothing from the sandbox's /lib.
 *
 *   probe <subcommand> [args]    (probe --help lists the subcommands)
 *
 * Output is one line on stdout: "ok", "errno=NAME", a value (getuid, caps, ...) or
 * "key=value ..." for the resource hogs. Exit status: 0 the call succeeded, 1 it failed with
 * an errno, 2 usage error, 3 a call run in a forked child (x32-getpid, i386-getpid) killed
 * that child: the line is then "signal=NAME".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define KEYCTL_GET_KEYRING_ID 0
#define KEY_SPEC_PROCESS_KEYRING -2
#define KEY_SPEC_SESSION_KEYRING -3
#define UFFD_USER_MODE_ONLY 1
#define X32_SYSCALL_BIT 0x40000000L
#define PROBE_MISSING "/.corral-probe-missing" /* a path that never exists */

/* ---- output ----------------------------------------------------------------------------- */

/* clang-format off */
#define E(x) {x, #x}
/* clang-format on */
static const struct {
	int num;
	const char *name;
} errnames[] = {
    E(EPERM),         E(ENOENT),       E(ESRCH),           E(EINTR),           E(EIO),
    E(ENXIO),         E(E2BIG),        E(ENOEXEC),         E(EBADF),           E(ECHILD),
    E(EAGAIN),        E(ENOMEM),       E(EACCES),          E(EFAULT),          E(EBUSY),
    E(EEXIST),        E(EXDEV),        E(ENODEV),          E(ENOTDIR),         E(EISDIR),
    E(EINVAL),        E(ENFILE),       E(EMFILE),          E(ENOTTY),          E(ETXTBSY),
    E(EFBIG),         E(ENOSPC),       E(ESPIPE),          E(EROFS),           E(EMLINK),
    E(EPIPE),         E(ERANGE),       E(ENAMETOOLONG),    E(ENOSYS),          E(ENOTEMPTY),
    E(ELOOP),         E(ENOKEY),       E(EOVERFLOW),       E(ENOTSOCK),        E(EPROTOTYPE),
    E(EOPNOTSUPP),    E(EAFNOSUPPORT), E(EPROTONOSUPPORT), E(ESOCKTNOSUPPORT), E(EADDRINUSE),
    E(EADDRNOTAVAIL), E(ENETDOWN),     E(ENETUNREACH),     E(ECONNABORTED),    E(ECONNRESET),
    E(ENOTCONN),      E(ETIMEDOUT),    E(ECONNREFUSED),    E(EHOSTUNREACH),    E(EALREADY),
    E(EINPROGRESS),   E(ESTALE),       E(EDQUOT),          E(ECANCELED),       E(EKEYREJECTED),
};

static const char *errname(int e)
{
	static char buf[24];
	for (size_t i = 0; i < ARRAY_SIZE(errnames); i++)
		if (errnames[i].num == e)
			return errnames[i].name;
	snprintf(buf, sizeof(buf), "%d", e);
	return buf;
}

static int ok(void)
{
	puts("ok");
	return 0;
}

static int fail(int e)
{
	printf("errno=%s\n", errname(e));
	return 1;
}

/* A call returning -1/errno; a non-negative result is a descriptor when is_fd. */
static int check(long rc, int is_fd)
{
	if (rc < 0)
		return fail(errno);
	if (is_fd)
		close((int)rc);
	return ok();
}

/* ---- argument parsing ------------------------------------------------------------------ */

static int usage_error;

static long long num(const char *s, int base)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, base);
	if (errno || end == s || *end) {
		usage_error = 1;
		return 0;
	}
	return v;
}

static unsigned long long unum(const char *s, int base)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, base);
	if (errno || end == s || *end) {
		usage_error = 1;
		return 0;
	}
	return v;
}

/* ---- a call that may kill the caller runs in a child ------------------------------------ */

static int in_child(int (*fn)(void))
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return fail(errno);
	if (pid == 0) {
		int rc = fn();
		fflush(stdout);
		_exit(rc);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return fail(errno);
	if (WIFSIGNALED(st)) {
		const char *name = sigabbrev_np(WTERMSIG(st));
		printf("signal=SIG%s\n", name ? name : "?");
		return 3;
	}
	return WEXITSTATUS(st);
}

/* ---- subcommands ------------------------------------------------------------------------ */

static int do_ptrace_traceme(char **a)
{
	(void)a;
	return check(ptrace(PTRACE_TRACEME, 0, NULL, NULL), 0);
}

static int do_ptrace_attach(char **a)
{
	pid_t pid = (pid_t)num(a[0], 10);
	if (usage_error)
		return 2;
	if (ptrace(PTRACE_ATTACH, pid, NULL, NULL) < 0)
		return fail(errno);
	waitpid(pid, NULL, __WALL);
	ptrace(PTRACE_DETACH, pid, NULL, NULL);
	return ok();
}

static int do_process_vm_readv(char **a)
{
	/* The remote address is our own buffer's: right for another copy of this static
	 * binary, and a filtered call fails before the address matters anyway. */
	static char remote_buf[8];
	char local_buf[8];
	struct iovec local = {local_buf, sizeof(local_buf)};
	struct iovec remote = {remote_buf, sizeof(remote_buf)};
	pid_t pid = (pid_t)num(a[0], 10);
	if (usage_error)
		return 2;
	return check(process_vm_readv(pid, &local, 1, &remote, 1, 0), 0);
}

/* Write 8 bytes into PID's copy of a static buffer (by default our own: harmless, since it
 * is this process's memory and nobody reads it). */
static int do_process_vm_writev(char **a)
{
	static char remote_buf[8];
	char local_buf[8] = "corral!";
	struct iovec local = {local_buf, sizeof(local_buf)};
	struct iovec remote = {remote_buf, sizeof(remote_buf)};
	pid_t pid = a[0] ? (pid_t)num(a[0], 10) : getpid();
	if (usage_error)
		return 2;
	return check(process_vm_writev(pid, &local, 1, &remote, 1, 0), 0);
}

static int do_mount_tmpfs(char **a)
{
	return check(mount("none", a[0], "tmpfs", 0, NULL), 0);
}

static int do_umount(char **a)
{
	return check(umount2(a[0], MNT_DETACH), 0);
}

static int do_pivot_root(char **a)
{
	/* Paths that do not exist by default: an unfiltered, privileged call then fails with
	 * ENOENT instead of changing anything, while a filtered one fails with EPERM. */
	const char *new_root = a[0] ? a[0] : PROBE_MISSING;
	const char *put_old = a[0] && a[1] ? a[1] : new_root;
	return check(syscall(SYS_pivot_root, new_root, put_old), 0);
}

static int do_unshare_user(char **a)
{
	(void)a;
	return check(unshare(CLONE_NEWUSER), 0);
}

static int do_unshare_net(char **a)
{
	(void)a;
	return check(unshare(CLONE_NEWNET), 0);
}

static int reap(long pid)
{
	if (pid < 0)
		return fail(errno);
	if (pid == 0)
		_exit(0);
	waitpid((pid_t)pid, NULL, 0);
	return ok();
}

static int do_clone_newuser(char **a)
{
	(void)a;
	/* Raw clone with no stack behaves like fork; the child exits at once. */
	return reap(syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0UL));
}

/* The clone the init's network helper makes (glibc's clone(), CLONE_VM | CLONE_FILES, a stack
 * of its own): "ok", or errno=E... where something refuses it (nolayer nethelper). */
static char clone_vm_stack[16384] __attribute__((aligned(64)));
static int clone_vm_child(void *arg)
{
	(void)arg;
	return 0;
}
static int do_clone_vm(char **a)
{
	(void)a;
	pid_t pid = clone(clone_vm_child, clone_vm_stack + sizeof(clone_vm_stack),
	                  CLONE_VM | CLONE_FILES, NULL);
	if (pid < 0)
		return fail(errno);
	waitpid(pid, NULL, __WALL);
	return ok();
}

static int do_clone3(char **a)
{
	struct {
		uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
	} args = {.flags = a[0] ? unum(a[0], 16) : 0, .exit_signal = SIGCHLD};
	if (usage_error)
		return 2;
	return reap(syscall(SYS_clone3, &args, sizeof(args)));
}

static int inet_call(const char *host, const char *port, int do_bind);

/* Join pid 1's network namespace; with HOST PORT, then connect there (from inside a sandbox:
 * a connection a host canary listener would count, were the join to work). */
static int do_setns_net(char **a)
{
	int fd = open("/proc/1/ns/net", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(errno);
	int rc = setns(fd, CLONE_NEWNET);
	int e = errno;
	close(fd);
	if (rc < 0)
		return fail(e);
	return a[0] && a[1] ? inet_call(a[0], a[1], 0) : ok();
}

static int do_kexec_load(char **a)
{
	(void)a;
	/* Flag 0x100 is invalid: past the capability check the kernel stops with EINVAL, so
	 * an unfiltered root run cannot unload a kexec/kdump kernel. */
	return check(syscall(SYS_kexec_load, 0UL, 0UL, NULL, 0x100UL), 0);
}

static int do_init_module(char **a)
{
	(void)a;
	return check(syscall(SYS_init_module, NULL, 0UL, ""), 0);
}

static int do_bpf(char **a)
{
	(void)a;
	union bpf_attr attr;
	memset(&attr, 0, sizeof(attr));
	return check(syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr)), 1);
}

static int do_perf_event_open(char **a)
{
	(void)a;
	struct perf_event_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_TASK_CLOCK;
	attr.exclude_kernel = 1;
	return check(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0UL), 1);
}

static int do_keyctl(char **a)
{
	(void)a;
	return check(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0), 0);
}

static int do_add_key(char **a)
{
	(void)a;
	/* The process keyring dies with this process. */
	return check(
	    syscall(SYS_add_key, "user", "corral-probe", "x", 1UL, KEY_SPEC_PROCESS_KEYRING), 0);
}

static int do_userfaultfd(char **a)
{
	(void)a;
	/* User-mode-only faults are what an unprivileged process may ask for (5.11+), so an
	 * unfiltered call succeeds instead of hitting vm.unprivileged_userfaultfd. */
	return check(syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY), 1);
}

static int do_io_uring_setup(char **a)
{
	(void)a;
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	return check(syscall(SYS_io_uring_setup, 1U, &p), 1);
}

/* io_uring_enter and io_uring_register on descriptor -1: the filter answers EPERM by system
 * call number whatever the arguments; unfiltered, the kernel rejects them (EBADF: no such
 * ring; io_uring_register may check its opcode's arguments first: EINVAL). The
 * sandbox can never have a ring to pass, since io_uring_setup is denied too. */
static int do_io_uring_enter(char **a)
{
	(void)a;
	return check(syscall(SYS_io_uring_enter, -1, 1U, 0U, 0U, NULL, 0UL), 0);
}

static int do_io_uring_register(char **a)
{
	(void)a;
	return check(syscall(SYS_io_uring_register, -1, 0U /* IORING_REGISTER_BUFFERS */, NULL, 0U),
	             0);
}

static int do_request_key(char **a)
{
	(void)a;
	/* No callout (NULL): the kernel only searches the caller's keyrings, and a key of this
	 * name is never there, so an unfiltered call fails with ENOKEY and starts no helper. */
	return check(syscall(SYS_request_key, "user", "corral-probe-missing", NULL, 0), 0);
}

static int do_open_by_handle_at(char **a)
{
	(void)a;
	int mfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mfd < 0)
		return fail(errno);
	struct {
		struct file_handle fh;
		unsigned char bytes[8];
	} h = {.fh = {.handle_bytes = 8, .handle_type = 1}};
	int rc = check(open_by_handle_at(mfd, &h.fh, O_RDONLY), 1);
	close(mfd);
	return rc;
}

static int do_personality(char **a)
{
	unsigned long flags = (unsigned long)unum(a[0], 16);
	if (usage_error)
		return 2;
	return check(syscall(SYS_personality, flags), 0);
}

static unsigned long tty_cmd(const char *name)
{
	if (!strcmp(name, "tiocsti"))
		return TIOCSTI;
	if (!strcmp(name, "tiocsti-highbits"))
		return TIOCSTI | 0x100000000UL; /* the kernel sees only the low 32 bits */
	if (!strcmp(name, "tioclinux-highbits"))
		return TIOCLINUX | 0xffffffff00000000UL;
	return TIOCLINUX;
}

/* TIOCSTI/TIOCLINUX on fd 0 (or FD). In the sandbox fd 0 is /dev/null or a pipe: a
 * filtered call fails with EPERM, an unfiltered one with ENOTTY, and nothing is typed. */
static int do_tty_ioctl(const char *name, char **a)
{
	int fd = a[0] ? (int)num(a[0], 10) : 0;
	char arg = strncmp(name, "tioclinux", 9) ? '#' : 7; /* 7: TIOCL_GETMOUSEREPORTING */
	if (usage_error)
		return 2;
	return check(syscall(SYS_ioctl, fd, tty_cmd(name), &arg), 0);
}

static int do_tiocsti(char **a)
{
	return do_tty_ioctl("tiocsti", a);
}

static int do_tiocsti_highbits(char **a)
{
	return do_tty_ioctl("tiocsti-highbits", a);
}

static int do_tioclinux(char **a)
{
	return do_tty_ioctl("tioclinux", a);
}

static int do_tioclinux_highbits(char **a)
{
	return do_tty_ioctl("tioclinux-highbits", a);
}

static int do_socket(char **a)
{
	int fam = (int)num(a[0], 0), type = (int)num(a[1], 0);
	if (usage_error)
		return 2;
	return check(socket(fam, type | SOCK_CLOEXEC, 0), 1);
}

static int x32_getpid(void)
{
	return check(syscall(X32_SYSCALL_BIT | SYS_getpid), 0);
}

static int do_x32_getpid(char **a)
{
	(void)a;
	return in_child(x32_getpid);
}

static int i386_getpid(void)
{
#if defined(__x86_64__)
	long ax = 20; /* __NR_getpid in the i386 table */
	__asm__ volatile("int $0x80" : "+a"(ax) : : "r8", "r9", "r10", "r11", "cc", "memory");
	int ret = (int)ax; /* a 32-bit syscall returns a 32-bit value */
	if (ret < 0 && ret > -4096)
		return fail(-ret);
	return ok();
#else
	return fail(ENOSYS);
#endif
}

static int do_i386_getpid(char **a)
{
	(void)a;
	return in_child(i386_getpid);
}

/* Connect or bind an AF_INET/AF_INET6 socket to a numeric address (no resolver: the probe
 * is static and the sandbox may have no DNS). */
/* The protocol argument of inet_call's socket(): 0 (TCP), or MPTCP, which Landlock's TCP
 * rules do not cover, given to the system call as a full register (the kernel reads an int). */
static long inet_proto;

static int inet_call(const char *host, const char *port, int do_bind)
{
	struct sockaddr_storage ss;
	socklen_t len;
	memset(&ss, 0, sizeof(ss));
	unsigned p = (unsigned)num(port, 10);
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)p);
		len = sizeof(*in4);
	} else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)p);
		len = sizeof(*in6);
	} else {
		usage_error = 1;
	}
	if (usage_error || p > 65535)
		return 2;
	int fd = (int)syscall(SYS_socket, (long)ss.ss_family, (long)(SOCK_STREAM | SOCK_CLOEXEC),
	                      inet_proto);
	if (fd < 0)
		return fail(errno);
	struct timeval tv = {.tv_sec = 5};
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	int rc = do_bind ? bind(fd, (struct sockaddr *)&ss, len) : 0;
	if (rc == 0)
		rc = do_bind ? listen(fd, 1) : connect(fd, (struct sockaddr *)&ss, len);
	rc = check(rc, 0);
	close(fd);
	return rc;
}

static int do_connect_tcp(char **a)
{
	return inet_call(a[0], a[1], 0);
}

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif
/* MPTCP falls back to plain TCP when the peer does not speak it: a host listener counts it. */
static int do_connect_mptcp(char **a)
{
	inet_proto = IPPROTO_MPTCP;
	return inet_call(a[0], a[1], 0);
}

/* The same with bits above the int set in the register: a filter that compares all 64 bits
 * would miss it, the kernel does not. */
static int do_connect_mptcp_hi(char **a)
{
	inet_proto = (long)(IPPROTO_MPTCP | (1ULL << 32));
	return inet_call(a[0], a[1], 0);
}

/* SMC over AF_INET (IPPROTO_SMC): also outside Landlock's TCP rules, also falls back to TCP. */
static int do_connect_smc(char **a)
{
	inet_proto = 256;
	return inet_call(a[0], a[1], 0);
}

/* TCP Fast Open: sendto with MSG_FASTOPEN connects without connect(); a listener without
 * Fast Open still completes a plain handshake, and counts it. */
static int do_connect_tfo(char **a)
{
	struct sockaddr_in in4 = {.sin_family = AF_INET,
	                          .sin_port = htons((uint16_t)num(a[1], 10))};
	if (inet_pton(AF_INET, a[0], &in4.sin_addr) != 1)
		return 2;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail(errno);
	ssize_t n = sendto(fd, "x", 1, MSG_FASTOPEN, (struct sockaddr *)&in4, sizeof(in4));
	int rc = check(n < 0 ? -1 : 0, 0);
	close(fd);
	return rc;
}

static int do_bind_tcp(char **a)
{
	return inet_call("0.0.0.0", a[0], 1);
}

static int unix_connect(const char *name, int abstract)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	size_t n = strlen(name);
	if (n + 1 > sizeof(sun.sun_path))
		return 2;
	memcpy(sun.sun_path + abstract, name, n);
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + abstract + n);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail(errno);
	int rc = check(connect(fd, (struct sockaddr *)&sun, len), 0);
	close(fd);
	return rc;
}

static int do_connect_abstract(char **a)
{
	return unix_connect(a[0], 1);
}

static int do_connect_unix(char **a)
{
	return unix_connect(a[0], 0);
}

static int do_kill(char **a)
{
	pid_t pid = (pid_t)num(a[0], 10);
	int sig = (int)num(a[1], 10);
	if (usage_error)
		return 2;
	return check(kill(pid, sig), 0);
}

static int do_mknod_char(char **a)
{
	return check(mknod(a[0], S_IFCHR | 0600, makedev(1, 3)), 0);
}

static int do_open_read(char **a)
{
	return check(open(a[0], O_RDONLY | O_CLOEXEC), 1);
}

static int do_open_write(char **a)
{
	/* Append without truncating: the probe must not destroy what it proves writable. */
	return check(open(a[0], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644), 1);
}

static int do_mkdir(char **a)
{
	return check(mkdir(a[0], 0755), 0);
}

static int do_chmod_setuid(char **a)
{
	return check(chmod(a[0], 04755), 0);
}

static int do_getuid(char **a)
{
	(void)a;
	printf("%u\n", (unsigned)getuid());
	return 0;
}

/* Print "Key=value" for each requested field of /proc/self/status, on one line. */
static int status_fields(const char *const *keys, size_t n, int with_names)
{
	char line[256], out[512] = "";
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return fail(errno);
	for (size_t k = 0; k < n; k++) {
		size_t klen = strlen(keys[k]);
		const char *val = "?";
		rewind(f);
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, keys[k], klen) && line[klen] == ':') {
				val = line + klen + 1;
				while (isspace((unsigned char)*val))
					val++;
				line[strcspn(line, "\n")] = 0;
				break;
			}
		size_t used = strlen(out);
		snprintf(out + used, sizeof(out) - used, "%s%s%s%s", k ? " " : "",
		         with_names ? keys[k] : "", with_names ? "=" : "", val);
	}
	fclose(f);
	puts(out);
	return 0;
}

static int do_caps(char **a)
{
	(void)a;
	static const char *const keys[] = {"CapEff", "CapBnd", "CapPrm", "CapAmb", "CapInh"};
	return status_fields(keys, ARRAY_SIZE(keys), 1);
}

static int do_nnp(char **a)
{
	(void)a;
	static const char *const keys[] = {"NoNewPrivs"};
	return status_fields(keys, 1, 0);
}

static int do_seccomp_mode(char **a)
{
	(void)a;
	static const char *const keys[] = {"Seccomp"};
	return status_fields(keys, 1, 0);
}

static int do_fork_bomb(char **a)
{
	long n = (long)num(a[0], 10), done = 0;
	int err = 0;
	if (usage_error || n < 0)
		return 2;
	pid_t *pids = calloc((size_t)n + 1, sizeof(*pids));
	if (!pids)
		return fail(ENOMEM);
	for (; done < n; done++) {
		pid_t pid = fork();
		if (pid < 0) {
			err = errno;
			break;
		}
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			for (;;)
				pause();
		}
		pids[done] = pid;
	}
	for (long i = 0; i < done; i++)
		kill(pids[i], SIGKILL);
	for (long i = 0; i < done; i++)
		waitpid(pids[i], NULL, 0);
	free(pids);
	if (!err) {
		printf("forked=%ld\n", done);
		return 0;
	}
	printf("forked=%ld errno=%s\n", done, errname(err));
	return 1;
}

static int do_mem_hog(char **a)
{
	long mb = (long)num(a[0], 10), got = 0;
	if (usage_error || mb < 0)
		return 2;
	for (; got < mb; got++) {
		char *p = malloc(1 << 20);
		if (!p) {
			printf("allocated_mb=%ld errno=ENOMEM\n", got);
			return 1;
		}
		memset(p, 0x5a, 1 << 20); /* touch every page so it counts */
		/* the memory is never read: keep the compiler from eliding the allocation */
		__asm__ volatile("" : : "r"(p) : "memory");
	}
	printf("allocated_mb=%ld\n", got);
	return 0;
}

static int do_fd_hog(char **a)
{
	(void)a;
	long count = 0;
	for (;;) {
		if (open("/dev/null", O_RDONLY) < 0)
			break;
		count++;
	}
	printf("opened=%ld errno=%s\n", count, errname(errno));
	return 1;
}

static int do_write_file(char **a)
{
	long mb = (long)num(a[1], 10);
	if (usage_error || mb < 0)
		return 2;
	static char buf[1 << 20];
	int fd = open(a[0], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return fail(errno);
	/* SIGXFSZ keeps its default action: the suite wants to see the kill at RLIMIT_FSIZE. */
	unsigned long long written = 0, want = (unsigned long long)mb << 20;
	int err = 0;
	while (written < want) {
		size_t chunk = want - written < sizeof(buf) ? want - written : sizeof(buf);
		ssize_t r = write(fd, buf, chunk);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			err = r < 0 ? errno : EIO;
			break;
		}
		written += (unsigned long long)r;
	}
	close(fd);
	if (!err) {
		printf("written=%llu\n", written);
		return 0;
	}
	printf("written=%llu errno=%s\n", written, errname(err));
	return 1;
}

static int do_sleep(char **a)
{
	char *end;
	double s = strtod(a[0], &end);
	if (end == a[0] || *end || s < 0)
		return 2;
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) < 0)
		if (errno != EINTR)
			return fail(errno);
	return ok();
}

static int do_hostname(char **a)
{
	(void)a;
	struct utsname u;
	if (uname(&u) < 0)
		return fail(errno);
	puts(u.nodename);
	return 0;
}

static int do_ls_pids(char **a)
{
	(void)a;
	DIR *d = opendir("/proc");
	if (!d)
		return fail(errno);
	struct dirent *de;
	int first = 1;
	while ((de = readdir(d)))
		if (de->d_name[strspn(de->d_name, "0123456789")] == 0) {
			printf("%s%s", first ? "" : " ", de->d_name);
			first = 0;
		}
	closedir(d);
	putchar('\n');
	return 0;
}

/* The open descriptors of this process, "0 1 2", leaving out the one reading /proc/self/fd. */
static int do_ls_fds(char **a)
{
	(void)a;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return fail(errno);
	int self = dirfd(d), first = 1;
	struct dirent *de;
	while ((de = readdir(d)))
		if (isdigit((unsigned char)de->d_name[0]) && atoi(de->d_name) != self) {
			printf("%s%s", first ? "" : " ", de->d_name);
			first = 0;
		}
	closedir(d);
	putchar('\n');
	return 0;
}

/* The CVE-2019-5736 move: hold PATH (e.g. /proc/1/exe) with O_PATH, then reopen it for
 * writing through /proc/self/fd/N and append N bytes. With 0 bytes nothing is changed even
 * where the reopen succeeds. Prints "ok" (the write went through) or the errno that stopped it. */
static int do_reopen_write(char **a)
{
	long n = (long)num(a[1], 10);
	if (usage_error || n < 0 || n > 4096)
		return 2;
	int pfd = open(a[0], O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return fail(errno);
	char via[64];
	snprintf(via, sizeof(via), "/proc/self/fd/%d", pfd);
	int fd = open(via, O_WRONLY | O_APPEND | O_CLOEXEC);
	int e = errno;
	close(pfd);
	if (fd < 0)
		return fail(e);
	static char buf[4096];
	memset(buf, 'X', sizeof(buf));
	ssize_t w = write(fd, buf, (size_t)n);
	e = errno;
	close(fd);
	return w == n ? ok() : fail(w < 0 ? e : EIO);
}

/* openat(FD, PATH): reaching through a descriptor the sandbox may have inherited. */
static int do_openat(char **a)
{
	int fd = (int)num(a[0], 10);
	if (usage_error)
		return 2;
	return check(openat(fd, a[1], O_RDONLY | O_CLOEXEC), 1);
}

/* Raise RLIMIT_CORE as far as allowed, then crash a child with SIG (SEGV or ABRT) in the
 * current directory: "core=<soft limit> signal=SIGSEGV dumped=0|1". */
static int do_crash(char **a)
{
	int sig = !strcmp(a[0], "SEGV") ? SIGSEGV : !strcmp(a[0], "ABRT") ? SIGABRT : 0;
	if (!sig)
		return 2;
	struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
	if (setrlimit(RLIMIT_CORE, &rl) < 0 && getrlimit(RLIMIT_CORE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max; /* at least up to the hard limit */
		setrlimit(RLIMIT_CORE, &rl);
	}
	getrlimit(RLIMIT_CORE, &rl);
	if (rl.rlim_cur == RLIM_INFINITY)
		printf("core=unlimited ");
	else
		printf("core=%llu ", (unsigned long long)rl.rlim_cur);
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return fail(errno);
	if (pid == 0) {
		signal(sig, SIG_DFL);
		if (sig == SIGSEGV)
			*(volatile int *)(uintptr_t)8 = 1;
		raise(sig);
		_exit(0);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return fail(errno);
	const char *name = WIFSIGNALED(st) ? sigabbrev_np(WTERMSIG(st)) : NULL;
	printf("signal=SIG%s dumped=%d\n", name ? name : "?", WIFSIGNALED(st) && WCOREDUMP(st));
	return 0;
}

/* ---- host-side helpers of the escape battery (tests/escape/escape.sh) -------------------- */

/* These run on the host, around a case, never inside a sandbox. */

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

/* DIR/NAME = TEXT, made whole by a rename so that a reader never sees half of it. */
static int put_file(const char *dir, const char *name, const char *text)
{
	char tmp[4096], path[4096];
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	size_t n = strlen(text);
	int rc = write(fd, text, n) == (ssize_t)n ? 0 : -1;
	close(fd);
	return rc == 0 ? rename(tmp, path) : -1;
}

static long drain_accepts(int fd)
{
	long n = 0;
	int c;
	while ((c = accept4(fd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		close(c);
		n++;
	}
	return n;
}

/* The canary listeners: TCP sockets on 127.0.0.1 and on ::1 (one free port on both; ::1 only
 * where the host has IPv6 loopback) and an abstract unix socket (a unique name), all counting
 * the connections they accept. Writes DIR/addr ("PORT NAME V6", V6 1 when ::1 listens too)
 * once all listen; on SIGTERM accepts what is still queued, writes DIR/counts ("tcp=N
 * abstract=N", tcp counting both addresses) and exits. Dies with its parent (the test's
 * shell). */
static int do_canary_listen(char **a)
{
	const char *dir = a[0];
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	sigset_t term, none;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigemptyset(&none);
	sigprocmask(SIG_BLOCK, &term, NULL);
	struct sigaction sa = {.sa_handler = on_stop};
	sigaction(SIGTERM, &sa, NULL);

	/* a free port on 127.0.0.1, then the same port on ::1: when another process holds it
	 * there, another port */
	int tcp = -1, tcp6 = -1;
	struct sockaddr_in in;
	for (int tries = 0; tries < 20; tries++) {
		tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		in = (struct sockaddr_in){.sin_family = AF_INET,
		                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t inlen = sizeof(in);
		if (tcp < 0 || bind(tcp, (struct sockaddr *)&in, sizeof(in)) < 0 ||
		    listen(tcp, 128) < 0 || getsockname(tcp, (struct sockaddr *)&in, &inlen) < 0)
			return fail(errno);
		tcp6 = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (tcp6 < 0)
			break; /* no IPv6 at all */
		int one = 1;
		setsockopt(tcp6, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT,
		                           .sin6_port = in.sin_port};
		if (bind(tcp6, (struct sockaddr *)&in6, sizeof(in6)) == 0 && listen(tcp6, 128) == 0)
			break;
		int e = errno;
		close(tcp6);
		tcp6 = -1;
		if (e != EADDRINUSE)
			break; /* no IPv6 loopback (EADDRNOTAVAIL): 127.0.0.1 only */
		close(tcp);
		tcp = -1;
	}
	if (tcp < 0)
		return fail(EADDRINUSE);

	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	char name[64];
	snprintf(name, sizeof(name), "corral-ev-%d-%lx", (int)getpid(),
	         (unsigned long)(now.tv_nsec ^ now.tv_sec));
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	memcpy(sun.sun_path + 1, name, strlen(name));
	socklen_t sunlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
	int abs = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (abs < 0 || bind(abs, (struct sockaddr *)&sun, sunlen) < 0 || listen(abs, 128) < 0)
		return fail(errno);

	char addr[128];
	snprintf(addr, sizeof(addr), "%u %s %d\n", (unsigned)ntohs(in.sin_port), name, tcp6 >= 0);
	if (put_file(dir, "addr", addr) < 0)
		return fail(errno);
	long n_tcp = 0, n_abs = 0;
	while (!stop_requested) {
		struct pollfd p[3] = {{.fd = tcp, .events = POLLIN},
		                      {.fd = abs, .events = POLLIN},
		                      {.fd = tcp6, .events = POLLIN}}; /* -1: ignored */
		/* SIGTERM is let in only while waiting, so a stop is never missed */
		if (ppoll(p, 3, NULL, &none) < 0 && errno != EINTR)
			break;
		n_tcp += drain_accepts(tcp) + (tcp6 >= 0 ? drain_accepts(tcp6) : 0);
		n_abs += drain_accepts(abs);
	}
	n_tcp += drain_accepts(tcp) + (tcp6 >= 0 ? drain_accepts(tcp6) : 0);
	n_abs += drain_accepts(abs);
	char counts[128];
	snprintf(counts, sizeof(counts), "tcp=%ld abstract=%ld\n", n_tcp, n_abs);
	return put_file(dir, "counts", counts) < 0 ? fail(errno) : 0;
}

/* The live descendants of PID (zombies left out), one "PID COMMAND-LINE" a line, leaving out
 * this process and its own ancestors (the shell that runs it). */
static int do_descendants(char **a)
{
	pid_t root = (pid_t)num(a[0], 10);
	if (usage_error)
		return 2;
	size_t cap = 1024, n = 0;
	struct proc {
		pid_t pid, ppid;
		char state;
		char mark; /* 1 descendant, 2 self or an ancestor of self */
	} *ps = malloc(cap * sizeof(*ps));
	DIR *d = opendir("/proc");
	if (!ps || !d)
		return fail(errno);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		char path[300], buf[512];
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t r = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (r <= 0)
			continue;
		buf[r] = 0;
		char *rp = strrchr(buf, ')'); /* the command name may hold anything but ") " last */
		char st;
		int ppid;
		if (!rp || sscanf(rp + 1, " %c %d", &st, &ppid) != 2)
			continue;
		if (n == cap) {
			struct proc *np = realloc(ps, 2 * cap * sizeof(*ps));
			if (!np)
				return fail(ENOMEM);
			ps = np;
			cap *= 2;
		}
		ps[n++] = (struct proc){atoi(de->d_name), ppid, st, 0};
	}
	closedir(d);
	/* self and its ancestors up to root */
	for (pid_t p = getpid(); p > 1 && p != root;) {
		pid_t next = 0;
		for (size_t i = 0; i < n; i++)
			if (ps[i].pid == p) {
				ps[i].mark = 2;
				next = ps[i].ppid;
			}
		p = next;
	}
	for (int changed = 1; changed;) {
		changed = 0;
		for (size_t i = 0; i < n; i++) {
			if (ps[i].mark)
				continue;
			int parent_is_desc = ps[i].ppid == root;
			for (size_t j = 0; j < n && !parent_is_desc; j++)
				parent_is_desc = ps[j].pid == ps[i].ppid && ps[j].mark;
			if (parent_is_desc) {
				ps[i].mark = 1;
				changed = 1;
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (ps[i].mark != 1 || ps[i].state == 'Z' || ps[i].state == 'X')
			continue;
		char path[64], cmd[201] = "";
		snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)ps[i].pid);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t r = fd >= 0 ? read(fd, cmd, sizeof(cmd) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (r <= 0)
			continue; /* gone meanwhile, or a kernel thread */
		for (ssize_t k = 0; k < r; k++)
			if (!cmd[k])
				cmd[k] = ' ';
		cmd[r] = 0;
		printf("%d %s\n", (int)ps[i].pid, cmd);
	}
	free(ps);
	return 0;
}

/* Exec COMMAND as a child subreaper (the attribute survives execve): orphans of everything it
 * starts become its children instead of the host init's, so it can find what outlived a case. */
static int do_subreaper(char **a)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		return fail(errno);
	execvp(a[0], a);
	return fail(errno);
}

/* ---- table ------------------------------------------------------------------------------ */

static const struct subcommand {
	const char *name;
	int min_args, max_args;
	int (*fn)(char **args);
	const char *args;
} subcommands[] = {
    {"ptrace-traceme", 0, 0, do_ptrace_traceme, ""},
    {"ptrace-attach", 1, 1, do_ptrace_attach, "PID"},
    {"process-vm-readv", 1, 1, do_process_vm_readv, "PID"},
    {"process-vm-writev", 0, 1, do_process_vm_writev, "[PID]"},
    {"mount-tmpfs", 1, 1, do_mount_tmpfs, "DIR"},
    {"umount", 1, 1, do_umount, "PATH"},
    {"pivot-root", 0, 2, do_pivot_root, "[NEW_ROOT [PUT_OLD]]"},
    {"unshare-user", 0, 0, do_unshare_user, ""},
    {"unshare-net", 0, 0, do_unshare_net, ""},
    {"clone-newuser", 0, 0, do_clone_newuser, ""},
    {"clone-vm", 0, 0, do_clone_vm, ""},
    {"clone3", 0, 1, do_clone3, "[FLAGS(hex)]"},
    {"setns-net", 0, 2, do_setns_net, "[HOST PORT]"},
    {"kexec-load", 0, 0, do_kexec_load, ""},
    {"init-module", 0, 0, do_init_module, ""},
    {"bpf", 0, 0, do_bpf, ""},
    {"perf-event-open", 0, 0, do_perf_event_open, ""},
    {"keyctl", 0, 0, do_keyctl, ""},
    {"add-key", 0, 0, do_add_key, ""},
    {"userfaultfd", 0, 0, do_userfaultfd, ""},
    {"io-uring-setup", 0, 0, do_io_uring_setup, ""},
    {"io-uring-enter", 0, 0, do_io_uring_enter, ""},
    {"io-uring-register", 0, 0, do_io_uring_register, ""},
    {"request-key", 0, 0, do_request_key, ""},
    {"open-by-handle-at", 0, 0, do_open_by_handle_at, ""},
    {"personality", 1, 1, do_personality, "FLAGS(hex)"},
    {"tiocsti", 0, 1, do_tiocsti, "[FD]"},
    {"tiocsti-highbits", 0, 1, do_tiocsti_highbits, "[FD]"},
    {"tioclinux", 0, 1, do_tioclinux, "[FD]"},
    {"tioclinux-highbits", 0, 1, do_tioclinux_highbits, "[FD]"},
    {"socket", 2, 2, do_socket, "FAMILY TYPE"},
    {"x32-getpid", 0, 0, do_x32_getpid, ""},
    {"i386-getpid", 0, 0, do_i386_getpid, ""},
    {"connect-tcp", 2, 2, do_connect_tcp, "HOST PORT"},
    {"connect-mptcp", 2, 2, do_connect_mptcp, "HOST PORT"},
    {"connect-mptcp-hi", 2, 2, do_connect_mptcp_hi, "HOST PORT"},
    {"connect-smc", 2, 2, do_connect_smc, "HOST PORT"},
    {"connect-tfo", 2, 2, do_connect_tfo, "HOST PORT"},
    {"bind-tcp", 1, 1, do_bind_tcp, "PORT"},
    {"connect-abstract", 1, 1, do_connect_abstract, "NAME"},
    {"connect-unix", 1, 1, do_connect_unix, "PATH"},
    {"kill", 2, 2, do_kill, "PID SIG"},
    {"mknod-char", 1, 1, do_mknod_char, "PATH"},
    {"open-read", 1, 1, do_open_read, "PATH"},
    {"open-write", 1, 1, do_open_write, "PATH"},
    {"mkdir", 1, 1, do_mkdir, "PATH"},
    {"chmod-setuid", 1, 1, do_chmod_setuid, "PATH"},
    {"getuid", 0, 0, do_getuid, ""},
    {"caps", 0, 0, do_caps, ""},
    {"nnp", 0, 0, do_nnp, ""},
    {"seccomp-mode", 0, 0, do_seccomp_mode, ""},
    {"fork-bomb", 1, 1, do_fork_bomb, "N"},
    {"mem-hog", 1, 1, do_mem_hog, "MB"},
    {"fd-hog", 0, 0, do_fd_hog, ""},
    {"write-file", 2, 2, do_write_file, "PATH MB"},
    {"sleep", 1, 1, do_sleep, "SECONDS"},
    {"hostname", 0, 0, do_hostname, ""},
    {"ls-pids", 0, 0, do_ls_pids, ""},
    {"ls-fds", 0, 0, do_ls_fds, ""},
    {"reopen-write", 2, 2, do_reopen_write, "PATH NBYTES"},
    {"openat", 2, 2, do_openat, "FD PATH"},
    {"crash", 1, 1, do_crash, "SEGV|ABRT"},
    {"canary-listen", 1, 1, do_canary_listen, "DIR (host side)"},
    {"descendants", 1, 1, do_descendants, "PID (host side)"},
    {"subreaper", 1, 4096, do_subreaper, "COMMAND [ARG...] (host side)"},
};

static int usage(FILE *out)
{
	fprintf(out, "usage: probe SUBCOMMAND [ARGS]\n"
	             "prints ok | errno=NAME | a value; exit 0 ok, 1 errno, 2 usage, "
	             "3 child killed by a signal\n");
	for (size_t i = 0; i < ARRAY_SIZE(subcommands); i++)
		fprintf(out, "  %s %s\n", subcommands[i].name, subcommands[i].args);
	return 2;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		return usage(stderr);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	int nargs = argc - 2;
	for (size_t i = 0; i < ARRAY_SIZE(subcommands); i++) {
		const struct subcommand *s = &subcommands[i];
		if (strcmp(argv[1], s->name))
			continue;
		if (nargs < s->min_args || nargs > s->max_args)
			break;
		/* argv is NULL-terminated, so optional arguments read as NULL when absent. */
		int rc = s->fn(argv + 2);
		if (usage_error)
			break;
		return rc;
	}
	fprintf(stderr, "probe: bad usage: %s\n", argv[1]);
	return usage(stderr);
}
