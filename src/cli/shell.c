/* corral shell: an interactive shell in a sandbox, for a person, on a pseudo-terminal of its
 * own. The sandbox gets the pty's slave side as its stdin, stdout and stderr and takes it as
 * its controlling terminal; corral keeps the master side and relays bytes between it and its
 * own stdin and stdout. With corral's stdin in raw mode every key travels as a byte, so Ctrl-C
 * and Ctrl-Z reach the sandbox's line discipline, which signals the sandboxed foreground job;
 * a window size change is copied onto the pty, whose kernel then sends SIGWINCH into the
 * sandbox. corral exits with the shell's status, as `corral run` exits with the command's. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "internal.h"

void usage_shell(FILE *f)
{
	fputs("Usage: corral shell [OPTIONS] [-- SHELL [ARG...]]\n"
	      "\n"
	      "Open an interactive shell in a sandbox, on a terminal of its own: the sandbox\n"
	      "of 'corral run', with the same policy, profile and limit options, for a person.\n"
	      "The default shell is 'bash --norc -i' when the sandbox has bash, else 'sh -i',\n"
	      "with the prompt '[corral] DIR $ ' (--env PS1=... sets another) and its history\n"
	      "in the private /tmp; TERM is corral's. Ctrl-C and Ctrl-Z go to the sandboxed\n"
	      "foreground job, a resized window resizes the sandbox's terminal, and corral\n"
	      "exits with the shell's status.\n"
	      "\n"
	      "Options (as for 'corral run', see corral help run):\n"
	      "  -w, --workspace DIR    the read-write workspace (default: current directory)\n"
	      "  -C, --cwd DIR          start directory inside the workspace, not in a --hide\n"
	      "                         tree (default: the workspace)\n"
	      "  -t, --timeout DUR      end the session after DUR (default: none, whatever the\n"
	      "                         profile says)\n"
	      "      --kill-after DUR   grace between SIGTERM and SIGKILL at the end (default\n"
	      "                         2s)\n"
	      "      --profile P        a builtin profile (default, readonly, strict, network) or\n"
	      "                         a JSON profile file; the flags here override it\n"
	      "      --ro PATH, --rw PATH, --hide PATH\n"
	      "                         also show PATH read-only or read-write, or hide it\n"
	      "      --env NAME, --env NAME=VALUE\n"
	      "                         pass NAME from corral's environment, or set it\n"
	      "      --net none|host    network: none (loopback only, default) or the host's\n"
	      "      --mode MODE        required (default), auto or none\n"
	      "      --memory SIZE, --cpu SECONDS, --pids N, --nofile N, --fsize SIZE,\n"
	      "      --tmpfs-size SIZE  limits, as for corral run\n"
	      "      --audit PATH|off   the audit store the session is recorded in (without\n"
	      "                         its output)\n"
	      "      --audit-max-age DUR, --audit-max-rows N\n"
	      "                         the store's retention (default 30d, 100000 rows)\n"
	      "      --dry-run          print the resolved plan and run nothing (--json: as JSON)\n"
	      "      --quiet            no notes from corral on stderr after the shell\n"
	      "  -h, --help             show this help\n"
	      "\n"
	      "What the shell prints goes to the terminal: it is not captured, capped or\n"
	      "redacted. "
	      "When standard input is not a terminal its bytes are typed into the shell, and its\n"
	      "end is typed as Ctrl-D. SIGINT to corral is typed as Ctrl-C; SIGTERM and SIGHUP\n"
	      "hang up the sandbox's terminal and end the session.\n"
	      "\n"
	      "Exit status: the shell's own; 124 timed out; 125 corral failed (usage, bad value,\n"
	      "setup); 126 not executable or denied; 127 not found; 128+N killed by signal N.\n",
	      f);
}

/* ---- the caller's terminal --------------------------------------------------------------- */

static struct termios saved_tio;
static bool raw_on;

static void restore_terminal(void)
{
	if (raw_on) {
		tcsetattr(0, TCSADRAIN, &saved_tio);
		raw_on = false;
	}
}

static void set_raw(void)
{
	struct termios t = saved_tio;
	cfmakeraw(&t);
	if (tcsetattr(0, TCSADRAIN, &t) == 0)
		raw_on = true;
}

/* Copy the size of the caller's terminal (term, or 24x80 without one) onto the pty. */
static void copy_winsize(int term, int master)
{
	struct winsize ws = {0};
	if (term < 0 || ioctl(term, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col) {
		if (term >= 0)
			return; /* keep what the pty has */
		ws.ws_row = 24;
		ws.ws_col = 80;
	}
	ioctl(master, TIOCSWINSZ, &ws);
}

static int open_pty(int *master, int *slave, struct corral_error *err)
{
	*master = *slave = -1;
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
		goto fail;
	/* the peer by descriptor (Linux 4.13), else by name */
	int s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0) {
		char name[64];
		if (ptsname_r(m, name, sizeof(name)) != 0)
			goto fail;
		s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (s < 0)
			goto fail;
	}
	fcntl(m, F_SETFL, O_NONBLOCK);
	*master = m;
	*slave = s;
	return 0;
fail:;
	int e = errno;
	if (m >= 0)
		close(m);
	return corral_set_error(err, CORRAL_ESYS, e, "pty",
	                        "cannot open a pseudo-terminal: %s; is /dev/pts mounted and "
	                        "/dev/ptmx usable?",
	                        strerror(e));
}

/* ---- the relay ---------------------------------------------------------------------------- */

struct relay {
	corral_proc *p;
	int master, slave; /* the pty; the slave stays open here to watch its input queue */
	int term;          /* the caller's terminal for window sizes (0 or 1), or -1 */
	bool tty_in;       /* stdin is a terminal (in raw mode) */
	bool in_eof;       /* stdin ended: for a terminal a hang-up, else typed as Ctrl-D */
	bool eof_typed;
	char last_in;   /* the last byte typed, or 0 */
	bool out_dead;  /* stdout failed: output is dropped */
	bool cancelled; /* hung up by SIGTERM / SIGHUP */
	uint64_t kill_after_ms;
	uint64_t deadline;   /* a little after the library's timeout fired, or 0 */
	uint64_t eof_at;     /* when to look again at typing Ctrl-D, or 0 */
	uint64_t idle_since; /* since when the sandbox's input is read, or 0 */
	char in[4096];       /* stdin -> master */
	size_t in_off, in_len;
	char out[16384]; /* master -> stdout */
};

static void write_out(struct relay *R, const char *buf, size_t n)
{
	while (n && !R->out_dead) {
		ssize_t w = write(1, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			R->out_dead = true; /* EPIPE (SIGPIPE is ignored), a closed terminal */
			break;
		}
		buf += w;
		n -= (size_t)w;
	}
}

/* Read what the master has; returns the bytes read, 0 when nothing is waiting. */
static ssize_t pump_master(struct relay *R)
{
	ssize_t n;
	do
		n = read(R->master, R->out, sizeof(R->out));
	while (n < 0 && errno == EINTR);
	if (n > 0)
		write_out(R, R->out, (size_t)n);
	return n > 0 ? n : 0;
}

/* Type one control character (VINTR, VQUIT, VEOF) of the pty's current settings. */
static void type_cc(struct relay *R, int which)
{
	struct termios t;
	if (R->master < 0 || tcgetattr(R->slave, &t) < 0 || t.c_cc[which] == _POSIX_VDISABLE)
		return;
	char c = (char)t.c_cc[which];
	ssize_t w = write(R->master, &c, 1);
	(void)w;
}

/* Hang up the sandbox's terminal: the kernel sends SIGHUP to the shell, which passes it on
 * to its jobs (an interactive shell ignores the SIGTERM that starts a stop). */
static void close_master(struct relay *R)
{
	if (R->master >= 0) {
		close(R->master);
		R->master = -1;
	}
	R->in_len = R->in_off = 0;
}

/* The caller's side is gone or asked to stop: hang up, and cancel the run, so that a shell
 * that ignores the hang-up still ends after the grace. */
static void hang_up(struct relay *R)
{
	close_master(R);
	corral_proc_cancel(R->p, R->kill_after_ms, NULL);
}

static void on_signal(struct relay *R, int sfd)
{
	struct signalfd_siginfo si;
	while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGWINCH:
			if (R->master >= 0 && R->term >= 0)
				copy_winsize(R->term, R->master);
			break;
		case SIGCONT: /* back from a stop: the terminal may have been reset meanwhile */
			if (R->tty_in && raw_on)
				set_raw();
			if (R->master >= 0 && R->term >= 0)
				copy_winsize(R->term, R->master);
			break;
		case SIGINT:
			type_cc(R, VINTR);
			break;
		case SIGQUIT:
			type_cc(R, VQUIT);
			break;
		default: /* SIGTERM, SIGHUP */
			R->cancelled = true;
			hang_up(R);
			break;
		}
	}
}

static void on_stdin(struct relay *R)
{
	ssize_t n;
	do
		n = read(0, R->in, sizeof(R->in));
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) { /* end of file, or EIO from a terminal that went away */
		R->in_eof = true;
		if (R->tty_in) {
			hang_up(R);
			return;
		}
		/* a last line without its newline ends there, as for sh < file */
		if (R->last_in && R->last_in != '\n' && R->last_in != '\r') {
			R->in[0] = '\n';
			R->in_len = 1;
		}
		R->eof_at = mono_ms();
		return;
	}
	R->in_off = 0;
	R->in_len = (size_t)n;
}

static void flush_in(struct relay *R)
{
	while (R->master >= 0 && R->in_off < R->in_len) {
		ssize_t w = write(R->master, R->in + R->in_off, R->in_len - R->in_off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return; /* the shell is not reading: wait for POLLOUT */
		if (w <= 0) {
			R->in_off = R->in_len = 0;
			return;
		}
		R->in_off += (size_t)w;
		R->last_in = R->in[R->in_off - 1];
	}
	R->in_off = R->in_len = 0;
}

/* Is something typed that the sandbox has not read yet? poll() on the slave first moves what
 * the kernel still holds in flight, and counts a Ctrl-D waiting as an end of file. */
static bool input_pending(const struct relay *R)
{
	struct pollfd pf = {.fd = R->slave, .events = POLLIN};
	return R->in_len || (poll(&pf, 1, 0) > 0 && (pf.revents & POLLIN));
}

/* stdin that is not a terminal has ended: type Ctrl-D once the sandbox has read everything
 * before it and settled. In canonical mode that is end of file for whoever reads; a shell at
 * its prompt (readline, non-canonical) takes Ctrl-D on an empty line as end of file too.
 * Whoever reads it, a reader remains as long as the sandbox runs (the shell after a `cat`
 * got its end of file; readline after a Ctrl-D typed during a change of mode came out as a
 * NUL byte), so once it is read and all is quiet for a while, Ctrl-D is typed again. */
static void maybe_type_eof(struct relay *R, uint64_t now)
{
	if (!R->eof_at || now < R->eof_at)
		return;
	if (R->master < 0) {
		R->eof_at = 0;
		return;
	}
	if (input_pending(R)) {
		R->idle_since = 0;
		R->eof_at = now + 20;
		return;
	}
	uint64_t settle = R->eof_typed ? 300 : 50;
	if (!R->idle_since)
		R->idle_since = now;
	if (now - R->idle_since < settle) {
		R->eof_at = R->idle_since + settle;
		return;
	}
	type_cc(R, VEOF);
	R->eof_typed = true;
	R->idle_since = 0;
	R->eof_at = now + 20;
}

static int relay(struct relay *R, int sfd, struct corral_error *err)
{
	int r = 0;
	while (r == 0) {
		struct pollfd pf[4];
		int n = 0, i_in = -1, i_master = -1;
		pf[n++] = (struct pollfd){.fd = sfd, .events = POLLIN};
		pf[n++] = (struct pollfd){.fd = corral_proc_fd(R->p), .events = POLLIN};
		if (R->master >= 0) {
			i_master = n;
			pf[n++] = (struct pollfd){
			    .fd = R->master, .events = (short)(POLLIN | (R->in_len ? POLLOUT : 0))};
			if (!R->in_eof && !R->in_len) {
				i_in = n;
				pf[n++] = (struct pollfd){.fd = 0, .events = POLLIN};
			}
		}
		int timeout = corral_proc_next_timeout_ms(R->p);
		uint64_t dls[] = {R->eof_at, R->deadline}, now = mono_ms();
		for (size_t i = 0; i < ARRAY_SIZE(dls); i++) {
			int t = !dls[i] ? -1 : dls[i] > now ? (int)(dls[i] - now) : 0;
			if (t >= 0 && (timeout < 0 || t < timeout))
				timeout = t;
		}
		if (poll(pf, (nfds_t)n, timeout) < 0 && errno != EINTR)
			return corral_set_error(err, CORRAL_ESYS, errno, "poll", "poll: %s",
			                        strerror(errno));
		if (pf[0].revents & POLLIN)
			on_signal(R, sfd);
		if (i_master >= 0 && R->master >= 0) {
			if (pf[i_master].revents & POLLOUT)
				flush_in(R);
			if (pf[i_master].revents & POLLIN)
				pump_master(R);
		}
		if (i_in >= 0 && R->master >= 0 &&
		    (pf[i_in].revents & (POLLIN | POLLHUP | POLLERR))) {
			on_stdin(R);
			flush_in(R);
		}
		maybe_type_eof(R, mono_ms());
		r = corral_proc_step(R->p, 0, err);
		/* The timeout has fired (the library's deadline is earlier, and its timer was
		 * stepped above): hang up too, so that the shell ends now, not after the grace. */
		if (r == 0 && R->deadline && mono_ms() >= R->deadline) {
			R->deadline = 0;
			close_master(R);
		}
	}
	if (r < 0)
		return r;
	/* Everything in the sandbox is gone: what the master still holds is the last output. */
	while (R->master >= 0 && pump_master(R) > 0)
		;
	return 0;
}

/* ---- the command -------------------------------------------------------------------------- */

static bool env_given(const corral_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->n_env; i++)
		if (!strcmp(cfg->env[i].name, name))
			return true;
	return false;
}

static bool may_exec(const corral_config *cfg, const char *prog)
{
	char *doc = NULL;
	int r = corral_policy_query(cfg, "exec", prog, &doc, NULL);
	free(doc);
	return r == 1;
}

/* The shell after --, else bash when the sandbox may run it, else sh; the default shell gets
 * a prompt that says where it is, and its history stays in the private /tmp. */
static int set_command(corral_config *cfg, int argc, char **argv, struct corral_error *err)
{
	if (optind < argc)
		return corral_config_set_argv(cfg, (const char *const *)argv + optind, err);
	static const char *const bash[] = {"bash", "--norc", "-i", NULL};
	static const char *const sh[] = {"sh", "-i", NULL};
	bool use_bash = may_exec(cfg, "bash");
	int r = corral_config_set_argv(cfg, use_bash ? bash : sh, err);
	if (r == 0 && !env_given(cfg, "PS1"))
		r = corral_config_setenv(cfg, "PS1", use_bash ? "[corral] \\w \\$ " : "[corral] $ ",
		                         err);
	if (r == 0 && use_bash && !env_given(cfg, "HISTFILE"))
		r = corral_config_setenv(cfg, "HISTFILE", "/tmp/.bash_history", err);
	return r;
}

/* The terminal is the caller's: so is its type, unless --env TERM says otherwise. */
static int set_term(corral_config *cfg, struct corral_error *err)
{
	const char *term = getenv("TERM");
	if (!term || !*term || strlen(term) > 64 || strchr(term, '/') || env_given(cfg, "TERM") ||
	    !(isatty(0) || isatty(1)))
		return 0;
	return corral_config_setenv(cfg, "TERM", term, err);
}

static int check_opts(const struct run_opts *o)
{
	const char *bad = o->shell        ? "-c does not apply: give the shell and its arguments "
	                                    "after --"
	                  : o->stdin_pass ? "-i does not apply: the shell's input is the terminal"
	                  : o->audit_output
	                      ? "--audit-output does not apply: the terminal's output is not "
	                        "captured"
	                  : o->json && !o->dry_run
	                      ? "--json applies to --dry-run only: the shell's result is its "
	                        "exit status"
	                      : NULL;
	if (!bad)
		return 0;
	cli_error("shell: %s", bad);
	return EXIT_CORRAL_FAILED;
}

/* What the sandbox stopped or ended, after the session (the terminal is restored by then). */
static void print_notes(const struct run_opts *o, const struct corral_result *res)
{
	if (res->error.code)
		cli_error("%s", res->error.message);
	else if (res->timed_out)
		cli_error("timed out after %llu ms; the sandbox was killed",
		          (unsigned long long)res->duration_ms);
	for (size_t i = 0; !o->quiet && i < res->n_violations; i++)
		if (strcmp(res->violations[i].kind, "timeout") &&
		    !(res->error.code && !strcmp(res->violations[i].kind, "exec")))
			cli_error("%s%s", res->violations[i].hint,
			          res->violations[i].inferred ? " (inferred)" : "");
}

/* A start that failed before the sandbox existed, described as corral_run would, for the
 * audit store. The description runs on a copy without the terminal: were it to start after
 * all, the shell would read end of file at once and nothing it printed would be shown. */
static struct corral_result *describe_failure(const corral_config *cfg)
{
	corral_config *c = corral_config_dup(cfg);
	struct corral_result *res = NULL;
	if (!c)
		return NULL;
	corral_config_set_tty(c, 0, NULL);
	corral_config_set_stdout_fd(c, -1, NULL);
	corral_config_set_stderr_fd(c, -1, NULL);
	if (corral_config_set_stdin_data(c, "", 0, NULL) == 0)
		corral_run(c, &res, NULL);
	corral_config_free(c);
	if (res && !res->error.code) {
		corral_result_free(res);
		res = NULL;
	}
	return res;
}

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Open the pty, spawn the shell on it and relay until it ends. Returns the exit code. */
static int session(corral_config *cfg, const struct run_opts *o)
{
	struct corral_error err = {0};
	struct relay *R = calloc(1, sizeof(*R));
	if (!R) {
		cli_error("out of memory");
		return EXIT_CORRAL_FAILED;
	}
	R->kill_after_ms = cfg->kill_after_ms;
	R->tty_in = isatty(0) && tcgetattr(0, &saved_tio) == 0;
	R->term = R->tty_in ? 0 : isatty(1) ? 1 : -1;
	if (open_pty(&R->master, &R->slave, &err) < 0) {
		cli_error("%s", err.message);
		free(R);
		return EXIT_CORRAL_FAILED;
	}
	/* the sandbox's terminal starts like the caller's: erase and interrupt keys, size */
	if (R->tty_in)
		tcsetattr(R->slave, TCSANOW, &saved_tio);
	copy_winsize(R->term, R->master);
	corral_config_set_stdin_fd(cfg, R->slave, NULL);
	corral_config_set_stdout_fd(cfg, R->slave, NULL);
	corral_config_set_stderr_fd(cfg, R->slave, NULL);
	corral_config_set_tty(cfg, 1, NULL);

	/* Signals arrive on a descriptor, and stay blocked until corral exits: one that comes
	 * after the session must not kill corral before it has passed the status on. A signal
	 * inherited as ignored stays ignored. */
	sigset_t set;
	sigemptyset(&set);
	int sigs[] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGWINCH, SIGCONT};
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		sigaddset(&set, sigs[i]);
	sigprocmask(SIG_BLOCK, &set, NULL);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	signal(SIGPIPE, SIG_IGN);

	int64_t started = wall_ms();
	struct corral_result *res = NULL;
	int code = EXIT_CORRAL_FAILED;
	if (sfd < 0) {
		cli_error("signalfd: %s", strerror(errno));
	} else if (corral_spawn(cfg, &R->p, &err) < 0) {
		cli_error("%s", err.message);
		struct corral_result failed = {.error = err};
		code = run_exit_code(&failed);
		res = describe_failure(cfg);
		if (res)
			run_audit(cfg, o, res, started, false);
		corral_result_free(res);
		res = NULL;
	} else {
		if (cfg->timeout_ms)
			R->deadline = mono_ms() + cfg->timeout_ms + 50;
		if (R->tty_in) {
			atexit(restore_terminal);
			set_raw();
		}
		int r = relay(R, sfd, &err);
		restore_terminal();
		if (r == 0 && corral_proc_result(R->p, &res, &err) == 0) {
			code = run_exit_code(res);
			print_notes(o, res);
			run_audit(cfg, o, res, started, R->cancelled);
			corral_result_free(res);
		} else {
			cli_error("%s", err.message);
		}
		corral_proc_destroy(R->p);
	}
	if (sfd >= 0)
		close(sfd);
	if (R->master >= 0)
		close(R->master);
	close(R->slave);
	free(R);
	return code;
}

int cmd_shell(int argc, char **argv)
{
	/* A closed stdin, stdout or stderr gets /dev/null: the pty must not land on 0, 1 or 2. */
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) < 0)
			return EXIT_CORRAL_FAILED;
	corral_config *cfg = corral_config_new();
	if (!cfg) {
		cli_error("out of memory");
		return EXIT_CORRAL_FAILED;
	}
	struct run_opts o = {.usage = usage_shell, .name = "shell"};
	struct corral_error err = {0};
	int r = run_parse_opts(argc, argv, cfg, &o, &err);
	if (r == 0)
		r = check_opts(&o);
	if (r == 0 && (set_command(cfg, argc, argv, &err) < 0 || set_term(cfg, &err) < 0)) {
		cli_error("%s", err.message);
		r = EXIT_CORRAL_FAILED;
	}
	/* An interactive session has no timeout unless -t asks for one. */
	if (r == 0 && corral_config_set_timeout_ms(
	                  cfg, o.timeout_set ? o.timeout_ms : 0,
	                  o.kill_after_set ? o.kill_after_ms : cfg->kill_after_ms, &err) < 0) {
		cli_error("%s", err.message);
		r = EXIT_CORRAL_FAILED;
	}
	if (r) {
		corral_config_free(cfg);
		return r < 0 ? 0 : r;
	}
	run_warn_withheld(cfg, argc, argv);
	int code = o.dry_run ? print_explain(cfg, o.json) : session(cfg, &o);
	corral_config_free(cfg);
	return code;
}
