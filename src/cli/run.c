/* corral run: parse flags into a configuration, run, pass the output through or print the
 * JSON result, and exit like timeout(1). */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/uio.h>
#include <time.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "audit.h"
#include "internal.h"

void usage_run(FILE *f)
{
	fputs(
	    "Usage: corral run [OPTIONS] [--] COMMAND [ARG...]\n"
	    "       corral run [OPTIONS] -c 'SHELL STRING'\n"
	    "       corral run [OPTIONS] --pipe 'STAGE' --pipe 'STAGE' [--pipe 'STAGE'...]\n"
	    "\n"
	    "Run COMMAND in a sandbox: a read-only view of the system, the workspace read-write,\n"
	    "a private /tmp, no network, its own pid space, Landlock, seccomp and limits.\n"
	    "\n"
	    "Options:\n"
	    "  -c, --shell STRING     run STRING with /bin/sh -c\n"
	    "      --pipe STAGE       a pipeline stage (2 to 16): each runs with /bin/sh -c in a\n"
	    "                         sandbox of its own with the same options, its stdout piped\n"
	    "                         to the next one's stdin; the last one's stdout is the\n"
	    "                         output. Status: the rightmost failed stage's (pipefail);\n"
	    "                         a failed stage stops the others; -t covers the whole\n"
	    "                         pipeline. Not with -c or a COMMAND\n"
	    "  -w, --workspace DIR    the read-write workspace (default: current directory)\n"
	    "  -C, --cwd DIR          working directory inside the workspace, not in a --hide\n"
	    "                         tree (default: workspace)\n"
	    "  -t, --timeout DUR      wall-clock timeout (default 60s; 0 = none); DUR is 30, 1.5,\n"
	    "                         250ms, 2m or 1h\n"
	    "      --kill-after DUR   grace between SIGTERM and SIGKILL on timeout (default 2s)\n"
	    "      --memory SIZE      memory limit (cgroup memory.max, else RLIMIT_DATA); SIZE\n"
	    "                         is 512k, 64M, 2G; 0 = none (the default)\n"
	    "      --cpu SECONDS      CPU time limit (SIGXCPU, reported as limit \"cpu\"); 0 = "
	    "none\n"
	    "      --cpus N           CPU share: 0.5 = half of one CPU, 2 = two (cgroup cpu.max\n"
	    "                         or cpu.cfs_quota_us; needs a usable cgroup)\n"
	    "      --pids N           process limit (cgroup pids.max, else RLIMIT_NPROC;\n"
	    "                         default 1024; 0 = none)\n"
	    "      --nofile N         open files limit (default 1024; 0 = none)\n"
	    "      --fsize SIZE       largest file the command may write (SIGXFSZ; 0 = none,\n"
	    "                         the default)\n"
	    "      --tmpfs-size SIZE  size of the private /tmp (default 256M; 0 = the default)\n"
	    "      --max-output SIZE  bytes kept per stream; head and tail kept (default 1M)\n"
	    "      --env NAME         pass NAME (or a glob like LC_*) from corral's environment,\n"
	    "                         unless a deny rule withholds it (*_TOKEN, AWS_*, ...)\n"
	    "      --env NAME=VALUE   set NAME in the sandbox\n"
	    "  -i, --stdin            pass corral's stdin to the command (default: /dev/null)\n"
	    "      --profile P        a builtin profile (default, readonly, strict, network) or\n"
	    "                         a JSON profile file; the flags here override it\n"
	    "      --ro PATH          also show PATH read-only (absolute, ~/..., or relative to\n"
	    "                         the workspace)\n"
	    "      --rw PATH          also show PATH read-write\n"
	    "      --hide PATH        hide PATH, even inside a visible tree (deny wins)\n"
	    "      --dry-run          print the resolved plan (mounts, Landlock, seccomp, env,\n"
	    "                         limits, command decision) and run nothing\n"
	    "      --quiet            no notes from corral on stderr after the command\n"
	    "      --redact MODE      secrets in the output: redact (default), flag, off\n"
	    "      --audit PATH|off   the audit store (default $XDG_STATE_HOME/corral/audit.db,\n"
	    "                         else ~/.local/state/corral/audit.db); off: no record\n"
	    "      --audit-output     also store the (redacted, capped) output in the record\n"
	    "      --audit-max-age DUR, --audit-max-rows N\n"
	    "                         retention of the store: delete rows older than DUR\n"
	    "                         (default 30d) and beyond the newest N (default 100000);\n"
	    "                         0 = no limit of that kind; applied after this run's record\n"
	    "      --net none|host    network: none (loopback only, default) or the host's\n"
	    "      --mode MODE        required (default): fail if a layer is missing;\n"
	    "                         auto: use what the host offers and report the rest;\n"
	    "                         none: no isolation, limits only\n"
	    "      --json             print the result as JSON on stdout instead of the output\n"
	    "  -h, --help             show this help\n"
	    "\n"
	    "Exit status: the command's own; 124 timed out; 125 corral failed (usage, bad value,\n"
	    "setup); 126 not executable or denied; 127 not found; 128+N killed by signal N.\n",
	    f);
}

enum {
	OPT_KILL_AFTER = 256,
	OPT_MEMORY,
	OPT_CPU,
	OPT_CPUS,
	OPT_PIDS,
	OPT_NOFILE,
	OPT_FSIZE,
	OPT_TMPFS,
	OPT_MAX_OUTPUT,
	OPT_ENV,
	OPT_NET,
	OPT_MODE,
	OPT_JSON,
	OPT_PROFILE,
	OPT_RO,
	OPT_RW,
	OPT_HIDE,
	OPT_DRY_RUN,
	OPT_QUIET,
	OPT_REDACT,
	OPT_AUDIT,
	OPT_AUDIT_OUTPUT,
	OPT_AUDIT_MAX_AGE,
	OPT_AUDIT_MAX_ROWS,
	OPT_PIPE,
};

static const struct option long_opts[] = {
    {"shell", required_argument, NULL, 'c'},
    {"workspace", required_argument, NULL, 'w'},
    {"cwd", required_argument, NULL, 'C'},
    {"timeout", required_argument, NULL, 't'},
    {"kill-after", required_argument, NULL, OPT_KILL_AFTER},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"cpu", required_argument, NULL, OPT_CPU},
    {"cpus", required_argument, NULL, OPT_CPUS},
    {"pids", required_argument, NULL, OPT_PIDS},
    {"nofile", required_argument, NULL, OPT_NOFILE},
    {"fsize", required_argument, NULL, OPT_FSIZE},
    {"tmpfs-size", required_argument, NULL, OPT_TMPFS},
    {"max-output", required_argument, NULL, OPT_MAX_OUTPUT},
    {"env", required_argument, NULL, OPT_ENV},
    {"stdin", no_argument, NULL, 'i'},
    {"net", required_argument, NULL, OPT_NET},
    {"mode", required_argument, NULL, OPT_MODE},
    {"json", no_argument, NULL, OPT_JSON},
    {"profile", required_argument, NULL, OPT_PROFILE},
    {"ro", required_argument, NULL, OPT_RO},
    {"rw", required_argument, NULL, OPT_RW},
    {"hide", required_argument, NULL, OPT_HIDE},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"redact", required_argument, NULL, OPT_REDACT},
    {"audit", required_argument, NULL, OPT_AUDIT},
    {"audit-output", no_argument, NULL, OPT_AUDIT_OUTPUT},
    {"audit-max-age", required_argument, NULL, OPT_AUDIT_MAX_AGE},
    {"audit-max-rows", required_argument, NULL, OPT_AUDIT_MAX_ROWS},
    {"pipe", required_argument, NULL, OPT_PIPE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Where the command's output goes when corral's own stdout or stderr cannot take it. A
 * reader that went away (EPIPE: `corral run -- yes | head -1`) or a write that fails (a full
 * disk) closes the command's stream (corral_proc_close_output, after the step that read it),
 * so its next write there fails and SIGPIPE ends it, as it would have ended without corral in
 * between instead of running on until its timeout; EPIPE is a pipeline's usual end and goes
 * unremarked, the rest is said once. (A descriptor 0-2 that was not open is /dev/null since
 * main().)
 *
 * A reader that is there but does not read (`corral run -t 5 -- yes | (sleep 100)`) holds
 * the relay back, and with it the command, as a pipe would; it must not hold back the run's
 * deadlines. So the relay never blocks in write(2): it writes what the descriptor takes now
 * (RWF_NOWAIT; where the kernel has no such write for it, a terminal or a character device,
 * a poll for room and at most PIPE_BUF bytes, which such a descriptor with room takes at
 * once) and waits for room only until the run's next deadline (its timeout, the kill after
 * the grace, ...) or a signal, when the loop must act. What the reader has not taken then
 * waits here, in order, and goes first when it has room again; up to RELAY_HOLD bytes a
 * stream, beyond which the wait is for room alone (the command's output is bounded by then:
 * every deadline passed ends the run a step sooner). When the run has ended, what is left
 * is written as any writer would, until the reader takes it or goes away, or a signal
 * (then it is dropped, and said). A non-blocking descriptor of the caller's that is full is
 * waited for alike. */
#define RELAY_HOLD (8u << 20)

static bool relay_close[3];
static struct relay_wait {
	int (*next_ms)(const void *run); /* the run's next deadline (ms; <0: none) */
	const void *run;
	int sfd; /* the loop's signalfd (a cancel); <0: none */
} relay_w = {NULL, NULL, -1};
static struct relay_pending {
	char *buf;
	size_t off, len, cap; /* waiting: buf[off, off + len) */
} relay_q[3];
static bool relay_nowait_off[3]; /* RWF_NOWAIT refused for the stream's descriptor */

bool cli_relay_failed(int stream)
{
	return stream >= 1 && stream <= 2 && relay_close[stream];
}

void cli_relay_watch(int (*next_ms)(const void *run), const void *run, int sfd)
{
	relay_w.next_ms = next_ms;
	relay_w.run = run;
	relay_w.sfd = sfd;
}

/* Write what fd takes without blocking: >0 written, -1 with errno (EAGAIN: no room now).
 * polled: a poll has just reported room, so a plain write of at most PIPE_BUF bytes goes
 * through at once (RWF_NOWAIT may refuse a file write that needs the disk: the relay would
 * spin on it). */
static ssize_t relay_write_now(int stream, int fd, const char *buf, size_t len, bool polled)
{
	if (!polled && !relay_nowait_off[stream]) {
		struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
		ssize_t n = pwritev2(fd, &v, 1, -1, RWF_NOWAIT);
		if (n >= 0 || (errno != EOPNOTSUPP && errno != EINVAL && errno != ENOSYS))
			return n;
		relay_nowait_off[stream] = true;
	}
	if (!polled) {
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		int r = poll(&pfd, 1, 0);
		if (r < 0)
			return -1;
		if (r == 0) {
			errno = EAGAIN;
			return -1;
		}
	}
	/* room, or an error or hang-up that the write reports */
	return write(fd, buf, len < PIPE_BUF ? len : PIPE_BUF);
}

/* Wait for room on fd: 1 room (or a state the next write reports), 2 interrupted (look
 * again), 0 the run's deadline came or a signal is pending (back to the loop), -1 with
 * errno. until_deadline false: for room, or a signal, alone. */
static int relay_wait_room(int fd, bool until_deadline)
{
	int ms = until_deadline && relay_w.next_ms ? relay_w.next_ms(relay_w.run) : -1;
	struct pollfd pfd[2] = {{.fd = fd, .events = POLLOUT},
	                        {.fd = relay_w.sfd, .events = POLLIN}};
	int r = poll(pfd, relay_w.sfd >= 0 ? 2 : 1, ms);
	if (r < 0)
		return errno == EINTR ? 2 : -1;
	return pfd[0].revents ? 1 : 0;
}

static void relay_fail(int stream, int e)
{
	relay_close[stream] = true;
	relay_q[stream].len = 0;
	if (e != EPIPE)
		cli_error("cannot write the command's %s: %s; closed it, so the command's next "
		          "write there fails",
		          stream == 1 ? "stdout" : "stderr", strerror(e));
}

/* Write from *buf for as long as the stream's descriptor takes it now; *buf and *len
 * advance. false: the write failed (the stream is closed, and that said); true: all of it
 * written, or no room left for now. polled: for the first write, as for relay_write_now. */
static bool relay_push(int stream, const char **buf, size_t *len, bool polled)
{
	int fd = stream == 1 ? STDOUT_FILENO : STDERR_FILENO;
	while (*len) {
		ssize_t n = relay_write_now(stream, fd, *buf, *len, polled);
		polled = false;
		if (n > 0) {
			*buf += n;
			*len -= (size_t)n;
			continue;
		}
		int e = n < 0 ? errno : EIO;
		if (e == EINTR)
			continue;
		if (e == EAGAIN)
			return true;
		relay_fail(stream, e);
		return false;
	}
	return true;
}

/* Write out the stream's waiting bytes. final: the run has ended (no deadline left to keep).
 * Returns with bytes still waiting only when a deadline or a signal needs the loop, or with
 * nowait when the reader takes no more now. */
static void relay_drain(int stream, bool final, bool nowait)
{
	struct relay_pending *q = &relay_q[stream];
	int fd = stream == 1 ? STDOUT_FILENO : STDERR_FILENO;
	bool polled = false;
	while (q->len && !relay_close[stream]) {
		const char *p = q->buf + q->off;
		size_t left = q->len;
		if (!relay_push(stream, &p, &left, polled))
			return;
		q->off += q->len - left;
		q->len = left;
		if (!left || nowait)
			break;
		int r = relay_wait_room(fd, !final && q->len <= RELAY_HOLD);
		if (r < 0) {
			relay_fail(stream, errno);
			return;
		}
		if (r == 0)
			return;
		polled = r == 1;
	}
	if (!q->len)
		q->off = 0;
}

static bool relay_hold(struct relay_pending *q, const char *buf, size_t len)
{
	if (q->off && q->off + q->len + len > q->cap) {
		memmove(q->buf, q->buf + q->off, q->len);
		q->off = 0;
	}
	if (q->off + q->len + len > q->cap) {
		size_t cap = q->cap ? q->cap : 65536;
		while (cap < q->off + q->len + len)
			cap *= 2;
		char *b = realloc(q->buf, cap);
		if (!b)
			return false;
		q->buf = b;
		q->cap = cap;
	}
	memcpy(q->buf + q->off + q->len, buf, len);
	q->len += len;
	return true;
}

static void stream_out(void *ud, int stream, const char *buf, size_t len)
{
	(void)ud;
	if (relay_close[stream] || !len)
		return;
	/* nothing waiting: straight from the caller's buffer; only a remainder is held */
	if (!relay_q[stream].len && !relay_push(stream, &buf, &len, false))
		return;
	if (!len)
		return;
	if (!relay_hold(&relay_q[stream], buf, len)) {
		relay_fail(stream, ENOMEM);
		return;
	}
	relay_drain(stream, false, false);
}

void cli_relay_finish(bool interrupted)
{
	for (int st = 1; st <= 2; st++) {
		struct relay_pending *q = &relay_q[st];
		relay_drain(st, true, interrupted);
		if (q->len && !relay_close[st])
			cli_error("interrupted: %zu bytes of the command's %s were not written "
			          "(its reader had not taken them)",
			          q->len, st == 1 ? "stdout" : "stderr");
		free(q->buf);
		memset(q, 0, sizeof(*q));
	}
	relay_w = (struct relay_wait){NULL, NULL, -1};
}

/* Apply one option to cfg/opts. Returns 0, or an exit code. */
static int apply_opt(int c, const char *arg, corral_config *cfg, struct run_opts *o,
                     struct corral_error *err)
{
	const char *why = NULL;
	uint64_t v = 0;
	switch (c) {
	case 'c':
		o->shell = arg;
		return 0;
	case 'w':
		o->workspace = arg;
		return 0;
	case 'C':
		o->cwd = arg;
		return 0;
	case 't':
		if (parse_duration_ms(arg, &o->timeout_ms, &why) < 0)
			return cli_bad_value("--timeout", arg, why);
		o->timeout_set = true;
		return 0;
	case OPT_KILL_AFTER:
		if (parse_duration_ms(arg, &o->kill_after_ms, &why) < 0)
			return cli_bad_value("--kill-after", arg, why);
		o->kill_after_set = true;
		return 0;
	case OPT_PROFILE:
		return 0; /* applied before every other option */
	case OPT_RO:
	case OPT_RW:
	case OPT_HIDE:
		if (corral_config_add_path(cfg,
		                           c == OPT_RO   ? CORRAL_PATH_READ
		                           : c == OPT_RW ? CORRAL_PATH_WRITE
		                                         : CORRAL_PATH_DENY,
		                           arg, err) < 0)
			return cli_bad_value(c == OPT_RO   ? "--ro"
			                     : c == OPT_RW ? "--rw"
			                                   : "--hide",
			                     arg, err->message);
		return 0;
	case OPT_DRY_RUN:
		o->dry_run = true;
		return 0;
	case OPT_QUIET:
		o->quiet = true;
		return 0;
	case OPT_AUDIT:
		o->audit = arg;
		return 0;
	case OPT_AUDIT_OUTPUT:
		o->audit_output = true;
		return 0;
	case OPT_AUDIT_MAX_AGE:
		o->audit_max_age_set = true;
		return cli_parse_retention("--audit-max-age", arg, &o->audit_max_age_ms);
	case OPT_AUDIT_MAX_ROWS:
		o->audit_max_rows_set = true;
		return cli_parse_retention("--audit-max-rows", arg, &o->audit_max_rows);
	case OPT_PIPE:
		if (o->name) {
			cli_error("--pipe is an option of corral run, not of corral %s", o->name);
			return EXIT_CORRAL_FAILED;
		}
		if (o->n_pipes < ARRAY_SIZE(o->pipes))
			o->pipes[o->n_pipes] = arg;
		o->n_pipes++;
		return 0;
	case OPT_REDACT:
		if (!strcmp(arg, "redact") || !strcmp(arg, "on"))
			corral_config_set_redaction(cfg, CORRAL_REDACT_ON, err);
		else if (!strcmp(arg, "flag"))
			corral_config_set_redaction(cfg, CORRAL_REDACT_FLAG, err);
		else if (!strcmp(arg, "off"))
			corral_config_set_redaction(cfg, CORRAL_REDACT_OFF, err);
		else
			return cli_bad_value("--redact", arg, "expected redact, flag or off");
		return 0;
	case OPT_MEMORY:
		return cli_set_limit(cfg, "--memory", arg);
	case OPT_FSIZE:
		return cli_set_limit(cfg, "--fsize", arg);
	case OPT_TMPFS:
		return cli_set_limit(cfg, "--tmpfs-size", arg);
	case OPT_CPU:
		return cli_set_limit(cfg, "--cpu", arg);
	case OPT_CPUS:
		return cli_set_limit(cfg, "--cpus", arg);
	case OPT_PIDS:
		return cli_set_limit(cfg, "--pids", arg);
	case OPT_NOFILE:
		return cli_set_limit(cfg, "--nofile", arg);
	case OPT_MAX_OUTPUT:
		if (parse_size(arg, &v, &why) < 0)
			return cli_bad_value("--max-output", arg, why);
		if (corral_config_set_output_cap(cfg, (size_t)v, err) < 0)
			return cli_bad_value("--max-output", arg, err->message);
		return 0;
	case OPT_ENV: {
		const char *eq = strchr(arg, '=');
		if (eq) {
			char *name = strndup(arg, (size_t)(eq - arg));
			int r = name ? corral_config_setenv(cfg, name, eq + 1, err) : -1;
			free(name);
			if (r < 0)
				return cli_bad_value("--env", arg, err->message);
		} else {
			/* passing a host variable is an allow rule: the deny globs still win */
			if (corral_config_env_allow(cfg, arg, err) < 0)
				return cli_bad_value("--env", arg, err->message);
		}
		return 0;
	}
	case 'i':
		o->stdin_pass = true;
		return 0;
	case OPT_NET:
		if (!strcmp(arg, "none"))
			corral_config_set_net(cfg, CORRAL_NET_NONE, err);
		else if (!strcmp(arg, "host"))
			corral_config_set_net(cfg, CORRAL_NET_HOST, err);
		else
			return cli_bad_value("--net", arg, "expected none or host");
		return 0;
	case OPT_MODE:
		if (!strcmp(arg, "required"))
			corral_config_set_mode(cfg, CORRAL_MODE_REQUIRED, err);
		else if (!strcmp(arg, "auto"))
			corral_config_set_mode(cfg, CORRAL_MODE_AUTO, err);
		else if (!strcmp(arg, "none"))
			corral_config_set_mode(cfg, CORRAL_MODE_NONE, err);
		else
			return cli_bad_value("--mode", arg, "expected required, auto or none");
		return 0;
	case OPT_JSON:
		o->json = true;
		return 0;
	default:
		return EXIT_CORRAL_FAILED;
	}
}

static bool cancelled_by_signal;

static int proc_next_ms(const void *p)
{
	return corral_proc_next_timeout_ms(p);
}

/* What is left of the last run's teardown (run_teardown). */
static struct teardown {
	corral_proc *p;
	int sfd;
	sigset_t old;
	bool armed;
} teardown;

/* The end of run_with_signals' sandbox, once its result is recorded. Signals stay blocked
 * until it is over: a signal that came after the run had ended has nothing left to cancel,
 * and unblocked it would end corral before it printed the result, or with the sandbox's
 * cgroup left behind. */
static void run_teardown(void)
{
	if (!teardown.armed)
		return;
	teardown.armed = false;
	corral_proc_destroy(teardown.p);
	struct signalfd_siginfo si;
	while (read(teardown.sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		;
	close(teardown.sfd);
	sigprocmask(SIG_SETMASK, &teardown.old, NULL);
}

/* Run, forwarding SIGINT/SIGTERM/SIGHUP to the sandbox as a cancel with the configured
 * grace, so that Ctrl-C still ends in a result. The sandbox's last teardown may be left to
 * run_teardown(). */
static struct corral_result *run_with_signals(const corral_config *cfg, const struct run_opts *o,
                                              struct audit **store, bool *store_tried,
                                              struct corral_error *err)
{
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, &old);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	struct corral_result *res = NULL;
	corral_proc *p = NULL;
	if (sfd < 0 || corral_spawn(cfg, &p, err) < 0) {
		if (sfd >= 0)
			close(sfd);
		sigprocmask(SIG_SETMASK, &old, NULL);
		/* corral_run describes the failure in a result of its own */
		corral_run(cfg, &res, err);
		return res;
	}
	/* The audit store is opened while the sandbox builds itself and runs (SQLite's open
	 * reads the WAL into its index): off the launch's path on an idle second core. */
	if (!(o->audit && !strcmp(o->audit, "off"))) {
		*store = run_audit_open(o);
		*store_tried = true;
	}
	struct pollfd pfd[2] = {{.fd = corral_proc_fd(p), .events = POLLIN},
	                        {.fd = sfd, .events = POLLIN}};
	cli_relay_watch(proc_next_ms, p, sfd);
	int r = 0;
	while (r == 0) {
		if (poll(pfd, 2, corral_proc_next_timeout_ms(p)) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				cancelled_by_signal = true;
				corral_proc_cancel(p, cfg->kill_after_ms, NULL);
			}
		}
		r = corral_proc_step(p, 0, err);
		for (int st = 1; st <= 2; st++)
			if (cli_relay_failed(st))
				corral_proc_close_output(p, st);
	}
	if (r == 1)
		corral_proc_result(p, &res, err);
	/* what the reader has not taken yet, before the teardown's wait; not waited for after a
	 * Ctrl-C (signals still come through the signalfd: one ends this wait) */
	cli_relay_finish(cancelled_by_signal);
	/* After a run that ended by itself in its pid namespace the host state goes now, and the
	 * rest of the teardown (the init's exit, the namespaces' teardown, then the cgroup) goes
	 * on while the audit record is written; run_teardown() waits for it before the result
	 * is printed. Otherwise (killed, no pid namespace) all of it comes first. */
	bool ended = proc_release_ended(p);
	teardown = (struct teardown){p, sfd, old, true};
	if (!ended)
		run_teardown();
	return res;
}

/* Open the audit store of o (not "off") with its retention; a failure is a warning. */
struct audit *run_audit_open(const struct run_opts *o)
{
	struct corral_error err = {0};
	struct audit *a = NULL;
	if (audit_open(o->audit, &a, &err) < 0) {
		cli_error("%s (the run itself is not affected)", err.message);
		return NULL;
	}
	if (o->audit_max_age_set || o->audit_max_rows_set)
		audit_set_retention(
		    a, o->audit_max_age_set ? (int64_t)o->audit_max_age_ms : AUDIT_DEFAULT_MAX_AGE_MS,
		    o->audit_max_rows_set ? (int64_t)o->audit_max_rows : AUDIT_DEFAULT_MAX_ROWS);
	return a;
}

/* Record the run in the audit store. Never fails the run: a store that cannot be written
 * is reported once on stderr. */
void run_audit(const corral_config *cfg, const struct run_opts *o, const struct corral_result *res,
               int64_t started_ms, bool cancelled)
{
	if (o->audit && !strcmp(o->audit, "off"))
		return;
	run_audit_to(run_audit_open(o), cfg, o, res, started_ms, cancelled);
}

/* The same into a store opened already (NULL: it could not be, and that was said); closes it. */
void run_audit_to(struct audit *a, const corral_config *cfg, const struct run_opts *o,
                  const struct corral_result *res, int64_t started_ms, bool cancelled)
{
	struct corral_error err = {0};
	if (!a)
		return;
	char hash[65];
	policy_hash(cfg, hash);
	char *viol = result_violations_json(res);
	struct audit_run r = {
	    .res = res,
	    .kind = "run",
	    .client = "cli",
	    .cwd = cfg->cwd ? cfg->cwd : cfg->workspace,
	    .profile = cfg->profile_name ? cfg->profile_name : "default",
	    .policy_hash = hash,
	    .started_at_ms = started_ms,
	    .store_output = o->audit_output,
	    .cancelled =
	        res->signal && !res->timed_out && res->limit == CORRAL_HIT_NONE && cancelled,
	    .violations_json = viol,
	    .redactions = res->redactions,
	};
	if (audit_record_run(a, &r, &err) < 0)
		cli_error("%s (the run itself is not affected)", err.message);
	free(viol);
	audit_close(a);
}

int run_exit_code(const struct corral_result *res)
{
	if (res->error.code == CORRAL_ENOTFOUND)
		return EXIT_CORRAL_NOTFOUND;
	if (res->error.code == CORRAL_ENOEXEC || res->error.code == CORRAL_EDENIED)
		return EXIT_CORRAL_NOEXEC;
	if (res->error.code)
		return EXIT_CORRAL_FAILED;
	if (res->timed_out)
		return EXIT_CORRAL_TIMEOUT;
	if (res->signal)
		return 128 + res->signal;
	return res->exit_code;
}

/* Warn about --env NAME that a deny rule withholds: the user asked for it by name. */
void run_warn_withheld(const corral_config *cfg, int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i++) {
		if (strcmp(argv[i], "--env") || strchr(argv[i + 1], '='))
			continue;
		const char *rule = policy_env_denied_by(cfg, argv[i + 1]);
		if (rule && getenv(argv[i + 1]))
			cli_error("warning: --env %s is withheld by the deny rule '%s'; pass it "
			          "explicitly with --env %s=VALUE if the sandbox really needs it",
			          argv[i + 1], rule, argv[i + 1]);
	}
}

int run_parse_opts(int argc, char **argv, corral_config *cfg, struct run_opts *o,
                   struct corral_error *err)
{
	o->timeout_ms = 60000;
	o->kill_after_ms = 2000;
	int c;
	struct {
		int c;
		const char *arg;
	} *seen = calloc((size_t)argc + 1, sizeof(*seen));
	int n_seen = 0;
	if (!seen)
		return EXIT_CORRAL_FAILED;
	opterr = 0;
	/* '+': stop at the first non-option, so the command's own flags are left alone */
	while ((c = getopt_long(argc, argv, "+c:w:C:t:ih", long_opts, NULL)) != -1) {
		if (c == 'h') {
			(o->usage ? o->usage : usage_run)(stdout);
			free(seen);
			return -1;
		}
		if (c == '?' || c == ':') {
			cli_error("%s '%s'; run 'corral help %s' for the list of options",
			          optopt ? "option needs a value or is unknown:" : "unknown option",
			          argv[optind - 1], o->name ? o->name : "run");
			free(seen);
			return EXIT_CORRAL_FAILED;
		}
		if (c == OPT_PROFILE)
			o->profile = optarg;
		seen[n_seen].c = c;
		seen[n_seen++].arg = optarg;
	}
	/* The profile first, so that every flag overrides or adds to it. */
	if (o->profile && corral_config_load_profile(cfg, o->profile, err) < 0) {
		cli_error("%s", err->message);
		free(seen);
		return EXIT_CORRAL_FAILED;
	}
	for (int i = 0; i < n_seen; i++) {
		int r = apply_opt(seen[i].c, seen[i].arg, cfg, o, err);
		if (r) {
			free(seen);
			return r;
		}
	}
	free(seen);
	char cwdbuf[PATH_MAX];
	const char *ws = o->workspace;
	if (!ws)
		ws = getcwd(cwdbuf, sizeof(cwdbuf));
	if (!ws || corral_config_set_workspace(cfg, ws, err) < 0) {
		cli_error("%s", ws ? err->message : "cannot read the current directory");
		return EXIT_CORRAL_FAILED;
	}
	if (o->cwd && corral_config_set_cwd(cfg, o->cwd, err) < 0) {
		cli_error("%s", err->message);
		return EXIT_CORRAL_FAILED;
	}
	return 0;
}

static int configure(int argc, char **argv, corral_config *cfg, struct run_opts *o,
                     struct corral_error *err)
{
	int r = run_parse_opts(argc, argv, cfg, o, err);
	if (r)
		return r;
	if (o->n_pipes && (r = run_pipe_check(o, optind < argc ? argv[optind] : NULL)) != 0)
		return r;
	if (o->shell && optind < argc) {
		cli_error("give either -c 'SHELL STRING' or a COMMAND, not both");
		return EXIT_CORRAL_FAILED;
	}
	static const char *const explain_only[] = {"true", NULL};
	/* a pipeline's stages each set their own command; the first stands in until then */
	r = o->n_pipes                     ? corral_config_set_shell(cfg, o->pipes[0], err)
	    : o->shell                     ? corral_config_set_shell(cfg, o->shell, err)
	    : optind >= argc && o->dry_run ? corral_config_set_argv(cfg, explain_only, err)
	    : optind < argc ? corral_config_set_argv(cfg, (const char *const *)argv + optind, err)
	                    : corral_set_error(err, CORRAL_EINVAL, 0, "usage",
	                                       "no command given; usage: corral run [OPTIONS] [--] "
	                                       "COMMAND [ARG...]");
	if (r < 0) {
		cli_error("%s", err->message);
		return EXIT_CORRAL_FAILED;
	}
	/* flags override the profile's timeouts; otherwise the profile (or default) stands */
	if ((o->timeout_set || o->kill_after_set) &&
	    corral_config_set_timeout_ms(cfg, o->timeout_set ? o->timeout_ms : cfg->timeout_ms,
	                                 o->kill_after_set ? o->kill_after_ms : cfg->kill_after_ms,
	                                 err) < 0) {
		cli_error("%s", err->message);
		return EXIT_CORRAL_FAILED;
	}
	if (o->stdin_pass && corral_config_set_stdin_fd(cfg, 0, err) < 0) {
		cli_error("%s", err->message);
		return EXIT_CORRAL_FAILED;
	}
	if (!o->json)
		corral_config_set_output_cb(cfg, stream_out, NULL);
	return 0;
}

int cmd_run(int argc, char **argv)
{
	corral_config *cfg = corral_config_new();
	if (!cfg) {
		cli_error("out of memory");
		return EXIT_CORRAL_FAILED;
	}
	struct run_opts o = {0};
	struct corral_error err = {0};
	int r = configure(argc, argv, cfg, &o, &err);
	if (r) {
		corral_config_free(cfg);
		return r < 0 ? 0 : r;
	}
	run_warn_withheld(cfg, argc, argv);
	if (o.n_pipes) {
		r = run_pipeline(cfg, &o);
		corral_config_free(cfg);
		return r;
	}
	if (o.dry_run) {
		int rc = print_explain(cfg, o.json);
		corral_config_free(cfg);
		return rc;
	}
	/* Our stdout may be a closed pipe; a failed write must not kill corral before it has
	 * reaped the sandbox. */
	signal(SIGPIPE, SIG_IGN);
	struct timespec t0;
	clock_gettime(CLOCK_REALTIME, &t0);
	struct audit *store = NULL;
	bool store_tried = false;
	struct corral_result *res = run_with_signals(cfg, &o, &store, &store_tried, &err);
	if (!res && store) {
		audit_close(store); /* no result to record */
		store = NULL;
	}
	int code = EXIT_CORRAL_FAILED;
	if (res) {
		code = run_exit_code(res);
		for (size_t i = 0; i < res->n_layers; i++)
			if (!strcmp(res->layers[i].name, "landlock") && !res->layers[i].applied &&
			    strstr(res->layers[i].detail, "allow-list NOT enforced"))
				cli_error("warning: Landlock is unavailable, so the command allow-list "
				          "was checked for the top-level command only (preflight), not at "
				          "every execve; use --mode required to refuse such runs");
		int64_t started = (int64_t)t0.tv_sec * 1000 + t0.tv_nsec / 1000000;
		if (store_tried)
			run_audit_to(store, cfg, &o, res, started, cancelled_by_signal);
		else
			run_audit(cfg, &o, res, started, cancelled_by_signal);
		store = NULL;
		/* the teardown went on beside the record; it is over before the result goes out */
		run_teardown();
		if (o.json) {
			/* The result is what --json promises: one that cannot be delivered (a
			 * full disk, a reader that went away) is corral's failure, whatever the
			 * command's status, which the message keeps. */
			if (fflush(stdout) == EOF || result_write_json(res, STDOUT_FILENO) < 0) {
				cli_error("cannot write the JSON result to stdout: %s; the result "
				          "is lost (the command's exit status was %d; its audit "
				          "record, when the store is on: corral audit show %s); "
				          "exit status 125",
				          strerror(errno), code, res->id);
				code = EXIT_CORRAL_FAILED;
			}
		} else {
			if (res->error.code)
				cli_error("%s", res->error.message);
			else if (res->timed_out)
				cli_error("timed out: the %llu ms timeout passed; the sandbox was "
				          "stopped after %llu ms",
				          (unsigned long long)cfg->timeout_ms,
				          (unsigned long long)res->duration_ms);
			/* after the command's own output: what the sandbox stopped, and why */
			for (size_t i = 0; !o.quiet && i < res->n_violations; i++)
				if (strcmp(res->violations[i].kind, "timeout") &&
				    !(res->error.code && !strcmp(res->violations[i].kind, "exec")))
					cli_error("%s%s", res->violations[i].hint,
					          res->violations[i].inferred ? " (inferred)" : "");
			if (!o.quiet && res->redactions)
				cli_error("%llu secret(s) %s in the output",
				          (unsigned long long)res->redactions,
				          strcmp(res->redaction_mode, "flag") ? "redacted"
				                                              : "flagged");
		}
		corral_result_free(res);
	} else {
		cli_error("%s", err.message);
	}
	run_teardown();
	corral_config_free(cfg);
	return code;
}
