/* Host probe for `corral check`: which isolation layers this host offers, and the fix for
 * each one that is missing. */
#include "internal.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static void add(json_t *arr, const char *name, int ok, const char *detail, const char *fix)
{
	json_t *l = json_object();
	json_object_set_new(l, "name", json_string(name));
	json_object_set_new(l, "available", json_boolean(ok));
	json_object_set_new(l, "detail", json_string(detail));
	json_object_set_new(l, "fix", json_string(ok ? "" : fix));
	json_array_append_new(arr, l);
}

int corral_check_host(char **json_out, struct corral_error *err)
{
	json_t *root = json_object();
	json_t *arr = json_array();
	char why[400], d[400];

	int u = userns_probe(why, sizeof(why));
	add(arr, "userns", u, u ? "unprivileged user namespaces work" : why,
	    "enable user namespaces (sysctl user.max_user_namespaces>0; on Ubuntu 24.04 "
	    "kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile with 'userns,')"
	    "; or use --mode=auto");
	const char *ns[] = {"mountns", "pidns", "netns", "ipcns", "utsns", "cgroupns"};
	for (size_t i = 0; i < ARRAY_SIZE(ns); i++)
		add(arr, ns[i], u, u ? "created inside the user namespace" : "needs userns",
		    "see userns");

	int pr = u ? userns_probe_proc(why, sizeof(why)) : 0;
	add(arr, "proc", pr, u ? why : "needs userns",
	    "run corral outside the container (a fresh /proc needs the outer one fully visible), "
	    "or use --mode auto, which shows the outer /proc read-only");

	int abi = landlock_probe_abi();
	snprintf(d, sizeof(d), abi ? "abi %d%s%s" : "not available", abi,
	         abi >= 4 ? ", tcp rules" : "", abi >= 6 ? ", abstract unix and signal scoping" : "");
	add(arr, "landlock", abi > 0, d,
	    "needs Linux >= 5.13 with CONFIG_SECURITY_LANDLOCK=y and 'landlock' in the lsm= boot "
	    "parameter");

	int sc = seccomp_probe();
	add(arr, "seccomp", sc, sc ? "seccomp-bpf filters" : "not available",
	    "needs CONFIG_SECCOMP_FILTER");

	int cg = cgroup_probe(why, sizeof(why), NULL);
	add(arr, "cgroup", cg > 0, why,
	    "run as root, or delegate a cgroup v2 subtree (systemd-run --user --scope -p "
	    "Delegate=yes corral ...); without it memory and pids limits use rlimits");

	json_object_set_new(root, "layers", arr);
	json_object_set_new(root, "version", json_string(CORRAL_VERSION));
	*json_out = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (!*json_out)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "check", "out of memory");
	return 0;
}
