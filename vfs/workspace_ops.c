/*
 * workspace_ops.c — the FUSE operations on ID/workspace/REL (DESIGN.md §3):
 * metadata from listings, file content through cache files, directory and
 * name operations built from whole-file GET, PUT and DELETE.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "workspace_i.h"

/* What a path is, from the live cache or the parent's listing. */
struct wsattr {
	bool is_dir;
	uint64_t size;
	struct timespec mtime;
	bool type_changed; /* the kernel was last told the other type */
};

/* Records that the kernel is told f's attributes now (c->lock held). */
static void file_shown(struct wsfile *f)
{
	f->shown_ms = common_now_ms();
	f->shown_once = true;
}

/* Records that the kernel is told e's attributes now (c->lock held). */
static void entry_shown(struct wsdir *d, struct wsentry *e, struct wsattr *a)
{
	if (a && e->shown_once && e->shown_dir != e->is_dir)
		a->type_changed = true;
	d->shown_ms = e->shown_ms = common_now_ms();
	e->shown_dir = e->is_dir;
	e->shown_once = true;
}

static struct wshandle *handle_of(uint64_t fh)
{
	if (!fh)
		return NULL;
	unsigned int *kind = (unsigned int *)(uintptr_t)fh;
	return *kind == WS_HANDLE_FILE ? (struct wshandle *)kind : NULL;
}

/* The cache entry, not the listing, tells f's size: it holds changes not
 * yet on the server, or it is open and no command ran since it was read. */
static bool file_auth(const struct wsfile *f)
{
	/* Not while its content is being fetched: its size is not known
	 * yet, and a lookup answering the partial size makes the kernel
	 * read a short (even empty) file in every open of it. */
	return f->dirty || f->pending ||
	       (f->refs > 0 && f->present &&
		(f->epoch == f->ws->epoch || !f->remote_exists));
}

/* c->lock held; may drop and retake it (listing fetch). */
static int lookup(struct workspace *ws, const char *rel, struct wsattr *a)
{
	memset(a, 0, sizeof(*a));
	if (!rel[0]) {
		a->is_dir = true;
		a->mtime = ws->born;
		return 0;
	}
	struct wsfile *f = file_find(ws, rel);
	if (f && file_auth(f))
		goto live;
	const char *name;
	char *parent = ws_parent(rel, &name);
	if (!parent)
		return -ENOMEM;
	struct wsdir *d;
	int rc = dir_load(ws, parent, &d);
	free(parent);
	f = file_find(ws, rel); /* the lock was dropped */
	if (f && file_auth(f))
		goto live;
	if (rc < 0)
		return rc;
	struct wsentry *e = dir_find(d, name);
	if (!e) {
		if (f)
			file_detach(f); /* gone on the server; open handles keep it */
		ws->c->n.negative_hits++;
		return -ENOENT;
	}
	a->is_dir = e->is_dir;
	a->size = e->size;
	a->mtime = e->seen;
	entry_shown(d, e, a); /* most lookups answer the kernel */
	if (f && e->is_dir) {
		if (f->shown_once) /* the kernel may hold it as a file */
			a->type_changed = true;
		file_drop_clean(f);
	} else if (f && f->present && f->size != e->size)
		f->present = false; /* changed on the server: fetch again */
	return 0;
live:
	a->is_dir = false;
	a->size = f->size;
	a->mtime = f->mtime;
	file_shown(f);
	return 0;
}

/* The parent of rel is a directory (c->lock held, may be dropped). */
static int parent_is_dir(struct workspace *ws, const char *rel)
{
	const char *name;
	char *parent = ws_parent(rel, &name);
	if (!parent)
		return -ENOMEM;
	struct wsattr a;
	int rc = lookup(ws, parent, &a);
	free(parent);
	if (rc == 0 && !a.is_dir)
		rc = -ENOTDIR;
	return rc;
}

/* Records permission bits to apply in the sandbox with chmod before the
 * next command (workspace_before_command); c->lock held. */
static int mode_queue(struct workspace *ws, const char *rel, mode_t perm)
{
	struct wsmeta *m = meta_get(ws, rel, true);
	if (!m)
		return -ENOMEM;
	m->has_mode = true;
	m->mode = perm;
	m->mode_queued = true;
	return 0;
}

static void fill_stat(struct workspace *ws, const char *rel, const struct wsattr *a,
		      struct stat *st)
{
	const struct wscache_config *cfg = &ws->c->cfg;
	struct wsmeta *m = meta_get(ws, rel, false);
	memset(st, 0, sizeof(*st));
	mode_t perm = a->is_dir ? WS_DIR_MODE : WS_FILE_MODE;
	if (m && m->has_mode)
		perm = m->mode & 07777;
	st->st_mode = (a->is_dir ? S_IFDIR : S_IFREG) | perm;
	/* 1 for directories too: the number of subdirectories is unknown, and
	 * find's leaf optimisation must not trust a made-up 2. */
	st->st_nlink = 1;
	st->st_uid = cfg->uid;
	st->st_gid = cfg->gid;
	st->st_size = (off_t)a->size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
	st->st_mtim = a->mtime;
	st->st_atim = a->mtime;
	if (m && m->has_times) {
		st->st_mtim = m->mtime;
		st->st_atim = m->atime;
	}
	st->st_ctim = st->st_mtim;
}

static void fill_file_stat(struct wsfile *f, struct stat *st)
{
	struct workspace *ws = f->ws;
	file_shown(f);
	struct wsattr a = {.is_dir = false, .size = f->size, .mtime = f->mtime};
	/* An older version still open is not unlinked: its name has other
	 * content now. */
	const char *name = f->path ? f->path : f->version_of;
	if (name) {
		fill_stat(ws, name, &a, st);
	} else {
		fill_stat(ws, "", &a, st);
		st->st_mode = S_IFREG | WS_FILE_MODE;
		st->st_nlink = 0;
	}
}

int workspace_getattr(struct workspace *ws, const char *rel, struct stat *st, uint64_t fh)
{
	struct wshandle *h = handle_of(fh);
	struct wscache *c = ws ? ws->c : NULL;
	if (h) {
		struct wsfile *f = h->f;
		c = f->ws->c;
		pthread_mutex_lock(&c->lock);
		/* Content not (yet) here, downloading or after a failed
		 * download: the listing tells the size, never the part in the
		 * cache file. */
		bool by_name = f->path && !f->present && !f->dirty && !f->pending;
		if (!by_name) {
			fill_file_stat(f, st);
			pthread_mutex_unlock(&c->lock);
			return 0;
		}
		char *path = strdup(f->path);
		struct wsattr a;
		int rc = path ? lookup(f->ws, path, &a) : -ENOMEM;
		if (rc == 0)
			fill_stat(f->ws, path, &a, st);
		pthread_mutex_unlock(&c->lock);
		free(path);
		return rc;
	}
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&c->lock);
	struct wsattr a;
	rc = lookup(ws, rel, &a); /* ws_check hid the machinery already */
	if (rc == 0)
		fill_stat(ws, rel, &a, st);
	pthread_mutex_unlock(&c->lock);
	/* A command turned a file the kernel holds into a directory (or the
	 * reverse): the kernel would call its inode bad and answer EIO.
	 * ESTALE makes it look the path up again (once: the type is now
	 * recorded as shown), and the new lookup makes a new inode. */
	if (rc == 0 && a.type_changed)
		return -ESTALE;
	return rc;
}

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
	pthread_mutex_lock(&ws->c->lock);
	dh->pinned = dir_pin(ws, rel);
	pthread_mutex_unlock(&ws->c->lock);
	*fh = (uint64_t)(uintptr_t)dh;
	return 0;
}

void workspace_releasedir(uint64_t fh)
{
	struct wsdirhandle *dh = dirhandle_of(fh);
	if (!dh)
		return;
	if (dh->pinned) {
		pthread_mutex_lock(&dh->c->lock);
		dir_unpin(dh->pinned);
		pthread_mutex_unlock(&dh->c->lock);
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
 * false when the name is gone from d (c->lock held). */
static bool entry_stat(struct workspace *ws, struct wsdir *d, const char *rel,
		       const char *name, struct stat *st)
{
	struct wsentry *e = dir_find(d, name);
	if (!e)
		return false;
	char *child = ws_join(rel, name);
	if (!child)
		return false;
	struct wsattr a = {.is_dir = e->is_dir, .size = e->size, .mtime = e->seen};
	struct wsfile *f = e->is_dir ? NULL : file_find(ws, child);
	if (f && file_auth(f)) {
		a.size = f->size;
		a.mtime = f->mtime;
	}
	entry_shown(d, e, NULL); /* READDIRPLUS gives the kernel st */
	fill_stat(ws, child, &a, st);
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
	struct wscache *c = ws->c;
	pthread_mutex_lock(&c->lock);
	struct wsdir *d;
	rc = dir_load(ws, rel, &d);
	if (rc == 0 && (off == 0 || !dh->taken))
		rc = dirhandle_take(dh, d);
	if (rc < 0) {
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
	struct stat st;
	if (off < 1) {
		struct wsattr self = {.is_dir = true,
				      .mtime = rel[0] ? (struct timespec){0} : ws->born};
		fill_stat(ws, rel, &self, &st);
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
	pthread_mutex_unlock(&c->lock);
	if (dh == &local)
		dirhandle_clear(dh);
	return 0;
}

static int handle_new(struct wsfile *f, struct wsopen *o, struct wsfetch *fe)
{
	struct wshandle *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->kind = WS_HANDLE_FILE;
	h->f = f;
	h->fetch = fe;
	h->flags = o->flags;
	o->fh = (uint64_t)(uintptr_t)h;
	return 0;
}

/* No upload of f that is still pending may land after what the caller
 * does next (a DELETE of its name, or a PUT of another file there).
 * f->mx held, c->lock not held. */
static void upload_cancel(struct wsfile *f)
{
	struct wscache *c = f->ws->c;
	pthread_mutex_lock(&c->lock);
	uint64_t id = f->upload_id;
	f->upload_id = 0;
	pthread_mutex_unlock(&c->lock);
	upload_supersede(c, f->ws->id, id, true);
}

/* DELETE of rel (a file or a whole tree): 0, or -errno. A name already
 * gone counts as deleted: it is gone either way. */
static int delete_remote(struct workspace *ws, const char *url, const char *rel,
			 struct backend_error *err)
{
	enum backend_status st =
	    url ? backend_file_delete(ws->c->cfg.backend, url, rel, err)
		: BACKEND_NOT_SENT;
	if (st == BACKEND_OK || st == BACKEND_NOT_FOUND)
		return 0;
	return -ws_backend_errno(st);
}

/* Drops a reference taken by an operation (c->lock not held). */
static void unref(struct wsfile *f)
{
	struct wscache *c = f->ws->c;
	pthread_mutex_lock(&c->lock);
	file_unref(f);
	pthread_mutex_unlock(&c->lock);
}

/* The cache entry of an existing file, referenced; c->lock held. */
static int file_for(struct workspace *ws, const char *rel, struct wsfile **out)
{
	struct wsattr a;
	int rc = lookup(ws, rel, &a);
	if (rc < 0)
		return rc;
	if (a.is_dir)
		return -EISDIR;
	struct wsfile *f = file_find(ws, rel);
	if (!f) {
		f = file_new(ws, rel, NULL);
		if (!f)
			return -EIO;
		f->remote_exists = true;
	} else {
		file_expire_after_command(f);
		if (file_needs_version(f) && !(f = file_supersede(f)))
			return -EIO;
	}
	rc = file_ref(f);
	if (rc < 0)
		return rc;
	*out = f;
	return 0;
}

/* Another version of rel than f is still open (c->lock held). */
static bool other_version_open(struct workspace *ws, const char *rel,
			       const struct wsfile *f)
{
	if (!ws->old_versions_open)
		return false;
	for (const struct wsfile *v = ws->all; v; v = v->ws_next)
		if (v != f && v->version_of && strcmp(v->version_of, rel) == 0)
			return true;
	return false;
}

/* Makes f's content readable for a new handle: present already, or a
 * download (running or started here) that the handle reads through, in
 * *fe with a reference. *fetched: the content is (being) fetched anew.
 * A large file downloads on its own thread and reads of what has arrived
 * proceed meanwhile; a small one is fetched here. */
static int content_open(struct wsfile *f, struct wsfetch **fe, bool *fetched)
{
	struct workspace *ws = f->ws;
	struct wscache *c = ws->c;
	*fe = NULL;
	*fetched = false;
	for (;;) {
		pthread_mutex_lock(&c->lock);
		struct wsfetch *cur = f->fetch;
		if (cur && cur->epoch == ws->epoch &&
		    !__atomic_load_n(&cur->done, __ATOMIC_SEQ_CST)) {
			/* One download per file: read through the running one. */
			cur->refs++;
			pthread_mutex_unlock(&c->lock);
			*fe = cur;
			*fetched = true;
			return 0;
		}
		if (!cur) {
			file_expire_after_command(f);
			if (f->present) {
				pthread_mutex_unlock(&c->lock);
				return 0;
			}
		}
		pthread_mutex_unlock(&c->lock);
		if (cur) {
			/* It began before a command (it brings the old content)
			 * or is ending: wait for it, then look again. */
			int rc = cache_fetch_idle(f);
			if (rc < 0)
				return rc;
			continue;
		}
		pthread_mutex_lock(&f->mx);
		pthread_mutex_lock(&c->lock);
		bool again = f->fetch || f->present;
		pthread_mutex_unlock(&c->lock);
		if (again) {
			pthread_mutex_unlock(&f->mx);
			continue;
		}
		struct wsfetch *nf;
		int rc = cache_fetch_begin(f, &nf);
		pthread_mutex_unlock(&f->mx);
		if (rc < 0)
			return rc;
		*fetched = true;
		if (cache_fetch_spawn(nf)) {
			*fe = nf;
			return 0;
		}
		rc = cache_fetch_run(nf);
		pthread_mutex_lock(&c->lock);
		cache_fetch_put(nf); /* done: the handle needs it no more */
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
}

int workspace_open(struct workspace *ws, const char *rel, struct wsopen *o)
{
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	if (!rel[0])
		return -EISDIR;
	struct wscache *c = ws->c;
	int acc = o->flags & O_ACCMODE;
	bool trunc = (o->flags & O_TRUNC) && acc != O_RDONLY;

	pthread_mutex_lock(&c->lock);
	struct wsfile *f;
	rc = file_for(ws, rel, &f);
	if (rc == 0) {
		f->opens++;
		f->writers += acc != O_RDONLY;
	}
	pthread_mutex_unlock(&c->lock);
	if (rc < 0)
		return rc;

	bool fetched = false;
	struct wsfetch *fe = NULL;
	if (trunc) {
		pthread_mutex_lock(&f->mx);
		rc = cache_fetch_idle(f);
		if (rc == 0)
			rc = cache_truncate(f, 0);
		pthread_mutex_unlock(&f->mx);
	} else {
		rc = content_open(f, &fe, &fetched);
	}
	if (rc == 0)
		rc = handle_new(f, o, fe);
	pthread_mutex_lock(&c->lock);
	bool others = false, mixed = false;
	if (rc < 0) {
		cache_fetch_put(fe);
		f->opens--;
		f->writers -= acc != O_RDONLY;
		if (f->opens == 0)
			file_closed(f);
		file_unref(f);
	} else {
		if (!fetched)
			c->n.hits++;
		/* The kernel keeps one page cache per name: while descriptors
		 * of an older version read theirs through it, this one reads
		 * past it; once they are gone, the pages they left are
		 * dropped at the next open. */
		others = other_version_open(ws, rel, f);
		mixed = f->kernel_mixed;
		if (!others)
			f->kernel_mixed = false;
	}
	pthread_mutex_unlock(&c->lock);
	if (rc < 0)
		return rc;
	/* Pages the kernel holds are still right unless we fetched anew. */
	o->keep_cache = !fetched && !trunc && !mixed;
	o->direct_io = others;
	/* A read-only descriptor never uploads at its close (workspace_flush
	 * acts for descriptors that wrote, created or truncated): no FLUSH. */
	o->noflush = acc == O_RDONLY;
	return 0;
}

int workspace_create(struct workspace *ws, const char *rel, mode_t mode, struct wsopen *o)
{
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	if (!rel[0])
		return -EEXIST;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&c->lock);
	struct wsattr a;
	rc = lookup(ws, rel, &a);
	if (rc == 0) {
		pthread_mutex_unlock(&c->lock);
		if (o->flags & O_EXCL)
			return -EEXIST;
		if (a.is_dir)
			return -EISDIR;
		return workspace_open(ws, rel, o);
	}
	if (rc != -ENOENT) {
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
	rc = parent_is_dir(ws, rel);
	if (rc < 0) {
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
	struct wsfile *f = file_new(ws, rel, NULL);
	if (!f) {
		pthread_mutex_unlock(&c->lock);
		return -EIO;
	}
	rc = file_ref(f);
	if (rc < 0) {
		file_detach(f);
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
	f->present = true;
	f->remote_exists = false;
	file_shown(f); /* the create reply carries its attributes */
	cache_set_dirty(f, true); /* even empty, it is uploaded at close */
	f->wgen++;
	f->opens++;
	f->writers += (o->flags & O_ACCMODE) != O_RDONLY; /* as release counts */
	dir_upsert(ws, rel, 0, false, &f->mtime);
	meta_drop(ws, rel);
	if ((mode & 07777) != WS_FILE_MODE && c->cfg.exec)
		(void)mode_queue(ws, rel, mode & 07777);
	c->n.hits++;
	pthread_mutex_unlock(&c->lock);
	rc = handle_new(f, o, NULL);
	if (rc < 0) {
		pthread_mutex_lock(&c->lock);
		f->opens--;
		f->writers -= (o->flags & O_ACCMODE) != O_RDONLY;
		file_unref(f);
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
	o->keep_cache = false;
	return 0;
}

int workspace_read(uint64_t fh, char *buf, size_t size, off_t off)
{
	struct wshandle *h = handle_of(fh);
	if (!h)
		return -EBADF;
	struct wsfile *f = h->f;
	struct wscache *c = f->ws->c;
	/* Opened while its content downloads: what has arrived is read at
	 * once, the rest waited for; a failed download answers its error. */
	struct wsfetch *fe = h->fetch, *refill = NULL;
	uint64_t end = (uint64_t)off + size;
	size_t done = 0;
	int rc = 0;
	for (int pass = 0; pass < 2; pass++) {
		/* Content fetched again into this same cache file (a descriptor
		 * that may write keeps one copy, see file_needs_version): the
		 * new content is read as it arrives, never a half of it. */
		if (!refill && (!fe || __atomic_load_n(&fe->done, __ATOMIC_SEQ_CST)) &&
		    __atomic_load_n(&f->fetch, __ATOMIC_SEQ_CST)) {
			pthread_mutex_lock(&c->lock);
			refill = f->fetch != fe ? f->fetch : NULL;
			if (refill)
				refill->refs++;
			pthread_mutex_unlock(&c->lock);
			if (refill)
				fe = refill;
		}
		if (fe && (rc = cache_fetch_wait(fe, end)) < 0)
			break;
		done = 0;
		while (done < size) {
			ssize_t n =
			    pread(f->fd, buf + done, size - done, off + (off_t)done);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				rc = done ? 0 : -errno;
				break;
			}
			if (n == 0)
				break;
			done += (size_t)n;
		}
		if (rc < 0 || done == size)
			break;
		if (fe) {
			/* Cut short: the end of the file, or a download that
			 * failed and emptied the cache file meanwhile. */
			rc = cache_fetch_wait(fe, end);
			break;
		}
		/* Cut short with no download known: one began meanwhile? */
		if (!__atomic_load_n(&f->fetch, __ATOMIC_SEQ_CST))
			break;
	}
	if (refill) {
		pthread_mutex_lock(&c->lock);
		cache_fetch_put(refill);
		pthread_mutex_unlock(&c->lock);
	}
	return rc < 0 ? rc : (int)done;
}

int workspace_write(uint64_t fh, const char *buf, size_t size, off_t off)
{
	struct wshandle *h = handle_of(fh);
	if (!h)
		return -EBADF;
	struct wsfile *f = h->f;
	struct wscache *c = f->ws->c;
	pthread_mutex_lock(&f->mx);
	/* Writes wait until a download of the content has ended. */
	int rc = cache_fetch_idle(f);
	if (rc < 0) {
		pthread_mutex_unlock(&f->mx);
		return rc;
	}
	pthread_mutex_lock(&c->lock);
	if (h->flags & O_APPEND)
		off = (off_t)f->size;
	uint64_t end = (uint64_t)off + size;
	rc = cache_reserve(c, f, end);
	pthread_mutex_unlock(&c->lock);
	if (rc < 0) {
		pthread_mutex_unlock(&f->mx);
		return rc;
	}
	size_t done = 0;
	while (done < size) {
		ssize_t n = pwrite(f->fd, buf + done, size - done, off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			break;
		}
		done += (size_t)n;
	}
	if (done)
		cache_crc_write(f, buf, done, (uint64_t)off);
	pthread_mutex_lock(&c->lock);
	if (done) {
		if (!f->dirty)
			cache_set_dirty(f, true);
		uint64_t nend = (uint64_t)off + done;
		if (nend > f->size)
			cache_account(f, nend);
		f->wgen++;
		f->present = true;
		clock_gettime(CLOCK_REALTIME, &f->mtime);
		struct wsmeta *m = f->path ? meta_get(f->ws, f->path, false) : NULL;
		if (m)
			m->has_times = false; /* a write sets the time */
	}
	pthread_mutex_unlock(&c->lock);
	if (done)
		h->wrote = true; /* under f->mx: flush reads it there */
	pthread_mutex_unlock(&f->mx);
	return done ? (int)done : rc;
}

static int upload_now(struct wsfile *f, enum upload_caller who)
{
	pthread_mutex_lock(&f->mx);
	int rc = upload_locked(f, who);
	pthread_mutex_unlock(&f->mx);
	return rc;
}

int workspace_flush(uint64_t fh)
{
	struct wshandle *h = handle_of(fh);
	if (!h)
		return -EBADF;
	/* Only a descriptor that wrote uploads at its close: a shell's
	 * "> file" opens, dup2()s and closes the first descriptor before
	 * anything is written, and an empty PUT then would truncate the
	 * server's copy for nothing. What no descriptor wrote (an empty
	 * create, an O_TRUNC open) is uploaded at release, after the last
	 * close; its intent is journaled now, since this close
	 * acknowledges it and release comes after. */
	if (!h->wrote) {
		/* Nothing to journal for clean content; a reader's close then
		 * never waits for a download that runs (or any other work). */
		struct wscache *c = h->f->ws->c;
		pthread_mutex_lock(&c->lock);
		bool dirty = h->f->dirty;
		pthread_mutex_unlock(&c->lock);
		if (!dirty)
			return 0;
	}
	pthread_mutex_lock(&h->f->mx);
	int rc = h->wrote ? upload_locked(h->f, UPLOAD_CALLER_WAITS)
			  : upload_intent_locked(h->f);
	pthread_mutex_unlock(&h->f->mx);
	return rc;
}

int workspace_fsync(uint64_t fh, int datasync)
{
	struct wshandle *h = handle_of(fh);
	if (!h)
		return -EBADF;
	return upload_now(h->f, UPLOAD_CALLER_WAITS);
}

int workspace_release(uint64_t fh)
{
	struct wshandle *h = handle_of(fh);
	if (!h)
		return -EBADF;
	struct wsfile *f = h->f;
	struct wscache *c = f->ws->c;
	pthread_mutex_lock(&c->lock);
	f->opens--;
	f->writers -= (h->flags & O_ACCMODE) != O_RDONLY;
	if (f->opens == 0)
		file_closed(f);
	/* Written (mmap, or a writer whose flush was skipped) and not yet
	 * handled: upload it now rather than wait for a retry. */
	bool upload = f->opens == 0 && f->dirty && !f->pending && !f->unlinked;
	pthread_mutex_unlock(&c->lock);
	if (upload) /* close has returned: durable before the PUT */
		upload_now(f, UPLOAD_DURABLE_FIRST);
	if (h->fetch) {
		pthread_mutex_lock(&c->lock);
		cache_fetch_put(h->fetch);
		pthread_mutex_unlock(&c->lock);
	}
	unref(f);
	h->kind = 0;
	free(h);
	return 0;
}

int workspace_truncate(struct workspace *ws, const char *rel, off_t size, uint64_t fh)
{
	if (size < 0)
		return -EINVAL;
	struct wshandle *h = handle_of(fh);
	if (h) {
		pthread_mutex_lock(&h->f->mx);
		int rc = cache_fetch_idle(h->f);
		if (rc == 0)
			rc = cache_truncate(h->f, (uint64_t)size);
		if (rc == 0)
			h->wrote = true;
		pthread_mutex_unlock(&h->f->mx);
		return rc;
	}
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	if (!rel[0])
		return -EISDIR;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&c->lock);
	struct wsfile *f;
	rc = file_for(ws, rel, &f);
	pthread_mutex_unlock(&c->lock);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&f->mx);
	rc = cache_fetch_idle(f);
	if (rc == 0 && size > 0 && !f->present)
		rc = cache_fetch(f);
	if (rc == 0)
		rc = cache_truncate(f, (uint64_t)size);
	pthread_mutex_lock(&c->lock);
	bool open = f->opens > 0;
	pthread_mutex_unlock(&c->lock);
	/* No close will follow a truncate(2) of a file nobody has open. */
	if (rc == 0 && !open)
		rc = upload_locked(f, UPLOAD_CALLER_WAITS);
	pthread_mutex_unlock(&f->mx);
	unref(f);
	return rc;
}

int workspace_unlink(struct workspace *ws, const char *rel)
{
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	if (!rel[0])
		return -EISDIR;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&c->lock);
	ws_moves_wait(ws, rel);
	struct wsattr a;
	rc = lookup(ws, rel, &a);
	struct wsfile *f = file_find(ws, rel);
	if (rc == 0 && a.is_dir)
		rc = -EISDIR;
	if (rc == 0 && f)
		rc = file_ref(f);
	pthread_mutex_unlock(&c->lock);
	if (rc < 0)
		return rc;

	if (f)
		pthread_mutex_lock(&f->mx);
	pthread_mutex_lock(&c->lock);
	/* Renamed meanwhile (a directory above it moved): not here now. */
	if (f && (!f->path || strcmp(f->path, rel) != 0))
		rc = -ENOENT;
	char *url = ws->url ? strdup(ws->url) : NULL;
	pthread_mutex_unlock(&c->lock);
	if (f && rc == 0)
		upload_cancel(f);
	struct backend_error err;
	if (rc == 0)
		rc = delete_remote(ws, url, rel, &err);
	free(url);
	pthread_mutex_lock(&c->lock);
	if (rc == 0) {
		if (f)
			file_detach(f);
		dir_remove(ws, rel);
		meta_drop(ws, rel);
	}
	pthread_mutex_unlock(&c->lock);
	if (f) {
		pthread_mutex_unlock(&f->mx);
		unref(f);
	}
	return rc;
}

/* PUT then DELETE of an empty placeholder inside rel makes the directory. */
static int make_dir_remote(struct workspace *ws, const char *rel)
{
	struct wscache *c = ws->c;
	char *ph = ws_join(rel, WS_PLACEHOLDER);
	pthread_mutex_lock(&c->lock);
	char *url = ws->url ? strdup(ws->url) : NULL;
	pthread_mutex_unlock(&c->lock);
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int rc = 0;
	if (!ph || !url || fd < 0) {
		rc = !url ? -ENOTCONN : -EIO;
		goto out;
	}
	struct backend_error err;
	enum backend_status st = backend_file_put(c->cfg.backend, url, ph, fd, 0, &err);
	if (st != BACKEND_OK) {
		rc = -ws_backend_errno(st);
		goto out;
	}
	if (delete_remote(ws, url, ph, &err) < 0)
		ws_log(ws, "could not remove a directory placeholder: %s", err.message);
out:
	if (fd >= 0)
		close(fd);
	free(ph);
	free(url);
	return rc;
}

static void made_dirs_add(struct workspace *ws, const char *rel)
{
	char **p = realloc(ws->made_dirs, (ws->nmade + 1) * sizeof(*p));
	if (!p)
		return;
	ws->made_dirs = p;
	if ((p[ws->nmade] = strdup(rel)))
		ws->nmade++;
}

static void made_dirs_drop(struct workspace *ws, const char *rel)
{
	for (size_t i = 0; i < ws->nmade;) {
		if (strcmp(ws->made_dirs[i], rel) == 0 ||
		    ws_is_under(ws->made_dirs[i], rel)) {
			free(ws->made_dirs[i]);
			ws->made_dirs[i] = ws->made_dirs[--ws->nmade];
		} else {
			i++;
		}
	}
}

int workspace_mkdir(struct workspace *ws, const char *rel, mode_t mode)
{
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	if (!rel[0])
		return -EEXIST;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&c->lock);
	ws_moves_wait(ws, rel);
	struct wsattr a;
	rc = lookup(ws, rel, &a);
	if (rc == -ENOENT) {
		int prc = parent_is_dir(ws, rel);
		if (prc < 0) {
			pthread_mutex_unlock(&c->lock);
			return prc;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (rc == 0)
		return -EEXIST;
	if (rc != -ENOENT)
		return rc;
	rc = make_dir_remote(ws, rel);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&c->lock);
	made_dirs_add(ws, rel);
	dir_upsert(ws, rel, 0, true, NULL);
	dir_set_empty(ws, rel);
	meta_drop(ws, rel);
	if ((mode & 07777) != WS_DIR_MODE && c->cfg.exec)
		(void)mode_queue(ws, rel, mode & 07777);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* True when a file created here and not yet uploaded lives under rel. */
static bool local_files_under(struct workspace *ws, const char *rel)
{
	for (struct wsfile *f = ws->all; f; f = f->ws_next)
		if (f->path && (f->dirty || f->pending) && ws_is_under(f->path, rel))
			return true;
	return false;
}

/* rel is empty on the server, by a fresh listing (DELETE removes a whole
 * tree, so a cached one will not do), and here. c->lock held, may be
 * dropped. */
static int dir_check_empty(struct workspace *ws, const char *rel)
{
	dir_stale(ws, rel);
	struct wsdir *d;
	int rc = dir_load(ws, rel, &d);
	if (rc == 0 && (d->n > 0 || local_files_under(ws, rel)))
		rc = -ENOTEMPTY;
	return rc;
}

int workspace_rmdir(struct workspace *ws, const char *rel)
{
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	if (!rel[0])
		return -EBUSY;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&c->lock);
	ws_moves_wait(ws, rel);
	struct wsattr a;
	rc = lookup(ws, rel, &a);
	if (rc == 0 && !a.is_dir)
		rc = -ENOTDIR;
	if (rc == 0 && local_files_under(ws, rel))
		rc = -ENOTEMPTY; /* known without a request */
	if (rc == 0)
		rc = dir_check_empty(ws, rel);
	char *url = ws->url ? strdup(ws->url) : NULL;
	pthread_mutex_unlock(&c->lock);
	if (rc < 0) {
		free(url);
		return rc;
	}
	struct backend_error err;
	rc = delete_remote(ws, url, rel, &err);
	free(url);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&c->lock);
	dir_remove(ws, rel);
	dir_drop(ws, rel);
	made_dirs_drop(ws, rel);
	meta_drop(ws, rel);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* --- rename -----------------------------------------------------------------*/

static void lock_two(struct wsfile *a, struct wsfile *b)
{
	if (!b || a == b) {
		pthread_mutex_lock(&a->mx);
	} else if (a < b) {
		pthread_mutex_lock(&a->mx);
		pthread_mutex_lock(&b->mx);
	} else {
		pthread_mutex_lock(&b->mx);
		pthread_mutex_lock(&a->mx);
	}
}

static void unlock_two(struct wsfile *a, struct wsfile *b)
{
	pthread_mutex_unlock(&a->mx);
	if (b && b != a)
		pthread_mutex_unlock(&b->mx);
}

/* File rename: PUT the local copy at the new name, then DELETE the old.
 * Works while a command runs; an open handle follows the new name. */
static int rename_file(struct workspace *ws, const char *from, const char *to)
{
	struct wscache *c = ws->c;
	pthread_mutex_lock(&c->lock);
	struct wsfile *f, *g = NULL;
	int rc = file_for(ws, from, &f);
	if (rc == 0 && (g = file_find(ws, to)) && file_ref(g) < 0)
		g = NULL;
	pthread_mutex_unlock(&c->lock);
	if (rc < 0)
		return rc;

	lock_two(f, g);
	pthread_mutex_lock(&c->lock);
	/* Renamed meanwhile (a directory above it moved): not here now. */
	if (!f->path || strcmp(f->path, from) != 0)
		rc = -ENOENT;
	pthread_mutex_unlock(&c->lock);
	if (rc == 0 && !f->present)
		rc = cache_fetch(f);
	/* Dirty data is saved under the old name first, so a failure leaves
	 * every name as it was. */
	if (rc == 0)
		rc = upload_locked(f, UPLOAD_DURABLE_FIRST);
	pthread_mutex_lock(&c->lock);
	uint64_t size = f->size;
	char *url = ws->url ? strdup(ws->url) : NULL;
	bool remote = f->remote_exists;
	pthread_mutex_unlock(&c->lock);
	struct backend_error err;
	enum backend_status st = BACKEND_OK;
	if (rc == 0) {
		st = url ? backend_file_put(c->cfg.backend, url, to, f->fd, size, &err)
			 : BACKEND_NOT_SENT;
		if (st != BACKEND_OK)
			rc = -ws_backend_errno(st);
	}
	if (rc == 0 && g)
		upload_cancel(g);
	if (rc == 0 && remote) {
		rc = delete_remote(ws, url, from, &err);
		if (rc < 0)
			ws_log(ws,
			       "rename: the new name is written, the old one is still "
			       "there: %s",
			       err.message);
	}
	free(url);
	pthread_mutex_lock(&c->lock);
	if (rc == 0) {
		if (g && g != f)
			file_detach(g);
		dir_remove(ws, from);
		file_set_path(f, to);
		f->remote_exists = true;
		struct wsmeta *m = meta_get(ws, from, false);
		bool has_times = m && m->has_times;
		meta_move(ws, from, to);
		dir_upsert(ws, to, size, false, has_times ? NULL : &f->mtime);
		c->n.renames++;
	} else if (st == BACKEND_OK || rc == -EIO) {
		/* The new name may be there now, or the outcome is unknown. */
		dir_stale_all(ws);
	}
	pthread_mutex_unlock(&c->lock);
	unlock_two(f, g);
	if (g)
		unref(g);
	unref(f);
	return rc;
}

/* Copies the tree from into to through the file API (when no command can
 * run mv): GET each file into a scratch file, PUT it at the new name. */
static int copy_tree(struct workspace *ws, const char *url, const char *from,
		     const char *to, int depth)
{
	struct wscache *c = ws->c;
	if (depth > 64)
		return -ELOOP;
	struct backend_listing l = {0};
	struct backend_error err;
	enum backend_status st = backend_list(c->cfg.backend, url, from, &l, &err);
	if (st != BACKEND_OK)
		return -ws_backend_errno(st);
	int rc = 0;
	if (l.count == 0)
		rc = make_dir_remote(ws, to);
	for (size_t i = 0; i < l.count && rc == 0; i++) {
		struct backend_entry *e = &l.entries[i];
		char *sf = ws_join(from, e->name), *dt = ws_join(to, e->name);
		if (!sf || !dt) {
			rc = -ENOMEM;
		} else if (e->is_dir) {
			rc = copy_tree(ws, url, sf, dt, depth + 1);
		} else {
			char *tmp = ws_join(c->files_dir, "copy-XXXXXX");
			int fd = tmp ? mkstemp(tmp) : -1;
			if (fd < 0) {
				rc = -EIO;
			} else {
				unlink(tmp);
				uint64_t got = 0;
				st = backend_file_get(c->cfg.backend, url, sf, fd, &got,
						      &err);
				if (st == BACKEND_OK)
					st = backend_file_put(c->cfg.backend, url, dt, fd,
							      got, &err);
				if (st != BACKEND_OK)
					rc = -ws_backend_errno(st);
				close(fd);
			}
			free(tmp);
		}
		free(sf);
		free(dt);
	}
	backend_listing_clear(&l);
	return rc;
}

/* Whether rel is at or below a directory another thread is renaming. */
static bool moved_by_other(const struct workspace *ws, const char *rel)
{
	pthread_t self = pthread_self();
	for (const struct wsmove *m = ws->moves; m; m = m->next)
		if (!pthread_equal(m->by, self) &&
		    (strcmp(rel, m->dir) == 0 || ws_is_under(rel, m->dir)))
			return true;
	return false;
}

void ws_moves_wait(struct workspace *ws, const char *rel)
{
	while (moved_by_other(ws, rel))
		pthread_cond_wait(&ws->c->cond, &ws->c->lock);
}

void file_moves_wait(struct wsfile *f)
{
	while (f->path && moved_by_other(f->ws, f->path))
		pthread_cond_wait(&f->ws->c->cond, &f->ws->c->lock);
}

static int ptr_cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
	return x < y ? -1 : x > y;
}

/* The cached files below dir, each referenced, in the order their
 * mutexes are taken (by address, as lock_two). c->lock held. */
static int files_under(struct workspace *ws, const char *dir, struct wsfile ***out,
		       size_t *nout)
{
	size_t n = 0, cap = 0;
	struct wsfile **v = NULL;
	for (struct wsfile *f = ws->all; f; f = f->ws_next) {
		if (!f->path || !ws_is_under(f->path, dir))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			struct wsfile **p = realloc(v, cap * sizeof(*p));
			if (!p)
				goto fail;
			v = p;
		}
		if (file_ref(f) < 0)
			goto fail;
		v[n++] = f;
	}
	if (n)
		qsort(v, n, sizeof(*v), ptr_cmp);
	*out = v;
	*nout = n;
	return 0;
fail:
	while (n)
		file_unref(v[--n]);
	free(v);
	return -ENOMEM;
}

/* Whether a PUT of a file below dir is on its way (c->lock held). */
static bool puts_under(const struct workspace *ws, const char *dir)
{
	for (const struct wsfile *f = ws->all; f; f = f->ws_next)
		if (f->put_path && ws_is_under(f->put_path, dir))
			return true;
	return false;
}

/* Directory rename: mv in the sandbox, or a copy through the file API.
 * Local changes below from are uploaded first. Then, until the rename
 * ends, every other request for a path below from waits (ws->moves), and
 * the PUTs already on their way end before the move: a close, a retry or
 * a new file there uploads to the new name afterwards and never makes
 * the old directory again. */
static int rename_dir(struct workspace *ws, const char *from, const char *to,
		      bool dst_exists)
{
	struct wscache *c = ws->c;
	struct wsmove mv = {.dir = from, .by = pthread_self()};
	struct wsfile **held = NULL;
	size_t nheld = 0;
	pthread_mutex_lock(&c->lock);
	int rc = dst_exists ? dir_check_empty(ws, to) : 0;
	char *url = ws->url ? strdup(ws->url) : NULL;
	if (rc == 0 && !url)
		rc = -ENOTCONN;
	if (rc == 0)
		rc = files_under(ws, from, &held, &nheld);
	pthread_mutex_unlock(&c->lock);
	/* One pass: what is written after it is uploaded to the new name. */
	for (size_t i = 0; i < nheld; i++) {
		if (rc == 0) {
			pthread_mutex_lock(&held[i]->mx);
			rc = upload_locked(held[i], UPLOAD_DURABLE_FIRST);
			pthread_mutex_unlock(&held[i]->mx);
		}
		unref(held[i]);
	}
	free(held);
	if (rc < 0) {
		free(url);
		return rc;
	}
	pthread_mutex_lock(&c->lock);
	mv.next = ws->moves;
	ws->moves = &mv;
	while (puts_under(ws, from))
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
	if (rc < 0) {
		/* nothing moved */
	} else if (c->cfg.exec) {
		char *qf = ws_shell_quote(from), *qt = ws_shell_quote(to), *cmd = NULL;
		if (qf && qt &&
		    asprintf(&cmd, "%s%s%s mv -- %s %s", dst_exists ? "rmdir -- " : "",
			     dst_exists ? qt : "", dst_exists ? " &&" : "", qf, qt) < 0)
			cmd = NULL;
		free(qf);
		free(qt);
		int code = 0;
		rc = cmd ? c->cfg.exec(c->cfg.exec_ctx, ws->id, cmd, &code) : -ENOMEM;
		free(cmd);
		if (rc == 0 && code != 0)
			rc = -EIO;
	} else {
		struct backend_error err;
		if (dst_exists)
			rc = delete_remote(ws, url, to, &err);
		if (rc == 0)
			rc = copy_tree(ws, url, from, to, 0);
		if (rc == 0)
			rc = delete_remote(ws, url, from, &err);
	}
	free(url);
	pthread_mutex_lock(&c->lock);
	if (rc == 0) {
		/* Every file below from follows, those made meanwhile too. */
		size_t nfrom = strlen(from);
		for (struct wsfile *f = ws->all; f; f = f->ws_next) {
			if (!f->path || !ws_is_under(f->path, from))
				continue;
			char *np = NULL;
			if (asprintf(&np, "%s%s", to, f->path + nfrom) >= 0) {
				struct wsfile *old = file_find(ws, np);
				if (old && old != f)
					file_detach(old);
				file_set_path(f, np);
				free(np);
				/* An intent journaled meanwhile names the old path:
				 * the next upload journals a new one (wgen is never
				 * UINT64_MAX). */
				if (f->upload_id)
					f->intent_gen = UINT64_MAX;
			}
		}
		meta_move(ws, from, to);
		made_dirs_drop(ws, from);
		c->n.dir_renames++;
	}
	/* Listings of both trees and their parents changed. */
	dir_drop(ws, from);
	dir_drop(ws, to);
	dir_remove(ws, from);
	const char *name;
	char *tp = ws_parent(to, &name);
	if (tp)
		dir_stale(ws, tp);
	free(tp);
	for (struct wsmove **p = &ws->moves; *p; p = &(*p)->next)
		if (*p == &mv) {
			*p = mv.next;
			break;
		}
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int workspace_rename(struct workspace *ws, const char *from, const char *to,
		     unsigned int flags)
{
	int rc = ws_check(ws, from);
	if (rc == 0)
		rc = ws_check(ws, to);
	if (rc < 0)
		return rc;
	if (!from[0] || !to[0])
		return -EBUSY;
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
	/* RENAME_EXCHANGE cannot be done atomically with whole-file PUTs. */
	if (flags & ~(unsigned)RENAME_NOREPLACE)
		return -EINVAL;
	if (strcmp(from, to) == 0)
		return 0;
	if (ws_is_under(to, from))
		return -EINVAL;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&c->lock);
	ws_moves_wait(ws, from);
	ws_moves_wait(ws, to);
	struct wsattr src, dst;
	rc = lookup(ws, from, &src);
	int drc = rc == 0 ? lookup(ws, to, &dst) : 0;
	pthread_mutex_unlock(&c->lock);
	if (rc < 0)
		return rc;
	if (drc < 0 && drc != -ENOENT)
		return drc;
	bool dst_exists = drc == 0;
	if (drc == -ENOENT) {
		/* The new parent must exist. */
		pthread_mutex_lock(&c->lock);
		int prc = parent_is_dir(ws, to);
		pthread_mutex_unlock(&c->lock);
		if (prc < 0)
			return prc;
	}
	if (dst_exists && (flags & RENAME_NOREPLACE))
		return -EEXIST;
	if (src.is_dir) {
		if (dst_exists && !dst.is_dir)
			return -ENOTDIR;
		return rename_dir(ws, from, to, dst_exists);
	}
	if (dst_exists && dst.is_dir)
		return -EISDIR;
	return rename_file(ws, from, to);
}

/* --- modes, owners, times, links, statfs -------------------------------------*/

int workspace_chmod(struct workspace *ws, const char *rel, mode_t mode)
{
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&c->lock);
	struct wsattr a;
	rc = lookup(ws, rel, &a);
	if (rc == 0) {
		struct stat st;
		fill_stat(ws, rel, &a, &st);
		mode_t perm = mode & 07777;
		if ((st.st_mode & 07777) == perm) {
			rc = 0; /* nothing to change */
		} else if (!c->cfg.exec) {
			rc = -ENOTSUP; /* no way to apply it in the sandbox */
		} else {
			rc = mode_queue(ws, rel, perm);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int workspace_chown(struct workspace *ws, const char *rel, uid_t uid, gid_t gid)
{
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&c->lock);
	struct wsattr a;
	rc = lookup(ws, rel, &a);
	pthread_mutex_unlock(&c->lock);
	if (rc < 0)
		return rc;
	if ((uid != (uid_t)-1 && uid != c->cfg.uid) ||
	    (gid != (gid_t)-1 && gid != c->cfg.gid))
		return -EPERM;
	return 0;
}

int workspace_utimens(struct workspace *ws, const char *rel, const struct timespec tv[2])
{
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&c->lock);
	struct wsattr a;
	rc = lookup(ws, rel, &a);
	if (rc == 0) {
		struct stat st;
		fill_stat(ws, rel, &a, &st);
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		struct timespec at = st.st_atim, mt = st.st_mtim;
		if (!tv) {
			at = mt = now;
		} else {
			if (tv[0].tv_nsec == UTIME_NOW)
				at = now;
			else if (tv[0].tv_nsec != UTIME_OMIT)
				at = tv[0];
			if (tv[1].tv_nsec == UTIME_NOW)
				mt = now;
			else if (tv[1].tv_nsec != UTIME_OMIT)
				mt = tv[1];
		}
		struct wsmeta *m = meta_get(ws, rel, true);
		if (!m) {
			rc = -ENOMEM;
		} else {
			m->has_times = true;
			m->atime = at;
			m->mtime = mt;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int workspace_symlink(struct workspace *ws, const char *target, const char *rel)
{
	/* The contract has no links; EPERM is symlink(2)'s "not supported by
	 * this filesystem", which git probes for and tar reports per file. */
	return -EPERM;
}

int workspace_link(struct workspace *ws, const char *from, const char *to)
{
	/* git falls back to rename when link fails. */
	return -EPERM;
}

int workspace_statfs(struct workspace *ws, struct statvfs *st)
{
	memset(st, 0, sizeof(*st));
	if (!ws || statvfs(ws->c->cache_dir, st) < 0) {
		st->f_bsize = st->f_frsize = 4096;
		st->f_blocks = st->f_bfree = st->f_bavail = 1ULL << 28;
		st->f_files = st->f_ffree = st->f_favail = 1ULL << 24;
	}
	st->f_namemax = 255;
	return 0;
}

off_t workspace_lseek(uint64_t fh, off_t off, int whence)
{
	struct wshandle *h = handle_of(fh);
	if (!h)
		return -EBADF;
	if (h->fetch) {
		/* Holes and the end are known once the download has ended. */
		int rc = cache_fetch_wait(h->fetch, UINT64_MAX);
		if (rc < 0)
			return rc;
	}
	off_t r = lseek(h->f->fd, off, whence);
	return r < 0 ? -errno : r;
}
