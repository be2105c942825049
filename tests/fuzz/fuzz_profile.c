/* libFuzzer target for the profile parser and merge (src/profile.c, policy_apply_profile in
 * src/policy.c): any bytes must give either a profile or an EINVAL/ENOMEM error whose message
 * starts with the origin and a position. A profile that parses is then merged into a fresh
 * configuration with a scratch workspace (made once under $TMPDIR, removed at exit; $HOME
 * points into it, so "~" paths stay there too), and the plan is built as `corral policy
 * explain` builds it (a dry run: nothing is made on the host), and policy queries are asked.
 *
 * Invariants: no crash, leak or UB; a failed parse leaves the profile zeroed; every position
 * kept for a filesystem entry is inside the text; a profile the parser accepts is accepted by
 * the configuration setters too (the parser's checks are the setters', so that every error a
 * user sees has a position); the plan builds and is valid JSON with its sections; queries
 * answer any entry; a path in filesystem.deny is never readable or writable (in mode none,
 * which enforces no path rule, the answer is "allowed" by the rule "mode none" and nothing
 * else), and a command in commands.deny is never executable (deny wins); under an allow-list
 * a command not listed is never executable.
 *
 *   tests/fuzz/run.sh 30 profile builds and runs it; by hand (after building
 *   build-fuzz/libcorral.a, see fuzz_parse.c):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc \
 *     tests/fuzz/fuzz_profile.c build-fuzz/libcorral.a \
 *     $(pkg-config --libs libseccomp jansson sqlite3 nettle) -o build-fuzz/fuzz_profile
 *   build-fuzz/fuzz_profile -dict=tests/fuzz/profile.dict /tmp/p tests/fuzz/corpus/profile
 */
#include "internal.h"
#include "policy.h"

#include "fuzz_util.h"

#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char ws[PATH_MAX];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void cleanup(void)
{
	if (ws[0])
		nftw(ws, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void ws_path(char *out, const char *rel)
{
	snprintf(out, PATH_MAX, "%s/%s", ws, rel);
}

/* A workspace with something for each rule to meet: existing and missing paths, a git
 * directory, a protected file, a symlink, and a home directory inside. */
static void setup(void)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(ws, sizeof(ws), "%s/corral-fuzz-profile-XXXXXX", tmp);
	if (!mkdtemp(ws))
		abort();
	atexit(cleanup);
	static const char *const dirs[] = {".git", ".git/hooks", "src", "out", "secrets", "home",
	                                   "home/.cache"};
	static const char *const files[] = {".git/config", "src/main.c", ".env", ".bashrc"};
	char p[PATH_MAX];
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		ws_path(p, dirs[i]);
		if (mkdir(p, 0755) < 0)
			abort();
	}
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		ws_path(p, files[i]);
		int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			abort();
		close(fd);
	}
	ws_path(p, "etc-link");
	if (symlink("/etc", p) < 0)
		abort();
	ws_path(p, "home");
	setenv("HOME", p, 1);
}

/* The rule of the last answer ask() got ("" after EINVAL). */
static char last_rule[256];

/* Ask one question; the answer is 1 (allowed), 0 (denied) or EINVAL for a bad target. */
static int ask(const corral_config *cfg, const char *op, const char *target)
{
	last_rule[0] = '\0';
	char *doc = NULL;
	struct corral_error err;
	memset(&err, 0, sizeof(err));
	int r = corral_policy_query(cfg, op, target, &doc, &err);
	if (r == CORRAL_EINVAL) {
		FZ_CHECK(!doc);
		return r;
	}
	FZ_CHECK((r == 0 || r == 1) && doc);
	json_t *o = json_loads(doc, 0, NULL);
	FZ_CHECK(o && json_is_boolean(json_object_get(o, "allowed")) &&
	         json_is_true(json_object_get(o, "allowed")) == (r == 1) &&
	         json_is_string(json_object_get(o, "rule")));
	snprintf(last_rule, sizeof(last_rule), "%s",
	         json_string_value(json_object_get(o, "rule")));
	json_decref(o);
	free(doc);
	return r;
}

static void check_positions(const struct profile *p, size_t len)
{
	const struct profile_pos *pos[] = {p->read_pos, p->write_pos, p->deny_pos,
	                                   p->protected_pos};
	const size_t n[] = {p->n_read, p->n_write, p->n_deny, p->n_protected};
	for (size_t l = 0; l < 4; l++) {
		FZ_CHECK(!n[l] || pos[l]);
		for (size_t i = 0; i < n[l]; i++) {
			FZ_CHECK(pos[l][i].line >= 1 && pos[l][i].col >= 1);
			FZ_CHECK(pos[l][i].line <= len && pos[l][i].col <= len);
			FZ_CHECK(i == 0 || pos[l][i].index > pos[l][i - 1].index);
		}
	}
}

static void merge_and_plan(const struct profile *p)
{
	struct corral_error err;
	memset(&err, 0, sizeof(err));
	corral_config *cfg = corral_config_new();
	if (!cfg)
		abort();
	if (corral_config_set_workspace(cfg, ws, &err) < 0)
		abort();
	int r = policy_apply_profile(cfg, p, &err);
	if (r == CORRAL_ENOMEM) {
		corral_config_free(cfg);
		return;
	}
	FZ_CHECK(r == 0); /* the parser accepted it: so must the setters */

	/* the plan, as explain builds it; the profile's mode may ask the host for layers */
	char *doc = NULL;
	r = corral_explain(cfg, &doc, &err);
	FZ_CHECK(r == 0 && doc);
	json_t *o = json_loads(doc, 0, NULL);
	FZ_CHECK(o && json_is_string(json_object_get(o, "profile")) &&
	         json_is_object(json_object_get(o, "limits")) &&
	         (json_object_get(o, "error") || json_is_array(json_object_get(o, "mounts"))));
	json_decref(o);
	free(doc);

	/* deny wins: a denied path is never readable or writable. Mode none enforces no path
	 * rule, and the answer says so: allowed by the rule "mode none" and nothing else. */
	bool none = cfg->mode == CORRAL_MODE_NONE;
	for (size_t i = 0; i < p->n_deny && i < 8; i++) {
		static const char *const ops[] = {"read", "write"};
		for (size_t k = 0; k < 2; k++) {
			int r = ask(cfg, ops[k], p->fs_deny[i]);
			if (none)
				FZ_CHECK(r == CORRAL_EINVAL || (r == 1 && !strcmp(last_rule, "mode none")));
			else
				FZ_CHECK(r != 1);
		}
	}
	for (size_t i = 0; i < p->n_read && i < 4; i++)
		ask(cfg, "read", p->fs_read[i]);
	for (size_t i = 0; i < p->n_write && i < 4; i++)
		ask(cfg, "write", p->fs_write[i]);
	for (size_t i = 0; i < p->n_protected && i < 4; i++)
		ask(cfg, "write", p->protected_paths[i]);
	/* a denied command is never executable; under an allow-list, neither is one not listed */
	for (size_t i = 0; i < p->n_cmd_deny && i < 8; i++)
		FZ_CHECK(ask(cfg, "exec", p->cmd_deny[i].match) != 1);
	for (size_t i = 0; i < p->n_cmd_allow && i < 4; i++)
		ask(cfg, "exec", p->cmd_allow[i].match);
	char sh[PATH_MAX];
	if (p->cmd_allow_set && policy_which(cfg, "sh", sandbox_path_env(cfg), sh) == 0) {
		/* sh as the sandbox finds it, by its name, path, real path and their names */
		char *real = realpath(sh, NULL);
		const char *names[] = {"sh", sh, strrchr(sh, '/') + 1, real ? real : sh,
		                       real ? strrchr(real, '/') + 1 : sh};
		bool listed = false;
		for (size_t i = 0; i < p->n_cmd_allow; i++) {
			for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
				listed |= !strcmp(p->cmd_allow[i].match, names[k]);
			/* a path entry names the same file however it is spelt ("/bin/sh" is
			 * "//bin/sh", found through a PATH entry "//bin") */
			if (real && strchr(p->cmd_allow[i].match, '/')) {
				char *r2 = realpath(p->cmd_allow[i].match, NULL);
				listed |= r2 && !strcmp(r2, real);
				free(r2);
			}
		}
		free(real);
		if (!listed)
			FZ_CHECK(ask(cfg, "exec", "sh") != 1);
	}
	ask(cfg, "read", "/etc/passwd");
	ask(cfg, "write", ".git/hooks/pre-commit");
	ask(cfg, "connect", "127.0.0.1:80");
	corral_config_free(cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!ws[0])
		setup();
	struct profile p;
	struct corral_error err;
	memset(&err, 0, sizeof(err));
	int rc = profile_parse((const char *)data, size, "f", &p, &err);
	if (rc == 0) {
		if (!p.name)
			__builtin_trap();
		check_positions(&p, size);
		merge_and_plan(&p);
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
