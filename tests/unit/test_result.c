#include "internal.h"
#include "test.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

void test_result(void)
{
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
