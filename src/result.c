/* The result of a run and its JSON encoding (schema: docs/result.schema.json). */
#include "internal.h"
#include "redact.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

struct corral_result *result_new(void)
{
	struct corral_result *res = calloc(1, sizeof(*res));
	if (!res)
		return NULL;
	result_uuid(res->id);
	res->exit_code = -1;
	return res;
}

void result_uuid(char out[37])
{
	unsigned char b[16];
	if (getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b)) {
		/* Only ids depend on this; uniqueness within a process is what matters. */
		static uint64_t counter;
		uint64_t t = (uint64_t)getpid() << 32 ^ ++counter;
		memcpy(b, &t, 8);
		memcpy(b + 8, &counter, 8);
	}
	b[6] = (b[6] & 0x0f) | 0x40; /* version 4 */
	b[8] = (b[8] & 0x3f) | 0x80; /* variant 1 */
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
	         b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
	         b[13], b[14], b[15]);
}

int result_add_layer(struct corral_result *res, const char *name, int applied, const char *detail)
{
	for (size_t i = 0; i < res->n_layers; i++) {
		if (!strcmp(res->layers[i].name, name)) { /* update in place */
			char *d = strdup(detail ? detail : "");
			if (!d)
				return CORRAL_ENOMEM;
			free((char *)res->layers[i].detail);
			res->layers[i].detail = d;
			res->layers[i].applied = applied;
			return 0;
		}
	}
	struct corral_layer *grown = realloc(res->layers, (res->n_layers + 1) * sizeof(*grown));
	if (!grown)
		return CORRAL_ENOMEM;
	res->layers = grown;
	struct corral_layer *l = &res->layers[res->n_layers];
	l->name = strdup(name);
	l->detail = strdup(detail ? detail : "");
	l->applied = applied;
	if (!l->name || !l->detail) {
		free((char *)l->name);
		free((char *)l->detail);
		return CORRAL_ENOMEM;
	}
	res->n_layers++;
	return 0;
}

void corral_result_free(struct corral_result *res)
{
	if (!res)
		return;
	if (res->argv) {
		for (char **p = res->argv; *p; p++)
			free(*p);
		free(res->argv);
	}
	free(res->command);
	free(res->session_id);
	free(res->stdout_buf);
	free(res->stderr_buf);
	for (size_t i = 0; i < res->n_layers; i++) {
		free((char *)res->layers[i].name);
		free((char *)res->layers[i].detail);
	}
	free(res->layers);
	result_free_violations(res);
	free(res);
}

const char *corral_limit_hit_name(enum corral_limit_hit hit)
{
	switch (hit) {
	case CORRAL_HIT_NONE:
		return NULL;
	case CORRAL_HIT_TIMEOUT:
		return "timeout";
	case CORRAL_HIT_CPU:
		return "cpu";
	case CORRAL_HIT_MEMORY:
		return "memory";
	case CORRAL_HIT_FSIZE:
		return "fsize";
	case CORRAL_HIT_PIDS:
		return "pids";
	case CORRAL_HIT_OUTPUT:
		return "output";
	}
	return NULL;
}

size_t utf8_sanitize(const char *s, size_t n, bool cut_tail, char *out)
{
	size_t o = 0, run = 0; /* [run, i) is valid and not copied yet */
	size_t i = 0;
	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x01 && c < 0x80) { /* printable ASCII and controls: the common case */
			i++;
			continue;
		}
		size_t len = 0;
		uint32_t cp = 0;
		if ((c & 0xe0) == 0xc0) {
			len = 2;
			cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			len = 3;
			cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			len = 4;
			cp = c & 0x07;
		}
		if (cut_tail && len > 0 && i + len > n) {
			/* cut at the end: dropped if what is there is a valid beginning */
			bool prefix = true;
			for (size_t k = i + 1; k < n; k++)
				if (((unsigned char)s[k] & 0xc0) != 0x80)
					prefix = false;
			if (prefix)
				break;
		}
		/* NUL (len 0): jansson strings may hold it, but keep the output printable */
		bool ok = len > 0 && i + len <= n;
		for (size_t k = 1; ok && k < len; k++) {
			unsigned char cc = (unsigned char)s[i + k];
			if ((cc & 0xc0) != 0x80)
				ok = false;
			cp = (cp << 6) | (cc & 0x3f);
		}
		if (ok && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
		           (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
		           (cp >= 0xd800 && cp <= 0xdfff)))
			ok = false;
		if (ok) {
			i += len;
			continue;
		}
		if (i > run)
			memcpy(out + o, s + run, i - run);
		o += i - run;
		out[o++] = '\xef';
		out[o++] = '\xbf';
		out[o++] = '\xbd';
		run = ++i;
	}
	if (i > run) /* (s may be NULL when n is 0) */
		memcpy(out + o, s + run, i - run);
	o += i - run;
	out[o] = '\0';
	return o;
}

/* Output is bytes; JSON strings are UTF-8. Invalid sequences become U+FFFD so that the
 * document is always valid, and the byte counts stay exact in *_bytes. */
json_t *json_bytes(const char *s, size_t n)
{
	char *out = malloc(n * 3 + 1);
	if (!out)
		return NULL;
	size_t o = utf8_sanitize(s, n, false, out);
	/* valid UTF-8 without NUL by construction: jansson need not check it again */
	json_t *j = json_stringn_nocheck(out, o);
	free(out);
	return j;
}

static json_t *violations_json(const struct corral_result *res)
{
	json_t *viol = json_array();
	for (size_t i = 0; i < res->n_violations; i++) {
		const struct corral_violation *v = &res->violations[i];
		json_t *j = json_object();
		json_object_set_new(j, "kind", json_string(v->kind));
		json_object_set_new(j, "object", json_bytes(v->object, strlen(v->object)));
		json_object_set_new(j, "rule", json_bytes(v->rule, strlen(v->rule)));
		json_object_set_new(j, "hint", json_bytes(v->hint, strlen(v->hint)));
		json_object_set_new(j, "inferred", json_boolean(v->inferred));
		json_array_append_new(viol, j);
	}
	return viol;
}

char *result_violations_json(const struct corral_result *res)
{
	json_t *v = violations_json(res);
	char *s = json_dumps(v, JSON_COMPACT);
	json_decref(v);
	return s;
}

json_t *result_json(const struct corral_result *res, bool with_output)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	json_object_set_new(o, "id", json_string(res->id));
	json_t *argv = json_array();
	for (char **p = res->argv; p && *p; p++)
		json_array_append_new(argv, json_bytes(*p, strlen(*p)));
	json_object_set_new(o, "argv", argv);
	json_object_set_new(o, "command",
	                    res->command ? json_bytes(res->command, strlen(res->command))
	                                 : json_null());
	json_object_set_new(o, "exit_code",
	                    res->exited ? json_integer(res->exit_code) : json_null());
	json_object_set_new(o, "signal", res->signal ? json_integer(res->signal) : json_null());
	json_object_set_new(
	    o, "signal_name",
	    res->signal ? json_string(sigabbrev_np(res->signal) ? sigabbrev_np(res->signal) : "?")
	                : json_null());
	json_object_set_new(o, "timed_out", json_boolean(res->timed_out));
	json_object_set_new(o, "cancelled", json_boolean(res->cancelled));
	const char *lim = corral_limit_hit_name(res->limit);
	json_object_set_new(o, "limit", lim ? json_string(lim) : json_null());
	json_object_set_new(o, "duration_ms", json_integer((json_int_t)res->duration_ms));
	json_object_set_new(o, "prebuilt_ms",
	                    res->prebuilt ? json_integer((json_int_t)res->prebuilt_ms)
	                                  : json_null());
	if (with_output) {
		json_object_set_new(
		    o, "stdout",
		    json_bytes(res->stdout_buf ? res->stdout_buf : "", res->stdout_len));
		json_object_set_new(
		    o, "stderr",
		    json_bytes(res->stderr_buf ? res->stderr_buf : "", res->stderr_len));
	}
	json_object_set_new(o, "stdout_bytes", json_integer((json_int_t)res->stdout_bytes));
	json_object_set_new(o, "stderr_bytes", json_integer((json_int_t)res->stderr_bytes));
	json_object_set_new(o, "stdout_truncated", json_boolean(res->stdout_truncated));
	json_object_set_new(o, "stderr_truncated", json_boolean(res->stderr_truncated));
	json_t *usage = json_object();
	json_object_set_new(usage, "user_ms", json_integer((json_int_t)res->user_ms));
	json_object_set_new(usage, "sys_ms", json_integer((json_int_t)res->sys_ms));
	json_object_set_new(usage, "max_rss_kb", json_integer((json_int_t)res->max_rss_kb));
	json_object_set_new(o, "usage", usage);
	json_object_set_new(o, "mode", json_string(res->mode ? res->mode : "required"));
	json_t *iso = json_object();
	for (size_t i = 0; i < res->n_layers; i++) {
		json_t *l = json_object();
		json_object_set_new(l, "applied", json_boolean(res->layers[i].applied));
		json_object_set_new(l, "detail", json_string(res->layers[i].detail));
		json_object_set_new(iso, res->layers[i].name, l);
	}
	json_object_set_new(o, "isolation", iso);
	json_object_set_new(o, "violations", violations_json(res));
	json_t *red = json_object();
	json_object_set_new(red, "mode",
	                    json_string(res->redaction_mode ? res->redaction_mode : "redact"));
	json_object_set_new(red, "count", json_integer((json_int_t)res->redactions));
	json_t *kinds = json_object();
	for (unsigned i = 0; i < 16; i++)
		if (res->redactions_by_kind[i] && corral_redaction_kind_name(i))
			json_object_set_new(kinds, corral_redaction_kind_name(i),
			                    json_integer((json_int_t)res->redactions_by_kind[i]));
	json_object_set_new(red, "kinds", kinds);
	json_object_set_new(o, "redactions", red);
	if (res->session_id)
		json_object_set_new(o, "session",
		                    json_pack("{s:s, s:b, s:b}", "id", res->session_id, "restarted",
		                              res->session_restarted, "ended", res->session_ended));
	else
		json_object_set_new(o, "session", json_null());
	if (res->error.code) {
		json_t *e = json_object();
		json_object_set_new(e, "code", json_integer(res->error.code));
		json_object_set_new(e, "name", json_string(corral_strerror(res->error.code)));
		json_object_set_new(e, "errno", json_integer(res->error.sys_errno));
		json_object_set_new(e, "step", json_string(res->error.step));
		json_object_set_new(e, "message",
		                    json_bytes(res->error.message, strlen(res->error.message)));
		json_object_set_new(o, "error", e);
	} else {
		json_object_set_new(o, "error", json_null());
	}
	return o;
}

int corral_result_to_json(const struct corral_result *res, char **out, struct corral_error *err)
{
	json_t *o = result_json(res, true);
	if (!o)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "result",
		                        "result: out of memory");
	*out = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!*out)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "result",
		                        "result: out of memory");
	return 0;
}

int fd_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0) {
			errno = EIO;
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -1;
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			return -1;
	}
	return 0;
}

struct json_out {
	int fd, err;
	size_t n;
	char buf[65536];
};

static int json_out_flush(struct json_out *o)
{
	if (o->n && fd_write_all(o->fd, o->buf, o->n) < 0) {
		o->err = errno;
		return -1;
	}
	o->n = 0;
	return 0;
}

static int json_out_cb(const char *b, size_t size, void *data)
{
	struct json_out *o = data;
	while (size) {
		if (o->n == sizeof(o->buf) && json_out_flush(o) < 0)
			return -1;
		size_t k = sizeof(o->buf) - o->n < size ? sizeof(o->buf) - o->n : size;
		memcpy(o->buf + o->n, b, k);
		o->n += k;
		b += k;
		size -= k;
	}
	return 0;
}

int result_write_json(const struct corral_result *res, int fd)
{
	json_t *o = result_json(res, true);
	if (!o) {
		errno = ENOMEM;
		return -1;
	}
	/* encoded into the descriptor as it goes: no whole-document string, which for a capped
	 * 1 MiB of output is up to 3 MiB grown by doubling (copies and page faults) */
	struct json_out *out = malloc(sizeof(*out));
	if (!out) {
		json_decref(o);
		errno = ENOMEM;
		return -1;
	}
	out->fd = fd;
	out->err = 0;
	out->n = 0;
	int rc = json_dump_callback(o, json_out_cb, out, JSON_COMPACT);
	json_decref(o);
	if (rc == 0)
		rc = json_out_cb("\n", 1, out) < 0 || json_out_flush(out) < 0 ? -1 : 0;
	int e = out->err ? out->err : ENOMEM;
	free(out);
	if (rc < 0)
		errno = e;
	return rc;
}

const char *corral_redaction_kind_name(unsigned i)
{
	return i < RK__COUNT ? redact_kind_name((enum redact_kind)i) : NULL;
}
