/* libFuzzer target for denial reports (violations_collect, src/violations.c): the error
 * output of a failed run is parsed for paths, hosts and tools next to error texts, and
 * matched against the policy (corral_policy_query, which looks at the file system: a scratch
 * workspace is made once under $TMPDIR and removed at exit).
 *
 * Input: byte 0 picks one of four configurations (bits 0-1) and the evidence (bit 2: the run
 * exited, else it was killed; bit 3: exit status 0; bit 4: a policy denial error with a
 * message from the input; bit 5: the isolation layers were applied, else none were; bit 6: a
 * setup failure with EAGAIN at clone); byte 1 the limit that fired; then stderr and stdout,
 * each with a 16-bit length.
 *
 * Invariants: no crash, leak or UB; corral_policy_query answers any target (the first line
 * of stderr) with 1, 0 and a JSON document, or EINVAL; at most 16 violations, one per (kind,
 * object), each of a documented kind with non-NULL strings; nothing inferred for mode none or a
 * clean exit; an inferred network denial only when the network is off; an inferred file or exec
 * denial only where corral_policy_query denies that operation on the reported object ("never claims
 * a denial the policy does not explain"), and only when a file-system layer was applied; an
 * inferred syscall entry names seccomp only for a call on the seccomp deny-list (or unshare,
 * for new user namespaces); an inferred limit never poses as the run's own limit that fired;
 * and the result still encodes to strict UTF-8 JSON.
 *
 *   tests/fuzz/run.sh builds it; by hand (after building build-fuzz/libcorral.a, see
 *   fuzz_parse.c):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc \
 *     tests/fuzz/fuzz_violations.c build-fuzz/libcorral.a \
 *     $(pkg-config --libs libseccomp jansson sqlite3 nettle) -o build-fuzz/fuzz_violations
 *   build-fuzz/fuzz_violations -dict=tests/fuzz/violations.dict tests/fuzz/corpus/violations
 */
#include "internal.h"

#include "fuzz_util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static char ws[PATH_MAX];
static corral_config *cfgs[4];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void cleanup(void)
{
	for (size_t i = 0; i < 4; i++)
		corral_config_free(cfgs[i]);
	if (ws[0])
		nftw(ws, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void must(int rc)
{
	if (rc < 0)
		abort();
}

static void touch(const char *rel)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", ws, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		abort();
	close(fd);
}

static void mkdir_ws(const char *rel)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", ws, rel);
	if (mkdir(p, 0755) < 0)
		abort();
}

static void setup(void)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(ws, sizeof(ws), "%s/corral-fuzz-XXXXXX", tmp);
	if (!mkdtemp(ws))
		abort();
	atexit(cleanup);
	mkdir_ws(".git");
	touch(".git/config");
	mkdir_ws("src");
	touch("src/main.c");
	mkdir_ws("secret");
	touch("secret/key");
	touch(".env");
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/etc-link", ws);
	if (symlink("/etc", p) < 0)
		abort();

	static const char *const argv[] = {"/bin/sh", "-c", "make", NULL};
	struct corral_error err;
	for (size_t i = 0; i < 4; i++) {
		corral_config *c = corral_config_new();
		if (!c)
			abort();
		must(corral_config_set_argv(c, argv, &err));
		must(corral_config_set_workspace(c, ws, &err));
		cfgs[i] = c;
	}
	/* 0: the default policy, plus a denied subtree, an extra read-only tree, a write tree */
	must(corral_config_add_path(cfgs[0], CORRAL_PATH_DENY, "secret", &err));
	must(corral_config_add_path(cfgs[0], CORRAL_PATH_DENY, "~/.ssh", &err));
	must(corral_config_add_path(cfgs[0], CORRAL_PATH_READ, "/opt", &err));
	must(corral_config_add_path(cfgs[0], CORRAL_PATH_WRITE, "/var/tmp", &err));
	/* 1: a command allow-list, a deny rule, read-only workspace */
	must(corral_config_allow_command(cfgs[1], "ls", NULL, &err));
	must(corral_config_allow_command(cfgs[1], "cat", "reading is fine", &err));
	must(corral_config_allow_command(cfgs[1], "/bin/sh", NULL, &err));
	must(corral_config_deny_command(cfgs[1], "curl", "no downloads", &err));
	must(corral_config_set_workspace_readonly(cfgs[1], 1, &err));
	/* 2: the strict builtin profile, host network, mode auto */
	must(corral_config_load_profile(cfgs[2], "strict", &err));
	must(corral_config_set_net(cfgs[2], CORRAL_NET_HOST, &err));
	must(corral_config_set_mode(cfgs[2], CORRAL_MODE_AUTO, &err));
	/* 3: mode none: evidence only, no inference */
	static const char *const prot[] = {"src", NULL};
	must(corral_config_set_protected(cfgs[3], prot, &err));
	must(corral_config_set_mode(cfgs[3], CORRAL_MODE_NONE, &err));
}

static char *fz_stream(struct fz *f, size_t *len)
{
	size_t n = (size_t)fz_u64(f, 2);
	if (n > f->n)
		n = f->n;
	char *s = malloc(n + 1);
	if (!s)
		abort();
	memcpy(s, f->p, n);
	s[n] = '\0';
	f->p += n;
	f->n -= n;
	*len = n;
	return s;
}

static const char *const kinds[] = {"fs_read", "fs_write", "exec",    "network",
                                    "syscall", "limit",    "timeout", "policy"};

/* corral_policy_query says op on target is denied */
static bool denied(const corral_config *cfg, const char *op, const char *target)
{
	char *doc = NULL;
	int r = corral_policy_query(cfg, op, target, &doc, NULL);
	free(doc);
	return r == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!ws[0])
		setup();
	struct fz f = {data, size};
	uint8_t b0 = fz_u8(&f);
	const corral_config *cfg = cfgs[b0 & 3];
	struct corral_result *res = result_new();
	if (!res)
		abort();
	res->exited = !!(b0 & 4);
	res->exit_code = res->exited ? ((b0 & 8) ? 0 : 1) : -1;
	res->signal = res->exited ? 0 : 9;
	res->limit = (enum corral_limit_hit)(fz_u8(&f) % 7);
	res->timed_out = res->limit == CORRAL_HIT_TIMEOUT;
	if (b0 & 16) {
		res->error.code = CORRAL_EDENIED;
		char *m = fz_bytes(&f, sizeof(res->error.message) - 1, NULL);
		memcpy(res->error.message, m, strlen(m) + 1);
		free(m);
	}
	if (b0 & 32) {
		static const char *const layers[][2] = {
		    {"rlimits", "core=1, nproc, nofile"}, {"userns", "uid and gid mapped 1:1"},
		    {"mountns", "tmpfs root"},            {"netns", "loopback only"},
		    {"landlock", "abi 7"},                {"seccomp", "deny-list, EPERM"},
		    {"caps", "all dropped"},              {"cgroup", "v1 pids"},
		};
		for (size_t i = 0; i < sizeof(layers) / sizeof(layers[0]); i++)
			FZ_CHECK(result_add_layer(res, layers[i][0], 1, layers[i][1]) == 0);
	}
	if ((b0 & 64) && !(b0 & 16)) {
		res->error.code = CORRAL_ESYS;
		res->error.sys_errno = EAGAIN;
		snprintf(res->error.step, sizeof(res->error.step), "clone");
		snprintf(res->error.message, sizeof(res->error.message), "clone: failed");
	}
	res->stderr_buf = fz_stream(&f, &res->stderr_len);
	res->stdout_buf = fz_stream(&f, &res->stdout_len);

	violations_collect(cfg, res);

	/* the policy answers any path, also one that is not UTF-8 (file names are bytes), and
	 * never with "out of memory" */
	char target[256];
	snprintf(target, sizeof(target), "%.*s", (int)strcspn(res->stderr_buf, "\n"),
	         res->stderr_buf);
	static const char *const ops[] = {"read", "write", "exec", "connect"};
	for (size_t i = 0; target[0] && i < 4; i++) {
		char *doc = NULL;
		int r = corral_policy_query(cfg, ops[i], target, &doc, NULL);
		FZ_CHECK(r == 0 || r == 1 || r == CORRAL_EINVAL);
		FZ_CHECK((r >= 0) == !!doc);
		if (doc) {
			json_t *j = json_loads(doc, 0, NULL);
			FZ_CHECK(json_is_object(j) && fz_utf8_valid(doc, strlen(doc), false));
			FZ_CHECK(json_is_true(json_object_get(j, "allowed")) == (r == 1));
			json_decref(j);
		}
		free(doc);
	}

	FZ_CHECK(res->n_violations <= 16);
	bool quiet = cfg->mode == CORRAL_MODE_NONE || (res->exited && res->exit_code == 0);
	for (size_t i = 0; i < res->n_violations; i++) {
		const struct corral_violation *v = &res->violations[i];
		FZ_CHECK(v->kind && v->object && v->rule && v->hint && *v->hint);
		FZ_CHECK(v->inferred == 0 || v->inferred == 1);
		bool known = false;
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
			known |= !strcmp(v->kind, kinds[k]);
		FZ_CHECK(known);
		for (size_t k = 0; k < i; k++)
			FZ_CHECK(strcmp(v->kind, res->violations[k].kind) ||
			         strcmp(v->object, res->violations[k].object));
		if (!v->inferred)
			continue;
		if (!strcmp(v->kind, "limit")) { /* a process budget: from the setup error too */
			FZ_CHECK(strcmp(v->rule, "pids"));
			continue;
		}
		FZ_CHECK(!quiet && (b0 & 32));
		if (!strcmp(v->kind, "network"))
			FZ_CHECK(cfg->net == CORRAL_NET_NONE);
		else if (!strcmp(v->kind, "syscall") && !strncmp(v->rule, "seccomp", 7)) {
			const char *names[128];
			size_t n = seccomp_denied_names(names, 128);
			bool listed = !strcmp(v->object, "unshare");
			for (size_t k = 0; k < n; k++)
				listed |= !strcmp(names[k], v->object);
			FZ_CHECK(listed);
		} else if (!strcmp(v->kind, "fs_read"))
			FZ_CHECK(denied(cfg, "read", v->object));
		else if (!strcmp(v->kind, "fs_write"))
			FZ_CHECK(denied(cfg, "write", v->object));
		else if (!strcmp(v->kind, "exec")) /* decided on the name when not absolute */
			FZ_CHECK(cfg->cmd_allow_set &&
			         denied(cfg, "exec",
			                v->object[0] == '/' || !strrchr(v->object, '/')
			                    ? v->object
			                    : strrchr(v->object, '/') + 1));
		else
			FZ_CHECK(!strcmp(v->kind, "syscall"));
	}

	char *out = NULL;
	FZ_CHECK(corral_result_to_json(res, &out, NULL) == 0);
	FZ_CHECK(fz_utf8_valid(out, strlen(out), false));
	json_t *o = json_loads(out, 0, NULL);
	FZ_CHECK(json_is_object(o) &&
	         json_array_size(json_object_get(o, "violations")) == res->n_violations);
	json_decref(o);
	free(out);
	corral_result_free(res);
	return 0;
}
