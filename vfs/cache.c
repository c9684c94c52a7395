/*
 * cache.c — whole-file cache files: one per workspace file in use, under
 * cache_dir/files (0600). Reads and writes of an open file go to its
 * cache file.
 *
 * Two bounds. max_bytes bounds the copies kept after close: clean cache
 * files nobody uses (c->idle) are evicted past it, least recently used
 * first, and a file larger than max_bytes first of all once it is one. A
 * file in use (open, downloading, unsaved) is not counted and never
 * evicted, so that a file of any size can be read and written; what
 * bounds it is the file system under the cache directory, which keeps
 * reserve_percent of its size free: growth past that is ENOSPC, once the
 * clean copies nobody uses have been evicted for room. Unsaved data is
 * never dropped.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include "workspace_i.h"

struct wsfile *file_find(struct workspace *ws, const char *path)
{
	struct hlink *l = htab_find(&ws->files, path);
	return l ? htab_entry(l, struct wsfile, h) : NULL;
}

void file_expire_after_command(struct wsfile *f)
{
	if (f->present && !f->dirty && !f->pending && f->epoch != f->ws->epoch)
		f->present = false;
}

bool file_live(const struct wsfile *f)
{
	return f->refs > 0 || f->dirty || f->pending;
}

/* f is one of the copies eviction may take: nobody uses it, nothing of
 * it is unsaved. */
static bool file_idle(const struct wsfile *f)
{
	return f->refs == 0 && !f->dirty && !f->pending && !f->unlinked;
}

static void idle_unlink(struct wscache *c, struct wsfile *f)
{
	if (f->idle_prev)
		f->idle_prev->idle_next = f->idle_next;
	else
		c->idle_head = f->idle_next;
	if (f->idle_next)
		f->idle_next->idle_prev = f->idle_prev;
	else
		c->idle_tail = f->idle_prev;
	f->idle_prev = f->idle_next = NULL;
	f->idle = false;
	c->idle_bytes -= f->size;
}

/* Puts f in c->idle or takes it out, as its state says: at the tail (the
 * most recently used), or at the head when it is larger than the whole
 * cache may keep, since it cannot stay within max_bytes anyway and
 * keeping it would push out everything else. */
static void idle_update(struct wsfile *f)
{
	struct wscache *c = f->ws->c;
	bool idle = file_idle(f);
	if (idle == f->idle)
		return;
	if (!idle) {
		idle_unlink(c, f);
		return;
	}
	f->idle = true;
	c->idle_bytes += f->size;
	if (f->size > c->cfg.max_bytes) {
		f->idle_prev = NULL;
		f->idle_next = c->idle_head;
		if (c->idle_head)
			c->idle_head->idle_prev = f;
		else
			c->idle_tail = f;
		c->idle_head = f;
	} else {
		f->idle_next = NULL;
		f->idle_prev = c->idle_tail;
		if (c->idle_tail)
			c->idle_tail->idle_next = f;
		else
			c->idle_head = f;
		c->idle_tail = f;
	}
}

struct wsfile *file_new(struct workspace *ws, const char *path, const char *adopt)
{
	struct wscache *c = ws->c;
	struct wsfile *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->path = strdup(path);
	if (adopt) {
		f->cache_path = strdup(adopt);
	} else {
		char name[64];
		snprintf(name, sizeof(name), "%016" PRIx64 "-%08x",
			 common_now_ms() * 1000 + c->name_seq++,
			 (unsigned)rand_r(&c->rand_state));
		f->cache_path = ws_join(c->files_dir, name);
	}
	if (!f->path || !f->cache_path)
		goto fail;
	f->fd = -1;
	if (!adopt) {
		/* kept open for the file_ref that every caller makes next */
		f->fd = open(f->cache_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (f->fd < 0)
			goto fail;
	}
	/* A new cache file is empty: its running crc starts here. */
	f->crc_ok = !adopt;
	pthread_mutex_init(&f->mx, NULL);
	f->ws = ws;
	f->epoch = ws->epoch;
	clock_gettime(CLOCK_REALTIME, &f->mtime);
	struct wsfile *old = file_find(ws, path);
	if (old && !old->dirty && !old->pending)
		file_detach(old); /* a stale copy under the same name */
	f->h.key = f->path;
	htab_add(&ws->files, &f->h);
	f->ws_next = ws->all;
	ws->all = f;
	/* Not idle yet: every caller references it or makes it pending
	 * (restore, which sets its size first) next. */
	return f;
fail:
	free(f->path);
	free(f->cache_path);
	free(f);
	return NULL;
}

bool file_needs_version(const struct wsfile *f)
{
	if (f->dirty || f->pending || f->writers > 0 || !f->path)
		return false;
	/* A download from before the last command brings old content: it
	 * ends into this copy, for the handles that read it, and nobody
	 * waits for it. One since then is the new content. */
	if (f->fetch)
		return f->fetch->epoch != f->ws->epoch;
	return f->opens > 0 && !f->present;
}

struct wsfile *file_supersede(struct wsfile *f)
{
	struct workspace *ws = f->ws;
	char *was = strdup(f->path);
	if (!was)
		return NULL;
	/* file_new takes the name from f (a clean copy: file_detach), and
	 * f lives on with its handles. */
	struct wsfile *g = file_new(ws, was, NULL);
	if (!g) {
		free(was);
		return NULL;
	}
	g->remote_exists = true;
	ws->c->n.versions++;
	if (f->opens > 0) {
		g->kernel_mixed = true;
		f->version_of = was;
		ws->old_versions_open++;
	} else {
		free(was); /* only its download is left: nobody reads it */
	}
	return g;
}

void file_closed(struct wsfile *f)
{
	if (f->version_of) {
		free(f->version_of);
		f->version_of = NULL;
		f->ws->old_versions_open--;
	}
}

int file_ref(struct wsfile *f)
{
	if (f->fd < 0) {
		f->fd = open(f->cache_path, O_RDWR | O_CLOEXEC);
		if (f->fd < 0)
			return -errno;
	}
	f->refs++;
	idle_update(f);
	return 0;
}

/* Frees f: c->lock held, nobody uses it. */
static void file_free(struct wsfile *f)
{
	struct workspace *ws = f->ws;
	struct wscache *c = ws->c;
	for (struct wsfile **p = &ws->all; *p; p = &(*p)->ws_next)
		if (*p == f) {
			*p = f->ws_next;
			break;
		}
	if (f->path)
		htab_del(&ws->files, &f->h);
	if (f->idle)
		idle_unlink(c, f);
	if (f->fd >= 0)
		close(f->fd);
	unlink(f->cache_path);
	c->bytes -= f->size;
	if (f->dirty || f->pending) {
		c->dirty_bytes -= f->size;
		c->unsaved_files--;
	}
	file_closed(f);
	pthread_mutex_destroy(&f->mx);
	free(f->path);
	free(f->cache_path);
	free(f);
}

void file_unref(struct wsfile *f)
{
	if (--f->refs > 0)
		return;
	if (f->fd >= 0) {
		close(f->fd);
		f->fd = -1;
	}
	if (f->unlinked && !f->pending)
		file_free(f);
	else
		idle_update(f);
}

void file_detach(struct wsfile *f)
{
	if (f->path) {
		htab_del(&f->ws->files, &f->h);
		free(f->path);
		f->path = NULL;
	}
	f->unlinked = true;
	cache_set_state(f, false, false);
	f->upload_id = 0;
	if (f->refs == 0)
		file_free(f);
}

void file_drop_clean(struct wsfile *f)
{
	if (f->refs == 0 && !f->dirty && !f->pending) {
		f->unlinked = true;
		file_free(f);
	}
}

void file_set_path(struct wsfile *f, const char *path)
{
	char *p = strdup(path);
	if (!p)
		return;
	if (f->path)
		htab_del(&f->ws->files, &f->h);
	free(f->path);
	f->path = p;
	f->h.key = p;
	htab_add(&f->ws->files, &f->h);
}

void cache_set_state(struct wsfile *f, bool dirty, bool pending)
{
	struct wscache *c = f->ws->c;
	bool was = f->dirty || f->pending;
	f->dirty = dirty;
	f->pending = pending;
	bool is = f->dirty || f->pending;
	if (was && !is) {
		c->dirty_bytes -= f->size;
		c->unsaved_files--;
	} else if (!was && is) {
		c->dirty_bytes += f->size;
		c->unsaved_files++;
	}
	idle_update(f);
}

void cache_set_dirty(struct wsfile *f, bool dirty)
{
	cache_set_state(f, dirty, f->pending);
}

static void evict(struct wscache *c, struct wsfile *v)
{
	c->n.evictions++;
	v->unlinked = true;
	file_free(v);
}

void cache_trim(struct wscache *c)
{
	while (c->idle_head && c->idle_bytes > c->cfg.max_bytes)
		evict(c, c->idle_head);
}

/* How long a measure of the free space serves, and how close to the
 * reserve every growth measures it again: a statvfs per write only near
 * the edge, where it decides. */
#define ROOM_TTL_MS 200
#define ROOM_EDGE   (64LL << 20)

#define MIB(n) ((double)(n) / (1 << 20))

/* Measures c->room (c->lock held). */
static void room_measure(struct wscache *c, uint64_t now)
{
	struct statvfs sv;
	c->room_ms = now ? now : 1;
	if (statvfs(c->cache_dir, &sv) < 0) {
		/* Not known: the file system's own ENOSPC is the limit. */
		c->reserve_bytes = 0;
		c->room = INT64_MAX / 2;
		return;
	}
	uint64_t unit = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
	uint64_t total = (uint64_t)sv.f_blocks * unit;
	uint64_t avail = (uint64_t)sv.f_bavail * unit;
	c->reserve_bytes = total / 100 * c->cfg.reserve_percent;
	/* Downloads running write what they reserved as it comes: the part
	 * still to come is taken already. */
	uint64_t written = __atomic_load_n(&c->fetch_written, __ATOMIC_SEQ_CST);
	uint64_t owed = c->fetch_expect > written ? c->fetch_expect - written : 0;
	c->room = (int64_t)avail - (int64_t)c->reserve_bytes - (int64_t)owed;
}

/* Takes need bytes of room above the reserve for f (c->lock held). */
static int room_take(struct wscache *c, struct wsfile *f, uint64_t need)
{
	/* A truncate to exabytes is no room anyone has, and no overflow. */
	int64_t want = need > (uint64_t)INT64_MAX / 4 ? INT64_MAX / 4 : (int64_t)need;
	uint64_t now = common_now_ms();
	if (!c->room_ms || now - c->room_ms >= ROOM_TTL_MS || c->room < want + ROOM_EDGE)
		room_measure(c, now);
	if (c->room < want && c->idle_head &&
	    c->room + (int64_t)c->idle_bytes >= want) {
		/* Clean copies nobody uses make room, however far within
		 * max_bytes the cache is (none goes in vain). */
		int64_t room = c->room;
		while (c->idle_head && room < want) {
			room += (int64_t)c->idle_head->size;
			evict(c, c->idle_head);
		}
		room_measure(c, now);
	}
	if (c->room < want) {
		c->n.enospc++;
		if (!c->refused)
			ws_log(f->ws,
			       "no room for %s (%.1f MiB more): the file system of %s "
			       "has %.1f MiB free above the reserve the cache leaves "
			       "free (%u%%, %.1f MiB); ENOSPC",
			       f->path ? f->path : "a deleted file", MIB(need),
			       c->cache_dir, MIB(c->room > 0 ? (uint64_t)c->room : 0),
			       c->cfg.reserve_percent, MIB(c->reserve_bytes));
		c->refused = need;
		return -ENOSPC;
	}
	c->room -= want;
	c->refused = 0;
	return 0;
}

int cache_reserve(struct wscache *c, struct wsfile *f, uint64_t new_size)
{
	if (new_size <= f->size)
		return 0;
	return room_take(c, f, new_size - f->size);
}

int cache_health(struct wscache *c, FILE *out)
{
	if (!c->refused)
		return 0;
	/* Room may have been made since (a file deleted elsewhere). */
	room_measure(c, common_now_ms());
	int64_t room = c->room;
	for (struct wsfile *v = c->idle_head; v; v = v->idle_next)
		room += (int64_t)v->size;
	if (room >= (int64_t)c->refused) {
		c->refused = 0;
		return 0;
	}
	fprintf(out,
		"the file system of the cache (%s) has %.1f MiB free above the "
		"reserve the cache leaves free (%u%%, %.1f MiB): a write or download "
		"of %.1f MiB more was refused (ENOSPC); make room there\n",
		c->cache_dir, MIB(c->room > 0 ? (uint64_t)c->room : 0),
		c->cfg.reserve_percent, MIB(c->reserve_bytes), MIB(c->refused));
	return 1;
}

/* Accounts f's new size (c->lock held). */
void cache_account(struct wsfile *f, uint64_t size)
{
	struct wscache *c = f->ws->c;
	c->bytes = c->bytes - f->size + size;
	if (f->idle)
		c->idle_bytes = c->idle_bytes - f->size + size;
	if (f->dirty || f->pending)
		c->dirty_bytes = c->dirty_bytes - f->size + size;
	f->size = size;
}

/* --- downloads ---------------------------------------------------------------*/

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
	if (ftruncate(f->fd, 0) < 0 || lseek(f->fd, 0, SEEK_SET) < 0) {
		ws_log(ws, "cannot empty a cache file: %s", strerror(errno));
		return -EIO;
	}
	struct wsfetch *fe = calloc(1, sizeof(*fe));
	if (!fe)
		return -ENOMEM;
	common_cond_init(&fe->cond);

	pthread_mutex_lock(&c->lock);
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
		pthread_mutex_unlock(&c->lock);
		fetch_free(fe);
		return rc;
	}
	cache_account(f, fe->expect);
	c->fetch_expect += fe->expect; /* its room is taken: see room_measure */
	f->present = false;
	fe->wake_at = UINT64_MAX;
	fe->f = f;
	fe->epoch = ws->epoch;
	fe->refs = 2;
	__atomic_store_n(&f->fetch, fe, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&c->lock);
	*out = fe;
	return 0;
}

/* Called by the backend after each piece of the body is in the file. */
static bool fetch_progress(void *ctx, uint64_t written)
{
	struct wsfetch *fe = ctx;
	struct wscache *c = fe->f->ws->c;
	if (written > fe->counted) { /* only this thread writes counted */
		__atomic_add_fetch(&c->fetch_written, written - fe->counted,
				   __ATOMIC_SEQ_CST);
		fe->counted = written;
	}
	__atomic_store_n(&fe->avail, written, __ATOMIC_SEQ_CST);
	/* A reader sets wake_at before it looks at avail again (seq_cst both
	 * ways): either it sees the new avail, or this sees its wake_at. The
	 * readers wake once their bytes are there, not at every piece. */
	if (written >= __atomic_load_n(&fe->wake_at, __ATOMIC_SEQ_CST)) {
		pthread_mutex_lock(&c->lock);
		__atomic_store_n(&fe->wake_at, UINT64_MAX, __ATOMIC_SEQ_CST);
		pthread_cond_broadcast(&fe->cond);
		pthread_mutex_unlock(&c->lock);
	}
	/* Also called once a second while nothing arrives: an unmount
	 * (the session ends before fetch_stop is set) stops a silent
	 * download too. */
	if (c->cfg.exited && c->cfg.exited(c->cfg.kernel_ctx))
		return false;
	return !__atomic_load_n(&c->fetch_stop, __ATOMIC_SEQ_CST);
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
	bool stopping = __atomic_load_n(&c->fetch_stop, __ATOMIC_SEQ_CST);
	int rc = st == BACKEND_OK ? 0 : -ws_backend_errno(st);
	if (rc < 0) {
		if (st != BACKEND_NOT_FOUND && !stopping)
			ws_log(ws, "download failed: %s", err.message);
		/* Readers learn of the failure before the part written goes
		 * (a read cut short by it then answers the error), and the
		 * part goes before another download may start (f->fetch). */
		pthread_mutex_lock(&c->lock);
		fe->err = rc;
		__atomic_store_n(&fe->done, true, __ATOMIC_SEQ_CST);
		pthread_cond_broadcast(&fe->cond);
		pthread_mutex_unlock(&c->lock);
		if (ftruncate(fd, 0) < 0)
			ws_log(ws, "cannot empty a cache file: %s", strerror(errno));
		got = 0;
	} else {
		struct stat sb;
		if (fstat(fd, &sb) == 0)
			got = (uint64_t)sb.st_size;
	}

	char *resized = NULL;
	pthread_mutex_lock(&c->lock);
	cache_account(f, got);
	/* What it wrote is on the disk now, or gone with a failure. */
	c->fetch_expect -= fe->expect;
	__atomic_sub_fetch(&c->fetch_written, fe->counted, __ATOMIC_SEQ_CST);
	if (rc == 0 && got > fe->expect)
		c->room -= (int64_t)(got - fe->expect); /* grew since the listing */
	/* The listing is another one after a command: not for it. */
	bool same = f->path && strcmp(f->path, fe->path) == 0 && fe->epoch == ws->epoch;
	if (rc == 0) {
		f->present = true;
		f->remote_exists = true;
		f->epoch = fe->epoch;
		c->n.misses++;
		c->n.fetched_bytes += got;
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
	__atomic_store_n(&fe->done, true, __ATOMIC_SEQ_CST);
	pthread_cond_broadcast(&fe->cond);
	__atomic_store_n(&f->fetch, NULL, __ATOMIC_SEQ_CST);
	cache_fetch_put(fe);
	file_unref(f);
	cache_trim(c); /* read by nobody any more, it may be the first to go */
	pthread_mutex_unlock(&c->lock);
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
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	/* Listed as it starts, under the lock: a stop either comes before
	 * (no thread, the caller runs the download, which stops at once) or
	 * finds it in the list and joins it. */
	pthread_mutex_lock(&c->lock);
	int rc = EAGAIN;
	if (!__atomic_load_n(&c->fetch_stop, __ATOMIC_SEQ_CST))
		rc = pthread_create(&w->tid, NULL, fetch_thread, w);
	if (rc == 0) {
		w->next = c->fetch_workers;
		c->fetch_workers = w;
	}
	pthread_mutex_unlock(&c->lock);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		free(w);
		return false;
	}
	return true;
}

/* One slice of a wait on fe (c->lock held): true when the FUSE request
 * was interrupted. */
static bool interrupted_wait(struct wsfetch *fe, struct wscache *c)
{
	if (c->cfg.interrupted && c->cfg.interrupted(c->cfg.kernel_ctx))
		return true;
	struct timespec ts;
	common_deadline_in(&ts, 100);
	pthread_cond_timedwait(&fe->cond, &c->lock, &ts);
	return false;
}

int cache_fetch_wait(struct wsfetch *fe, uint64_t end)
{
	if (__atomic_load_n(&fe->done, __ATOMIC_SEQ_CST))
		return fe->err;
	if (__atomic_load_n(&fe->avail, __ATOMIC_SEQ_CST) >= end)
		return 0;
	struct wscache *c = fe->f->ws->c;
	int rc = 0;
	pthread_mutex_lock(&c->lock);
	/* No bound of its own: the backend ends a download that stalls
	 * (stall_seconds) or cannot connect; an interrupt ends the wait. */
	for (;;) {
		if (__atomic_load_n(&fe->done, __ATOMIC_SEQ_CST))
			break;
		if (__atomic_load_n(&fe->wake_at, __ATOMIC_SEQ_CST) > end)
			__atomic_store_n(&fe->wake_at, end, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&fe->avail, __ATOMIC_SEQ_CST) >= end)
			break;
		if (interrupted_wait(fe, c)) {
			rc = -EINTR;
			break;
		}
	}
	if (rc == 0 && fe->done)
		rc = fe->err;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int cache_fetch_idle(struct wsfile *f)
{
	struct wscache *c = f->ws->c;
	int rc = 0;
	pthread_mutex_lock(&c->lock);
	while (f->fetch && rc == 0) {
		struct wsfetch *fe = f->fetch;
		fe->refs++;
		while (f->fetch == fe && rc == 0)
			if (interrupted_wait(fe, c))
				rc = -EINTR;
		cache_fetch_put(fe);
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int cache_fetch(struct wsfile *f)
{
	struct workspace *ws = f->ws;
	struct wscache *c = ws->c;
	int rc = cache_fetch_idle(f);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&c->lock);
	file_expire_after_command(f); /* a download before it brought old bytes */
	bool present = f->present;
	pthread_mutex_unlock(&c->lock);
	if (present)
		return 0;
	struct wsfetch *fe;
	rc = cache_fetch_begin(f, &fe);
	if (rc < 0)
		return rc;
	rc = cache_fetch_run(fe);
	pthread_mutex_lock(&c->lock);
	cache_fetch_put(fe);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void cache_fetch_stop_all(struct wscache *c)
{
	__atomic_store_n(&c->fetch_stop, true, __ATOMIC_SEQ_CST);
	/* Bounded by the backend: the next piece of body stops a download,
	 * and one that stalls fails after stall_seconds. No new thread is
	 * started once fetch_stop is set. */
	fetch_workers_join(c, true);
}

int cache_truncate(struct wsfile *f, uint64_t size)
{
	struct wscache *c = f->ws->c;
	pthread_mutex_lock(&c->lock);
	int rc = cache_reserve(c, f, size);
	pthread_mutex_unlock(&c->lock);
	if (rc < 0)
		return rc;
	if (ftruncate(f->fd, (off_t)size) < 0) {
		f->crc_ok = false;
		return -errno;
	}
	if (size == 0) {
		/* Empty again (O_TRUNC): a running crc starts over. */
		f->crc_ok = true;
		f->crc = 0;
		f->crc_len = 0;
	} else if (size != f->crc_len) {
		f->crc_ok = false;
	}
	pthread_mutex_lock(&c->lock);
	f->present = true;
	if (!f->dirty)
		cache_set_dirty(f, true);
	cache_account(f, size);
	f->wgen++;
	clock_gettime(CLOCK_REALTIME, &f->mtime);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

void cache_crc_write(struct wsfile *f, const void *buf, size_t n, uint64_t off)
{
	if (!f->crc_ok || off != f->crc_len) {
		f->crc_ok = false; /* out of order: the upload reads the file */
		return;
	}
	f->crc = (uint32_t)crc32_z(f->crc, buf, n);
	f->crc_len += n;
}

void cache_stats(struct wscache *c, FILE *out)
{
	pthread_mutex_lock(&c->lock);
	uint64_t versions = c->n.versions;
	pthread_mutex_unlock(&c->lock);
	fprintf(out, "cache_versions %" PRIu64 "\n", versions);
	dir_stats(c, out);
}

bool workspace_held(struct workspace *ws)
{
	if (!ws)
		return false;
	struct wscache *c = ws->c;
	bool held = false;
	pthread_mutex_lock(&c->lock);
	for (struct wsfile *f = ws->all; f && !held; f = f->ws_next)
		held = f->opens > 0 || f->dirty || f->pending;
	pthread_mutex_unlock(&c->lock);
	return held;
}
