/*
 * invalidate.c — after a command: the pass that tells the kernel to drop
 * what it may still hold of the paths this mount showed.
 */
#include <stdlib.h>
#include <string.h>

#include "workspace_i.h"

static void workspace_invalidate_pass(struct workspace *ws);

void workspace_invalidate(struct workspace *ws)
{
	if (!ws)
		return;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&ws->lock);
	ws->epoch++;
	for (size_t i = 0; i < ws->nmade; i++)
		free(ws->made_dirs[i]);
	ws->nmade = 0;
	if (c->cfg.kernel_told_by_mount) {
		pthread_mutex_unlock(&ws->lock);
		return;
	}
	uint64_t mine = ++ws->inval_asked;
	/* A pass costs time in the number of paths shown; commands that end
	 * while one runs are all covered by the next one (see
	 * tests/bench/RESULTS.md), which the running caller starts. */
	while (ws->inval_running && ws->inval_done < mine)
		pthread_cond_wait(&ws->inval_cv, &ws->lock);
	if (ws->inval_done >= mine) {
		pthread_mutex_unlock(&ws->lock);
		return;
	}
	ws->inval_running = true;
	while (ws->inval_done < ws->inval_asked) {
		uint64_t covers = ws->inval_asked;
		workspace_invalidate_pass(ws);
		pthread_mutex_lock(&ws->lock);
		ws->inval_done = covers;
		pthread_cond_broadcast(&ws->inval_cv);
	}
	ws->inval_running = false;
	pthread_cond_broadcast(&ws->inval_cv);
	pthread_mutex_unlock(&ws->lock);
}

/* Whether the kernel may still hold attributes given at *shown_ms: it
 * keeps them attr_timeout from when it got the answer, which is a little
 * after *shown_ms (hence the margin). Clears the mark: the pass that asks
 * drops them. ws->lock held. */
static bool kernel_may_hold(struct wscache *c, uint64_t *shown_ms)
{
	const uint64_t margin_ms = 1000;
	uint64_t at = *shown_ms;
	if (!at)
		return false;
	*shown_ms = 0;
	return common_now_ms() - at <= (uint64_t)c->cfg.attr_timeout_ms + margin_ms;
}

/* Tells the kernel to drop what it holds of every path this mount showed
 * within attr_timeout (older answers have expired there already), and of
 * open files (their pages); called with ws->lock held, returns with it
 * released. */
static void workspace_invalidate_pass(struct workspace *ws)
{
	struct wscache *c = ws->c;
	/* The kernel may hold pages and sizes of files a command changed:
	 * everything this mount showed (cached files, listed entries). */
	char **paths = NULL;
	size_t n = 0, cap = 0;
	bool full = !c->cfg.invalidate;
#define ADD_PATH(expr)                                                                   \
	do {                                                                             \
		if (full || n >= 50000)                                                  \
			break;                                                           \
		if (n == cap) {                                                          \
			cap = cap ? cap * 2 : 256;                                       \
			char **p_ = realloc(paths, cap * sizeof(*p_));                   \
			if (!p_) {                                                       \
				full = true;                                             \
				break;                                                   \
			}                                                                \
			paths = p_;                                                      \
		}                                                                        \
		if ((paths[n] = (expr)))                                                 \
			n++;                                                             \
	} while (0)
	for (struct wsfile *f = ws->all; f; f = f->ws_next)
		if (f->path && !f->dirty &&
		    (f->opens > 0 || kernel_may_hold(c, &f->shown_ms)))
			ADD_PATH(strdup(f->path));
	for (size_t i = 0; i < ws->dirs.nb && !full; i++)
		for (struct hlink *l = ws->dirs.b[i]; l && !full; l = l->next) {
			struct wsdir *d = htab_entry(l, struct wsdir, h);
			if (!d->loaded || d->err || !kernel_may_hold(c, &d->shown_ms))
				continue;
			for (size_t k = 0; k < d->n && !full; k++)
				if (kernel_may_hold(c, &d->ents[k].shown_ms))
					ADD_PATH(ws_join(d->path, d->ents[k].name));
		}
#undef ADD_PATH
	pthread_mutex_unlock(&ws->lock);
	for (size_t i = 0; i < n; i++) {
		ws_kernel_invalidate(ws, paths[i]);
		free(paths[i]);
	}
	free(paths);
}
