/* The corral command-line front end: one file per subcommand. */
#ifndef CORRAL_CLI_H
#define CORRAL_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "corral.h"

/* Exit codes, as timeout(1) and env(1). */
enum {
	EXIT_CORRAL_TIMEOUT = 124,
	EXIT_CORRAL_FAILED = 125,
	EXIT_CORRAL_NOEXEC = 126,
	EXIT_CORRAL_NOTFOUND = 127,
};

int cmd_run(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
void usage_mcp(FILE *f);
int cmd_policy(int argc, char **argv);
int cmd_audit(int argc, char **argv);
void usage_audit(FILE *f);
/* Print corral_explain() as text or JSON; returns an exit code. */
int print_explain(const corral_config *cfg, bool json);
void usage_run(FILE *f);

/* limits.c: one line "invalid value 'V' for FLAG: WHY" on stderr; returns 125. */
int cli_bad_value(const char *flag, const char *value, const char *why);
/* limits.c: parse and set --memory, --fsize, --tmpfs-size, --cpu, --pids or --nofile. */
int cli_set_limit(corral_config *cfg, const char *flag, const char *arg);

/* corral run's options beyond the configuration (run.c); corral shell parses the same. */
struct run_opts {
	const char *shell, *workspace, *cwd, *profile;
	const char *audit; /* NULL: the default store; "off": none */
	bool audit_output;
	uint64_t audit_max_age_ms, audit_max_rows; /* --audit-max-age, --audit-max-rows */
	bool audit_max_age_set, audit_max_rows_set;
	uint64_t timeout_ms, kill_after_ms;
	bool timeout_set, kill_after_set;
	bool stdin_pass, json, dry_run, quiet;
	void (*usage)(FILE *f); /* --help: NULL for usage_run */
	const char *name;       /* the subcommand named in messages: NULL for "run" */
	const char *pipes[16];  /* --pipe stages (pipe.c), in order */
	size_t n_pipes;         /* how many --pipe were given (may exceed 16: refused) */
};
/* run.c: parse corral run's options into cfg and o (the profile first, then every flag in
 * order) and set the workspace and cwd. Stops at the first non-option (optind). Returns 0,
 * -1 after --help, or an exit code. */
int run_parse_opts(int argc, char **argv, corral_config *cfg, struct run_opts *o,
                   struct corral_error *err);
/* run.c: warn about --env NAME that a deny rule withholds. */
void run_warn_withheld(const corral_config *cfg, int argc, char **argv);
/* run.c: corral run's exit status for a result: 127, 126, 125, 124, 128+N or the command's. */
int run_exit_code(const struct corral_result *res);
/* run.c: open the audit store of o (not "off") with o's retention; NULL after a warning. */
struct audit;
struct audit *run_audit_open(const struct run_opts *o);
/* audit.c: parse the value of a retention flag (--audit-max-age DUR, --audit-max-rows N, and
 * prune's --max-age/--max-rows; 0 = no limit): 0, or 125 after a one-line error. */
int cli_parse_retention(const char *flag, const char *arg, uint64_t *out);
/* run.c: record a run in the audit store (o->audit); a failure is a warning on stderr. */
void run_audit(const corral_config *cfg, const struct run_opts *o, const struct corral_result *res,
               int64_t started_ms, bool cancelled);
void run_audit_to(struct audit *a, const corral_config *cfg, const struct run_opts *o,
                  const struct corral_result *res, int64_t started_ms, bool cancelled);

/* main.c: which of stdin, stdout and stderr were not open when corral started (they are
 * /dev/null now). */
extern bool cli_std_closed[3];

/* run.c: whether relaying the command's stream (1 stdout, 2 stderr) to corral's own failed;
 * the run loop then closes that stream (corral_proc_close_output). */
bool cli_relay_failed(int stream);
/* run.c: the relay waits for a reader that takes nothing only until next_ms(run) says a
 * deadline of the run is due, or sfd (the loop's signalfd) is readable. */
void cli_relay_watch(int (*next_ms)(const void *run), const void *run, int sfd);
/* run.c: the run has ended; write what its reader has not taken yet (waiting for it, or a
 * signal on the watched signalfd; interrupted: a signal cancelled the run, only what the
 * reader takes now), say what was left, and forget the run. */
void cli_relay_finish(bool interrupted);

/* pipe.c: corral run --pipe. Check the stages against the rest of the command line (command:
 * the COMMAND given, or NULL); 0 or an exit code after a message. */
int run_pipe_check(const struct run_opts *o, const char *command);
/* pipe.c: run the pipeline of o->pipes with cfg as every stage's configuration; prints the
 * output or the JSON result; returns corral run's exit status for it. */
int run_pipeline(const corral_config *cfg, const struct run_opts *o);

int cmd_shell(int argc, char **argv);
void usage_shell(FILE *f);

/* Print "corral: <message>" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
