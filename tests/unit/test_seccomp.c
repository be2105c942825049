/* The seccomp programs baked at build time (tools/seccomp_gen.c) against what libseccomp
 * compiles now from the same rules: a bake that is out of date with seccomp.c, sandbox.h or
 * the installed libseccomp fails here. */
#include "sandbox/sandbox.h"
#include "test.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Is the baked program for o byte-identical to seccomp_compile()'s? */
static int baked_matches_compiled(const struct seccomp_opts *o)
{
	size_t n = 0;
	const struct sock_filter *b = seccomp_baked(o, &n);
	struct seccomp_prog c;
	struct corral_error err = {0};
	if (seccomp_compile(o, &c, &err) < 0) {
		printf("  seccomp_compile: %s\n", err.message);
		return 0;
	}
	int ok = b && n == c.fprog.len && !memcmp(b, c.fprog.filter, n * sizeof(*b));
	if (!ok)
		printf("  baked %zu instructions%s, compiled %u\n", n, b ? "" : " (none)",
		       c.fprog.len);
	seccomp_prog_free(&c);
	return ok;
}

/* seccomp_prepare()'s program equals seccomp_compile()'s for o. */
static int prepared_matches_compiled(const struct seccomp_opts *o)
{
	struct seccomp_prog p, c;
	struct corral_error err = {0};
	if (seccomp_prepare(o, &p, &err) < 0)
		return 0;
	if (seccomp_compile(o, &c, &err) < 0) {
		seccomp_prog_free(&p);
		return 0;
	}
	int ok = p.fprog.len == c.fprog.len &&
	         !memcmp(p.fprog.filter, c.fprog.filter, c.fprog.len * sizeof(struct sock_filter));
	seccomp_prog_free(&p);
	seccomp_prog_free(&c);
	return ok;
}

/* Load seccomp_prepare()'s program for o in a child; 1 when ptrace(TRACEME) fails with EPERM
 * there, socket(AF_UNIX) fails with EPERM exactly when o denies unix sockets, MPTCP and SMC
 * sockets are refused while a TCP one is not, and TCP Fast Open is refused. */
static int loaded_program_denies(const struct seccomp_opts *o)
{
	struct seccomp_prog p;
	struct corral_error err = {0};
	if (seccomp_prepare(o, &p, &err) < 0)
		return 0;
	pid_t pid = fork();
	if (pid == 0) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_apply_child(&p) < 0)
			_exit(2);
		errno = 0;
		if (syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0) != -1 || errno != EPERM)
			_exit(3);
		errno = 0;
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (o->deny_unix_sockets ? fd != -1 || errno != EPERM : fd < 0)
			_exit(4);
		/* MPTCP (protocol 262), which Landlock's TCP rules do not cover, in every variant;
		 * also with bits above the int set in the register (the kernel reads an int) */
		static const long mptcp[] = {262, 262 | (1L << 32), 256 /* SMC */};
		for (int fam = 0; fam < 2; fam++)
			for (int k = 0; k < 3; k++) {
				errno = 0;
				long f = syscall(SYS_socket, fam ? AF_INET6 : AF_INET, SOCK_STREAM,
				                 mptcp[k]);
				if (f != -1 || errno != EPROTONOSUPPORT)
					_exit(5);
			}
		/* plain TCP stays, without Fast Open (a connect that Landlock does not see) */
		if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
			_exit(6);
		/* on a UDP socket the kernel ignores MSG_FASTOPEN and TCP options fail otherwise:
		 * EOPNOTSUPP and ENOENT here can only come from the filter, whatever the host's
		 * tcp_fastopen and its ULP modules */
		int u = socket(AF_INET, SOCK_DGRAM, 0);
		if (u < 0)
			_exit(7);
		struct sockaddr_in to = {.sin_family = AF_INET,
		                         .sin_port = htons(9),
		                         .sin_addr = {htonl(INADDR_LOOPBACK)}};
		struct iovec iov = {.iov_base = "x", .iov_len = 1};
		struct msghdr mh = {
		    .msg_name = &to, .msg_namelen = sizeof(to), .msg_iov = &iov, .msg_iovlen = 1};
		struct mmsghdr mm = {.msg_hdr = mh};
		errno = 0;
		if (sendto(u, "x", 1, MSG_FASTOPEN, (struct sockaddr *)&to, sizeof(to)) != -1 ||
		    errno != EOPNOTSUPP)
			_exit(8);
		errno = 0;
		if (sendmsg(u, &mh, MSG_FASTOPEN) != -1 || errno != EOPNOTSUPP)
			_exit(9);
		errno = 0;
		if (sendmmsg(u, &mm, 1, MSG_FASTOPEN) != -1 || errno != EOPNOTSUPP)
			_exit(10);
		/* control: the same datagram without the flag goes */
		if (sendto(u, "x", 1, 0, (struct sockaddr *)&to, sizeof(to)) != 1)
			_exit(11);
		errno = 0;
		if (setsockopt(u, 6 /* SOL_TCP */, 31 /* TCP_ULP */, "smc", 3) != -1 ||
		    errno != ENOENT)
			_exit(12);
		_exit(0);
	}
	seccomp_prog_free(&p);
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return 0;
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		printf("  child status 0x%x\n", st);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

void test_seccomp(void)
{
	const struct seccomp_opts ns = {.allow_userns = 0, .deny_unix_sockets = 0};
	const struct seccomp_opts nons = {.allow_userns = 0, .deny_unix_sockets = 1};
	const struct seccomp_opts other = {.allow_userns = 1, .deny_unix_sockets = 0};

	CHECK("seccomp_baked_namespaces_matches_libseccomp", baked_matches_compiled(&ns));
	CHECK("seccomp_baked_no_namespace_tier_matches_libseccomp",
	      baked_matches_compiled(&nons));
	size_t n0 = 0, n1 = 0;
	const struct sock_filter *b0 = seccomp_baked(&ns, &n0), *b1 = seccomp_baked(&nons, &n1);
	CHECK("seccomp_baked_variants_differ",
	      b0 && b1 && (n0 != n1 || memcmp(b0, b1, n0 * sizeof(*b0))));
	/* NULL opts are the defaults: the namespaced variant */
	size_t nd = 0;
	CHECK("seccomp_baked_null_opts_is_default", seccomp_baked(NULL, &nd) == b0 && nd == n0);

	/* a variant that was not baked: none, and seccomp_prepare() compiles it */
	size_t no = 1;
	CHECK("seccomp_baked_unbaked_variant_none", !seccomp_baked(&other, &no) && no == 0);
	CHECK("seccomp_prepare_unbaked_variant_compiles", prepared_matches_compiled(&other));
	CHECK("seccomp_prepare_namespaces_matches_libseccomp", prepared_matches_compiled(&ns));
	CHECK("seccomp_prepare_no_namespace_tier_matches_libseccomp", prepared_matches_compiled(&nons));

	CHECK("seccomp_prepared_namespaces_denies", loaded_program_denies(&ns));
	CHECK("seccomp_prepared_no_namespace_tier_denies_unix", loaded_program_denies(&nons));
}
