/* Policy, apply side: profiles into a configuration, path resolution, the environment rules,
 * the command preflight and the executable allow-list that Landlock enforces. */
#include "internal.h"

#include <elf.h>
#include <nettle/sha2.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

extern char **environ;

/* ---- list helpers ----------------------------------------------------------------------- */

static int strv_push(char ***v, size_t *n, const char *s)
{
	char *copy = strdup(s);
	if (!copy)
		return CORRAL_ENOMEM;
	char **grown = realloc(*v, (*n + 2) * sizeof(char *));
	if (!grown) {
		free(copy);
		return CORRAL_ENOMEM;
	}
	*v = grown;
	(*v)[(*n)++] = copy;
	(*v)[*n] = NULL;
	return 0;
}

static int rule_push(struct cmd_rule **v, size_t *n, const char *match, const char *reason)
{
	struct cmd_rule *grown = realloc(*v, (*n + 1) * sizeof(**v));
	if (!grown)
		return CORRAL_ENOMEM;
	*v = grown;
	grown[*n].match = strdup(match);
	grown[*n].reason = reason ? strdup(reason) : NULL;
	if (!grown[*n].match || (reason && !grown[*n].reason)) {
		free(grown[*n].match);
		free(grown[*n].reason);
		return CORRAL_ENOMEM;
	}
	(*n)++;
	return 0;
}

static int oom(struct corral_error *err)
{
	return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "policy", "policy: out of memory");
}

/* ---- setters ---------------------------------------------------------------------------- */

int corral_config_add_path(corral_config *cfg, enum corral_path_access access, const char *path,
                           struct corral_error *err)
{
	if (!path || !*path || strlen(path) >= PATH_MAX)
		return corral_set_error(err, CORRAL_EINVAL, 0, "policy",
		                        "policy: empty or overlong path; give an absolute path, ~/path "
		                        "or a path relative to the workspace");
	int r;
	switch (access) {
	case CORRAL_PATH_READ:
		r = strv_push(&cfg->fs_read, &cfg->n_read, path);
		break;
	case CORRAL_PATH_WRITE:
		r = strv_push(&cfg->fs_write, &cfg->n_write, path);
		break;
	case CORRAL_PATH_DENY:
		r = strv_push(&cfg->fs_deny, &cfg->n_deny, path);
		break;
	default:
		return corral_set_error(err, CORRAL_EINVAL, 0, "policy",
		                        "policy: unknown path access %d", (int)access);
	}
	return r < 0 ? oom(err) : 0;
}

int corral_config_set_protected(corral_config *cfg, const char *const *list,
                                struct corral_error *err)
{
	char **v = NULL;
	size_t n = 0;
	for (size_t i = 0; list && list[i]; i++) {
		const char *p = list[i];
		if (!*p || p[0] == '/' || strstr(p, "..")) {
			for (size_t k = 0; k < n; k++)
				free(v[k]);
			free(v);
			return corral_set_error(err, CORRAL_EINVAL, 0, "policy",
			                        "policy: protected path '%s' must be relative to the "
			                        "workspace, without '..'",
			                        p);
		}
		if (strv_push(&v, &n, p) < 0)
			return oom(err);
	}
	for (size_t k = 0; k < cfg->n_protected; k++)
		free(cfg->protected_paths[k]);
	free(cfg->protected_paths);
	cfg->protected_paths = v;
	cfg->n_protected = n;
	cfg->protected_set = true;
	return 0;
}

int corral_config_set_workspace_readonly(corral_config *cfg, int readonly,
                                         struct corral_error *err)
{
	(void)err;
	cfg->workspace_ro = readonly != 0;
	return 0;
}

static bool glob_valid(const char *g)
{
	if (!g || !*g || strlen(g) > 255)
		return false;
	for (const char *p = g; *p; p++)
		if (!(*p == '_' || *p == '*' || *p == '?' || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
			return false;
	return true;
}

int corral_config_env_allow(corral_config *cfg, const char *glob, struct corral_error *err)
{
	if (!glob_valid(glob))
		return corral_set_error(err, CORRAL_EINVAL, 0, "env",
		                        "env: '%s' is not a variable name or glob (letters, digits, _, "
		                        "* and ?)",
		                        glob ? glob : "");
	return strv_push(&cfg->env_allow, &cfg->n_env_allow, glob) < 0 ? oom(err) : 0;
}

int corral_config_env_deny(corral_config *cfg, const char *glob, struct corral_error *err)
{
	if (!glob_valid(glob))
		return corral_set_error(err, CORRAL_EINVAL, 0, "env",
		                        "env: '%s' is not a variable name or glob", glob ? glob : "");
	return strv_push(&cfg->env_deny, &cfg->n_env_deny, glob) < 0 ? oom(err) : 0;
}

static int check_match(const char *m, struct corral_error *err)
{
	if (!m || !*m || strchr(m, ' ') || strlen(m) >= PATH_MAX)
		return corral_set_error(err, CORRAL_EINVAL, 0, "commands",
		                        "commands: '%s' is not a command name or absolute path",
		                        m ? m : "");
	if (strchr(m, '/') && m[0] != '/')
		return corral_set_error(err, CORRAL_EINVAL, 0, "commands",
		                        "commands: '%s': give a bare name or an absolute path", m);
	return 0;
}

int corral_config_allow_command(corral_config *cfg, const char *match, const char *reason,
                                struct corral_error *err)
{
	int r = check_match(match, err);
	if (r < 0)
		return r;
	cfg->cmd_allow_set = true;
	return rule_push(&cfg->cmd_allow, &cfg->n_cmd_allow, match, reason) < 0 ? oom(err) : 0;
}

int corral_config_deny_command(corral_config *cfg, const char *match, const char *reason,
                               struct corral_error *err)
{
	int r = check_match(match, err);
	if (r < 0)
		return r;
	return rule_push(&cfg->cmd_deny, &cfg->n_cmd_deny, match, reason) < 0 ? oom(err) : 0;
}

/* ---- profiles --------------------------------------------------------------------------- */

int policy_apply_profile(corral_config *cfg, const struct profile *p, struct corral_error *err)
{
	int r = 0;
	free(cfg->profile_name);
	cfg->profile_name = strdup(p->name ? p->name : "custom");
	if (!cfg->profile_name)
		return oom(err);
	for (size_t i = 0; i < p->n_read && r == 0; i++)
		r = corral_config_add_path(cfg, CORRAL_PATH_READ, p->fs_read[i], err);
	for (size_t i = 0; i < p->n_write && r == 0; i++)
		r = corral_config_add_path(cfg, CORRAL_PATH_WRITE, p->fs_write[i], err);
	for (size_t i = 0; i < p->n_deny && r == 0; i++)
		r = corral_config_add_path(cfg, CORRAL_PATH_DENY, p->fs_deny[i], err);
	if (r == 0 && p->protected_set) {
		/* the profile's list is counted, not NULL-terminated */
		const char **list = calloc(p->n_protected + 1, sizeof(char *));
		if (!list)
			return oom(err);
		for (size_t i = 0; i < p->n_protected; i++)
			list[i] = p->protected_paths[i];
		r = corral_config_set_protected(cfg, list, err);
		free(list);
	}
	if (r < 0)
		return r;
	if (p->workspace_access)
		cfg->workspace_ro = p->workspace_access == 1;
	if (p->etc_minimal)
		cfg->etc_minimal = true;
	if (p->net_set)
		cfg->net = p->net;
	if (p->mode_set)
		cfg->mode = p->mode;
	for (int i = 0; i < CORRAL_LIMIT__COUNT && r == 0; i++)
		if (p->limit_set[i])
			r = corral_config_set_limit(cfg, (enum corral_limit)i, p->limits[i], err);
	if (r == 0 && (p->timeout_set || p->kill_after_set))
		r = corral_config_set_timeout_ms(cfg, p->timeout_set ? p->timeout_ms : cfg->timeout_ms,
		                                 p->kill_after_set ? p->kill_after_ms
		                                                   : cfg->kill_after_ms,
		                                 err);
	if (r == 0 && p->output_cap_set)
		r = corral_config_set_output_cap(cfg, (size_t)p->output_cap, err);
	if (r == 0 && p->env_deny_set) {
		cfg->env_deny_replaced = true;
		for (size_t i = 0; i < cfg->n_env_deny; i++)
			free(cfg->env_deny[i]);
		cfg->n_env_deny = 0;
	}
	for (size_t i = 0; i < p->n_env_allow && r == 0; i++)
		r = corral_config_env_allow(cfg, p->env_allow[i], err);
	for (size_t i = 0; i < p->n_env_deny && r == 0; i++)
		r = corral_config_env_deny(cfg, p->env_deny[i], err);
	for (size_t i = 0; i < p->n_env_set && r == 0; i++)
		r = corral_config_setenv(cfg, p->env_set[i].name, p->env_set[i].value, err);
	for (size_t i = 0; i < p->n_cmd_allow && r == 0; i++)
		r = corral_config_allow_command(cfg, p->cmd_allow[i].match, p->cmd_allow[i].reason,
		                                err);
	if (r == 0 && p->cmd_allow_set)
		cfg->cmd_allow_set = true;
	for (size_t i = 0; i < p->n_cmd_deny && r == 0; i++)
		r = corral_config_deny_command(cfg, p->cmd_deny[i].match, p->cmd_deny[i].reason, err);
	for (size_t i = 0; i < p->n_redact && r == 0; i++)
		r = corral_config_add_redaction(cfg, p->redact_strings[i], err);
	if (r == 0 && p->redact_mode_set)
		r = corral_config_set_redaction(cfg, p->redact_mode, err);
	return r;
}

int corral_config_load_profile(corral_config *cfg, const char *name_or_path,
                               struct corral_error *err)
{
	struct profile p;
	memset(&p, 0, sizeof(p));
	int r;
	bool builtin = false;
	for (size_t i = 0; profile_builtin_names[i]; i++)
		if (!strcmp(name_or_path, profile_builtin_names[i]))
			builtin = true;
	if (builtin)
		r = profile_builtin(name_or_path, &p, err);
	else
		r = profile_load_file(name_or_path, &p, err);
	if (r < 0)
		return r;
	r = policy_apply_profile(cfg, &p, err);
	profile_free(&p);
	return r;
}

/* ---- paths ------------------------------------------------------------------------------ */

/* Lexically normalise an absolute path: collapse //, ., and .. (never above /). */
static void normalize(char *path)
{
	char out[PATH_MAX];
	size_t o = 0;
	const char *p = path;
	while (*p) {
		while (*p == '/')
			p++;
		const char *end = p;
		while (*end && *end != '/')
			end++;
		size_t n = (size_t)(end - p);
		if (n == 0)
			break;
		if (n == 1 && p[0] == '.') {
		} else if (n == 2 && p[0] == '.' && p[1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
		} else if (o + n + 1 < sizeof(out)) {
			out[o++] = '/';
			memcpy(out + o, p, n);
			o += n;
		}
		p = end;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = 0;
	memcpy(path, out, o + 1);
}

/* Resolve as far as the path exists (symlinks followed), keep the rest lexically. */
static void resolve_existing(char *path)
{
	char *real = realpath(path, NULL);
	if (real) {
		snprintf(path, PATH_MAX, "%s", real);
		free(real);
		return;
	}
	char *slash = strrchr(path, '/');
	if (!slash || slash == path)
		return;
	char tail[PATH_MAX];
	snprintf(tail, sizeof(tail), "%s", slash);
	*slash = 0;
	resolve_existing(path);
	size_t n = strlen(path);
	if (n == 1)
		n = 0; /* "/" + "/tail" */
	snprintf(path + n, PATH_MAX - n, "%s", tail);
}

int policy_resolve_path(const struct corral_config *cfg, const char *raw, char *out,
                        struct corral_error *err)
{
	int r = policy_lexical_path(cfg, raw, out, err);
	if (r < 0)
		return r;
	resolve_existing(out);
	return 0;
}

int policy_lexical_path(const struct corral_config *cfg, const char *raw, char *out,
                        struct corral_error *err)
{
	const char *home = getenv("HOME");
	int n;
	if (raw[0] == '~' && (raw[1] == '/' || raw[1] == 0)) {
		if (!home || home[0] != '/')
			return corral_set_error(err, CORRAL_EINVAL, 0, "policy",
			                        "policy: '%s' uses ~ but $HOME is not set", raw);
		n = snprintf(out, PATH_MAX, "%s%s", home, raw + 1);
	} else if (raw[0] == '/') {
		n = snprintf(out, PATH_MAX, "%s", raw);
	} else {
		n = snprintf(out, PATH_MAX, "%s/%s", cfg->workspace ? cfg->workspace : "", raw);
	}
	if (n < 0 || n >= PATH_MAX)
		return corral_set_error(err, CORRAL_EINVAL, ENAMETOOLONG, "policy",
		                        "policy: path '%s' is too long", raw);
	normalize(out);
	return 0;
}

/* ---- environment ------------------------------------------------------------------------ */

const char *policy_env_denied_by(const struct corral_config *cfg, const char *name)
{
	if (!cfg->env_deny_replaced)
		for (size_t i = 0; policy_default_env_deny[i]; i++)
			if (policy_glob_match_nocase(policy_default_env_deny[i], name))
				return policy_default_env_deny[i];
	for (size_t i = 0; i < cfg->n_env_deny; i++)
		if (policy_glob_match_nocase(cfg->env_deny[i], name))
			return cfg->env_deny[i];
	return NULL;
}

static bool env_allowed(const struct corral_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->n_env_allow; i++)
		if (policy_glob_match(cfg->env_allow[i], name))
			return true;
	return false;
}

/* The length of an environ entry's name; 0 for an entry policy_env skips (no '=', an empty
 * name, or a name longer than 255 bytes). */
static size_t env_name_len(const char *e)
{
	const char *eq = strchr(e, '=');
	return !eq || eq == e || (size_t)(eq - e) > 255 ? 0 : (size_t)(eq - e);
}

/* policy_env's verdicts for the names in environ, kept for the last environment and globs
 * they were made for. A verdict depends on nothing but the name and the globs, and a server
 * asks about the same forty names against the same forty globs on every call (for the plan
 * key, and again for the redactor of the sandbox it hands out): 1,600 glob matches, a sixth
 * of a key. Checking that the names and the globs are the same is 50 string compares. */
#define ENV_DENIED 1
#define ENV_ALLOWED 2
static struct {
	pthread_mutex_t mu;
	char **names; /* environ's names in order; NULL for a skipped entry */
	unsigned char *verdict;
	size_t n;
	bool valid, deny_replaced;
	char **deny, **allow;
	size_t n_deny, n_allow;
} env_memo = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void strv_free_n(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

static void memo_clear(void)
{
	strv_free_n(env_memo.names, env_memo.n);
	strv_free_n(env_memo.deny, env_memo.n_deny);
	strv_free_n(env_memo.allow, env_memo.n_allow);
	free(env_memo.verdict);
	env_memo.names = env_memo.deny = env_memo.allow = NULL;
	env_memo.verdict = NULL;
	env_memo.n = env_memo.n_deny = env_memo.n_allow = 0;
	env_memo.valid = false;
}

static bool same_globs(char *const *a, size_t na, char *const *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (strcmp(a[i], b[i]))
			return false;
	return true;
}

/* Whether the memo was made for this environ and these globs. */
static bool memo_holds(const struct corral_config *cfg, size_t n_env)
{
	if (!env_memo.valid || env_memo.n != n_env ||
	    env_memo.deny_replaced != cfg->env_deny_replaced ||
	    !same_globs(env_memo.deny, env_memo.n_deny, cfg->env_deny, cfg->n_env_deny) ||
	    !same_globs(env_memo.allow, env_memo.n_allow, cfg->env_allow, cfg->n_env_allow))
		return false;
	for (size_t i = 0; i < n_env; i++) {
		size_t l = env_name_len(environ[i]);
		const char *m = env_memo.names[i];
		if (!l ? m != NULL : !m || strncmp(m, environ[i], l) || m[l])
			return false;
	}
	return true;
}

static char **strv_dup_n(char *const *v, size_t n, bool *ok)
{
	char **d = calloc(n + 1, sizeof(*d));
	*ok = *ok && d;
	for (size_t i = 0; d && i < n; i++)
		*ok = *ok && (d[i] = strdup(v[i]));
	return d;
}

/* Made anew for this environ and these globs (verdicts of 0 for skipped entries); false,
 * and no memo, out of memory. */
static bool memo_make(const struct corral_config *cfg, size_t n_env)
{
	memo_clear();
	bool ok = true;
	env_memo.names = calloc(n_env + 1, sizeof(char *));
	env_memo.verdict = calloc(n_env + 1, 1);
	env_memo.n = n_env;
	ok = env_memo.names && env_memo.verdict;
	env_memo.deny = strv_dup_n(cfg->env_deny, cfg->n_env_deny, &ok);
	env_memo.n_deny = cfg->n_env_deny;
	env_memo.allow = strv_dup_n(cfg->env_allow, cfg->n_env_allow, &ok);
	env_memo.n_allow = cfg->n_env_allow;
	env_memo.deny_replaced = cfg->env_deny_replaced;
	for (size_t i = 0; ok && i < n_env; i++) {
		size_t l = env_name_len(environ[i]);
		if (!l)
			continue;
		if (!(env_memo.names[i] = strndup(environ[i], l))) {
			ok = false;
			break;
		}
		bool denied = policy_env_denied_by(cfg, env_memo.names[i]) != NULL;
		bool allowed = env_allowed(cfg, env_memo.names[i]);
		env_memo.verdict[i] =
		    (unsigned char)((denied ? ENV_DENIED : 0) | (allowed ? ENV_ALLOWED : 0));
	}
	if (!ok)
		memo_clear();
	return env_memo.valid = ok;
}

static int env_add(struct env_entry **list, size_t *count, const char *name, size_t nl,
                   const char *value)
{
	struct env_entry *grown = realloc(*list, (*count + 1) * sizeof(**list));
	if (!grown)
		return CORRAL_ENOMEM;
	*list = grown;
	grown[*count].name = strndup(name, nl);
	grown[*count].value = strdup(value);
	if (!grown[*count].name || !grown[*count].value) {
		free(grown[*count].name);
		free(grown[*count].value);
		return CORRAL_ENOMEM;
	}
	(*count)++;
	return 0;
}

int policy_env(const struct corral_config *cfg, struct env_entry **pass, size_t *n_pass,
               struct env_entry **withheld, size_t *n_withheld)
{
	*pass = NULL;
	*withheld = NULL;
	*n_pass = *n_withheld = 0;
	size_t n_env = 0;
	while (environ && environ[n_env])
		n_env++;
	/* (busy, another thread's: decided here without it; never waited for, so that a child
	 * forked while another thread held it cannot hang on it) */
	bool memo = pthread_mutex_trylock(&env_memo.mu) == 0;
	bool use = memo && (memo_holds(cfg, n_env) || memo_make(cfg, n_env));
	int r = 0;
	for (size_t i = 0; r == 0 && i < n_env; i++) {
		const char *e = environ[i];
		size_t l = env_name_len(e);
		if (!l)
			continue;
		bool denied, allowed;
		if (use) {
			denied = env_memo.verdict[i] & ENV_DENIED;
			allowed = env_memo.verdict[i] & ENV_ALLOWED;
		} else {
			char name[256];
			memcpy(name, e, l);
			name[l] = 0;
			denied = policy_env_denied_by(cfg, name) != NULL;
			allowed = env_allowed(cfg, name);
		}
		/* Withheld values stay in the parent, for redaction of anything that leaks them
		 * through another route; a denied name is kept whether or not it was asked for. */
		const char *value = e + l + 1;
		if (denied ? !*value : !allowed)
			continue;
		r = denied ? env_add(withheld, n_withheld, e, l, value)
		           : env_add(pass, n_pass, e, l, value);
	}
	if (memo)
		pthread_mutex_unlock(&env_memo.mu);
	return r;
}

void env_entries_free_list(struct env_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(e[i].name);
		free(e[i].value);
	}
	free(e);
}

/* ---- commands --------------------------------------------------------------------------- */

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static bool is_exec_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
}

/* Find prog as the sandbox would: a path as given (relative to cwd), or through PATH. The
 * sandbox sees the system directories and the workspace at their host paths, so the host's
 * view of those paths is the sandbox's. */
int policy_which(const struct corral_config *cfg, const char *prog, const char *path_env,
                 char *out)
{
	if (strchr(prog, '/')) {
		if (prog[0] == '/')
			snprintf(out, PATH_MAX, "%s", prog);
		else
			snprintf(out, PATH_MAX, "%s/%s", cfg->cwd ? cfg->cwd : cfg->workspace, prog);
		normalize(out);
		return is_exec_file(out) ? 0 : -1;
	}
	const char *p = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
	while (*p) {
		const char *end = strchr(p, ':');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len && len + strlen(prog) + 2 < PATH_MAX) {
			snprintf(out, PATH_MAX, "%.*s/%s", (int)len, p, prog);
			if (is_exec_file(out))
				return 0;
		}
		if (!end)
			break;
		p = end + 1;
	}
	return -1;
}

/* Does rule r name the executable found at path (as resolved, and its real path)? */
static bool rule_matches(const struct cmd_rule *r, const char *given, const char *path,
                         const char *real)
{
	if (r->match[0] == '/')
		return (path && !strcmp(r->match, path)) || (real && !strcmp(r->match, real));
	return !strcmp(r->match, base_name(given)) || (path && !strcmp(r->match, base_name(path))) ||
	       (real && !strcmp(r->match, base_name(real)));
}

const char *sandbox_path_env(const struct corral_config *cfg)
{
	const char *path = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
	for (size_t i = 0; i < cfg->n_env; i++)
		if (!strcmp(cfg->env[i].name, "PATH") && cfg->env[i].value)
			path = cfg->env[i].value;
	return path;
}

int policy_decide_exec(const struct corral_config *cfg, const char *prog, struct exec_decision *d)
{
	memset(d, 0, sizeof(*d));
	d->found = policy_which(cfg, prog, sandbox_path_env(cfg), d->path) == 0;
	if (d->found) {
		char *real = realpath(d->path, NULL);
		snprintf(d->real, sizeof(d->real), "%s", real ? real : d->path);
		free(real);
	}
	const char *path = d->found ? d->path : NULL, *real = d->found ? d->real : NULL;
	/* deny wins over allow */
	for (size_t i = 0; i < cfg->n_cmd_deny; i++)
		if (rule_matches(&cfg->cmd_deny[i], prog, path, real)) {
			d->allowed = false;
			d->rule = &cfg->cmd_deny[i];
			d->list = "commands.deny";
			return 0;
		}
	if (!cfg->cmd_allow_set) {
		d->allowed = true;
		d->list = "default (no command allow-list)";
		return 0;
	}
	for (size_t i = 0; i < cfg->n_cmd_allow; i++)
		if (rule_matches(&cfg->cmd_allow[i], prog, path, real)) {
			d->allowed = true;
			d->rule = &cfg->cmd_allow[i];
			d->list = "commands.allow";
			return 0;
		}
	d->allowed = false;
	d->list = "commands.allow (not listed)";
	return 0;
}

static int deny_error(const struct corral_config *cfg, const char *prog,
                      const struct exec_decision *d, struct corral_error *err)
{
	if (d->rule)
		return corral_set_error(err, CORRAL_EDENIED, 0, "policy",
		                        "policy: '%s' is denied by the rule commands.deny '%s'%s%s; "
		                        "run a different command or change the profile",
		                        prog, d->rule->match, d->rule->reason ? ": " : "",
		                        d->rule->reason ? d->rule->reason : "");
	char allowed[300] = "";
	size_t o = 0;
	for (size_t i = 0; i < cfg->n_cmd_allow && o + 2 < sizeof(allowed); i++)
		o += (size_t)snprintf(allowed + o, sizeof(allowed) - o, "%s%s", i ? ", " : "",
		                      cfg->cmd_allow[i].match);
	if (o >= sizeof(allowed))
		o = sizeof(allowed) - 1;
	return corral_set_error(err, CORRAL_EDENIED, 0, "policy",
	                        "policy: '%s' is not on the command allow-list (allowed: %s); "
	                        "use one of those or change the profile",
	                        prog, o ? allowed : "nothing");
}

/* Arguments that look like paths and point outside everything the sandbox can see get an
 * early, friendly error. The kernel layers are the boundary; this only saves a confusing
 * ENOENT. Sandbox-private trees (/tmp, /dev, /proc) are always fine. */
static int check_arg_paths(const struct corral_config *cfg, struct corral_error *err)
{
	if (cfg->shell || cfg->mode == CORRAL_MODE_NONE)
		return 0; /* a shell string is the shell's to parse; mode none hides nothing */
	static const char *const visible[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
	                                      "/libx32", "/etc", "/tmp", "/dev", "/proc"};
	for (size_t i = 1; cfg->argv[i]; i++) {
		const char *a = cfg->argv[i];
		const char *eq = a[0] == '-' ? strchr(a, '=') : NULL;
		if (eq)
			a = eq + 1;
		if (!(a[0] == '/' || !strncmp(a, "./", 2) || !strncmp(a, "../", 3)))
			continue;
		char path[PATH_MAX];
		if (a[0] == '/')
			snprintf(path, sizeof(path), "%s", a);
		else
			snprintf(path, sizeof(path), "%s/%s", cfg->cwd ? cfg->cwd : cfg->workspace, a);
		normalize(path);
		bool ok = false;
		for (size_t k = 0; k < ARRAY_SIZE(visible) && !ok; k++)
			ok = path_within(path, visible[k]);
		if (ok && (path_within(path, "/tmp") || path_within(path, "/dev") ||
		           path_within(path, "/proc")) &&
		    !path_within(cfg->workspace, "/tmp"))
			continue;
		char res[PATH_MAX];
		for (size_t k = 0; k < cfg->n_deny; k++)
			if (policy_resolve_path(cfg, cfg->fs_deny[k], res, NULL) == 0 &&
			    path_within(path, res))
				return corral_set_error(err, CORRAL_EDENIED, 0, "policy",
				                        "policy: argument '%s' is inside %s, which the "
				                        "policy hides (filesystem.deny)",
				                        cfg->argv[i], res);
		/* inside a visible tree, or one of the directories on the way to one ("/",
		 * the workspace's parents), which exist in the sandbox's root too */
		ok = ok || path_within(path, cfg->workspace) || path_within(cfg->workspace, path);
		for (size_t k = 0; k < ARRAY_SIZE(visible) && !ok; k++)
			ok = path_within(visible[k], path);
		for (size_t k = 0; k < cfg->n_read && !ok; k++)
			ok = policy_resolve_path(cfg, cfg->fs_read[k], res, NULL) == 0 &&
			     (path_within(path, res) || path_within(res, path));
		for (size_t k = 0; k < cfg->n_write && !ok; k++)
			ok = policy_resolve_path(cfg, cfg->fs_write[k], res, NULL) == 0 &&
			     (path_within(path, res) || path_within(res, path));
		if (!ok)
			return corral_set_error(err, CORRAL_EDENIED, 0, "policy",
			                        "policy: argument '%s' resolves to %s, outside what the "
			                        "sandbox can see (the workspace %s and the system "
			                        "directories); use a path inside the workspace or add it "
			                        "with --ro/--rw",
			                        cfg->argv[i], path, cfg->workspace);
	}
	return 0;
}

/* A working directory inside a hidden tree would start the command in an empty directory
 * it cannot use (EACCES at its first look): refused before anything is built. */
int policy_check_cwd(const struct corral_config *cfg, struct corral_error *err)
{
	const char *cwd = cfg->cwd ? cfg->cwd : cfg->workspace;
	if (!cwd)
		return 0;
	for (size_t i = 0; i < cfg->n_deny; i++) {
		char res[PATH_MAX];
		if (policy_lexical_path(cfg, cfg->fs_deny[i], res, NULL) < 0)
			continue; /* the plan names that rule's own error */
		if (!path_within(res, cfg->workspace))
			resolve_existing(
			    res); /* outside: the caller's host path, symlinks and all */
		if (!path_within(cwd, res))
			continue;
		bool given = cfg->cwd && strcmp(cfg->cwd, cfg->workspace) != 0;
		return corral_set_error(
		    err, CORRAL_EINVAL, 0, "cwd",
		    "cwd: %s%s is inside %s, which the hide rule '%s' (--hide, filesystem.deny) "
		    "hides from the sandbox, so the command could not use it; %s",
		    given ? "" : "the workspace ", cwd, res, cfg->fs_deny[i],
		    given ? "give a working directory outside the hidden tree, or take that rule "
		            "off the hide list"
		          : "take that rule off the hide list, or give a workspace outside it");
	}
	return 0;
}

int policy_preflight(const struct corral_config *cfg, struct corral_error *err)
{
	struct exec_decision d;
	policy_decide_exec(cfg, cfg->argv[0], &d);
	if (!d.allowed)
		return deny_error(cfg, cfg->argv[0], &d, err);
	return check_arg_paths(cfg, err);
}

/* The interpreter an executable needs: PT_INTERP of an ELF file, or the #! line of a script
 * (for "#!/usr/bin/env prog" also prog through PATH). */
static int interpreters(const struct corral_config *cfg, const char *file, char out[2][PATH_MAX])
{
	int n = 0;
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	unsigned char buf[512];
	ssize_t len = read(fd, buf, sizeof(buf) - 1);
	if (len >= (ssize_t)sizeof(Elf64_Ehdr) && !memcmp(buf, ELFMAG, SELFMAG) &&
	    buf[EI_CLASS] == ELFCLASS64) {
		Elf64_Ehdr eh;
		memcpy(&eh, buf, sizeof(eh));
		for (int i = 0; i < eh.e_phnum && i < 64 && n == 0; i++) {
			Elf64_Phdr ph;
			off_t off = (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize);
			if (pread(fd, &ph, sizeof(ph), off) != (ssize_t)sizeof(ph))
				break;
			if (ph.p_type == PT_INTERP && ph.p_filesz > 1 && ph.p_filesz < PATH_MAX &&
			    pread(fd, out[0], ph.p_filesz, (off_t)ph.p_offset) ==
			            (ssize_t)ph.p_filesz) {
				out[0][ph.p_filesz - 1] = 0;
				n = 1;
			}
		}
	} else if (len > 2 && buf[0] == '#' && buf[1] == '!') {
		buf[len] = 0;
		char *p = (char *)buf + 2;
		while (*p == ' ' || *p == '\t')
			p++;
		char *end = p;
		while (*end && *end != ' ' && *end != '\t' && *end != '\n')
			end++;
		char *arg = end;
		while (*arg == ' ' || *arg == '\t')
			arg++;
		char *aend = arg;
		while (*aend && *aend != ' ' && *aend != '\t' && *aend != '\n')
			aend++;
		*end = 0;
		*aend = 0;
		snprintf(out[0], PATH_MAX, "%s", p);
		n = 1;
		if (!strcmp(base_name(p), "env") && *arg && arg[0] != '-' &&
		    policy_which(cfg, arg, sandbox_path_env(cfg), out[1]) == 0)
			n = 2;
	}
	close(fd);
	return n;
}

static int add_unique(char ***v, size_t *n, const char *s)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*v)[i], s))
			return 0;
	return strv_push(v, n, s);
}

/* Every file that may be executed under an allow-list: the allowed executables (as found and
 * their real paths), and, transitively, the interpreters and the dynamic loader they need. */
int policy_exec_files(const struct corral_config *cfg, char ***files, size_t *n,
                      struct corral_error *err)
{
	*files = NULL;
	*n = 0;
	for (size_t i = 0; i < cfg->n_cmd_allow; i++) {
		char path[PATH_MAX];
		if (policy_which(cfg, cfg->cmd_allow[i].match, sandbox_path_env(cfg), path) < 0)
			continue; /* not installed: nothing to allow */
		bool denied = false;
		for (size_t k = 0; k < cfg->n_cmd_deny; k++) {
			char *real = realpath(path, NULL);
			denied |= rule_matches(&cfg->cmd_deny[k], cfg->cmd_allow[i].match, path, real);
			free(real);
		}
		if (!denied && add_unique(files, n, path) < 0)
			return oom(err);
	}
	/* Walk the list as it grows: real paths and interpreters join it. */
	for (size_t i = 0; i < *n && i < 256; i++) {
		char *real = realpath((*files)[i], NULL);
		if (real) {
			int r = add_unique(files, n, real);
			free(real);
			if (r < 0)
				return oom(err);
		}
		char interp[2][PATH_MAX];
		int k = interpreters(cfg, (*files)[i], interp);
		for (int j = 0; j < k; j++)
			if (add_unique(files, n, interp[j]) < 0)
				return oom(err);
	}
	return 0;
}

/* ---- policy hash ------------------------------------------------------------------------ */

static void h_str(struct sha256_ctx *c, const char *tag, const char *v)
{
	sha256_update(c, strlen(tag) + 1, (const uint8_t *)tag);
	if (v)
		sha256_update(c, strlen(v) + 1, (const uint8_t *)v);
	else
		sha256_update(c, 1, (const uint8_t *)"");
}

static void h_list(struct sha256_ctx *c, const char *tag, char **v, size_t n)
{
	char num[32];
	snprintf(num, sizeof(num), "%zu", n);
	h_str(c, tag, num);
	for (size_t i = 0; i < n; i++)
		h_str(c, tag, v[i]);
}

void policy_hash(const struct corral_config *cfg, char out[65])
{
	struct sha256_ctx c;
	sha256_init(&c);
	char num[64];
	h_str(&c, "profile", cfg->profile_name);
	h_str(&c, "workspace", cfg->workspace);
	snprintf(num, sizeof(num), "%d/%d/%d/%d/%d", (int)cfg->mode, (int)cfg->net, cfg->workspace_ro,
	         cfg->etc_minimal, cfg->redact_mode);
	h_str(&c, "flags", num);
	for (int i = 0; i < CORRAL_LIMIT__COUNT; i++) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)cfg->limits[i]);
		h_str(&c, "limit", num);
	}
	snprintf(num, sizeof(num), "%llu/%llu/%zu", (unsigned long long)cfg->timeout_ms,
	         (unsigned long long)cfg->kill_after_ms, cfg->output_cap);
	h_str(&c, "time", num);
	h_list(&c, "read", cfg->fs_read, cfg->n_read);
	h_list(&c, "write", cfg->fs_write, cfg->n_write);
	h_list(&c, "deny", cfg->fs_deny, cfg->n_deny);
	h_list(&c, "protected", cfg->protected_set ? cfg->protected_paths : NULL,
	       cfg->protected_set ? cfg->n_protected : 0);
	h_list(&c, "env_allow", cfg->env_allow, cfg->n_env_allow);
	h_list(&c, "env_deny", cfg->env_deny, cfg->n_env_deny);
	for (size_t i = 0; i < cfg->n_env; i++)
		h_str(&c, "env_set", cfg->env[i].name); /* names only: values may be secrets */
	for (size_t i = 0; i < cfg->n_cmd_allow; i++)
		h_str(&c, "cmd_allow", cfg->cmd_allow[i].match);
	for (size_t i = 0; i < cfg->n_cmd_deny; i++)
		h_str(&c, "cmd_deny", cfg->cmd_deny[i].match);
	uint8_t d[SHA256_DIGEST_SIZE];
	sha256_digest(&c, sizeof(d), d);
	for (size_t i = 0; i < sizeof(d); i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}
