/* JSON-RPC layer of the MCP server (src/mcp/jsonrpc.c): framing, envelopes, ids,
 * notifications, dispatch and every error path. The file is pure, so it is compiled in here
 * directly (it is part of the corral binary, not of libcorral). */
#include "mcp/jsonrpc.c"

#include "test.h"

/* ---- framing ---------------------------------------------------------------------------- */

struct frames {
	int n_lines, n_long;
	char lines[16][128];
	size_t long_len[4];
};

static void collect(void *ud, enum jr_frame_kind kind, const char *line, size_t len)
{
	struct frames *f = ud;
	if (kind == JR_FRAME_TOOLONG) {
		if (f->n_long < 4)
			f->long_len[f->n_long] = len;
		f->n_long++;
		return;
	}
	if (f->n_lines < 16) {
		snprintf(f->lines[f->n_lines], sizeof(f->lines[0]), "%.*s", (int)len, line);
	}
	f->n_lines++;
}

static void test_framing(void)
{
	struct jr_framer fr;
	struct frames f = {0};

	jr_framer_init(&fr, 64);
	jr_framer_feed(&fr, "{\"a\":1}\n{\"b\":2}\n{\"c\"", 20, collect, &f);
	CHECK("jsonrpc_frame_two_messages_in_one_read", f.n_lines == 2 &&
	                                                    !strcmp(f.lines[0], "{\"a\":1}") &&
	                                                    !strcmp(f.lines[1], "{\"b\":2}"));
	jr_framer_feed(&fr, ":3", 2, collect, &f);
	CHECK("jsonrpc_frame_partial_line_waits", f.n_lines == 2);
	jr_framer_feed(&fr, "}\n", 2, collect, &f);
	CHECK("jsonrpc_frame_split_line_joined",
	      f.n_lines == 3 && !strcmp(f.lines[2], "{\"c\":3}"));

	/* byte by byte */
	const char *msg = "{\"x\":\"y\"}\r\n";
	for (size_t i = 0; i < strlen(msg); i++)
		jr_framer_feed(&fr, msg + i, 1, collect, &f);
	CHECK("jsonrpc_frame_byte_by_byte_and_crlf",
	      f.n_lines == 4 && !strcmp(f.lines[3], "{\"x\":\"y\"}"));

	jr_framer_feed(&fr, "\n\r\n\n  \t \n", 9, collect, &f);
	CHECK("jsonrpc_frame_empty_lines_skipped", f.n_lines == 4 && f.n_long == 0);

	/* an over-long line, in pieces, then a good one */
	char big[100];
	memset(big, 'x', sizeof(big));
	jr_framer_feed(&fr, big, 50, collect, &f);
	jr_framer_feed(&fr, big, 50, collect, &f);
	jr_framer_feed(&fr, big, 30, collect, &f);
	CHECK("jsonrpc_frame_overlong_not_reported_before_newline", f.n_long == 0);
	jr_framer_feed(&fr, "zz\n{\"ok\":1}\n", 12, collect, &f);
	CHECK("jsonrpc_frame_overlong_reported_once_with_length",
	      f.n_long == 1 && f.long_len[0] == 132);
	CHECK("jsonrpc_frame_after_overlong_next_line_ok",
	      f.n_lines == 5 && !strcmp(f.lines[4], "{\"ok\":1}"));

	/* over-long inside one read */
	char buf[200];
	memset(buf, 'y', 100);
	memcpy(buf + 100, "\n{}\n", 4);
	jr_framer_feed(&fr, buf, 104, collect, &f);
	CHECK("jsonrpc_frame_overlong_in_one_read",
	      f.n_long == 2 && f.long_len[1] == 100 && f.n_lines == 6 && !strcmp(f.lines[5], "{}"));

	/* exactly at the limit passes */
	memset(buf, 'z', 64);
	buf[64] = '\n';
	jr_framer_feed(&fr, buf, 65, collect, &f);
	CHECK("jsonrpc_frame_exactly_max_accepted", f.n_lines == 7 && f.n_long == 2);

	/* EOF: a final line without newline still counts */
	jr_framer_feed(&fr, "{\"last\":1}", 10, collect, &f);
	jr_framer_eof(&fr, collect, &f);
	CHECK("jsonrpc_frame_eof_flushes_last_line",
	      f.n_lines == 8 && !strcmp(f.lines[7], "{\"last\":1}"));

	jr_framer_init(&fr, 8);
	jr_framer_feed(&fr, "123456789012", 12, collect, &f);
	jr_framer_eof(&fr, collect, &f);
	CHECK("jsonrpc_frame_eof_inside_overlong_reports_it", f.n_long == 3 && f.long_len[2] == 12);
	jr_framer_free(&fr);
}

/* The limit counts the message, not its terminator: with "\r\n" a line of exactly max bytes
 * passes as it does with "\n", whether the "\r" and the "\n" come in one read or apart. */
static void test_framing_crlf_limit(void)
{
	struct jr_framer fr;
	struct frames f = {0};
	jr_framer_init(&fr, 8);
	jr_framer_feed(&fr, "12345678\r\n", 10, collect, &f);
	CHECK("jsonrpc_frame_crlf_exactly_max_accepted",
	      f.n_lines == 1 && f.n_long == 0 && !strcmp(f.lines[0], "12345678"));
	jr_framer_feed(&fr, "12345678\r", 9, collect, &f);
	jr_framer_feed(&fr, "\n", 1, collect, &f);
	jr_framer_feed(&fr, "1234", 4, collect, &f);
	jr_framer_feed(&fr, "5678\r", 5, collect, &f);
	jr_framer_feed(&fr, "\n", 1, collect, &f);
	CHECK("jsonrpc_frame_crlf_exactly_max_split_reads_accepted",
	      f.n_lines == 3 && f.n_long == 0 && !strcmp(f.lines[1], "12345678") &&
	          !strcmp(f.lines[2], "12345678"));
	/* one byte more is over, and reported without its "\r" */
	jr_framer_feed(&fr, "123456789\r\n", 11, collect, &f);
	CHECK("jsonrpc_frame_crlf_one_over_refused_length_without_cr",
	      f.n_lines == 3 && f.n_long == 1 && f.long_len[0] == 9);
	/* a "\r" that a byte other than "\n" follows is content: 9 bytes, over */
	jr_framer_feed(&fr, "12345678\r", 9, collect, &f);
	jr_framer_feed(&fr, "x\n", 2, collect, &f);
	jr_framer_feed(&fr, "12345678\r", 9, collect, &f);
	jr_framer_eof(&fr, collect, &f);
	CHECK("jsonrpc_frame_cr_inside_line_counts", f.n_long == 2 && f.long_len[1] == 10 &&
	                                                 f.n_lines == 4 &&
	                                                 !strcmp(f.lines[3], "12345678"));
	jr_framer_free(&fr);
}

/* ---- envelopes -------------------------------------------------------------------------- */

static enum jr_kind parse(const char *s, struct jr_msg *m)
{
	return jr_parse(s, strlen(s), m);
}

static void test_envelope(void)
{
	struct jr_msg m;

	CHECK("jsonrpc_request_string_id",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"method\":\"ping\"}", &m) == JR_REQUEST &&
	          json_is_string(m.id) && !strcmp(json_string_value(m.id), "abc") &&
	          !strcmp(m.method, "ping") && !m.params);
	jr_msg_free(&m);

	CHECK("jsonrpc_request_integer_id",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":9007199254740993,\"method\":\"x\",\"params\":{}}",
	            &m) == JR_REQUEST &&
	          json_integer_value(m.id) == 9007199254740993LL && json_is_object(m.params));
	jr_msg_free(&m);

	CHECK("jsonrpc_request_zero_and_negative_id",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":-5,\"method\":\"x\"}", &m) == JR_REQUEST &&
	          json_integer_value(m.id) == -5);
	jr_msg_free(&m);

	CHECK("jsonrpc_notification_has_no_id",
	      parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &m) ==
	              JR_NOTIFICATION &&
	          m.id == NULL);
	jr_msg_free(&m);

	CHECK("jsonrpc_response_detected",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}", &m) == JR_RESPONSE);
	jr_msg_free(&m);
	CHECK("jsonrpc_error_response_detected",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":1,\"message\":\"m\"}}",
	            &m) == JR_RESPONSE);
	jr_msg_free(&m);

	CHECK("jsonrpc_parse_error_32700", parse("{\"jsonrpc\":\"2.0\",", &m) == JR_INVALID &&
	                                       m.err_code == JR_PARSE_ERROR && !m.id &&
	                                       strstr(m.err_msg, "parse error"));
	jr_msg_free(&m);
	CHECK("jsonrpc_parse_error_invalid_utf8",
	      parse("{\"a\":\"\xff\"}", &m) == JR_INVALID && m.err_code == JR_PARSE_ERROR);
	jr_msg_free(&m);
	CHECK("jsonrpc_parse_error_trailing_garbage",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\"} x", &m) == JR_INVALID &&
	          m.err_code == JR_PARSE_ERROR);
	jr_msg_free(&m);

	CHECK("jsonrpc_batch_rejected_32600",
	      parse("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", &m) == JR_INVALID &&
	          m.err_code == JR_INVALID_REQUEST && strstr(m.err_msg, "batch") && !m.id);
	jr_msg_free(&m);
	CHECK("jsonrpc_empty_batch_rejected",
	      parse("[]", &m) == JR_INVALID && m.err_code == JR_INVALID_REQUEST);
	jr_msg_free(&m);
	CHECK("jsonrpc_scalar_rejected_32600", parse("42", &m) == JR_INVALID &&
	                                           m.err_code == JR_INVALID_REQUEST &&
	                                           strstr(m.err_msg, "an integer"));
	jr_msg_free(&m);

	const char *bad_ids[] = {"null", "true", "{}", "[1]", "1.5"};
	for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
		char line[200], name[80];
		snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"ping\"}",
		         bad_ids[i]);
		snprintf(name, sizeof(name), "jsonrpc_id_rejected_%zu_%s", i,
		         i == 0   ? "null"
		         : i == 1 ? "bool"
		         : i == 2 ? "object"
		         : i == 3 ? "array"
		                  : "fraction");
		CHECK(name, parse(line, &m) == JR_INVALID && m.err_code == JR_INVALID_REQUEST &&
		                m.id == NULL && strstr(m.err_msg, "id must be"));
		jr_msg_free(&m);
	}

	/* integers beyond 64 bits are valid JSON: an invalid request, not a parse error */
	CHECK("jsonrpc_id_beyond_int64_32600",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":99999999999999999999,\"method\":\"ping\"}", &m) ==
	              JR_INVALID &&
	          m.err_code == JR_INVALID_REQUEST && !m.id &&
	          strstr(m.err_msg, "the id is an integer beyond 64 bits") &&
	          strstr(m.err_msg, "string ids"));
	jr_msg_free(&m);
	CHECK("jsonrpc_negative_id_beyond_int64_32600",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":-9223372036854775809,\"method\":\"ping\"}",
	            &m) == JR_INVALID &&
	          m.err_code == JR_INVALID_REQUEST && !m.id);
	jr_msg_free(&m);
	CHECK("jsonrpc_big_param_keeps_the_id",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"x\",\"params\":{\"n\":"
	            "123456789012345678901234567890}}",
	            &m) == JR_INVALID &&
	          m.err_code == JR_INVALID_REQUEST && json_is_integer(m.id) &&
	          json_integer_value(m.id) == 12 && strstr(m.err_msg, "beyond 64 bits"));
	jr_msg_free(&m);
	CHECK("jsonrpc_big_param_keeps_a_string_id",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"x\",\"params\":[1e2,"
	            "-123456789012345678901234567890]}",
	            &m) == JR_INVALID &&
	          m.err_code == JR_INVALID_REQUEST && json_is_string(m.id));
	jr_msg_free(&m);
	CHECK("jsonrpc_big_param_large_id_not_echoed_wrong",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":9007199254740993,\"method\":\"x\",\"params\":"
	            "{\"n\":123456789012345678901234567890}}",
	            &m) == JR_INVALID &&
	          m.err_code == JR_INVALID_REQUEST && !m.id);
	jr_msg_free(&m);
	/* a real id (5.0, 5e0, -7E1) is not turned into the integer the client never sent: id
	 * null, as without the large number; escaped keys, nesting and the last "id" count */
	const char *real_ids[] = {
	    "{\"jsonrpc\":\"2.0\",\"id\":5.0,\"method\":\"ping\",\"params\":{\"x\":"
	    "123456789012345678901234}}",
	    "{\"jsonrpc\":\"2.0\",\"id\":5e0,\"method\":\"ping\",\"params\":{\"x\":"
	    "123456789012345678901234}}",
	    "{\"params\":{\"id\":5,\"x\":[123456789012345678901234]},\"jsonrpc\":\"2.0\","
	    "\"method\":\"ping\",\"id\" : -7E1}",
	    "{\"jsonrpc\":\"2.0\",\"\\u0069d\":5.0,\"method\":\"ping\",\"params\":{\"x\":"
	    "123456789012345678901234}}",
	    "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\",\"id\":5.5e1,\"params\":{\"x\":"
	    "123456789012345678901234}}",
	};
	for (size_t i = 0; i < sizeof(real_ids) / sizeof(real_ids[0]); i++) {
		char name[80];
		snprintf(name, sizeof(name), "jsonrpc_big_param_real_id_not_echoed_as_integer_%zu", i);
		CHECK(name, parse(real_ids[i], &m) == JR_INVALID &&
		                m.err_code == JR_INVALID_REQUEST && !m.id &&
		                strstr(m.err_msg, "a number in the message is an integer beyond"));
		jr_msg_free(&m);
	}
	CHECK("jsonrpc_big_param_escaped_id_key_kept",
	      parse("{\"jsonrpc\":\"2.0\",\"i\\u0064\" : -8 ,\"method\":\"x\",\"params\":{\"s\":"
	            "\"\\\"}\",\"n\":123456789012345678901234567890}}",
	            &m) == JR_INVALID &&
	          json_is_integer(m.id) && json_integer_value(m.id) == -8);
	jr_msg_free(&m);
	CHECK("jsonrpc_big_integer_in_a_response_ignored",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"n\":99999999999999999999}}", &m) ==
	          JR_RESPONSE);
	jr_msg_free(&m);
	CHECK("jsonrpc_big_integer_then_malformed_32700",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":99999999999999999999,", &m) == JR_INVALID &&
	          m.err_code == JR_PARSE_ERROR && !m.id);
	jr_msg_free(&m);
	CHECK("jsonrpc_int64_max_id_accepted",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":9223372036854775807,\"method\":\"ping\"}", &m) ==
	          JR_REQUEST &&
	          json_integer_value(m.id) == INT64_MAX);
	jr_msg_free(&m);

	CHECK("jsonrpc_missing_jsonrpc_32600",
	      parse("{\"id\":7,\"method\":\"ping\"}", &m) == JR_INVALID &&
	          m.err_code == JR_INVALID_REQUEST && json_integer_value(m.id) == 7 &&
	          strstr(m.err_msg, "jsonrpc"));
	jr_msg_free(&m);
	CHECK("jsonrpc_wrong_version_32600",
	      parse("{\"jsonrpc\":\"1.0\",\"id\":\"q\",\"method\":\"ping\"}", &m) == JR_INVALID &&
	          m.err_code == JR_INVALID_REQUEST && json_is_string(m.id));
	jr_msg_free(&m);
	CHECK("jsonrpc_missing_method_32600",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":1}", &m) == JR_INVALID &&
	          m.err_code == JR_INVALID_REQUEST && strstr(m.err_msg, "method is missing"));
	jr_msg_free(&m);
	CHECK("jsonrpc_method_not_string_32600",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", &m) == JR_INVALID &&
	          m.err_code == JR_INVALID_REQUEST && strstr(m.err_msg, "method must be"));
	jr_msg_free(&m);
	CHECK("jsonrpc_params_scalar_32600",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":\"s\"}", &m) ==
	              JR_INVALID &&
	          m.err_code == JR_INVALID_REQUEST && strstr(m.err_msg, "params"));
	jr_msg_free(&m);
	CHECK("jsonrpc_params_array_allowed_by_envelope",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":[1]}", &m) ==
	          JR_REQUEST);
	jr_msg_free(&m);
	CHECK(
	    "jsonrpc_nul_in_string_parses",
	    parse(
	        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"s\":\"a\\u0000b\"}}",
	        &m) == JR_REQUEST &&
	        json_string_length(json_object_get(m.params, "s")) == 3);
	jr_msg_free(&m);
	CHECK("jsonrpc_nul_in_method_rejected",
	      parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\\u0000b\"}", &m) == JR_INVALID &&
	          m.err_code == JR_INVALID_REQUEST);
	jr_msg_free(&m);
}

/* ---- builders --------------------------------------------------------------------------- */

static json_t *reparse(char *line)
{
	json_t *j = NULL;
	size_t n = line ? strlen(line) : 0;
	if (line && n && line[n - 1] == '\n' && !memchr(line, '\n', n - 1))
		j = json_loadb(line, n - 1, 0, NULL);
	free(line);
	return j;
}

static void test_builders(void)
{
	json_t *id = json_string("r-1");
	json_t *j = reparse(jr_result_line(id, json_pack("{s:i}", "x", 1)));
	CHECK("jsonrpc_result_line_one_line_echoes_id",
	      j && json_equal(json_object_get(j, "id"), id) &&
	          !strcmp(json_string_value(json_object_get(j, "jsonrpc")), "2.0") &&
	          json_integer_value(json_object_get(json_object_get(j, "result"), "x")) == 1);
	json_decref(j);
	json_decref(id);

	id = json_integer(12345678901LL);
	j = reparse(jr_error_line(id, JR_METHOD_NOT_FOUND, "no\nsuch \xff method"));
	json_t *e = json_object_get(j, "error");
	CHECK("jsonrpc_error_line_code_message_id",
	      j && json_integer_value(json_object_get(j, "id")) == 12345678901LL &&
	          json_integer_value(json_object_get(e, "code")) == JR_METHOD_NOT_FOUND &&
	          strstr(json_string_value(json_object_get(e, "message")), "no\nsuch"));
	json_decref(j);
	json_decref(id);

	j = reparse(jr_error_line(NULL, JR_PARSE_ERROR, "bad"));
	CHECK("jsonrpc_error_line_null_id", j && json_is_null(json_object_get(j, "id")));
	json_decref(j);

	j = reparse(jr_notification_line("notifications/progress", json_pack("{s:i}", "p", 2)));
	CHECK(
	    "jsonrpc_notification_line_has_no_id",
	    j && !json_object_get(j, "id") &&
	        !strcmp(json_string_value(json_object_get(j, "method")), "notifications/progress"));
	json_decref(j);
}

/* ---- dispatch --------------------------------------------------------------------------- */

struct ctx {
	int inits, pings, notes, deferred;
	bool initialized;
};

static void h_init(void *c, const struct jr_msg *m, struct jr_reply *r)
{
	struct ctx *x = c;
	(void)m;
	x->inits++;
	x->initialized = true;
	r->result = json_object();
}
static void h_ping(void *c, const struct jr_msg *m, struct jr_reply *r)
{
	(void)m;
	((struct ctx *)c)->pings++;
	r->result = json_object();
}
static void h_params(void *c, const struct jr_msg *m, struct jr_reply *r)
{
	(void)c;
	if (!json_is_object(m->params))
		return jr_fail(r, JR_INVALID_PARAMS, "invalid params: params.name is missing");
	r->result = json_object();
}
static void h_defer(void *c, const struct jr_msg *m, struct jr_reply *r)
{
	(void)m;
	((struct ctx *)c)->deferred++;
	r->deferred = true;
}
static void h_note(void *c, const struct jr_msg *m, struct jr_reply *r)
{
	(void)m;
	(void)r;
	((struct ctx *)c)->notes++;
}

static const struct jr_method table[] = {
    {"initialize", h_init, JR_M_BEFORE_INIT},
    {"ping", h_ping, JR_M_BEFORE_INIT},
    {"needs/params", h_params, 0},
    {"slow", h_defer, 0},
    {"notifications/hello", h_note, JR_M_NOTIFICATION},
};

/* Dispatch one line; return the reply's error code, 0 for a result, 1 for no reply. */
static int dispatch(struct ctx *c, const char *line, json_t **reply)
{
	struct jr_msg m;
	jr_parse(line, strlen(line), &m);
	char *out = jr_dispatch(table, sizeof(table) / sizeof(table[0]), c, c->initialized, &m);
	jr_msg_free(&m);
	if (!out)
		return 1;
	json_t *j = reparse(out);
	int code = 0;
	json_t *e = json_object_get(j, "error");
	if (e)
		code = (int)json_integer_value(json_object_get(e, "code"));
	else if (!json_object_get(j, "result"))
		code = 99;
	if (reply)
		*reply = j;
	else
		json_decref(j);
	return code;
}

static void test_dispatch(void)
{
	struct ctx c = {0};
	json_t *r = NULL;

	CHECK("jsonrpc_dispatch_ping_before_init_allowed",
	      dispatch(&c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", NULL) == 0 &&
	          c.pings == 1);
	CHECK("jsonrpc_dispatch_request_before_init_32002",
	      dispatch(&c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"slow\"}", &r) ==
	              JR_NOT_INITIALIZED &&
	          c.deferred == 0 && json_integer_value(json_object_get(r, "id")) == 2);
	json_decref(r);
	CHECK("jsonrpc_dispatch_notification_before_init_ignored",
	      dispatch(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/hello\"}", NULL) == 1 &&
	          c.notes == 0);
	CHECK("jsonrpc_dispatch_initialize",
	      dispatch(&c, "{\"jsonrpc\":\"2.0\",\"id\":\"i\",\"method\":\"initialize\"}", NULL) ==
	              0 &&
	          c.initialized);
	CHECK("jsonrpc_dispatch_notification_no_reply",
	      dispatch(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/hello\"}", NULL) == 1 &&
	          c.notes == 1);
	CHECK("jsonrpc_dispatch_unknown_notification_ignored",
	      dispatch(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/nope\"}", NULL) == 1);
	CHECK("jsonrpc_dispatch_unknown_method_32601",
	      dispatch(&c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"nope\"}", &r) ==
	              JR_METHOD_NOT_FOUND &&
	          strstr(json_string_value(json_object_get(json_object_get(r, "error"), "message")),
	                 "'nope'"));
	json_decref(r);
	CHECK("jsonrpc_dispatch_notification_sent_as_request_32601",
	      dispatch(&c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"notifications/hello\"}",
	               NULL) == JR_METHOD_NOT_FOUND &&
	          c.notes == 1);
	CHECK("jsonrpc_dispatch_request_sent_as_notification_ignored",
	      dispatch(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}", NULL) == 1 && c.pings == 1);
	CHECK("jsonrpc_dispatch_bad_params_32602",
	      dispatch(&c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"needs/params\"}", &r) ==
	              JR_INVALID_PARAMS &&
	          strstr(json_string_value(json_object_get(json_object_get(r, "error"), "message")),
	                 "params.name"));
	json_decref(r);
	CHECK("jsonrpc_dispatch_deferred_no_reply_now",
	      dispatch(&c, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"slow\"}", NULL) == 1 &&
	          c.deferred == 1);
	CHECK("jsonrpc_dispatch_client_response_ignored",
	      dispatch(&c, "{\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{}}", NULL) == 1);
	CHECK("jsonrpc_dispatch_parse_error_null_id", dispatch(&c, "{oops", &r) == JR_PARSE_ERROR &&
	                                                  json_is_null(json_object_get(r, "id")));
	json_decref(r);
	CHECK("jsonrpc_dispatch_invalid_request_keeps_valid_id",
	      dispatch(&c, "{\"jsonrpc\":\"2.0\",\"id\":\"k\",\"method\":[]}", &r) ==
	              JR_INVALID_REQUEST &&
	          !strcmp(json_string_value(json_object_get(r, "id")), "k"));
	json_decref(r);
	CHECK("jsonrpc_dispatch_invalid_notification_answered_null_id",
	      dispatch(&c, "{\"jsonrpc\":\"2.0\",\"method\":7}", &r) == JR_INVALID_REQUEST &&
	          json_is_null(json_object_get(r, "id")));
	json_decref(r);
	CHECK("jsonrpc_dispatch_batch_32600",
	      dispatch(&c, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", NULL) ==
	          JR_INVALID_REQUEST);
}

/* ---- versions and UTF-8 ----------------------------------------------------------------- */

static void test_versions(void)
{
	CHECK("mcp_version_each_supported",
	      !strcmp(mcp_negotiate_version("2025-11-25"), "2025-11-25") &&
	          !strcmp(mcp_negotiate_version("2025-06-18"), "2025-06-18") &&
	          !strcmp(mcp_negotiate_version("2025-03-26"), "2025-03-26") &&
	          !strcmp(mcp_negotiate_version("2024-11-05"), "2024-11-05"));
	CHECK("mcp_version_unsupported_gets_latest",
	      !strcmp(mcp_negotiate_version("2024-10-07"), MCP_LATEST_VERSION) &&
	          !strcmp(mcp_negotiate_version("2099-01-01"), MCP_LATEST_VERSION) &&
	          !strcmp(mcp_negotiate_version(NULL), MCP_LATEST_VERSION));
	CHECK("mcp_version_order", mcp_version_at_least("2025-11-25", "2025-06-18") &&
	                               !mcp_version_at_least("2025-03-26", "2025-06-18"));

	/* only a valid beginning is a cut: a broken sequence at the end, or a continuation byte
	 * alone, is replaced byte by byte; a 4-byte one cut after its second byte is dropped */
	static const struct {
		const char *name, *in;
		size_t len;
		const char *want;
	} utf8[] = {
	    {"mcp_utf8_invalid_byte_replaced", "a\xffz", 3, "a\xef\xbf\xbdz"},
	    {"mcp_utf8_cut_sequence_dropped", "ok \xc3\xa9 \xe2\x82", 8, "ok \xc3\xa9 "},
	    {"mcp_utf8_nul_replaced", "a\0b", 3,
	     "a\xef\xbf\xbd"
	     "b"},
	    {"mcp_utf8_broken_sequence_replaced", "\xe2\x82x", 3, "\xef\xbf\xbd\xef\xbf\xbdx"},
	    {"mcp_utf8_cut_4_byte_dropped", "ab\xf0\x9f", 4, "ab"},
	    {"mcp_utf8_lone_continuation_replaced", "ab\x80", 3, "ab\xef\xbf\xbd"},
	    {"mcp_utf8_broken_before_end_replaced", "ab\xf0\x9fz", 5,
	     "ab\xef\xbf\xbd\xef\xbf\xbdz"},
	};
	for (size_t i = 0; i < sizeof(utf8) / sizeof(utf8[0]); i++) {
		char *s = mcp_utf8_clean(utf8[i].in, utf8[i].len);
		CHECK(utf8[i].name, s && !strcmp(s, utf8[i].want));
		free(s);
	}
}

void test_jsonrpc(void)
{
	test_framing();
	test_framing_crlf_limit();
	test_envelope();
	test_builders();
	test_dispatch();
	test_versions();
}
