/*
 * htab.c — the intrusive string-keyed hash table (common/htab.h): its
 * buckets double as it fills.
 */
#include "common/htab.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static size_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return (size_t)h;
}

#define HTAB_MIN_BUCKETS 16

int htab_init(struct htab *t, size_t nb)
{
	size_t want = HTAB_MIN_BUCKETS;
	while (want < nb && want <= SIZE_MAX / 2 / sizeof(*t->b))
		want *= 2;
	t->b = calloc(want, sizeof(*t->b));
	t->nb = t->b ? want : 0;
	t->n = 0;
	return t->b ? 0 : -ENOMEM;
}

void htab_free(struct htab *t)
{
	free(t->b);
	t->b = NULL;
	t->nb = t->n = 0;
}

/* Doubles the bucket array; on failure keeps the old one. */
static void htab_grow(struct htab *t)
{
	if (t->nb > SIZE_MAX / 2 / sizeof(*t->b))
		return;
	size_t nb = t->nb * 2;
	struct hlink **b = calloc(nb, sizeof(*b));
	if (!b)
		return;
	for (size_t i = 0; i < t->nb; i++) {
		struct hlink *l = t->b[i];
		while (l) {
			struct hlink *next = l->next;
			size_t k = l->hash & (nb - 1);
			l->next = b[k];
			b[k] = l;
			l = next;
		}
	}
	free(t->b);
	t->b = b;
	t->nb = nb;
}

void htab_add(struct htab *t, struct hlink *l)
{
	l->hash = hash_str(l->key);
	size_t i = l->hash & (t->nb - 1);
	l->next = t->b[i];
	t->b[i] = l;
	if (++t->n > t->nb)
		htab_grow(t);
}

void htab_del(struct htab *t, struct hlink *l)
{
	size_t i = l->hash & (t->nb - 1);
	for (struct hlink **p = &t->b[i]; *p; p = &(*p)->next)
		if (*p == l) {
			*p = l->next;
			t->n--;
			return;
		}
}

struct hlink *htab_find(const struct htab *t, const char *key)
{
	size_t h = hash_str(key);
	for (struct hlink *l = t->b[h & (t->nb - 1)]; l; l = l->next)
		if (l->hash == h && strcmp(l->key, key) == 0)
			return l;
	return NULL;
}
