/* Profiles: builtins, the JSON format, every error path with its position, globs. */
#include "internal.h"
#include "policy.h"
#include "test.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

static bool all_zero(const struct profile *p)
{
	const unsigned char *b = (const unsigned char *)p;
	for (size_t i = 0; i < sizeof(*p); i++)
		if (b[i])
			return false;
	return true;
}

/* Parse doc, which must fail; the message must start with prefix and contain needle. A failed
 * parse must leave the profile zeroed. */
static bool fails(const char *doc, const char *prefix, const char *needle)
{
	struct profile p;
	struct corral_error e = {0};
	memset(&p, 0xAA, sizeof(p));
	int rc = profile_parse(doc, strlen(doc), "p.json", &p, &e);
	bool ok = rc == CORRAL_EINVAL && e.code == CORRAL_EINVAL && all_zero(&p) &&
	          !strncmp(e.message, prefix, strlen(prefix)) &&
	          (!needle || strstr(e.message, needle)) && !strchr(e.message, '\n');
	if (!ok)
		printf("  got rc %d: %s\n", rc, e.message);
	profile_free(&p);
	return ok;
}

static bool parses(const char *doc, struct profile *p)
{
	struct corral_error e = {0};
	int rc = profile_parse(doc, strlen(doc), "p.json", p, &e);
	if (rc)
		printf("  unexpected error: %s\n", e.message);
	return rc == 0;
}

static void test_builtins(void)
{
	struct profile p;
	struct corral_error e = {0};
	for (size_t i = 0; profile_builtin_names[i]; i++) {
		char name[64];
		snprintf(name, sizeof(name), "profile builtin %s loads", profile_builtin_names[i]);
		int rc = profile_builtin(profile_builtin_names[i], &p, &e);
		CHECK(name, rc == 0 && !strcmp(p.name, profile_builtin_names[i]) && p.description &&
		                p.mode_set && p.mode == CORRAL_MODE_REQUIRED && p.net_set &&
		                p.protected_set && p.n_protected > 10 && p.env_deny_set &&
		                p.n_env_deny > 10 && p.timeout_set && !p.cmd_allow_set);
		profile_free(&p);
	}
	CHECK("profile builtin default",
	      profile_builtin("default", &p, &e) == 0 && p.workspace_access == 2 &&
	          p.net == CORRAL_NET_NONE && p.timeout_ms == 60000 && !p.etc_minimal &&
	          !p.limit_set[CORRAL_LIMIT_MEMORY] && !p.limit_set[CORRAL_LIMIT_PIDS] &&
	          !p.output_cap_set && !p.kill_after_set &&
	          !strcmp(p.protected_paths[0], ".git/hooks"));
	profile_free(&p);
	CHECK("profile builtin readonly", profile_builtin("readonly", &p, &e) == 0 &&
	                                      p.workspace_access == 1 && p.net == CORRAL_NET_NONE);
	profile_free(&p);
	CHECK("profile builtin strict",
	      profile_builtin("strict", &p, &e) == 0 && p.etc_minimal && p.timeout_ms == 30000 &&
	          p.limits[CORRAL_LIMIT_MEMORY] == 512ULL << 20 &&
	          p.limits[CORRAL_LIMIT_PIDS] == 128 && p.limits[CORRAL_LIMIT_NOFILE] == 256 &&
	          p.limits[CORRAL_LIMIT_FSIZE] == 64ULL << 20 &&
	          p.limits[CORRAL_LIMIT_TMPFS] == 64ULL << 20 &&
	          p.limits[CORRAL_LIMIT_CPU_S] == 30 && p.limit_set[CORRAL_LIMIT_CPU_S] &&
	          p.output_cap_set && p.output_cap == 256 << 10 && p.workspace_access == 2);
	profile_free(&p);
	CHECK("profile builtin network", profile_builtin("network", &p, &e) == 0 &&
	                                     p.net == CORRAL_NET_HOST &&
	                                     !strncmp(p.description, "NETWORK ACCESS: ", 16));
	profile_free(&p);
	memset(&p, 0xAA, sizeof(p));
	CHECK(
	    "profile builtin unknown, with suggestion",
	    profile_builtin("strcit", &p, &e) == CORRAL_EINVAL && all_zero(&p) &&
	        strstr(e.message, "unknown builtin profile \"strcit\" (did you mean \"strict\"?)"));
	CHECK("profile builtin NULL", profile_builtin(NULL, &p, &e) == CORRAL_EINVAL);

	bool lists_ok = true;
	for (size_t i = 0; policy_default_protected[i]; i++)
		lists_ok &= policy_default_protected[i][0] != '/' &&
		            !strstr(policy_default_protected[i], "..");
	size_t n = 0;
	for (; policy_default_env_deny[n]; n++)
		lists_ok &=
		    strspn(policy_default_env_deny[n],
		           "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_*?") ==
		    strlen(policy_default_env_deny[n]);
	CHECK("profile default lists are well-formed", lists_ok && n >= 28);
}

static const char full_doc[] =
    "{\n"
    "  \"description\": \"everything\",\n"
    "  \"mode\": \"auto\",\n"
    "  \"filesystem\": {\n"
    "    \"read\": [\"~/.cache/pip\", \"/opt/tools\", \"vendor\", \"out\", \"vendor\"],\n"
    "    \"write\": [\"~/.cache/go-build\", \"out\"],\n"
    "    \"deny\": [\"secrets\", \"~/.aws\", \"out\"],\n"
    "    \"protected\": [\".git/hooks\", \".mcp.json\"],\n"
    "    \"workspace\": \"ro\",\n"
    "    \"etc\": \"minimal\"\n"
    "  },\n"
    "  \"network\": \"host\",\n"
    "  \"limits\": {\"timeout\": 1.5, \"kill_after\": \"250ms\", \"memory\": \"512M\",\n"
    "             \"cpu\": \"2m\", \"pids\": 0, \"nofile\": 64, \"fsize\": 1048576,\n"
    "             \"tmpfs\": \"1G\", \"output\": \"64k\"},\n"
    "  \"env\": {\"allow\": [\"LANG\", \"LC_*\", \"PYTHON*\"], \"deny\": [\"*_TOKEN\"],\n"
    "          \"deny_replace\": true, \"set\": {\"FOO\": \"bar baz\", \"_X1\": \"\"}},\n"
    "  \"commands\": {\n"
    "    \"allow\": [\"python3\", {\"match\": \"/usr/bin/git\", \"reason\": \"vcs\"}, "
    "\"python3\"],\n"
    "    \"deny\": [{\"match\": \"curl\", \"reason\": \"no network tools\"}, \"wget\", "
    "\"python3\"]\n"
    "  }\n"
    "}\n";

static void test_full(void)
{
	struct profile p;
	CHECK("profile full document parses", parses(full_doc, &p));
	CHECK("profile full: name and description",
	      !strcmp(p.name, "p.json") && !strcmp(p.description, "everything"));
	CHECK("profile full: mode and network",
	      p.mode_set && p.mode == CORRAL_MODE_AUTO && p.net_set && p.net == CORRAL_NET_HOST);
	/* "out" is in write too (write wins), the second "vendor" is a duplicate */
	CHECK("profile full: read (write wins, duplicates dropped)",
	      p.n_read == 3 && !strcmp(p.fs_read[0], "~/.cache/pip") &&
	          !strcmp(p.fs_read[1], "/opt/tools") && !strcmp(p.fs_read[2], "vendor"));
	CHECK("profile full: write", p.n_write == 2 &&
	                                 !strcmp(p.fs_write[0], "~/.cache/go-build") &&
	                                 !strcmp(p.fs_write[1], "out"));
	/* deny keeps "out": deny wins over write when applied */
	CHECK("profile full: deny kept", p.n_deny == 3 && !strcmp(p.fs_deny[2], "out"));
	CHECK("profile full: protected",
	      p.protected_set && p.n_protected == 2 && !strcmp(p.protected_paths[1], ".mcp.json"));
	CHECK("profile full: workspace and etc", p.workspace_access == 1 && p.etc_minimal);
	CHECK("profile full: limits",
	      p.timeout_set && p.timeout_ms == 1500 && p.kill_after_set && p.kill_after_ms == 250 &&
	          p.limit_set[CORRAL_LIMIT_MEMORY] &&
	          p.limits[CORRAL_LIMIT_MEMORY] == 512ULL << 20 &&
	          p.limits[CORRAL_LIMIT_CPU_S] == 120 && p.limit_set[CORRAL_LIMIT_PIDS] &&
	          p.limits[CORRAL_LIMIT_PIDS] == 0 && p.limits[CORRAL_LIMIT_NOFILE] == 64 &&
	          p.limits[CORRAL_LIMIT_FSIZE] == 1048576 &&
	          p.limits[CORRAL_LIMIT_TMPFS] == 1ULL << 30 && p.output_cap_set &&
	          p.output_cap == 65536);
	CHECK("profile full: env",
	      p.n_env_allow == 3 && !strcmp(p.env_allow[2], "PYTHON*") && p.n_env_deny == 1 &&
	          p.env_deny_set && p.n_env_set == 2 && !strcmp(p.env_set[0].name, "FOO") &&
	          !strcmp(p.env_set[0].value, "bar baz") && !strcmp(p.env_set[1].value, ""));
	CHECK("profile full: command allow (duplicate dropped)",
	      p.cmd_allow_set && p.n_cmd_allow == 2 && !strcmp(p.cmd_allow[0].match, "python3") &&
	          !p.cmd_allow[0].reason && !strcmp(p.cmd_allow[1].match, "/usr/bin/git") &&
	          !strcmp(p.cmd_allow[1].reason, "vcs"));
	/* python3 in both lists: both kept, deny wins when applied */
	CHECK("profile full: command deny", p.n_cmd_deny == 3 &&
	                                        !strcmp(p.cmd_deny[0].reason, "no network tools") &&
	                                        !strcmp(p.cmd_deny[2].match, "python3"));
	profile_free(&p);
	CHECK("profile free zeroes", all_zero(&p));
	profile_free(&p);
	CHECK("profile free twice is safe", all_zero(&p));

	CHECK("profile empty object", parses("{}", &p) && !p.mode_set && !p.net_set &&
	                                  !p.protected_set && !p.cmd_allow_set &&
	                                  p.workspace_access == 0 && !p.timeout_set);
	profile_free(&p);
	CHECK("profile empty allow list sets cmd_allow_set",
	      parses("{\"commands\": {\"allow\": []}}", &p) && p.cmd_allow_set && !p.n_cmd_allow);
	profile_free(&p);
	CHECK("profile empty protected list replaces the defaults",
	      parses("{\"filesystem\": {\"protected\": []}}", &p) && p.protected_set &&
	          !p.n_protected);
	profile_free(&p);
	CHECK("profile deny_replace false adds", parses("{\"env\": {\"deny\": [\"X_*\"], "
	                                                "\"deny_replace\": false}}",
	                                                &p) &&
	                                             !p.env_deny_set && p.n_env_deny == 1);
	profile_free(&p);
	CHECK("profile sizes as whole numbers, 0 = no limit",
	      parses("{\"limits\": {\"memory\": 1e9, \"fsize\": 0, \"timeout\": 0, \"cpu\": 5}}",
	             &p) &&
	          p.limits[CORRAL_LIMIT_MEMORY] == 1000000000 && p.limit_set[CORRAL_LIMIT_FSIZE] &&
	          p.timeout_set && p.timeout_ms == 0 && p.limits[CORRAL_LIMIT_CPU_S] == 5);
	profile_free(&p);
	CHECK("profile escaped keys and values", parses("{\"mo\\u0064e\": \"n\\u006fne\", \"env\": "
	                                                "{\"set\": {\"A\": \"\\u00e9\\n\"}}}",
	                                                &p) &&
	                                             p.mode == CORRAL_MODE_NONE &&
	                                             !strcmp(p.env_set[0].value, "\xc3\xa9\n"));
	profile_free(&p);
	CHECK("profile home paths",
	      parses("{\"filesystem\": {\"read\": [\"~\", \"~/x\"]}}", &p) && p.n_read == 2);
	profile_free(&p);
	CHECK("profile NULL origin",
	      profile_parse("{}", 2, NULL, &p, NULL) == 0 && !strcmp(p.name, "profile"));
	profile_free(&p);
	CHECK("profile NULL text", profile_parse(NULL, 3, "x", &p, NULL) == CORRAL_EINVAL);
}

static void test_errors(void)
{
	/* unknown keys, with and without a suggestion */
	CHECK(
	    "profile err unknown top-level key",
	    fails("{\n  \"mode\": \"auto\",\n  \"netwrok\": \"none\"\n}",
	          "p.json:3:3: unknown key \"netwrok\" in the top-level object (did you mean "
	          "\"network\"?); expected one of description, mode, filesystem, network, limits, "
	          "env, commands, redact",
	          NULL));
	CHECK("profile err unknown nested key",
	      fails("{\"limits\": {\"memroy\": \"1G\"}}",
	            "p.json:1:13: unknown key \"memroy\" in \"limits\" (did you mean \"memory\"?); "
	            "expected one of timeout, kill_after, memory, cpu, cpus, pids, nofile, fsize, "
	            "tmpfs, output",
	            NULL));
	CHECK("profile err unknown key without suggestion",
	      fails("{\"zzzzzzzz\": 1}",
	            "p.json:1:2: unknown key \"zzzzzzzz\" in the top-level object; "
	            "expected one of",
	            NULL));
	CHECK("profile err unknown key in a rule",
	      fails("{\"commands\": {\"deny\": [\"a\",\n {\"match\": \"b\", \"reson\": \"x\"}]}}",
	            "p.json:2:17: unknown key \"reson\" in \"commands.deny[1]\" (did you mean "
	            "\"reason\"?); expected one of match, reason",
	            NULL));

	/* wrong types */
	CHECK("profile err wrong type in a list",
	      fails("{\"filesystem\": {\n  \"read\": [\"a\", \"b\", 42]}}",
	            "p.json:2:22: filesystem.read[2]: expected a path string, got 42", NULL));
	CHECK("profile err section not an object",
	      fails("{\"filesystem\": [\"a\"]}",
	            "p.json:1:16: filesystem: expected an object, got an array", NULL));
	CHECK("profile err description not a string",
	      fails("{\"description\": null}",
	            "p.json:1:17: description: expected a string, got null", NULL));
	CHECK(
	    "profile err list not an array",
	    fails("{\"env\": {\"allow\": \"LANG\"}}",
	          "p.json:1:19: env.allow: expected an array of variable name globs, got \"LANG\"",
	          NULL));
	CHECK("profile err deny_replace not a boolean",
	      fails("{\"env\": {\"deny_replace\": \"yes\"}}",
	            "p.json:1:26: env.deny_replace: expected true or false, got \"yes\"", NULL));
	CHECK("profile err pids as a string",
	      fails("{\"limits\": {\"pids\": \"128\"}}",
	            "p.json:1:21: limits.pids: expected a whole number, got \"128\"", NULL));
	CHECK("profile err pids fractional",
	      fails("{\"limits\": {\"pids\": 1.5}}",
	            "p.json:1:21: limits.pids: expected a whole number, got 1.5", NULL));

	/* bad sizes and durations, out of range */
	CHECK(
	    "profile err bad size",
	    fails("{\n  \"limits\": {\n    \"pids\": 64,\n    \"memory\": \"12Q\"\n  }\n}",
	          "p.json:4:15: limits.memory: expected a size like \"512M\", got \"12Q\": unknown "
	          "size unit",
	          NULL));
	CHECK("profile err size out of range",
	      fails("{\"limits\": {\"memory\": \"512k\"}}",
	            "p.json:1:23: limits.memory: expected a size from 1 MiB to 1 PiB (0 for no "
	            "limit), got \"512k\"",
	            NULL));
	CHECK("profile err negative size", fails("{\"limits\": {\"fsize\": -1}}",
	                                         "p.json:1:22: limits.fsize: expected a size like "
	                                         "\"512M\" or a whole number of bytes, got -1",
	                                         NULL));
	CHECK("profile err nofile below minimum",
	      fails("{\"limits\": {\"nofile\": 8}}",
	            "p.json:1:23: limits.nofile: expected a number from 16 to 1048576", NULL));
	CHECK("profile err tmpfs 0 (would mean the default, not no limit)",
	      fails("{\"limits\": {\"tmpfs\": 0}}",
	            "p.json:1:22: limits.tmpfs: expected a size from 1 MiB to 1 PiB, got 0", NULL));
	CHECK("profile err output 0", fails("{\"limits\": {\"output\": 0}}",
	                                    "p.json:1:23: limits.output: expected a size from 64 "
	                                    "bytes to 1 GiB, got 0",
	                                    NULL));
	CHECK("profile err bad duration unit",
	      fails("{\"limits\": {\"timeout\": \"5x\"}}",
	            "p.json:1:24: limits.timeout: expected a duration like \"30s\", got \"5x\": "
	            "unknown duration unit",
	            NULL));
	/* below one unit would read as 0, "none": refused, not a limit silently off */
	CHECK("profile err timeout below a millisecond",
	      fails("{\"limits\": {\"timeout\": 0.0004}}",
	            "p.json:1:24: limits.timeout: expected a duration of at least 1 ms (or 0 for "
	            "none), got 0.0004",
	            NULL));
	CHECK("profile err memory below a byte",
	      fails("{\"limits\": {\"memory\": \"0.5\"}}",
	            "p.json:1:23: limits.memory: expected a size like \"512M\", got \"0.5\": size "
	            "is below one byte",
	            NULL));
	CHECK(
	    "profile err kill_after too long",
	    fails("{\"limits\": {\"kill_after\": \"2h\"}}",
	          "p.json:1:27: limits.kill_after: expected a duration at most 1 hour, got \"2h\"",
	          NULL));
	CHECK("profile err timeout number too long",
	      fails("{\"limits\": {\"timeout\": 1e12}}",
	            "p.json:1:24: limits.timeout: expected a duration at most 366 days", NULL));
	CHECK(
	    "profile err negative timeout",
	    fails("{\"limits\": {\"timeout\": -1}}",
	          "p.json:1:24: limits.timeout: expected a non-negative number of seconds, got -1",
	          NULL));
	CHECK("profile err cpu fraction of a second",
	      fails("{\"limits\": {\"cpu\": \"1.5s\"}}",
	            "p.json:1:20: limits.cpu: expected a whole number of seconds, got \"1.5s\"",
	            NULL));
	CHECK("profile err timeout wrong type",
	      fails("{\"limits\": {\"timeout\": [30]}}",
	            "p.json:1:24: limits.timeout: expected a duration like \"30s\" or a number of "
	            "seconds, got an array",
	            NULL));

	/* enums */
	CHECK("profile err bad mode",
	      fails("{\"mode\": \"strict\"}",
	            "p.json:1:10: mode: expected one of \"required\", \"auto\", \"none\", got "
	            "\"strict\"",
	            NULL));
	CHECK(
	    "profile err bad network with suggestion",
	    fails("{\"network\": \"hots\"}",
	          "p.json:1:13: network: expected one of \"none\", \"host\", got \"hots\" (did you "
	          "mean \"host\"?)",
	          NULL));
	CHECK("profile err bad workspace",
	      fails("{\"filesystem\": {\"workspace\": true}}",
	            "p.json:1:30: filesystem.workspace: expected one of \"ro\", \"rw\", got true",
	            NULL));
	CHECK("profile err bad etc", fails("{\"filesystem\": {\"etc\": \"none\"}}",
	                                   "p.json:1:24: filesystem.etc: expected one of "
	                                   "\"default\", \"minimal\", got \"none\"",
	                                   NULL));

	/* paths */
	CHECK(
	    "profile err protected with ..",
	    fails("{\"filesystem\": {\"protected\": [\".git/hooks\",\n    \"a/../b\"]}}",
	          "p.json:2:5: filesystem.protected[1]: expected a workspace-relative path without "
	          "\"..\", got \"a/../b\"",
	          NULL));
	CHECK("profile err protected absolute",
	      fails("{\"filesystem\": {\"protected\": [\"/etc\"]}}",
	            "p.json:1:31: filesystem.protected[0]: expected a workspace-relative path",
	            NULL));
	CHECK("profile err protected home",
	      fails("{\"filesystem\": {\"protected\": [\"~/.bashrc\"]}}",
	            "p.json:1:31: filesystem.protected[0]: expected "
	            "a workspace-relative path",
	            NULL));
	CHECK("profile err empty path",
	      fails("{\"filesystem\": {\"deny\": [\"\"]}}",
	            "p.json:1:26: filesystem.deny[0]: expected a non-empty path, got \"\"", NULL));
	CHECK(
	    "profile err other user's home",
	    fails("{\"filesystem\": {\"write\": [\"~bob/x\"]}}",
	          "p.json:1:27: filesystem.write[0]: expected \"~\" or a path starting with \"~/\"",
	          NULL));

	/* env */
	CHECK("profile err bad env glob",
	      fails("{\"env\": {\"allow\": [\"LANG\", \"LC-*\"]}}",
	            "p.json:1:28: env.allow[1]: expected a variable name glob of letters, digits, "
	            "'_', '*' and '?' (like \"LC_*\"), got \"LC-*\"",
	            NULL));
	CHECK("profile err bad env.set name (at the key)",
	      fails("{\"env\": {\"set\": {\"OK\": \"1\",\n \"1BAD\": \"x\"}}}",
	            "p.json:2:2: env.set.1BAD: expected a variable name matching "
	            "[A-Za-z_][A-Za-z0-9_]* (under 256 bytes), got \"1BAD\"",
	            NULL));
	CHECK("profile err env.set value not a string",
	      fails("{\"env\": {\"set\": {\"N\": 1}}}",
	            "p.json:1:23: env.set.N: expected a string value, got 1", NULL));
	CHECK("profile err env.set not an object",
	      fails("{\"env\": {\"set\": [\"A=1\"]}}",
	            "p.json:1:17: env.set: expected an object of NAME: \"value\" pairs", NULL));

	/* commands */
	CHECK("profile err relative command path",
	      fails("{\"commands\": {\"allow\": [\"bin/git\"]}}",
	            "p.json:1:25: commands.allow[0]: expected a command name like \"git\" or an "
	            "absolute path like \"/usr/bin/git\", without spaces, got \"bin/git\"",
	            NULL));
	CHECK("profile err command with spaces",
	      fails("{\"commands\": {\"deny\": [{\"match\": \"rm -rf\"}]}}",
	            "p.json:1:34: commands.deny[0].match: expected a command name", NULL));
	CHECK("profile err rule without match",
	      fails("{\"commands\": {\"deny\": [{\"reason\": \"x\"}]}}",
	            "p.json:1:24: commands.deny[0]: missing the required key \"match\"", NULL));
	CHECK("profile err rule reason not a string",
	      fails("{\"commands\": {\"deny\": [{\"match\": \"x\", \"reason\": 5}]}}",
	            "p.json:1:49: commands.deny[0].reason: expected a string, got 5", NULL));
	CHECK("profile err rule of a wrong type",
	      fails("{\"commands\": {\"deny\": [true]}}",
	            "p.json:1:24: commands.deny[0]: expected a command name, or an object", NULL));

	/* syntax and structure */
	CHECK("profile err duplicate key",
	      fails("{\"limits\": {\"pids\": 1,\n  \"pids\": 2}}",
	            "p.json:2:3: limits.pids: duplicate key; each key may appear only once", NULL));
	CHECK("profile err duplicate top-level key",
	      fails("{\"mode\": \"auto\", \"mode\": \"none\"}", "p.json:1:18: mode: duplicate key",
	            NULL));
	CHECK("profile err trailing garbage",
	      fails("{\"mode\": \"auto\"}\n  xx",
	            "p.json:2:3: unexpected text after the end of the JSON document", NULL));
	CHECK("profile err trailing comma",
	      fails("{\"mode\": \"auto\",\n}", "p.json:2:1: invalid JSON: string or '}' expected",
	            NULL));
	CHECK(
	    "profile err bad literal",
	    fails("{\"mode\": tru}", "p.json:1:10: invalid JSON: invalid token near 'tru'", NULL));
	CHECK("profile err unterminated",
	      fails("{\"mode\": \"auto\"",
	            "p.json:1:16: invalid JSON: '}' expected near end of "
	            "file",
	            NULL));
	CHECK("profile err empty input", fails("", "p.json:1:1: invalid JSON:", NULL));
	CHECK("profile err NUL escape",
	      fails("{\"description\": \"a\\u0000b\"}", "p.json:1:", "invalid JSON"));
	CHECK("profile err invalid UTF-8",
	      fails("{\"description\": \"\xff\"}", "p.json:1:", "0xff"));
	CHECK("profile err top-level array",
	      fails("[{}]", "p.json:1:1: expected a JSON object at the top level", "got an array"));
	CHECK("profile err top-level string",
	      fails("\n  \"default\"", "p.json:2:3: expected a JSON object at the top level",
	            "got \"default\""));
	CHECK("profile err column counts bytes",
	      fails("{\"description\": \"\xc3\xa9\xc3\xa9\", \"mode\": 1}",
	            "p.json:1:33: mode: expected one of", NULL));
	CHECK("profile err escaped key is located",
	      fails("{\"limits\": {\"mem\\u006fry\": \"12Q\"}}",
	            "p.json:1:28: limits.memory: expected a size", NULL));
	CHECK("profile err control bytes escaped in messages",
	      fails("{\"a\\nb\\u0001\": 1}", "p.json:1:2: unknown key \"a\\nb\\x01\" in", NULL));

	/* nesting: '{' is level 1, so the 64th '[' is level 65 */
	char deep[300];
	int o = snprintf(deep, sizeof(deep), "{\"description\":");
	for (int i = 0; i < 100; i++)
		deep[o++] = '[';
	deep[o] = '\0';
	CHECK("profile err deep nesting",
	      fails(deep, "p.json:1:79: nesting deeper than 64 levels", NULL));
	CHECK(
	    "profile err syntax error before deep nesting wins",
	    fails(
	        "{\"a\" 1, [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
	        "p.json:1:6: invalid JSON", NULL));
	size_t big = 10000;
	char *verydeep = malloc(2 * big + 1);
	for (size_t i = 0; i < big; i++) {
		verydeep[i] = '[';
		verydeep[big + i] = ']';
	}
	verydeep[2 * big] = '\0';
	CHECK("profile err very deep nesting",
	      fails(verydeep, "p.json:1:65: nesting deeper than 64 levels", NULL));
	free(verydeep);

	/* a long value is cut in the message, which stays one line within the record */
	char longdoc[3000];
	o = snprintf(longdoc, sizeof(longdoc), "{\"mode\": \"");
	for (int i = 0; i < 500; i++) {
		memcpy(longdoc + o, "\xc3\xa9xy", 4);
		o += 4;
	}
	snprintf(longdoc + o, sizeof(longdoc) - o, "\"}");
	CHECK("profile err long value is cut",
	      fails(longdoc, "p.json:1:10: mode: expected", "...\""));
}

/* A document head, n comma-separated items "<pre><index><post>", tail. Returns malloc'ed
 * text. */
static char *many(const char *head, const char *pre, const char *post, const char *tail, size_t n)
{
	size_t cap = strlen(head) + strlen(tail) + n * (strlen(pre) + strlen(post) + 32) + 1, o = 0;
	char *d = malloc(cap);
	o += (size_t)snprintf(d + o, cap - o, "%s", head);
	for (size_t i = 0; i < n; i++) {
		if (i)
			d[o++] = ',';
		o += (size_t)snprintf(d + o, cap - o, "%s%zu%s", pre, i, post);
	}
	snprintf(d + o, cap - o, "%s", tail);
	return d;
}

/* The error paths that had no test: caps on list sizes and lengths, and the wrong type for a
 * command list. */
static void test_errors_more(void)
{
	char *d = many("{\"filesystem\": {\"read\": [", "\"p", "\"", "]}}", 1025);
	CHECK("profile err too many paths",
	      fails(d, "p.json:1:25: filesystem.read: expected at most 1024 entries, got 1025",
	            NULL));
	free(d);
	d = many("{\"filesystem\": {\"read\": [", "\"p", "\"", "]}}", 1024);
	struct profile p;
	CHECK("profile 1024 paths are fine", parses(d, &p) && p.n_read == 1024);
	profile_free(&p);
	free(d);
	d = many("{\"commands\": {\"deny\": [", "\"c", "\"", "]}}", 1025);
	CHECK("profile err too many command rules",
	      fails(d, "p.json:1:23: commands.deny: expected at most 1024 entries, got 1025",
	            NULL));
	free(d);
	d = many("{\"env\": {\"set\": {", "\"V", "\": \"x\"", "}}}", 1025);
	CHECK("profile err too many variables",
	      fails(d, "p.json:1:17: env.set: expected at most 1024 variables, got 1025", NULL));
	free(d);
	d = many("{\"redact\": {\"strings\": [", "\"secret", "\"", "]}}", 1025);
	CHECK("profile err too many redact strings",
	      fails(d, "p.json:1:24: redact.strings: expected at most 1024 entries, got 1025",
	            NULL));
	free(d);

	char *longp = malloc(4096 + 64);
	int o = snprintf(longp, 64, "{\"filesystem\": {\"write\": [\"");
	memset(longp + o, 'a', 4096);
	snprintf(longp + o + 4096, 64, "\"]}}");
	CHECK("profile err path of 4096 bytes",
	      fails(longp, "p.json:1:27: filesystem.write[0]: expected a path shorter than 4096 "
	                   "bytes, got \"aaa",
	            "...\""));
	snprintf(longp + o + 4095, 64, "\"]}}");
	CHECK("profile path of 4095 bytes is fine", parses(longp, &p) && p.n_write == 1);
	profile_free(&p);
	free(longp);

	CHECK("profile err commands not an array",
	      fails("{\"commands\": {\"allow\": \"sh\"}}",
	            "p.json:1:24: commands.allow: expected an array of commands, got \"sh\"", NULL));
	CHECK("profile err commands section not an object",
	      fails("{\"commands\": [\"sh\"]}",
	            "p.json:1:14: commands: expected an object, got an array", NULL));
	CHECK("profile err unknown key in commands",
	      fails("{\"commands\": {\"alow\": []}}",
	            "p.json:1:15: unknown key \"alow\" in \"commands\" (did you mean \"allow\"?)",
	            NULL));
	/* jansson refuses \u0000 before the path checks see it: a positioned syntax error */
	CHECK("profile err NUL in a path",
	      fails("{\"filesystem\": {\n  \"read\": [\"a\\u0000b\"]}}", "p.json:2:", "invalid JSON"));
	CHECK("profile err protected not an array",
	      fails("{\"filesystem\": {\"protected\": \".git\"}}",
	            "p.json:1:30: filesystem.protected: expected an array of workspace-relative "
	            "paths",
	            NULL));
}

static void test_redact_section(void)
{
	struct profile p;
	CHECK("profile redact section parses",
	      parses("{\"redact\": {\"strings\": [\"hunter2-pass\", \"corp.example\", "
	             "\"hunter2-pass\"], \"mode\": \"flag\"}}",
	             &p) &&
	          p.n_redact == 2 && !strcmp(p.redact_strings[0], "hunter2-pass") &&
	          !strcmp(p.redact_strings[1], "corp.example") && p.redact_mode_set &&
	          p.redact_mode == CORRAL_REDACT_FLAG);
	profile_free(&p);
	CHECK("profile redact modes",
	      parses("{\"redact\": {\"mode\": \"off\"}}", &p) && p.redact_mode_set &&
	          p.redact_mode == CORRAL_REDACT_OFF && !p.n_redact);
	profile_free(&p);
	CHECK("profile redact mode redact",
	      parses("{\"redact\": {\"mode\": \"redact\"}}", &p) &&
	          p.redact_mode == CORRAL_REDACT_ON);
	profile_free(&p);
	CHECK("profile redact empty", parses("{\"redact\": {\"strings\": []}}", &p) &&
	                                  !p.redact_mode_set && !p.n_redact);
	profile_free(&p);
	char four[4200];
	int o = snprintf(four, 64, "{\"redact\": {\"strings\": [\"abcd\", \"");
	memset(four + o, 'z', 4096);
	snprintf(four + o + 4096, 64, "\"]}}");
	CHECK("profile redact 4 and 4096 bytes", parses(four, &p) && p.n_redact == 2 &&
	                                            strlen(p.redact_strings[1]) == 4096);
	profile_free(&p);
	snprintf(four + o + 4097, 64, "\"]}}");
	four[o + 4096] = 'z';
	CHECK("profile err redact string of 4097 bytes",
	      fails(four,
	            "p.json:1:33: redact.strings[1]: expected a string of 4 to 4096 bytes to "
	            "redact, got one of 4097 bytes",
	            NULL));
	/* a short secret is not echoed in the message */
	CHECK("profile err redact string too short",
	      fails("{\"redact\": {\"strings\": [\"ab1\"]}}",
	            "p.json:1:25: redact.strings[0]: expected a string of 4 to 4096 bytes to "
	            "redact, got one of 3 bytes",
	            NULL) &&
	          fails("{\"redact\": {\"strings\": [\"ab1\"]}}", "p.json", "bytes") &&
	          !fails("{\"redact\": {\"strings\": [\"ab1\"]}}", "p.json", "ab1"));
	CHECK("profile err redact not an object",
	      fails("{\"redact\": [\"secret\"]}",
	            "p.json:1:12: redact: expected an object, got an array", NULL));
	CHECK("profile err redact strings not an array",
	      fails("{\"redact\": {\"strings\": \"secret\"}}",
	            "p.json:1:24: redact.strings: expected an array of strings, got", NULL));
	CHECK("profile err redact string not a string",
	      fails("{\"redact\": {\"strings\": [\"secret\", 7]}}",
	            "p.json:1:35: redact.strings[1]: expected a string, got 7", NULL));
	CHECK("profile err redact bad mode",
	      fails("{\"redact\": {\"mode\": \"flagg\"}}",
	            "p.json:1:21: redact.mode: expected one of \"redact\", \"flag\", \"off\", got "
	            "\"flagg\" (did you mean \"flag\"?)",
	            NULL));
	CHECK("profile err redact unknown key",
	      fails("{\"redact\": {\"string\": []}}",
	            "p.json:1:13: unknown key \"string\" in \"redact\" (did you mean "
	            "\"strings\"?); expected one of strings, mode",
	            NULL));
}

/* Each filesystem entry keeps where it stands in the file, through duplicates and the
 * write-wins rule. */
static void test_positions(void)
{
	const char *doc = "{\"filesystem\": {\n"
	                  "  \"write\": [\"out\"],\n"
	                  "  \"read\": [\"a\", \"a\",\n"
	                  "     \"out\", \"b\"],\n"
	                  "  \"deny\": [\n"
	                  "\t\"s\\u00e9c\"],\n"
	                  "  \"prot\\u0065cted\": [\".git\", \".x\"]}}";
	struct profile p;
	CHECK("profile positions: parses", parses(doc, &p));
	CHECK("profile positions: read (duplicate and write-wins entries dropped)",
	      p.n_read == 2 && p.read_pos[0].line == 3 && p.read_pos[0].col == 12 &&
	          p.read_pos[0].index == 0 && p.read_pos[1].line == 4 &&
	          p.read_pos[1].col == 13 && p.read_pos[1].index == 3);
	CHECK("profile positions: write", p.n_write == 1 && p.write_pos[0].line == 2 &&
	                                      p.write_pos[0].col == 13);
	CHECK("profile positions: deny", p.n_deny == 1 && p.deny_pos[0].line == 6 &&
	                                     p.deny_pos[0].col == 2);
	CHECK("profile positions: protected (escaped key)",
	      p.n_protected == 2 && p.protected_pos[1].line == 7 && p.protected_pos[1].col == 30 &&
	          p.protected_pos[1].index == 1);
	profile_free(&p);
	CHECK("profile positions: none without lists",
	      parses("{}", &p) && !p.read_pos && !p.protected_pos);
	profile_free(&p);
	CHECK("profile positions: builtins have none",
	      profile_builtin("default", &p, NULL) == 0 && p.n_protected && !p.protected_pos);
	profile_free(&p);
}

static bool has_str(char **v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i], s))
			return true;
	return false;
}

static bool apply_doc(corral_config *cfg, const char *doc)
{
	struct profile p;
	struct corral_error e = {0};
	bool ok = parses(doc, &p) && policy_apply_profile(cfg, &p, &e) == 0;
	if (e.message[0])
		printf("  apply: %s\n", e.message);
	profile_free(&p);
	return ok;
}

/* The merge of a profile into a configuration (policy_apply_profile), and options applied
 * after it, as the CLI applies them (the profile first, then every flag). */
static void test_apply(void)
{
	struct corral_error e = {0};
	corral_config *cfg = corral_config_new();
	/* deny_replace: the default deny globs and earlier ones go, the profile's stay */
	corral_config_env_deny(cfg, "OLD_*", &e);
	CHECK("merge deny_replace applies",
	      apply_doc(cfg, "{\"env\": {\"deny\": [\"NEW_*\"], \"deny_replace\": true}}") &&
	          cfg->env_deny_replaced && cfg->n_env_deny == 1 &&
	          !strcmp(cfg->env_deny[0], "NEW_*"));
	CHECK("merge deny_replace drops the defaults and earlier globs",
	      !policy_env_denied_by(cfg, "GITHUB_TOKEN") && !policy_env_denied_by(cfg, "OLD_X") &&
	          policy_env_denied_by(cfg, "NEW_X"));
	corral_config_free(cfg);
	cfg = corral_config_new();
	CHECK("merge env.deny without replace adds to the defaults",
	      apply_doc(cfg, "{\"env\": {\"deny\": [\"NEW_*\"]}}") && !cfg->env_deny_replaced &&
	          policy_env_denied_by(cfg, "GITHUB_TOKEN") && policy_env_denied_by(cfg, "NEW_X"));
	corral_config_free(cfg);

	/* env.set after a deny that matches it: the explicit setting still applies, the host's
	 * value of the same name is withheld */
	cfg = corral_config_new();
	setenv("CORRAL_UT_FOO", "host-value", 1);
	CHECK("merge env.set with a matching deny",
	      apply_doc(cfg, "{\"env\": {\"allow\": [\"CORRAL_UT_*\"], \"deny\": "
	                     "[\"CORRAL_UT_FOO\"], \"set\": {\"CORRAL_UT_FOO\": \"set-value\"}}}") &&
	          cfg->n_env == 1 && !strcmp(cfg->env[0].name, "CORRAL_UT_FOO") &&
	          !strcmp(cfg->env[0].value, "set-value") &&
	          policy_env_denied_by(cfg, "CORRAL_UT_FOO"));
	struct env_entry *pass = NULL, *withheld = NULL;
	size_t np = 0, nw = 0;
	policy_env(cfg, &pass, &np, &withheld, &nw);
	bool passed = false, held = false;
	for (size_t i = 0; i < np; i++)
		passed |= !strcmp(pass[i].name, "CORRAL_UT_FOO");
	for (size_t i = 0; i < nw; i++)
		held |= !strcmp(withheld[i].name, "CORRAL_UT_FOO") &&
		        !strcmp(withheld[i].value, "host-value");
	env_entries_free_list(pass, np);
	env_entries_free_list(withheld, nw);
	unsetenv("CORRAL_UT_FOO");
	CHECK("merge env.set: the host value is withheld, not passed", !passed && held);
	corral_config_free(cfg);

	/* an empty commands.allow allows nothing; deny wins over allow */
	cfg = corral_config_new();
	struct exec_decision d;
	CHECK("merge empty commands.allow",
	      apply_doc(cfg, "{\"commands\": {\"allow\": []}}") && cfg->cmd_allow_set &&
	          cfg->n_cmd_allow == 0 && policy_decide_exec(cfg, "sh", &d) == 0 && !d.allowed &&
	          !strcmp(d.list, "commands.allow (not listed)"));
	corral_config_free(cfg);
	cfg = corral_config_new();
	CHECK("merge command on both lists is denied",
	      apply_doc(cfg, "{\"commands\": {\"allow\": [\"sh\"], \"deny\": [{\"match\": "
	                     "\"sh\", \"reason\": \"r\"}]}}") &&
	          policy_decide_exec(cfg, "sh", &d) == 0 && !d.allowed &&
	          !strcmp(d.list, "commands.deny") && !strcmp(d.rule->reason, "r"));
	corral_config_free(cfg);
	cfg = corral_config_new();
	CHECK("merge without commands.allow allows",
	      apply_doc(cfg, "{\"commands\": {\"deny\": [\"curl\"]}}") && !cfg->cmd_allow_set &&
	          policy_decide_exec(cfg, "sh", &d) == 0 && d.allowed);
	corral_config_free(cfg);

	/* the profile first, then flags: the flags win for scalars, lists add */
	cfg = corral_config_new();
	uint64_t def_kill = cfg->kill_after_ms;
	CHECK("merge profile values apply",
	      apply_doc(cfg, "{\"mode\": \"auto\", \"network\": \"host\", \"limits\": "
	                     "{\"memory\": \"1G\", \"timeout\": \"5s\", \"output\": \"64k\"}, "
	                     "\"filesystem\": {\"read\": [\"a\"], \"workspace\": \"ro\", "
	                     "\"protected\": [\".x\"]}, "
	                     "\"redact\": {\"strings\": [\"s3cret-1\"], \"mode\": \"flag\"}}") &&
	          cfg->mode == CORRAL_MODE_AUTO && cfg->net == CORRAL_NET_HOST &&
	          cfg->limits[CORRAL_LIMIT_MEMORY] == 1ULL << 30 && cfg->timeout_ms == 5000 &&
	          cfg->kill_after_ms == def_kill && cfg->output_cap == 65536 &&
	          cfg->workspace_ro && cfg->n_read == 1 && cfg->protected_set &&
	          cfg->n_protected == 1 && cfg->redact_mode == CORRAL_REDACT_FLAG &&
	          cfg->n_redact_strings == 1 && !strcmp(cfg->redact_strings[0], "s3cret-1"));
	corral_config_set_limit(cfg, CORRAL_LIMIT_MEMORY, 2ULL << 30, &e);
	corral_config_set_net(cfg, CORRAL_NET_NONE, &e);
	corral_config_set_mode(cfg, CORRAL_MODE_REQUIRED, &e);
	corral_config_set_timeout_ms(cfg, 7000, cfg->kill_after_ms, &e);
	corral_config_set_redaction(cfg, CORRAL_REDACT_OFF, &e);
	corral_config_set_workspace_readonly(cfg, 0, &e);
	corral_config_add_path(cfg, CORRAL_PATH_READ, "b", &e);
	corral_config_add_redaction(cfg, "other-secret", &e);
	CHECK("merge later flags override the profile",
	      cfg->limits[CORRAL_LIMIT_MEMORY] == 2ULL << 30 && cfg->net == CORRAL_NET_NONE &&
	          cfg->mode == CORRAL_MODE_REQUIRED && cfg->timeout_ms == 7000 &&
	          cfg->redact_mode == CORRAL_REDACT_OFF && !cfg->workspace_ro);
	CHECK("merge later flags add to the profile's lists",
	      cfg->n_read == 2 && has_str(cfg->fs_read, cfg->n_read, "a") &&
	          has_str(cfg->fs_read, cfg->n_read, "b") && cfg->n_redact_strings == 2);
	/* a second profile: lists add, its protected list replaces, kill_after alone keeps the
	 * timeout */
	CHECK("merge a second profile",
	      apply_doc(cfg, "{\"limits\": {\"kill_after\": 1}, \"filesystem\": {\"read\": "
	                     "[\"c\"], \"protected\": []}}") &&
	          cfg->timeout_ms == 7000 && cfg->kill_after_ms == 1000 && cfg->n_read == 3 &&
	          cfg->protected_set && cfg->n_protected == 0);
	corral_config_free(cfg);

	/* a builtin: the default protected list and deny globs, its timeout */
	cfg = corral_config_new();
	CHECK("merge builtin strict",
	      corral_config_load_profile(cfg, "strict", &e) == 0 && cfg->etc_minimal &&
	          cfg->timeout_ms == 30000 && cfg->limits[CORRAL_LIMIT_PIDS] == 128 &&
	          cfg->protected_set && cfg->n_protected > 10 && cfg->env_deny_replaced &&
	          !strcmp(cfg->profile_name, "strict"));
	corral_config_free(cfg);

	/* a profile that a setter refuses (built by hand: the parser rejects it first) */
	cfg = corral_config_new();
	char *bad[] = {"a/../b"};
	struct profile hand = {.protected_paths = bad, .n_protected = 1, .protected_set = true};
	e = (struct corral_error){0};
	CHECK("merge error from a setter is reported",
	      policy_apply_profile(cfg, &hand, &e) == CORRAL_EINVAL &&
	          strstr(e.message, "protected path 'a/../b'"));
	corral_config_free(cfg);
}

static bool write_file(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return false;
	bool ok = fwrite(data, 1, len, f) == len;
	return fclose(f) == 0 && ok;
}

static void test_files(void)
{
	struct profile p;
	struct corral_error e = {0};
	char dir[] = "/tmp/corral-profile-XXXXXX";
	if (!mkdtemp(dir)) {
		CHECK("profile files: mkdtemp", 0);
		return;
	}
	char path[200];
	snprintf(path, sizeof(path), "%s/missing.json", dir);
	memset(&p, 0xAA, sizeof(p));
	CHECK("profile file ENOENT",
	      profile_load_file(path, &p, &e) == CORRAL_EINVAL && e.sys_errno == ENOENT &&
	          all_zero(&p) &&
	          strstr(e.message, "missing.json: no such file; give a builtin name "
	                            "(default, readonly, strict, network) or a path "
	                            "to a JSON profile"));
	snprintf(path, sizeof(path), "%s/ok.json", dir);
	const char *doc = "{\n  \"network\": \"host\",\n  \"mode\": 3\n}\n";
	write_file(path, doc, strlen(doc));
	char prefix[300];
	snprintf(prefix, sizeof(prefix), "%s:3:11: mode: expected one of", path);
	CHECK("profile file error names the file",
	      profile_load_file(path, &p, &e) == CORRAL_EINVAL &&
	          !strncmp(e.message, prefix, strlen(prefix)));
	doc = "{\"network\": \"host\"}";
	write_file(path, doc, strlen(doc));
	CHECK("profile file loads", profile_load_file(path, &p, &e) == 0 && !strcmp(p.name, path) &&
	                                p.net == CORRAL_NET_HOST);
	profile_free(&p);

	size_t n = (1u << 20) + 1;
	char *big = malloc(n);
	memset(big, ' ', n);
	big[0] = '{';
	big[n - 1] = '}';
	snprintf(path, sizeof(path), "%s/big.json", dir);
	write_file(path, big, n);
	CHECK("profile file over 1 MiB", profile_load_file(path, &p, &e) == CORRAL_EINVAL &&
	                                     strstr(e.message, "larger than the 1 MiB limit"));
	big[1] = '{'; /* exactly 1 MiB: accepted */
	write_file(path, big + 1, n - 1);
	CHECK("profile file of exactly 1 MiB", profile_load_file(path, &p, &e) == 0);
	profile_free(&p);
	unlink(path);
	free(big);
	CHECK("profile file is a directory",
	      profile_load_file(dir, &p, &e) < 0 && strstr(e.message, dir) && all_zero(&p));
	CHECK("profile file NULL path", profile_load_file(NULL, &p, &e) == CORRAL_EINVAL);
	snprintf(path, sizeof(path), "%s/ok.json", dir);
	unlink(path);
	rmdir(dir);

	/* every example in docs/examples parses (tests/run.sh runs us from the repo root) */
	const char *ex = getenv("CORRAL_EXAMPLES_DIR");
	if (!ex)
		ex = "docs/examples";
	DIR *d = opendir(ex);
	CHECK("profile examples directory exists", d != NULL);
	int count = 0;
	for (struct dirent *de; d && (de = readdir(d));) {
		size_t l = strlen(de->d_name);
		if (l < 6 || strcmp(de->d_name + l - 5, ".json"))
			continue;
		char name[300], file[600];
		snprintf(file, sizeof(file), "%s/%s", ex, de->d_name);
		snprintf(name, sizeof(name), "profile example %s parses", de->d_name);
		int rc = profile_load_file(file, &p, &e);
		if (rc)
			printf("  %s\n", e.message);
		CHECK(name, rc == 0 && p.description);
		profile_free(&p);
		count++;
	}
	if (d)
		closedir(d);
	CHECK("profile examples: at least three", count >= 3);
}

static void test_globs(void)
{
	CHECK("glob literal",
	      policy_glob_match("LANG", "LANG") && !policy_glob_match("LANG", "LANGX"));
	CHECK("glob is case-sensitive", !policy_glob_match("lang", "LANG"));
	CHECK("glob star prefix", policy_glob_match("*_TOKEN", "GITHUB_TOKEN") &&
	                              !policy_glob_match("*_TOKEN", "GITHUB_TOKENS") &&
	                              policy_glob_match("*_TOKEN", "_TOKEN"));
	CHECK("glob star suffix", policy_glob_match("LC_*", "LC_ALL") &&
	                              policy_glob_match("LC_*", "LC_") &&
	                              !policy_glob_match("LC_*", "LANG"));
	CHECK("glob star infix", policy_glob_match("*SECRET*", "MY_SECRET_VALUE") &&
	                             policy_glob_match("*SECRET*", "SECRET") &&
	                             !policy_glob_match("*SECRET*", "SECRE"));
	CHECK("glob question mark", policy_glob_match("A?C", "ABC") &&
	                                !policy_glob_match("A?C", "AC") &&
	                                !policy_glob_match("A?C", "ABBC"));
	CHECK("glob star alone", policy_glob_match("*", "") && policy_glob_match("*", "X") &&
	                             policy_glob_match("**", "XY"));
	CHECK("glob empty", policy_glob_match("", "") && !policy_glob_match("", "A") &&
	                        !policy_glob_match("A", ""));
	CHECK("glob backtracking",
	      policy_glob_match("*A*B", "AAB") && policy_glob_match("*AB", "AAB") &&
	          policy_glob_match("A*B*C", "AXBXBXC") && !policy_glob_match("A*B*C", "AXBXBX"));
	CHECK("glob NULL", !policy_glob_match(NULL, "A") && !policy_glob_match("A", NULL));

	size_t n = 200000;
	char *name = malloc(n + 1);
	memset(name, 'a', n);
	name[n] = '\0';
	clock_t t0 = clock();
	bool m1 = policy_glob_match("*a*a*a*a*a*a*b", name);
	bool m2 = policy_glob_match("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a?b", name);
	name[n - 1] = 'b';
	bool m3 = policy_glob_match("*a*a*a*a*a*a*b", name);
	double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
	free(name);
	CHECK("glob pathological pattern is fast", !m1 && !m2 && m3 && secs < 1.0);
}

/* Every truncation and many single-byte corruptions of a valid document: no crash, and either
 * a clean parse or an error with a position (ASan/UBSan runs make this meaningful). */
static void test_robust(void)
{
	size_t len = strlen(full_doc);
	char *buf = malloc(len + 1);
	bool ok = true;
	struct profile p;
	struct corral_error e;
	for (size_t cut = 0; cut <= len; cut++) {
		memcpy(buf, full_doc, cut);
		int rc = profile_parse(buf, cut, "t", &p, &e);
		ok &= rc == 0 || (rc == CORRAL_EINVAL && !strncmp(e.message, "t:", 2));
		profile_free(&p);
	}
	static const char bytes[] = "\"\\{}[],: \n\x01\x80\xff"
	                            "0aZ*?/.~-";
	unsigned seed = 12345;
	for (int round = 0; round < 20000; round++) {
		memcpy(buf, full_doc, len);
		for (int k = 0; k < 1 + round % 3; k++) {
			seed = seed * 1103515245 + 12345;
			size_t at = (seed >> 8) % len;
			seed = seed * 1103515245 + 12345;
			buf[at] = bytes[(seed >> 8) % (sizeof(bytes) - 1)];
		}
		int rc = profile_parse(buf, len, "t", &p, &e);
		ok &= rc == 0 || (rc == CORRAL_EINVAL && !strncmp(e.message, "t:", 2));
		profile_free(&p);
	}
	free(buf);
	CHECK("profile parser survives truncations and corruptions", ok);
}

void test_profile(void)
{
	test_builtins();
	test_full();
	test_errors();
	test_errors_more();
	test_redact_section();
	test_positions();
	test_apply();
	test_files();
	test_globs();
	test_robust();
}
