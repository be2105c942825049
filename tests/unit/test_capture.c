#include "internal.h"
#include "test.h"

#include <stdlib.h>

void test_capture(void)
{
	struct capture c;
	size_t len;
	capture_init(&c, 100);
	capture_feed(&c, "hello", 5);
	char *out = capture_finish(&c, &len);
	CHECK("capture small kept whole", len == 5 && !memcmp(out, "hello", 5) &&
	                                      !capture_truncated(&c));
	free(out);
	capture_free(&c);

	/* 1000 bytes through a 100-byte cap: first 50 and last 50 survive with a marker */
	capture_init(&c, 100);
	char buf[1000];
	for (int i = 0; i < 1000; i++)
		buf[i] = (char)('a' + (i % 26));
	for (int i = 0; i < 1000; i += 7) /* odd chunk sizes cross the ring boundary */
		capture_feed(&c, buf + i, i + 7 <= 1000 ? 7 : (size_t)(1000 - i));
	out = capture_finish(&c, &len);
	CHECK("capture counts total", c.total == 1000);
	CHECK("capture truncated flag", capture_truncated(&c));
	CHECK("capture head kept", !memcmp(out, buf, 50));
	CHECK("capture tail kept", !memcmp(out + len - 50, buf + 950, 50));
	CHECK("capture marker present", strstr(out, "900 bytes dropped") != NULL);
	free(out);
	capture_free(&c);

	/* a single chunk larger than the whole cap */
	capture_init(&c, 100);
	capture_feed(&c, buf, 1000);
	out = capture_finish(&c, &len);
	CHECK("capture big chunk head", !memcmp(out, buf, 50));
	CHECK("capture big chunk tail", !memcmp(out + len - 50, buf + 950, 50));
	free(out);
	capture_free(&c);

	/* exactly at the cap: nothing dropped */
	capture_init(&c, 100);
	capture_feed(&c, buf, 60);
	capture_feed(&c, buf + 60, 40);
	out = capture_finish(&c, &len);
	CHECK("capture exact cap whole", len == 100 && !memcmp(out, buf, 100) &&
	                                     !capture_truncated(&c));
	free(out);
	capture_free(&c);
}
