/* Library integration tests: the public API of libcorral against real sandboxes.
 * Usage: lib_tests WORKSPACE. Prints PASS/FAIL lines for tests/run.sh. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "corral.h"

static int failed;
static const char *ws;

#define CHECK(name, cond)                                                                          \
	do {                                                                                       \
		if (cond)                                                                          \
			printf("PASS lib_%s\n", name);                                             \
		else {                                                                             \
			printf("FAIL lib_%s (line %d: %s)\n", name, __LINE__, #cond);              \
			failed++;                                                                  \
		}                                                                                  \
	} while (0)

static corral_config *cfg_shell(const char *cmd)
{
	corral_config *c = corral_config_new();
	corral_config_set_workspace(c, ws, NULL);
	corral_config_set_shell(c, cmd, NULL);
	return c;
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int pid_alive(pid_t pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
}

struct chunks {
	size_t bytes, calls;
};
static void on_output(void *ud, int stream, const char *buf, size_t len)
{
	struct chunks *c = ud;
	(void)buf;
	if (stream == 1) {
		c->bytes += len;
		c->calls++;
	}
}

static void test_blocking(void)
{
	corral_config *c = cfg_shell("echo out; echo err >&2; exit 7");
	struct corral_result *r = NULL;
	struct corral_error e = {0};
	int rc = corral_run(c, &r, &e);
	CHECK("run_returns_0", rc == 0 && r);
	CHECK("run_exit_code", r && r->exited && r->exit_code == 7);
	CHECK("run_stdout_separate", r && !strcmp(r->stdout_buf, "out\n"));
	CHECK("run_stderr_separate", r && !strcmp(r->stderr_buf, "err\n"));
	CHECK("run_has_layers", r && r->n_layers > 0);
	corral_result_free(r);
	corral_config_free(c);
}

static void test_errors(void)
{
	corral_config *c = corral_config_new();
	struct corral_error e = {0};
	struct corral_result *r = NULL;
	const char *argv[] = {"true", NULL};
	corral_config_set_argv(c, argv, NULL);
	int rc = corral_run(c, &r, &e);
	CHECK("no_workspace_error", rc == CORRAL_EINVAL && strstr(e.message, "workspace"));
	corral_result_free(r);
	CHECK("bad_workspace",
	      corral_config_set_workspace(c, "/nonexistent/x", &e) == CORRAL_EINVAL &&
	          strstr(e.message, "/nonexistent/x"));
	CHECK("root_workspace_refused", corral_config_set_workspace(c, "/", &e) == CORRAL_EINVAL);
	CHECK("bad_env_name", corral_config_setenv(c, "1BAD", "x", &e) == CORRAL_EINVAL);
	CHECK("bad_limit", corral_config_set_limit(c, CORRAL_LIMIT_MEMORY, 5, &e) == CORRAL_EINVAL);
	CHECK("bad_cap", corral_config_set_output_cap(c, 1, &e) == CORRAL_EINVAL);
	CHECK("empty_argv", corral_config_set_argv(c, (const char *[]){NULL}, &e) == CORRAL_EINVAL);
	corral_config_set_workspace(c, ws, NULL);
	CHECK("cwd_outside_refused", corral_config_set_cwd(c, "/usr", &e) == CORRAL_EINVAL &&
	                                 strstr(e.message, "outside"));
	const char *nf[] = {"no-such-program-xyz", NULL};
	corral_config_set_argv(c, nf, NULL);
	rc = corral_run(c, &r, &e);
	CHECK("not_found_result", rc == CORRAL_ENOTFOUND && r &&
	                              r->error.code == CORRAL_ENOTFOUND && r->exit_code == 127 &&
	                              e.code == CORRAL_ENOTFOUND);
	corral_result_free(r);
	corral_config_free(c);
}

static void test_stdin_and_stream(void)
{
	corral_config *c = cfg_shell("cat; head -c 300000 /dev/zero");
	corral_config_set_stdin_data(c, "from-stdin\n", 11, NULL);
	struct chunks ch = {0};
	corral_config_set_output_cb(c, on_output, &ch);
	corral_config_set_output_cap(c, 1024, NULL);
	struct corral_result *r = NULL;
	corral_run(c, &r, NULL);
	CHECK("stdin_data_fed", r && !strncmp(r->stdout_buf, "from-stdin\n", 11));
	CHECK("stream_cb_sees_every_byte", ch.bytes == 300011);
	CHECK("capture_capped",
	      r && r->stdout_truncated && r->stdout_bytes == 300011 && r->stdout_len < 1200);
	corral_result_free(r);
	corral_config_free(c);
}

/* Many runs at once from one event loop, as the MCP server does it. */
static void test_concurrent_spawn(void)
{
	enum { N = 8 };
	corral_proc *p[N];
	int ep = epoll_create1(EPOLL_CLOEXEC);
	long t0 = now_ms();
	int ok = 1;
	for (int i = 0; i < N; i++) {
		char cmd[64];
		snprintf(cmd, sizeof(cmd), "sleep 0.5; echo %d", i);
		corral_config *c = cfg_shell(cmd);
		if (corral_spawn(c, &p[i], NULL) < 0)
			ok = 0;
		corral_config_free(c); /* spawn copied it */
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
		epoll_ctl(ep, EPOLL_CTL_ADD, corral_proc_fd(p[i]), &ev);
	}
	CHECK("spawn_all", ok);
	CHECK("spawn_exposes_fds",
	      corral_proc_pidfd(p[0]) >= 0 && corral_proc_stdout_fd(p[0]) >= 0);
	int done = 0, right = 0;
	int finished[N] = {0};
	while (done < N && now_ms() - t0 < 20000) {
		struct epoll_event evs[N];
		int n = epoll_wait(ep, evs, N, 1000);
		for (int k = 0; k < n; k++) {
			int i = (int)evs[k].data.u32;
			if (finished[i])
				continue;
			if (corral_proc_step(p[i], 0, NULL) == 1) {
				struct corral_result *r;
				corral_proc_result(p[i], &r, NULL);
				char want[16];
				snprintf(want, sizeof(want), "%d\n", i);
				right += r->stdout_buf && !strcmp(r->stdout_buf, want);
				corral_result_free(r);
				finished[i] = 1;
				done++;
			}
		}
	}
	long elapsed = now_ms() - t0;
	CHECK("concurrent_all_done", done == N);
	CHECK("concurrent_right_output", right == N);
	/* 8 x 0.5 s sequentially would take 4 s; overlapped it takes about 0.5 s */
	CHECK("concurrent_overlap", elapsed < 3000);
	for (int i = 0; i < N; i++)
		corral_proc_destroy(p[i]);
	close(ep);
}

static void test_cancel_and_destroy(void)
{
	corral_config *c = cfg_shell("sleep 30 & sleep 30");
	corral_proc *p;
	corral_spawn(c, &p, NULL);
	pid_t pid = corral_proc_pid(p);
	corral_proc_step(p, 200, NULL);
	corral_proc_cancel(p, 0, NULL);
	long t0 = now_ms();
	int r;
	while ((r = corral_proc_step(p, 1000, NULL)) == 0 && now_ms() - t0 < 5000)
		;
	struct corral_result *res = NULL;
	corral_proc_result(p, &res, NULL);
	CHECK("cancel_finishes", r == 1 && res && res->signal == SIGKILL && !res->timed_out);
	corral_result_free(res);
	corral_proc_destroy(p);
	CHECK("cancel_init_gone", !pid_alive(pid));

	/* destroy while running: kills and reaps */
	corral_spawn(c, &p, NULL);
	pid = corral_proc_pid(p);
	corral_proc_step(p, 100, NULL);
	corral_proc_destroy(p);
	CHECK("destroy_running_reaps", !pid_alive(pid));
	corral_config_free(c);
}

/* corral_proc_close_output: the command's next write to the closed stream ends it with
 * SIGPIPE (not the timeout), what was read before stays in the result, and the other stream
 * is still read. Bad arguments are refused. */
static void test_close_output(void)
{
	corral_config *c = cfg_shell("echo before; sleep 0.3; yes; echo after-yes >&2");
	corral_config_set_timeout_ms(c, 30000, 0, NULL);
	corral_proc *p = NULL;
	CHECK("close_output_spawn", corral_spawn(c, &p, NULL) == 0);
	CHECK("close_output_bad_stream", corral_proc_close_output(p, 3) == CORRAL_EINVAL &&
	                                     corral_proc_close_output(NULL, 1) == CORRAL_EINVAL);
	long t0 = now_ms();
	int r;
	while ((r = corral_proc_step(p, 100, NULL)) == 0 && now_ms() - t0 < 200)
		;
	CHECK("close_output_closed", corral_proc_close_output(p, 1) == 0 &&
	                                 corral_proc_stdout_fd(p) < 0 &&
	                                 corral_proc_close_output(p, 1) == 0);
	while (r == 0 && now_ms() - t0 < 20000)
		r = corral_proc_step(p, 1000, NULL);
	struct corral_result *res = NULL;
	if (r == 1)
		corral_proc_result(p, &res, NULL);
	CHECK("close_output_sigpipe_ends_it",
	      res && !res->timed_out && res->exit_code == 0 && now_ms() - t0 < 20000);
	CHECK("close_output_kept_what_was_read",
	      res && res->stdout_buf && !strncmp(res->stdout_buf, "before\n", 7));
	CHECK("close_output_other_stream_read",
	      res && res->stderr_buf && strstr(res->stderr_buf, "after-yes"));
	corral_result_free(res);
	corral_proc_destroy(p);
	corral_config_free(c);
}

static void test_timeout(void)
{
	corral_config *c = cfg_shell("trap '' TERM; while :; do sleep 0.1; done");
	corral_config_set_timeout_ms(c, 300, 200, NULL);
	struct corral_result *r = NULL;
	long t0 = now_ms();
	corral_run(c, &r, NULL);
	long el = now_ms() - t0;
	CHECK("timeout_term_ignoring",
	      r && r->timed_out && r->signal == SIGKILL && r->limit == CORRAL_HIT_TIMEOUT);
	CHECK("timeout_grace_respected", el >= 450 && el < 3000);
	char *json = NULL;
	CHECK("timeout_json", r && corral_result_to_json(r, &json, NULL) == 0 &&
	                          strstr(json, "\"limit\":\"timeout\""));
	free(json);
	corral_result_free(r);
	corral_config_free(c);
}


/* ---- exit statuses, signals, daemons, environment, limits, setup errors ------------------ */

/* Host-side count of processes whose command line (argv[0]) contains mark: /proc of the
 * host, not the sandbox's view. */
static int count_marked(const char *mark)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		char path[300], buf[512];
		snprintf(path, sizeof(path), "/proc/%.256s/cmdline", de->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[len] = 0; /* argv[0] only: NUL-separated */
		n += len > 0 && strstr(buf, mark) != NULL;
	}
	closedir(d);
	return n;
}

static int wait_marked_gone(const char *mark, long ms)
{
	long t0 = now_ms();
	while (count_marked(mark) != 0) {
		if (now_ms() - t0 > ms)
			return 0;
		usleep(50000);
	}
	return 1;
}

static void test_exit_126_and_signal(void)
{
	/* a data file without the execute bit, and a file the sandbox sees (/etc/passwd) */
	char path[4096];
	snprintf(path, sizeof(path), "%s/lib-notexec", ws);
	FILE *f = fopen(path, "w");
	if (f) {
		fputs("data\n", f);
		fclose(f);
	}
	chmod(path, 0644);
	const char *nx[] = {"./lib-notexec", NULL};
	const char *pw[] = {"/etc/passwd", NULL};
	const char *const *cases[] = {nx, pw};
	for (int i = 0; i < 2; i++) {
		corral_config *c = corral_config_new();
		corral_config_set_workspace(c, ws, NULL);
		corral_config_set_argv(c, cases[i], NULL);
		struct corral_result *r = NULL;
		struct corral_error e = {0};
		int rc = corral_run(c, &r, &e);
		CHECK(i ? "not_executable_126_system_file" : "not_executable_126",
		      rc == CORRAL_ENOEXEC && e.code == CORRAL_ENOEXEC && e.sys_errno == EACCES &&
		          !strcmp(e.step, "exec") && strstr(e.message, cases[i][0]) && r &&
		          r->exit_code == 126 && r->error.code == CORRAL_ENOEXEC);
		corral_result_free(r);
		corral_config_free(c);
	}
	unlink(path);

	corral_config *c = cfg_shell("echo before; kill -SEGV $$");
	struct corral_result *r = NULL;
	int rc = corral_run(c, &r, NULL);
	CHECK("signal_death", rc == 0 && r && !r->exited && r->signal == SIGSEGV &&
	                          r->exit_code == -1 && r->limit == CORRAL_HIT_NONE &&
	                          !strcmp(r->stdout_buf, "before\n"));
	char *json = NULL;
	CHECK("signal_death_json", r && corral_result_to_json(r, &json, NULL) == 0 &&
	                               strstr(json, "\"signal\":11") &&
	                               strstr(json, "\"exit_code\":null"));
	free(json);
	corral_result_free(r);
	corral_config_free(c);
	/* a plain exit status 128+N is an exit, not a signal */
	c = cfg_shell("exit 137");
	corral_run(c, &r, NULL);
	CHECK("exit_137_is_not_a_signal", r && r->exited && r->exit_code == 137 && r->signal == 0);
	corral_result_free(r);
	corral_config_free(c);
}

/* A timeout kills setsid daemons, a double fork and a nohup'ed one: none survives, checked
 * in the host's /proc (with a control that they were running before the timeout). */
static void test_timeout_kills_daemons(void)
{
	char mark[64], cmd[1024];
	snprintf(mark, sizeof(mark), "corral-libd-%d-%ld", (int)getpid(), now_ms() % 100000);
	snprintf(cmd, sizeof(cmd),
	         "cp /bin/sleep ./%s; setsid ./%s 300 & (setsid ./%s 301 &); "
	         "(nohup ./%s 302 >/dev/null 2>&1 &); exec ./%s 303",
	         mark, mark, mark, mark, mark);
	corral_config *c = cfg_shell(cmd);
	corral_config_set_timeout_ms(c, 1500, 200, NULL);
	corral_proc *p = NULL;
	long t0 = now_ms();
	int rc = corral_spawn(c, &p, NULL);
	corral_config_free(c);
	int seen = 0, done = 0;
	while (rc == 0 && !done && now_ms() - t0 < 10000) {
		done = corral_proc_step(p, 50, NULL) == 1;
		int n = count_marked(mark);
		if (n > seen)
			seen = n;
	}
	struct corral_result *r = NULL;
	if (p)
		corral_proc_result(p, &r, NULL);
	CHECK("daemons_started", seen >= 4);
	CHECK("daemons_timeout", done && r && r->timed_out && r->limit == CORRAL_HIT_TIMEOUT &&
	                             now_ms() - t0 < 6000);
	CHECK("daemons_no_survivor", wait_marked_gone(mark, 3000));
	corral_result_free(r);
	corral_proc_destroy(p);
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", ws, mark);
	unlink(path);
}

static void test_env_scrubbed(void)
{
	setenv("HOST_SECRET_TOKEN", "lib-s3cr3t-value", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "lib-aws-s3cr3t", 1);
	corral_config *c = cfg_shell("env");
	corral_config_setenv(c, "GIVEN", "by-caller", NULL);
	struct corral_result *r = NULL;
	corral_run(c, &r, NULL);
	const char *o = r && r->stdout_buf ? r->stdout_buf : "";
	int lines = 0;
	for (const char *q = o; *q; q++)
		lines += *q == '\n';
	char home[4200];
	snprintf(home, sizeof(home), "HOME=%s\n", ws);
	CHECK("env_scrubbed", r && r->exit_code == 0 && !strstr(o, "s3cr3t") &&
	                          !strstr(o, "HOST_SECRET_TOKEN") && strstr(o, home) &&
	                          strstr(o, "GIVEN=by-caller\n") && lines <= 9);
	corral_result_free(r);
	corral_config_free(c);
	unsetenv("HOST_SECRET_TOKEN");
	unsetenv("AWS_SECRET_ACCESS_KEY");
}

static int layer_applied(const struct corral_result *r, const char *name)
{
	for (size_t i = 0; r && i < r->n_layers; i++)
		if (!strcmp(r->layers[i].name, name))
			return r->layers[i].applied;
	return 0;
}

static void test_limits(void)
{
	struct corral_result *r = NULL;
	corral_config *c = cfg_shell("while :; do :; done");
	corral_config_set_limit(c, CORRAL_LIMIT_CPU_S, 1, NULL);
	corral_config_set_timeout_ms(c, 20000, 500, NULL);
	corral_run(c, &r, NULL);
	/* (rusage and the rlimit's tick accounting differ: about 850-1000 ms is seen) */
	CHECK("limit_cpu", r && r->signal == SIGXCPU && r->limit == CORRAL_HIT_CPU &&
	                       !r->timed_out && r->user_ms + r->sys_ms >= 500);
	corral_result_free(r);
	corral_config_free(c);

	char big[4096];
	snprintf(big, sizeof(big), "%s/lib-big", ws);
	unlink(big);
	/* killed by SIGXFSZ itself, and through a shell that reports it as 128+25 */
	const char *fcmd[] = {"exec head -c 1000000 /dev/zero > lib-big",
	                      "head -c 1000000 /dev/zero > lib-big; exit $?"};
	for (int i = 0; i < 2; i++) {
		unlink(big);
		c = cfg_shell(fcmd[i]);
		corral_config_set_limit(c, CORRAL_LIMIT_FSIZE, 100 * 1024, NULL);
		corral_run(c, &r, NULL);
		struct stat st;
		int have = stat(big, &st) == 0;
		CHECK(i ? "limit_fsize_via_shell" : "limit_fsize",
		      r && r->limit == CORRAL_HIT_FSIZE &&
		          (i ? r->exited && r->exit_code == 128 + SIGXFSZ : r->signal == SIGXFSZ) &&
		          have && st.st_size <= 100 * 1024);
		corral_result_free(r);
		corral_config_free(c);
	}
	unlink(big);

	c = cfg_shell("exec python3 -c 'import os\nfds = []\ntry:\n"
	              "    while True: fds.append(os.open(\"/dev/null\", os.O_RDONLY))\n"
	              "except OSError as e: print(e.errno, len(fds))'");
	corral_config_set_limit(c, CORRAL_LIMIT_NOFILE, 32, NULL);
	corral_run(c, &r, NULL);
	int eno = 0, nfd = 0;
	int got = r && r->stdout_buf && sscanf(r->stdout_buf, "%d %d", &eno, &nfd) == 2;
	CHECK("limit_nofile_emfile", got && eno == EMFILE && nfd > 20 && nfd < 32);
	corral_result_free(r);
	corral_config_free(c);

	/* processes: each child sleeps so all count at once; the fork fails with EAGAIN (and,
	 * as a program that fails then would, it exits non-zero: with a cgroup the result
	 * blames the pids limit) */
	c = cfg_shell("exec python3 -c 'import os, time\nn = 0\ntry:\n"
	              "    for i in range(60):\n"
	              "        if os.fork() == 0: time.sleep(5); os._exit(0)\n"
	              "        n += 1\n"
	              "except OSError as e: print(\"errno\", e.errno)\nprint(\"forked\", n)\n"
	              "raise SystemExit(3)'");
	corral_config_set_limit(c, CORRAL_LIMIT_PIDS, 20, NULL);
	corral_run(c, &r, NULL);
	int n = -1;
	const char *fk = r && r->stdout_buf ? strstr(r->stdout_buf, "forked ") : NULL;
	if (fk)
		n = atoi(fk + 7);
	CHECK("limit_pids", r && r->stdout_buf && strstr(r->stdout_buf, "errno 11\n") && n >= 0 &&
	                        n < 20);
	if (layer_applied(r, "cgroup"))
		CHECK("limit_pids_reported", r->limit == CORRAL_HIT_PIDS);
	corral_result_free(r);
	corral_config_free(c);

	c = cfg_shell("exec python3 -c 'x = bytearray(400 << 20); print(\"allocated\")'");
	corral_config_set_limit(c, CORRAL_LIMIT_MEMORY, 64 << 20, NULL);
	corral_run(c, &r, NULL);
	int cg = layer_applied(r, "cgroup");
	CHECK("limit_memory",
	      r && r->stdout_buf && !strstr(r->stdout_buf, "allocated") &&
	          (cg ? r->limit == CORRAL_HIT_MEMORY
	              : r->stderr_buf && strstr(r->stderr_buf, "MemoryError") != NULL));
	corral_result_free(r);
	corral_config_free(c);
}

/* A setup failure: the configured cwd is gone by the time the sandbox is built. The error
 * record names the step and carries the errno, in the return, the error and the result. */
static void test_setup_error_record(void)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/lib-gone", ws);
	struct corral_error e = {0};
	corral_config *c0 = cfg_shell("true");
	CHECK("cwd_missing_at_config",
	      corral_config_set_cwd(c0, "lib-no-such-dir", &e) == CORRAL_EINVAL &&
	          e.sys_errno == ENOENT && !strcmp(e.step, "cwd") &&
	          strstr(e.message, "lib-no-such-dir"));
	corral_config_free(c0);
	enum corral_mode modes[] = {CORRAL_MODE_REQUIRED, CORRAL_MODE_NONE};
	for (int i = 0; i < 2; i++) {
		mkdir(dir, 0755);
		corral_config *c = cfg_shell("touch lib-ran");
		corral_config_set_mode(c, modes[i], NULL);
		int set = corral_config_set_cwd(c, "lib-gone", NULL);
		rmdir(dir);
		struct corral_result *r = NULL;
		memset(&e, 0, sizeof(e));
		int rc = corral_run(c, &r, &e);
		char ran[4200];
		snprintf(ran, sizeof(ran), "%s/lib-ran", ws);
		int did_run = access(ran, F_OK) == 0;
		unlink(ran);
		/* with a mount namespace the cwd is entered by the mount step, else by its own step */
		const char *want = i == 0 ? "mount" : "cwd";
		if (i == 0)
			CHECK("setup_error_mount_step",
			      set == 0 && rc == CORRAL_ESETUP && e.code == CORRAL_ESETUP &&
			          e.sys_errno == ENOENT && !strcmp(e.step, want) && r &&
			          r->error.code == rc &&
			          r->error.sys_errno == ENOENT && !strcmp(r->error.step, want) &&
			          !did_run);
		else
			CHECK("setup_error_cwd_step",
			      set == 0 && rc == CORRAL_ESETUP && e.code == CORRAL_ESETUP &&
			          e.sys_errno == ENOENT && !strcmp(e.step, want) && r &&
			          r->error.code == rc && r->error.sys_errno == ENOENT &&
			          !strcmp(r->error.step, want) && !did_run);
		corral_result_free(r);
		corral_config_free(c);
	}
}

/* ---- pipelines ---------------------------------------------------------------------- */

static struct corral_pipeline_result *pipe_run(const char *const *cmds, size_t n,
                                               uint64_t timeout_ms, uint64_t kill_after_ms, int *rc)
{
	corral_config *c[16];
	for (size_t i = 0; i < n; i++) {
		c[i] = cfg_shell(cmds[i]);
		if (timeout_ms)
			corral_config_set_timeout_ms(c[i], timeout_ms, kill_after_ms, NULL);
	}
	struct corral_pipeline_result *r = NULL;
	*rc = corral_pipeline_run((const corral_config *const *)c, n, &r, NULL);
	for (size_t i = 0; i < n; i++)
		corral_config_free(c[i]);
	return r;
}

static void test_pipeline_basic(void)
{
	const char *cmds[] = {"printf 'b\\na\\nc\\n'", "sort", "tr a-z A-Z"};
	int rc;
	struct corral_pipeline_result *r = pipe_run(cmds, 3, 0, 0, &rc);
	CHECK("pipeline_runs", rc == 0 && r && r->n_stages == 3);
	CHECK("pipeline_output",
	      r && r->stages[2]->stdout_buf && !strcmp(r->stages[2]->stdout_buf, "A\nB\nC\n"));
	CHECK("pipeline_status_0",
	      r && r->exit_code == 0 && r->failed_stage == -1 && !r->timed_out && !r->error.code);
	CHECK("pipeline_middle_stdout_not_captured",
	      r && r->stages[0]->stdout_bytes == 0 && r->stages[1]->stdout_len == 0);
	char *json = NULL;
	CHECK("pipeline_json", r && corral_pipeline_result_to_json(r, &json, NULL) == 0 &&
	                           strstr(json, "\"pipeline\":true") &&
	                           strstr(json, "\"stdout\":\"A\\nB\\nC\\n\"") &&
	                           strstr(json, "\"failed_stage\":null") &&
	                           strstr(json, "\"stages\":[{"));
	free(json);
	corral_pipeline_result_free(r);

	/* the first stage's stdin settings apply; 10 MB flow through */
	corral_config *c[3] = {cfg_shell("cat; head -c 10000000 /dev/zero"), cfg_shell("cat"),
	                       cfg_shell("wc -c")};
	corral_config_set_stdin_data(c[0], "12345", 5, NULL);
	rc = corral_pipeline_run((const corral_config *const *)c, 3, &r, NULL);
	CHECK("pipeline_stdin_and_volume", rc == 0 && r && r->stages[2]->stdout_buf &&
	                                       atol(r->stages[2]->stdout_buf) == 10000005);
	corral_pipeline_result_free(r);
	for (int i = 0; i < 3; i++)
		corral_config_free(c[i]);
}

/* corral_pipeline_close_output: closing the pipeline's output ends its last stage with
 * SIGPIPE at its next write, and the stage before it in turn, long before the timeout. */
static void test_pipeline_close_output(void)
{
	corral_config *c[2] = {cfg_shell("yes"), cfg_shell("cat")};
	for (int i = 0; i < 2; i++)
		corral_config_set_timeout_ms(c[i], 30000, 0, NULL);
	corral_pipeline *p = NULL;
	CHECK("pipeline_close_output_spawn",
	      corral_pipeline_spawn((const corral_config *const *)c, 2, &p, NULL) == 0);
	CHECK("pipeline_close_output_bad_stream",
	      corral_pipeline_close_output(p, 0) == CORRAL_EINVAL &&
	          corral_pipeline_close_output(NULL, 1) == CORRAL_EINVAL);
	long t0 = now_ms();
	int r = 0;
	while (r == 0 && now_ms() - t0 < 200)
		r = corral_pipeline_step(p, 100, NULL);
	CHECK("pipeline_close_output_closed", corral_pipeline_close_output(p, 1) == 0);
	while (r == 0 && now_ms() - t0 < 20000)
		r = corral_pipeline_step(p, 1000, NULL);
	struct corral_pipeline_result *res = NULL;
	if (r == 1)
		corral_pipeline_result(p, &res, NULL);
	CHECK("pipeline_close_output_ends_it", res && !res->timed_out &&
	                                           res->exit_code == 128 + SIGPIPE &&
	                                           now_ms() - t0 < 20000);
	corral_pipeline_result_free(res);
	corral_pipeline_destroy(p);
	for (int i = 0; i < 2; i++)
		corral_config_free(c[i]);
}

static void test_pipeline_pipefail(void)
{
	int rc;
	const char *a[] = {"echo x", "exit 3", "cat"};
	struct corral_pipeline_result *r = pipe_run(a, 3, 0, 0, &rc);
	CHECK("pipefail_middle", r && r->exit_code == 3 && r->failed_stage == 1 &&
	                             r->stages[1]->exit_code == 3 && r->stages[2]->exit_code == 0);
	corral_pipeline_result_free(r);
	const char *b[] = {"exit 4", "exit 5", "true"};
	r = pipe_run(b, 3, 0, 0, &rc);
	CHECK("pipefail_rightmost", r && r->exit_code == 5 && r->failed_stage == 1);
	corral_pipeline_result_free(r);
	/* yes dies of SIGPIPE once head has exited: counts, as with bash's pipefail */
	const char *c[] = {"exec yes", "head -n 1"};
	r = pipe_run(c, 2, 0, 0, &rc);
	CHECK("pipefail_sigpipe", r && r->exit_code == 128 + SIGPIPE && r->failed_stage == 0 &&
	                              r->stages[0]->signal == SIGPIPE &&
	                              !strcmp(r->stages[1]->stdout_buf, "y\n"));
	corral_pipeline_result_free(r);
}

static void test_pipeline_teardown(void)
{
	int rc;
	/* a failing middle stage: the stage before it (which writes nothing, so no SIGPIPE
	 * would end it) is stopped at once */
	const char *a[] = {"sleep 30", "sleep 0.2; exit 7", "wc -c"};
	long t0 = now_ms();
	struct corral_pipeline_result *r = pipe_run(a, 3, 20000, 2000, &rc);
	long el = now_ms() - t0;
	CHECK("teardown_status", r && r->exit_code == 7 && r->failed_stage == 1 && !r->timed_out);
	CHECK("teardown_upstream_stopped",
	      r && r->stages[0]->signal == SIGKILL && r->stopped[0] && !r->stopped[1] && el < 5000);
	CHECK("teardown_downstream_eof",
	      r && r->stages[2]->exited && r->stages[2]->exit_code == 0 && !r->stopped[2]);
	corral_pipeline_result_free(r);

	/* a downstream stage that ignores EOF and SIGTERM gets the kill grace, then SIGKILL */
	const char *b[] = {"exit 2", "trap '' TERM; while :; do sleep 0.05; done"};
	t0 = now_ms();
	r = pipe_run(b, 2, 20000, 300, &rc);
	el = now_ms() - t0;
	CHECK("teardown_downstream_grace", r && r->stages[1]->signal == SIGKILL && r->stopped &&
	                                       r->stopped[1] && el >= 280 && el < 4000);
	CHECK("teardown_downstream_status",
	      r && r->exit_code == 128 + SIGKILL && r->failed_stage == 1);
	corral_pipeline_result_free(r);
}

static void test_pipeline_timeout(void)
{
	int rc;
	const char *a[] = {"sleep 30", "cat", "trap '' TERM; cat; sleep 30"};
	long t0 = now_ms();
	struct corral_pipeline_result *r = pipe_run(a, 3, 300, 300, &rc);
	long el = now_ms() - t0;
	CHECK("pipeline_timeout", r && r->timed_out && el >= 280 && el < 4000);
	int all = r != NULL;
	for (size_t i = 0; r && i < r->n_stages; i++)
		all &= r->stages[i]->timed_out && r->stages[i]->limit == CORRAL_HIT_TIMEOUT;
	CHECK("pipeline_timeout_every_stage", all);
	char *json = NULL;
	CHECK("pipeline_timeout_json", r && corral_pipeline_result_to_json(r, &json, NULL) == 0 &&
	                                   strstr(json, "\"timed_out\":true"));
	free(json);
	corral_pipeline_result_free(r);
}

static void test_pipeline_errors(void)
{
	struct corral_error e = {0};
	corral_config *c[3] = {cfg_shell("true"), corral_config_new(), cfg_shell("true")};
	corral_config_set_workspace(c[1], ws, NULL);
	const char *nf[] = {"corral-no-such-cmd", "-x", NULL};
	corral_config_set_argv(c[1], nf, NULL);
	corral_pipeline *p = NULL;
	int rc = corral_pipeline_spawn((const corral_config *const *)c, 3, &p, &e);
	CHECK("pipeline_not_found",
	      rc == CORRAL_ENOTFOUND && !p && strstr(e.message, "stage 2 (corral-no-such-cmd)"));
	struct corral_pipeline_result *r = NULL;
	rc = corral_pipeline_run((const corral_config *const *)c, 3, &r, &e);
	CHECK("pipeline_not_found_result", rc == CORRAL_ENOTFOUND && r && r->n_stages == 0 &&
	                                       r->failed_stage == 1 && r->exit_code == 127);
	char *json = NULL;
	CHECK("pipeline_not_found_json", r && corral_pipeline_result_to_json(r, &json, NULL) == 0 &&
	                                     strstr(json, "\"stages\":[]") &&
	                                     strstr(json, "stage 2 (corral-no-such-cmd)"));
	free(json);
	corral_pipeline_result_free(r);
	rc = corral_pipeline_spawn((const corral_config *const *)c, 1, &p, &e);
	CHECK("pipeline_one_stage_refused", rc == CORRAL_EINVAL && strstr(e.message, "2 to 16"));
	corral_config *none = corral_config_new();
	corral_config_set_workspace(none, ws, NULL);
	const corral_config *cc[2] = {c[0], none};
	rc = corral_pipeline_spawn(cc, 2, &p, &e);
	CHECK("pipeline_no_command", rc == CORRAL_EINVAL && strstr(e.message, "stage 2"));
	corral_config_free(none);
	for (int i = 0; i < 3; i++)
		corral_config_free(c[i]);
}

/* The non-blocking API from a caller's own event loop, and a cancel. */
static void test_pipeline_nonblocking(void)
{
	corral_config *c[3] = {cfg_shell("sleep 30"), cfg_shell("cat"), cfg_shell("cat")};
	corral_pipeline *p = NULL;
	int rc = corral_pipeline_spawn((const corral_config *const *)c, 3, &p, NULL);
	for (int i = 0; i < 3; i++)
		corral_config_free(c[i]); /* copied */
	CHECK("pipeline_spawn", rc == 0 && p && corral_pipeline_fd(p) >= 0);
	if (!p)
		return;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN};
	epoll_ctl(ep, EPOLL_CTL_ADD, corral_pipeline_fd(p), &ev);
	long t0 = now_ms();
	int done = 0, cancelled = 0;
	while (!done && now_ms() - t0 < 10000) {
		struct epoll_event out;
		epoll_wait(ep, &out, 1, cancelled ? corral_pipeline_next_timeout_ms(p) : 200);
		if (!cancelled && now_ms() - t0 >= 200) {
			corral_pipeline_cancel(p, 0, NULL);
			cancelled = 1;
		}
		done = corral_pipeline_step(p, 0, NULL) == 1;
	}
	struct corral_pipeline_result *r = NULL;
	CHECK("pipeline_cancel_finishes", done && corral_pipeline_result(p, &r, NULL) == 0 &&
	                                      r->cancelled && !r->timed_out &&
	                                      r->stages[0]->signal == SIGKILL && r->stopped[0]);
	CHECK("pipeline_result_once", corral_pipeline_result(p, &r, NULL) == CORRAL_ESTATE);
	corral_pipeline_result_free(r);
	corral_pipeline_destroy(p);
	close(ep);

	/* destroy while running kills and reaps every stage */
	corral_config *d[2] = {cfg_shell("sleep 30"), cfg_shell("sleep 30")};
	rc = corral_pipeline_spawn((const corral_config *const *)d, 2, &p, NULL);
	corral_pipeline_step(p, 100, NULL);
	t0 = now_ms();
	corral_pipeline_destroy(p);
	CHECK("pipeline_destroy_running", rc == 0 && now_ms() - t0 < 3000);
	for (int i = 0; i < 2; i++)
		corral_config_free(d[i]);
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

/* One run in an empty workspace of its own: the sandbox sees its protected names (the
 * placeholders, read-only), and when corral_run returns the host has none of them left.
 * 1 when so. */
static int run_leaves_nothing(const char *w)
{
	corral_config *c = corral_config_new();
	corral_config_set_workspace(c, w, NULL);
	corral_config_set_shell(c,
	                        "test -d .vscode && test -d .claude && test -f .bashrc && "
	                        "! mkdir .vscode/x 2>/dev/null && echo seen",
	                        NULL);
	struct corral_result *r = NULL;
	int rc = corral_run(c, &r, NULL);
	int ok = rc == 0 && r && r->exit_code == 0 && r->stdout_buf &&
	         !strcmp(r->stdout_buf, "seen\n") && count_entries(w) == 0;
	corral_result_free(r);
	corral_config_free(c);
	return ok;
}

/* Directory placeholders end off the caller's path (their last close, which waits for the
 * device on ext4 with `discard`, is a library thread's): the names are gone when the run
 * returns, and the descriptors follow; in a forked child, which has no such thread, at once. */
static void test_placeholders_released(void)
{
	char w[4096];
	snprintf(w, sizeof(w), "%s/ph-XXXXXX", ws);
	if (!mkdtemp(w)) {
		CHECK("placeholders_workspace", 0);
		return;
	}
	/* the tests before may have closes of their own still under way: the count once it has
	 * held for 0.1 s */
	int before = count_entries("/proc/self/fd");
	for (int i = 0, same = 0; i < 100 && same < 5; i++) {
		usleep(20000);
		int n = count_entries("/proc/self/fd");
		same = n == before ? same + 1 : 0;
		before = n;
	}
	int ok = 1;
	for (int i = 0; i < 3; i++)
		ok &= run_leaves_nothing(w);
	CHECK("placeholders_gone_when_run_returns", ok);
	/* each close waits for the device's discard: up to 10 s, for a busy disk */
	int now = -1;
	for (int i = 0; i < 1000 && (now = count_entries("/proc/self/fd")) != before; i++)
		usleep(10000);
	if (now != before)
		printf("descriptors: %d before, %d after\n", before, now);
	CHECK("placeholders_descriptors_closed", now == before);
	pid_t pid = fork();
	if (pid == 0) {
		int b = count_entries("/proc/self/fd");
		_exit(run_leaves_nothing(w) && count_entries("/proc/self/fd") == b ? 0 : 1);
	}
	int st = -1;
	waitpid(pid, &st, 0);
	CHECK("placeholders_released_in_forked_child", WIFEXITED(st) && WEXITSTATUS(st) == 0);
	rmdir(w);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: lib_tests WORKSPACE\n");
		return 2;
	}
	ws = argv[1];
	/* line-buffered even into a pipe: the PASS lines before a crash reach tests/run.sh */
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_blocking();
	test_errors();
	test_stdin_and_stream();
	test_concurrent_spawn();
	test_cancel_and_destroy();
	test_close_output();
	test_timeout();
	test_exit_126_and_signal();
	test_timeout_kills_daemons();
	test_env_scrubbed();
	test_limits();
	test_setup_error_record();
	test_pipeline_basic();
	test_pipeline_pipefail();
	test_pipeline_close_output();
	test_pipeline_teardown();
	test_pipeline_timeout();
	test_pipeline_errors();
	test_pipeline_nonblocking();
	test_placeholders_released();
	char *doc = NULL;
	CHECK("check_host_json", corral_check_host(&doc, NULL) == 0 && strstr(doc, "landlock"));
	free(doc);
	printf("strerror: %s\n", corral_strerror(CORRAL_EUNAVAIL));
	return failed ? 1 : 0;
}
