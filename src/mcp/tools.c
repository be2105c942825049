/* The MCP tools: their schemas, argument validation into a copy of the server's base
 * configuration (arguments can only narrow it), the text + structured result of a run, and
 * can_i, which answers policy questions from the base configuration and changes nothing. */
#include "mcp/mcp.h"
#include "internal.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* ---- run_code languages ---------------------------------------------------------------- */

struct language {
	const char *name; /* as in the schema */
	const char *exe;  /* run by name from the sandbox PATH */
	bool present;
	char why[300]; /* when not present: why not, for the refusal */
};

static struct language languages[] = {
    {"python", "python3", false, ""},
    {"node", "node", false, ""},
    {"bash", "bash", false, ""},
    {"sh", "sh", false, ""},
};
#define N_LANGUAGES (sizeof(languages) / sizeof(languages[0]))

/* With stdin given, the code travels in this variable; execve limits one string to 128 KiB
 * (MAX_ARG_STRLEN), "CORRAL_CODE=" and the NUL included. */
#define CODE_ENV_MAX 131000
/* Bytes of the command shown in the headline of a result. */
#define HEADLINE_MAX 1000

/* The wrapper that writes the code to a file runs as /bin/sh -c: a language is offered only
 * when the server's policy lets the sandbox execute both /bin/sh (not in mode none, where the
 * server writes the file: prepare_code_none) and the interpreter (the
 * same answer can_i gives: found through the sandbox's PATH, visible, and not refused by a
 * command rule). Asked once, at start: the policy is fixed for the server's life. Returns
 * true when allowed; else why says why not. */
static bool exec_allowed(const struct mcp_options *o, const char *prog, char *why, size_t n)
{
	char *doc = NULL;
	int r = corral_policy_query(o->base, "exec", prog, &doc, NULL);
	json_t *a = doc ? json_loads(doc, 0, NULL) : NULL;
	free(doc);
	const char *rule = json_string_value(json_object_get(a, "rule"));
	const char *reason = json_string_value(json_object_get(a, "reason"));
	if (r != 1)
		snprintf(why, n, "the server's policy does not let the sandbox execute %s (%s%s%s)",
		         prog, reason && *reason ? reason : "denied",
		         rule && *rule ? "; rule: " : "", rule && *rule ? rule : "");
	json_decref(a);
	return r == 1;
}

void mcp_tools_init(const struct mcp_options *o)
{
	char shell_why[240] = "";
	/* in mode none the server writes the code and runs the interpreter directly
	 * (prepare_code_none): no /bin/sh involved */
	bool shell =
	    o->mode == CORRAL_MODE_NONE || exec_allowed(o, "/bin/sh", shell_why, sizeof(shell_why));
	for (size_t i = 0; i < N_LANGUAGES; i++) {
		struct language *L = &languages[i];
		L->why[0] = '\0';
		if (!shell)
			snprintf(L->why, sizeof(L->why), "run_code writes the code with /bin/sh, and %.240s",
			         shell_why);
		L->present = shell && exec_allowed(o, L->exe, L->why, sizeof(L->why));
	}
}

static bool any_language(void)
{
	for (size_t i = 0; i < N_LANGUAGES; i++)
		if (languages[i].present)
			return true;
	return false;
}

/* ---- the tool table -------------------------------------------------------------------- */

struct tool {
	const char *name;
	const char *title;
	enum mcp_tool_id id;
};

static const struct tool tools[] = {
    {"run_command", "Run a command in the sandbox", TOOL_RUN_COMMAND},
    {"run_code", "Run code in the sandbox", TOOL_RUN_CODE},
    {"can_i", "Ask the sandbox policy", TOOL_CAN_I},
    {"shell_exec", "Run a command in a persistent sandboxed shell", TOOL_SHELL_EXEC},
    {"shell_close", "Close a shell session", TOOL_SHELL_CLOSE},
    {"shell_list", "List the shell sessions", TOOL_SHELL_LIST},
    {"job_start", "Start a background job", TOOL_JOB_START},
    {"job_output", "Read a background job's output", TOOL_JOB_OUTPUT},
    {"job_kill", "Stop a background job", TOOL_JOB_KILL},
    {"job_list", "List the background jobs", TOOL_JOB_LIST},
    {"run_pipeline", "Run a pipeline of sandboxed stages", TOOL_RUN_PIPELINE},
};
#define N_TOOLS (sizeof(tools) / sizeof(tools[0]))

const char *mcp_tool_names(void)
{
	return any_language()
	           ? "run_command, run_code, can_i, shell_exec, shell_close, shell_list, "
	             "job_start, job_output, job_kill, job_list, run_pipeline"
	           : "run_command, can_i, shell_exec, shell_close, shell_list, job_start, "
	             "job_output, job_kill, job_list, run_pipeline";
}

static const struct tool *find_tool(const char *name)
{
	for (size_t i = 0; i < N_TOOLS; i++)
		if (!strcmp(tools[i].name, name)) {
			if (tools[i].id == TOOL_RUN_CODE && !any_language())
				return NULL;
			return &tools[i];
		}
	return NULL;
}

/* ---- schemas --------------------------------------------------------------------------- */

/* The result object (docs/result.schema.json), flattened: no $ref and no $schema, so that
 * every client validator (Ajv in draft-07 mode, for one) compiles it. */
static const char output_schema_json[] =
    "{\"type\":\"object\","
    "\"description\":\"The run result, as `corral run --json` prints it "
    "(docs/result.schema.json)\","
    "\"required\":[\"id\",\"argv\",\"command\",\"exit_code\",\"signal\",\"signal_name\","
    "\"timed_out\",\"limit\",\"duration_ms\",\"stdout\",\"stderr\",\"stdout_bytes\","
    "\"stderr_bytes\",\"stdout_truncated\",\"stderr_truncated\",\"usage\",\"mode\","
    "\"isolation\",\"error\"],"
    "\"properties\":{"
    "\"id\":{\"type\":\"string\",\"description\":\"a random UUID for this run\"},"
    "\"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
    "\"command\":{\"type\":[\"string\",\"null\"],\"description\":\"the shell string, or null\"},"
    "\"exit_code\":{\"type\":[\"integer\",\"null\"],\"description\":\"null when killed by a "
    "signal or not started\"},"
    "\"signal\":{\"type\":[\"integer\",\"null\"]},"
    "\"signal_name\":{\"type\":[\"string\",\"null\"],\"description\":\"KILL, TERM, ...\"},"
    "\"timed_out\":{\"type\":\"boolean\"},"
    "\"cancelled\":{\"type\":\"boolean\",\"description\":\"a cancel asked the run to stop "
    "(notifications/cancelled, or the server's end); not the timeout\"},"
    "\"limit\":{\"type\":[\"string\",\"null\"],\"enum\":[\"timeout\",\"cpu\",\"memory\","
    "\"fsize\",\"pids\",\"output\",null],\"description\":\"the limit that ended the run\"},"
    "\"duration_ms\":{\"type\":\"integer\",\"minimum\":0},"
    "\"prebuilt_ms\":{\"type\":[\"integer\",\"null\"],\"minimum\":0,\"description\":\"the "
    "sandbox was built this long before the command arrived (--prebuild); null: built for "
    "it\"},"
    "\"stdout\":{\"type\":\"string\",\"description\":\"captured; head and tail kept when "
    "truncated\"},"
    "\"stderr\":{\"type\":\"string\"},"
    "\"stdout_bytes\":{\"type\":\"integer\",\"minimum\":0},"
    "\"stderr_bytes\":{\"type\":\"integer\",\"minimum\":0},"
    "\"stdout_truncated\":{\"type\":\"boolean\"},"
    "\"stderr_truncated\":{\"type\":\"boolean\"},"
    "\"usage\":{\"type\":\"object\",\"required\":[\"user_ms\",\"sys_ms\",\"max_rss_kb\"],"
    "\"properties\":{\"user_ms\":{\"type\":\"integer\"},\"sys_ms\":{\"type\":\"integer\"},"
    "\"max_rss_kb\":{\"type\":\"integer\"}}},"
    "\"mode\":{\"type\":\"string\",\"enum\":[\"required\",\"auto\",\"none\"]},"
    "\"isolation\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"object\","
    "\"required\":[\"applied\",\"detail\"],\"properties\":{\"applied\":{\"type\":\"boolean\"},"
    "\"detail\":{\"type\":\"string\"}}}},"
    "\"error\":{\"type\":[\"object\",\"null\"],\"required\":[\"code\",\"name\",\"errno\","
    "\"step\",\"message\"],\"properties\":{\"code\":{\"type\":\"integer\"},\"name\":{\"type\":"
    "\"string\"},\"errno\":{\"type\":\"integer\"},\"step\":{\"type\":\"string\"},\"message\":"
    "{\"type\":\"string\"}}}"
    "}}";

/* can_i's answers: one policy answer as corral_policy_query gives it, or several. */
static const char can_i_output_schema_json[] =
    "{\"type\":\"object\","
    "\"description\":\"The policy's answer, as `corral policy check --json` prints it; with "
    "queries, one answer per query in answers\","
    "\"properties\":{"
    "\"op\":{\"type\":\"string\",\"enum\":[\"read\",\"write\",\"exec\",\"connect\"]},"
    "\"target\":{\"type\":\"string\"},"
    "\"allowed\":{\"type\":\"boolean\"},"
    "\"rule\":{\"type\":\"string\",\"description\":\"the rule or layer that decides\"},"
    "\"reason\":{\"type\":\"string\",\"description\":\"why, and what to do instead\"},"
    "\"answers\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
    "\"required\":[\"op\",\"target\",\"allowed\",\"rule\"],"
    "\"properties\":{\"op\":{\"type\":\"string\"},\"target\":{\"type\":\"string\"},"
    "\"allowed\":{\"type\":\"boolean\"},\"rule\":{\"type\":\"string\"},"
    "\"reason\":{\"type\":\"string\"}}}}"
    "}}";

/* The answers of the session, job and pipeline tools (docs/mcp.md), flattened the same way.
 * A job's state, as job_start, job_output, job_kill and job_list report it: */
static const char job_props_json[] =
    "{\"job\":{\"type\":\"string\",\"description\":\"the job id\"},"
    "\"command\":{\"type\":\"string\"},"
    "\"session\":{\"type\":[\"string\",\"null\"],\"description\":\"the session it runs in, or "
    "null for a sandbox of its own\"},"
    "\"running\":{\"type\":\"boolean\"},"
    "\"exit_code\":{\"type\":[\"integer\",\"null\"],\"description\":\"null while it runs or "
    "when a signal ended it\"},"
    "\"signal\":{\"type\":[\"integer\",\"null\"]},"
    "\"duration_ms\":{\"type\":\"integer\",\"minimum\":0},"
    "\"total_bytes\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"output written so "
    "far, both streams\"},"
    "\"dropped_bytes\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"output the ring "
    "buffer no longer holds\"},"
    "\"limit\":{\"type\":[\"string\",\"null\"],\"description\":\"the limit that ended it\"}}";
static const char *const job_required[] = {"job",         "command",       "session",
                                           "running",     "exit_code",     "signal",
                                           "duration_ms", "total_bytes",   "dropped_bytes",
                                           "limit",       NULL};

static json_t *str_array(const char *const *v)
{
	json_t *a = json_array();
	for (; *v; v++)
		json_array_append_new(a, json_string(*v));
	return a;
}

static json_t *job_schema(const char *description)
{
	json_t *props = json_loads(job_props_json, 0, NULL);
	if (!props)
		return NULL;
	return json_pack("{s:s, s:s, s:o, s:o}", "type", "object", "description", description,
	                 "required", str_array(job_required), "properties", props);
}

/* The outputSchema of a tool that answers with structuredContent, or NULL. */
static json_t *output_schema(enum mcp_tool_id id)
{
	json_t *o = NULL, *p;
	switch (id) {
	case TOOL_RUN_COMMAND:
	case TOOL_RUN_CODE:
	case TOOL_SHELL_EXEC:
		return json_loads(output_schema_json, 0, NULL);
	case TOOL_CAN_I:
		return json_loads(can_i_output_schema_json, 0, NULL);
	case TOOL_SHELL_CLOSE:
		return json_pack("{s:s, s:s, s:[s,s,s], s:{s:{s:s}, s:{s:s}, s:{s:s}}}", "type",
		                 "object", "description", "The session that was closed",
		                 "required", "closed", "was_busy", "commands", "properties",
		                 "closed", "type", "string", "was_busy", "type", "boolean",
		                 "commands", "type", "integer");
	case TOOL_SHELL_LIST: {
		json_t *item = json_pack(
		    "{s:s, s:[s,s,s,s,s,s,s,s,s], s:{s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, "
		    "s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}}}",
		    "type", "object", "required", "session", "alive", "busy", "commands", "restarts",
		    "jobs", "idle_s", "output_bytes", "shell", "properties", "session", "type",
		    "string", "alive", "type", "boolean", "busy", "type", "boolean", "commands",
		    "type", "integer", "restarts", "type", "integer", "jobs", "type", "integer",
		    "idle_s", "type", "number", "output_bytes", "type", "integer", "shell", "type",
		    "string");
		return json_pack("{s:s, s:s, s:[s,s,s], s:{s:{s:s, s:o}, s:{s:s}, s:{s:s}}}",
		                 "type", "object", "description", "The open shell sessions",
		                 "required", "sessions", "max_sessions", "idle_expiry_s",
		                 "properties", "sessions", "type", "array", "items", item,
		                 "max_sessions", "type", "integer", "idle_expiry_s", "type",
		                 "number");
	}
	case TOOL_JOB_START:
		o = job_schema("The job, started");
		p = json_object_get(o, "properties");
		json_object_set_new(p, "hint", json_pack("{s:s}", "type", "string"));
		return o;
	case TOOL_JOB_OUTPUT: {
		o = job_schema("The job's state and its output after since_offset");
		p = json_object_get(o, "properties");
		json_t *req = json_object_get(o, "required");
		static const char *const ints[] = {"from_offset", "next_offset", "missed_bytes"};
		json_object_set_new(p, "stdout", json_pack("{s:s}", "type", "string"));
		json_object_set_new(p, "stderr", json_pack("{s:s}", "type", "string"));
		for (size_t i = 0; i < 3; i++)
			json_object_set_new(p, ints[i],
			                    json_pack("{s:s, s:i}", "type", "integer", "minimum", 0));
		json_object_set_new(p, "more", json_pack("{s:s}", "type", "boolean"));
		static const char *const more[] = {"stdout",      "stderr",       "from_offset",
		                                   "next_offset", "missed_bytes", "more"};
		for (size_t i = 0; i < 6; i++)
			json_array_append_new(req, json_string(more[i]));
		return o;
	}
	case TOOL_JOB_KILL:
		return job_schema("The job's state once nothing of it is left");
	case TOOL_JOB_LIST:
		return json_pack("{s:s, s:s, s:[s,s,s], s:{s:{s:s, s:o}, s:{s:s}, s:{s:s}}}",
		                 "type", "object", "description",
		                 "The background jobs, running and finished", "required", "jobs",
		                 "running", "max_jobs", "properties", "jobs", "type", "array",
		                 "items", job_schema("A job"), "running", "type", "integer",
		                 "max_jobs", "type", "integer");
	case TOOL_RUN_PIPELINE: {
		/* docs/pipeline.schema.json, with each stage a run result as above */
		json_t *run = json_loads(output_schema_json, 0, NULL);
		json_t *err = run ? json_deep_copy(json_object_get(json_object_get(run, "properties"),
		                                                   "error"))
		                  : NULL;
		/* before the pack below takes run (and releases it if the pack fails) */
		if (run)
			json_object_del(run, "description");
		json_t *props = json_pack(
		    "{s:{s:s}, s:{s:b}, s:{s:s, s:i, s:i}, s:{s:[s,s]}, s:{s:s}, s:{s:s}, "
		    "s:{s:s, s:i}, s:{s:s, s:s}, s:{s:s, s:i}, s:{s:s}, s:{s:s, s:{s:s}}, s:o, "
		    "s:{s:s, s:s, s:o}}",
		    "id", "type", "string", "pipeline", "const", 1, "exit_code", "type", "integer",
		    "minimum", 0, "maximum", 255, "failed_stage", "type", "integer", "null",
		    "timed_out", "type", "boolean", "cancelled", "type", "boolean", "duration_ms",
		    "type", "integer", "minimum", 0, "stdout", "type", "string", "description",
		    "the last stage's stdout", "stdout_bytes", "type", "integer", "minimum", 0,
		    "stdout_truncated", "type", "boolean", "stopped_stages", "type", "array",
		    "items", "type", "integer", "error", err ? err : json_object(), "stages", "type",
		    "array", "description", "each stage's run result", "items",
		    run ? run : json_object());
		return json_pack("{s:s, s:s, s:[s,s,s,s,s,s,s,s,s,s,s,s,s], s:o}", "type", "object",
		                 "description",
		                 "The pipeline result, as `corral run --pipe ... --json` prints it "
		                 "(docs/pipeline.schema.json)",
		                 "required", "id", "pipeline", "exit_code", "failed_stage",
		                 "timed_out", "cancelled", "duration_ms", "stdout", "stdout_bytes",
		                 "stdout_truncated", "stopped_stages", "error", "stages",
		                 "properties", props);
	}
	}
	return NULL;
}

/* A description built in a fixed buffer may have been cut inside a UTF-8 sequence (a long
 * workspace path): drop the incomplete tail, since JSON text must be UTF-8. In place. */
static char *utf8_tail_fix(char *s)
{
	size_t n = strlen(s), i = n, k = 0;
	while (i > 0 && k < 4 && ((unsigned char)s[i - 1] & 0xc0) == 0x80) {
		i--;
		k++;
	}
	if (i == 0 || !((unsigned char)s[i - 1] & 0x80))
		return s;
	unsigned char lead = (unsigned char)s[i - 1];
	size_t want = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
	if (k + 1 < want)
		s[i - 1] = '\0';
	return s;
}

static json_t *prop(const char *type, const char *description)
{
	return json_pack("{s:s, s:s}", "type", type, "description", description);
}

/* The names a call may set, as a list of globs for descriptions and messages. */
static void allowed_env_names(const struct mcp_options *o, char *out, size_t n)
{
	size_t used = 0;
	out[0] = '\0';
	const corral_config *b = o->base;
	for (size_t i = 0; i < b->n_env_allow + o->n_allow_env && used + 5 < n; i++) {
		const char *g =
		    i < b->n_env_allow ? b->env_allow[i] : o->allow_env[i - b->n_env_allow];
		int w = snprintf(out + used, n - used, "%s%s", i ? ", " : "", g);
		if (w < 0 || (size_t)w >= n - used) {
			snprintf(out + (used < n - 5 ? used : n - 5), 5, "...");
			return;
		}
		used += (size_t)w;
	}
}

static void add_common_props(json_t *props, const struct mcp_options *o)
{
	json_object_set_new(props, "cwd",
	                    prop("string", "Working directory: relative to the workspace, or an "
	                                   "absolute path inside it, outside what the policy "
	                                   "hides. Default: the workspace."));
	char desc[256];
	json_t *t;
	if (o->timeout_ms) {
		snprintf(desc, sizeof(desc),
		         "Wall-clock timeout in seconds for this call; at most %.3g (the server's "
		         "limit, also the default).",
		         (double)o->timeout_ms / 1000.0);
		t = prop("number", desc);
		json_object_set_new(t, "maximum", json_real((double)o->timeout_ms / 1000.0));
	} else {
		t = prop("number", "Wall-clock timeout in seconds for this call (default: none).");
	}
	json_object_set_new(t, "exclusiveMinimum", json_integer(0));
	json_object_set_new(props, "timeout_s", t);
	json_object_set_new(props, "stdin",
	                    prop("string", "Text fed to standard input (default: empty)."));
	if (o->n_allow_env || o->base->n_env_allow) {
		char names[300];
		allowed_env_names(o, names, sizeof(names));
		char d2[600];
		snprintf(d2, sizeof(d2),
		         "Environment variables to set (name to value). Allowed names: %s. Names "
		         "the policy withholds (credentials such as *_TOKEN, *SECRET*, AWS_*, and "
		         "loader variables such as LD_PRELOAD) are refused even when they match.",
		         names);
		json_t *e = prop("object", d2);
		json_object_set_new(e, "additionalProperties",
		                    json_pack("{s:s}", "type", "string"));
		json_object_set_new(props, "env", e);
	}
}

static void describe_sandbox(char *buf, size_t n, const struct mcp_options *o)
{
	/* A path is bytes; JSON text must be UTF-8. */
	char *ws = mcp_utf8_clean(o->workspace, strlen(o->workspace));
	bool ro = o->base->workspace_ro;
	snprintf(buf, n,
	         "Each call runs in a fresh sandbox: the workspace %s is %s (and the current "
	         "directory and HOME), the system is read-only, /tmp is private and empty, %s, "
	         "and no process survives the call; %s. Use can_i to check whether a path, "
	         "command or host is allowed before trying.",
	         ws ? ws : "?", ro ? "read-only" : "read-write",
	         o->net == CORRAL_NET_HOST ? "the host network is shared" : "there is no network",
	         ro ? "nothing persists between calls"
	            : "only files written to the workspace persist");
	free(ws);
}

#define CAN_I_MAX_QUERIES 64

static json_t *can_i_query_props(void)
{
	json_t *props = json_object();
	json_t *op = prop("string", "read or write a path, exec a command (a name looked up in "
	                            "the sandbox PATH, or a path), connect to HOST:PORT.");
	json_object_set_new(op, "enum", json_pack("[s,s,s,s]", "read", "write", "exec", "connect"));
	json_object_set_new(props, "op", op);
	json_object_set_new(props, "target",
	                    prop("string", "A path (absolute, ~/..., or relative to the "
	                                   "workspace), a command, or HOST:PORT."));
	return props;
}

static json_t *can_i_entry(const struct mcp_options *o, const char *version)
{
	json_t *props = can_i_query_props();
	json_t *item =
	    json_pack("{s:s, s:o, s:[s,s], s:b}", "type", "object", "properties",
	              can_i_query_props(), "required", "op", "target", "additionalProperties", 0);
	json_t *q = prop("array", "Several questions at once, each {op, target}; give this "
	                          "instead of op and target.");
	json_object_set_new(q, "items", item);
	json_object_set_new(q, "minItems", json_integer(1));
	json_object_set_new(q, "maxItems", json_integer(CAN_I_MAX_QUERIES));
	json_object_set_new(props, "queries", q);
	json_t *schema = json_pack("{s:s, s:o, s:b}", "type", "object", "properties", props,
	                           "additionalProperties", 0);
	char *ws = mcp_utf8_clean(o->workspace, strlen(o->workspace));
	char desc[PATH_MAX + 1200];
	snprintf(desc, sizeof(desc),
	         "Ask the sandbox policy whether an operation is allowed, without running "
	         "anything: read or write a path, exec a command, or connect to HOST:PORT. The "
	         "answer names the deciding rule and, when denied, what to do instead (for "
	         "example: write src/main.c is allowed by the workspace rule; connect "
	         "pypi.org:443 is denied because there is no network). Relative paths are "
	         "relative to the workspace %s. Use it before a command that needs a path "
	         "outside the workspace, a tool, or the network. Asking never changes the "
	         "policy; a denial is an answer, not an error.",
	         ws ? ws : "?");
	free(ws);
	json_t *e = json_pack("{s:s, s:s, s:o}", "name", "can_i", "description",
	                      utf8_tail_fix(desc), "inputSchema", schema);
	if (mcp_version_at_least(version, "2025-06-18")) {
		json_object_set_new(e, "title", json_string("Ask the sandbox policy"));
		json_t *out = output_schema(TOOL_CAN_I);
		if (out)
			json_object_set_new(e, "outputSchema", out);
	}
	if (mcp_version_at_least(version, "2025-03-26"))
		json_object_set_new(e, "annotations",
		                    json_pack("{s:s, s:b, s:b, s:b, s:b}", "title",
		                              "Ask the sandbox policy", "readOnlyHint", 1,
		                              "destructiveHint", 0, "idempotentHint", 1,
		                              "openWorldHint", 0));
	return e;
}

static json_t *int_prop(const char *description, long long min)
{
	json_t *p = prop("integer", description);
	json_object_set_new(p, "minimum", json_integer(min));
	return p;
}

/* The session, job and pipeline tools. */
static json_t *stateful_entry(const struct tool *t, const struct mcp_options *o,
                              const char *version)
{
	json_t *props = json_object();
	json_t *schema = json_pack("{s:s, s:o, s:b}", "type", "object", "properties", props,
	                           "additionalProperties", 0);
	char sandbox[PATH_MAX + 600], desc[PATH_MAX + 2000];
	describe_sandbox(sandbox, sizeof(sandbox), o);
	bool ro = false, destructive = true;
	switch (t->id) {
	case TOOL_SHELL_EXEC: {
		char idle[120];
		if (o->session_idle_ms)
			snprintf(idle, sizeof(idle),
			         "A session without commands or running jobs closes after %.0f s",
			         (double)o->session_idle_ms / 1000.0);
		else
			snprintf(idle, sizeof(idle), "Sessions stay open until closed");
		json_object_set_new(props, "command",
		                    prop("string", "The command line, run by the session's shell "
		                                   "(bash, else sh)."));
		json_object_set_new(props, "session",
		                    prop("string",
		                         "The session id from an earlier shell_exec. Omit "
		                         "it to start a new session; its id comes back "
		                         "in the result."));
		json_t *tm = prop("number", "Timeout in seconds for this command (default: the "
		                            "server's). On timeout the command is interrupted "
		                            "(SIGINT, then SIGKILL) and the session stays.");
		json_object_set_new(tm, "exclusiveMinimum", json_integer(0));
		if (o->timeout_ms)
			json_object_set_new(tm, "maximum",
			                    json_real((double)o->timeout_ms / 1000.0));
		json_object_set_new(props, "timeout_s", tm);
		json_object_set_new(schema, "required", json_pack("[s]", "command"));
		snprintf(
		    desc, sizeof(desc),
		    "Run a command in a persistent sandboxed shell session and return its exit "
		    "status, stdout and stderr. The working directory, exported variables, "
		    "functions and files persist between calls in the same session; stdin is "
		    "empty; background processes (cmd &) keep running. %s (at most %u at once); "
		    "close one with shell_close. %s",
		    idle, o->max_sessions, sandbox);
		break;
	}
	case TOOL_SHELL_CLOSE:
		json_object_set_new(props, "session", prop("string", "The session id."));
		json_object_set_new(schema, "required", json_pack("[s]", "session"));
		snprintf(desc, sizeof(desc),
		         "Close a shell session: its shell, the processes and jobs in it and its "
		         "private /tmp end. Files in the workspace stay.");
		break;
	case TOOL_SHELL_LIST:
		ro = true;
		destructive = false;
		snprintf(desc, sizeof(desc),
		         "List the open shell sessions: id, whether a command is running, commands "
		         "run, restarts, running jobs, idle seconds.");
		break;
	case TOOL_JOB_START: {
		char jt[80];
		if (o->job_timeout_ms)
			snprintf(jt, sizeof(jt), "a job runs at most %.0f s",
			         (double)o->job_timeout_ms / 1000.0);
		else
			snprintf(jt, sizeof(jt), "jobs have no time limit");
		json_object_set_new(props, "command",
		                    prop("string", "The command line to run in the background (sh "
		                                   "-c, or the session's shell)."));
		json_object_set_new(props, "session",
		                    prop("string", "Run it inside this shell session's sandbox (it "
		                                   "shares the session's loopback network, /tmp "
		                                   "and processes, and starts in the shell's "
		                                   "current directory). Omit it for a sandbox of "
		                                   "its own."));
		json_object_set_new(props, "cwd",
		                    prop("string", "Working directory (without session): relative "
		                                   "to the workspace, or absolute inside it, "
		                                   "outside what the policy hides."));
		json_object_set_new(schema, "required", json_pack("[s]", "command"));
		snprintf(desc, sizeof(desc),
		         "Start a sandboxed background job (a server, a long build) and return its "
		         "job id at once. Read its output with job_output, stop it with job_kill; "
		         "the job ends when its command ends. At most %u jobs run at once; %s. %s",
		         o->max_jobs, jt, sandbox);
		break;
	}
	case TOOL_JOB_OUTPUT:
		ro = true;
		destructive = false;
		json_object_set_new(props, "job", prop("string", "The job id."));
		json_object_set_new(
		    props, "since_offset",
		    int_prop("Return output after this offset: 0 for everything "
		             "still held, else the next_offset of the previous call. "
		             "An offset past the end of the output (total_bytes) is an "
		             "error.",
		             0));
		json_object_set_new(
		    props, "max_bytes",
		    int_prop("Return at most this many bytes (default 65536); a page "
		             "ends between UTF-8 characters, so it may hold up to 3 "
		             "bytes less (or one character of up to 4 bytes when "
		             "max_bytes is smaller).",
		             1));
		json_object_set_new(schema, "required", json_pack("[s]", "job"));
		snprintf(desc, sizeof(desc),
		         "Read a background job's new stdout and stderr and whether it still runs. "
		         "Output is held in a bounded ring buffer; dropped_bytes says how much "
		         "overflowed.");
		break;
	case TOOL_JOB_KILL:
		json_object_set_new(props, "job", prop("string", "The job id."));
		json_object_set_new(schema, "required", json_pack("[s]", "job"));
		snprintf(
		    desc, sizeof(desc),
		    "Stop a background job (SIGTERM, then SIGKILL) and wait until nothing of it "
		    "is left.");
		break;
	case TOOL_JOB_LIST:
		ro = true;
		destructive = false;
		snprintf(desc, sizeof(desc), "List the background jobs, running and finished.");
		break;
	case TOOL_RUN_PIPELINE: {
		json_t *stage = json_pack("{s:s, s:{s:s}, s:i}", "type", "array", "items", "type",
		                          "string", "minItems", 1);
		json_t *stages = prop("array", "The stages, each an argv vector (program and "
		                               "arguments, looked up in PATH); stage k's stdout "
		                               "feeds stage k+1's stdin.");
		json_object_set_new(stages, "items", stage);
		json_object_set_new(stages, "minItems", json_integer(2));
		json_object_set_new(stages, "maxItems", json_integer(16));
		json_object_set_new(props, "stages", stages);
		json_object_set_new(schema, "required", json_pack("[s]", "stages"));
		snprintf(
		    desc, sizeof(desc),
		    "Run a pipeline: each stage in its own sandbox, connected by pipes "
		    "(streaming). Returns each stage's status; the pipeline's exit code follows "
		    "pipefail (the rightmost failing stage). A failing stage tears down the "
		    "others; the timeout covers the whole pipeline. %s",
		    sandbox);
		break;
	}
	default:
		break;
	}
	if (t->id == TOOL_RUN_PIPELINE)
		add_common_props(props, o);
	if (t->id == TOOL_JOB_START) {
		/* env as the run tools offer it (only with --allow-env); no stdin, no timeout:
		 * a job reads nothing and lives until it ends, job_kill or --job-timeout */
		json_t *tmp = json_object();
		add_common_props(tmp, o);
		json_t *env = json_object_get(tmp, "env");
		if (env)
			json_object_set(props, "env", env);
		json_decref(tmp);
	}
	json_t *e = json_pack("{s:s, s:s, s:o}", "name", t->name, "description",
	                      utf8_tail_fix(desc), "inputSchema", schema);
	if (mcp_version_at_least(version, "2025-06-18")) {
		json_object_set_new(e, "title", json_string(t->title));
		json_t *out = output_schema(t->id);
		if (out)
			json_object_set_new(e, "outputSchema", out);
	}
	if (mcp_version_at_least(version, "2025-03-26"))
		json_object_set_new(e, "annotations",
		                    json_pack("{s:s, s:b, s:b, s:b, s:b}", "title", t->title,
		                              "readOnlyHint", ro, "destructiveHint", destructive,
		                              "idempotentHint", ro, "openWorldHint",
		                              !ro && o->net == CORRAL_NET_HOST));
	return e;
}

static json_t *tool_entry(const struct tool *t, const struct mcp_options *o, const char *version)
{
	if (t->id == TOOL_CAN_I)
		return can_i_entry(o, version);
	if (t->id >= TOOL_SHELL_EXEC)
		return stateful_entry(t, o, version);
	json_t *props = json_object();
	json_t *schema = json_pack("{s:s, s:o, s:b}", "type", "object", "properties", props,
	                           "additionalProperties", 0);
	char sandbox[PATH_MAX + 600], desc[PATH_MAX + 1200];
	describe_sandbox(sandbox, sizeof(sandbox), o);
	if (t->id == TOOL_RUN_COMMAND) {
		json_object_set_new(props, "command",
		                    prop("string",
		                         "A shell command line, run with /bin/sh -c. Give "
		                         "this or argv."));
		json_t *argv = prop("array", "The program and its arguments, run without a shell "
		                             "(the program is looked up in PATH). Give this or "
		                             "command.");
		json_object_set_new(argv, "items", json_pack("{s:s}", "type", "string"));
		json_object_set_new(argv, "minItems", json_integer(1));
		json_object_set_new(props, "argv", argv);
		snprintf(desc, sizeof(desc),
		         "Run a shell command (or an argv vector) and return its exit status, "
		         "stdout and stderr. %s",
		         sandbox);
	} else {
		json_t *langs = json_array();
		char names[100] = "";
		for (size_t i = 0; i < N_LANGUAGES; i++)
			if (languages[i].present) {
				json_array_append_new(langs, json_string(languages[i].name));
				if (names[0])
					strcat(names, ", ");
				strcat(names, languages[i].name);
			}
		json_t *lang =
		    prop("string", "The interpreter: python (python3), node, bash or sh; "
		                   "only those installed and allowed by this server's policy are "
		                   "offered.");
		json_object_set_new(lang, "enum", langs);
		json_object_set_new(props, "language", lang);
		json_object_set_new(props, "code", prop("string", "The program text."));
		json_object_set_new(schema, "required", json_pack("[s,s]", "language", "code"));
		snprintf(desc, sizeof(desc),
		         "Run a program (%s) from a file in the sandbox's private /tmp and return "
		         "its exit status, stdout and stderr. %s",
		         names, sandbox);
	}
	add_common_props(props, o);
	json_t *e = json_pack("{s:s, s:s, s:o}", "name", t->name, "description",
	                      utf8_tail_fix(desc), "inputSchema", schema);
	if (mcp_version_at_least(version, "2025-06-18")) {
		json_object_set_new(e, "title", json_string(t->title));
		json_t *out = output_schema(t->id);
		if (out)
			json_object_set_new(e, "outputSchema", out);
	}
	if (mcp_version_at_least(version, "2025-03-26"))
		json_object_set_new(e, "annotations",
		                    json_pack("{s:s, s:b, s:b, s:b, s:b}", "title", t->title,
		                              "readOnlyHint", 0, "destructiveHint", 1,
		                              "idempotentHint", 0, "openWorldHint",
		                              o->net == CORRAL_NET_HOST));
	return e;
}

json_t *mcp_tools_list(const struct mcp_options *o, const char *version)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < N_TOOLS; i++) {
		if (tools[i].id == TOOL_RUN_CODE && !any_language())
			continue;
		json_array_append_new(arr, tool_entry(&tools[i], o, version));
	}
	return json_pack("{s:o}", "tools", arr);
}

/* ---- arguments ------------------------------------------------------------------------- */

void mcp_plan_free(struct mcp_plan *p)
{
	corral_config_free(p->cfg);
	json_decref(p->args);
	json_decref(p->answer);
	json_decref(p->queries);
	free(p->display);
	if (p->argv) {
		for (char **a = p->argv; *a; a++)
			free(*a);
		free(p->argv);
	}
	free(p->command);
	mcp_plan_remove_code(p);
	memset(p, 0, sizeof(*p));
}

void mcp_plan_remove_code(struct mcp_plan *p)
{
	if (p->code_file)
		unlink(p->code_file);
	if (p->code_dir)
		rmdir(p->code_dir); /* fails, and stays, if the program left files next to it */
	free(p->code_file);
	free(p->code_dir);
	p->code_file = p->code_dir = NULL;
}

static int bad(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *why, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return -1;
}

/* "field: message" for a library error about an argument, without saying the field twice
 * when the message already starts with it (the library's cwd errors do). */
static int bad_field(char *why, size_t n, const char *field, const char *msg)
{
	size_t fl = strlen(field);
	if (!strncmp(msg, field, fl) && msg[fl] == ':' && msg[fl + 1] == ' ')
		msg += fl + 2;
	return bad(why, n, "%s: %s", field, msg);
}

/* A string argument without NUL bytes (C strings cannot carry them). */
static int get_cstring(const json_t *args, const char *key, const char **out, char *why, size_t n)
{
	json_t *v = json_object_get(args, key);
	*out = NULL;
	if (!v)
		return 0;
	if (!json_is_string(v))
		return bad(why, n, "%s: must be a string, not %s", key, jr_type_name(v));
	if (strlen(json_string_value(v)) != json_string_length(v))
		return bad(why, n, "%s: must not contain NUL characters", key);
	*out = json_string_value(v);
	return 0;
}

static int check_keys(const json_t *args, const char *const *allowed, char *why, size_t n)
{
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)args, key, v)
	{
		bool ok = false;
		for (const char *const *a = allowed; *a; a++)
			if (!strcmp(*a, key))
				ok = true;
		if (!ok) {
			char list[200] = "";
			for (const char *const *a = allowed; *a; a++) {
				if (list[0])
					strcat(list, ", ");
				strcat(list, *a);
			}
			return bad(why, n, "unknown argument '%.60s' (expected: %s)", key, list);
		}
	}
	return 0;
}

/* May a call set the variable name? Only names the policy allows: a match of the base
 * configuration's env allow globs (the profile's env.allow, --env NAME) or of --allow-env,
 * and no deny glob (deny wins). Returns 0, or -1 with why naming the variable and the rule. */
static int env_check(const struct mcp_options *o, const char *name, char *why, size_t n)
{
	const corral_config *b = o->base;
	const char *deny = policy_env_denied_by(b, name);
	if (deny)
		return bad(
		    why, n,
		    "env.%.60s: not allowed: withheld by the policy's deny rule '%s' (deny rules "
		    "keep credentials and loader variables out of the sandbox; a call cannot "
		    "lift them)",
		    name, deny);
	for (size_t i = 0; i < b->n_env_allow; i++)
		if (policy_glob_match(b->env_allow[i], name))
			return 0;
	for (size_t i = 0; i < o->n_allow_env; i++)
		if (fnmatch(o->allow_env[i], name, 0) == 0)
			return 0;
	if (!b->n_env_allow && !o->n_allow_env)
		return bad(why, n,
		           "env.%.60s: not allowed: this server's policy allows no variables (the "
		           "operator can allow names with env.allow in the profile, --env NAME or "
		           "--allow-env NAME)",
		           name);
	char names[300];
	allowed_env_names(o, names, sizeof(names));
	return bad(why, n,
	           "env.%.60s: not allowed: no env allow rule of this server's policy matches it "
	           "(allowed: %s)",
	           name, names);
}

/* The server's policy, copied for one call; the call's arguments then narrow the copy. */
static corral_config *base_config(const struct mcp_options *o, char *why, size_t n)
{
	corral_config *cfg = corral_config_dup(o->base);
	if (!cfg)
		bad(why, n, "out of memory");
	return cfg;
}

static int apply_common(const struct mcp_options *o, const json_t *args, struct mcp_plan *plan,
                        char *why, size_t n)
{
	struct corral_error err = {0};
	const char *cwd;
	if (get_cstring(args, "cwd", &cwd, why, n) < 0)
		return -1;
	if (cwd && corral_config_set_cwd(plan->cfg, cwd, &err) < 0)
		return bad_field(why, n, "cwd", err.message);
	/* a cwd the server's policy hides: the call's mistake, said as one (mode none hides
	 * nothing, and the plan checks again wherever hiding is enforced) */
	if (cwd && o->mode != CORRAL_MODE_NONE && policy_check_cwd(plan->cfg, &err) < 0)
		return bad_field(why, n, "cwd", err.message);

	plan->timeout_ms = o->timeout_ms;
	json_t *t = json_object_get(args, "timeout_s");
	if (t) {
		if (!json_is_number(t))
			return bad(why, n, "timeout_s: must be a number of seconds, not %s",
			           jr_type_name(t));
		double s = json_number_value(t);
		if (!(s > 0) || !isfinite(s))
			return bad(why, n, "timeout_s: must be greater than 0");
		double ms = ceil(s * 1000.0);
		if (o->timeout_ms && ms > (double)o->timeout_ms)
			return bad(why, n,
			           "timeout_s: %g exceeds this server's limit of %g s; ask for at "
			           "most that (calls can only lower the timeout)",
			           s, (double)o->timeout_ms / 1000.0);
		if (ms > 1e12)
			return bad(why, n, "timeout_s: %g is too large", s);
		plan->timeout_ms = (uint64_t)ms;
		if (corral_config_set_timeout_ms(plan->cfg, plan->timeout_ms, o->kill_after_ms,
		                                 &err) < 0)
			return bad_field(why, n, "timeout_s", err.message);
	}

	json_t *in = json_object_get(args, "stdin");
	if (in) {
		if (!json_is_string(in))
			return bad(why, n, "stdin: must be a string, not %s", jr_type_name(in));
		if (json_string_length(in) &&
		    corral_config_set_stdin_data(plan->cfg, json_string_value(in),
		                                 json_string_length(in), &err) < 0)
			return bad_field(why, n, "stdin", err.message);
	}

	json_t *env = json_object_get(args, "env");
	if (env) {
		if (!json_is_object(env))
			return bad(why, n, "env: must be an object of name to string value, not %s",
			           jr_type_name(env));
		const char *name;
		json_t *v;
		json_object_foreach(env, name, v)
		{
			if (!env_name_valid(name))
				return bad(
				    why, n,
				    "env.%.60s: not a variable name (letters, digits and _, not "
				    "starting with a digit)",
				    name);
			if (env_check(o, name, why, n) < 0)
				return -1;
			if (!json_is_string(v))
				return bad(why, n, "env.%.60s: must be a string, not %s", name,
				           jr_type_name(v));
			if (strlen(json_string_value(v)) != json_string_length(v))
				return bad(why, n, "env.%.60s: must not contain NUL characters",
				           name);
			if (corral_config_setenv(plan->cfg, name, json_string_value(v), &err) < 0)
				return bad(why, n, "env.%.60s: %s", name, err.message);
		}
	}
	return 0;
}

static char *quote_argv(const char *const *argv)
{
	size_t cap = 64, len = 0;
	char *s = malloc(cap);
	if (!s)
		return NULL;
	s[0] = '\0';
	for (size_t i = 0; argv[i]; i++) {
		const char *a = argv[i];
		bool plain = *a != '\0';
		for (const char *c = a; *c; c++)
			if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
			            "-_./=:,+@%",
			            *c))
				plain = false;
		size_t need = len + strlen(a) * 4 + 4;
		if (need > cap) {
			while (cap < need)
				cap *= 2;
			char *g = realloc(s, cap);
			if (!g) {
				free(s);
				return NULL;
			}
			s = g;
		}
		if (i)
			s[len++] = ' ';
		if (plain) {
			len += (size_t)sprintf(s + len, "%s", a);
		} else {
			s[len++] = '\'';
			for (const char *c = a; *c; c++) {
				if (*c == '\'') {
					memcpy(s + len, "'\\''", 4);
					len += 4;
				} else {
					s[len++] = *c;
				}
			}
			s[len++] = '\'';
			s[len] = '\0';
		}
	}
	return s;
}

static char **strv_dup(const char *const *v)
{
	size_t n = 0;
	while (v[n])
		n++;
	char **out = calloc(n + 1, sizeof(char *));
	for (size_t i = 0; out && i < n; i++)
		if (!(out[i] = strdup(v[i]))) {
			for (size_t k = 0; k < i; k++)
				free(out[k]);
			free(out);
			return NULL;
		}
	return out;
}

static int prepare_run_command(const json_t *args, struct mcp_plan *plan, char *why, size_t n)
{
	struct corral_error err = {0};
	const char *cmd;
	if (get_cstring(args, "command", &cmd, why, n) < 0)
		return -1;
	json_t *argv = json_object_get(args, "argv");
	if (cmd && argv)
		return bad(why, n,
		           "give either command (a shell string) or argv (an array), not "
		           "both");
	if (!cmd && !argv)
		return bad(why, n,
		           "command: required (a shell string), or give argv (an array of "
		           "strings)");
	if (cmd) {
		if (!*cmd)
			return bad(why, n, "command: must not be empty");
		if (corral_config_set_shell(plan->cfg, cmd, &err) < 0)
			return bad_field(why, n, "command", err.message);
		plan->command = strdup(cmd);
		const char *v[] = {"/bin/sh", "-c", cmd, NULL};
		plan->argv = strv_dup(v);
		if (asprintf(&plan->display, "$ %s", cmd) < 0)
			plan->display = NULL;
		return plan->argv && plan->command && plan->display ? 0
		                                                    : bad(why, n, "out of memory");
	}
	if (!json_is_array(argv))
		return bad(why, n, "argv: must be an array of strings, not %s", jr_type_name(argv));
	size_t count = json_array_size(argv);
	if (count == 0)
		return bad(why, n, "argv: must not be empty; argv[0] is the program");
	const char **v = calloc(count + 1, sizeof(char *));
	if (!v)
		return bad(why, n, "out of memory");
	for (size_t i = 0; i < count; i++) {
		json_t *a = json_array_get(argv, i);
		if (!json_is_string(a)) {
			free(v);
			return bad(why, n, "argv[%zu]: must be a string, not %s", i,
			           jr_type_name(a));
		}
		if (strlen(json_string_value(a)) != json_string_length(a)) {
			free(v);
			return bad(why, n, "argv[%zu]: must not contain NUL characters", i);
		}
		v[i] = json_string_value(a);
	}
	if (!*v[0]) {
		free(v);
		return bad(why, n, "argv[0]: must not be empty; it is the program to run");
	}
	int r = corral_config_set_argv(plan->cfg, v, &err);
	if (r == 0) {
		plan->argv = strv_dup(v);
		char *q = quote_argv(v);
		if (q && asprintf(&plan->display, "$ %s", q) < 0)
			plan->display = NULL;
		free(q);
	}
	free(v);
	if (r < 0)
		return bad_field(why, n, "argv", err.message);
	return plan->argv && plan->display ? 0 : bad(why, n, "out of memory");
}

/* The code reaches a file in the sandbox's private /tmp by shell builtins only (a command
 * allow-list that admits /bin/sh and the interpreter needs nothing else). The name is
 * unpredictable (a UUID read from /proc/sys/kernel/random/uuid; the shell's pid and a counter
 * only where /proc is missing), so that with a shared /tmp (--mode none, or a TMPDIR naming a
 * shared directory) nobody can plant anything under it in advance. The file is created
 * exclusively: set -C makes a bare redirection O_CREAT|O_EXCL for a missing path, but dash and
 * bash open an existing FIFO, device or directory without O_EXCL (and a FIFO blocks), so the
 * path must not exist (not even as a dangling symlink) before, and after the redirection it
 * must be a regular file, not a FIFO or a symlink, ours and empty; otherwise another name is
 * tried (50 times). The redirection is bare, since a failed one on a special builtin such as
 * ":" ends a POSIX shell. The file is created under umask 077 (readable by us only); the
 * server's umask is restored before the interpreter runs (it is inherited across exec: the
 * files the program creates get the modes they would get from run_command). Then printf
 * writes the code from CORRAL_CODE, which the shell unsets before it execs the interpreter.
 * Code too long for one variable (without a stdin of the call's own) arrives on standard
 * input instead and is copied line by line with read. */
static const char code_file_prelude[] =
    "u0=$(umask); umask 077; set -C; i=0; "
    "until u=$$.$i; { read -r u </proc/sys/kernel/random/uuid; } 2>/dev/null; "
    "f=${TMPDIR:-/tmp}/corral-code.$u; "
    "! [ -e \"$f\" ] && ! [ -h \"$f\" ] && 2>/dev/null >\"$f\" && [ -f \"$f\" ] && "
    "! [ -h \"$f\" ] && ! [ -p \"$f\" ] && [ -O \"$f\" ] && ! [ -s \"$f\" ]; do "
    "i=$((i+1)); if [ $i -ge 50 ]; then "
    "echo \"corral: cannot create a file for the code in ${TMPDIR:-/tmp}\" >&2; exit 125; "
    "fi; done; set +C; umask \"$u0\"; ";
static const char code_write_fail[] =
    "|| { echo 'corral: cannot write the code to a file in /tmp' >&2; exit 125; }; ";

/* The TMPDIR the command will see: an explicit setting (the last; one that removes it means
 * none), else the host's where the policy passes it, else none (then /tmp). */
static const char *sandbox_tmpdir(const corral_config *cfg, char *buf, size_t n)
{
	const char *dir = NULL;
	bool set = false;
	for (size_t i = 0; i < cfg->n_env; i++)
		if (!strcmp(cfg->env[i].name, "TMPDIR")) {
			dir = cfg->env[i].value;
			set = true;
		}
	struct env_entry *pass = NULL, *withheld = NULL;
	size_t n_pass = 0, n_withheld = 0;
	if (!set && policy_env(cfg, &pass, &n_pass, &withheld, &n_withheld) == 0)
		for (size_t i = 0; i < n_pass; i++)
			if (!strcmp(pass[i].name, "TMPDIR"))
				dir = pass[i].value;
	snprintf(buf, n, "%s", dir && dir[0] == '/' ? dir : "/tmp");
	env_entries_free_list(pass, n_pass);
	env_entries_free_list(withheld, n_withheld);
	return buf;
}

/* Mode none: nothing isolates /tmp, so the file the wrapper makes there would outlive the run
 * (the interpreter replaces the shell that wrote it, and no private /tmp goes away with the
 * sandbox). The server writes the code itself, into a directory of its own (mkdtemp, 0700)
 * in the TMPDIR the command would have used: the script's directory is on the interpreter's
 * module path (Python's sys.path[0]), and a shared /tmp there would let another user plant
 * modules. Both go when the call responds; the interpreter runs the file directly. Called
 * once the call's env is applied. */
static int prepare_code_none(const json_t *args, struct mcp_plan *plan, char *why, size_t n)
{
	const char *lang = json_string_value(json_object_get(args, "language"));
	const json_t *code = json_object_get(args, "code");
	const struct language *L = NULL;
	for (size_t i = 0; i < N_LANGUAGES; i++)
		if (lang && !strcmp(languages[i].name, lang))
			L = &languages[i];
	if (!L || !code) /* validated by prepare_run_code */
		return bad(why, n, "language: not supported");
	size_t len = json_string_length(code);
	const char *text = json_string_value(code);
	char dir[PATH_MAX];
	sandbox_tmpdir(plan->cfg, dir, sizeof(dir));
	if (strlen(dir) > PATH_MAX - 64)
		return bad(why, n, "code: TMPDIR is too long for a file of the code: %.200s...",
		           dir);
	if (asprintf(&plan->code_dir, "%s/corral-code.XXXXXX", dir) < 0) {
		plan->code_dir = NULL;
		return bad(why, n, "out of memory");
	}
	if (!mkdtemp(plan->code_dir)) {
		int e = errno;
		free(plan->code_dir);
		plan->code_dir = NULL;
		return bad(why, n,
		           "code: cannot make a directory for it in %.200s: %s; point TMPDIR at a "
		           "writable directory",
		           dir, strerror(e));
	}
	static const char *const ext[] = {"py", "js", "sh", "sh"}; /* as languages[] */
	_Static_assert(sizeof(ext) / sizeof(ext[0]) == N_LANGUAGES, "one extension a language");
	char *path = NULL;
	if (asprintf(&path, "%s/code.%s", plan->code_dir, ext[L - languages]) < 0)
		return bad(why, n, "out of memory");
	plan->code_file = path; /* both removed by mcp_plan_remove_code, on any return */
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return bad(why, n, "code: cannot write it to %.200s: %s", path, strerror(errno));
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			int e = errno;
			close(fd);
			return bad(why, n, "code: cannot write it to %.200s: %s", path,
			           strerror(e));
		}
		off += (size_t)w;
	}
	if (close(fd) < 0)
		return bad(why, n, "code: cannot write it to %.200s: %s", path, strerror(errno));
	const char *v[] = {L->exe, path, NULL};
	struct corral_error err = {0};
	if (corral_config_set_argv(plan->cfg, v, &err) < 0)
		return bad_field(why, n, "code", err.message);
	plan->argv = strv_dup(v);
	if (asprintf(&plan->display, "$ %s <%s code: %zu bytes>", L->exe, L->name, len) < 0)
		plan->display = NULL;
	return plan->argv && plan->display ? 0 : bad(why, n, "out of memory");
}

static int prepare_run_code(const json_t *args, struct mcp_plan *plan, char *why, size_t n)
{
	struct corral_error err = {0};
	const char *lang;
	if (get_cstring(args, "language", &lang, why, n) < 0)
		return -1;
	const struct language *L = NULL, *known = NULL;
	char names[100] = "";
	for (size_t i = 0; i < N_LANGUAGES; i++) {
		if (lang && !strcmp(languages[i].name, lang))
			known = &languages[i];
		if (!languages[i].present)
			continue;
		if (names[0])
			strcat(names, ", ");
		strcat(names, languages[i].name);
		if (lang && !strcmp(languages[i].name, lang))
			L = &languages[i];
	}
	if (!lang)
		return bad(why, n, "language: required (one of: %s)", names);
	if (!L && known)
		return bad(why, n, "language: '%s' is not available on this server: %s; choose one "
		                   "of: %s",
		           known->name, known->why[0] ? known->why : "not offered", names);
	if (!L)
		return bad(why, n, "language: '%.40s' is not supported; choose one of: %s", lang,
		           names);
	json_t *code = json_object_get(args, "code");
	if (!code)
		return bad(why, n, "code: required (the program text)");
	if (!json_is_string(code))
		return bad(why, n, "code: must be a string, not %s", jr_type_name(code));
	size_t len = json_string_length(code);
	if (strlen(json_string_value(code)) != len)
		return bad(why, n, "code: must not contain NUL characters");
	if (plan->cfg->mode == CORRAL_MODE_NONE)
		return 0; /* the server writes the file, after apply_common: prepare_code_none */
	bool own_stdin = json_object_get(args, "stdin") != NULL;
	char *script = NULL;
	int r;
	if (own_stdin && len > CODE_ENV_MAX)
		return bad(why, n,
		           "code: %zu bytes is too long together with stdin (at most %d bytes "
		           "then; without stdin the code may be as long as a message allows)",
		           len, CODE_ENV_MAX);
	if (len <= CODE_ENV_MAX) {
		r = asprintf(&script,
		             "%sprintf '%%s' \"$CORRAL_CODE\" >>\"$f\" %sunset CORRAL_CODE; "
		             "exec %s \"$f\"%s",
		             code_file_prelude, code_write_fail, L->exe,
		             own_stdin ? "" : " </dev/null");
		if (r >= 0 && corral_config_setenv(plan->cfg, "CORRAL_CODE",
		                                   json_string_value(code), &err) < 0) {
			free(script);
			return bad_field(why, n, "code", err.message);
		}
	} else {
		/* IFS= read -r keeps every byte of a line; the last line may lack its newline */
		r = asprintf(&script,
		             "%s{ while IFS= read -r l; do printf '%%s\\n' \"$l\"; done; "
		             "printf '%%s' \"$l\"; } >>\"$f\" %sexec %s \"$f\" </dev/null",
		             code_file_prelude, code_write_fail, L->exe);
		if (r >= 0 &&
		    corral_config_set_stdin_data(plan->cfg, json_string_value(code), len, &err) <
		        0) {
			free(script);
			return bad_field(why, n, "code", err.message);
		}
	}
	if (r < 0)
		return bad(why, n, "out of memory");
	r = corral_config_set_shell(plan->cfg, script, &err);
	if (r == 0) {
		plan->command = script;
		const char *v[] = {"/bin/sh", "-c", script, NULL};
		plan->argv = strv_dup(v);
		if (asprintf(&plan->display, "$ %s <%s code: %zu bytes>", L->exe, L->name, len) < 0)
			plan->display = NULL;
	} else {
		free(script);
		return bad_field(why, n, "code", err.message);
	}
	return plan->argv && plan->display ? 0 : bad(why, n, "out of memory");
}

static const char *const run_command_keys[] = {"command", "argv", "cwd", "timeout_s",
                                               "stdin",   "env",  NULL};
static const char *const run_code_keys[] = {"language", "code", "cwd", "timeout_s",
                                            "stdin",    "env",  NULL};
static const char *const can_i_keys[] = {"op", "target", "queries", NULL};

static int prepare_can_i(const struct mcp_options *o, const json_t *args, const char *version,
                         struct mcp_plan *plan, char *why, size_t n);

/* An id argument (a session or a job): a string. */
static int get_id(const json_t *args, const char *key, bool required, const char **out, char *why,
                  size_t n)
{
	if (get_cstring(args, key, out, why, n) < 0)
		return -1;
	if (!*out && required)
		return bad(why, n, "%s: required (the id an earlier call returned)", key);
	if (*out && (!**out || strlen(*out) > 64))
		return bad(why, n, "%s: not an id (ids are UUIDs from earlier calls)", key);
	return 0;
}

static int get_offset(const json_t *args, const char *key, uint64_t *out, char *why, size_t n)
{
	json_t *v = json_object_get(args, key);
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return bad(why, n, "%s: must be a non-negative integer, not %s", key,
		           json_is_integer(v) ? "a negative number" : jr_type_name(v));
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int prepare_stateful(const struct mcp_options *o, enum mcp_tool_id id, const json_t *args,
                            struct mcp_plan *plan, char *why, size_t n)
{
	static const char *const k_exec[] = {"command", "session", "timeout_s", NULL};
	static const char *const k_sess[] = {"session", NULL};
	static const char *const k_none[] = {NULL};
	static const char *const k_jstart[] = {"command", "session", "cwd", "env", NULL};
	/* job_start: a job reads nothing (stdin is /dev/null) and has no call timeout */
	static const char *const k_jout[] = {"job", "since_offset", "max_bytes", NULL};
	static const char *const k_job[] = {"job", NULL};
	static const char *const k_pipe[] = {"stages", "cwd", "timeout_s", "stdin", "env", NULL};
	const char *const *keys = id == TOOL_SHELL_EXEC     ? k_exec
	                          : id == TOOL_SHELL_CLOSE  ? k_sess
	                          : id == TOOL_JOB_START    ? k_jstart
	                          : id == TOOL_JOB_OUTPUT   ? k_jout
	                          : id == TOOL_JOB_KILL     ? k_job
	                          : id == TOOL_RUN_PIPELINE ? k_pipe
	                                                    : k_none;
	if (check_keys(args, keys, why, n) < 0)
		return -1;
	plan->tool = id;
	plan->args = json_deep_copy(args);
	if (!plan->args)
		return bad(why, n, "out of memory");
	const char *s = NULL;
	struct corral_error err = {0};
	switch (id) {
	case TOOL_SHELL_EXEC: {
		if (get_id(args, "session", false, &s, why, n) < 0 ||
		    get_cstring(args, "command", &s, why, n) < 0)
			return -1;
		if (!s || !*s)
			return bad(why, n, "command: required, a non-empty shell command line");
		plan->command = strdup(s);
		if (asprintf(&plan->display, "$ %s", s) < 0)
			plan->display = NULL;
		const char *v[] = {"sh", "-c", s, NULL};
		plan->argv = strv_dup(v);
		if (!plan->command || !plan->display || !plan->argv)
			return bad(why, n, "out of memory");
		/* timeout_s: validated like the run tools' (at most the server's) */
		if (!(plan->cfg = base_config(o, why, n)))
			return -1;
		json_t *t = json_object_get(args, "timeout_s");
		json_t *only = json_pack("{s:O}", "timeout_s", t ? t : json_null());
		if (!t)
			json_object_del(only, "timeout_s");
		int r = apply_common(o, only, plan, why, n);
		json_decref(only);
		return r;
	}
	case TOOL_SHELL_CLOSE:
		return get_id(args, "session", true, &s, why, n);
	case TOOL_JOB_OUTPUT: {
		uint64_t v = 0;
		if (get_id(args, "job", true, &s, why, n) < 0 ||
		    get_offset(args, "since_offset", &v, why, n) < 0 ||
		    get_offset(args, "max_bytes", &v, why, n) < 0)
			return -1;
		json_t *mb = json_object_get(args, "max_bytes");
		if (mb && json_integer_value(mb) < 1)
			return bad(why, n, "max_bytes: must be at least 1");
		return 0;
	}
	case TOOL_JOB_KILL:
		return get_id(args, "job", true, &s, why, n);
	case TOOL_JOB_START: {
		const char *sess = NULL;
		if (get_id(args, "session", false, &sess, why, n) < 0 ||
		    get_cstring(args, "command", &s, why, n) < 0)
			return -1;
		if (!s || !*s)
			return bad(why, n, "command: required, a non-empty shell command line");
		if (sess && json_object_get(args, "cwd"))
			return bad(
			    why, n,
			    "cwd: a job in a session starts in the shell's current directory; "
			    "give cwd only without session (or cd in the command)");
		if (sess && json_object_get(args, "env"))
			return bad(
			    why, n,
			    "env: a job in a session has the session's environment; give env "
			    "only without session (or set variables in the command)");
		if (!(plan->cfg = base_config(o, why, n)))
			return -1;
		if (corral_config_set_shell(plan->cfg, s, &err) < 0)
			return bad_field(why, n, "command", err.message);
		plan->command = strdup(s);
		if (asprintf(&plan->display, "$ %s &", s) < 0)
			plan->display = NULL;
		if (!plan->command || !plan->display)
			return bad(why, n, "out of memory");
		if (apply_common(o, args, plan, why, n) < 0)
			return -1;
		corral_config_set_timeout_ms(plan->cfg, o->job_timeout_ms, o->kill_after_ms, &err);
		return 0;
	}
	case TOOL_RUN_PIPELINE: {
		json_t *st = json_object_get(args, "stages");
		if (!st)
			return bad(why, n, "stages: required, an array of 2 to 16 argv arrays");
		if (!json_is_array(st))
			return bad(why, n, "stages: must be an array of argv arrays, not %s",
			           jr_type_name(st));
		size_t ns = json_array_size(st);
		if (ns < 2 || ns > 16)
			return bad(why, n, "stages: %zu stages; a pipeline has 2 to 16", ns);
		size_t i;
		json_t *a;
		json_array_foreach(st, i, a)
		{
			if (!json_is_array(a) || json_array_size(a) == 0)
				return bad(
				    why, n,
				    "stages[%zu]: must be a non-empty array of strings (program "
				    "and arguments)",
				    i);
			size_t k;
			json_t *w;
			json_array_foreach(a, k, w)
			{
				if (!json_is_string(w))
					return bad(why, n,
					           "stages[%zu][%zu]: must be a string, not %s", i,
					           k, jr_type_name(w));
				if (strlen(json_string_value(w)) != json_string_length(w))
					return bad(
					    why, n,
					    "stages[%zu][%zu]: must not contain NUL characters", i,
					    k);
				if (k == 0 && !json_string_length(w))
					return bad(why, n,
					           "stages[%zu][0]: the program must not be empty",
					           i);
			}
		}
		if (!(plan->cfg = base_config(o, why, n)))
			return -1;
		if (apply_common(o, args, plan, why, n) < 0)
			return -1;
		char *disp = NULL;
		json_array_foreach(st, i, a)
		{
			size_t na = json_array_size(a);
			const char **v = calloc(na + 1, sizeof(char *));
			if (!v)
				return bad(why, n, "out of memory");
			for (size_t k = 0; k < na; k++)
				v[k] = json_string_value(json_array_get(a, k));
			char *q = quote_argv(v);
			free(v);
			char *nd = NULL;
			if (!q ||
			    asprintf(&nd, "%s%s%s", disp ? disp : "$ ", disp ? " | " : "", q) < 0)
				nd = NULL;
			free(q);
			free(disp);
			disp = nd;
			if (!disp)
				return bad(why, n, "out of memory");
		}
		plan->display = disp;
		return 0;
	}
	default:
		return 0;
	}
}

enum mcp_prepare mcp_tool_prepare(const struct mcp_options *o, const char *name, const json_t *args,
                                  const char *version, struct mcp_plan *plan, char *why,
                                  size_t whylen)
{
	memset(plan, 0, sizeof(*plan));
	const struct tool *t = find_tool(name);
	if (!t) {
		snprintf(why, whylen, "unknown tool '%.80s'; this server offers: %s", name,
		         mcp_tool_names());
		return MCP_PREP_UNKNOWN_TOOL;
	}
	json_t *empty = NULL;
	if (!args)
		args = empty = json_object();
	if (t->id == TOOL_CAN_I) {
		int r = check_keys(args, can_i_keys, why, whylen);
		if (r == 0)
			r = prepare_can_i(o, args, version, plan, why, whylen);
		json_decref(empty);
		if (r < 0) {
			mcp_plan_free(plan);
			return MCP_PREP_BAD_ARGS;
		}
		return MCP_PREP_ANSWERED;
	}
	if (t->id >= TOOL_SHELL_EXEC) {
		int r = prepare_stateful(o, t->id, args, plan, why, whylen);
		json_decref(empty);
		if (r < 0) {
			mcp_plan_free(plan);
			return MCP_PREP_BAD_ARGS;
		}
		return MCP_PREP_STATEFUL;
	}
	const char *const *keys = t->id == TOOL_RUN_COMMAND ? run_command_keys : run_code_keys;
	int r = check_keys(args, keys, why, whylen);
	if (r == 0 && !(plan->cfg = base_config(o, why, whylen)))
		r = -1;
	if (r == 0)
		r = t->id == TOOL_RUN_COMMAND ? prepare_run_command(args, plan, why, whylen)
		                              : prepare_run_code(args, plan, why, whylen);
	if (r == 0)
		r = apply_common(o, args, plan, why, whylen);
	if (r == 0 && t->id == TOOL_RUN_CODE && plan->cfg->mode == CORRAL_MODE_NONE)
		r = prepare_code_none(args, plan, why, whylen);
	json_decref(empty);
	if (r < 0) {
		mcp_plan_free(plan);
		return MCP_PREP_BAD_ARGS;
	}
	return MCP_PREP_OK;
}

/* ---- results --------------------------------------------------------------------------- */

struct sbuf {
	char *s;
	size_t len, cap;
	bool oom;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *g = realloc(b->s, cap);
		if (!g) {
			b->oom = true;
			return;
		}
		b->s = g;
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		sb_add(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

static const char *sig_name(int sig)
{
	const char *s = sigabbrev_np(sig);
	return s ? s : "?";
}

static void stream_block(struct sbuf *b, const char *name, const json_t *structured,
                         const struct corral_result *res, bool is_out)
{
	const char *text = json_string_value(json_object_get(structured, name));
	sb_printf(b, "--- %s ---\n", name);
	if (!text || !*text) {
		sb_add(b, "(empty)\n", 8);
	} else {
		size_t n = strlen(text);
		sb_add(b, text, n);
		if (text[n - 1] != '\n')
			sb_add(b, "\n", 1);
	}
	if (is_out ? res->stdout_truncated : res->stderr_truncated)
		sb_printf(b, "[%s truncated: %llu bytes total, kept head and tail]\n", name,
		          (unsigned long long)(is_out ? res->stdout_bytes : res->stderr_bytes));
}

static bool result_failed(const struct corral_result *res)
{
	return res->error.code || res->timed_out || res->signal || !res->exited ||
	       res->exit_code != 0;
}

static char *result_text(const struct mcp_plan *plan, const struct corral_result *res,
                         const json_t *structured)
{
	struct sbuf b = {0};
	/* The headline names the command; a long one is cut (at a character boundary). */
	const char *d = plan->display ? plan->display : "$ ?";
	size_t dl = strlen(d);
	char *head = mcp_utf8_clean(d, dl > HEADLINE_MAX ? HEADLINE_MAX : dl);
	if (head) {
		sb_add(&b, head, strlen(head));
		if (dl > HEADLINE_MAX)
			sb_printf(&b, " ... [%zu bytes]", dl - 2);
		sb_add(&b, "\n", 1);
	}
	free(head);
	if (res->timed_out && res->session_id && res->exited)
		sb_printf(&b, "timed out after %.1fs; interrupted (exit: %d); the session stays\n",
		          (double)plan->timeout_ms / 1000.0, res->exit_code);
	else if (res->timed_out)
		sb_printf(&b, "timed out after %.1fs; killed by signal %d (%s)\n",
		          (double)plan->timeout_ms / 1000.0, res->signal ? res->signal : SIGKILL,
		          sig_name(res->signal ? res->signal : SIGKILL));
	else if (res->exited)
		sb_printf(&b, "exit: %d\n", res->exit_code);
	else if (res->signal)
		sb_printf(&b, "killed by signal %d (%s)\n", res->signal, sig_name(res->signal));
	else
		sb_printf(&b, "not started: %s\n", corral_strerror(res->error.code));
	sb_printf(&b, "duration: %llu ms\n", (unsigned long long)res->duration_ms);
	const char *lim = corral_limit_hit_name(res->limit);
	if (lim && res->limit != CORRAL_HIT_TIMEOUT)
		sb_printf(&b, "limit: %s\n", lim);
	if (res->error.code) {
		char *clean = mcp_utf8_clean(res->error.message, strlen(res->error.message));
		sb_printf(&b, "error: %s\n", corral_strerror(res->error.code));
		if (clean) {
			sb_add(&b, "hint: ", 6);
			sb_add(&b, clean, strlen(clean));
			sb_add(&b, "\n", 1);
		}
		free(clean);
	}
	/* What the sandbox stopped, each with what to do instead (one sentence for a model). */
	for (size_t i = 0; i < res->n_violations; i++) {
		const char *h = res->violations[i].hint;
		if (!h || !*h || (res->error.code && strstr(res->error.message, h)))
			continue;
		char *clean = mcp_utf8_clean(h, strlen(h));
		if (clean)
			sb_printf(&b, "hint: %s\n", clean);
		free(clean);
	}
	if (res->redactions)
		sb_printf(&b, "%s: %llu secret%s in the output%s\n",
		          res->redaction_mode && !strcmp(res->redaction_mode, "flag") ? "flagged"
		                                                                      : "redacted",
		          (unsigned long long)res->redactions, res->redactions == 1 ? "" : "s",
		          res->redaction_mode && !strcmp(res->redaction_mode, "flag")
		              ? " (left in place)"
		              : " (replaced by [REDACTED:<kind>])");
	if (res->error.code == 0 || res->stdout_bytes || res->stderr_bytes) {
		stream_block(&b, "stdout", structured, res, true);
		stream_block(&b, "stderr", structured, res, false);
	}
	if (b.oom) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

static json_t *text_item(const char *text)
{
	json_t *t = json_string(text);
	if (!t) { /* not UTF-8 after all: never lose the item */
		char *clean = mcp_utf8_clean(text, strlen(text));
		t = json_string(clean ? clean : "");
		free(clean);
	}
	return json_pack("{s:s, s:o}", "type", "text", "text", t);
}

json_t *mcp_tool_error(const char *message)
{
	char *clean = mcp_utf8_clean(message, strlen(message));
	json_t *r =
	    json_pack("{s:[o], s:b}", "content", text_item(clean ? clean : "error"), "isError", 1);
	free(clean);
	return r;
}

json_t *mcp_tool_result(const struct mcp_plan *plan, const struct corral_result *res,
                        const char *version)
{
	return mcp_tool_result_of(plan, res, NULL, version);
}

json_t *mcp_tool_result_of(const struct mcp_plan *plan, const struct corral_result *res,
                           json_t *structured, const char *version)
{
	/* the result's object itself (corral_result_to_json()'s document), not its text parsed
	 * back: a call with a megabyte of output encoded and parsed it once more */
	if (!structured)
		structured = result_json(res, true);
	char *text = structured ? result_text(plan, res, structured) : NULL;
	if (!text) {
		json_decref(structured);
		return NULL;
	}
	json_t *content = json_array();
	json_array_append_new(content, text_item(text));
	free(text);
	json_t *out = json_object();
	json_object_set_new(out, "content", content);
	if (mcp_version_at_least(version, "2025-06-18")) {
		json_object_set_new(out, "structuredContent", structured);
	} else {
		/* Before structuredContent existed, the JSON travels as a second text item. */
		char *json = json_dumps(structured, JSON_COMPACT);
		json_decref(structured);
		if (!json) {
			json_decref(out);
			return NULL;
		}
		json_array_append_new(content, text_item(json));
		free(json);
	}
	json_object_set_new(out, "isError", json_boolean(result_failed(res)));
	return out;
}

void mcp_spawn_failed_result(const struct mcp_plan *plan, const struct mcp_options *o,
                             const struct corral_error *err, struct corral_result *res)
{
	/* corral_spawn hands back no result: describe the failure in the same schema. */
	memset(res, 0, sizeof(*res));
	unsigned char b[16] = {0};
	if (getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b))
		memcpy(b, &plan, sizeof(plan) < sizeof(b) ? sizeof(plan) : sizeof(b));
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	snprintf(res->id, sizeof(res->id),
	         "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
	         b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
	         b[15]);
	res->argv = plan->argv;
	res->command = plan->command;
	res->exit_code = -1;
	res->mode = o->mode == CORRAL_MODE_NONE   ? "none"
	            : o->mode == CORRAL_MODE_AUTO ? "auto"
	                                          : "required";
	res->error = *err;
	if (!res->error.code)
		res->error.code = CORRAL_ESYS;
}

/* ---- can_i ------------------------------------------------------------------------------ */

static const char *const can_i_ops[] = {"read", "write", "exec", "connect", NULL};

/* One question: validate it, ask the base policy, add the answer and its text line. */
static int can_i_one(const struct mcp_options *o, const json_t *q, const char *where,
                     json_t *answers, struct sbuf *b, char *why, size_t n)
{
	json_t *vop = json_object_get(q, "op"), *vt = json_object_get(q, "target");
	if (!vop)
		return bad(why, n, "%sop: required (read, write, exec or connect)", where);
	if (!json_is_string(vop))
		return bad(why, n, "%sop: must be a string (read, write, exec or connect), not %s",
		           where, jr_type_name(vop));
	const char *op = json_string_value(vop);
	if (strlen(op) != json_string_length(vop))
		return bad(why, n,
		           "%sop: must not contain NUL characters (read, write, exec or "
		           "connect)",
		           where);
	bool known = false;
	for (const char *const *k = can_i_ops; *k; k++)
		known |= !strcmp(*k, op);
	if (!known)
		return bad(why, n, "%sop: '%.40s' is not one of read, write, exec, connect", where,
		           op);
	if (!vt)
		return bad(why, n, "%starget: required (a path, a command, or HOST:PORT)", where);
	if (!json_is_string(vt))
		return bad(why, n, "%starget: must be a string, not %s", where, jr_type_name(vt));
	const char *target = json_string_value(vt);
	if (strlen(target) != json_string_length(vt))
		return bad(why, n, "%starget: must not contain NUL characters", where);
	if (!*target)
		return bad(why, n, "%starget: must not be empty", where);
	char *doc = NULL;
	struct corral_error err = {0};
	int r = corral_policy_query(o->base, op, target, &doc, &err);
	if (r < 0)
		return bad(why, n, "%starget: %s", where, err.message);
	json_t *a = json_loads(doc, 0, NULL);
	free(doc);
	if (!a)
		return bad(why, n, "out of memory");
	json_array_append_new(answers, a);
	const char *rule = json_string_value(json_object_get(a, "rule"));
	const char *reason = json_string_value(json_object_get(a, "reason"));
	sb_printf(b, "%s: %s ", r ? "allowed" : "denied", op);
	sb_add(b, target, strlen(target));
	sb_add(b, " (rule: ", 8);
	sb_add(b, rule ? rule : "?", strlen(rule ? rule : "?"));
	sb_add(b, ")", 1);
	if (reason && *reason) {
		sb_add(b, " \u2014 ", strlen(" \u2014 "));
		sb_add(b, reason, strlen(reason));
	}
	sb_add(b, "\n", 1);
	return 0;
}

/* can_i: answered at once from the server's base policy; nothing runs and nothing changes.
 * A denial is an answer (isError false); only a malformed question is an error. */
static int prepare_can_i(const struct mcp_options *o, const json_t *args, const char *version,
                         struct mcp_plan *plan, char *why, size_t n)
{
	json_t *queries = json_object_get(args, "queries");
	bool single = json_object_get(args, "op") || json_object_get(args, "target");
	if (queries && single)
		return bad(why, n, "give either op and target, or queries (an array), not both");
	if (!queries && !single)
		return bad(why, n,
		           "op and target: required (e.g. {\"op\": \"write\", \"target\": "
		           "\"src/main.c\"}), or give queries (an array of such objects)");
	if (queries) {
		if (!json_is_array(queries))
			return bad(why, n,
			           "queries: must be an array of {op, target} objects, not %s",
			           jr_type_name(queries));
		if (json_array_size(queries) == 0)
			return bad(why, n, "queries: must not be empty");
		if (json_array_size(queries) > CAN_I_MAX_QUERIES)
			return bad(why, n, "queries: at most %d questions per call, not %zu",
			           CAN_I_MAX_QUERIES, json_array_size(queries));
	}
	json_t *answers = json_array();
	struct sbuf b = {0};
	int r = 0;
	if (!answers)
		r = bad(why, n, "out of memory");
	if (r == 0 && !queries)
		r = can_i_one(o, args, "", answers, &b, why, n);
	for (size_t i = 0; r == 0 && queries && i < json_array_size(queries); i++) {
		json_t *q = json_array_get(queries, i);
		char where[40];
		snprintf(where, sizeof(where), "queries[%zu].", i);
		if (!json_is_object(q)) {
			r = bad(why, n, "queries[%zu]: must be an object {op, target}, not %s", i,
			        jr_type_name(q));
			break;
		}
		r = check_keys(q, (const char *const[]){"op", "target", NULL}, why, n);
		if (r == 0)
			r = can_i_one(o, q, where, answers, &b, why, n);
		else {
			char tmp[600];
			snprintf(tmp, sizeof(tmp), "queries[%zu]: %s", i, why);
			snprintf(why, n, "%s", tmp);
		}
	}
	if (r == 0 && b.oom)
		r = bad(why, n, "out of memory");
	if (r < 0) {
		json_decref(answers);
		free(b.s);
		return -1;
	}
	json_t *structured = queries ? json_pack("{s:O}", "answers", answers)
	                             : json_incref(json_array_get(answers, 0));
	json_t *content = json_array();
	json_array_append_new(content, text_item(b.s));
	free(b.s);
	json_t *out = json_object();
	json_object_set_new(out, "content", content);
	if (mcp_version_at_least(version, "2025-06-18")) {
		json_object_set_new(out, "structuredContent", structured);
	} else {
		/* Before structuredContent existed, the JSON travels as a second text item. */
		char *j = json_dumps(structured, JSON_COMPACT | JSON_PRESERVE_ORDER);
		if (j)
			json_array_append_new(content, text_item(j));
		free(j);
		json_decref(structured);
	}
	json_object_set_new(out, "isError", json_false());
	plan->answer = out;
	plan->queries = answers;
	return 0;
}

/* A tool answer that is a JSON object: the object as text (for every client) and as
 * structuredContent (2025-06-18 and later). Steals structured. */
json_t *mcp_tool_json(json_t *structured, bool is_error, const char *version)
{
	if (!structured)
		return NULL;
	char *text = json_dumps(structured, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	if (!text) {
		json_decref(structured);
		return NULL;
	}
	json_t *content = json_array();
	json_array_append_new(content, text_item(text));
	free(text);
	json_t *out = json_object();
	json_object_set_new(out, "content", content);
	if (mcp_version_at_least(version, "2025-06-18"))
		json_object_set_new(out, "structuredContent", structured);
	else
		json_decref(structured);
	json_object_set_new(out, "isError", json_boolean(is_error));
	return out;
}
