/* The launch plan shared by plan.c (parent-side preparation) and launch.c (clone and the
 * child's setup sequence). Internal. */
#ifndef CORRAL_LAUNCH_H
#define CORRAL_LAUNCH_H

#include <limits.h>
#include <sched.h>
#include <sys/stat.h>

#include "internal.h"

/* Everything the child reads. Built in the parent; the child only reads it. */
struct launch {
	const struct corral_config *cfg;
	bool userns, mountns, pidns, netns, ipcns, utsns, cgroupns;
	bool landlock, seccomp;
	uid_t uid;
	gid_t gid;
	/* The supervisor's CPU set, when the child was moved off the supervisor's CPU for its
	 * setup (launch_start): the init takes it back before the command starts. */
	cpu_set_t cpus;
	bool cpus_moved;
	/* A copy of the mount template (template.c), attached as the new root instead of the
	 * tpl ops; -1: the plan's own tree is built. */
	int fd_tpl;
	bool tpl_used;                                 /* (for the isolation record) */
	int fd_in, fd_out, fd_err, fd_report, fd_sync; /* parent-side numbers */
	int fd_fd3, fd_ctl; /* sessions: the command's fd 3, the init's control socket */
	struct mount_plan mounts;
	struct landlock_spec ll;
	struct landlock_rule *ll_rules;
	char **ll_owned; /* paths made by the deny expansion */
	size_t n_ll_owned;
	const struct seccomp_prog *sc;
	struct rlimit_plan rl;
	char **envp;
	char **argv;
	char **path_dirs;  /* PATH split, for resolving argv[0] in the sandbox */
	char *exec_buf;    /* PATH_MAX scratch for the child */
	const char *cwd;   /* chdir target when there is no mount namespace */
	char *private_tmp; /* host dir used as /tmp when there is no mount namespace */
	struct cgroup_handle *cg;
	bool want_cg;
	struct placeholder *held; /* protected paths held (and maybe created) for this run */
	size_t n_held;
	char **exec_files; /* under a command allow-list: what may be executed */
	size_t n_exec_files;
	struct mount_request req;             /* resolved policy paths (strings owned here) */
	uintptr_t argarea_start, argarea_end; /* the supervisor's argv strings */
	bool cgroupns_late; /* v1: unshare the cgroup namespace after joining the cgroup */
	int cpu_here;       /* the supervisor's CPU at the clone (setup_elsewhere) */
	bool net_helper;    /* a CPU is idle for the network namespace's helper (cpu_to_spare) */
	bool netns_late;    /* the network namespace made by a helper of the child (net_helper) */
	bool cg_join;       /* not cloned into the cgroup: the child writes itself into these */
	char *cg_join_paths[4];
	size_t n_cg_join;
	bool dry_run;       /* explain only: no host side effects (placeholders, tmp, cgroup) */
	struct hcache *hc;  /* a plan key's look at the host, cached (hcache.h); NULL: none */
	struct hcache *hc_sys; /* a run's look at the system paths only, cached (cfg->hc) */
	bool key_only;      /* a dry run for a plan key (launch_plan_key): it also predicts what
	                     * the host would decide (a placeholder that cannot be made, the
	                     * cgroup as this process's last attempt had it) */
	bool in_cg;         /* the run is in a cgroup (planned so, for a plan key) */
	bool cg_no_cpu;     /* ... made without the CPU share it asked for (mode auto) */
	/* One-shot runs make their missing protected paths' placeholders while the child
	 * builds its mount tree (plan_make_pending, after the clone), not before: the plan
	 * lists them as protected, and the child waits before its first protected bind. */
	bool ph_defer;
	/* protect_one's look at a missing path's parent, which the protected names mostly
	 * share (the workspace): the parent, its lstat's errno (0: st holds it) and
	 * faccessat(W_OK | X_OK)'s (-1: not asked yet). Forgotten when a placeholder is made. */
	struct ph_parent {
		char path[PATH_MAX];
		struct stat st;
		int lstat_err, access_err;
	} ph_parent;
	struct ph_pending {
		char *path, *origin;
		bool is_dir;
		int how;
	} * ph_pending;
	size_t n_ph_pending;
	/* mode auto: the namespaces the host refused (their clone flags), which the run goes
	 * on without, the others kept (plan_drop_some_namespaces); the errno of each (net, ipc,
	 * uts, cgroup), for the isolation record */
	int ns_refused;
	int ns_refused_errno[4];
	bool sc_no_unix; /* the seccomp program denies unix sockets */
};

/* plan.c: decide the layers for this run and record them in res; fails when mode=required
 * and a layer is missing. */
int plan_choose_layers(struct launch *L, struct corral_result *res, struct corral_error *err);
/* plan.c: everything else the child needs: mount plan, Landlock rules, rlimits, env, argv,
 * PATH split, private tmp. Returns <0 with err filled. */
int plan_prepare(struct launch *L, struct corral_result *res, struct corral_error *err);
/* plan.c: rebuild what depends on the namespace tier after falling back to no userns. */
int plan_drop_namespaces(struct launch *L, struct corral_error *err);
/* mode auto: go on without some of the namespaces (CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS,
 * CLONE_NEWCGROUP in flags, refused with errnos[] in that order), keeping the others. */
int plan_drop_some_namespaces(struct launch *L, int flags, const int errnos[4],
                              struct corral_error *err);
void plan_record_layers(const struct launch *L, struct corral_result *res);
void plan_free(struct launch *L);
void plan_argarea(uintptr_t *start, uintptr_t *end);
/* Release the protected paths of a run: remove the placeholders it created that are still
 * empty and held by no other run, close the locks, free the list. */
void plan_release_protected(struct placeholder *held, size_t n);
/* The same at a run's end, once everything of it has exited (however it ended, and for a
 * parked sandbox let go of unused): while plan_placeholders_linger() is set, each
 * placeholder still held (and marked as corral's) stays that long first, held, so that the
 * next run in the workspace takes it over instead of making it again. */
void plan_release_protected_end(struct placeholder *held, size_t n);
/* plan.c: make and hold the placeholders the plan deferred (L->ph_defer). Each one must be
 * held when this returns 0: the child binds over them next. <0 with err filled. */
int plan_make_pending(struct launch *L, struct corral_error *err);
/* plan.c: the protected set of the run (L->req.protect, L->req.pin); with L->dry_run set it
 * touches nothing on the host (policy check and explain use it that way). */
int plan_protected_set(struct launch *L, struct corral_error *err);
bool plan_test_disabled(const char *layer);
/* The process budget that enforces a --pids limit of n (0: none): the command and its
 * descendants get n, and the sandbox's init (pid 1, always there) is counted on top. */
static inline uint64_t plan_pids_budget(uint64_t n)
{
	return n ? n + 1 : 0;
}
/* CORRAL_TEST_NET_HELPER: 1 "always" (the network namespace's helper whether or not a CPU
 * is idle), -1 "never", 0 unset (launch_start decides). */
int plan_test_net_helper(void);

/* ---- template.c: the mount template's holder (DESIGN §18) ---- */
/* The template key of L's plan (mount_template_prepare done): what a template holds. */
void tpl_key_compute(const struct launch *L, uint8_t out[32]);
/* A copy of the template for key, or -1 (none ready, another key, or none at all). */
int mtpl_take(struct mtpl *t, const uint8_t key[32]);
/* After a launch that found none: start a holder for key when one is due (built from L's
 * plan by a clone of this process; the next launches take its copies). */
void mtpl_offer(struct mtpl *t, const struct launch *L, const uint8_t key[32]);

#endif
