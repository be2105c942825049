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

/* Print "corral: <message>" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
