/* libFuzzer target for the redactor (src/redact.c). For any input, cut anywhere:
 * - a stream fed the two chunks (and, for small inputs, one byte at a time), with or without
 *   idle releases between the feeds, yields exactly redact_buffer() of the whole, with the
 *   same stats;
 * - in REDACT mode no withheld value or custom string survives, nor a secret the harness
 *   planted (unless the fuzzer's own bytes already held a copy of it that a detector may
 *   rightly skip, e.g. inside an identifier); FLAG and OFF leave the bytes alone, FLAG counts
 *   as REDACT does and OFF counts nothing;
 * - the AVX2 anchor scan (where the CPU has it) and the portable scalar one give the same
 *   output and counts.
 *
 * Input: byte 0 = mode (bits 0-1: 0,1 redact, 2 flag, 3 off) and what to plant (bits 2-5,
 * 15: nothing);
 * bytes 1-2 = where to cut; byte 3 = where to plant; the rest = the output to redact.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc \
 *     tests/fuzz/fuzz_redact.c src/redact.c -o /tmp/fuzz_redact
 *   /tmp/fuzz_redact -dict=tests/fuzz/redact.dict tests/fuzz/corpus/redact
 *
 * Build it a second time with tiny bounds (add -DTOKEN_BOUND=48u -DPEM_MAX=300u
 * -DPATTERN_MAX=16u -DSTEP=7u) to reach the open intervals, the long-value pieces and the
 * window compaction with small inputs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "redact.h"

#include <stdlib.h>
#include <string.h>

#define ENV1 "hunter2-s3cr3t\x01\xfe=x"
#define ENV2 "tok_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define CUSTOM1 "corp-XYZZY"

/* planted secret and the part of it that must not come out */
static const struct {
	const char *text, *core;
} plants[] = {
    {" " ENV1 " ", ENV1},
    {" AKIAIOSFODNN7EXAMPLE ", "AKIAIOSFODNN7EXAMPLE"},
    {" aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY ",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
    {"\n-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4\n"
     "-----END RSA PRIVATE KEY-----\n",
     "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4"},
    {" ghp_1234567890abcdefghijklmnopqrstuvwxyz ", "ghp_1234567890abcdefghijklmnopqrstuvwxyz"},
    {" github_pat_11ABCDEFG0123456789_abcdefghijklmnop ",
     "github_pat_11ABCDEFG0123456789_abcdefghijklmnop"},
    {" glpat-abcdefghij0123456789 ", "glpat-abcdefghij0123456789"},
    {" xoxb-123456789012-1234567890123-AbCdEfGhIjKl ",
     "xoxb-123456789012-1234567890123-AbCdEfGhIjKl"},
    {" https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXX ", "T000/B000/XXXXXXXXXXXX"},
    {" sk-proj-abcdefghijklmnopqrstuvwxyz0123 ", "sk-proj-abcdefghijklmnopqrstuvwxyz0123"},
    {" sk-ant-api03-abcdefghijklmnopqrstuvwxyz ", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz"},
    {" sk_live_51H8abcdefghijklmnopqrstu ", "sk_live_51H8abcdefghijklmnopqrstu"},
    {" eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N ",
     "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N"},
    {" postgres://admin:Pl4ntedPassw0rd@db:5432 ", "Pl4ntedPassw0rd"},
    {" " CUSTOM1 " ", CUSTOM1},
};

struct sink {
	char *p;
	size_t len, cap;
};

static void sink_put(void *ud, const char *b, size_t n)
{
	struct sink *s = ud;
	if (s->len + n > s->cap) {
		s->cap = (s->len + n) * 2;
		s->p = realloc(s->p, s->cap);
		if (!s->p)
			abort();
	}
	memcpy(s->p + s->len, b, n);
	s->len += n;
}

/* rel: an idle release (redact_stream_release) after every rel-th feed; 0: none. */
static void check_stream(const struct redactor *r, const uint8_t *in, size_t n, size_t cut,
                         size_t step, size_t rel, const char *want, size_t want_len,
                         const struct redact_stats *want_st)
{
	struct sink k = {0};
	struct redact_stream *s = redact_stream_new(r, sink_put, &k);
	if (!s)
		abort();
	if (step) {
		for (size_t i = 0, f = 1; i < n; i += step, f++) {
			redact_stream_feed(s, (const char *)in + i, n - i < step ? n - i : step);
			if (rel && f % rel == 0)
				redact_stream_release(s);
		}
	} else {
		redact_stream_feed(s, (const char *)in, cut);
		if (rel)
			redact_stream_release(s);
		redact_stream_feed(s, (const char *)in + cut, n - cut);
	}
	redact_stream_finish(s);
	if (k.len != want_len || (want_len && memcmp(k.p, want, want_len)))
		__builtin_trap();
	if (memcmp(redact_stream_stats(s), want_st, sizeof(*want_st)))
		__builtin_trap();
	redact_stream_free(s);
	free(k.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct redactor *rs[3], *scalar;
	if (!rs[0]) {
		const char *vals[] = {ENV1, ENV2, "short"};
		const char *custom[] = {CUSTOM1, "abc"};
		for (int m = 0; m < 3; m++)
			rs[m] = redactor_new((enum redact_mode)m, vals, 3, custom, 2);
		scalar = redactor_new(REDACT_REDACT, vals, 3, custom, 2);
		if (!scalar || redactor_use_simd(scalar, false))
			abort();
	}
	if (size < 4)
		return 0;
	int mode = (data[0] & 3) < 2    ? REDACT_REDACT
	           : (data[0] & 3) == 2 ? REDACT_FLAG
	                                : REDACT_OFF;
	size_t pick = (size_t)(data[0] >> 2) & 15;
	const char *plant = pick < sizeof(plants) / sizeof(plants[0]) ? plants[pick].text : "";
	const char *core = plant[0] ? plants[pick].core : NULL;
	const uint8_t *body = data + 4;
	size_t blen = size - 4, plen = strlen(plant), at = (size_t)data[3] * blen / 256;

	size_t n = blen + plen;
	uint8_t *in = malloc(n ? n : 1);
	if (!in)
		abort();
	memcpy(in, body, at);
	memcpy(in + at, plant, plen);
	memcpy(in + at + plen, body + at, blen - at);
	size_t cut = ((size_t)data[1] << 8 | data[2]) % (n + 1);

	const struct redactor *r = rs[mode];
	struct redact_stats st;
	size_t ol;
	char *out = redact_buffer(r, (const char *)in, n, &ol, &st);
	if (!out || out[ol] != '\0')
		__builtin_trap();
	check_stream(r, in, n, cut, 0, 0, out, ol, &st);
	check_stream(r, in, n, cut, 0, 1, out, ol, &st);
	if (n <= 1024) {
		check_stream(r, in, n, 0, 1, 0, out, ol, &st);
		check_stream(r, in, n, 0, 1, 1 + (size_t)(data[1] & 3), out, ol, &st);
	}

	if (mode == REDACT_REDACT) {
		if (memmem(out, ol, ENV1, strlen(ENV1)) || memmem(out, ol, ENV2, strlen(ENV2)) ||
		    memmem(out, ol, CUSTOM1, strlen(CUSTOM1)))
			__builtin_trap();
		if (core && !memmem(body, blen, core, strlen(core)) &&
		    memmem(out, ol, core, strlen(core)))
			__builtin_trap();
		struct redact_stats sst; /* the scalar scan finds the same */
		size_t sl;
		char *so = redact_buffer(scalar, (const char *)in, n, &sl, &sst);
		if (!so || sl != ol || memcmp(so, out, ol) || memcmp(&sst, &st, sizeof(st)))
			__builtin_trap();
		free(so);
		struct redact_stats fst; /* FLAG counts exactly what REDACT replaces */
		free(redact_buffer(rs[REDACT_FLAG], (const char *)in, n, NULL, &fst));
		if (memcmp(&fst, &st, sizeof(st)))
			__builtin_trap();
	} else {
		if (ol != n || (n && memcmp(out, in, n)))
			__builtin_trap();
		if (mode == REDACT_OFF && st.total)
			__builtin_trap();
	}
	free(out);
	free(in);
	return 0;
}
