/*
 * prefetch.c — listings fetched ahead of a tree walk (find, du, ls -R,
 * rsync, git status).
 *
 * A walker reads a directory, then each of its subdirectories in turn, and
 * waits for every listing: one round trip per directory, one after the
 * other. When a directory is read within WS_WALK_MS of a read of its parent
 * (the walker went down a level), the listings of its subdirectories are
 * fetched ahead while the walker reads this one. They land in the listing
 * cache as any fetch does (dir_load: fresh for listing_ttl, dropped by a
 * command's epoch, fetched again when a change here raced them), so the
 * walker's own fetch finds each there or joins the one under way. Nothing
 * is fetched ahead for an `ls` of one directory.
 *
 * Bounds: WS_PREFETCH_THREADS fetches at once for the whole mount, each on
 * a connection of its own (so a walk holds at most that many more
 * connections to its sandbox than the walker's own one); at most
 * WS_PREFETCH_PER_DIR subdirectories per directory read and
 * WS_PREFETCH_QUEUE waiting, past which nothing more is queued. Four at a
 * time, because against a sandbox across a network a walk pays for the
 * listings' waits, not for CPU: with a 2 ms server delay a find went from
 * 846 to 315 ms with four and 690 ms with one (tests/bench/RESULTS.md);
 * on two CPUs with a local server one would be 10-25 % quicker.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "workspace_i.h"
#include "common/thread.h"

#define WS_WALK_MS	    5000
#define WS_PREFETCH_THREADS 4
#define WS_PREFETCH_PER_DIR 64
#define WS_PREFETCH_QUEUE   256

struct prefetch_job {
	struct workspace *ws; /* lives until wscache_free, which stops us first */
	char *path;
};

struct wsprefetch {
	pthread_mutex_t lock; /* a leaf: taken under ws->lock, never around it */
	pthread_cond_t cond;
	struct prefetch_job q[WS_PREFETCH_QUEUE];
	size_t head, n;
	pthread_t tid[WS_PREFETCH_THREADS];
	int nthreads;
	bool stop;
};

static void *prefetch_thread(void *arg)
{
	struct wscache *c = arg;
	struct wsprefetch *p = c->prefetch;
	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->stop && p->n == 0)
			pthread_cond_wait(&p->cond, &p->lock);
		if (p->stop)
			break;
		struct prefetch_job j = p->q[p->head];
		p->head = (p->head + 1) % WS_PREFETCH_QUEUE;
		p->n--;
		pthread_mutex_unlock(&p->lock);
		if (!atomic_load(&c->fetch_stop)) {
			pthread_mutex_lock(&j.ws->lock);
			if (dir_prefetch(j.ws, j.path) > 0)
				WS_COUNT(c, listings_prefetched, 1);
			pthread_mutex_unlock(&j.ws->lock);
		}
		free(j.path);
		pthread_mutex_lock(&p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* Queues path (taken); starts the threads at the first job. p->lock held. */
static void prefetch_queue_locked(struct wscache *c, struct workspace *ws, char *path)
{
	struct wsprefetch *p = c->prefetch;
	if (p->stop || p->n == WS_PREFETCH_QUEUE) {
		free(path);
		return;
	}
	if (p->nthreads < WS_PREFETCH_THREADS) {
		while (p->nthreads < WS_PREFETCH_THREADS &&
		       common_thread_start(&p->tid[p->nthreads], prefetch_thread, c) == 0)
			p->nthreads++;
		if (p->nthreads == 0) {
			free(path);
			return;
		}
	}
	p->q[(p->head + p->n) % WS_PREFETCH_QUEUE] = (struct prefetch_job){ws, path};
	p->n++;
	pthread_cond_signal(&p->cond);
}

void dir_walked(struct workspace *ws, struct wsdir *d, bool pass_start)
{
	struct wscache *c = ws->c;
	uint64_t now = common_now_ms();
	d->pass_ms = now;
	/* once per pass: a large directory is read in many chunks */
	if (!pass_start || !c->prefetch || !d->path[0] || !ws->url || d->err || !d->loaded)
		return;
	const char *name;
	char *parent = ws_parent(d->path, &name);
	struct wsdir *pd = parent ? dir_cached(ws, parent) : NULL;
	free(parent);
	if (!pd || !pd->pass_ms || now - pd->pass_ms > WS_WALK_MS)
		return; /* not going down a tree */
	int queued = 0;
	pthread_mutex_lock(&c->prefetch->lock);
	for (size_t i = 0; i < d->n && queued < WS_PREFETCH_PER_DIR; i++) {
		const struct wsentry *e = &d->ents[i];
		if (!e->is_dir || e->is_link)
			continue;
		char *child = ws_join(d->path, e->name);
		if (!child)
			break;
		if (!dir_wanted(ws, child)) {
			free(child);
			continue;
		}
		prefetch_queue_locked(c, ws, child);
		queued++;
	}
	pthread_mutex_unlock(&c->prefetch->lock);
}

int prefetch_init(struct wscache *c)
{
	struct wsprefetch *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	common_cond_init(&p->cond);
	c->prefetch = p;
	return 0;
}

void prefetch_stop(struct wscache *c)
{
	struct wsprefetch *p = c->prefetch;
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	for (int i = 0; i < p->nthreads; i++)
		pthread_join(p->tid[i], NULL);
	for (; p->n; p->n--, p->head = (p->head + 1) % WS_PREFETCH_QUEUE)
		free(p->q[p->head].path);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
	c->prefetch = NULL;
}
