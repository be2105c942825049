/* mem_unshare_cow / mem_unshare_range (src/memory.c): the pages a fork child shares become
 * the caller's own, with their contents, and nothing else is made resident. The pagemap's
 * "exclusively mapped" bit is the evidence, read here independently of the code under test. */
#include "internal.h"
#include "test.h"

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NPAGES 16

static uint64_t pagemap_entry(int pm, const void *addr)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uint64_t e = 0;
	if (pread(pm, &e, sizeof(e), (off_t)((uintptr_t)addr / pg * sizeof(e))) != sizeof(e))
		return 0;
	return e;
}

static bool present(uint64_t e)
{
	return e & (1ULL << 63);
}

static bool exclusive(uint64_t e)
{
	return e & (1ULL << 56);
}

void test_memory(void)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	CHECK("memory: /proc/self/pagemap readable", pm >= 0);
	if (pm < 0)
		return;
	unsigned char *m =
	    mmap(NULL, NPAGES * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK("memory: mapping", m != MAP_FAILED);
	if (m == MAP_FAILED) {
		close(pm);
		return;
	}
	/* even pages written (present), odd pages never touched */
	for (size_t i = 0; i < NPAGES; i += 2)
		memset(m + i * pg, (int)(0x40 + i), pg);
	char *heap = malloc(3 * pg);
	memset(heap, 0x5a, 3 * pg);
	int go[2];
	if (pipe(go) < 0) {
		CHECK("memory: pipes", false);
		return;
	}
	pid_t child = fork();
	if (child == 0) {
		/* the child keeps sharing the pages until the parent is done, then checks that
		 * its copy still holds the original contents */
		char b;
		close(go[1]);
		if (read(go[0], &b, 1) < 0)
			_exit(3);
		int ok = 1;
		for (size_t i = 0; i < NPAGES; i += 2)
			for (size_t j = 0; j < pg; j++)
				if (m[i * pg + j] != (unsigned char)(0x40 + i))
					ok = 0;
		_exit(ok ? 0 : 1);
	}
	close(go[0]);
	CHECK("memory: fork", child > 0);
	if (child < 0)
		return;
	uint64_t before = pagemap_entry(pm, m);
	CHECK("memory: a written page is shared with the child after fork",
	      present(before) && !exclusive(before));

	size_t n = mem_unshare_range(pm, (uintptr_t)m, (uintptr_t)m + NPAGES * pg);
	CHECK("memory: the range's shared pages made private, and only those", n == NPAGES / 2);
	bool all_excl = true, none_new = true, same = true;
	for (size_t i = 0; i < NPAGES; i++) {
		uint64_t e = pagemap_entry(pm, m + i * pg);
		if (i % 2 == 0 && !(present(e) && exclusive(e)))
			all_excl = false;
		if (i % 2 == 1 && present(e))
			none_new = false;
		if (i % 2 == 0)
			for (size_t j = 0; j < pg; j++)
				if (m[i * pg + j] != (unsigned char)(0x40 + i))
					same = false;
	}
	CHECK("memory: every written page is exclusively the parent's now", all_excl);
	CHECK("memory: an untouched page stays untouched (not made resident)", none_new);
	CHECK("memory: contents unchanged by the unsharing", same);
	/* the parent's writes now go to its own copies: the child must not see them */
	for (size_t i = 0; i < NPAGES; i += 2)
		memset(m + i * pg, 0xee, pg);
	CHECK("memory: a second pass finds nothing left to do",
	      mem_unshare_range(pm, (uintptr_t)m, (uintptr_t)m + NPAGES * pg) == 0);

	/* the whole process: the heap block written before the fork is shared, then not */
	uint64_t hb = pagemap_entry(pm, heap + pg);
	size_t whole = mem_unshare_cow(NULL);
	uint64_t ha = pagemap_entry(pm, heap + pg);
	CHECK("memory: the heap is shared with the child before mem_unshare_cow",
	      present(hb) && !exclusive(hb));
	CHECK("memory: mem_unshare_cow makes the heap the process's own",
	      whole > 0 && present(ha) && exclusive(ha));
	bool heap_same = true;
	for (size_t j = 0; j < 3 * pg; j++)
		if ((unsigned char)heap[j] != 0x5a)
			heap_same = false;
	CHECK("memory: the heap's contents unchanged", heap_same);

	if (write(go[1], "x", 1) != 1)
		kill(child, SIGKILL);
	close(go[1]);
	int st = 0;
	waitpid(child, &st, 0);
	CHECK("memory: the child's copy kept the original contents (parent's writes not seen)",
	      WIFEXITED(st) && WEXITSTATUS(st) == 0);
	free(heap);
	munmap(m, NPAGES * pg);
	close(pm);
}
