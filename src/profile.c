/* Profiles: the builtin policies and the JSON profile format (docs/profile.schema.json).
 *
 * Pure code: nothing here touches the system except profile_load_file() reading one file.
 * jansson does the parsing; its values carry no positions, so errors found after parsing are
 * placed by re-scanning the original text for the JSON path of the offending value (see
 * "positions" below). That scanner sees untrusted bytes, so it is bounded everywhere. */
#include "policy.h"
#include "internal.h"

#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define PROFILE_MAX_BYTES (1u << 20)
#define PROFILE_MAX_DEPTH 64
/* Every list in a profile is short; the cap also bounds the quadratic duplicate checks. */
#define PROFILE_MAX_ITEMS 1024
#define PROFILE_PATH_MAX 4096

const char *const profile_builtin_names[] = {"default", "readonly", "strict", "network", NULL};

/* Files that run code or configure tools the next time a human (or their agent) works in the
 * workspace: a sandboxed command must not plant a git hook, a shell rc line or an MCP server. */
const char *const policy_default_protected[] = {
    ".git/hooks",  ".git/config", ".gitmodules",  ".bashrc",   ".bash_profile",
    ".bash_login", ".profile",    ".zshrc",       ".zprofile", ".zshenv",
    ".envrc",      ".mcp.json",   ".vscode",      ".idea",     ".claude",
    ".cursor",     ".corral",     ".corral.json", NULL,
};

/* Credentials, and variables that make a loader or a shell run code of the host's choosing. */
const char *const policy_default_env_deny[] = {
    "*_TOKEN",
    "*_TOKEN_*",
    "*_PAT",
    "*_PWD",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*PASSPHRASE*",
    "*_KEY",
    "*_KEY_ID",
    "*_API_KEY",
    "*CREDENTIAL*",
    "AWS_*",
    "AZURE_*",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "NPM_TOKEN",
    "PYPI_TOKEN",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "DOCKER_HOST",
    "KUBECONFIG",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "GLIBC_TUNABLES",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    NULL,
};

/* ---- globs ----------------------------------------------------------------------------- */

/* Greedy matching that only ever backtracks to the last '*': O(len(glob) * len(name)) in the
 * worst case, never exponential. */
static bool glob_match(const char *glob, const char *name, bool fold);

bool policy_glob_match(const char *glob, const char *name)
{
	return glob_match(glob, name, false);
}

bool policy_glob_match_nocase(const char *glob, const char *name)
{
	return glob_match(glob, name, true);
}

static inline char fold_ascii(char c)
{
	return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

static bool glob_match(const char *glob, const char *name, bool fold)
{
	if (!glob || !name)
		return false;
	const char *g = glob, *n = name, *star = NULL, *resume = NULL;
	while (*n) {
		if (*g == '*') {
			while (*g == '*')
				g++;
			if (!*g)
				return true;
			star = g;
			resume = n;
			continue;
		}
		if (*g && (*g == '?' || *g == *n || (fold && fold_ascii(*g) == fold_ascii(*n)))) {
			g++;
			n++;
			continue;
		}
		if (!star)
			return false;
		g = star;
		n = ++resume;
	}
	while (*g == '*')
		g++;
	return !*g;
}

/* ---- growable buffer ------------------------------------------------------------------- */

struct buf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void buf_add(struct buf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (n >= SIZE_MAX / 2 - b->len) {
		b->oom = true;
		return;
	}
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void buf_truncate(struct buf *b, size_t len)
{
	if (len < b->len) {
		b->len = len;
		b->p[len] = '\0';
	}
}

static void buf_index(struct buf *b, size_t i)
{
	char t[32];
	int n = snprintf(t, sizeof(t), "[%zu]", i);
	buf_add(b, t, (size_t)n);
}

static void buf_utf8(struct buf *b, unsigned long cp)
{
	char u[4];
	size_t n;
	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xC0 | (cp >> 6));
		u[1] = (char)(0x80 | (cp & 0x3F));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xE0 | (cp >> 12));
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		u[2] = (char)(0x80 | (cp & 0x3F));
		n = 3;
	} else {
		u[0] = (char)(0xF0 | (cp >> 18));
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
		u[3] = (char)(0x80 | (cp & 0x3F));
		n = 4;
	}
	buf_add(b, u, n);
}

/* ---- positions ------------------------------------------------------------------------- */

/* A JSON path as a chain on the validator's stack; rendered only when an error needs it, as
 * "filesystem.read[2]" or "limits.memory" (the top-level value is ""). */
struct jpath {
	const struct jpath *up;
	const char *key; /* member name; NULL for an array element */
	size_t index;
};

static void path_render(const struct jpath *p, struct buf *b)
{
	if (!p)
		return;
	path_render(p->up, b);
	if (p->key) {
		if (b->len)
			buf_add(b, ".", 1);
		buf_add(b, p->key, strlen(p->key));
	} else {
		buf_index(b, p->index);
	}
}

/* The scanner walks the text as JSON, building the same path strings, and stops at the value
 * (or member name) whose path is the target. It also finds the first bracket nested deeper
 * than PROFILE_MAX_DEPTH. It never reads outside [s, s+len); on anything that is not JSON it
 * just stops: jansson, not this scanner, judges syntax. */
struct scan {
	const char *s;
	size_t len;
	const char *target; /* NULL: only check the depth */
	size_t target_len;
	bool want_key;
	size_t dup_off;  /* find the path of the member name starting here (or SIZE_MAX) */
	size_t found;    /* offset of the target, or SIZE_MAX */
	size_t too_deep; /* offset of the first bracket past the cap, or SIZE_MAX */
	struct buf path;
	char *dup_path; /* malloc'ed path of the member at dup_off */
	/* collect the offsets of the elements of the array at path elems_of: elem_off[i] for
	 * element i < n_elem (untouched for elements not found) */
	const char *elems_of;
	size_t elems_len;
	size_t *elem_off, n_elem;
};

static long scan_hex4(const char *s, size_t len, size_t i)
{
	long v = 0;
	if (i > len || len - i < 4)
		return -1;
	for (size_t k = 0; k < 4; k++) {
		char c = s[i + k];
		int d = c >= '0' && c <= '9'   ? c - '0'
		        : c >= 'a' && c <= 'f' ? c - 'a' + 10
		        : c >= 'A' && c <= 'F' ? c - 'A' + 10
		                               : -1;
		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	return v;
}

/* s[i] is the opening quote. Returns the offset after the closing quote (len if none);
 * appends the decoded bytes to out when out is not NULL. */
static size_t scan_string(const char *s, size_t len, size_t i, struct buf *out)
{
	static const char from[8] = "\"\\/bfnrt", to[8] = "\"\\/\b\f\n\r\t";
	i++;
	while (i < len) {
		if (s[i] == '"')
			return i + 1;
		if (s[i] != '\\') {
			size_t j = i;
			while (j < len && s[j] != '"' && s[j] != '\\')
				j++;
			if (out)
				buf_add(out, s + i, j - i);
			i = j;
			continue;
		}
		if (i + 1 >= len)
			return len;
		char e = s[i + 1];
		i += 2;
		if (e == 'u') {
			long cp = scan_hex4(s, len, i);
			if (cp < 0)
				continue;
			i += 4;
			if (cp >= 0xD800 && cp < 0xDC00 && i + 1 < len && s[i] == '\\' &&
			    s[i + 1] == 'u') {
				long lo = scan_hex4(s, len, i + 2);
				if (lo >= 0xDC00 && lo < 0xE000) {
					cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
					i += 6;
				}
			}
			if (out)
				buf_utf8(out, (unsigned long)cp);
			continue;
		}
		const char *q = memchr(from, e, sizeof(from));
		char d = q ? to[q - from] : e;
		if (out)
			buf_add(out, &d, 1);
	}
	return len;
}

static size_t scan_ws(const char *s, size_t len, size_t i)
{
	while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
		i++;
	return i;
}

static bool scan_at_target(const struct scan *sc)
{
	return sc->target && sc->path.len == sc->target_len &&
	       (sc->target_len == 0 || memcmp(sc->path.p, sc->target, sc->target_len) == 0);
}

static void scan_run(struct scan *sc)
{
	enum { S_VALUE, S_VALUE_OR_END, S_AFTER, S_KEY, S_KEY_OR_END } state = S_VALUE;
	struct {
		bool obj;
		size_t index, plen;
	} st[PROFILE_MAX_DEPTH];
	int depth = 0;
	const char *s = sc->s;
	size_t len = sc->len, i = 0;

	sc->found = sc->too_deep = SIZE_MAX;
	for (;;) {
		i = scan_ws(s, len, i);
		if (i >= len || sc->path.oom)
			return;
		char ch = s[i];
		switch (state) {
		case S_VALUE_OR_END:
			if (ch == ']') {
				buf_truncate(&sc->path, st[--depth].plen);
				i++;
				state = S_AFTER;
				break;
			}
			/* fall through */
		case S_VALUE:
			if (!sc->want_key && scan_at_target(sc)) {
				sc->found = i;
				return;
			}
			if (sc->elem_off && depth > 0 && !st[depth - 1].obj &&
			    st[depth - 1].plen == sc->elems_len &&
			    (sc->elems_len == 0 ||
			     memcmp(sc->path.p, sc->elems_of, sc->elems_len) == 0)) {
				size_t k = st[depth - 1].index;
				if (k < sc->n_elem)
					sc->elem_off[k] = i;
				if (k + 1 >= sc->n_elem)
					return;
			}
			if (ch == '{' || ch == '[') {
				if (depth == PROFILE_MAX_DEPTH) {
					sc->too_deep = i;
					return;
				}
				st[depth].obj = ch == '{';
				st[depth].index = 0;
				st[depth].plen = sc->path.len;
				depth++;
				i++;
				if (ch == '{') {
					state = S_KEY_OR_END;
				} else {
					buf_index(&sc->path, 0);
					state = S_VALUE_OR_END;
				}
				break;
			}
			if (ch == '"') {
				i = scan_string(s, len, i, NULL);
			} else {
				if (strchr(",:]}", ch))
					return;
				while (i < len && !strchr(" \t\r\n,:[]{}\"", s[i]))
					i++;
			}
			state = S_AFTER;
			break;
		case S_AFTER:
			if (depth == 0)
				return;
			if (ch == ',') {
				i++;
				if (st[depth - 1].obj) {
					state = S_KEY;
				} else {
					buf_truncate(&sc->path, st[depth - 1].plen);
					buf_index(&sc->path, ++st[depth - 1].index);
					state = S_VALUE;
				}
			} else if (ch == (st[depth - 1].obj ? '}' : ']')) {
				buf_truncate(&sc->path, st[depth - 1].plen);
				depth--;
				i++;
			} else {
				return;
			}
			break;
		case S_KEY_OR_END:
			if (ch == '}') {
				buf_truncate(&sc->path, st[--depth].plen);
				i++;
				state = S_AFTER;
				break;
			}
			/* fall through */
		case S_KEY: {
			if (ch != '"')
				return;
			size_t key_off = i;
			buf_truncate(&sc->path, st[depth - 1].plen);
			if (sc->path.len)
				buf_add(&sc->path, ".", 1);
			i = scan_string(s, len, i, &sc->path);
			if (sc->want_key && scan_at_target(sc)) {
				sc->found = key_off;
				return;
			}
			if (key_off == sc->dup_off && !sc->path.oom) {
				sc->dup_path = strdup(sc->path.p ? sc->path.p : "");
				return;
			}
			i = scan_ws(s, len, i);
			if (i >= len || s[i] != ':')
				return;
			i++;
			state = S_VALUE;
			break;
		}
		}
	}
}

/* Offset of the value (or member name) at path; 0 when it cannot be found. */
static size_t locate(const char *text, size_t len, const char *path, size_t plen, bool key)
{
	struct scan sc = {.s = text,
	                  .len = len,
	                  .target = path,
	                  .target_len = plen,
	                  .want_key = key,
	                  .dup_off = SIZE_MAX};
	scan_run(&sc);
	free(sc.path.p);
	return sc.found == SIZE_MAX ? 0 : sc.found;
}

static size_t depth_check(const char *text, size_t len)
{
	struct scan sc = {.s = text, .len = len, .dup_off = SIZE_MAX};
	scan_run(&sc);
	free(sc.path.p);
	return sc.too_deep;
}

/* 1-based line and byte column of an offset. */
static void line_col(const char *text, size_t len, size_t off, unsigned *line, unsigned *col)
{
	size_t ln = 1, start = 0;
	if (off > len)
		off = len;
	for (size_t i = 0; i < off; i++) {
		if (text[i] == '\n') {
			ln++;
			start = i + 1;
		}
	}
	*line = ln > UINT32_MAX ? UINT32_MAX : (unsigned)ln;
	*col = off - start + 1 > UINT32_MAX ? UINT32_MAX : (unsigned)(off - start + 1);
}

/* ---- messages -------------------------------------------------------------------------- */

/* Copy s for a one-line message: control bytes and (with quotes) '"' and '\' escaped, long
 * strings cut at a UTF-8 boundary with "...". ascii_only also escapes bytes >= 0x80 (for
 * text that may not be UTF-8). */
static void quote(char *dst, size_t cap, const char *s, size_t n, bool quotes, bool ascii_only)
{
	size_t o = 0, limit = cap - 6; /* room for an escape, "...", the quote and NUL */
	if (quotes)
		dst[o++] = '"';
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char e[8];
		int k;
		if (c == '\n' || c == '\t')
			k = snprintf(e, sizeof(e), "\\%c", c == '\n' ? 'n' : 't');
		else if (c < 0x20 || c == 0x7f || (ascii_only && c >= 0x80))
			k = snprintf(e, sizeof(e), "\\x%02x", c);
		else if (quotes && (c == '"' || c == '\\'))
			k = snprintf(e, sizeof(e), "\\%c", c);
		else
			k = snprintf(e, sizeof(e), "%c", c);
		if (o + (size_t)k > limit - 3) {
			size_t floor_o = quotes ? 1 : 0;
			while (o > floor_o && ((unsigned char)dst[o - 1] & 0xC0) == 0x80)
				o--;
			if (o > floor_o && (unsigned char)dst[o - 1] >= 0xC0)
				o--;
			memcpy(dst + o, "...", 3);
			o += 3;
			break;
		}
		memcpy(dst + o, e, (size_t)k);
		o += (size_t)k;
	}
	if (quotes)
		dst[o++] = '"';
	dst[o] = '\0';
}

/* What a value is, for "got ...": the string or number itself, or its kind. */
static void describe(const json_t *v, char *dst, size_t cap)
{
	switch (json_typeof(v)) {
	case JSON_STRING:
		quote(dst, cap, json_string_value(v), json_string_length(v), true, false);
		return;
	case JSON_INTEGER:
		snprintf(dst, cap, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return;
	case JSON_REAL:
		snprintf(dst, cap, "%.15g", json_real_value(v));
		return;
	case JSON_TRUE:
		snprintf(dst, cap, "true");
		return;
	case JSON_FALSE:
		snprintf(dst, cap, "false");
		return;
	case JSON_NULL:
		snprintf(dst, cap, "null");
		return;
	case JSON_OBJECT:
		snprintf(dst, cap, "an object");
		return;
	case JSON_ARRAY:
		snprintf(dst, cap, "an array");
		return;
	}
	snprintf(dst, cap, "a value");
}

struct pctx {
	const char *text;
	size_t len;
	char origin[200]; /* sanitized for messages */
	struct corral_error *err;
};

static int set_error_at(struct pctx *c, size_t off, const char *what, const char *msg)
{
	unsigned line, col;
	line_col(c->text, c->len, off, &line, &col);
	if (what && *what)
		return corral_set_error(c->err, CORRAL_EINVAL, 0, "profile", "%s:%u:%u: %s: %s",
		                        c->origin, line, col, what, msg);
	return corral_set_error(c->err, CORRAL_EINVAL, 0, "profile", "%s:%u:%u: %s", c->origin,
	                        line, col, msg);
}

/* An error about the value at `at` (or its member name when at_key): "<origin>:<line>:<col>:
 * <path>: <message>", without the path when with_path is false. */
static int perr(struct pctx *c, const struct jpath *at, bool at_key, bool with_path,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int perr(struct pctx *c, const struct jpath *at, bool at_key, bool with_path,
                const char *fmt, ...)
{
	char msg[400], shown[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	struct buf path = {0};
	path_render(at, &path);
	if (path.oom) {
		free(path.p);
		return corral_set_error(c->err, CORRAL_ENOMEM, ENOMEM, "profile",
		                        "%s: out of memory", c->origin);
	}
	size_t off = locate(c->text, c->len, path.p ? path.p : "", path.len, at_key);
	quote(shown, sizeof(shown), path.p ? path.p : "", path.len, false, false);
	free(path.p);
	return set_error_at(c, off, with_path ? shown : NULL, msg);
}

static int oom(struct pctx *c)
{
	return corral_set_error(c->err, CORRAL_ENOMEM, ENOMEM, "profile",
	                        "%s: out of memory while reading the profile", c->origin);
}

static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[33];
	if (la > 64 || lb > 32)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

/* The known name within edit distance 2 of s, or NULL. */
static const char *suggest(const char *s, const char *const *known)
{
	const char *best = NULL;
	size_t best_d = 3;
	for (size_t i = 0; known[i]; i++) {
		size_t d = edit_distance(s, known[i]);
		if (d < best_d && d < strlen(known[i])) {
			best = known[i];
			best_d = d;
		}
	}
	return best;
}

static void join(char *dst, size_t cap, const char *const *list, bool quotes)
{
	size_t o = 0;
	dst[0] = '\0';
	for (size_t i = 0; list[i] && o < cap; i++)
		o += (size_t)snprintf(dst + o, cap - o, quotes ? "%s\"%s\"" : "%s%s", i ? ", " : "",
		                      list[i]);
}

static int unknown_key(struct pctx *c, const struct jpath *obj, const char *key,
                       const char *const *known)
{
	struct jpath at = {obj, key, 0};
	char shown[100], where[120], list[200], hint[64] = "";
	quote(shown, sizeof(shown), key, strlen(key), true, false);
	if (obj) {
		struct buf p = {0};
		path_render(obj, &p);
		quote(where, sizeof(where), p.p ? p.p : "", p.len, true, false);
		free(p.p);
	} else {
		snprintf(where, sizeof(where), "the top-level object");
	}
	join(list, sizeof(list), known, false);
	const char *s = suggest(key, known);
	if (s)
		snprintf(hint, sizeof(hint), " (did you mean \"%s\"?)", s);
	return perr(c, &at, true, false, "unknown key %s in %s%s; expected one of %s", shown, where,
	            hint, list);
}

static int expected(struct pctx *c, const struct jpath *at, const json_t *v, const char *what)
{
	char got[120];
	describe(v, got, sizeof(got));
	return perr(c, at, false, true, "expected %s, got %s", what, got);
}

/* ---- values ---------------------------------------------------------------------------- */

static int get_string(struct pctx *c, const json_t *v, const struct jpath *at, char **out)
{
	if (!json_is_string(v))
		return expected(c, at, v, "a string");
	char *s = strdup(json_string_value(v));
	if (!s)
		return oom(c);
	free(*out);
	*out = s;
	return 0;
}

static int get_enum(struct pctx *c, const json_t *v, const struct jpath *at,
                    const char *const *names, int *out)
{
	char what[160] = "one of ", hint[64] = "";
	join(what + 7, sizeof(what) - 7, names, true);
	if (json_is_string(v)) {
		for (int i = 0; names[i]; i++) {
			if (!strcmp(json_string_value(v), names[i])) {
				*out = i;
				return 0;
			}
		}
		const char *s = suggest(json_string_value(v), names);
		if (s)
			snprintf(hint, sizeof(hint), " (did you mean \"%s\"?)", s);
	}
	char got[120];
	describe(v, got, sizeof(got));
	return perr(c, at, false, true, "expected %s, got %s%s", what, got, hint);
}

/* A non-negative whole JSON number. */
static bool json_whole(const json_t *v, uint64_t *out)
{
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0)
			return false;
		*out = (uint64_t)json_integer_value(v);
		return true;
	}
	if (json_is_real(v)) {
		double d = json_real_value(v);
		if (!isfinite(d) || d < 0 || d != floor(d) || d >= 9.2e18)
			return false;
		*out = (uint64_t)d;
		return true;
	}
	return false;
}

enum item_kind { ITEM_PATH, ITEM_PROTECTED, ITEM_GLOB, ITEM_SECRET };

static int check_item(struct pctx *c, const json_t *v, const struct jpath *at, enum item_kind kind)
{
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);
	if (kind == ITEM_GLOB) {
		bool ok = n > 0 && n < 256;
		for (size_t i = 0; ok && i < n; i++)
			ok = s[i] == '_' || s[i] == '*' || s[i] == '?' ||
			     (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
			     (s[i] >= '0' && s[i] <= '9');
		if (!ok)
			return expected(c, at, v,
			                "a variable name glob of letters, digits, '_', '*' and '?' "
			                "(like \"LC_*\")");
		return 0;
	}
	if (kind == ITEM_SECRET) {
		/* the same bounds as corral_config_add_redaction(); the value is not echoed */
		if (n < 4 || n > 4096)
			return perr(
			    c, at, false, true,
			    "expected a string of 4 to 4096 bytes to redact, got one of %zu "
			    "bytes",
			    n);
		return 0;
	}
	if (n == 0)
		return expected(c, at, v, "a non-empty path");
	/* No check for NUL bytes: jansson refuses "\u0000" (JSON_ALLOW_NUL is not given), with
	 * a positioned syntax error, before any value gets here. */
	if (n >= PROFILE_PATH_MAX)
		return expected(c, at, v, "a path shorter than 4096 bytes");
	if (kind == ITEM_PROTECTED) {
		if (s[0] == '/' || s[0] == '~')
			return expected(c, at, v,
			                "a workspace-relative path (protected paths lie inside the "
			                "workspace), like \".git/hooks\"");
		/* Any "..", not only a ".." component: the same rule as
		 * corral_config_set_protected(), so that this error, with its position, is the one
		 * a user sees. */
		if (strstr(s, ".."))
			return expected(c, at, v, "a workspace-relative path without \"..\"");
		return 0;
	}
	if (s[0] == '~' && s[1] != '\0' && s[1] != '/')
		return expected(c, at, v,
		                "\"~\" or a path starting with \"~/\" (other users' home "
		                "directories are not supported)");
	return 0;
}

static bool list_has(char *const *list, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(list[i], s))
			return true;
	return false;
}

/* An array of strings; exact duplicates are dropped (they mean nothing more). *out is set
 * before the first item so that a failure leaves a freeable partial list. */
static int get_list(struct pctx *c, const json_t *v, const struct jpath *at, enum item_kind kind,
                    char ***out, size_t *n, struct profile_pos **pos)
{
	static const char *const what[] = {
	    [ITEM_PATH] = "an array of paths",
	    [ITEM_PROTECTED] = "an array of workspace-relative paths",
	    [ITEM_GLOB] = "an array of variable name globs",
	    [ITEM_SECRET] = "an array of strings",
	};
	if (!json_is_array(v))
		return expected(c, at, v, what[kind]);
	size_t count = json_array_size(v);
	if (count > PROFILE_MAX_ITEMS)
		return perr(c, at, false, true, "expected at most %d entries, got %zu",
		            PROFILE_MAX_ITEMS, count);
	char **list = calloc(count ? count : 1, sizeof(*list));
	if (!list)
		return oom(c);
	for (size_t i = 0; i < *n; i++)
		free((*out)[i]);
	free(*out);
	*out = list;
	*n = 0;
	if (pos) {
		free(*pos);
		if (!(*pos = calloc(count ? count : 1, sizeof(**pos))))
			return oom(c);
	}
	for (size_t i = 0; i < count; i++) {
		const json_t *item = json_array_get(v, i);
		struct jpath ip = {at, NULL, i};
		if (!json_is_string(item))
			return expected(c, &ip, item,
			                kind == ITEM_GLOB || kind == ITEM_SECRET ? "a string"
			                                                         : "a path string");
		int rc = check_item(c, item, &ip, kind);
		if (rc < 0)
			return rc;
		if (list_has(list, *n, json_string_value(item)))
			continue;
		if (!(list[*n] = strdup(json_string_value(item))))
			return oom(c);
		if (pos)
			(*pos)[*n].index = i; /* line and column: set_positions() */
		(*n)++;
	}
	return 0;
}

/* ---- sections -------------------------------------------------------------------------- */

static int parse_filesystem(struct pctx *c, const json_t *obj, const struct jpath *at,
                            struct profile *p)
{
	static const char *const keys[] = {"read",      "write", "deny", "protected",
	                                   "workspace", "etc",   NULL};
	static const char *const ws[] = {"ro", "rw", NULL}, *const etc[] = {"default", "minimal",
	                                                                    NULL};
	if (!json_is_object(obj))
		return expected(c, at, obj, "an object");
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)obj, key, v)
	{
		struct jpath kp = {at, key, 0};
		int rc, e;
		if (!strcmp(key, "read")) {
			rc = get_list(c, v, &kp, ITEM_PATH, &p->fs_read, &p->n_read, &p->read_pos);
		} else if (!strcmp(key, "write")) {
			rc = get_list(c, v, &kp, ITEM_PATH, &p->fs_write, &p->n_write,
			              &p->write_pos);
		} else if (!strcmp(key, "deny")) {
			rc = get_list(c, v, &kp, ITEM_PATH, &p->fs_deny, &p->n_deny, &p->deny_pos);
		} else if (!strcmp(key, "protected")) {
			rc = get_list(c, v, &kp, ITEM_PROTECTED, &p->protected_paths,
			              &p->n_protected, &p->protected_pos);
			p->protected_set = true;
		} else if (!strcmp(key, "workspace")) {
			if ((rc = get_enum(c, v, &kp, ws, &e)) == 0)
				p->workspace_access = e + 1;
		} else if (!strcmp(key, "etc")) {
			if ((rc = get_enum(c, v, &kp, etc, &e)) == 0)
				p->etc_minimal = e == 1;
		} else {
			rc = unknown_key(c, at, key, keys);
		}
		if (rc < 0)
			return rc;
	}
	/* A tree both in read and in write is writable: write is the superset, so the read
	 * entry adds nothing. (deny against either is kept: deny wins when applied.) */
	size_t k = 0;
	for (size_t i = 0; i < p->n_read; i++) {
		if (list_has(p->fs_write, p->n_write, p->fs_read[i])) {
			free(p->fs_read[i]);
		} else {
			p->read_pos[k] = p->read_pos[i];
			p->fs_read[k++] = p->fs_read[i];
		}
	}
	p->n_read = k;
	return 0;
}

struct limit_spec {
	const char *key;
	enum { L_SIZE, L_COUNT, L_SECONDS, L_DURATION, L_CPUS } kind;
	int which; /* CORRAL_LIMIT_*, or -1 for timeout, kill_after and output */
	uint64_t min, max;
	bool zero_ok;      /* 0 is accepted below min: "no limit" (or "no timeout") */
	const char *range; /* for messages */
};

/* The same ranges as corral_config_set_limit(), _set_timeout_ms() and _set_output_cap() in
 * config.c. 0 means "no limit" where the sandbox treats it so; not for tmpfs, where the plan
 * turns 0 into its 256 MiB default, nor for output. */
static const struct limit_spec limit_specs[] = {
    {"timeout", L_DURATION, -1, 0, 366ULL * 86400 * 1000, true,
     "at most 366 days (0 for no timeout)"},
    {"kill_after", L_DURATION, -1, 0, 3600000, true, "at most 1 hour"},
    {"memory", L_SIZE, CORRAL_LIMIT_MEMORY, 1u << 20, 1ULL << 50, true,
     "from 1 MiB to 1 PiB (0 for no limit)"},
    {"cpus", L_CPUS, CORRAL_LIMIT_CPUS, 1, 100 * 4096, true,
     "from 0.01 to 4096 CPUs (0 for no limit)"},
    {"cpu", L_SECONDS, CORRAL_LIMIT_CPU_S, 1, 366ULL * 86400, true,
     "from 1 second to 366 days (0 for no limit)"},
    {"pids", L_COUNT, CORRAL_LIMIT_PIDS, 1, 4194304, true, "from 1 to 4194304 (0 for no limit)"},
    {"nofile", L_COUNT, CORRAL_LIMIT_NOFILE, 16, 1u << 20, true,
     "from 16 to 1048576 (0 for no limit)"},
    {"fsize", L_SIZE, CORRAL_LIMIT_FSIZE, 1, 1ULL << 60, true,
     "from 1 byte to 1 EiB (0 for no limit)"},
    {"tmpfs", L_SIZE, CORRAL_LIMIT_TMPFS, 1u << 20, 1ULL << 50, false, "from 1 MiB to 1 PiB"},
    {"output", L_SIZE, -1, 64, 1u << 30, false, "from 64 bytes to 1 GiB"},
};

static int get_limit(struct pctx *c, const json_t *v, const struct jpath *at,
                     const struct limit_spec *ls, uint64_t *out)
{
	static const char *const what[] = {
	    [L_SIZE] = "a size like \"512M\" or a whole number of bytes",
	    [L_COUNT] = "a whole number",
	    [L_SECONDS] = "a whole number of seconds or a duration like \"2m\"",
	    [L_DURATION] = "a duration like \"30s\" or a number of seconds",
	    [L_CPUS] = "a number of CPUs like 0.5 or \"1.5\"",
	};
	uint64_t val = 0;
	const char *why = NULL;
	char got[120];
	if (ls->kind == L_CPUS && (json_is_string(v) || json_is_number(v))) {
		/* hundredths of a CPU, exact for what people write (0.5, 1.25, "2") */
		char num[64];
		if (json_is_string(v))
			snprintf(num, sizeof(num), "%s", json_string_value(v));
		else if (json_is_integer(v))
			snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		else
			snprintf(num, sizeof(num), "%.15g", json_real_value(v));
		if (parse_cpus(num, &val, &why) < 0) {
			describe(v, got, sizeof(got));
			return perr(c, at, false, true, "expected %s, got %s: %s", what[L_CPUS], got,
			            why);
		}
	} else if (json_is_string(v) && ls->kind != L_COUNT) {
		const char *s = json_string_value(v);
		int rc = ls->kind == L_SIZE ? parse_size(s, &val, &why)
		                            : parse_duration_ms(s, &val, &why);
		if (rc < 0) {
			describe(v, got, sizeof(got));
			return perr(c, at, false, true, "expected %s, got %s: %s",
			            ls->kind == L_SIZE ? "a size like \"512M\""
			                               : "a duration like \"30s\"",
			            got, why);
		}
		if (ls->kind == L_SECONDS) {
			if (val % 1000)
				return expected(c, at, v, "a whole number of seconds");
			val /= 1000;
		}
	} else if (ls->kind == L_DURATION && json_is_number(v)) {
		double d = json_number_value(v);
		if (!isfinite(d) || d < 0)
			return expected(c, at, v, "a non-negative number of seconds");
		if (d * 1000 > (double)ls->max) {
			describe(v, got, sizeof(got));
			return perr(c, at, false, true, "expected a duration %s, got %s", ls->range,
			            got);
		}
		val = (uint64_t)(d * 1000);
		/* a nonzero duration below a millisecond would read as 0, "none": refuse it */
		if (val == 0 && d > 0) {
			describe(v, got, sizeof(got));
			return perr(c, at, false, true,
			            "expected a duration of at least 1 ms (or 0 for none), got %s",
			            got);
		}
	} else if (!json_whole(v, &val)) {
		return expected(c, at, v, what[ls->kind]);
	}
	if (val > ls->max || (val < ls->min && !(val == 0 && ls->zero_ok))) {
		describe(v, got, sizeof(got));
		return perr(c, at, false, true, "expected %s %s, got %s",
		            ls->kind == L_SIZE       ? "a size"
		            : ls->kind == L_DURATION ? "a duration"
		            : ls->kind == L_SECONDS  ? "a number of seconds"
		            : ls->kind == L_CPUS     ? "a number of CPUs"
		                                     : "a number",
		            ls->range, got);
	}
	*out = val;
	return 0;
}

static int parse_limits(struct pctx *c, const json_t *obj, const struct jpath *at,
                        struct profile *p)
{
	static const char *const keys[] = {"timeout", "kill_after", "memory", "cpu",    "cpus",
	                                   "pids",    "nofile",     "fsize",  "tmpfs",  "output",
	                                   NULL};
	if (!json_is_object(obj))
		return expected(c, at, obj, "an object");
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)obj, key, v)
	{
		struct jpath kp = {at, key, 0};
		const struct limit_spec *ls = NULL;
		for (size_t i = 0; i < ARRAY_SIZE(limit_specs); i++)
			if (!strcmp(key, limit_specs[i].key))
				ls = &limit_specs[i];
		if (!ls)
			return unknown_key(c, at, key, keys);
		uint64_t val = 0;
		int rc = get_limit(c, v, &kp, ls, &val);
		if (rc < 0)
			return rc;
		if (ls->which >= 0) {
			p->limits[ls->which] = val;
			p->limit_set[ls->which] = true;
		} else if (!strcmp(key, "timeout")) {
			p->timeout_ms = val;
			p->timeout_set = true;
		} else if (!strcmp(key, "kill_after")) {
			p->kill_after_ms = val;
			p->kill_after_set = true;
		} else {
			p->output_cap = val;
			p->output_cap_set = true;
		}
	}
	return 0;
}

static int parse_env_set(struct pctx *c, const json_t *obj, const struct jpath *at,
                         struct profile *p)
{
	if (!json_is_object(obj))
		return expected(c, at, obj, "an object of NAME: \"value\" pairs");
	size_t count = json_object_size(obj);
	if (count > PROFILE_MAX_ITEMS)
		return perr(c, at, false, true, "expected at most %d variables, got %zu",
		            PROFILE_MAX_ITEMS, count);
	struct env_set_entry *list = calloc(count ? count : 1, sizeof(*list));
	if (!list)
		return oom(c);
	p->env_set = list;
	p->n_env_set = 0;
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)obj, key, v)
	{
		struct jpath kp = {at, key, 0};
		if (!env_name_valid(key)) {
			char shown[100];
			quote(shown, sizeof(shown), key, strlen(key), true, false);
			return perr(
			    c, &kp, true, true,
			    "expected a variable name matching [A-Za-z_][A-Za-z0-9_]* (under "
			    "256 bytes), got %s",
			    shown);
		}
		if (!json_is_string(v))
			return expected(c, &kp, v, "a string value");
		struct env_set_entry *e = &list[p->n_env_set];
		if (!(e->name = strdup(key)) || !(e->value = strdup(json_string_value(v)))) {
			free(e->name);
			e->name = NULL;
			return oom(c);
		}
		p->n_env_set++;
	}
	return 0;
}

static int parse_env(struct pctx *c, const json_t *obj, const struct jpath *at, struct profile *p)
{
	static const char *const keys[] = {"allow", "deny", "deny_replace", "set", NULL};
	if (!json_is_object(obj))
		return expected(c, at, obj, "an object");
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)obj, key, v)
	{
		struct jpath kp = {at, key, 0};
		int rc;
		if (!strcmp(key, "allow")) {
			rc = get_list(c, v, &kp, ITEM_GLOB, &p->env_allow, &p->n_env_allow, NULL);
		} else if (!strcmp(key, "deny")) {
			rc = get_list(c, v, &kp, ITEM_GLOB, &p->env_deny, &p->n_env_deny, NULL);
		} else if (!strcmp(key, "deny_replace")) {
			if (!json_is_boolean(v))
				return expected(c, &kp, v, "true or false");
			p->env_deny_set = json_is_true(v);
			rc = 0;
		} else if (!strcmp(key, "set")) {
			rc = parse_env_set(c, v, &kp, p);
		} else {
			rc = unknown_key(c, at, key, keys);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int check_command(struct pctx *c, const json_t *v, const struct jpath *at)
{
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);
	bool ok = n > 0 && n < PROFILE_PATH_MAX && (!strchr(s, '/') || s[0] == '/');
	for (size_t i = 0; ok && i < n; i++)
		ok = (unsigned char)s[i] > ' ' && s[i] != 0x7f;
	if (!ok)
		return expected(c, at, v,
		                "a command name like \"git\" or an absolute path like "
		                "\"/usr/bin/git\", without spaces");
	return 0;
}

static int get_rule(struct pctx *c, const json_t *v, const struct jpath *at, struct cmd_rule *r)
{
	static const char *const keys[] = {"match", "reason", NULL};
	const json_t *match = v, *reason = NULL;
	struct jpath mp = {at, "match", 0};
	const struct jpath *match_at = at;
	if (json_is_object(v)) {
		const char *key;
		json_t *m;
		json_object_foreach((json_t *)v, key, m)
		{
			if (strcmp(key, "match") && strcmp(key, "reason"))
				return unknown_key(c, at, key, keys);
		}
		match = json_object_get(v, "match");
		reason = json_object_get(v, "reason");
		if (!match)
			return perr(
			    c, at, false, true,
			    "missing the required key \"match\" (a command name or an absolute "
			    "path)");
		match_at = &mp;
		if (!json_is_string(match))
			return expected(c, match_at, match, "a string");
		if (reason && !json_is_string(reason)) {
			struct jpath rp = {at, "reason", 0};
			return expected(c, &rp, reason, "a string");
		}
	} else if (!json_is_string(v)) {
		return expected(c, at, v, "a command name, or an object {\"match\", \"reason\"}");
	}
	int rc = check_command(c, match, match_at);
	if (rc < 0)
		return rc;
	if (!(r->match = strdup(json_string_value(match))))
		return oom(c);
	if (reason && !(r->reason = strdup(json_string_value(reason))))
		return oom(c);
	return 0;
}

static int get_rules(struct pctx *c, const json_t *v, const struct jpath *at, struct cmd_rule **out,
                     size_t *n)
{
	if (!json_is_array(v))
		return expected(c, at, v, "an array of commands");
	size_t count = json_array_size(v);
	if (count > PROFILE_MAX_ITEMS)
		return perr(c, at, false, true, "expected at most %d entries, got %zu",
		            PROFILE_MAX_ITEMS, count);
	struct cmd_rule *list = calloc(count ? count : 1, sizeof(*list));
	if (!list)
		return oom(c);
	*out = list;
	*n = 0;
	for (size_t i = 0; i < count; i++) {
		struct jpath ip = {at, NULL, i};
		struct cmd_rule r = {0};
		int rc = get_rule(c, json_array_get(v, i), &ip, &r);
		if (rc < 0) {
			free(r.match);
			free(r.reason);
			return rc;
		}
		bool dup = false;
		for (size_t k = 0; k < *n && !dup; k++)
			dup = !strcmp(list[k].match, r.match);
		if (dup) { /* the first rule (and its reason) stands */
			free(r.match);
			free(r.reason);
			continue;
		}
		list[(*n)++] = r;
	}
	return 0;
}

static int parse_commands(struct pctx *c, const json_t *obj, const struct jpath *at,
                          struct profile *p)
{
	static const char *const keys[] = {"allow", "deny", NULL};
	if (!json_is_object(obj))
		return expected(c, at, obj, "an object");
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)obj, key, v)
	{
		struct jpath kp = {at, key, 0};
		int rc;
		if (!strcmp(key, "allow")) {
			p->cmd_allow_set = true;
			rc = get_rules(c, v, &kp, &p->cmd_allow, &p->n_cmd_allow);
		} else if (!strcmp(key, "deny")) {
			rc = get_rules(c, v, &kp, &p->cmd_deny, &p->n_cmd_deny);
		} else {
			rc = unknown_key(c, at, key, keys);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int parse_redact(struct pctx *c, const json_t *obj, const struct jpath *at,
                        struct profile *p)
{
	static const char *const keys[] = {"strings", "mode", NULL};
	static const char *const modes[] = {"redact", "flag", "off", NULL};
	if (!json_is_object(obj))
		return expected(c, at, obj, "an object");
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)obj, key, v)
	{
		struct jpath kp = {at, key, 0};
		int rc, e;
		if (!strcmp(key, "strings")) {
			rc = get_list(c, v, &kp, ITEM_SECRET, &p->redact_strings, &p->n_redact,
			              NULL);
		} else if (!strcmp(key, "mode")) {
			if ((rc = get_enum(c, v, &kp, modes, &e)) == 0) {
				p->redact_mode_set = true;
				p->redact_mode = e == 0   ? CORRAL_REDACT_ON
				                 : e == 1 ? CORRAL_REDACT_FLAG
				                          : CORRAL_REDACT_OFF;
			}
		} else {
			rc = unknown_key(c, at, key, keys);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int parse_root(struct pctx *c, const json_t *root, struct profile *p)
{
	static const char *const keys[] = {"description", "mode",   "filesystem",
	                                   "network",     "limits", "env",
	                                   "commands",    "redact", NULL};
	static const char *const modes[] = {"required", "auto", "none", NULL};
	static const char *const nets[] = {"none", "host", NULL};
	if (!json_is_object(root)) {
		char got[120];
		describe(root, got, sizeof(got));
		return perr(
		    c, NULL, false, false,
		    "expected a JSON object at the top level (see docs/profile.schema.json), "
		    "got %s",
		    got);
	}
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)root, key, v)
	{
		struct jpath kp = {NULL, key, 0};
		int rc, e;
		if (!strcmp(key, "description")) {
			rc = get_string(c, v, &kp, &p->description);
		} else if (!strcmp(key, "mode")) {
			if ((rc = get_enum(c, v, &kp, modes, &e)) == 0) {
				p->mode_set = true;
				p->mode = e == 0   ? CORRAL_MODE_REQUIRED
				          : e == 1 ? CORRAL_MODE_AUTO
				                   : CORRAL_MODE_NONE;
			}
		} else if (!strcmp(key, "network")) {
			if ((rc = get_enum(c, v, &kp, nets, &e)) == 0) {
				p->net_set = true;
				p->net = e ? CORRAL_NET_HOST : CORRAL_NET_NONE;
			}
		} else if (!strcmp(key, "filesystem")) {
			rc = parse_filesystem(c, v, &kp, p);
		} else if (!strcmp(key, "limits")) {
			rc = parse_limits(c, v, &kp, p);
		} else if (!strcmp(key, "env")) {
			rc = parse_env(c, v, &kp, p);
		} else if (!strcmp(key, "commands")) {
			rc = parse_commands(c, v, &kp, p);
		} else if (!strcmp(key, "redact")) {
			rc = parse_redact(c, v, &kp, p);
		} else {
			rc = unknown_key(c, NULL, key, keys);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- syntax errors --------------------------------------------------------------------- */

/* jansson reports the offset just past the offending token and quotes the token ("... near
 * 'xx'"); point at the token's first byte instead. */
static size_t syntax_offset(const struct pctx *c, const json_error_t *je, const char **tok,
                            size_t *tok_len)
{
	size_t pos = je->position < 0 ? 0 : (size_t)je->position;
	if (pos > c->len)
		pos = c->len;
	const char *near = NULL;
	for (const char *q = strstr(je->text, " near '"); q; q = strstr(q + 1, " near '"))
		near = q;
	size_t tl = strlen(je->text);
	*tok = NULL;
	*tok_len = 0;
	if (near && tl >= 1 && je->text[tl - 1] == '\'' && (size_t)(near - je->text) + 8 <= tl) {
		size_t n = tl - (size_t)(near - je->text) - 8;
		*tok = near + 7;
		*tok_len = n;
		if (n <= pos)
			pos -= n;
	}
	return pos;
}

static int syntax_error(struct pctx *c, const json_error_t *je)
{
	const char *tok;
	size_t tok_len, off = syntax_offset(c, je, &tok, &tok_len);
	char text[200];
	if (!strncmp(je->text, "duplicate object key", 20)) {
		/* Name the member by its path, found by scanning to the duplicate's offset. */
		struct scan sc = {.s = c->text, .len = c->len, .dup_off = off};
		scan_run(&sc);
		free(sc.path.p);
		char shown[160];
		if (sc.dup_path)
			quote(shown, sizeof(shown), sc.dup_path, strlen(sc.dup_path), false, false);
		else
			quote(shown, sizeof(shown), tok ? tok : "", tok_len, false, true);
		free(sc.dup_path);
		return set_error_at(c, off, shown,
		                    "duplicate key; each key may appear only once in an object");
	}
	if (!strncmp(je->text, "end of file expected", 20))
		return set_error_at(c, off, NULL,
		                    "unexpected text after the end of the JSON document");
	quote(text, sizeof(text), je->text, strlen(je->text), false, true);
	char msg[240];
	snprintf(msg, sizeof(msg), "invalid JSON: %s", text);
	return set_error_at(c, off, NULL, msg);
}

/* ---- entry positions ------------------------------------------------------------------- */

/* Line and column of each entry of the array at path (pos[i].index is its array index, in
 * increasing order): one scan for the offsets, one pass for the lines. An entry that cannot be
 * found (it always can, in a document jansson accepted) points at the start. */
static int set_positions(struct pctx *c, const char *path, struct profile_pos *pos, size_t n)
{
	if (!n)
		return 0;
	size_t n_elem = pos[n - 1].index + 1;
	size_t *off = calloc(n_elem, sizeof(*off));
	if (!off)
		return oom(c);
	struct scan sc = {.s = c->text,
	                  .len = c->len,
	                  .dup_off = SIZE_MAX,
	                  .elems_of = path,
	                  .elems_len = strlen(path),
	                  .elem_off = off,
	                  .n_elem = n_elem};
	scan_run(&sc);
	free(sc.path.p);
	size_t at = 0, ln = 1, start = 0;
	for (size_t i = 0; i < n; i++) {
		size_t o = off[pos[i].index];
		if (o < at) { /* not in order: count again from the start */
			at = start = 0;
			ln = 1;
		}
		for (; at < o && at < c->len; at++)
			if (c->text[at] == '\n') {
				ln++;
				start = at + 1;
			}
		pos[i].line = ln > UINT32_MAX ? UINT32_MAX : (unsigned)ln;
		pos[i].col = o - start + 1 > UINT32_MAX ? UINT32_MAX : (unsigned)(o - start + 1);
	}
	free(off);
	return 0;
}

/* ---- entry points ---------------------------------------------------------------------- */

void profile_free(struct profile *p)
{
	if (!p)
		return;
	free(p->name);
	free(p->description);
	char **lists[] = {p->fs_read,   p->fs_write, p->fs_deny,       p->protected_paths,
	                  p->env_allow, p->env_deny, p->redact_strings};
	size_t counts[] = {p->n_read,      p->n_write,    p->n_deny,  p->n_protected,
	                   p->n_env_allow, p->n_env_deny, p->n_redact};
	for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
		for (size_t i = 0; lists[l] && i < counts[l]; i++)
			free(lists[l][i]);
		free(lists[l]);
	}
	for (size_t i = 0; p->env_set && i < p->n_env_set; i++) {
		free(p->env_set[i].name);
		free(p->env_set[i].value);
	}
	free(p->env_set);
	for (size_t i = 0; p->cmd_allow && i < p->n_cmd_allow; i++) {
		free(p->cmd_allow[i].match);
		free(p->cmd_allow[i].reason);
	}
	free(p->cmd_allow);
	for (size_t i = 0; p->cmd_deny && i < p->n_cmd_deny; i++) {
		free(p->cmd_deny[i].match);
		free(p->cmd_deny[i].reason);
	}
	free(p->cmd_deny);
	free(p->read_pos);
	free(p->write_pos);
	free(p->deny_pos);
	free(p->protected_pos);
	memset(p, 0, sizeof(*p));
}

int profile_parse(const char *text, size_t len, const char *origin, struct profile *out,
                  struct corral_error *err)
{
	if (!out || (!text && len))
		return corral_set_error(err, CORRAL_EINVAL, 0, "profile",
		                        "profile: no profile text given");
	memset(out, 0, sizeof(*out));
	if (!text)
		text = "";
	if (!origin)
		origin = "profile";
	struct pctx c = {.text = text, .len = len, .err = err};
	quote(c.origin, sizeof(c.origin), origin, strlen(origin), false, false);

	/* jansson nests up to 2048 levels; a profile needs 4. Refuse deep documents here, unless
	 * the text is already broken before the deep part (then the syntax error comes first). */
	size_t too_deep = depth_check(text, len);
	json_error_t je;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	if (too_deep != SIZE_MAX && (root || je.position < 0 || (size_t)je.position > too_deep)) {
		json_decref(root);
		return set_error_at(&c, too_deep, NULL,
		                    "nesting deeper than 64 levels; a profile needs at most 4");
	}
	if (!root)
		return syntax_error(&c, &je);

	struct profile p = {0};
	int rc = parse_root(&c, root, &p);
	json_decref(root);
	if (rc == 0)
		rc = set_positions(&c, "filesystem.read", p.read_pos, p.n_read);
	if (rc == 0)
		rc = set_positions(&c, "filesystem.write", p.write_pos, p.n_write);
	if (rc == 0)
		rc = set_positions(&c, "filesystem.deny", p.deny_pos, p.n_deny);
	if (rc == 0)
		rc = set_positions(&c, "filesystem.protected", p.protected_pos, p.n_protected);
	if (rc == 0 && !(p.name = strdup(origin)))
		rc = oom(&c);
	if (rc < 0) {
		profile_free(&p);
		return rc;
	}
	*out = p;
	return 0;
}

int profile_load_file(const char *path, struct profile *out, struct corral_error *err)
{
	if (out)
		memset(out, 0, sizeof(*out));
	if (!path || !*path || !out)
		return corral_set_error(err, CORRAL_EINVAL, 0, "profile", "profile: no path given");
	autoclose int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT)
			return corral_set_error(
			    err, CORRAL_EINVAL, ENOENT, "profile",
			    "profile: %s: no such file; give a builtin name "
			    "(default, readonly, strict, network) or a path to a JSON "
			    "profile",
			    path);
		return corral_set_error(err, CORRAL_ESYS, errno, "profile",
		                        "profile: %s: cannot open: %s", path, strerror(errno));
	}
	autofree char *buf = malloc(PROFILE_MAX_BYTES + 1);
	if (!buf)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "profile",
		                        "profile: %s: out of memory", path);
	size_t n = 0;
	while (n <= PROFILE_MAX_BYTES) {
		ssize_t r = read(fd, buf + n, PROFILE_MAX_BYTES + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return corral_set_error(err, CORRAL_ESYS, errno, "profile",
			                        "profile: %s: cannot read: %s", path,
			                        strerror(errno));
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > PROFILE_MAX_BYTES)
		return corral_set_error(
		    err, CORRAL_EINVAL, EFBIG, "profile",
		    "profile: %s: larger than the 1 MiB limit for profile files", path);
	return profile_parse(buf, n, path, out, err);
}

static char **copy_list(const char *const *src, size_t *n)
{
	size_t count = 0;
	while (src[count])
		count++;
	char **list = calloc(count + 1, sizeof(*list));
	if (!list)
		return NULL;
	for (*n = 0; *n < count; (*n)++) {
		if (!(list[*n] = strdup(src[*n]))) {
			for (size_t i = 0; i < *n; i++)
				free(list[i]);
			free(list);
			*n = 0;
			return NULL;
		}
	}
	return list;
}

static const char *const builtin_descriptions[] = {
    "The workspace read-write, the rest of the system read-only, no network, the protected "
    "dotfiles (git hooks and config, shell startup files, editor and agent settings) "
    "read-only, credentials filtered from the environment, a 60 s timeout.",
    "Like default, but the workspace is read-only too (writes go only to the private /tmp): "
    "for review, audit and analysis.",
    "Like default with a minimal /etc and tight limits: 30 s timeout, 30 s CPU, 512 MiB "
    "memory, 128 processes, 256 open files, files up to 64 MiB, a 64 MiB /tmp and 256 KiB of "
    "output per stream.",
    "NETWORK ACCESS: the sandbox shares the host's network, so the command can reach the "
    "internet, the local network and services listening on the host's loopback "
    "(127.0.0.1). Otherwise like default.",
};

int profile_builtin(const char *name, struct profile *out, struct corral_error *err)
{
	if (out)
		memset(out, 0, sizeof(*out));
	int which = -1;
	for (int i = 0; name && profile_builtin_names[i]; i++)
		if (!strcmp(name, profile_builtin_names[i]))
			which = i;
	if (which < 0 || !out) {
		char shown[100], hint[64] = "";
		quote(shown, sizeof(shown), name ? name : "", name ? strlen(name) : 0, true, false);
		const char *s = name ? suggest(name, profile_builtin_names) : NULL;
		if (s)
			snprintf(hint, sizeof(hint), " (did you mean \"%s\"?)", s);
		return corral_set_error(err, CORRAL_EINVAL, 0, "profile",
		                        "profile: unknown builtin profile %s%s; expected one of "
		                        "default, readonly, strict, network",
		                        shown, hint);
	}
	struct profile p = {0};
	p.name = strdup(name);
	p.description = strdup(builtin_descriptions[which]);
	p.protected_paths = copy_list(policy_default_protected, &p.n_protected);
	p.env_deny = copy_list(policy_default_env_deny, &p.n_env_deny);
	if (!p.name || !p.description || !p.protected_paths || !p.env_deny) {
		profile_free(&p);
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "profile",
		                        "profile: out of memory");
	}
	p.protected_set = true;
	p.env_deny_set = true;
	p.mode_set = true;
	p.mode = CORRAL_MODE_REQUIRED;
	p.net_set = true;
	p.net = which == 3 ? CORRAL_NET_HOST : CORRAL_NET_NONE;
	p.workspace_access = which == 1 ? 1 : 2;
	p.timeout_set = true;
	p.timeout_ms = 60000;
	if (which == 2) {
		p.etc_minimal = true;
		p.timeout_ms = 30000;
		static const struct {
			enum corral_limit which;
			uint64_t value;
		} strict[] = {
		    {CORRAL_LIMIT_CPU_S, 30},          {CORRAL_LIMIT_MEMORY, 512ULL << 20},
		    {CORRAL_LIMIT_PIDS, 128},          {CORRAL_LIMIT_NOFILE, 256},
		    {CORRAL_LIMIT_FSIZE, 64ULL << 20}, {CORRAL_LIMIT_TMPFS, 64ULL << 20},
		};
		for (size_t i = 0; i < ARRAY_SIZE(strict); i++) {
			p.limits[strict[i].which] = strict[i].value;
			p.limit_set[strict[i].which] = true;
		}
		p.output_cap_set = true;
		p.output_cap = 256 << 10;
	}
	*out = p;
	return 0;
}
