/* corral — run untrusted commands in a layered Linux sandbox and report what happened.
 *
 * This is the whole public API of libcorral. The CLI (`corral run`) and the MCP server
 * (`corral mcp`) are thin clients of it.
 *
 * Conventions
 * - Every function that can fail returns 0 (or a non-negative value where documented) on
 *   success and a negative CORRAL_E* code on failure, and fills the caller-owned
 *   `struct corral_error` when one is passed (it may be NULL).
 * - The library never exits, never prints, never aborts on bad input, and installs no signal
 *   handlers. It does block SIGCHLD-free waiting through pidfds only, so it coexists with a
 *   caller's own child handling.
 * - Objects are opaque except `struct corral_result` and `struct corral_error`, which the
 *   caller reads directly.
 * - Ownership is stated at each function: "borrows" means the library keeps no reference
 *   after the call returns; "copies" means the library duplicates the data.
 *
 * Thread safety: distinct objects may be used from distinct threads; one object must not be
 * used from two threads at once.
 */
#ifndef CORRAL_H
#define CORRAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CORRAL_API __attribute__((visibility("default")))
#else
#define CORRAL_API
#endif

#define CORRAL_VERSION "0.1.0"

/* ---- errors ---------------------------------------------------------------------------- */

enum corral_errcode {
	CORRAL_OK = 0,
	CORRAL_EINVAL = -1,    /* a bad argument or configuration value */
	CORRAL_ENOMEM = -2,    /* out of memory */
	CORRAL_ESYS = -3,      /* a system call failed in the supervisor (see sys_errno) */
	CORRAL_ESETUP = -4,    /* a sandbox setup step failed in the child (see step) */
	CORRAL_EUNAVAIL = -5,  /* a required isolation layer is not available on this host */
	CORRAL_ENOTFOUND = -6, /* the command was not found (CLI exit 127) */
	CORRAL_ENOEXEC = -7,   /* the command is not executable (CLI exit 126) */
	CORRAL_EDENIED = -8,   /* denied by policy before anything ran (CLI exit 126) */
	CORRAL_ESTATE = -9,    /* the call does not fit the object's state */
	CORRAL_EAGAIN = -10,   /* try again later (a queue or a resource is full) */
};

struct corral_error {
	int code;          /* a CORRAL_E* value, 0 when no error */
	int sys_errno;     /* the errno behind it, 0 when none */
	char step[32];     /* the failing step id ("mount", "landlock", "exec", ...) or "" */
	char message[512]; /* one line: what failed, on what, and how to fix it */
};

/* A static, human-readable name for a CORRAL_E* code. Never NULL. */
CORRAL_API const char *corral_strerror(int code);

/* ---- configuration --------------------------------------------------------------------- */

/* How to treat isolation layers the host cannot provide. */
enum corral_mode {
	CORRAL_MODE_REQUIRED = 0, /* fail closed, naming the missing layer (the default) */
	CORRAL_MODE_AUTO = 1,     /* apply what the host offers; report what was skipped */
	CORRAL_MODE_NONE = 2,     /* no isolation layers, limits only; reported loudly */
};

enum corral_net {
	CORRAL_NET_NONE = 0, /* a private network namespace with only loopback (the default) */
	CORRAL_NET_HOST = 1, /* share the host's network; recorded in the isolation record */
};

/* Resource limits. A value of 0 means "no limit of this kind" unless a default is stated. */
enum corral_limit {
	CORRAL_LIMIT_CPU_S = 0, /* CPU seconds (RLIMIT_CPU; SIGXCPU reported as limit "cpu") */
	CORRAL_LIMIT_MEMORY,    /* bytes: cgroup memory.max, else RLIMIT_DATA as a fallback */
	CORRAL_LIMIT_PIDS,      /* processes: cgroup pids.max, else RLIMIT_NPROC; default 1024 */
	CORRAL_LIMIT_NOFILE,    /* open files (RLIMIT_NOFILE); default 1024 */
	CORRAL_LIMIT_FSIZE,     /* largest file written, bytes (RLIMIT_FSIZE) */
	CORRAL_LIMIT_TMPFS,     /* size of the private /tmp and /dev/shm, bytes (default 256M) */
	CORRAL_LIMIT_CPUS,      /* CPU share in hundredths of a CPU: 50 = half of one CPU, 200 =
	                         * two (cgroup cpu.max / cpu.cfs_quota_us; needs a cgroup) */
	CORRAL_LIMIT__COUNT
};

typedef struct corral_config corral_config;

/* Create a configuration with the safe defaults: mode required, network none, timeout 60 s,
 * kill grace 2 s, output cap 1 MiB per stream, 1024 processes, 1024 open files,
 * stdin /dev/null, workspace and cwd unset
 * (corral_run fails until a workspace is set). Returns NULL only when out of memory. */
CORRAL_API corral_config *corral_config_new(void);
CORRAL_API void corral_config_free(corral_config *cfg);
/* A deep copy (a server builds its base configuration once, then copies it per call). NULL
 * only when out of memory. A stdin descriptor is shared, not duplicated. */
CORRAL_API corral_config *corral_config_dup(const corral_config *cfg);

/* The command, as an argv vector (copies; argv[0] is resolved in the sandbox PATH when it has
 * no slash) or as a shell string run by `/bin/sh -c` (copies). The last call wins. */
CORRAL_API int corral_config_set_argv(corral_config *cfg, const char *const *argv,
                                      struct corral_error *err);
CORRAL_API int corral_config_set_shell(corral_config *cfg, const char *command,
                                       struct corral_error *err);

/* The workspace directory (must exist; resolved to an absolute, symlink-free path now) and the
 * working directory (absolute, or relative to the workspace; must lie inside the workspace).
 * The cwd defaults to the workspace. */
CORRAL_API int corral_config_set_workspace(corral_config *cfg, const char *dir,
                                           struct corral_error *err);
CORRAL_API int corral_config_set_cwd(corral_config *cfg, const char *dir, struct corral_error *err);

/* Environment: the sandbox environment is built from scratch (PATH, HOME=workspace, LANG,
 * TERM), then these explicit entries apply in order. value == NULL removes a name. Copies.
 * Names must match [A-Za-z_][A-Za-z0-9_]*. */
CORRAL_API int corral_config_setenv(corral_config *cfg, const char *name, const char *value,
                                    struct corral_error *err);

CORRAL_API int corral_config_set_limit(corral_config *cfg, enum corral_limit which, uint64_t value,
                                       struct corral_error *err);
/* Wall-clock timeout in milliseconds (0 = none) and the grace period between SIGTERM and
 * SIGKILL when it fires. */
CORRAL_API int corral_config_set_timeout_ms(corral_config *cfg, uint64_t timeout_ms,
                                            uint64_t kill_after_ms, struct corral_error *err);
/* Bytes kept per output stream (stdout and stderr separately); the head and tail are kept and
 * a marker stands where bytes were dropped. Minimum 64, maximum 1 GiB. */
CORRAL_API int corral_config_set_output_cap(corral_config *cfg, size_t bytes,
                                            struct corral_error *err);
/* stdin: by default /dev/null. Either bytes to feed (copies) or a descriptor to pass through
 * (borrowed: it must stay open until the run has started; it is dup'ed for the child). */
CORRAL_API int corral_config_set_stdin_data(corral_config *cfg, const void *data, size_t len,
                                            struct corral_error *err);
CORRAL_API int corral_config_set_stdin_fd(corral_config *cfg, int fd, struct corral_error *err);
/* stdout / stderr: by default captured into the result. A descriptor given here receives the
 * stream directly instead (borrowed and dup'ed for the child, like stdin; -1 restores
 * capture): a pipe to the next stage of a pipeline, a terminal, a file. Nothing of that
 * stream is captured, streamed to the output callback or redacted. */
CORRAL_API int corral_config_set_stdout_fd(corral_config *cfg, int fd, struct corral_error *err);
CORRAL_API int corral_config_set_stderr_fd(corral_config *cfg, int fd, struct corral_error *err);
/* The command's stdin is a terminal (a pty slave): the command becomes a session leader and
 * takes it as its controlling terminal, so job control and Ctrl-C work (`corral shell`). */
CORRAL_API int corral_config_set_tty(corral_config *cfg, int tty, struct corral_error *err);

CORRAL_API int corral_config_set_mode(corral_config *cfg, enum corral_mode mode,
                                      struct corral_error *err);
CORRAL_API int corral_config_set_net(corral_config *cfg, enum corral_net net,
                                     struct corral_error *err);

/* Secret redaction over stdout and stderr, before anything is captured, streamed or returned:
 * the values of environment variables the policy withheld, common token formats (AWS, PEM
 * private keys, GitHub, GitLab, Slack, OpenAI, Anthropic, Stripe, JWT, URL credentials) and
 * the strings added here. */
enum corral_redaction {
	CORRAL_REDACT_ON = 0,   /* replace secrets with [REDACTED:<kind>] (the default) */
	CORRAL_REDACT_FLAG = 1, /* leave the output, count and report what was found */
	CORRAL_REDACT_OFF = 2,
};
CORRAL_API int corral_config_set_redaction(corral_config *cfg, enum corral_redaction mode,
                                           struct corral_error *err);
/* An extra exact string to redact (at least 4 bytes). Copies. */
CORRAL_API int corral_config_add_redaction(corral_config *cfg, const char *secret,
                                           struct corral_error *err);

/* Output streaming: called from corral_run()/corral_proc_step() for each chunk read from the
 * command, after redaction and before capping (so a streaming consumer sees every byte).
 * stream is 1 (stdout) or 2 (stderr). The buffer is borrowed for the call only. */
typedef void (*corral_output_cb)(void *userdata, int stream, const char *buf, size_t len);
CORRAL_API void corral_config_set_output_cb(corral_config *cfg, corral_output_cb cb,
                                            void *userdata);

/* ---- policy ----------------------------------------------------------------------------
 * Profiles state a policy once (docs/policy.md, docs/profile.schema.json). Apply a profile
 * first, then per-call settings: the setters above and below override or add to it. Paths may
 * be absolute, "~/..." (the caller's $HOME) or relative to the workspace; they are resolved
 * when the run is planned. Rules (docs/policy.md): deny wins over read and write; write wins
 * over read; a command on both lists is denied. */

/* Load a builtin profile (default, readonly, strict, network) or a JSON profile file and
 * apply it. Errors name file:line:column and what was expected. */
CORRAL_API int corral_config_load_profile(corral_config *cfg, const char *name_or_path,
                                          struct corral_error *err);

enum corral_path_access {
	CORRAL_PATH_READ = 0,  /* visible read-only */
	CORRAL_PATH_WRITE = 1, /* visible read-write */
	CORRAL_PATH_DENY = 2,  /* hidden, even inside a readable or writable tree */
};
CORRAL_API int corral_config_add_path(corral_config *cfg, enum corral_path_access access,
                                      const char *path, struct corral_error *err);
/* Replace the protected paths (workspace-relative; they stay read-only in a writable
 * workspace). list is NULL-terminated; an empty list protects nothing. */
CORRAL_API int corral_config_set_protected(corral_config *cfg, const char *const *list,
                                           struct corral_error *err);
/* The whole workspace read-only (the "readonly" profile). */
CORRAL_API int corral_config_set_workspace_readonly(corral_config *cfg, int readonly,
                                                    struct corral_error *err);
/* Host environment variables passed through: globs ('*', '?') of names. Deny globs win over
 * allow globs; explicit corral_config_setenv() entries always apply. */
CORRAL_API int corral_config_env_allow(corral_config *cfg, const char *glob,
                                       struct corral_error *err);
CORRAL_API int corral_config_env_deny(corral_config *cfg, const char *glob,
                                      struct corral_error *err);
/* Command rules: a name ("curl") or an absolute path. Once any allow rule is given only the
 * allowed executables (and the interpreters and loader they need) may be executed, enforced
 * by Landlock at every execve. reason may be NULL. */
CORRAL_API int corral_config_allow_command(corral_config *cfg, const char *match,
                                           const char *reason, struct corral_error *err);
CORRAL_API int corral_config_deny_command(corral_config *cfg, const char *match, const char *reason,
                                          struct corral_error *err);

/* The resolved plan for this configuration, without running anything: mounts, Landlock rules
 * and ABI, seccomp summary, environment names (values of withheld variables hidden), limits,
 * and the command decision. *json_out is malloc'ed (caller frees). */
CORRAL_API int corral_explain(const corral_config *cfg, char **json_out, struct corral_error *err);

/* Ask the policy: may the sandbox do op ("read", "write", "exec", "connect") on target (a
 * path, a command, or HOST:PORT)? *json_out: {"op","target","allowed","rule","reason"}.
 * Returns 1 allowed, 0 denied, <0 on error. */
CORRAL_API int corral_policy_query(const corral_config *cfg, const char *op, const char *target,
                                   char **json_out, struct corral_error *err);

/* ---- result ---------------------------------------------------------------------------- */

/* Which limit ended the run, if any. */
enum corral_limit_hit {
	CORRAL_HIT_NONE = 0,
	CORRAL_HIT_TIMEOUT, /* "timeout": the wall-clock timeout fired */
	CORRAL_HIT_CPU,     /* "cpu": killed by SIGXCPU / SIGKILL at the hard CPU limit */
	CORRAL_HIT_MEMORY,  /* "memory": OOM kill inside the memory limit */
	CORRAL_HIT_FSIZE,   /* "fsize": SIGXFSZ */
	CORRAL_HIT_PIDS,    /* "pids": fork failed at the process limit (when known) */
	CORRAL_HIT_OUTPUT,  /* reserved */
};

/* One isolation layer as applied to a run. */
struct corral_layer {
	const char *name;   /* "userns", "mountns", "pidns", "netns", "ipcns", "utsns", "cgroupns",
	                       "landlock", "seccomp", "caps" (with no_new_privs), "cgroup",
	                       "rlimits" */
	int applied;        /* 1 when enforced for this run */
	const char *detail; /* e.g. "abi 7", "v1 memory,pids", "host network", or why skipped */
};

/* A denial report: something the sandbox stopped, and what to do instead. */
struct corral_violation {
	const char *kind;   /* "fs_read", "fs_write", "exec", "network", "syscall", "limit",
	                       "timeout" or "policy" */
	const char *object; /* the path, command, host, system call or limit concerned */
	const char *rule;   /* the rule or layer that decided */
	const char *hint;   /* one sentence for a model: what was blocked, what to do instead */
	int inferred;       /* 1: matched from the command's error output against the policy;
	                       0: observed directly (preflight, limit, OOM, timeout) */
};

struct corral_result {
	char id[37];   /* a random UUID for this run */
	char **argv;   /* the command as run (NULL-terminated) */
	char *command; /* the shell string when one was given, else NULL */
	int exited;    /* 1 when the command exited normally */
	int exit_code; /* its status when exited, else -1 */
	int signal;    /* the signal that killed it, else 0 */
	int timed_out; /* 1 when the wall-clock timeout fired */
	enum corral_limit_hit limit;
	uint64_t duration_ms;
	char *stdout_buf; /* captured (possibly truncated) bytes, NUL-terminated */
	size_t stdout_len;
	char *stderr_buf;
	size_t stderr_len;
	uint64_t stdout_bytes; /* total bytes the command wrote to the stream */
	uint64_t stderr_bytes;
	int stdout_truncated;
	int stderr_truncated;
	uint64_t user_ms, sys_ms, max_rss_kb;
	const char *mode; /* "required", "auto" or "none" */
	struct corral_layer *layers;
	size_t n_layers;
	struct corral_error error; /* code != 0 when the sandbox could not be set up */
	struct corral_violation *violations;
	size_t n_violations;
	uint64_t redactions;             /* secrets redacted (or flagged) in stdout and stderr */
	uint64_t redactions_by_kind[16]; /* indexed like corral_redaction_kind_name() */
	const char *redaction_mode;      /* "redact", "flag" or "off" */
	/* Sessions (corral_session_exec): NULL / 0 for one-shot runs. */
	char *session_id;
	int session_restarted; /* the shell was wedged and restarted: its state was lost */
	int session_ended;     /* the shell exited during this command; the session is over */
	/* The sandbox was built ahead of the command (corral mcp --prebuild: a parked,
	 * single-use sandbox of the same plan): 1, and how long it waited, in ms. */
	int prebuilt;
	uint64_t prebuilt_ms;
	/* 1 when corral_proc_cancel() asked the run to stop before it ended (a caller's cancel:
	 * Ctrl-C or SIGTERM to corral run, an MCP cancellation); not the timeout's stop. The
	 * command may still have ended by itself after it (see signal and exit_code). */
	int cancelled;
};

/* Name of a redaction kind index (0..15), or NULL past the last one. */
CORRAL_API const char *corral_redaction_kind_name(unsigned i);

CORRAL_API void corral_result_free(struct corral_result *res);

/* Encode the result as one JSON object (schema: docs/result.schema.json). *out is malloc'ed
 * and owned by the caller. */
CORRAL_API int corral_result_to_json(const struct corral_result *res, char **out,
                                     struct corral_error *err);

/* The name of a limit hit as used in JSON ("timeout", "cpu", ...), or NULL for none. */
CORRAL_API const char *corral_limit_hit_name(enum corral_limit_hit hit);

/* ---- blocking run ---------------------------------------------------------------------- */

/* Run the configured command to completion and return its result (owned by the caller).
 * Returns 0 when the command ran (whatever its status), or a negative code when it could not
 * be started (policy denial, setup failure, not found, not executable); in that case *out is
 * still set to a result describing the failure (error filled, as in *err) when memory allows.
 * The configuration is borrowed. */
CORRAL_API int corral_run(const corral_config *cfg, struct corral_result **out,
                          struct corral_error *err);

/* ---- non-blocking spawn ---------------------------------------------------------------- */

typedef struct corral_proc corral_proc;

/* Start the configured command and return at once. The configuration is copied, so the
 * caller may free or change it afterwards. */
CORRAL_API int corral_spawn(const corral_config *cfg, corral_proc **out, struct corral_error *err);

/* A descriptor (epoll) that becomes readable when corral_proc_step() has work to do: output,
 * exit, timers. Add it to your own poll/epoll loop. Owned by the handle. */
CORRAL_API int corral_proc_fd(const corral_proc *p);
/* The underlying descriptors, for callers that want them directly (owned by the handle; -1
 * when closed). */
CORRAL_API int corral_proc_pidfd(const corral_proc *p);
CORRAL_API int corral_proc_stdout_fd(const corral_proc *p);
CORRAL_API int corral_proc_stderr_fd(const corral_proc *p);
/* The pid of the sandbox's first process (its init), as seen by the caller. */
CORRAL_API pid_t corral_proc_pid(const corral_proc *p);
/* Milliseconds until the next deadline that needs a step (timeout, grace, drain), or -1. */
CORRAL_API int corral_proc_next_timeout_ms(const corral_proc *p);

/* Do the work that is ready, waiting at most timeout_ms (0: do not wait; -1: wait for
 * completion). Returns 1 when the run has finished, 0 when it is still going, <0 on error. */
CORRAL_API int corral_proc_step(corral_proc *p, int timeout_ms, struct corral_error *err);

/* Ask the run to stop: SIGTERM to the command now, SIGKILL to the whole sandbox after
 * grace_ms (0 = at once). The result reports signal and no timeout. Idempotent. */
CORRAL_API int corral_proc_cancel(corral_proc *p, uint64_t grace_ms, struct corral_error *err);

/* Once corral_proc_step() returned 1: take the result (owned by the caller; once). */
CORRAL_API int corral_proc_result(corral_proc *p, struct corral_result **out,
                                  struct corral_error *err);

/* Stop reading the command's stdout (stream 1) or stderr (2): the read end of its pipe is
 * closed, so the command's next write there fails with EPIPE (SIGPIPE, which ends it unless
 * it handles that), as when the reader of a shell pipe goes away. For a caller whose own
 * reader went away (`corral run -- yes | head -1`); what was read before stays in the
 * result. Returns 0 (also when the stream was already closed), CORRAL_EINVAL for another
 * stream or one that goes to a descriptor of the caller's. */
CORRAL_API int corral_proc_close_output(corral_proc *p, int stream);

/* Kill whatever still runs (SIGKILL to the whole sandbox), reap it, free everything. With a
 * pid namespace a run is finished when the command's status and all its output are in,
 * while the sandbox's init may still be exiting (everything else in it is gone): its exit,
 * the removal of the run's cgroup and the release of its protected-path placeholders happen
 * here, so destroy a finished run soon. */
CORRAL_API void corral_proc_destroy(corral_proc *p);

/* ---- sessions --------------------------------------------------------------------------
 * A session is one sandbox that lives across calls, holding a shell (bash when the sandbox
 * has it, else sh) under the configuration's policy and limits. Each command runs in that
 * shell, so the working directory, exported variables, shell functions, aliases and files
 * persist to the next command. Protocol (docs/sessions.md): each command is sent as one
 * quoted `eval` with stdin from /dev/null, and its status comes back out of band, on a
 * separate descriptor, tagged with a random per-command nonce; output is the bytes the
 * session wrote while the command ran. A command that outlives its timeout gets SIGINT in
 * its process group (the shell survives), then SIGKILL for the processes of that group other
 * than the shell; a shell that still does not answer is wedged: the session is restarted and
 * the result says its state was lost.
 *
 * Session-wide budgets come from the configuration: memory and processes (cgroup, else
 * rlimits), CPU seconds (the whole session's CPU time; the session ends when it is spent) and
 * the total output below. The configuration's timeout is the default per-command timeout,
 * its output cap the per-command cap. */
typedef struct corral_session corral_session;

struct corral_session_options {
	uint64_t startup_timeout_ms; /* the shell must be ready within this (0: 10 s) */
	uint64_t term_timeout_ms;    /* close: SIGHUP, then SIGKILL after this (0: 2 s) */
	uint64_t output_budget;      /* bytes of output over the session's life (0: 1 GiB); when
	                                spent the session ends with limit "output", and the
	                                captured output stops at it (cut after redaction,
	                                marked truncated) */
	const char *shell;           /* the shell program (NULL: bash if present, else sh) */
};

/* Start a session and wait until its shell is ready (at most the startup timeout). The
 * configuration is copied; its command, if any, is ignored. opts may be NULL. */
CORRAL_API int corral_session_open(const corral_config *cfg,
                                   const struct corral_session_options *opts, corral_session **out,
                                   struct corral_error *err);
/* Its id: a random UUID. */
CORRAL_API const char *corral_session_id(const corral_session *s);
/* Run one command (a shell string) to completion. timeout_ms 0 uses the configuration's
 * timeout. The result has the shape of a one-shot run plus session_id; when the command
 * timed out and the shell had to be restarted, session_restarted is set; when the shell
 * exited (`exit`, OOM), session_ended is set and later calls fail with CORRAL_ESTATE. */
CORRAL_API int corral_session_exec(corral_session *s, const char *command, uint64_t timeout_ms,
                                   struct corral_result **out, struct corral_error *err);

/* The same without blocking: begin, then step until it returns 1, then take the result. */
CORRAL_API int corral_session_begin(corral_session *s, const char *command, uint64_t timeout_ms,
                                    struct corral_error *err);
/* An epoll descriptor that is readable when corral_session_step() has work. Between
 * commands too: a caller with its own loop should keep stepping the session, so that
 * background processes writing to the session's stdout or stderr are not blocked (such
 * output, produced while no command runs, is counted and dropped). */
CORRAL_API int corral_session_fd(const corral_session *s);
CORRAL_API int corral_session_next_timeout_ms(const corral_session *s);
/* Returns 1 when the command begun has finished (its result is ready), 0 otherwise. */
CORRAL_API int corral_session_step(corral_session *s, int timeout_ms, struct corral_error *err);
CORRAL_API int corral_session_result(corral_session *s, struct corral_result **out,
                                     struct corral_error *err);
/* Interrupt the running command now, as its timeout would (SIGINT, then SIGKILL of its
 * foreground, then a restart if the shell does not answer); the result says timed_out. */
CORRAL_API int corral_session_interrupt(corral_session *s);

struct corral_session_info {
	const char *id;
	int alive;              /* 0 once the shell has ended */
	int busy;               /* a command is running */
	unsigned commands;      /* commands run so far */
	unsigned restarts;      /* times the shell was restarted */
	unsigned jobs;          /* jobs started in it that are still running */
	uint64_t created_ms;    /* CLOCK_MONOTONIC milliseconds */
	uint64_t idle_ms;       /* since the last command ended (0 while busy) */
	uint64_t output_bytes;  /* output so far, against the output budget */
	uint64_t dropped_bytes; /* output produced while no command ran */
	const char *shell;      /* the shell program */
};
CORRAL_API int corral_session_info(const corral_session *s, struct corral_session_info *info);

/* End the session: SIGHUP to its shell, SIGKILL to everything after the termination timeout,
 * and free it. Its jobs end with it (their handles stay valid until freed). */
CORRAL_API void corral_session_close(corral_session *s);

/* ---- background jobs -------------------------------------------------------------------
 * A job is a sandboxed process that runs in the background while the caller goes on. Its
 * stdout and stderr go into one bounded ring buffer (the configuration's output cap, at least
 * 64 KiB), read by offset: every byte the job wrote has an offset in the order it arrived;
 * corral_job_read() returns what follows an offset, split into stdout and stderr, and says how
 * many bytes were dropped because the ring overflowed. */
typedef struct corral_job corral_job;

/* A job in a sandbox of its own (the configuration's command; its timeout limits the job's
 * life, 0 = none). The configuration is copied. */
CORRAL_API int corral_job_start(const corral_config *cfg, corral_job **out,
                                struct corral_error *err);
/* A job inside a session's sandbox (a shell string run by the session's shell program, with
 * the session's confinement, in the shell's current directory): it shares the session's
 * loopback network, /tmp and processes. */
CORRAL_API int corral_session_job_start(corral_session *s, const char *command, corral_job **out,
                                        struct corral_error *err);
CORRAL_API const char *corral_job_id(const corral_job *j);
/* Readable when corral_job_step() has work (output, exit, timers). Keep stepping a job so that
 * its output keeps flowing into the ring. Returns 1 once the job has ended and its output is
 * complete. */
CORRAL_API int corral_job_fd(const corral_job *j);
CORRAL_API int corral_job_next_timeout_ms(const corral_job *j);
CORRAL_API int corral_job_step(corral_job *j, int timeout_ms, struct corral_error *err);

struct corral_job_output {
	char *stdout_buf; /* malloc'ed, NUL-terminated */
	size_t stdout_len;
	char *stderr_buf;
	size_t stderr_len;
	uint64_t from_offset;   /* where these bytes start (> since when bytes were dropped) */
	uint64_t next_offset;   /* pass back as since for what follows */
	uint64_t missed;        /* bytes after since that the ring no longer held */
	uint64_t total_bytes;   /* bytes the job has written so far */
	uint64_t dropped_bytes; /* bytes dropped from the ring so far */
	int running;            /* 1 while the job runs */
	int exited, exit_code;  /* when it has ended: as in struct corral_result */
	int signal;
	enum corral_limit_hit limit;
	uint64_t duration_ms;
	/* Redaction of the job's whole output so far (not only these bytes), as in
	 * struct corral_result: secrets redacted (or flagged), by kind, and the mode. */
	uint64_t redactions;
	uint64_t redactions_by_kind[16]; /* indexed like corral_redaction_kind_name() */
	const char *redaction_mode;      /* "redact", "flag" or "off" (static) */
};
/* Output after offset since, at most max_bytes of it (0: no limit), and the job's state. A
 * since before the ring's oldest byte reads from that byte (missed counts the rest); a since
 * past total_bytes reads nothing from the end (from_offset says so; the MCP server refuses
 * such an offset). A
 * page cut at max_bytes ends between UTF-8 characters: up to 3 bytes short of max_bytes, or,
 * when its first character is longer than max_bytes, that character whole (up to 4 bytes). */
CORRAL_API int corral_job_read(corral_job *j, uint64_t since, size_t max_bytes,
                               struct corral_job_output *out, struct corral_error *err);
CORRAL_API void corral_job_output_free(struct corral_job_output *o);
/* Stop the job: SIGTERM to its process group, SIGKILL after grace_ms. Idempotent. */
CORRAL_API int corral_job_kill(corral_job *j, uint64_t grace_ms, struct corral_error *err);
CORRAL_API int corral_job_running(const corral_job *j);
CORRAL_API const char *corral_job_command(const corral_job *j);
/* Kill what still runs (the whole sandbox for a job of its own; the job's process group for a
 * session job) and free the handle. */
CORRAL_API void corral_job_free(corral_job *j);

/* ---- pipelines -------------------------------------------------------------------------
 * A pipeline runs 2 to 16 stages, each in a sandbox of its own, connected like a shell's
 * `a | b | c`: stage k's stdout is a pipe to stage k+1's stdin. The bytes between stages flow
 * from sandbox to sandbox through the kernel, never through the caller, so memory stays flat
 * whatever the volume. The first stage's stdin is its configuration's (/dev/null, data or a
 * descriptor); the last stage's stdout is captured (or goes to its configuration's stdout
 * descriptor); every stage's stderr is captured as in a single run. An intermediate stage's
 * result has an empty stdout with stdout_bytes 0: its output went to the next stage.
 *
 * Status (pipefail, as bash's `set -o pipefail`): the status of the rightmost stage whose
 * status is not 0, else 0. A stage's status is its exit code, 128+N when signal N killed it
 * (a stage killed by SIGPIPE because a later stage exited counts: 141), and 127, 126 or 125
 * when its command was not found, not executable or denied, or the sandbox not set up.
 *
 * Teardown: when a stage fails (status not 0), the stages before it are stopped at once
 * (SIGKILL: their output has nowhere to go); the stages after it see EOF on their stdin and
 * get the first stage's kill grace (kill_after) to finish, then are stopped. A stage with
 * status 141 (SIGPIPE) stops only the stages before it: a later stage stopped reading, and goes on
 * by these rules. A stage that ends with status 0 stops nothing, even while an earlier stage still
 * runs (as in a shell).
 *
 * Timeout: the first stage's timeout covers the whole pipeline (the other stages' timeouts
 * are ignored). When it fires every running stage gets SIGTERM, then SIGKILL after the kill
 * grace; those stages report timed_out and limit "timeout", and so does the pipeline. */
typedef struct corral_pipeline corral_pipeline;

struct corral_pipeline_result {
	char id[37];                   /* a random UUID for the pipeline */
	size_t n_stages;               /* 0 when the pipeline could not be started (see error) */
	struct corral_result **stages; /* one result per stage, in order */
	int exit_code;                 /* pipefail status, 0-255 (above) */
	int failed_stage;              /* the index (from 0) of the stage exit_code comes from, or
	                                  of the stage that could not be started; -1 when none */
	int timed_out;                 /* 1 when the pipeline's timeout fired */
	int cancelled;                 /* 1 when corral_pipeline_cancel() was called */
	uint64_t duration_ms;
	int *stopped;              /* per stage: 1 when the pipeline stopped it while it ran
	                              (another stage failed, the timeout, a cancel) */
	struct corral_error error; /* code != 0 when a stage could not be started: the
	                              message begins "stage N (command): " (N from 1) */
};

/* Start every stage and return at once. Each configuration is copied; stages[0]'s timeout
 * and kill grace apply to the whole pipeline. The pipes replace the stdin of stages 2..n and
 * the stdout of stages 1..n-1 (their own settings for those are ignored). Fails before
 * anything starts when a stage is denied by policy or its command (an argv without a slash)
 * is not found in the sandbox's PATH; when a stage fails to start later, the stages already
 * started are killed and reaped. Either way the error names the stage: "stage 2 (nosuchcmd):
 * exec: ...". */
CORRAL_API int corral_pipeline_spawn(const corral_config *const *stages, size_t n,
                                     corral_pipeline **out, struct corral_error *err);
/* An epoll descriptor, readable when corral_pipeline_step() has work (it holds every stage's
 * corral_proc_fd and the pipeline's timer). Owned by the handle. */
CORRAL_API int corral_pipeline_fd(const corral_pipeline *p);
/* Milliseconds until the next deadline that needs a step, or -1. */
CORRAL_API int corral_pipeline_next_timeout_ms(const corral_pipeline *p);
/* Do the work that is ready, waiting at most timeout_ms (0: do not wait; -1: wait for
 * completion). Returns 1 when every stage has finished, 0 while some run, <0 on error. */
CORRAL_API int corral_pipeline_step(corral_pipeline *p, int timeout_ms, struct corral_error *err);
/* Stop every running stage: SIGTERM now, SIGKILL after grace_ms (0 = at once). The result
 * reports cancelled, the stages their signals, and no timeout. Idempotent. */
CORRAL_API int corral_pipeline_cancel(corral_pipeline *p, uint64_t grace_ms,
                                      struct corral_error *err);
/* corral_proc_close_output for a pipeline: stream 1 is the last stage's stdout (the
 * pipeline's output), stream 2 every running stage's stderr. */
CORRAL_API int corral_pipeline_close_output(corral_pipeline *p, int stream);
/* Once corral_pipeline_step() returned 1: take the result (owned by the caller; once). */
CORRAL_API int corral_pipeline_result(corral_pipeline *p, struct corral_pipeline_result **out,
                                      struct corral_error *err);
/* Kill whatever still runs, reap it, free everything. */
CORRAL_API void corral_pipeline_destroy(corral_pipeline *p);

/* Spawn, step to completion, return the result (owned by the caller). Returns 0 when every
 * stage was started, or a negative code as corral_pipeline_spawn() does, or the error of a
 * stage whose command could not be started; *out is set in every case when memory allows
 * (with no stages when nothing could be started). */
CORRAL_API int corral_pipeline_run(const corral_config *const *stages, size_t n,
                                   struct corral_pipeline_result **out, struct corral_error *err);
CORRAL_API void corral_pipeline_result_free(struct corral_pipeline_result *res);
/* Encode as one JSON object (schema: docs/pipeline.schema.json): id, pipeline (true),
 * exit_code, failed_stage, timed_out, cancelled, duration_ms, the last stage's stdout,
 * stdout_bytes and stdout_truncated, stopped_stages, error, and stages: each stage's result
 * object as corral_result_to_json() encodes it. *out is malloc'ed. */
CORRAL_API int corral_pipeline_result_to_json(const struct corral_pipeline_result *res, char **out,
                                              struct corral_error *err);

/* ---- host probe ------------------------------------------------------------------------ */

/* Probe the host for each isolation layer and return a JSON document (owned by the caller)
 * describing availability, detail and how to fix what is missing. */
CORRAL_API int corral_check_host(char **json_out, struct corral_error *err);

#ifdef __cplusplus
}
#endif
#endif /* CORRAL_H */
