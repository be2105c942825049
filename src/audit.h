/* The audit store: a local SQLite database of every execution and security event, chained
 * by SHA-256 so that an edited or deleted row is detected (docs/audit.md). Internal API.
 *
 * Writes must never fail a run: every function returns an error that callers report as a
 * warning. The store is opened with a short busy timeout (200 ms), so a locked or read-only
 * store costs a run at most that long, and every message names the store's path and the fix
 * in the flags of the command at hand: for a writer "--audit PATH" for another store and
 * "--audit off" for none, for a reader (audit_open_existing: `corral audit`) "--db PATH".
 * Every message starts with "audit store PATH" or "audit:", so callers print it as it is.
 *
 * The library rule holds: nothing here prints or exits. */
#ifndef CORRAL_AUDIT_H
#define CORRAL_AUDIT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "corral.h"

struct audit;

/* Defaults of the retention policy (applied by audit_record_* every 100th row; see
 * audit_set_retention). */
#define AUDIT_DEFAULT_MAX_AGE_MS (30LL * 86400 * 1000)
#define AUDIT_DEFAULT_MAX_ROWS 100000LL
#define AUDIT_BUSY_TIMEOUT_MS 200

/* The default store path: $XDG_STATE_HOME/corral/audit.db, else
 * $HOME/.local/state/corral/audit.db. *out is malloc'ed. reader: the caller is a reader
 * (`corral audit`), whose flag for another store is --db, not a writer's --audit. */
int audit_default_path(char **out, bool reader, struct corral_error *err);

/* For a long-running process that forks sandboxes while it writes the store (the MCP
 * server): SQLite's page cache goes into memory of its own that fork children do not
 * inherit (MADV_DONTFORK), so that the record written while a sandbox's init (a copy of this
 * process) is alive does not copy-on-write fault on every cache page it touches. Process-wide
 * (sqlite3_config): call it before any other SQLite use, and only in a process whose fork
 * children never use SQLite without exec. Returns whether it was applied; when not (SQLite
 * already initialized, no memory), SQLite keeps its own allocator, which works the same. */
bool audit_use_nofork_pagecache(void);

/* Open (creating when missing: directories 0700, the database 0600) the store at path, or at
 * the default path when path is NULL; set up WAL mode and the schema. Borrows path. */
int audit_open(const char *path, struct audit **out, struct corral_error *err);
/* The same for readers (the `corral audit` queries): fails with CORRAL_ENOTFOUND when the
 * store does not exist instead of creating it; its messages name --db PATH, not --audit. */
int audit_open_existing(const char *path, struct audit **out, struct corral_error *err);
void audit_close(struct audit *a);
/* The store's path (owned by the handle). */
const char *audit_path(const struct audit *a);
/* Set the retention of the opportunistic prune (0 = no limit of that kind). Writers prune
 * after every K-th row, K = max_rows / 10 clamped to 1..100 (100 without a row limit), so the
 * store never holds more than 10% (at most 100 rows) beyond max_rows; a handle given a
 * retention here also prunes after its first write, so that a one-shot writer (`corral run
 * --audit-max-age 7d`) applies it at once. */
void audit_set_retention(struct audit *a, int64_t max_age_ms, int64_t max_rows);

/* Upkeep on the writer's idle time (a long-lived writer: the MCP server). A write commits
 * its record and leaves the retention prune and the WAL checkpoint (several milliseconds:
 * the checkpoint syncs the WAL and the database) to audit_upkeep(), which the writer calls
 * when nothing waits on it. Bounded: a prune still due at the next retention boundary, and
 * a WAL near its size limit (448 frames, 1.8 MiB), are done by the write itself. */
void audit_defer_upkeep(struct audit *a);
bool audit_upkeep_due(const struct audit *a);
void audit_upkeep(struct audit *a);

/* The execution kinds (NULL-terminated) and whether k is one of them. */
extern const char *const audit_kinds[];
bool audit_valid_kind(const char *k);

/* What one execution was. Everything is borrowed for the call. */
struct audit_run {
	const struct corral_result *res; /* may be NULL for an execution without a result (an
	                                    MCP call that ran nothing); then id/command say what */
	const char *id;      /* the row id; NULL: res->id (or a fresh UUID without res) */
	const char *command; /* a description when res is NULL (e.g. the MCP tool name) */
	const char *parent;  /* the id of the enclosing execution (session, pipeline, MCP
	                        call), or NULL */
	const char *kind;    /* "run", "session_cmd", "job", "pipeline_stage", "mcp_call" */
	const char *client;  /* "cli" or "mcp" */
	const char *client_info_json;            /* JSON (e.g. MCP clientInfo), or NULL */
	const char *cwd, *profile, *policy_hash; /* or NULL */
	int64_t started_at_ms;                   /* unix ms; 0: now - duration */
	bool store_output;           /* keep stdout/stderr (as the result carries them, after
	                                redaction); off by default */
	bool cancelled;              /* the run was cancelled (Ctrl-C, MCP cancel): an event */
	const char *violations_json; /* a JSON array, or NULL for [] */
	uint64_t redactions;
	unsigned unknown; /* AUDIT_UNKNOWN_* bits: columns recorded as null because this
	                     execution does not know them (a background job, say) */
	json_t *doc;      /* res's JSON with its output (result_json(res, true)) when the caller
	                     has made it already, for a reply: read, not made again; or NULL */
};
#define AUDIT_UNKNOWN_USAGE 1u        /* user_ms, sys_ms, max_rss_kb */
#define AUDIT_UNKNOWN_OUTPUT_BYTES 2u /* stdout_bytes, stderr_bytes */
#define AUDIT_UNKNOWN_ISOLATION 4u    /* isolation */
#define AUDIT_UNKNOWN_VIOLATIONS 8u   /* violations */
#define AUDIT_UNKNOWN_REDACTIONS 16u  /* redactions */

/* Record one execution and the security events it implies, in one transaction: a setup
 * failure ("preflight_denied" for a policy denial, else "setup_failed"), "timeout",
 * "oom_kill" (memory limit), "limit_kill" (other limits), "cancelled", and "violation" when
 * violations_json is a non-empty array. */
int audit_record_run(struct audit *a, const struct audit_run *r, struct corral_error *err);

/* Record one security event (e.g. a preflight denial that produced no execution). kind is
 * [a-z_]+; execution_id and detail_json (a JSON value) may be NULL. */
int audit_record_event(struct audit *a, const char *kind, const char *execution_id,
                       const char *detail_json, struct corral_error *err);

/* Records the caller lost without trying to write them (it paused writes to a failing
 * store): counted into the next store_unavailable event, with why. */
void audit_note_missed(struct audit *a, uint64_t n, const char *why);
/* Records that could not be written since the last successful write (0: none). */
uint64_t audit_missed(const struct audit *a);
/* Write the store_unavailable event for the records missed so far, now, on its own (a writer
 * that is about to close: otherwise the gap is recorded only by the next write). Returns 1
 * when it was written, 0 when nothing was missed, <0 when the store still fails. */
int audit_flush_gap(struct audit *a, struct corral_error *err);

/* A pipeline as one execution, the parent row of its stages: command is its display form
 * ("A | B"), the status its pipefail status (exit_code), the timeout the pipeline's, usage and
 * redactions summed over the stages, stdout_bytes the last stage's, no isolation of its own;
 * the error when nothing started. The id is the pipeline's. NULL on out-of-memory. */
struct corral_result *audit_pipeline_summary(const struct corral_pipeline_result *pr,
                                             const char *command);

/* Delete the oldest rows: those older than max_age_ms and those beyond the newest max_rows
 * (0 = no limit of that kind). The rows to delete are verified first and their last hash
 * kept as the chain's anchor, so the rest still verifies; a tampered prefix is not pruned
 * (the evidence stays). Returns the number of rows deleted. */
int audit_prune(struct audit *a, int64_t max_age_ms, int64_t max_rows, struct corral_error *err);

/* Recompute the chain from the anchor to the head. Returns 0 when intact, 1 when not, <0 on
 * error. *report_json (malloc'ed) is {"ok":true,"rows":N,"head_seq":..,"head_hash":..} or
 * {"ok":false,...,"first_bad":{"seq","table","id","reason"}}; a table of the store that is
 * missing (dropped) is a finding of its own: first_bad {"table","reason"}, no seq. */
int audit_verify(struct audit *a, char **report_json, struct corral_error *err);

/* ---- queries ---------------------------------------------------------------------------- */

struct audit_filter {
	int64_t since_ms; /* only executions started at or after this unix ms time (0: all) */
	bool failed_only; /* non-zero exit, signal, timeout, limit or setup error */
	const char *kind; /* only this execution kind, or NULL */
	int64_t limit;    /* at most this many rows, newest first (0: all) */
};

/* Executions, newest first, without their output: a JSON array (new reference). */
int audit_list(struct audit *a, const struct audit_filter *f, json_t **out,
               struct corral_error *err);
/* One execution by id or unique id prefix, with its output (when stored), its events and
 * the ids of its children. CORRAL_ENOTFOUND when none matches, CORRAL_EINVAL when the prefix
 * is ambiguous. */
int audit_show(struct audit *a, const char *id_prefix, json_t **out, struct corral_error *err);
/* Every row of both tables in chain order, as one compact JSON object per call of line
 * (with "type": "execution" or "event", and the hashes); line borrows the string. Stops and
 * returns line's value when it returns non-zero. */
typedef int (*audit_line_fn)(void *ud, const char *json_line);
int audit_export(struct audit *a, audit_line_fn line, void *ud, struct corral_error *err);
/* {"executions","failed","failure_rate","timeouts","timeout_rate","duration_ms":{"p50",
 * "p95","max"},"by_kind":{...},"events":{kind: count}} over the filter (limit ignored). */
int audit_stats(struct audit *a, const struct audit_filter *f, json_t **out,
                struct corral_error *err);

#endif
