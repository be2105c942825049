/* corral run --pipe 'A' --pipe 'B' ...: a pipeline of shell strings, each stage in a sandbox of
 * its own (libcorral's corral_pipeline), with corral run's output conventions and exit status
 * (pipefail; 124 on the timeout; 125/126/127 when a stage could not be started). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "audit.h"
#include "internal.h"
#include "pipeline.h"

#define MAX_STAGES 16

static bool blank(const char *s)
{
	for (; *s; s++)
		if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
			return false;
	return true;
}

int run_pipe_check(const struct run_opts *o, const char *command)
{
	if (o->shell) {
		cli_error("--pipe and -c do not go together: give every stage as --pipe 'STAGE' "
		          "(the -c string too)");
		return EXIT_CORRAL_FAILED;
	}
	if (command) {
		cli_error("--pipe and a COMMAND ('%s') do not go together: give every stage as "
		          "--pipe 'STAGE', that command too",
		          command);
		return EXIT_CORRAL_FAILED;
	}
	if (o->n_pipes < 2) {
		cli_error("a pipeline needs at least two --pipe stages, got one; for a single "
		          "command use -c 'SHELL STRING'");
		return EXIT_CORRAL_FAILED;
	}
	if (o->n_pipes > MAX_STAGES) {
		cli_error("%zu --pipe stages given; a pipeline has at most %d", o->n_pipes,
		          MAX_STAGES);
		return EXIT_CORRAL_FAILED;
	}
	for (size_t i = 0; i < o->n_pipes; i++)
		if (blank(o->pipes[i])) {
			cli_error(
			    "--pipe stage %zu is empty; give each stage a command, e.g. --pipe "
			    "'grep x'",
			    i + 1);
			return EXIT_CORRAL_FAILED;
		}
	return 0;
}

/* A stage's command for messages: one line, at most 60 bytes. */
static void label(char out[72], const char *cmd)
{
	size_t len = strlen(cmd);
	if (len > 60)
		snprintf(out, 72, "%.57s...", cmd);
	else
		snprintf(out, 72, "%s", cmd);
	for (char *c = out; *c; c++)
		if (*c == '\n' || *c == '\r' || *c == '\t')
			*c = ' ';
}

static bool cancelled_by_signal;

/* The pipeline's next deadline, for the relay (cli_relay_watch). */
static int pipeline_next_ms(const void *p)
{
	return corral_pipeline_next_timeout_ms(p);
}

/* Spawn and step the pipeline; SIGINT, SIGTERM and SIGHUP cancel it with the kill grace, so
 * that Ctrl-C still ends in a result. NULL only when out of memory or on an internal error
 * (then err says why). */
static struct corral_pipeline_result *pipeline_with_signals(const corral_config *const *stages,
                                                            size_t n, uint64_t grace_ms,
                                                            struct corral_error *err)
{
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, &old);
	struct corral_pipeline_result *res = NULL;
	corral_pipeline *p = NULL;
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		corral_set_error(err, CORRAL_ESYS, errno, "signalfd", "signalfd: %s",
		                 strerror(errno));
		sigprocmask(SIG_SETMASK, &old, NULL);
		return NULL;
	}
	int failed = -1;
	if (pipeline_spawn(stages, n, &p, &failed, err) < 0) {
		/* nothing runs any more: a result that says which stage and why */
		res = pipeline_failed_result(failed, err);
		close(sfd);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return res;
	}
	struct pollfd pfd[2] = {{.fd = corral_pipeline_fd(p), .events = POLLIN},
	                        {.fd = sfd, .events = POLLIN}};
	cli_relay_watch(pipeline_next_ms, p, sfd);
	int r = 0;
	while (r == 0) {
		if (poll(pfd, 2, corral_pipeline_next_timeout_ms(p)) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				cancelled_by_signal = true;
				corral_pipeline_cancel(p, grace_ms, NULL);
			}
		}
		r = corral_pipeline_step(p, 0, err);
		for (int st = 1; st <= 2; st++)
			if (cli_relay_failed(st))
				corral_pipeline_close_output(p, st);
	}
	if (r == 1)
		corral_pipeline_result(p, &res, err);
	cli_relay_finish(cancelled_by_signal);
	corral_pipeline_destroy(p);
	close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return res;
}

/* corral run's exit status for a pipeline. */
static int pipeline_exit_code(const struct corral_pipeline_result *r)
{
	if (r->error.code == CORRAL_ENOTFOUND)
		return EXIT_CORRAL_NOTFOUND;
	if (r->error.code == CORRAL_ENOEXEC || r->error.code == CORRAL_EDENIED)
		return EXIT_CORRAL_NOEXEC;
	if (r->error.code)
		return EXIT_CORRAL_FAILED;
	if (r->timed_out)
		return EXIT_CORRAL_TIMEOUT;
	return r->exit_code;
}

/* The pipeline as one execution, for the audit store: the parent row of its stages. */
static struct corral_result *summary_result(const struct corral_pipeline_result *pr,
                                            const struct run_opts *o)
{
	size_t len = 0;
	for (size_t i = 0; i < o->n_pipes; i++)
		len += strlen(o->pipes[i]) + 3;
	char *cmd = malloc(len + 1);
	if (!cmd)
		return NULL;
	cmd[0] = 0;
	for (size_t i = 0; i < o->n_pipes; i++) {
		if (i)
			strcat(cmd, " | ");
		strcat(cmd, o->pipes[i]);
	}
	struct corral_result *s = audit_pipeline_summary(pr, cmd);
	free(cmd);
	return s;
}

/* Each stage as a pipeline_stage row, then the pipeline as their parent (a run). Never fails
 * the pipeline: a store that cannot be written is reported on stderr. */
static void pipeline_audit(const corral_config *cfg, const struct run_opts *o,
                           const struct corral_pipeline_result *pr, int64_t started_ms)
{
	if (o->audit && !strcmp(o->audit, "off"))
		return;
	struct corral_error err = {0};
	struct audit *a = run_audit_open(o);
	if (!a)
		return;
	char hash[65];
	policy_hash(cfg, hash);
	const char *cwd = cfg->cwd ? cfg->cwd : cfg->workspace;
	const char *profile = cfg->profile_name ? cfg->profile_name : "default";
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < pr->n_stages; i++) {
		const struct corral_result *res = pr->stages[i];
		char *viol = result_violations_json(res);
		struct audit_run r = {
		    .res = res,
		    .parent = pr->id,
		    .kind = "pipeline_stage",
		    .client = "cli",
		    .cwd = cwd,
		    .profile = profile,
		    .policy_hash = hash,
		    .started_at_ms = started_ms,
		    .store_output = o->audit_output,
		    .cancelled = res->signal && !res->timed_out && res->limit == CORRAL_HIT_NONE &&
		                 cancelled_by_signal,
		    .violations_json = viol,
		    .redactions = res->redactions,
		};
		rc = audit_record_run(a, &r, &err);
		free(viol);
	}
	struct corral_result *sum = rc == 0 ? summary_result(pr, o) : NULL;
	if (sum) {
		struct audit_run r = {
		    .res = sum,
		    .kind = "run",
		    .client = "cli",
		    .cwd = cwd,
		    .profile = profile,
		    .policy_hash = hash,
		    .started_at_ms = started_ms,
		    .cancelled = pr->cancelled,
		    .redactions = sum->redactions,
		};
		rc = audit_record_run(a, &r, &err);
		corral_result_free(sum);
	} else if (rc == 0) {
		rc = corral_set_error(&err, CORRAL_ENOMEM, ENOMEM, "audit", "audit: out of memory");
	}
	if (rc < 0)
		cli_error("%s (the run itself is not affected)", err.message);
	audit_close(a);
}

static void describe_status(char *buf, size_t n, const struct corral_result *r)
{
	if (r->exited && r->exit_code == 127)
		snprintf(buf, n, "exit status 127: command not found (see its stderr above)");
	else if (r->exited && r->exit_code == 126)
		snprintf(buf, n, "exit status 126: command not executable");
	else if (r->exited && r->exit_code == 128 + SIGPIPE)
		snprintf(buf, n, "exit status 141: SIGPIPE, the next stage stopped reading");
	else if (r->exited && r->exit_code > 128 && r->exit_code < 128 + 65 &&
	         sigabbrev_np(r->exit_code - 128))
		snprintf(buf, n, "exit status %d (128+SIG%s)", r->exit_code,
		         sigabbrev_np(r->exit_code - 128));
	else if (r->exited)
		snprintf(buf, n, "exit status %d", r->exit_code);
	else if (r->signal == SIGPIPE)
		snprintf(buf, n, "killed by SIGPIPE: the next stage stopped reading");
	else if (r->signal)
		snprintf(buf, n, "killed by SIG%s", sigabbrev_np(r->signal) ?: "?");
	else
		snprintf(buf, n, "no status");
}

/* corral run's notes on stderr, after the output: what failed, what was stopped, what the
 * sandboxes stopped, redactions. */
static void print_notes(const struct corral_pipeline_result *pr, const struct run_opts *o)
{
	char lab[72], what[128];
	if (pr->error.code)
		cli_error("%s", pr->error.message);
	else if (pr->timed_out)
		cli_error("pipeline timed out after %llu ms; every stage still running was stopped",
		          (unsigned long long)pr->duration_ms);
	if (o->quiet)
		return;
	uint64_t redactions = 0;
	const char *rmode = "redact";
	bool said_error = false;
	for (size_t i = 0; i < pr->n_stages; i++) {
		const struct corral_result *r = pr->stages[i];
		label(lab, o->pipes[i]);
		redactions += r->redactions;
		if (r->redaction_mode)
			rmode = r->redaction_mode;
		if (r->error.code) {
			/* the first such stage's error is pr->error, said above */
			if (said_error)
				cli_error("stage %zu (%s): %s", i + 1, lab, r->error.message);
			said_error = true;
		} else if (pr->stopped[i] && !pr->timed_out && !pr->cancelled) {
			cli_error("stage %zu (%s): stopped after another stage failed", i + 1, lab);
		} else if (!pr->stopped[i] && (r->signal || (r->exited && r->exit_code))) {
			describe_status(what, sizeof(what), r);
			/* the last stage's reader is corral's own stdout, not a stage */
			if (i + 1 == pr->n_stages && cli_relay_failed(1) &&
			    ((r->exited && r->exit_code == 128 + SIGPIPE) || r->signal == SIGPIPE))
				snprintf(what, sizeof(what),
				         "%s: SIGPIPE, corral's stdout was closed",
				         r->exited ? "exit status 141" : "killed");
			cli_error("stage %zu (%s): %s", i + 1, lab, what);
		}
		for (size_t k = 0; k < r->n_violations; k++)
			if (strcmp(r->violations[k].kind, "timeout") &&
			    !(r->error.code && !strcmp(r->violations[k].kind, "exec")))
				cli_error("stage %zu: %s%s", i + 1, r->violations[k].hint,
				          r->violations[k].inferred ? " (inferred)" : "");
	}
	if (redactions)
		cli_error("%llu secret(s) %s in the output", (unsigned long long)redactions,
		          strcmp(rmode, "flag") ? "redacted" : "flagged");
}

int run_pipeline(const corral_config *cfg, const struct run_opts *o)
{
	corral_config *stages[MAX_STAGES] = {0};
	size_t n = o->n_pipes;
	struct corral_error err = {0};
	int code = EXIT_CORRAL_FAILED;
	for (size_t i = 0; i < n; i++) {
		if (!(stages[i] = corral_config_dup(cfg))) {
			cli_error("out of memory");
			goto out;
		}
		if (corral_config_set_shell(stages[i], o->pipes[i], &err) < 0) {
			cli_error("--pipe stage %zu: %s", i + 1, err.message);
			goto out;
		}
	}
	if (o->dry_run) {
		/* the plan of each stage in turn (one JSON object per line with --json) */
		code = 0;
		for (size_t i = 0; i < n && code == 0; i++) {
			if (!o->json)
				printf("%s== stage %zu: %s\n", i ? "\n" : "", i + 1, o->pipes[i]);
			code = print_explain(stages[i], o->json);
		}
		goto out;
	}
	/* Our stdout may be a closed pipe; a failed write must not kill corral before it has
	 * reaped the sandboxes. */
	signal(SIGPIPE, SIG_IGN);
	struct timespec t0;
	clock_gettime(CLOCK_REALTIME, &t0);
	struct corral_pipeline_result *res = pipeline_with_signals(
	    (const corral_config *const *)stages, n, cfg->kill_after_ms, &err);
	if (!res) {
		cli_error("%s", err.message[0] ? err.message : "out of memory");
		goto out;
	}
	code = pipeline_exit_code(res);
	pipeline_audit(cfg, o, res, (int64_t)t0.tv_sec * 1000 + t0.tv_nsec / 1000000);
	if (o->json) {
		char *json = NULL;
		if (corral_pipeline_result_to_json(res, &json, &err) == 0) {
			/* as for one command: a result that cannot be delivered is corral's
			 * failure, and a non-blocking stdout that is full is waited for */
			size_t len = strlen(json);
			json[len] = '\n'; /* (the terminating NUL is not needed after this) */
			if (fflush(stdout) == EOF ||
			    fd_write_all(STDOUT_FILENO, json, len + 1) < 0) {
				cli_error(
				    "cannot write the JSON result to stdout: %s; the result is "
				    "lost (the pipeline's exit status was %d); exit status 125",
				    strerror(errno), code);
				code = EXIT_CORRAL_FAILED;
			}
			free(json);
		} else {
			cli_error("%s", err.message);
			code = EXIT_CORRAL_FAILED;
		}
	} else {
		print_notes(res, o);
	}
	corral_pipeline_result_free(res);
out:
	for (size_t i = 0; i < n; i++)
		corral_config_free(stages[i]);
	return code;
}
