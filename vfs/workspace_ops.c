/*
 * workspace_ops.c — the FUSE operations on ID/workspace/REL (DESIGN.md §3):
 * names and lookups (metadata from listings), getattr, unlink, mkdir,
 * rmdir, modes, owners, times and statfs, built from whole-file GET, PUT
 * and DELETE. Directory handles are in readdir.c, file content in
 * fileio.c, rename in rename.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "workspace_i.h"

struct wshandle *ws_handle_of(uint64_t fh)
{
	if (!fh)
		return NULL;
	unsigned int *kind = (unsigned int *)(uintptr_t)fh;
	return *kind == WS_HANDLE_FILE ? (struct wshandle *)kind : NULL;
}

/* The cache entry, not the listing, tells f's size: it holds changes not
 * yet on the server, or it is open and no command ran since it was read. */
bool file_auth(const struct wsfile *f)
{
	/* Not while its content is being fetched: its size is not known
	 * yet, and a lookup answering the partial size makes the kernel
	 * read a short (even empty) file in every open of it. */
	return f->dirty || f->pending ||
	       (f->refs > 0 && f->present &&
		(f->epoch == f->ws->epoch || !f->remote_exists));
}

/* ws->lock held; may drop and retake it (listing fetch). */
int ws_lookup(struct workspace *ws, const char *rel, struct wsattr *a)
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
		WS_COUNT(ws->c, negative_hits, 1);
		return -ENOENT;
	}
	a->is_dir = e->is_dir;
	a->is_link = e->is_link;
	a->size = e->size;
	a->mtime = e->seen;
	if (e->is_link) {
		/* A link has no content of its own here: a lookup never
		 * fetches its target's. */
	} else if (f && e->is_dir) {
		file_drop_clean(f);
	} else if (f && f->present && f->size != e->size)
		f->present = false; /* changed on the server: fetch again */
	return 0;
live:
	a->is_dir = false;
	a->size = f->size;
	a->mtime = f->mtime;
	return 0;
}

/* The parent of rel is a directory (ws->lock held, may be dropped). */
int ws_parent_is_dir(struct workspace *ws, const char *rel)
{
	const char *name;
	char *parent = ws_parent(rel, &name);
	if (!parent)
		return -ENOMEM;
	struct wsattr a;
	int rc = ws_lookup(ws, parent, &a);
	free(parent);
	if (rc == 0 && !a.is_dir)
		rc = -ENOTDIR;
	return rc;
}

/* Records permission bits to apply in the sandbox with chmod before the
 * next command (workspace_before_command); ws->lock held. */
int ws_mode_queue(struct workspace *ws, const char *rel, mode_t perm)
{
	struct wsmeta *m = meta_get(ws, rel, true);
	if (!m)
		return -ENOMEM;
	m->has_mode = true;
	m->mode = perm;
	m->mode_queued = true;
	return 0;
}

void ws_fill_stat(struct workspace *ws, const char *rel, const struct wsattr *a,
		  struct stat *st)
{
	const struct wscache_config *cfg = &ws->c->cfg;
	struct wsmeta *m = meta_get(ws, rel, false);
	memset(st, 0, sizeof(*st));
	mode_t perm = a->is_dir ? WS_DIR_MODE : WS_FILE_MODE;
	if (m && m->has_mode)
		perm = m->mode & 07777;
	st->st_mode = (a->is_dir ? S_IFDIR : S_IFREG) | perm;
	if (a->is_link)
		st->st_mode = S_IFLNK | 0777; /* a link's own mode is not used */
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
	struct wsattr a = {.is_dir = false, .size = f->size, .mtime = f->mtime};
	/* An older version still open is not unlinked: its name has other
	 * content now. */
	const char *name = f->path ? f->path : f->version_of;
	if (name) {
		ws_fill_stat(ws, name, &a, st);
	} else {
		ws_fill_stat(ws, "", &a, st);
		st->st_mode = S_IFREG | WS_FILE_MODE;
		st->st_nlink = 0;
	}
}

int workspace_getattr(struct workspace *ws, const char *rel, struct stat *st, uint64_t fh)
{
	struct wshandle *h = ws_handle_of(fh);
	if (h) {
		struct wsfile *f = h->f;
		ws = f->ws; /* the caller may know only the handle */
		pthread_mutex_lock(&ws->lock);
		/* Content not (yet) here, downloading or after a failed
		 * download: the listing tells the size, never the part in the
		 * cache file. */
		bool by_name = f->path && !f->present && !f->dirty && !f->pending;
		if (!by_name) {
			fill_file_stat(f, st);
			pthread_mutex_unlock(&ws->lock);
			return 0;
		}
		char *path = strdup(f->path);
		struct wsattr a;
		int rc = path ? ws_lookup(f->ws, path, &a) : -ENOMEM;
		if (rc == 0)
			ws_fill_stat(f->ws, path, &a, st);
		pthread_mutex_unlock(&ws->lock);
		free(path);
		return rc;
	}
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&ws->lock);
	struct wsattr a;
	rc = ws_lookup(ws, rel, &a); /* ws_check hid the machinery already */
	if (rc == 0)
		ws_fill_stat(ws, rel, &a, st);
	pthread_mutex_unlock(&ws->lock);
	return rc;
}

int workspace_unlink(struct workspace *ws, const char *rel)
{
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	if (!rel[0])
		return -EISDIR;
	pthread_mutex_lock(&ws->lock);
	ws_moves_wait(ws, rel);
	struct wsattr a;
	rc = ws_lookup(ws, rel, &a);
	struct wsfile *f = file_find(ws, rel);
	if (rc == 0 && a.is_dir)
		rc = -EISDIR;
	if (rc == 0 && a.is_link) {
		pthread_mutex_unlock(&ws->lock);
		return ws_link_unlink(ws, rel); /* by a command, never a DELETE */
	}
	if (rc == 0 && f)
		rc = file_ref(f);
	pthread_mutex_unlock(&ws->lock);
	if (rc < 0)
		return rc;

	if (f)
		pthread_mutex_lock(&f->mx);
	pthread_mutex_lock(&ws->lock);
	/* Renamed meanwhile (a directory above it moved): not here now. */
	if (f && (!f->path || strcmp(f->path, rel) != 0))
		rc = -ENOENT;
	char *url = ws->url ? strdup(ws->url) : NULL;
	pthread_mutex_unlock(&ws->lock);
	if (f && rc == 0)
		file_upload_cancel(f);
	struct backend_error err;
	if (rc == 0)
		rc = ws_delete_remote(ws, url, rel, &err);
	free(url);
	pthread_mutex_lock(&ws->lock);
	if (rc == 0) {
		if (f)
			file_detach(f);
		dir_remove(ws, rel);
		meta_drop(ws, rel);
	}
	pthread_mutex_unlock(&ws->lock);
	if (f) {
		pthread_mutex_unlock(&f->mx);
		file_drop_ref(f);
	}
	return rc;
}

/* PUT then DELETE of an empty placeholder inside rel makes the directory. */
int ws_make_dir_remote(struct workspace *ws, const char *rel)
{
	struct wscache *c = ws->c;
	char *ph = ws_join(rel, WS_PLACEHOLDER);
	pthread_mutex_lock(&ws->lock);
	char *url = ws->url ? strdup(ws->url) : NULL;
	pthread_mutex_unlock(&ws->lock);
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
	if (ws_delete_remote(ws, url, ph, &err) < 0)
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

void ws_made_dirs_drop(struct workspace *ws, const char *rel)
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
	pthread_mutex_lock(&ws->lock);
	ws_moves_wait(ws, rel);
	struct wsattr a;
	rc = ws_lookup(ws, rel, &a);
	if (rc == -ENOENT) {
		int prc = ws_parent_is_dir(ws, rel);
		if (prc < 0) {
			pthread_mutex_unlock(&ws->lock);
			return prc;
		}
	}
	pthread_mutex_unlock(&ws->lock);
	if (rc == 0)
		return -EEXIST;
	if (rc != -ENOENT)
		return rc;
	rc = ws_make_dir_remote(ws, rel);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&ws->lock);
	made_dirs_add(ws, rel);
	dir_upsert(ws, rel, 0, true, NULL);
	dir_set_empty(ws, rel);
	meta_drop(ws, rel);
	if ((mode & 07777) != WS_DIR_MODE && c->cfg.exec)
		(void)ws_mode_queue(ws, rel, mode & 07777);
	pthread_mutex_unlock(&ws->lock);
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
 * tree, so a cached one will not do), and here. ws->lock held, may be
 * dropped. */
int ws_dir_check_empty(struct workspace *ws, const char *rel)
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
	pthread_mutex_lock(&ws->lock);
	ws_moves_wait(ws, rel);
	struct wsattr a;
	rc = ws_lookup(ws, rel, &a);
	if (rc == 0 && !a.is_dir)
		rc = -ENOTDIR;
	if (rc == 0 && local_files_under(ws, rel))
		rc = -ENOTEMPTY; /* known without a request */
	if (rc == 0)
		rc = ws_dir_check_empty(ws, rel);
	char *url = ws->url ? strdup(ws->url) : NULL;
	pthread_mutex_unlock(&ws->lock);
	if (rc < 0) {
		free(url);
		return rc;
	}
	struct backend_error err;
	rc = ws_delete_remote(ws, url, rel, &err);
	free(url);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&ws->lock);
	dir_remove(ws, rel);
	dir_drop(ws, rel);
	ws_made_dirs_drop(ws, rel);
	meta_drop(ws, rel);
	pthread_mutex_unlock(&ws->lock);
	return 0;
}

/* --- modes, owners, times, links, statfs -------------------------------------*/

int workspace_chmod(struct workspace *ws, const char *rel, mode_t mode)
{
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&ws->lock);
	struct wsattr a;
	rc = ws_lookup(ws, rel, &a);
	if (rc == 0) {
		struct stat st;
		ws_fill_stat(ws, rel, &a, &st);
		mode_t perm = mode & 07777;
		if ((st.st_mode & 07777) == perm) {
			rc = 0; /* nothing to change */
		} else if (!c->cfg.exec) {
			rc = -ENOTSUP; /* no way to apply it in the sandbox */
		} else {
			rc = ws_mode_queue(ws, rel, perm);
		}
	}
	pthread_mutex_unlock(&ws->lock);
	return rc;
}

int workspace_chown(struct workspace *ws, const char *rel, uid_t uid, gid_t gid)
{
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&ws->lock);
	struct wsattr a;
	rc = ws_lookup(ws, rel, &a);
	pthread_mutex_unlock(&ws->lock);
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
	pthread_mutex_lock(&ws->lock);
	struct wsattr a;
	rc = ws_lookup(ws, rel, &a);
	if (rc == 0) {
		struct stat st;
		ws_fill_stat(ws, rel, &a, &st);
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
	pthread_mutex_unlock(&ws->lock);
	return rc;
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
	} else {
		/* What cache files leave free is not there to write into. */
		fsblkcnt_t kept = st->f_blocks / 100 * ws->c->cfg.reserve_percent;
		st->f_bavail = st->f_bavail > kept ? st->f_bavail - kept : 0;
	}
	st->f_namemax = 255;
	return 0;
}

off_t workspace_lseek(uint64_t fh, off_t off, int whence)
{
	struct wshandle *h = ws_handle_of(fh);
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
