/* libFuzzer target for the profile parser (src/profile.c): any bytes must give either a
 * profile or an EINVAL/ENOMEM error whose message starts with the origin and a position.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc \
 *     tests/fuzz/fuzz_profile.c src/profile.c src/parse.c src/env.c src/error.c \
 *     -ljansson -o build/fuzz_profile
 *   build/fuzz_profile -max_len=4096 -dict=tests/fuzz/profile.dict docs/examples
 */
#include "internal.h"
#include "policy.h"

#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct profile p;
	struct corral_error err;
	memset(&err, 0, sizeof(err));
	int rc = profile_parse((const char *)data, size, "f", &p, &err);
	if (rc == 0) {
		if (!p.name)
			__builtin_trap();
		profile_free(&p);
	} else {
		if ((rc != CORRAL_EINVAL && rc != CORRAL_ENOMEM) || strncmp(err.message, "f:", 2) ||
		    strchr(err.message, '\n'))
			__builtin_trap();
		for (size_t i = 0; i < sizeof(p); i++)
			if (((const unsigned char *)&p)[i])
				__builtin_trap();
	}
	/* the glob matcher on the same bytes: pattern and name split at the first NUL */
	char buf[512];
	size_t n = size < sizeof(buf) - 1 ? size : sizeof(buf) - 1;
	memcpy(buf, data, n);
	buf[n] = '\0';
	const char *name = memchr(buf, '\0', n) ? buf + strlen(buf) + 1 : "";
	(void)policy_glob_match(buf, name < buf + n ? name : "");
	return 0;
}
