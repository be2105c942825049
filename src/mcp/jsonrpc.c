/* JSON-RPC 2.0 for the MCP stdio transport: framing, envelope validation, dispatch and
 * message builders. Pure: no I/O, no globals, so it can be unit-tested and fuzzed. */
#include "mcp/mcp.h"
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- framing ---------------------------------------------------------------------------- */

void jr_framer_init(struct jr_framer *f, size_t max)
{
	memset(f, 0, sizeof(*f));
	f->max = max ? max : MCP_DEFAULT_MAX_MESSAGE;
}

void jr_framer_free(struct jr_framer *f)
{
	free(f->buf);
	f->buf = NULL;
	f->len = f->cap = 0;
}

static void emit_line(const char *line, size_t len, jr_frame_cb cb, void *ud)
{
	if (len && line[len - 1] == '\r')
		len--;
	/* Blank lines (keep-alives, a stray "\r\n") carry no message. */
	size_t i = 0;
	while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
		i++;
	if (i < len)
		cb(ud, JR_FRAME_LINE, line, len);
}

static int append(struct jr_framer *f, const char *buf, size_t n)
{
	if (f->len + n > f->cap) {
		size_t cap = f->cap ? f->cap : 4096;
		while (cap < f->len + n)
			cap *= 2;
		if (cap > f->max + 1)
			cap = f->max + 1;
		char *grown = realloc(f->buf, cap);
		if (!grown)
			return -1;
		f->buf = grown;
		f->cap = cap;
	}
	memcpy(f->buf + f->len, buf, n);
	f->len += n;
	return 0;
}

/* After a large message, give the memory back rather than keep max bytes forever. */
static void shrink(struct jr_framer *f)
{
	if (f->len == 0 && f->cap > 65536) {
		free(f->buf);
		f->buf = NULL;
		f->cap = 0;
	}
}

/* The limit counts the message, not its terminator: a line's length is its bytes before the
 * "\n" less one "\r" just before it (mcp.h). A line that so far ends with "\r" may be one byte
 * over, since that "\r" may turn out to be the terminator's; the next byte settles it. */
int jr_framer_feed(struct jr_framer *f, const char *buf, size_t n, jr_frame_cb cb, void *ud)
{
	int rc = 0;
	while (n > 0) {
		const char *nl = memchr(buf, '\n', n);
		size_t seg = nl ? (size_t)(nl - buf) : n;
		size_t step = nl ? seg + 1 : n;
		bool cr = seg ? buf[seg - 1] == '\r' : f->cr; /* the line so far ends with "\r" */
		f->cr = nl ? false : cr;
		if (f->discarding) {
			f->dropped += seg;
			if (nl) {
				f->discarding = false;
				cb(ud, JR_FRAME_TOOLONG, NULL, (size_t)f->dropped - cr);
			}
		} else if (f->len + seg > f->max + cr) {
			/* Too long: drop what we have and the rest of the line. */
			f->dropped = f->len + seg;
			f->len = 0;
			shrink(f);
			if (nl)
				cb(ud, JR_FRAME_TOOLONG, NULL, (size_t)f->dropped - cr);
			else
				f->discarding = true;
		} else if (nl && f->len == 0) {
			emit_line(buf, seg, cb, ud); /* the common case: no copy */
		} else if (append(f, buf, seg) < 0) {
			f->dropped = f->len + seg;
			f->len = 0;
			shrink(f);
			rc = -1;
			if (nl)
				cb(ud, JR_FRAME_TOOLONG, NULL, (size_t)f->dropped - cr);
			else
				f->discarding = true;
		} else if (nl) {
			/* cb may not feed this framer again, so the buffer stays ours meanwhile */
			size_t len = f->len;
			f->len = 0;
			emit_line(f->buf, len, cb, ud);
			shrink(f);
		}
		buf += step;
		n -= step;
	}
	return rc;
}

void jr_framer_eof(struct jr_framer *f, jr_frame_cb cb, void *ud)
{
	/* A final "\r" is stripped as a terminator's would be, so it is not counted either. */
	if (f->discarding) {
		f->discarding = false;
		cb(ud, JR_FRAME_TOOLONG, NULL, (size_t)f->dropped - f->cr);
	} else if (f->len) {
		size_t len = f->len;
		f->len = 0;
		emit_line(f->buf, len, cb, ud);
	}
	f->cr = false;
	jr_framer_free(f);
}

/* ---- envelope --------------------------------------------------------------------------- */

const char *jr_type_name(const json_t *v)
{
	if (!v)
		return "missing";
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a fractional number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		return "null";
	}
	return "unknown";
}

bool jr_id_valid(const json_t *id)
{
	return id && (json_is_string(id) || json_is_integer(id));
}

static enum jr_kind invalid(struct jr_msg *m, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum jr_kind invalid(struct jr_msg *m, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m->err_msg, sizeof(m->err_msg), fmt, ap);
	va_end(ap);
	m->err_code = code;
	m->kind = JR_INVALID;
	m->method = NULL;
	m->params = NULL;
	return JR_INVALID;
}

/* ---- the id's lexeme, in a line that is valid JSON ---- */

static size_t skip_ws(const char *s, size_t n, size_t i)
{
	while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
		i++;
	return i;
}

/* s[i] is '"': the index just past the closing quote. */
static size_t skip_string(const char *s, size_t n, size_t i)
{
	for (i++; i < n && s[i] != '"'; i++)
		if (s[i] == '\\')
			i++;
	return i < n ? i + 1 : n;
}

/* Past one value starting at s[i] (nested objects and arrays, strings with brackets). */
static size_t skip_value(const char *s, size_t n, size_t i)
{
	int depth = 0;
	while (i < n) {
		char c = s[i];
		if (c == '"') {
			i = skip_string(s, n, i);
		} else if (c == '{' || c == '[') {
			depth++;
			i++;
		} else if (c == '}' || c == ']') {
			if (depth == 0)
				return i;
			depth--;
			i++;
		} else if (c == ',' && depth == 0) {
			return i;
		} else {
			i++;
		}
		if (depth == 0 && (c == '"' || c == '}' || c == ']'))
			return i;
	}
	return i;
}

/* Is the key (the string at s[i], quotes included, up to end) exactly "id" once unescaped? */
static bool key_is_id(const char *s, size_t i, size_t end)
{
	char got[3];
	size_t k = 0;
	for (i++; i + 1 < end; i++) {
		unsigned c = (unsigned char)s[i];
		if (c == '\\' && i + 1 < end - 1) {
			c = (unsigned char)s[++i];
			if (c == 'u') {
				unsigned v = 0;
				for (int h = 0; h < 4 && i + 1 < end - 1; h++) {
					char x = s[++i];
					v = v * 16 + (unsigned)(x >= '0' && x <= '9'   ? x - '0'
					                        : x >= 'a' && x <= 'f' ? x - 'a' + 10
					                                               : x - 'A' + 10);
				}
				c = v;
			}
		}
		if (k == 2 || c > 0x7f)
			return false;
		got[k++] = (char)c;
	}
	return k == 2 && got[0] == 'i' && got[1] == 'd';
}

/* The span [*b, *e) of the top-level object's id value (the last one, as the parser keeps
 * it); false when there is none. */
static bool id_lexeme(const char *s, size_t n, size_t *b, size_t *e)
{
	size_t i = skip_ws(s, n, 0);
	if (i >= n || s[i] != '{')
		return false;
	bool found = false;
	i = skip_ws(s, n, i + 1);
	while (i < n && s[i] == '"') {
		size_t kend = skip_string(s, n, i);
		bool is_id = key_is_id(s, i, kend);
		i = skip_ws(s, n, kend);
		if (i >= n || s[i] != ':')
			return false;
		i = skip_ws(s, n, i + 1);
		size_t vend = skip_value(s, n, i);
		if (is_id) {
			found = true;
			*b = i;
			*e = vend;
		}
		i = skip_ws(s, n, vend);
		if (i >= n || s[i] != ',')
			break;
		i = skip_ws(s, n, i + 1);
	}
	return found;
}

/* The id is written as an integer: a number without '.', 'e' or 'E' (5, not 5.0 or 5e0).
 * *beyond: it is outside -2^63..2^63-1, told from its digits (as a double, every value up
 * to about 2^63+1024 is 2^63). */
static bool id_written_as_integer(const char *s, size_t n, bool *beyond)
{
	size_t i, vend;
	*beyond = false;
	if (!id_lexeme(s, n, &i, &vend))
		return false;
	bool integer = vend > i && (s[i] == '-' || (s[i] >= '0' && s[i] <= '9'));
	for (size_t k = i; integer && k < vend; k++)
		if (s[k] == '.' || s[k] == 'e' || s[k] == 'E')
			integer = false;
	bool neg = s[i] == '-';
	uint64_t mag = 0, max = neg ? (uint64_t)1 << 63 : ((uint64_t)1 << 63) - 1;
	for (size_t k = i + (neg ? 1 : 0); integer && k < vend && !*beyond; k++)
		*beyond = s[k] < '0' || s[k] > '9' || __builtin_mul_overflow(mag, 10, &mag) ||
		          __builtin_add_overflow(mag, (uint64_t)(s[k] - '0'), &mag) || mag > max;
	return integer;
}

/* Overwrite in s (n bytes, a copy of the line, with a NUL at s[n]) each number outside
 * strings that is beyond a double's range (1e400, or an integer of 400 digits) with 0 and
 * spaces, in one pass. *id_hit: one of them was the top-level id's (its lexeme at [ib, ie)).
 * Returns how many. */
static size_t zero_huge_numbers(char *s, size_t n, size_t ib, size_t ie, bool *id_hit)
{
	size_t zeroed = 0;
	for (size_t i = 0; i < n;) {
		if (s[i] == '"') {
			i = skip_string(s, n, i);
			continue;
		}
		if (s[i] != '-' && (s[i] < '0' || s[i] > '9')) {
			i++;
			continue;
		}
		size_t end = i + 1;
		while (end < n && s[end] && strchr("0123456789+-.eE", s[end]))
			end++;
		char saved = s[end];
		s[end] = '\0';
		errno = 0;
		double v = strtod(s + i, NULL);
		bool huge = errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL);
		s[end] = saved;
		if (huge) {
			s[i] = '0';
			memset(s + i + 1, ' ', end - i - 1);
			zeroed++;
			*id_hit |= i >= ib && i < ie;
		}
		i = end;
	}
	return zeroed;
}

/* Valid JSON with a number that jansson refuses: an integer beyond 64 bits ("too big
 * integer") or a real beyond a double's range ("real number overflow", 1e400). Not a parse
 * error but a request this server cannot take. Parsed again, once, from a copy with every
 * number beyond a double zeroed and every integer read as a double, so that a line malformed
 * further on is still a parse error; answered -32600 with the request's id when it comes back
 * exact (a string, or an integer below 2^53 in magnitude written as one in the line; a larger
 * one, a real such as 5.0 or 5e0, or one that was zeroed, is answered with id null rather than
 * an id the client did not send), saying whether the id itself is the number out of range. */
static enum jr_kind out_of_range(const char *line, size_t len, struct jr_msg *m)
{
	json_error_t jerr;
	char *copy = malloc(len + 1);
	if (!copy)
		return invalid(m, JR_INVALID_REQUEST, "invalid request: out of memory");
	memcpy(copy, line, len);
	copy[len] = '\0';
	size_t ib = 0, ie = 0;
	bool id_hit = false;
	if (!id_lexeme(line, len, &ib, &ie))
		ib = ie = 0;
	size_t huge = zero_huge_numbers(copy, len, ib, ie, &id_hit);
	m->root = json_loadb(copy, len, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL,
	                     &jerr);
	free(copy);
	if (!m->root) /* malformed after all (past the large number) */
		return invalid(m, JR_PARSE_ERROR,
		               "parse error: %s (at byte %d); send one JSON object per line",
		               jerr.text, jerr.position);
	json_t *id = json_object_get(m->root, "id");
	bool id_too_big = false;
	if (json_is_real(id)) {
		double v = json_real_value(id), a = v < 0 ? -v : v;
		bool beyond = false, integer = id_written_as_integer(line, len, &beyond);
		if (id_hit)
			json_object_del(m->root, "id"); /* zeroed: not the client's id */
		else if (integer && a < 9007199254740992.0 && (double)(json_int_t)v == v)
			json_object_set_new(m->root, "id", json_integer((json_int_t)v));
		id_too_big = integer && beyond;
		id = json_object_get(m->root, "id");
	}
	m->id = jr_id_valid(id) ? id : NULL;
	if (json_is_object(m->root) && !json_object_get(m->root, "method") &&
	    (json_object_get(m->root, "result") || json_object_get(m->root, "error"))) {
		m->kind = JR_RESPONSE; /* a client's response: ignored, like any other */
		return JR_RESPONSE;
	}
	if (id_too_big)
		return invalid(m, JR_INVALID_REQUEST,
		               "invalid request: the id is an integer beyond 64 bits; this server "
		               "takes integer ids from -2^63 to 2^63-1, or string ids");
	if (huge)
		return invalid(m, JR_INVALID_REQUEST,
		               "invalid request: a number in the message is beyond the range of a "
		               "double (about 1.8e308)");
	return invalid(m, JR_INVALID_REQUEST,
	               "invalid request: a number in the message is an integer beyond 64 bits; "
	               "this server takes integers from -2^63 to 2^63-1");
}

enum jr_kind jr_parse(const char *line, size_t len, struct jr_msg *m)
{
	memset(m, 0, sizeof(*m));
	json_error_t jerr;
	/* ALLOW_NUL: "\u0000" is valid JSON (stdin data may carry it); tools reject it where a C
	 * string is needed. */
	m->root = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
	if (!m->root && (strstr(jerr.text, "too big") || strstr(jerr.text, "real number overflow")))
		return out_of_range(line, len, m);
	if (!m->root)
		return invalid(m, JR_PARSE_ERROR,
		               "parse error: %s (at byte %d); send one JSON object "
		               "per line",
		               jerr.text, jerr.position);
	if (json_is_array(m->root))
		return invalid(
		    m, JR_INVALID_REQUEST,
		    "invalid request: batches (JSON arrays) are not supported; JSON-RPC "
		    "batching was removed from MCP in 2025-06-18; send one message per line");
	if (!json_is_object(m->root))
		return invalid(m, JR_INVALID_REQUEST,
		               "invalid request: a message must be a JSON object, not %s",
		               jr_type_name(m->root));
	json_t *id = json_object_get(m->root, "id");
	json_t *method = json_object_get(m->root, "method");
	if (!method && (json_object_get(m->root, "result") || json_object_get(m->root, "error"))) {
		m->id = jr_id_valid(id) ? id : NULL;
		m->kind = JR_RESPONSE;
		return JR_RESPONSE;
	}
	if (id && !jr_id_valid(id))
		return invalid(m, JR_INVALID_REQUEST,
		               "invalid request: id must be a string or an integer, not %s",
		               jr_type_name(id));
	m->id = id;
	json_t *ver = json_object_get(m->root, "jsonrpc");
	if (!ver)
		return invalid(m, JR_INVALID_REQUEST,
		               "invalid request: jsonrpc is missing; every message needs "
		               "\"jsonrpc\": \"2.0\"");
	if (!json_is_string(ver) || json_string_length(ver) != 3 ||
	    strcmp(json_string_value(ver), "2.0"))
		return invalid(m, JR_INVALID_REQUEST,
		               "invalid request: jsonrpc must be the string \"2.0\"");
	if (!method)
		return invalid(m, JR_INVALID_REQUEST,
		               "invalid request: method is missing (and this is not a response: it "
		               "has no result or error)");
	if (!json_is_string(method))
		return invalid(m, JR_INVALID_REQUEST,
		               "invalid request: method must be a string, not %s",
		               jr_type_name(method));
	if (strlen(json_string_value(method)) != json_string_length(method))
		return invalid(m, JR_INVALID_REQUEST,
		               "invalid request: method contains a NUL byte");
	json_t *params = json_object_get(m->root, "params");
	if (params && !json_is_object(params) && !json_is_array(params))
		return invalid(m, JR_INVALID_REQUEST,
		               "invalid request: params must be an object (or an array), not %s",
		               jr_type_name(params));
	m->method = json_string_value(method);
	m->params = params;
	m->kind = id ? JR_REQUEST : JR_NOTIFICATION;
	return m->kind;
}

void jr_msg_free(struct jr_msg *m)
{
	json_decref(m->root);
	memset(m, 0, sizeof(*m));
}

/* ---- builders --------------------------------------------------------------------------- */

static char *dump_line(json_t *o)
{
	if (!o)
		return NULL;
	/* COMPACT: one line; control characters in strings are always escaped. */
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!s)
		return NULL;
	size_t n = strlen(s);
	char *line = realloc(s, n + 2);
	if (!line) {
		free(s);
		return NULL;
	}
	line[n] = '\n';
	line[n + 1] = '\0';
	return line;
}

static json_t *envelope(void)
{
	json_t *o = json_object();
	if (o)
		json_object_set_new(o, "jsonrpc", json_string("2.0"));
	return o;
}

char *jr_result_line(const json_t *id, json_t *result)
{
	json_t *o = envelope();
	if (!o || !result) {
		json_decref(o);
		json_decref(result);
		return NULL;
	}
	json_object_set_new(o, "id", id ? json_deep_copy(id) : json_null());
	json_object_set_new(o, "result", result);
	return dump_line(o);
}

char *jr_error_line(const json_t *id, int code, const char *message)
{
	json_t *o = envelope();
	json_t *e = json_object();
	char *clean = mcp_utf8_clean(message, strlen(message));
	if (!o || !e || !clean) {
		json_decref(o);
		json_decref(e);
		free(clean);
		return NULL;
	}
	json_object_set_new(o, "id", id ? json_deep_copy(id) : json_null());
	json_object_set_new(e, "code", json_integer(code));
	json_object_set_new(e, "message", json_string(clean));
	free(clean);
	json_object_set_new(o, "error", e);
	return dump_line(o);
}

char *jr_notification_line(const char *method, json_t *params)
{
	json_t *o = envelope();
	if (!o || !params) {
		json_decref(o);
		json_decref(params);
		return NULL;
	}
	json_object_set_new(o, "method", json_string(method));
	json_object_set_new(o, "params", params);
	return dump_line(o);
}

/* ---- dispatch --------------------------------------------------------------------------- */

void jr_fail(struct jr_reply *r, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->message, sizeof(r->message), fmt, ap);
	va_end(ap);
	r->code = code;
	json_decref(r->result);
	r->result = NULL;
}

static const struct jr_method *find(const struct jr_method *t, size_t n, const char *name,
                                    bool notification)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(t[i].name, name) && !!(t[i].flags & JR_M_NOTIFICATION) == notification)
			return &t[i];
	return NULL;
}

char *jr_dispatch(const struct jr_method *table, size_t n, void *ctx, bool initialized,
                  const struct jr_msg *m)
{
	switch (m->kind) {
	case JR_INVALID:
		return jr_error_line(m->id, m->err_code, m->err_msg);
	case JR_RESPONSE:
		return NULL; /* this server sends no requests; nothing to match */
	case JR_NOTIFICATION: {
		/* Unknown notifications are ignored, as JSON-RPC requires: no reply either way. */
		const struct jr_method *h = find(table, n, m->method, true);
		if (h && (initialized || (h->flags & JR_M_BEFORE_INIT))) {
			struct jr_reply r = {0};
			h->fn(ctx, m, &r);
			json_decref(r.result);
		}
		return NULL;
	}
	case JR_REQUEST:
		break;
	}
	const struct jr_method *h = find(table, n, m->method, false);
	if (!h) {
		char msg[400];
		snprintf(msg, sizeof(msg), "method not found: '%.200s'%s", m->method,
		         find(table, n, m->method, true)
		             ? " is a notification; send it without an id"
		             : "");
		return jr_error_line(m->id, JR_METHOD_NOT_FOUND, msg);
	}
	if (!initialized && !(h->flags & JR_M_BEFORE_INIT)) {
		char msg[400];
		snprintf(
		    msg, sizeof(msg),
		    "server not initialized: send 'initialize' before '%.200s' (only 'ping' is "
		    "allowed before it)",
		    m->method);
		return jr_error_line(m->id, JR_NOT_INITIALIZED, msg);
	}
	struct jr_reply r = {0};
	h->fn(ctx, m, &r);
	if (r.deferred) {
		json_decref(r.result);
		return NULL;
	}
	if (r.code)
		return jr_error_line(m->id, r.code, r.message);
	if (!r.result)
		return jr_error_line(m->id, JR_INTERNAL_ERROR, "internal error: out of memory");
	return jr_result_line(m->id, r.result);
}

/* ---- MCP versions ----------------------------------------------------------------------- */

static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

const char *mcp_negotiate_version(const char *requested)
{
	for (size_t i = 0; requested && i < sizeof(versions) / sizeof(versions[0]); i++)
		if (!strcmp(requested, versions[i]))
			return versions[i];
	return MCP_LATEST_VERSION;
}

/* ---- UTF-8 ------------------------------------------------------------------------------ */

char *mcp_utf8_clean(const char *s, size_t n)
{
	char *out = malloc(n * 3 + 1);
	if (out)
		utf8_sanitize(s, n, true, out);
	return out;
}
