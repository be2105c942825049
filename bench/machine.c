/* What the machine charges for the primitives a sandbox launch is made of: a system call, a
 * page fault on first touch, a copy-on-write fault, fork, spawning /bin/true (posix_spawn,
 * as the server benchmark's bare row does), and on x86 a CPUID instruction: a hypervisor
 * traps each one, and glibc's start-up runs dozens of them in every new program (its CPU
 * feature and cache detection; on the 2-core machine of 2026-11-29 a CPUID took 3.6 us and
 * a static program that returns at once 0.41 ms, against 0.13 ms without glibc). Virtual
 * machines differ here by an order of magnitude (a hypervisor that traps every page fault
 * makes each cost microseconds), and a launch's time follows: corral's one-shot makes about
 * 1,450-1,550 system calls and takes about 210 page faults (270 with the audit record),
 * bwrap's about 450-600 and 125. The benchmark report prints these beside the launch times,
 * so that runs on different machines can be compared. Part of the benchmark harness
 * (bench/run.sh), not of corral.
 *
 *   machine            prints one JSON object: the median of 5 rounds of each measurement */
#define _GNU_SOURCE
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define HAVE_CPUID 1
#endif

#define ROUNDS 5
#define PAGES 2000

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v)
{
	qsort(v, ROUNDS, sizeof(*v), cmp_double);
	return v[ROUNDS / 2];
}

static char *map_pages(void)
{
	char *p = mmap(NULL, (size_t)PAGES * 4096, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("machine: mmap");
		exit(1);
	}
	return p;
}

static double touch_ns(char *p, char v)
{
	double a = now_ns();
	for (size_t i = 0; i < PAGES; i++)
		p[i * 4096] = v;
	return (now_ns() - a) / PAGES;
}

extern char **environ;
#ifdef HAVE_CPUID
static volatile unsigned cpuid_sink;
#endif

int main(void)
{
	char *true_argv[] = {"true", NULL};
	double sc[ROUNDS], fault[ROUNDS], cow[ROUNDS], fork_us[ROUNDS], spawn_us[ROUNDS];
#ifdef HAVE_CPUID
	double cpuid_ns[ROUNDS];
#endif
	for (int r = 0; r < ROUNDS; r++) {
		enum { N = 20000 };
		double a = now_ns();
		for (int i = 0; i < N; i++)
			syscall(SYS_getppid);
		sc[r] = (now_ns() - a) / N;

		char *p = map_pages();
		fault[r] = touch_ns(p, 1);
		/* copy-on-write: a child shares every page; the parent then writes each */
		pid_t c = fork();
		if (c == 0) {
			pause();
			_exit(0);
		}
		if (c < 0) {
			perror("machine: fork");
			return 1;
		}
		cow[r] = touch_ns(p, 2);
		kill(c, SIGKILL);
		waitpid(c, NULL, 0);
		munmap(p, (size_t)PAGES * 4096);

#ifdef HAVE_CPUID
		{
			enum { C = 2000 };
			unsigned ax, bx, cx, dx;
			a = now_ns();
			for (int i = 0; i < C; i++) {
				__cpuid_count(0, 0, ax, bx, cx, dx);
				cpuid_sink = ax ^ bx ^ cx ^ dx;
			}
			cpuid_ns[r] = (now_ns() - a) / C;
		}
#endif

		enum { F = 100 };
		a = now_ns();
		for (int i = 0; i < F; i++) {
			pid_t x = fork();
			if (x == 0)
				_exit(0);
			waitpid(x, NULL, 0);
		}
		fork_us[r] = (now_ns() - a) / F / 1000;
		a = now_ns();
		for (int i = 0; i < F; i++) {
			pid_t x;
			int st = 0;
			if (posix_spawn(&x, "/bin/true", NULL, NULL, true_argv, environ) != 0 ||
			    waitpid(x, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				fprintf(stderr, "machine: /bin/true failed\n");
				return 1;
			}
		}
		spawn_us[r] = (now_ns() - a) / F / 1000;
	}
	printf("{\"syscall_ns\": %.0f, \"fault_ns\": %.0f, \"cow_fault_ns\": %.0f, "
	       "\"fork_exit_wait_us\": %.0f, \"spawn_true_us\": %.0f",
	       median(sc), median(fault), median(cow), median(fork_us), median(spawn_us));
#ifdef HAVE_CPUID
	printf(", \"cpuid_ns\": %.0f", median(cpuid_ns));
#endif
	printf("}\n");
	return 0;
}
