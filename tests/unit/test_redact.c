#include "redact.h"
#include "test.h"

#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

struct sink {
	char *p;
	size_t len, cap;
};

static void sink_put(void *ud, const char *b, size_t n)
{
	struct sink *s = ud;
	if (s->len + n + 1 > s->cap) {
		s->cap = (s->len + n + 1) * 2;
		s->p = realloc(s->p, s->cap);
	}
	memcpy(s->p + s->len, b, n);
	s->len += n;
	s->p[s->len] = '\0';
}

/* redact_buffer on a C string; the result compared with want (printed when different). */
static int red_is(const struct redactor *r, const char *in, const char *want)
{
	size_t n;
	char *out = redact_buffer(r, in, strlen(in), &n, NULL);
	int ok = out && n == strlen(want) && !strcmp(out, want);
	if (!ok)
		printf("  want: %s\n  got:  %s\n", want, out ? out : "(null)");
	free(out);
	return ok;
}

static int unchanged(const struct redactor *r, const char *in)
{
	return red_is(r, in, in);
}

/* Feed `in` cut at the increasing offsets cuts[]; an idle release after feed i when bit i of
 * rel is set. */
static char *stream_chunks(const struct redactor *r, const char *in, size_t len, const size_t *cuts,
                           size_t ncuts, unsigned rel, struct redact_stats *st, size_t *out_len)
{
	struct sink k = {0};
	struct redact_stream *s = redact_stream_new(r, sink_put, &k);
	size_t at = 0;
	for (size_t i = 0; i <= ncuts; i++) {
		size_t to = i < ncuts ? cuts[i] : len;
		redact_stream_feed(s, in + at, to - at);
		if (rel >> i & 1)
			redact_stream_release(s);
		at = to;
	}
	redact_stream_finish(s);
	if (st)
		*st = *redact_stream_stats(s);
	redact_stream_free(s);
	sink_put(&k, "", 0);
	*out_len = k.len;
	return k.p;
}

/* Feed in chunks of step bytes; an idle release after every rel-th chunk (0: never). */
static char *stream_every_rel(const struct redactor *r, const char *in, size_t len, size_t step,
                              size_t rel, struct redact_stats *st, size_t *out_len)
{
	struct sink k = {0};
	struct redact_stream *s = redact_stream_new(r, sink_put, &k);
	for (size_t at = 0, i = 1; at < len; at += step, i++) {
		redact_stream_feed(s, in + at, len - at < step ? len - at : step);
		if (rel && i % rel == 0)
			redact_stream_release(s);
	}
	redact_stream_finish(s);
	if (st)
		*st = *redact_stream_stats(s);
	redact_stream_free(s);
	sink_put(&k, "", 0);
	*out_len = k.len;
	return k.p;
}

static char *stream_every(const struct redactor *r, const char *in, size_t len, size_t step,
                          struct redact_stats *st, size_t *out_len)
{
	return stream_every_rel(r, in, len, step, 0, st, out_len);
}

static int stats_eq(const struct redact_stats *a, const struct redact_stats *b)
{
	return !memcmp(a, b, sizeof(*a));
}

#define AWS_ID "AKIAIOSFODNN7EXAMPLE"
#define AWS_SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define AWS_SECRET39 "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKE"
#define PEM_BODY "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n"
#define PEM "-----BEGIN RSA PRIVATE KEY-----\n" PEM_BODY "-----END RSA PRIVATE KEY-----"
#define GHP "ghp_1234567890abcdefghijklmnopqrstuvwxyz"
#define GHPAT "github_pat_11ABCDEFG0123456789_abcdefghijklmnop"
#define GLPAT "glpat-abcdefghij0123456789"
#define XOXB "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
#define HOOK "hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
#define OPENAI "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
#define ANTHROPIC "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"
#define STRIPE "sk_live_51H8abcdefghijklmnopqrstu"
#define JWT                                                                                        \
	"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0TH"
#define ENVVAL "hunter2-very-secret"
#define CUSTOM "corp-internal-77"

/* One of each kind, in realistic surroundings. */
static const char DOC[] =
    "$ env | sort\nAWS_ACCESS_KEY_ID=" AWS_ID "\n"
    "AWS_SECRET_ACCESS_KEY=" AWS_SECRET "\n"
    "DB_PASSWORD=" ENVVAL "\n"
    "$ cat id_rsa\n" PEM "\n"
    "git remote: https://x-access-token:" GHP "@github.com/o/r.git\n"
    "GITHUB_TOKEN=" GHPAT " GITLAB=" GLPAT "\n"
    "slack: " XOXB " and https://" HOOK "\n"
    "{\"openai\": \"" OPENAI "\", \"anthropic\": \"" ANTHROPIC "\"}\n"
    "stripe " STRIPE "; Authorization: Bearer " JWT "\n"
    "connecting to postgres://admin:s3cretPass@db.example.com:5432/app\n"
    "internal " CUSTOM " done\n"
    "near misses: AKIA123 sk-short task-runner-for-the-project xghp_nope eyJ.eyJ.x\n";

static const char DOC_REDACTED[] =
    "$ env | sort\nAWS_ACCESS_KEY_ID=[REDACTED:aws_access_key]\n"
    "AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret]\n"
    "DB_PASSWORD=[REDACTED:env_value]\n"
    "$ cat id_rsa\n[REDACTED:pem_private_key]\n"
    "git remote: https://x-access-token:[REDACTED:url_credentials]@github.com/o/r.git\n"
    "GITHUB_TOKEN=[REDACTED:github] GITLAB=[REDACTED:gitlab]\n"
    "slack: [REDACTED:slack] and https://[REDACTED:slack]\n"
    "{\"openai\": \"[REDACTED:openai]\", \"anthropic\": \"[REDACTED:anthropic]\"}\n"
    "stripe [REDACTED:stripe]; Authorization: Bearer [REDACTED:jwt]\n"
    "connecting to postgres://admin:[REDACTED:url_credentials]@db.example.com:5432/app\n"
    "internal [REDACTED:custom] done\n"
    "near misses: AKIA123 sk-short task-runner-for-the-project xghp_nope eyJ.eyJ.x\n";

static struct redactor *new_default(enum redact_mode mode)
{
	const char *vals[] = {ENVVAL, "abc12" /* too short: ignored */};
	const char *custom[] = {CUSTOM, "xyz" /* too short: ignored */};
	return redactor_new(mode, vals, 2, custom, 2);
}

static void test_detectors(void)
{
	struct redactor *r = new_default(REDACT_REDACT);
	CHECK("redact kind names",
	      !strcmp(redact_kind_name(RK_ENV_VALUE), "env_value") &&
	          !strcmp(redact_kind_name(RK_AWS_ACCESS_KEY), "aws_access_key") &&
	          !strcmp(redact_kind_name(RK_CUSTOM), "custom") &&
	          !strcmp(redact_kind_name(RK__COUNT), "unknown"));
	CHECK("redact mode getter", redactor_mode(r) == REDACT_REDACT);
	CHECK("redact holdback covers PEM", redact_holdback(r) >= 65536);

	/* positives */
	CHECK("redact aws id", red_is(r, "id " AWS_ID " x", "id [REDACTED:aws_access_key] x"));
	CHECK("redact aws asia id", red_is(r, "ASIAABCDEFGHIJKLMNOP", "[REDACTED:aws_access_key]"));
	CHECK("redact aws secret ini", red_is(r, "aws_secret_access_key = " AWS_SECRET "\n",
	                                      "aws_secret_access_key = [REDACTED:aws_secret]\n"));
	CHECK("redact aws secret json", red_is(r, "{\"aws_secret\": \"" AWS_SECRET "\"}",
	                                       "{\"aws_secret\": \"[REDACTED:aws_secret]\"}"));
	CHECK("redact aws secret export",
	      red_is(r, "export MY_AWS_SECRET_ACCESS_KEY='" AWS_SECRET "'",
	             "export MY_AWS_SECRET_ACCESS_KEY='[REDACTED:aws_secret]'"));
	CHECK("redact pem", red_is(r, "a\n" PEM "\nb", "a\n[REDACTED:pem_private_key]\nb"));
	CHECK("redact pem openssh",
	      red_is(
	          r,
	          "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----!",
	          "[REDACTED:pem_private_key]!"));
	CHECK(
	    "redact pem pgp",
	    red_is(r,
	           "-----BEGIN PGP PRIVATE KEY BLOCK-----\nx\n-----END PGP PRIVATE KEY BLOCK-----",
	           "[REDACTED:pem_private_key]"));
	CHECK("redact pem without end fails closed",
	      red_is(r, "key:\n-----BEGIN PRIVATE KEY-----\n" PEM_BODY "more output\n",
	             "key:\n[REDACTED:pem_private_key]"));
	CHECK("redact github classic", red_is(r, "t=" GHP ";", "t=[REDACTED:github];"));
	CHECK("redact github pat", red_is(r, GHPAT, "[REDACTED:github]"));
	CHECK("redact gitlab", red_is(r, "(" GLPAT ")", "([REDACTED:gitlab])"));
	CHECK("redact slack bot", red_is(r, XOXB, "[REDACTED:slack]"));
	CHECK("redact slack webhook", red_is(r, "https://" HOOK, "https://[REDACTED:slack]"));
	CHECK("redact openai", red_is(r, OPENAI, "[REDACTED:openai]"));
	CHECK("redact openai classic",
	      red_is(r, "sk-abcdefghijklmnopqrstuvwxyz", "[REDACTED:openai]"));
	CHECK("redact anthropic", red_is(r, ANTHROPIC, "[REDACTED:anthropic]"));
	CHECK("redact stripe live", red_is(r, STRIPE, "[REDACTED:stripe]"));
	CHECK("redact stripe restricted test",
	      red_is(r, "rk_test_abcdefghij012345", "[REDACTED:stripe]"));
	CHECK("redact jwt", red_is(r, "Bearer " JWT "\n", "Bearer [REDACTED:jwt]\n"));
	CHECK("redact url credentials", red_is(r, "https://bob:hunter2@host/x",
	                                       "https://bob:[REDACTED:url_credentials]@host/x"));
	CHECK("redact url empty user", red_is(r, "redis://:pa:ss@cache:6379",
	                                      "redis://:[REDACTED:url_credentials]@cache:6379"));
	CHECK("redact env value", red_is(r, "pw " ENVVAL ".", "pw [REDACTED:env_value]."));
	CHECK("redact env value inside a word",
	      red_is(r, "x" ENVVAL "y", "x[REDACTED:env_value]y"));
	CHECK("redact custom", red_is(r, "a" CUSTOM "b", "a[REDACTED:custom]b"));
	CHECK("redact adjacent secrets stay separate",
	      red_is(r, GHP " " GHP, "[REDACTED:github] [REDACTED:github]"));

	/* near misses */
	CHECK("redact aws id too short", unchanged(r, "AKIAIOSFODNN7EXAMP"));
	CHECK("redact aws id in identifier", unchanged(r, "XAKIAIOSFODNN7EXAMPLE"));
	CHECK("redact aws id wrong prefix", unchanged(r, "AKIBIOSFODNN7EXAMPLE"));
	CHECK("redact aws secret 39", unchanged(r, "aws_secret_access_key=" AWS_SECRET39));
	CHECK("redact aws secret no keyword", unchanged(r, "secret_access_key=" AWS_SECRET));
	CHECK("redact aws secret no separator", unchanged(r, "aws_secret_access_key " AWS_SECRET));
	CHECK("redact pem public key",
	      unchanged(r, "-----BEGIN PUBLIC KEY-----\nMFww\n-----END PUBLIC KEY-----\n"));
	CHECK("redact pem certificate", unchanged(r, "-----BEGIN CERTIFICATE-----\nMIIB\n"));
	CHECK("redact github short", unchanged(r, "ghp_1234567890abcdefghijklmnopqrstuvwxy"));
	CHECK("redact github in identifier", unchanged(r, "my_" GHP));
	CHECK("redact github bad kind", unchanged(r, "ghx_1234567890abcdefghijklmnopqrstuvwxyz"));
	CHECK("redact github pat short", unchanged(r, "github_pat_123456789012345678901"));
	CHECK("redact gitlab short", unchanged(r, "glpat-abcdefghij012345678"));
	CHECK("redact slack short", unchanged(r, "xoxb-12345678"));
	CHECK("redact slack bad kind", unchanged(r, "xoxz-123456789012345"));
	CHECK("redact slack hook short", unchanged(r, "hooks.slack.com/services/T0"));
	CHECK("redact openai short", unchanged(r, "sk-abcdefghijklmnopqrs"));
	CHECK("redact openai in word", unchanged(r, "task-abcdefghijklmnopqrstuvwxyz"));
	CHECK("redact sk-ant short is not openai",
	      unchanged(r, "sk-ant-abcdefghijklmnopqrs")); /* 19 after sk-ant-, 23 after sk- */
	CHECK("redact stripe short", unchanged(r, "sk_live_abcdefghijklmno"));
	CHECK("redact stripe publishable", unchanged(r, "pk_live_abcdefghijklmnopqrstuvwx"));
	CHECK("redact jwt short segment", unchanged(r, "eyJhbGciOi.eyJzdWIiOiIxMjM0.abcdefgh"));
	CHECK("redact jwt two segments", unchanged(r, "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3"));
	CHECK("redact jwt in identifier", unchanged(r, "x" JWT));
	CHECK("redact url no password", unchanged(r, "ssh://git@github.com:22/o/r"));
	CHECK("redact url port", unchanged(r, "http://localhost:8080/a@b"));
	CHECK("redact url no scheme", unchanged(r, "1://a:b@c"));
	CHECK("redact env too short ignored", unchanged(r, "abc12 abc12"));
	CHECK("redact custom too short ignored", unchanged(r, "xyz xyz"));
	CHECK("redact empty", unchanged(r, ""));
	redactor_free(r);
}

static void test_modes(void)
{
	struct redactor *flag = new_default(REDACT_FLAG), *off = new_default(REDACT_OFF);
	struct redact_stats st;
	size_t n;
	char *out = redact_buffer(flag, DOC, strlen(DOC), &n, &st);
	CHECK("redact flag keeps bytes", out && n == strlen(DOC) && !strcmp(out, DOC));
	CHECK("redact flag counts", st.total == 15 && st.by_kind[RK_SLACK] == 2 &&
	                                st.by_kind[RK_URL_CREDENTIALS] == 2 &&
	                                st.by_kind[RK_GITHUB] == 1);
	free(out);
	out = redact_buffer(off, DOC, strlen(DOC), &n, &st);
	CHECK("redact off keeps bytes", out && n == strlen(DOC) && !strcmp(out, DOC));
	CHECK("redact off counts nothing", st.total == 0);
	free(out);
	CHECK("redact off holds nothing back", redact_holdback(off) == 0);

	/* streams in each mode: flag and off emit at once, unchanged */
	struct sink k = {0};
	struct redact_stream *s = redact_stream_new(flag, sink_put, &k);
	redact_stream_feed(s, "key " GHP, strlen("key " GHP));
	CHECK("redact flag stream emits immediately", k.len == strlen("key " GHP));
	redact_stream_finish(s);
	CHECK("redact flag stream counts", redact_stream_stats(s)->by_kind[RK_GITHUB] == 1);
	redact_stream_free(s);
	free(k.p);
	k = (struct sink){0};
	s = redact_stream_new(off, sink_put, &k);
	redact_stream_feed(s, "key " GHP, strlen("key " GHP));
	redact_stream_finish(s);
	CHECK("redact off stream passes through",
	      k.len == strlen("key " GHP) && redact_stream_stats(s)->total == 0);
	redact_stream_free(s);
	free(k.p);
	redactor_free(flag);
	redactor_free(off);
}

static void test_values(void)
{
	/* any bytes but NUL; longest first; overlapping pieces for long values */
	static char big[10001];
	uint32_t seed = 12345;
	for (int i = 0; i < 10000; i++) {
		seed = seed * 1103515245u + 12345u;
		big[i] = (char)('!' + (seed >> 16) % 90);
	}
	const char *vals[] = {"p@ss\x01\xff\n\"'\\[x]", "secret-abc", "secret-abcdef", big,
	                      "ghp_1234567890"};
	const char *custom[] = {"sk-proj-abc"};
	struct redactor *r = redactor_new(REDACT_REDACT, vals, 5, custom, 1);
	CHECK("redact env special bytes",
	      red_is(r, "v=p@ss\x01\xff\n\"'\\[x]!", "v=[REDACTED:env_value]!"));
	CHECK("redact env longest first", red_is(r, "secret-abcdef.", "[REDACTED:env_value]."));
	CHECK("redact env shorter one", red_is(r, "secret-abcde", "[REDACTED:env_value]de"));
	size_t n;
	char *in = malloc(10000 + 4);
	memcpy(in, "<<", 2);
	memcpy(in + 2, big, 10000);
	memcpy(in + 10002, ">>", 2);
	char *out = redact_buffer(r, in, 10004, &n, NULL);
	CHECK("redact long env value is one redaction",
	      out && !strcmp(out, "<<[REDACTED:env_value]>>"));
	free(out);
	/* part of a long value alone is still scrubbed where it holds a whole piece */
	out = redact_buffer(r, big + 1000, 8192, &n, NULL);
	CHECK("redact long env value piece",
	      out && strstr(out, "[REDACTED:env_value]") && !memmem(out, n, big + 5000, 64));
	free(out);
	free(in);

	/* overlaps: the union is redacted, named after the longest match at its start */
	CHECK("redact env prefix of token: token wins", red_is(r, GHP, "[REDACTED:github]"));
	CHECK("redact custom prefix of openai: openai wins",
	      red_is(r, OPENAI, "[REDACTED:openai]"));
	redactor_free(r);

	const char *v2[] = {"EXAMPLEsecretsuffix", OPENAI, "s3cretPass"};
	r = redactor_new(REDACT_REDACT, v2, 3, NULL, 0);
	CHECK("redact overlapping token and value merge",
	      red_is(r, AWS_ID "secretsuffix!", "[REDACTED:aws_access_key]!"));
	CHECK("redact same length: exact value named", red_is(r, OPENAI, "[REDACTED:env_value]"));
	CHECK("redact url password is a value",
	      red_is(r, "https://u:s3cretPass@h", "https://u:[REDACTED:url_credentials]@h"));
	CHECK("redact value straddling url user",
	      red_is(r, "https://s3cretPass:pw@h",
	             "https://[REDACTED:env_value]:[REDACTED:url_credentials]@h"));
	redactor_free(r);
}

/* stream == buffer, for every two-chunk split and for many random cuts */
static void test_stream_equality(void)
{
	enum redact_mode modes[] = {REDACT_REDACT, REDACT_FLAG};
	for (int mi = 0; mi < 2; mi++) {
		struct redactor *r = new_default(modes[mi]);
		size_t len = strlen(DOC), bl, sl;
		struct redact_stats bst, sst;
		char *want = redact_buffer(r, DOC, len, &bl, &bst);
		if (mi == 0)
			CHECK("redact document one of each kind", !strcmp(want, DOC_REDACTED));
		int bad = 0, badrel = 0;
		for (size_t k = 0; k <= len; k++) {
			char *got = stream_chunks(r, DOC, len, &k, 1, 0, &sst, &sl);
			if (sl != bl || memcmp(got, want, bl) || !stats_eq(&sst, &bst))
				bad++;
			free(got);
			/* the same split with an idle release in the middle */
			got = stream_chunks(r, DOC, len, &k, 1, 1, &sst, &sl);
			if (sl != bl || memcmp(got, want, bl) || !stats_eq(&sst, &bst))
				badrel++;
			free(got);
		}
		CHECK(mi ? "redact flag stream equals buffer at every split"
		         : "redact stream equals buffer at every split",
		      bad == 0);
		CHECK(mi ? "redact flag stream equals buffer at every split with a release"
		         : "redact stream equals buffer at every split with a release",
		      badrel == 0);
		bad = 0;
		badrel = 0;
		srand(7);
		for (int t = 0; t < 1500; t++) {
			size_t cuts[6];
			for (int i = 0; i < 6; i++)
				cuts[i] = (size_t)rand() % (len + 1);
			for (int i = 1; i < 6; i++) /* sort */
				for (int j = i; j > 0 && cuts[j] < cuts[j - 1]; j--) {
					size_t x = cuts[j];
					cuts[j] = cuts[j - 1];
					cuts[j - 1] = x;
				}
			char *got = stream_chunks(r, DOC, len, cuts, 6, 0, &sst, &sl);
			if (sl != bl || memcmp(got, want, bl) || !stats_eq(&sst, &bst))
				bad++;
			free(got);
			/* idle releases at random cuts among them */
			got =
			    stream_chunks(r, DOC, len, cuts, 6, (unsigned)rand() & 0x7f, &sst, &sl);
			if (sl != bl || memcmp(got, want, bl) || !stats_eq(&sst, &bst))
				badrel++;
			free(got);
		}
		CHECK(mi ? "redact flag stream equals buffer at random cuts"
		         : "redact stream equals buffer at random cuts",
		      bad == 0);
		CHECK(mi ? "redact flag stream equals buffer with releases at random cuts"
		         : "redact stream equals buffer with releases at random cuts",
		      badrel == 0);
		bad = 0;
		badrel = 0;
		for (size_t step = 1; step <= 9; step++) {
			char *got = stream_every(r, DOC, len, step, &sst, &sl);
			if (sl != bl || memcmp(got, want, bl) || !stats_eq(&sst, &bst))
				bad++;
			free(got);
			for (size_t rel = 1; rel <= 3; rel++) { /* a release every rel chunks */
				got = stream_every_rel(r, DOC, len, step, rel, &sst, &sl);
				if (sl != bl || memcmp(got, want, bl) || !stats_eq(&sst, &bst))
					badrel++;
				free(got);
			}
		}
		CHECK(mi ? "redact flag stream equals buffer in small chunks"
		         : "redact stream equals buffer in small chunks",
		      bad == 0);
		CHECK(mi ? "redact flag stream equals buffer in small chunks with releases"
		         : "redact stream equals buffer in small chunks with releases",
		      badrel == 0);
		free(want);
		redactor_free(r);
	}
}

static void test_stream_cases(void)
{
	struct redactor *r = new_default(REDACT_REDACT);
	size_t n;
	struct redact_stats st;

	/* a token split across two feeds */
	struct sink k = {0};
	struct redact_stream *s = redact_stream_new(r, sink_put, &k);
	redact_stream_feed(s, "token: ghp_1234567890abcdefghij", 31);
	CHECK("redact stream holds back a partial token", !k.p || !strstr(k.p, "ghp_"));
	redact_stream_feed(s, "klmnopqrstuvwxyz\nnext", 21);
	redact_stream_finish(s);
	CHECK("redact stream secret split across chunks",
	      k.p && !strcmp(k.p, "token: [REDACTED:github]\nnext"));
	redact_stream_free(s);
	free(k.p);

	/* PEM without END, streamed */
	const char *pem = "out\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg\nstill key?\n";
	char *got = stream_every(r, pem, strlen(pem), 5, &st, &n);
	CHECK("redact stream pem without end fails closed",
	      !strcmp(got, "out\n[REDACTED:pem_private_key]") && st.total == 1);
	free(got);

	/* a PEM block longer than 64 KiB: redacted up to its END however far */
	size_t blen = 200000, len = 0;
	char *big = malloc(blen + 200);
	len += (size_t)sprintf(big, "pre\n-----BEGIN RSA PRIVATE KEY-----\n");
	while (len < blen)
		len += (size_t)sprintf(big + len, "%s", PEM_BODY);
	size_t body_end = len;
	len += (size_t)sprintf(big + len, "-----END RSA PRIVATE KEY-----\npost " GHP "\n");
	char *want = redact_buffer(r, big, len, &n, NULL);
	CHECK("redact pem beyond 64k ends at END",
	      !strcmp(want, "pre\n[REDACTED:pem_private_key]\npost [REDACTED:github]\n"));
	got = stream_every(r, big, len, 1, NULL, &n);
	CHECK("redact pem beyond 64k stream 1-byte", !strcmp(got, want));
	free(got);
	got = stream_every(r, big, len, 65537, NULL, &n);
	CHECK("redact pem beyond 64k stream 64k chunks", !strcmp(got, want));
	free(got);
	free(want);
	/* ... and without END at all: redacted to the end of the stream */
	want = redact_buffer(r, big, body_end, &n, NULL);
	CHECK("redact pem beyond 64k without end",
	      !strcmp(want, "pre\n[REDACTED:pem_private_key]"));
	got = stream_every(r, big, body_end, 4096, NULL, &n);
	CHECK("redact pem beyond 64k without end streamed", !strcmp(got, want));
	free(got);
	free(want);

	/* a token run longer than the token bound is redacted whole */
	memcpy(big, "x ghp_", 6);
	for (size_t i = 6; i < 20006; i++)
		big[i] = (char)('a' + i % 26);
	memcpy(big + 20006, " y", 3);
	want = redact_buffer(r, big, 20008, &n, NULL);
	CHECK("redact very long token whole", !strcmp(want, "x [REDACTED:github] y"));
	got = stream_every(r, big, 20008, 3, NULL, &n);
	CHECK("redact very long token whole streamed", !strcmp(got, want));
	free(got);
	free(want);
	free(big);
	redactor_free(r);
}

/* What a stream has emitted so far equals want. */
static int emitted_is(const struct sink *k, const char *want)
{
	int ok = k->len == strlen(want) && (!k->len || !memcmp(k->p, want, k->len));
	if (!ok)
		printf("  want: %s\n  got:  %.*s\n", want, (int)k->len, k->p ? k->p : "");
	return ok;
}

/* Liveness: what a stream emits at once, and what an idle release adds, never more than is
 * safe. */
static void test_stream_release(void)
{
	struct redactor *r = new_default(REDACT_REDACT);
	struct sink k = {0};
	struct redact_stream *s = redact_stream_new(r, sink_put, &k);
	/* a line's newline is not held back: no detector starts with it */
	redact_stream_feed(s, "first\n", 6);
	CHECK("redact stream emits a whole line at once", emitted_is(&k, "first\n"));
	redact_stream_feed(s, "Listening on http://127.0.0.1:8000\n", 35);
	CHECK("redact stream emits a listening line at once",
	      emitted_is(&k, "first\nListening on http://127.0.0.1:8000\n"));
	CHECK("redact stream holds nothing after whole lines", redact_stream_held(s) == 0);
	/* a prefix of a withheld value, refuted by its next byte: released when idle */
	redact_stream_feed(s, "pw hunt", 7);
	redact_stream_feed(s, "er\n", 3);
	CHECK("redact stream holds a value prefix before a release", redact_stream_held(s) > 0);
	redact_stream_release(s);
	CHECK("redact release emits a refuted value prefix",
	      emitted_is(&k, "first\nListening on http://127.0.0.1:8000\npw hunter\n") &&
	          redact_stream_held(s) == 0);
	/* a prompt that ends in ':' (a URL's "://" starts there, its password later) */
	k.len = 0;
	redact_stream_feed(s, "Password:", 9);
	redact_stream_release(s);
	CHECK("redact release emits a trailing colon", emitted_is(&k, "Password:"));
	/* a token cut by a pause: the safe part comes out, the token waits for its end */
	k.len = 0;
	redact_stream_feed(s, "\ntok ghp_1234567890abcd", 23);
	redact_stream_release(s);
	redact_stream_release(s); /* twice is harmless */
	CHECK("redact release holds a token prefix back", emitted_is(&k, "\ntok "));
	redact_stream_feed(s, "efghijklmnopqrstuvwxyz end\n", 27);
	CHECK("redact token split by a release is redacted",
	      emitted_is(&k, "\ntok [REDACTED:github] end\n"));
	/* literal prefixes wait: a trailing "ghp_", "sk", "ey", "-----BEGIN " */
	k.len = 0;
	redact_stream_feed(s, "a ghp_", 6);
	redact_stream_release(s);
	CHECK("redact release holds a bare ghp_", emitted_is(&k, "a "));
	redact_stream_feed(s, "\nb sk", 5);
	redact_stream_release(s);
	CHECK("redact release holds a trailing sk", emitted_is(&k, "a ghp_\nb "));
	redact_stream_feed(s, "\n", 1);
	CHECK("redact trailing sk released by its newline", emitted_is(&k, "a ghp_\nb sk\n"));
	/* a separator line of dashes is not a PEM BEGIN: out at once, also when its newline
	 * comes in a read of its own (the byte that refutes a literal decides, no release) */
	k.len = 0;
	redact_stream_feed(s, "-----", 5);
	redact_stream_feed(s, "\n", 1);
	CHECK("redact dashes line at once", emitted_is(&k, "-----\n"));
	redact_stream_feed(s, "see gh", 6);
	redact_stream_feed(s, "\n", 1);
	CHECK("redact refuted token prefix at once", emitted_is(&k, "-----\nsee gh\n"));
	k.len = 0;
	/* a PEM block waiting for its END stays held, however long the pause */
	redact_stream_feed(s, "-----BEGIN RSA PRIVATE KEY-----\nMIIBOg", 38);
	redact_stream_release(s);
	CHECK("redact release holds a pending PEM block", emitted_is(&k, ""));
	redact_stream_feed(s, "IBAAJB\n-----END RSA PRIVATE KEY-----\n", 37);
	redact_stream_release(s);
	CHECK("redact PEM across a release is redacted whole",
	      emitted_is(&k, "[REDACTED:pem_private_key]\n"));
	/* a URL's user:password is held until the '@' decides */
	k.len = 0;
	redact_stream_feed(s, "db postgres://admin:s3cr", 24);
	redact_stream_release(s);
	CHECK("redact release holds URL credentials",
	      k.len && !memmem(k.p, k.len, "s3cr", 4) && !memmem(k.p, k.len, "admin", 5));
	redact_stream_feed(s, "etPass@db:5432\n", 15);
	redact_stream_finish(s);
	CHECK("redact URL password across a release",
	      emitted_is(&k, "db postgres://admin:[REDACTED:url_credentials]@db:5432\n"));
	CHECK("redact release counts once", redact_stream_stats(s)->total == 3);
	redact_stream_release(s); /* after finish: nothing */
	redact_stream_free(s);
	free(k.p);

	/* flag mode emits at once; a release adds nothing */
	struct redactor *flag = new_default(REDACT_FLAG);
	k = (struct sink){0};
	s = redact_stream_new(flag, sink_put, &k);
	redact_stream_feed(s, "x ghp_12", 8);
	redact_stream_release(s);
	CHECK("redact flag release emits nothing twice",
	      emitted_is(&k, "x ghp_12") && redact_stream_held(s) == 0);
	redact_stream_free(s);
	free(k.p);
	redactor_free(flag);
	redactor_free(r);
}

struct counter {
	uint64_t emitted;
};

static void count_put(void *ud, const char *b, size_t n)
{
	(void)b;
	((struct counter *)ud)->emitted += n;
}

/* 10 MB in 1-byte feeds: what is held back never exceeds the bound, and the result equals
 * the whole-buffer one. */
static void test_stream_big(void)
{
	struct redactor *r = new_default(REDACT_REDACT);
	size_t len = 10u << 20, n = 0;
	char *in = malloc(len + 256);
	static const char *lines[] = {
	    "2024-05-01T12:00:00Z INFO request served in 12ms path=/api/v1/items status=200\n",
	    "  at com.example.Service.handle(Service.java:42) -- see https://example.com:8443/x\n",
	    "DEBUG task-runner sk-short eyJnot.a.jwt AKIA-not-a-key ghp_short --- ----- :// \n",
	    "the quick brown fox jumps over the lazy dog; she asks how they key the skeleton\n",
	};
	int li = 0;
	while (n < len - 128)
		n += (size_t)sprintf(in + n, "%s", lines[li++ % 4]);
	len = n;
	struct counter ct = {0};
	struct redact_stream *s = redact_stream_new(r, count_put, &ct);
	uint64_t worst = 0, bound = redact_holdback(r);
	size_t heap = mallinfo2().uordblks; /* a stream allocates once, when created */
	for (size_t i = 0; i < len; i++) {
		redact_stream_feed(s, in + i, 1);
		if (i + 1 - ct.emitted > worst)
			worst = i + 1 - ct.emitted;
	}
	redact_stream_finish(s);
	CHECK("redact 10MB 1-byte chunks no allocation", mallinfo2().uordblks == heap);
	CHECK("redact 10MB 1-byte chunks all emitted", ct.emitted == len);
	CHECK("redact 10MB 1-byte chunks bounded holdback", worst <= bound);
	printf("INFO redact worst holdback on plain text %llu bytes (bound %llu)\n",
	       (unsigned long long)worst, (unsigned long long)bound);
	redact_stream_free(s);

	/* with secrets sprinkled in, 1-byte feeds give the buffer's result */
	for (size_t at = 1000; at + 200 < len; at += 1 << 20) {
		static const char *sec[] = {" " GHP " ", " " ENVVAL " ", "\n" PEM "\n",
		                            " " JWT " "};
		const char *x = sec[(at >> 20) % 4];
		memcpy(in + at, x, strlen(x));
	}
	size_t bl, sl;
	struct redact_stats bst, sst;
	char *want = redact_buffer(r, in, len, &bl, &bst);
	char *got = stream_every(r, in, len, 1, &sst, &sl);
	CHECK("redact 10MB 1-byte chunks equal buffer",
	      bl == sl && !memcmp(want, got, bl) && stats_eq(&bst, &sst) && bst.total == 10);
	free(got);
	got = stream_every_rel(r, in, len, 13, 7, &sst, &sl);
	CHECK("redact 10MB with idle releases equal buffer",
	      bl == sl && !memcmp(want, got, bl) && stats_eq(&bst, &sst));
	free(want);
	free(got);
	free(in);
	redactor_free(r);
}

static void test_stats(void)
{
	struct redactor *r = new_default(REDACT_REDACT);
	struct redact_stats st;
	size_t n;
	char *out = redact_buffer(r, GHP " " AWS_ID " " GHPAT " x",
	                          strlen(GHP " " AWS_ID " " GHPAT " x"), &n, &st);
	CHECK("redact stats total", st.total == 3);
	CHECK("redact stats by kind", st.by_kind[RK_GITHUB] == 2 &&
	                                  st.by_kind[RK_AWS_ACCESS_KEY] == 1 &&
	                                  st.by_kind[RK_JWT] == 0);
	free(out);
	out = redact_buffer(r, "nothing here", 12, &n, &st);
	CHECK("redact stats zero", st.total == 0 && n == 12);
	free(out);
	struct sink k = {0};
	struct redact_stream *s = redact_stream_new(r, sink_put, &k);
	redact_stream_feed(s, DOC, 100);
	redact_stream_feed(s, DOC + 100, strlen(DOC) - 100);
	redact_stream_finish(s);
	redact_stream_finish(s); /* twice is harmless */
	CHECK("redact stream stats", redact_stream_stats(s)->total == 15 &&
	                                 redact_stream_stats(s)->by_kind[RK_PEM_PRIVATE_KEY] == 1 &&
	                                 redact_stream_stats(s)->by_kind[RK_ENV_VALUE] == 1 &&
	                                 redact_stream_stats(s)->by_kind[RK_CUSTOM] == 1);
	redact_stream_free(s);
	free(k.p);
	redactor_free(r);
}

/* Exact values for redactors with one and with ten of them (ten first bytes besides the
 * detectors'), and one custom string. */
static const char *MANY[] = {ENVVAL,          "Bq7-private-one", "Cq7-private-two", "Dq7-private-3",
                             "Eq7-private-4", "Fq7-private-5",   "Gq7-private-6",   "Hq7-private-7",
                             "Iq7-private-8", "Jq7-private-9"};
static const char *CUSTOM_ONE[] = {CUSTOM};

/* Every secret at every offset from 100 to 147 (the anchor scan checks four positions at a
 * time), after filler without a byte a detector can start with and after filler full of
 * them that starts nothing, in a redactor with the default detectors and one exact value and
 * in one with ten values: each is found once. */
static void test_anchor_alignment(void)
{
	static const struct {
		const char *secret, *must_go;
	} cases[] = {{GHP, GHP},       {AWS_ID, AWS_ID},
	             {PEM, PEM_BODY},  {XOXB, XOXB},
	             {JWT, JWT},       {"postgres://admin:s3cretPass@db.x", "s3cretPass"},
	             {ENVVAL, ENVVAL}, {CUSTOM, CUSTOM}};
	struct redactor *rs[2] = {redactor_new(REDACT_REDACT, MANY, 1, CUSTOM_ONE, 1),
	                          redactor_new(REDACT_REDACT, MANY, 10, CUSTOM_ONE, 1)};
	static const char *const fill[] = {"ZZZZ. ZZ,Z ZZZ;", "ah. eh, ax; sr. -a :x gi, "};
	bool ok = true;
	char in[512];
	for (int w = 0; w < 2; w++)
		for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
			for (int f = 0; f < 2; f++)
				for (size_t off = 0; off < 48; off++) {
					size_t n = 0, fl = strlen(fill[f]);
					for (; n < 100 + off; n++)
						in[n] = fill[f][n % fl];
					n += (size_t)snprintf(in + n, sizeof(in) - n, " %s %s",
					                      cases[c].secret, fill[f]);
					size_t on;
					struct redact_stats st;
					char *out = redact_buffer(rs[w], in, n, &on, &st);
					if (!out || strstr(out, cases[c].must_go) ||
					    st.total != 1) {
						printf("  redactor %d, case %zu, filler %d, offset "
						       "%zu: %s\n",
						       w, c, f, off, out ? out : "(null)");
						ok = false;
					}
					free(out);
				}
	CHECK("redact finds every secret at every offset", ok);
	redactor_free(rs[0]);
	redactor_free(rs[1]);
}

/* The AVX2 anchor scan (32 positions at a time, a nibble pre-filter, then the exact bigram
 * bitmap) and the portable scalar one give the same output and counts: every secret at every
 * offset across two 32-byte blocks, and random text drawn mostly from the bytes the bigrams
 * use, with redactors of 1, 10 and 200 exact values (the last has more than 16 first bytes,
 * so its pre-filter merges groups by nibble first). On a CPU with AVX2 (the CI machines) the
 * vector scan must be the one in use, so the comparison compares two different scans. */
static void test_simd_equals_scalar(void)
{
	static char vals200[200][24];
	const char *vp[200];
	srand(11);
	for (int i = 0; i < 200; i++) {
		for (int j = 0; j < 12; j++)
			vals200[i][j] = (char)(33 + rand() % 94);
		vals200[i][0] = (char)(33 + i % 94); /* 94 first bytes */
		vals200[i][12] = 0;
		vp[i] = vals200[i];
	}
	vp[0] = ENVVAL;
	struct redactor *vec[3] = {redactor_new(REDACT_REDACT, MANY, 1, CUSTOM_ONE, 1),
	                           redactor_new(REDACT_REDACT, MANY, 10, CUSTOM_ONE, 1),
	                           redactor_new(REDACT_REDACT, vp, 200, CUSTOM_ONE, 1)};
	struct redactor *sca[3] = {redactor_new(REDACT_REDACT, MANY, 1, CUSTOM_ONE, 1),
	                           redactor_new(REDACT_REDACT, MANY, 10, CUSTOM_ONE, 1),
	                           redactor_new(REDACT_REDACT, vp, 200, CUSTOM_ONE, 1)};
	bool vec_on = true;
	for (int w = 0; w < 3; w++) {
		vec_on = vec_on && redactor_use_simd(vec[w], true);
		CHECK("redact scalar scan can be chosen", !redactor_use_simd(sca[w], false));
	}
#if defined(__x86_64__) && defined(__GNUC__) && !defined(CORRAL_NO_SIMD)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2"))
		CHECK("redact uses the AVX2 anchor scan on a CPU with AVX2", vec_on);
#endif
	printf("INFO redact anchor scan: %s\n", vec_on ? "AVX2" : "scalar");

	static const char *const secrets[] = {
	    GHP,   AWS_ID, PEM,    XOXB,
	    JWT,   ENVVAL, CUSTOM, "postgres://admin:s3cretPass@db.x",
	    GLPAT, OPENAI, STRIPE, ("aws_secret_access_key=" AWS_SECRET)};
	char in[1024];
	int bad = 0, cases = 0;
	for (int w = 0; w < 3; w++)
		for (size_t c = 0; c < sizeof(secrets) / sizeof(secrets[0]); c++)
			for (size_t off = 0; off < 70; off++) {
				size_t n = 0;
				for (; n < off; n++)
					in[n] = "ZZ. ah, sr gi -a :x\n"[n % 20];
				n += (size_t)snprintf(in + n, sizeof(in) - n, " %s zz. ZZZZ, ZZZZ ",
				                      secrets[c]);
				size_t a, b;
				struct redact_stats sa, sb;
				char *x = redact_buffer(vec[w], in, n, &a, &sa);
				char *y = redact_buffer(sca[w], in, n, &b, &sb);
				if (!x || !y || a != b || memcmp(x, y, a) || !stats_eq(&sa, &sb) ||
				    sa.total == 0) {
					if (bad < 5)
						printf("  redactor %d, secret %zu, offset %zu: %s "
						       "| %s "
						       "(%llu, %llu)\n",
						       w, c, off, x ? x : "(null)",
						       y ? y : "(null)",
						       (unsigned long long)sa.total,
						       (unsigned long long)sb.total);
					bad++;
				}
				cases++;
				free(x);
				free(y);
			}
	CHECK("redact AVX2 and scalar scans agree on every secret at every offset", bad == 0);

	/* random text: many near-anchors, some real ones, lengths across the block size */
	static const char alpha[] = "AKSGIRNwWaghilxoeyrk-:/_pJZz0123. \n\x01\xff";
	char *buf = malloc(8192);
	bad = 0;
	uint64_t found = 0;
	for (int t = 0; t < 3000; t++) {
		size_t n = (size_t)rand() % 8192;
		for (size_t i = 0; i < n; i++)
			buf[i] = alpha[(size_t)rand() % (sizeof(alpha) - 1)];
		if (n > 64 && t % 3 == 0) { /* a real secret now and then */
			const char *sx =
			    secrets[(size_t)t % (sizeof(secrets) / sizeof(secrets[0]))];
			size_t at = (size_t)rand() % (n - 64), sl = strlen(sx);
			if (at + sl < n)
				memcpy(buf + at, sx, sl);
		}
		if (n > 20 && t % 5 == 0) { /* an exact value of the large redactor */
			size_t at = (size_t)rand() % (n - 20);
			memcpy(buf + at, vp[1 + (size_t)t % 199], 12);
		}
		int w = t % 3;
		size_t a, b;
		struct redact_stats sa, sb;
		char *x = redact_buffer(vec[w], buf, n, &a, &sa);
		char *y = redact_buffer(sca[w], buf, n, &b, &sb);
		if (!x || !y || a != b || memcmp(x, y, a) || !stats_eq(&sa, &sb))
			bad++;
		found += sa.total;
		/* and streamed in odd chunks with the vector scan */
		size_t sl;
		struct redact_stats ss;
		char *z = stream_every(vec[w], buf, n, 1 + (size_t)t % 97, &ss, &sl);
		if (!z || !y || sl != b || memcmp(z, y, b) || !stats_eq(&ss, &sb))
			bad++;
		free(x);
		free(y);
		free(z);
	}
	printf("INFO redact AVX2/scalar comparison: %d secret cases, 3000 random texts with %llu "
	       "redactions\n",
	       cases, (unsigned long long)found);
	CHECK("redact AVX2 and scalar scans agree on random text", bad == 0 && found > 400);
	free(buf);
	for (int w = 0; w < 3; w++) {
		redactor_free(vec[w]);
		redactor_free(sca[w]);
	}
}

void test_redact(void)
{
	test_simd_equals_scalar();
	test_anchor_alignment();
	test_detectors();
	test_modes();
	test_values();
	test_stream_equality();
	test_stream_cases();
	test_stream_release();
	test_stream_big();
	test_stats();
}
