/*
 * test_htab.c — the intrusive hash table (common/htab.h):
 * starts small, grows as keys are added, and finds every key before and
 * after half of them are deleted; a growth or a delete uses the hash each
 * link keeps and never reads a key again. No server, no mount.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/check.h"
#include "common/htab.h"

#define NKEYS 100000

struct item {
	struct hlink h;
	char key[24];
};

static struct item *find(const struct htab *t, const char *key)
{
	struct hlink *l = htab_find(t, key);
	return l ? htab_entry(l, struct item, h) : NULL;
}

int main(void)
{
	struct htab t;
	CHECK_EQ(htab_init(&t, 0), 0);
	size_t nb0 = t.nb;
	CHECK(nb0 > 0 && nb0 <= 16);
	CHECK(find(&t, "0") == NULL);

	struct item *items = calloc(NKEYS, sizeof(*items));
	if (!items)
		return 1;
	for (size_t i = 0; i < NKEYS; i++) {
		snprintf(items[i].key, sizeof(items[i].key), "dir/%zu", i);
		items[i].h.key = items[i].key;
		htab_add(&t, &items[i].h);
	}
	CHECK_EQ(t.n, NKEYS);
	CHECK(t.nb >= NKEYS / 2);
	CHECK((t.nb & (t.nb - 1)) == 0);
	printf("buckets: %zu at start, %zu for %d keys\n", nb0, t.nb, NKEYS);

	size_t found = 0;
	for (size_t i = 0; i < NKEYS; i++)
		found += find(&t, items[i].key) == &items[i];
	CHECK_EQ(found, NKEYS);
	CHECK(find(&t, "dir/100000") == NULL);
	CHECK(find(&t, "dir/") == NULL);

	for (size_t i = 0; i < NKEYS; i += 2)
		htab_del(&t, &items[i].h);
	CHECK_EQ(t.n, NKEYS / 2);
	size_t kept = 0, gone = 0;
	for (size_t i = 0; i < NKEYS; i++) {
		struct item *it = find(&t, items[i].key);
		if (i % 2)
			kept += it == &items[i];
		else
			gone += it == NULL;
	}
	CHECK_EQ(kept, NKEYS / 2);
	CHECK_EQ(gone, NKEYS / 2);

	/* Walking the buckets sees each remaining link once and may delete
	 * the one it stands on (dir_free_all does). */
	size_t walked = 0;
	for (size_t i = 0; i < t.nb; i++) {
		struct hlink *l = t.b[i];
		while (l) {
			struct hlink *next = l->next;
			htab_del(&t, l);
			walked++;
			l = next;
		}
	}
	CHECK_EQ(walked, NKEYS / 2);
	CHECK_EQ(t.n, 0);
	CHECK(find(&t, items[1].key) == NULL);

	/* Growth and delete never read a key: with every key overwritten in
	 * place (a rehash of what it reads would put each link in a wrong
	 * bucket), the table doubles several times, then the keys come back
	 * and are all found, and deleted. */
	htab_free(&t);
	CHECK_EQ(htab_init(&t, 0), 0);
	for (size_t i = 0; i < 1000; i++) {
		snprintf(items[i].key, sizeof(items[i].key), "keep/%zu", i);
		htab_add(&t, &items[i].h);
	}
	size_t nb1 = t.nb;
	for (size_t i = 0; i < 1000; i++)
		memset(items[i].key, 'x', 8);
	for (size_t i = 1000; i < 20000; i++) {
		snprintf(items[i].key, sizeof(items[i].key), "grow/%zu", i);
		htab_add(&t, &items[i].h);
	}
	CHECK(t.nb >= nb1 * 8);
	size_t back = 0;
	for (size_t i = 0; i < 1000; i++) {
		snprintf(items[i].key, sizeof(items[i].key), "keep/%zu", i);
		back += find(&t, items[i].key) == &items[i];
		memset(items[i].key, 'y', 8);
		htab_del(&t, &items[i].h);
	}
	CHECK_EQ(back, 1000);
	CHECK_EQ(t.n, 19000);
	CHECK(find(&t, "grow/1000") == &items[1000]);

	htab_free(&t);
	free(items);
	return check_done("htab");
}
