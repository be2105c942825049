/* A driver for the session and job API of libcorral, for tests/integration/session.sh.
 *
 * Usage: session_tool WORKSPACE [--timeout MS] [--cpu S] [--memory BYTES] [--shell SH]
 *                     [--budget BYTES] [--cap BYTES] [--startup MS] [--stream FILE] < SCRIPT
 *
 * --stream FILE: the session's output callback appends what it streams (both streams) to FILE.
 *
 * Each line of SCRIPT is one operation; each prints one JSON line on stdout:
 *   exec TIMEOUT_MS COMMAND...    corral_session_exec: {"result": RESULT JSON, "stdout_hex":
 *                                 HEX, "stderr_hex": HEX} (the streams' exact bytes; the
 *                                 result's strings have invalid UTF-8 replaced)
 *   execx TIMEOUT_MS HEX          the same with the command hex-encoded (binary, newlines)
 *   job COMMAND...                a job in the session: {"job": N}
 *   solo COMMAND...               a job in a sandbox of its own: {"job": N}
 *   read N SINCE [MAX]            corral_job_read of job N (with "redactions": {mode, count,
 *                                 kinds})
 *   wait N MS                     step job N until it ends or MS pass: {"ended": bool}
 *   kill N GRACE_MS               corral_job_kill
 *   info                          corral_session_info
 *   sleep MS                      step the session for MS (as a server would between calls)
 *   close                         corral_session_close (later execs fail)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "corral.h"

#define MAX_JOBS 64

static FILE *stream_file;

static void stream_to_file(void *ud, int stream, const char *buf, size_t len)
{
	(void)stream;
	FILE *f = ud;
	fwrite(buf, 1, len, f);
	fflush(f);
}

static void json_str(const char *s, size_t n)
{
	putchar('"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			printf("\\u%04x", c); /* bytes as code points: tests compare exactly */
		else
			putchar(c);
	}
	putchar('"');
}

static void hex_str(const char *s, size_t n)
{
	putchar('"');
	for (size_t i = 0; s && i < n; i++)
		printf("%02x", (unsigned char)s[i]);
	putchar('"');
}

static int unhex(const char *h, char **out, size_t *len)
{
	size_t n = strlen(h);
	while (n && (h[n - 1] == '\n' || h[n - 1] == ' '))
		n--;
	*out = malloc(n / 2 + 1);
	if (!*out)
		return -1;
	for (size_t i = 0; i + 1 < n; i += 2) {
		unsigned v;
		if (sscanf(h + i, "%2x", &v) != 1) {
			free(*out);
			*out = NULL;
			return -1;
		}
		(*out)[i / 2] = (char)v;
	}
	*len = n / 2;
	(*out)[*len] = 0;
	return 0;
}

int main(int argc, char **argv)
{
	/* one answer per line, out at once: the tests read each with head, which would take a
	 * later answer held in a full buffer along with it */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: session_tool WORKSPACE [options] < SCRIPT\n");
		return 2;
	}
	struct corral_error err = {0};
	corral_config *cfg = corral_config_new();
	struct corral_session_options opt = {0};
	if (corral_config_set_workspace(cfg, argv[1], &err) < 0) {
		fprintf(stderr, "%s\n", err.message);
		return 2;
	}
	for (int i = 2; i + 1 < argc; i += 2) {
		unsigned long long v = strtoull(argv[i + 1], NULL, 10);
		if (!strcmp(argv[i], "--timeout"))
			corral_config_set_timeout_ms(cfg, v, 300, &err);
		else if (!strcmp(argv[i], "--cpu"))
			corral_config_set_limit(cfg, CORRAL_LIMIT_CPU_S, v, &err);
		else if (!strcmp(argv[i], "--memory"))
			corral_config_set_limit(cfg, CORRAL_LIMIT_MEMORY, v, &err);
		else if (!strcmp(argv[i], "--shell"))
			opt.shell = argv[i + 1];
		else if (!strcmp(argv[i], "--budget"))
			opt.output_budget = v;
		else if (!strcmp(argv[i], "--cap"))
			corral_config_set_output_cap(cfg, (size_t)v, &err);
		else if (!strcmp(argv[i], "--startup"))
			opt.startup_timeout_ms = v;
		else if (!strcmp(argv[i], "--env"))
			corral_config_env_allow(cfg, argv[i + 1], &err);
		else if (!strcmp(argv[i], "--stream")) {
			if (stream_file)
				fclose(stream_file);
			if (!(stream_file = fopen(argv[i + 1], "a"))) {
				perror(argv[i + 1]);
				return 2;
			}
			corral_config_set_output_cb(cfg, stream_to_file, stream_file);
		}
	}
	corral_session *s = NULL;
	if (corral_session_open(cfg, &opt, &s, &err) < 0) {
		printf("{\"open_error\":");
		json_str(err.message, strlen(err.message));
		printf(",\"code\":%d}\n", err.code);
		corral_config_free(cfg);
		if (stream_file)
			fclose(stream_file);
		return 0;
	}
	printf("{\"session\":\"%s\"}\n", corral_session_id(s));
	fflush(stdout);
	corral_job *jobs[MAX_JOBS] = {0};
	int njobs = 0;
	char line[1 << 16];
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = 0;
		char op[16] = "";
		int off = 0;
		if (sscanf(line, "%15s %n", op, &off) < 1)
			continue;
		const char *rest = line + off;
		memset(&err, 0, sizeof(err));
		if (!strcmp(op, "exec") || !strcmp(op, "execx")) {
			unsigned long long to = 0;
			char *cmd = NULL;
			size_t clen = 0;
			int o2 = 0;
			sscanf(rest, "%llu %n", &to, &o2);
			if (!strcmp(op, "exec")) {
				cmd = strdup(rest + o2);
			} else if (unhex(rest + o2, &cmd, &clen) < 0) {
				printf("{\"error\":\"bad hex\"}\n");
				continue;
			}
			struct corral_result *res = NULL;
			int r = s ? corral_session_exec(s, cmd, to, &res, &err) : -9;
			free(cmd);
			if (r < 0) {
				printf("{\"error\":");
				json_str(err.message, strlen(err.message));
				printf(",\"code\":%d}\n", r);
			} else {
				/* the result as the library encodes it (invalid UTF-8 becomes
				 * U+FFFD), plus the exact bytes of both streams in hex */
				char *js = NULL;
				corral_result_to_json(res, &js, &err);
				printf("{\"result\":%s,\"stdout_hex\":", js ? js : "{}");
				hex_str(res->stdout_buf, res->stdout_len);
				printf(",\"stderr_hex\":");
				hex_str(res->stderr_buf, res->stderr_len);
				printf("}\n");
				free(js);
			}
			corral_result_free(res);
		} else if (!strcmp(op, "job") || !strcmp(op, "solo")) {
			corral_job *j = NULL;
			int r;
			if (njobs == MAX_JOBS) {
				printf("{\"error\":\"too many jobs\"}\n");
				continue;
			}
			if (!strcmp(op, "job")) {
				r = s ? corral_session_job_start(s, rest, &j, &err) : -9;
			} else {
				corral_config *c2 = corral_config_dup(cfg);
				corral_config_set_shell(c2, rest, &err);
				r = corral_job_start(c2, &j, &err);
				corral_config_free(c2);
			}
			if (r < 0) {
				printf("{\"error\":");
				json_str(err.message, strlen(err.message));
				printf(",\"code\":%d}\n", r);
			} else {
				jobs[njobs] = j;
				printf("{\"job\":%d,\"id\":\"%s\"}\n", njobs, corral_job_id(j));
				njobs++;
			}
		} else if (!strcmp(op, "read")) {
			int n = -1;
			unsigned long long since = 0, max = 0;
			sscanf(rest, "%d %llu %llu", &n, &since, &max);
			if (n < 0 || n >= njobs) {
				printf("{\"error\":\"no such job\"}\n");
				continue;
			}
			struct corral_job_output o;
			if (corral_job_read(jobs[n], since, (size_t)max, &o, &err) < 0) {
				printf("{\"error\":");
				json_str(err.message, strlen(err.message));
				printf("}\n");
				continue;
			}
			printf("{\"stdout\":");
			json_str(o.stdout_buf, o.stdout_len);
			printf(",\"stderr\":");
			json_str(o.stderr_buf, o.stderr_len);
			printf(",\"from\":%llu,\"next\":%llu,\"missed\":%llu,\"total\":%llu,"
			       "\"dropped\":%llu,\"running\":%s,\"exit_code\":%d,\"signal\":%d",
			       (unsigned long long)o.from_offset, (unsigned long long)o.next_offset,
			       (unsigned long long)o.missed, (unsigned long long)o.total_bytes,
			       (unsigned long long)o.dropped_bytes, o.running ? "true" : "false",
			       o.exit_code, o.signal);
			printf(",\"redactions\":{\"mode\":\"%s\",\"count\":%llu,\"kinds\":{",
			       o.redaction_mode ? o.redaction_mode : "?",
			       (unsigned long long)o.redactions);
			for (unsigned k = 0, first = 1; k < 16; k++)
				if (o.redactions_by_kind[k] && corral_redaction_kind_name(k)) {
					printf("%s\"%s\":%llu", first ? "" : ",",
					       corral_redaction_kind_name(k),
					       (unsigned long long)o.redactions_by_kind[k]);
					first = 0;
				}
			printf("}}}\n");
			corral_job_output_free(&o);
		} else if (!strcmp(op, "wait")) {
			int n = -1;
			long ms = 0;
			sscanf(rest, "%d %ld", &n, &ms);
			if (n < 0 || n >= njobs) {
				printf("{\"error\":\"no such job\"}\n");
				continue;
			}
			struct timespec t0, t1;
			clock_gettime(CLOCK_MONOTONIC, &t0);
			int r = 0;
			for (;;) {
				/* the session's descriptor carries the jobs' exit reports too */
				if (s)
					corral_session_step(s, 0, &err);
				r = corral_job_step(jobs[n], 20, &err);
				clock_gettime(CLOCK_MONOTONIC, &t1);
				long el = (t1.tv_sec - t0.tv_sec) * 1000 +
				          (t1.tv_nsec - t0.tv_nsec) / 1000000;
				if (r != 0 || el >= ms)
					break;
			}
			printf("{\"ended\":%s}\n", r == 1 ? "true" : "false");
		} else if (!strcmp(op, "kill")) {
			int n = -1;
			unsigned long long g = 0;
			sscanf(rest, "%d %llu", &n, &g);
			if (n < 0 || n >= njobs) {
				printf("{\"error\":\"no such job\"}\n");
				continue;
			}
			int r = corral_job_kill(jobs[n], g, &err);
			printf("{\"kill\":%d}\n", r);
		} else if (!strcmp(op, "info")) {
			struct corral_session_info in;
			if (!s) {
				printf("{\"error\":\"closed\"}\n");
				continue;
			}
			corral_session_info(s, &in);
			printf(
			    "{\"id\":\"%s\",\"alive\":%s,\"busy\":%s,\"commands\":%u,\"restarts\":%"
			    "u,"
			    "\"jobs\":%u,\"idle_ms\":%llu,\"output_bytes\":%llu,\"dropped\":%llu,"
			    "\"shell\":\"%s\"}\n",
			    in.id, in.alive ? "true" : "false", in.busy ? "true" : "false",
			    in.commands, in.restarts, in.jobs, (unsigned long long)in.idle_ms,
			    (unsigned long long)in.output_bytes,
			    (unsigned long long)in.dropped_bytes, in.shell);
		} else if (!strcmp(op, "sleep")) {
			long ms = atol(rest);
			struct timespec t0, t1;
			clock_gettime(CLOCK_MONOTONIC, &t0);
			for (;;) {
				clock_gettime(CLOCK_MONOTONIC, &t1);
				long el = (t1.tv_sec - t0.tv_sec) * 1000 +
				          (t1.tv_nsec - t0.tv_nsec) / 1000000;
				if (el >= ms)
					break;
				if (s)
					corral_session_step(s, (int)(ms - el < 50 ? ms - el : 50),
					                    &err);
				for (int k = 0; k < njobs; k++)
					if (jobs[k])
						corral_job_step(jobs[k], 0, &err);
			}
			printf("{\"slept\":%ld}\n", ms);
		} else if (!strcmp(op, "close")) {
			corral_session_close(s);
			s = NULL;
			printf("{\"closed\":true}\n");
		} else {
			printf("{\"error\":\"unknown op %s\"}\n", op);
		}
		fflush(stdout);
	}
	for (int k = 0; k < njobs; k++)
		corral_job_free(jobs[k]);
	corral_session_close(s);
	corral_config_free(cfg);
	if (stream_file)
		fclose(stream_file);
	return 0;
}
