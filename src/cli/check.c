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
	int all = 1;
	json_array_foreach(layers, i, l)
	{
		int ok = json_is_true(json_object_get(l, "available"));
		/* without cgroups, required mode still runs: limits fall back to rlimits */
		if (strcmp(json_string_value(json_object_get(l, "name")), "cgroup"))
			all &= ok;
		printf("%-10s %-4s %s\n", json_string_value(json_object_get(l, "name")),
		       ok ? "yes" : "NO", json_string_value(json_object_get(l, "detail")));
		const char *fix = json_string_value(json_object_get(l, "fix"));
		if (!ok && fix && *fix)
			printf("%-15s fix: %s\n", "", fix);
	}
	printf("%s\n", all ? "all layers available: --mode required will work"
	                   : "some layers missing: --mode required fails; --mode auto skips them");
	json_decref(root);
	return 0;
}
