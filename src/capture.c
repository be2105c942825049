/* Output capture with a per-stream cap: keep the head and the tail, drop the middle, and
 * count everything. Memory is allocated once at the cap and never grows, so a 1 GiB flood
 * costs the supervisor no more than a small one. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

int capture_init(struct capture *c, size_t cap)
{
	memset(c, 0, sizeof(*c));
	c->cap = cap;
	/* Half for the head, half for the tail: the start shows what ran, the end how it
	 * ended; both matter to a reader. */
	c->head_cap = cap / 2;
	c->tail_cap = cap - c->head_cap;
	/* Buffers grow lazily up to the cap so that small outputs stay small. */
	return 0;
}

static int grow(char **buf, size_t *have, size_t need, size_t max)
{
	if (need <= *have)
		return 0;
	size_t n = *have ? *have : 4096;
	while (n < need)
		n *= 2;
	if (n > max)
		n = max;
	char *p = realloc(*buf, n);
	if (!p)
		return -1;
	*buf = p;
	*have = n;
	return 0;
}

void capture_feed(struct capture *c, const char *buf, size_t len)
{
	c->total += len;
	if (c->head_len < c->head_cap) {
		size_t take = c->head_cap - c->head_len;
		if (take > len)
			take = len;
		if (grow(&c->head, &c->head_alloc, c->head_len + take, c->head_cap) == 0) {
			memcpy(c->head + c->head_len, buf, take);
			c->head_len += take;
		}
		buf += take;
		len -= take;
	}
	if (!len || !c->tail_cap)
		return;
	if (!c->tail) {
		c->tail = malloc(c->tail_cap);
		if (!c->tail)
			return;
	}
	if (len >= c->tail_cap) { /* only the last tail_cap bytes of this chunk survive */
		memcpy(c->tail, buf + len - c->tail_cap, c->tail_cap);
		c->tail_pos = 0;
		c->tail_len = c->tail_cap;
		return;
	}
	size_t first = c->tail_cap - c->tail_pos;
	if (first > len)
		first = len;
	memcpy(c->tail + c->tail_pos, buf, first);
	memcpy(c->tail, buf + first, len - first);
	c->tail_pos = (c->tail_pos + len) % c->tail_cap;
	c->tail_len = c->tail_len + len > c->tail_cap ? c->tail_cap : c->tail_len + len;
}

bool capture_truncated(const struct capture *c)
{
	return c->total > c->head_len + c->tail_len;
}

char *capture_finish(struct capture *c, size_t *len)
{
	char marker[128];
	int mlen = 0;
	uint64_t dropped = c->total - c->head_len - c->tail_len;
	if (dropped)
		mlen = snprintf(marker, sizeof(marker),
		                "\n[... corral: %llu bytes dropped; the output cap keeps the first "
		                "and last bytes ...]\n",
		                (unsigned long long)dropped);
	size_t n = c->head_len + (size_t)mlen + c->tail_len;
	char *out = malloc(n + 1);
	if (!out)
		return NULL;
	if (c->head_len)
		memcpy(out, c->head, c->head_len);
	if (mlen)
		memcpy(out + c->head_len, marker, (size_t)mlen);
	/* unroll the ring: oldest byte is at tail_pos when full, at 0 otherwise */
	size_t start = c->tail_len == c->tail_cap ? c->tail_pos : 0;
	if (c->tail_len) {
		size_t a = c->tail_cap - start;
		if (a > c->tail_len)
			a = c->tail_len;
		memcpy(out + c->head_len + mlen, c->tail + start, a);
		memcpy(out + c->head_len + mlen + a, c->tail, c->tail_len - a);
	}
	out[n] = 0;
	*len = n;
	return out;
}

void capture_free(struct capture *c)
{
	free(c->head);
	free(c->tail);
	c->head = c->tail = NULL;
}
