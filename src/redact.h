/* Secret redaction over output streams. Pure code (no I/O), streaming-safe: a secret split
 * across chunks is still caught because the stream holds back the last bytes that could be
 * part of a secret until the next chunk (or the end) decides; when the input pauses, the
 * caller's redact_stream_release() lets out what no later chunk can change. Internal. */
#ifndef CORRAL_REDACT_H
#define CORRAL_REDACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum redact_mode {
	REDACT_REDACT = 0, /* replace each secret with [REDACTED:<kind>] (the default) */
	REDACT_FLAG = 1,   /* leave the bytes, count and report what was found */
	REDACT_OFF = 2,    /* do nothing */
};

enum redact_kind {
	RK_ENV_VALUE = 0,    /* the exact value of an environment variable the policy withheld */
	RK_AWS_ACCESS_KEY,   /* AKIA/ASIA... */
	RK_AWS_SECRET,       /* 40 base64 chars after aws_secret_access_key (or similar) */
	RK_PEM_PRIVATE_KEY,  /* -----BEGIN ... PRIVATE KEY----- ... -----END ... PRIVATE KEY----- */
	RK_GITHUB,           /* ghp_, gho_, ghu_, ghs_, ghr_, github_pat_ */
	RK_GITLAB,           /* glpat- */
	RK_SLACK,            /* xoxb-, xoxp-, xoxa-, xoxr-, xoxs-, hooks.slack.com/services/... */
	RK_OPENAI,           /* sk-... (sk-proj-..., sk-svcacct-...) */
	RK_ANTHROPIC,        /* sk-ant-... */
	RK_STRIPE,           /* sk_live_, rk_live_, sk_test_ */
	RK_JWT,              /* eyJ...\.eyJ...\.sig */
	RK_URL_CREDENTIALS,  /* scheme://user:password@host */
	RK_CUSTOM,           /* strings the profile adds */
	RK__COUNT
};

const char *redact_kind_name(enum redact_kind k); /* "env_value", "aws_access_key", ... */

struct redact_stats {
	uint64_t total;
	uint64_t by_kind[RK__COUNT];
};

struct redactor;
/* Compile the detectors once. values: exact strings to scrub (withheld env values; values
 * shorter than 6 bytes are ignored to avoid scrubbing common words — documented); custom:
 * extra exact strings (corral_config_add_redaction). Both are copied. NULL on out-of-memory. */
struct redactor *redactor_new(enum redact_mode mode, const char *const *values, size_t n_values,
                              const char *const *custom, size_t n_custom);
void redactor_free(struct redactor *r);
/* The anchor scan uses AVX2 where the CPU has it (the default); off: the portable scalar
 * scan. Both give the same anchors; the tests and the fuzzer compare them. Returns whether
 * the vector scan is in use. */
bool redactor_use_simd(struct redactor *r, bool on);
enum redact_mode redactor_mode(const struct redactor *r);

/* One stream (stdout or stderr of one run). emit receives the bytes that are final, in
 * order; at most redact_holdback() bytes are held back between feeds. */
typedef void (*redact_emit_fn)(void *ud, const char *buf, size_t len);
struct redact_stream;
struct redact_stream *redact_stream_new(const struct redactor *r, redact_emit_fn emit, void *ud);
void redact_stream_feed(struct redact_stream *s, const char *buf, size_t len);
/* End of stream: release what is held back. */
void redact_stream_finish(struct redact_stream *s);
/* The input has gone quiet (the caller's timer, e.g. 100 ms without output): emit what no
 * later input can turn into part of a secret. Held back stays only what still could be: a
 * run that could grow into a token, a literal prefix ("ghp_", "-----BEGIN ", "sk"), a PEM
 * block waiting for its END, a URL's user:password part, an exact string's prefix. The
 * stream's output is the same, byte for byte, with releases at any points or none; only
 * its timing changes. */
void redact_stream_release(struct redact_stream *s);
/* Input bytes not emitted yet (in REDACT mode; 0 otherwise): worth a release when idle. */
size_t redact_stream_held(const struct redact_stream *s);
const struct redact_stats *redact_stream_stats(const struct redact_stream *s);
void redact_stream_free(struct redact_stream *s);
size_t redact_holdback(const struct redactor *r);

/* Whole-buffer convenience (malloc'ed, NUL-terminated result; stats may be NULL). */
char *redact_buffer(const struct redactor *r, const char *buf, size_t len, size_t *out_len,
                    struct redact_stats *stats);

#endif
