/*
 * htab.h — a small string-keyed intrusive hash table, the one every module
 * uses (the workspace core's files and listings, the FUSE adapter's nodes).
 *
 * Starts small and doubles its bucket array when it holds more links than
 * buckets, so an idle table costs a few hundred bytes and a big one keeps
 * short chains. If a larger array cannot be allocated the table keeps the
 * old one: lookups stay correct, only slower. It never shrinks, so a
 * caller walking the buckets (b[0..nb)) may delete the link it stands on;
 * adding while walking is not allowed (it may rehash). Each link keeps
 * its key's hash: a growth and a delete never read a key again, and a
 * lookup compares strings only where the hashes match (keys are paths,
 * and a tree walk adds and finds tens of thousands of them). Not
 * thread-safe: its owner's lock guards it.
 */
#ifndef SANDBOXFS_COMMON_HTAB_H
#define SANDBOXFS_COMMON_HTAB_H

#include <stddef.h>

struct hlink {
	struct hlink *next;
	const char *key; /* owned by the containing object */
	size_t hash;	 /* of key, set by htab_add */
};

struct htab {
	struct hlink **b;
	size_t nb; /* a power of two */
	size_t n;
};

/* nb is the initial bucket count, rounded up to a power of two (0: 16). */
int htab_init(struct htab *t, size_t nb);
void htab_free(struct htab *t); /* frees the buckets, not the objects */
void htab_add(struct htab *t, struct hlink *l);
void htab_del(struct htab *t, struct hlink *l);
struct hlink *htab_find(const struct htab *t, const char *key);

#define htab_entry(ptr, type, member)                                                    \
	((type *)(void *)((char *)(ptr)-offsetof(type, member)))

#endif
