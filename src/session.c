/* Sessions: one sandbox that lives across calls, holding an interactive shell.
 *
 * The shell (bash --norc --noprofile --noediting -i, or sh -i) reads its commands from a
 * pipe on its stdin. Each command is sent as one line:
 *
 *     eval -- 'COMMAND' </dev/null 3>&-; command printf '%s %d\n' NONCE "$?" >&3
 *
 * COMMAND is single-quoted (a quote inside becomes '\''), so no byte of it can end the line
 * early; its stdin is /dev/null, so a command that reads stdin gets EOF rather than the next
 * command; and fd 3 (the status pipe) is hidden from it. The status comes back on fd 3, out
 * of band, tagged with a random per-command nonce: nothing the command prints on stdout or
 * stderr can look like the end of the command, and a status line with another nonce is
 * ignored. An interactive shell is used because SIGINT then aborts the current command line
 * (a builtin loop included) and returns to reading the next line, which is how a timeout
 * interrupts a command without losing the session. After the interrupt a resync line with a
 * second nonce reports "$?" (130) for the aborted line.
 *
 * Output is the bytes the session wrote on stdout and stderr while the command ran: once the
 * status arrived the pipes are drained (what the command wrote is already in them) and the
 * command ends. Output written while no command runs (a background process) is counted and
 * dropped.
 *
 * Jobs inside a session are started by the sandbox's init on request over its control socket
 * (launch.c), with descriptors passed over it, under the same confinement as the shell.
 */
#include "internal.h"
#include "redact.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NONCE_LEN 24
#define DEFAULT_STARTUP_MS 10000
#define DEFAULT_TERM_MS 2000
#define DEFAULT_OUTPUT_BUDGET (1ull << 30)
#define JOB_RING_MIN (64 * 1024)
#define JOB_DRAIN_MS 500
#define MAX_RUNS 4096
#define RESYNC_DELAY_MS 50
/* After this long without output, redaction releases what no later output can make part of a
 * secret (redact_stream_release): into a job's ring, or to a session's live callback. */
#define JOB_FLUSH_MS 100

static void make_nonce(char out[NONCE_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char b[NONCE_LEN / 2];
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		/* not expected for this size; a uuid (random, with a counter fallback) keeps
		 * collisions unlikely */
		char u[37];
		result_uuid(u);
		size_t k = 0;
		for (size_t i = 0; k < NONCE_LEN && u[i]; i++)
			if (u[i] != '-')
				out[k++] = u[i];
		while (k < NONCE_LEN)
			out[k++] = '0';
		out[NONCE_LEN] = 0;
		return;
	}
	for (size_t i = 0; i < sizeof(b); i++) {
		out[2 * i] = hex[b[i] >> 4];
		out[2 * i + 1] = hex[b[i] & 15];
	}
	out[NONCE_LEN] = 0;
}

/* ---- the output ring of a job ---------------------------------------------------------
 * Bytes of both streams in arrival order, with absolute offsets; runs record where each
 * stream's stretch starts, so a read by offset can split what follows into stdout and
 * stderr. */

struct run {
	uint64_t off;
	int stream;
};

struct oring {
	char *buf;
	size_t cap;
	uint64_t start, end; /* absolute offsets of the bytes held */
	struct run *runs;
	size_t n_runs, runs_cap;
	uint64_t dropped;
};

static int oring_init(struct oring *r, size_t cap)
{
	memset(r, 0, sizeof(*r));
	r->cap = cap;
	r->buf = malloc(cap);
	return r->buf ? 0 : -1;
}

static void oring_free(struct oring *r)
{
	free(r->buf);
	free(r->runs);
	memset(r, 0, sizeof(*r));
}

static void oring_trim_runs(struct oring *r)
{
	size_t k = 0;
	while (k + 1 < r->n_runs && r->runs[k + 1].off <= r->start)
		k++;
	if (k) {
		memmove(r->runs, r->runs + k, (r->n_runs - k) * sizeof(*r->runs));
		r->n_runs -= k;
	}
}

static void oring_append(struct oring *r, int stream, const char *data, size_t n)
{
	if (!n || !r->buf)
		return;
	if (!r->n_runs || r->runs[r->n_runs - 1].stream != stream) {
		if (r->n_runs == MAX_RUNS) {
			/* too many stream switches held: the oldest run goes */
			uint64_t ns = r->runs[1].off;
			r->dropped += ns - r->start;
			r->start = ns;
			oring_trim_runs(r);
		}
		if (r->n_runs == r->runs_cap) {
			size_t nc = r->runs_cap ? r->runs_cap * 2 : 16;
			struct run *g = realloc(r->runs, nc * sizeof(*g));
			if (!g) {
				r->dropped += r->end - r->start + n;
				r->start = r->end = r->end + n;
				r->n_runs = 0;
				return;
			}
			r->runs = g;
			r->runs_cap = nc;
		}
		r->runs[r->n_runs++] = (struct run){r->end, stream};
	}
	if (n > r->cap) { /* only the last cap bytes can be held */
		data += n - r->cap;
		r->end += n - r->cap;
		n = r->cap;
	}
	size_t pos = (size_t)(r->end % r->cap);
	size_t first = n < r->cap - pos ? n : r->cap - pos;
	memcpy(r->buf + pos, data, first);
	memcpy(r->buf, data + first, n - first);
	r->end += n;
	if (r->end - r->start > r->cap) {
		r->dropped += r->end - r->cap - r->start;
		r->start = r->end - r->cap;
	}
	oring_trim_runs(r);
}

/* ---- sessions ------------------------------------------------------------------------- */

enum sh_state { SH_STARTING, SH_READY, SH_ENDED };
enum cmd_state { C_NONE, C_QUEUED, C_RUNNING, C_DONE };

struct corral_job;
struct corral_session;

struct sess_sink {
	struct corral_session *s;
	int stream;
};

struct corral_session {
	char id[37];
	corral_config *cfg; /* the caller's configuration (copy) */
	struct corral_session_options opt;
	char shell[PATH_MAX];
	bool bash;
	corral_proc *proc;
	int epfd, timerfd;
	int st_rd; /* status pipe, read end */
	int in_wr; /* the shell's stdin, write end */
	int ctl;   /* the init's control socket (owned by proc) */
	enum sh_state sh;
	enum cmd_state cmd;
	char st_buf[256];
	size_t st_len;
	char ready_nonce[NONCE_LEN + 1], cmd_nonce[NONCE_LEN + 1], resync_nonce[NONCE_LEN + 1];
	char *wbuf; /* pending bytes for the shell's stdin */
	size_t wlen, woff;
	/* the current command */
	char *line; /* its line, while queued behind the shell's start */
	size_t line_len;
	struct corral_result *cur;
	struct capture cap[2];
	struct redact_stream *rs[2];
	struct redactor *red;
	struct sess_sink sink[2];
	uint64_t t_cmd, dl_cmd, dl_escalate, dl_wedged, dl_startup, dl_cpu;
	uint64_t cmd_timeout; /* this command's timeout, for its denial report */
	uint64_t dl_resync;   /* after the interrupt: when to ask for the status again */
	uint64_t dl_release;  /* the command's output paused with bytes held: release them */
	uint64_t oom0, cpu_user0, cpu_sys0; /* at the command's start */
	pid_t shell_pid;                    /* host pid of the shell, once known */
	int status;
	bool have_status, interrupted;
	/* session-wide */
	uint64_t out_total, dropped, created, last_end;
	uint64_t kept; /* the commands' output as captured (after redaction), at most the budget */
	bool cut[2];   /* this command's stream lost bytes past the budget */
	unsigned commands, restarts;
	bool budget_hit, cpu_hit;
	struct corral_job *jobs;
	uint32_t next_job;
	char startup_err[512];
	size_t startup_err_len;
	int end_err; /* CORRAL_E* of a start that failed */
};

static void jobs_session_gone(corral_session *s);
static void jobs_ctl_message(corral_session *s, const struct ctl_msg *m);
static const struct corral_job *job_next_in_session(const struct corral_job *j);

/* The redactor of a configuration: the values of the environment variables its policy
 * withholds and its extra strings. NULL when redaction is off or out of memory. */
static struct redactor *redactor_for(const corral_config *cfg)
{
	if (cfg->redact_mode == CORRAL_REDACT_OFF)
		return NULL;
	struct env_entry *pass = NULL, *withheld = NULL;
	size_t np = 0, nw = 0;
	struct redactor *red = NULL;
	int pr = policy_env(cfg, &pass, &np, &withheld, &nw);
	const char **vals = calloc(nw + 1, sizeof(char *));
	if (pr == 0 && vals) {
		for (size_t i = 0; i < nw; i++)
			vals[i] = withheld[i].value;
		red = redactor_new(
		    cfg->redact_mode == CORRAL_REDACT_FLAG ? REDACT_FLAG : REDACT_REDACT, vals, nw,
		    (const char *const *)cfg->redact_strings, cfg->n_redact_strings);
	}
	free(vals);
	env_entries_free_list(pass, np);
	env_entries_free_list(withheld, nw);
	return red;
}

static uint64_t sess_next_deadline(const corral_session *s)
{
	uint64_t next = 0;
	uint64_t dls[] = {s->dl_cmd, s->dl_escalate, s->dl_wedged, s->dl_startup,
	                  s->dl_cpu, s->dl_resync,   s->dl_release};
	for (size_t i = 0; i < ARRAY_SIZE(dls); i++)
		if (dls[i] && (!next || dls[i] < next))
			next = dls[i];
	return next;
}

static void sess_arm_timer(corral_session *s)
{
	uint64_t next = sess_next_deadline(s);
	struct itimerspec its;
	memset(&its, 0, sizeof(its));
	if (next) {
		uint64_t t = mono_ms();
		uint64_t d = next > t ? next - t : 1;
		its.it_value.tv_sec = (time_t)(d / 1000);
		its.it_value.tv_nsec = (long)(d % 1000) * 1000000;
	}
	timerfd_settime(s->timerfd, 0, &its, NULL);
}

int corral_session_next_timeout_ms(const corral_session *s)
{
	uint64_t next = sess_next_deadline(s);
	if (!next)
		return -1;
	uint64_t t = mono_ms();
	return next > t ? (int)(next - t) : 0;
}

/* What the command's output becomes, after redaction. Nothing past the session's output
 * budget is kept, here rather than before the redactor: the shell is stopped once the event
 * that spent the budget has been handled, and the supervisor may read a pipe's worth or
 * more before that (a 20 KB budget returned up to 0.5 MB), but a cut in the raw bytes could
 * split a token, whose held prefix the redactor would then let out as plain text. */
static void sess_emit(void *ud, const char *buf, size_t n)
{
	struct sess_sink *k = ud;
	corral_session *s = k->s;
	uint64_t room = s->kept < s->opt.output_budget ? s->opt.output_budget - s->kept : 0;
	if (n > room) { /* (redaction can make the output longer than the raw bytes) */
		s->cut[k->stream - 1] = true;
		s->budget_hit = true;
		n = (size_t)room;
	}
	if (!n)
		return;
	s->kept += n;
	if (s->cfg->out_cb)
		s->cfg->out_cb(s->cfg->out_ud, k->stream, buf, n);
	capture_feed(&s->cap[k->stream - 1], buf, n);
}

static void sess_on_output(void *ud, int stream, const char *buf, size_t n)
{
	corral_session *s = ud;
	if (s->sh != SH_STARTING) {
		s->out_total += n;
		if (s->out_total > s->opt.output_budget)
			s->budget_hit = true;
	}
	if (s->sh == SH_STARTING) {
		/* the shell's start-up chatter ("no job control"): kept for errors only */
		size_t room = sizeof(s->startup_err) - 1 - s->startup_err_len;
		size_t k = n < room ? n : room;
		memcpy(s->startup_err + s->startup_err_len, buf, k);
		s->startup_err_len += k;
		s->startup_err[s->startup_err_len] = 0;
		return;
	}
	if (s->cmd != C_RUNNING || !s->cur) {
		s->dropped += n;
		return;
	}
	if (stream == 1)
		s->cur->stdout_bytes += n;
	else
		s->cur->stderr_bytes += n;
	struct redact_stream *rs = s->rs[stream - 1];
	if (!rs) {
		sess_emit(&s->sink[stream - 1], buf, n);
		return;
	}
	redact_stream_feed(rs, buf, n);
	/* a live callback gets what is safe once the output pauses (the capture gets the same
	 * bytes either way) */
	if (s->cfg->out_cb && redact_stream_held(rs)) {
		s->dl_release = mono_ms() + JOB_FLUSH_MS;
		sess_arm_timer(s);
	}
}

static int ep_add(int epfd, int fd, uint32_t ev, uint32_t tag)
{
	struct epoll_event e = {.events = ev, .data.u32 = tag};
	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e);
}

enum { T_PROC = 1, T_STATUS, T_IN, T_CTL, T_TIMER };

static void sess_close_shell_fds(corral_session *s)
{
	if (s->st_rd >= 0) {
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->st_rd, NULL);
		close(s->st_rd);
		s->st_rd = -1;
	}
	if (s->in_wr >= 0) {
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->in_wr, NULL);
		close(s->in_wr);
		s->in_wr = -1;
	}
	if (s->ctl >= 0) {
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->ctl, NULL);
		s->ctl = -1; /* owned by the proc */
	}
	if (s->proc) {
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, corral_proc_fd(s->proc), NULL);
		corral_proc_destroy(s->proc);
		s->proc = NULL;
	}
	free(s->wbuf);
	s->wbuf = NULL;
	s->wlen = s->woff = 0;
	s->st_len = 0;
}

/* Write what the shell's stdin takes now; the rest waits for EPOLLOUT. */
static int sess_flush(corral_session *s)
{
	if (s->in_wr < 0)
		return -EPIPE;
	sigset_t pipe_set, old;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	int e = 0;
	while (s->woff < s->wlen) {
		ssize_t w = write(s->in_wr, s->wbuf + s->woff, s->wlen - s->woff);
		if (w > 0) {
			s->woff += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		e = w < 0 ? errno : EIO;
		break;
	}
	if (e == EPIPE) {
		struct timespec zero = {0, 0};
		sigtimedwait(&pipe_set, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	struct epoll_event ev = {.events = s->woff < s->wlen ? EPOLLOUT : 0, .data.u32 = T_IN};
	epoll_ctl(s->epfd, EPOLL_CTL_MOD, s->in_wr, &ev);
	if (s->woff == s->wlen) {
		free(s->wbuf);
		s->wbuf = NULL;
		s->wlen = s->woff = 0;
	}
	return e && e != EAGAIN ? -e : 0;
}

static int sess_write(corral_session *s, const char *line, size_t n)
{
	if (s->in_wr < 0)
		return -EPIPE;
	char *g = realloc(s->wbuf, s->wlen + n);
	if (!g)
		return -ENOMEM;
	memcpy(g + s->wlen, line, n);
	s->wbuf = g;
	s->wlen += n;
	return sess_flush(s);
}

static int sess_spawn(corral_session *s, struct corral_error *err)
{
	int in[2] = {-1, -1}, st[2] = {-1, -1};
	corral_config *pc = NULL;
	int r;
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(st, O_CLOEXEC) < 0) {
		r = corral_set_error(err, CORRAL_ESYS, errno, "session",
		                     "session: pipe: %s; raise the open-files limit",
		                     strerror(errno));
		goto fail;
	}
	pc = config_dup(s->cfg);
	if (!pc) {
		r = corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "session",
		                     "session: out of memory");
		goto fail;
	}
	const char *bash_argv[] = {s->shell, "--norc",  "--noprofile", "--noediting",
	                           "+o",     "history", "-i",          NULL};
	const char *sh_argv[] = {s->shell, "-i", NULL};
	if ((r = corral_config_set_argv(pc, s->bash ? bash_argv : sh_argv, err)) < 0 ||
	    (r = corral_config_set_stdin_fd(pc, in[0], err)) < 0)
		goto fail;
	pc->timeout_ms = 0; /* the session lives until closed; commands have timeouts */
	pc->cmd_fd3 = st[1];
	pc->init_ctl = true;
	pc->no_capture = true;
	pc->redact_mode = CORRAL_REDACT_OFF; /* redacted per command, here */
	pc->out_cb = sess_on_output;
	pc->out_ud = s;
	pc->stdout_fd = pc->stderr_fd = -1;
	pc->tty = false;
	s->sh = SH_STARTING;
	s->startup_err_len = 0;
	s->startup_err[0] = 0;
	s->shell_pid = -1;
	r = corral_spawn(pc, &s->proc, err);
	corral_config_free(pc);
	pc = NULL;
	if (r < 0)
		goto fail;
	close(in[0]);
	close(st[1]);
	in[0] = st[1] = -1;
	s->in_wr = in[1];
	s->st_rd = st[0];
	in[1] = st[0] = -1;
	fcntl(s->in_wr, F_SETFL, O_NONBLOCK);
	fcntl(s->st_rd, F_SETFL, O_NONBLOCK);
	s->ctl = proc_ctl_fd(s->proc);
	if (ep_add(s->epfd, corral_proc_fd(s->proc), EPOLLIN, T_PROC) < 0 ||
	    ep_add(s->epfd, s->st_rd, EPOLLIN, T_STATUS) < 0 ||
	    ep_add(s->epfd, s->in_wr, 0, T_IN) < 0 ||
	    (s->ctl >= 0 && ep_add(s->epfd, s->ctl, EPOLLIN, T_CTL) < 0)) {
		r = corral_set_error(err, CORRAL_ESYS, errno, "session", "session: epoll_ctl: %s",
		                     strerror(errno));
		sess_close_shell_fds(s);
		return r;
	}
	make_nonce(s->ready_nonce);
	/* No prompts, no history expansion; then say ready. */
	char line[256];
	int n = snprintf(line, sizeof(line),
	                 "PS1= PS2= PS4=; unset PROMPT_COMMAND HISTFILE; %s"
	                 "command printf '\\n%%s 0\\n' %s >&3\n",
	                 s->bash ? "set +H; " : "", s->ready_nonce);
	s->dl_startup = mono_ms() + s->opt.startup_timeout_ms;
	sess_arm_timer(s);
	if ((r = sess_write(s, line, (size_t)n)) < 0) {
		int e = -r;
		sess_close_shell_fds(s);
		return corral_set_error(err, CORRAL_ESETUP, e, "session",
		                        "session: the shell %s did not take its first line: %s",
		                        s->shell, strerror(e));
	}
	return 0;
fail:
	corral_config_free(pc);
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (st[i] >= 0)
			close(st[i]);
	}
	s->sh = SH_ENDED;
	return r;
}

static void sess_copy_layers(corral_session *s, struct corral_result *res)
{
	const struct corral_result *pr = s->proc ? proc_peek_result(s->proc) : NULL;
	if (!pr)
		return;
	res->mode = pr->mode;
	for (size_t i = 0; i < pr->n_layers; i++)
		result_add_layer(res, pr->layers[i].name, pr->layers[i].applied,
		                 pr->layers[i].detail);
}

/* Host pid of the shell: the init's oldest child, found by the ppid and start time in
 * /proc/PID/stat (readable by anyone; the init's own task/children file is not, since the
 * init is not dumpable). Cached: the shell lives as long as the sandbox. */
static pid_t sess_shell_pid(const corral_session *s)
{
	if (!s->proc)
		return -1;
	if (s->shell_pid > 0)
		return s->shell_pid;
	pid_t init = corral_proc_pid(s->proc), best = -1;
	unsigned long long best_start = 0;
	DIR *d = opendir("/proc");
	if (!d)
		return -1;
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end, path[64], st[1024];
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, st, sizeof(st) - 1);
		close(fd);
		if (n <= 0)
			continue;
		st[n] = 0;
		char *rp = strrchr(st, ')');
		int ppid;
		unsigned long long start;
		/* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
		 * cutime cstime priority nice threads itrealvalue starttime */
		if (!rp || sscanf(rp + 1,
		                  " %*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
		                  "%*d %*d %*d %llu",
		                  &ppid, &start) != 2)
			continue;
		if (ppid == init && (best < 0 || start < best_start)) {
			best = (pid_t)pid;
			best_start = start;
		}
	}
	closedir(d);
	((corral_session *)s)->shell_pid = best;
	return best;
}

/* Fields of /proc/PID/stat after the command name. */
static int read_stat(long pid, int *pgrp, uint64_t *uticks, uint64_t *sticks)
{
	char path[64], st[1024];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, st, sizeof(st) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	st[n] = 0;
	char *rp = strrchr(st, ')');
	if (!rp)
		return -1;
	/* state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime
	 * cutime cstime */
	char state;
	int ppid, pg, sid, tty, tpgid;
	unsigned flags;
	unsigned long a, b, c, d, ut, stt;
	long cut, cst;
	if (sscanf(rp + 1, " %c %d %d %d %d %d %u %lu %lu %lu %lu %lu %lu %ld %ld", &state, &ppid,
	           &pg, &sid, &tty, &tpgid, &flags, &a, &b, &c, &d, &ut, &stt, &cut, &cst) != 15)
		return -1;
	if (pgrp)
		*pgrp = pg;
	if (uticks)
		*uticks = (uint64_t)ut + (uint64_t)(cut > 0 ? cut : 0);
	if (sticks)
		*sticks = (uint64_t)stt + (uint64_t)(cst > 0 ? cst : 0);
	return 0;
}

/* SIGKILL every process of the shell's process group but the shell: the foreground of the
 * command that would not stop on SIGINT. */
static void sess_kill_foreground(corral_session *s)
{
	pid_t sh = sess_shell_pid(s);
	if (sh <= 0)
		return;
	DIR *d = opendir("/proc");
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		int pg;
		if (*end || pid <= 0 || pid == sh || read_stat(pid, &pg, NULL, NULL) < 0)
			continue;
		if (pg == sh)
			kill((pid_t)pid, SIGKILL);
	}
	closedir(d);
}

/* CPU time used by the whole session: every live process in its pid namespace, with what
 * each has reaped (cutime/cstime), so nothing is counted twice. The namespace is the
 * shell's (the init is not dumpable, so its ns link is closed to an unprivileged caller);
 * the init itself, which reaps the orphans, is added by its stat. */
static void sess_cpu(const corral_session *s, uint64_t *user_ms, uint64_t *sys_ms)
{
	*user_ms = *sys_ms = 0;
	if (!s->proc)
		return;
	pid_t init = corral_proc_pid(s->proc), sh = sess_shell_pid(s);
	long hz0 = sysconf(_SC_CLK_TCK);
	if (!s->cfg->limits[CORRAL_LIMIT_CPU_S]) {
		/* No CPU budget to enforce: the shell's own time and its reaped children's (what
		 * the foreground of a command used) is enough for a result's usage, and costs one
		 * read instead of a walk over every process of the host. */
		uint64_t u0, k0;
		if (sh > 0 && hz0 > 0 && read_stat(sh, NULL, &u0, &k0) == 0) {
			*user_ms = u0 * 1000 / (uint64_t)hz0;
			*sys_ms = k0 * 1000 / (uint64_t)hz0;
		}
		return;
	}
	char path[64];
	struct stat ns0, ns;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)sh);
	if (sh <= 0 || stat(path, &ns0) < 0)
		return;
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t ut = 0, st = 0, u, k;
	if (read_stat(init, NULL, &u, &k) == 0) {
		ut += u;
		st += k;
	}
	DIR *d = opendir("/proc");
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0 || pid == init)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/ns/pid", pid);
		if (stat(path, &ns) < 0 || ns.st_ino != ns0.st_ino || ns.st_dev != ns0.st_dev)
			continue;
		if (read_stat(pid, NULL, &u, &k) == 0) {
			ut += u;
			st += k;
		}
	}
	closedir(d);
	if (hz > 0) {
		*user_ms = ut * 1000 / (uint64_t)hz;
		*sys_ms = st * 1000 / (uint64_t)hz;
	}
}

static uint64_t sess_cpu_ms(const corral_session *s)
{
	uint64_t u, k;
	sess_cpu(s, &u, &k);
	return u + k;
}

static void sess_begin_streams(corral_session *s)
{
	for (int i = 0; i < 2; i++) {
		s->cut[i] = false;
		capture_init(&s->cap[i], s->cfg->output_cap);
		s->sink[i].s = s;
		s->sink[i].stream = i + 1;
		s->rs[i] = s->red ? redact_stream_new(s->red, sess_emit, &s->sink[i]) : NULL;
	}
}

/* The command is over: collect its output and fill the result. */
static void sess_finish_cmd(corral_session *s)
{
	struct corral_result *res = s->cur;
	/* What the command wrote is in the pipes already: take it (bounded: a background
	 * process that keeps writing must not hold the command's end up). */
	for (int round = 0; round < 64 && s->proc; round++) {
		int a = 0, b = 0;
		int fo = corral_proc_stdout_fd(s->proc), fe = corral_proc_stderr_fd(s->proc);
		if (fo >= 0)
			ioctl(fo, FIONREAD, &a);
		if (fe >= 0)
			ioctl(fe, FIONREAD, &b);
		if (a <= 0 && b <= 0)
			break;
		struct corral_error e2 = {0};
		if (corral_proc_step(s->proc, 0, &e2) != 0)
			break;
	}
	for (int i = 0; i < 2; i++) {
		if (!s->rs[i])
			continue;
		redact_stream_finish(s->rs[i]);
		const struct redact_stats *st = redact_stream_stats(s->rs[i]);
		res->redactions += st->total;
		for (unsigned k = 0; k < RK__COUNT && k < 16; k++)
			res->redactions_by_kind[k] += st->by_kind[k];
		redact_stream_free(s->rs[i]);
		s->rs[i] = NULL;
	}
	/* This command spent the session's output budget (its last output may be read only
	 * after its status, here): its result says so, as when the stop came first; the shell
	 * is ended before anything else runs (the event loop, corral_session_begin). */
	if (s->budget_hit) {
		if (res->limit == CORRAL_HIT_NONE)
			res->limit = CORRAL_HIT_OUTPUT;
		res->session_ended = 1;
	}
	res->stdout_truncated = capture_truncated(&s->cap[0]) || s->cut[0];
	res->stderr_truncated = capture_truncated(&s->cap[1]) || s->cut[1];
	res->stdout_buf = capture_finish(&s->cap[0], &res->stdout_len);
	res->stderr_buf = capture_finish(&s->cap[1], &res->stderr_len);
	capture_free(&s->cap[0]);
	capture_free(&s->cap[1]);
	res->duration_ms = mono_ms() - s->t_cmd;
	if (s->have_status) {
		res->exited = 1;
		res->exit_code = s->status;
		/* a shell reports death by a limit signal as 128+N */
		if (s->status == 128 + SIGXCPU && res->limit == CORRAL_HIT_NONE)
			res->limit = CORRAL_HIT_CPU;
		if (s->status == 128 + SIGXFSZ && res->limit == CORRAL_HIT_NONE)
			res->limit = CORRAL_HIT_FSIZE;
	}
	if (res->timed_out && res->limit == CORRAL_HIT_NONE)
		res->limit = CORRAL_HIT_TIMEOUT;
	/* an OOM kill in the session's cgroup while this command ran */
	if (s->proc && proc_oom_count(s->proc) > s->oom0 &&
	    (res->limit == CORRAL_HIT_NONE || res->limit == CORRAL_HIT_TIMEOUT))
		res->limit = CORRAL_HIT_MEMORY;
	/* CPU this command cost the session (processes it left running included so far) */
	uint64_t u, k;
	sess_cpu(s, &u, &k);
	res->user_ms = u > s->cpu_user0 ? u - s->cpu_user0 : 0;
	res->sys_ms = k > s->cpu_sys0 ? k - s->cpu_sys0 : 0;
	/* the denial report of a timeout names this command's timeout */
	uint64_t keep = s->cfg->timeout_ms;
	s->cfg->timeout_ms = s->cmd_timeout;
	violations_collect(s->cfg, res);
	s->cfg->timeout_ms = keep;
	s->dl_cmd = s->dl_escalate = s->dl_wedged = s->dl_resync = s->dl_release = 0;
	s->last_end = mono_ms();
	s->cmd = C_DONE;
	sess_arm_timer(s);
}

/* The shell ended (exit, a limit, killed): the session is over. */
static void sess_shell_ended(corral_session *s)
{
	struct corral_result *pr = NULL;
	struct corral_error e2 = {0};
	int code = -1, sig = 0;
	enum corral_limit_hit lim = CORRAL_HIT_NONE;
	/* a budget ends a live shell: everything stops now, before what is left in the pipes
	 * is read */
	if (s->proc && (s->budget_hit || s->cpu_hit) && !proc_finished(s->proc))
		corral_proc_cancel(s->proc, 0, &e2);
	if (s->proc && corral_proc_step(s->proc, 0, &e2) == 1 &&
	    corral_proc_result(s->proc, &pr, &e2) == 0 && pr) {
		code = pr->exited ? pr->exit_code : -1;
		sig = pr->signal;
		lim = pr->limit;
		if (pr->error.code) {
			s->end_err = pr->error.code;
			snprintf(s->startup_err, sizeof(s->startup_err), "%s", pr->error.message);
			s->startup_err_len = strlen(s->startup_err);
		}
	}
	if (s->budget_hit)
		lim = CORRAL_HIT_OUTPUT;
	else if (s->cpu_hit)
		lim = CORRAL_HIT_CPU;
	if (s->cmd == C_RUNNING) {
		struct corral_result *res = s->cur;
		if (!s->have_status) {
			if (code >= 0) {
				s->have_status = true;
				s->status = code;
			} else {
				res->signal = sig ? sig : SIGKILL;
			}
		}
		if (lim != CORRAL_HIT_NONE && res->limit == CORRAL_HIT_NONE)
			res->limit = lim;
		res->session_ended = 1;
		sess_finish_cmd(s);
	}
	corral_result_free(pr);
	s->sh = SH_ENDED;
	s->dl_startup = s->dl_cpu = 0;
	jobs_session_gone(s);
	sess_close_shell_fds(s);
	sess_arm_timer(s);
}

static void sess_send_line(corral_session *s)
{
	int r = sess_write(s, s->line, s->line_len);
	free(s->line);
	s->line = NULL;
	s->cmd = C_RUNNING;
	s->t_cmd = mono_ms();
	s->dl_cmd = s->cmd_timeout ? s->t_cmd + s->cmd_timeout : 0;
	if (s->cfg->limits[CORRAL_LIMIT_CPU_S])
		s->dl_cpu = s->t_cmd + 1000;
	s->oom0 = s->proc ? proc_oom_count(s->proc) : 0;
	sess_cpu(s, &s->cpu_user0, &s->cpu_sys0);
	sess_arm_timer(s);
	if (s->cur)
		s->cur->duration_ms = 0;
	if (r < 0)
		sess_shell_ended(s);
}

/* The shell did not come back after SIGINT and SIGKILL of its foreground: start over. */
static void sess_restart(corral_session *s)
{
	jobs_session_gone(s);
	sess_close_shell_fds(s);
	s->restarts++;
	s->cur->session_restarted = 1;
	if (!s->cur->signal)
		s->cur->signal = SIGKILL;
	sess_finish_cmd(s);
	struct corral_error e2 = {0};
	if (sess_spawn(s, &e2) < 0) {
		s->cur->session_ended = 1;
		s->sh = SH_ENDED;
		snprintf(s->startup_err, sizeof(s->startup_err), "%s", e2.message);
	}
}

/* Status lines on fd 3: "NONCE STATUS". */
static void sess_read_status(corral_session *s)
{
	for (;;) {
		if (s->st_rd < 0)
			return;
		ssize_t n =
		    read(s->st_rd, s->st_buf + s->st_len, sizeof(s->st_buf) - 1 - s->st_len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* EAGAIN; EOF means the shell is gone (the proc reports it) */
		s->st_len += (size_t)n;
		char *nl;
		while ((nl = memchr(s->st_buf, '\n', s->st_len))) {
			*nl = 0;
			char nonce[NONCE_LEN + 1];
			int status;
			if (sscanf(s->st_buf, "%24s %d", nonce, &status) == 2 &&
			    strlen(nonce) == NONCE_LEN) {
				if (s->sh == SH_STARTING && !strcmp(nonce, s->ready_nonce)) {
					s->sh = SH_READY;
					s->dl_startup = 0;
					s->startup_err_len = 0;
					sess_arm_timer(s);
					if (s->cmd == C_QUEUED)
						sess_send_line(s);
				} else if (s->cmd == C_RUNNING && !strcmp(nonce, s->cmd_nonce)) {
					s->have_status = true;
					s->status = status;
					/* After an interrupt the command is over only once the
					 * resync line has been read too: the SIGINT may still be
					 * on its way to a shell that is reading its next line,
					 * and that line must not be a command's. */
					if (!s->interrupted)
						sess_finish_cmd(s);
				} else if (s->cmd == C_RUNNING && s->interrupted &&
				           !strcmp(nonce, s->resync_nonce)) {
					if (!s->have_status) {
						s->have_status = true;
						s->status = status;
					}
					sess_finish_cmd(s);
				}
			}
			size_t used = (size_t)(nl + 1 - s->st_buf);
			memmove(s->st_buf, nl + 1, s->st_len - used);
			s->st_len -= used;
		}
		if (s->st_len == sizeof(s->st_buf) - 1)
			s->st_len = 0; /* a line this long is no status line */
	}
}

/* Ask for "$?" under the resync nonce (after an interrupt aborted the command's line). */
static void sess_resync(corral_session *s)
{
	char line[128];
	int n = snprintf(line, sizeof(line), "command printf '\\n%%s %%d\\n' %s \"$?\" >&3\n",
	                 s->resync_nonce);
	sess_write(s, line, (size_t)n);
}

static void sess_ctl_read(corral_session *s)
{
	for (;;) {
		if (s->ctl < 0)
			return;
		struct ctl_msg m;
		ssize_t n = recv(s->ctl, &m, sizeof(m), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		if ((size_t)n == sizeof(m))
			jobs_ctl_message(s, &m);
	}
}

static void sess_timers(corral_session *s)
{
	uint64_t t = mono_ms();
	if (s->dl_startup && t >= s->dl_startup) {
		s->dl_startup = 0;
		snprintf(
		    s->startup_err, sizeof(s->startup_err),
		    "session: the shell %.200s was not ready within %llu ms; raise the startup "
		    "timeout or check that it runs in this sandbox",
		    s->shell, (unsigned long long)s->opt.startup_timeout_ms);
		s->startup_err_len = strlen(s->startup_err);
		s->end_err = CORRAL_ESETUP;
		if (s->cmd == C_QUEUED) {
			s->cmd = C_RUNNING;
			s->t_cmd = t;
		}
		sess_shell_ended(s);
		return;
	}
	if (s->cmd == C_RUNNING && s->dl_cmd && t >= s->dl_cmd)
		sess_read_status(s); /* a status already written wins over the deadline */
	if (s->cmd == C_RUNNING && s->dl_cmd && t >= s->dl_cmd) {
		/* The timeout: interrupt the foreground, then ask for the status again (an
		 * interactive shell drops the rest of an interrupted line). */
		s->dl_cmd = 0;
		s->cur->timed_out = 1;
		s->cur->limit = CORRAL_HIT_TIMEOUT;
		s->interrupted = true;
		make_nonce(s->resync_nonce);
		proc_signal_init(s->proc, SIGINT);
		/* The resync line goes out a little later: a SIGINT that reaches a shell which
		 * has just finished the command (and is reading its next line) makes it drop the
		 * line it is reading. */
		s->dl_resync = t + RESYNC_DELAY_MS;
		s->dl_escalate = t + (s->cfg->kill_after_ms ? s->cfg->kill_after_ms : 100);
	}
	if (s->cmd == C_RUNNING && s->dl_resync && t >= s->dl_resync) {
		s->dl_resync = 0;
		sess_resync(s);
	}
	if (s->dl_release && t >= s->dl_release) {
		s->dl_release = 0;
		for (int i = 0; i < 2; i++)
			if (s->rs[i])
				redact_stream_release(s->rs[i]);
	}
	if (s->cmd == C_RUNNING && s->dl_escalate && t >= s->dl_escalate) {
		s->dl_escalate = 0;
		if (!s->have_status)
			s->cur->signal = SIGKILL;
		sess_kill_foreground(s);
		sess_resync(s); /* once more, in case the first one was lost to the interrupt */
		s->dl_wedged = t + (s->cfg->kill_after_ms ? s->cfg->kill_after_ms : 100);
	}
	if (s->cmd == C_RUNNING && s->dl_wedged && t >= s->dl_wedged) {
		s->dl_wedged = 0;
		sess_restart(s);
	}
	if (s->dl_cpu && t >= s->dl_cpu) {
		s->dl_cpu = 0;
		uint64_t lim = s->cfg->limits[CORRAL_LIMIT_CPU_S] * 1000;
		if (sess_cpu_ms(s) >= lim) {
			s->cpu_hit = true;
			sess_shell_ended(s);
			return;
		}
		if (s->cmd == C_RUNNING)
			s->dl_cpu = t + 1000;
	}
	sess_arm_timer(s);
}

static void sess_handle(corral_session *s, uint32_t tag)
{
	switch (tag) {
	case T_PROC: {
		struct corral_error e2 = {0};
		if (s->proc && corral_proc_step(s->proc, 0, &e2) != 0) {
			/* the shell has ended: take what the status pipe still holds first */
			sess_read_status(s);
			if (s->sh != SH_ENDED)
				sess_shell_ended(s);
		}
		break;
	}
	case T_STATUS:
		sess_read_status(s);
		break;
	case T_IN:
		if (sess_flush(s) < 0)
			epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->in_wr, NULL);
		break;
	case T_CTL:
		sess_ctl_read(s);
		break;
	case T_TIMER: {
		uint64_t x;
		ssize_t n = read(s->timerfd, &x, sizeof(x));
		(void)n;
		sess_timers(s);
		break;
	}
	}
	if (s->budget_hit && s->sh != SH_ENDED)
		sess_shell_ended(s);
}

int corral_session_step(corral_session *s, int timeout_ms, struct corral_error *err)
{
	uint64_t until = timeout_ms > 0 ? mono_ms() + (uint64_t)timeout_ms : 0;
	for (;;) {
		if (s->cmd == C_DONE)
			return 1;
		/* deadlines first: the timerfd may not have fired yet when asked for */
		if (corral_session_next_timeout_ms(s) == 0)
			sess_timers(s);
		if (s->cmd == C_DONE)
			return 1;
		int wait = timeout_ms;
		if (timeout_ms > 0) {
			uint64_t t = mono_ms();
			wait = t >= until ? 0 : (int)(until - t);
		}
		struct epoll_event evs[8];
		int n = epoll_wait(s->epfd, evs, 8, wait);
		if (n < 0) {
			if (errno == EINTR) {
				if (timeout_ms == 0)
					return 0;
				continue;
			}
			return corral_set_error(err, CORRAL_ESYS, errno, "session",
			                        "session: epoll_wait: %s", strerror(errno));
		}
		for (int i = 0; i < n; i++)
			sess_handle(s, evs[i].data.u32);
		if (s->cmd == C_DONE)
			return 1;
		if (n == 0 && timeout_ms >= 0 && (timeout_ms == 0 || mono_ms() >= until))
			return 0;
		if (timeout_ms == 0)
			return 0;
	}
}

int corral_session_interrupt(corral_session *s)
{
	if (s->cmd == C_RUNNING || s->cmd == C_QUEUED) {
		if (s->cmd == C_QUEUED) {
			/* not sent yet: it never runs */
			free(s->line);
			s->line = NULL;
			s->cmd = C_RUNNING;
			s->cur->timed_out = 1;
			sess_finish_cmd(s);
			return 0;
		}
		if (s->dl_cmd || !s->interrupted) {
			s->dl_cmd = mono_ms();
			sess_arm_timer(s);
		}
	}
	return 0;
}

int corral_session_fd(const corral_session *s)
{
	return s->epfd;
}

const char *corral_session_id(const corral_session *s)
{
	return s->id;
}

static bool has_bash(const corral_config *cfg, char *out)
{
	return policy_which(cfg, "bash", sandbox_path_env(cfg), out) == 0;
}

int corral_session_open(const corral_config *cfg, const struct corral_session_options *opts,
                        corral_session **out, struct corral_error *err)
{
	*out = NULL;
	if (!cfg)
		return corral_set_error(err, CORRAL_EINVAL, 0, "session",
		                        "session: no configuration");
	if (!cfg->workspace)
		return corral_set_error(err, CORRAL_EINVAL, 0, "workspace",
		                        "workspace: not set; call corral_config_set_workspace()");
	corral_session *s = calloc(1, sizeof(*s));
	if (!s)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "session",
		                        "session: out of memory");
	s->st_rd = s->in_wr = s->ctl = s->epfd = s->timerfd = -1;
	result_uuid(s->id);
	if (opts)
		s->opt = *opts;
	s->opt.shell = NULL;
	if (!s->opt.startup_timeout_ms)
		s->opt.startup_timeout_ms = DEFAULT_STARTUP_MS;
	if (!s->opt.term_timeout_ms)
		s->opt.term_timeout_ms = DEFAULT_TERM_MS;
	if (!s->opt.output_budget)
		s->opt.output_budget = DEFAULT_OUTPUT_BUDGET;
	int r;
	s->cfg = config_dup(cfg);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (!s->cfg || s->epfd < 0 || s->timerfd < 0 ||
	    ep_add(s->epfd, s->timerfd, EPOLLIN, T_TIMER) < 0) {
		r = corral_set_error(err, s->cfg ? CORRAL_ESYS : CORRAL_ENOMEM, errno, "session",
		                     "session: %s", strerror(errno ? errno : ENOMEM));
		goto fail;
	}
	/* the shell: given, else bash when the sandbox has it, else sh */
	const char *want = opts && opts->shell ? opts->shell : NULL;
	if (want) {
		if (strlen(want) >= sizeof(s->shell) || !*want) {
			r = corral_set_error(err, CORRAL_EINVAL, 0, "session",
			                     "session: the shell name is empty or too long");
			goto fail;
		}
		strcpy(s->shell, want);
	} else {
		char path[PATH_MAX];
		strcpy(s->shell, has_bash(cfg, path) ? "bash" : "sh");
	}
	const char *base = strrchr(s->shell, '/');
	base = base ? base + 1 : s->shell;
	s->bash = strstr(base, "bash") != NULL;
	/* Redaction per command: the withheld environment values and configured strings. */
	if (cfg->redact_mode != CORRAL_REDACT_OFF) {
		s->red = redactor_for(cfg);
		if (!s->red) {
			r = corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "redact",
			                     "redaction: cannot prepare the detectors");
			goto fail;
		}
	}
	s->created = mono_ms();
	s->last_end = s->created;
	if ((r = sess_spawn(s, err)) < 0)
		goto fail;
	/* wait for the shell to be ready */
	while (s->sh == SH_STARTING) {
		int w = corral_session_next_timeout_ms(s);
		struct epoll_event evs[8];
		int n = epoll_wait(s->epfd, evs, 8, w < 0 ? 1000 : w);
		if (n < 0 && errno != EINTR) {
			r = corral_set_error(err, CORRAL_ESYS, errno, "session",
			                     "session: epoll_wait: %s", strerror(errno));
			goto fail;
		}
		for (int i = 0; i < n; i++)
			sess_handle(s, evs[i].data.u32);
		if (n == 0)
			sess_timers(s);
	}
	if (s->sh != SH_READY) {
		/* what the sandbox said (a setup error names the step), or the shell's words */
		char msg[400];
		snprintf(msg, sizeof(msg), "%.*s", (int)s->startup_err_len, s->startup_err);
		for (char *p = msg; *p; p++)
			if (*p == '\n')
				*p = ' ';
		r = corral_set_error(err, s->end_err ? s->end_err : CORRAL_ESETUP, 0, "session",
		                     "session: the shell %s did not start%s%s", s->shell,
		                     *msg ? ": " : "", msg);
		goto fail;
	}
	*out = s;
	return 0;
fail:
	corral_session_close(s);
	return r;
}

int corral_session_begin(corral_session *s, const char *command, uint64_t timeout_ms,
                         struct corral_error *err)
{
	if (!command)
		return corral_set_error(err, CORRAL_EINVAL, 0, "command", "command: missing");
	if (s->cmd == C_QUEUED || s->cmd == C_RUNNING)
		return corral_set_error(err, CORRAL_ESTATE, 0, "session",
		                        "session %s: a command is already running in it; wait for "
		                        "its result (one command at a time per session)",
		                        s->id);
	if (s->budget_hit && s->sh != SH_ENDED)
		sess_shell_ended(s); /* the last command spent it, and nothing has run since */
	if (s->sh == SH_ENDED)
		return corral_set_error(err, CORRAL_ESTATE, 0, "session",
		                        "session %s has ended (its shell exited%s); open a new "
		                        "session",
		                        s->id,
		                        s->budget_hit ? " when its output budget was spent"
		                        : s->cpu_hit  ? " when its CPU budget was spent"
		                                      : "");
	size_t clen = strlen(command);
	if (clen > CTL_MAX_COMMAND * 16)
		return corral_set_error(
		    err, CORRAL_EINVAL, 0, "command",
		    "command: %zu bytes is too long for a session command (at "
		    "most %d); write it to a file in the workspace and run that",
		    clen, CTL_MAX_COMMAND * 16);
	if (s->cmd == C_DONE) {
		corral_result_free(s->cur);
		s->cur = NULL;
	}
	/* the line: eval -- 'quoted' </dev/null 3>&-; command printf '%s %d\n' NONCE "$?" >&3 */
	size_t cap = clen * 4 + 160;
	char *line = malloc(cap);
	struct corral_result *res = result_new();
	if (!line || !res) {
		free(line);
		corral_result_free(res);
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "session",
		                        "session: out of memory");
	}
	make_nonce(s->cmd_nonce);
	size_t o = 0;
	o += (size_t)sprintf(line, s->bash ? "eval -- '" : "eval '");
	for (size_t i = 0; i < clen; i++) {
		if (command[i] == '\'') {
			memcpy(line + o, "'\\''", 4);
			o += 4;
		} else {
			line[o++] = command[i];
		}
	}
	/* the status line starts with a newline: bytes something else left in the status pipe
	 * without one cannot glue onto it */
	o += (size_t)snprintf(line + o, cap - o,
	                      "' </dev/null 3>&-; command printf '\\n%%s %%d\\n' %s \"$?\" >&3\n",
	                      s->cmd_nonce);
	const char *sh_argv[] = {s->shell, "-c", command, NULL};
	res->argv = calloc(4, sizeof(char *));
	res->command = strdup(command);
	res->session_id = strdup(s->id);
	if (res->argv)
		for (int i = 0; i < 3; i++)
			res->argv[i] = strdup(sh_argv[i]);
	res->redaction_mode = (const char *[]){"redact", "flag", "off"}[s->cfg->redact_mode % 3];
	sess_copy_layers(s, res);
	s->cur = res;
	s->have_status = s->interrupted = false;
	s->status = 0;
	s->line = line;
	s->line_len = o;
	s->commands++;
	s->cmd_timeout = timeout_ms ? timeout_ms : s->cfg->timeout_ms;
	sess_begin_streams(s);
	s->t_cmd = mono_ms();
	if (s->sh == SH_READY) {
		sess_send_line(s);
	} else {
		s->cmd = C_QUEUED;
	}
	sess_arm_timer(s);
	return 0;
}

int corral_session_result(corral_session *s, struct corral_result **out, struct corral_error *err)
{
	*out = NULL;
	if (s->cmd != C_DONE || !s->cur)
		return corral_set_error(err, CORRAL_ESTATE, 0, "session",
		                        "session: no finished command to take a result from");
	/* the session-wide CPU budget is checked when each command ends, too */
	if (s->cfg->limits[CORRAL_LIMIT_CPU_S] && s->sh == SH_READY &&
	    sess_cpu_ms(s) >= s->cfg->limits[CORRAL_LIMIT_CPU_S] * 1000) {
		s->cpu_hit = true;
		if (s->cur->limit == CORRAL_HIT_NONE)
			s->cur->limit = CORRAL_HIT_CPU;
		s->cur->session_ended = 1;
		struct corral_result *keep = s->cur;
		s->cur = NULL;
		s->cmd = C_NONE;
		sess_shell_ended(s);
		s->cur = keep;
	}
	*out = s->cur;
	s->cur = NULL;
	s->cmd = C_NONE;
	return 0;
}

int corral_session_exec(corral_session *s, const char *command, uint64_t timeout_ms,
                        struct corral_result **out, struct corral_error *err)
{
	*out = NULL;
	int r = corral_session_begin(s, command, timeout_ms, err);
	if (r < 0)
		return r;
	while ((r = corral_session_step(s, -1, err)) == 0)
		;
	if (r < 0)
		return r;
	return corral_session_result(s, out, err);
}

int corral_session_info(const corral_session *s, struct corral_session_info *info)
{
	memset(info, 0, sizeof(*info));
	info->id = s->id;
	info->alive = s->sh != SH_ENDED;
	info->busy = s->cmd == C_QUEUED || s->cmd == C_RUNNING;
	info->commands = s->commands;
	info->restarts = s->restarts;
	info->created_ms = s->created;
	info->idle_ms = info->busy ? 0 : mono_ms() - s->last_end;
	info->output_bytes = s->out_total;
	info->dropped_bytes = s->dropped;
	info->shell = s->shell;
	for (const struct corral_job *j = s->jobs; j; j = job_next_in_session(j))
		info->jobs += corral_job_running(j) ? 1 : 0;
	return 0;
}

void corral_session_close(corral_session *s)
{
	if (!s)
		return;
	if (s->proc && s->sh != SH_ENDED) {
		/* SIGHUP ends an interactive shell (and it passes it on to its jobs); whatever is
		 * left is killed after the termination timeout. */
		proc_signal_init(s->proc, SIGHUP);
		if (s->in_wr >= 0) {
			close(s->in_wr); /* EOF: the shell exits */
			epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->in_wr, NULL);
			s->in_wr = -1;
		}
		struct corral_error e2 = {0};
		if (corral_proc_step(s->proc, (int)s->opt.term_timeout_ms, &e2) == 0)
			corral_proc_cancel(s->proc, 0, &e2);
	}
	jobs_session_gone(s);
	sess_close_shell_fds(s);
	for (int i = 0; i < 2; i++) {
		redact_stream_free(s->rs[i]);
		capture_free(&s->cap[i]);
	}
	redactor_free(s->red);
	corral_result_free(s->cur);
	free(s->line);
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->timerfd >= 0)
		close(s->timerfd);
	corral_config_free(s->cfg);
	free(s);
}

/* ---- jobs ----------------------------------------------------------------------------- */

enum { J_PROC = 1, J_OUT, J_ERR, J_CTL, J_TIMER };

struct corral_job {
	char id[37];
	char *command;
	struct oring ring;
	int epfd, timerfd;
	/* a job of its own */
	corral_proc *proc;
	/* a job inside a session */
	corral_session *sess;
	struct corral_job *snext;
	uint32_t ctl_id;
	int out_fd, err_fd;
	struct redactor *red; /* its own: a session job outlives its session's */
	struct redact_stream *rs[2];
	struct redact_stats red_st; /* of the streams finished so far */
	bool held[2];               /* bytes held back since the stream was last released */
	uint64_t last_feed[2], dl_flush;
	struct job_sink {
		struct corral_job *j;
		int stream;
	} sink[2];
	bool started, running, ended;
	int exited, exit_code, sig;
	enum corral_limit_hit limit;
	uint64_t t_start, t_end, dl_kill, dl_drain;
	uint64_t total;
	struct corral_result *res; /* a job of its own: its sandbox's result once ended, kept
	                              for the audit record (corral_job_sandbox_result, below) */
};

static const struct corral_job *job_next_in_session(const struct corral_job *j)
{
	return j->snext;
}

static void job_arm(corral_job *j)
{
	uint64_t next = 0;
	uint64_t dls[] = {j->dl_kill, j->dl_drain, j->dl_flush};
	for (size_t i = 0; i < ARRAY_SIZE(dls); i++)
		if (dls[i] && (!next || dls[i] < next))
			next = dls[i];
	struct itimerspec its;
	memset(&its, 0, sizeof(its));
	if (next) {
		uint64_t t = mono_ms(), d = next > t ? next - t : 1;
		its.it_value.tv_sec = (time_t)(d / 1000);
		its.it_value.tv_nsec = (long)(d % 1000) * 1000000;
	}
	timerfd_settime(j->timerfd, 0, &its, NULL);
}

static void job_ring_emit(void *ud, const char *buf, size_t n)
{
	struct job_sink *k = ud;
	oring_append(&k->j->ring, k->stream, buf, n);
}

static void job_arm(corral_job *j);

/* Output of a job, both kinds: redacted, then into the ring. Redaction holds back the last
 * bytes that could start a secret until more output decides; after JOB_FLUSH_MS without
 * output the stream releases what no later output can make part of a secret, so a reader
 * polling a quiet server sees its last line whole, while a token cut by a pause stays held
 * until its end comes (one stream for the job's life: a secret split across writes far
 * apart is still caught). */
static void job_feed(corral_job *j, int stream, const char *buf, size_t n)
{
	j->total += n;
	struct redact_stream *rs = j->rs[stream - 1];
	if (!rs) {
		oring_append(&j->ring, stream, buf, n);
		return;
	}
	redact_stream_feed(rs, buf, n);
	j->held[stream - 1] = redact_stream_held(rs) > 0;
	j->last_feed[stream - 1] = mono_ms();
	if (j->held[stream - 1] && !j->dl_flush) {
		j->dl_flush = j->last_feed[stream - 1] + JOB_FLUSH_MS;
		job_arm(j);
	}
}

static void job_flush(corral_job *j)
{
	uint64_t t = mono_ms(), next = 0;
	for (int i = 0; i < 2; i++) {
		if (!j->rs[i] || !j->held[i])
			continue;
		if (t < j->last_feed[i] + JOB_FLUSH_MS) {
			uint64_t due = j->last_feed[i] + JOB_FLUSH_MS;
			if (!next || due < next)
				next = due;
			continue;
		}
		redact_stream_release(j->rs[i]);
		j->held[i] = false; /* what is still held waits for more output or the end */
	}
	j->dl_flush = next;
}

/* The end of a job's stream: what redaction held back goes out, its counts are kept. */
static void job_end_redaction(corral_job *j, int i)
{
	if (!j->rs[i])
		return;
	redact_stream_finish(j->rs[i]);
	const struct redact_stats *st = redact_stream_stats(j->rs[i]);
	j->red_st.total += st->total;
	for (unsigned k = 0; k < RK__COUNT; k++)
		j->red_st.by_kind[k] += st->by_kind[k];
	redact_stream_free(j->rs[i]);
	j->rs[i] = NULL;
	j->held[i] = false;
}

/* A job of its own: the proc's output callback (raw: the job redacts). */
static void job_proc_output(void *ud, int stream, const char *buf, size_t n)
{
	job_feed(ud, stream, buf, n);
}

static corral_job *job_new(const char *command, size_t cap, struct corral_error *err)
{
	corral_job *j = calloc(1, sizeof(*j));
	if (!j) {
		corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "job", "job: out of memory");
		return NULL;
	}
	j->out_fd = j->err_fd = -1;
	result_uuid(j->id);
	j->command = strdup(command ? command : "");
	j->epfd = epoll_create1(EPOLL_CLOEXEC);
	j->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (!j->command || j->epfd < 0 || j->timerfd < 0 ||
	    oring_init(&j->ring, cap < JOB_RING_MIN ? JOB_RING_MIN : cap) < 0 ||
	    ep_add(j->epfd, j->timerfd, EPOLLIN, J_TIMER) < 0) {
		corral_set_error(err, CORRAL_ESYS, errno ? errno : ENOMEM, "job", "job: %s",
		                 strerror(errno ? errno : ENOMEM));
		corral_job_free(j);
		return NULL;
	}
	for (int i = 0; i < 2; i++) {
		j->sink[i].j = j;
		j->sink[i].stream = i + 1;
	}
	j->t_start = mono_ms();
	return j;
}

static char *argv_to_display(char *const *argv)
{
	size_t n = 1;
	for (char *const *p = argv; p && *p; p++)
		n += strlen(*p) + 1;
	char *s = malloc(n);
	if (!s)
		return NULL;
	s[0] = 0;
	for (char *const *p = argv; p && *p; p++) {
		if (p != argv)
			strcat(s, " ");
		strcat(s, *p);
	}
	return s;
}

int corral_job_start(const corral_config *cfg, corral_job **out, struct corral_error *err)
{
	*out = NULL;
	corral_job *j =
	    job_new(cfg && cfg->shell ? cfg->shell : NULL, cfg ? cfg->output_cap : 0, err);
	if (!j)
		return CORRAL_ENOMEM;
	if (!cfg->shell && cfg->argv) {
		free(j->command);
		j->command = argv_to_display(cfg->argv);
	}
	corral_config *pc = config_dup(cfg);
	if (!pc) {
		corral_job_free(j);
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "job", "job: out of memory");
	}
	pc->no_capture = true;
	pc->out_cb = job_proc_output;
	pc->out_ud = j;
	pc->redact_mode = CORRAL_REDACT_OFF; /* the job redacts, see job_feed */
	if (cfg->redact_mode != CORRAL_REDACT_OFF) {
		j->red = redactor_for(cfg);
		for (int i = 0; j->red && i < 2; i++)
			j->rs[i] = redact_stream_new(j->red, job_ring_emit, &j->sink[i]);
		if (!j->red || !j->rs[0] || !j->rs[1]) {
			corral_config_free(pc);
			corral_job_free(j);
			return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "redact",
			                        "redaction: cannot prepare the detectors");
		}
	}
	int r = corral_spawn(pc, &j->proc, err);
	corral_config_free(pc);
	if (r < 0) {
		corral_job_free(j);
		return r;
	}
	if (ep_add(j->epfd, corral_proc_fd(j->proc), EPOLLIN, J_PROC) < 0) {
		r = corral_set_error(err, CORRAL_ESYS, errno, "job", "job: epoll_ctl: %s",
		                     strerror(errno));
		corral_job_free(j);
		return r;
	}
	j->started = j->running = true;
	*out = j;
	return 0;
}

static void job_mark_ended(corral_job *j, int status, bool known)
{
	if (j->ended || !j->started)
		goto out;
	j->t_end = mono_ms();
	if (known && WIFEXITED(status)) {
		j->exited = 1;
		j->exit_code = WEXITSTATUS(status);
	} else if (known && WIFSIGNALED(status)) {
		j->sig = WTERMSIG(status);
		if (j->sig == SIGXCPU)
			j->limit = CORRAL_HIT_CPU;
		else if (j->sig == SIGXFSZ)
			j->limit = CORRAL_HIT_FSIZE;
	} else {
		j->sig = SIGKILL; /* its session ended under it */
	}
out:
	j->running = false;
	j->ended = true;
	/* The pipes: what is in them still belongs to the job, then they close. The timer
	 * also wakes the job's descriptor when the end came through the session's (the
	 * control socket is in both epoll sets, and either may take the report). */
	if (!j->dl_drain) {
		j->dl_drain = mono_ms() + (j->out_fd >= 0 || j->err_fd >= 0 ? JOB_DRAIN_MS : 0);
		job_arm(j);
	}
}

static void jobs_ctl_message(corral_session *s, const struct ctl_msg *m)
{
	for (corral_job *j = s->jobs; j; j = j->snext) {
		if (j->ctl_id != m->id)
			continue;
		if (m->op == CTL_STARTED) {
			j->started = j->running = true;
		} else if (m->op == CTL_START_FAILED) {
			j->started = true;
			j->exited = 1;
			j->exit_code = 126;
			j->t_end = mono_ms();
			job_mark_ended(j, 126 << 8, true);
			char msg[160];
			int n = snprintf(msg, sizeof(msg), "corral: the job could not start: %s\n",
			                 m->arg == EAGAIN ? "this session already runs 64 jobs"
			                                  : strerror(m->arg));
			oring_append(&j->ring, 2, msg, (size_t)n);
		} else if (m->op == CTL_EXITED) {
			job_mark_ended(j, m->arg, true);
		}
		return;
	}
}

static void jobs_session_gone(corral_session *s)
{
	corral_job *j = s->jobs;
	s->jobs = NULL;
	while (j) {
		corral_job *next = j->snext;
		j->snext = NULL;
		if (s->ctl >= 0)
			epoll_ctl(j->epfd, EPOLL_CTL_DEL, s->ctl, NULL);
		j->sess = NULL;
		if (!j->ended) {
			j->started = true;
			job_mark_ended(j, 0, false);
		}
		j = next;
	}
}

static void job_unlink(corral_job *j)
{
	corral_session *s = j->sess;
	if (!s)
		return;
	for (corral_job **pp = &s->jobs; *pp; pp = &(*pp)->snext)
		if (*pp == j) {
			*pp = j->snext;
			break;
		}
	if (s->ctl >= 0)
		epoll_ctl(j->epfd, EPOLL_CTL_DEL, s->ctl, NULL);
	j->sess = NULL;
	j->snext = NULL;
}

int corral_session_job_start(corral_session *s, const char *command, corral_job **out,
                             struct corral_error *err)
{
	*out = NULL;
	if (!command)
		return corral_set_error(err, CORRAL_EINVAL, 0, "command", "command: missing");
	if (s->sh != SH_READY || s->ctl < 0)
		return corral_set_error(err, CORRAL_ESTATE, 0, "session",
		                        "session %s is not running (%s); open a new session", s->id,
		                        s->sh == SH_STARTING ? "its shell is still starting"
		                                             : "its shell has ended");
	size_t clen = strlen(command);
	if (clen > CTL_MAX_COMMAND)
		return corral_set_error(err, CORRAL_EINVAL, 0, "command",
		                        "command: %zu bytes is too long for a job (at most %d); "
		                        "write it to a script in the workspace and run that",
		                        clen, CTL_MAX_COMMAND);
	corral_job *j = job_new(command, s->cfg->output_cap, err);
	if (!j)
		return CORRAL_ENOMEM;
	int po[2] = {-1, -1}, pe[2] = {-1, -1}, r;
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
		r = corral_set_error(err, CORRAL_ESYS, errno, "job", "job: pipe: %s",
		                     strerror(errno));
		goto fail;
	}
	if (s->red) {
		j->red = redactor_for(s->cfg);
		for (int i = 0; i < 2; i++)
			if (!j->red ||
			    !(j->rs[i] = redact_stream_new(j->red, job_ring_emit, &j->sink[i]))) {
				r = corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "job",
				                     "job: out of memory");
				goto fail;
			}
	}
	j->ctl_id = ++s->next_job;
	struct ctl_msg m = {.op = CTL_START, .id = j->ctl_id, .arg = 0, .len = (int32_t)clen};
	char *msg = malloc(sizeof(m) + clen);
	if (!msg) {
		r = corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "job", "job: out of memory");
		goto fail;
	}
	memcpy(msg, &m, sizeof(m));
	memcpy(msg + sizeof(m), command, clen);
	int fds[2] = {po[1], pe[1]};
	char cbuf[CMSG_SPACE(sizeof(fds))];
	memset(cbuf, 0, sizeof(cbuf));
	struct iovec iov = {.iov_base = msg, .iov_len = sizeof(m) + clen};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	ssize_t n;
	do
		n = sendmsg(s->ctl, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	int e = errno;
	free(msg);
	if (n < 0) {
		r = corral_set_error(err, CORRAL_ESYS, e, "job",
		                     "job: the session's sandbox did not take the request: %s",
		                     strerror(e));
		goto fail;
	}
	close(po[1]);
	close(pe[1]);
	j->out_fd = po[0];
	j->err_fd = pe[0];
	fcntl(j->out_fd, F_SETFL, O_NONBLOCK);
	fcntl(j->err_fd, F_SETFL, O_NONBLOCK);
	if (ep_add(j->epfd, j->out_fd, EPOLLIN, J_OUT) < 0 ||
	    ep_add(j->epfd, j->err_fd, EPOLLIN, J_ERR) < 0 ||
	    ep_add(j->epfd, s->ctl, EPOLLIN, J_CTL) < 0) {
		r = corral_set_error(err, CORRAL_ESYS, errno, "job", "job: epoll_ctl: %s",
		                     strerror(errno));
		corral_job_free(j);
		return r;
	}
	j->sess = s;
	j->snext = s->jobs;
	s->jobs = j;
	j->running = true; /* requested; CTL_STARTED or CTL_START_FAILED follows */
	*out = j;
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (po[i] >= 0)
			close(po[i]);
		if (pe[i] >= 0)
			close(pe[i]);
	}
	corral_job_free(j);
	return r;
}

static void job_close_stream(corral_job *j, int stream)
{
	int *fd = stream == 1 ? &j->out_fd : &j->err_fd;
	if (*fd >= 0) {
		epoll_ctl(j->epfd, EPOLL_CTL_DEL, *fd, NULL);
		close(*fd);
		*fd = -1;
	}
	job_end_redaction(j, stream - 1);
}

static void job_read(corral_job *j, int stream)
{
	int fd = stream == 1 ? j->out_fd : j->err_fd;
	char buf[65536];
	for (int i = 0; i < 16 && fd >= 0; i++) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n > 0) {
			job_feed(j, stream, buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		job_close_stream(j, stream);
		return;
	}
}

static bool job_complete(const corral_job *j)
{
	return !j->proc && j->ended && j->out_fd < 0 && j->err_fd < 0;
}

static void job_proc_done(corral_job *j)
{
	struct corral_result *res = NULL;
	struct corral_error e2 = {0};
	if (corral_proc_result(j->proc, &res, &e2) == 0 && res) {
		j->exited = res->exited;
		j->exit_code = res->exit_code;
		j->sig = res->signal;
		j->limit = res->limit;
		if (res->error.code) {
			char msg[600];
			int n = snprintf(msg, sizeof(msg), "corral: %s\n", res->error.message);
			oring_append(&j->ring, 2, msg, (size_t)n);
		}
		corral_result_free(j->res);
		j->res = res; /* for the audit record */
	}
	for (int i = 0; i < 2; i++)
		job_end_redaction(j, i);
	j->dl_flush = 0;
	j->running = false;
	j->ended = true;
	j->t_end = mono_ms();
	/* the sandbox is gone: release its descriptors now (a server holds many jobs) */
	epoll_ctl(j->epfd, EPOLL_CTL_DEL, corral_proc_fd(j->proc), NULL);
	corral_proc_destroy(j->proc);
	j->proc = NULL;
}

int corral_job_step(corral_job *j, int timeout_ms, struct corral_error *err)
{
	if (job_complete(j))
		return 1;
	uint64_t until = timeout_ms > 0 ? mono_ms() + (uint64_t)timeout_ms : 0;
	for (;;) {
		int wait = timeout_ms;
		if (timeout_ms > 0) {
			uint64_t t = mono_ms();
			wait = t >= until ? 0 : (int)(until - t);
		}
		int nt = corral_job_next_timeout_ms(j);
		if (nt >= 0 && (wait < 0 || nt < wait))
			wait = nt;
		struct epoll_event evs[8];
		int n = epoll_wait(j->epfd, evs, 8, wait);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return corral_set_error(err, CORRAL_ESYS, errno, "job",
			                        "job: epoll_wait: %s", strerror(errno));
		}
		bool proc_due = j->proc && corral_proc_next_timeout_ms(j->proc) == 0;
		for (int i = 0; i < n; i++) {
			switch (evs[i].data.u32) {
			case J_PROC:
				proc_due = true;
				break;
			case J_OUT:
				job_read(j, 1);
				break;
			case J_ERR:
				job_read(j, 2);
				break;
			case J_CTL:
				if (j->sess)
					sess_ctl_read(j->sess);
				break;
			case J_TIMER: {
				uint64_t x;
				ssize_t rn = read(j->timerfd, &x, sizeof(x));
				(void)rn;
				break;
			}
			}
		}
		if (proc_due && j->proc) {
			int r = corral_proc_step(j->proc, 0, err);
			if (r < 0)
				return r;
			if (r == 1)
				job_proc_done(j);
		}
		uint64_t t = mono_ms();
		if (j->dl_kill && t >= j->dl_kill) {
			j->dl_kill = 0;
			if (j->sess && j->running) {
				struct ctl_msg m = {
				    .op = CTL_SIGNAL, .id = j->ctl_id, .arg = SIGKILL};
				send(j->sess->ctl, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT);
			}
		}
		if (j->dl_drain && t >= j->dl_drain) {
			j->dl_drain = 0;
			job_close_stream(j, 1);
			job_close_stream(j, 2);
		}
		if (j->dl_flush && t >= j->dl_flush)
			job_flush(j);
		job_arm(j);
		if (job_complete(j))
			return 1;
		if (timeout_ms == 0 || (timeout_ms > 0 && mono_ms() >= until))
			return 0;
	}
}

int corral_job_fd(const corral_job *j)
{
	return j->epfd;
}

int corral_job_next_timeout_ms(const corral_job *j)
{
	uint64_t next = 0;
	uint64_t dls[] = {j->dl_kill, j->dl_drain, j->dl_flush};
	for (size_t i = 0; i < ARRAY_SIZE(dls); i++)
		if (dls[i] && (!next || dls[i] < next))
			next = dls[i];
	int pn = j->proc ? corral_proc_next_timeout_ms(j->proc) : -1;
	if (!next)
		return pn;
	uint64_t t = mono_ms();
	int mine = next > t ? (int)(next - t) : 0;
	return pn >= 0 && pn < mine ? pn : mine;
}

const char *corral_job_id(const corral_job *j)
{
	return j->id;
}

const char *corral_job_command(const corral_job *j)
{
	return j->command;
}

int corral_job_running(const corral_job *j)
{
	return j->running && !j->ended;
}

/* UTF-8 at a page's end. The ring holds the two streams interleaved by run; a character is
 * whole within its own stream's bytes. */
static unsigned char oring_byte(const struct oring *r, uint64_t off)
{
	return (unsigned char)r->buf[off % r->cap];
}

static size_t oring_run_at(const struct oring *r, uint64_t off)
{
	size_t k = 0;
	while (k + 1 < r->n_runs && r->runs[k + 1].off <= off)
		k++;
	return k;
}

/* Where the UTF-8 character that a page [from, to) ends inside begins (in the stream of its
 * last byte), with how many of its bytes come after to in *need and that stream in *stream;
 * to when the page ends between characters (or in bytes that are not UTF-8, or in a
 * character that began before from). */
static uint64_t utf8_cut_start(const struct oring *r, uint64_t from, uint64_t to, size_t *need,
                               int *stream)
{
	if (to <= from || !r->n_runs)
		return to;
	size_t k = oring_run_at(r, to - 1);
	*stream = r->runs[k].stream;
	uint64_t off = to - 1;
	size_t conts = 0;
	for (;;) {
		unsigned char c = oring_byte(r, off);
		if ((c & 0xc0) != 0x80) {
			size_t len = (c & 0xe0) == 0xc0   ? 2
			             : (c & 0xf0) == 0xe0 ? 3
			             : (c & 0xf8) == 0xf0 ? 4
			                                  : 1;
			if (len <= conts + 1)
				return to;
			*need = len - conts - 1;
			return off;
		}
		if (++conts == 4 || off == from)
			return to;
		off--; /* the stream's byte before: skip the other stream's runs */
		while (off < r->runs[k].off || r->runs[k].stream != *stream) {
			if (!k || r->runs[k].off <= from)
				return to;
			if (off >= r->runs[k].off) /* in a run of the other stream */
				off = r->runs[k].off - 1;
			k--;
		}
		if (off < from)
			return to;
	}
}

/* The end of the need continuation bytes of stream after offset to; 0 when they are not all
 * in the ring (yet) or are not continuation bytes. */
static uint64_t utf8_char_end(const struct oring *r, uint64_t to, int stream, size_t need)
{
	uint64_t off = to;
	size_t k = oring_run_at(r, to);
	while (need) {
		if (off >= r->end)
			return 0;
		uint64_t rend = k + 1 < r->n_runs ? r->runs[k + 1].off : r->end;
		if (r->runs[k].stream != stream) {
			off = rend;
			k++;
			continue;
		}
		while (need && off < rend) {
			if ((oring_byte(r, off) & 0xc0) != 0x80)
				return 0;
			off++;
			need--;
		}
		if (off == rend)
			k++;
	}
	return off;
}

/* A page cut at max_bytes ends between UTF-8 characters: before a character the cut would
 * split, or, when that character is the page's first, after it (a page never comes back
 * empty for max_bytes smaller than a character). */
static uint64_t utf8_page_end(const struct oring *r, uint64_t from, uint64_t to)
{
	size_t need = 0;
	int stream = 0;
	uint64_t lead = utf8_cut_start(r, from, to, &need, &stream);
	if (lead == to)
		return to;
	/* Within the other stream's bytes a character's parts may lie far apart: a page moves
	 * its end by at most 3 bytes (a character's tail), or is cut where max_bytes says. */
	if (lead > from)
		return to - lead <= 3 ? lead : to;
	uint64_t e = utf8_char_end(r, to, stream, need);
	return e && e - to <= 3 ? e : to;
}

int corral_job_read(corral_job *j, uint64_t since, size_t max_bytes, struct corral_job_output *o,
                    struct corral_error *err)
{
	memset(o, 0, sizeof(*o));
	/* take what is waiting first, so a poll sees the newest bytes */
	struct corral_error e2 = {0};
	if (!job_complete(j))
		corral_job_step(j, 0, &e2);
	const struct oring *r = &j->ring;
	uint64_t from = since < r->start ? r->start : since;
	if (from > r->end)
		from = r->end;
	uint64_t to = r->end;
	if (max_bytes && to - from > max_bytes)
		to = utf8_page_end(r, from, from + max_bytes);
	size_t n = (size_t)(to - from);
	o->stdout_buf = malloc(n + 1);
	o->stderr_buf = malloc(n + 1);
	if (!o->stdout_buf || !o->stderr_buf) {
		corral_job_output_free(o);
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "job", "job: out of memory");
	}
	for (size_t k = 0; k < r->n_runs; k++) {
		uint64_t a = r->runs[k].off, b = k + 1 < r->n_runs ? r->runs[k + 1].off : r->end;
		if (a < from)
			a = from;
		if (b > to)
			b = to;
		if (a >= b)
			continue;
		char *dst = r->runs[k].stream == 1 ? o->stdout_buf + o->stdout_len
		                                   : o->stderr_buf + o->stderr_len;
		for (uint64_t off = a; off < b;) {
			size_t pos = (size_t)(off % r->cap);
			size_t chunk = (size_t)(b - off);
			if (chunk > r->cap - pos)
				chunk = r->cap - pos;
			memcpy(dst, r->buf + pos, chunk);
			dst += chunk;
			off += chunk;
		}
		if (r->runs[k].stream == 1)
			o->stdout_len += (size_t)(b - a);
		else
			o->stderr_len += (size_t)(b - a);
	}
	o->stdout_buf[o->stdout_len] = 0;
	o->stderr_buf[o->stderr_len] = 0;
	o->from_offset = from;
	o->next_offset = to;
	o->missed = since < r->start ? r->start - since : 0;
	o->total_bytes = r->end;
	o->dropped_bytes = r->dropped;
	o->running = corral_job_running(j);
	o->exited = j->exited;
	o->exit_code = j->exited ? j->exit_code : -1;
	o->signal = j->sig;
	o->limit = j->limit;
	o->duration_ms = (j->ended ? j->t_end : mono_ms()) - j->t_start;
	enum redact_mode rm = j->red ? redactor_mode(j->red) : REDACT_OFF;
	o->redaction_mode = rm == REDACT_REDACT ? "redact" : rm == REDACT_FLAG ? "flag" : "off";
	struct redact_stats st = j->red_st;
	for (int i = 0; i < 2; i++) {
		if (!j->rs[i])
			continue;
		const struct redact_stats *ls = redact_stream_stats(j->rs[i]);
		st.total += ls->total;
		for (unsigned k = 0; k < RK__COUNT; k++)
			st.by_kind[k] += ls->by_kind[k];
	}
	o->redactions = st.total;
	for (unsigned k = 0; k < RK__COUNT && k < 16; k++)
		o->redactions_by_kind[k] = st.by_kind[k];
	return 0;
}

void corral_job_output_free(struct corral_job_output *o)
{
	if (!o)
		return;
	free(o->stdout_buf);
	free(o->stderr_buf);
	o->stdout_buf = o->stderr_buf = NULL;
}

int corral_job_kill(corral_job *j, uint64_t grace_ms, struct corral_error *err)
{
	if (j->ended)
		return 0;
	if (j->proc)
		return corral_proc_cancel(j->proc, grace_ms, err);
	if (!j->sess)
		return 0;
	struct ctl_msg m = {.op = CTL_SIGNAL, .id = j->ctl_id, .arg = grace_ms ? SIGTERM : SIGKILL};
	if (send(j->sess->ctl, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		return corral_set_error(err, CORRAL_ESYS, errno, "job", "job: signal: %s",
		                        strerror(errno));
	if (grace_ms) {
		j->dl_kill = mono_ms() + grace_ms;
		job_arm(j);
	}
	return 0;
}

void corral_job_free(corral_job *j)
{
	if (!j)
		return;
	if (j->sess && !j->ended && j->sess->ctl >= 0) {
		struct ctl_msg m = {.op = CTL_SIGNAL, .id = j->ctl_id, .arg = SIGKILL};
		send(j->sess->ctl, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	job_unlink(j);
	if (j->proc)
		corral_proc_destroy(j->proc);
	job_close_stream(j, 1);
	job_close_stream(j, 2);
	if (j->epfd >= 0)
		close(j->epfd);
	if (j->timerfd >= 0)
		close(j->timerfd);
	for (int i = 0; i < 2; i++)
		redact_stream_free(j->rs[i]);
	redactor_free(j->red);
	oring_free(&j->ring);
	corral_result_free(j->res);
	free(j->command);
	free(j);
}

/* ==== audit accessors (the audit store's job and session records, src/mcp/server.c) ====== */

const struct corral_result *corral_job_sandbox_result(const corral_job *j)
{
	return j->res;
}

int corral_session_copy_isolation(const corral_session *s, struct corral_result *into)
{
	size_t before = into->n_layers;
	sess_copy_layers((corral_session *)s, into);
	return into->n_layers > before || into->mode ? 0 : -1;
}
/* ==== end of the audit accessors ========================================================= */
