/*
 * wsadapt.c — the workspace core knows no FUSE type: this translates its
 * open, create and readdir to and from libfuse's, and gives it the
 * kernel-side callbacks of its config (mount_i.h).
 */
#include "fuse_i.h"

#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>

int fs_ws_open(struct workspace *ws, const char *rel, const mode_t *create,
	       struct fuse_file_info *fi)
{
	struct wsopen o = {.flags = fi->flags,
			   .fh = fi->fh,
			   .keep_cache = fi->keep_cache,
			   .direct_io = fi->direct_io,
			   .noflush = fi->noflush};
	int rc =
	    create ? workspace_create(ws, rel, *create, &o) : workspace_open(ws, rel, &o);
	fi->fh = o.fh;
	fi->keep_cache = o.keep_cache;
	fi->direct_io = o.direct_io;
	fi->noflush = o.noflush;
	return rc;
}

int fs_ws_fill(void *ctx, const char *name, const struct stat *st, off_t off, bool plus)
{
	struct fs_ws_filler *f = ctx;
	return f->filler(f->buf, name, st, off, plus ? FUSE_FILL_DIR_PLUS : 0);
}

void fs_ws_invalidate(void *ctx, const char *sandbox_id, const char *rel)
{
	struct fs_mount *m = ctx;
	char *p = NULL;
	if (asprintf(&p, "/%s/workspace%s%s", sandbox_id, rel[0] ? "/" : "", rel) < 0)
		return;
	fs_ll_invalidate_path(m, p);
	free(p);
}

bool fs_ws_interrupted(void *ctx)
{
	(void)ctx;
	return fs_ll_interrupted();
}

bool fs_ws_exited(void *ctx)
{
	struct fs_mount *m = ctx;
	return fs_session(m) && fuse_session_exited(fs_session(m)) != 0;
}
