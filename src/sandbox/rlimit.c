/* Resource limits through setrlimit: the layer that needs no namespaces or cgroups. */
#include "sandbox/sandbox.h"

#include <errno.h>
#include <sys/resource.h>

static void add(struct rlimit_plan *p, int res, rlim_t soft, rlim_t hard)
{
	p->resource[p->n] = res;
	p->value[p->n].rlim_cur = soft;
	p->value[p->n].rlim_max = hard;
	p->n++;
}

void rlimit_plan_build(struct rlimit_plan *plan, uint64_t cpu_s, uint64_t mem_bytes,
                       uint64_t nproc, uint64_t nofile, uint64_t fsize, int mem_in_cgroup,
                       int pids_in_cgroup)
{
	plan->n = 0;
	/* No core dumps, and no core-dump helper: a core limit of 0 stops core files but not a
	 * piped core_pattern helper (systemd-coredump, apport), which runs as root on the host;
	 * the kernel skips the pipe for a limit of exactly 1 (its recursion guard), and 1 byte
	 * is too small for any core file. */
	add(plan, RLIMIT_CORE, 1, 1);
	/* SIGXCPU at the soft limit lets the program see it; the hard limit one second later is
	 * the kernel's SIGKILL backstop. */
	if (cpu_s)
		add(plan, RLIMIT_CPU, cpu_s, cpu_s + 1);
	/* RLIMIT_AS breaks runtimes that reserve address space (V8, Go, the JVM); RLIMIT_DATA
	 * counts only private writable memory, so it is the fallback when no cgroup enforces the
	 * memory limit. */
	if (mem_bytes && !mem_in_cgroup)
		add(plan, RLIMIT_DATA, mem_bytes, mem_bytes);
	/* RLIMIT_NPROC counts per (user namespace, uid): per sandbox when it has its own user
	 * namespace, per host user otherwise. */
	if (nproc && !pids_in_cgroup)
		add(plan, RLIMIT_NPROC, nproc, nproc);
	if (nofile)
		add(plan, RLIMIT_NOFILE, nofile, nofile);
	if (fsize)
		add(plan, RLIMIT_FSIZE, fsize, fsize);
}

int rlimit_apply_child(const struct rlimit_plan *plan, int *failed)
{
	for (size_t i = 0; i < plan->n; i++) {
		struct rlimit cur;
		struct rlimit want = plan->value[i];
		/* Never try to raise a hard limit we were given (that needs CAP_SYS_RESOURCE):
		 * clamp to what the supervisor itself has. */
		if (getrlimit(plan->resource[i], &cur) == 0) {
			if (want.rlim_max > cur.rlim_max)
				want.rlim_max = cur.rlim_max;
			if (want.rlim_cur > want.rlim_max)
				want.rlim_cur = want.rlim_max;
		}
		if (setrlimit(plan->resource[i], &want) < 0) {
			*failed = plan->resource[i];
			return -errno;
		}
	}
	return 0;
}
