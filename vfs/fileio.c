/*
 * fileio.c — file content through cache files: open, create, read, write,
 * flush, fsync, release and truncate of ID/workspace/REL, and the file
 * helpers the other operations share.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "workspace_i.h"

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
 * f->mx held, ws->lock not held. */
void file_upload_cancel(struct wsfile *f)
{
	struct workspace *ws = f->ws;
	struct wscache *c = ws->c;
	earlyput_reap(f); /* nothing of it on the wire; its intent is f's */
	pthread_mutex_lock(&ws->lock);
	uint64_t id = f->upload_id;
	f->upload_id = 0;
	pthread_mutex_unlock(&ws->lock);
	upload_supersede(c, f->ws->id, id, true);
}

/* DELETE of rel (a file or a whole tree): 0, or -errno. A name already
 * gone counts as deleted: it is gone either way. */
int ws_delete_remote(struct workspace *ws, const char *url, const char *rel,
		     struct backend_error *err)
{
	enum backend_status st =
	    url ? backend_file_delete(ws->c->cfg.backend, url, rel, err)
		: BACKEND_NOT_SENT;
	if (st == BACKEND_OK || st == BACKEND_NOT_FOUND)
		return 0;
	return -ws_backend_errno(st);
}

/* Drops a reference taken by an operation (ws->lock not held). A file
 * nobody uses any more may be evicted now (a closed file larger than the
 * cache's bound goes first). */
void file_drop_ref(struct wsfile *f)
{
	struct workspace *ws = f->ws;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&ws->lock);
	file_unref(f);
	cache_trim(c, ws);
	pthread_mutex_unlock(&ws->lock);
}

/* The cache entry of an existing file, referenced; ws->lock held. */
int file_for(struct workspace *ws, const char *rel, struct wsfile **out)
{
	struct wsattr a;
	int rc = ws_lookup(ws, rel, &a);
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

/* Another version of rel than f is still open (ws->lock held). */
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
	*fe = NULL;
	*fetched = false;
	for (;;) {
		pthread_mutex_lock(&ws->lock);
		struct wsfetch *cur = f->fetch;
		if (cur && cur->epoch == ws->epoch && !atomic_load(&cur->done)) {
			/* One download per file: read through the running one. */
			cur->refs++;
			pthread_mutex_unlock(&ws->lock);
			*fe = cur;
			*fetched = true;
			return 0;
		}
		if (!cur) {
			file_expire_after_command(f);
			if (f->present) {
				pthread_mutex_unlock(&ws->lock);
				return 0;
			}
		}
		pthread_mutex_unlock(&ws->lock);
		if (cur) {
			/* It began before a command (it brings the old content)
			 * or is ending: wait for it, then look again. */
			int rc = cache_fetch_idle(f);
			if (rc < 0)
				return rc;
			continue;
		}
		pthread_mutex_lock(&f->mx);
		pthread_mutex_lock(&ws->lock);
		bool again = f->fetch || f->present;
		pthread_mutex_unlock(&ws->lock);
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
		pthread_mutex_lock(&ws->lock);
		cache_fetch_put(nf); /* done: the handle needs it no more */
		pthread_mutex_unlock(&ws->lock);
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

	pthread_mutex_lock(&ws->lock);
	struct wsfile *f;
	rc = file_for(ws, rel, &f);
	if (rc == 0) {
		f->opens++;
		f->writers += acc != O_RDONLY;
	}
	pthread_mutex_unlock(&ws->lock);
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
	pthread_mutex_lock(&ws->lock);
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
			WS_COUNT(c, hits, 1);
		/* The kernel keeps one page cache per name: while descriptors
		 * of an older version read theirs through it, this one reads
		 * past it; once they are gone, the pages they left are
		 * dropped at the next open. */
		others = other_version_open(ws, rel, f);
		mixed = f->kernel_mixed;
		if (!others)
			f->kernel_mixed = false;
	}
	pthread_mutex_unlock(&ws->lock);
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
	pthread_mutex_lock(&ws->lock);
	struct wsattr a;
	rc = ws_lookup(ws, rel, &a);
	if (rc == 0) {
		pthread_mutex_unlock(&ws->lock);
		if (o->flags & O_EXCL)
			return -EEXIST;
		if (a.is_dir)
			return -EISDIR;
		return workspace_open(ws, rel, o);
	}
	if (rc != -ENOENT) {
		pthread_mutex_unlock(&ws->lock);
		return rc;
	}
	rc = ws_parent_is_dir(ws, rel);
	if (rc < 0) {
		pthread_mutex_unlock(&ws->lock);
		return rc;
	}
	struct wsfile *f = file_new(ws, rel, NULL);
	if (!f) {
		pthread_mutex_unlock(&ws->lock);
		return -EIO;
	}
	rc = file_ref(f);
	if (rc < 0) {
		file_detach(f);
		pthread_mutex_unlock(&ws->lock);
		return rc;
	}
	f->present = true;
	f->remote_exists = false;
	cache_set_dirty(f, true); /* even empty, it is uploaded at close */
	f->wgen++;
	f->opens++;
	f->writers += (o->flags & O_ACCMODE) != O_RDONLY; /* as release counts */
	dir_upsert(ws, rel, 0, false, &f->mtime);
	meta_drop(ws, rel);
	if ((mode & 07777) != WS_FILE_MODE && c->cfg.exec)
		(void)ws_mode_queue(ws, rel, mode & 07777);
	WS_COUNT(c, hits, 1);
	pthread_mutex_unlock(&ws->lock);
	rc = handle_new(f, o, NULL);
	if (rc < 0) {
		pthread_mutex_lock(&ws->lock);
		f->opens--;
		f->writers -= (o->flags & O_ACCMODE) != O_RDONLY;
		file_unref(f);
		pthread_mutex_unlock(&ws->lock);
		return rc;
	}
	o->keep_cache = false;
	return 0;
}

int workspace_read(uint64_t fh, char *buf, size_t size, off_t off)
{
	struct wshandle *h = ws_handle_of(fh);
	if (!h)
		return -EBADF;
	struct wsfile *f = h->f;
	struct workspace *ws = f->ws;
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
		if (!refill && (!fe || atomic_load(&fe->done)) &&
		    atomic_load(&f->fetch)) {
			pthread_mutex_lock(&ws->lock);
			refill = f->fetch != fe ? f->fetch : NULL;
			if (refill)
				refill->refs++;
			pthread_mutex_unlock(&ws->lock);
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
		if (!atomic_load(&f->fetch))
			break;
	}
	if (refill) {
		pthread_mutex_lock(&ws->lock);
		cache_fetch_put(refill);
		pthread_mutex_unlock(&ws->lock);
	}
	return rc < 0 ? rc : (int)done;
}

int workspace_write(uint64_t fh, const char *buf, size_t size, off_t off)
{
	struct wshandle *h = ws_handle_of(fh);
	if (!h)
		return -EBADF;
	struct wsfile *f = h->f;
	struct workspace *ws = f->ws;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&f->mx);
	/* Writes wait until a download of the content has ended. */
	int rc = cache_fetch_idle(f);
	if (rc < 0) {
		pthread_mutex_unlock(&f->mx);
		return rc;
	}
	pthread_mutex_lock(&ws->lock);
	if (h->flags & O_APPEND)
		off = (off_t)f->size;
	uint64_t end = (uint64_t)off + size;
	rc = cache_reserve(c, f, end);
	pthread_mutex_unlock(&ws->lock);
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
	uint64_t size_now = 0;
	pthread_mutex_lock(&ws->lock);
	if (done) {
		if (!f->dirty)
			cache_set_dirty(f, true);
		uint64_t nend = (uint64_t)off + done;
		if (nend > f->size)
			cache_account(f, nend);
		size_now = f->size;
		f->wgen++;
		f->present = true;
		clock_gettime(CLOCK_REALTIME, &f->mtime);
		struct wsmeta *m = f->path ? meta_get(f->ws, f->path, false) : NULL;
		if (m)
			m->has_times = false; /* a write sets the time */
	}
	pthread_mutex_unlock(&ws->lock);
	if (done) {
		atomic_store(&h->wrote, true);
		earlyput_wrote(f, size_now);
	}
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
	struct wshandle *h = ws_handle_of(fh);
	if (!h)
		return -EBADF;
	/* Only a descriptor that wrote uploads at its close: a shell's
	 * "> file" opens, dup2()s and closes the first descriptor before
	 * anything is written, and an empty PUT then would truncate the
	 * server's copy for nothing. What no descriptor wrote (an empty
	 * create, an O_TRUNC open) is uploaded at release, after the last
	 * close; its intent is journaled now, since this close
	 * acknowledges it and release comes after. */
	if (!atomic_load(&h->wrote)) {
		/* Nothing to journal for clean content; a reader's close then
		 * never waits for a download that runs (or any other work). */
		struct workspace *ws = h->f->ws;
		pthread_mutex_lock(&ws->lock);
		bool dirty = h->f->dirty;
		pthread_mutex_unlock(&ws->lock);
		if (!dirty)
			return 0;
	}
	pthread_mutex_lock(&h->f->mx);
	int rc = atomic_load(&h->wrote) ? upload_locked(h->f, UPLOAD_CALLER_CLOSES)
					: upload_intent_locked(h->f);
	pthread_mutex_unlock(&h->f->mx);
	return rc;
}

int workspace_fsync(uint64_t fh, int datasync)
{
	struct wshandle *h = ws_handle_of(fh);
	if (!h)
		return -EBADF;
	return upload_now(h->f, UPLOAD_CALLER_WAITS);
}

int workspace_release(uint64_t fh)
{
	struct wshandle *h = ws_handle_of(fh);
	if (!h)
		return -EBADF;
	struct wsfile *f = h->f;
	struct workspace *ws = f->ws;
	pthread_mutex_lock(&ws->lock);
	f->opens--;
	f->writers -= (h->flags & O_ACCMODE) != O_RDONLY;
	if (f->opens == 0)
		file_closed(f);
	/* Written (mmap, or a writer whose flush was skipped) and not yet
	 * handled: upload it now rather than wait for a retry. */
	bool upload = f->opens == 0 && f->dirty && !f->pending && !f->unlinked;
	pthread_mutex_unlock(&ws->lock);
	if (upload) /* close has returned: durable before the PUT */
		upload_now(f, UPLOAD_DURABLE_FIRST);
	if (h->fetch) {
		pthread_mutex_lock(&ws->lock);
		cache_fetch_put(h->fetch);
		pthread_mutex_unlock(&ws->lock);
	}
	file_drop_ref(f);
	h->kind = 0;
	free(h);
	return 0;
}

int workspace_truncate(struct workspace *ws, const char *rel, off_t size, uint64_t fh)
{
	if (size < 0)
		return -EINVAL;
	struct wshandle *h = ws_handle_of(fh);
	if (h) {
		pthread_mutex_lock(&h->f->mx);
		int rc = cache_fetch_idle(h->f);
		if (rc == 0)
			rc = cache_truncate(h->f, (uint64_t)size);
		if (rc == 0)
			atomic_store(&h->wrote, true);
		pthread_mutex_unlock(&h->f->mx);
		return rc;
	}
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	if (!rel[0])
		return -EISDIR;
	pthread_mutex_lock(&ws->lock);
	struct wsfile *f;
	rc = file_for(ws, rel, &f);
	pthread_mutex_unlock(&ws->lock);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&f->mx);
	rc = cache_fetch_idle(f);
	if (rc == 0 && size > 0 && !f->present)
		rc = cache_fetch(f);
	if (rc == 0)
		rc = cache_truncate(f, (uint64_t)size);
	pthread_mutex_lock(&ws->lock);
	bool open = f->opens > 0;
	pthread_mutex_unlock(&ws->lock);
	/* No close will follow a truncate(2) of a file nobody has open. */
	if (rc == 0 && !open)
		rc = upload_locked(f, UPLOAD_CALLER_WAITS);
	pthread_mutex_unlock(&f->mx);
	file_drop_ref(f);
	return rc;
}
