/* The audit store (docs/audit.md): executions and security events in SQLite, chained by
 * SHA-256 across both tables in one global sequence, with retention that keeps the chain
 * verifiable.
 *
 * Why these choices:
 * - WAL mode, synchronous=NORMAL and a 200 ms busy timeout: writers do not block readers, a
 *   commit costs no fsync, and a store held locked by someone else costs a run at most the
 *   timeout, never a hang. A lost write is reported as a warning by the callers.
 * - The chain's head (last seq and hash) lives in a one-row table written in the same
 *   transaction as the row, so deleting the newest rows is detected too; BEGIN IMMEDIATE
 *   takes the write lock before the head is read, so concurrent writers serialize cleanly.
 * - Pruning moves the chain's anchor to the hash of the last deleted row, after verifying the
 *   rows it deletes (a tampered prefix is kept as evidence rather than pruned away).
 * - No FOREIGN KEY constraints: a parent (pipeline, session, MCP call) is recorded after its
 *   children, and retention cuts by age across both tables; a cascade would edit or delete
 *   chained rows. References are soft; `show` resolves them. */
#include "audit.h"
#include "internal.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <nettle/sha2.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#define SCHEMA_VERSION 1
#define STRINGIFY_(x) #x
#define stringify(x) STRINGIFY_(x)
#define GENESIS_HASH "0000000000000000000000000000000000000000000000000000000000000000"
/* The fix that points at another store, in the flags of the command at hand: a writer's
 * (corral run, corral mcp, ...) --audit, a reader's (corral audit) --db. */
#define FIX_OTHER_STORE "or record elsewhere with --audit PATH, or not at all with --audit off"
#define FIX_OTHER_STORE_READER "or name another store with --db PATH"

/* Public entry points accept err == NULL; below them err always points to a record. */
#define ERR_OR_LOCAL(err)                                                                          \
	struct corral_error err##_local_ = {0};                                                    \
	err = err ? err : &err##_local_

#define AUDIT_STMT_CACHE 8

struct chain_state {
	int64_t head_seq, anchor_seq;
	char head_hash[65], anchor_hash[65];
};

struct audit {
	sqlite3 *db;
	char *path;
	int64_t max_age_ms, max_rows;
	bool retention_set; /* audit_set_retention was called: prune after the first write too */
	bool pruned;        /* this handle has pruned */
	bool wal_full;      /* a commit left AUDIT_WAL_FRAMES or more in the WAL: checkpoint */
	int wal_frames;     /* frames the last commit left in the WAL */
	bool defer;         /* upkeep (prune, checkpoint) waits for audit_upkeep(), within bounds */
	bool prune_due;     /* deferred: a retention boundary was crossed */
	uint64_t missed;    /* writes that failed (or were skipped) since the last success */
	char missed_error[sizeof(((struct corral_error *)0)->message)];
	/* in a write transaction: the chain's head, read once under its lock (head_known) and
	 * moved by each row appended */
	struct chain_state head;
	bool head_known;
	const char *missing; /* a table of the schema that is not there (dropped), or NULL */
	bool reader;         /* opened by audit_open_existing: messages name --db, not --audit */
	/* the write path's statements, prepared once per handle (a server writes one record
	 * per call: preparing five statements each time was a fifth of the record's cost) */
	struct {
		char *sql;
		sqlite3_stmt *st;
	} cache[AUDIT_STMT_CACHE];
};

/* Columns in hash order; the last one (prev_hash) is followed by row_hash, which is not
 * hashed. seq is first, so every table's column 0 is its place in the chain. */
static const char *const exec_cols[] = {
    "seq",         "id",         "parent",     "kind",         "client",       "client_info",
    "started_at",  "ended_at",   "argv",       "command",      "cwd",          "profile",
    "policy_hash", "exit_code",  "signal",     "timed_out",    "limit_hit",    "duration_ms",
    "user_ms",     "sys_ms",     "max_rss_kb", "stdout_bytes", "stderr_bytes", "isolation",
    "violations",  "redactions", "stdout",     "stderr",       "error",        "prev_hash",
};
static const char *const event_cols[] = {"seq",  "id",     "execution_id", "at",
                                         "kind", "detail", "prev_hash"};
#define N_EXEC ARRAY_SIZE(exec_cols)
#define N_EVENT ARRAY_SIZE(event_cols)

static const struct table {
	const char *name;
	const char *const *cols;
	size_t n;
} T_EXEC = {"executions", exec_cols, N_EXEC}, T_EVENT = {"events", event_cols, N_EVENT};

/* A typed column value, as bound on insert and as read back on verify. */
struct val {
	char t; /* 'n' null, 'i' integer, 's' text, 'r' real (as text), 'b' blob */
	int64_t i;
	const char *s;
	size_t n;
};

static struct val v_null(void)
{
	return (struct val){.t = 'n'};
}
static struct val v_int(int64_t i)
{
	return (struct val){.t = 'i', .i = i};
}
static struct val v_str(const char *s)
{
	return s ? (struct val){.t = 's', .s = s, .n = strlen(s)} : v_null();
}
static struct val v_u64(uint64_t u)
{
	return v_int(u > INT64_MAX ? INT64_MAX : (int64_t)u);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the canonical serialization (docs/audit.md, "Tamper evidence") ------------------- */

static void hash_vals(const struct table *t, const struct val *v, char hex[65])
{
	struct sha256_ctx ctx;
	char buf[48];
	sha256_init(&ctx);
	int n = snprintf(buf, sizeof(buf), "corral-audit-1\n%s\n", t->name);
	sha256_update(&ctx, (size_t)n, (const uint8_t *)buf);
	for (size_t k = 0; k < t->n; k++) {
		switch (v[k].t) {
		case 'i':
			n = snprintf(buf, sizeof(buf), "i%" PRId64 ";", v[k].i);
			sha256_update(&ctx, (size_t)n, (const uint8_t *)buf);
			break;
		case 's':
		case 'b':
		case 'r':
			n = snprintf(buf, sizeof(buf), "%c%zu:", v[k].t, v[k].n);
			sha256_update(&ctx, (size_t)n, (const uint8_t *)buf);
			sha256_update(&ctx, v[k].n, (const uint8_t *)v[k].s);
			break;
		default:
			sha256_update(&ctx, 2, (const uint8_t *)"n;");
		}
	}
	uint8_t d[SHA256_DIGEST_SIZE];
	sha256_digest(&ctx, sizeof(d), d);
	for (size_t k = 0; k < sizeof(d); k++)
		snprintf(hex + 2 * k, 3, "%02x", d[k]);
}

static struct val column_val(sqlite3_stmt *st, int col)
{
	struct val v = {.t = 'n'};
	switch (sqlite3_column_type(st, col)) {
	case SQLITE_INTEGER:
		v = v_int(sqlite3_column_int64(st, col));
		break;
	case SQLITE_FLOAT:
	case SQLITE_TEXT:
		v.t = sqlite3_column_type(st, col) == SQLITE_TEXT ? 's' : 'r';
		v.s = (const char *)sqlite3_column_text(st, col);
		v.n = (size_t)sqlite3_column_bytes(st, col);
		break;
	case SQLITE_BLOB:
		v.t = 'b';
		v.s = sqlite3_column_blob(st, col);
		v.n = (size_t)sqlite3_column_bytes(st, col);
		if (!v.s)
			v.s = "";
		break;
	}
	return v;
}

/* ---- errors --------------------------------------------------------------------------- */

static const char *fix_other_store(const struct audit *a)
{
	return a->reader ? FIX_OTHER_STORE_READER : FIX_OTHER_STORE;
}

/* Fill err for a failed SQLite call on the store: what, on which path, why, and the fix. */
static int store_error(const struct audit *a, int rc, const char *what, struct corral_error *err)
{
	sqlite3 *db = a->db;
	int prim = rc & 0xff;
	int sys = db ? sqlite3_system_errno(db) : 0;
	const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
	char why[160] = "";
	if (sys && prim != SQLITE_BUSY && prim != SQLITE_LOCKED)
		snprintf(why, sizeof(why), " (%s)", strerror(sys));
	const char *fix;
	int code = CORRAL_ESYS;
	if (prim == SQLITE_READONLY) /* even a read of a WAL store needs to write its -shm */
		what = "write to it";
	switch (prim) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		code = CORRAL_EAGAIN;
		fix = "another process holds it locked (waited " stringify(
		    AUDIT_BUSY_TIMEOUT_MS) " ms); retry";
		break;
	case SQLITE_NOMEM:
		code = CORRAL_ENOMEM;
		fix = "free memory";
		break;
	case SQLITE_FULL:
		fix = "free disk space or prune it ('corral audit prune')";
		break;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		fix = "it is damaged or not a corral audit store; move it aside";
		break;
	default:
		fix = prim == SQLITE_ERROR && !strncmp(msg, "no such table", 13)
		          ? "a table was dropped outside corral: the store is damaged ('corral "
		            "audit verify' reports it); move it aside"
		          : "make the file and its directory writable by this user";
	}
	return corral_set_error(err, code, sys, "audit", "audit store %s: cannot %s: %s%s; %s, %s",
	                        a->path, what, msg, why, fix, fix_other_store(a));
}

static int nomem(struct corral_error *err)
{
	return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "audit", "audit: out of memory");
}

/* ---- small SQL helpers ---------------------------------------------------------------- */

static int exec_sql(struct audit *a, const char *sql, const char *what, struct corral_error *err)
{
	int rc = sqlite3_exec(a->db, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : store_error(a, rc, what, err);
}

static int prepare(struct audit *a, const char *sql, sqlite3_stmt **st, struct corral_error *err)
{
	int rc = sqlite3_prepare_v2(a->db, sql, -1, st, NULL);
	return rc == SQLITE_OK ? 0 : store_error(a, rc, "read", err);
}

/* A statement of the write path, from the handle's cache (prepared on first use, with
 * SQLITE_PREPARE_PERSISTENT). Give it back with done(): reset, bindings cleared, never
 * finalized (audit_close does that). A full cache prepares a statement of its own, which
 * done() then finalizes. */
static int cached(struct audit *a, const char *sql, const char *what, sqlite3_stmt **st,
                  struct corral_error *err)
{
	size_t i = 0;
	for (; i < AUDIT_STMT_CACHE && a->cache[i].sql; i++)
		if (!strcmp(a->cache[i].sql, sql)) {
			*st = a->cache[i].st;
			return 0;
		}
	int rc = sqlite3_prepare_v3(a->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
	if (rc != SQLITE_OK)
		return store_error(a, rc, what, err);
	if (i < AUDIT_STMT_CACHE && (a->cache[i].sql = strdup(sql)))
		a->cache[i].st = *st;
	return 0;
}

static void done(struct audit *a, sqlite3_stmt *st)
{
	for (size_t i = 0; i < AUDIT_STMT_CACHE && a->cache[i].sql; i++)
		if (a->cache[i].st == st) {
			sqlite3_reset(st);
			sqlite3_clear_bindings(st);
			return;
		}
	sqlite3_finalize(st);
}

static void bind_val(sqlite3_stmt *st, int i, const struct val *v)
{
	switch (v->t) {
	case 'i':
		sqlite3_bind_int64(st, i, v->i);
		break;
	case 's':
		sqlite3_bind_text(st, i, v->s, (int)v->n, SQLITE_STATIC);
		break;
	default:
		sqlite3_bind_null(st, i);
	}
}

/* One integer from a query with integer parameters (NULL result: dflt). */
static int query_i64(struct audit *a, const char *sql, int64_t p1, int64_t dflt, int64_t *out,
                     struct corral_error *err)
{
	sqlite3_stmt *st;
	if (prepare(a, sql, &st, err) < 0)
		return err->code;
	if (sqlite3_bind_parameter_count(st) >= 1)
		sqlite3_bind_int64(st, 1, p1);
	int rc = sqlite3_step(st);
	*out = dflt;
	if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
		*out = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return store_error(a, rc, "read", err);
	return 0;
}

/* ---- opening -------------------------------------------------------------------------- */

int audit_default_path(char **out, bool reader, struct corral_error *err)
{
	ERR_OR_LOCAL(err);
	const char *state = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	int n;
	/* The XDG spec says relative values are invalid and must be ignored. */
	if (state && state[0] == '/')
		n = asprintf(out, "%s/corral/audit.db", state);
	else if (home && home[0] == '/')
		n = asprintf(out, "%s/.local/state/corral/audit.db", home);
	else
		return corral_set_error(
		    err, CORRAL_EINVAL, 0, "audit",
		    "audit: no default store: neither XDG_STATE_HOME nor HOME is "
		    "an absolute path; set one, %s",
		    reader ? "or give the store with --db PATH"
		           : "or give the store with --audit PATH (or record nothing with "
		             "--audit off)");
	if (n < 0) {
		*out = NULL;
		return nomem(err);
	}
	return 0;
}

/* mkdir -p of path's parent directory, new directories 0700 (the store may hold output). */
static int make_parents(const char *path, struct corral_error *err)
{
	autofree char *dir = strdup(path);
	if (!dir)
		return nomem(err);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	for (char *p = dir + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
			int e = errno;
			return corral_set_error(
			    err, CORRAL_ESYS, e, "audit",
			    "audit store %s: cannot create directory %s: %s; create "
			    "it writable by this user, " FIX_OTHER_STORE,
			    path, dir, strerror(e));
		}
		*p = c;
		if (!c)
			break;
	}
	struct stat st;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return corral_set_error(err, CORRAL_ESYS, errno ? errno : ENOTDIR, "audit",
		                        "audit store %s: %s is not a directory; remove what is "
		                        "there, " FIX_OTHER_STORE,
		                        path, dir);
	return 0;
}

/* Before anything is written (even the journal mode): is this a store we may use? */
static int check_store(struct audit *a, int64_t *version, struct corral_error *err)
{
	int64_t v = 0;
	if (query_i64(a, "PRAGMA user_version", 0, 0, &v, err) < 0)
		return err->code;
	*version = v;
	if (v == SCHEMA_VERSION) {
		/* a table dropped outside corral: the store is damaged (audit_verify says so).
		 * One query, at every open (a one-shot run's among them): which is missing. */
		static const char *const tables[] = {"executions", "events", "chain"};
		int64_t gone = 0;
		if (query_i64(
		        a,
		        "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM sqlite_master WHERE type = "
		        "'table' AND name = 'executions') THEN 1 WHEN NOT EXISTS (SELECT 1 FROM "
		        "sqlite_master WHERE type = 'table' AND name = 'events') THEN 2 WHEN NOT "
		        "EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = "
		        "'chain') THEN 3 ELSE 0 END",
		        0, 0, &gone, err) < 0)
			return err->code;
		if (gone >= 1 && gone <= 3)
			a->missing = tables[gone - 1];
		return 0;
	}
	if (v > SCHEMA_VERSION)
		return corral_set_error(
		    err, CORRAL_EINVAL, 0, "audit",
		    "audit store %s has schema version %" PRId64
		    ", newer than this corral supports (%d); upgrade corral, %s",
		    a->path, v, SCHEMA_VERSION, fix_other_store(a));
	/* Version 0 is a new (empty) file, or some other database: never add tables to one
	 * that holds tables of its own (--audit pointed at the wrong file). */
	int64_t foreign = 0;
	if (query_i64(a,
	              "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT IN "
	              "('executions', 'events', 'chain') AND name NOT LIKE 'sqlite_%'",
	              0, 0, &foreign, err) < 0)
		return err->code;
	if (foreign)
		return corral_set_error(err, CORRAL_EINVAL, 0, "audit",
		                        "audit store %s: the file is a database with other tables, "
		                        "not a corral audit store; %s",
		                        a->path, fix_other_store(a));
	return 0;
}

static int create_schema(struct audit *a, struct corral_error *err)
{
	static const char schema[] =
	    "CREATE TABLE IF NOT EXISTS executions ("
	    " seq INTEGER NOT NULL UNIQUE, id TEXT PRIMARY KEY, parent TEXT, kind TEXT NOT NULL,"
	    " client TEXT, client_info TEXT, started_at INTEGER, ended_at INTEGER, argv TEXT,"
	    " command TEXT, cwd TEXT, profile TEXT, policy_hash TEXT, exit_code INTEGER,"
	    " signal INTEGER, timed_out INTEGER NOT NULL DEFAULT 0, limit_hit TEXT,"
	    " duration_ms INTEGER, user_ms INTEGER, sys_ms INTEGER, max_rss_kb INTEGER,"
	    " stdout_bytes INTEGER, stderr_bytes INTEGER, isolation TEXT, violations TEXT,"
	    " redactions INTEGER, stdout TEXT, stderr TEXT, error TEXT,"
	    " prev_hash TEXT NOT NULL, row_hash TEXT NOT NULL);"
	    "CREATE INDEX IF NOT EXISTS executions_started ON executions(started_at);"
	    "CREATE INDEX IF NOT EXISTS executions_ended ON executions(ended_at);"
	    "CREATE INDEX IF NOT EXISTS executions_parent ON executions(parent);"
	    "CREATE TABLE IF NOT EXISTS events ("
	    " seq INTEGER NOT NULL UNIQUE, id TEXT PRIMARY KEY, execution_id TEXT, at INTEGER,"
	    " kind TEXT NOT NULL, detail TEXT, prev_hash TEXT NOT NULL, row_hash TEXT NOT NULL);"
	    "CREATE INDEX IF NOT EXISTS events_at ON events(at);"
	    "CREATE INDEX IF NOT EXISTS events_execution ON events(execution_id);"
	    /* the chain's head and, after pruning, its anchor */
	    "CREATE TABLE IF NOT EXISTS chain ("
	    " k INTEGER PRIMARY KEY CHECK (k = 1), head_seq INTEGER NOT NULL,"
	    " head_hash TEXT NOT NULL, anchor_seq INTEGER NOT NULL, anchor_hash TEXT NOT NULL,"
	    " pruned_rows INTEGER NOT NULL DEFAULT 0, pruned_at INTEGER);"
	    "INSERT OR IGNORE INTO chain(k, head_seq, head_hash, anchor_seq, anchor_hash)"
	    " VALUES (1, 0, '" GENESIS_HASH "', 0, '" GENESIS_HASH "');"
	    "PRAGMA user_version = " stringify(SCHEMA_VERSION) ";";
	if (exec_sql(a, "BEGIN IMMEDIATE", "create the schema", err) < 0)
		return err->code;
	/* another process may have created it meanwhile: IF NOT EXISTS makes this idempotent */
	if (exec_sql(a, schema, "create the schema", err) < 0 ||
	    exec_sql(a, "COMMIT", "create the schema", err) < 0) {
		sqlite3_exec(a->db, "ROLLBACK", NULL, NULL, NULL);
		return err->code;
	}
	return 0;
}

/* The WAL is checkpointed once a commit leaves it holding AUDIT_WAL_FRAMES frames (about
 * 1 MiB; a CLI record is 8 to 12 frames): a WAL that only grows makes every later open and
 * write read more of it. A process that opens the store while no other connection has it
 * rebuilds the WAL index by reading every frame of the WAL (SQLite resets the index when the
 * last connection closes), so the frames left behind are what the next one-shot run reads.
 *
 * The WAL is not truncated: on ext4 an ftruncate of a WAL that was just synced costs several
 * milliseconds, and the next commit pays again to allocate its blocks. Instead a RESTART
 * checkpoint copies the frames into the database (syncing the WAL, then the database, as
 * TRUNCATE does) and the write that follows at once starts the WAL over from its first
 * frame with a new salt, overwriting the old frames in place: a reader that rebuilds the
 * index stops at the first old frame. journal_size_limit trims a WAL that grew beyond
 * AUDIT_WAL_MAX_BYTES (a long reader held the checkpoint off) at that restart. */
#define AUDIT_WAL_FRAMES 256
#define AUDIT_WAL_MAX_BYTES 2097152 /* 2 MiB */
/* Deferred upkeep (audit_defer_upkeep): the write checkpoints by itself at this many frames,
 * so that a writer that is never idle keeps its WAL under AUDIT_WAL_MAX_BYTES (508 frames of
 * 4 KiB pages), with room for one more record, and nothing trims it. */
#define AUDIT_WAL_DEFER_FRAMES 448

static int wal_hook(void *ud, sqlite3 *db, const char *name, int frames)
{
	(void)db;
	(void)name;
	struct audit *a = ud;
	a->wal_frames = frames;
	if (frames >= AUDIT_WAL_FRAMES)
		a->wal_full = true;
	return SQLITE_OK;
}

/* After a commit (a checkpoint cannot run inside the hook): checkpoint a full WAL, then
 * restart it with a one-frame write (the user_version, rewritten unchanged). A checkpoint
 * that is busy (a reader still needs the WAL after the busy timeout) is retried after the
 * next commit, as the WAL is still full then. */
static void wal_checkpoint(struct audit *a)
{
	if (!a->wal_full)
		return;
	a->wal_full = false;
	if (sqlite3_wal_checkpoint_v2(a->db, "main", SQLITE_CHECKPOINT_RESTART, NULL, NULL) !=
	    SQLITE_OK)
		return;
	if (sqlite3_exec(a->db,
	                 "BEGIN IMMEDIATE; PRAGMA user_version = " stringify(SCHEMA_VERSION) ";"
	                 " COMMIT",
	                 NULL, NULL, NULL) != SQLITE_OK)
		sqlite3_exec(a->db, "ROLLBACK", NULL, NULL, NULL);
}

/* Slots for audit_use_nofork_pagecache(). SQLite links every slot into its free list when it
 * starts, so all of them are resident from the first open: 128 slots of the store's 4096-byte
 * pages are 0.55 MiB, and the server's anonymous memory after 100 calls stays where SQLite's
 * own allocator had it (1,060 against 1,120 kB; 512 slots: 2,608 kB; the faults a call were
 * the same with 32 to 512). With fewer than a tenth of the slots free the cache recycles its
 * least recently used pages rather than grow, so it stays in the pool; a page that finds no
 * slot (a store with larger pages) comes from malloc. */
#define NOFORK_CACHE_SLOTS 128
#define NOFORK_CACHE_PAGE 4096

bool audit_use_nofork_pagecache(void)
{
	static bool applied;
	if (applied)
		return true;
	int hdr = 0;
	if (sqlite3_config(SQLITE_CONFIG_PCACHE_HDRSZ, &hdr) != SQLITE_OK || hdr <= 0)
		return false;
	/* Each slot is one page plus SQLite's header, 8-aligned as SQLite wants. */
	size_t slot = (NOFORK_CACHE_PAGE + (size_t)hdr + 7) & ~(size_t)7;
	size_t len = slot * NOFORK_CACHE_SLOTS;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return false;
	if (madvise(m, len, MADV_DONTFORK) < 0 ||
	    sqlite3_config(SQLITE_CONFIG_PAGECACHE, m, (int)slot, NOFORK_CACHE_SLOTS) !=
	        SQLITE_OK) {
		munmap(m, len);
		return false;
	}
	/* SQLite keeps using the buffer until the process ends: it is never unmapped. */
	applied = true;
	return true;
}

static int open_store(const char *path, bool create, struct audit **out, struct corral_error *err)
{
	ERR_OR_LOCAL(err);
	*out = NULL;
	autofree char *dflt = NULL;
	if (!path) {
		if (audit_default_path(&dflt, !create, err) < 0)
			return err->code;
		path = dflt;
	}
	if (!*path)
		return corral_set_error(err, CORRAL_EINVAL, 0, "audit", "audit: empty store path");
	if (create) {
		if (make_parents(path, err) < 0)
			return err->code;
		/* Create the file ourselves so that it is 0600: SQLite gives the -wal and -shm
		 * files the database file's mode. */
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			int e = errno;
			return corral_set_error(err, CORRAL_ESYS, e, "audit",
			                        "audit store %s: cannot open: %s; make it and its "
			                        "directory writable by this user, " FIX_OTHER_STORE,
			                        path, strerror(e));
		}
		close(fd);
	} else if (access(path, F_OK) < 0) {
		int e = errno;
		return corral_set_error(err, e == ENOENT ? CORRAL_ENOTFOUND : CORRAL_ESYS, e,
		                        "audit", "audit store %s: %s%s", path, strerror(e),
		                        e == ENOENT ? " (nothing has been recorded there yet; give "
		                                      "the store with --db PATH)"
		                                    : "");
	}
	struct audit *a = calloc(1, sizeof(*a));
	if (!a || !(a->path = strdup(path))) {
		free(a);
		return nomem(err);
	}
	a->reader = !create;
	a->max_age_ms = AUDIT_DEFAULT_MAX_AGE_MS;
	a->max_rows = AUDIT_DEFAULT_MAX_ROWS;
	int rc = sqlite3_open_v2(path, &a->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_EXRESCODE, NULL);
	if (rc != SQLITE_OK) {
		store_error(a, rc, "open", err);
		audit_close(a);
		return err->code;
	}
	sqlite3_busy_timeout(a->db, AUDIT_BUSY_TIMEOUT_MS);
	/* The CLI opens the store once per run: a checkpoint (and its fsyncs) at every close
	 * would cost more than the sandbox. Checkpoints happen as the WAL grows instead
	 * (wal_hook below), which also keeps the WAL, and every read of it, small. */
	sqlite3_db_config(a->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	sqlite3_wal_hook(a->db, wal_hook, a);
	int64_t version = 0;
	if (check_store(a, &version, err) < 0) {
		audit_close(a);
		return err->code;
	}
	/* a damaged store is not written to (verify, a reader, names the damage) */
	if (create && a->missing) {
		corral_set_error(
		    err, CORRAL_EINVAL, 0, "audit",
		    "audit store %s: its table '%s' is missing (dropped outside "
		    "corral): the store is damaged and is not written to; 'corral audit "
		    "verify' reports it; move it aside, " FIX_OTHER_STORE,
		    path, a->missing);
		audit_close(a);
		return err->code;
	}
	sqlite3_stmt *st = NULL;
	rc = sqlite3_prepare_v2(a->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	const char *mode = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
	bool wal = mode && !strcmp(mode, "wal");
	sqlite3_finalize(st);
	if (!wal) {
		store_error(a, rc == SQLITE_ROW ? SQLITE_READONLY : rc,
		            "open it for writing (WAL mode)", err);
		audit_close(a);
		return err->code;
	}
	/* foreign_keys: no constraints are declared (see the top of this file), but a future
	 * schema may, and it should not depend on the connection's default. */
	if (exec_sql(a,
	             "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; "
	             "PRAGMA journal_size_limit = " stringify(AUDIT_WAL_MAX_BYTES),
	             "configure", err) < 0 ||
	    (version != SCHEMA_VERSION && create_schema(a, err) < 0)) {
		audit_close(a);
		return err->code;
	}
	*out = a;
	return 0;
}

int audit_open(const char *path, struct audit **out, struct corral_error *err)
{
	return open_store(path, true, out, err);
}

int audit_open_existing(const char *path, struct audit **out, struct corral_error *err)
{
	return open_store(path, false, out, err);
}

void audit_close(struct audit *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < AUDIT_STMT_CACHE && a->cache[i].sql; i++) {
		sqlite3_finalize(a->cache[i].st);
		free(a->cache[i].sql);
	}
	sqlite3_close_v2(a->db);
	free(a->path);
	free(a);
}

const char *audit_path(const struct audit *a)
{
	return a->path;
}

void audit_set_retention(struct audit *a, int64_t max_age_ms, int64_t max_rows)
{
	a->max_age_ms = max_age_ms;
	a->max_rows = max_rows;
	a->retention_set = true;
}

void audit_note_missed(struct audit *a, uint64_t n, const char *why)
{
	a->missed += n;
	if (why)
		snprintf(a->missed_error, sizeof(a->missed_error), "%s", why);
}

uint64_t audit_missed(const struct audit *a)
{
	return a->missed;
}

/* ---- writing -------------------------------------------------------------------------- */

/* The chain's head and anchor: 1 when read, 0 when the table has no row (it was deleted
 * outside corral), or an error (the store could not be read). */
static int chain_query(struct audit *a, struct chain_state *c, struct corral_error *err)
{
	sqlite3_stmt *st;
	if (cached(a, "SELECT head_seq, head_hash, anchor_seq, anchor_hash FROM chain WHERE k = 1",
	           "read", &st, err) < 0)
		return err->code;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		c->head_seq = sqlite3_column_int64(st, 0);
		snprintf(c->head_hash, sizeof(c->head_hash), "%s",
		         (const char *)sqlite3_column_text(st, 1) ?: "");
		c->anchor_seq = sqlite3_column_int64(st, 2);
		snprintf(c->anchor_hash, sizeof(c->anchor_hash), "%s",
		         (const char *)sqlite3_column_text(st, 3) ?: "");
	}
	done(a, st);
	if (rc == SQLITE_ROW || rc == SQLITE_DONE)
		return rc == SQLITE_ROW;
	return store_error(a, rc, "read the chain head", err);
}

#define HEAD_ROW_MISSING "the chain head row is missing (deleted outside corral)"

/* The chain's head and anchor, which writing and pruning need: a missing row is an error. */
static int chain_read(struct audit *a, struct chain_state *c, struct corral_error *err)
{
	int r = chain_query(a, c, err);
	if (r == 0)
		return corral_set_error(err, CORRAL_EINVAL, 0, "audit",
		                        "audit store %s: " HEAD_ROW_MISSING
		                        ": the store is damaged and is not written to; 'corral "
		                        "audit verify' reports it; move it aside, %s",
		                        a->path, fix_other_store(a));
	return r < 0 ? r : 0;
}

/* The chain's head in a write transaction: read at its first use (the transaction holds the
 * write lock, so no other writer moves it meanwhile), then kept and moved by chain_append:
 * one read per record rather than one per row and one more at the commit. */
static int head_of(struct audit *a, struct corral_error *err)
{
	if (!a->head_known && chain_read(a, &a->head, err) < 0)
		return err->code;
	a->head_known = true;
	return 0;
}

/* Append one row to the chain: v[0] (seq) and v[n-1] (prev_hash) are filled here. Must run
 * inside a BEGIN IMMEDIATE transaction. */
static int chain_append(struct audit *a, const struct table *t, struct val *v,
                        struct corral_error *err)
{
	if (head_of(a, err) < 0)
		return err->code;
	struct chain_state *c = &a->head;
	v[0] = v_int(c->head_seq + 1);
	v[t->n - 1] = v_str(c->head_hash);
	char hash[65];
	hash_vals(t, v, hash);

	char sql[1024];
	size_t o = (size_t)snprintf(sql, sizeof(sql), "INSERT INTO %s (", t->name);
	for (size_t k = 0; k < t->n; k++)
		o += (size_t)snprintf(sql + o, sizeof(sql) - o, "%s, ", t->cols[k]);
	o += (size_t)snprintf(sql + o, sizeof(sql) - o, "row_hash) VALUES (");
	for (size_t k = 0; k <= t->n; k++)
		o += (size_t)snprintf(sql + o, sizeof(sql) - o, k ? ", ?" : "?");
	snprintf(sql + o, sizeof(sql) - o, ")");

	sqlite3_stmt *st;
	if (cached(a, sql, "write", &st, err) < 0)
		return err->code;
	for (size_t k = 0; k < t->n; k++)
		bind_val(st, (int)k + 1, &v[k]);
	sqlite3_bind_text(st, (int)t->n + 1, hash, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		store_error(a, rc, "write", err);
	done(a, st);
	if (rc != SQLITE_DONE)
		return err->code;

	if (cached(a, "UPDATE chain SET head_seq = ?, head_hash = ? WHERE k = 1", "write", &st,
	           err) < 0)
		return err->code;
	sqlite3_bind_int64(st, 1, c->head_seq + 1);
	sqlite3_bind_text(st, 2, hash, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		store_error(a, rc, "write", err);
	done(a, st);
	if (rc != SQLITE_DONE)
		return err->code;
	c->head_seq++;
	memcpy(c->head_hash, hash, sizeof(c->head_hash));
	return 0;
}

static int append_event(struct audit *a, const char *kind, const char *execution_id, int64_t at,
                        const char *detail_json, struct corral_error *err)
{
	char id[37];
	result_uuid(id);
	struct val v[N_EVENT] = {v_null(),  v_str(id),   v_str(execution_id),
	                         v_int(at), v_str(kind), v_str(detail_json),
	                         v_null()};
	return chain_append(a, &T_EVENT, v, err);
}

/* A write that failed is remembered, so that the next one that succeeds records the gap as
 * a "store_unavailable" event. */
static int write_failed(struct audit *a, struct corral_error *err)
{
	sqlite3_exec(a->db, "ROLLBACK", NULL, NULL, NULL);
	a->head_known = false;
	a->missed++;
	snprintf(a->missed_error, sizeof(a->missed_error), "%s", err->message);
	return err->code ? err->code : CORRAL_ESYS;
}

static int write_begin(struct audit *a, struct corral_error *err)
{
	a->head_known = false; /* what another process wrote since is read anew */
	int rc = sqlite3_exec(a->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		store_error(a, rc, "record", err);
		a->missed++;
		snprintf(a->missed_error, sizeof(a->missed_error), "%s", err->message);
		return err->code ? err->code : CORRAL_ESYS;
	}
	if (a->missed) {
		json_t *d = json_pack("{s:I,s:s}", "missed", (json_int_t)a->missed, "error",
		                      a->missed_error);
		char *s = d ? json_dumps(d, JSON_COMPACT) : NULL;
		json_decref(d);
		int r =
		    s ? append_event(a, "store_unavailable", NULL, now_ms(), s, err) : nomem(err);
		free(s);
		if (r < 0)
			return write_failed(a, err);
	}
	return 0;
}

static void run_prune(struct audit *a)
{
	a->prune_due = false;
	audit_prune(a, a->max_age_ms, a->max_rows, NULL);
}

/* Commit; then, every 100th row, prune by the retention policy (its failure is not this
 * write's: the row is recorded, and verify reports what prune refused), and checkpoint a
 * full WAL; with the upkeep deferred, within its bounds, both wait for audit_upkeep(). */
static int write_commit(struct audit *a, int64_t seq_before, struct corral_error *err)
{
	int rc = sqlite3_exec(a->db, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		store_error(a, rc, "record", err);
		return write_failed(a, err);
	}
	a->missed = 0;
	/* the head as committed (the write lock was held until now) */
	struct chain_state c = a->head;
	bool known = a->head_known;
	a->head_known = false;
	/* every K-th row (see audit_set_retention), and once at the start when asked */
	int64_t every = a->max_rows > 0 ? a->max_rows / 10 : 100;
	every = every < 1 ? 1 : every > 100 ? 100 : every;
	struct corral_error ignored;
	if ((known || chain_read(a, &c, &ignored) == 0) &&
	    (c.head_seq / every != seq_before / every || (a->retention_set && !a->pruned))) {
		a->pruned = true;
		/* deferred: until the writer is idle, or the next boundary at the latest */
		if (a->defer && !a->prune_due)
			a->prune_due = true;
		else
			run_prune(a);
	}
	/* deferred: until the writer is idle, or until the WAL is near its size limit */
	if (!a->defer || a->wal_frames >= AUDIT_WAL_DEFER_FRAMES)
		wal_checkpoint(a);
	return 0;
}

void audit_defer_upkeep(struct audit *a)
{
	a->defer = true;
}

bool audit_upkeep_due(const struct audit *a)
{
	return a && (a->prune_due || a->wal_full);
}

void audit_upkeep(struct audit *a)
{
	if (!a)
		return;
	if (a->prune_due)
		run_prune(a);
	wal_checkpoint(a);
}

int audit_flush_gap(struct audit *a, struct corral_error *err)
{
	ERR_OR_LOCAL(err);
	if (!a->missed)
		return 0;
	/* a failure here is not one more lost record */
	uint64_t missed = a->missed;
	int rc = write_begin(a, err); /* appends the store_unavailable event */
	if (rc == 0 && head_of(a, err) < 0)
		rc = write_failed(a, err);
	if (rc == 0)
		rc = write_commit(a, a->head.head_seq - 1, err);
	if (rc < 0) {
		a->missed = missed;
		return rc;
	}
	return 1;
}

static bool valid_json(const char *s, int type)
{
	if (!s)
		return true;
	json_t *j = json_loads(s, JSON_DECODE_ANY, NULL);
	bool ok = j && (type < 0 || (int)json_typeof(j) == type);
	json_decref(j);
	return ok;
}

const char *const audit_kinds[] = {"run", "session_cmd", "job", "pipeline_stage", "mcp_call", NULL};

bool audit_valid_kind(const char *k)
{
	for (size_t i = 0; k && audit_kinds[i]; i++)
		if (!strcmp(k, audit_kinds[i]))
			return true;
	return false;
}

static bool valid_event_kind(const char *k)
{
	if (!k || !*k || strlen(k) > 64)
		return false;
	for (const char *p = k; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || *p == '_'))
			return false;
	return true;
}

/* The parts of a result as stored: taken from the result's own JSON encoding, so that the
 * store holds exactly what a client saw (valid UTF-8, the same isolation and error shape). */
struct run_text {
	json_t *doc;
	char *argv, *isolation, *error;
	const char *command, *out, *err;
	size_t out_n, err_n;
};

static void run_text_free(struct run_text *t)
{
	json_decref(t->doc);
	free(t->argv);
	free(t->isolation);
	free(t->error);
}

static int run_text_from(const struct corral_result *res, bool with_output, json_t *doc,
                         struct run_text *t, struct corral_error *err)
{
	memset(t, 0, sizeof(*t));
	/* the object itself, not its text parsed back: the same strings, without encoding and
	 * parsing a megabyte of output that is not stored; the caller's, when it has made it
	 * (with the output, which is read only when stored) */
	t->doc = doc ? json_incref(doc) : result_json(res, with_output);
	if (!t->doc)
		return nomem(err);
	json_t *e = json_object_get(t->doc, "error");
	t->argv = json_dumps(json_object_get(t->doc, "argv"), JSON_COMPACT);
	t->isolation = json_dumps(json_object_get(t->doc, "isolation"), JSON_COMPACT);
	t->error = json_is_object(e) ? json_dumps(e, JSON_COMPACT) : NULL;
	t->command = json_string_value(json_object_get(t->doc, "command"));
	json_t *o = json_object_get(t->doc, "stdout"), *r = json_object_get(t->doc, "stderr");
	t->out = json_string_value(o);
	t->out_n = json_string_length(o);
	t->err = json_string_value(r);
	t->err_n = json_string_length(r);
	if (!t->argv || !t->isolation || (json_is_object(e) && !t->error) ||
	    (with_output && (!t->out || !t->err))) {
		run_text_free(t);
		return nomem(err);
	}
	return 0;
}

/* The security events a result implies, appended after its execution row. */
static int append_run_events(struct audit *a, const struct audit_run *r, const char *id, int64_t at,
                             struct corral_error *err)
{
	const struct corral_result *res = r->res;
	char d[768];
	if (res && res->error.code) {
		json_t *j = json_pack("{s:s,s:s,s:i,s:s}", "code", corral_strerror(res->error.code),
		                      "step", res->error.step, "errno", res->error.sys_errno,
		                      "message", res->error.message);
		char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
		json_decref(j);
		int rc = s ? append_event(a,
		                          res->error.code == CORRAL_EDENIED ? "preflight_denied"
		                                                            : "setup_failed",
		                          id, at, s, err)
		           : nomem(err);
		free(s);
		if (rc < 0)
			return rc;
	}
	if (res && res->timed_out) {
		snprintf(d, sizeof(d), "{\"duration_ms\":%" PRIu64 ",\"signal\":%d}",
		         res->duration_ms, res->signal);
		if (append_event(a, "timeout", id, at, d, err) < 0)
			return err->code;
	}
	if (res && res->limit != CORRAL_HIT_NONE && res->limit != CORRAL_HIT_TIMEOUT) {
		snprintf(
		    d, sizeof(d), "{\"limit\":\"%s\",\"signal\":%d,\"max_rss_kb\":%" PRIu64 "}",
		    corral_limit_hit_name(res->limit) ?: "unknown", res->signal, res->max_rss_kb);
		if (append_event(a, res->limit == CORRAL_HIT_MEMORY ? "oom_kill" : "limit_kill", id,
		                 at, d, err) < 0)
			return err->code;
	}
	if (r->cancelled) {
		snprintf(d, sizeof(d), "{\"signal\":%d}", res ? res->signal : 0);
		if (append_event(a, "cancelled", id, at, d, err) < 0)
			return err->code;
	}
	if (r->violations_json && strcmp(r->violations_json, "[]")) {
		json_t *v = json_loads(r->violations_json, 0, NULL);
		size_t n = json_array_size(v);
		json_decref(v);
		if (n && append_event(a, "violation", id, at, r->violations_json, err) < 0)
			return err->code;
	}
	return 0;
}

static int check_run(const struct audit_run *r, struct corral_error *err)
{
	const char *bad = !audit_valid_kind(r->kind) ? "kind (expected run, session_cmd, job, "
	                                               "pipeline_stage or mcp_call)"
	                  : r->client && strcmp(r->client, "cli") && strcmp(r->client, "mcp")
	                      ? "client (expected cli or mcp)"
	                  : !valid_json(r->client_info_json, JSON_OBJECT)
	                      ? "client_info_json (expected a JSON object)"
	                  : !valid_json(r->violations_json, JSON_ARRAY)
	                      ? "violations_json (expected a JSON array)"
	                  : !r->res && !r->id ? "id (required when there is no result)"
	                                      : NULL;
	if (bad)
		return corral_set_error(err, CORRAL_EINVAL, 0, "audit", "audit: invalid %s", bad);
	return 0;
}

int audit_record_run(struct audit *a, const struct audit_run *r, struct corral_error *err)
{
	ERR_OR_LOCAL(err);
	if (check_run(r, err) < 0)
		return CORRAL_EINVAL;
	const struct corral_result *res = r->res;
	struct run_text t = {0};
	if (res && run_text_from(res, r->store_output, r->doc, &t, err) < 0)
		return err->code;
	uint64_t dur = res ? res->duration_ms : 0;
	int64_t started = r->started_at_ms, ended;
	if (started > 0) {
		ended = started + (int64_t)(dur > INT64_MAX / 2 ? 0 : dur);
	} else {
		ended = now_ms();
		started = ended - (int64_t)(dur > INT64_MAX / 2 ? 0 : dur);
	}
	const char *id = r->id ? r->id : res->id;
	unsigned u = r->unknown;
	struct val v[N_EXEC] = {
	    v_null(), /* seq */
	    v_str(id),
	    v_str(r->parent),
	    v_str(r->kind),
	    v_str(r->client ? r->client : "cli"),
	    v_str(r->client_info_json),
	    v_int(started),
	    v_int(ended),
	    v_str(res ? t.argv : "[]"),
	    v_str(res ? t.command : r->command),
	    v_str(r->cwd),
	    v_str(r->profile),
	    v_str(r->policy_hash),
	    res && res->exited ? v_int(res->exit_code) : v_null(),
	    res && res->signal ? v_int(res->signal) : v_null(),
	    v_int(res && res->timed_out),
	    v_str(res ? corral_limit_hit_name(res->limit) : NULL),
	    v_u64(dur),
	    u & AUDIT_UNKNOWN_USAGE ? v_null() : v_u64(res ? res->user_ms : 0),
	    u & AUDIT_UNKNOWN_USAGE ? v_null() : v_u64(res ? res->sys_ms : 0),
	    u & AUDIT_UNKNOWN_USAGE ? v_null() : v_u64(res ? res->max_rss_kb : 0),
	    u & AUDIT_UNKNOWN_OUTPUT_BYTES ? v_null() : v_u64(res ? res->stdout_bytes : 0),
	    u & AUDIT_UNKNOWN_OUTPUT_BYTES ? v_null() : v_u64(res ? res->stderr_bytes : 0),
	    u & AUDIT_UNKNOWN_ISOLATION ? v_null() : v_str(res ? t.isolation : "{}"),
	    u & AUDIT_UNKNOWN_VIOLATIONS ? v_null()
	                                 : v_str(r->violations_json ? r->violations_json : "[]"),
	    u & AUDIT_UNKNOWN_REDACTIONS ? v_null() : v_u64(r->redactions),
	    r->store_output && t.out ? (struct val){.t = 's', .s = t.out, .n = t.out_n} : v_null(),
	    r->store_output && t.err ? (struct val){.t = 's', .s = t.err, .n = t.err_n} : v_null(),
	    v_str(res ? t.error : NULL),
	    v_null(), /* prev_hash */
	};
	int64_t seq_before = 0;
	int rc = write_begin(a, err);
	if (rc == 0 && head_of(a, err) < 0)
		rc = write_failed(a, err);
	else if (rc == 0)
		seq_before = a->head.head_seq;
	if (rc == 0 &&
	    (chain_append(a, &T_EXEC, v, err) < 0 || append_run_events(a, r, id, ended, err) < 0))
		rc = write_failed(a, err);
	if (rc == 0)
		rc = write_commit(a, seq_before, err);
	run_text_free(&t);
	return rc;
}

int audit_record_event(struct audit *a, const char *kind, const char *execution_id,
                       const char *detail_json, struct corral_error *err)
{
	ERR_OR_LOCAL(err);
	if (!valid_event_kind(kind) || !valid_json(detail_json, -1))
		return corral_set_error(err, CORRAL_EINVAL, 0, "audit", "audit: invalid event %s",
		                        valid_event_kind(kind) ? "detail (expected JSON)"
		                                               : "kind (expected [a-z_]+)");
	int64_t seq_before = 0;
	int rc = write_begin(a, err);
	if (rc == 0 && head_of(a, err) < 0)
		rc = write_failed(a, err);
	else if (rc == 0)
		seq_before = a->head.head_seq;
	if (rc == 0 && append_event(a, kind, execution_id, now_ms(), detail_json, err) < 0)
		rc = write_failed(a, err);
	if (rc == 0)
		rc = write_commit(a, seq_before, err);
	return rc;
}

struct corral_result *audit_pipeline_summary(const struct corral_pipeline_result *pr,
                                             const char *command)
{
	struct corral_result *s = result_new();
	if (!s)
		return NULL;
	memcpy(s->id, pr->id, sizeof(s->id));
	if (!(s->command = strdup(command ? command : "pipeline"))) {
		corral_result_free(s);
		return NULL;
	}
	s->duration_ms = pr->duration_ms;
	s->timed_out = pr->timed_out;
	s->limit = pr->timed_out ? CORRAL_HIT_TIMEOUT : CORRAL_HIT_NONE;
	if (pr->n_stages == 0) {
		s->error = pr->error; /* nothing started: no stage row carries it */
	} else {
		s->exited = 1;
		s->exit_code = pr->exit_code;
	}
	for (size_t i = 0; i < pr->n_stages; i++) {
		const struct corral_result *st = pr->stages[i];
		if (!st) /* a stage without a result (defensive: the pipeline reports it so) */
			continue;
		s->stderr_bytes += st->stderr_bytes;
		s->user_ms += st->user_ms;
		s->sys_ms += st->sys_ms;
		if (st->max_rss_kb > s->max_rss_kb)
			s->max_rss_kb = st->max_rss_kb;
		s->redactions += st->redactions;
		s->mode = st->mode;
		s->redaction_mode = st->redaction_mode;
	}
	if (pr->n_stages && pr->stages[pr->n_stages - 1])
		s->stdout_bytes = pr->stages[pr->n_stages - 1]->stdout_bytes;
	return s;
}

/* ---- walking the chain ---------------------------------------------------------------- */

struct walk {
	int64_t rows;
	int64_t last_seq;
	char last_hash[65];
	json_t *bad; /* the first problem, or NULL */
};

static void walk_bad(struct walk *w, int64_t seq, const char *table, const char *id,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void walk_bad(struct walk *w, int64_t seq, const char *table, const char *id,
                     const char *fmt, ...)
{
	char reason[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	w->bad = json_pack("{s:I,s:s?,s:s?,s:s}", "seq", (json_int_t)seq, "table", table, "id", id,
	                   "reason", reason);
}

static int select_chain(struct audit *a, const struct table *t, int64_t upto, sqlite3_stmt **st,
                        struct corral_error *err)
{
	char sql[1024];
	size_t o = (size_t)snprintf(sql, sizeof(sql), "SELECT ");
	for (size_t k = 0; k < t->n; k++)
		o += (size_t)snprintf(sql + o, sizeof(sql) - o, "%s, ", t->cols[k]);
	snprintf(sql + o, sizeof(sql) - o, "row_hash FROM %s WHERE seq <= ? ORDER BY seq", t->name);
	if (prepare(a, sql, st, err) < 0)
		return err->code;
	sqlite3_bind_int64(*st, 1, upto);
	return 0;
}

/* Check one row against the chain so far. */
static void walk_row(struct walk *w, const struct table *t, sqlite3_stmt *st, int64_t anchor)
{
	struct val v[N_EXEC];
	for (size_t k = 0; k < t->n; k++)
		v[k] = column_val(st, (int)k);
	struct val stored = column_val(st, (int)t->n);
	const char *id = v[1].t == 's' ? v[1].s : NULL;
	int64_t seq = v[0].i;
	if (v[0].t != 'i') {
		walk_bad(w, w->last_seq + 1, t->name, id, "seq is not an integer");
		return;
	}
	if (seq <= anchor) {
		walk_bad(w, seq, t->name, id,
		         "row at or before the chain's anchor (seq %" PRId64
		         "): it was added after pruning, outside corral",
		         anchor);
		return;
	}
	if (seq <= w->last_seq) {
		walk_bad(w, seq, t->name, id, "seq %" PRId64 " appears twice", seq);
		return;
	}
	if (seq > w->last_seq + 1) {
		walk_bad(w, w->last_seq + 1, NULL, NULL,
		         "row(s) deleted: seq %" PRId64 " to %" PRId64
		         " are missing (the chain resumes at seq %" PRId64 ", %s id %s)",
		         w->last_seq + 1, seq - 1, seq, t->name, id ? id : "?");
		return;
	}
	const struct val *prev = &v[t->n - 1];
	if (prev->t != 's' || prev->n != 64 || memcmp(prev->s, w->last_hash, 64)) {
		walk_bad(w, seq, t->name, id,
		         "prev_hash does not match the previous row's hash: the previous "
		         "row was deleted, replaced or edited");
		return;
	}
	char hash[65];
	hash_vals(t, v, hash);
	if (stored.t != 's' || stored.n != 64 || memcmp(stored.s, hash, 64)) {
		walk_bad(w, seq, t->name, id,
		         "row_hash mismatch: the row was changed after it was recorded");
		return;
	}
	w->rows++;
	w->last_seq = seq;
	memcpy(w->last_hash, hash, 65);
}

/* Walk both tables in seq order from the anchor up to seq upto, stopping at the first bad
 * row. Must run inside a transaction (one snapshot of both tables). */
static int chain_walk(struct audit *a, const struct chain_state *c, int64_t upto, struct walk *w,
                      struct corral_error *err)
{
	memset(w, 0, sizeof(*w));
	w->last_seq = c->anchor_seq;
	memcpy(w->last_hash, c->anchor_hash, sizeof(w->last_hash));
	sqlite3_stmt *sx = NULL, *se = NULL;
	if (select_chain(a, &T_EXEC, upto, &sx, err) < 0 ||
	    select_chain(a, &T_EVENT, upto, &se, err) < 0) {
		sqlite3_finalize(sx);
		return err->code;
	}
	int rx = sqlite3_step(sx), re = sqlite3_step(se);
	while (!w->bad && (rx == SQLITE_ROW || re == SQLITE_ROW)) {
		bool take_x = rx == SQLITE_ROW &&
		              (re != SQLITE_ROW ||
		               sqlite3_column_int64(sx, 0) <= sqlite3_column_int64(se, 0));
		if (take_x) {
			walk_row(w, &T_EXEC, sx, c->anchor_seq);
			rx = sqlite3_step(sx);
		} else {
			walk_row(w, &T_EVENT, se, c->anchor_seq);
			re = sqlite3_step(se);
		}
	}
	int rc = rx != SQLITE_ROW && rx != SQLITE_DONE ? rx : re;
	sqlite3_finalize(sx);
	sqlite3_finalize(se);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return store_error(a, rc, "read", err);
	return 0;
}

int audit_verify(struct audit *a, char **report_json, struct corral_error *err)
{
	ERR_OR_LOCAL(err);
	*report_json = NULL;
	if (exec_sql(a, "BEGIN", "verify", err) < 0)
		return err->code;
	struct chain_state c = {0};
	struct walk w = {0};
	int rc = 0;
	if (a->missing) {
		/* nothing to walk: the finding is the table; the head is reported if it is there */
		struct corral_error ignored = {0};
		char reason[96];
		snprintf(reason, sizeof(reason),
		         "table %s is missing: it was dropped outside corral", a->missing);
		w.bad = json_pack("{s:s,s:s}", "table", a->missing, "reason", reason);
		if (!w.bad)
			rc = nomem(err);
		else if (strcmp(a->missing, "chain") && chain_read(a, &c, &ignored) < 0)
			memset(&c, 0, sizeof(c));
	} else if ((rc = chain_query(a, &c, err)) == 0) {
		/* tampering, not an unreadable store: a finding, like a dropped table */
		w.bad = json_pack("{s:s,s:s}", "table", "chain", "reason",
		                  HEAD_ROW_MISSING "; the head and the anchor it held are unknown, "
		                                   "so the rows cannot be checked against them");
		if (!w.bad)
			rc = nomem(err);
	} else if (rc == 1) {
		rc = chain_walk(a, &c, INT64_MAX, &w, err);
	}
	sqlite3_exec(a->db, "COMMIT", NULL, NULL, NULL);
	if (rc < 0)
		return rc;
	if (!w.bad && w.last_seq < c.head_seq)
		walk_bad(&w, w.last_seq + 1, NULL, NULL,
		         "row(s) deleted at the end: seq %" PRId64 " to %" PRId64 " are missing",
		         w.last_seq + 1, c.head_seq);
	else if (!w.bad && (w.last_seq != c.head_seq || strcmp(w.last_hash, c.head_hash)))
		walk_bad(&w, w.last_seq, "chain", NULL,
		         "the last row (seq %" PRId64 ") is not the recorded head (seq %" PRId64
		         "): the chain head was edited",
		         w.last_seq, c.head_seq);
	json_t *rep = json_pack("{s:b,s:s,s:I,s:I,s:s,s:I,s:s}", "ok", !w.bad, "path", a->path,
	                        "rows", (json_int_t)w.rows, "head_seq", (json_int_t)c.head_seq,
	                        "head_hash", c.head_hash, "anchor_seq", (json_int_t)c.anchor_seq,
	                        "anchor_hash", c.anchor_hash);
	if (rep && w.bad)
		json_object_set_new(rep, "first_bad", w.bad);
	else
		json_decref(w.bad);
	*report_json = rep ? json_dumps(rep, JSON_COMPACT) : NULL;
	bool ok = rep && !json_object_get(rep, "first_bad");
	json_decref(rep);
	if (!*report_json)
		return nomem(err);
	return ok ? 0 : 1;
}

/* ---- retention ------------------------------------------------------------------------ */

/* The last seq to delete: rows older than max_age (up to the first young row) and rows
 * beyond the newest max_rows. */
static int prune_cut(struct audit *a, const struct chain_state *c, int64_t max_age_ms,
                     int64_t max_rows, int64_t *cut, struct corral_error *err)
{
	*cut = c->anchor_seq;
	if (max_age_ms > 0) {
		int64_t first_young;
		if (query_i64(
		        a,
		        "SELECT min(s) FROM (SELECT min(seq) AS s FROM executions WHERE "
		        "ended_at >= ?1 UNION ALL SELECT min(seq) FROM events WHERE at >= ?1)",
		        now_ms() - max_age_ms, -1, &first_young, err) < 0)
			return err->code;
		int64_t age_cut = first_young < 0 ? c->head_seq : first_young - 1;
		if (age_cut > *cut)
			*cut = age_cut;
	}
	if (max_rows > 0) {
		int64_t total;
		if (query_i64(a,
		              "SELECT (SELECT count(*) FROM executions) + (SELECT count(*) FROM "
		              "events)",
		              0, 0, &total, err) < 0)
			return err->code;
		if (total > max_rows) {
			int64_t rows_cut;
			if (query_i64(
			        a,
			        "SELECT seq FROM (SELECT seq FROM executions UNION ALL SELECT seq "
			        "FROM events) ORDER BY seq LIMIT 1 OFFSET ?1",
			        total - max_rows - 1, c->anchor_seq, &rows_cut, err) < 0)
				return err->code;
			if (rows_cut > *cut)
				*cut = rows_cut;
		}
	}
	return 0;
}

static int prune_locked(struct audit *a, int64_t max_age_ms, int64_t max_rows,
                        struct corral_error *err)
{
	struct chain_state c;
	int64_t cut;
	if (chain_read(a, &c, err) < 0 || prune_cut(a, &c, max_age_ms, max_rows, &cut, err) < 0)
		return err->code;
	if (cut <= c.anchor_seq)
		return 0;
	/* Verify what goes: once deleted, its evidence is gone. */
	struct walk w;
	if (chain_walk(a, &c, cut, &w, err) < 0)
		return err->code;
	if (!w.bad && w.last_seq != cut)
		walk_bad(&w, w.last_seq + 1, NULL, NULL, "row(s) deleted");
	if (w.bad) {
		int r = corral_set_error(
		    err, CORRAL_ESTATE, 0, "audit",
		    "audit store %s: not pruned: the rows to prune do not verify (seq %" PRId64
		    ": %s); the evidence is kept; see 'corral audit verify'",
		    a->path, (int64_t)json_integer_value(json_object_get(w.bad, "seq")),
		    json_string_value(json_object_get(w.bad, "reason")));
		json_decref(w.bad);
		return r;
	}
	int64_t deleted = 0;
	for (int k = 0; k < 2; k++) {
		sqlite3_stmt *st;
		if (prepare(a,
		            k ? "DELETE FROM events WHERE seq <= ?1"
		              : "DELETE FROM executions WHERE seq <= ?1",
		            &st, err) < 0)
			return err->code;
		sqlite3_bind_int64(st, 1, cut);
		int rc = sqlite3_step(st);
		sqlite3_finalize(st);
		if (rc != SQLITE_DONE)
			return store_error(a, rc, "prune", err);
		deleted += sqlite3_changes(a->db);
	}
	sqlite3_stmt *st;
	if (prepare(a,
	            "UPDATE chain SET anchor_seq = ?1, anchor_hash = ?2, pruned_rows = pruned_rows "
	            "+ ?3, pruned_at = ?4 WHERE k = 1",
	            &st, err) < 0)
		return err->code;
	sqlite3_bind_int64(st, 1, cut);
	sqlite3_bind_text(st, 2, w.last_hash, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 3, deleted);
	sqlite3_bind_int64(st, 4, now_ms());
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return store_error(a, rc, "prune", err);
	return (int)(deleted > INT_MAX ? INT_MAX : deleted);
}

int audit_prune(struct audit *a, int64_t max_age_ms, int64_t max_rows, struct corral_error *err)
{
	ERR_OR_LOCAL(err);
	int rc = sqlite3_exec(a->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return store_error(a, rc, "prune", err);
	int n = prune_locked(a, max_age_ms, max_rows, err);
	if (n < 0) {
		sqlite3_exec(a->db, "ROLLBACK", NULL, NULL, NULL);
		return n;
	}
	rc = sqlite3_exec(a->db, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		sqlite3_exec(a->db, "ROLLBACK", NULL, NULL, NULL);
		return store_error(a, rc, "prune", err);
	}
	wal_checkpoint(a);
	return n;
}

/* ---- queries -------------------------------------------------------------------------- */

#define FAILED_SQL                                                                                 \
	"(error IS NOT NULL OR timed_out != 0 OR limit_hit IS NOT NULL OR signal IS NOT NULL "     \
	"OR (exit_code IS NOT NULL AND exit_code != 0))"
#define FILTER_SQL                                                                                 \
	" WHERE (?1 = 0 OR started_at >= ?1) AND (?2 = 0 OR " FAILED_SQL                           \
	") AND (?3 IS NULL OR kind = ?3)"

static void bind_filter(sqlite3_stmt *st, const struct audit_filter *f)
{
	sqlite3_bind_int64(st, 1, f ? f->since_ms : 0);
	sqlite3_bind_int(st, 2, f && f->failed_only);
	if (f && f->kind)
		sqlite3_bind_text(st, 3, f->kind, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, 3);
}

static bool json_column(const char *name)
{
	static const char *const cols[] = {"argv",       "client_info", "isolation",
	                                   "violations", "error",       "detail"};
	for (size_t i = 0; i < ARRAY_SIZE(cols); i++)
		if (!strcmp(name, cols[i]))
			return true;
	return false;
}

/* Text as a JSON string; bytes that are not UTF-8 (a cwd may hold any) become '?'. */
static json_t *json_text(const char *s, size_t n)
{
	json_t *j = json_stringn(s, n);
	if (j)
		return j;
	char *c = malloc(n + 1);
	if (!c)
		return NULL;
	for (size_t i = 0; i < n; i++)
		c[i] = (unsigned char)s[i] < 0x80 && s[i] ? s[i] : '?';
	j = json_stringn(c, n);
	free(c);
	return j;
}

/* One result row as a JSON object: JSON columns decoded, flags as booleans. */
static json_t *row_json(sqlite3_stmt *st, json_t *o)
{
	if (!o)
		o = json_object();
	int n = sqlite3_column_count(st);
	for (int k = 0; o && k < n; k++) {
		const char *name = sqlite3_column_name(st, k);
		struct val v = column_val(st, k);
		json_t *j = NULL;
		if (v.t == 'i')
			j = !strcmp(name, "timed_out") || !strcmp(name, "failed")
			        ? json_boolean(v.i)
			        : json_integer(v.i);
		else if (v.t == 's' && json_column(name))
			j = json_loadb(v.s, v.n, JSON_DECODE_ANY, NULL);
		if (!j && (v.t == 's' || v.t == 'r'))
			j = json_text(v.s, v.n);
		json_object_set_new(o, name, j ? j : json_null());
	}
	return o;
}

#define LIST_COLS                                                                                  \
	"seq, id, parent, kind, client, started_at, ended_at, argv, command, cwd, profile, "       \
	"exit_code, signal, timed_out, limit_hit, duration_ms, error, violations, "                \
	"redactions, " FAILED_SQL " AS failed"

int audit_list(struct audit *a, const struct audit_filter *f, json_t **out,
               struct corral_error *err)
{
	ERR_OR_LOCAL(err);
	sqlite3_stmt *st;
	*out = NULL;
	if (prepare(a,
	            "SELECT " LIST_COLS " FROM executions" FILTER_SQL " ORDER BY seq DESC LIMIT ?4",
	            &st, err) < 0)
		return err->code;
	bind_filter(st, f);
	sqlite3_bind_int64(st, 4, f && f->limit > 0 ? f->limit : -1);
	json_t *arr = json_array();
	int rc;
	while (arr && (rc = sqlite3_step(st)) == SQLITE_ROW)
		json_array_append_new(arr, row_json(st, NULL));
	sqlite3_finalize(st);
	if (!arr)
		return nomem(err);
	if (rc != SQLITE_DONE) {
		json_decref(arr);
		return store_error(a, rc, "read", err);
	}
	*out = arr;
	return 0;
}

/* Rows of a one-parameter query (text) as a JSON array of objects or of their first column. */
static int rows_json(struct audit *a, const char *sql, const char *param, bool first_only,
                     json_t **out, struct corral_error *err)
{
	sqlite3_stmt *st;
	if (prepare(a, sql, &st, err) < 0)
		return err->code;
	sqlite3_bind_text(st, 1, param, -1, SQLITE_TRANSIENT);
	json_t *arr = json_array();
	int rc;
	while (arr && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (first_only)
			json_array_append_new(
			    arr, json_string((const char *)sqlite3_column_text(st, 0)));
		else
			json_array_append_new(arr, row_json(st, NULL));
	}
	sqlite3_finalize(st);
	if (!arr)
		return nomem(err);
	if (rc != SQLITE_DONE) {
		json_decref(arr);
		return store_error(a, rc, "read", err);
	}
	*out = arr;
	return 0;
}

int audit_show(struct audit *a, const char *id_prefix, json_t **out, struct corral_error *err)
{
	ERR_OR_LOCAL(err);
	*out = NULL;
	if (!id_prefix || !*id_prefix)
		return corral_set_error(err, CORRAL_EINVAL, 0, "audit", "audit show: give an id");
	json_t *m = NULL;
	const char *tables[] = {"executions", "events"};
	for (size_t t = 0; t < 2 && !json_array_size(m); t++) {
		char sql[512];
		json_decref(m);
		m = NULL;
		snprintf(sql, sizeof(sql),
		         "SELECT '%s' AS type, *%s FROM %s WHERE substr(id, 1, length(?1)) = ?1 "
		         "ORDER BY seq LIMIT 2",
		         t ? "event" : "execution", t ? "" : ", " FAILED_SQL " AS failed",
		         tables[t]);
		if (rows_json(a, sql, id_prefix, false, &m, err) < 0)
			return err->code;
	}
	size_t n = json_array_size(m);
	if (n != 1) {
		json_decref(m);
		return corral_set_error(
		    err, n ? CORRAL_EINVAL : CORRAL_ENOTFOUND, 0, "audit",
		    n ? "audit store %s: id prefix '%s' is ambiguous; give more "
		        "of the id"
		      : "audit store %s: no execution or event with id '%s'; "
		        "see 'corral audit list'",
		    a->path, id_prefix);
	}
	json_t *o = json_incref(json_array_get(m, 0));
	json_decref(m);
	if (!strcmp(json_string_value(json_object_get(o, "type")), "execution")) {
		const char *id = json_string_value(json_object_get(o, "id"));
		json_t *ev = NULL, *kids = NULL;
		if (rows_json(
		        a,
		        "SELECT seq, id, at, kind, detail FROM events WHERE execution_id = ?1 "
		        "ORDER BY seq",
		        id, false, &ev, err) < 0 ||
		    rows_json(a, "SELECT id FROM executions WHERE parent = ?1 ORDER BY seq", id,
		              true, &kids, err) < 0) {
			json_decref(ev);
			json_decref(o);
			return err->code;
		}
		json_object_set_new(o, "events", ev);
		json_object_set_new(o, "children", kids);
	}
	*out = o;
	return 0;
}

int audit_export(struct audit *a, audit_line_fn line, void *ud, struct corral_error *err)
{
	ERR_OR_LOCAL(err);
	if (exec_sql(a, "BEGIN", "export", err) < 0)
		return err->code;
	sqlite3_stmt *sx = NULL, *se = NULL;
	if (prepare(a, "SELECT * FROM executions ORDER BY seq", &sx, err) < 0 ||
	    prepare(a, "SELECT * FROM events ORDER BY seq", &se, err) < 0) {
		sqlite3_finalize(sx);
		sqlite3_exec(a->db, "COMMIT", NULL, NULL, NULL);
		return err->code;
	}
	int rx = sqlite3_step(sx), re = sqlite3_step(se), stop = 0;
	while (!stop && (rx == SQLITE_ROW || re == SQLITE_ROW)) {
		bool take_x = rx == SQLITE_ROW &&
		              (re != SQLITE_ROW ||
		               sqlite3_column_int64(sx, 0) <= sqlite3_column_int64(se, 0));
		json_t *o = json_pack("{s:s}", "type", take_x ? "execution" : "event");
		o = row_json(take_x ? sx : se, o);
		char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		if (!s) {
			stop = nomem(err);
			break;
		}
		stop = line(ud, s);
		free(s);
		if (take_x)
			rx = sqlite3_step(sx);
		else
			re = sqlite3_step(se);
	}
	int rc = rx != SQLITE_ROW && rx != SQLITE_DONE ? rx : re;
	sqlite3_finalize(sx);
	sqlite3_finalize(se);
	sqlite3_exec(a->db, "COMMIT", NULL, NULL, NULL);
	if (stop)
		return stop;
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return store_error(a, rc, "read", err);
	return 0;
}

/* The duration at rank ceil(p * n) (nearest rank), n > 0. */
static int percentile(struct audit *a, const struct audit_filter *f, int64_t n, double p,
                      int64_t *out, struct corral_error *err)
{
	sqlite3_stmt *st;
	if (prepare(a,
	            "SELECT duration_ms FROM executions" FILTER_SQL
	            " ORDER BY duration_ms LIMIT 1 OFFSET ?4",
	            &st, err) < 0)
		return err->code;
	int64_t rank = (int64_t)(p * (double)n + 0.999999);
	bind_filter(st, f);
	sqlite3_bind_int64(st, 4, rank > 0 ? rank - 1 : 0);
	int rc = sqlite3_step(st);
	*out = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	sqlite3_finalize(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : store_error(a, rc, "read", err);
}

/* "SELECT key, count" rows into an object. */
static int counts_json(struct audit *a, const char *sql, const struct audit_filter *f, json_t *o,
                       struct corral_error *err)
{
	sqlite3_stmt *st;
	if (prepare(a, sql, &st, err) < 0)
		return err->code;
	bind_filter(st, f);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		json_object_set_new(o, (const char *)sqlite3_column_text(st, 0) ?: "",
		                    json_integer(sqlite3_column_int64(st, 1)));
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : store_error(a, rc, "read", err);
}

int audit_stats(struct audit *a, const struct audit_filter *f, json_t **out,
                struct corral_error *err)
{
	ERR_OR_LOCAL(err);
	*out = NULL;
	sqlite3_stmt *st;
	if (exec_sql(a, "BEGIN", "read", err) < 0)
		return err->code;
	if (prepare(a,
	            "SELECT count(*), total(" FAILED_SQL "), total(timed_out != 0), "
	            "coalesce(max(duration_ms), 0) FROM executions" FILTER_SQL,
	            &st, err) < 0) {
		sqlite3_exec(a->db, "COMMIT", NULL, NULL, NULL);
		return err->code;
	}
	bind_filter(st, f);
	int rc = sqlite3_step(st);
	int64_t n = 0, failed = 0, timeouts = 0, max = 0;
	if (rc == SQLITE_ROW) {
		n = sqlite3_column_int64(st, 0);
		failed = (int64_t)sqlite3_column_double(st, 1);
		timeouts = (int64_t)sqlite3_column_double(st, 2);
		max = sqlite3_column_int64(st, 3);
	}
	sqlite3_finalize(st);
	int64_t p50 = 0, p95 = 0;
	json_t *by_kind = json_object(), *events = json_object();
	int r = rc == SQLITE_ROW ? 0 : store_error(a, rc, "read", err);
	if (r == 0 && n > 0)
		r = percentile(a, f, n, 0.50, &p50, err);
	if (r == 0 && n > 0)
		r = percentile(a, f, n, 0.95, &p95, err);
	if (r == 0)
		r = counts_json(a,
		                "SELECT kind, count(*) FROM executions" FILTER_SQL " GROUP BY kind",
		                f, by_kind, err);
	if (r == 0)
		r = counts_json(
		    a,
		    "SELECT kind, count(*) FROM events WHERE ?1 = 0 OR at >= ?1 GROUP BY "
		    "kind",
		    f, events, err);
	sqlite3_exec(a->db, "COMMIT", NULL, NULL, NULL);
	if (r < 0) {
		json_decref(by_kind);
		json_decref(events);
		return err->code;
	}
	json_t *o = json_pack(
	    "{s:I,s:I,s:f,s:I,s:f,s:{s:I,s:I,s:I},s:o,s:o}", "executions", (json_int_t)n, "failed",
	    (json_int_t)failed, "failure_rate", n ? (double)failed / (double)n : 0.0, "timeouts",
	    (json_int_t)timeouts, "timeout_rate", n ? (double)timeouts / (double)n : 0.0,
	    "duration_ms", "p50", (json_int_t)p50, "p95", (json_int_t)p95, "max", (json_int_t)max,
	    "by_kind", by_kind, "events", events);
	if (!o)
		return nomem(err);
	*out = o;
	return 0;
}
