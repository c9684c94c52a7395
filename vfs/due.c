/*
 * due.c — the files waiting for an upload retry, in a min-heap on their
 * next try (c->due): the upload thread takes the first due in O(log n)
 * instead of scanning every file of every workspace (upload.c).
 *
 * A file is in it while it is pending, not permanently failed and not
 * unlinked (due_eligible); due_update is called, with c->lock and the
 * file's ws->lock held, wherever one of those or its next_try_ms changes,
 * and file_free takes it out. f->due_pos is its index + 1, 0 when it is
 * not in. The heap is the cache's: the retry thread reads it with c->lock
 * alone, so next_try_ms is written with both locks held.
 */
#include <stdlib.h>

#include "workspace_i.h"

static bool due_eligible(const struct wsfile *f)
{
	return f->pending && !f->permanent && !f->unlinked;
}

static bool due_before(const struct wsfile *a, const struct wsfile *b)
{
	return a->next_try_ms < b->next_try_ms;
}

static void due_set(struct wscache *c, size_t i, struct wsfile *f)
{
	c->due[i] = f;
	f->due_pos = i + 1;
}

static void due_up(struct wscache *c, size_t i)
{
	struct wsfile *f = c->due[i];
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!due_before(f, c->due[p]))
			break;
		due_set(c, i, c->due[p]);
		i = p;
	}
	due_set(c, i, f);
}

static void due_down(struct wscache *c, size_t i)
{
	struct wsfile *f = c->due[i];
	for (;;) {
		size_t l = 2 * i + 1, best = i;
		const struct wsfile *bf = f;
		if (l < c->ndue && due_before(c->due[l], bf))
			best = l, bf = c->due[l];
		if (l + 1 < c->ndue && due_before(c->due[l + 1], bf))
			best = l + 1;
		if (best == i)
			break;
		due_set(c, i, c->due[best]);
		i = best;
	}
	due_set(c, i, f);
}

void due_remove(struct wsfile *f)
{
	struct wscache *c = f->ws->c;
	if (!f->due_pos)
		return;
	size_t i = f->due_pos - 1;
	f->due_pos = 0;
	struct wsfile *last = c->due[--c->ndue];
	if (i == c->ndue)
		return;
	due_set(c, i, last);
	due_up(c, i);
	due_down(c, last->due_pos - 1);
}

void due_update(struct wsfile *f)
{
	struct wscache *c = f->ws->c;
	if (!due_eligible(f)) {
		due_remove(f);
		return;
	}
	if (f->due_pos) { /* its key may have moved either way */
		due_up(c, f->due_pos - 1);
		due_down(c, f->due_pos - 1);
		return;
	}
	if (c->ndue == c->due_cap) {
		size_t cap = c->due_cap ? c->due_cap * 2 : 64;
		struct wsfile **v = realloc(c->due, cap * sizeof(*v));
		if (!v) {
			/* Not in the heap: its retry waits for the next upload of
			 * the file (close, fsync, a command's flush), and health
			 * still counts it pending. */
			ws_log(f->ws, "out of memory queueing an upload retry");
			return;
		}
		c->due = v;
		c->due_cap = cap;
	}
	due_set(c, c->ndue++, f);
	due_up(c, c->ndue - 1);
}

struct wsfile *due_first(struct wscache *c)
{
	return c->ndue ? c->due[0] : NULL;
}
