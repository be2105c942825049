/* The MCP server: lifecycle, concurrency and the one event loop.
 *
 * A single thread waits in epoll on stdin (line-framed requests), stdout (only while a reply
 * is waiting for a slow client), a signalfd (SIGTERM, SIGINT, SIGHUP), a timerfd for progress
 * notifications, and one descriptor per running sandbox (corral_proc_fd, which already covers
 * that run's own timers). Calls beyond --max-concurrent wait in a FIFO queue; everything else
 * (ping, tools/list, cancellation) is answered at once. Each reply is built completely, then
 * written whole; what the client does not take at once waits in an output queue.
 *
 * The audit store is opened once for the server's lifetime; every call that reached the
 * sandbox launcher is recorded as an "mcp_call" execution when it ends, and every can_i
 * question as a "policy_query" event. A store that cannot be opened or written costs a
 * warning on stderr, never a call. */
#include "mcp/mcp.h"
#include "audit.h"
#include "hcache.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* A testing seam, for tests/fuzz/fuzz_mcp.c only: it includes this file with MCP_NO_LAUNCH
 * defined and its own mcp_no_launch(), so that every request takes its whole path through the
 * server up to the launch of a sandbox, and no process is ever started (each launch fails as
 * on a host without room for one more). Normal builds do not define it. */
#ifdef MCP_NO_LAUNCH
#define corral_spawn(cfg, proc, err) ((void)(cfg), (void)(proc), mcp_no_launch(err))
#define corral_pipeline_spawn(cfgs, n, pl, err)                                                   \
	((void)(cfgs), (void)(n), (void)(pl), mcp_no_launch(err))
#define corral_session_open(cfg, so, sess, err)                                                   \
	((void)(cfg), (void)(so), (void)(sess), mcp_no_launch(err))
#define corral_job_start(cfg, job, err) ((void)(cfg), (void)(job), mcp_no_launch(err))
#define corral_session_job_start(sess, cmd, job, err)                                             \
	((void)(sess), (void)(cmd), (void)(job), mcp_no_launch(err))
#endif

#define READ_CHUNK 65536
#define PROGRESS_EVERY_MS 500 /* at most one notification per call this often */
#define PROGRESS_TICK_MS 100
#define LAST_LINE_MAX 200     /* bytes of one output line in a progress message */
#define PROGRESS_LINES 5      /* the latest output lines a progress message shows */
#define PROGRESS_TAIL 1024    /* the output bytes kept for them (per call with a token) */
#define OUTQ_HIGH (16u << 20) /* stop reading requests while this much output waits */
#define OUTQ_LOW (4u << 20)
#define SHUTDOWN_FLUSH_MS 2000 /* how long replies already built may take to drain at exit */
#define SHUTDOWN_REAP_MS 1000  /* how long killed sandboxes may take to end in a result */
#define POOL_IDLE_MS 10        /* --prebuild: refill after the server was idle this long */
#define POOL_MAX_AGE_MS 60000  /* --prebuild: a parked sandbox is rebuilt after this long */
#define POOL_MAX_FAILS 3       /* --prebuild: builds failing in a row pause the pool ... */
#define POOL_PAUSE_MS 60000    /* ... this long */
#define POOL_FD_GUESS 32       /* --prebuild: descriptors of a parked sandbox, until measured */
#define POOL_ROOM_WAIT_MS 1000 /* --prebuild: no descriptors to spare: look again after this */
/* Descriptors: a call is started only while the server has room for one more sandbox (what
 * one has taken so far, measured, plus this margin for the launch's transient pipes), so
 * that running out surfaces as a clean "too many open files" result before the launcher
 * runs short halfway through. */
#define FD_PER_CALL_GUESS 8
#define FD_MARGIN 16
/* A store that keeps failing (locked by another process for long, disk full) costs the loop
 * up to its busy timeout per write: after this many failures in a row, writes pause for a
 * while (what they would have recorded is counted as lost). */
#define AUDIT_FAILS_BEFORE_PAUSE 3
#define AUDIT_PAUSE_MS 5000

enum watch_kind { W_STDIN, W_STDOUT, W_SIGNAL, W_TIMER, W_CALL, W_SESSION, W_JOB };
struct watch {
	enum watch_kind kind;
};

enum call_state { CALL_QUEUED, CALL_RUNNING, CALL_DONE };

struct server;

struct call {
	struct watch w; /* first: the epoll cookie */
	enum call_state state;
	struct server *srv;
	json_t *id;             /* the request id (owned) */
	json_t *progress_token; /* owned, or NULL */
	struct mcp_plan plan;
	corral_proc *proc;
	corral_pipeline *pl; /* run_pipeline */
	struct msess *sess;  /* shell_exec: the session it runs in (not counted as running) */
	struct mjob *jkill;  /* job_kill: the job it waits for */
	bool new_session;    /* shell_exec opened the session */
	bool stateful;       /* waits on a session or a job: not counted in running */
	size_t q_bytes;      /* its request line's length, counted in s->q_bytes while queued */
	bool cancelled;
	bool reaped; /* shutdown: it ended in a result (or could not be stepped) */
	uint64_t t_start, t_progress;
	uint64_t out_bytes;
	char *tail; /* with a progress token: the latest PROGRESS_TAIL output bytes, a ring */
	size_t tail_pos; /* where the next byte goes */
	bool tail_wrapped;
	struct call *prev, *next; /* live calls (queued and running) */
	struct call *qnext;       /* the FIFO queue */
	struct call *dnext;       /* finished, freed at the end of the loop iteration */
	/* for the audit record */
	int64_t started_wall_ms;
	char *cwd;
	char policy_hash[65];
};

/* A shell session the server holds, and a background job. */
struct msess {
	struct watch w; /* first: the epoll cookie */
	corral_session *s;
	struct call *waiting; /* the shell_exec in progress */
	struct msess *next;
	bool dead; /* closed; freed after the current batch of events */
	/* for the audit record of its commands and jobs */
	char policy_hash[65];
	char *cwd; /* the directory it started in */
};

struct mjob {
	struct watch w; /* first */
	corral_job *j;
	char session[37];    /* "" for a job in a sandbox of its own */
	struct call *killer; /* a job_kill waiting for the end */
	struct mjob *next;
	int64_t started_wall;
	uint64_t started, ended; /* monotonic ms; ended 0 while it runs */
	bool done;
	bool expired; /* stopped at --job-timeout (once) */
	bool dead;    /* dropped; freed after the current batch of events */
	/* for the audit record (kind job), written once when it ends */
	bool kill_asked; /* job_kill, or the server's shutdown: recorded as cancelled */
	bool recorded;
	char policy_hash[65];
	char *cwd;                  /* a job of its own: its directory; NULL in a session */
	struct corral_result *iso;  /* a session job: the session's isolation, taken at start */
};

struct server {
	const struct mcp_options *o;
	struct msess *sessions;
	unsigned n_sessions;
	struct mjob *jobs;
	/* closed sessions and dropped jobs: an event for them may still be pending in the
	 * current batch, so they are freed after it */
	struct msess *dead_sessions;
	struct mjob *dead_jobs;
	int epfd, in_fd, out_fd, sigfd, timerfd;
	struct watch w_in, w_out, w_sig, w_timer;
	bool in_pollable, out_pollable, in_paused, out_watching, timer_armed;
	bool in_parked; /* stdin hung up while paused: out of the epoll set until resumed */
	int in_flags0, out_flags0;
	struct jr_framer framer;
	char *outq;
	size_t outq_len, outq_off, outq_cap;
	bool initialized;
	const char *version;
	struct call *calls;
	struct call *q_head, *q_tail;
	size_t n_queued, peak_live;
	size_t q_bytes;     /* request bytes of the waiting calls (--max-queue-bytes) */
	size_t frame_bytes; /* the length of the request line being dispatched */
	struct call *done;
	unsigned running;
	bool stop;
	const char *stop_reason;
	char *readbuf;
	struct audit *audit;   /* NULL: no audit (off, or the store could not be opened) */
	char *client_info;     /* {name, version, title} of initialize's clientInfo, or NULL */
	uint64_t audit_failed; /* records that could not be written */
	unsigned audit_fails_in_row;
	uint64_t audit_paused_until; /* monotonic ms */
	int fd_per_call; /* most descriptors one running sandbox has taken (0: unknown) */
	/* --prebuild: sandboxes built ahead (DESIGN §18), each used by one call whose plan key
	 * matches; built from the configuration of the latest call that could use one */
	struct parked {
		corral_proc *p;
		uint8_t key[32];
		uint64_t born;
		struct parked *next;
	} *pool;
	unsigned n_pool;
	corral_config *pool_tmpl;
	uint64_t busy_at; /* monotonic ms of the latest event */
	struct parked *pool_dead; /* dropped: killed, reaped when the server is idle */
	unsigned pool_fails;      /* builds that failed (or died parked) since the last use */
	unsigned pool_target;     /* how many to keep: 1 after a miss, --prebuild after a use */
	bool pool_off;            /* cannot work here (no pid namespace): for good */
	int fd_per_park;          /* descriptors one parked sandbox holds (0: not measured) */
	char exe_path[PATH_MAX];  /* this binary, as /proc/self/maps names it */
	struct mtpl *mtpl;        /* the mount template's holder (NULL: off) */
	bool mtpl_said_off;       /* its failure has been logged */
	struct hcache *hc;        /* --prebuild: what the calls' plan keys look at (hcache.h) */
	uint64_t pool_wait_until; /* no room for another (descriptors): not before this */
	uint64_t replied_at;      /* monotonic ms of the latest reply to a call */
	bool pool_b2b;            /* the latest call came back to back (within POOL_IDLE_MS) */
	unsigned pool_misses;     /* calls in a row that found only sandboxes of another plan */
};

static void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logmsg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("corral mcp: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* ---- output ----------------------------------------------------------------------------- */

static size_t outq_pending(const struct server *s)
{
	return s->outq_len - s->outq_off;
}

static void set_in_paused(struct server *s, bool paused)
{
	if (s->in_paused == paused)
		return;
	s->in_paused = paused;
	if (s->in_pollable) {
		struct epoll_event ev = {.events = paused ? 0 : EPOLLIN, .data.ptr = &s->w_in};
		epoll_ctl(s->epfd, s->in_parked ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, s->in_fd, &ev);
		s->in_parked = false;
	}
}

/* stdout stays in the epoll set for its whole life: without EPOLLOUT it still reports
 * EPOLLERR when the client closes its end, which is how a vanished client is noticed while
 * calls run and nothing is being written. */
static void watch_out(struct server *s, bool on)
{
	if (!s->out_pollable || s->out_watching == on)
		return;
	struct epoll_event ev = {.events = on ? EPOLLOUT : 0, .data.ptr = &s->w_out};
	if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, s->out_fd, &ev) == 0)
		s->out_watching = on;
}

static void out_broken(struct server *s, int e)
{
	if (!s->stop)
		logmsg("stdout: %s; the client is gone, shutting down", strerror(e));
	s->stop = true;
	s->stop_reason = "stdout closed";
	s->outq_len = s->outq_off = 0;
}

/* Write as much as the client takes now. Returns false when stdout is broken. */
static bool write_some(struct server *s, const char *buf, size_t len, size_t *done)
{
	*done = 0;
	while (*done < len) {
		ssize_t n = write(s->out_fd, buf + *done, len - *done);
		if (n > 0) {
			*done += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		out_broken(s, n < 0 ? errno : EPIPE);
		return false;
	}
	return true;
}

static void flush_out(struct server *s)
{
	size_t done;
	if (outq_pending(s) && write_some(s, s->outq + s->outq_off, outq_pending(s), &done))
		s->outq_off += done;
	if (!outq_pending(s)) {
		s->outq_len = s->outq_off = 0;
		if (s->outq_cap > (1u << 20)) { /* give a burst's memory back */
			free(s->outq);
			s->outq = NULL;
			s->outq_cap = 0;
		}
		watch_out(s, false);
	}
	if (s->in_paused && outq_pending(s) < OUTQ_LOW)
		set_in_paused(s, false);
}

/* Send one complete message (takes ownership of line). Never blocks the loop. */
static void send_line(struct server *s, char *line)
{
	if (!line) {
		logmsg("out of memory building a message; it was dropped");
		return;
	}
	size_t len = strlen(line), done = 0;
	if (s->stop && s->stop_reason && !strcmp(s->stop_reason, "stdout closed")) {
		free(line);
		return;
	}
	if (!outq_pending(s) && !write_some(s, line, len, &done)) {
		free(line);
		return;
	}
	if (done < len) {
		size_t rest = len - done;
		if (s->outq_off && s->outq_off == s->outq_len)
			s->outq_len = s->outq_off = 0;
		if (s->outq_len + rest > s->outq_cap) {
			size_t cap = s->outq_cap ? s->outq_cap : 65536;
			while (cap < s->outq_len + rest)
				cap *= 2;
			char *g = realloc(s->outq, cap);
			if (!g) {
				/* Dropping part of a line would corrupt the stream: give up
				 * cleanly. */
				logmsg("out of memory queueing output; shutting down");
				s->stop = true;
				free(line);
				return;
			}
			s->outq = g;
			s->outq_cap = cap;
		}
		memcpy(s->outq + s->outq_len, line + done, rest);
		s->outq_len += rest;
		watch_out(s, true);
		if (outq_pending(s) > OUTQ_HIGH)
			set_in_paused(s, true); /* the client is not reading: stop taking work */
	}
	free(line);
}

/* ---- calls ------------------------------------------------------------------------------ */

static void call_free(struct call *c)
{
	if (c->sess && c->sess->waiting == c)
		c->sess->waiting = NULL;
	if (c->jkill && c->jkill->killer == c)
		c->jkill->killer = NULL;
	if (c->proc)
		corral_proc_destroy(c->proc);
	if (c->pl)
		corral_pipeline_destroy(c->pl);
	json_decref(c->id);
	json_decref(c->progress_token);
	mcp_plan_free(&c->plan);
	free(c->cwd);
	free(c->tail);
	free(c);
}

/* ---- audit ------------------------------------------------------------------------------ */

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A write failed: warn once (the call itself is not affected), count the rest. */
static void audit_failed(struct server *s, const struct corral_error *err)
{
	if (s->audit_failed++ == 0)
		logmsg("%s (calls are not affected; further audit errors are only counted)",
		       err->message);
	if (++s->audit_fails_in_row >= AUDIT_FAILS_BEFORE_PAUSE) {
		s->audit_fails_in_row = 0;
		s->audit_paused_until = mono_ms() + AUDIT_PAUSE_MS;
	}
}

/* May a record be written now? Counts it as lost while writes are paused. */
static bool audit_ready(struct server *s)
{
	if (!s->audit)
		return false;
	if (s->audit_paused_until && mono_ms() < s->audit_paused_until) {
		s->audit_failed++;
		audit_note_missed(s->audit, 1, NULL); /* in the store_unavailable event's count */
		return false;
	}
	s->audit_paused_until = 0;
	return true;
}

/* A record that could not even be prepared (out of memory): counted like a failed write. */
static void audit_lost(struct server *s)
{
	if (!s->audit)
		return;
	s->audit_failed++;
	audit_note_missed(s->audit, 1, "out of memory preparing the record");
}

/* Write one execution: r has what is its own, this adds what is the server's (client,
 * profile, output storage). */
static void audit_write(struct server *s, struct audit_run *r)
{
	if (!audit_ready(s))
		return;
	const corral_config *base = s->o->base;
	r->client = "mcp";
	r->client_info_json = s->client_info;
	r->profile = base->profile_name ? base->profile_name : "default";
	r->store_output = s->o->audit_output;
	struct corral_error err = {0};
	if (audit_record_run(s->audit, r, &err) < 0)
		audit_failed(s, &err);
	else
		s->audit_fails_in_row = 0;
}

/* One execution of a call in the audit store: kind "mcp_call" for a run, "session_cmd" for a
 * command in a session (parent: the session), "pipeline_stage" for each stage of a pipeline
 * (parent: the pipeline's mcp_call row). */
static void audit_exec(struct server *s, const struct call *c, const struct corral_result *res,
                       const char *kind, const char *parent, bool cancelled, json_t *doc)
{
	if (!res || !s->audit)
		return;
	char *viol = result_violations_json(res);
	struct audit_run r = {
	    .res = res,
	    .kind = kind,
	    .parent = parent,
	    .cwd = c->cwd ? c->cwd : s->o->workspace,
	    .policy_hash = c->policy_hash[0] ? c->policy_hash : NULL,
	    .started_at_ms = c->started_wall_ms,
	    .cancelled = cancelled,
	    .violations_json = viol,
	    .redactions = res->redactions,
	    .doc = doc,
	};
	audit_write(s, &r);
	free(viol);
}

static void audit_call(struct server *s, const struct call *c, const struct corral_result *res)
{
	audit_exec(s, c, res, "mcp_call", NULL, c->cancelled, NULL);
}

/* Something that never started (a session that could not open, a job or a pipeline that
 * could not start): one row with the error, so that a denial is on the record. */
static void audit_not_started(struct server *s, const struct mcp_plan *plan, const char *kind,
                              const char *parent, const struct corral_error *err)
{
	if (!s->audit)
		return;
	struct corral_result res;
	mcp_spawn_failed_result(plan, s->o, err, &res);
	if (!res.command && plan->display) /* a pipeline: "$ A | B" */
		res.command = plan->display + (strncmp(plan->display, "$ ", 2) ? 0 : 2);
	char hash[65] = "";
	if (plan->cfg)
		policy_hash(plan->cfg, hash);
	const corral_config *cfg = plan->cfg ? plan->cfg : s->o->base;
	struct audit_run r = {
	    .res = &res,
	    .kind = kind,
	    .parent = parent,
	    .cwd = cfg->cwd ? cfg->cwd : cfg->workspace,
	    .policy_hash = hash[0] ? hash : NULL,
	    .started_at_ms = wall_ms(),
	};
	audit_write(s, &r);
}

static char **strv_copy(char *const *v);

/* A command cut off before it had a result: a session command whose session is closed under
 * it (shell_close, or the server's exit), or a run or a pipeline that did not end within the
 * shutdown's reap budget. A row that says what ran and for how long, cancelled, with what is
 * not known (usage, byte counts, isolation, violations, redactions) null. */
static void audit_cut_off(struct server *s, const struct call *c, const char *kind,
                          const char *parent)
{
	if (!s->audit)
		return;
	struct corral_result *res = result_new();
	if (!res) {
		audit_lost(s);
		return;
	}
	const char *d = c->plan.display;
	if (c->plan.command)
		res->command = strdup(c->plan.command);
	else if (!c->plan.argv && d) /* a pipeline: "$ A | B" */
		res->command = strdup(d + (strncmp(d, "$ ", 2) ? 0 : 2));
	res->argv = c->plan.argv ? strv_copy(c->plan.argv) : NULL;
	res->exit_code = -1;
	res->duration_ms = mono_ms() - c->t_start;
	struct audit_run r = {
	    .res = res,
	    .kind = kind,
	    .parent = parent,
	    .cwd = c->cwd ? c->cwd : s->o->workspace,
	    .policy_hash = c->policy_hash[0] ? c->policy_hash : NULL,
	    .started_at_ms = c->started_wall_ms,
	    .cancelled = true,
	    .unknown = AUDIT_UNKNOWN_USAGE | AUDIT_UNKNOWN_OUTPUT_BYTES | AUDIT_UNKNOWN_ISOLATION |
	               AUDIT_UNKNOWN_VIOLATIONS | AUDIT_UNKNOWN_REDACTIONS,
	};
	audit_write(s, &r);
	corral_result_free(res);
}

/* A pipeline: each stage (kind pipeline_stage), then the call as their parent (kind
 * mcp_call, the pipeline's id, its pipefail status). */
static void audit_pipeline(struct server *s, const struct call *c,
                           const struct corral_pipeline_result *pr)
{
	if (!s->audit)
		return;
	for (size_t i = 0; i < pr->n_stages; i++) {
		const struct corral_result *st = pr->stages[i];
		if (!st) /* no result (defensive): nothing to record for it */
			continue;
		audit_exec(s, c, st, "pipeline_stage", pr->id,
		           c->cancelled && st->signal && !st->timed_out &&
		               st->limit == CORRAL_HIT_NONE,
		           NULL);
	}
	const char *d = c->plan.display ? c->plan.display : "pipeline";
	struct corral_result *sum = audit_pipeline_summary(pr, d + (strncmp(d, "$ ", 2) ? 0 : 2));
	if (!sum) {
		audit_lost(s);
		return;
	}
	struct audit_run r = {
	    .res = sum,
	    .kind = "mcp_call",
	    .cwd = c->cwd ? c->cwd : s->o->workspace,
	    .policy_hash = c->policy_hash[0] ? c->policy_hash : NULL,
	    .started_at_ms = c->started_wall_ms,
	    .cancelled = c->cancelled || pr->cancelled,
	    .redactions = sum->redactions,
	};
	audit_write(s, &r);
	corral_result_free(sum);
}

static char **strv_copy(char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	char **o = calloc(n + 1, sizeof(*o));
	for (size_t i = 0; o && i < n; i++)
		if (!(o[i] = strdup(v[i]))) {
			for (size_t k = 0; k < i; k++)
				free(o[k]);
			free(o);
			return NULL;
		}
	return o;
}

/* A background job as an execution (kind job), once, when it ends. A job of its own has
 * its sandbox's result (usage, isolation, violations, a setup error); a job in a session has
 * the session's isolation and no usage of its own (the kernel counts it in the shell's).
 * Neither knows its byte counts per stream (its output goes into one ring, after
 * redaction): those columns are null. */
static void audit_job(struct server *s, struct mjob *j, bool cancelled)
{
	if (j->recorded)
		return;
	j->recorded = true;
	struct corral_job_output o;
	struct corral_error err = {0};
	bool out = s->o->audit_output;
	struct corral_result *res = NULL;
	if (s->audit && corral_job_read(j->j, out ? 0 : UINT64_MAX, out ? 0 : 1, &o, &err) == 0) {
		res = result_new();
		if (!res) {
			corral_job_output_free(&o);
			audit_lost(s);
		}
	}
	if (res) {
		const struct corral_result *sr = corral_job_sandbox_result(j->j);
		unsigned unknown = AUDIT_UNKNOWN_OUTPUT_BYTES;
		snprintf(res->id, sizeof(res->id), "%s", corral_job_id(j->j));
		res->command = strdup(corral_job_command(j->j));
		res->exited = !o.running && o.exited;
		res->exit_code = res->exited ? o.exit_code : -1;
		res->signal = o.signal;
		res->limit = o.limit;
		res->timed_out = j->expired || (sr && sr->timed_out);
		if (res->timed_out && res->limit == CORRAL_HIT_NONE)
			res->limit = CORRAL_HIT_TIMEOUT;
		res->duration_ms = o.duration_ms;
		res->redactions = o.redactions;
		memcpy(res->redactions_by_kind, o.redactions_by_kind, sizeof(res->redactions_by_kind));
		res->redaction_mode = o.redaction_mode;
		if (out) {
			res->stdout_buf = o.stdout_buf;
			res->stdout_len = o.stdout_len;
			res->stderr_buf = o.stderr_buf;
			res->stderr_len = o.stderr_len;
			o.stdout_buf = o.stderr_buf = NULL;
		}
		const struct corral_result *iso = sr ? sr : j->iso;
		if (iso) {
			res->mode = iso->mode;
			for (size_t i = 0; i < iso->n_layers; i++)
				result_add_layer(res, iso->layers[i].name, iso->layers[i].applied,
				                 iso->layers[i].detail);
		} else {
			unknown |= AUDIT_UNKNOWN_ISOLATION;
		}
		char *viol = NULL;
		if (sr) {
			res->argv = strv_copy(sr->argv);
			res->user_ms = sr->user_ms;
			res->sys_ms = sr->sys_ms;
			res->max_rss_kb = sr->max_rss_kb;
			res->error = sr->error;
			viol = result_violations_json(sr);
		} else {
			unknown |= AUDIT_UNKNOWN_USAGE | AUDIT_UNKNOWN_VIOLATIONS;
		}
		struct audit_run r = {
		    .res = res,
		    .kind = "job",
		    .parent = j->session[0] ? j->session : NULL,
		    .cwd = j->cwd,
		    .policy_hash = j->policy_hash[0] ? j->policy_hash : NULL,
		    .started_at_ms = j->started_wall,
		    .cancelled = cancelled,
		    .violations_json = viol,
		    .redactions = o.redactions,
		    .unknown = unknown,
		};
		audit_write(s, &r);
		free(viol);
		corral_result_free(res);
		corral_job_output_free(&o);
	}
	free(j->cwd);
	j->cwd = NULL;
	corral_result_free(j->iso);
	j->iso = NULL;
}

static void audit_queries(struct server *s, const json_t *answers)
{
	size_t i;
	json_t *a;
	json_array_foreach(answers, i, a)
	{
		if (!audit_ready(s))
			continue;
		char *d = json_dumps(a, JSON_COMPACT | JSON_PRESERVE_ORDER);
		struct corral_error err = {0};
		if (!d)
			corral_set_error(&err, CORRAL_ENOMEM, ENOMEM, "audit",
			                 "audit: out of memory");
		if (!d || audit_record_event(s->audit, "policy_query", NULL, d, &err) < 0)
			audit_failed(s, &err);
		else
			s->audit_fails_in_row = 0;
		free(d);
	}
}

static void audit_start(struct server *s)
{
	if (s->o->audit_off)
		return;
	/* Every call's record is written while its sandbox's init, a fork of this process, is
	 * still alive: SQLite's cache pages would be copied on the first write of each, once
	 * per call (DESIGN.md §18). The inits never use SQLite. */
	audit_use_nofork_pagecache();
	struct corral_error err = {0};
	if (audit_open(s->o->audit_path, &s->audit, &err) < 0) {
		logmsg("%s (serving without an audit record; calls are not affected)", err.message);
		s->audit = NULL;
		return;
	}
	if (s->o->audit_retention_set)
		audit_set_retention(s->audit, s->o->audit_max_age_ms, s->o->audit_max_rows);
	/* The store's upkeep (its WAL checkpoint syncs to disk: 5-19 ms on the CI machine,
	 * every 30-odd records) waits for idle time, not for the call whose record comes due. */
	audit_defer_upkeep(s->audit);
}

/* When the store's upkeep is due: once the server has been idle for POOL_IDLE_MS with no
 * run call running or queued (-1: not due, or not idle; the end of the busy spell comes
 * with an event). */
static int upkeep_timeout(const struct server *s)
{
	if (!audit_upkeep_due(s->audit) || s->running || s->n_queued)
		return -1;
	uint64_t t = mono_ms(), due = s->busy_at + POOL_IDLE_MS;
	return t >= due ? 0 : (int)(due - t);
}

static void upkeep_when_idle(struct server *s)
{
	if (upkeep_timeout(s) == 0)
		audit_upkeep(s->audit);
}

static void audit_stop(struct server *s)
{
	/* Records lost to a failing store: their count goes on the record now (once, whatever
	 * the pause), or the gap would be recorded only by a next server's write. */
	int gap = 0;
	struct corral_error err = {0};
	if (s->audit && audit_missed(s->audit))
		gap = audit_flush_gap(s->audit, &err);
	audit_upkeep(s->audit); /* what was left for idle time */
	if (s->audit_failed > 1 || gap)
		logmsg("audit: %llu records could not be written to %s%s",
		       (unsigned long long)s->audit_failed, s->audit ? audit_path(s->audit) : "?",
		       gap > 0   ? "; the gap is recorded (a store_unavailable event)"
		       : gap < 0 ? "; the gap could not be recorded either"
		                 : "");
	audit_close(s->audit);
	s->audit = NULL;
	free(s->client_info);
	s->client_info = NULL;
}

/* ---- descriptors ------------------------------------------------------------------------ */

/* Descriptors open in this process, or -errno when they cannot be counted (EMFILE: not even
 * one is free to open /proc/self/fd). Since Linux 6.2 the size of /proc/self/fd is the
 * count: one stat (2-2.5 us in a loop on the 2-core machine, with 42 open), where listing
 * them takes 18-22 us, and it needs no free descriptor. An older kernel says 0 there, and
 * is listed. */
static int count_fds(void)
{
	struct stat st;
	if (stat("/proc/self/fd", &st) == 0 && st.st_size > 0 && st.st_size < INT_MAX)
		return (int)st.st_size;
	int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	char buf[4096];
	int n = 0;
	for (;;) {
		long r = syscall(SYS_getdents64, dfd, buf, sizeof(buf));
		if (r <= 0)
			break;
		for (long off = 0; off < r;) {
			struct dirent64 *de = (struct dirent64 *)(buf + off);
			off += de->d_reclen;
			if (de->d_name[0] != '.')
				n++;
		}
	}
	close(dfd);
	return n - 1; /* not the directory itself */
}

/* Descriptors one running sandbox takes: as measured for a call that built its own, else
 * for a parked one (which holds what a call's would), else a guess. */
static int fd_per_call(const struct server *s)
{
	return s->fd_per_call   ? s->fd_per_call
	       : s->fd_per_park ? s->fd_per_park
	                        : FD_PER_CALL_GUESS;
}

/* Is there room for one more sandbox while others run? Fills err when not. *before is the
 * count of open descriptors (or <0), for measuring what the launch takes. */
static bool fd_room(struct server *s, int *before, struct corral_error *err)
{
	struct rlimit rl;
	*before = -1;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return true;
	/* With nothing running, always try: the launcher reports its own error, and that is
	 * how a server learns it has recovered. Nothing to check then, so the descriptors are
	 * counted (count_fds(): a stat, or a listing before Linux 6.2; twice a call) only to
	 * measure what a launch takes, when the call builds its own sandbox (no parked one
	 * is there). A prebuilt call's descriptors are already open when it starts; they were
	 * counted when its sandbox was built (fd_per_park), and an agent's one-at-a-time
	 * calls, all prebuilt, count nothing. Calls that run beside others are counted
	 * always. */
	if (s->running == 0) {
		if (!s->n_pool)
			*before = count_fds();
		return true;
	}
	*before = count_fds();
	int need = fd_per_call(s) + FD_MARGIN;
	if (*before >= 0 && (uint64_t)*before + (uint64_t)need <= (uint64_t)rl.rlim_cur)
		return true;
	if (*before < 0 && *before != -EMFILE && *before != -ENFILE)
		return true; /* no /proc: cannot tell, let the launcher try */
	err->code = CORRAL_ESYS;
	err->sys_errno = EMFILE;
	snprintf(err->step, sizeof(err->step), "spawn");
	if (*before >= 0)
		snprintf(
		    err->message, sizeof(err->message),
		    "spawn: %s: the server has %d of its %llu descriptors in use by %u running "
		    "calls, and a sandbox needs about %d; the call was not started. Try again "
		    "when other calls have finished; the operator can raise the server's "
		    "open-files limit (ulimit -n) or lower --max-concurrent",
		    strerror(EMFILE), *before, (unsigned long long)rl.rlim_cur, s->running, need);
	else
		snprintf(err->message, sizeof(err->message),
		         "spawn: %s: every one of the server's %llu descriptors is in use by %u "
		         "running calls; the call was not started. Try again when other calls have "
		         "finished; the operator can raise the server's open-files limit (ulimit "
		         "-n) or lower --max-concurrent",
		         strerror(-*before), (unsigned long long)rl.rlim_cur, s->running);
	return false;
}

/* Unlink from the live list; freed after the current batch of events (an event for it may
 * still be pending in that batch). */
static void call_retire(struct server *s, struct call *c)
{
	if (c->state == CALL_DONE)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		s->calls = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
	if (c->state == CALL_RUNNING) {
		if (c->proc)
			epoll_ctl(s->epfd, EPOLL_CTL_DEL, corral_proc_fd(c->proc), NULL);
		if (c->pl)
			epoll_ctl(s->epfd, EPOLL_CTL_DEL, corral_pipeline_fd(c->pl), NULL);
		if (!c->stateful)
			s->running--;
	}
	if (c->sess && c->sess->waiting == c)
		c->sess->waiting = NULL;
	if (c->jkill && c->jkill->killer == c)
		c->jkill->killer = NULL;
	c->state = CALL_DONE;
	c->dnext = s->done;
	s->done = c;
}

static void respond(struct server *s, struct call *c, json_t *result)
{
	/* run_code in mode none: its code file goes before the reply, so a client that looks
	 * right after it finds nothing left (the run has ended when a call responds) */
	mcp_plan_remove_code(&c->plan);
	if (c->cancelled) { /* the specification: a cancelled request gets no response */
		json_decref(result);
		return;
	}
	char *line = result ? jr_result_line(c->id, result) : NULL;
	if (!line)
		line = jr_error_line(c->id, JR_INTERNAL_ERROR,
		                     "internal error: out of memory building the tool result");
	send_line(s, line);
	s->replied_at = mono_ms();
}

/* Keep the latest output bytes of a call with a progress token, for its progress messages:
 * a ring of PROGRESS_TAIL bytes, allocated at the first output (none without a token). */
static void track_tail(struct call *c, const char *buf, size_t n)
{
	if (!c->progress_token || !n)
		return;
	if (!c->tail && !(c->tail = malloc(PROGRESS_TAIL)))
		return;
	if (n >= PROGRESS_TAIL) {
		memcpy(c->tail, buf + n - PROGRESS_TAIL, PROGRESS_TAIL);
		c->tail_pos = 0;
		c->tail_wrapped = true;
		return;
	}
	size_t k = PROGRESS_TAIL - c->tail_pos;
	if (k > n)
		k = n;
	memcpy(c->tail + c->tail_pos, buf, k);
	memcpy(c->tail, buf + k, n - k);
	if (c->tail_pos + n >= PROGRESS_TAIL)
		c->tail_wrapped = true;
	c->tail_pos = (c->tail_pos + n) % PROGRESS_TAIL;
}

/* The progress message: "elapsed 1.5s, 1234 bytes out, last: " and the latest output lines
 * (at most PROGRESS_LINES, each cut at LAST_LINE_MAX bytes with "...", blank ones skipped,
 * joined by newlines; the line still being written counts). When the ring has wrapped, its
 * first line is the end of a longer one: shown as "..." and its last LAST_LINE_MAX bytes.
 * malloc'ed. */
static char *progress_text(const struct call *c, uint64_t elapsed_ms)
{
	char data[PROGRESS_TAIL];
	size_t n = 0;
	if (c->tail && c->tail_wrapped) {
		memcpy(data, c->tail + c->tail_pos, PROGRESS_TAIL - c->tail_pos);
		memcpy(data + PROGRESS_TAIL - c->tail_pos, c->tail, c->tail_pos);
		n = PROGRESS_TAIL;
	} else if (c->tail) {
		memcpy(data, c->tail, c->tail_pos);
		n = c->tail_pos;
	}
	/* the lines, newest first: [start, end) of each */
	size_t st[PROGRESS_LINES], en[PROGRESS_LINES], k = 0, end = n;
	bool frag_last = false; /* the oldest kept line is the ring's first, cut at its start */
	while (end > 0 && k < PROGRESS_LINES) {
		size_t b = end;
		while (b > 0 && data[b - 1] != '\n')
			b--;
		if (b < end) {
			st[k] = b;
			en[k] = end;
			frag_last = b == 0 && c->tail_wrapped;
			k++;
		}
		end = b > 0 ? b - 1 : 0;
	}
	size_t kept = k;
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (!f)
		return NULL;
	fprintf(f, "elapsed %.1fs, %llu bytes out", (double)elapsed_ms / 1000.0,
	        (unsigned long long)c->out_bytes);
	if (k)
		fputs(", last: ", f);
	while (k--) {
		const char *l = data + st[k];
		size_t ll = en[k] - st[k];
		bool cut = false, fragment = frag_last && k == kept - 1;
		if (ll > LAST_LINE_MAX) {
			if (fragment) /* the end of a line longer than the ring */
				l += ll - LAST_LINE_MAX;
			ll = LAST_LINE_MAX;
			cut = true;
		}
		/* a fragment starts where the ring does: not inside a UTF-8 sequence */
		for (int i = 0; fragment && i < 3 && ll && ((unsigned char)*l & 0xc0) == 0x80; i++) {
			l++;
			ll--;
		}
		char *clean = mcp_utf8_clean(l, ll);
		fprintf(f, "%s%s%s%s", fragment ? "..." : "", clean ? clean : "",
		        cut && !fragment ? "..." : "", k ? "\n" : "");
		free(clean);
	}
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

static void on_output(void *ud, int stream, const char *buf, size_t len)
{
	(void)stream;
	struct call *c = ud;
	c->out_bytes += len;
	track_tail(c, buf, len);
}

/* A session's output belongs to the shell_exec waiting on it (none between commands). */
static void session_output(void *ud, int stream, const char *buf, size_t len)
{
	struct msess *m = ud;
	if (m->waiting)
		on_output(m->waiting, stream, buf, len);
}

static void start_pipeline(struct server *s, struct call *c);

/* ---- parked sandboxes (--prebuild; DESIGN §18) -------------------------------------------
 * A parked sandbox is a whole sandbox of one plan (namespaces, mounts, limits; the init
 * waiting before the command), built while the server is idle. A call whose plan key
 * matches (launch_plan_key: everything the sandbox is made of, with the identity of the
 * protected and writable paths) gets it instead of a fresh one and runs its command there;
 * it is never used again. Nothing is shared between calls, so the isolation is the same;
 * the result says prebuilt_ms. A key that does not match (another cwd or environment, a
 * protected path that appeared, was replaced or went away) drops the pool, and the next
 * refill builds from the new call's configuration. */

/* Drop the parked sandboxes: killed now, reaped later (pool_reap), off the call's path. */
static void pool_drop(struct server *s)
{
	while (s->pool) {
		struct parked *e = s->pool;
		s->pool = e->next;
		proc_signal_init(e->p, SIGKILL);
		e->next = s->pool_dead;
		s->pool_dead = e;
	}
	s->n_pool = 0;
}

static void pool_reap(struct server *s)
{
	while (s->pool_dead) {
		struct parked *e = s->pool_dead;
		s->pool_dead = e->next;
		corral_proc_destroy(e->p);
		free(e);
	}
}

#ifdef MCP_NO_LAUNCH
static corral_proc *pool_take(struct server *s, const struct call *c)
{
	(void)s;
	(void)c;
	return NULL;
}
static void pool_remember(struct server *s, const struct call *c)
{
	(void)s;
	(void)c;
}
static int pool_timeout(struct server *s)
{
	(void)s;
	return -1;
}
static void pool_refill(struct server *s)
{
	(void)s;
}
#else
static bool pool_aged(const struct parked *e, uint64_t t)
{
	return t - e->born >= POOL_MAX_AGE_MS;
}

/* Whether a call can run in a parked sandbox: only run_command (run_code's code travels in
 * its environment, so no two calls share a plan), without stdin data and the like. */
static bool pool_eligible(const struct server *s, const struct call *c)
{
	return s->o->prebuild && !s->pool_off && c->plan.tool == TOOL_RUN_COMMAND &&
	       proc_parkable(c->plan.cfg);
}

static corral_proc *pool_take(struct server *s, const struct call *c)
{
	const corral_config *cfg = c->plan.cfg;
	uint64_t now = mono_ms();
	s->pool_b2b = pool_eligible(s, c) && s->replied_at && now - s->replied_at < POOL_IDLE_MS;
	if (!s->pool || !pool_eligible(s, c))
		return NULL;
	uint8_t key[32];
	struct corral_error err = {0};
	if (launch_plan_key(cfg, s->hc, key, &err) < 0) {
		/* out of descriptors: the parked sandboxes hold some; give them back first */
		if (err.sys_errno == EMFILE || err.sys_errno == ENFILE) {
			pool_drop(s);
			pool_reap(s);
			s->pool_wait_until = mono_ms() + POOL_ROOM_WAIT_MS;
		}
		return NULL; /* the plain launch reports what is wrong */
	}
	uint64_t t = mono_ms();
	for (struct parked **pp = &s->pool; *pp; pp = &(*pp)->next) {
		struct parked *e = *pp;
		if (memcmp(e->key, key, sizeof(key)) != 0 || pool_aged(e, t) ||
		    !proc_parked_ok(e->p))
			continue;
		*pp = e->next;
		s->n_pool--;
		corral_proc *p = e->p;
		free(e);
		if (proc_unpark(p, cfg, &err) == 0) {
			s->pool_fails = 0;
			s->pool_misses = 0;
			s->pool_target = s->o->prebuild;
			return p;
		}
		corral_proc_destroy(p);
		return NULL;
	}
	/* built for another plan, or the host changed since: drop them, and build one (not
	 * all N) for the next plan until a call uses it, so that alternating plans cost one
	 * build per call at most */
	pool_drop(s);
	s->pool_target = 1;
	s->pool_misses++;
	return NULL;
}

/* A call ran in a sandbox: the next refill builds for calls like it. Only a call that
 * started (one that was refused tells nothing about the next). */
static void pool_remember(struct server *s, const struct call *c)
{
	if (!pool_eligible(s, c))
		return;
	corral_config *t = corral_config_dup(c->plan.cfg);
	if (!t)
		return;
	corral_config_set_output_cb(t, NULL, NULL);
	corral_config_free(s->pool_tmpl);
	s->pool_tmpl = t;
}

/* What the next refill builds: the latest call that ran and could use a parked sandbox, or
 * before the first one, a run_command of the server's own policy (its argv a stand-in: a
 * parked sandbox's preflight is each call's own). NULL: nothing to build. */
static corral_config *pool_template(struct server *s)
{
	if (!s->pool_tmpl && s->o->base) {
		static const char *const argv[] = {"true", NULL};
		corral_config *c = corral_config_dup(s->o->base);
		if (!c || corral_config_set_argv(c, argv, NULL) < 0) {
			corral_config_free(c);
			return NULL;
		}
		s->pool_tmpl = c;
	}
	return s->pool_tmpl && proc_parkable(s->pool_tmpl) ? s->pool_tmpl : NULL;
}

/* Whether the next sandbox is built at once, beside the running call (pipelined), rather
 * than after an idle pause: calls that come back to back never leave the server idle, and
 * while one runs the loop mostly waits for it. Only when the pool is empty, a call runs,
 * that call came back to back (spaced calls, an agent's, are served by the idle refill and
 * never share the CPU with a build), and calls have not missed twice in a row (plans that
 * alternate would throw every such build away). */
static bool pool_at_once(const struct server *s)
{
	return !s->n_pool && s->running > 0 && s->pool_b2b && s->pool_misses < 2;
}

/* Milliseconds until a refill is due (-1: none): after the server was idle, or at once
 * (pool_at_once). */
static int pool_timeout(struct server *s)
{
	if (!s->o->prebuild || s->pool_off || s->stop || !pool_template(s))
		return -1;
	uint64_t t = mono_ms();
	if (!s->pool_target)
		s->pool_target = s->o->prebuild;
	uint64_t due = pool_at_once(s) ? t : s->busy_at + POOL_IDLE_MS;
	if (s->n_pool >= s->pool_target && !s->pool_dead) {
		if (!s->pool)
			return -1;
		/* full: due when the oldest ages (it is rebuilt then) */
		uint64_t aged = s->pool->born + POOL_MAX_AGE_MS;
		if (aged > due)
			due = aged;
	}
	if (due < s->pool_wait_until)
		due = s->pool_wait_until;
	return t >= due ? 0 : (int)(due - t);
}

/* Builds keep failing (or dying before use): drop what is parked and try again later. */
static void pool_pause(struct server *s, const char *why)
{
	logmsg("--prebuild: %u sandboxes built ahead failed in a row (last: %s); calls build "
	       "their own, next try in %d s",
	       s->pool_fails, why, POOL_PAUSE_MS / 1000);
	pool_drop(s);
	pool_reap(s);
	s->pool_fails = 0;
	s->pool_wait_until = mono_ms() + POOL_PAUSE_MS;
}

static void pool_refill(struct server *s)
{
	if (pool_timeout(s) != 0)
		return;
	uint64_t t = mono_ms();
	/* reaping waits for each dropped init to end: only when idle, never beside a call */
	if (t - s->busy_at >= POOL_IDLE_MS)
		pool_reap(s);
	/* the oldest first: rebuilt, so that what a parked sandbox shows of the host (its
	 * read-only system files) is never older than POOL_MAX_AGE_MS */
	for (struct parked **pp = &s->pool; *pp;) {
		struct parked *e = *pp;
		bool aged = pool_aged(e, t), dead = !aged && !proc_parked_ok(e->p);
		if (aged || dead) {
			*pp = e->next;
			s->n_pool--;
			corral_proc_destroy(e->p);
			free(e);
			if (dead) /* a setup step failed after the build */
				s->pool_fails++;
		} else {
			pp = &e->next;
		}
	}
	if (s->pool_fails >= POOL_MAX_FAILS) {
		pool_pause(s, "a sandbox built ahead ended before it was used");
		return;
	}
	corral_config *tmpl = pool_template(s);
	if (s->n_pool >= s->pool_target || !tmpl)
		return;
	/* A parked sandbox holds descriptors (its pipes, its protected paths): never take the
	 * room a call needs (its own, and its plan key's while it is computed). */
	struct rlimit rl;
	int used = count_fds();
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && used >= 0) {
		int call = fd_per_call(s) + FD_MARGIN;
		int park = s->fd_per_park ? s->fd_per_park : POOL_FD_GUESS;
		if ((uint64_t)used + (uint64_t)(park + 2 * call) > (uint64_t)rl.rlim_cur) {
			s->pool_wait_until = t + POOL_ROOM_WAIT_MS;
			return;
		}
	}
	struct parked *e = calloc(1, sizeof(*e));
	struct corral_error err = {0};
	if (!e || proc_park(tmpl, &e->p, e->key, &err) < 0) {
		free(e);
		if (err.code == CORRAL_EUNAVAIL && !strcmp(err.step, "park")) {
			s->pool_off = true; /* no pid namespace on this host: never */
			logmsg("--prebuild is off: %s", err.message);
		} else if (++s->pool_fails >= POOL_MAX_FAILS) {
			pool_pause(s, err.message[0] ? err.message : "out of memory");
		} else if (s->pool_wait_until < t + POOL_IDLE_MS) {
			/* not again at once: a failure beside a running call may be that call's
			 * (its processes, its memory) */
			s->pool_wait_until = t + POOL_IDLE_MS;
		}
		return;
	}
	int after = count_fds();
	if (used >= 0 && after > used && after - used > s->fd_per_park)
		s->fd_per_park = after - used;
	e->born = mono_ms();
	/* newest last: the oldest is used first and ages out first */
	struct parked **pp = &s->pool;
	while (*pp)
		pp = &(*pp)->next;
	*pp = e;
	s->n_pool++;
	/* The pool is full and nothing runs: the server is idle until the next call. Every
	 * clone left the server's memory write-protected (the inits are copies of it), and
	 * that call's first write to each page would trap (a copy and a TLB flush, 23 us on
	 * the 2-core machine, about 30 a prebuilt call): the pages the inits still share
	 * are made the server's own now, in one madvise per run of them (6 us a page). */
	if (s->n_pool >= s->pool_target && s->running == 0)
		mem_unshare_cow(s->exe_path);
}
#endif

static void start_call(struct server *s, struct call *c)
{
	if (c->plan.tool == TOOL_RUN_PIPELINE) {
		start_pipeline(s, c);
		return;
	}
	struct corral_error err = {0};
	const corral_config *cfg = c->plan.cfg;
	c->started_wall_ms = wall_ms();
	policy_hash(cfg, c->policy_hash);
	free(c->cwd);
	c->cwd = strdup(cfg->cwd ? cfg->cwd : cfg->workspace);
	corral_config_set_output_cb(c->plan.cfg, on_output, c);
	int before, r = -1;
	if (fd_room(s, &before, &err)) {
		c->proc = pool_take(s, c);
		r = c->proc ? 0 : corral_spawn(c->plan.cfg, &c->proc, &err);
		if (r == 0)
			pool_remember(s, c);
	}
	if (r == 0 && before >= 0) {
		int after = count_fds();
		if (after > before && after - before > s->fd_per_call)
			s->fd_per_call = after - before;
	}
	/* The run has its own copy; drop ours (stdin data may be large). */
	corral_config_free(c->plan.cfg);
	c->plan.cfg = NULL;
	if (r == 0) {
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &c->w};
		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, corral_proc_fd(c->proc), &ev) < 0) {
			int e = errno;
			snprintf(err.message, sizeof(err.message),
			         "server: cannot watch the sandbox: epoll_ctl: %s", strerror(e));
			err.code = CORRAL_ESYS;
			err.sys_errno = e;
			corral_proc_destroy(c->proc);
			c->proc = NULL;
			r = -1;
		}
	}
	if (r < 0) {
		struct corral_result res;
		mcp_spawn_failed_result(&c->plan, s->o, &err, &res);
		audit_call(s, c, &res);
		respond(s, c, mcp_tool_result(&c->plan, &res, s->version));
		c->state = CALL_QUEUED; /* not counted as running */
		call_retire(s, c);
		return;
	}
	c->state = CALL_RUNNING;
	s->running++;
	c->t_start = c->t_progress = mono_ms();
}

static void step_pipeline(struct server *s, struct call *c);

/* A finished execution's record, then its CallToolResult (NULL when the call was
 * cancelled: no reply): res's JSON made once for both. */
static json_t *record_and_reply(struct server *s, const struct call *c,
                                const struct corral_result *res, const char *kind,
                                const char *parent)
{
	json_t *doc = c->cancelled ? NULL : result_json(res, true);
	audit_exec(s, c, res, kind, parent, c->cancelled, doc);
	return c->cancelled ? NULL : mcp_tool_result_of(&c->plan, res, doc, s->version);
}

static void step_call(struct server *s, struct call *c)
{
	if (c->pl) {
		step_pipeline(s, c);
		return;
	}
	struct corral_error err = {0};
	int r = corral_proc_step(c->proc, 0, &err);
	if (r == 0)
		return;
	if (r < 0) {
		char msg[700];
		snprintf(msg, sizeof(msg), "the sandbox could not be supervised: %s", err.message);
		respond(s, c, mcp_tool_error(msg));
	} else {
		struct corral_result *res = NULL;
		if (corral_proc_result(c->proc, &res, &err) == 0) {
			respond(s, c, record_and_reply(s, c, res, "mcp_call", NULL));
			corral_result_free(res);
		} else {
			respond(s, c, mcp_tool_error(err.message));
		}
	}
	call_retire(s, c);
}

static void start_queued(struct server *s)
{
	while (s->q_head && s->running < s->o->max_concurrent && !s->stop) {
		struct call *c = s->q_head;
		s->q_head = c->qnext;
		if (!s->q_head)
			s->q_tail = NULL;
		c->qnext = NULL;
		s->n_queued--;
		s->q_bytes -= c->q_bytes;
		start_call(s, c);
	}
}

static void unqueue(struct server *s, struct call *c)
{
	struct call **pp = &s->q_head, *prev = NULL;
	while (*pp && *pp != c) {
		prev = *pp;
		pp = &(*pp)->qnext;
	}
	if (!*pp)
		return;
	*pp = c->qnext;
	if (s->q_tail == c)
		s->q_tail = prev;
	c->qnext = NULL;
	s->n_queued--;
	s->q_bytes -= c->q_bytes;
}

static struct call *find_call(struct server *s, const json_t *id)
{
	for (struct call *c = s->calls; c; c = c->next)
		if (json_equal(c->id, (json_t *)id))
			return c;
	return NULL;
}

/* ---- progress --------------------------------------------------------------------------- */

static void send_progress(struct server *s, struct call *c, uint64_t t)
{
	uint64_t el = t - c->t_start;
	json_t *p = json_object();
	json_object_set(p, "progressToken", c->progress_token);
	json_object_set_new(p, "progress", json_integer((json_int_t)el));
	if (mcp_version_at_least(s->version, "2025-03-26")) {
		char *msg = progress_text(c, el);
		if (msg)
			json_object_set_new(p, "message", json_string(msg));
		free(msg);
	}
	send_line(s, jr_notification_line("notifications/progress", p));
}

static void progress_tick(struct server *s)
{
	uint64_t exp;
	ssize_t n = read(s->timerfd, &exp, sizeof(exp));
	(void)n;
	uint64_t t = mono_ms();
	for (struct call *c = s->calls; c; c = c->next)
		if (c->state == CALL_RUNNING && c->progress_token && !c->cancelled &&
		    t - c->t_progress >= PROGRESS_EVERY_MS) {
			c->t_progress = t;
			send_progress(s, c, t);
		}
}

static void update_progress_timer(struct server *s)
{
	bool want = false;
	for (struct call *c = s->calls; c && !want; c = c->next)
		want = c->state == CALL_RUNNING && c->progress_token && !c->cancelled;
	if (want == s->timer_armed)
		return;
	struct itimerspec its;
	memset(&its, 0, sizeof(its));
	if (want) {
		its.it_value.tv_nsec = PROGRESS_TICK_MS * 1000000L;
		its.it_interval.tv_nsec = PROGRESS_TICK_MS * 1000000L;
	}
	timerfd_settime(s->timerfd, 0, &its, NULL);
	s->timer_armed = want;
}

/* ---- methods ---------------------------------------------------------------------------- */

/* What the audit records of the client: the identifying strings of initialize's clientInfo,
 * each cut to a sane length (the rest of the object is the client's business). */
static void keep_client_info(struct server *s, const json_t *ci)
{
	static const char *const keys[] = {"name", "version", "title"};
	if (!json_is_object(ci))
		return;
	json_t *k = json_object();
	for (size_t i = 0; k && i < sizeof(keys) / sizeof(keys[0]); i++) {
		json_t *v = json_object_get(ci, keys[i]);
		if (!json_is_string(v))
			continue;
		size_t n = json_string_length(v);
		char *clean = mcp_utf8_clean(json_string_value(v), n > 256 ? 256 : n);
		if (clean)
			json_object_set_new(k, keys[i], json_string(clean));
		free(clean);
	}
	free(s->client_info);
	s->client_info = k ? json_dumps(k, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(k);
}

static void m_initialize(void *ctx, const struct jr_msg *m, struct jr_reply *r)
{
	struct server *s = ctx;
	if (s->initialized)
		return jr_fail(r, JR_INVALID_REQUEST,
		               "invalid request: already initialized (initialize is sent once per "
		               "connection)");
	if (!json_is_object(m->params))
		return jr_fail(r, JR_INVALID_PARAMS,
		               "invalid params: initialize needs params as an object with "
		               "protocolVersion, capabilities and clientInfo");
	json_t *v = json_object_get(m->params, "protocolVersion");
	if (!json_is_string(v))
		return jr_fail(r, JR_INVALID_PARAMS,
		               "invalid params: params.protocolVersion must be a string such as "
		               "\"%s\", not %s",
		               MCP_LATEST_VERSION, jr_type_name(v));
	json_t *caps = json_object_get(m->params, "capabilities");
	if (caps && !json_is_object(caps))
		return jr_fail(r, JR_INVALID_PARAMS,
		               "invalid params: params.capabilities must be an object, not %s",
		               jr_type_name(caps));
	/* a version with a NUL in it is none this server knows (not the one before the NUL) */
	s->version = mcp_negotiate_version(
	    strlen(json_string_value(v)) == json_string_length(v) ? json_string_value(v) : "");
	s->initialized = true;
	keep_client_info(s, json_object_get(m->params, "clientInfo"));

	const struct mcp_options *o = s->o;
	char *instr = NULL, tmo[64];
	char *ws = mcp_utf8_clean(o->workspace, strlen(o->workspace)); /* JSON text is UTF-8 */
	if (o->timeout_ms)
		snprintf(tmo, sizeof(tmo), "%.3g s", (double)o->timeout_ms / 1000.0);
	else
		snprintf(tmo, sizeof(tmo), "none");
	const char *prof = o->base->profile_name ? o->base->profile_name : "default";
	char *pclean = mcp_utf8_clean(prof, strlen(prof));
	/* whole, never cut: a path cut inside a UTF-8 sequence would not be JSON text */
	int n = asprintf(
	    &instr,
	    "corral runs commands in a Linux sandbox. Every run_command, run_code and "
	    "run_pipeline call gets a fresh sandbox: "
	    "the workspace %s is %s and is the current directory and HOME; the rest "
	    "of the system is read-only; /tmp is private and empty; %s; no process outlives "
	    "the call, and %s. For state across calls (cd, export, a server you come back "
	    "to), use shell_exec (a persistent sandboxed shell session) and job_start "
	    "(background jobs). Policy: profile %s. Timeout per call: %s (timeout_s can only "
	    "lower it). Up to %u run_command, run_code and run_pipeline calls run at once; "
	    "more wait in a queue. Ask can_i whether "
	    "a read, write, exec or connect is allowed before relying on it; the policy "
	    "cannot be changed from here.",
	    ws ? ws : "?", o->base->workspace_ro ? "read-only" : "read-write",
	    o->net == CORRAL_NET_HOST ? "the host network is shared" : "there is no network",
	    o->base->workspace_ro ? "nothing persists between calls"
	                          : "only files written to the workspace persist between calls",
	    pclean ? pclean : "?", tmo, o->max_concurrent);
	free(pclean);
	free(ws);
	json_t *info = json_pack("{s:s, s:s}", "name", "corral", "version", CORRAL_VERSION);
	if (mcp_version_at_least(s->version, "2025-06-18"))
		json_object_set_new(info, "title", json_string("corral sandbox"));
	if (n < 0) {
		json_decref(info);
		return jr_fail(r, JR_INTERNAL_ERROR, "internal error: out of memory");
	}
	r->result =
	    json_pack("{s:s, s:{s:{s:b}}, s:o, s:s}", "protocolVersion", s->version, "capabilities",
	              "tools", "listChanged", 0, "serverInfo", info, "instructions", instr);
	free(instr);
}

static void m_ping(void *ctx, const struct jr_msg *m, struct jr_reply *r)
{
	(void)ctx;
	(void)m;
	r->result = json_object();
}

static void m_tools_list(void *ctx, const struct jr_msg *m, struct jr_reply *r)
{
	struct server *s = ctx;
	if (m->params && !json_is_object(m->params))
		return jr_fail(r, JR_INVALID_PARAMS,
		               "invalid params: params must be an object, not %s",
		               jr_type_name(m->params));
	json_t *cursor = json_object_get(m->params, "cursor");
	if (cursor && !json_is_string(cursor))
		return jr_fail(r, JR_INVALID_PARAMS,
		               "invalid params: params.cursor must be a string, not %s",
		               jr_type_name(cursor));
	/* One page: a cursor can only come from a page we never sent. */
	if (cursor)
		return jr_fail(r, JR_INVALID_PARAMS,
		               "invalid params: params.cursor: unknown cursor (this server sends "
		               "one page)");
	r->result = mcp_tools_list(s->o, s->version);
}

/* ---- sessions, jobs, pipelines ----------------------------------------------------------
 * The server holds shell sessions and background jobs across calls. Each has its own watch
 * in the epoll set for its whole life (not only while a call waits on it), so that output of
 * background processes keeps flowing and a job's ring keeps filling. A shell_exec waits on
 * its session; a job_kill waits for its job to end; everything else is answered at once.
 * Sessions idle longer than --session-idle are closed; a job running longer than
 * --job-timeout is stopped. */

static struct call *deferred_call(struct server *s, const json_t *id, const json_t *token,
                                  struct mcp_plan *plan)
{
	struct call *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->w.kind = W_CALL;
	c->srv = s;
	c->id = json_deep_copy(id);
	c->progress_token = token ? json_deep_copy(token) : NULL;
	c->plan = *plan;
	memset(plan, 0, sizeof(*plan));
	c->state = CALL_RUNNING;
	c->stateful = true;
	c->next = s->calls;
	if (s->calls)
		s->calls->prev = c;
	s->calls = c;
	c->t_start = c->t_progress = mono_ms();
	c->started_wall_ms = wall_ms();
	return c;
}

static struct msess *find_session(struct server *s, const char *id)
{
	for (struct msess *m = s->sessions; m; m = m->next)
		if (!strcmp(corral_session_id(m->s), id))
			return m;
	return NULL;
}

static struct mjob *find_job(struct server *s, const char *id)
{
	for (struct mjob *j = s->jobs; j; j = j->next)
		if (!strcmp(corral_job_id(j->j), id))
			return j;
	return NULL;
}

static unsigned jobs_running(const struct server *s)
{
	unsigned n = 0;
	for (struct mjob *j = s->jobs; j; j = j->next)
		n += !j->done;
	return n;
}

static void session_free(struct server *s, struct msess *m)
{
	for (struct msess **pp = &s->sessions; *pp; pp = &(*pp)->next)
		if (*pp == m) {
			*pp = m->next;
			break;
		}
	s->n_sessions--;
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, corral_session_fd(m->s), NULL);
	const char *sid = corral_session_id(m->s);
	/* the jobs still running in it end with it: on the record as cancelled */
	for (struct mjob *j = s->jobs; j; j = j->next)
		if (!j->done && !strcmp(j->session, sid) && corral_job_running(j->j))
			j->kill_asked = true;
	if (m->waiting) {
		/* the command it runs has no result: closed under it (shell_close, the exit) */
		audit_cut_off(s, m->waiting, "session_cmd", sid);
		m->waiting->sess = NULL;
		respond(s, m->waiting,
		        mcp_tool_error("the session was closed while the command ran"));
		call_retire(s, m->waiting);
		m->waiting = NULL; /* what the shell writes as it closes goes nowhere */
	}
	corral_session_close(m->s);
	m->s = NULL;
	free(m->cwd);
	m->cwd = NULL;
	m->dead = true;
	m->next = s->dead_sessions;
	s->dead_sessions = m;
}

static void session_answer(struct server *s, struct msess *m)
{
	struct call *c = m->waiting;
	struct corral_result *res = NULL;
	struct corral_error err = {0};
	if (!c)
		return;
	m->waiting = NULL;
	c->sess = NULL;
	if (corral_session_result(m->s, &res, &err) < 0) {
		respond(s, c, mcp_tool_error(err.message));
		call_retire(s, c);
		return;
	}
	json_t *out = record_and_reply(s, c, res, "session_cmd", corral_session_id(m->s));
	if (out) {
		char note[300];
		if (res->session_restarted)
			snprintf(
			    note, sizeof(note),
			    "session %s: the command did not stop after its timeout and the "
			    "shell was restarted: its working directory, variables, functions, "
			    "background processes and /tmp were lost (workspace files persist)",
			    res->session_id);
		else if (res->session_ended)
			snprintf(note, sizeof(note),
			         "session %s has ended (its shell exited); omit session to start a "
			         "new one",
			         res->session_id);
		else
			snprintf(note, sizeof(note), "session %s%s", res->session_id,
			         c->new_session ? " (new; pass it as session to continue in it)"
			                        : "");
		json_array_insert_new(json_object_get(out, "content"), 0,
		                      json_pack("{s:s, s:s}", "type", "text", "text", note));
	}
	respond(s, c, out);
	call_retire(s, c);
	bool ended = res->session_ended;
	corral_result_free(res);
	if (ended)
		session_free(s, m);
}

static void session_event(struct server *s, struct msess *m)
{
	if (m->dead)
		return;
	struct corral_error err = {0};
	int r = corral_session_step(m->s, 0, &err);
	if (r == 1)
		session_answer(s, m);
}

/* A job's state as job_schema has it, or NULL when it cannot be read (out of memory): the
 * caller fails the call then (mcp_tool_json(NULL) is NULL: an internal error) rather than
 * send a structuredContent without the keys its outputSchema requires. */
static json_t *job_json(const struct mjob *j)
{
	struct corral_job_output o;
	struct corral_error err = {0};
	if (corral_job_read(j->j, UINT64_MAX, 1, &o, &err) < 0)
		return NULL;
	json_t *v =
	    json_pack("{s:s, s:s, s:o, s:b, s:o, s:o, s:I, s:I, s:I}", "job", corral_job_id(j->j),
	              "command", corral_job_command(j->j), "session",
	              j->session[0] ? json_string(j->session) : json_null(), "running", o.running,
	              "exit_code", !o.running && o.exited ? json_integer(o.exit_code) : json_null(),
	              "signal", o.signal ? json_integer(o.signal) : json_null(), "duration_ms",
	              (json_int_t)o.duration_ms, "total_bytes", (json_int_t)o.total_bytes,
	              "dropped_bytes", (json_int_t)o.dropped_bytes);
	if (!v) {
		corral_job_output_free(&o);
		return NULL;
	}
	const char *lim = corral_limit_hit_name(o.limit);
	json_object_set_new(v, "limit", lim ? json_string(lim) : json_null());
	/* redaction of the job's output so far, as in a run's result */
	json_t *kinds = json_object();
	for (unsigned i = 0; i < 16; i++)
		if (o.redactions_by_kind[i] && corral_redaction_kind_name(i))
			json_object_set_new(kinds, corral_redaction_kind_name(i),
			                    json_integer((json_int_t)o.redactions_by_kind[i]));
	json_object_set_new(v, "redactions",
	                    json_pack("{s:s, s:I, s:o}", "mode", o.redaction_mode, "count",
	                              (json_int_t)o.redactions, "kinds", kinds));
	corral_job_output_free(&o);
	return v;
}

static void job_event(struct server *s, struct mjob *j)
{
	struct corral_error err = {0};
	if (j->dead || j->done)
		return;
	if (corral_job_step(j->j, 0, &err) != 1)
		return;
	j->done = true;
	j->ended = mono_ms();
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, corral_job_fd(j->j), NULL);
	json_t *v = job_json(j);
	audit_job(s, j, j->kill_asked);
	if (j->killer) {
		struct call *c = j->killer;
		j->killer = NULL;
		c->jkill = NULL;
		respond(s, c, mcp_tool_json(json_incref(v), false, s->version));
		call_retire(s, c);
	}
	json_decref(v);
	/* finished jobs are kept for job_output, the oldest dropped beyond the limit */
	size_t finished = 0;
	for (struct mjob *k = s->jobs; k; k = k->next)
		finished += k->done && !k->killer;
	while (finished > s->o->max_finished_jobs) {
		struct mjob **oldest = NULL;
		for (struct mjob **pp = &s->jobs; *pp; pp = &(*pp)->next)
			if ((*pp)->done && !(*pp)->killer &&
			    (!oldest || (*pp)->ended < (*oldest)->ended))
				oldest = pp;
		if (!oldest)
			break;
		struct mjob *d = *oldest;
		*oldest = d->next;
		corral_job_free(d->j);
		d->j = NULL;
		d->dead = true;
		d->next = s->dead_jobs;
		s->dead_jobs = d;
		finished--;
	}
}

static int stateful_timeout(struct server *s)
{
	int t = -1;
	uint64_t now = mono_ms();
	for (struct msess *m = s->sessions; m; m = m->next) {
		int n = corral_session_next_timeout_ms(m->s);
		if (n >= 0 && (t < 0 || n < t))
			t = n;
		if (s->o->session_idle_ms && !m->waiting) {
			struct corral_session_info in;
			corral_session_info(m->s, &in);
			if (in.jobs)
				continue; /* its running jobs keep it (they have --job-timeout) */
			uint64_t left = in.idle_ms >= s->o->session_idle_ms
			                    ? 0
			                    : s->o->session_idle_ms - in.idle_ms;
			if (t < 0 || left < (uint64_t)t)
				t = (int)(left > 60000 ? 60000 : left);
		}
	}
	for (struct mjob *j = s->jobs; j; j = j->next) {
		if (j->done)
			continue;
		int n = corral_job_next_timeout_ms(j->j);
		if (n >= 0 && (t < 0 || n < t))
			t = n;
		if (s->o->job_timeout_ms && !j->expired) {
			uint64_t end = j->started + s->o->job_timeout_ms;
			int left = end > now ? (int)(end - now > 60000 ? 60000 : end - now) : 0;
			if (t < 0 || left < t)
				t = left;
		}
	}
	return t;
}

/* Deadlines without readiness, idle expiry, job lifetimes. */
static void stateful_tick(struct server *s)
{
	uint64_t now = mono_ms();
	for (struct msess *m = s->sessions, *next; m; m = next) {
		next = m->next;
		if (corral_session_next_timeout_ms(m->s) == 0) {
			session_event(s, m);
			continue; /* it may be gone */
		}
		if (s->o->session_idle_ms && !m->waiting) {
			struct corral_session_info in;
			corral_session_info(m->s, &in);
			if (in.idle_ms >= s->o->session_idle_ms && !in.jobs) {
				logmsg("session %s closed after %llu s idle", in.id,
				       (unsigned long long)(in.idle_ms / 1000));
				session_free(s, m);
			}
		}
	}
	for (struct mjob *j = s->jobs; j; j = j->next) {
		if (j->done)
			continue;
		/* due, or already ended (a job_output read may have taken its last event) */
		if (corral_job_next_timeout_ms(j->j) == 0 || !corral_job_running(j->j))
			job_event(s, j);
		if (!j->done && !j->expired && s->o->job_timeout_ms &&
		    now >= j->started + s->o->job_timeout_ms && corral_job_running(j->j)) {
			j->expired = true;
			corral_job_kill(j->j, s->o->kill_after_ms, NULL);
		}
	}
}

/* The server is going: every job still running is killed, every session closed (a command
 * a session was running is recorded as cancelled by session_free: it has no result). The
 * jobs stay listed until shutdown_reap has given them their brief chance to end. */
static void stateful_shutdown(struct server *s)
{
	for (struct mjob *j = s->jobs; j; j = j->next) {
		if (!j->done && corral_job_running(j->j)) {
			j->kill_asked = true;
			corral_job_kill(j->j, 0, NULL);
		}
		if (j->killer) {
			j->killer->jkill = NULL;
			j->killer->cancelled = true;
			j->killer = NULL;
		}
	}
	while (s->sessions) {
		struct msess *m = s->sessions;
		if (m->waiting)
			m->waiting->cancelled = true; /* no answer: the server is going */
		session_free(s, m);                /* its jobs end with it */
	}
}

/* With an audit store, every killed run, pipeline and job may end in a result until
 * reap_until, all in one wait (their teardowns overlap); each is then on the record: with
 * its result, or, when it did not end in time, as cut off (cancelled, what is not known
 * null). Then the jobs are freed; corral_proc_destroy and corral_pipeline_destroy (at the
 * calls' retirement) reap whatever is left. */
static void shutdown_reap(struct server *s, uint64_t reap_until)
{
	size_t cap = 0;
	for (struct call *c = s->calls; c; c = c->next)
		cap++;
	for (struct mjob *j = s->jobs; j; j = j->next)
		cap++;
	struct pollfd *pfd = s->audit && cap ? calloc(cap, sizeof(*pfd)) : NULL;
	for (;;) {
		nfds_t n = 0;
		for (struct call *c = s->calls; c && s->audit; c = c->next) {
			if (c->state != CALL_RUNNING || (!c->proc && !c->pl) || c->reaped)
				continue;
			int r = c->proc ? corral_proc_step(c->proc, 0, NULL)
			                : corral_pipeline_step(c->pl, 0, NULL);
			if (r == 0) {
				if (pfd)
					pfd[n++] = (struct pollfd){.fd = c->proc ? corral_proc_fd(c->proc)
					                                         : corral_pipeline_fd(c->pl),
					                           .events = POLLIN};
				continue;
			}
			c->reaped = true;
			struct corral_result *res = NULL;
			struct corral_pipeline_result *pr = NULL;
			if (r == 1 && c->proc && corral_proc_result(c->proc, &res, NULL) == 0) {
				audit_call(s, c, res);
				corral_result_free(res);
			} else if (r == 1 && c->pl && corral_pipeline_result(c->pl, &pr, NULL) == 0) {
				audit_pipeline(s, c, pr);
				corral_pipeline_result_free(pr);
			} else { /* it could not be supervised, or has no result */
				audit_cut_off(s, c, "mcp_call", NULL);
			}
		}
		for (struct mjob *j = s->jobs; j && s->audit; j = j->next) {
			if (j->done)
				continue;
			if (corral_job_step(j->j, 0, NULL) != 0)
				j->done = true;
			else if (pfd)
				pfd[n++] = (struct pollfd){.fd = corral_job_fd(j->j), .events = POLLIN};
		}
		uint64_t t = mono_ms();
		if (n == 0 || t >= reap_until)
			break;
		/* readiness covers each one's own timers; the cap keeps a missed one cheap */
		uint64_t wait = reap_until - t < 50 ? reap_until - t : 50;
		poll(pfd, n, (int)wait);
	}
	free(pfd);
	for (struct call *c = s->calls; c && s->audit; c = c->next)
		if (c->state == CALL_RUNNING && (c->proc || c->pl) && !c->reaped) {
			audit_cut_off(s, c, "mcp_call", NULL);
			c->reaped = true;
		}
	while (s->jobs) {
		struct mjob *j = s->jobs;
		s->jobs = j->next;
		audit_job(s, j, j->kill_asked); /* once: not again when job_event recorded it */
		free(j->cwd);
		corral_result_free(j->iso);
		corral_job_free(j->j);
		free(j);
	}
}

static json_t *answer_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *answer_error(const char *fmt, ...)
{
	char msg[700];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return mcp_tool_error(msg);
}

static void stateful_call(struct server *s, const json_t *id, const json_t *token,
                          struct mcp_plan *plan, struct jr_reply *r)
{
	const json_t *a = plan->args;
	const char *sid = json_string_value(json_object_get(a, "session"));
	const char *jid = json_string_value(json_object_get(a, "job"));
	struct corral_error err = {0};
	switch (plan->tool) {
	case TOOL_SHELL_EXEC: {
		struct msess *m = NULL;
		bool fresh = false;
		if (sid) {
			m = find_session(s, sid);
			if (!m) {
				r->result = answer_error("session %s: no such session (it was "
				                         "closed, its shell exited, it "
				                         "expired idle, or it never existed); omit "
				                         "session to start a new "
				                         "one",
				                         sid);
				break;
			}
			if (m->waiting) {
				r->result = answer_error(
				    "session %s is busy with another command; wait for its result "
				    "(one "
				    "command at a time per session), or use another session",
				    sid);
				break;
			}
		} else {
			if (s->n_sessions >= s->o->max_sessions) {
				r->result = answer_error(
				    "too many sessions: %u are open (the server's limit); close "
				    "one with "
				    "shell_close, or reuse one by passing its id as session",
				    s->n_sessions);
				break;
			}
			corral_session *cs = NULL;
			m = calloc(1, sizeof(*m));
			if (!m) {
				r->result =
				    answer_error("the session could not start: out of memory");
				break;
			}
			/* the loop waits while a session closes: a shell that ignores SIGHUP is
			 * killed after 100 ms rather than the library's 2 s */
			struct corral_session_options so = {.term_timeout_ms = 100};
			/* The session's own timeout, for commands that name none, is the server's:
			 * plan->cfg carries this call's timeout_s, which is this call's alone. */
			corral_config *scfg = corral_config_dup(plan->cfg);
			int rc = -1;
			if (!scfg)
				corral_set_error(&err, CORRAL_ENOMEM, ENOMEM, "session",
				                 "session: out of memory");
			else if (corral_config_set_timeout_ms(scfg, s->o->timeout_ms,
			                                      s->o->kill_after_ms, &err) == 0) {
				/* a command's output shows in its shell_exec's progress messages */
				corral_config_set_output_cb(scfg, session_output, m);
				rc = corral_session_open(scfg, &so, &cs, &err);
			}
			corral_config_free(scfg);
			if (rc < 0) {
				free(m);
				audit_not_started(s, plan, "session_cmd", NULL, &err);
				r->result =
				    answer_error("the session could not start: %s", err.message);
				break;
			}
			struct epoll_event ev = {.events = EPOLLIN, .data.ptr = m};
			if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, corral_session_fd(cs), &ev) < 0) {
				corral_session_close(cs);
				free(m);
				r->result = answer_error("the session could not be watched: %s",
				                         strerror(errno ? errno : ENOMEM));
				break;
			}
			m->w.kind = W_SESSION;
			m->s = cs;
			policy_hash(plan->cfg, m->policy_hash);
			m->cwd = strdup(plan->cfg->cwd ? plan->cfg->cwd : plan->cfg->workspace);
			m->next = s->sessions;
			s->sessions = m;
			s->n_sessions++;
			fresh = true;
		}
		const char *cmd = json_string_value(json_object_get(a, "command"));
		/* this call's timeout_s, else the server's: the session's own (0: none) */
		uint64_t to = plan->timeout_ms;
		if (corral_session_begin(m->s, cmd, to, &err) < 0) {
			r->result = answer_error("%s", err.message);
			if (err.code == CORRAL_ESTATE || fresh)
				session_free(s, m); /* ended, or opened for nothing */
			break;
		}
		struct call *c = deferred_call(s, id, token, plan);
		if (!c) {
			r->code = JR_INTERNAL_ERROR;
			snprintf(r->message, sizeof(r->message), "internal error: out of memory");
			break;
		}
		c->sess = m;
		c->new_session = fresh;
		memcpy(c->policy_hash, m->policy_hash, sizeof(c->policy_hash));
		c->cwd = m->cwd ? strdup(m->cwd) : NULL;
		m->waiting = c;
		r->deferred = true;
		/* the command may be over already (a shell that died unnoticed): no event
		 * would come for it */
		session_event(s, m);
		return;
	}
	case TOOL_SHELL_CLOSE: {
		struct msess *m = find_session(s, sid);
		if (!m) {
			r->result = answer_error("session %s: no such session (already closed or "
			                         "expired?); shell_list shows the open ones",
			                         sid);
			break;
		}
		struct corral_session_info in;
		corral_session_info(m->s, &in);
		json_t *v = json_pack("{s:s, s:b, s:i}", "closed", sid, "was_busy", in.busy,
		                      "commands", (int)in.commands);
		session_free(s, m);
		r->result = mcp_tool_json(v, false, s->version);
		break;
	}
	case TOOL_SHELL_LIST: {
		json_t *arr = json_array();
		for (struct msess *m = s->sessions; m; m = m->next) {
			struct corral_session_info in;
			corral_session_info(m->s, &in);
			json_array_append_new(
			    arr, json_pack("{s:s, s:b, s:b, s:i, s:i, s:i, s:f, s:I, s:s}",
			                   "session", in.id, "alive", in.alive, "busy", in.busy,
			                   "commands", (int)in.commands, "restarts",
			                   (int)in.restarts, "jobs", (int)in.jobs, "idle_s",
			                   (double)in.idle_ms / 1000.0, "output_bytes",
			                   (json_int_t)in.output_bytes, "shell", in.shell));
		}
		r->result =
		    mcp_tool_json(json_pack("{s:o, s:i, s:f}", "sessions", arr, "max_sessions",
		                            (int)s->o->max_sessions, "idle_expiry_s",
		                            (double)s->o->session_idle_ms / 1000.0),
		                  false, s->version);
		break;
	}
	case TOOL_JOB_START: {
		if (jobs_running(s) >= s->o->max_jobs) {
			r->result =
			    answer_error("too many jobs: %u are running (the server's limit); "
			                 "stop one with job_kill, or wait for one to end",
			                 jobs_running(s));
			break;
		}
		corral_job *cj = NULL;
		int rc;
		struct msess *m = NULL;
		if (sid) {
			m = find_session(s, sid);
			if (!m) {
				r->result =
				    answer_error("session %s: no such session; omit session "
				                 "for a job in a sandbox of its own",
				                 sid);
				break;
			}
			rc = corral_session_job_start(m->s, plan->command, &cj, &err);
		} else {
			rc = corral_job_start(plan->cfg, &cj, &err);
		}
		if (rc < 0) {
			audit_not_started(s, plan, "job", sid, &err);
			r->result = answer_error("the job could not start: %s", err.message);
			break;
		}
		struct mjob *j = calloc(1, sizeof(*j));
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = j};
		if (!j || epoll_ctl(s->epfd, EPOLL_CTL_ADD, corral_job_fd(cj), &ev) < 0) {
			corral_job_free(cj);
			free(j);
			r->result = answer_error("the job could not be watched: %s",
			                         strerror(errno ? errno : ENOMEM));
			break;
		}
		j->w.kind = W_JOB;
		j->j = cj;
		if (sid)
			snprintf(j->session, sizeof(j->session), "%s", sid);
		j->started = mono_ms();
		j->started_wall = wall_ms();
		if (m) {
			memcpy(j->policy_hash, m->policy_hash, sizeof(j->policy_hash));
			if ((j->iso = result_new()) &&
			    corral_session_copy_isolation(m->s, j->iso) < 0) {
				corral_result_free(j->iso);
				j->iso = NULL;
			}
		} else {
			policy_hash(plan->cfg, j->policy_hash);
			j->cwd = strdup(plan->cfg->cwd ? plan->cfg->cwd : plan->cfg->workspace);
		}
		j->next = s->jobs;
		s->jobs = j;
		json_t *v = job_json(j);
		if (!v) {
			r->result = answer_error("job %s started, but its state could not be read (out "
			                         "of memory); job_list shows it, job_kill stops it",
			                         corral_job_id(cj));
			break;
		}
		json_object_set_new(v, "hint",
		                    json_string("read its output with job_output (pass next_offset "
		                                "back as since_offset); stop it with job_kill"));
		r->result = mcp_tool_json(v, false, s->version);
		break;
	}
	case TOOL_JOB_OUTPUT: {
		struct mjob *j = find_job(s, jid);
		if (!j) {
			r->result =
			    answer_error("job %s: no such job (finished jobs are kept for a "
			                 "while; job_list shows them)",
			                 jid);
			break;
		}
		json_t *so = json_object_get(a, "since_offset"),
		       *mb = json_object_get(a, "max_bytes");
		uint64_t since = so ? (uint64_t)json_integer_value(so) : 0;
		size_t max = mb ? (size_t)json_integer_value(mb) : 65536;
		/* The job's state first, then its bytes: a job this answer calls ended had written
		 * everything before its end was seen, and the read takes all that was waiting, so
		 * "running": false with "more": false is all of its output. (Taken the other way
		 * round, an end seen after the read could come with its last bytes left out, and
		 * a client that stopped at "running": false lost them.) */
		json_t *v = job_json(j);
		struct corral_job_output o;
		if (!v || corral_job_read(j->j, since, max, &o, &err) < 0) {
			json_decref(v);
			r->result = answer_error(
			    "%s", v ? err.message : "job_output: out of memory reading the job");
			break;
		}
		/* An offset past the end was never a next_offset of this job's (the end only
		 * grows): a client's mistake, said as such rather than read from the end. */
		if (since > o.total_bytes) {
			json_decref(v);
			uint64_t end = o.total_bytes;
			corral_job_output_free(&o);
			r->result = answer_error(
			    "invalid arguments for job_output: since_offset: %" PRIu64
			    " is past the end of job %s's output, which is %" PRIu64
			    " bytes so far (total_bytes); pass the next_offset of the previous "
			    "job_output, or 0 for everything still held",
			    since, jid, end);
			break;
		}
		json_object_set_new(v, "stdout", json_bytes(o.stdout_buf, o.stdout_len));
		json_object_set_new(v, "stderr", json_bytes(o.stderr_buf, o.stderr_len));
		json_object_set_new(v, "from_offset", json_integer((json_int_t)o.from_offset));
		json_object_set_new(v, "next_offset", json_integer((json_int_t)o.next_offset));
		json_object_set_new(v, "missed_bytes", json_integer((json_int_t)o.missed));
		/* against the larger of the two totals: output that arrived between the state and
		 * the read is in this page or still to come, never "no more" */
		json_int_t total = json_integer_value(json_object_get(v, "total_bytes"));
		if (total < (json_int_t)o.total_bytes)
			total = (json_int_t)o.total_bytes;
		json_object_set_new(v, "more", json_boolean((json_int_t)o.next_offset < total));
		corral_job_output_free(&o);
		r->result = mcp_tool_json(v, false, s->version);
		break;
	}
	case TOOL_JOB_KILL: {
		struct mjob *j = find_job(s, jid);
		if (!j) {
			r->result =
			    answer_error("job %s: no such job; job_list shows the jobs", jid);
			break;
		}
		if (j->done) {
			r->result = mcp_tool_json(job_json(j), false, s->version);
			break;
		}
		if (j->killer) {
			r->result = answer_error("job %s is already being stopped", jid);
			break;
		}
		corral_job_kill(j->j, s->o->kill_after_ms, &err);
		j->kill_asked = true;
		struct call *c = deferred_call(s, id, token, plan);
		if (!c) {
			r->code = JR_INTERNAL_ERROR;
			snprintf(r->message, sizeof(r->message), "internal error: out of memory");
			break;
		}
		c->jkill = j;
		j->killer = c;
		r->deferred = true;
		return;
	}
	case TOOL_JOB_LIST: {
		json_t *arr = json_array();
		bool whole = arr != NULL;
		for (struct mjob *j = s->jobs; whole && j; j = j->next)
			whole = json_array_append_new(arr, job_json(j)) == 0;
		if (!whole) {
			json_decref(arr);
			r->result = answer_error("job_list: out of memory reading the jobs' state; "
			                         "try again");
			break;
		}
		r->result =
		    mcp_tool_json(json_pack("{s:o, s:i, s:i}", "jobs", arr, "running",
		                            (int)jobs_running(s), "max_jobs", (int)s->o->max_jobs),
		                  false, s->version);
		break;
	}
	default:
		r->result = answer_error("internal error: not a stateful tool");
		break;
	}
	mcp_plan_free(plan);
}

/* ---- run_pipeline: a call like a run, with one epoll descriptor for all its stages ------ */

static void pipeline_respond(struct server *s, struct call *c,
                             const struct corral_pipeline_result *pr)
{
	char *json = NULL;
	struct corral_error err = {0};
	if (corral_pipeline_result_to_json(pr, &json, &err) < 0) {
		respond(s, c, mcp_tool_error(err.message));
		return;
	}
	json_t *structured = json_loads(json, 0, NULL);
	free(json);
	if (!structured) {
		respond(s, c, mcp_tool_error("internal error: the pipeline result is not JSON"));
		return;
	}
	/* the text: the pipeline, its status, each stage's, the output */
	char *text = NULL;
	size_t tlen = 0;
	FILE *f = open_memstream(&text, &tlen);
	if (f) {
		fprintf(f, "%s\n", c->plan.display ? c->plan.display : "pipeline");
		if (pr->error.code)
			fprintf(f, "not started: %s\n", pr->error.message);
		else
			fprintf(f, "exit: %d (pipefail%s)%s\n", pr->exit_code,
			        pr->failed_stage >= 0 ? ", from the failing stage" : "",
			        pr->timed_out ? "; timed out" : "");
		for (size_t i = 0; i < pr->n_stages; i++) {
			const struct corral_result *r = pr->stages[i];
			if (!r) { /* defensive: corral_pipeline_result_to_json reports it */
				fprintf(f, "stage %zu: no result\n", i + 1);
				continue;
			}
			fprintf(f, "stage %zu (%s): ", i + 1,
			        r->argv && r->argv[0] ? r->argv[0] : "?");
			if (r->exited)
				fprintf(f, "exit %d", r->exit_code);
			else if (r->signal)
				fprintf(f, "signal %d", r->signal);
			else
				fprintf(f, "not run");
			if (pr->stopped && pr->stopped[i])
				fprintf(f, " (stopped by the pipeline)");
			if (r->stderr_len)
				fprintf(f, "; stderr %zu bytes", r->stderr_len);
			fputc('\n', f);
		}
		const char *out = json_string_value(json_object_get(structured, "stdout"));
		if (out && *out)
			fprintf(f, "--- stdout ---\n%s%s", out,
			        out[strlen(out) - 1] == '\n' ? "" : "\n");
		/* each stage's stderr, as the result carries it (redacted, UTF-8): where a
		 * pipeline's error messages are, and a model often reads only this text */
		json_t *stages = json_object_get(structured, "stages");
		for (size_t i = 0; i < json_array_size(stages); i++) {
			const char *e =
			    json_string_value(json_object_get(json_array_get(stages, i), "stderr"));
			if (e && *e)
				fprintf(f, "--- stage %zu stderr ---\n%s%s", i + 1, e,
				        e[strlen(e) - 1] == '\n' ? "" : "\n");
		}
		fclose(f);
	}
	json_t *res = json_object();
	json_t *content = json_array();
	json_array_append_new(
	    content, json_pack("{s:s, s:s}", "type", "text", "text", text ? text : "pipeline"));
	free(text);
	json_object_set_new(res, "content", content);
	bool failed = pr->error.code || pr->exit_code != 0 || pr->timed_out;
	if (mcp_version_at_least(s->version, "2025-06-18")) {
		json_object_set_new(res, "structuredContent", structured);
	} else {
		char *d = json_dumps(structured, JSON_COMPACT);
		json_array_append_new(
		    content, json_pack("{s:s, s:s}", "type", "text", "text", d ? d : "{}"));
		free(d);
		json_decref(structured);
	}
	json_object_set_new(res, "isError", json_boolean(failed));
	respond(s, c, res);
}

static void start_pipeline(struct server *s, struct call *c)
{
	struct corral_error err = {0};
	json_t *st = json_object_get(c->plan.args, "stages");
	size_t n = json_array_size(st);
	corral_config **cfgs = calloc(n ? n : 1, sizeof(*cfgs));
	int r = cfgs ? 0 : -1;
	for (size_t i = 0; r == 0 && i < n; i++) {
		json_t *a = json_array_get(st, i);
		size_t na = json_array_size(a);
		const char **v = calloc(na + 1, sizeof(char *));
		cfgs[i] = corral_config_dup(c->plan.cfg);
		if (!v || !cfgs[i]) {
			free(v);
			r = -1;
			corral_set_error(&err, CORRAL_ENOMEM, ENOMEM, "pipeline", "out of memory");
			break;
		}
		for (size_t k = 0; k < na; k++)
			v[k] = json_string_value(json_array_get(a, k));
		r = corral_config_set_argv(cfgs[i], v, &err);
		free(v);
		/* what is captured (the last stage's stdout, every stage's stderr) shows in the
		 * call's progress messages, as a run's output does */
		corral_config_set_output_cb(cfgs[i], on_output, c);
	}
	c->started_wall_ms = wall_ms();
	policy_hash(c->plan.cfg, c->policy_hash);
	free(c->cwd);
	c->cwd = strdup(c->plan.cfg->cwd ? c->plan.cfg->cwd : c->plan.cfg->workspace);
	int before = -1;
	if (r == 0 && fd_room(s, &before, &err))
		r = corral_pipeline_spawn((const corral_config *const *)cfgs, n, &c->pl, &err);
	else if (r == 0)
		r = -1;
	for (size_t i = 0; cfgs && i < n; i++)
		corral_config_free(cfgs[i]);
	free(cfgs);
	if (r == 0) {
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &c->w};
		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, corral_pipeline_fd(c->pl), &ev) < 0) {
			corral_set_error(&err, CORRAL_ESYS, errno, "spawn",
			                 "server: cannot watch the pipeline: epoll_ctl: %s",
			                 strerror(errno));
			corral_pipeline_destroy(c->pl);
			c->pl = NULL;
			r = -1;
		}
	}
	if (r < 0) {
		char msg[700];
		snprintf(msg, sizeof(msg), "the pipeline could not start: %s", err.message);
		audit_not_started(s, &c->plan, "mcp_call", NULL, &err);
		respond(s, c, mcp_tool_error(msg));
		c->state = CALL_QUEUED; /* not counted as running */
		call_retire(s, c);
		return;
	}
	c->state = CALL_RUNNING;
	s->running++;
	c->t_start = c->t_progress = mono_ms();
}

static void step_pipeline(struct server *s, struct call *c)
{
	struct corral_error err = {0};
	int r = corral_pipeline_step(c->pl, 0, &err);
	if (r == 0)
		return;
	if (r < 0) {
		char msg[700];
		snprintf(msg, sizeof(msg), "the pipeline could not be supervised: %s", err.message);
		respond(s, c, mcp_tool_error(msg));
	} else {
		struct corral_pipeline_result *pr = NULL;
		if (corral_pipeline_result(c->pl, &pr, &err) == 0) {
			audit_pipeline(s, c, pr);
			if (c->cancelled)
				respond(s, c, NULL);
			else
				pipeline_respond(s, c, pr);
			corral_pipeline_result_free(pr);
		} else {
			respond(s, c, mcp_tool_error(err.message));
		}
	}
	call_retire(s, c);
}

static void m_tools_call(void *ctx, const struct jr_msg *m, struct jr_reply *r)
{
	struct server *s = ctx;
	if (!json_is_object(m->params))
		return jr_fail(r, JR_INVALID_PARAMS,
		               "invalid params: tools/call needs params as an object with name and "
		               "arguments");
	json_t *name = json_object_get(m->params, "name");
	if (!name)
		return jr_fail(r, JR_INVALID_PARAMS,
		               "invalid params: params.name is missing (the tool to call: %s)",
		               mcp_tool_names());
	if (!json_is_string(name))
		return jr_fail(r, JR_INVALID_PARAMS,
		               "invalid params: params.name must be a string, not %s",
		               jr_type_name(name));
	/* "\u0000" is valid JSON: a name with a NUL in it names no tool (its C string would
	 * stop at the NUL and name another) */
	if (strlen(json_string_value(name)) != json_string_length(name))
		return jr_fail(r, JR_INVALID_PARAMS,
		               "invalid params: params.name contains a NUL character; the tools "
		               "are: %s",
		               mcp_tool_names());
	json_t *args = json_object_get(m->params, "arguments");
	if (args && !json_is_object(args) && !json_is_null(args))
		return jr_fail(r, JR_INVALID_PARAMS,
		               "invalid params: params.arguments must be an object, not %s",
		               jr_type_name(args));
	if (json_is_null(args))
		args = NULL;
	json_t *meta = json_object_get(m->params, "_meta");
	if (meta && !json_is_object(meta))
		return jr_fail(r, JR_INVALID_PARAMS,
		               "invalid params: params._meta must be an object, not %s",
		               jr_type_name(meta));
	json_t *token = json_object_get(meta, "progressToken");
	if (token && !jr_id_valid(token))
		return jr_fail(r, JR_INVALID_PARAMS,
		               "invalid params: params._meta.progressToken must be a string or an "
		               "integer, not %s",
		               jr_type_name(token));

	char why[600];
	struct mcp_plan plan;
	switch (mcp_tool_prepare(s->o, json_string_value(name), args, s->version, &plan, why,
	                         sizeof(why))) {
	case MCP_PREP_ANSWERED:
		/* can_i: answered now, from the server's policy; nothing runs */
		audit_queries(s, plan.queries);
		r->result = plan.answer;
		plan.answer = NULL;
		mcp_plan_free(&plan);
		return;
	case MCP_PREP_UNKNOWN_TOOL:
		return jr_fail(r, JR_INVALID_PARAMS, "invalid params: params.name: %s", why);
	case MCP_PREP_BAD_ARGS: {
		/* Argument errors are tool execution errors (SEP-1303, 2025-11-25): the model
		 * sees them and can correct the call. */
		char msg[700];
		snprintf(msg, sizeof(msg), "invalid arguments for %s: %s", json_string_value(name),
		         why);
		r->result = mcp_tool_error(msg);
		return;
	}
	case MCP_PREP_STATEFUL:
		if (plan.tool != TOOL_RUN_PIPELINE) {
			stateful_call(s, m->id, token, &plan, r);
			return;
		}
		break; /* a pipeline runs sandboxes: a call like a run, queued the same way */
	case MCP_PREP_OK:
		break;
	}
	/* A call that would wait: at most max_queue of them, holding at most max_queue_bytes
	 * of requests together (stdin and code are in the plan until the call starts). */
	bool full = s->n_queued >= s->o->max_queue;
	bool heavy = s->o->max_queue_bytes && (s->q_bytes >= s->o->max_queue_bytes ||
	                                       s->frame_bytes > s->o->max_queue_bytes - s->q_bytes);
	if (s->running >= s->o->max_concurrent && (full || heavy)) {
		mcp_plan_free(&plan);
		char msg[300];
		if (full)
			snprintf(
			    msg, sizeof(msg),
			    "server busy: %zu calls are already waiting (the queue holds %zu); "
			    "try again later",
			    s->n_queued, s->o->max_queue);
		else
			snprintf(msg, sizeof(msg),
			         "server busy: the %zu calls already waiting hold %zu bytes of "
			         "requests, and this one's %zu bytes would pass the queue's %zu "
			         "(--max-queue-bytes); try again later",
			         s->n_queued, s->q_bytes, s->frame_bytes, s->o->max_queue_bytes);
		r->result = mcp_tool_error(msg);
		return;
	}
	struct call *c = calloc(1, sizeof(*c));
	if (!c) {
		mcp_plan_free(&plan);
		return jr_fail(r, JR_INTERNAL_ERROR, "internal error: out of memory");
	}
	c->w.kind = W_CALL;
	c->srv = s;
	c->id = json_deep_copy(m->id);
	c->progress_token = token ? json_deep_copy(token) : NULL;
	c->plan = plan;
	c->state = CALL_QUEUED;
	c->next = s->calls;
	if (s->calls)
		s->calls->prev = c;
	s->calls = c;
	r->deferred = true;
	if (s->running < s->o->max_concurrent && !s->q_head) {
		start_call(s, c);
	} else {
		if (s->q_tail)
			s->q_tail->qnext = c;
		else
			s->q_head = c;
		s->q_tail = c;
		s->n_queued++;
		c->q_bytes = s->frame_bytes;
		s->q_bytes += c->q_bytes;
	}
}

static void n_initialized(void *ctx, const struct jr_msg *m, struct jr_reply *r)
{
	(void)ctx;
	(void)m;
	(void)r;
}

static void n_cancelled(void *ctx, const struct jr_msg *m, struct jr_reply *r)
{
	(void)r;
	struct server *s = ctx;
	json_t *id = json_object_get(m->params, "requestId");
	if (!jr_id_valid(id))
		return; /* a notification cannot be answered; nothing to cancel */
	struct call *c = find_call(s, id);
	if (!c || c->cancelled) /* finished already, or unknown: the specification says ignore */
		return;
	c->cancelled = true;
	if (c->state == CALL_QUEUED) {
		unqueue(s, c);
		call_retire(s, c);
	} else if (c->state == CALL_RUNNING && c->proc) {
		/* SIGKILL to the whole sandbox now; the run is reaped through the loop as usual. */
		corral_proc_cancel(c->proc, 0, NULL);
	} else if (c->state == CALL_RUNNING && c->pl) {
		corral_pipeline_cancel(c->pl, 0, NULL);
	} else if (c->state == CALL_RUNNING && c->sess) {
		/* interrupt the command; the session stays */
		corral_session_interrupt(c->sess->s);
	}
}

static const struct jr_method methods[] = {
    {"initialize", m_initialize, JR_M_BEFORE_INIT},
    {"ping", m_ping, JR_M_BEFORE_INIT},
    {"tools/list", m_tools_list, 0},
    {"tools/call", m_tools_call, 0},
    {"notifications/initialized", n_initialized, JR_M_NOTIFICATION},
    {"notifications/cancelled", n_cancelled, JR_M_NOTIFICATION | JR_M_BEFORE_INIT},
};

/* ---- input ------------------------------------------------------------------------------ */

static void on_frame(void *ud, enum jr_frame_kind kind, const char *line, size_t len)
{
	struct server *s = ud;
	if (s->stop)
		return;
	if (kind == JR_FRAME_TOOLONG) {
		char msg[300];
		snprintf(msg, sizeof(msg),
		         "invalid request: message too large: %zu bytes; the limit is %zu bytes "
		         "(corral mcp --max-message-bytes); it was discarded",
		         len, s->o->max_message);
		send_line(s, jr_error_line(NULL, JR_INVALID_REQUEST, msg));
		return;
	}
	struct jr_msg m;
	jr_parse(line, len, &m);
	s->frame_bytes = len;
	char *out;
	if (m.kind == JR_REQUEST && find_call(s, m.id))
		/* Whatever the method: a call in progress answers this id, so anything else
		 * answered with it would be a second response to the client. */
		out = jr_error_line(m.id, JR_INVALID_REQUEST,
		                    "invalid request: this id is already used by a call in "
		                    "progress; request ids must be unique");
	else
		out = jr_dispatch(methods, sizeof(methods) / sizeof(methods[0]), s, s->initialized,
		                  &m);
	if (out)
		send_line(s, out);
	jr_msg_free(&m);
}

static void on_stdin(struct server *s)
{
	for (;;) {
		ssize_t n = read(s->in_fd, s->readbuf, READ_CHUNK);
		if (n > 0) {
			if (jr_framer_feed(&s->framer, s->readbuf, (size_t)n, on_frame, s) < 0)
				logmsg("out of memory reading a message; it was discarded");
			return;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0)
			logmsg("stdin: %s; shutting down", strerror(errno));
		jr_framer_eof(&s->framer, on_frame, s);
		s->stop = true;
		if (!s->stop_reason)
			s->stop_reason = "end of input";
		return;
	}
}

static void on_signal(struct server *s)
{
	struct signalfd_siginfo si;
	while (read(s->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		s->stop = true;
		s->stop_reason = si.ssi_signo == SIGTERM  ? "SIGTERM"
		                 : si.ssi_signo == SIGINT ? "SIGINT"
		                                          : "SIGHUP";
	}
}

/* ---- setup, loop, shutdown -------------------------------------------------------------- */

static int loop_timeout(struct server *s)
{
	int t = -1;
	if (!s->in_pollable && !s->in_paused)
		t = 0; /* a regular file or /dev/null: always readable */
	for (struct call *c = s->calls; c; c = c->next) {
		if (c->state != CALL_RUNNING || (!c->proc && !c->pl))
			continue;
		int n = c->pl ? corral_pipeline_next_timeout_ms(c->pl)
		              : corral_proc_next_timeout_ms(c->proc);
		if (n >= 0 && (t < 0 || n < t))
			t = n;
	}
	int st = stateful_timeout(s);
	if (st >= 0 && (t < 0 || st < t))
		t = st;
	return t;
}

static void free_done(struct server *s)
{
	while (s->done) {
		struct call *c = s->done;
		s->done = c->dnext;
		call_free(c);
	}
	while (s->dead_sessions) {
		struct msess *m = s->dead_sessions;
		s->dead_sessions = m->next;
		free(m);
	}
	while (s->dead_jobs) {
		struct mjob *j = s->dead_jobs;
		s->dead_jobs = j->next;
		free(j);
	}
}

/* A burst of queued calls (each holding its configuration, stdin and code) leaves the heap
 * at its high-water mark; give it back once the burst is over, so a long-lived server's RSS
 * follows its load. */
static void trim_after_burst(struct server *s)
{
	size_t live = s->running + s->n_queued;
	if (live > s->peak_live)
		s->peak_live = live;
	if (live == 0 && s->peak_live >= 64) {
		malloc_trim(0);
		s->peak_live = 0;
	}
}

static void run_loop(struct server *s)
{
	struct epoll_event evs[64];
	while (!s->stop) {
		int t = loop_timeout(s), pt = pool_timeout(s), ut = upkeep_timeout(s);
		if (pt >= 0 && (t < 0 || pt < t))
			t = pt;
		if (ut >= 0 && (t < 0 || ut < t))
			t = ut;
		int n = epoll_wait(s->epfd, evs, 64, t);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			logmsg("epoll_wait: %s; shutting down", strerror(errno));
			break;
		}
		if (n > 0) {
			s->busy_at = mono_ms();
		} else {
			pool_refill(s);
			upkeep_when_idle(s);
			if (s->mtpl && !s->mtpl_said_off && mtpl_off_reason(s->mtpl)) {
				logmsg("mount template off (each sandbox builds its tree): %s",
				       mtpl_off_reason(s->mtpl));
				s->mtpl_said_off = true;
			}
		}
		for (int i = 0; i < n && !s->stop; i++) {
			struct watch *w = evs[i].data.ptr;
			switch (w->kind) {
			case W_STDIN:
				if (!s->in_paused) {
					on_stdin(s);
				} else if (evs[i].events & (EPOLLHUP | EPOLLERR)) {
					/* reported even without EPOLLIN: park stdin until the
					 * output drains, rather than spin on it */
					epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->in_fd, NULL);
					s->in_parked = true;
				}
				break;
			case W_STDOUT:
				if (evs[i].events & (EPOLLERR | EPOLLHUP))
					out_broken(s, EPIPE); /* the client closed its end */
				else
					flush_out(s);
				break;
			case W_SIGNAL:
				on_signal(s);
				break;
			case W_TIMER:
				progress_tick(s);
				break;
			case W_CALL: {
				struct call *c = (struct call *)w;
				if (c->state == CALL_RUNNING)
					step_call(s, c);
				break;
			}
			case W_SESSION:
				session_event(s, (struct msess *)w);
				break;
			case W_JOB:
				job_event(s, (struct mjob *)w);
				break;
			}
		}
		if (!s->in_pollable && !s->in_paused && !s->stop)
			on_stdin(s);
		/* Deadlines are covered by each run's timerfd; this catches a step that a
		 * deadline needs without readiness, at no cost otherwise. */
		for (struct call *c = s->calls, *next; c && !s->stop; c = next) {
			next = c->next;
			if (c->state == CALL_RUNNING &&
			    ((c->proc && corral_proc_next_timeout_ms(c->proc) == 0) ||
			     (c->pl && corral_pipeline_next_timeout_ms(c->pl) == 0)))
				step_call(s, c);
		}
		stateful_tick(s);
		start_queued(s);
		free_done(s);
		update_progress_timer(s);
		trim_after_burst(s);
	}
}

static void shutdown_all(struct server *s)
{
	/* Kill every sandbox first, then reap them one by one: their teardown overlaps. */
	for (struct call *c = s->calls; c; c = c->next)
		if (c->state == CALL_RUNNING && (c->proc || c->pl)) {
			c->cancelled = true;
			if (c->proc)
				corral_proc_cancel(c->proc, 0, NULL);
			else
				corral_pipeline_cancel(c->pl, 0, NULL);
		}
	/* With an audit store, let each killed run, pipeline and job end in a result (briefly,
	 * in one wait) so that it is recorded as cancelled; what does not end in time is
	 * recorded as cut off. Sessions close first (their jobs end with them). */
	uint64_t reap_until = mono_ms() + SHUTDOWN_REAP_MS;
	pool_drop(s);
	pool_reap(s);
	corral_config_free(s->pool_tmpl);
	s->pool_tmpl = NULL;
	stateful_shutdown(s);
	shutdown_reap(s, reap_until);
	while (s->calls) {
		struct call *c = s->calls;
		c->cancelled = true;
		if (c->state == CALL_QUEUED)
			unqueue(s, c);
		call_retire(s, c);
	}
	free_done(s); /* corral_proc_destroy kills and reaps what still runs */

	/* Replies already built still go out, if the client takes them soon. */
	uint64_t until = mono_ms() + SHUTDOWN_FLUSH_MS;
	while (outq_pending(s) && !(s->stop_reason && !strcmp(s->stop_reason, "stdout closed"))) {
		uint64_t t = mono_ms();
		if (t >= until)
			break;
		struct pollfd pfd = {.fd = s->out_fd, .events = POLLOUT};
		if (poll(&pfd, 1, (int)(until - t)) <= 0)
			break;
		size_t done;
		if (!write_some(s, s->outq + s->outq_off, outq_pending(s), &done))
			break;
		s->outq_off += done;
	}
}

static int set_nonblock(int fd, int *flags0)
{
	*flags0 = fcntl(fd, F_GETFL);
	if (*flags0 < 0)
		return -1;
	return fcntl(fd, F_SETFL, *flags0 | O_NONBLOCK);
}

static int setup(struct server *s, const struct mcp_options *o, int in_fd, int out_fd,
                 sigset_t *old)
{
	memset(s, 0, sizeof(*s));
	s->o = o;
	s->in_fd = in_fd;
	s->out_fd = out_fd;
	s->sigfd = s->timerfd = s->epfd = -1;
	s->in_flags0 = s->out_flags0 = -1;
	ssize_t xn = readlink("/proc/self/exe", s->exe_path, sizeof(s->exe_path) - 1);
	s->exe_path[xn > 0 ? xn : 0] = 0;
	s->w_in.kind = W_STDIN;
	s->w_out.kind = W_STDOUT;
	s->w_sig.kind = W_SIGNAL;
	s->w_timer.kind = W_TIMER;
	s->version = MCP_LATEST_VERSION;
	jr_framer_init(&s->framer, o->max_message);
	s->readbuf = malloc(READ_CHUNK);
	if (!s->readbuf)
		return -1;

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	/* Blocked here; the library resets the mask and dispositions in the sandbox. */
	sigprocmask(SIG_BLOCK, &set, old);
	signal(SIGPIPE, SIG_IGN); /* a closed stdout is an EPIPE, not a death */
	s->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	s->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->sigfd < 0 || s->timerfd < 0 || s->epfd < 0)
		return -1;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->w_sig};
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->sigfd, &ev) < 0)
		return -1;
	ev.data.ptr = &s->w_timer;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->timerfd, &ev) < 0)
		return -1;
	/* Regular files and /dev/null cannot be polled (EPERM): they are always ready, so read
	 * them between waits (stdin) or write them directly (stdout). */
	ev.data.ptr = &s->w_in;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, in_fd, &ev) == 0) {
		s->in_pollable = true;
		if (set_nonblock(in_fd, &s->in_flags0) < 0)
			return -1;
	} else if (errno != EPERM) {
		return -1;
	}
	struct epoll_event out_ev = {.events = 0, .data.ptr = &s->w_out};
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, out_fd, &out_ev) == 0) {
		s->out_pollable = true;
		if (set_nonblock(out_fd, &s->out_flags0) < 0)
			return -1;
	} else if (errno != EPERM) {
		return -1;
	}
	return 0;
}

static void teardown(struct server *s, const sigset_t *old)
{
	if (s->in_flags0 >= 0)
		fcntl(s->in_fd, F_SETFL, s->in_flags0);
	if (s->out_flags0 >= 0)
		fcntl(s->out_fd, F_SETFL, s->out_flags0);
	int fds[] = {s->sigfd, s->timerfd, s->epfd};
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	jr_framer_free(&s->framer);
	free(s->outq);
	free(s->readbuf);
	sigprocmask(SIG_SETMASK, old, NULL);
}

int mcp_serve(const struct mcp_options *o, int in_fd, int out_fd)
{
	struct server s;
	sigset_t old;
	sigemptyset(&old);
	mcp_tools_init(o);
	if (setup(&s, o, in_fd, out_fd, &old) < 0) {
		logmsg("cannot set up the event loop: %s", strerror(errno));
		teardown(&s, &old);
		return 125;
	}
	audit_start(&s);
	/* The mount template (DESIGN §18): every call's configuration is a copy of the base,
	 * so they all take copies of its tree. Started now, so the first call finds it. */
	if (!o->no_mount_template && (s.mtpl = mtpl_new()) != NULL) {
		o->base->mtpl = s.mtpl;
		launch_template_warm(o->base);
	}
	/* Looks at the host through a cache that inotify keeps true (DESIGN §18): each call's
	 * plan key (--prebuild), and every run's look at the system paths and at the mount
	 * table's cgroup mounts; without one (no inotify instance left) they look themselves. */
	s.hc = hcache_new();
	o->base->hc = s.hc;
	/* A call's placeholders stay a little after it, held, for the next call to take over
	 * (DESIGN §18): back-to-back calls then make and remove them once, not each time. */
	plan_placeholders_linger(o->placeholder_linger_ms);
	logmsg("serving MCP on stdio: workspace %s, profile %s, up to %u concurrent run calls, "
	       "tools: %s; audit: %s",
	       o->workspace, o->base->profile_name ? o->base->profile_name : "default",
	       o->max_concurrent, mcp_tool_names(),
	       s.audit        ? audit_path(s.audit)
	       : o->audit_off ? "off"
	                      : "unavailable");
	run_loop(&s);
	shutdown_all(&s);
	plan_placeholders_linger(0); /* what lingers goes now: nothing stays after the server */
	if (s.mtpl) {
		o->base->mtpl = NULL;
		mtpl_free(s.mtpl);
		s.mtpl = NULL;
	}
	o->base->hc = NULL;
	hcache_free(s.hc);
	s.hc = NULL;
	logmsg("shut down (%s)", s.stop_reason ? s.stop_reason : "error");
	audit_stop(&s);
	teardown(&s, &old);
	return 0;
}

void mcp_options_free(struct mcp_options *o)
{
	corral_config_free(o->base);
	free(o->workspace);
	free(o->audit_path);
	for (size_t i = 0; i < o->n_allow_env; i++)
		free(o->allow_env[i]);
	free(o->allow_env);
	memset(o, 0, sizeof(*o));
}
