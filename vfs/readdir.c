/*
 * readdir.c — the FUSE directory handles of ID/workspace/REL: opendir,
 * readdir (a snapshot of the listing's names per pass, attributes read at
 * each chunk) and releasedir.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "workspace_i.h"

/* What the handle of a workspace directory points to: the names
 * of the listing when the pass started. Attributes are not kept: they are
 * read at each chunk, since a file can be written between two chunks and
 * the kernel takes READDIRPLUS attributes as current. */
struct wsdirhandle {
	unsigned int kind; /* WS_HANDLE_DIR, first member */
	char **names;
	size_t n;
	bool taken; /* a snapshot was taken (it may be empty) */
	/* The listing, kept from eviction while the handle is open: each
	 * chunk of a pass reads it (a large one must not be fetched again
	 * for every chunk). */
	struct wscache *c;
	struct wsdir *pinned;
};

static struct wsdirhandle *dirhandle_of(uint64_t fh)
{
	if (!fh)
		return NULL;
	unsigned int *kind = (unsigned int *)(uintptr_t)fh;
	return *kind == WS_HANDLE_DIR ? (struct wsdirhandle *)kind : NULL;
}

static void dirhandle_clear(struct wsdirhandle *dh)
{
	for (size_t i = 0; i < dh->n; i++)
		free(dh->names[i]);
	free(dh->names);
	dh->names = NULL;
	dh->n = 0;
	dh->taken = false;
}

int workspace_opendir(struct workspace *ws, const char *rel, uint64_t *fh)
{
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	struct wsdirhandle *dh = calloc(1, sizeof(*dh));
	if (!dh)
		return -ENOMEM;
	dh->kind = WS_HANDLE_DIR;
	dh->c = ws->c;
	pthread_mutex_lock(&ws->lock);
	dh->pinned = dir_pin(ws, rel);
	pthread_mutex_unlock(&ws->lock);
	*fh = (uint64_t)(uintptr_t)dh;
	return 0;
}

void workspace_releasedir(uint64_t fh)
{
	struct wsdirhandle *dh = dirhandle_of(fh);
	if (!dh)
		return;
	if (dh->pinned) {
		pthread_mutex_lock(&dh->pinned->ws->lock);
		dir_unpin(dh->pinned);
		pthread_mutex_unlock(&dh->pinned->ws->lock);
	}
	dirhandle_clear(dh);
	free(dh);
}

/* Takes the names of d into dh. */
static int dirhandle_take(struct wsdirhandle *dh, const struct wsdir *d)
{
	dirhandle_clear(dh);
	dh->names = calloc(d->n ? d->n : 1, sizeof(*dh->names));
	if (!dh->names)
		return -ENOMEM;
	for (size_t i = 0; i < d->n; i++) {
		if (!(dh->names[i] = strdup(d->ents[i].name))) {
			dirhandle_clear(dh);
			return -ENOMEM;
		}
		dh->n++;
	}
	dh->taken = true;
	return 0;
}

/* The attributes of rel/name as the listing d and the cache tell them now;
 * false when the name is gone from d (ws->lock held). */
static bool entry_stat(struct workspace *ws, struct wsdir *d, const char *rel,
		       const char *name, struct stat *st)
{
	struct wsentry *e = dir_find(d, name);
	if (!e)
		return false;
	char *child = ws_join(rel, name);
	if (!child)
		return false;
	struct wsattr a = {.is_dir = e->is_dir, .is_link = e->is_link, .size = e->size,
			   .mtime = e->seen};
	struct wsfile *f = e->is_dir || e->is_link ? NULL : file_find(ws, child);
	if (f && file_auth(f)) {
		a.size = f->size;
		a.mtime = f->mtime;
	}
	ws_fill_stat(ws, child, &a, st);
	free(child);
	return true;
}

/* Offsets: 1 is ".", 2 is "..", 3 + i the i-th name of the snapshot. Real
 * offsets matter: libfuse sends READDIRPLUS entries filled at offset 0
 * with no node id, and the kernel then looks every name up again. A name
 * gone since the pass started is skipped; one that came is in the next. */
int workspace_readdir(struct workspace *ws, const char *rel, void *buf, ws_fill_fn filler,
		      off_t off, uint64_t fh, bool plus)
{
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	struct wsdirhandle *dh = dirhandle_of(fh);
	struct wsdirhandle local = {.kind = WS_HANDLE_DIR};
	if (!dh) { /* no handle (tests call it so): the whole pass at once */
		dh = &local;
		off = 0;
	}
	pthread_mutex_lock(&ws->lock);
	struct wsdir *d;
	rc = dir_load(ws, rel, &d);
	bool pass_start = off == 0 || !dh->taken;
	if (rc == 0 && pass_start)
		rc = dirhandle_take(dh, d);
	if (rc == 0 && dh != &local)
		dir_walked(ws, d, pass_start); /* a walk going down: listings ahead */
	if (rc < 0) {
		pthread_mutex_unlock(&ws->lock);
		return rc;
	}
	struct stat st;
	if (off < 1) {
		struct wsattr self = {.is_dir = true,
				      .mtime = rel[0] ? (struct timespec){0} : ws->born};
		ws_fill_stat(ws, rel, &self, &st);
		if (filler(buf, ".", &st, 1, false))
			goto out;
	}
	if (off < 2 && filler(buf, "..", NULL, 2, false))
		goto out;
	for (size_t i = off > 2 ? (size_t)off - 2 : 0; i < dh->n; i++) {
		if (!entry_stat(ws, d, rel, dh->names[i], &st))
			continue;
		if (filler(buf, dh->names[i], &st, (off_t)i + 3, plus))
			break;
	}
out:
	pthread_mutex_unlock(&ws->lock);
	if (dh == &local)
		dirhandle_clear(dh);
	return 0;
}
