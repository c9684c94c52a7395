/*
 * readdir.c — directory handles through the low-level API: opendir,
 * readdir and readdirplus (a READDIRPLUS entry counts a lookup in the node
 * table), releasedir. A listing the model gives whole (every entry at
 * offset 0) is kept in the handle and served by index, chunk after chunk
 * of the kernel's buffers.
 */
#include "fuse_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nodes_i.h"

/* An open directory: the model's own handle, and the entries of a listing
 * the model gives whole (offset 0 to the filler), served by index. */
struct ll_dir {
	uint64_t fh;
	fuse_ino_t ino;
	char *path;
	bool whole; /* entries[] holds the whole listing */
	struct ll_dirent {
		char *name;
		struct stat st;
		bool has_st;
	} * entries;
	size_t n, cap;
};

void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int err = 0;
	struct ll_dir *d = calloc(1, sizeof(*d));
	char *path = ll_path(ino, NULL, &err);
	if (!d || !path) {
		free(d);
		free(path);
		fuse_reply_err(req, d ? err : ENOMEM);
		return;
	}
	struct fuse_file_info inner = *fi;
	ll_serving(req);
	int rc = fs_ops.opendir(path, &inner);
	ll_serving(NULL);
	if (rc < 0) {
		free(path);
		free(d);
		fuse_reply_err(req, -rc);
		return;
	}
	d->fh = inner.fh;
	d->ino = ino;
	d->path = path;
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		inner.fh = d->fh;
		fs_ops.releasedir(d->path, &inner);
		free(d->path);
		free(d);
	}
}

/* One readdir reply being filled. */
struct ll_fill {
	fuse_req_t req;
	struct ll_dir *d;
	bool plus;
	char *buf;
	size_t size, used;
	bool collect; /* whole listing: keep entries in d */
};

static bool ll_dot(const char *name)
{
	return strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
}

/* Adds one entry at offset off to the reply; 1 when it does not fit. */
static int ll_add(struct ll_fill *f, const char *name, const struct stat *st, bool has_st,
		  off_t off)
{
	size_t room = f->size - f->used;
	if (!f->plus) {
		struct stat s = {.st_ino = has_st && st->st_ino ? st->st_ino : 1,
				 .st_mode = has_st ? st->st_mode : 0};
		size_t need = fuse_add_direntry(f->req, NULL, 0, name, &s, off);
		if (need > room)
			return 1;
		fuse_add_direntry(f->req, f->buf + f->used, room, name, &s, off);
		f->used += need;
		return 0;
	}
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.attr.st_ino = 1;
	size_t need = fuse_add_direntry_plus(f->req, NULL, 0, name, &e, off);
	if (need > room)
		return 1;
	if (!ll_dot(name)) {
		if (has_st) {
			e.attr = *st;
			e.ino = ll_remember(f->d->ino, name, st->st_mode);
			e.attr.st_ino = e.ino;
			e.attr_timeout = e.entry_timeout = ll_timeout(f->req);
		} else if (ll_entry(f->req, f->d->ino, name, &e) < 0) {
			memset(&e, 0, sizeof(e)); /* listed, not looked up */
		}
		if (!e.ino)
			e.attr.st_ino = 1;
	}
	fuse_add_direntry_plus(f->req, f->buf + f->used, room, name, &e, off);
	f->used += need;
	return 0;
}

static int ll_filler(void *buf, const char *name, const struct stat *st, off_t off,
		     enum fuse_fill_dir_flags flags)
{
	struct ll_fill *f = buf;
	bool has_st = st && (flags & FUSE_FILL_DIR_PLUS);
	if (off == 0 || f->collect) {
		/* a whole listing: kept, served by index below */
		struct ll_dir *d = f->d;
		f->collect = true;
		if (d->n == d->cap) {
			size_t cap = d->cap ? d->cap * 2 : 32;
			struct ll_dirent *ne = realloc(d->entries, cap * sizeof(*ne));
			if (!ne)
				return 1;
			d->entries = ne;
			d->cap = cap;
		}
		struct ll_dirent *de = &d->entries[d->n];
		if (!(de->name = strdup(name)))
			return 1;
		de->has_st = has_st;
		if (has_st)
			de->st = *st;
		d->n++;
		return 0;
	}
	return ll_add(f, name, st, has_st, off);
}

static void ll_do_readdir(fuse_req_t req, size_t size, off_t off,
			  struct fuse_file_info *fi, bool plus)
{
	struct ll_dir *d = (struct ll_dir *)(uintptr_t)fi->fh;
	struct ll_fill f = {.req = req, .d = d, .plus = plus, .size = size};
	f.buf = malloc(size ? size : 1);
	if (!f.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int rc = 0;
	if (off == 0) { /* the first pass, or rewinddir: listed afresh */
		for (size_t i = 0; i < d->n; i++)
			free(d->entries[i].name);
		d->n = 0;
		d->whole = false;
	}
	if (!d->whole) {
		struct fuse_file_info inner = *fi;
		inner.fh = d->fh;
		ll_serving(req);
		rc = fs_ops.readdir(d->path, &f, ll_filler, off, &inner,
				    plus ? FUSE_READDIR_PLUS : 0);
		ll_serving(NULL);
		if (f.collect)
			d->whole = true;
	}
	if (rc == 0 && d->whole)
		for (size_t i = (size_t)off; i < d->n; i++) {
			struct ll_dirent *de = &d->entries[i];
			if (ll_add(&f, de->name, &de->st, de->has_st, (off_t)i + 1))
				break;
		}
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, f.buf, f.used);
	free(f.buf);
}

void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi)
{
	ll_do_readdir(req, size, off, fi, false);
}

void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	ll_do_readdir(req, size, off, fi, true);
}

void ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ll_dir *d = (struct ll_dir *)(uintptr_t)fi->fh;
	struct fuse_file_info inner = *fi;
	inner.fh = d->fh;
	fs_ops.releasedir(d->path, &inner);
	for (size_t i = 0; i < d->n; i++)
		free(d->entries[i].name);
	free(d->entries);
	free(d->path);
	free(d);
	fuse_reply_err(req, 0);
}
