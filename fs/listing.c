/*
 * listing.c — the listing cache of a workspace: one GET of a directory's
 * listing serves readdir, every getattr of its entries and negative
 * lookups for listing_ttl_ms. This mount's own changes edit the cached
 * listings in place, so they never cost a refetch.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "workspace_i.h"

static const char *const machinery[] = {
    ".pool",
    ".sandbox-agent",
    ".pool-exec.fifo",
    ".pool-shim.log",
};

bool ws_machinery(const struct workspace *ws, const char *dir, const char *name)
{
	if (ws->c->cfg.show_machinery || dir[0] != '\0')
		return false;
	for (size_t i = 0; i < sizeof(machinery) / sizeof(machinery[0]); i++)
		if (strcmp(name, machinery[i]) == 0)
			return true;
	return false;
}

struct wsdir *dir_cached(struct workspace *ws, const char *path)
{
	struct hlink *l = htab_find(&ws->dirs, path);
	return l ? ws_container_of(l, struct wsdir, h) : NULL;
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

static void ents_free(struct wsentry *e, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(e[i].name);
	free(e);
}

/* Inserts (or updates) name in a loaded listing, keeping it sorted. */
static void dir_put(struct wsdir *d, const char *name, uint64_t size, bool is_dir,
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
	return d;
}

static bool dir_fresh(const struct workspace *ws, const struct wsdir *d)
{
	return d->loaded && d->fetched_ms && d->epoch == ws->epoch &&
	       ws_now_ms() - d->fetched_ms < (uint64_t)ws->c->cfg.listing_ttl_ms;
}

/* Local names the server does not list yet: files created here and not
 * uploaded, directories made here. */
static void dir_merge_local(struct workspace *ws, struct wsdir *d,
			    const struct timespec *now)
{
	for (struct wsfile *f = ws->all; f; f = f->ws_next) {
		if (!f->path || !(f->dirty || f->pending))
			continue;
		const char *name;
		char *parent = ws_parent(f->path, &name);
		if (parent && strcmp(parent, d->path) == 0)
			dir_put(d, name, f->size, false, now);
		free(parent);
	}
	for (size_t i = 0; i < ws->nmade; i++) {
		const char *name;
		char *parent = ws_parent(ws->made_dirs[i], &name);
		if (parent && strcmp(parent, d->path) == 0 && !dir_find(d, name))
			dir_put(d, name, 0, true, now);
		free(parent);
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
			c->n.listing_hits++;
			*out = d;
			return d->err;
		}
		if (!d->fetching)
			break;
		struct timespec ts;
		ws_deadline_in(&ts, 1000);
		pthread_cond_timedwait(&c->cond, &c->lock, &ts);
	}
	if (!ws->url) {
		*out = d;
		return -ENOTCONN;
	}
	d->fetching = true;
	d->raced = false;
	uint64_t epoch = ws->epoch;
	char *url = strdup(ws->url);
	pthread_mutex_unlock(&c->lock);

	struct backend_listing l = {0};
	struct backend_error err;
	enum backend_status st =
	    url ? backend_list(c->cfg.backend, url, path, &l, &err) : BACKEND_LOCAL;
	free(url);

	pthread_mutex_lock(&c->lock);
	c->n.listings++;
	d->fetching = false;
	pthread_cond_broadcast(&c->cond);

	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int rc = 0;
	if (st == BACKEND_OK) {
		struct wsentry *old = d->ents;
		size_t nold = d->n;
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
		for (size_t i = 0; i < l.count; i++) {
			struct backend_entry *e = &l.entries[i];
			if (!backend_name_valid(e->name) ||
			    ws_machinery(ws, path, e->name) ||
			    strcmp(e->name, WS_PLACEHOLDER) == 0)
				continue;
			d->ents[d->n++] = (struct wsentry){.name = e->name,
							   .size = e->size,
							   .is_dir = e->is_dir,
							   .seen = now};
			e->name = NULL;
		}
		qsort(d->ents, d->n, sizeof(*d->ents), ent_cmp);
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
					/* the kernel may still hold it */
					d->ents[i].shown_ms = old[j].shown_ms;
					d->ents[i].shown_dir = old[j].shown_dir;
					d->ents[i].shown_once = old[j].shown_once;
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
		ents_free(d->ents, d->n);
		d->ents = NULL;
		d->n = d->cap = 0;
		d->err = 0;
		d->loaded = true;
		dir_merge_local(ws, d, &now);
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
			ents_free(d->ents, d->n);
			d->ents = NULL;
			d->n = d->cap = 0;
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
	d->fetched_ms = d->raced ? 0 : ws_now_ms();
	d->epoch = epoch;
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
		ents_free(nd->ents, nd->n);
		nd->ents = NULL;
		nd->n = nd->cap = 0;
		nd->err = 0;
		nd->loaded = true;
		nd->fetched_ms = ws_now_ms();
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
			struct wsdir *d = ws_container_of(l, struct wsdir, h);
			if (strcmp(d->path, path) == 0 || ws_is_under(d->path, path))
				d->fetched_ms = 0;
		}
}

void dir_stale_all(struct workspace *ws)
{
	dir_drop(ws, "");
}

void dir_free_all(struct workspace *ws)
{
	for (size_t i = 0; i < ws->dirs.nb; i++) {
		struct hlink *l = ws->dirs.b[i];
		while (l) {
			struct hlink *next = l->next;
			struct wsdir *d = ws_container_of(l, struct wsdir, h);
			ents_free(d->ents, d->n);
			free(d->path);
			free(d);
			l = next;
		}
	}
	htab_free(&ws->dirs);
}
