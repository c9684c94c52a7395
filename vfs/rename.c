/*
 * rename.c — rename of files (cache file and metadata moved, the old name
 * deleted) and of directories (copied, then deleted), and the waits of
 * other operations on a tree being renamed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "workspace_i.h"

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
	pthread_mutex_lock(&ws->lock);
	struct wsfile *f, *g = NULL;
	int rc = file_for(ws, from, &f);
	if (rc == 0 && (g = file_find(ws, to)) && file_ref(g) < 0)
		g = NULL;
	pthread_mutex_unlock(&ws->lock);
	if (rc < 0)
		return rc;

	lock_two(f, g);
	pthread_mutex_lock(&ws->lock);
	/* Renamed meanwhile (a directory above it moved): not here now. */
	if (!f->path || strcmp(f->path, from) != 0)
		rc = -ENOENT;
	pthread_mutex_unlock(&ws->lock);
	if (rc == 0 && !f->present)
		rc = cache_fetch(f);
	/* Dirty data is saved under the old name first, so a failure leaves
	 * every name as it was. */
	if (rc == 0)
		rc = upload_locked(f, UPLOAD_DURABLE_FIRST);
	pthread_mutex_lock(&ws->lock);
	uint64_t size = f->size;
	char *url = ws->url ? strdup(ws->url) : NULL;
	bool remote = f->remote_exists;
	pthread_mutex_unlock(&ws->lock);
	struct backend_error err;
	enum backend_status st = BACKEND_OK;
	if (rc == 0) {
		st = url ? backend_file_put(c->cfg.backend, url, to, f->fd, size, &err)
			 : BACKEND_NOT_SENT;
		if (st != BACKEND_OK)
			rc = -ws_backend_errno(st);
	}
	if (rc == 0 && g)
		file_upload_cancel(g);
	if (rc == 0 && remote) {
		rc = ws_delete_remote(ws, url, from, &err);
		if (rc < 0)
			ws_log(ws,
			       "rename: the new name is written, the old one is still "
			       "there: %s",
			       err.message);
	}
	free(url);
	pthread_mutex_lock(&ws->lock);
	if (rc == 0) {
		if (g && g != f)
			file_detach(g);
		dir_remove(ws, from);
		file_set_path(f, to);
		f->remote_exists = true;
		struct wsmeta *m = meta_get(ws, from, false);
		bool has_times = m && m->has_times;
		meta_move_one(ws, from, to);
		dir_upsert(ws, to, size, false, has_times ? NULL : &f->mtime);
		WS_COUNT(c, renames, 1);
	} else if (st == BACKEND_OK || rc == -EIO) {
		/* The new name may be there now, or the outcome is unknown. */
		dir_stale_all(ws);
	}
	pthread_mutex_unlock(&ws->lock);
	unlock_two(f, g);
	if (g)
		file_drop_ref(g);
	file_drop_ref(f);
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
		rc = ws_make_dir_remote(ws, to);
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
		pthread_cond_wait(&ws->cond, &ws->lock);
}

void file_moves_wait(struct wsfile *f)
{
	while (f->path && moved_by_other(f->ws, f->path))
		pthread_cond_wait(&f->ws->cond, &f->ws->lock);
}

static int ptr_cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
	return x < y ? -1 : x > y;
}

/* The cached files below dir, each referenced, in the order their
 * mutexes are taken (by address, as lock_two). ws->lock held. */
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

/* Whether a PUT of a file below dir is on its way (ws->lock held). */
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
	struct wslinkrec *lrecs = NULL; /* links moved with it, to journal */
	size_t nlrecs = 0;
	struct wsfile **held = NULL;
	size_t nheld = 0;
	pthread_mutex_lock(&ws->lock);
	int rc = dst_exists ? ws_dir_check_empty(ws, to) : 0;
	char *url = ws->url ? strdup(ws->url) : NULL;
	if (rc == 0 && !url)
		rc = -ENOTCONN;
	if (rc == 0)
		rc = files_under(ws, from, &held, &nheld);
	pthread_mutex_unlock(&ws->lock);
	/* One pass: what is written after it is uploaded to the new name. */
	for (size_t i = 0; i < nheld; i++) {
		if (rc == 0) {
			pthread_mutex_lock(&held[i]->mx);
			rc = upload_locked(held[i], UPLOAD_DURABLE_FIRST);
			pthread_mutex_unlock(&held[i]->mx);
		}
		file_drop_ref(held[i]);
	}
	free(held);
	if (rc < 0) {
		free(url);
		return rc;
	}
	pthread_mutex_lock(&ws->lock);
	mv.next = ws->moves;
	ws->moves = &mv;
	while (puts_under(ws, from) || earlyput_stop_under(ws, from))
		pthread_cond_wait(&ws->cond, &ws->lock);
	pthread_mutex_unlock(&ws->lock);
	if (rc < 0) {
		/* nothing moved */
	} else if (c->cfg.exec) {
		char *qf = common_sh_quote(from), *qt = common_sh_quote(to), *cmd = NULL;
		if (qf && qt &&
		    asprintf(&cmd, "%s%s%s mv -- %s %s", dst_exists ? "rmdir -- " : "",
			     dst_exists ? qt : "", dst_exists ? " &&" : "", qf, qt) < 0)
			cmd = NULL;
		free(qf);
		free(qt);
		int code = 0;
		rc = cmd ? c->cfg.exec(c->cfg.exec_ctx, ws->id, cmd, false, &code)
			 : -ENOMEM;
		free(cmd);
		if (rc == 0 && code != 0)
			rc = -EIO;
	} else {
		struct backend_error err;
		if (dst_exists)
			rc = ws_delete_remote(ws, url, to, &err);
		if (rc == 0)
			rc = copy_tree(ws, url, from, to, 0);
		if (rc == 0)
			rc = ws_delete_remote(ws, url, from, &err);
	}
	free(url);
	pthread_mutex_lock(&ws->lock);
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
		links_move(ws, from, to, &lrecs, &nlrecs);
		ws_made_dirs_drop(ws, from);
		WS_COUNT(c, dir_renames, 1);
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
	pthread_cond_broadcast(&ws->cond);
	pthread_mutex_unlock(&ws->lock);
	links_journal(ws, lrecs, nlrecs);
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
	pthread_mutex_lock(&ws->lock);
	ws_moves_wait(ws, from);
	ws_moves_wait(ws, to);
	struct wsattr src, dst;
	rc = ws_lookup(ws, from, &src);
	int drc = rc == 0 ? ws_lookup(ws, to, &dst) : 0;
	pthread_mutex_unlock(&ws->lock);
	if (rc < 0)
		return rc;
	if (drc < 0 && drc != -ENOENT)
		return drc;
	bool dst_exists = drc == 0;
	if (drc == -ENOENT) {
		/* The new parent must exist. */
		pthread_mutex_lock(&ws->lock);
		int prc = ws_parent_is_dir(ws, to);
		pthread_mutex_unlock(&ws->lock);
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
	if (src.is_link)
		return ws_link_rename(ws, from, to, dst_exists);
	if (dst_exists && dst.is_link) {
		/* A PUT at a link's name could write through it: the link
		 * goes first, as a link. */
		rc = ws_link_unlink(ws, to);
		if (rc < 0)
			return rc;
	}
	return rename_file(ws, from, to);
}
