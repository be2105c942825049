/* Secret redaction over output streams: hand-written matchers, one pass, bounded memory.
 *
 * Model. A cheap bigram filter picks the byte positions ("anchors") where a detector could
 * start. A matcher looks at a bounded stretch of input after its anchor and answers yes (with
 * an interval to redact), no, or "more" (the answer depends on bytes not seen yet: the stream
 * then holds back from that anchor). Every anchor is evaluated, including anchors inside an
 * interval already found, and the redacted set is the union of all intervals: a secret that
 * overlaps another (an env value inside a URL, a token cut by a longer env value) is never
 * partly revealed. Each maximal piece of the union is replaced once and counted once, named
 * after the match that starts it: at one anchor the longest match (same length: exact strings
 * first, then the detector order of eval()); an interval found from an earlier anchor (a URL
 * password, an AWS secret value after its key name) names the piece it starts. Because every
 * answer depends on the input bytes only, never on where the chunks were cut, a stream yields
 * exactly what redact_buffer() yields on the concatenation, for any chunking. Liveness: a last
 * byte that no bigram starts with is decided at once (a line's newline is never held), and an
 * idle release (redact_stream_release) emits the plain bytes up to the lowest start any
 * undecided or unseen anchor could still give, which no later input can change.
 *
 * Bounds (fixed, so a stream's memory does not grow with its input: one window of
 * redact_holdback() + LOOKBEHIND + STEP bytes, about 128 KiB, allocated when it is created):
 * - A token run is examined for TOKEN_BOUND bytes. A longer run is still redacted whole: the
 *   interval stays "open" and grows while the run goes on, however long it is.
 * - A PEM BEGIN looks for its END within PEM_MAX bytes. If the stream ends first, everything
 *   from BEGIN to the end is redacted (fail closed). If PEM_MAX bytes pass without an END, the
 *   first PEM_MAX bytes are redacted and the block stays open: the output stays redacted until
 *   an END trailer comes, however far away, or the stream ends. Only a pending BEGIN makes a
 *   stream hold back that much; otherwise it holds back at most TOKEN_LOOKAHEAD (a JWT's).
 * - Exact strings longer than PATTERN_MAX are matched as overlapping PATTERN_MAX pieces (any
 *   piece found is redacted, and a whole occurrence is one redaction).
 * - Withheld values shorter than VALUE_MIN and custom strings shorter than CUSTOM_MIN bytes are
 *   ignored, so common words are not scrubbed everywhere.
 * Time is linear: each matcher's run scan is cached per call site (the anchors asking for it
 * come in increasing order), the END search is shared by all BEGINs and resumes where it
 * stopped, an open run followed to its end is not followed again, and an exact-string check
 * that needs more input is not retried before that input has arrived. The exact strings are
 * checked by first-byte index and memcmp, so the cost per anchor is bounded by the total
 * length of the strings sharing its first two bytes (documented, not quadratic in the input).
 * The anchor scan takes 32 positions at a time with AVX2 where the CPU has it (a nibble
 * pre-filter of the bigram set, then the exact bitmap; build_prefilter()), else 4 at a time.
 * In-process, 64 KiB feeds on the 2-core CI machine (2026-11-27): zeros 11 GB/s, prose
 * 1.6 GB/s, base64 2.9 GB/s, C source 2.0 GB/s (scalar: 2.3, 1.1, 1.1, 1.4). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include "redact.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The AVX2 anchor scan (x86-64, chosen at run time); -DCORRAL_NO_SIMD builds without it. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(CORRAL_NO_SIMD)
#include <immintrin.h>
#define REDACT_AVX2 1
#if defined(__GLIBC__) && __has_include(<sys/platform/x86.h>)
#include <sys/platform/x86.h>
#endif
#endif

#ifdef REDACT_AVX2
/* Whether the CPU and the kernel let AVX2 run. glibc's answer (2.33 and later) reads what its
 * start-up found already; GCC's __builtin_cpu_supports links libgcc's own detection, which
 * runs at every program start, redaction or not, and executes CPUID about ten times: each is
 * a trap to the hypervisor in a virtual machine (3.5 us on the machine of DESIGN §18). */
static bool cpu_has_avx2(void)
{
#ifdef CPU_FEATURE_ACTIVE
	return CPU_FEATURE_ACTIVE(AVX2);
#else
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2");
#endif
}
#endif

/* The first four can be made tiny at build time (-DTOKEN_BOUND=48 ...) so the fuzzer reaches
 * the bounds, the open intervals and the window compaction with small inputs. */
#ifndef TOKEN_BOUND
#define TOKEN_BOUND 4096u /* token run examined before the interval goes open */
#endif
#ifndef PEM_MAX
#define PEM_MAX 65536u /* an END must start this close to its BEGIN, or the block goes open */
#endif
#ifndef PATTERN_MAX
#define PATTERN_MAX 4096u /* longer exact strings become overlapping pieces */
#endif
#ifndef STEP
#define STEP 65536u /* window room for new input on top of the holdback */
#endif
#define PEM_LABEL_MAX 64u /* "RSA PRIVATE KEY" and the like */
#define VALUE_MIN 6u
#define CUSTOM_MIN 4u
#define LOOKBEHIND 64u /* input kept before the scan position: word boundary, URL scheme */
#define SCHEME_MAX 32u /* how far back a URL scheme is looked for (< LOOKBEHIND) */
#define SEP_MAX 16u    /* blanks around the = or : after aws_secret_access_key */
/* The furthest any matcher looks past its anchor: */
#define PEM_LOOKAHEAD (PEM_MAX + 2 * (PEM_LABEL_MAX + 16))
#define TOKEN_LOOKAHEAD (3 * (TOKEN_BOUND + 1) + 64)

/* Character classes, as bits of redactor.cls[byte]. */
enum {
	C_WORD = 1 << 0,    /* [A-Za-z0-9_]: a token needs a non-word byte before it */
	C_ALNUM = 1 << 1,   /* [A-Za-z0-9] */
	C_ALNUM_ = 1 << 2,  /* [A-Za-z0-9_] */
	C_TOK = 1 << 3,     /* [A-Za-z0-9_-] */
	C_SLACK = 1 << 4,   /* [A-Za-z0-9-] */
	C_UPPER = 1 << 5,   /* [A-Z0-9] */
	C_B64 = 1 << 6,     /* [A-Za-z0-9/+] */
	C_HOOK = 1 << 7,    /* [A-Za-z0-9_/] */
	C_USER = 1 << 8,    /* URL user: not ':', '@', '/', space or control */
	C_PASS = 1 << 9,    /* URL password: not '@', '/', space or control */
	C_SCHEME = 1 << 10, /* [A-Za-z0-9+.-] */
	C_LABEL = 1 << 11,  /* [A-Z0-9 ]: PEM label */
	C_ALPHA = 1 << 12,
};

/* Run-scan cache slots, one per call site (see run()). */
enum {
	RS_AWS_ID,
	RS_AWS_SECRET,
	RS_GH,
	RS_GHPAT,
	RS_GLPAT,
	RS_XOX,
	RS_HOOK,
	RS_SK,
	RS_SKANT,
	RS_STRIPE,
	RS_JWT1,
	RS_JWT2,
	RS_JWT3,
	RS_USER,
	RS_PASS,
	RS__COUNT
};

enum { OPEN_NONE = 0, OPEN_CLASS, OPEN_PEM };

static const char *const kind_names[RK__COUNT] = {
    [RK_ENV_VALUE] = "env_value",
    [RK_AWS_ACCESS_KEY] = "aws_access_key",
    [RK_AWS_SECRET] = "aws_secret",
    [RK_PEM_PRIVATE_KEY] = "pem_private_key",
    [RK_GITHUB] = "github",
    [RK_GITLAB] = "gitlab",
    [RK_SLACK] = "slack",
    [RK_OPENAI] = "openai",
    [RK_ANTHROPIC] = "anthropic",
    [RK_STRIPE] = "stripe",
    [RK_JWT] = "jwt",
    [RK_URL_CREDENTIALS] = "url_credentials",
    [RK_CUSTOM] = "custom",
};

struct pat {
	const uint8_t *b;
	uint32_t len;
	uint8_t kind;
};

struct redactor {
	enum redact_mode mode;
	size_t holdback;
	struct pat *pats; /* sorted by first byte, then longest first */
	size_t npats;
	uint32_t first[256], count[256];
	uint8_t *pool; /* the copied strings */
	uint16_t cls[256];
	uint64_t bigram[65536 / 64]; /* (byte, next byte) pairs that can start a match */
	/* The bigram set widened to 8 buckets of (first byte, second byte) nibble products, for
	 * a vector pre-filter (build_prefilter()): low and high nibble of the first byte, then of
	 * the second. A superset of the bigrams; every candidate is checked in the bitmap. */
	uint8_t pre[4][16];
	bool simd; /* the CPU has AVX2 and the pre-filter is built */
	char repl[RK__COUNT][32];
	uint8_t repl_len[RK__COUNT];
};

struct runc {
	uint64_t start, front; /* [start, front) is all of the class */
	bool valid, fin;       /* fin: front is the end of the run */
};

struct ival {
	uint64_t s, e;
	int kind;
};

struct openc {
	int mode;
	uint16_t cls;
	uint64_t start, front; /* OPEN_CLASS: [start, front) is of cls; OPEN_PEM: no END before */
};

/* What the END searches have learnt, whichever BEGIN or open block asked: no END trailer
 * starts in [lo, hi); when found, one does at hi and ends at fe. Anchors ask in increasing
 * order, so many BEGINs share one scan instead of each searching PEM_MAX bytes. */
struct pemc {
	bool valid, found;
	uint64_t lo, hi, fe;
};

struct match {
	uint64_t s, e;
	int kind, open; /* open: the interval goes on past e (OPEN_CLASS of cls, or OPEN_PEM) */
	uint16_t cls;
};

/* Never more than one AWS-secret and one URL interval wait ahead of the scan position (their
 * gaps cannot contain another anchor of the same detector); 4 leaves room. */
#define PEND_MAX 4
/* Open intervals are deduplicated by (mode, class): at most 7 distinct. */
#define OPEN_MAX 8

/* All the decision state of one stream. Positions are absolute stream offsets. */
struct scan {
	const struct redactor *r;
	redact_emit_fn emit; /* NULL: count only */
	void *ud;
	uint64_t scan; /* anchors before this have been evaluated */
	uint64_t out;  /* output produced up to here */
	uint64_t need; /* nothing new can be decided before the input reaches this */
	bool comp_on;  /* comp: the redacted interval being built; its marker is out */
	struct ival comp;
	struct ival pend[PEND_MAX]; /* intervals found that start after scan, sorted */
	int npend;
	struct openc open[OPEN_MAX];
	int nopen;
	struct runc rc[RS__COUNT];
	struct pemc pc;
	struct runc oc[16]; /* per class (bit index): the last open run found to end */
	bool pat_memo;      /* exact strings at pat_anchor undecided before pat_need */
	uint64_t pat_anchor, pat_need;
	struct redact_stats st;
};

struct view {
	const uint8_t *p; /* p[0] is the byte at offset base */
	uint64_t base, end;
	bool eof; /* end is the end of the stream */
};

struct ctx {
	struct scan *s;
	const struct view *v;
	const struct redactor *r;
	uint64_t need;
};

enum { NO = 0, YES = 1, MORE = 2 };
enum { R_END, R_LONG, R_MORE };
enum { F_FOUND, F_NONE, F_MORE };

const char *redact_kind_name(enum redact_kind k)
{
	return (unsigned)k < RK__COUNT ? kind_names[k] : "unknown";
}

static inline uint8_t at(const struct view *v, uint64_t pos)
{
	return v->p[pos - v->base];
}

/* The answer needs input up to `need`: MORE, or NO when the stream has ended. */
static int more(struct ctx *c, uint64_t need)
{
	if (c->v->eof)
		return NO;
	if (need < c->need)
		c->need = need;
	return MORE;
}

static int have(struct ctx *c, uint64_t upto)
{
	return upto <= c->v->end ? YES : more(c, upto);
}

/* The byte at pos is one of the n bytes of set: YES, NO, or MORE when it has not come yet. */
static int byte_in(struct ctx *c, uint64_t pos, const char *set, size_t n)
{
	if (pos >= c->v->end)
		return more(c, pos + 1);
	return memchr(set, at(c->v, pos), n) ? YES : NO;
}

/* Literal at pos; fold: ASCII case-insensitive (s is lowercase). A byte that differs decides
 * NO at once, so the answer is asked for again as soon as the next byte comes. */
static int lit(struct ctx *c, uint64_t pos, const char *s, size_t n, bool fold)
{
	const struct view *v = c->v;
	for (size_t i = 0; i < n; i++) {
		if (pos + i >= v->end)
			return more(c, pos + i + 1);
		uint8_t b = at(v, pos + i);
		if (fold && b >= 'A' && b <= 'Z')
			b += 'a' - 'A';
		if (b != (uint8_t)s[i])
			return NO;
	}
	return YES;
}

static bool starts_word(const struct ctx *c, uint64_t q)
{
	return q == 0 || !(c->r->cls[at(c->v, q - 1)] & C_WORD);
}

/* The run of class `cls` from `from`: R_END with *end when it ends within TOKEN_BOUND bytes,
 * R_LONG when it is longer, R_MORE when the input seen so far cannot tell. The anchors that use
 * a slot come in increasing order, so resuming from the cached front keeps this linear. */
static int run(struct ctx *c, int slot, uint16_t cls, uint64_t from, uint64_t *end)
{
	const struct view *v = c->v;
	struct runc *rc = &c->s->rc[slot];
	uint64_t limit = from + TOKEN_BOUND + 1, x;
	if (rc->valid && from >= rc->start && from <= rc->front) {
		x = rc->front;
	} else {
		*rc = (struct runc){.start = from, .front = from, .valid = true};
		x = from;
	}
	if (!rc->fin) {
		uint64_t stop = v->end < limit ? v->end : limit;
		while (x < stop && (c->r->cls[at(v, x)] & cls))
			x++;
		rc->front = x;
		rc->fin = x < stop || (x == v->end && v->eof);
	}
	x = rc->front;
	if (rc->fin) {
		if (x - from > TOKEN_BOUND)
			return R_LONG;
		*end = x;
		return R_END;
	}
	if (x >= limit)
		return R_LONG;
	more(c, x + 1);
	return R_MORE;
}

/* prefix + maximal run of cls (at least min bytes); a run beyond TOKEN_BOUND goes open. */
static int token(struct ctx *c, uint64_t q, unsigned plen, uint16_t cls, unsigned min, int slot,
                 int kind, struct match *m)
{
	uint64_t e;
	switch (run(c, slot, cls, q + plen, &e)) {
	case R_MORE:
		return MORE;
	case R_LONG:
		*m = (struct match){q, q + plen + TOKEN_BOUND, kind, OPEN_CLASS, cls};
		return YES;
	}
	if (e - (q + plen) < min)
		return NO;
	*m = (struct match){q, e, kind, OPEN_NONE, 0};
	return YES;
}

/* ---- detectors ------------------------------------------------------------------------- */

static int m_pattern(struct ctx *c, uint64_t q, struct match *m)
{
	const struct view *v = c->v;
	struct scan *s = c->s;
	if (s->pat_memo && s->pat_anchor == q && v->end < s->pat_need && !v->eof)
		return more(c, s->pat_need);
	uint8_t b = at(v, q);
	uint64_t avail = v->end - q, need = UINT64_MAX;
	const uint8_t *here = v->p + (q - v->base);
	const struct pat *p = c->r->pats + c->r->first[b];
	for (uint32_t i = 0; i < c->r->count[b]; i++, p++) {
		if (avail >= 2 && p->b[1] != here[1])
			continue;
		if (p->len <= avail) {
			if (memcmp(here, p->b, p->len))
				continue;
			if (need != UINT64_MAX) /* a longer one is still undecided */
				break;
			*m = (struct match){q, q + p->len, p->kind, OPEN_NONE, 0};
			return YES;
		}
		if (!v->eof && !memcmp(here, p->b, avail) && q + p->len < need)
			need = q + p->len;
	}
	if (need == UINT64_MAX)
		return NO;
	s->pat_memo = true;
	s->pat_anchor = q;
	s->pat_need = need;
	return more(c, need);
}

static int m_aws_id(struct ctx *c, uint64_t q, struct match *m)
{
	static const char ids[][4] = {"AKIA", "ASIA", "AGPA", "AIDA",
	                              "AROA", "ANPA", "ANVA", "AIPA"};
	if (!starts_word(c, q))
		return NO;
	int r = NO;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]) && r != YES; i++) {
		int k = lit(c, q, ids[i], 4, false);
		if (k != NO)
			r = k;
	}
	if (r != YES)
		return r;
	return token(c, q, 4, C_UPPER, 16, RS_AWS_ID, RK_AWS_ACCESS_KEY, m);
}

/* Blanks (at most SEP_MAX); *b gets the byte after them. */
static int blanks(struct ctx *c, uint64_t *p, uint8_t *b)
{
	for (unsigned n = 0;; n++) {
		int r = have(c, *p + 1);
		if (r != YES)
			return r;
		*b = at(c->v, *p);
		if (*b != ' ' && *b != '\t')
			return YES;
		if (n == SEP_MAX)
			return NO;
		(*p)++;
	}
}

/* aws_secret[_access_key|_key] ["'] = or : ["'] then 40+ of [A-Za-z0-9/+]; any case. The
 * interval is the value only, so it starts after the anchor. */
static int m_aws_secret(struct ctx *c, uint64_t q, struct match *m)
{
	uint64_t p = q + 10, e;
	uint8_t b;
	int r = lit(c, q, "aws_secret", 10, true);
	if (r != YES)
		return r;
	if ((r = lit(c, p, "_access_key", 11, true)) == YES)
		p += 11;
	else if (r == NO && (r = lit(c, p, "_key", 4, true)) == YES)
		p += 4;
	if (r == MORE || (r = have(c, p + 1)) != YES)
		return r;
	if (at(c->v, p) == '"' || at(c->v, p) == '\'')
		p++;
	if ((r = blanks(c, &p, &b)) != YES)
		return r;
	if (b != '=' && b != ':')
		return NO;
	p++;
	if ((r = blanks(c, &p, &b)) != YES)
		return r;
	if (b == '"' || b == '\'')
		p++;
	switch (run(c, RS_AWS_SECRET, C_B64, p, &e)) {
	case R_MORE:
		return MORE;
	case R_LONG:
		return NO;
	}
	if (e - p < 40)
		return NO;
	*m = (struct match){p, e, RK_AWS_SECRET, OPEN_NONE, 0};
	return YES;
}

static bool ends_with(const struct view *v, uint64_t s, uint64_t n, const char *suf)
{
	size_t k = strlen(suf);
	return n >= k && !memcmp(v->p + (s + n - k - v->base), suf, k);
}

/* "<label>-----" at p, the label ending in PRIVATE KEY (or PRIVATE KEY BLOCK, for PGP). */
static int pem_label(struct ctx *c, uint64_t p, uint64_t *end)
{
	const struct view *v = c->v;
	uint64_t x = p;
	for (;;) {
		if (x >= v->end)
			return more(c, x + 1);
		if (!(c->r->cls[at(v, x)] & C_LABEL))
			break;
		if (x - p >= PEM_LABEL_MAX)
			return NO;
		x++;
	}
	if (!ends_with(v, p, x - p, "PRIVATE KEY") && !ends_with(v, p, x - p, "PRIVATE KEY BLOCK"))
		return NO;
	int r = lit(c, x, "-----", 5, false);
	if (r == YES)
		*end = x + 5;
	return r;
}

/* The first END trailer starting in [from, lim): F_FOUND with *end; F_NONE when there is none
 * there (or none before the end of the stream); F_MORE when the input so far cannot tell. */
static int pem_find_end(struct ctx *c, uint64_t from, uint64_t lim, uint64_t *end)
{
	const struct view *v = c->v;
	struct pemc *pc = &c->s->pc;
	if (!pc->valid || from < pc->lo || from > pc->hi)
		*pc = (struct pemc){.valid = true, .lo = from, .hi = from};
	if (pc->found || pc->hi >= lim) {
		if (!pc->found || pc->hi >= lim)
			return F_NONE;
		*end = pc->fe;
		return F_FOUND;
	}
	uint64_t hay_end = v->end, x = pc->hi;
	if (lim != UINT64_MAX && lim + 8 < hay_end)
		hay_end = lim + 8;
	while (x + 9 <= hay_end) {
		const uint8_t *h = memmem(v->p + (x - v->base), hay_end - x, "-----END ", 9);
		if (!h)
			break;
		uint64_t t = v->base + (uint64_t)(h - v->p);
		int r = pem_label(c, t + 9, end);
		if (r != NO) {
			pc->hi = t;
			if (r == MORE)
				return F_MORE;
			pc->found = true;
			pc->fe = *end;
			return F_FOUND;
		}
		x = t + 1;
	}
	if (lim != UINT64_MAX && v->end >= lim + 8) {
		pc->hi = lim;
		return F_NONE;
	}
	if (v->eof) {
		pc->hi = v->end;
		return F_NONE;
	}
	/* an END may begin in the last 8 bytes */
	pc->hi = v->end >= 8 && v->end - 8 > x ? v->end - 8 : x;
	more(c, v->end + 1);
	return F_MORE;
}

static int m_pem(struct ctx *c, uint64_t q, struct match *m)
{
	uint64_t h, e;
	int r = lit(c, q, "-----BEGIN ", 11, false);
	if (r != YES || (r = pem_label(c, q + 11, &h)) != YES)
		return r;
	switch (pem_find_end(c, h, q + PEM_MAX, &e)) {
	case F_FOUND:
		*m = (struct match){q, e, RK_PEM_PRIVATE_KEY, OPEN_NONE, 0};
		return YES;
	case F_MORE:
		return MORE;
	}
	if (c->v->end >= q + PEM_MAX + 8) /* no END near: redact on until one comes */
		*m = (struct match){q, q + PEM_MAX, RK_PEM_PRIVATE_KEY, OPEN_PEM, 0};
	else /* the stream ended inside the block: fail closed */
		*m = (struct match){q, c->v->end, RK_PEM_PRIVATE_KEY, OPEN_NONE, 0};
	return YES;
}

/* gh[pousr]_, github_pat_, glpat- */
static int m_g(struct ctx *c, uint64_t q, struct match *m)
{
	const struct view *v = c->v;
	int r;
	if (!starts_word(c, q))
		return NO;
	if ((r = have(c, q + 2)) != YES)
		return r;
	switch (at(v, q + 1)) {
	case 'h':
		if ((r = byte_in(c, q + 2, "pousr", 5)) != YES ||
		    (r = byte_in(c, q + 3, "_", 1)) != YES)
			return r;
		return token(c, q, 4, C_ALNUM, 36, RS_GH, RK_GITHUB, m);
	case 'i':
		if ((r = lit(c, q, "github_pat_", 11, false)) != YES)
			return r;
		return token(c, q, 11, C_ALNUM_, 22, RS_GHPAT, RK_GITHUB, m);
	case 'l':
		if ((r = lit(c, q, "glpat-", 6, false)) != YES)
			return r;
		return token(c, q, 6, C_TOK, 20, RS_GLPAT, RK_GITLAB, m);
	}
	return NO;
}

static int m_xox(struct ctx *c, uint64_t q, struct match *m)
{
	int r;
	if (!starts_word(c, q))
		return NO;
	if ((r = lit(c, q, "xox", 3, false)) != YES || (r = byte_in(c, q + 3, "abprs", 5)) != YES ||
	    (r = byte_in(c, q + 4, "-", 1)) != YES)
		return r;
	return token(c, q, 5, C_SLACK, 10, RS_XOX, RK_SLACK, m);
}

static int m_hook(struct ctx *c, uint64_t q, struct match *m)
{
	int r;
	if (!starts_word(c, q))
		return NO;
	if ((r = lit(c, q, "hooks.slack.com/services/", 25, false)) != YES)
		return r;
	return token(c, q, 25, C_HOOK, 10, RS_HOOK, RK_SLACK, m);
}

/* sk- (OpenAI), sk-ant- (Anthropic, never OpenAI), [sr]k_live_ / [sr]k_test_ (Stripe) */
static int m_sk(struct ctx *c, uint64_t q, struct match *m)
{
	const struct view *v = c->v;
	int r = NO;
	if (!starts_word(c, q))
		return NO;
	if (at(v, q + 1) != 'k' || (r = byte_in(c, q + 2, "-_", 2)) != YES)
		return r == MORE ? MORE : NO;
	if (at(v, q) == 's' && at(v, q + 2) == '-') {
		if ((r = lit(c, q + 3, "ant-", 4, false)) == MORE)
			return MORE;
		if (r == YES)
			return token(c, q, 7, C_TOK, 20, RS_SKANT, RK_ANTHROPIC, m);
		return token(c, q, 3, C_TOK, 20, RS_SK, RK_OPENAI, m);
	}
	if (at(v, q + 2) != '_')
		return NO;
	int live = lit(c, q + 3, "live_", 5, false), test = lit(c, q + 3, "test_", 5, false);
	if (live != YES && test != YES)
		return live == MORE || test == MORE ? MORE : NO;
	return token(c, q, 8, C_ALNUM, 16, RS_STRIPE, RK_STRIPE, m);
}

/* One JWT segment at p: "eyJ" (when head) then a run of at least min; *end after it. */
static int jwt_seg(struct ctx *c, int slot, uint64_t p, bool head, unsigned min, uint64_t *end)
{
	int r;
	if (head && (r = lit(c, p, "eyJ", 3, false)) != YES)
		return r;
	switch (run(c, slot, C_TOK, p, end)) {
	case R_MORE:
		return MORE;
	case R_LONG:
		return NO;
	}
	return *end - p >= min ? YES : NO;
}

static int dot_at(struct ctx *c, uint64_t p)
{
	int r = have(c, p + 1);
	return r != YES ? r : at(c->v, p) == '.' ? YES : NO;
}

/* eyJ<8+>.eyJ<8+>.<8+> over [A-Za-z0-9_-]; a signature beyond TOKEN_BOUND goes open. */
static int m_jwt(struct ctx *c, uint64_t q, struct match *m)
{
	uint64_t e1, e2, e3;
	int r;
	if (!starts_word(c, q))
		return NO;
	if ((r = jwt_seg(c, RS_JWT1, q, true, 11, &e1)) != YES || (r = dot_at(c, e1)) != YES)
		return r;
	if ((r = jwt_seg(c, RS_JWT2, e1 + 1, true, 11, &e2)) != YES || (r = dot_at(c, e2)) != YES)
		return r;
	switch (run(c, RS_JWT3, C_TOK, e2 + 1, &e3)) {
	case R_MORE:
		return MORE;
	case R_LONG:
		*m = (struct match){q, e2 + 1 + TOKEN_BOUND, RK_JWT, OPEN_CLASS, C_TOK};
		return YES;
	}
	if (e3 - (e2 + 1) < 8)
		return NO;
	*m = (struct match){q, e3, RK_JWT, OPEN_NONE, 0};
	return YES;
}

/* scheme://user:password@ -- anchored at "://"; the interval is the password only. The scheme
 * is looked for in the SCHEME_MAX bytes before, which the stream always keeps. */
static int m_url(struct ctx *c, uint64_t q, struct match *m)
{
	const struct view *v = c->v;
	uint64_t u, pe;
	bool letter = false;
	int r = lit(c, q, "://", 3, false);
	if (r != YES)
		return r;
	for (uint64_t i = q; i > v->base && q - i < SCHEME_MAX; i--) {
		uint16_t k = c->r->cls[at(v, i - 1)];
		if (!(k & C_SCHEME))
			break;
		letter = letter || (k & C_ALPHA);
	}
	if (!letter)
		return NO;
	/* user (may be empty), ':', password (not empty), '@' */
	if ((r = run(c, RS_USER, C_USER, q + 3, &u)) != R_END)
		return r == R_MORE ? MORE : NO;
	if ((r = have(c, u + 1)) != YES)
		return r;
	if (at(v, u) != ':')
		return NO;
	if ((r = run(c, RS_PASS, C_PASS, u + 1, &pe)) != R_END)
		return r == R_MORE ? MORE : NO;
	if (pe == u + 1)
		return NO;
	if ((r = have(c, pe + 1)) != YES)
		return r;
	if (at(v, pe) != '@')
		return NO;
	*m = (struct match){u + 1, pe, RK_URL_CREDENTIALS, OPEN_NONE, 0};
	return YES;
}

/* All detectors that can start at q. MORE when any of them cannot decide yet. */
static int eval(struct ctx *c, uint64_t q, struct match *m, int *n)
{
	bool undecided = false;
	int r = NO;
#define TRY(call)                                                                                  \
	do {                                                                                       \
		r = (call);                                                                        \
		if (r == MORE)                                                                     \
			undecided = true;                                                          \
		else if (r == YES)                                                                 \
			(*n)++;                                                                    \
	} while (0)
	uint8_t b = at(c->v, q);
	if (c->r->count[b])
		TRY(m_pattern(c, q, &m[*n]));
	switch (b) {
	case 'A':
		TRY(m_aws_id(c, q, &m[*n]));
		TRY(m_aws_secret(c, q, &m[*n]));
		break;
	case 'a':
		TRY(m_aws_secret(c, q, &m[*n]));
		break;
	case 'g':
		TRY(m_g(c, q, &m[*n]));
		break;
	case 'x':
		TRY(m_xox(c, q, &m[*n]));
		break;
	case 'h':
		TRY(m_hook(c, q, &m[*n]));
		break;
	case 's':
	case 'r':
		TRY(m_sk(c, q, &m[*n]));
		break;
	case 'e':
		TRY(m_jwt(c, q, &m[*n]));
		break;
	case '-':
		TRY(m_pem(c, q, &m[*n]));
		break;
	case ':':
		TRY(m_url(c, q, &m[*n]));
		break;
	}
#undef TRY
	return undecided ? MORE : YES;
}

/* ---- the union of intervals and the output ------------------------------------------- */

static void emit_plain(struct scan *s, const struct view *v, uint64_t upto)
{
	if (upto <= s->out)
		return;
	if (s->emit)
		s->emit(s->ud, (const char *)v->p + (s->out - v->base), upto - s->out);
	s->out = upto;
}

static void close_comp(struct scan *s)
{
	s->out = s->comp.e;
	s->comp_on = false;
}

/* An interval starting at or before the scan position. */
static void start_or_merge(struct scan *s, const struct view *v, uint64_t b, uint64_t e, int kind)
{
	/* while an interval is open it reaches past comp.e for sure */
	if (s->comp_on && (b < s->comp.e || s->nopen)) {
		if (e > s->comp.e)
			s->comp.e = e;
		return;
	}
	if (s->comp_on)
		close_comp(s);
	emit_plain(s, v, b);
	if (s->emit)
		s->emit(s->ud, s->r->repl[kind], s->r->repl_len[kind]);
	s->st.total++;
	s->st.by_kind[kind]++;
	s->comp = (struct ival){b, e, kind};
	s->comp_on = true;
}

static void pend_add(struct scan *s, struct ival iv)
{
	for (int i = 0; i < s->npend;) {
		struct ival *p = &s->pend[i];
		if (iv.s < p->e && p->s < iv.e) { /* overlap: one interval */
			if (p->s <= iv.s)
				iv.kind = p->kind;
			iv.s = p->s < iv.s ? p->s : iv.s;
			iv.e = p->e > iv.e ? p->e : iv.e;
			memmove(p, p + 1, (size_t)(s->npend - i - 1) * sizeof(*p));
			s->npend--;
			continue;
		}
		i++;
	}
	if (s->npend == PEND_MAX) { /* cannot happen (see PEND_MAX); fail closed: redact the hull */
		struct ival last = s->pend[--s->npend];
		iv.s = last.s < iv.s ? last.s : iv.s;
		iv.e = last.e > iv.e ? last.e : iv.e;
		iv.kind = last.kind;
	}
	int i = s->npend;
	while (i > 0 && s->pend[i - 1].s > iv.s) {
		s->pend[i] = s->pend[i - 1];
		i--;
	}
	s->pend[i] = iv;
	s->npend++;
}

/* An interval that goes on past front. A second open interval of the same mode and class
 * ends where the first one does (the runs join, or the new one ends first; no END lies
 * between them), so one is enough; and a class run already followed to its end is not
 * followed again (that would be quadratic on a long run of tokens). */
static void open_add(struct scan *s, int mode, uint16_t cls, uint64_t front)
{
	if (mode == OPEN_CLASS) {
		const struct runc *oc = &s->oc[__builtin_ctz(cls)];
		if (oc->valid && oc->start <= front && front <= oc->front) {
			if (oc->front > s->comp.e)
				s->comp.e = oc->front;
			return;
		}
	}
	for (int i = 0; i < s->nopen; i++)
		if (s->open[i].mode == mode && s->open[i].cls == cls)
			return;
	if (s->nopen < OPEN_MAX)
		s->open[s->nopen++] = (struct openc){mode, cls, front, front};
}

static void add_match(struct ctx *c, const struct match *m, uint64_t q)
{
	struct scan *s = c->s;
	if (m->s > q) { /* starts ahead: AWS secret value, URL password */
		if (s->comp_on && m->s < s->comp.e) {
			if (m->e > s->comp.e)
				s->comp.e = m->e;
		} else {
			pend_add(s, (struct ival){m->s, m->e, m->kind});
		}
		return;
	}
	start_or_merge(s, c->v, m->s, m->e, m->kind);
	if (m->open)
		open_add(s, m->open, m->cls, m->e);
}

/* Grow the open intervals as far as the input goes. */
static void advance_opens(struct ctx *c)
{
	struct scan *s = c->s;
	const struct view *v = c->v;
	for (int i = 0; i < s->nopen;) {
		struct openc *o = &s->open[i];
		uint64_t e = o->front;
		bool done = true;
		if (o->mode == OPEN_CLASS) {
			while (e < v->end && (c->r->cls[at(v, e)] & o->cls))
				e++;
			done = e < v->end || v->eof;
			o->front = e;
			if (done)
				s->oc[__builtin_ctz(o->cls)] = (struct runc){
				    .start = o->start, .front = e, .valid = true, .fin = true};
		} else {
			switch (pem_find_end(c, o->front, UINT64_MAX, &e)) {
			case F_NONE:
				e = v->end;
				break;
			case F_MORE:
				done = false;
				o->front = e = s->pc.hi;
				break;
			}
		}
		if (e > s->comp.e)
			s->comp.e = e;
		if (done)
			s->open[i] = s->open[--s->nopen];
		else
			i++;
	}
}

/* Some bigram (so some detector or exact string) can start with byte b. */
static bool can_lead(const struct redactor *r, uint8_t b)
{
	const uint64_t *row = r->bigram + (size_t)b * 4; /* the 256 bigrams (b, x) */
	return (row[0] | row[1] | row[2] | row[3]) != 0;
}

/* The first position that a match anchored at q could redact: q, except for the detectors
 * whose interval starts after their anchor (the bigrams of redactor_new()): a URL password
 * comes after "://" and a ':' at the least, an AWS secret value after "aws_secret" and a
 * separator. With only q's first byte known (q is the last byte), its bigram is any of those
 * starting with it. */
static uint64_t lowest_start(const struct redactor *r, const struct view *v, uint64_t q)
{
	uint8_t b = at(v, q);
	int nb = q + 1 < v->end ? at(v, q + 1) : -1;
	if (r->count[b])
		return q; /* an exact string */
	if (b == ':')
		return q + 4; /* "://" then the user (may be empty), ':', the password */
	if ((b == 'a' || b == 'A') && (nb == 'w' || nb == 'W' || (nb < 0 && b == 'a')))
		return q + 11; /* "aws_secret" then at least '=' or ':' */
	return q;
}

#ifdef REDACT_AVX2
/* 32 positions at a time: a position is a candidate when the nibbles of its byte and of the
 * next one share a bucket (pshufb looks each nibble up in a 16-byte table); a candidate is
 * then checked in the exact bitmap. Plain output (no bigram anywhere) costs a few vector
 * instructions per 32 bytes instead of 32 table lookups. Returns the first position in
 * [*i, n) that starts a bigram, or UINT64_MAX with *i at the first position not looked at
 * (fewer than 32 + 1 bytes from n). Reads p[*i .. n]. */
__attribute__((target("avx2"))) static uint64_t anchor_avx2(const struct redactor *r,
                                                            const uint8_t *p, size_t *ip, size_t n)
{
	const __m256i lo1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const void *)r->pre[0]));
	const __m256i hi1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const void *)r->pre[1]));
	const __m256i lo2 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const void *)r->pre[2]));
	const __m256i hi2 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const void *)r->pre[3]));
	const __m256i nib = _mm256_set1_epi8(0x0f), zero = _mm256_setzero_si256();
	const uint64_t *bm = r->bigram;
	size_t i = *ip;
	for (; i + 32 <= n; i += 32) {
		__m256i a = _mm256_loadu_si256((const void *)(p + i));
		__m256i b = _mm256_loadu_si256((const void *)(p + i + 1));
		__m256i ma = _mm256_and_si256(
		    _mm256_shuffle_epi8(lo1, _mm256_and_si256(a, nib)),
		    _mm256_shuffle_epi8(hi1, _mm256_and_si256(_mm256_srli_epi16(a, 4), nib)));
		__m256i mb = _mm256_and_si256(
		    _mm256_shuffle_epi8(lo2, _mm256_and_si256(b, nib)),
		    _mm256_shuffle_epi8(hi2, _mm256_and_si256(_mm256_srli_epi16(b, 4), nib)));
		uint32_t cand = ~(uint32_t)_mm256_movemask_epi8(
		    _mm256_cmpeq_epi8(_mm256_and_si256(ma, mb), zero));
		for (; cand; cand &= cand - 1) {
			size_t j = i + (size_t)__builtin_ctz(cand);
			unsigned k = (unsigned)p[j] << 8 | p[j + 1];
			if (bm[k >> 6] >> (k & 63) & 1) {
				*ip = j;
				return j;
			}
		}
	}
	*ip = i;
	return UINT64_MAX;
}
#endif

/* First position in [from, stop) whose bigram can start a match, or UINT64_MAX. */
static uint64_t find_anchor(const struct redactor *r, const struct view *v, uint64_t from,
                            uint64_t stop)
{
	if (v->end == 0)
		return UINT64_MAX;
	if (stop > v->end - 1)
		stop = v->end - 1;
	const uint8_t *p = v->p;
	const uint64_t *bm = r->bigram;
	size_t i = (size_t)(from - v->base), n = (size_t)(stop - v->base);
#ifdef REDACT_AVX2
	if (r->simd && i + 32 <= n) {
		uint64_t j = anchor_avx2(r, p, &i, n);
		if (j != UINT64_MAX)
			return v->base + j;
	}
#endif
	for (; i + 4 <= n; i += 4) {
		unsigned k0 = (unsigned)p[i] << 8 | p[i + 1],
		         k1 = (unsigned)p[i + 1] << 8 | p[i + 2];
		unsigned k2 = (unsigned)p[i + 2] << 8 | p[i + 3],
		         k3 = (unsigned)p[i + 3] << 8 | p[i + 4];
		uint64_t hit = (bm[k0 >> 6] >> (k0 & 63) & 1) | (bm[k1 >> 6] >> (k1 & 63) & 1) |
		               (bm[k2 >> 6] >> (k2 & 63) & 1) | (bm[k3 >> 6] >> (k3 & 63) & 1);
		if (hit)
			break;
	}
	for (; i < n; i++) {
		unsigned k = (unsigned)p[i] << 8 | p[i + 1];
		if (bm[k >> 6] >> (k & 63) & 1)
			return v->base + i;
	}
	return UINT64_MAX;
}

static bool match_before(const struct match *a, const struct match *b)
{
	if (a->s != b->s)
		return a->s < b->s;
	if (a->open != b->open)
		return a->open > b->open;
	return a->e > b->e;
}

/* Decide everything the view allows; emit what is final. */
static void process(struct scan *s, const struct view *v)
{
	struct ctx c = {s, v, s->r, UINT64_MAX};
	for (;;) {
		if (s->nopen)
			advance_opens(&c);
		while (s->npend && s->pend[0].s <= s->scan) {
			struct ival p = s->pend[0];
			memmove(s->pend, s->pend + 1, (size_t)(--s->npend) * sizeof(p));
			start_or_merge(s, v, p.s, p.e, p.kind);
		}
		if (s->comp_on && !s->nopen && s->scan >= s->comp.e)
			close_comp(s);
		/* an anchor needs the byte after it, so the last byte waits for the next feed,
		 * unless no detector can start with it (a newline, a blank, most punctuation) */
		uint64_t stop = v->eof || v->end == 0 || !can_lead(s->r, at(v, v->end - 1))
		                    ? v->end
		                    : v->end - 1;
		bool event = false;
		if (s->npend && s->pend[0].s < stop) {
			stop = s->pend[0].s;
			event = true;
		}
		if (s->comp_on && s->comp.e < stop) { /* with an open interval: wait there */
			stop = s->comp.e;
			event = !s->nopen;
		}
		uint64_t q = find_anchor(s->r, v, s->scan, stop);
		if (q == UINT64_MAX) {
			if (stop > s->scan)
				s->scan = stop;
			if (event)
				continue;
			s->need = v->end + 1;
			break;
		}
		struct match m[8];
		int n = 0;
		c.need = UINT64_MAX;
		if (eval(&c, q, m, &n) == MORE) {
			s->scan = q;
			s->need = c.need;
			break;
		}
		s->scan = q;
		for (int i = 1; i < n; i++) /* leftmost, then open, then longest first */
			for (int j = i; j > 0 && match_before(&m[j], &m[j - 1]); j--) {
				struct match t = m[j];
				m[j] = m[j - 1];
				m[j - 1] = t;
			}
		for (int i = 0; i < n; i++)
			add_match(&c, &m[i], q);
		s->scan = q + 1;
	}
	if (!s->comp_on)
		emit_plain(s, v, s->scan);
}

static void scan_init(struct scan *s, const struct redactor *r, redact_emit_fn emit, void *ud)
{
	memset(s, 0, sizeof(*s));
	s->r = r;
	s->emit = emit;
	s->ud = ud;
}

/* ---- redactor ---------------------------------------------------------------------------- */

static void build_classes(uint16_t *cls)
{
	for (int c = 0; c < 256; c++) {
		bool up = c >= 'A' && c <= 'Z', lo = c >= 'a' && c <= 'z',
		     dig = c >= '0' && c <= '9';
		bool al = up || lo || dig, visible = c > 0x20 && c != 0x7f;
		uint16_t k = 0;
		if (al || c == '_')
			k |= C_WORD | C_ALNUM_;
		if (al)
			k |= C_ALNUM;
		if (al || c == '_' || c == '-')
			k |= C_TOK;
		if (al || c == '-')
			k |= C_SLACK;
		if (up || dig)
			k |= C_UPPER | C_LABEL;
		if (al || c == '/' || c == '+')
			k |= C_B64;
		if (al || c == '_' || c == '/')
			k |= C_HOOK;
		if (visible && c != ':' && c != '@' && c != '/')
			k |= C_USER;
		if (visible && c != '@' && c != '/')
			k |= C_PASS;
		if (al || c == '+' || c == '.' || c == '-')
			k |= C_SCHEME;
		if (c == ' ')
			k |= C_LABEL;
		if (up || lo)
			k |= C_ALPHA;
		cls[c] = k;
	}
}

static void set_bigram(struct redactor *r, uint8_t a, uint8_t b)
{
	unsigned k = (unsigned)a << 8 | b;
	r->bigram[k >> 6] |= (uint64_t)1 << (k & 63);
}

/* The vector pre-filter's tables (find_anchor()). Each first byte that starts a bigram is a
 * group: its own nibbles, and the nibbles of its second bytes. A bucket accepts the product
 * of its four nibble sets, so groups are merged, cheapest first, until 8 are left (more than
 * 16 groups are first merged by the first byte's low nibble, which widens nothing on the
 * first byte's side). Cheapest: the least growth of that product. The built-in detectors
 * give 10 groups; 'h'/'x' and 'r'/'s' merge without widening anything. */
struct pre_grp {
	uint16_t m[4]; /* nibble sets: first byte low, high; second byte low, high */
};

static unsigned pre_cost(const struct pre_grp *g)
{
	return (unsigned)(__builtin_popcount(g->m[0]) * __builtin_popcount(g->m[1]) *
	                  __builtin_popcount(g->m[2]) * __builtin_popcount(g->m[3]));
}

static void pre_merge(struct pre_grp *into, const struct pre_grp *g)
{
	for (int t = 0; t < 4; t++)
		into->m[t] |= g->m[t];
}

static void build_prefilter(struct redactor *r)
{
	struct pre_grp g[256];
	int ng = 0;
	for (unsigned a = 0; a < 256; a++) {
		const uint64_t *row = r->bigram + (size_t)a * 4;
		if (!(row[0] | row[1] | row[2] | row[3]))
			continue;
		struct pre_grp x = {{(uint16_t)(1u << (a & 15)), (uint16_t)(1u << (a >> 4)), 0, 0}};
		for (unsigned w = 0; w < 4; w++)
			for (uint64_t bits = row[w]; bits; bits &= bits - 1) {
				unsigned b = w * 64 + (unsigned)__builtin_ctzll(bits);
				x.m[2] |= (uint16_t)(1u << (b & 15));
				x.m[3] |= (uint16_t)(1u << (b >> 4));
			}
		g[ng++] = x;
	}
	if (ng > 16) {
		struct pre_grp by_lo[16] = {{{0}}};
		for (int i = 0; i < ng; i++)
			pre_merge(&by_lo[__builtin_ctz(g[i].m[0])], &g[i]);
		ng = 0;
		for (int i = 0; i < 16; i++)
			if (by_lo[i].m[0])
				g[ng++] = by_lo[i];
	}
	while (ng > 8) {
		int bi = 0, bj = 1;
		long best = LONG_MAX;
		for (int i = 0; i < ng; i++)
			for (int j = i + 1; j < ng; j++) {
				struct pre_grp u = g[i];
				pre_merge(&u, &g[j]);
				long grow = (long)pre_cost(&u) - pre_cost(&g[i]) - pre_cost(&g[j]);
				if (grow < best) {
					best = grow;
					bi = i;
					bj = j;
				}
			}
		pre_merge(&g[bi], &g[bj]);
		g[bj] = g[--ng];
	}
	memset(r->pre, 0, sizeof(r->pre));
	for (int k = 0; k < ng; k++)
		for (int t = 0; t < 4; t++)
			for (unsigned nb = 0; nb < 16; nb++)
				if (g[k].m[t] >> nb & 1)
					r->pre[t][nb] |= (uint8_t)(1u << k);
#ifdef REDACT_AVX2
	r->simd = cpu_has_avx2();
#endif
}

bool redactor_use_simd(struct redactor *r, bool on)
{
#ifdef REDACT_AVX2
	r->simd = on && cpu_has_avx2();
#else
	(void)on;
#endif
	return r->simd;
}

static int pat_cmp(const void *pa, const void *pb)
{
	const struct pat *a = pa, *b = pb;
	if (a->b[0] != b->b[0])
		return a->b[0] < b->b[0] ? -1 : 1;
	if (a->len != b->len)
		return a->len > b->len ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	return a->b < b->b ? -1 : a->b > b->b;
}

/* Pieces of a string of length len: one, or overlapping PATTERN_MAX windows (each starting
 * PATTERN_MAX - 1 after the previous, the last one flush with the end). */
static size_t npieces(size_t len)
{
	return len <= PATTERN_MAX ? 1 : 1 + (len - 2) / (PATTERN_MAX - 1);
}

static size_t add_pieces(struct pat *out, const uint8_t *b, size_t len, int kind)
{
	size_t n = npieces(len);
	for (size_t i = 0; i < n; i++) {
		size_t off = i * (PATTERN_MAX - 1), plen = len < PATTERN_MAX ? len : PATTERN_MAX;
		if (off + plen > len)
			off = len - plen;
		out[i] = (struct pat){b + off, (uint32_t)plen, (uint8_t)kind};
	}
	return n;
}

struct redactor *redactor_new(enum redact_mode mode, const char *const *values, size_t n_values,
                              const char *const *custom, size_t n_custom)
{
	static const char *const bigrams[] = {"AK", "AS", "AG", "AI", "AR", "AN", "Aw",
	                                      "AW", "aw", "aW", "gh", "gi", "gl", "xo",
	                                      "ho", "sk", "rk", "ey", "--", ":/"};
	struct redactor *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->mode = mode;
	build_classes(r->cls);
	for (int k = 0; k < RK__COUNT; k++) {
		int n = snprintf(r->repl[k], sizeof(r->repl[k]), "[REDACTED:%s]", kind_names[k]);
		r->repl_len[k] = (uint8_t)n;
	}
	for (size_t i = 0; i < sizeof(bigrams) / sizeof(bigrams[0]); i++)
		set_bigram(r, (uint8_t)bigrams[i][0], (uint8_t)bigrams[i][1]);

	size_t total = 0, npats = 0, max_pat = 0;
	for (int pass = 0; pass < 2; pass++) {
		const char *const *list = pass ? custom : values;
		size_t n = pass ? n_custom : n_values, min = pass ? CUSTOM_MIN : VALUE_MIN;
		for (size_t i = 0; list && i < n; i++) {
			size_t len = list[i] ? strlen(list[i]) : 0;
			if (len < min)
				continue;
			total += len;
			npats += npieces(len);
		}
	}
	r->pool = malloc(total ? total : 1);
	r->pats = calloc(npats ? npats : 1, sizeof(*r->pats));
	if (!r->pool || !r->pats) {
		redactor_free(r);
		return NULL;
	}
	uint8_t *w = r->pool;
	for (int pass = 0; pass < 2; pass++) {
		const char *const *list = pass ? custom : values;
		size_t n = pass ? n_custom : n_values, min = pass ? CUSTOM_MIN : VALUE_MIN;
		for (size_t i = 0; list && i < n; i++) {
			size_t len = list[i] ? strlen(list[i]) : 0;
			if (len < min)
				continue;
			memcpy(w, list[i], len);
			r->npats +=
			    add_pieces(r->pats + r->npats, w, len, pass ? RK_CUSTOM : RK_ENV_VALUE);
			w += len;
		}
	}
	qsort(r->pats, r->npats, sizeof(*r->pats), pat_cmp);
	for (size_t i = r->npats; i-- > 0;) {
		const struct pat *p = &r->pats[i];
		r->first[p->b[0]] = (uint32_t)i;
		r->count[p->b[0]]++;
		set_bigram(r, p->b[0], p->b[1]);
		if (p->len > max_pat)
			max_pat = p->len;
	}
	build_prefilter(r);
	r->holdback = PEM_LOOKAHEAD > TOKEN_LOOKAHEAD ? PEM_LOOKAHEAD : TOKEN_LOOKAHEAD;
	if (max_pat > r->holdback)
		r->holdback = max_pat;
	return r;
}

void redactor_free(struct redactor *r)
{
	if (!r)
		return;
	free(r->pats);
	free(r->pool);
	free(r);
}

enum redact_mode redactor_mode(const struct redactor *r)
{
	return r->mode;
}

size_t redact_holdback(const struct redactor *r)
{
	return r->mode == REDACT_OFF ? 0 : r->holdback;
}

/* ---- streams ------------------------------------------------------------------------------ */

struct redact_stream {
	struct scan sc;
	redact_emit_fn emit;
	void *ud;
	uint8_t *win; /* input from offset base: LOOKBEHIND bytes of context, then held back */
	size_t cap, len;
	uint64_t base;
	bool done;
};

struct redact_stream *redact_stream_new(const struct redactor *r, redact_emit_fn emit, void *ud)
{
	struct redact_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	scan_init(&s->sc, r, r->mode == REDACT_REDACT ? emit : NULL, ud);
	s->emit = emit;
	s->ud = ud;
	if (r->mode != REDACT_OFF) {
		s->cap = r->holdback + LOOKBEHIND + STEP;
		s->win = malloc(s->cap);
		if (!s->win) {
			free(s);
			return NULL;
		}
	}
	return s;
}

static void stream_run(struct redact_stream *s, bool eof)
{
	struct view v = {s->win, s->base, s->base + s->len, eof};
	process(&s->sc, &v);
}

/* Drop what no decision can look at again: all but LOOKBEHIND bytes before the scan
 * position, and nothing an open PEM block still has to search. */
static void stream_compact(struct redact_stream *s)
{
	uint64_t keep = s->sc.scan > LOOKBEHIND ? s->sc.scan - LOOKBEHIND : 0;
	for (int i = 0; i < s->sc.nopen; i++)
		if (s->sc.open[i].mode == OPEN_PEM && s->sc.open[i].front < keep)
			keep = s->sc.open[i].front;
	if (keep <= s->base)
		return;
	size_t drop = (size_t)(keep - s->base);
	memmove(s->win, s->win + drop, s->len - drop);
	s->len -= drop;
	s->base = keep;
}

void redact_stream_feed(struct redact_stream *s, const char *buf, size_t len)
{
	if (!len || s->done)
		return;
	if (s->sc.r->mode != REDACT_REDACT)
		s->emit(s->ud, buf,
		        len); /* FLAG passes the bytes on unchanged; OFF does only that */
	if (s->sc.r->mode == REDACT_OFF)
		return;
	while (len) {
		if (s->len == s->cap)
			stream_compact(s);
		size_t n = s->cap - s->len < len ? s->cap - s->len : len;
		memcpy(s->win + s->len, buf, n);
		s->len += n;
		buf += n;
		len -= n;
		/* nothing to decide until the input reaches what the last stop waited for */
		if (s->base + s->len >= s->sc.need || s->len == s->cap)
			stream_run(s, false);
	}
}

void redact_stream_finish(struct redact_stream *s)
{
	if (s->done)
		return;
	s->done = true;
	if (s->sc.r->mode != REDACT_OFF)
		stream_run(s, true);
}

/* Idle: decide all that the input allows (a feed skips that until the input reaches what the
 * last answer waited for; a byte that refutes a literal can come sooner), then emit the plain
 * bytes before the first position that a secret could still cover: the earliest of a pending
 * interval, and the lowest start of every anchor from the scan position on (the first one
 * undecided, the ones not yet looked at, the last byte when a detector can start with it).
 * Nothing while a redacted interval is being built. Every byte emitted here is plain in any
 * continuation of the stream, so the output is the same as without the release. */
void redact_stream_release(struct redact_stream *s)
{
	struct scan *sc = &s->sc;
	if (s->done || sc->r->mode != REDACT_REDACT || !s->len)
		return;
	sc->pat_memo = false; /* look at the exact strings again, with the bytes that came */
	stream_run(s, false);
	if (sc->comp_on)
		return;
	struct view v = {s->win, s->base, s->base + s->len, false};
	uint64_t safe = v.end;
	if (sc->npend && sc->pend[0].s < safe)
		safe = sc->pend[0].s;
	for (uint64_t q = sc->scan; q < safe;) {
		uint64_t a = find_anchor(sc->r, &v, q, safe);
		if (a == UINT64_MAX)
			break;
		uint64_t lo = lowest_start(sc->r, &v, a);
		if (lo < safe)
			safe = lo;
		q = a + 1;
	}
	uint64_t last = v.end - 1;
	if (last >= sc->scan && last < safe && can_lead(sc->r, at(&v, last))) {
		uint64_t lo = lowest_start(sc->r, &v, last);
		if (lo < safe)
			safe = lo;
	}
	emit_plain(sc, &v, safe);
}

size_t redact_stream_held(const struct redact_stream *s)
{
	if (s->done || s->sc.r->mode != REDACT_REDACT)
		return 0;
	uint64_t end = s->base + s->len;
	return end > s->sc.out ? (size_t)(end - s->sc.out) : 0;
}

const struct redact_stats *redact_stream_stats(const struct redact_stream *s)
{
	return &s->sc.st;
}

void redact_stream_free(struct redact_stream *s)
{
	if (!s)
		return;
	free(s->win);
	free(s);
}

/* ---- whole buffers ------------------------------------------------------------------------ */

struct obuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void obuf_put(void *ud, const char *b, size_t n)
{
	struct obuf *o = ud;
	if (o->oom)
		return;
	if (o->len + n + 1 > o->cap) {
		size_t cap = o->cap ? o->cap : 64;
		while (cap < o->len + n + 1)
			cap *= 2;
		char *p = realloc(o->p, cap);
		if (!p) {
			o->oom = true;
			return;
		}
		o->p = p;
		o->cap = cap;
	}
	memcpy(o->p + o->len, b, n);
	o->len += n;
}

char *redact_buffer(const struct redactor *r, const char *buf, size_t len, size_t *out_len,
                    struct redact_stats *stats)
{
	struct obuf o = {0};
	struct scan sc;
	scan_init(&sc, r, r->mode == REDACT_REDACT ? obuf_put : NULL, &o);
	obuf_put(&o, "", 0);
	if (r->mode != REDACT_OFF && len) {
		/* the same engine as a stream, over the caller's bytes in one view */
		struct view v = {(const uint8_t *)buf, 0, len, true};
		process(&sc, &v);
	}
	if (r->mode != REDACT_REDACT && len)
		obuf_put(&o, buf, len);
	if (o.oom) {
		free(o.p);
		return NULL;
	}
	o.p[o.len] = '\0';
	if (out_len)
		*out_len = o.len;
	if (stats)
		*stats = sc.st;
	return o.p;
}
