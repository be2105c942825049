#include "internal.h"
#include "test.h"

static const char *get(char **envp, const char *name)
{
	size_t n = strlen(name);
	for (char **p = envp; *p; p++)
		if (!strncmp(*p, name, n) && (*p)[n] == '=')
			return *p + n + 1;
	return NULL;
}

void test_env(void)
{
	setenv("CORRAL_UNIT_SECRET", "hunter2", 1);
	struct env_entry e[] = {{"FOO", "bar"}, {"PATH", "/custom"}, {"LANG", NULL}};
	char **envp = env_build(e, 3, "/ws");
	CHECK("env HOME is workspace", envp && get(envp, "HOME") && !strcmp(get(envp, "HOME"), "/ws"));
	CHECK("env explicit set", get(envp, "FOO") && !strcmp(get(envp, "FOO"), "bar"));
	CHECK("env override default", !strcmp(get(envp, "PATH"), "/custom"));
	CHECK("env removal", get(envp, "LANG") == NULL);
	CHECK("env TERM default", get(envp, "TERM") != NULL);
	CHECK("env does not inherit host", get(envp, "CORRAL_UNIT_SECRET") == NULL);
	size_t count = 0;
	for (char **p = envp; *p; p++)
		count++;
	CHECK("env small and explicit", count == 6);
	env_free(envp);
	CHECK("env name valid", env_name_valid("A_1") && env_name_valid("_x"));
	CHECK("env name invalid", !env_name_valid("1A") && !env_name_valid("A=B") &&
	                              !env_name_valid("") && !env_name_valid("A B"));
}

/* policy_env's split of environ, against the same split made from scratch here: every
 * denied name with a value withheld, every allowed one passed, in environ's order. */
static bool split_is_right(const corral_config *cfg, const char *want_withheld,
                           const char *want_passed)
{
	struct env_entry *pass, *held;
	size_t np, nh, rp = 0, rh = 0;
	if (policy_env(cfg, &pass, &np, &held, &nh) != 0)
		return false;
	bool ok = true, saw_held = !want_withheld, saw_passed = !want_passed;
	for (char **e = environ; *e; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq || eq == *e || eq - *e > 255)
			continue;
		char name[256];
		memcpy(name, *e, (size_t)(eq - *e));
		name[eq - *e] = 0;
		bool denied = policy_env_denied_by(cfg, name) != NULL, allowed = false;
		for (size_t i = 0; i < cfg->n_env_allow; i++)
			allowed = allowed || policy_glob_match(cfg->env_allow[i], name);
		struct env_entry *list = denied ? held : pass;
		size_t *k = denied ? &rh : &rp, n = denied ? nh : np;
		if (denied ? !eq[1] : !allowed)
			continue;
		ok =
		    ok && *k < n && !strcmp(list[*k].name, name) && !strcmp(list[*k].value, eq + 1);
		(*k)++;
		saw_held = saw_held || (denied && !strcmp(name, want_withheld));
		saw_passed = saw_passed || (!denied && !strcmp(name, want_passed));
	}
	ok = ok && rp == np && rh == nh && saw_held && saw_passed;
	env_entries_free_list(pass, np);
	env_entries_free_list(held, nh);
	return ok;
}

/* The verdicts are kept between calls (for the environ and the globs they were made for):
 * each change to either is seen on the next call. */
void test_env_policy_kept(void)
{
	struct corral_error err = {0};
	corral_config *cfg = corral_config_new(), *other = corral_config_new();
	corral_config_env_allow(cfg, "CORRAL_UNIT_*", &err);
	corral_config_env_allow(other, "CORRAL_UNIT_*", &err);
	corral_config_env_deny(other, "CORRAL_UNIT_PLAIN", &err);
	setenv("CORRAL_UNIT_PLAIN", "1", 1);
	CHECK("env policy: as decided afresh", split_is_right(cfg, NULL, "CORRAL_UNIT_PLAIN"));
	CHECK("env policy: again (kept)", split_is_right(cfg, NULL, "CORRAL_UNIT_PLAIN"));
	CHECK("env policy: another deny glob is seen",
	      split_is_right(other, "CORRAL_UNIT_PLAIN", NULL));
	CHECK("env policy: and back", split_is_right(cfg, NULL, "CORRAL_UNIT_PLAIN"));
	setenv("CORRAL_UNIT_NEW_TOKEN", "t0ken", 1);
	CHECK("env policy: a new denied name is withheld",
	      split_is_right(cfg, "CORRAL_UNIT_NEW_TOKEN", NULL));
	/* the same number of names, one of them another */
	unsetenv("CORRAL_UNIT_NEW_TOKEN");
	setenv("CORRAL_UNIT_PASSWORD", "pw", 1);
	CHECK("env policy: a name swapped for a denied one is withheld",
	      split_is_right(cfg, "CORRAL_UNIT_PASSWORD", NULL));
	/* the very same entry (pointer and count), its name changed in place */
	static char entry[] = "CORRAL_UNIT_PAX=v";
	putenv(entry);
	CHECK("env policy: a name of its own", split_is_right(cfg, NULL, "CORRAL_UNIT_PAX"));
	entry[14] = 'T'; /* CORRAL_UNIT_PAT: *_PAT */
	CHECK("env policy: renamed in place to a denied name",
	      split_is_right(cfg, "CORRAL_UNIT_PAT", NULL));
	unsetenv("CORRAL_UNIT_PAT");
	unsetenv("CORRAL_UNIT_PASSWORD");
	unsetenv("CORRAL_UNIT_PLAIN");
	corral_config_free(cfg);
	corral_config_free(other);
}
