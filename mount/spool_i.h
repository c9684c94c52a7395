/*
 * spool_i.h — private to mount/: output split into pieces in a hidden
 * directory of the workspace (split -b FS_PIECE -a 5 into PREFIXout.* and
 * PREFIXerr.*),
 * fetched into local spool files while it grows (spool.c).
 */
#ifndef SANDBOXFS_MOUNT_SPOOL_I_H
#define SANDBOXFS_MOUNT_SPOOL_I_H

#include "mount_i.h"

/* split -b: one piece, under the contract's 1 MiB so that the change list
 * fits beside a whole one in an /execute answer */
#define FS_PIECE (960 * 1024)

/* One stream's local copy: piece k at offset k * FS_PIECE, so the growing
 * last piece is fetched again in place (a byte crosses the wire about
 * once). */
struct fs_spool {
	int fd;
	char path[4096];
	uint64_t have;	/* bytes readers may read (guarded by m->lock) */
	size_t piece;	/* first piece not fetched whole */
	bool truncated; /* max_output reached */
};

/* Opens STATE/spool/NAME emptied (the directory made when missing). 0 or
 * -errno; fs_spool_close is safe either way. */
int fs_spool_open(struct fs_mount *m, struct fs_spool *sp, const char *name);
/* Closes and removes it. */
void fs_spool_close(struct fs_spool *sp);
/* One pass: lists dir and fetches into sp[0] (PREFIXout.*) and sp[1]
 * (PREFIXerr.*) the pieces not yet whole (all of them when final: the
 * writer ended), up to -o max_output. Readers are woken (m->cond). With
 * out, the listing is handed over (the caller clears it). The number of
 * pieces listed (>= 0), -ENOENT when dir is not there, -EIO when it could
 * not be listed. */
int fs_pieces_pass(struct fs_mount *m, const char *url, const char *dir, const char *prefix,
		   struct fs_spool sp[2], bool final, struct backend_listing *out);

#endif
