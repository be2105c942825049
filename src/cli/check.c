/* corral check: print what this host offers, layer by layer, with fixes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"

int cmd_check(int argc, char **argv)
{
	int json = argc > 1 && !strcmp(argv[1], "--json");
	if (argc > 1 && !json) {
		cli_error("usage: corral check [--json]");
		return EXIT_CORRAL_FAILED;
	}
	char *doc = NULL;
	struct corral_error err = {0};
	if (corral_check_host(&doc, &err) < 0) {
		cli_error("%s", err.message);
		return EXIT_CORRAL_FAILED;
	}
	if (json) {
		puts(doc);
		free(doc);
		return 0;
	}
	json_t *root = json_loads(doc, 0, NULL);
	free(doc);
	json_t *layers = json_object_get(root, "layers");
	size_t i;
	json_t *l;
	/* two lists of what is missing: layers mode required needs, and the cgroup, without
	 * which required mode still runs (limits fall back to rlimits) */
	char missing[256] = "", optional[64] = "";
	json_array_foreach(layers, i, l)
	{
		int ok = json_is_true(json_object_get(l, "available"));
		const char *name = json_string_value(json_object_get(l, "name"));
		if (!ok) {
			char *list = strcmp(name, "cgroup") ? missing : optional;
			size_t cap = list == missing ? sizeof(missing) : sizeof(optional);
			size_t n = strlen(list);
			snprintf(list + n, cap - n, "%s%s", n ? ", " : "", name);
		}
		printf("%-10s %-4s %s\n", name, ok ? "yes" : "NO",
		       json_string_value(json_object_get(l, "detail")));
		const char *fix = json_string_value(json_object_get(l, "fix"));
		if (!ok && fix && *fix)
			printf("%-15s fix: %s\n", "", fix);
	}
	if (*missing)
		printf("missing: %s: --mode required fails; --mode auto skips %s\n", missing,
		       strchr(missing, ',') ? "them" : "it");
	else if (*optional)
		printf("all required layers available: --mode required will work; missing: %s "
		       "(memory and process limits fall back to rlimits)\n",
		       optional);
	else
		printf("all layers available: --mode required will work\n");
	json_decref(root);
	return 0;
}
