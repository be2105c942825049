/* libFuzzer target for the MCP server's JSON-RPC layer (src/mcp/jsonrpc.c): framing,
 * envelope validation, dispatch and the line builders, as the server drives them.
 *
 * Input: byte 0 picks the framer's size cap (bits 0-1: the default, 24, 200 or 1500 bytes),
 * the largest read (bits 2-5: up to 2^n bytes per read), whether the session starts
 * initialized (bit 6); byte 1 seeds the read sizes; the rest is the byte stream a client
 * writes to the server's stdin. With bit 7 set and byte 1 = 0xff the stream starts with
 * 70000 spaces: a first line longer than the framer's initial buffer and than the size it
 * shrinks back from (rare, because it is slow).
 *
 * Invariants:
 * - the framer, fed in those reads, gives exactly the lines (and over-long reports with their
 *   lengths) of a one-pass reference splitter;
 * - jr_parse classifies consistently (requests have a method and a valid id, invalid messages
 *   an error code and a message, ...);
 * - jr_dispatch against a small method table (handlers that answer, fail with and without a
 *   result already set, defer, forget to answer, and notifications) answers every request
 *   exactly once and nothing else; every reply is one line of strict UTF-8 JSON with no
 *   embedded newline or NUL, "jsonrpc":"2.0", the request's id echoed exactly (null when
 *   there is none), and either the result the handler built or the error code and message
 *   (as mcp_utf8_clean makes it) the dispatcher or handler chose;
 * - mcp_utf8_clean always gives strict UTF-8 without NUL, leaves valid text alone and is
 *   idempotent; mcp_negotiate_version answers a supported version;
 * - no leak (LeakSanitizer) of messages, results, replies or the framer.
 *
 *   tests/fuzz/run.sh builds it; by hand (after building build-fuzz/libcorral.a and
 *   build-fuzz/src/mcp/jsonrpc.o, see fuzz_parse.c):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc \
 *     tests/fuzz/fuzz_jsonrpc.c build-fuzz/src/mcp/jsonrpc.o build-fuzz/libcorral.a \
 *     $(pkg-config --libs jansson) -o build-fuzz/fuzz_jsonrpc
 *   build-fuzz/fuzz_jsonrpc -dict=tests/fuzz/jsonrpc.dict tests/fuzz/corpus/jsonrpc
 */
#include "mcp/mcp.h"

#include "fuzz_util.h"

#include <stdio.h>

/* ---- frames ----------------------------------------------------------------------------- */

struct frame {
	enum jr_frame_kind kind;
	char *line; /* NULL for TOOLONG */
	size_t len;
};

struct frames {
	struct frame *v;
	size_t n, cap;
};

static void frames_add(struct frames *f, enum jr_frame_kind kind, const char *line, size_t len)
{
	if (f->n == f->cap) {
		f->cap = f->cap ? 2 * f->cap : 16;
		f->v = realloc(f->v, f->cap * sizeof(*f->v));
		if (!f->v)
			abort();
	}
	struct frame *fr = &f->v[f->n++];
	fr->kind = kind;
	fr->len = len;
	fr->line = NULL;
	if (kind == JR_FRAME_LINE) {
		FZ_CHECK(line && len);
		fr->line = malloc(len);
		if (!fr->line)
			abort();
		memcpy(fr->line, line, len);
	} else {
		FZ_CHECK(!line);
	}
}

static void frames_free(struct frames *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->v[i].line);
	free(f->v);
}

static void on_frame(void *ud, enum jr_frame_kind kind, const char *line, size_t len)
{
	frames_add(ud, kind, line, len);
}

/* The framing contract of mcp.h, read in one pass over the whole stream. */
static void reference_frames(const char *s, size_t n, size_t max, struct frames *out)
{
	size_t start = 0;
	while (start < n) {
		const char *nl = memchr(s + start, '\n', n - start);
		size_t len = nl ? (size_t)(nl - (s + start)) : n - start;
		const char *line = s + start;
		/* the limit counts the message, not a "\r\n" terminator's "\r" */
		size_t l = len && line[len - 1] == '\r' ? len - 1 : len;
		if (l > max) {
			frames_add(out, JR_FRAME_TOOLONG, NULL, l);
		} else {
			bool blank = true;
			for (size_t i = 0; i < l; i++)
				if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
					blank = false;
			if (!blank)
				frames_add(out, JR_FRAME_LINE, line, l);
		}
		start += len + 1;
	}
}

/* ---- handlers --------------------------------------------------------------------------- */

struct ctx {
	bool initialized;
	const char *raw; /* the line being handled */
	size_t raw_len;
	/* what the last handler did */
	int called;
	int code;
	char message[512];
	json_t *result; /* a copy of the result it built */
	bool deferred;
};

static void note(struct ctx *c, const struct jr_reply *r)
{
	c->called++;
	c->code = r->code;
	memcpy(c->message, r->message, sizeof(c->message));
	json_decref(c->result);
	c->result = r->result ? json_deep_copy(r->result) : NULL;
	c->deferred = r->deferred;
}

static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

static void h_initialize(void *ud, const struct jr_msg *m, struct jr_reply *r)
{
	struct ctx *c = ud;
	if (!json_is_object(m->params)) {
		jr_fail(r, JR_INVALID_PARAMS, "initialize: params must be an object, not %s",
		        jr_type_name(m->params));
	} else {
		json_t *pv = json_object_get(m->params, "protocolVersion");
		if (pv && !json_is_string(pv)) {
			jr_fail(r, JR_INVALID_PARAMS,
			        "initialize: protocolVersion must be a string, not %s",
			        jr_type_name(pv));
		} else {
			const char *want = json_string_value(pv);
			const char *v = mcp_negotiate_version(want);
			bool known = false, asked = false;
			for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
				known |= !strcmp(v, versions[i]);
				asked |= want && !strcmp(want, versions[i]);
			}
			FZ_CHECK(known);
			FZ_CHECK(asked ? !strcmp(v, want) : !strcmp(v, MCP_LATEST_VERSION));
			r->result = json_pack("{s:s, s:{s:{}}, s:{s:s, s:s}}", "protocolVersion", v,
			                      "capabilities", "tools", "serverInfo", "name",
			                      "corral", "version", "0");
		}
	}
	note(c, r);
}

static void h_ping(void *ud, const struct jr_msg *m, struct jr_reply *r)
{
	(void)m;
	r->result = json_object();
	note(ud, r);
}

/* Echo the params back: the reply must carry any JSON the client sent, NULs included. */
static void h_echo(void *ud, const struct jr_msg *m, struct jr_reply *r)
{
	r->result = json_pack("{s:O?, s:s}", "params", m->params, "method", m->method);
	note(ud, r);
}

/* Fail with a message quoting the raw line: bytes that are not UTF-8, control characters. A
 * result set before failing must be released by jr_fail. */
static void h_fail(void *ud, const struct jr_msg *m, struct jr_reply *r)
{
	struct ctx *c = ud;
	r->result = json_string("to be dropped");
	json_t *code = json_object_get(m->params, "code");
	int k = json_is_integer(code) ? (int)json_integer_value(code) : JR_INTERNAL_ERROR;
	if (k == 0)
		k = JR_INTERNAL_ERROR;
	jr_fail(r, k, "fail: %.*s", (int)(c->raw_len < 600 ? c->raw_len : 600), c->raw);
	FZ_CHECK(!r->result);
	note(c, r);
}

static void h_defer(void *ud, const struct jr_msg *m, struct jr_reply *r)
{
	(void)m;
	r->deferred = true;
	r->result = json_object(); /* dropped by the dispatcher */
	note(ud, r);
}

/* Answers nothing: the dispatcher must report an internal error. */
static void h_silent(void *ud, const struct jr_msg *m, struct jr_reply *r)
{
	(void)m;
	note(ud, r);
}

static void h_tools_call(void *ud, const struct jr_msg *m, struct jr_reply *r)
{
	json_t *name = json_object_get(m->params, "name");
	json_t *args = json_object_get(m->params, "arguments");
	json_t *cmd = json_object_get(args, "command");
	if (!json_is_string(name))
		jr_fail(r, JR_INVALID_PARAMS, "tools/call: name must be a string, not %s",
		        jr_type_name(name));
	else if (args && !json_is_object(args))
		jr_fail(r, JR_INVALID_PARAMS, "tools/call: arguments must be an object, not %s",
		        jr_type_name(args));
	else if (strcmp(json_string_value(name), "run_command"))
		jr_fail(r, JR_INVALID_PARAMS, "tools/call: unknown tool '%.200s'; use run_command",
		        json_string_value(name));
	else if (!json_is_string(cmd))
		jr_fail(r, JR_INVALID_PARAMS, "run_command: command must be a string, not %s",
		        jr_type_name(cmd));
	else if (strlen(json_string_value(cmd)) != json_string_length(cmd))
		jr_fail(r, JR_INVALID_PARAMS, "run_command: command contains a NUL byte");
	else {
		/* the text of a result: command output is bytes, cleaned before it is sent */
		const char *t = json_string_value(cmd);
		char *clean =
		    mcp_utf8_clean(t, strlen(t) / 2); /* cut anywhere, even mid-character */
		FZ_CHECK(clean && fz_utf8_valid(clean, strlen(clean), false));
		r->result = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
		                      clean, "isError", 0);
		free(clean);
	}
	note(ud, r);
}

static void n_initialized(void *ud, const struct jr_msg *m, struct jr_reply *r)
{
	(void)m;
	struct ctx *c = ud;
	c->initialized = true;
	note(c, r);
}

static void n_cancelled(void *ud, const struct jr_msg *m, struct jr_reply *r)
{
	(void)m;
	r->result = json_string("ignored"); /* a notification's result is dropped */
	note(ud, r);
}

static const struct jr_method methods[] = {
    {"initialize", h_initialize, JR_M_BEFORE_INIT},
    {"ping", h_ping, JR_M_BEFORE_INIT},
    {"notifications/initialized", n_initialized, JR_M_NOTIFICATION | JR_M_BEFORE_INIT},
    {"notifications/cancelled", n_cancelled, JR_M_NOTIFICATION},
    {"tools/call", h_tools_call, 0},
    {"tools/list", h_ping, 0},
    {"echo", h_echo, 0},
    {"fail", h_fail, 0},
    {"defer", h_defer, 0},
    {"silent", h_silent, 0},
};
#define N_METHODS (sizeof(methods) / sizeof(methods[0]))

static const struct jr_method *lookup(const char *name, bool notification)
{
	for (size_t i = 0; i < N_METHODS; i++)
		if (!strcmp(methods[i].name, name) &&
		    !!(methods[i].flags & JR_M_NOTIFICATION) == notification)
			return &methods[i];
	return NULL;
}

/* ---- replies ---------------------------------------------------------------------------- */

static bool is_v2(const json_t *v)
{
	return json_is_string(v) && json_string_length(v) == 3 &&
	       !strcmp(json_string_value(v), "2.0");
}

/* A complete line: one JSON object, strict UTF-8, no NUL, no newline but the last byte.
 * Returns the parsed object (new reference). */
static json_t *check_line(const char *line)
{
	FZ_CHECK(line);
	size_t len = strlen(line);
	FZ_CHECK(len >= 3 && line[len - 1] == '\n');
	FZ_CHECK(!memchr(line, '\n', len - 1) && !memchr(line, '\r', len - 1));
	FZ_CHECK(fz_utf8_valid(line, len - 1, false));
	json_error_t e;
	json_t *o = json_loadb(line, len - 1, JSON_ALLOW_NUL, &e);
	FZ_CHECK(json_is_object(o));
	FZ_CHECK(is_v2(json_object_get(o, "jsonrpc")));
	return o;
}

/* A reply: the id echoed, and exactly one of result and error. Returns the error code, or 0
 * for a result (then *result is borrowed from the returned object). */
static int check_reply(json_t *o, const json_t *id, json_t **result, const char **message)
{
	json_t *rid = json_object_get(o, "id");
	FZ_CHECK(rid);
	if (id)
		FZ_CHECK(json_equal(rid, (json_t *)id) && json_typeof(rid) == json_typeof(id));
	else
		FZ_CHECK(json_is_null(rid));
	json_t *res = json_object_get(o, "result"), *err = json_object_get(o, "error");
	FZ_CHECK(!res != !err && json_object_size(o) == 3);
	*result = res;
	if (res)
		return 0;
	json_t *code = json_object_get(err, "code"), *msg = json_object_get(err, "message");
	FZ_CHECK(json_is_integer(code) && json_integer_value(code) != 0);
	FZ_CHECK(json_is_string(msg) && json_string_length(msg) > 0 &&
	         strlen(json_string_value(msg)) == json_string_length(msg));
	FZ_CHECK(json_object_size(err) == 2);
	*message = json_string_value(msg);
	return (int)json_integer_value(code);
}

static void check_utf8_clean(const char *s, size_t n)
{
	char *c = mcp_utf8_clean(s, n);
	FZ_CHECK(c);
	size_t cl = strlen(c);
	FZ_CHECK(cl <= 3 * n && fz_utf8_valid(c, cl, false));
	if (fz_utf8_valid(s, n, false))
		FZ_CHECK(cl == n && !memcmp(c, s, n));
	char *again = mcp_utf8_clean(c, cl);
	FZ_CHECK(again && !strcmp(again, c));
	free(again);
	free(c);
}

/* ---- one message, as the server handles it ------------------------------------------------ */

static void check_parse(const struct jr_msg *m, const char *line, size_t len)
{
	FZ_CHECK(m->kind == JR_REQUEST || m->kind == JR_NOTIFICATION || m->kind == JR_RESPONSE ||
	         m->kind == JR_INVALID);
	json_error_t e;
	json_t *mine = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
	if (!mine && strstr(e.text, "too big")) {
		/* valid JSON with an integer beyond 64 bits: an invalid request (or an ignored
		 * response), unless it is malformed further on */
		json_t *as_real = json_loadb(line, len,
		                             JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL,
		                             &e);
		if (!as_real && strstr(e.text, "real number overflow"))
			FZ_CHECK(m->kind == JR_RESPONSE ||
			         (m->kind == JR_INVALID &&
			          (m->err_code == JR_INVALID_REQUEST ||
			           (m->err_code == JR_PARSE_ERROR && !m->root))));
		else if (!as_real)
			FZ_CHECK(m->kind == JR_INVALID && m->err_code == JR_PARSE_ERROR && !m->root);
		else
			FZ_CHECK(m->kind == JR_RESPONSE ||
			         (m->kind == JR_INVALID && m->err_code == JR_INVALID_REQUEST));
		json_decref(as_real);
	} else if (!mine && strstr(e.text, "real number overflow")) {
		/* a real beyond a double: valid JSON (an invalid request, or an ignored response)
		 * unless malformed further on, which the parse of the zeroed copy tells */
		FZ_CHECK(m->kind == JR_RESPONSE ||
		         (m->kind == JR_INVALID && (m->err_code == JR_INVALID_REQUEST ||
		                                    (m->err_code == JR_PARSE_ERROR && !m->root))));
	} else if (!mine) {
		FZ_CHECK(m->kind == JR_INVALID && m->err_code == JR_PARSE_ERROR && !m->root);
	}
	json_decref(mine);
	switch (m->kind) {
	case JR_REQUEST:
		FZ_CHECK(jr_id_valid(m->id));
		/* fall through */
	case JR_NOTIFICATION:
		FZ_CHECK(m->kind == JR_REQUEST || !m->id);
		FZ_CHECK(json_is_object(m->root) && m->method &&
		         json_string_value(json_object_get(m->root, "method")) == m->method);
		FZ_CHECK(!m->params || json_is_object(m->params) || json_is_array(m->params));
		FZ_CHECK(is_v2(json_object_get(m->root, "jsonrpc")));
		break;
	case JR_RESPONSE:
		FZ_CHECK(json_is_object(m->root) && !json_object_get(m->root, "method"));
		FZ_CHECK(!m->id || jr_id_valid(m->id));
		break;
	case JR_INVALID:
		FZ_CHECK(m->err_code == JR_PARSE_ERROR || m->err_code == JR_INVALID_REQUEST);
		FZ_CHECK(m->err_msg[0] && !m->method && !m->params);
		FZ_CHECK(!m->id || jr_id_valid(m->id));
		break;
	}
}

static void handle_line(struct ctx *c, const char *line, size_t len)
{
	if (len <= 8192) /* the padded first line would dominate the run time */
		check_utf8_clean(line, len);

	struct jr_msg m;
	jr_parse(line, len, &m);
	check_parse(&m, line, len);

	c->raw = line;
	c->raw_len = len;
	c->called = 0;
	bool initialized = c->initialized;
	char *out = jr_dispatch(methods, N_METHODS, c, initialized, &m);

	/* what the dispatcher should have done */
	const struct jr_method *h = NULL;
	int want_code = 0;
	const char *want_msg = NULL;
	char *want_clean = NULL;
	switch (m.kind) {
	case JR_INVALID:
		want_code = m.err_code;
		want_msg = m.err_msg;
		break;
	case JR_RESPONSE:
		break;
	case JR_NOTIFICATION:
		h = lookup(m.method, true);
		FZ_CHECK(c->called ==
		         (h && (initialized || (h->flags & JR_M_BEFORE_INIT)) ? 1 : 0));
		break;
	case JR_REQUEST:
		h = lookup(m.method, false);
		if (!h)
			want_code = JR_METHOD_NOT_FOUND;
		else if (!initialized && !(h->flags & JR_M_BEFORE_INIT))
			want_code = JR_NOT_INITIALIZED;
		FZ_CHECK(c->called == (want_code ? 0 : 1));
		if (!want_code) {
			if (c->code) {
				want_code = c->code;
				want_msg = c->message;
			} else if (!c->result && !c->deferred) {
				want_code = JR_INTERNAL_ERROR;
			}
		}
		break;
	}
	bool want_reply =
	    m.kind == JR_INVALID || (m.kind == JR_REQUEST && !(c->called && c->deferred));
	FZ_CHECK(!out == !want_reply);
	if (out) {
		json_t *o = check_line(out);
		json_t *result = NULL;
		const char *msg = NULL;
		int code = check_reply(o, m.id, &result, &msg);
		FZ_CHECK(code == want_code);
		if (want_msg) {
			want_clean = mcp_utf8_clean(want_msg, strlen(want_msg));
			FZ_CHECK(want_clean && !strcmp(msg, want_clean));
		}
		if (!code)
			FZ_CHECK(c->result && json_equal(result, c->result));
		if (code == JR_METHOD_NOT_FOUND)
			FZ_CHECK(!strncmp(msg, "method not found: '", 19));
		json_decref(o);
	}

	/* a notification the server might send about this message */
	if (m.kind == JR_NOTIFICATION) {
		char *n = jr_notification_line(
		    "notifications/message",
		    json_pack("{s:s, s:O?}", "method", m.method, "params", m.params));
		json_t *o = check_line(n);
		FZ_CHECK(!strcmp(json_string_value(json_object_get(o, "method")),
		                 "notifications/message"));
		json_t *p = json_object_get(o, "params");
		FZ_CHECK(!strcmp(json_string_value(json_object_get(p, "method")), m.method));
		if (m.params)
			FZ_CHECK(json_equal(json_object_get(p, "params"), m.params));
		json_decref(o);
		free(n);
	}

	free(want_clean);
	free(out);
	json_decref(c->result);
	c->result = NULL;
	jr_msg_free(&m);
}

/* ---- entry ------------------------------------------------------------------------------ */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	static const size_t caps[] = {0, 24, 200, 1500};
	size_t max = caps[data[0] & 3];
	unsigned shift = (data[0] >> 2) & 15;
	uint32_t seed = data[1] * 2654435761u + 1;
	bool start_initialized = data[0] & 0x40;
	size_t pad = (data[0] & 0x80) && data[1] == 0xff ? 70000 : 0; /* rare: it is slow */
	size_t n = pad + size - 2;
	char *in = malloc(n);
	if (!in)
		abort();
	memset(in, ' ', pad);
	memcpy(in + pad, data + 2, size - 2);

	/* the framer, fed in reads of pseudo-random sizes */
	struct frames got = {0}, want = {0};
	struct jr_framer f;
	jr_framer_init(&f, max);
	for (size_t off = 0; off < n;) {
		seed ^= seed << 13;
		seed ^= seed >> 17;
		seed ^= seed << 5;
		size_t chunk = 1 + seed % (1u << shift);
		if (chunk > n - off)
			chunk = n - off;
		FZ_CHECK(jr_framer_feed(&f, in + off, chunk, on_frame, &got) == 0);
		off += chunk;
	}
	jr_framer_eof(&f, on_frame, &got);
	FZ_CHECK(!f.buf && !f.len);

	reference_frames(in, n, max ? max : MCP_DEFAULT_MAX_MESSAGE, &want);
	FZ_CHECK(got.n == want.n);
	for (size_t i = 0; i < got.n; i++) {
		FZ_CHECK(got.v[i].kind == want.v[i].kind && got.v[i].len == want.v[i].len);
		if (got.v[i].kind == JR_FRAME_LINE)
			FZ_CHECK(!memcmp(got.v[i].line, want.v[i].line, got.v[i].len));
	}

	/* each message, as the server handles it */
	struct ctx c = {.initialized = start_initialized};
	for (size_t i = 0; i < got.n; i++) {
		if (got.v[i].kind == JR_FRAME_TOOLONG) {
			char msg[300];
			snprintf(msg, sizeof(msg),
			         "invalid request: message too large: %zu bytes; the limit is %zu",
			         got.v[i].len, max);
			char *line = jr_error_line(NULL, JR_INVALID_REQUEST, msg);
			json_t *o = check_line(line), *result;
			const char *m;
			FZ_CHECK(check_reply(o, NULL, &result, &m) == JR_INVALID_REQUEST);
			json_decref(o);
			free(line);
			continue;
		}
		handle_line(&c, got.v[i].line, got.v[i].len);
	}
	frames_free(&got);
	frames_free(&want);
	free(in);
	return 0;
}
