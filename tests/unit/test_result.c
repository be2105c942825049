#include "internal.h"
#include "test.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* The byte-at-a-time reference for json_bytes(): each maximal valid UTF-8 sequence (no
 * overlong forms, surrogates or code points past U+10FFFF) is kept, NUL and every other byte
 * becomes U+FFFD. */
static size_t ref_utf8_clean(const unsigned char *s, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		size_t len = c < 0x80             ? 1
		             : (c & 0xe0) == 0xc0 ? 2
		             : (c & 0xf0) == 0xe0 ? 3
		             : (c & 0xf8) == 0xf0 ? 4
		                                  : 0;
		uint32_t cp = len == 1   ? c
		              : len == 2 ? c & 0x1fu
		              : len == 3 ? c & 0x0fu
		                         : c & 0x07u;
		bool ok = len > 0 && i + len <= n;
		for (size_t k = 1; ok && k < len; k++) {
			ok = (s[i + k] & 0xc0) == 0x80;
			cp = cp << 6 | (s[i + k] & 0x3fu);
		}
		ok = ok && cp != 0 && !(len == 2 && cp < 0x80) && !(len == 3 && cp < 0x800) &&
		     !(len == 4 && (cp < 0x10000 || cp > 0x10ffff)) &&
		     !(cp >= 0xd800 && cp <= 0xdfff);
		if (ok) {
			memcpy(out + o, s + i, len);
			o += len;
			i += len;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	return o;
}

/* json_bytes() copies valid runs whole: it must still give the reference's string for
 * every input, the edge cases and random bytes drawn mostly from UTF-8's lead and
 * continuation bytes, at every length up to 300. */
static void test_json_bytes(void)
{
	static const char *const edge[] = {"",
	                                   "plain ascii",
	                                   "\x00",
	                                   "a\x00" "b",
	                                   "\xc3\xa9",
	                                   "\xc3",
	                                   "\xc3(",
	                                   "\xc0\x80",
	                                   "\xe2\x82\xac",
	                                   "\xe2\x82",
	                                   "\xed\xa0\x80" /* surrogate */,
	                                   "\xf0\x9f\x98\x80",
	                                   "\xf4\x90\x80\x80" /* > U+10FFFF */,
	                                   "\xf0\x80\x80\x80" /* overlong */,
	                                   "\xff\xfe",
	                                   "\x80" "abc",
	                                   "tail\xf0\x9f\x98"};
	static const unsigned char pool[] = {'a',  'Z',  ' ',  '\n', 0x00, 0x7f, 0x80, 0xbf, 0xc0,
	                                     0xc2, 0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff};
	int bad = 0, cases = 0;
	unsigned char in[300];
	char *want = malloc(sizeof(in) * 3 + 1);
	srand(5);
	for (size_t e = 0; e < sizeof(edge) / sizeof(edge[0]) + 20000; e++) {
		size_t n;
		if (e < sizeof(edge) / sizeof(edge[0])) {
			n = strlen(edge[e]) + (e == 2 || e == 3); /* the NUL cases keep their NUL */
			memcpy(in, edge[e], n);
		} else {
			n = (size_t)rand() % sizeof(in);
			for (size_t i = 0; i < n; i++)
				in[i] = pool[(size_t)rand() % sizeof(pool)];
		}
		size_t wn = ref_utf8_clean(in, n, want);
		json_t *j = json_bytes((const char *)in, n);
		if (!j || json_string_length(j) != wn || memcmp(json_string_value(j), want, wn))
			bad++;
		json_decref(j);
		cases++;
	}
	printf("INFO json_bytes: %d inputs compared with the reference\n", cases);
	CHECK("json_bytes keeps valid UTF-8 and replaces the rest, as the reference", bad == 0);
	free(want);
}

void test_result(void)
{
	test_json_bytes();
	struct corral_result *r = result_new();
	CHECK("result uuid format", strlen(r->id) == 36 && r->id[14] == '4');
	r->argv = calloc(3, sizeof(char *));
	r->argv[0] = strdup("echo");
	r->argv[1] = strdup("hi\xff"); /* invalid UTF-8 must still give valid JSON */
	r->exited = 1;
	r->exit_code = 3;
	r->stdout_buf = strdup("out\x01\xc3\x28");
	r->stdout_len = 6;
	r->stdout_bytes = 6;
	r->limit = CORRAL_HIT_MEMORY;
	r->mode = "auto";
	result_add_layer(r, "landlock", 1, "abi 7");
	result_add_layer(r, "seccomp", 0, "skipped");
	result_add_layer(r, "landlock", 1, "abi 6"); /* update in place */
	char *json = NULL;
	CHECK("result encodes", corral_result_to_json(r, &json, NULL) == 0 && json);
	json_error_t e;
	json_t *o = json_loads(json, 0, &e);
	CHECK("result is valid JSON", o != NULL);
	CHECK("result exit_code", json_integer_value(json_object_get(o, "exit_code")) == 3);
	CHECK("result signal null", json_is_null(json_object_get(o, "signal")));
	CHECK("result limit", !strcmp(json_string_value(json_object_get(o, "limit")), "memory"));
	CHECK("result layers", json_object_size(json_object_get(o, "isolation")) == 2);
	CHECK("result layer updated",
	      !strcmp(json_string_value(json_object_get(
	                      json_object_get(json_object_get(o, "isolation"), "landlock"), "detail")),
	              "abi 6"));
	CHECK("result invalid utf8 replaced",
	      strstr(json_string_value(json_object_get(o, "stdout")), "\xef\xbf\xbd") != NULL);
	CHECK("result error null", json_is_null(json_object_get(o, "error")));
	json_decref(o);
	free(json);
	corral_set_error(&r->error, CORRAL_ESETUP, 13, "landlock", "landlock: denied");
	corral_result_to_json(r, &json, NULL);
	o = json_loads(json, 0, &e);
	json_t *err = json_object_get(o, "error");
	CHECK("result error object", err && !strcmp(json_string_value(json_object_get(err, "step")),
	                                            "landlock") &&
	                                 json_integer_value(json_object_get(err, "errno")) == 13);
	json_decref(o);
	free(json);
	corral_result_free(r);

	/* A fork refused in the run's cgroup where the kernel cannot say at which level: with a
	 * process limit of its own either may have refused; without one (--pids 0) only a
	 * parent's budget can have, and the hint must not speak of "this run's 0 processes". */
	struct corral_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.limits[CORRAL_LIMIT_PIDS] = 64;
	r = result_new();
	violations_pids_elsewhere(&cfg, r, 0);
	CHECK("pids unknown level, own limit: either",
	      r->n_violations == 1 && strstr(r->violations[0].hint, "this run's 64 processes"));
	corral_result_free(r);
	cfg.limits[CORRAL_LIMIT_PIDS] = 0;
	r = result_new();
	violations_pids_elsewhere(&cfg, r, 0);
	CHECK("pids unknown level, no own limit: a parent's budget",
	      r->n_violations == 1 && !strstr(r->violations[0].hint, "0 processes") &&
	          !strcmp(r->violations[0].rule, "pids.max of a parent cgroup"));
	corral_result_free(r);
}
