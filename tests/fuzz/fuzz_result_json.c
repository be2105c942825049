/* libFuzzer target for the result encoder (corral_result_to_json and
 * result_violations_json, src/result.c): a corral_result built from the input (argv, shell
 * string, stdout and stderr bytes with invalid UTF-8 and NULs, exit status and signal, limits,
 * layers, an error, violations through result_add_violation, redaction counts) must encode to
 * one line of strict UTF-8 that jansson parses back without JSON_ALLOW_NUL, with every field
 * of docs/result.schema.json present and of its type, and every byte string converted as the
 * schema says: valid sequences kept, each byte of an invalid one (and NUL) as U+FFFD.
 *
 *   tests/fuzz/run.sh builds it; by hand (after building build-fuzz/libcorral.a, see
 *   fuzz_parse.c):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc \
 *     tests/fuzz/fuzz_result_json.c build-fuzz/libcorral.a \
 *     $(pkg-config --libs libseccomp jansson sqlite3 nettle) -o build-fuzz/fuzz_result_json
 *   build-fuzz/fuzz_result_json tests/fuzz/corpus/result_json
 */
#include "internal.h"

#include "fuzz_util.h"

#include <jansson.h>
#include <stdio.h>

static const char *const layer_names[] = {"userns",  "mountns", "pidns",    "netns",
                                          "ipcns",   "utsns",   "cgroupns", "landlock",
                                          "seccomp", "caps",    "cgroup",   "rlimits"};
static const char *const kinds[] = {"fs_read", "fs_write", "exec",    "network",
                                    "syscall", "limit",    "timeout", "policy"};
static const char *const steps[] = {"", "mount", "landlock", "exec", "seccomp", "config"};
static const char *const modes[] = {NULL, "required", "auto", "none"};
static const char *const red_modes[] = {NULL, "redact", "flag", "off"};

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* A byte string as the schema's "text": strict UTF-8 kept, anything else byte by byte as
 * U+FFFD. Written independently of json_bytes(). malloc'ed. */
static char *as_text(const char *s, size_t n, size_t *outlen)
{
	char *o = malloc(3 * n + 1);
	if (!o)
		abort();
	size_t k = 0;
	for (size_t i = 0; i < n;) {
		size_t len = 0;
		for (size_t l = 1; l <= 4 && i + l <= n; l++)
			if (fz_utf8_valid(s + i, l, false)) {
				len = l;
				break;
			}
		if (len) {
			memcpy(o + k, s + i, len);
			k += len;
			i += len;
		} else {
			memcpy(o + k, "\xef\xbf\xbd", 3);
			k += 3;
			i++;
		}
	}
	o[k] = '\0';
	*outlen = k;
	return o;
}

static void check_text(const json_t *j, const char *s, size_t n)
{
	size_t l;
	char *want = as_text(s, n, &l);
	FZ_CHECK(json_is_string(j) && json_string_length(j) == l &&
	         !memcmp(json_string_value(j), want, l));
	free(want);
}

static void check_int(const json_t *j, long long v)
{
	FZ_CHECK(json_is_integer(j) && json_integer_value(j) == v);
}

static void check_bool(const json_t *j, int v)
{
	FZ_CHECK(json_is_boolean(j) && json_is_true(j) == !!v);
}

/* bytes with a 16-bit length; NUL-terminated like the captured streams */
static char *fz_stream(struct fz *f, size_t *len)
{
	size_t n = (size_t)fz_u64(f, 2);
	if (n > f->n)
		n = f->n;
	char *s = malloc(n + 1);
	if (!s)
		abort();
	memcpy(s, f->p, n);
	s[n] = '\0';
	f->p += n;
	f->n -= n;
	*len = n;
	return s;
}

static void check_violations(const json_t *a, const struct corral_result *res)
{
	FZ_CHECK(json_is_array(a) && json_array_size(a) == res->n_violations &&
	         res->n_violations <= 16);
	for (size_t i = 0; i < res->n_violations; i++) {
		const struct corral_violation *v = &res->violations[i];
		json_t *j = json_array_get(a, i);
		FZ_CHECK(json_is_object(j) && json_object_size(j) == 5);
		FZ_CHECK(!strcmp(json_string_value(json_object_get(j, "kind")), v->kind));
		check_text(json_object_get(j, "object"), v->object, strlen(v->object));
		check_text(json_object_get(j, "rule"), v->rule, strlen(v->rule));
		check_text(json_object_get(j, "hint"), v->hint, strlen(v->hint));
		check_bool(json_object_get(j, "inferred"), v->inferred);
		for (size_t k = 0; k < i; k++) /* one per (kind, object) */
			FZ_CHECK(strcmp(v->kind, res->violations[k].kind) ||
			         strcmp(v->object, res->violations[k].object));
	}
}

static void check(const struct corral_result *res, size_t argc, const char *out)
{
	size_t len = strlen(out);
	FZ_CHECK(fz_utf8_valid(out, len, false) && !memchr(out, '\n', len));
	json_error_t e;
	json_t *o = json_loads(out, 0, &e); /* no JSON_ALLOW_NUL: output has no \u0000 */
	FZ_CHECK(json_is_object(o));

	json_t *id = json_object_get(o, "id");
	FZ_CHECK(json_is_string(id) && json_string_length(id) == 36 &&
	         json_string_value(id)[14] == '4');

	json_t *argv = json_object_get(o, "argv");
	FZ_CHECK(json_is_array(argv) && json_array_size(argv) == argc);
	for (size_t i = 0; i < argc; i++)
		check_text(json_array_get(argv, i), res->argv[i], strlen(res->argv[i]));
	json_t *cmd = json_object_get(o, "command");
	if (res->command)
		check_text(cmd, res->command, strlen(res->command));
	else
		FZ_CHECK(json_is_null(cmd));

	json_t *ec = json_object_get(o, "exit_code");
	if (res->exited)
		check_int(ec, res->exit_code);
	else
		FZ_CHECK(json_is_null(ec));
	json_t *sig = json_object_get(o, "signal"), *sn = json_object_get(o, "signal_name");
	if (res->signal) {
		check_int(sig, res->signal);
		FZ_CHECK(json_is_string(sn) && json_string_length(sn) > 0);
	} else {
		FZ_CHECK(json_is_null(sig) && json_is_null(sn));
	}
	check_bool(json_object_get(o, "timed_out"), res->timed_out);
	check_bool(json_object_get(o, "cancelled"), res->cancelled);
	json_t *lim = json_object_get(o, "limit");
	const char *ln = corral_limit_hit_name(res->limit);
	FZ_CHECK(ln ? json_is_string(lim) && !strcmp(json_string_value(lim), ln)
	            : json_is_null(lim));
	check_int(json_object_get(o, "duration_ms"), (long long)res->duration_ms);
	json_t *pre = json_object_get(o, "prebuilt_ms");
	if (res->prebuilt)
		check_int(pre, (long long)res->prebuilt_ms);
	else
		FZ_CHECK(json_is_null(pre));

	check_text(json_object_get(o, "stdout"), res->stdout_buf, res->stdout_len);
	check_text(json_object_get(o, "stderr"), res->stderr_buf, res->stderr_len);
	check_int(json_object_get(o, "stdout_bytes"), (long long)res->stdout_bytes);
	check_int(json_object_get(o, "stderr_bytes"), (long long)res->stderr_bytes);
	check_bool(json_object_get(o, "stdout_truncated"), res->stdout_truncated);
	check_bool(json_object_get(o, "stderr_truncated"), res->stderr_truncated);

	json_t *usage = json_object_get(o, "usage");
	FZ_CHECK(json_is_object(usage) && json_object_size(usage) == 3);
	check_int(json_object_get(usage, "user_ms"), (long long)res->user_ms);
	check_int(json_object_get(usage, "sys_ms"), (long long)res->sys_ms);
	check_int(json_object_get(usage, "max_rss_kb"), (long long)res->max_rss_kb);

	json_t *mode = json_object_get(o, "mode");
	FZ_CHECK(json_is_string(mode) &&
	         !strcmp(json_string_value(mode), res->mode ? res->mode : "required"));

	json_t *iso = json_object_get(o, "isolation");
	FZ_CHECK(json_is_object(iso) && json_object_size(iso) == res->n_layers);
	for (size_t i = 0; i < res->n_layers; i++) {
		json_t *l = json_object_get(iso, res->layers[i].name);
		FZ_CHECK(json_is_object(l) && json_object_size(l) == 2);
		check_bool(json_object_get(l, "applied"), res->layers[i].applied);
		json_t *d = json_object_get(l, "detail");
		FZ_CHECK(json_is_string(d) && !strcmp(json_string_value(d), res->layers[i].detail));
	}

	json_t *viol = json_object_get(o, "violations");
	check_violations(viol, res);
	char *vs = result_violations_json(res);
	json_t *v2 = json_loads(vs, 0, &e);
	FZ_CHECK(v2 && json_equal(v2, viol));
	json_decref(v2);
	free(vs);

	json_t *red = json_object_get(o, "redactions");
	FZ_CHECK(json_is_object(red) && json_object_size(red) == 3);
	FZ_CHECK(!strcmp(json_string_value(json_object_get(red, "mode")),
	                 res->redaction_mode ? res->redaction_mode : "redact"));
	check_int(json_object_get(red, "count"), (long long)res->redactions);
	json_t *rk = json_object_get(red, "kinds");
	FZ_CHECK(json_is_object(rk));
	size_t n_kinds = 0;
	for (unsigned i = 0; i < 16; i++)
		if (res->redactions_by_kind[i] && corral_redaction_kind_name(i)) {
			n_kinds++;
			check_int(json_object_get(rk, corral_redaction_kind_name(i)),
			          (long long)res->redactions_by_kind[i]);
		}
	FZ_CHECK(json_object_size(rk) == n_kinds);

	json_t *err = json_object_get(o, "error");
	if (res->error.code) {
		FZ_CHECK(json_is_object(err) && json_object_size(err) == 5);
		check_int(json_object_get(err, "code"), res->error.code);
		json_t *name = json_object_get(err, "name");
		FZ_CHECK(json_is_string(name) && json_string_length(name) > 0);
		check_int(json_object_get(err, "errno"), res->error.sys_errno);
		FZ_CHECK(!strcmp(json_string_value(json_object_get(err, "step")), res->error.step));
		check_text(json_object_get(err, "message"), res->error.message,
		           strlen(res->error.message));
	} else {
		FZ_CHECK(json_is_null(err));
	}
	json_t *ses = json_object_get(o, "session");
	if (res->session_id) {
		FZ_CHECK(json_is_object(ses) && json_object_size(ses) == 3);
		FZ_CHECK(!strcmp(json_string_value(json_object_get(ses, "id")), res->session_id));
		FZ_CHECK(json_is_true(json_object_get(ses, "restarted")) == !!res->session_restarted);
		FZ_CHECK(json_is_true(json_object_get(ses, "ended")) == !!res->session_ended);
	} else {
		FZ_CHECK(json_is_null(ses));
	}
	FZ_CHECK(json_object_size(o) == 24);
	json_decref(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = {data, size};
	struct corral_result *res = result_new();
	if (!res)
		abort();
	uint8_t flags = fz_u8(&f);

	size_t argc = fz_u8(&f) % 5;
	res->argv = calloc(argc + 1, sizeof(char *));
	if (!res->argv)
		abort();
	for (size_t i = 0; i < argc; i++)
		res->argv[i] = fz_bytes(&f, 64, NULL);
	if (flags & 1)
		res->command = fz_bytes(&f, 200, NULL);

	res->exited = !!(flags & 2);
	res->exit_code = res->exited ? (int)(int32_t)fz_u64(&f, 4) : -1;
	res->signal = res->exited ? 0 : fz_u8(&f);
	res->timed_out = !!(flags & 4);
	res->cancelled = !res->timed_out && (fz_u8(&f) & 1);
	res->limit = (enum corral_limit_hit)(fz_u8(&f) % 7);
	res->duration_ms = fz_u64(&f, 6);
	res->stdout_buf = fz_stream(&f, &res->stdout_len);
	res->stderr_buf = fz_stream(&f, &res->stderr_len);
	res->stdout_bytes = res->stdout_len + fz_u64(&f, 4);
	res->stderr_bytes = res->stderr_len + fz_u64(&f, 4);
	res->stdout_truncated = !!(flags & 8);
	res->stderr_truncated = !!(flags & 16);
	res->user_ms = fz_u64(&f, 5);
	res->sys_ms = fz_u64(&f, 5);
	res->max_rss_kb = fz_u64(&f, 5);
	res->mode = modes[fz_u8(&f) % N(modes)];

	size_t n_layers = fz_u8(&f) % 14;
	for (size_t i = 0; i < n_layers; i++) {
		const char *name = layer_names[fz_u8(&f) % N(layer_names)];
		char *detail = fz_bytes(&f, 48, NULL);
		for (char *p = detail; *p; p++) /* details are the library's own ASCII */
			*p = (char)(' ' + (unsigned char)*p % 95);
		FZ_CHECK(result_add_layer(res, name, fz_u8(&f) & 1, detail) == 0);
		free(detail);
	}

	if (flags & 32) {
		res->error.code = -1 - (int)(fz_u8(&f) % 10);
		res->error.sys_errno = fz_u8(&f);
		snprintf(res->error.step, sizeof(res->error.step), "%s",
		         steps[fz_u8(&f) % N(steps)]);
		char *msg = fz_bytes(&f, sizeof(res->error.message) - 1, NULL);
		memcpy(res->error.message, msg, strlen(msg) + 1);
		free(msg);
	}

	size_t n_viol = fz_u8(&f) % 20;
	for (size_t i = 0; i < n_viol; i++) {
		const char *kind = kinds[fz_u8(&f) % N(kinds)];
		char *obj = fz_bytes(&f, 80, NULL), *rule = fz_bytes(&f, 40, NULL);
		char *hint = fz_bytes(&f, 120, NULL);
		uint8_t b = fz_u8(&f);
		FZ_CHECK(result_add_violation(res, kind, b & 2 ? obj : NULL, b & 4 ? rule : NULL,
		                              hint, b & 1) == 0);
		free(obj);
		free(rule);
		free(hint);
	}

	res->redactions = fz_u64(&f, 4);
	for (unsigned i = 0; i < 16; i++)
		res->redactions_by_kind[i] = (flags & 64) ? fz_u8(&f) : 0;
	res->redaction_mode = red_modes[fz_u8(&f) % N(red_modes)];
	if (flags & 128) { /* a session command: the id is the library's own UUID */
		char sid[37];
		result_uuid(sid);
		res->session_id = strdup(sid);
		uint8_t sb = fz_u8(&f);
		res->session_restarted = sb & 1;
		res->session_ended = !!(sb & 2);
	}
	/* a run in a sandbox built ahead (corral mcp --prebuild): read last, so that the
	 * corpus keeps its meaning for everything before */
	uint8_t pb = fz_u8(&f);
	res->prebuilt = pb & 1;
	res->prebuilt_ms = res->prebuilt ? fz_u64(&f, 5) : 0;

	char *out = NULL;
	struct corral_error err = {0};
	FZ_CHECK(corral_result_to_json(res, &out, &err) == 0 && out);
	check(res, argc, out);
	free(out);
	corral_result_free(res);
	return 0;
}
