/* Library-internal types shared between config.c, launch.c, supervise.c and result.c. */
#ifndef CORRAL_INTERNAL_H
#define CORRAL_INTERNAL_H

#include "util.h"
#include "policy.h"
#include "sandbox/sandbox.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

struct env_entry {
	char *name;
	char *value; /* NULL: removed */
};

struct corral_config {
	char **argv; /* the command; for a shell string: {"/bin/sh", "-c", cmd} */
	char *shell; /* the shell string, or NULL */
	char *workspace;
	char *cwd; /* absolute, inside the workspace; NULL = workspace */
	struct env_entry *env;
	size_t n_env;
	uint64_t limits[CORRAL_LIMIT__COUNT];
	bool pids_default; /* limits[PIDS] is the default, not the caller's choice */
	uint64_t timeout_ms, kill_after_ms;
	size_t output_cap;
	char *stdin_data;
	size_t stdin_len;
	int stdin_fd; /* -1: none (use data, or /dev/null) */
	bool stdin_is_data;
	int stdout_fd, stderr_fd; /* -1: captured through a pipe; else borrowed, dup'ed */
	bool tty;                 /* stdin is a terminal: the command takes it as controlling tty */
	/* Internal (sessions, session.c): a descriptor placed at fd 3 of the command only, and
	 * a control socket for the init (jobs started inside a running sandbox). */
	int cmd_fd3;
	bool init_ctl;
	/* Internal (parked sandboxes, DESIGN §18): build everything, then hold the command back
	 * until proc_unpark() sends the command that will run. */
	bool park;
	/* Internal (a server, DESIGN §18): the holder of a mount template the launches take
	 * copies of; NULL: every launch builds its whole tree. Not owned (a dup shares it). */
	struct mtpl *mtpl;
	/* Internal (a server, DESIGN §18): the looks a plan takes at the host's system paths
	 * (the system directories, the /etc allow-list, the template's sources), cached while
	 * inotify shows them unchanged (hcache.h); NULL: looked at on every launch. Not owned (a
	 * dup shares it); one thread at a time, as the server's loop. */
	struct hcache *hc;
	bool no_capture; /* output goes to out_cb only; nothing is kept in the result */
	enum corral_mode mode;
	enum corral_net net;
	corral_output_cb out_cb;
	void *out_ud;
	/* policy (policy.c): raw paths, resolved at plan time against the workspace and $HOME */
	char *profile_name;
	char **fs_read, **fs_write, **fs_deny;
	size_t n_read, n_write, n_deny;
	char **protected_paths; /* workspace-relative */
	size_t n_protected;
	bool workspace_ro, etc_minimal;
	char **env_allow, **env_deny; /* globs */
	size_t n_env_allow, n_env_deny;
	struct cmd_rule *cmd_allow, *cmd_deny;
	size_t n_cmd_allow, n_cmd_deny;
	bool cmd_allow_set;
	bool protected_set;     /* protected_paths replaces the default list */
	bool env_deny_replaced; /* env_deny replaces the default deny globs */
	int redact_mode;        /* enum corral_redaction */
	char **redact_strings;
	size_t n_redact_strings;
	/* Test hook: layers to pretend are unavailable (bit per enum layer_id). Set only through
	 * the CORRAL_TEST_DISABLE environment variable of the supervisor, see launch.c. */
};

/* Deep copy (used by corral_spawn, so that the caller may free its config). */
struct corral_config *config_dup(const struct corral_config *cfg);

/* ---- env.c (pure) ---------------------------------------------------------------------- */

/* Build the sandbox environment: defaults (PATH, HOME, LANG, TERM, TMPDIR) then entries in
 * order. Returns a malloc'ed NULL-terminated "NAME=VALUE" vector (free with env_free). */
char **env_build(const struct env_entry *entries, size_t n, const char *home);
void env_free(char **envp);
bool env_name_valid(const char *name);

/* ---- parse.c (pure) -------------------------------------------------------------------- */

/* "512", "64k", "1.5M", "2GiB" -> bytes. 0 on success, -1 on a malformed or absurd value
 * (over 1 EiB); why filled. */
int parse_size(const char *s, uint64_t *out, const char **why);
/* "30", "1.5", "250ms", "2m", "1h" -> milliseconds (bare numbers are seconds). */
int parse_duration_ms(const char *s, uint64_t *out, const char **why);
/* A positive integer count, at most max. */
int parse_count(const char *s, uint64_t max, uint64_t *out, const char **why);
/* "0.5", "2", "1.25" CPUs -> hundredths of a CPU (0.01 to 4096 CPUs; "0" is 0: no limit). */
int parse_cpus(const char *s, uint64_t *out, const char **why);
/* A network target HOST:PORT (a name or an IPv4 address, or [IPv6], and a port 1-65535):
 * 0, or -1 with why (the expected form). */
int parse_hostport(const char *s, const char **why);

/* ---- capture.c (pure) ------------------------------------------------------------------ */

/* Keeps the first and the last bytes of a stream up to a cap, in flat memory. */
struct capture {
	size_t cap; /* total bytes kept: head_cap + tail ring size */
	size_t head_cap;
	char *head; /* grown lazily up to head_cap */
	size_t head_len, head_alloc;
	char *tail; /* ring of cap - head_cap bytes */
	size_t tail_cap, tail_pos, tail_len;
	uint64_t total;
};

int capture_init(struct capture *c, size_t cap);
void capture_feed(struct capture *c, const char *buf, size_t len);
bool capture_truncated(const struct capture *c);
/* Assemble head + marker + tail into a NUL-terminated malloc'ed buffer. */
char *capture_finish(struct capture *c, size_t *len);
void capture_free(struct capture *c);

/* ---- result.c -------------------------------------------------------------------------- */

struct corral_result *result_new(void);
void result_uuid(char out[37]);
int result_add_layer(struct corral_result *res, const char *name, int applied, const char *detail);

/* s[0, n) as UTF-8 into out, which has room for 3n + 1 bytes: each byte of an invalid
 * sequence, and NUL, becomes U+FFFD; with cut_tail, a valid sequence's beginning cut off at
 * the end (by a byte count) is dropped. out is NUL-terminated; its length (result.c). */
size_t utf8_sanitize(const char *s, size_t n, bool cut_tail, char *out);
/* A JSON string from bytes: invalid UTF-8 and NUL become U+FFFD (result.c). */
struct json_t;
struct json_t *json_bytes(const char *s, size_t n);
/* The result as corral_result_to_json() encodes it, as an object; without "stdout" and
 * "stderr" when with_output is false (the audit record, which keeps the output only on
 * request, would otherwise encode up to --max-output twice for nothing). */
struct json_t *result_json(const struct corral_result *res, bool with_output);
/* corral_result_to_json()'s document and a newline, written to fd as it is encoded (64 KiB
 * at a time, fd_write_all). 0, or -1 with errno. */
int result_write_json(const struct corral_result *res, int fd);
/* All of buf to fd: a short write goes on, and a non-blocking descriptor that is full is
 * waited for (poll), where stdio gives up with EAGAIN. 0, or -1 with errno. */
int fd_write_all(int fd, const void *buf, size_t len);

/* ---- violations.c ---------------------------------------------------------------------- */

int result_add_violation(struct corral_result *res, const char *kind, const char *object,
                         const char *rule, const char *hint, int inferred);
void result_free_violations(struct corral_result *res);
/* The violations as a compact JSON array (malloc'ed), for the audit store. */
char *result_violations_json(const struct corral_result *res);
/* SHA-256 (hex) of the resolved policy of cfg: what the audit records as policy_hash. */
void policy_hash(const struct corral_config *cfg, char out[65]);
/* Fill res->violations from the evidence and, for failed runs, from the error output. */
void violations_collect(const struct corral_config *cfg, struct corral_result *res);
/* A fork was refused in the run's cgroup below its own pids.max (known: a parent cgroup's
 * budget ran out), or at a level this kernel does not tell (known 0): an inferred limit
 * entry that does not blame the run's own limit. */
void violations_pids_elsewhere(const struct corral_config *cfg, struct corral_result *res,
                               int known);

/* ---- launch.c -------------------------------------------------------------------------- */

/* plan.c: keep each run's protected-path placeholders ms milliseconds after the run's end
 * (corral mcp --placeholder-linger), removed by the library's closer thread unless a later
 * run took them over. 0 (the default): removed at the run's end; setting 0 also removes
 * what lingers now, before it returns. */
void plan_placeholders_linger(unsigned ms);

/* A protected path held for the length of a run: a shared flock on it, and whether this run
 * created it as an empty placeholder (then it removes it afterwards). */
struct placeholder {
	char *path;
	int fd;
	bool created;
	/* not a mount: a git directory (path; fd an O_PATH fd of it, taken at the start) where
	 * the redirect files of plan.c's git_redirects[] set in this mask were absent at the
	 * start; those that appear are removed at the end. 0: a protected path as above. */
	unsigned watch;
	size_t ws_len; /* watch: the length of the workspace prefix of path */
};

/* Everything prepared before clone, and what the launch produced. */
struct launch;
struct launch_out {
	pid_t pid; /* the sandbox init */
	int pidfd;
	int out_fd, err_fd; /* read ends of stdout/stderr pipes */
	int in_fd;          /* write end of the stdin pipe, or -1 */
	int report_fd;      /* read end of the report pipe (setup failure / exit status) */
	int ctl_fd;         /* the supervisor's end of the init's control socket, or -1 */
	bool pidns;         /* true: killing pid kills everything */
	struct cgroup_handle *cg;
	char *private_tmp;        /* host directory to remove after the run, or NULL */
	struct placeholder *held; /* protected paths held for the run (see plan.c) */
	size_t n_held;
	int go_fd; /* parked: the write end of the init's sync pipe, where the command goes */
	uint8_t key[32]; /* parked: the plan key (launch_plan_key) of the sandbox */
};

/* Messages from the sandbox init to the supervisor on the report pipe. */
enum report_kind { REPORT_FAIL = 1, REPORT_EXEC_OK = 2, REPORT_EXIT = 3, REPORT_NOTE = 4 };
struct report {
	int32_t kind;
	int32_t step;   /* enum setup_step for REPORT_FAIL */
	int32_t err;    /* errno for REPORT_FAIL */
	int32_t detail; /* failing op/rule index, or -1 */
	int32_t status; /* wait status of the command for REPORT_EXIT */
	int32_t pad;
	int64_t user_us, sys_us, maxrss_kb; /* RUSAGE_CHILDREN of the init */
	char path[200]; /* the object of a failed step (mount target, Landlock path), or "" */
};

/* The init's control socket (sessions): requests from the supervisor and replies. */
enum ctl_op {
	CTL_START = 1,        /* -> init: start job id running command (payload) with 2 fds */
	CTL_SIGNAL = 2,       /* -> init: signal arg to job id's process group */
	CTL_STARTED = 3,      /* <- init: job id started (arg: its pid in the sandbox) */
	CTL_START_FAILED = 4, /* <- init: job id not started (arg: errno) */
	CTL_EXITED = 5,       /* <- init: job id ended (arg: wait status) */
};
struct ctl_msg {
	int32_t op;
	uint32_t id;
	int32_t arg;
	int32_t len; /* payload bytes that follow */
};
#define CTL_MAX_COMMAND (64 * 1024)

/* Prepare, clone and start the sandbox. On failure res->error is filled by the caller from
 * err. The result's isolation layers are recorded into res. */
int launch_start(const struct corral_config *cfg, struct corral_result *res, struct launch_out *out,
                 struct corral_error *err);
/* The plan key of cfg's sandbox as it would be built now: a SHA-256 over everything the
 * sandbox is made of (namespaces, mounts with the identity of the in-workspace and writable
 * sources and of the protected paths, Landlock rules, seccomp program, rlimits, cgroup
 * limits, environment, cwd), and nothing of the command (argv). The plan is a dry run: the
 * policy's preflight runs, but nothing is made or held on the host (no placeholder, cgroup
 * or private /tmp; the cgroup is taken to be as the process's last attempt had it); no
 * sandbox is made. Two configs with equal keys get the same sandbox. With hc (hcache.h),
 * what the plan looks at on the host is taken from that cache where it holds it. */
struct hcache;
int launch_plan_key(const struct corral_config *cfg, struct hcache *hc, uint8_t key[32],
                    struct corral_error *err);
/* With cfg->mtpl set: start a template holder for cfg's plan now (a dry run of the plan), so
 * that the first launch finds it. 0, or -1 (no mount namespace for cfg, or no template). */
int launch_template_warm(const struct corral_config *cfg);
/* Largest argv (bytes of the strings with their NULs, and count) a parked sandbox takes. */
#define PARK_MAX_ARGV_BYTES (60 * 1024)
#define PARK_MAX_ARGC 4096
/* Names of setup steps, for errors ("mount", "landlock", ...). */
const char *launch_step_name(int step);
/* Translate a child failure report into an error (code, message with the fix). */
int launch_report_error(const struct report *r, const struct corral_config *cfg,
                        struct corral_error *err);

/* ---- supervise.c, internal to sessions ---------------------------------------------------- */
struct corral_proc;
int proc_ctl_fd(const struct corral_proc *p);
/* Send sig to the sandbox's init (which forwards INT, TERM, HUP, QUIT to the command's
 * process group). */
int proc_signal_init(struct corral_proc *p, int sig);
bool proc_finished(const struct corral_proc *p);
/* OOM kills in the sandbox's cgroup so far (0 without a memory cgroup). */
uint64_t proc_oom_count(const struct corral_proc *p);
/* Parked sandboxes (the MCP server's --prebuild, DESIGN §18). Whether cfg can run in a
 * parked sandbox at all: its command's stdio are pipes and /dev/null (no stdin data, no
 * borrowed descriptors, no terminal), not a session, and it has a pid namespace plan. */
bool proc_parkable(const struct corral_config *cfg);
/* Build cfg's sandbox now and park it: the init waits after its last setup step. key
 * receives its plan key. The command of cfg is not run; proc_unpark() gives the real one. */
int proc_park(const struct corral_config *cfg, struct corral_proc **out, uint8_t key[32],
              struct corral_error *err);
/* Still parked and usable: not ended, no setup failure reported (steps its events). */
bool proc_parked_ok(struct corral_proc *p);
/* Start cfg's command in the parked sandbox p, which the caller matched by plan key. From
 * here p is cfg's run: its command, deadlines, output callback, capture and redaction are
 * cfg's, its duration starts now, and its result records how long it was parked. */
int proc_unpark(struct corral_proc *p, const struct corral_config *cfg, struct corral_error *err);
/* The result being built (layers are recorded once the sandbox started). */
const struct corral_result *proc_peek_result(const struct corral_proc *p);
/* A run that has ended but for its init (a pid namespace, the init's EXIT report: it only
 * exits now) lets go of its host state at once (the placeholders and their locks, the
 * private tmp), as corral_proc_destroy() would first; the caller can then record and print
 * the result while the init's exit, the namespaces' teardown, goes on, and destroy only
 * waits for that and removes the cgroup. False, and nothing done, otherwise. */
bool proc_release_ended(struct corral_proc *p);

/* ---- memory.c ----------------------------------------------------------------------------- */

/* Make this process's pages that it still shares copy-on-write with a fork child its own
 * again now (MADV_POPULATE_WRITE), rather than at its next write to each: the heap, the
 * stack, anonymous private mappings and the private writable mappings of exe (this binary,
 * as /proc/self/maps names it; NULL or "": none). Only pages that are present and not
 * exclusively mapped (/proc/self/pagemap) are written: nothing untouched becomes resident,
 * and the contents do not change. Returns how many pages were made private (0 when the
 * kernel has no MADV_POPULATE_WRITE, before 5.14, or /proc is not there). */
size_t mem_unshare_cow(const char *exe);
/* The same for [lo, hi) (page-aligned), given an open /proc/self/pagemap. */
size_t mem_unshare_range(int pagemap_fd, uintptr_t lo, uintptr_t hi);

/* ---- policy.c (apply side) -------------------------------------------------------------- */

/* Resolve a policy path (absolute, ~/..., or workspace-relative) to an absolute path with the
 * existing part's symlinks resolved. out is PATH_MAX. */
int policy_resolve_path(const struct corral_config *cfg, const char *raw, char *out,
                        struct corral_error *err);
/* The same without resolving symlinks: "~", the workspace and "." / ".." only. */
int policy_lexical_path(const struct corral_config *cfg, const char *raw, char *out,
                        struct corral_error *err);
/* The deny glob that withholds name, or NULL. */
const char *policy_env_denied_by(const struct corral_config *cfg, const char *name);
/* Host variables passed through (allowed and not denied), and those withheld (denied; their
 * values are kept for redaction). Lists are malloc'ed; free with env_entries_free_list. */
int policy_env(const struct corral_config *cfg, struct env_entry **pass, size_t *n_pass,
               struct env_entry **withheld, size_t *n_withheld);
void env_entries_free_list(struct env_entry *e, size_t n);
/* The sandbox's PATH (the explicit PATH setting, else the default). */
const char *sandbox_path_env(const struct corral_config *cfg);
/* Find an executable as the sandbox would; 0 found (out is PATH_MAX), -1 not. */
int policy_which(const struct corral_config *cfg, const char *prog, const char *path_env,
                 char *out);

struct exec_decision {
	bool found, allowed;
	char path[PATH_MAX], real[PATH_MAX];
	const struct cmd_rule *rule; /* the deciding rule, or NULL */
	const char *list;            /* "commands.deny", "commands.allow", ... */
};
int policy_decide_exec(const struct corral_config *cfg, const char *prog, struct exec_decision *d);
/* Before anything is built: the command decision and argument path confinement. Returns
 * CORRAL_EDENIED with a message naming the rule. */
int policy_preflight(const struct corral_config *cfg, struct corral_error *err);
/* The working directory (the cwd, else the workspace) inside a tree the policy hides
 * (filesystem.deny, --hide): CORRAL_EINVAL with a message naming it and the rule, else 0. The
 * deny paths resolve as the mount plan resolves them (inside the workspace without following
 * symlinks). The caller decides whether hiding is enforced (mode none hides nothing). */
int policy_check_cwd(const struct corral_config *cfg, struct corral_error *err);

/* ---- config.c ---------------------------------------------------------------------------- */
/* Whether a tree bound read-write into a sandbox (the workspace, a filesystem.write path;
 * resolved) carries one of the kernel's interface file systems or the host's /dev: itself
 * (self: the workspace's own setter checks it already), or as a mount below it in
 * mountinfo (the bind is recursive; NULL: not looked at). 0, or an error naming the tree,
 * the mount and the fix, under label. */
int kernel_tree_check(const char *label, const char *tree, bool self, const char *mountinfo,
                      struct corral_error *err);
/* Files that get Landlock's execute right under a command allow-list. */
int policy_exec_files(const struct corral_config *cfg, char ***files, size_t *n,
                      struct corral_error *err);


/* ---- session.c: audit accessors (for the audit records of jobs and sessions) ------------- */

/* A job of its own (corral_job_start), once ended: its sandbox's result (usage, isolation,
 * violations, limits), borrowed from the job; NULL for a session job or one still running. */
const struct corral_result *corral_job_sandbox_result(const corral_job *j);
/* Copy the session's isolation record (mode and layers) into into. -1 when the session's
 * sandbox has none (yet). */
int corral_session_copy_isolation(const corral_session *s, struct corral_result *into);

/* The mount template's holder (template.c, DESIGN §18), kept by a server: set a config's
 * mtpl to it and its launches take copies of the system tree. */
struct mtpl *mtpl_new(void);
void mtpl_free(struct mtpl *t);                    /* kills and reaps the holder */
const char *mtpl_off_reason(const struct mtpl *t); /* non-NULL: given up, and why */

#endif
