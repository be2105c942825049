/* Pipelines: N sandboxes connected stdout-to-stdin by pipes, supervised as one unit.
 *
 * Each stage is an ordinary corral_proc. Stage k's stdout is the write end of pipe k and
 * stage k+1's stdin its read end; the supervisor closes its own copies right after each
 * spawn, so the intermediate bytes flow from sandbox to sandbox through the kernel and never
 * through this process (memory stays flat whatever the volume), and EOF propagates as soon
 * as the writing sandbox is gone. Only the last stage's stdout and every stage's stderr are
 * read here, capped as in a single run.
 *
 * One epoll set holds each stage's corral_proc_fd (nested epoll) and one timerfd for the
 * pipeline's own deadlines: the overall timeout and the grace given to downstream stages
 * after a failure.
 *
 * Semantics (docs/corral.1 PIPELINES, include/corral.h):
 * - status: pipefail, the status of the rightmost stage whose status is not 0, else 0;
 * - a stage that fails: stages upstream of it are stopped at once (SIGKILL); stages
 *   downstream see EOF and get the kill grace to finish, then are stopped;
 * - the timeout (the first stage's) covers the whole pipeline: when it fires, every running
 *   stage gets SIGTERM, then SIGKILL after the grace, and reports timed_out. */
#include "internal.h"
#include "pipeline.h"

#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>

#define MAX_STAGES 16
#define TAG_TIMER UINT32_MAX
#define LABEL_MAX 60

struct stage {
	corral_proc *proc;         /* NULL before the start and once finished */
	struct corral_result *res; /* taken when the stage finished */
	char label[LABEL_MAX + 4]; /* the shell string or argv[0], for messages */
	bool finished;
	bool stopped;   /* the pipeline asked it to stop while it ran */
	bool timed_out; /* ... because the overall timeout fired */
};

struct corral_pipeline {
	size_t n;
	struct stage st[MAX_STAGES];
	size_t n_running;
	int epfd, timerfd;
	uint64_t t_start, timeout_ms, kill_after_ms;
	uint64_t dl_timeout, dl_down; /* absolute ms; 0 = unset */
	bool timed_out, cancelled, finished, result_taken;
	struct corral_pipeline_result *res;
	char id[37];
};

static void set_label(struct stage *s, const corral_config *cfg)
{
	const char *text = cfg->shell ? cfg->shell : cfg->argv ? cfg->argv[0] : "";
	size_t len = strlen(text);
	if (len > LABEL_MAX)
		snprintf(s->label, sizeof(s->label), "%.*s...", LABEL_MAX - 3, text);
	else
		snprintf(s->label, sizeof(s->label), "%s", text);
	/* one line in messages */
	for (char *c = s->label; *c; c++)
		if (*c == '\n' || *c == '\r' || *c == '\t')
			*c = ' ';
}

/* err = "stage N (label): " + e's message, with e's code, errno and step. */
static int stage_error(struct corral_error *err, size_t i, const struct stage *s,
                       const struct corral_error *e)
{
	return corral_set_error(err, e->code ? e->code : CORRAL_ESYS, e->sys_errno,
	                        e->step[0] ? e->step : NULL, "stage %zu (%s): %s", i + 1, s->label,
	                        e->message);
}

/* The status a stage contributes to pipefail: its exit code, 128+N for signal N, and for a
 * stage that could not be started the CLI's 127 (not found), 126 (not executable, denied)
 * or 125 (any other setup failure). */
static int stage_status(const struct corral_result *r)
{
	if (!r)
		return 0;
	if (r->error.code == CORRAL_ENOTFOUND)
		return 127;
	if (r->error.code == CORRAL_ENOEXEC || r->error.code == CORRAL_EDENIED)
		return 126;
	if (r->error.code)
		return 125;
	if (r->exited)
		return r->exit_code;
	if (r->signal)
		return 128 + r->signal;
	return 0;
}

static int error_status(int code)
{
	return code == CORRAL_ENOTFOUND                           ? 127
	       : code == CORRAL_ENOEXEC || code == CORRAL_EDENIED ? 126
	                                                          : 125;
}

static void arm_timer(corral_pipeline *p)
{
	uint64_t next = 0;
	if (p->dl_timeout)
		next = p->dl_timeout;
	if (p->dl_down && (!next || p->dl_down < next))
		next = p->dl_down;
	struct itimerspec its;
	memset(&its, 0, sizeof(its));
	if (next) {
		its.it_value.tv_sec = (time_t)(next / 1000);
		its.it_value.tv_nsec = (long)(next % 1000) * 1000000 + 1; /* never 0 (disarms) */
	}
	timerfd_settime(p->timerfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* Ask a running stage to stop: SIGTERM now and SIGKILL after grace_ms (0: SIGKILL now). A
 * stage whose init is already gone (draining its output) is left alone. */
static void stop_stage(struct stage *s, uint64_t grace_ms)
{
	if (s->finished || !s->proc || corral_proc_pidfd(s->proc) < 0)
		return;
	corral_proc_cancel(s->proc, grace_ms, NULL);
	s->stopped = true;
}

/* Stage i failed: upstream stages can only write into a dead end now, stop them at once;
 * downstream stages see EOF and get the grace to finish. A stage killed by SIGPIPE (or a
 * shell whose command was: 141) failed because a later stage stopped reading: that one goes on by
 * its own rules (as in a shell; with no grace it would be killed before its own status was
 * reported). */
static void teardown_after(corral_pipeline *p, size_t i)
{
	for (size_t j = 0; j < i; j++)
		stop_stage(&p->st[j], 0);
	const struct corral_result *r = p->st[i].res;
	if (r && (r->signal == SIGPIPE || (r->exited && r->exit_code == 128 + SIGPIPE)))
		return; /* (128+SIGPIPE: a shell's command was killed so) */
	bool downstream = false;
	for (size_t j = i + 1; j < p->n; j++)
		downstream |= !p->st[j].finished;
	if (!downstream)
		return;
	if (p->kill_after_ms == 0) {
		for (size_t j = i + 1; j < p->n; j++)
			stop_stage(&p->st[j], 0);
		return;
	}
	uint64_t dl = mono_ms() + p->kill_after_ms;
	if (!p->dl_down || dl < p->dl_down)
		p->dl_down = dl;
}

static bool has_timeout_violation(const struct corral_result *r)
{
	for (size_t i = 0; i < r->n_violations; i++)
		if (!strcmp(r->violations[i].kind, "timeout"))
			return true;
	return false;
}

/* A stage stopped by the overall timeout reports it as a single run's timeout would. */
static void mark_timed_out(corral_pipeline *p, struct corral_result *r)
{
	r->timed_out = 1;
	r->limit = CORRAL_HIT_TIMEOUT;
	if (has_timeout_violation(r))
		return;
	char obj[64];
	snprintf(obj, sizeof(obj), "%llu ms", (unsigned long long)p->timeout_ms);
	result_add_violation(r, "timeout", obj, "timeout",
	                     "The pipeline ran past its time limit and every stage still running "
	                     "was stopped; make it faster, process less data, or ask for a "
	                     "longer timeout.",
	                     0);
}

static int stage_step(corral_pipeline *p, size_t i, struct corral_error *err)
{
	struct stage *s = &p->st[i];
	if (s->finished || !s->proc)
		return 0;
	struct corral_error e = {0};
	int r = corral_proc_step(s->proc, 0, &e);
	if (r < 0)
		return stage_error(err, i, s, &e);
	if (r == 0)
		return 0;
	if (corral_proc_result(s->proc, &s->res, &e) < 0)
		return stage_error(err, i, s, &e);
	epoll_ctl(p->epfd, EPOLL_CTL_DEL, corral_proc_fd(s->proc), NULL);
	corral_proc_destroy(s->proc);
	s->proc = NULL;
	s->finished = true;
	p->n_running--;
	if (s->timed_out)
		mark_timed_out(p, s->res);
	if (stage_status(s->res) != 0)
		teardown_after(p, i);
	return 0;
}

static void on_timer(corral_pipeline *p)
{
	uint64_t exp;
	ssize_t n = read(p->timerfd, &exp, sizeof(exp));
	(void)n;
	uint64_t t = mono_ms();
	if (p->dl_timeout && t >= p->dl_timeout) {
		p->dl_timeout = 0;
		p->timed_out = true;
		for (size_t j = 0; j < p->n; j++) {
			struct stage *s = &p->st[j];
			if (s->finished || !s->proc || corral_proc_pidfd(s->proc) < 0)
				continue;
			s->timed_out = true;
			stop_stage(s, p->kill_after_ms);
		}
	}
	if (p->dl_down && t >= p->dl_down) {
		p->dl_down = 0;
		for (size_t j = 0; j < p->n; j++)
			stop_stage(&p->st[j], 0);
	}
}

/* ---- result ------------------------------------------------------------------------------ */

static struct corral_pipeline_result *pres_new(size_t n)
{
	struct corral_pipeline_result *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->failed_stage = -1;
	if (n) {
		r->stages = calloc(n, sizeof(*r->stages));
		r->stopped = calloc(n, sizeof(*r->stopped));
		if (!r->stages || !r->stopped) {
			free(r->stages);
			free(r->stopped);
			free(r);
			return NULL;
		}
	}
	r->n_stages = n;
	return r;
}

void corral_pipeline_result_free(struct corral_pipeline_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_stages; i++)
		corral_result_free(r->stages[i]);
	free(r->stages);
	free(r->stopped);
	free(r);
}

static void finish(corral_pipeline *p)
{
	p->finished = true;
	struct corral_pipeline_result *r = pres_new(p->n);
	if (!r)
		return; /* corral_pipeline_result() reports ENOMEM */
	memcpy(r->id, p->id, sizeof(r->id));
	r->timed_out = p->timed_out;
	r->cancelled = p->cancelled;
	r->duration_ms = mono_ms() - p->t_start;
	for (size_t i = 0; i < p->n; i++) {
		struct stage *s = &p->st[i];
		r->stages[i] = s->res;
		s->res = NULL;
		r->stopped[i] = s->stopped;
		int st = stage_status(r->stages[i]);
		if (st != 0) {
			r->exit_code = st;
			r->failed_stage = (int)i;
		}
		if (r->stages[i] && r->stages[i]->error.code && !r->error.code)
			stage_error(&r->error, i, s, &r->stages[i]->error);
	}
	p->res = r;
}

/* A stage's result object, as corral_result_to_json() encodes it. */
static json_t *stage_json(const struct corral_result *r, struct corral_error *err)
{
	json_t *j = result_json(r, true);
	if (!j)
		corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "result", "result: out of memory");
	return j;
}

int corral_pipeline_result_to_json(const struct corral_pipeline_result *r, char **out,
                                   struct corral_error *err)
{
	*out = NULL;
	json_t *o = json_object(), *stages = json_array(), *stopped = json_array();
	if (!o || !stages || !stopped) {
		json_decref(o);
		json_decref(stages);
		json_decref(stopped);
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "result",
		                        "result: out of memory");
	}
	json_object_set_new(o, "id", json_string(r->id));
	json_object_set_new(o, "pipeline", json_true());
	json_object_set_new(o, "exit_code", json_integer(r->exit_code));
	json_object_set_new(o, "failed_stage",
	                    r->failed_stage >= 0 ? json_integer(r->failed_stage) : json_null());
	json_object_set_new(o, "timed_out", json_boolean(r->timed_out));
	json_object_set_new(o, "cancelled", json_boolean(r->cancelled));
	json_object_set_new(o, "duration_ms", json_integer((json_int_t)r->duration_ms));
	json_t *last = NULL;
	int rc = 0;
	for (size_t i = 0; i < r->n_stages; i++) {
		if (!r->stages[i]) {
			rc = corral_set_error(err, CORRAL_EINVAL, 0, "result",
			                      "result: stage %zu has no result", i + 1);
			break;
		}
		json_t *j = stage_json(r->stages[i], err);
		if (!j) {
			rc = CORRAL_ENOMEM;
			break;
		}
		json_array_append_new(stages, j);
		last = j;
		if (r->stopped && r->stopped[i])
			json_array_append_new(stopped, json_integer((json_int_t)i));
	}
	if (rc < 0) {
		json_decref(o);
		json_decref(stages);
		json_decref(stopped);
		return rc;
	}
	/* the pipeline's output is the last stage's stdout */
	json_t *so = last ? json_object_get(last, "stdout") : NULL;
	json_object_set_new(o, "stdout", so ? json_incref(so) : json_string(""));
	json_object_set_new(o, "stdout_bytes",
	                    last ? json_incref(json_object_get(last, "stdout_bytes"))
	                         : json_integer(0));
	json_object_set_new(o, "stdout_truncated",
	                    last ? json_incref(json_object_get(last, "stdout_truncated"))
	                         : json_false());
	json_object_set_new(o, "stopped_stages", stopped);
	if (r->error.code) {
		json_t *e = json_object();
		json_object_set_new(e, "code", json_integer(r->error.code));
		json_object_set_new(e, "name", json_string(corral_strerror(r->error.code)));
		json_object_set_new(e, "errno", json_integer(r->error.sys_errno));
		json_object_set_new(e, "step", json_string(r->error.step));
		json_object_set_new(e, "message",
		                    json_bytes(r->error.message, strlen(r->error.message)));
		json_object_set_new(o, "error", e);
	} else {
		json_object_set_new(o, "error", json_null());
	}
	json_object_set_new(o, "stages", stages);
	*out = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!*out)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "result",
		                        "result: out of memory");
	return 0;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

static void pipeline_free(corral_pipeline *p)
{
	for (size_t i = 0; i < p->n; i++) {
		corral_proc_destroy(p->st[i].proc); /* kills and reaps what still runs */
		corral_result_free(p->st[i].res);
	}
	if (p->timerfd >= 0)
		close(p->timerfd);
	if (p->epfd >= 0)
		close(p->epfd);
	if (!p->result_taken)
		corral_pipeline_result_free(p->res);
	free(p);
}

void corral_pipeline_destroy(corral_pipeline *p)
{
	if (p)
		pipeline_free(p);
}

/* Checks that need nothing started: stage count, each configuration, the policy decision
 * and, for a command looked up in PATH, that it exists (what the host cannot find, the
 * sandbox, a subset of the host's files, cannot either). */
static int precheck(const corral_config *const *stages, size_t n, corral_pipeline *p, int *failed,
                    struct corral_error *err)
{
	if (!stages || n < 2 || n > MAX_STAGES)
		return corral_set_error(err, CORRAL_EINVAL, 0, "pipeline",
		                        "pipeline: %zu stage(s) given; a pipeline has 2 to %d "
		                        "stages",
		                        stages ? n : 0, MAX_STAGES);
	for (size_t i = 0; i < n; i++) {
		struct corral_error e = {0};
		const corral_config *c = stages[i];
		*failed = (int)i;
		if (!c)
			return corral_set_error(err, CORRAL_EINVAL, 0, "pipeline",
			                        "stage %zu: no configuration (NULL)", i + 1);
		set_label(&p->st[i], c);
		if (!c->argv)
			return corral_set_error(err, CORRAL_EINVAL, 0, "config",
			                        "stage %zu: config: no command set; set argv or a "
			                        "shell string",
			                        i + 1);
		if (!c->workspace)
			return corral_set_error(err, CORRAL_EINVAL, 0, "config",
			                        "stage %zu (%s): config: no workspace set; set a "
			                        "workspace directory",
			                        i + 1, p->st[i].label);
		if (policy_preflight(c, &e) < 0)
			return stage_error(err, i, &p->st[i], &e);
		char path[PATH_MAX];
		if (!c->shell && !strchr(c->argv[0], '/') &&
		    policy_which(c, c->argv[0], sandbox_path_env(c), path) < 0) {
			corral_set_error(
			    &e, CORRAL_ENOTFOUND, ENOENT, "exec",
			    "exec: %s: command not found in the sandbox's PATH; nothing "
			    "was started",
			    c->argv[0]);
			return stage_error(err, i, &p->st[i], &e);
		}
	}
	*failed = -1;
	return 0;
}

/* Start every stage, wiring the pipes. On failure whatever was started is killed and reaped,
 * and *failed is the index of the stage that could not be started (-1: none in particular). */
static int pipeline_start(const corral_config *const *stages, size_t n, corral_pipeline **out,
                          int *failed, struct corral_error *err)
{
	*out = NULL;
	*failed = -1;
	corral_pipeline *p = calloc(1, sizeof(*p));
	if (!p)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "pipeline", "out of memory");
	p->epfd = p->timerfd = -1;
	int r = precheck(stages, n, p, failed, err);
	if (r < 0) {
		pipeline_free(p);
		return r;
	}
	p->n = n;
	result_uuid(p->id);
	p->timeout_ms = stages[0]->timeout_ms;
	p->kill_after_ms = stages[0]->kill_after_ms;
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	p->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	struct epoll_event tev = {.events = EPOLLIN, .data.u32 = TAG_TIMER};
	if (p->epfd < 0 || p->timerfd < 0 ||
	    epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->timerfd, &tev) < 0) {
		r = corral_set_error(err, CORRAL_ESYS, errno, "pipeline",
		                     "pipeline: cannot create the event loop: %s; raise the "
		                     "open-files limit",
		                     strerror(errno));
		pipeline_free(p);
		return r;
	}
	p->t_start = mono_ms();
	int prev_read = -1; /* read end of the pipe from the previous stage */
	for (size_t i = 0; i < n; i++) {
		struct stage *s = &p->st[i];
		struct corral_error e = {0};
		int pfd[2] = {-1, -1};
		*failed = (int)i;
		corral_config *c = corral_config_dup(stages[i]);
		if (!c) {
			r = corral_set_error(&e, CORRAL_ENOMEM, ENOMEM, "pipeline",
			                     "out of memory");
		} else if (i + 1 < n && pipe2(pfd, O_CLOEXEC) < 0) {
			r = corral_set_error(&e, CORRAL_ESYS, errno, "pipe",
			                     "pipe: %s; raise the open-files limit",
			                     strerror(errno));
		} else {
			/* the pipeline's timer is the only timeout; the pipes are stdin, stdout */
			r = corral_config_set_timeout_ms(c, 0, c->kill_after_ms, &e);
			if (r == 0 && i > 0)
				r = corral_config_set_stdin_fd(c, prev_read, &e);
			if (r == 0 && i + 1 < n)
				r = corral_config_set_stdout_fd(c, pfd[1], &e);
			if (r == 0)
				r = corral_spawn(c, &s->proc, &e);
		}
		corral_config_free(c);
		/* The children hold their own copies now: closing ours is what lets EOF reach
		 * the reader once the writing sandbox is gone. */
		if (prev_read >= 0)
			close(prev_read);
		if (pfd[1] >= 0)
			close(pfd[1]);
		prev_read = pfd[0];
		if (r == 0) {
			struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
			p->n_running++;
			if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, corral_proc_fd(s->proc), &ev) < 0)
				r = corral_set_error(&e, CORRAL_ESYS, errno, "pipeline",
				                     "pipeline: epoll_ctl: %s", strerror(errno));
		}
		if (r < 0) {
			if (prev_read >= 0)
				close(prev_read);
			r = stage_error(err, i, s, &e);
			pipeline_free(p); /* kills and reaps the stages already started */
			return r;
		}
	}
	*failed = -1;
	if (p->timeout_ms)
		p->dl_timeout = p->t_start + p->timeout_ms;
	arm_timer(p);
	*out = p;
	return 0;
}

int corral_pipeline_spawn(const corral_config *const *stages, size_t n, corral_pipeline **out,
                          struct corral_error *err)
{
	int failed;
	return pipeline_start(stages, n, out, &failed, err);
}

int corral_pipeline_close_output(corral_pipeline *p, int stream)
{
	if (!p || (stream != 1 && stream != 2))
		return CORRAL_EINVAL;
	int r = 0;
	for (size_t i = stream == 1 ? p->n - 1 : 0; i < p->n; i++)
		if (p->st[i].proc) {
			int e = corral_proc_close_output(p->st[i].proc, stream);
			if (e < 0 && !r)
				r = e;
		}
	return r;
}

int corral_pipeline_fd(const corral_pipeline *p)
{
	return p->epfd;
}

int corral_pipeline_next_timeout_ms(const corral_pipeline *p)
{
	if (p->finished)
		return -1;
	uint64_t t = mono_ms();
	int best = -1;
	uint64_t dls[] = {p->dl_timeout, p->dl_down};
	for (size_t i = 0; i < ARRAY_SIZE(dls); i++) {
		if (!dls[i])
			continue;
		int ms = dls[i] <= t ? 0 : (int)(dls[i] - t);
		if (best < 0 || ms < best)
			best = ms;
	}
	for (size_t i = 0; i < p->n; i++) {
		if (p->st[i].finished || !p->st[i].proc)
			continue;
		int ms = corral_proc_next_timeout_ms(p->st[i].proc);
		if (ms >= 0 && (best < 0 || ms < best))
			best = ms;
	}
	return best;
}

int corral_pipeline_step(corral_pipeline *p, int timeout_ms, struct corral_error *err)
{
	if (p->finished)
		return 1;
	uint64_t until = timeout_ms > 0 ? mono_ms() + (uint64_t)timeout_ms : 0;
	for (;;) {
		struct epoll_event evs[MAX_STAGES + 1];
		int wait = timeout_ms;
		if (timeout_ms > 0) {
			uint64_t t = mono_ms();
			wait = t >= until ? 0 : (int)(until - t);
		}
		int n = epoll_wait(p->epfd, evs, (int)ARRAY_SIZE(evs), wait);
		if (n < 0) {
			if (errno == EINTR) {
				if (timeout_ms == 0)
					return 0;
				continue;
			}
			return corral_set_error(err, CORRAL_ESYS, errno, "pipeline",
			                        "pipeline: epoll_wait: %s", strerror(errno));
		}
		for (int k = 0; k < n; k++) {
			uint32_t tag = evs[k].data.u32;
			if (tag == TAG_TIMER) {
				on_timer(p);
			} else if (tag < p->n) {
				int r = stage_step(p, tag, err);
				if (r < 0)
					return r;
			}
		}
		arm_timer(p);
		if (p->n_running == 0) {
			finish(p);
			return 1;
		}
		if (timeout_ms == 0 || (timeout_ms > 0 && mono_ms() >= until))
			return 0;
	}
}

int corral_pipeline_cancel(corral_pipeline *p, uint64_t grace_ms, struct corral_error *err)
{
	(void)err;
	if (p->finished || p->n_running == 0)
		return 0;
	p->cancelled = true;
	p->dl_timeout = 0;
	for (size_t i = 0; i < p->n; i++)
		stop_stage(&p->st[i], grace_ms);
	arm_timer(p);
	return 0;
}

int corral_pipeline_result(corral_pipeline *p, struct corral_pipeline_result **out,
                           struct corral_error *err)
{
	if (!p->finished || p->result_taken)
		return corral_set_error(err, CORRAL_ESTATE, 0, "result",
		                        "result: the pipeline has not finished, or its result was "
		                        "already taken");
	if (!p->res)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "result", "out of memory");
	p->result_taken = true;
	*out = p->res;
	return 0;
}

/* The result of a pipeline that could not be started: no stages, the error naming the stage
 * that failed and the status the CLI uses for that error. */
static struct corral_pipeline_result *failed_result(int failed, const struct corral_error *e)
{
	struct corral_pipeline_result *r = pres_new(0);
	if (!r)
		return NULL;
	result_uuid(r->id);
	r->error = *e;
	r->failed_stage = failed;
	r->exit_code = error_status(e->code);
	return r;
}

int corral_pipeline_run(const corral_config *const *stages, size_t n,
                        struct corral_pipeline_result **out, struct corral_error *err)
{
	*out = NULL;
	struct corral_error local = {0};
	corral_pipeline *p;
	int failed;
	int r = pipeline_start(stages, n, &p, &failed, &local);
	if (r < 0) {
		*out = failed_result(failed, &local);
		if (err)
			*err = local;
		return r;
	}
	while ((r = corral_pipeline_step(p, -1, err)) == 0)
		;
	if (r < 0) {
		corral_pipeline_destroy(p);
		return r;
	}
	r = corral_pipeline_result(p, out, err);
	corral_pipeline_destroy(p);
	if (r < 0)
		return r;
	if ((*out)->error.code) {
		if (err)
			*err = (*out)->error;
		return (*out)->error.code;
	}
	return 0;
}

/* ---- internal, for the CLI (pipeline.h) ------------------------------------------------- */

int pipeline_spawn(const corral_config *const *stages, size_t n, corral_pipeline **out, int *failed,
                   struct corral_error *err)
{
	return pipeline_start(stages, n, out, failed, err);
}

struct corral_pipeline_result *pipeline_failed_result(int failed, const struct corral_error *e)
{
	return failed_result(failed, e);
}
