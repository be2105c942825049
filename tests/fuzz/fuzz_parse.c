/* libFuzzer target for the command-line value parsers (src/parse.c): parse_size,
 * parse_duration_ms and parse_count, each on a NUL-terminated copy of the input.
 *
 * Oracles, checked against an independent reading of the same text:
 * - success exactly when the text has the documented shape (digits, an optional fraction, a
 *   known unit; at most 30 integer digits and 40 digits in all) and the value is in range;
 * - on success the value is within the documented bound (size: 1 EiB; duration: 366 days;
 *   count: 1..max) and equals the exact value of the decimal, rounded down, computed here
 *   in 128-bit integers (one more, i.e. rounding to nearest, is tolerated where the exact
 *   value is not a whole number);
 * - parse_count agrees exactly with a checked-arithmetic reading, for the maxima the CLI
 *   uses and for extreme ones (max near UINT64_MAX).
 * Input: the text; after a NUL, 8 optional bytes give one more max for parse_count.
 *
 *   tests/fuzz/run.sh builds it; by hand:
 *   make BUILD=build-fuzz CC=clang \
 *     CFLAGS="-g -O1 -fsanitize=fuzzer-no-link,address,undefined" build-fuzz/libcorral.a
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc \
 *     tests/fuzz/fuzz_parse.c build-fuzz/libcorral.a $(pkg-config --libs jansson) \
 *     -o build-fuzz/fuzz_parse
 *   build-fuzz/fuzz_parse -dict=tests/fuzz/parse.dict tests/fuzz/corpus/parse
 */
#include "internal.h"

#include "fuzz_util.h"

#include <ctype.h>
#include <strings.h>

#define EIB (1ULL << 60)
#define YEAR_MS (366ULL * 86400000ULL)

typedef unsigned __int128 u128;

struct decimal {
	bool ok; /* the number has the accepted shape */
	const char *unit;
	u128 mant;     /* all digits as one integer (leading zeros dropped) */
	unsigned frac; /* digits after the point */
	bool exact;    /* mant fits (at most 36 significant digits) */
};

static struct decimal read_decimal(const char *s)
{
	struct decimal d = {0};
	const char *p = s;
	unsigned int_digits = 0, digits = 0, sig = 0;
	while (isdigit((unsigned char)*p)) {
		int_digits++;
		digits++;
		if (sig || *p != '0')
			sig++;
		if (sig <= 36)
			d.mant = d.mant * 10 + (u128)(*p - '0');
		p++;
	}
	if (*p == '.') {
		p++;
		while (isdigit((unsigned char)*p)) {
			digits++;
			d.frac++;
			if (sig || *p != '0')
				sig++;
			if (sig <= 36)
				d.mant = d.mant * 10 + (u128)(*p - '0');
			p++;
		}
	}
	d.ok = digits > 0 && int_digits <= 30 && digits <= 40;
	d.exact = sig <= 36;
	d.unit = p;
	return d;
}

static u128 pow10_u128(unsigned n)
{
	u128 v = 1;
	while (n--)
		v *= 10;
	return v;
}

/* Check one parse of a decimal with a multiplier (the unit's value in the result's unit)
 * against the exact value and the bound. */
static void check_value(const struct decimal *d, int rc, uint64_t out, uint64_t mult,
                        uint64_t bound)
{
	if (rc == 0)
		FZ_CHECK(out <= bound);
	if (!d->exact || d->frac > 38)
		return;
	u128 num;
	if (__builtin_mul_overflow(d->mant, (u128)mult, &num))
		return; /* many significant digits and a large unit: only the bound applies */
	u128 den = pow10_u128(d->frac);
	u128 q = num / den, rem = num % den;
	/* Near the bound the long double comparison may go either way; only judge clear cases. */
	u128 slack = (u128)bound / 1000000 + 2;
	if (q > (u128)bound + slack) {
		FZ_CHECK(rc != 0);
		return;
	}
	if (q + slack < (u128)bound) {
		FZ_CHECK(rc == 0);
		/* exact, every digit counted: "1.5" is 1500 ms, not 1499, and
		 * ".03333333333333333333333366d" is 2880000 ms, not 2879999 */
		(void)rem;
		FZ_CHECK(out == (uint64_t)q);
	}
}

/* A nonzero value below one unit of the result (a byte, a millisecond) would read as 0, which
 * means none: it must be refused (true: judged, nothing more to check); and 0 comes only from
 * a zero value. */
static bool below_one_unit(const struct decimal *d, int rc, uint64_t out, uint64_t mult)
{
	if (d->exact && d->frac <= 38 && d->mant) {
		u128 num;
		if (!__builtin_mul_overflow(d->mant, (u128)mult, &num) &&
		    num < pow10_u128(d->frac)) {
			FZ_CHECK(rc != 0);
			return true;
		}
	}
	if (rc == 0 && out == 0)
		FZ_CHECK(d->mant == 0 || !d->exact);
	return false;
}

static void check_size(const char *s)
{
	static const struct {
		const char *suffix;
		uint64_t mult;
	} units[] = {
	    /* clang-format off */
		{"", 1},           {"b", 1},           {"k", 1ULL << 10}, {"kb", 1ULL << 10},
		{"kib", 1ULL << 10}, {"m", 1ULL << 20}, {"mb", 1ULL << 20}, {"mib", 1ULL << 20},
		{"g", 1ULL << 30}, {"gb", 1ULL << 30}, {"gib", 1ULL << 30}, {"t", 1ULL << 40},
		{"tb", 1ULL << 40}, {"tib", 1ULL << 40},
	    /* clang-format on */
	};
	uint64_t out = 0xdeadbeef;
	const char *why = NULL;
	int rc = parse_size(s, &out, &why);
	FZ_CHECK(rc == 0 || (rc == -1 && why && *why));
	struct decimal d = read_decimal(s);
	uint64_t mult = 0;
	for (size_t i = 0; d.ok && i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcasecmp(d.unit, units[i].suffix))
			mult = units[i].mult;
	if (!mult) {
		FZ_CHECK(rc != 0);
		return;
	}
	/* a nonzero size below one byte would read as 0, "no limit" */
	if (below_one_unit(&d, rc, out, mult))
		return;
	check_value(&d, rc, out, mult, EIB);
}

static void check_duration(const char *s)
{
	uint64_t out = 0xdeadbeef;
	const char *why = NULL;
	int rc = parse_duration_ms(s, &out, &why);
	FZ_CHECK(rc == 0 || (rc == -1 && why && *why));
	struct decimal d = read_decimal(s);
	uint64_t mult = 0;
	if (d.ok) {
		if (!strcmp(d.unit, "") || !strcmp(d.unit, "s"))
			mult = 1000;
		else if (!strcmp(d.unit, "ms"))
			mult = 1;
		else if (!strcmp(d.unit, "m"))
			mult = 60000;
		else if (!strcmp(d.unit, "h"))
			mult = 3600000;
		else if (!strcmp(d.unit, "d"))
			mult = 86400000;
	}
	if (!mult) {
		FZ_CHECK(rc != 0);
		return;
	}
	/* a nonzero duration below 1 ms would read as 0, "no timeout" */
	if (below_one_unit(&d, rc, out, mult))
		return;
	check_value(&d, rc, out, mult, YEAR_MS);
}

static void check_count(const char *s, uint64_t max)
{
	uint64_t out = 0xdeadbeef;
	const char *why = NULL;
	int rc = parse_count(s, max, &out, &why);
	FZ_CHECK(rc == 0 || (rc == -1 && why && *why));
	/* reference: all digits, no overflow, 1 <= v <= max */
	bool ok = *s != '\0', overflow = false;
	uint64_t v = 0;
	for (const char *p = s; ok && *p; p++) {
		if (!isdigit((unsigned char)*p))
			ok = false;
		else if (__builtin_mul_overflow(v, 10, &v) ||
		         __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
			overflow = true;
	}
	bool want = ok && !overflow && v >= 1 && v <= max;
	FZ_CHECK((rc == 0) == want);
	if (want)
		FZ_CHECK(out == v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';

	check_size(s);
	check_duration(s);

	/* the maxima the CLI and MCP server pass, and the extremes */
	/* clang-format off */
	static const uint64_t maxima[] = {
		0, 1, 9, 10, 4096, 1u << 22, 1u << 24, 1u << 30, 366ULL * 86400,
		UINT64_MAX / 10, UINT64_MAX / 10 + 1, UINT64_MAX - 10, UINT64_MAX - 1, UINT64_MAX,
	};
	/* clang-format on */
	for (size_t i = 0; i < sizeof(maxima) / sizeof(maxima[0]); i++)
		check_count(s, maxima[i]);
	size_t sl = strlen(s);
	if (size - sl > 8) {
		uint64_t max;
		memcpy(&max, data + sl + 1, 8);
		check_count(s, max);
	}
	free(s);
	return 0;
}
