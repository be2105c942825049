/* The sandbox environment, built from scratch: nothing is inherited wholesale. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

bool env_name_valid(const char *name)
{
	if (!name || !*name || !(name[0] == '_' || (name[0] >= 'A' && name[0] <= 'Z') ||
	                         (name[0] >= 'a' && name[0] <= 'z')))
		return false;
	for (const char *p = name; *p; p++) {
		char c = *p;
		if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9')))
			return false;
	}
	return strlen(name) < 256;
}

void env_free(char **envp)
{
	if (!envp)
		return;
	for (char **p = envp; *p; p++)
		free(*p);
	free(envp);
}

static int env_put(char ***envp, size_t *n, const char *name, const char *value)
{
	size_t nl = strlen(name);
	size_t j;
	for (j = 0; j < *n; j++)
		if (!strncmp((*envp)[j], name, nl) && (*envp)[j][nl] == '=')
			break;
	if (!value) { /* removal */
		if (j < *n) {
			free((*envp)[j]);
			memmove(&(*envp)[j], &(*envp)[j + 1], (*n - j) * sizeof(char *));
			(*n)--;
		}
		return 0;
	}
	char *kv;
	if (asprintf(&kv, "%s=%s", name, value) < 0)
		return -1;
	if (j < *n) {
		free((*envp)[j]);
		(*envp)[j] = kv;
		return 0;
	}
	char **grown = realloc(*envp, (*n + 2) * sizeof(char *));
	if (!grown) {
		free(kv);
		return -1;
	}
	*envp = grown;
	(*envp)[(*n)++] = kv;
	(*envp)[*n] = NULL;
	return 0;
}

char **env_build(const struct env_entry *entries, size_t n, const char *home)
{
	size_t count = 0;
	char **envp = calloc(1, sizeof(char *));
	if (!envp)
		return NULL;
	const struct env_entry defaults[] = {
		{"PATH", "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"},
		{"HOME", (char *)(home ? home : "/")},
		{"LANG", "C.UTF-8"},
		{"TERM", "xterm-256color"},
		{"TMPDIR", "/tmp"},
		{"CORRAL_SANDBOX", "1"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(defaults); i++)
		if (env_put(&envp, &count, defaults[i].name, defaults[i].value) < 0)
			goto fail;
	for (size_t i = 0; i < n; i++)
		if (env_put(&envp, &count, entries[i].name, entries[i].value) < 0)
			goto fail;
	return envp;
fail:
	env_free(envp);
	return NULL;
}
