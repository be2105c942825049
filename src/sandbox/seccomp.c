/* seccomp: the default deny-list filter, compiled once in the parent with libseccomp and
 * loaded by the child as raw BPF.
 *
 * The filter is a deny-list (default action ALLOW): it removes kernel surface that a build
 * or a test run never needs and that keeps producing privilege escalations (ptrace, the mount
 * API, bpf, perf, io_uring, userfaultfd, keyrings, module and kexec loading). Denied calls
 * fail with an errno (EPERM, or what a kernel without the feature would say) rather than
 * killing the process, so tools that probe for a feature fall back cleanly and the result
 * shows an ordinary error instead of a mysterious SIGSYS. Only foreign syscall ABIs (i386,
 * x32) kill: see set_attrs().
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/sandbox.h"
#include "util.h"

/* glibc 2.36's headers predate these; the numbers are the x86_64 ones. */
#if defined(__x86_64__) && !defined(__NR_open_tree_attr)
#define __NR_open_tree_attr 467
#endif

struct denied_syscall {
	const char *name;
	int nr;
};

/* clang-format off */
#define DENY(name) {#name, __NR_##name}
/* clang-format on */

/* Denied unconditionally with EPERM. Numbers come from the kernel headers of the build
 * architecture, which is the filter's only architecture, so libseccomp needs no name table
 * and syscalls newer than libseccomp 2.5.4 (open_tree_attr) can still be listed. */
static const struct denied_syscall deny_list[] = {
    /* Reading or steering other processes. The pidfd/kcmp calls need the same
     * PTRACE_MODE access as ptrace, so they go with it. */
    DENY(ptrace),
    DENY(process_vm_readv),
    DENY(process_vm_writev),
    DENY(kcmp),
    DENY(pidfd_getfd),
    DENY(process_madvise),
    /* The whole mount API: the mount tree is fixed by the launcher, and each of these has
     * been the entry point of namespace escapes. */
    DENY(mount),
    DENY(umount2),
    DENY(pivot_root),
    DENY(move_mount),
    DENY(open_tree),
#ifdef __NR_open_tree_attr
    DENY(open_tree_attr),
#endif
    DENY(fsopen),
    DENY(fsmount),
    DENY(fsconfig),
    DENY(fspick),
    DENY(mount_setattr),
    DENY(setns),
    /* Kernel code and kernel-wide state. */
    DENY(kexec_load),
    DENY(kexec_file_load),
    DENY(init_module),
    DENY(finit_module),
    DENY(delete_module),
    DENY(acct),
    DENY(swapon),
    DENY(swapoff),
    DENY(reboot),
    DENY(syslog),
    DENY(quotactl),
    DENY(quotactl_fd),
#ifdef __NR_lookup_dcookie
    DENY(lookup_dcookie),
#endif
#ifdef __NR_nfsservctl
    DENY(nfsservctl),
#endif
#ifdef __NR_uselib
    DENY(uselib),
#endif
    DENY(vhangup),
#ifdef __NR_iopl
    DENY(iopl),
#endif
#ifdef __NR_ioperm
    DENY(ioperm),
#endif
    /* The clock is shared with the host: no sandbox has a reason to set it. */
    DENY(settimeofday),
    DENY(clock_settime),
    DENY(adjtimex),
    DENY(clock_adjtime),
    /* Large, frequently exploited subsystems reachable without privilege. */
    DENY(bpf),
    DENY(perf_event_open),
    DENY(userfaultfd),
    DENY(io_uring_setup),
    DENY(io_uring_enter),
    DENY(io_uring_register),
    /* Keyrings are not namespaced: a sandbox could read or plant keys of the host user. */
    DENY(keyctl),
    DENY(add_key),
    DENY(request_key),
    /* File handles bypass path-based confinement (the "shocker" escape); name_to_handle_at
     * only encodes handles but is useless without its partner. */
    DENY(open_by_handle_at),
    DENY(name_to_handle_at),
};

/* socket() families left usable: local IPC and IP (the network namespace decides where IP
 * can reach). Netlink, packet, vsock, bluetooth, alg and the rest are the usual source of
 * kernel bugs and are not needed by ordinary programs. */
static const int allowed_families[] = {AF_UNIX, AF_INET, AF_INET6};

static int add_rule(scmp_filter_ctx ctx, uint32_t action, const char *name, int nr, unsigned n_cmp,
                    const struct scmp_arg_cmp *cmp, struct corral_error *err)
{
	int rc = seccomp_rule_add_exact_array(ctx, action, nr, n_cmp, n_cmp ? cmp : NULL);
	if (rc < 0)
		return corral_set_error(err, CORRAL_ESYS, -rc, "seccomp",
		                        "seccomp: adding the rule for %s (nr %d) failed: %s; "
		                        "check that libseccomp matches this architecture",
		                        name, nr, strerror(-rc));
	return 0;
}

/* personality(2) takes an unsigned int, so only the low 32 bits matter. Allowed are 0
 * (PER_LINUX) and 0xffffffff (the query); everything else — PER_LINUX32,
 * ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, MMAP_PAGE_ZERO... — is denied. A libseccomp rule
 * can compare an argument only once, so "not 0 and not all-ones" is written as: some bit i
 * is set while bit i+1 (cyclically) is clear. A 32-bit value has such a 1->0 step exactly
 * when it is neither all zeros nor all ones, so 32 masked compares cover it exactly. */
static int add_personality_rules(scmp_filter_ctx ctx, struct corral_error *err)
{
	for (unsigned i = 0; i < 32; i++) {
		uint64_t bit = 1ull << i, next = 1ull << ((i + 1) % 32);
		struct scmp_arg_cmp cmp = SCMP_A0_64(SCMP_CMP_MASKED_EQ, bit | next, bit);
		int rc = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "personality", __NR_personality, 1,
		                  &cmp, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* socket(2) takes an int family. Deny every family below the largest allowed one that is not
 * allowed, and everything above it compared as a full 64-bit value — a value with any high
 * bit set lands in the "above" range, so no truncation trick can reach a denied family. */
static int add_socket_rules(scmp_filter_ctx ctx, struct corral_error *err)
{
	int max = 0;
	for (size_t i = 0; i < ARRAY_SIZE(allowed_families); i++)
		if (allowed_families[i] > max)
			max = allowed_families[i];

	for (int fam = 0; fam < max; fam++) {
		int allowed = 0;
		for (size_t i = 0; i < ARRAY_SIZE(allowed_families); i++)
			allowed |= allowed_families[i] == fam;
		if (allowed)
			continue;
		struct scmp_arg_cmp cmp = SCMP_A0_64(SCMP_CMP_EQ, (uint64_t)fam);
		/* EAFNOSUPPORT is what the kernel says for a family it lacks; programs treat it
		 * as "not here" and move on, which is the behaviour we want. */
		int rc = add_rule(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socket", __NR_socket, 1, &cmp,
		                  err);
		if (rc < 0)
			return rc;
	}
	struct scmp_arg_cmp above = SCMP_A0_64(SCMP_CMP_GT, (uint64_t)max);
	int rc = add_rule(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socket", __NR_socket, 1, &above, err);
	if (rc < 0)
		return rc;
	/* Protocols from 256 up on AF_INET and AF_INET6: MPTCP (262) and SMC (256), which
	 * Landlock's TCP rules (what keeps TCP off the host without a network namespace) do not
	 * cover, and which fall back to plain TCP with a peer that lacks them. Refused as a
	 * kernel without them refuses them, so programs use TCP instead. Every real IP protocol
	 * number is below 256. The comparison is on all 64 bits, so a value with bits above the
	 * int set (which the kernel would cut to its low 32) is refused too. (The family is
	 * compared whole: a family with high bits set is above max, refused by the rule before.) */
	static const int inet[] = {AF_INET, AF_INET6};
	for (size_t i = 0; i < ARRAY_SIZE(inet); i++) {
		struct scmp_arg_cmp proto[2] = {SCMP_A0_64(SCMP_CMP_EQ, (uint64_t)inet[i]),
		                                SCMP_A2_64(SCMP_CMP_GE, 256)};
		if ((rc = add_rule(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), "socket", __NR_socket, 2,
		                   proto, err)) < 0)
			return rc;
	}
	/* TCP Fast Open: sendto/sendmsg with MSG_FASTOPEN connect a TCP socket without the
	 * connect() that Landlock checks. Refused as a kernel without Fast Open refuses it
	 * (EOPNOTSUPP); callers then connect(). One masked compare on the flags argument. */
	static const struct {
		const char *name;
		int nr;
		unsigned arg;
	} sends[] = {{"sendto", __NR_sendto, 3},
	             {"sendmsg", __NR_sendmsg, 2},
	             {"sendmmsg", __NR_sendmmsg, 3}};
	for (size_t i = 0; i < ARRAY_SIZE(sends); i++) {
		struct scmp_arg_cmp fo = {sends[i].arg, SCMP_CMP_MASKED_EQ, MSG_FASTOPEN,
		                          MSG_FASTOPEN};
		if ((rc = add_rule(ctx, SCMP_ACT_ERRNO(EOPNOTSUPP), sends[i].name, sends[i].nr, 1,
		                   &fo, err)) < 0)
			return rc;
	}
	/* TCP upper-layer protocols (setsockopt SOL_TCP TCP_ULP): "smc" turns a TCP socket into
	 * an SMC one, which Landlock's TCP rules then skip; the others (kTLS, espintcp) are
	 * kernel surface a sandbox does without. ENOENT, as for a ULP the kernel lacks: TLS
	 * libraries then keep TLS in user space. Level and name are ints: low 32 bits. */
	struct scmp_arg_cmp ulp[2] = {
	    SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xffffffffu, 6 /* SOL_TCP */),
	    SCMP_A2_64(SCMP_CMP_MASKED_EQ, 0xffffffffu, 31 /* TCP_ULP */)};
	return add_rule(ctx, SCMP_ACT_ERRNO(ENOENT), "setsockopt", __NR_setsockopt, 2, ulp, err);
}

/* TIOCSTI pushes bytes into a terminal's input queue: a sandboxed process that shares the
 * caller's terminal could type commands into the caller's shell. TIOCLINUX can do the same
 * through the console selection. The kernel reads the command as an unsigned int, so compare
 * the low 32 bits only: TIOCSTI | 1 << 32 must not slip past. */
static int add_ioctl_rules(scmp_filter_ctx ctx, struct corral_error *err)
{
	static const unsigned long cmds[] = {TIOCSTI, TIOCLINUX};
	for (size_t i = 0; i < ARRAY_SIZE(cmds); i++) {
		struct scmp_arg_cmp cmp = SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xffffffffu, cmds[i]);
		int rc = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", __NR_ioctl, 1, &cmp, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* A new user namespace gives back a full capability set over new mount/net/... namespaces
 * and with it most of the kernel surface the rest of this filter and the dropped capabilities
 * take away. */
static int add_userns_rules(scmp_filter_ctx ctx, struct corral_error *err)
{
	struct scmp_arg_cmp newuser = SCMP_A0_64(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER);
	int rc = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "unshare", __NR_unshare, 1, &newuser, err);
	if (rc < 0)
		return rc;
	/* clone's first argument is the flags word on every architecture. */
	rc = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "clone", __NR_clone, 1, &newuser, err);
	if (rc < 0)
		return rc;
	/* clone3 passes its flags in memory, out of BPF's reach. ENOSYS makes glibc (and
	 * other runtimes) fall back to clone, where the flags can be checked. */
	return add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", __NR_clone3, 0, NULL, err);
}

#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif

/* No setuid or setgid files: the sandbox owns what it creates in the workspace (as root, uid
 * 0), and nosuid on the sandbox's mounts does nothing for the host, where a setuid-root file
 * left in the workspace would be a local root for anyone who can reach it. As systemd's
 * RestrictSUIDSGID=: every call that sets a mode is refused when the mode carries S_ISUID or
 * S_ISGID; openat2 keeps its mode in memory, so it reports ENOSYS (callers fall back to
 * openat). */
static int add_setuid_rules(scmp_filter_ctx ctx, struct corral_error *err)
{
	static const struct {
		const char *name;
		int nr;
		unsigned arg;
	} calls[] = {
		{"chmod", __NR_chmod, 1},     {"fchmod", __NR_fchmod, 1},
		{"fchmodat", __NR_fchmodat, 2}, {"fchmodat2", __NR_fchmodat2, 2},
		{"open", __NR_open, 2},       {"creat", __NR_creat, 1},
		{"openat", __NR_openat, 3},   {"mknod", __NR_mknod, 1},
		{"mknodat", __NR_mknodat, 2},
	};
	for (size_t i = 0; i < ARRAY_SIZE(calls); i++)
		for (unsigned bit = 0; bit < 2; bit++) {
			/* one compare per rule: "setuid bit set" and "setgid bit set" */
			scmp_datum_t m = bit ? S_ISGID : S_ISUID;
			struct scmp_arg_cmp c = {calls[i].arg, SCMP_CMP_MASKED_EQ, m, m};
			int rc = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), calls[i].name, calls[i].nr, 1, &c,
			                  err);
			if (rc < 0)
				return rc;
		}
	return add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "openat2", __NR_openat2, 0, NULL, err);
}

static int build_rules(scmp_filter_ctx ctx, const struct seccomp_opts *opts,
                       struct corral_error *err)
{
	int rc;
	for (size_t i = 0; i < ARRAY_SIZE(deny_list); i++) {
		rc = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), deny_list[i].name, deny_list[i].nr, 0,
		              NULL, err);
		if (rc < 0)
			return rc;
	}
	if ((rc = add_personality_rules(ctx, err)) < 0)
		return rc;
	if ((rc = add_socket_rules(ctx, err)) < 0)
		return rc;
	if ((rc = add_ioctl_rules(ctx, err)) < 0)
		return rc;
	if (!opts || !opts->allow_userns)
		if ((rc = add_userns_rules(ctx, err)) < 0)
			return rc;
	if ((rc = add_setuid_rules(ctx, err)) < 0)
		return rc;
	/* prlimit64 on another process (same uid) would change the supervisor's limits where
	 * there is no pid namespace; glibc's setrlimit uses pid 0, which stays allowed. */
	struct scmp_arg_cmp not_self = SCMP_A0(SCMP_CMP_NE, 0);
	if ((rc = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "prlimit64", __NR_prlimit64, 1, &not_self,
	                   err)) < 0)
		return rc;
	/* Without a network and mount namespace, a pathname unix socket of the host (the D-Bus
	 * bus, docker.sock, an ssh agent) is reachable by connect(), which Landlock does not
	 * govern; socketpair() stays, for pipes between the sandbox's own processes. */
	if (opts && opts->deny_unix_sockets) {
		struct scmp_arg_cmp unix_fam = SCMP_A0(SCMP_CMP_EQ, AF_UNIX);
		if ((rc = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "socket", __NR_socket, 1, &unix_fam,
		                   err)) < 0)
			return rc;
	}
	return 0;
}

static int set_attrs(scmp_filter_ctx ctx, struct corral_error *err)
{
	static const struct {
		enum scmp_filter_attr attr;
		uint32_t value;
		const char *what;
	} attrs[] = {
	    /* The filter holds the native architecture only. Any other entry point into
	     * the same kernel — int 0x80 (i386) — would see different syscall numbers
	     * and slip through a deny-list, so it kills the process. libseccomp also
	     * routes x32 numbers (bit 30 set) on x86_64 to this action. */
	    {SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS, "bad-arch action"},
	    /* launch.c sets no_new_privs itself and we never call seccomp_load(). */
	    {SCMP_FLTATR_CTL_NNP, 0, "no_new_privs attribute"},
	    /* A deny-list lets almost every syscall through; a binary search on the
	     * number keeps those at a handful of compares instead of walking the whole
	     * list, on kernels without the seccomp action cache (< 5.11). */
	    {SCMP_FLTATR_CTL_OPTIMIZE, 2, "optimize attribute"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(attrs); i++) {
		int rc = seccomp_attr_set(ctx, attrs[i].attr, attrs[i].value);
		if (rc < 0)
			return corral_set_error(err, CORRAL_ESYS, -rc, "seccomp",
			                        "seccomp: setting the %s failed: %s; "
			                        "libseccomp >= 2.5 is required",
			                        attrs[i].what, strerror(-rc));
	}
	return 0;
}

/* libseccomp 2.5.4 exports BPF only to a file descriptor: write it to a memfd and read it
 * back into memory the child can use without any further system call but seccomp(). */
static int export_bpf(scmp_filter_ctx ctx, struct sock_fprog *out, struct corral_error *err)
{
	autoclose int fd = memfd_create("corral-seccomp", MFD_CLOEXEC);
	if (fd < 0)
		return corral_set_error(err, CORRAL_ESYS, errno, "seccomp",
		                        "seccomp: memfd_create for the BPF export failed: %s; "
		                        "the kernel needs memfd support (3.17+)",
		                        strerror(errno));
	int rc = seccomp_export_bpf(ctx, fd);
	if (rc < 0)
		return corral_set_error(err, CORRAL_ESYS, -rc, "seccomp",
		                        "seccomp: exporting the BPF program failed: %s; "
		                        "check the libseccomp installation",
		                        strerror(-rc));

	struct stat st;
	if (fstat(fd, &st) < 0)
		return corral_set_error(err, CORRAL_ESYS, errno, "seccomp",
		                        "seccomp: fstat of the BPF export failed: %s",
		                        strerror(errno));
	size_t len = (size_t)st.st_size;
	size_t n = len / sizeof(struct sock_filter);
	/* The kernel caps a program at BPF_MAXINSNS; a bigger or ragged one is a bug here. */
	if (len == 0 || len % sizeof(struct sock_filter) != 0 || n > BPF_MAXINSNS)
		return corral_set_error(err, CORRAL_EINVAL, 0, "seccomp",
		                        "seccomp: the exported BPF program has a bad size (%zu "
		                        "bytes); this is a bug in corral or libseccomp",
		                        len);

	autofree struct sock_filter *filter = malloc(len);
	if (!filter)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "seccomp",
		                        "seccomp: out of memory for the BPF program");
	for (size_t done = 0; done < len;) {
		ssize_t r = pread(fd, (char *)filter + done, len - done, (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return corral_set_error(err, CORRAL_ESYS, r < 0 ? errno : EIO, "seccomp",
			                        "seccomp: reading back the BPF export failed: %s",
			                        strerror(r < 0 ? errno : EIO));
		done += (size_t)r;
	}
	out->len = (unsigned short)n;
	out->filter = steal_pointer(&filter);
	return 0;
}

int seccomp_compile(const struct seccomp_opts *opts, struct seccomp_prog *out,
                    struct corral_error *err)
{
	if (!out)
		return corral_set_error(err, CORRAL_EINVAL, EINVAL, "seccomp",
		                        "seccomp: no output program given (internal error)");
	memset(out, 0, sizeof(*out));

	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return corral_set_error(
		    err, CORRAL_ENOMEM, ENOMEM, "seccomp",
		    "seccomp: seccomp_init failed (out of memory, or libseccomp "
		    "does not support this architecture)");
	int rc = set_attrs(ctx, err);
	if (rc == 0)
		rc = build_rules(ctx, opts, err);
	if (rc == 0)
		rc = export_bpf(ctx, &out->fprog, err);
	seccomp_release(ctx);
	return rc;
}

/* ---- the programs baked at build time ----------------------------------------------------
 *
 * The Makefile builds tools/seccomp_gen.c with this file (CORRAL_SECCOMP_GEN defined), runs
 * it, and it writes $(BUILD)/gen/seccomp_baked.h: seccomp_compile()'s output for every
 * variant plan_seccomp() asks for, as sock_filter arrays. The header is included here when
 * it exists (the Makefile adds its directory to the include path of this file only), so a
 * launch copies a program instead of running libseccomp's compiler. A build without it
 * (this file compiled by hand) compiles at run time, as before. */
struct seccomp_baked_prog {
	int allow_userns, deny_unix_sockets; /* the seccomp_opts it was compiled for */
	unsigned short len;
	const struct sock_filter *insns;
};
/* A new option must be keyed here, in seccomp_baked() and in tools/seccomp_gen.c: a program
 * baked without it must not be taken for one with it. */
_Static_assert(sizeof(struct seccomp_opts) == 2 * sizeof(int),
               "seccomp_opts changed: key the baked programs by the new field too");

#if !defined(CORRAL_SECCOMP_GEN) && defined(__has_include)
#if __has_include(<seccomp_baked.h>)
#include <seccomp_baked.h>
#define HAVE_SECCOMP_BAKED 1
#endif
#endif

/* Is p a well-formed classic BPF program: every jump lands inside it and the last
 * instruction returns? (The kernel checks the rest when the child loads it.) */
static bool bpf_well_formed(const struct sock_filter *p, size_t n)
{
	if (n == 0 || n > BPF_MAXINSNS || BPF_CLASS(p[n - 1].code) != BPF_RET)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (BPF_CLASS(p[i].code) != BPF_JMP)
			continue;
		if (BPF_OP(p[i].code) == BPF_JA) {
			if (p[i].k >= n - i - 1)
				return false;
		} else if (p[i].jt >= n - i - 1 || p[i].jf >= n - i - 1) {
			return false;
		}
	}
	return true;
}

const struct sock_filter *seccomp_baked(const struct seccomp_opts *opts, size_t *len)
{
	*len = 0;
#ifdef HAVE_SECCOMP_BAKED
	static const struct seccomp_opts dflt = {0};
	if (!opts)
		opts = &dflt;
	/* Baked for another architecture than the one libseccomp reports here: not ours. */
	if (seccomp_arch_native() != SECCOMP_BAKED_ARCH)
		return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(seccomp_baked_progs); i++) {
		const struct seccomp_baked_prog *b = &seccomp_baked_progs[i];
		if (b->allow_userns != opts->allow_userns ||
		    b->deny_unix_sockets != opts->deny_unix_sockets)
			continue;
		if (!bpf_well_formed(b->insns, b->len))
			return NULL;
		*len = b->len;
		return b->insns;
	}
#else
	(void)opts;
	(void)bpf_well_formed;
#endif
	return NULL;
}

int seccomp_prepare(const struct seccomp_opts *opts, struct seccomp_prog *out,
                    struct corral_error *err)
{
	size_t n;
	const struct sock_filter *b = seccomp_baked(opts, &n);
	if (!b || !out)
		return seccomp_compile(opts, out, err);
	memset(out, 0, sizeof(*out));
	if (!(out->fprog.filter = malloc(n * sizeof(*b))))
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "seccomp",
		                        "seccomp: out of memory for the BPF program");
	memcpy(out->fprog.filter, b, n * sizeof(*b));
	out->fprog.len = (unsigned short)n;
	return 0;
}

void seccomp_prog_free(struct seccomp_prog *prog)
{
	if (!prog)
		return;
	free(prog->fprog.filter);
	prog->fprog.filter = NULL;
	prog->fprog.len = 0;
}

int seccomp_apply_child(const struct seccomp_prog *prog)
{
	if (!prog || !prog->fprog.filter || prog->fprog.len == 0)
		return -EINVAL;
	/* No flags: the child is single-threaded here (no TSYNC needed), and SPEC_ALLOW would
	 * weaken the speculative-store-bypass mitigation the kernel may tie to seccomp. */
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog->fprog) < 0)
		return -errno;
	return 0;
}

int seccomp_probe(void)
{
	/* The kernel's answer, kept for the process (every plan asks, a server's plan key on
	 * every call): -1 not probed yet; a race between threads only repeats the same answer. */
	static int cached = -1;
	int ok = __atomic_load_n(&cached, __ATOMIC_RELAXED);
	if (ok >= 0)
		return ok;
	ok = 1;
	/* PR_GET_SECCOMP fails with EINVAL when the kernel lacks CONFIG_SECCOMP. */
	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0)
		ok = 0;
	/* SECCOMP_GET_ACTION_AVAIL (4.14) proves the seccomp() syscall and filter mode exist,
	 * and the filter relies on both of these actions. */
	static const uint32_t actions[] = {SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS};
	for (size_t i = 0; ok && i < ARRAY_SIZE(actions); i++) {
		uint32_t action = actions[i];
		if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) < 0)
			ok = 0;
	}
	__atomic_store_n(&cached, ok, __ATOMIC_RELAXED);
	return ok;
}

size_t seccomp_denied_names(const char **out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < ARRAY_SIZE(deny_list) && n < max; i++)
		out[n++] = deny_list[i].name;
	return n;
}
