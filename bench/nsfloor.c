/* The kernel's floor for a sandbox launch on this machine: clone() with the namespace flags
 * corral's default profile uses (user, mount, pid, net, ipc, uts, cgroup), exec /bin/true
 * in the child, wait. No uid maps, no mounts, no Landlock, no seccomp, no supervision, no
 * output capture: whatever a sandbox with a fresh set of namespaces does, it does at least
 * this, and the kernel also pays the namespaces' teardown (the network namespace's in a
 * worker thread), which shows up in the rate at full load.
 *
 *   nsfloor N WORKERS [all|nonet|none]
 *
 * WORKERS processes each launch N/WORKERS times back to back. Prints one JSON object:
 * launches per second over the wall time, and the p50/p99 of one launch's latency. Part of
 * the benchmark harness (bench/server.py), not of corral. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: nsfloor N WORKERS [all|nonet|none]\n");
		return 2;
	}
	long n = strtol(argv[1], NULL, 10), workers = strtol(argv[2], NULL, 10);
	const char *set = argc > 3 ? argv[3] : "all";
	if (n < 1 || workers < 1 || workers > 64) {
		fprintf(stderr, "nsfloor: N must be >= 1 and WORKERS 1..64\n");
		return 2;
	}
	unsigned long flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
	                      CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
	if (!strcmp(set, "nonet"))
		flags &= ~(unsigned long)CLONE_NEWNET;
	else if (!strcmp(set, "none"))
		flags = 0;
	else if (strcmp(set, "all")) {
		fprintf(stderr, "nsfloor: the set is all, nonet or none, not %s\n", set);
		return 2;
	}
	long per = (n + workers - 1) / workers;
	/* every launch's latency, written by the workers into shared memory */
	double *lat = mmap(NULL, (size_t)(per * workers) * sizeof(double), PROT_READ | PROT_WRITE,
	                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (lat == MAP_FAILED) {
		perror("nsfloor: mmap");
		return 1;
	}
	char *const targv[] = {"/bin/true", NULL}, *const tenv[] = {NULL};
	double t0 = now_s();
	for (long w = 0; w < workers; w++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("nsfloor: fork");
			return 1;
		}
		if (pid)
			continue;
		for (long i = 0; i < per; i++) {
			double s = now_s();
			long c = syscall(SYS_clone, flags | SIGCHLD, 0, NULL, NULL, 0);
			if (c == 0) {
				execve(targv[0], targv, tenv);
				_exit(127);
			}
			int st = 0;
			if (c < 0 || waitpid((pid_t)c, &st, 0) < 0 || !WIFEXITED(st) ||
			    WEXITSTATUS(st) != 0) {
				fprintf(stderr, "nsfloor: launch failed: %s\n",
				        c < 0 ? strerror(errno) : "child did not exit 0");
				_exit(1);
			}
			lat[w * per + i] = now_s() - s;
		}
		_exit(0);
	}
	int bad = 0, st;
	while (wait(&st) > 0)
		bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	double wall = now_s() - t0;
	if (bad)
		return 1;
	long total = per * workers;
	qsort(lat, (size_t)total, sizeof(double), cmp_double);
	printf("{\"set\": \"%s\", \"launches\": %ld, \"workers\": %ld, \"wall_s\": %.6f, "
	       "\"per_s\": %.1f, \"p50_ms\": %.4f, \"p99_ms\": %.4f}\n",
	       set, total, workers, wall, (double)total / wall, lat[total / 2] * 1e3,
	       lat[(long)((double)total * 0.99)] * 1e3);
	return 0;
}
