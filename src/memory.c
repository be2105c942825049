/* Copy-on-write pages made private ahead of time (mem_unshare_cow).
 *
 * A sandbox's init is a fork of its supervisor. The clone write-protects every page of the
 * supervisor's memory, and its next write to each one traps: a fault, a copy and a TLB flush,
 * 23 us on the 2-core machine of DESIGN §18 against 6 us for the same page made private by
 * MADV_POPULATE_WRITE. A server whose sandboxes are built ahead (--prebuild) is idle between
 * the build and the call that takes it, and does the work then. */
#include "internal.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PM_PRESENT (1ULL << 63)
#define PM_EXCLUSIVE (1ULL << 56) /* "page exclusively mapped", since Linux 4.2 */
#define PM_BATCH 512
#define MAX_MAPPING (1ULL << 30)

static size_t populate(uintptr_t lo, uintptr_t hi, size_t pg)
{
	return madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) == 0 ? (hi - lo) / pg : 0;
}

size_t mem_unshare_range(int pm, uintptr_t lo, uintptr_t hi)
{
	const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uint64_t ent[PM_BATCH];
	size_t done = 0;
	uintptr_t run = 0; /* start of the current run of shared pages; 0: none */
	uintptr_t a = lo;
	while (a < hi) {
		size_t n = (hi - a) / pg;
		if (n > PM_BATCH)
			n = PM_BATCH;
		ssize_t got = pread(pm, ent, n * sizeof(ent[0]), (off_t)(a / pg * sizeof(ent[0])));
		if (got < (ssize_t)sizeof(ent[0]))
			break;
		n = (size_t)got / sizeof(ent[0]);
		for (size_t i = 0; i < n; i++, a += pg) {
			bool shared = (ent[i] & PM_PRESENT) && !(ent[i] & PM_EXCLUSIVE);
			if (shared && !run)
				run = a;
			if (!shared && run) {
				done += populate(run, a, pg);
				run = 0;
			}
		}
	}
	if (run)
		done += populate(run, a, pg);
	return done;
}

size_t mem_unshare_cow(const char *exe)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return 0;
	int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	size_t pages = 0;
	char line[512 + PATH_MAX];
	while (pm >= 0 && fgets(line, sizeof(line), f)) {
		uintptr_t lo, hi;
		char perms[8] = "";
		int path_at = 0;
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %*s %*s %*s %n", &lo, &hi, perms,
		           &path_at) < 3)
			continue;
		/* Private and writable only: a write to a shared mapping would reach its file
		 * or the other processes that map it. */
		if (perms[0] != 'r' || perms[1] != 'w' || perms[3] != 'p')
			continue;
		char *path = path_at ? line + path_at : line + strlen(line);
		path[strcspn(path, "\n")] = 0;
		/* anonymous ones, the heap, the stack and this binary's data; not a library's
		 * or a file's (the pages the process writes after each fork are its own) */
		if (path[0] && strcmp(path, "[heap]") && strcmp(path, "[stack]") &&
		    !(exe && exe[0] && !strcmp(path, exe)))
			continue;
		/* a reservation this large (a sanitizer's shadow memory) is not the kind of
		 * mapping a process writes between two calls; its pagemap alone would be GiBs */
		if (hi - lo > MAX_MAPPING)
			continue;
		pages += mem_unshare_range(pm, lo, hi);
	}
	if (pm >= 0)
		close(pm);
	fclose(f);
	return pages;
}
