/* The floor of an MCP server's call, for the spaced rows of bench/server.py: a stdio JSON-RPC
 * server (newline-delimited, as MCP's stdio transport) that answers initialize, tools/list,
 * ping and tools/call run_command {argv}, where a call is posix_spawn of argv and a wait,
 * nothing else: no sandbox, no limits, no capture, no record. What a call to it costs is the
 * client's round trip, the JSON both ways and a fork+exec+wait, the parts every MCP server
 * that runs a command pays, however it isolates it.
 *
 * One request at a time, in order (the spaced rows send one at a time). Built by bench/run.sh
 * with the same jansson that corral uses. Not part of corral. */
#define _GNU_SOURCE
#include <jansson.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void reply(json_t *id, json_t *result, int code, const char *message)
{
	json_t *msg =
	    result ? json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result)
	           : json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error",
	                       "code", code, "message", message);
	char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	if (text) {
		size_t len = strlen(text);
		text[len] = '\n'; /* json_dumps's NUL, replaced: one write per reply */
		for (size_t off = 0; off <= len;) {
			ssize_t n = write(STDOUT_FILENO, text + off, len + 1 - off);
			if (n <= 0)
				exit(1);
			off += (size_t)n;
		}
	}
	free(text);
	json_decref(msg);
}

/* tools/call run_command: the argv's exit status, or an error text */
static json_t *run(json_t *args)
{
	json_t *av = json_object_get(args, "argv");
	size_t n = json_array_size(av);
	if (!n || n > 1024)
		return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
		                 "argv: a non-empty array of strings", "isError", 1);
	char *argv[1025];
	for (size_t i = 0; i < n; i++)
		argv[i] = (char *)json_string_value(json_array_get(av, i));
	argv[n] = NULL;
	pid_t pid;
	int st = 0;
	if (!argv[0] || posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0 ||
	    waitpid(pid, &st, 0) != pid)
		return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
		                 "spawn failed", "isError", 1);
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	char text[32];
	snprintf(text, sizeof(text), "exit code %d", code);
	return json_pack("{s:[{s:s, s:s}], s:{s:i}, s:b}", "content", "type", "text", "text", text,
	                 "structuredContent", "exit_code", code, "isError", code != 0);
}

int main(void)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	while ((len = getline(&line, &cap, stdin)) > 0) {
		json_error_t jerr;
		json_t *req = json_loadb(line, (size_t)len, 0, &jerr);
		json_t *id = json_object_get(req, "id");
		const char *method = json_string_value(json_object_get(req, "method"));
		if (!req || !method) {
			json_t *null = json_null();
			reply(id ? id : null, NULL, -32700, "parse error");
			json_decref(null);
		} else if (!id) {
			/* a notification: nothing to answer */
		} else if (!strcmp(method, "initialize")) {
			reply(id,
			      json_pack("{s:s, s:{s:{}}, s:{s:s, s:s}}", "protocolVersion",
			                "2025-06-18", "capabilities", "tools", "serverInfo", "name",
			                "mcpfloor", "version", "1"),
			      0, NULL);
		} else if (!strcmp(method, "tools/list")) {
			reply(id,
			      json_pack("{s:[{s:s, s:s, s:{s:s, s:{s:{s:s}}}}]}", "tools", "name",
			                "run_command", "description",
			                "posix_spawn argv, no isolation", "inputSchema", "type",
			                "object", "properties", "argv", "type", "array"),
			      0, NULL);
		} else if (!strcmp(method, "ping")) {
			reply(id, json_object(), 0, NULL);
		} else if (!strcmp(method, "tools/call")) {
			json_t *params = json_object_get(req, "params");
			const char *name = json_string_value(json_object_get(params, "name"));
			if (name && !strcmp(name, "run_command"))
				reply(id, run(json_object_get(params, "arguments")), 0, NULL);
			else
				reply(id, NULL, -32602, "unknown tool");
		} else {
			reply(id, NULL, -32601, "method not found");
		}
		json_decref(req);
	}
	free(line);
	return 0;
}
