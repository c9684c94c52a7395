/*
 * test_due.c — the upload-retry heap (vfs/due.c): files come out in the
 * order of their next try whatever order they were queued, moved and
 * removed in; only pending, not permanent, not unlinked files are in it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workspace_i.h"

static int failures;
#define CHECK(cond)                                                                      \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
				#cond);                                                  \
			failures++;                                                      \
		}                                                                        \
	} while (0)

#define N 500

/* Pops every file in heap order, checking the order, then puts them back. */
static void check_order(struct wscache *c, size_t want)
{
	struct wsfile *out[N];
	size_t n = 0;
	uint64_t last = 0;
	struct wsfile *f;
	while ((f = due_first(c))) {
		CHECK(f->next_try_ms >= last);
		CHECK(f->pending && !f->permanent && !f->unlinked);
		last = f->next_try_ms;
		out[n++] = f;
		due_remove(f);
		CHECK(f->due_pos == 0);
	}
	CHECK(n == want);
	for (size_t i = 0; i < n; i++)
		due_update(out[i]);
	CHECK(c->ndue == want);
}

int main(void)
{
	struct wscache c;
	struct workspace ws;
	static struct wsfile files[N];
	memset(&c, 0, sizeof(c));
	memset(&ws, 0, sizeof(ws));
	ws.c = &c;
	srand(7);
	for (size_t i = 0; i < N; i++) {
		files[i].ws = &ws;
		files[i].pending = true;
		files[i].next_try_ms = (uint64_t)(rand() % 1000);
		due_update(&files[i]);
	}
	CHECK(c.ndue == N);
	check_order(&c, N);
	/* keys that move both ways */
	for (size_t i = 0; i < N; i += 3) {
		files[i].next_try_ms = (uint64_t)(rand() % 2000);
		due_update(&files[i]);
	}
	check_order(&c, N);
	/* what is no longer eligible leaves; removal from the middle */
	size_t left = N;
	for (size_t i = 0; i < N; i += 5) {
		files[i].permanent = true;
		due_update(&files[i]);
		left--;
	}
	for (size_t i = 1; i < N; i += 7) {
		if (files[i].permanent)
			continue;
		files[i].unlinked = true;
		due_update(&files[i]);
		left--;
	}
	for (size_t i = 2; i < N; i += 11) {
		if (!files[i].due_pos)
			continue;
		due_remove(&files[i]); /* freed */
		left--;
	}
	check_order(&c, left);
	/* and comes back once eligible again */
	files[0].permanent = false;
	due_update(&files[0]);
	check_order(&c, left + 1);
	free(c.due);
	if (failures)
		fprintf(stderr, "%d checks failed\n", failures);
	else
		printf("due heap: ok\n");
	return failures ? 1 : 0;
}
