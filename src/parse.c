/* Pure parsers for sizes, durations and counts given on the command line or over MCP. */
#include "internal.h"

#include <ctype.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#define EIB (1ULL << 60)

/* Parse a non-negative decimal number with an optional fraction; *end after it. */
static int parse_decimal(const char *s, long double *out, const char **end)
{
	const char *p = s;
	long double v = 0;
	int digits = 0;
	while (isdigit((unsigned char)*p)) {
		v = v * 10 + (*p - '0');
		p++;
		digits++;
		if (digits > 30)
			return -1;
	}
	if (*p == '.') {
		p++;
		long double scale = 0.1L;
		while (isdigit((unsigned char)*p)) {
			v += (*p - '0') * scale;
			scale /= 10;
			p++;
			digits++;
			if (digits > 40)
				return -1;
		}
	}
	if (!digits)
		return -1;
	*out = v;
	*end = p;
	return 0;
}

int parse_size(const char *s, uint64_t *out, const char **why)
{
	long double v;
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
			long double bytes = v * units[i].mult;
			if (bytes > (long double)EIB) {
				*why = "size is absurdly large (over 1 EiB)";
				return -1;
			}
			*out = (uint64_t)bytes;
			return 0;
		}
	}
	*why = "unknown size unit; use k, M, G or T (powers of 1024)";
	return -1;
}

int parse_duration_ms(const char *s, uint64_t *out, const char **why)
{
	long double v;
	const char *end;
	if (!s || !*s || s[0] == '-' || s[0] == '+' || parse_decimal(s, &v, &end) < 0) {
		*why = "expected a non-negative duration: 30, 1.5, 250ms, 2m, 1h (bare numbers are "
		       "seconds)";
		return -1;
	}
	long double ms;
	if (!*end || !strcmp(end, "s"))
		ms = v * 1000;
	else if (!strcmp(end, "ms"))
		ms = v;
	else if (!strcmp(end, "m"))
		ms = v * 60000;
	else if (!strcmp(end, "h"))
		ms = v * 3600000;
	else if (!strcmp(end, "d"))
		ms = v * 86400000;
	else {
		*why = "unknown duration unit; use ms, s, m, h or d";
		return -1;
	}
	/* A year is already an absurd timeout for a sandboxed command. */
	if (ms > 366.0L * 86400000) {
		*why = "duration is absurdly long (over a year)";
		return -1;
	}
	*out = (uint64_t)ms;
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
		if (v > max / 10 + 1) {
			*why = "number is too large";
			return -1;
		}
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (v == 0) {
		*why = "must be at least 1";
		return -1;
	}
	if (v > max) {
		*why = "number is too large";
		return -1;
	}
	*out = v;
	return 0;
}
