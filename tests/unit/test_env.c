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
