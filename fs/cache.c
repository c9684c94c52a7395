/*
 * cache.c — whole-file cache files: one per workspace file in use, under
 * cache_dir/files (0600). Reads and writes of an open file go to its
 * cache file; the size of all cache files is bounded by max_bytes: clean
 * unused copies are evicted oldest first, dirty data is never dropped
 * (writes fail with ENOSPC instead).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "workspace_i.h"

struct wsfile *file_find(struct workspace *ws, const char *path)
{
	struct hlink *l = htab_find(&ws->files, path);
	return l ? ws_container_of(l, struct wsfile, h) : NULL;
}

bool file_live(const struct wsfile *f)
{
	return f->refs > 0 || f->dirty || f->pending;
}

static void lru_unlink(struct wscache *c, struct wsfile *f)
{
	if (f->lru_prev)
		f->lru_prev->lru_next = f->lru_next;
	else if (c->lru_head == f)
		c->lru_head = f->lru_next;
	if (f->lru_next)
		f->lru_next->lru_prev = f->lru_prev;
	else if (c->lru_tail == f)
		c->lru_tail = f->lru_prev;
	f->lru_prev = f->lru_next = NULL;
}

static void lru_touch(struct wscache *c, struct wsfile *f)
{
	lru_unlink(c, f);
	f->lru_prev = c->lru_tail;
	if (c->lru_tail)
		c->lru_tail->lru_next = f;
	else
		c->lru_head = f;
	c->lru_tail = f;
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
			 ws_now_ms() * 1000 + c->name_seq++,
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
	lru_touch(c, f);
	return f;
fail:
	free(f->path);
	free(f->cache_path);
	free(f);
	return NULL;
}

int file_ref(struct wsfile *f)
{
	if (f->fd < 0) {
		f->fd = open(f->cache_path, O_RDWR | O_CLOEXEC);
		if (f->fd < 0)
			return -errno;
	}
	f->refs++;
	lru_touch(f->ws->c, f);
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
	lru_unlink(c, f);
	if (f->fd >= 0)
		close(f->fd);
	unlink(f->cache_path);
	c->bytes -= f->size;
	if (f->dirty || f->pending)
		c->dirty_bytes -= f->size;
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
	if (was && !is)
		c->dirty_bytes -= f->size;
	else if (!was && is)
		c->dirty_bytes += f->size;
}

void cache_set_dirty(struct wsfile *f, bool dirty)
{
	cache_set_state(f, dirty, f->pending);
}

/* Makes room for f to hold new_size bytes: evicts clean unused copies,
 * oldest first. Returns -ENOSPC when only dirty or busy data is left. */
int cache_reserve(struct wscache *c, struct wsfile *f, uint64_t new_size)
{
	if (new_size <= f->size)
		return 0;
	uint64_t need = new_size - f->size;
	struct wsfile *v = c->lru_head;
	while (c->bytes + need > c->cfg.max_bytes && v) {
		struct wsfile *next = v->lru_next;
		if (v != f && v->refs == 0 && !v->dirty && !v->pending) {
			c->n.evictions++;
			v->unlinked = true;
			file_free(v);
		}
		v = next;
	}
	if (c->bytes + need > c->cfg.max_bytes) {
		c->n.enospc++;
		return -ENOSPC;
	}
	return 0;
}

/* Accounts f's new size (c->lock held). */
void cache_account(struct wsfile *f, uint64_t size)
{
	struct wscache *c = f->ws->c;
	c->bytes = c->bytes - f->size + size;
	if (f->dirty || f->pending)
		c->dirty_bytes = c->dirty_bytes - f->size + size;
	f->size = size;
}

int cache_fetch(struct wsfile *f)
{
	struct workspace *ws = f->ws;
	struct wscache *c = ws->c;

	pthread_mutex_lock(&c->lock);
	if (!f->path || !ws->url) {
		pthread_mutex_unlock(&c->lock);
		return f->path ? -ENOTCONN : -ENOENT;
	}
	char *path = strdup(f->path);
	char *url = strdup(ws->url);
	uint64_t epoch = ws->epoch;
	/* Room for what the listing announced, when it is known. */
	uint64_t want = 0;
	const char *name;
	char *parent = ws_parent(f->path, &name);
	struct wsentry *e = parent ? dir_find(dir_cached(ws, parent), name) : NULL;
	if (e) {
		want = e->size;
		f->mtime = e->seen; /* the time the listing shows for it */
	}
	free(parent);
	int rc = cache_reserve(c, f, want);
	pthread_mutex_unlock(&c->lock);
	if (!path || !url) {
		free(path);
		free(url);
		return -ENOMEM;
	}
	if (rc < 0) {
		free(path);
		free(url);
		return rc;
	}

	uint64_t got = 0;
	struct backend_error err;
	enum backend_status st;
	f->crc_ok = false; /* the download rewrites it */
	if (ftruncate(f->fd, 0) < 0 || lseek(f->fd, 0, SEEK_SET) < 0)
		st = BACKEND_LOCAL;
	else
		st = backend_file_get(c->cfg.backend, url, path, f->fd, &got, &err);
	if (st != BACKEND_OK) {
		if (st != BACKEND_NOT_FOUND)
			ws_log(ws, "download failed: %s",
			       st == BACKEND_LOCAL && errno ? strerror(errno)
							    : err.message);
		if (ftruncate(f->fd, 0) < 0)
			ws_log(ws, "cannot empty a cache file: %s", strerror(errno));
		got = 0;
	} else {
		struct stat sb;
		if (fstat(f->fd, &sb) == 0)
			got = (uint64_t)sb.st_size;
	}
	free(url);

	pthread_mutex_lock(&c->lock);
	cache_account(f, got);
	if (st == BACKEND_OK) {
		f->present = true;
		f->remote_exists = true;
		f->epoch = epoch;
		c->n.misses++;
		c->n.fetched_bytes += got;
		if (f->path && strcmp(f->path, path) == 0)
			dir_upsert(ws, path, got, false, NULL);
	} else {
		f->present = false;
		if (st == BACKEND_NOT_FOUND && f->path && strcmp(f->path, path) == 0)
			dir_remove(ws, path);
	}
	pthread_mutex_unlock(&c->lock);
	free(path);
	if (st == BACKEND_NOT_FOUND)
		return -ENOENT;
	if (st == BACKEND_BAD_ANSWER)
		return -EIO;
	return st == BACKEND_OK ? 0 : -ws_backend_errno(st);
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
