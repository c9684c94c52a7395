/*
 * spare.c — empty cache files made ahead of need.
 *
 * A new cache file costs an inode and a directory entry: 0.1–0.5 ms on the
 * ext4 of this project's test machines, more than the GET of a small file.
 * Every cold read and every create of a workspace file made one, under its
 * workspace's lock, before its request could go on. A thread keeps up to
 * WS_SPARE_MAX empty cache files made and open; file_new takes one when
 * there is one and makes its own otherwise (the first new file starts the
 * thread), so a burst of small files waits for no inode while the thread
 * keeps up.
 *
 * Spares exist only once the restore has run (it deletes the cache files
 * nothing refers to, which spares are until taken); the ones left at
 * unmount are deleted, and after a crash the next restore deletes them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "workspace_i.h"
#include "common/thread.h"

#define WS_SPARE_MAX 16

struct wsspare {
	char *path;
	int fd;
};

struct wsspares {
	pthread_mutex_t lock; /* a leaf: file_new takes it under ws->lock */
	pthread_cond_t cond;  /* with lock: one was taken, stop */
	struct wsspare s[WS_SPARE_MAX];
	int n;
	pthread_t tid;
	/* Started by the first take, not by spare_start: the restore runs
	 * before the daemon forks into the background, and a thread does
	 * not cross a fork. */
	bool started, stop;
};

static void *spare_thread(void *arg)
{
	struct wscache *c = arg;
	struct wsspares *sp = c->spares;
	pthread_mutex_lock(&sp->lock);
	while (!sp->stop) {
		if (sp->n == WS_SPARE_MAX) {
			pthread_cond_wait(&sp->cond, &sp->lock);
			continue;
		}
		pthread_mutex_unlock(&sp->lock);
		char *path = cache_name_new(c);
		int fd = path ? open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
		pthread_mutex_lock(&sp->lock);
		if (fd < 0) {
			/* no room, no memory: file_new makes its own (and
			 * says why) until a take wakes this again */
			free(path);
			pthread_cond_wait(&sp->cond, &sp->lock);
			continue;
		}
		if (sp->stop || sp->n == WS_SPARE_MAX) {
			close(fd);
			unlink(path);
			free(path);
			continue;
		}
		sp->s[sp->n++] = (struct wsspare){path, fd};
	}
	pthread_mutex_unlock(&sp->lock);
	return NULL;
}

void spare_start(struct wscache *c)
{
	if (c->spares)
		return;
	struct wsspares *sp = calloc(1, sizeof(*sp));
	if (!sp)
		return;
	pthread_mutex_init(&sp->lock, NULL);
	common_cond_init(&sp->cond);
	c->spares = sp;
}

/* sp->lock held. */
static void spare_thread_start(struct wscache *c, struct wsspares *sp)
{
	sp->started = common_thread_start(&sp->tid, spare_thread, c) == 0;
	if (!sp->started)
		sp->stop = true; /* no spares then: file_new makes its own */
}

bool spare_take(struct wscache *c, char **path, int *fd)
{
	struct wsspares *sp = c->spares;
	if (!sp)
		return false;
	pthread_mutex_lock(&sp->lock);
	if (!sp->started && !sp->stop)
		spare_thread_start(c, sp);
	bool got = sp->n > 0;
	if (got) {
		struct wsspare s = sp->s[--sp->n];
		*path = s.path;
		*fd = s.fd;
		WS_COUNT(c, spares_taken, 1);
	}
	pthread_cond_signal(&sp->cond);
	pthread_mutex_unlock(&sp->lock);
	return got;
}

int spare_ready(struct wscache *c)
{
	struct wsspares *sp = c->spares;
	if (!sp)
		return 0;
	pthread_mutex_lock(&sp->lock);
	int n = sp->n;
	pthread_mutex_unlock(&sp->lock);
	return n;
}

void spare_stop(struct wscache *c)
{
	struct wsspares *sp = c->spares;
	if (!sp)
		return;
	pthread_mutex_lock(&sp->lock);
	sp->stop = true;
	bool started = sp->started;
	pthread_cond_broadcast(&sp->cond);
	pthread_mutex_unlock(&sp->lock);
	if (started)
		pthread_join(sp->tid, NULL);
	for (int i = 0; i < sp->n; i++) {
		close(sp->s[i].fd);
		unlink(sp->s[i].path);
		free(sp->s[i].path);
	}
	pthread_cond_destroy(&sp->cond);
	pthread_mutex_destroy(&sp->lock);
	free(sp);
	c->spares = NULL;
}
