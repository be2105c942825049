/* Pure parsers for sizes, durations and counts given on the command line or over MCP. */
#include "internal.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>

#define EIB (1ULL << 60)

/* A non-negative decimal number with an optional fraction, kept exact: the integer part
 * and every digit of the fraction (floating point would turn "2.17" s into 2169 ms and
 * "0.001" s into 0, which means "no timeout"; keeping only some of the fraction's digits
 * would round ".0333...366d" down below its exact value). *end is after the number. */
#define DECIMAL_MAX_DIGITS 40
struct decimal {
	uint64_t ip;                      /* integer part (at most 19 digits) */
	uint8_t frac[DECIMAL_MAX_DIGITS]; /* the fraction's digits, most significant first */
	int nfrac;
	bool nonzero; /* any nonzero digit */
};

static int parse_decimal(const char *s, struct decimal *d, const char **end)
{
	const char *p = s;
	int digits = 0;
	d->ip = 0;
	d->nfrac = 0;
	d->nonzero = false;
	while (isdigit((unsigned char)*p)) {
		d->nonzero |= *p != '0';
		if (__builtin_mul_overflow(d->ip, 10, &d->ip) ||
		    __builtin_add_overflow(d->ip, (uint64_t)(*p - '0'), &d->ip))
			return -1;
		p++;
		if (++digits > 30) /* no sensible value has more digits */
			return -1;
	}
	if (*p == '.') {
		p++;
		while (isdigit((unsigned char)*p)) {
			d->nonzero |= *p != '0';
			if (++digits > DECIMAL_MAX_DIGITS)
				return -1;
			d->frac[d->nfrac++] = (uint8_t)(*p - '0');
			p++;
		}
	}
	if (!digits)
		return -1;
	*end = p;
	return 0;
}

/* d * mult, rounded down, exactly; -1 when it exceeds max. The fraction's part is
 * floor(0.f1 f2 ... fn * mult), by Horner's rule from the last digit:
 * r = floor((f_i * mult + r) / 10), which is exact because flooring an integer plus a
 * fraction before dividing by 10 does not change the floor. mult <= 2^40 keeps it in range. */
static int decimal_scale(const struct decimal *d, uint64_t mult, uint64_t max, uint64_t *out)
{
	unsigned __int128 r = 0;
	for (int i = d->nfrac - 1; i >= 0; i--)
		r = ((unsigned __int128)d->frac[i] * mult + r) / 10;
	unsigned __int128 v = (unsigned __int128)d->ip * mult + r;
	if (v > max)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

int parse_size(const char *s, uint64_t *out, const char **why)
{
	struct decimal v;
	const char *end;
	if (!s || !*s || s[0] == '-' || s[0] == '+' || parse_decimal(s, &v, &end) < 0) {
		*why = "expected a number of bytes with an optional unit: 512, 64k, 1.5M, 2G";
		return -1;
	}
	static const struct {
		const char *suffix;
		uint64_t mult;
	} units[] = {
		{"", 1},          {"b", 1},           {"k", 1ULL << 10}, {"kb", 1ULL << 10},
		{"kib", 1ULL << 10}, {"m", 1ULL << 20}, {"mb", 1ULL << 20}, {"mib", 1ULL << 20},
		{"g", 1ULL << 30}, {"gb", 1ULL << 30}, {"gib", 1ULL << 30}, {"t", 1ULL << 40},
		{"tb", 1ULL << 40}, {"tib", 1ULL << 40},
	};
	for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
		if (strcasecmp(end, units[i].suffix) == 0) {
			if (decimal_scale(&v, units[i].mult, EIB, out) < 0) {
				*why = "size is absurdly large (over 1 EiB)";
				return -1;
			}
			/* a nonzero size below one byte would read as 0, "no limit": refuse it */
			if (*out == 0 && v.nonzero) {
				*why = "size is below one byte, which would mean no limit; give at "
				       "least 1 "
				       "(or 0 for no limit)";
				return -1;
			}
			return 0;
		}
	}
	*why = "unknown size unit; use k, M, G or T (powers of 1024)";
	return -1;
}

int parse_duration_ms(const char *s, uint64_t *out, const char **why)
{
	struct decimal v;
	const char *end;
	if (!s || !*s || s[0] == '-' || s[0] == '+' || parse_decimal(s, &v, &end) < 0) {
		*why = "expected a non-negative duration: 30, 1.5, 250ms, 2m, 1h (bare numbers are "
		       "seconds)";
		return -1;
	}
	uint64_t mult;
	if (!*end || !strcmp(end, "s"))
		mult = 1000;
	else if (!strcmp(end, "ms"))
		mult = 1;
	else if (!strcmp(end, "m"))
		mult = 60000;
	else if (!strcmp(end, "h"))
		mult = 3600000;
	else if (!strcmp(end, "d"))
		mult = 86400000;
	else {
		*why = "unknown duration unit; use ms, s, m, h or d";
		return -1;
	}
	/* A year is already an absurd timeout for a sandboxed command. */
	if (decimal_scale(&v, mult, 366ULL * 86400000, out) < 0) {
		*why = "duration is absurdly long (over a year)";
		return -1;
	}
	/* a nonzero duration below a millisecond would read as 0, "none": refuse it */
	if (*out == 0 && v.nonzero) {
		*why = "duration is below a millisecond; give at least 1ms (or 0 for none)";
		return -1;
	}
	return 0;
}

int parse_count(const char *s, uint64_t max, uint64_t *out, const char **why)
{
	uint64_t v = 0;
	if (!s || !*s) {
		*why = "expected a positive whole number";
		return -1;
	}
	for (const char *p = s; *p; p++) {
		if (!isdigit((unsigned char)*p)) {
			*why = "expected a positive whole number";
			return -1;
		}
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v) || v > max) {
			*why = "number is too large";
			return -1;
		}
	}
	if (v == 0) {
		*why = "must be at least 1";
		return -1;
	}
	*out = v;
	return 0;
}

int parse_cpus(const char *s, uint64_t *out, const char **why)
{
	struct decimal v;
	const char *end;
	if (!s || !*s || s[0] == '-' || s[0] == '+' || parse_decimal(s, &v, &end) < 0 || *end) {
		*why = "expected a number of CPUs: 0.5, 1, 2.5 (0 for no limit)";
		return -1;
	}
	if (decimal_scale(&v, 100, 100 * 4096, out) < 0) {
		*why = "at most 4096 CPUs";
		return -1;
	}
	if (*out == 0 && v.nonzero) {
		*why = "below 0.01 CPU; the smallest share is 0.01";
		return -1;
	}
	return 0;
}

int parse_hostport(const char *s, const char **why)
{
	static const char form[] =
	    "expected HOST:PORT: a host name or an IPv4 address, or an IPv6 address in brackets "
	    "([::1]:443), and a port from 1 to 65535";
	const char *colon = s ? strrchr(s, ':') : NULL;
	*why = form;
	if (!colon || colon == s)
		return -1;
	uint64_t port = 0;
	const char *count_why;
	if (parse_count(colon + 1, 65535, &port, &count_why) < 0)
		return -1;
	char host[256];
	size_t n = (size_t)(colon - s);
	if (s[0] == '[') { /* [IPv6]:PORT */
		struct in6_addr a6;
		if (n < 3 || s[n - 1] != ']' || n - 2 >= sizeof(host))
			return -1;
		memcpy(host, s + 1, n - 2);
		host[n - 2] = '\0';
		return inet_pton(AF_INET6, host, &a6) == 1 ? 0 : -1;
	}
	if (n >= sizeof(host))
		return -1;
	memcpy(host, s, n);
	host[n] = '\0';
	/* a name's letters, digits, dots, hyphens and underscores; all digits and dots: IPv4 */
	bool numeric = true;
	for (const char *p = host; *p; p++) {
		if (!isalnum((unsigned char)*p) && !strchr(".-_", *p))
			return -1;
		numeric &= isdigit((unsigned char)*p) || *p == '.';
	}
	struct in_addr a4;
	return !numeric || inet_pton(AF_INET, host, &a4) == 1 ? 0 : -1;
}
