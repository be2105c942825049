/* Supervision: one epoll set per run over the pidfd, the output pipes, the stdin pipe, the
 * report pipe and one timerfd for every deadline (timeout, kill grace, output drain).
 * corral_run() is corral_spawn() plus corral_proc_step() until done. */
#include "launch.h"
#include "redact.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>

/* How long output may keep flowing after the sandbox's init is gone. In a pid namespace every
 * writer died with the init, so this only bounds the odd case (mode none) of a process that
 * escaped the sweep while holding the pipe. */
#define DRAIN_MS 500
/* After SIGKILL of a non-pid-namespace sandbox, how long the init gets to sweep. */
#define SWEEP_MS 1000
#define READ_CHUNK 65536
/* After this long without new output, redaction releases what no later output can make part
 * of a secret (redact_stream_release), so a live consumer sees a quiet command's last line. */
#define IDLE_RELEASE_MS 100

enum { TAG_PIDFD = 1, TAG_OUT, TAG_ERR, TAG_IN, TAG_REPORT, TAG_TIMER };

struct corral_proc {
	struct corral_config *cfg;
	struct corral_result *res;
	struct launch_out lo;
	int epfd, timerfd;
	struct capture cap[2];
	size_t in_off;
	uint64_t t_start;
	uint64_t dl_timeout, dl_kill, dl_drain, dl_sweep; /* absolute ms; 0 = unset */
	uint64_t dl_idle; /* a redaction release is due (output held back, then quiet) */
	bool reaped, got_exit, got_fail, killed, cancelled, finished, result_taken;
	bool parked;       /* built, the command not yet given (proc_park) */
	uint64_t t_parked; /* when it was built */
	pid_t cmd_pid;
	struct report exit_rep, fail_rep;
	int init_status;
	struct rusage init_ru;
	char *chunk;
	/* redaction sits between the pipes and everything else (callback, capture) */
	struct redactor *red;
	struct redact_stream *rs[2];
	struct sink {
		struct corral_proc *p;
		int stream;
	} sink[2];
};

static void ep_del(corral_proc *p, int *fd)
{
	if (*fd < 0)
		return;
	epoll_ctl(p->epfd, EPOLL_CTL_DEL, *fd, NULL);
	close(*fd);
	*fd = -1;
}

static int ep_add(corral_proc *p, int fd, uint32_t events, int tag)
{
	struct epoll_event ev = {.events = events, .data.u32 = (uint32_t)tag};
	if (fd < 0)
		return 0; /* a stream that goes to the caller's descriptor */
	return epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void arm_timer(corral_proc *p)
{
	uint64_t next = 0;
	uint64_t dls[] = {p->dl_timeout, p->dl_kill, p->dl_drain, p->dl_sweep, p->dl_idle};
	for (size_t i = 0; i < ARRAY_SIZE(dls); i++)
		if (dls[i] && (!next || dls[i] < next))
			next = dls[i];
	struct itimerspec its;
	memset(&its, 0, sizeof(its));
	if (next) {
		/* CLOCK_MONOTONIC absolute; 0 would disarm, so never pass 0 */
		its.it_value.tv_sec = (time_t)(next / 1000);
		its.it_value.tv_nsec = (long)(next % 1000) * 1000000 + 1;
	}
	timerfd_settime(p->timerfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static int send_init(corral_proc *p, int sig)
{
	if (p->reaped || p->lo.pidfd < 0)
		return 0;
	return (int)syscall(SYS_pidfd_send_signal, p->lo.pidfd, sig, NULL, 0);
}

/* Kill the whole sandbox. A pid namespace dies with its init; a cgroup is killed as a whole;
 * without either, the init sweeps its descendants (it is their subreaper) and the command's
 * process group is killed directly in case the init itself is stuck. */
static void hard_kill(corral_proc *p)
{
	if (p->killed)
		return;
	p->killed = true;
	/* A pid namespace dies with its init: no need for the cgroup's (blocking) kill loop. */
	if (p->lo.pidns) {
		send_init(p, SIGKILL);
		return;
	}
	if (p->lo.cg)
		cgroup_kill_all(p->lo.cg);
	if (p->cmd_pid > 0)
		kill(-p->cmd_pid, SIGKILL);
	send_init(p, SIGUSR1);
	p->dl_sweep = mono_ms() + SWEEP_MS;
}

static void begin_stop(corral_proc *p, uint64_t grace_ms)
{
	if (p->dl_kill || p->killed)
		return;
	if (grace_ms == 0) {
		hard_kill(p);
		return;
	}
	/* The init forwards SIGTERM to the command's process group. */
	send_init(p, SIGTERM);
	p->dl_kill = mono_ms() + grace_ms;
}

/* Redacted bytes: to the caller's callback and into the capture. */
static void emit(void *ud, const char *buf, size_t n)
{
	struct sink *k = ud;
	corral_proc *p = k->p;
	if (p->cfg->out_cb)
		p->cfg->out_cb(p->cfg->out_ud, k->stream, buf, n);
	if (!p->cfg->no_capture)
		capture_feed(&p->cap[k->stream - 1], buf, n);
}

static void feed(corral_proc *p, int stream, const char *buf, size_t n)
{
	struct redact_stream *rs = p->rs[stream - 1];
	if (!rs) {
		emit(&p->sink[stream - 1], buf, n);
		return;
	}
	redact_stream_feed(rs, buf, n);
	/* A live consumer gets what is safe once the output pauses (the capture gets the same
	 * bytes either way, so without a callback there is nothing to wait for). */
	if (p->cfg->out_cb && redact_stream_held(rs))
		p->dl_idle = mono_ms() + IDLE_RELEASE_MS;
}

/* End of a stream: release what redaction held back (once). */
static void stream_end(corral_proc *p, int stream)
{
	struct redact_stream *rs = p->rs[stream - 1];
	if (!rs)
		return;
	redact_stream_finish(rs);
	const struct redact_stats *st = redact_stream_stats(rs);
	p->res->redactions += st->total;
	for (unsigned i = 0; i < RK__COUNT && i < 16; i++)
		p->res->redactions_by_kind[i] += st->by_kind[i];
	redact_stream_free(rs);
	p->rs[stream - 1] = NULL;
}

/* The withheld environment values and the configured strings, compiled for this run. */
static int setup_redaction(corral_proc *p)
{
	const struct corral_config *cfg = p->cfg;
	static const char *const names[] = {"redact", "flag", "off"};
	p->res->redaction_mode = names[cfg->redact_mode % 3];
	for (int s = 0; s < 2; s++)
		p->sink[s] = (struct sink){p, s + 1};
	if (cfg->redact_mode == CORRAL_REDACT_OFF)
		return 0;
	struct env_entry *pass = NULL, *withheld = NULL;
	size_t np = 0, nw = 0;
	int r = policy_env(cfg, &pass, &np, &withheld, &nw);
	const char **vals = calloc(nw + 1, sizeof(char *));
	if (r == 0 && vals) {
		for (size_t i = 0; i < nw; i++)
			vals[i] = withheld[i].value;
		p->red = redactor_new(
		    cfg->redact_mode == CORRAL_REDACT_FLAG ? REDACT_FLAG : REDACT_REDACT, vals, nw,
		    (const char *const *)cfg->redact_strings, cfg->n_redact_strings);
	}
	free(vals);
	env_entries_free_list(pass, np);
	env_entries_free_list(withheld, nw);
	if (!p->red)
		return -1;
	for (int s = 0; s < 2; s++)
		if (!(p->rs[s] = redact_stream_new(p->red, emit, &p->sink[s])))
			return -1;
	return 0;
}

static void read_output(corral_proc *p, int *fd, int stream)
{
	/* Bounded per step, so one flooding stream cannot starve the other or the timers. */
	for (int i = 0; i < 16 && *fd >= 0; i++) {
		ssize_t n = read(*fd, p->chunk, READ_CHUNK);
		if (n > 0) {
			feed(p, stream, p->chunk, (size_t)n);
			continue;
		}
		if (n < 0 && (errno == EINTR))
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		ep_del(p, fd); /* EOF or error */
		stream_end(p, stream);
	}
}

static void write_stdin(corral_proc *p)
{
	const struct corral_config *c = p->cfg;
	/* A closed reader must not kill the caller with SIGPIPE: block it for this write and
	 * consume a pending one, the usual library-safe idiom. */
	sigset_t pipe_set, old;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	while (p->lo.in_fd >= 0 && p->in_off < c->stdin_len) {
		ssize_t n = write(p->lo.in_fd, c->stdin_data + p->in_off, c->stdin_len - p->in_off);
		if (n > 0) {
			p->in_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		ep_del(p, &p->lo.in_fd); /* EPIPE: the command closed stdin */
		struct timespec zero = {0, 0};
		sigtimedwait(&pipe_set, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (p->lo.in_fd >= 0 && p->in_off >= c->stdin_len)
		ep_del(p, &p->lo.in_fd); /* all written: EOF for the command */
}

static void read_reports(corral_proc *p)
{
	while (p->lo.report_fd >= 0) {
		struct report r;
		ssize_t n = read(p->lo.report_fd, &r, sizeof(r));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n != (ssize_t)sizeof(r)) {
			ep_del(p, &p->lo.report_fd);
			return;
		}
		if (r.kind == REPORT_FAIL && !p->got_fail) {
			p->fail_rep = r;
			p->got_fail = true;
		} else if (r.kind == REPORT_NOTE && (r.detail & MOUNT_NOTE_OUTER_PROC)) {
			result_add_layer(
			    p->res, "pidns", 1,
			    "own pid space, but /proc is the outer one, read-only: a fresh "
			    "/proc cannot be mounted here (nested container)");
		} else if (r.kind == REPORT_NOTE && (r.detail & NOTE_CGROUPNS_REFUSED)) {
			char d[160];
			snprintf(d, sizeof(d), "refused by the host (%s; mode auto)",
			         strerror(r.err));
			result_add_layer(p->res, "cgroupns", 0, d);
		} else if (r.kind == REPORT_EXEC_OK) {
			p->cmd_pid = r.detail;
		} else if (r.kind == REPORT_EXIT) {
			p->exit_rep = r;
			p->got_exit = true;
			p->dl_timeout = 0; /* ended before its deadline: not a timeout */
			/* The deadline passed as the command ended by itself: the init found it
			 * ended when the stop came (detail), so its end is its own, not a timeout.
			 */
			if (p->res->timed_out && !p->cancelled && r.detail == 1)
				p->res->timed_out = 0;
		}
	}
}

static void reap(corral_proc *p)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	struct rusage ru;
	memset(&ru, 0, sizeof(ru));
	/* waitid with rusage is only reachable through the raw system call. */
	long r = syscall(SYS_waitid, P_PIDFD, p->lo.pidfd, &si, WEXITED | WNOHANG | __WALL, &ru);
	if (r < 0 || si.si_pid == 0)
		return;
	p->reaped = true;
	p->init_ru = ru;
	p->init_status = si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8 : si.si_status;
	read_reports(p);
	/* Without a pid namespace an init that died without its EXIT report (the command killed
	 * it, in mode none) swept nothing: kill what the supervisor can still name, the cgroup
	 * and the command's process group (DESIGN §17). */
	if (!p->lo.pidns && !p->got_exit) {
		if (p->lo.cg)
			cgroup_kill_all(p->lo.cg);
		if (p->cmd_pid > 0)
			kill(-p->cmd_pid, SIGKILL);
	}
	p->dl_timeout = p->dl_kill = p->dl_sweep = 0;
	p->dl_drain = mono_ms() + DRAIN_MS;
	ep_del(p, &p->lo.pidfd);
	ep_del(p, &p->lo.in_fd);
}

static void on_timer(corral_proc *p)
{
	uint64_t exp;
	ssize_t n = read(p->timerfd, &exp, sizeof(exp));
	(void)n;
	uint64_t t = mono_ms();
	/* A command that ended just before its deadline may have its EXIT report waiting behind
	 * this timer in the same batch of events: read it first, so that it is not called timed
	 * out (and its sandbox not killed) after it finished. */
	if (p->dl_timeout && t >= p->dl_timeout && !p->got_exit)
		read_reports(p);
	if (p->dl_timeout && t >= p->dl_timeout) {
		p->dl_timeout = 0;
		p->res->timed_out = 1;
		begin_stop(p, p->cfg->kill_after_ms);
	}
	if (p->dl_kill && t >= p->dl_kill) {
		p->dl_kill = 0;
		hard_kill(p);
	}
	if (p->dl_sweep && t >= p->dl_sweep) {
		/* the init did not finish its sweep: kill it too */
		p->dl_sweep = 0;
		send_init(p, SIGKILL);
	}
	if (p->dl_idle && t >= p->dl_idle) {
		p->dl_idle = 0;
		for (int s = 0; s < 2; s++)
			if (p->rs[s])
				redact_stream_release(p->rs[s]);
	}
	if (p->dl_drain && t >= p->dl_drain) {
		p->dl_drain = 0;
		ep_del(p, &p->lo.out_fd);
		ep_del(p, &p->lo.err_fd);
		stream_end(p, 1);
		stream_end(p, 2);
	}
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* What the run left on the host for its own use: the private tmp of a run without a mount
 * namespace, and the placeholders of protected paths. Only after everything has exited. */
static void release_host_state(corral_proc *p)
{
	if (p->lo.private_tmp) {
		nftw(p->lo.private_tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		free(p->lo.private_tmp);
		p->lo.private_tmp = NULL;
	}
	if (p->lo.held) {
		/* A parked sandbox that never ran a command watched the git redirects for
		 * nothing: one that is there now was made on the host (git sparse-checkout
		 * writes config.worktree), not by a sandbox, and stays. */
		for (size_t i = 0; p->parked && i < p->lo.n_held; i++)
			if (p->lo.held[i].watch && p->lo.held[i].fd >= 0) {
				close(p->lo.held[i].fd);
				p->lo.held[i].fd = -1;
			}
		plan_release_protected_end(p->lo.held, p->lo.n_held);
		p->lo.held = NULL;
		p->lo.n_held = 0;
	}
}

static void classify(corral_proc *p)
{
	struct corral_result *res = p->res;
	int st = p->got_exit ? p->exit_rep.status : -1;
	if (p->got_exit) {
		res->user_ms = (uint64_t)p->exit_rep.user_us / 1000;
		res->sys_ms = (uint64_t)p->exit_rep.sys_us / 1000;
	}
	/* The init's own rusage includes everything it reaped. */
	uint64_t u = (uint64_t)p->init_ru.ru_utime.tv_sec * 1000 +
	             (uint64_t)p->init_ru.ru_utime.tv_usec / 1000;
	uint64_t s = (uint64_t)p->init_ru.ru_stime.tv_sec * 1000 +
	             (uint64_t)p->init_ru.ru_stime.tv_usec / 1000;
	if (u > res->user_ms)
		res->user_ms = u;
	if (s > res->sys_ms)
		res->sys_ms = s;
	res->max_rss_kb = (uint64_t)p->init_ru.ru_maxrss;
	if (p->got_exit && p->exit_rep.maxrss_kb > (int64_t)res->max_rss_kb)
		res->max_rss_kb = (uint64_t)p->exit_rep.maxrss_kb;

	if (st >= 0 && WIFEXITED(st)) {
		res->exited = 1;
		res->exit_code = WEXITSTATUS(st);
	} else if (st >= 0 && WIFSIGNALED(st)) {
		res->signal = WTERMSIG(st);
	} else if (!p->got_fail && WIFEXITED(p->init_status)) {
		/* The init ended on its own without a report: a setup step failed before the
		 * report pipe was usable. Not a signal, and never a silent success. */
		res->exit_code = -1;
		corral_set_error(
		    &res->error, CORRAL_ESETUP, 0, "setup",
		    "setup: the sandbox's init exited with status %d before it could "
		    "report which step failed; run 'corral check' to see what this host "
		    "supports",
		    WEXITSTATUS(p->init_status));
	} else {
		/* The init was killed before it could report (by us: a cancel or a timeout, or
		 * by the kernel): the signal it died of. */
		res->signal = WIFSIGNALED(p->init_status) ? WTERMSIG(p->init_status) : SIGKILL;
	}
	if (p->got_fail) {
		launch_report_error(&p->fail_rep, p->cfg, &res->error);
		if (p->fail_rep.step != 0 && res->error.code != CORRAL_ENOTFOUND &&
		    res->error.code != CORRAL_ENOEXEC) {
			res->exited = 0;
			res->exit_code = -1;
			res->signal = 0;
		}
	}
	if (res->timed_out)
		res->limit = CORRAL_HIT_TIMEOUT;
	/* The limit fired only when it was set, and (CPU) when the time used came near it: a
	 * command may also raise SIGXCPU or SIGXFSZ itself. (The rlimit counts ticks, rusage
	 * exact time: a 1 s limit shows as 850-1000 ms in rusage.) */
	else if (res->signal == SIGXCPU && p->cfg->limits[CORRAL_LIMIT_CPU_S] &&
	         res->user_ms + res->sys_ms >= p->cfg->limits[CORRAL_LIMIT_CPU_S] * 1000 / 2)
		res->limit = CORRAL_HIT_CPU;
	else if (res->signal == SIGKILL && p->cfg->limits[CORRAL_LIMIT_CPU_S] &&
	         res->user_ms + res->sys_ms + 100 >= p->cfg->limits[CORRAL_LIMIT_CPU_S] * 1000)
		res->limit = CORRAL_HIT_CPU;
	else if (res->signal == SIGXFSZ && p->cfg->limits[CORRAL_LIMIT_FSIZE])
		res->limit = CORRAL_HIT_FSIZE;
	/* A shell reports a child killed by SIGXCPU/SIGXFSZ as 128+N; with that limit set the
	 * inference is safe (nothing else raises these signals in a sandbox). */
	else if (res->exited && res->exit_code == 128 + SIGXFSZ &&
	         p->cfg->limits[CORRAL_LIMIT_FSIZE])
		res->limit = CORRAL_HIT_FSIZE;
	else if (res->exited && res->exit_code == 128 + SIGXCPU &&
	         p->cfg->limits[CORRAL_LIMIT_CPU_S])
		res->limit = CORRAL_HIT_CPU;
	else if (p->lo.cg && cgroup_oom_killed(p->lo.cg))
		res->limit = CORRAL_HIT_MEMORY;
	else if (p->lo.cg && !(res->exited && res->exit_code == 0)) {
		/* pids: "the limit that fired" only when the run's own cgroup reached its max; a
		 * fork refused by a parent's budget (the server's, the host's) is not ours */
		int pids = cgroup_pids_hit(p->lo.cg);
		if (pids == 1)
			res->limit = CORRAL_HIT_PIDS;
		else if (pids)
			violations_pids_elsewhere(p->cfg, res, pids == 2);
	}
	if (p->lo.cg) {
		uint64_t peak = cgroup_peak_kb(p->lo.cg);
		if (peak > res->max_rss_kb)
			res->max_rss_kb = peak;
	}
}

static void finish(corral_proc *p)
{
	struct corral_result *res = p->res;
	res->duration_ms = mono_ms() - p->t_start;
	res->cancelled = p->cancelled && !res->timed_out;
	stream_end(p, 1);
	stream_end(p, 2);
	classify(p);
	for (int s = 0; s < 2; s++) {
		size_t len = 0;
		char *buf = capture_finish(&p->cap[s], &len);
		if (s == 0) {
			res->stdout_buf = buf;
			res->stdout_len = buf ? len : 0;
			res->stdout_bytes = p->cap[0].total;
			res->stdout_truncated = capture_truncated(&p->cap[0]);
		} else {
			res->stderr_buf = buf;
			res->stderr_len = buf ? len : 0;
			res->stderr_bytes = p->cap[1].total;
			res->stderr_truncated = capture_truncated(&p->cap[1]);
		}
		capture_free(&p->cap[s]);
	}
	/* With the init still exiting (early_exit), its cgroup and the host state it uses go
	 * when it has been reaped (corral_proc_destroy). */
	if (p->reaped && p->lo.cg) {
		cgroup_destroy(p->lo.cg);
		p->lo.cg = NULL;
	}
	if (p->reaped)
		release_host_state(p);
	violations_collect(p->cfg, res);
	/* nothing is due any more (an early finish leaves the init to corral_proc_destroy) */
	p->dl_timeout = p->dl_kill = p->dl_drain = p->dl_sweep = p->dl_idle = 0;
	arm_timer(p);
	p->finished = true;
}

/* In a pid namespace the init kills and reaps everything before it reports EXIT, and then
 * only exits: the result is complete with that report and the end of the output. The init's
 * own exit (the namespaces' teardown, a fraction of a millisecond) is waited for afterwards,
 * by corral_proc_destroy, not by whoever waits for the result. */
static bool early_exit(const corral_proc *p)
{
	return p->lo.pidns && p->got_exit && !p->killed;
}

static bool is_done(const corral_proc *p)
{
	return (p->reaped || early_exit(p)) && p->lo.out_fd < 0 && p->lo.err_fd < 0;
}

int corral_proc_step(corral_proc *p, int timeout_ms, struct corral_error *err)
{
	if (p->finished)
		return 1;
	uint64_t until = timeout_ms > 0 ? mono_ms() + (uint64_t)timeout_ms : 0;
	for (;;) {
		struct epoll_event evs[8];
		int wait = timeout_ms;
		if (timeout_ms > 0) {
			uint64_t t = mono_ms();
			wait = t >= until ? 0 : (int)(until - t);
		}
		int n = epoll_wait(p->epfd, evs, 8, wait);
		if (n < 0) {
			if (errno == EINTR) {
				if (timeout_ms == 0)
					return 0;
				continue;
			}
			return corral_set_error(err, CORRAL_ESYS, errno, "supervise",
			                        "supervise: epoll_wait: %s", strerror(errno));
		}
		for (int i = 0; i < n; i++) {
			switch (evs[i].data.u32) {
			case TAG_OUT:
				read_output(p, &p->lo.out_fd, 1);
				break;
			case TAG_ERR:
				read_output(p, &p->lo.err_fd, 2);
				break;
			case TAG_IN:
				write_stdin(p);
				break;
			case TAG_REPORT:
				read_reports(p);
				break;
			case TAG_PIDFD:
				reap(p);
				break;
			case TAG_TIMER:
				on_timer(p);
				break;
			}
		}
		arm_timer(p);
		if (is_done(p)) {
			finish(p);
			return 1;
		}
		if (timeout_ms == 0 || (timeout_ms > 0 && mono_ms() >= until))
			return 0;
	}
}

static void proc_free(corral_proc *p)
{
	if (!p)
		return;
	int *fds[] = {&p->lo.pidfd,  &p->lo.out_fd, &p->lo.err_fd, &p->lo.in_fd, &p->lo.report_fd,
	              &p->timerfd,   &p->epfd,      &p->lo.ctl_fd, &p->lo.go_fd};
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
	capture_free(&p->cap[0]);
	capture_free(&p->cap[1]);
	for (int s = 0; s < 2; s++)
		redact_stream_free(p->rs[s]);
	redactor_free(p->red);
	if (p->lo.cg)
		cgroup_destroy(p->lo.cg);
	release_host_state(p);
	if (!p->result_taken)
		corral_result_free(p->res);
	corral_config_free(p->cfg);
	free(p->chunk);
	free(p);
}

static int validate(const struct corral_config *cfg, struct corral_error *err)
{
	if (!cfg->argv)
		return corral_set_error(err, CORRAL_EINVAL, 0, "config",
		                        "config: no command set; set argv or a shell string");
	if (!cfg->workspace)
		return corral_set_error(err, CORRAL_EINVAL, 0, "config",
		                        "config: no workspace set; set a workspace directory");
	return 0;
}

static int fill_result_identity(struct corral_result *res, const struct corral_config *cfg)
{
	size_t n = 0;
	while (cfg->argv[n])
		n++;
	res->argv = calloc(n + 1, sizeof(char *));
	if (!res->argv)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!(res->argv[i] = strdup(cfg->argv[i])))
			return -1;
	if (cfg->shell && !(res->command = strdup(cfg->shell)))
		return -1;
	return 0;
}

int corral_spawn(const corral_config *cfg, corral_proc **out, struct corral_error *err)
{
	*out = NULL;
	int r = validate(cfg, err);
	if (r < 0)
		return r;
	corral_proc *p = calloc(1, sizeof(*p));
	if (!p)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "spawn", "out of memory");
	p->lo.pidfd = p->lo.out_fd = p->lo.err_fd = p->lo.in_fd = p->lo.report_fd = -1;
	p->lo.ctl_fd = p->lo.go_fd = -1;
	p->timerfd = p->epfd = -1;
	p->cfg = config_dup(cfg);
	p->res = result_new();
	p->chunk = malloc(READ_CHUNK);
	if (!p->cfg || !p->res || !p->chunk || fill_result_identity(p->res, cfg) < 0) {
		proc_free(p);
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "spawn", "out of memory");
	}
	/* The config copy no longer owns the caller's stdin fd beyond the launch. */
	capture_init(&p->cap[0], cfg->output_cap);
	capture_init(&p->cap[1], cfg->output_cap);
	if (setup_redaction(p) < 0) {
		proc_free(p);
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "redact", "out of memory");
	}
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	p->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (p->epfd < 0 || p->timerfd < 0) {
		r = corral_set_error(
		    err, CORRAL_ESYS, errno, "spawn",
		    "spawn: cannot create the event loop: %s; raise the open-files "
		    "limit",
		    strerror(errno));
		proc_free(p);
		return r;
	}
	p->t_start = mono_ms();
	r = launch_start(p->cfg, p->res, &p->lo, err);
	if (r < 0) {
		proc_free(p);
		return r;
	}
	int fds[] = {p->lo.out_fd, p->lo.err_fd, p->lo.report_fd, p->lo.in_fd};
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (fds[i] >= 0)
			fcntl(fds[i], F_SETFL, O_NONBLOCK);
	if (ep_add(p, p->lo.pidfd, EPOLLIN, TAG_PIDFD) < 0 ||
	    ep_add(p, p->lo.out_fd, EPOLLIN, TAG_OUT) < 0 ||
	    ep_add(p, p->lo.err_fd, EPOLLIN, TAG_ERR) < 0 ||
	    ep_add(p, p->lo.report_fd, EPOLLIN, TAG_REPORT) < 0 ||
	    (p->lo.in_fd >= 0 && ep_add(p, p->lo.in_fd, EPOLLOUT, TAG_IN) < 0) ||
	    ep_add(p, p->timerfd, EPOLLIN, TAG_TIMER) < 0) {
		r = corral_set_error(err, CORRAL_ESYS, errno, "spawn", "spawn: epoll_ctl: %s",
		                     strerror(errno));
		corral_proc_destroy(p);
		return r;
	}
	p->parked = p->cfg->park;
	p->t_parked = mono_ms(); /* built (the init may still be on its last setup steps) */
	if (p->cfg->timeout_ms && !p->parked) /* parked: the deadline starts with the command */
		p->dl_timeout = p->t_start + p->cfg->timeout_ms;
	arm_timer(p);
	*out = p;
	return 0;
}

/* ---- parked sandboxes (the MCP server's --prebuild; DESIGN §18) ------------------------- */

/* Bytes of argv's strings with their NULs; *n the count. */
static size_t argv_bytes(char *const *argv, size_t *n)
{
	size_t bytes = 0;
	for (*n = 0; argv[*n]; (*n)++)
		bytes += strlen(argv[*n]) + 1;
	return bytes;
}

bool proc_parkable(const struct corral_config *cfg)
{
	if (!cfg->argv || cfg->mode == CORRAL_MODE_NONE || cfg->stdin_is_data ||
	    cfg->stdin_fd >= 0 || cfg->stdout_fd >= 0 || cfg->stderr_fd >= 0 || cfg->tty ||
	    cfg->init_ctl || cfg->cmd_fd3 >= 0)
		return false;
	size_t n, bytes = argv_bytes(cfg->argv, &n);
	return n > 0 && n <= PARK_MAX_ARGC && bytes <= PARK_MAX_ARGV_BYTES;
}

int proc_park(const struct corral_config *cfg, corral_proc **out, uint8_t key[32],
              struct corral_error *err)
{
	*out = NULL;
	if (!proc_parkable(cfg))
		return corral_set_error(err, CORRAL_EINVAL, 0, "park",
		                        "park: this configuration cannot run in a parked sandbox");
	struct corral_config *c = config_dup(cfg);
	if (!c)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "park", "out of memory");
	c->park = true;
	c->out_cb = NULL;
	c->out_ud = NULL;
	corral_proc *p;
	int r = corral_spawn(c, &p, err);
	corral_config_free(c);
	if (r < 0)
		return r;
	/* Only a sandbox with its own pid namespace: killing its init ends everything in it, so
	 * one that is never used leaves nothing behind. */
	if (!p->lo.pidns || p->lo.go_fd < 0) {
		corral_proc_destroy(p);
		return corral_set_error(err, CORRAL_EUNAVAIL, 0, "park",
		                        "park: no pid namespace here; sandboxes are built per call");
	}
	memcpy(key, p->lo.key, 32);
	*out = p;
	return 0;
}

bool proc_parked_ok(corral_proc *p)
{
	if (!p->parked || p->finished)
		return false;
	corral_proc_step(p, 0, NULL);
	return !p->reaped && !p->got_fail && p->lo.go_fd >= 0;
}

static void free_identity(struct corral_result *r)
{
	for (char **a = r->argv; a && *a; a++)
		free(*a);
	free(r->argv);
	free(r->command);
	r->argv = NULL;
	r->command = NULL;
}

int proc_unpark(corral_proc *p, const struct corral_config *cfg, struct corral_error *err)
{
	if (!proc_parked_ok(p))
		return corral_set_error(err, CORRAL_ESTATE, 0, "park",
		                        "park: the sandbox is no longer parked");
	if (!proc_parkable(cfg))
		return corral_set_error(err, CORRAL_EINVAL, 0, "park",
		                        "park: this configuration cannot run in a parked sandbox");
	size_t n, bytes = argv_bytes(cfg->argv, &n);
	struct corral_config *nc = config_dup(cfg);
	char *msg = malloc(8 + bytes);
	struct corral_result id = {0};
	if (!nc || !msg || fill_result_identity(&id, cfg) < 0)
		goto nomem;
	nc->park = false;
	/* cfg's redaction, ready before the command can write a byte */
	struct corral_config *old_cfg = p->cfg;
	struct redactor *old_red = p->red;
	struct redact_stream *old_rs[2] = {p->rs[0], p->rs[1]};
	const char *old_mode = p->res->redaction_mode;
	p->cfg = nc;
	p->red = NULL;
	p->rs[0] = p->rs[1] = NULL;
	if (setup_redaction(p) < 0) {
		for (int s = 0; s < 2; s++)
			redact_stream_free(p->rs[s]);
		redactor_free(p->red);
		p->cfg = old_cfg;
		p->red = old_red;
		p->rs[0] = old_rs[0];
		p->rs[1] = old_rs[1];
		p->res->redaction_mode = old_mode;
		for (int s = 0; s < 2; s++)
			p->sink[s] = (struct sink){p, s + 1};
		goto nomem;
	}
	for (int s = 0; s < 2; s++)
		redact_stream_free(old_rs[s]);
	redactor_free(old_red);
	corral_config_free(old_cfg);

	uint32_t h[2] = {(uint32_t)bytes, (uint32_t)n};
	memcpy(msg, h, sizeof(h));
	size_t off = sizeof(h);
	for (char **a = cfg->argv; *a; a++) {
		size_t l = strlen(*a) + 1;
		memcpy(msg + off, *a, l);
		off += l;
	}
	/* The init may be gone: no SIGPIPE for the caller (see write_stdin). */
	sigset_t pipe_set, old;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	size_t done = 0;
	int werr = 0;
	while (done < off) {
		ssize_t w = write(p->lo.go_fd, msg + done, off - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			werr = w < 0 ? errno : EIO;
			struct timespec zero = {0, 0};
			sigtimedwait(&pipe_set, NULL, &zero);
			break;
		}
		done += (size_t)w;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	free(msg);
	close(p->lo.go_fd);
	p->lo.go_fd = -1;
	p->parked = false;
	free_identity(p->res);
	p->res->argv = id.argv;
	p->res->command = id.command;
	capture_free(&p->cap[0]);
	capture_free(&p->cap[1]);
	capture_init(&p->cap[0], nc->output_cap);
	capture_init(&p->cap[1], nc->output_cap);
	p->t_start = mono_ms();
	p->res->prebuilt = 1;
	p->res->prebuilt_ms = p->t_start - p->t_parked;
	if (werr)
		return corral_set_error(err, CORRAL_ESYS, werr, "park",
		                        "park: cannot hand the command to the sandbox: %s",
		                        strerror(werr));
	if (nc->timeout_ms)
		p->dl_timeout = p->t_start + nc->timeout_ms;
	arm_timer(p);
	return 0;
nomem:
	corral_config_free(nc);
	free(msg);
	free_identity(&id);
	return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "park", "out of memory");
}

int corral_proc_fd(const corral_proc *p)
{
	return p->epfd;
}
int corral_proc_pidfd(const corral_proc *p)
{
	return p->lo.pidfd;
}

int corral_proc_close_output(corral_proc *p, int stream)
{
	if (!p || (stream != 1 && stream != 2))
		return CORRAL_EINVAL;
	int *fd = stream == 1 ? &p->lo.out_fd : &p->lo.err_fd;
	int to_caller = stream == 1 ? p->cfg->stdout_fd : p->cfg->stderr_fd;
	if (*fd < 0)
		return to_caller >= 0 ? CORRAL_EINVAL : 0;
	ep_del(p, fd);
	stream_end(p, stream);
	return 0;
}

int corral_proc_stdout_fd(const corral_proc *p)
{
	return p->lo.out_fd;
}
int corral_proc_stderr_fd(const corral_proc *p)
{
	return p->lo.err_fd;
}
pid_t corral_proc_pid(const corral_proc *p)
{
	return p->lo.pid;
}

int corral_proc_next_timeout_ms(const corral_proc *p)
{
	uint64_t next = 0;
	uint64_t dls[] = {p->dl_timeout, p->dl_kill, p->dl_drain, p->dl_sweep, p->dl_idle};
	for (size_t i = 0; i < ARRAY_SIZE(dls); i++)
		if (dls[i] && (!next || dls[i] < next))
			next = dls[i];
	if (!next)
		return -1;
	uint64_t t = mono_ms();
	return next <= t ? 0 : (int)(next - t);
}

int corral_proc_cancel(corral_proc *p, uint64_t grace_ms, struct corral_error *err)
{
	(void)err;
	if (p->finished || p->reaped)
		return 0;
	p->cancelled = true;
	p->dl_timeout = 0;
	begin_stop(p, grace_ms);
	arm_timer(p);
	return 0;
}

int corral_proc_result(corral_proc *p, struct corral_result **out, struct corral_error *err)
{
	if (!p->finished || p->result_taken)
		return corral_set_error(
		    err, CORRAL_ESTATE, 0, "result",
		    "result: the run has not finished, or its result was already "
		    "taken");
	p->result_taken = true;
	*out = p->res;
	return 0;
}

bool proc_release_ended(corral_proc *p)
{
	/* Everything of the run has ended but the init, which only exits. A placeholder is
	 * still a mount point in the dying mount namespace: the rmdir takes that mount with it
	 * (the kernel allows it outside the caller's namespace). */
	if (!p || !early_exit(p) || p->reaped)
		return false;
	release_host_state(p);
	return true;
}

void corral_proc_destroy(corral_proc *p)
{
	if (!p)
		return;
	/* the host state first: the end of the directory placeholders (plan.c's closer) then
	 * overlaps the init's exit, waited for below */
	proc_release_ended(p);
	if (!p->reaped && p->lo.pidfd >= 0) {
		hard_kill(p);
		if (!p->lo.pidns) {
			/* give the init its sweep, then make sure */
			for (int i = 0; i < SWEEP_MS / 10 && !p->reaped; i++) {
				struct timespec ts = {0, 10 * 1000000};
				nanosleep(&ts, NULL);
				reap(p);
			}
		}
		send_init(p, SIGKILL);
		siginfo_t si;
		while (waitid(P_PIDFD, (id_t)p->lo.pidfd, &si, WEXITED | __WALL) < 0 &&
		       errno == EINTR)
			;
		p->reaped = true;
	}
	proc_free(p);
}

int corral_run(const corral_config *cfg, struct corral_result **out, struct corral_error *err)
{
	*out = NULL;
	corral_proc *p;
	struct corral_error local = {0};
	int r = corral_spawn(cfg, &p, &local);
	if (r < 0) {
		/* Still hand back a result that describes the failure. */
		struct corral_result *res = result_new();
		if (res) {
			res->error = local;
			if (cfg->argv && fill_result_identity(res, cfg) < 0) {
				corral_result_free(res);
				res = NULL;
			}
		}
		if (res) {
			res->mode = cfg->mode == CORRAL_MODE_NONE   ? "none"
			            : cfg->mode == CORRAL_MODE_AUTO ? "auto"
			                                            : "required";
			violations_collect(cfg, res);
		}
		*out = res;
		if (err)
			*err = local;
		return r;
	}
	while ((r = corral_proc_step(p, -1, err)) == 0)
		;
	if (r < 0) {
		corral_proc_destroy(p);
		return r;
	}
	corral_proc_result(p, out, err);
	corral_proc_destroy(p);
	/* The sandbox could not be set up, or the command could not be started: say so. */
	if ((*out)->error.code) {
		if (err)
			*err = (*out)->error;
		return (*out)->error.code;
	}
	return 0;
}

/* ---- internal, for sessions (session.c) ------------------------------------------------ */

int proc_ctl_fd(const corral_proc *p)
{
	return p->lo.ctl_fd;
}

int proc_signal_init(corral_proc *p, int sig)
{
	if (p->reaped || p->lo.pidfd < 0)
		return -ESRCH;
	if (syscall(SYS_pidfd_send_signal, p->lo.pidfd, sig, NULL, 0) < 0)
		return -errno;
	return 0;
}

uint64_t proc_oom_count(const corral_proc *p)
{
	return p->lo.cg ? cgroup_oom_count(p->lo.cg) : 0;
}

const struct corral_result *proc_peek_result(const corral_proc *p)
{
	return p->res;
}

bool proc_finished(const corral_proc *p)
{
	return p->finished;
}
