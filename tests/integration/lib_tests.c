/* Library integration tests: the public API of libcorral against real sandboxes.
 * Usage: lib_tests WORKSPACE. Prints PASS/FAIL lines for tests/run.sh. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "corral.h"

static int failed;
static const char *ws;

#define CHECK(name, cond)                                                                    \
	do {                                                                                 \
		if (cond)                                                                    \
			printf("PASS lib_%s\n", name);                                       \
		else {                                                                       \
			printf("FAIL lib_%s (line %d: %s)\n", name, __LINE__, #cond);        \
			failed++;                                                            \
		}                                                                            \
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
	CHECK("bad_workspace", corral_config_set_workspace(c, "/nonexistent/x", &e) ==
	                               CORRAL_EINVAL &&
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
	CHECK("capture_capped", r && r->stdout_truncated && r->stdout_bytes == 300011 &&
	                            r->stdout_len < 1200);
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
	CHECK("spawn_exposes_fds", corral_proc_pidfd(p[0]) >= 0 && corral_proc_stdout_fd(p[0]) >= 0);
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

static void test_timeout(void)
{
	corral_config *c = cfg_shell("trap '' TERM; while :; do sleep 0.1; done");
	corral_config_set_timeout_ms(c, 300, 200, NULL);
	struct corral_result *r = NULL;
	long t0 = now_ms();
	corral_run(c, &r, NULL);
	long el = now_ms() - t0;
	CHECK("timeout_term_ignoring", r && r->timed_out && r->signal == SIGKILL &&
	                                   r->limit == CORRAL_HIT_TIMEOUT);
	CHECK("timeout_grace_respected", el >= 450 && el < 3000);
	char *json = NULL;
	CHECK("timeout_json", r && corral_result_to_json(r, &json, NULL) == 0 &&
	                          strstr(json, "\"limit\":\"timeout\""));
	free(json);
	corral_result_free(r);
	corral_config_free(c);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: lib_tests WORKSPACE\n");
		return 2;
	}
	ws = argv[1];
	test_blocking();
	test_errors();
	test_stdin_and_stream();
	test_concurrent_spawn();
	test_cancel_and_destroy();
	test_timeout();
	char *doc = NULL;
	CHECK("check_host_json", corral_check_host(&doc, NULL) == 0 && strstr(doc, "landlock"));
	free(doc);
	printf("strerror: %s\n", corral_strerror(CORRAL_EUNAVAIL));
	return failed ? 1 : 0;
}
