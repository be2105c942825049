/* corral: entry point and subcommand dispatch. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

void cli_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("corral: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void usage(FILE *f)
{
	fputs("Usage: corral COMMAND [OPTIONS]\n"
	      "\n"
	      "Run untrusted commands in a layered Linux sandbox and report what happened.\n"
	      "\n"
	      "Commands:\n"
	      "  run      run a command in a sandbox (corral help run)\n"
	      "  shell    an interactive shell in a sandbox, on a terminal (corral help shell)\n"
	      "  check    probe this host for each isolation layer\n"
	      "  mcp      serve the Model Context Protocol on stdio (corral help mcp)\n"
	      "  policy   explain, validate and query policies (corral policy --help)\n"
	      "  audit    list, show, verify and prune the audit store (corral help audit)\n"
	      "  version  print the version\n"
	      "  help     show help for a command\n"
	      "\n"
	      "Exit status of 'run': the command's own; 124 timed out; 125 corral failed;\n"
	      "126 not executable or denied; 127 not found; 128+N killed by signal N.\n"
	      "See corral(1) for details.\n",
	      f);
}

bool cli_std_closed[3];

/* Descriptors 0-2 that are not open get /dev/null, so that nothing corral opens later (its
 * signalfd, the audit store) lands on one of them and receives what is meant for stdout or
 * is read as stdin. Which ones were closed is remembered (cli_std_closed): `corral mcp` has
 * no transport without stdin and stdout and says so. */
static void std_fds(void)
{
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		cli_std_closed[fd] = true;
		int n = open("/dev/null", O_RDWR);
		if (n > fd) {
			dup2(n, fd);
			close(n);
		}
	}
}

static int stdout_errno; /* why the first write of stdio's stdout that failed did */

/* stdout's writes, through stdio: the same write(2) to fd 1, keeping the errno of the first
 * that fails. stdio keeps only an error flag, and an output larger than its buffer is written
 * (and fails) in the middle of a printf, whose errno is long gone by the end. */
static ssize_t stdout_write(void *cookie, const char *buf, size_t n)
{
	(void)cookie;
	size_t off = 0;
	while (off < n) {
		ssize_t w = write(STDOUT_FILENO, buf + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (!stdout_errno)
				stdout_errno = w < 0 ? errno : EIO;
			return off ? (ssize_t)off : -1;
		}
		off += (size_t)w;
	}
	return (ssize_t)n;
}

/* Put stdout on stdout_write, buffered as before (lines on a terminal, else blocks). */
static void stdout_keep_errors(void)
{
	FILE *f = fopencookie(NULL, "w", (cookie_io_functions_t){.write = stdout_write});
	if (!f)
		return; /* the plain stream: a failure is still reported, without its reason */
	setvbuf(f, NULL, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, BUFSIZ);
	fflush(stdout);
	stdout = f;
}

/* At the end of every command: what it printed on stdout through stdio has been written. A
 * write that failed (a full disk) lost output, which is corral's failure (125) whatever the
 * command's own status, with the reason the write failed for. Writes that bypass stdio (the
 * relay of a run's output, a --json result) check their own. */
static int stdout_done(int code)
{
	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout) && !stdout_errno)
		return code;
	int e = stdout_errno ? stdout_errno : errno;
	cli_error("writing the output: %s", e ? strerror(e) : "write error");
	return EXIT_CORRAL_FAILED;
}

static int unknown_command(const char *cmd)
{
	cli_error("unknown command '%s'; run 'corral --help' for the list", cmd);
	return EXIT_CORRAL_FAILED;
}

static int dispatch(int argc, char **argv)
{
	const char *cmd = argv[1];
	if (!strcmp(cmd, "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(cmd, "shell"))
		return cmd_shell(argc - 1, argv + 1);
	if (!strcmp(cmd, "check"))
		return cmd_check(argc - 1, argv + 1);
	if (!strcmp(cmd, "mcp"))
		return cmd_mcp(argc - 1, argv + 1);
	if (!strcmp(cmd, "policy"))
		return cmd_policy(argc - 1, argv + 1);
	if (!strcmp(cmd, "audit"))
		return cmd_audit(argc - 1, argv + 1);
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
		printf("corral %s\n", CORRAL_VERSION);
		return 0;
	}
	if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		const char *topic = argc > 2 ? argv[2] : NULL;
		if (!topic || !strcmp(topic, "check") || !strcmp(topic, "version") ||
		    !strcmp(topic, "help"))
			usage(stdout);
		else if (!strcmp(topic, "run"))
			usage_run(stdout);
		else if (!strcmp(topic, "shell"))
			usage_shell(stdout);
		else if (!strcmp(topic, "mcp"))
			usage_mcp(stdout);
		else if (!strcmp(topic, "audit"))
			usage_audit(stdout);
		else if (!strcmp(topic, "policy"))
			return cmd_policy(2, (char *[]){"policy", "--help", NULL});
		else
			return unknown_command(topic);
		return 0;
	}
	return unknown_command(cmd);
}

int main(int argc, char **argv)
{
	std_fds();
	stdout_keep_errors();
	if (argc < 2) {
		usage(stderr);
		return EXIT_CORRAL_FAILED;
	}
	return stdout_done(dispatch(argc, argv));
}
