/*
 * listing.c — the listing cache of a workspace: one GET of a directory's
 * listing serves readdir, every getattr of its entries and negative
 * lookups for listing_ttl_ms. This mount's own changes edit the cached
 * listings in place, so they never cost a refetch.
 *
 * Its memory is bounded (cfg.listing_max_bytes, counted as the entries'
 * structures and names): past the bound, listings are evicted least
 * recently used first, except those being fetched and those of open
 * directory handles (a readdir pass reads its listing in chunks). The
 * kernel's side needs nothing then: what it holds stays true (a listing
 * fetched again gives its names the times they had, see dir_load_once),
 * and after a command the mount invalidates whatever it holds there,
 * listed or not.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workspace_i.h"

/* What the bound counts for a name and for a listing. */
#define ENTRY_BYTES(name) (sizeof(struct wsentry) + strlen(name) + 1)
#define DIR_BYTES(path)	  (sizeof(struct wsdir) + strlen(path) + 1)

/* d->ws->lock and c->lock held. */
static void dir_account_locked(struct wsdir *d, int64_t bytes, int64_t entries)
{
	struct wscache *c = d->ws->c;
	d->bytes += (uint64_t)bytes;
	c->listing_bytes += (uint64_t)bytes;
	c->listing_entries += (uint64_t)entries;
}

/* d->ws->lock held. */
static void dir_account(struct wsdir *d, int64_t bytes, int64_t entries)
{
	struct wscache *c = d->ws->c;
	pthread_mutex_lock(&c->lock);
	dir_account_locked(d, bytes, entries);
	pthread_mutex_unlock(&c->lock);
}

static void dir_lru_unlink(struct wscache *c, struct wsdir *d)
{
	if (d->lru_prev)
		d->lru_prev->lru_next = d->lru_next;
	else if (c->dir_lru_head == d)
		c->dir_lru_head = d->lru_next;
	if (d->lru_next)
		d->lru_next->lru_prev = d->lru_prev;
	else if (c->dir_lru_tail == d)
		c->dir_lru_tail = d->lru_prev;
	d->lru_prev = d->lru_next = NULL;
}

static void dir_lru_touch(struct wscache *c, struct wsdir *d)
{
	dir_lru_unlink(c, d);
	d->lru_prev = c->dir_lru_tail;
	if (c->dir_lru_tail)
		c->dir_lru_tail->lru_next = d;
	else
		c->dir_lru_head = d;
	c->dir_lru_tail = d;
}

static const char *const machinery[] = {
    ".pool",
    ".sandbox-agent",
    ".pool-exec.fifo",
    ".pool-shim.log",
};

/* The mount's own files in the workspace root (a command's stdin on its
 * way in) start with this; they are never the user's. */
#define WS_OWN_PREFIX ".sandboxfs-"

bool ws_machinery(const struct workspace *ws, const char *dir, const char *name)
{
	if (ws->c->cfg.show_machinery || dir[0] != '\0')
		return false;
	if (strncmp(name, WS_OWN_PREFIX, sizeof(WS_OWN_PREFIX) - 1) == 0)
		return true;
	for (size_t i = 0; i < sizeof(machinery) / sizeof(machinery[0]); i++)
		if (strcmp(name, machinery[i]) == 0)
			return true;
	return false;
}

struct wsdir *dir_cached(struct workspace *ws, const char *path)
{
	struct hlink *l = htab_find(&ws->dirs, path);
	return l ? htab_entry(l, struct wsdir, h) : NULL;
}

static int ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct wsentry *)a)->name,
		      ((const struct wsentry *)b)->name);
}

struct wsentry *dir_find(struct wsdir *d, const char *name)
{
	if (!d || !d->loaded || d->err || d->n == 0)
		return NULL;
	struct wsentry key = {.name = (char *)name};
	return bsearch(&key, d->ents, d->n, sizeof(*d->ents), ent_cmp);
}

static uint64_t ents_bytes(const struct wsentry *e, size_t n)
{
	uint64_t b = 0;
	for (size_t i = 0; i < n; i++)
		b += ENTRY_BYTES(e[i].name);
	return b;
}

static void ents_free(struct wsentry *e, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(e[i].name);
	free(e);
}

/* Empties d's entries (accounted); c->lock held as locked says. */
static void dir_clear_as(struct wsdir *d, bool locked)
{
	int64_t bytes = -(int64_t)ents_bytes(d->ents, d->n);
	if (locked)
		dir_account_locked(d, bytes, -(int64_t)d->n);
	else
		dir_account(d, bytes, -(int64_t)d->n);
	ents_free(d->ents, d->n);
	d->ents = NULL;
	d->n = d->cap = 0;
}

static void dir_clear(struct wsdir *d)
{
	dir_clear_as(d, false);
}

/* Inserts (or updates) name in a loaded listing, keeping it sorted. */
void dir_put(struct wsdir *d, const char *name, uint64_t size, bool is_dir,
		    const struct timespec *seen)
{
	size_t lo = 0, hi = d->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int r = strcmp(d->ents[mid].name, name);
		if (r == 0) {
			if (d->ents[mid].size != size || d->ents[mid].is_dir != is_dir)
				d->ents[mid].seen = *seen;
			d->ents[mid].size = size;
			d->ents[mid].is_dir = is_dir;
			d->ents[mid].is_link = false; /* the caller says when it is */
			return;
		}
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 16;
		struct wsentry *e = realloc(d->ents, cap * sizeof(*e));
		if (!e)
			return;
		d->ents = e;
		d->cap = cap;
	}
	char *copy = strdup(name);
	if (!copy)
		return;
	memmove(d->ents + lo + 1, d->ents + lo, (d->n - lo) * sizeof(*d->ents));
	d->ents[lo] =
	    (struct wsentry){.name = copy, .size = size, .is_dir = is_dir, .seen = *seen};
	d->n++;
	dir_account(d, (int64_t)ENTRY_BYTES(copy), 1);
}

static struct wsdir *dir_new(struct workspace *ws, const char *path)
{
	struct wsdir *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->path = strdup(path);
	if (!d->path) {
		free(d);
		return NULL;
	}
	d->h.key = d->path;
	htab_add(&ws->dirs, &d->h);
	d->ws = ws;
	pthread_mutex_lock(&ws->c->lock);
	dir_account_locked(d, (int64_t)DIR_BYTES(path), 0);
	dir_lru_touch(ws->c, d);
	pthread_mutex_unlock(&ws->c->lock);
	return d;
}

/* d->ws->lock and c->lock held. */
static void dir_free_locked(struct wsdir *d)
{
	struct wscache *c = d->ws->c;
	dir_clear_as(d, true);
	dir_account_locked(d, -(int64_t)d->bytes, 0);
	htab_del(&d->ws->dirs, &d->h);
	dir_lru_unlink(c, d);
	free(d->path);
	free(d);
}

static void dir_free(struct wsdir *d)
{
	struct wscache *c = d->ws->c;
	pthread_mutex_lock(&c->lock);
	dir_free_locked(d);
	pthread_mutex_unlock(&c->lock);
}

/* Evicts listings, least recently used first, until the cache is within
 * its bound; keep, pinned ones and those being fetched stay. c->lock
 * held, and held's lock (may be NULL): another workspace's listings go
 * only if its lock is free now (trylock), else they wait for a later
 * trim. */
static void dir_evict(struct wscache *c, struct workspace *held, struct wsdir *keep)
{
	struct wsdir *d = c->dir_lru_head;
	while (d && c->listing_bytes > c->cfg.listing_max_bytes) {
		struct wsdir *next = d->lru_next;
		struct workspace *dws = d->ws;
		if (d == keep ||
		    (dws != held && pthread_mutex_trylock(&dws->lock) != 0)) {
			d = next;
			continue;
		}
		if (!d->pins && !d->fetching) {
			dir_free_locked(d);
			WS_COUNT(c, listing_evictions, 1);
		}
		if (dws != held)
			pthread_mutex_unlock(&dws->lock);
		d = next;
	}
}

/* Keeps the cache within its bound after d (if any, of ws) was loaded;
 * ws->lock held; d stays. */
static void dir_trim(struct workspace *ws, struct wsdir *d)
{
	struct wscache *c = ws->c;
	pthread_mutex_lock(&c->lock);
	if (d)
		dir_lru_touch(c, d);
	if (c->listing_bytes > c->cfg.listing_max_bytes)
		dir_evict(c, ws, d);
	pthread_mutex_unlock(&c->lock);
}

static bool dir_fresh(const struct workspace *ws, const struct wsdir *d)
{
	return d->loaded && d->fetched_ms && d->epoch == ws->epoch &&
	       common_now_ms() - d->fetched_ms < (uint64_t)ws->c->cfg.listing_ttl_ms;
}

/* Local names the server does not list yet: files created here and not
 * uploaded, directories made here. */
static void dir_merge_local(struct workspace *ws, struct wsdir *d,
			    const struct timespec *now)
{
	for (struct wsfile *f = ws->unsaved; f; f = f->unsaved_next) {
		const char *name = f->path ? ws_child_name(f->path, d->path) : NULL;
		if (name)
			dir_put(d, name, f->size, false, now);
	}
	for (size_t i = 0; i < ws->nmade; i++) {
		const char *name = ws_child_name(ws->made_dirs[i], d->path);
		if (name && !dir_find(d, name))
			dir_put(d, name, 0, true, now);
	}
}

static bool made_here(const struct workspace *ws, const char *path)
{
	for (size_t i = 0; i < ws->nmade; i++)
		if (strcmp(ws->made_dirs[i], path) == 0)
			return true;
	return false;
}

/* The root, or a directory per its parent's loaded listing. */
static bool known_dir(struct workspace *ws, const char *path)
{
	if (!path[0])
		return true;
	const char *name;
	char *parent = ws_parent(path, &name);
	if (!parent)
		return false;
	struct wsdir *pd = dir_cached(ws, parent);
	struct wsentry *e = pd && pd->loaded && !pd->err ? dir_find(pd, name) : NULL;
	free(parent);
	return e && e->is_dir;
}

/* Gives e the time of this mount's copy of it, when there is one of the
 * same size and e was not listed before. */
static void keep_time_of_file(struct workspace *ws, struct wsdir *d, struct wsentry *e)
{
	char *p = ws_join(d->path, e->name);
	if (!p)
		return;
	struct wsfile *f = file_find(ws, p);
	free(p);
	if (!f || !f->present || f->size != e->size || f->dirty)
		return;
	if (e->seen.tv_sec < f->mtime.tv_sec ||
	    (e->seen.tv_sec == f->mtime.tv_sec && e->seen.tv_nsec <= f->mtime.tv_nsec))
		return; /* older already: it was listed before */
	e->seen = f->mtime;
}

static int dir_load_once(struct workspace *ws, const char *path, struct wsdir **out)
{
	struct wscache *c = ws->c;
	struct wsdir *d;
	for (;;) {
		d = dir_cached(ws, path);
		if (!d && !(d = dir_new(ws, path)))
			return -ENOMEM;
		if (dir_fresh(ws, d)) {
			WS_COUNT(c, listing_hits, 1);
			pthread_mutex_lock(&c->lock);
			dir_lru_touch(c, d);
			pthread_mutex_unlock(&c->lock);
			*out = d;
			return d->err;
		}
		if (!d->fetching)
			break;
		struct timespec ts;
		common_deadline_in(&ts, 1000);
		pthread_cond_timedwait(&ws->cond, &ws->lock, &ts);
	}
	if (!ws->url) {
		*out = d;
		return -ENOTCONN;
	}
	d->fetching = true;
	d->raced = false;
	uint64_t epoch = ws->epoch;
	char *url = strdup(ws->url);
	pthread_mutex_unlock(&ws->lock);

	struct backend_listing l = {0};
	struct backend_error err;
	enum backend_status st =
	    url ? backend_list(c->cfg.backend, url, path, &l, &err) : BACKEND_LOCAL;
	free(url);

	pthread_mutex_lock(&ws->lock);
	WS_COUNT(c, listings, 1);
	d->fetching = false;
	pthread_cond_broadcast(&ws->cond);

	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int rc = 0;
	if (st == BACKEND_OK) {
		struct wsentry *old = d->ents;
		size_t nold = d->n;
		uint64_t old_bytes = ents_bytes(old, nold);
		bool had = d->loaded && d->err == 0;
		d->ents = calloc(l.count ? l.count : 1, sizeof(*d->ents));
		d->n = 0;
		d->cap = l.count ? l.count : 1;
		if (!d->ents) {
			d->ents = old;
			d->n = nold;
			backend_listing_clear(&l);
			*out = d;
			return -ENOMEM;
		}
		/* The listing has no times. A name that appeared since the
		 * last look shows when it was first seen; in a listing looked at
		 * for the first time (or again after it was evicted), every
		 * name shows the time this mount first knew the workspace, so
		 * a file's mtime never moves because its listing was evicted
		 * and fetched again (git would read every file again, make
		 * and rsync would redo their work). */
		const struct timespec *first = had ? &now : &ws->born;
		for (size_t i = 0; i < l.count; i++) {
			struct backend_entry *e = &l.entries[i];
			if (!backend_name_valid(e->name) ||
			    ws_machinery(ws, path, e->name) ||
			    strcmp(e->name, WS_PLACEHOLDER) == 0)
				continue;
			d->ents[d->n++] = (struct wsentry){.name = e->name,
							   .size = e->size,
							   .is_dir = e->is_dir,
							   .seen = *first};
			e->name = NULL;
		}
		qsort(d->ents, d->n, sizeof(*d->ents), ent_cmp);
		dir_account(d, (int64_t)ents_bytes(d->ents, d->n) - (int64_t)old_bytes,
			    (int64_t)d->n - (int64_t)nold);
		/* Links keep their type and size (the listing follows them). */
		d->loaded = true;
		d->err = 0;
		links_fix_listing(ws, d, &now);
		/* A name seen before with the same size keeps its time, so
		 * make and rsync see stable mtimes between commands. */
		if (had) {
			size_t i = 0, j = 0;
			while (i < d->n && j < nold) {
				int r = strcmp(d->ents[i].name, old[j].name);
				if (r == 0) {
					if (d->ents[i].size == old[j].size &&
					    d->ents[i].is_dir == old[j].is_dir)
						d->ents[i].seen = old[j].seen;
					i++;
					j++;
				} else if (r < 0) {
					i++;
				} else {
					j++;
				}
			}
		}
		ents_free(old, nold);
		/* A file this mount wrote or read keeps the time it had here. */
		for (size_t i = 0; i < d->n; i++)
			if (!d->ents[i].is_dir)
				keep_time_of_file(ws, d, &d->ents[i]);
		d->err = 0;
		d->loaded = true;
		dir_merge_local(ws, d, &now);
	} else if (st == BACKEND_NOT_FOUND && made_here(ws, path)) {
		dir_clear(d);
		d->err = 0;
		d->loaded = true;
		dir_merge_local(ws, d, &now);
		links_fix_listing(ws, d, &now);
	} else {
		if (st == BACKEND_NOT_FOUND)
			rc = -ENOENT;
		else if (st == BACKEND_BAD_ANSWER)
			/* A file answers with its bytes; a known directory whose
			 * listing does not parse is a bad answer, not a file. */
			rc = known_dir(ws, path) ? -EIO : -ENOTDIR;
		else
			rc = -ws_backend_errno(st);
		if (rc == -ENOENT || rc == -ENOTDIR) {
			dir_clear(d);
			d->err = rc;
			d->loaded = true;
		} else {
			ws_log(ws, "listing of a directory failed: %s", err.message);
			backend_listing_clear(&l);
			d->fetched_ms = 0;
			*out = d;
			return rc;
		}
	}
	backend_listing_clear(&l);
	/* An upload or delete here that finished during the fetch may be
	 * missing from (or still in) the answer: not fresh then. */
	d->fetched_ms = d->raced ? 0 : common_now_ms();
	d->epoch = epoch;
	dir_trim(ws, d);
	*out = d;
	return rc;
}

int dir_load(struct workspace *ws, const char *path, struct wsdir **out)
{
	int rc;
	for (int i = 0;; i++) {
		rc = dir_load_once(ws, path, out);
		if (rc != 0 || !*out || !(*out)->raced || i == 3)
			return rc;
	}
}

bool dir_wanted(struct workspace *ws, const char *path)
{
	struct wsdir *d = dir_cached(ws, path);
	return !d || (!d->fetching && !dir_fresh(ws, d));
}

int dir_prefetch(struct workspace *ws, const char *path)
{
	if (!ws->url || !dir_wanted(ws, path))
		return 0;
	struct wsdir *d;
	int rc = dir_load(ws, path, &d);
	return rc < 0 ? rc : 1;
}

/* The cached listing of path's parent, about to be changed in place, or
 * NULL; *name is path's last segment. A fetch under way may answer from
 * before the change: it is marked raced, not fresh, and dir_load fetches
 * again. */
static struct wsdir *parent_listing(struct workspace *ws, const char *path,
				    const char **name)
{
	char *parent = ws_parent(path, name);
	if (!parent)
		return NULL;
	struct wsdir *d = dir_cached(ws, parent);
	free(parent);
	if (d && d->fetching) {
		d->fetched_ms = 0;
		d->raced = true;
	}
	return d;
}

void dir_upsert(struct workspace *ws, const char *path, uint64_t size, bool is_dir,
		const struct timespec *mtime)
{
	const char *name;
	struct wsdir *d = parent_listing(ws, path, &name);
	if (d && d->loaded) {
		if (d->err) {
			d->fetched_ms = 0;
		} else {
			struct timespec now;
			clock_gettime(CLOCK_REALTIME, &now);
			dir_put(d, name, size, is_dir, &now);
			struct wsentry *e = mtime ? dir_find(d, name) : NULL;
			if (e)
				e->seen = *mtime;
		}
	}
}

void dir_set_empty(struct workspace *ws, const char *path)
{
	struct wsdir *nd = dir_cached(ws, path);
	if (!nd)
		nd = dir_new(ws, path);
	if (nd && !nd->fetching) {
		dir_clear(nd);
		nd->err = 0;
		nd->loaded = true;
		nd->fetched_ms = common_now_ms();
		nd->epoch = ws->epoch;
	}
}

void dir_remove(struct workspace *ws, const char *path)
{
	const char *name;
	struct wsdir *d = parent_listing(ws, path, &name);
	struct wsentry *e = dir_find(d, name);
	if (e) {
		size_t i = (size_t)(e - d->ents);
		dir_account(d, -(int64_t)ENTRY_BYTES(e->name), -1);
		free(e->name);
		memmove(d->ents + i, d->ents + i + 1, (d->n - i - 1) * sizeof(*d->ents));
		d->n--;
	}
}

void dir_stale(struct workspace *ws, const char *path)
{
	struct wsdir *d = dir_cached(ws, path);
	if (d)
		d->fetched_ms = 0;
}

/* Marks path and every directory below it stale. */
void dir_drop(struct workspace *ws, const char *path)
{
	for (size_t i = 0; i < ws->dirs.nb; i++)
		for (struct hlink *l = ws->dirs.b[i]; l; l = l->next) {
			struct wsdir *d = htab_entry(l, struct wsdir, h);
			if (strcmp(d->path, path) == 0 || ws_is_under(d->path, path))
				d->fetched_ms = 0;
		}
}

void dir_stale_all(struct workspace *ws)
{
	dir_drop(ws, "");
}

void dir_release(struct workspace *ws)
{
	for (size_t i = 0; i < ws->dirs.nb; i++) {
		struct hlink *l = ws->dirs.b[i];
		while (l) {
			struct hlink *next = l->next;
			struct wsdir *d = htab_entry(l, struct wsdir, h);
			if (!d->pins && !d->fetching) {
				dir_free(d);
				WS_COUNT(ws->c, listing_evictions, 1);
			}
			l = next;
		}
	}
}

void dir_free_all(struct workspace *ws)
{
	for (size_t i = 0; i < ws->dirs.nb; i++) {
		struct hlink *l = ws->dirs.b[i];
		while (l) {
			struct hlink *next = l->next;
			dir_free(htab_entry(l, struct wsdir, h));
			l = next;
		}
	}
	htab_free(&ws->dirs);
}

struct wsdir *dir_pin(struct workspace *ws, const char *path)
{
	struct wsdir *d = dir_cached(ws, path);
	if (!d)
		d = dir_new(ws, path);
	if (d)
		d->pins++;
	return d;
}

void dir_unpin(struct wsdir *d)
{
	d->pins--;
	dir_trim(d->ws, NULL); /* what it kept may be over the bound */
}

void dir_stats(struct wscache *c, FILE *out)
{
	pthread_mutex_lock(&c->lock);
	uint64_t bytes = c->listing_bytes, entries = c->listing_entries;
	uint64_t evictions =
	    atomic_load_explicit(&c->n.listing_evictions, memory_order_relaxed);
	pthread_mutex_unlock(&c->lock);
	fprintf(out,
		"listing_entries %" PRIu64 "\n"
		"listing_bytes %" PRIu64 "\n"
		"listing_max_bytes %" PRIu64 "\n"
		"listing_evictions %" PRIu64 "\n",
		entries, bytes, c->cfg.listing_max_bytes, evictions);
}
