/* Flag values shared by `corral run` and `corral mcp`: one parser per kind of limit, one
 * error line per bad value. */
#include <string.h>

#include "cli/cli.h"
#include "internal.h"

int cli_bad_value(const char *flag, const char *value, const char *why)
{
	cli_error("invalid value '%s' for %s: %s", value, flag, why);
	return EXIT_CORRAL_FAILED;
}

int cli_set_limit(corral_config *cfg, const char *flag, const char *arg)
{
	static const struct {
		const char *flag;
		enum corral_limit lim;
		int kind; /* 0 size, 1 seconds (0 = none), 2 count (0 = none), 4 CPUs */
	} flags[] = {
	    {"--memory", CORRAL_LIMIT_MEMORY, 0},    {"--fsize", CORRAL_LIMIT_FSIZE, 0},
	    {"--tmpfs-size", CORRAL_LIMIT_TMPFS, 0}, {"--cpu", CORRAL_LIMIT_CPU_S, 1},
	    {"--pids", CORRAL_LIMIT_PIDS, 2},        {"--nofile", CORRAL_LIMIT_NOFILE, 2},
	    {"--cpus", CORRAL_LIMIT_CPUS, 4},
	};
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
		if (strcmp(flag, flags[i].flag))
			continue;
		uint64_t v = 0;
		const char *why = NULL;
		int k = flags[i].kind;
		int r = k == 0 ? parse_size(arg, &v, &why)
		        : k == 1
		            ? (strcmp(arg, "0") ? parse_count(arg, 366ULL * 86400, &v, &why) : 0)
		        : k == 4 ? parse_cpus(arg, &v, &why)
		                 : (strcmp(arg, "0") ? parse_count(arg, 1u << 22, &v, &why) : 0);
		if (r < 0)
			return cli_bad_value(flag, arg, why);
		struct corral_error err = {0};
		if (corral_config_set_limit(cfg, flags[i].lim, v, &err) < 0)
			return cli_bad_value(flag, arg, err.message);
		return 0;
	}
	return cli_bad_value(flag, arg, "not a limit flag");
}
