/* corral mcp: a Model Context Protocol server on stdio, built on the public libcorral API.
 *
 *   jsonrpc.c  pure: line framing, JSON-RPC 2.0 envelope validation, method dispatch,
 *              message builders, MCP version negotiation. No I/O (unit-tested).
 *   tools.c    the tools: schemas, argument validation into a copy of the server's base
 *              corral_config (arguments only narrow it), the text and structured result of a
 *              run, and can_i's policy answers.
 *   server.c   the MCP lifecycle and the single-threaded epoll loop: stdin, stdout, signals,
 *              a progress timer and one descriptor per running sandbox; the audit record.
 */
#ifndef CORRAL_MCP_H
#define CORRAL_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "corral.h"

/* ---- JSON-RPC 2.0 error codes ------------------------------------------------------------ */

enum {
	JR_PARSE_ERROR = -32700,
	JR_INVALID_REQUEST = -32600,
	JR_METHOD_NOT_FOUND = -32601,
	JR_INVALID_PARAMS = -32602,
	JR_INTERNAL_ERROR = -32603,
	/* Server-defined (the -32000..-32099 range): a request other than initialize or ping
	 * arrived before initialize. */
	JR_NOT_INITIALIZED = -32002,
};

#define MCP_DEFAULT_MAX_MESSAGE (4u << 20) /* bytes per message, newline excluded */
#define MCP_DEFAULT_PLACEHOLDER_LINGER_MS 10u           /* --placeholder-linger */
#define MCP_DEFAULT_MAX_QUEUE_BYTES ((size_t)256 << 20) /* request bytes of waiting calls */

/* ---- framing (jsonrpc.c, pure) -------------------------------------------------------- */

/* Newline-delimited messages with a size cap. A line's length is its bytes before the "\n",
 * less a "\r" just before it (the terminator may be "\r\n"; the "\r" is stripped). A line
 * longer than max is dropped up to its newline and reported once as JR_FRAME_TOOLONG with that
 * length. Empty lines are skipped. */
enum jr_frame_kind { JR_FRAME_LINE, JR_FRAME_TOOLONG };
typedef void (*jr_frame_cb)(void *ud, enum jr_frame_kind kind, const char *line, size_t len);

struct jr_framer {
	char *buf; /* the partial line so far */
	size_t len, cap;
	size_t max;
	bool discarding;  /* inside an over-long line */
	uint64_t dropped; /* its length so far */
	bool cr;          /* the line so far ends with "\r" (maybe the terminator's) */
};

void jr_framer_init(struct jr_framer *f, size_t max);
/* Split buf into lines and call cb for each complete one (the line is borrowed for the call).
 * Returns 0, or -1 when out of memory (the partial line is then dropped as too long). */
int jr_framer_feed(struct jr_framer *f, const char *buf, size_t n, jr_frame_cb cb, void *ud);
/* End of input: a final line without a newline still counts as a message. */
void jr_framer_eof(struct jr_framer *f, jr_frame_cb cb, void *ud);
void jr_framer_free(struct jr_framer *f);

/* ---- envelope (jsonrpc.c, pure) ------------------------------------------------------- */

enum jr_kind { JR_REQUEST, JR_NOTIFICATION, JR_RESPONSE, JR_INVALID };

struct jr_msg {
	enum jr_kind kind;
	json_t *root;       /* owned */
	json_t *id;         /* borrowed from root: a string or an integer, or NULL */
	const char *method; /* borrowed from root */
	json_t *params;     /* borrowed from root: an object or an array, or NULL */
	int err_code;       /* JR_INVALID: the error to answer with (id: id or null) */
	char err_msg[300];
};

/* Parse and validate one line. Never fails to fill m; free with jr_msg_free. */
enum jr_kind jr_parse(const char *line, size_t len, struct jr_msg *m);
void jr_msg_free(struct jr_msg *m);

/* True when id is an acceptable request id: a string or an integer. */
bool jr_id_valid(const json_t *id);

/* ---- builders (jsonrpc.c, pure): complete lines ending in "\n", malloc'ed --------------- */

char *jr_result_line(const json_t *id, json_t *result /* stolen */);
char *jr_error_line(const json_t *id /* NULL: null */, int code, const char *message);
char *jr_notification_line(const char *method, json_t *params /* stolen */);

/* ---- dispatch (jsonrpc.c, pure) ------------------------------------------------------- */

/* What a method handler answers. Exactly one of: result set, code set, or deferred. */
struct jr_reply {
	json_t *result; /* owned by the reply until sent */
	int code;
	char message[512];
	bool deferred; /* the handler answers later (a tool call) */
};

typedef void (*jr_handler)(void *ctx, const struct jr_msg *m, struct jr_reply *r);

enum {
	JR_M_BEFORE_INIT = 1, /* allowed before initialize (initialize, ping) */
	JR_M_NOTIFICATION = 2 /* a notification handler (no reply) */
};

struct jr_method {
	const char *name;
	jr_handler fn;
	unsigned flags;
};

/* Route a parsed message: invalid messages, unknown methods, requests before initialize
 * and handler errors become error lines; notifications and client responses produce none.
 * Returns the line to send (malloc'ed) or NULL. */
char *jr_dispatch(const struct jr_method *table, size_t n, void *ctx, bool initialized,
                  const struct jr_msg *m);

/* Fill r with an error; returns nothing, for "return jr_fail(r, ...)" in handlers. */
void jr_fail(struct jr_reply *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The JSON type of v for messages ("string", "integer", "null", ...). */
const char *jr_type_name(const json_t *v);

/* ---- MCP versions (jsonrpc.c, pure) --------------------------------------------------- */

#define MCP_LATEST_VERSION "2025-11-25"
/* The version to answer with: the client's when supported, else the latest. Static. */
const char *mcp_negotiate_version(const char *requested);
/* Versions are dates, so string order is time order. */
static inline bool mcp_version_at_least(const char *v, const char *min)
{
	return v && strcmp(v, min) >= 0;
}

/* Copy n bytes into a NUL-terminated string, replacing invalid UTF-8 and NUL by U+FFFD and
 * dropping an incomplete sequence at the end (where a cut was made). malloc'ed. */
char *mcp_utf8_clean(const char *s, size_t n);

/* ---- server options (filled by src/cli/mcp.c) ----------------------------------------- */

struct mcp_options {
	/* The server's policy, built once at start: the profile first, then the flags (the
	 * precedence of `corral run`). Every call runs a corral_config_dup() of it, narrowed by
	 * the call's arguments. Owned. */
	corral_config *base;
	char *workspace; /* absolute path (also in base) */
	/* Snapshots of base, for descriptions and checks. */
	uint64_t timeout_ms; /* per call, 0 = none; calls may only lower it */
	uint64_t kill_after_ms;
	enum corral_mode mode;
	enum corral_net net;
	char **allow_env; /* fnmatch patterns of names a call may set (besides base's env
	                     allow globs); deny globs still win */
	size_t n_allow_env;
	unsigned max_concurrent;  /* run calls (run_command, run_code, run_pipeline) at once */
	unsigned prebuild;        /* parked sandboxes kept built ahead (0: none) */
	bool no_mount_template;   /* --mount-template off: every sandbox builds its whole tree */
	unsigned placeholder_linger_ms; /* a call's placeholders stay this long after it */
	size_t max_queue;         /* waiting calls beyond that */
	size_t max_queue_bytes;   /* request bytes of the waiting calls, together (0: no limit) */
	size_t max_message;       /* bytes per incoming message */
	bool audit_off;           /* --audit off */
	char *audit_path;         /* --audit PATH, or NULL for the default store */
	bool audit_output;        /* --audit-output */
	bool audit_retention_set; /* --audit-max-age or --audit-max-rows given */
	int64_t audit_max_age_ms, audit_max_rows; /* the store's retention (0: no limit) */
	unsigned max_sessions;    /* shell sessions open at once */
	uint64_t session_idle_ms; /* a session idle this long is closed (0: never) */
	unsigned max_jobs;        /* background jobs running at once */
	uint64_t job_timeout_ms;  /* a job's longest life (0: none) */
	size_t max_finished_jobs; /* finished jobs kept for job_output */
};

void mcp_options_free(struct mcp_options *o);

/* Run the server on in_fd/out_fd until EOF, SIGTERM, SIGINT or SIGHUP. Returns the process
 * exit status (0 on an orderly shutdown). */
int mcp_serve(const struct mcp_options *o, int in_fd, int out_fd);

/* ---- tools (tools.c) ------------------------------------------------------------------ */

/* Probe the host once for run_code's interpreters. */
void mcp_tools_init(const struct mcp_options *o);

/* tools/list result for the negotiated version (new reference). */
json_t *mcp_tools_list(const struct mcp_options *o, const char *version);

enum mcp_tool_id {
	TOOL_RUN_COMMAND,
	TOOL_RUN_CODE,
	TOOL_CAN_I,
	/* the stateful tools (server.c keeps the sessions and jobs); keep these last */
	TOOL_SHELL_EXEC,
	TOOL_SHELL_CLOSE,
	TOOL_SHELL_LIST,
	TOOL_JOB_START,
	TOOL_JOB_OUTPUT,
	TOOL_JOB_KILL,
	TOOL_JOB_LIST,
	TOOL_RUN_PIPELINE,
};

/* A call ready to run: its configuration and what the text result needs. */
struct mcp_plan {
	enum mcp_tool_id tool; /* MCP_PREP_STATEFUL: which one */
	json_t *args;          /* MCP_PREP_STATEFUL: the validated arguments (owned) */
	corral_config *cfg;    /* owned: a copy of the server's base, narrowed by the call */
	char *display;         /* "$ ..." headline */
	char **argv;           /* the command as configured, for a result when spawn fails */
	char *command;         /* the shell string, or NULL */
	uint64_t timeout_ms;   /* effective timeout, for "timed out after" */
	json_t *answer;        /* MCP_PREP_ANSWERED: the CallToolResult (owned) */
	json_t *queries;       /* MCP_PREP_ANSWERED by can_i: the policy answers, an array of
	                          {op, target, allowed, rule, reason} for the audit (owned) */
	char *code_file;       /* run_code in mode none: the server's file of the code, in ... */
	char *code_dir;        /* ... a private directory of its own; both removed with the
	                          plan, or when the call responds (owned) */
};
void mcp_plan_free(struct mcp_plan *p);
/* Remove run_code's code file and its directory (mode none), if any. */
void mcp_plan_remove_code(struct mcp_plan *p);

enum mcp_prepare {
	MCP_PREP_OK = 0,       /* plan->cfg is ready to run */
	MCP_PREP_UNKNOWN_TOOL, /* why filled */
	MCP_PREP_BAD_ARGS,     /* why filled */
	MCP_PREP_ANSWERED,     /* nothing to run: plan->answer is the result (can_i) */
	MCP_PREP_STATEFUL,     /* a session, job or pipeline tool: plan->tool, plan->args
	                          (and plan->cfg for what starts a sandbox) */
};
/* Validate a tools/call into a plan. UNKNOWN_TOOL and BAD_ARGS fill why (one line that names
 * the argument and says what is expected). args may be NULL. version shapes an immediate
 * answer. */
enum mcp_prepare mcp_tool_prepare(const struct mcp_options *o, const char *name, const json_t *args,
                                  const char *version, struct mcp_plan *plan, char *why,
                                  size_t whylen);

/* The CallToolResult of a finished run (new reference). */
json_t *mcp_tool_result(const struct mcp_plan *plan, const struct corral_result *res,
                        const char *version);
/* The same with res's JSON made already (result_json(res, true), stolen; NULL: made here). */
json_t *mcp_tool_result_of(const struct mcp_plan *plan, const struct corral_result *res,
                           json_t *structured, const char *version);
/* A CallToolResult carrying a JSON object (text + structuredContent). Steals structured. */
json_t *mcp_tool_json(json_t *structured, bool is_error, const char *version);
/* The CallToolResult of a call that could not run: isError with the message. */
json_t *mcp_tool_error(const char *message);
/* A run that could not be started (corral_spawn failed), described in the result schema:
 * fills *res from err (res borrows the plan's argv and command; do not free it). */
void mcp_spawn_failed_result(const struct mcp_plan *plan, const struct mcp_options *o,
                             const struct corral_error *err, struct corral_result *res);

/* Names of the tools offered, comma separated (for error messages). */
const char *mcp_tool_names(void);

#endif
