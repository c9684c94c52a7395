/*
 * fetch.c — downloads of workspace files into their cache files (struct
 * wsfetch, workspace_i.h): one at a time per file, on a thread of its own
 * (bounded), readers waiting only for the range they read, interruptible,
 * stopped at unmount. Its room on the disk is taken up front (cache.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "workspace_i.h"
#include "common/thread.h"

static void fetch_free(struct wsfetch *fe)
{
	pthread_cond_destroy(&fe->cond);
	free(fe->url);
	free(fe->path);
	free(fe);
}

void cache_fetch_put(struct wsfetch *fe)
{
	if (fe && --fe->refs == 0)
		fetch_free(fe);
}

int cache_fetch_begin(struct wsfile *f, struct wsfetch **out)
{
	struct workspace *ws = f->ws;
	struct wscache *c = ws->c;
	*out = NULL;
	/* Nothing else changes the content: f->mx is held and no download
	 * runs. The new content is written from the start. */
	f->crc_ok = false; /* the upload of what comes sums the file */
	if (ws_cache_truncate_fd(f->fd, 0) < 0 || lseek(f->fd, 0, SEEK_SET) < 0) {
		ws_log(ws, "cannot empty a cache file: %s", strerror(errno));
		return -EIO;
	}
	struct wsfetch *fe = calloc(1, sizeof(*fe));
	if (!fe)
		return -ENOMEM;
	common_cond_init(&fe->cond);

	pthread_mutex_lock(&ws->lock);
	int rc = 0;
	if (!f->path || !ws->url) {
		rc = f->path ? -ENOTCONN : -ENOENT;
	} else {
		fe->path = strdup(f->path);
		fe->url = strdup(ws->url);
		if (!fe->path || !fe->url)
			rc = -ENOMEM;
	}
	if (rc == 0) {
		/* Room for what the listing announced, when it is known; it
		 * is the file's size until the download ends. */
		const char *name;
		char *parent = ws_parent(f->path, &name);
		struct wsentry *e =
		    parent ? dir_find(dir_cached(ws, parent), name) : NULL;
		if (e) {
			fe->size_known = true;
			fe->expect = e->size;
			f->mtime = e->seen; /* the time the listing shows for it */
		}
		free(parent);
		rc = cache_reserve(c, f, fe->expect);
	}
	if (rc == 0)
		rc = file_ref(f); /* the download's own */
	if (rc < 0) {
		cache_account(f, 0);
		pthread_mutex_unlock(&ws->lock);
		fetch_free(fe);
		return rc;
	}
	cache_account(f, fe->expect);
	pthread_mutex_lock(&c->lock);
	c->fetch_expect += fe->expect; /* its room is taken: see room_measure (cache.c) */
	pthread_mutex_unlock(&c->lock);
	f->present = false;
	fe->wake_at = UINT64_MAX;
	fe->f = f;
	fe->epoch = ws->epoch;
	fe->refs = 2;
	atomic_store(&f->fetch, fe);
	pthread_mutex_unlock(&ws->lock);
	*out = fe;
	return 0;
}

/* Called by the backend after each piece of the body is in the file. */
static bool fetch_progress(void *ctx, uint64_t written)
{
	struct wsfetch *fe = ctx;
	struct workspace *ws = fe->f->ws;
	struct wscache *c = ws->c;
	if (written > fe->counted) { /* only this thread writes counted */
		atomic_fetch_add(&c->fetch_written, written - fe->counted);
		fe->counted = written;
	}
	atomic_store(&fe->avail, written);
	/* A reader sets wake_at before it looks at avail again (seq_cst both
	 * ways): either it sees the new avail, or this sees its wake_at. The
	 * readers wake once their bytes are there, not at every piece. */
	if (written >= atomic_load(&fe->wake_at)) {
		pthread_mutex_lock(&ws->lock);
		atomic_store(&fe->wake_at, UINT64_MAX);
		pthread_cond_broadcast(&fe->cond);
		pthread_mutex_unlock(&ws->lock);
	}
	/* Also called once a second while nothing arrives: an unmount
	 * (the session ends before fetch_stop is set) stops a silent
	 * download too. */
	if (c->cfg.exited && c->cfg.exited(c->cfg.kernel_ctx))
		return false;
	return !atomic_load(&c->fetch_stop);
}

int cache_fetch_run(struct wsfetch *fe)
{
	struct wsfile *f = fe->f;
	struct workspace *ws = f->ws;
	struct wscache *c = ws->c;
	int fd = f->fd; /* stays open: the download holds a reference */
	uint64_t got = 0;
	struct backend_error err;
	/* Bounded by the listed size (plus slack), when there is one. */
	enum backend_status st =
	    backend_file_get_progress(c->cfg.backend, fe->url, fe->path, fd,
				      fe->size_known ? fe->expect : BACKEND_SIZE_UNKNOWN,
				      fetch_progress, fe, &got, &err);
	bool stopping = atomic_load(&c->fetch_stop);
	int rc = st == BACKEND_OK ? 0 : -ws_backend_errno(st);
	if (rc < 0) {
		if (st != BACKEND_NOT_FOUND && !stopping)
			ws_log(ws, "download failed: %s", err.message);
		/* Readers learn of the failure before the part written goes
		 * (a read cut short by it then answers the error), and the
		 * part goes before another download may start (f->fetch). */
		pthread_mutex_lock(&ws->lock);
		fe->err = rc;
		atomic_store(&fe->done, true);
		pthread_cond_broadcast(&fe->cond);
		pthread_mutex_unlock(&ws->lock);
		int trc = ws_cache_truncate_fd(fd, 0);
		if (trc < 0)
			ws_log(ws, "cannot empty a cache file: %s", strerror(-trc));
		got = 0;
	} else {
		struct stat sb;
		if (fstat(fd, &sb) == 0)
			got = (uint64_t)sb.st_size;
	}

	char *resized = NULL;
	pthread_mutex_lock(&ws->lock);
	cache_account(f, got);
	/* What it wrote is on the disk now, or gone with a failure. */
	pthread_mutex_lock(&c->lock);
	c->fetch_expect -= fe->expect;
	atomic_fetch_sub(&c->fetch_written, fe->counted);
	if (rc == 0 && got > fe->expect)
		c->room -= (int64_t)(got - fe->expect); /* grew since the listing */
	pthread_mutex_unlock(&c->lock);
	/* The listing is another one after a command: not for it. */
	bool same = f->path && strcmp(f->path, fe->path) == 0 && fe->epoch == ws->epoch;
	if (rc == 0) {
		f->present = true;
		f->remote_exists = true;
		f->epoch = fe->epoch;
		WS_COUNT(c, misses, 1);
		WS_COUNT(c, fetched_bytes, got);
		if (same)
			dir_upsert(ws, fe->path, got, false, NULL);
		/* The kernel was told the listing's size. */
		if (same && fe->size_known && got != fe->expect)
			resized = strdup(fe->path);
	} else {
		f->present = false;
		if (st == BACKEND_NOT_FOUND && same)
			dir_remove(ws, fe->path);
	}
	fe->err = rc;
	atomic_store(&fe->done, true);
	pthread_cond_broadcast(&fe->cond);
	atomic_store(&f->fetch, NULL);
	cache_fetch_put(fe);
	file_unref(f);
	cache_trim(c, ws); /* read by nobody any more, it may be the first to go */
	pthread_mutex_unlock(&ws->lock);
	if (resized && !stopping)
		ws_kernel_invalidate(ws, resized);
	free(resized);
	return rc;
}

/* A thread running one download; c->lock guards the list and finished. */
struct fetch_worker {
	struct fetch_worker *next;
	pthread_t tid;
	struct wsfetch *fe;
	bool finished; /* the download is over: the thread only exits now */
};

static void *fetch_thread(void *arg)
{
	struct fetch_worker *w = arg;
	struct wscache *c = w->fe->f->ws->c;
	cache_fetch_run(w->fe);
	pthread_mutex_lock(&c->lock);
	w->finished = true;
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* Takes the workers whose download is over (all, with every) off the
 * list and joins them: a thread is gone, its exit handlers run, only
 * once joined. c->lock not held. */
static void fetch_workers_join(struct wscache *c, bool every)
{
	struct fetch_worker *done = NULL;
	pthread_mutex_lock(&c->lock);
	for (struct fetch_worker **p = &c->fetch_workers; *p;) {
		struct fetch_worker *w = *p;
		if (every || w->finished) {
			*p = w->next;
			w->next = done;
			done = w;
		} else {
			p = &w->next;
		}
	}
	pthread_mutex_unlock(&c->lock);
	while (done) {
		struct fetch_worker *w = done;
		done = w->next;
		pthread_join(w->tid, NULL);
		free(w);
	}
}

bool cache_fetch_spawn(struct wsfetch *fe)
{
	if (!fe->size_known || fe->expect < WS_STREAM_MIN)
		return false;
	struct wscache *c = fe->f->ws->c;
	fetch_workers_join(c, false);
	struct fetch_worker *w = calloc(1, sizeof(*w));
	if (!w)
		return false;
	w->fe = fe;
	/* Listed as it starts, under the lock: a stop either comes before
	 * (no thread, the caller runs the download, which stops at once) or
	 * finds it in the list and joins it. */
	pthread_mutex_lock(&c->lock);
	int rc = EAGAIN;
	if (!atomic_load(&c->fetch_stop))
		rc = common_thread_start(&w->tid, fetch_thread, w);
	if (rc == 0) {
		w->next = c->fetch_workers;
		c->fetch_workers = w;
	}
	pthread_mutex_unlock(&c->lock);
	if (rc != 0) {
		free(w);
		return false;
	}
	return true;
}

/* One slice of a wait on fe (its ws->lock held): true when the FUSE
 * request was interrupted. */
static bool interrupted_wait(struct wsfetch *fe, struct workspace *ws)
{
	struct wscache *c = ws->c;
	if (c->cfg.interrupted && c->cfg.interrupted(c->cfg.kernel_ctx))
		return true;
	struct timespec ts;
	common_deadline_in(&ts, 100);
	pthread_cond_timedwait(&fe->cond, &ws->lock, &ts);
	return false;
}

int cache_fetch_wait(struct wsfetch *fe, uint64_t end)
{
	if (atomic_load(&fe->done))
		return fe->err;
	if (atomic_load(&fe->avail) >= end)
		return 0;
	struct workspace *ws = fe->f->ws;
	int rc = 0;
	pthread_mutex_lock(&ws->lock);
	/* No bound of its own: the backend ends a download that stalls
	 * (stall_seconds) or cannot connect; an interrupt ends the wait. */
	for (;;) {
		if (atomic_load(&fe->done))
			break;
		if (atomic_load(&fe->wake_at) > end)
			atomic_store(&fe->wake_at, end);
		if (atomic_load(&fe->avail) >= end)
			break;
		if (interrupted_wait(fe, ws)) {
			rc = -EINTR;
			break;
		}
	}
	if (rc == 0 && fe->done)
		rc = fe->err;
	pthread_mutex_unlock(&ws->lock);
	return rc;
}

int cache_fetch_idle(struct wsfile *f)
{
	struct workspace *ws = f->ws;
	int rc = 0;
	pthread_mutex_lock(&ws->lock);
	while (f->fetch && rc == 0) {
		struct wsfetch *fe = f->fetch;
		fe->refs++;
		while (f->fetch == fe && rc == 0)
			if (interrupted_wait(fe, ws))
				rc = -EINTR;
		cache_fetch_put(fe);
	}
	pthread_mutex_unlock(&ws->lock);
	return rc;
}

int cache_fetch(struct wsfile *f)
{
	struct workspace *ws = f->ws;
	int rc = cache_fetch_idle(f);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&ws->lock);
	file_expire_after_command(f); /* a download before it brought old bytes */
	bool present = f->present;
	pthread_mutex_unlock(&ws->lock);
	if (present)
		return 0;
	struct wsfetch *fe;
	rc = cache_fetch_begin(f, &fe);
	if (rc < 0)
		return rc;
	rc = cache_fetch_run(fe);
	pthread_mutex_lock(&ws->lock);
	cache_fetch_put(fe);
	pthread_mutex_unlock(&ws->lock);
	return rc;
}

void cache_fetch_stop_all(struct wscache *c)
{
	atomic_store(&c->fetch_stop, true);
	/* Bounded by the backend: the next piece of body stops a download,
	 * and one that stalls fails after stall_seconds. No new thread is
	 * started once fetch_stop is set. */
	fetch_workers_join(c, true);
}

