/*
 * links.c — the symbolic links of a sandbox's workspace in the journal's
 * state: LINK_INTENT, LINK_DONE and LINK_GONE applied, copied, compared
 * and written back by compaction (state.c calls these).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "journal_i.h"

static void link_free(struct journal_link *l)
{
	free(l->path);
	free(l->target);
	memset(l, 0, sizeof(*l));
}

void journal_links_free(struct journal_sandbox *sb)
{
	for (size_t i = 0; i < sb->nlinks; i++)
		link_free(&sb->links[i]);
	free(sb->links);
	sb->links = NULL;
	sb->nlinks = 0;
}

/* The index of path, or where it goes (*found false). */
static size_t link_index(const struct journal_sandbox *sb, const char *path, bool *found)
{
	size_t lo = 0, hi = sb->nlinks;
	*found = false;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(sb->links[mid].path, path);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void journal_links_apply(struct journal_sandbox *sb, const struct journal_record *r)
{
	if (!r->path || !*r->path)
		return;
	bool found;
	size_t i = link_index(sb, r->path, &found);
	if (r->kind == JOURNAL_LINK_GONE) {
		if (!found)
			return;
		link_free(&sb->links[i]);
		memmove(&sb->links[i], &sb->links[i + 1],
			(sb->nlinks - i - 1) * sizeof(sb->links[0]));
		sb->nlinks--;
		return;
	}
	if (!r->target || !*r->target)
		return;
	char *target = strdup(r->target);
	if (!target)
		return;
	if (!found) {
		char *path = strdup(r->path);
		struct journal_link *v =
		    path ? realloc(sb->links, (sb->nlinks + 1) * sizeof(*v)) : NULL;
		if (!v) {
			free(path);
			free(target);
			return;
		}
		sb->links = v;
		memmove(&v[i + 1], &v[i], (sb->nlinks - i) * sizeof(*v));
		v[i] = (struct journal_link){.path = path};
		sb->nlinks++;
	}
	free(sb->links[i].target);
	sb->links[i].target = target;
	sb->links[i].queued = r->kind == JOURNAL_LINK_INTENT;
}

int journal_links_copy(struct journal_sandbox *d, const struct journal_sandbox *s)
{
	d->links = NULL;
	d->nlinks = 0;
	if (!s->nlinks)
		return 0;
	if (!(d->links = calloc(s->nlinks, sizeof(*d->links))))
		return -ENOMEM;
	d->nlinks = s->nlinks;
	int err = 0;
	for (size_t i = 0; i < s->nlinks; i++) {
		d->links[i].queued = s->links[i].queued;
		d->links[i].path = strdup(s->links[i].path);
		d->links[i].target = strdup(s->links[i].target);
		if (!d->links[i].path || !d->links[i].target)
			err = -ENOMEM;
	}
	return err;
}

bool journal_links_equal(const struct journal_sandbox *a, const struct journal_sandbox *b)
{
	if (a->nlinks != b->nlinks)
		return false;
	for (size_t i = 0; i < a->nlinks; i++)
		if (a->links[i].queued != b->links[i].queued ||
		    !journal_str_equal(a->links[i].path, b->links[i].path) ||
		    !journal_str_equal(a->links[i].target, b->links[i].target))
			return false;
	return true;
}

int journal_links_record(const struct journal_sandbox *sb, size_t i,
			 struct journal_record *r)
{
	const struct journal_link *l = &sb->links[i];
	r->kind = l->queued ? JOURNAL_LINK_INTENT : JOURNAL_LINK_DONE;
	r->path = strdup(l->path);
	r->target = strdup(l->target);
	return r->path && r->target ? 0 : -ENOMEM;
}
