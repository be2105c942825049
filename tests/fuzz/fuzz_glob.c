/* libFuzzer target for the environment-name glob matcher (policy_glob_match, src/profile.c).
 * Input: pattern, NUL, name (without a NUL the name is empty).
 *
 * - It terminates quickly on anything (libFuzzer's -timeout catches a blowup; the matcher
 *   must stay O(pattern * name), so the input length is not capped here).
 * - It agrees with a plain dynamic-programming reference ('*' any run of bytes, '?' any one
 *   byte, everything else itself) for patterns and names up to 256 bytes, and with
 *   fnmatch(3) (flags 0, C locale) for patterns without '[' or '\\', which fnmatch treats
 *   specially and policy_glob_match does not.
 * - Every pattern matches itself; NULL never matches.
 *
 *   tests/fuzz/run.sh builds it; by hand (after building build-fuzz/libcorral.a, see
 *   fuzz_parse.c):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc \
 *     tests/fuzz/fuzz_glob.c build-fuzz/libcorral.a $(pkg-config --libs jansson) \
 *     -o build-fuzz/fuzz_glob
 *   build-fuzz/fuzz_glob -dict=tests/fuzz/glob.dict tests/fuzz/corpus/glob
 */
#include "policy.h"

#include "fuzz_util.h"

#include <fnmatch.h>

#define REF_MAX 256

/* match[i][j]: pattern from i matches name from j */
static bool reference(const char *p, size_t pl, const char *n, size_t nl)
{
	static bool m[REF_MAX + 1][REF_MAX + 1];
	for (size_t i = pl + 1; i-- > 0;) {
		for (size_t j = nl + 1; j-- > 0;) {
			bool r;
			if (i == pl)
				r = j == nl;
			else if (p[i] == '*')
				r = m[i + 1][j] || (j < nl && m[i][j + 1]);
			else
				r = j < nl && (p[i] == '?' || p[i] == n[j]) && m[i + 1][j + 1];
			m[i][j] = r;
		}
	}
	return m[0][0];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 2);
	if (!buf)
		abort();
	memcpy(buf, data, size);
	buf[size] = buf[size + 1] = '\0';
	const char *pat = buf;
	size_t pl = strlen(pat);
	const char *name = pl < size ? buf + pl + 1 : buf + size + 1;
	size_t nl = strlen(name);

	bool got = policy_glob_match(pat, name);
	if (pl <= REF_MAX && nl <= REF_MAX)
		FZ_CHECK(got == reference(pat, pl, name, nl));
	if (!strpbrk(pat, "[\\"))
		FZ_CHECK(got == (fnmatch(pat, name, 0) == 0));
	FZ_CHECK(policy_glob_match(pat, pat));
	FZ_CHECK(policy_glob_match(name, name));
	FZ_CHECK(!policy_glob_match(NULL, name) && !policy_glob_match(pat, NULL));
	free(buf);
	return 0;
}
