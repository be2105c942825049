/* Helpers shared by the libFuzzer targets: a byte reader that carves typed values out of the
 * input (like LLVM's FuzzedDataProvider), and a strict UTF-8 validator used as an oracle.
 * Header-only: every target is one .c file plus the library. */
#ifndef CORRAL_FUZZ_UTIL_H
#define CORRAL_FUZZ_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Invariant violated: crash so that libFuzzer saves the input. */
#define FZ_CHECK(cond)                                                                             \
	do {                                                                                       \
		if (!(cond))                                                                       \
			__builtin_trap();                                                          \
	} while (0)

struct fz {
	const uint8_t *p;
	size_t n;
};

static inline uint8_t fz_u8(struct fz *f)
{
	if (!f->n)
		return 0;
	f->n--;
	return *f->p++;
}

static inline uint64_t fz_u64(struct fz *f, unsigned bytes)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < bytes; i++)
		v |= (uint64_t)fz_u8(f) << (8 * i);
	return v;
}

/* Up to max bytes, length from one byte; a malloc'ed copy with a NUL after it. */
static inline char *fz_bytes(struct fz *f, size_t max, size_t *len)
{
	size_t n = fz_u8(f);
	if (n > max)
		n = max;
	if (n > f->n)
		n = f->n;
	char *s = malloc(n + 1);
	if (!s)
		abort();
	memcpy(s, f->p, n);
	s[n] = '\0';
	f->p += n;
	f->n -= n;
	if (len)
		*len = n;
	return s;
}

/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing past U+10FFFF; NUL only
 * when allow_nul. */
static inline bool fz_utf8_valid(const char *s, size_t n, bool allow_nul)
{
	const unsigned char *u = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		unsigned c = u[i];
		size_t len;
		uint32_t cp, min;
		if (c < 0x80) {
			if (c == 0 && !allow_nul)
				return false;
			i++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			len = 2, cp = c & 0x1f, min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			len = 3, cp = c & 0x0f, min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			len = 4, cp = c & 0x07, min = 0x10000;
		} else {
			return false;
		}
		if (i + len > n)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((u[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (u[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += len;
	}
	return true;
}

#endif
