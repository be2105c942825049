/* Interfaces of the kernel mechanisms, one file each under src/sandbox/.
 *
 * Naming: *_prepare / *_probe / *_write_* run in the parent (the supervisor) and may
 * allocate and report through struct corral_error. *_child run in the sandbox child after
 * clone(): they make raw system calls on memory the parent prepared, never allocate, never
 * lock, never use stdio, and return 0 or -errno. launch.c alone knows their order.
 */
#ifndef CORRAL_SANDBOX_H
#define CORRAL_SANDBOX_H

#include <linux/filter.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "corral.h"

/* ---- userns.c ------------------------------------------------------------------------- */

/* Is creating a user namespace allowed for this process? 1 yes, 0 no (reason filled). */
int userns_probe(char *why, size_t whylen);
/* Can a fresh procfs be mounted in a sandbox here? 1 yes, 0 no (why filled). Forks. */
int userns_probe_proc(char *why, size_t whylen);
/* Parent: write uid_map, setgroups=deny and gid_map for the child `pid`, mapping the
 * caller's uid/gid to the same ids inside. Returns 0 or -errno; step names the file. */
int userns_write_maps(pid_t pid, uid_t uid, gid_t gid, const char **failed_file);

/* ---- mount.c -------------------------------------------------------------------------- */

enum mount_op_kind {
	MOP_BIND_RO,    /* bind a host path read-only (nosuid, nodev) */
	MOP_BIND_RW,    /* bind a host path read-write (nosuid, nodev) */
	MOP_BIND_DEV,   /* bind a host device node (nosuid, noexec; dev allowed) */
	MOP_TMPFS,      /* a fresh tmpfs (nosuid, nodev), mode 1777 for /tmp */
	MOP_PROC,       /* a fresh procfs of the new pid namespace (nosuid, nodev, noexec) */
	MOP_DEVPTS,     /* a fresh devpts instance + /dev/ptmx symlink */
	MOP_SYMLINK,    /* a symlink dst -> src inside the new root */
	MOP_DIR,        /* an empty directory */
	MOP_RO_REMOUNT, /* make an already-mounted path inside the new root read-only */
	MOP_FILE_RO,    /* bind a single host file read-only (src file; dst created as file) */
	MOP_MASK,       /* hide dst: an empty read-only tmpfs (directory) or empty file */
};

struct mount_op {
	enum mount_op_kind kind;
	const char *src;    /* host path (for binds: absolute, resolved by the parent) */
	const char *dst;    /* absolute path inside the sandbox */
	int optional;       /* skip silently when src does not exist */
	int no_symlinks;    /* resolve src with RESOLVE_NO_SYMLINKS (user-supplied paths) */
	uint64_t size;      /* tmpfs size in bytes (0: kernel default) */
	unsigned ll_access; /* Landlock rights (LL_*) the plan grants beneath dst */
	/* What the plan saw at src when it chose this op (an lstat of a path without symlinks),
	 * so the plan key need not look again: has_id, then device, inode and type. */
	bool has_id;
	dev_t id_dev;
	ino_t id_ino;
	mode_t id_mode;
	/* The mount template (DESIGN §18): tpl, this op is part of the system tree a template
	 * holder builds once (the sandbox attaches a copy of it instead of doing the op);
	 * tpl_make, what the template makes at dst for an op of the sandbox's own that lands
	 * on the template's read-only tmpfs (TPL_MAKE_*; mount_template_prepare). */
	bool tpl;
	unsigned char tpl_make;
};

#define TPL_MAKE_DIR 1u  /* a directory (and its parents) */
#define TPL_MAKE_FILE 2u /* an empty file (and its parents) */
#define TPL_MAKE_PTMX 4u /* the /dev/ptmx symlink a devpts op makes */

struct mount_plan {
	struct mount_op *ops;
	size_t n_ops;
	size_t protect_op; /* the first protected path's bind (mount_setup_child's wait_fd) */
	const char *cwd;   /* absolute cwd inside the sandbox */
	int proc_fallback; /* a fresh /proc refused (nested container): bind the outer one */
	/* Scratch buffers for the child (preallocated by mount_plan_init; PATH_MAX each). */
	char *buf1, *buf2;
};

/* What the plan must contain beyond the defaults. Paths are absolute host paths, resolved by
 * the caller (symlinks in the existing part resolved). */
struct mount_request {
	struct hcache *hc; /* the plan's look at the host, cached (hcache.h); NULL: none */
	const char *workspace, *cwd;
	uint64_t tmpfs_size;
	int workspace_ro, etc_minimal;
	int proc_fallback; /* mode auto: may fall back to the outer /proc, read-only */
	char *const *read; /* extra read-only trees */
	size_t n_read;
	char *const *write; /* extra read-write trees */
	size_t n_write;
	char *const *deny; /* masked: an empty read-only tmpfs or file over them */
	size_t n_deny;
	char *const *protect; /* existing paths inside the workspace, bound read-only over
	                         themselves */
	size_t n_protect;
	char *const *pin; /* directories inside the workspace on the way to a protected path,
	                     bound read-write over themselves (shallowest first) so that the
	                     sandbox cannot rename or remove them */
	size_t n_pin;
};

/* Parent: build the plan: system read-only, an allow-list of /etc (or only what the loader
 * needs), the workspace, private /tmp, fresh /proc, minimal /dev, then the extra trees
 * (shallowest first), protected paths, and the masks of denied paths last, so deny wins.
 * Strings are owned by the plan. */
int mount_plan_build(struct mount_plan *plan, const struct mount_request *req,
                     struct corral_error *err);
void mount_plan_free(struct mount_plan *plan);
/* Child: make mounts private, build the new root on a tmpfs, pivot_root into it, detach the
 * old root, chdir to plan->cwd. On failure *failed_op is the index of the failing op (or -1
 * for the root/pivot steps). */
#define MOUNT_NOTE_OUTER_PROC 1 /* the outer /proc was bound read-only (proc_fallback) */
#define NOTE_CGROUPNS_REFUSED 2 /* mode auto: the late cgroup namespace was refused (err) */
int mount_setup_child(const struct mount_plan *plan, int wait_fd, int tpl_fd, int *failed_op,
                      int *notes);
/* Parent: decide what a template of plan's system tree holds and what it must make for the
 * sandbox's own ops (tpl_make), and take the identity of every template source that the
 * plan has not (so the holder can check what it binds), looked at through hc (hcache.h;
 * NULL: no cache; the sources of the sandbox's own ops, the workspace among them, are looked
 * at every time). 0, or -1 when plan cannot use a template (an op of its own would need a
 * target the template cannot make). */
int mount_template_prepare(struct mount_plan *plan, struct hcache *hc);
/* Child (the template holder, in a user and mount namespace of its own): build the template
 * of plan (its tpl ops, checked against their identities, and the tpl_make targets) on a
 * tmpfs made read-only at the superblock, then answer each byte read from sock with a
 * detached recursive copy of it ('T' and the descriptor); 'E', an errno and the failed op's
 * index if the build fails. Exits at EOF on sock. */
_Noreturn void mount_template_child(const struct mount_plan *plan, int sock);

/* ---- net.c ---------------------------------------------------------------------------- */

/* Code that runs in the init's network helper (launch.c), which shares the init's memory
 * and thread-local storage: no AddressSanitizer instrumentation, whose per-thread fake
 * stack is not made for two tasks at once. */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize)
#define CORRAL_NO_ASAN __attribute__((no_sanitize("address")))
#endif
#endif
#ifndef CORRAL_NO_ASAN
#define CORRAL_NO_ASAN
#endif

/* Child: bring up "lo" in the new network namespace. 0 or -errno. */
int net_loopback_up_child(void);
/* The init's helper (launch.c, net_helper_main): move to cpu (unless -1), make a network
 * namespace of its own, bring its lo up, and put a descriptor of it at target_fd (which
 * the caller holds open, so the number is not taken meanwhile). 0 or -errno, with *step
 * 0 for the namespace, 1 for lo, 2 for the descriptor. Touches no errno (the helper shares
 * the init's memory). */
int net_make_child(int cpu, int target_fd, int *step);
/* Whether net_make_child's system calls avoid errno on this architecture. */
bool net_helper_supported(void);

/* ---- landlock.c ----------------------------------------------------------------------- */

#define LL_READ 1u  /* read files, list directories */
#define LL_WRITE 2u /* write, create, remove, rename, truncate */
#define LL_EXEC 4u  /* execute */
#define LL_DEV 8u   /* ioctl on character devices (ABI >= 5) */
#define LL_LIST 16u /* list directories only (READ_DIR), no file contents */

struct landlock_rule {
	const char *path; /* path as the child sees it at apply time */
	unsigned access;  /* LL_* bits */
	/* a rule made from a directory's entries (a deny inside an allowed tree): it is opened
	 * without following any symlink, and a symlink gets no rule (it would carry the tree's
	 * rights to wherever it points) */
	bool nofollow;
	/* the plan's own tree (the sandbox's tmpfs root, /tmp, /dev): nothing of the host's at
	 * that path, so a deny inside it is not cut around by listing the host's directory */
	bool own_tree;
};

struct landlock_spec {
	int abi; /* ABI to use (from landlock_probe_abi), > 0 */
	const struct landlock_rule *rules;
	size_t n_rules;
	int deny_tcp; /* ABI >= 4: handle TCP bind/connect with no rule (= deny) */
	int scope;    /* ABI >= 6: scope abstract unix sockets and signals */
};

/* Any side: the highest Landlock ABI the kernel offers, 0 when unavailable. */
int landlock_probe_abi(void);
/* Child: create the ruleset, add each rule (a missing path is skipped), restrict self.
 * Requires no_new_privs or CAP_SYS_ADMIN in the current user namespace. *failed_rule is the
 * index of a rule whose add failed, or -1. */
int landlock_apply_child(const struct landlock_spec *spec, int *failed_rule);
/* The same in two steps: build the ruleset (returns its fd, or -errno with *failed_rule),
 * then restrict the calling process with it. A ruleset may restrict many processes: the
 * init prepares it once, and the command (and each session job) restricts itself. */
int landlock_prepare_child(const struct landlock_spec *spec, int *failed_rule);
int landlock_restrict_child(int ruleset_fd);

/* ---- seccomp.c ------------------------------------------------------------------------ */

struct seccomp_prog {
	struct sock_fprog fprog; /* the compiled BPF, owned */
};

struct seccomp_opts {
	int allow_userns;      /* 1: do not deny unshare/clone(CLONE_NEWUSER) */
	int deny_unix_sockets; /* 1: socket(AF_UNIX) fails (no-namespace tier; socketpair stays) */
};

/* Parent: the default deny-list filter for opts (callers may cache the result and reuse it
 * for many launches): a copy of the program baked at build time when there is one for opts
 * (seccomp_baked()), else compiled now with libseccomp (seccomp_compile()). */
int seccomp_prepare(const struct seccomp_opts *opts, struct seccomp_prog *out,
                    struct corral_error *err);
/* Parent: compile the filter with libseccomp, always (the fallback, and what the build-time
 * generator tools/seccomp_gen.c and the tests compare the baked programs with). */
int seccomp_compile(const struct seccomp_opts *opts, struct seccomp_prog *out,
                    struct corral_error *err);
/* The program baked at build time for opts and *len, its length in instructions; NULL when
 * this build has none for opts, or it fails a sanity check (built for another architecture
 * than libseccomp's native one here; a jump out of the program; no final return). */
const struct sock_filter *seccomp_baked(const struct seccomp_opts *opts, size_t *len);
void seccomp_prog_free(struct seccomp_prog *prog);
/* Child: load the compiled filter (needs no_new_privs set before). */
int seccomp_apply_child(const struct seccomp_prog *prog);
/* Any side: is seccomp filtering available? */
int seccomp_probe(void);
/* The names of the unconditionally denied system calls (for `corral policy explain`). The
 * conditional rules (clone/unshare with CLONE_NEWUSER, ioctl TIOCSTI/TIOCLINUX, socket
 * families, personality flags) are described by the caller. */
size_t seccomp_denied_names(const char **out, size_t max);

/* ---- caps.c --------------------------------------------------------------------------- */

/* Child: drop every capability from the bounding set, the ambient set, and the inheritable,
 * permitted and effective sets; keep no capability across exec. */
int caps_drop_all_child(void);
/* Child, without the privilege to empty the bounding set: clear the ambient, effective,
 * permitted and inheritable sets. */
int caps_clear_child(void);
/* Child: PR_SET_NO_NEW_PRIVS. */
int caps_no_new_privs_child(void);

/* ---- rlimit.c ------------------------------------------------------------------------- */

struct rlimit_plan {
	int resource[8];
	struct rlimit value[8];
	size_t n;
};

/* Parent: translate limits into setrlimit calls (core 0 always). */
void rlimit_plan_build(struct rlimit_plan *plan, uint64_t cpu_s, uint64_t mem_bytes, uint64_t nproc,
                       uint64_t nofile, uint64_t fsize, int mem_in_cgroup, int pids_in_cgroup);
/* Child: apply the plan. *failed is the resource that failed. */
int rlimit_apply_child(const struct rlimit_plan *plan, int *failed);

/* ---- cgroup.c ------------------------------------------------------------------------- */

struct cgroup_handle;

struct cgroup_limits {
	uint64_t memory_bytes; /* 0: none */
	uint64_t pids;         /* 0: none */
	uint64_t cpu_pct;      /* 0: none; 100 = one full CPU (v2 cpu.max, v1 cpu.cfs_quota_us) */
	bool tree_kill;        /* no pid namespace: the cgroup must kill the tree (v1: freezer) */
};

/* Which cgroup setup this host offers, for `corral check` and the isolation record:
 * 2 (v2 with a writable subtree), 1 (v1 memory+pids writable), 0 none. detail filled;
 * *cpu (may be NULL): whether a CPU share can be set there too (v2: the cpu controller is
 * available; v1: the cpu hierarchy is mounted and writable). */
int cgroup_probe(char *detail, size_t len, bool *cpu);
/* Parent: create a per-run cgroup and set the limits. hc: a host cache to read the mount
 * table through (synced by the caller), or NULL. */
struct hcache;
int cgroup_prepare(const struct cgroup_limits *lim, struct hcache *hc, struct cgroup_handle **out,
                   struct corral_error *err);
/* Parent: fd of the v2 cgroup directory for CLONE_INTO_CGROUP, or -1 (v1). */
int cgroup_clone_fd(const struct cgroup_handle *cg);
/* The files the sandbox writes "0" into to join its cgroup (v1: each hierarchy's `tasks`;
 * v2 without CLONE_INTO_CGROUP: `cgroup.procs`), written by the child while it has one
 * thread: malloc'ed paths into out, their number returned; (size_t)-1 (nothing kept) when
 * out of memory or more than max. */
size_t cgroup_join_paths(const struct cgroup_handle *cg, char **out, size_t max);
/* Parent: did the memory limit kill something (memory.events oom_kill / v1 oom_control)? */
int cgroup_oom_killed(struct cgroup_handle *cg);
/* Parent: OOM kills in the cgroup so far (sessions compare it per command). */
uint64_t cgroup_oom_count(struct cgroup_handle *cg);
/* Parent: did a fork fail in the cgroup (pids.events max), and at whose limit? 0 none; 1 at
 * the run's own pids.max (pids.peak reached it); 2 below it: a parent cgroup's budget ran
 * out; 3 a failure, but which limit is unknown (no pids.peak on this kernel). */
int cgroup_pids_hit(struct cgroup_handle *cg);
/* Parent: peak memory in KiB, or 0 when unknown. */
uint64_t cgroup_peak_kb(struct cgroup_handle *cg);
/* Parent: kill every process in the cgroup (cgroup.kill on v2, a freeze+kill loop on v1). */
int cgroup_kill_all(struct cgroup_handle *cg);
/* Parent: number of processes still in the cgroup (for tests and teardown). */
int cgroup_count_procs(struct cgroup_handle *cg);
/* Parent: a short description ("v1 memory,pids" / "v2 memory,pids,cpu"). */
const char *cgroup_describe(const struct cgroup_handle *cg);
/* Parent: append a note to that description (what the cgroup does not enforce). */
void cgroup_note(struct cgroup_handle *cg, const char *note);
/* Parent: kill remaining processes, remove the directory, free. */
void cgroup_destroy(struct cgroup_handle *cg);

#endif
