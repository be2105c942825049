#include "internal.h"
#include "test.h"

void test_parse(void)
{
	uint64_t v;
	const char *why;
	CHECK("parse_size plain", parse_size("512", &v, &why) == 0 && v == 512);
	CHECK("parse_size k", parse_size("64k", &v, &why) == 0 && v == 65536);
	CHECK("parse_size M fraction", parse_size("1.5M", &v, &why) == 0 && v == 1572864);
	CHECK("parse_size GiB", parse_size("2GiB", &v, &why) == 0 && v == 2ULL << 30);
	CHECK("parse_size rejects 12Q", parse_size("12Q", &v, &why) < 0 && strstr(why, "unit"));
	CHECK("parse_size rejects negative", parse_size("-1", &v, &why) < 0);
	CHECK("parse_size rejects empty", parse_size("", &v, &why) < 0);
	CHECK("parse_size rejects absurd", parse_size("99999999T", &v, &why) < 0 &&
	                                       strstr(why, "absurd"));
	CHECK("parse_size rejects junk", parse_size("1.2.3", &v, &why) < 0);
	/* below one byte would read as 0, "no limit" */
	CHECK("parse_size rejects below a byte", parse_size("0.5", &v, &why) < 0 &&
	                                             strstr(why, "below one byte") &&
	                                             parse_size("0.0000001k", &v, &why) < 0);
	CHECK("parse_size zero is zero", parse_size("0", &v, &why) == 0 && v == 0 &&
	                                     parse_size("0.0M", &v, &why) == 0 && v == 0);
	CHECK("parse_size rejects long digits",
	      parse_size("1111111111111111111111111111111111111", &v, &why) < 0);
	CHECK("parse_duration seconds", parse_duration_ms("30", &v, &why) == 0 && v == 30000);
	CHECK("parse_duration fraction", parse_duration_ms("1.5", &v, &why) == 0 && v == 1500);
	CHECK("parse_duration ms", parse_duration_ms("250ms", &v, &why) == 0 && v == 250);
	CHECK("parse_duration m", parse_duration_ms("2m", &v, &why) == 0 && v == 120000);
	CHECK("parse_duration h", parse_duration_ms("1h", &v, &why) == 0 && v == 3600000);
	/* every digit of the fraction counts (fuzz_parse found these one below the exact floor
	 * when only 18 digits were kept) */
	CHECK("parse_duration exact long fraction",
	      parse_duration_ms(".03333333333333333333333366d", &v, &why) == 0 && v == 2880000);
	CHECK("parse_duration exact long fraction 2",
	      parse_duration_ms("9.99999777777777777777777900001d", &v, &why) == 0 &&
	          v == 863999808);
	CHECK("parse_duration exact long fraction 3",
	      parse_duration_ms("0.2222222222222222222226800000001d", &v, &why) == 0 &&
	          v == 19200000);
	CHECK("parse_duration zero", parse_duration_ms("0", &v, &why) == 0 && v == 0);
	CHECK("parse_duration rejects -1", parse_duration_ms("-1", &v, &why) < 0);
	CHECK("parse_duration rejects unit", parse_duration_ms("5x", &v, &why) < 0);
	CHECK("parse_duration rejects absurd", parse_duration_ms("400d", &v, &why) < 0);
	CHECK("parse_count ok", parse_count("64", 100, &v, &why) == 0 && v == 64);
	CHECK("parse_count rejects 0", parse_count("0", 100, &v, &why) < 0);
	CHECK("parse_count rejects over max", parse_count("101", 100, &v, &why) < 0);
	CHECK("parse_count rejects huge", parse_count("99999999999999999999999", 100, &v, &why) < 0);
	CHECK("parse_count rejects sign", parse_count("+5", 100, &v, &why) < 0);
	static const char *const targets_ok[] = {"pypi.org:443", "127.0.0.1:80", "h:1", "[::1]:443",
	                                         "[2001:db8::1]:65535"};
	char name[80];
	for (size_t i = 0; i < sizeof(targets_ok) / sizeof(targets_ok[0]); i++) {
		snprintf(name, sizeof(name), "parse_hostport accepts '%s'", targets_ok[i]);
		CHECK(name, parse_hostport(targets_ok[i], &why) == 0);
	}
	static const char *const targets_bad[] = {
	    "bad",     "1.2.3.4:99999", ":80",   "1.2.3.4:-1", "1.2.3.4:80:90", "h:0",    "h:",
	    "::1:443", "[::1]",         "[]:80", "[x]:80",     "1.2.3:80",      "a b:80", ""};
	for (size_t i = 0; i < sizeof(targets_bad) / sizeof(targets_bad[0]); i++) {
		snprintf(name, sizeof(name), "parse_hostport rejects '%s'", targets_bad[i]);
		CHECK(name, parse_hostport(targets_bad[i], &why) < 0 && why);
	}
}
