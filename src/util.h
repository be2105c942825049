/* Small internal helpers shared by the library: cleanup attributes, error filling, raw
 * syscall wrappers that glibc 2.36 does not provide. Internal only. */
#ifndef CORRAL_UTIL_H
#define CORRAL_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "corral.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* CLOCK_MONOTONIC in milliseconds */
static inline uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline void cleanup_freep(void *p)
{
	free(*(void **)p);
}
static inline void cleanup_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
/* Is path dir itself or beneath it (by name, both normalized)? "/" holds everything. */
/* mountinfo's escapes (\040 for a space, \011, \012, \134) undone in place. */
static inline void mountinfo_unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

static inline bool path_within(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (n == 1 && dir[0] == '/')
		return true;
	return !strncmp(path, dir, n) && (path[n] == 0 || path[n] == '/');
}

#define autofree __attribute__((cleanup(cleanup_freep)))
#define autoclose __attribute__((cleanup(cleanup_closep)))

/* Take ownership out of a cleanup variable. */
#define steal_pointer(pp)                                                                    \
	({                                                                                   \
		__typeof__(*(pp)) _p = *(pp);                                                \
		*(pp) = NULL;                                                                \
		_p;                                                                          \
	})
#define steal_fd(fdp)                                                                        \
	({                                                                                   \
		int _fd = *(fdp);                                                            \
		*(fdp) = -1;                                                                 \
		_fd;                                                                         \
	})

/* Fill err (may be NULL) and return code. sys_errno 0 means none. step may be NULL. */
int corral_set_error(struct corral_error *err, int code, int sys_errno, const char *step,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#endif
