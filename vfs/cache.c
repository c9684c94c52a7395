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

#include "common/crc.h"
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
 * keeping it would push out everything else. ws->lock and c->lock held. */
static void idle_update_locked(struct wsfile *f)
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

/* The same, ws->lock held only. */
static void idle_update(struct wsfile *f)
{
	struct wscache *c = f->ws->c;
	if (file_idle(f) == f->idle) /* f->idle is written with ws->lock too */
		return;
	pthread_mutex_lock(&c->lock);
	idle_update_locked(f);
	pthread_mutex_unlock(&c->lock);
}

char *cache_name_new(struct wscache *c)
{
	char name[64];
	pthread_mutex_lock(&c->lock);
	uint64_t seq = c->name_seq++;
	unsigned int r = (unsigned)rand_r(&c->rand_state);
	pthread_mutex_unlock(&c->lock);
	snprintf(name, sizeof(name), "%016" PRIx64 "-%08x", common_now_ms() * 1000 + seq, r);
	return ws_join(c->files_dir, name);
}

struct wsfile *file_new(struct workspace *ws, const char *path, const char *adopt)
{
	struct wscache *c = ws->c;
	struct wsfile *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->fd = -1;
	f->path = strdup(path);
	if (adopt)
		f->cache_path = strdup(adopt);
	else if (!spare_take(c, &f->cache_path, &f->fd))
		f->cache_path = cache_name_new(c);
	if (!f->path || !f->cache_path)
		goto fail;
	if (!adopt && f->fd < 0) {
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
	f->ws_prev = NULL;
	if (ws->all)
		ws->all->ws_prev = f;
	ws->all = f;
	pthread_mutex_lock(&c->lock);
	c->nfiles++;
	pthread_mutex_unlock(&c->lock);
	/* Not idle yet: every caller references it or makes it pending
	 * (restore, which sets its size first) next. */
	return f;
fail:
	if (f->fd >= 0) { /* a spare taken, no memory for the rest */
		close(f->fd);
		unlink(f->cache_path);
	}
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
	WS_COUNT(ws->c, versions, 1);
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
	/* The next open may stream again (read without ws->lock by writes). */
	atomic_store_explicit(&f->early_tried, false, memory_order_relaxed);
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

static void unsaved_unlink(struct wsfile *f)
{
	if (f->unsaved_prev)
		f->unsaved_prev->unsaved_next = f->unsaved_next;
	else
		f->ws->unsaved = f->unsaved_next;
	if (f->unsaved_next)
		f->unsaved_next->unsaved_prev = f->unsaved_prev;
	f->unsaved_next = f->unsaved_prev = NULL;
}

/* Takes f, which nobody uses, out of its workspace and the cache's
 * state: ws->lock and c->lock held. file_dispose then frees it. */
static void file_unhook(struct wsfile *f)
{
	struct workspace *ws = f->ws;
	struct wscache *c = ws->c;
	if (f->ws_prev)
		f->ws_prev->ws_next = f->ws_next;
	else
		ws->all = f->ws_next;
	if (f->ws_next)
		f->ws_next->ws_prev = f->ws_prev;
	c->nfiles--;
	c->pending_files -= f->pending;
	if (f->path)
		htab_del(&ws->files, &f->h);
	due_remove(f);
	if (f->idle)
		idle_unlink(c, f);
	c->bytes -= f->size;
	if (f->dirty || f->pending) {
		c->dirty_bytes -= f->size;
		c->unsaved_files--;
		unsaved_unlink(f);
	}
	if (f->version_of) {
		free(f->version_of);
		f->version_of = NULL;
		ws->old_versions_open--;
	}
}

/* Closes, removes and frees an unhooked file: nothing reaches it any
 * more, so no lock is needed (c->lock is not held across the I/O). */
static void file_dispose(struct wsfile *f)
{
	if (f->fd >= 0)
		close(f->fd);
	unlink(f->cache_path);
	pthread_mutex_destroy(&f->mx);
	free(f->path);
	free(f->cache_path);
	free(f);
}

/* Frees f: ws->lock held, nobody uses it. */
static void file_free(struct wsfile *f)
{
	struct wscache *c = f->ws->c;
	pthread_mutex_lock(&c->lock);
	file_unhook(f);
	pthread_mutex_unlock(&c->lock);
	file_dispose(f);
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
	pthread_mutex_lock(&c->lock);
	bool was = f->dirty || f->pending;
	c->pending_files += (size_t)pending - (size_t)f->pending;
	f->dirty = dirty;
	f->pending = pending;
	bool is = f->dirty || f->pending;
	if (was && !is) {
		c->dirty_bytes -= f->size;
		c->unsaved_files--;
		unsaved_unlink(f);
	} else if (!was && is) {
		c->dirty_bytes += f->size;
		c->unsaved_files++;
		f->unsaved_prev = NULL;
		f->unsaved_next = f->ws->unsaved;
		if (f->ws->unsaved)
			f->ws->unsaved->unsaved_prev = f;
		f->ws->unsaved = f;
	}
	due_update(f);
	idle_update_locked(f);
	pthread_mutex_unlock(&c->lock);
}

void cache_set_dirty(struct wsfile *f, bool dirty)
{
	cache_set_state(f, dirty, f->pending);
}

void cache_drop_idle(struct workspace *ws)
{
	struct wsfile *f = ws->all;
	while (f) {
		struct wsfile *next = f->ws_next;
		if (f->idle) {
			WS_COUNT(ws->c, evictions, 1);
			f->unlinked = true;
			file_free(f);
		}
		f = next;
	}
}

/* Evicts idle copies from the head of c->idle, c->lock held: until they
 * are within max_bytes (trim), or until need bytes went. held is the
 * workspace whose lock the caller holds (may be NULL); another's copies
 * go only if its lock is free now (trylock: c->lock is held), else they
 * are skipped, to go at a later trim. The evicted files are unhooked and
 * put on *gone, for file_dispose once c->lock is released. Returns the
 * bytes that went; *busy (if given) says whether some were skipped. */
static uint64_t evict_idle(struct wscache *c, struct workspace *held, bool trim,
			   uint64_t need, struct wsfile **gone, bool *busy)
{
	uint64_t freed = 0;
	struct wsfile *v = c->idle_head;
	while (v && (trim ? c->idle_bytes > c->cfg.max_bytes : freed < need)) {
		struct wsfile *next = v->idle_next;
		struct workspace *vws = v->ws;
		if (vws == held || pthread_mutex_trylock(&vws->lock) == 0) {
			WS_COUNT(c, evictions, 1);
			freed += v->size;
			v->unlinked = true;
			file_unhook(v);
			v->ws_next = *gone;
			*gone = v;
			if (vws != held)
				pthread_mutex_unlock(&vws->lock);
		} else if (busy) {
			*busy = true;
		}
		v = next;
	}
	return freed;
}

static void dispose_all(struct wsfile *gone)
{
	while (gone) {
		struct wsfile *next = gone->ws_next;
		file_dispose(gone);
		gone = next;
	}
}

void cache_trim(struct wscache *c, struct workspace *held)
{
	struct wsfile *gone = NULL;
	pthread_mutex_lock(&c->lock);
	if (c->idle_bytes > c->cfg.max_bytes)
		evict_idle(c, held, true, 0, &gone, NULL);
	pthread_mutex_unlock(&c->lock);
	dispose_all(gone);
}

/* How long a measure of the free space serves, and how close to the
 * reserve every growth measures it again: a statvfs per write only near
 * the edge, where it decides. */
#define ROOM_TTL_MS 200
#define ROOM_EDGE   (64LL << 20)
#define ROOM_BUSY_TRIES 100

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
	uint64_t written = atomic_load(&c->fetch_written);
	uint64_t owed = c->fetch_expect > written ? c->fetch_expect - written : 0;
	c->room = (int64_t)avail - (int64_t)c->reserve_bytes - (int64_t)owed;
}

/* Takes need bytes of room above the reserve for f (f->ws->lock and
 * c->lock held; c->lock is dropped while evicted copies are removed). */
static int room_take(struct wscache *c, struct wsfile *f, uint64_t need)
{
	/* A truncate to exabytes is no room anyone has, and no overflow. */
	int64_t want = need > (uint64_t)INT64_MAX / 4 ? INT64_MAX / 4 : (int64_t)need;
	uint64_t now = common_now_ms();
	if (!c->room_ms || now - c->room_ms >= ROOM_TTL_MS || c->room < want + ROOM_EDGE)
		room_measure(c, now);
	/* Clean copies nobody uses make room, however far within max_bytes
	 * the cache is (none goes in vain). A copy of a workspace whose lock
	 * another thread holds this instant is skipped; such locks are held
	 * briefly (never across a request), so it is tried again for up to
	 * ROOM_BUSY_TRIES ms before the write is refused. */
	for (int tries = 0;
	     c->room < want && c->idle_head && c->room + (int64_t)c->idle_bytes >= want &&
	     tries < ROOM_BUSY_TRIES;
	     tries++) {
		struct wsfile *gone = NULL;
		bool busy = false;
		evict_idle(c, f->ws, false, (uint64_t)(want - c->room), &gone, &busy);
		pthread_mutex_unlock(&c->lock);
		dispose_all(gone); /* their space is free once they are gone */
		if (busy)
			usleep(1000);
		pthread_mutex_lock(&c->lock);
		room_measure(c, common_now_ms());
		if (!busy)
			break;
	}
	if (c->room < want) {
		WS_COUNT(c, enospc, 1);
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
	pthread_mutex_lock(&c->lock);
	int rc = room_take(c, f, new_size - f->size);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

static int cache_health_locked(struct wscache *c, FILE *out)
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

int cache_health(struct wscache *c, FILE *out)
{
	pthread_mutex_lock(&c->lock);
	int rc = cache_health_locked(c, out);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* Accounts f's new size (ws->lock held). */
void cache_account(struct wsfile *f, uint64_t size)
{
	struct wscache *c = f->ws->c;
	pthread_mutex_lock(&c->lock);
	c->bytes = c->bytes - f->size + size;
	if (f->idle)
		c->idle_bytes = c->idle_bytes - f->size + size;
	if (f->dirty || f->pending)
		c->dirty_bytes = c->dirty_bytes - f->size + size;
	f->size = size;
	pthread_mutex_unlock(&c->lock);
}

int cache_truncate(struct wsfile *f, uint64_t size)
{
	struct wscache *c = f->ws->c;
	earlyput_abandon(f); /* the bytes it sent are not the file any more */
	pthread_mutex_lock(&f->ws->lock);
	int rc = cache_reserve(c, f, size);
	pthread_mutex_unlock(&f->ws->lock);
	if (rc < 0)
		return rc;
	int trc = ws_cache_truncate_fd(f->fd, (off_t)size);
	if (trc < 0) {
		f->crc_ok = false;
		return trc;
	}
	if (size == 0) {
		/* Empty again (O_TRUNC): a running crc starts over. */
		f->crc_ok = true;
		f->crc = 0;
		f->crc_len = 0;
	} else if (size != f->crc_len) {
		f->crc_ok = false;
	}
	pthread_mutex_lock(&f->ws->lock);
	f->present = true;
	if (!f->dirty)
		cache_set_dirty(f, true);
	cache_account(f, size);
	f->wgen++;
	clock_gettime(CLOCK_REALTIME, &f->mtime);
	pthread_mutex_unlock(&f->ws->lock);
	return 0;
}

void cache_crc_write(struct wsfile *f, const void *buf, size_t n, uint64_t off)
{
	if (!f->crc_ok || off != f->crc_len) {
		f->crc_ok = false; /* out of order: the upload reads the file */
		return;
	}
	f->crc = common_crc32(f->crc, buf, n);
	f->crc_len += n;
}

void cache_stats(struct wscache *c, FILE *out)
{
	uint64_t versions = atomic_load_explicit(&c->n.versions, memory_order_relaxed);
	fprintf(out, "cache_versions %" PRIu64 "\n", versions);
	dir_stats(c, out);
}

bool workspace_held(struct workspace *ws)
{
	if (!ws)
		return false;
	bool held = false;
	pthread_mutex_lock(&ws->lock);
	for (struct wsfile *f = ws->all; f && !held; f = f->ws_next)
		held = f->opens > 0 || f->dirty || f->pending;
	pthread_mutex_unlock(&ws->lock);
	return held;
}
