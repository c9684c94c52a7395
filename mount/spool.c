/*
 * spool.c — a command's output as pieces in a hidden directory of the
 * workspace, fetched into local spool files (stream.c for a run, jobs.c
 * for a background job).
 */
#include "spool_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/files.h"

int fs_spool_open(struct fs_mount *m, struct fs_spool *sp, const char *name)
{
	memset(sp, 0, sizeof(*sp));
	sp->fd = -1;
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/spool", m->state_dir);
	int n = snprintf(sp->path, sizeof(sp->path), "%.3900s/%s", dir, name);
	if (n < 0 || (size_t)n >= sizeof(sp->path))
		return -ENAMETOOLONG;
	int flags = O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC;
	sp->fd = open(sp->path, flags, 0600);
	if (sp->fd < 0 && errno == ENOENT && common_mkdirs(dir, 0700) == 0)
		sp->fd = open(sp->path, flags, 0600); /* the first one */
	return sp->fd < 0 ? -errno : 0;
}

void fs_spool_close(struct fs_spool *sp)
{
	if (sp->fd < 0)
		return;
	close(sp->fd);
	(void)unlink(sp->path);
	sp->fd = -1;
}

int fs_pieces_pass(struct fs_mount *m, const char *url, const char *dir, const char *prefix,
		   struct fs_spool sp2[2], bool final, struct backend_listing *out)
{
	struct backend_listing l;
	struct backend_error err;
	enum backend_status st = backend_list(m->backend, url, dir, &l, &err);
	if (st != BACKEND_OK)
		return st == BACKEND_NOT_FOUND ? -ENOENT : -EIO;
	size_t found = 0;
	for (int i = 0; i < 2; i++) {
		struct fs_spool *sp = &sp2[i];
		char want[128];
		int wl = snprintf(want, sizeof(want), "%s%s", prefix, i ? "err." : "out.");
		if (wl < 0 || (size_t)wl >= sizeof(want))
			break;
		size_t k = 0; /* index among this stream's pieces (names sort in order) */
		size_t npieces = 0;
		for (size_t e = 0; e < l.count; e++)
			npieces += strncmp(l.entries[e].name, want, (size_t)wl) == 0;
		found += npieces;
		for (size_t e = 0; e < l.count && !sp->truncated; e++) {
			const struct backend_entry *en = &l.entries[e];
			if (strncmp(en->name, want, (size_t)wl) != 0)
				continue;
			size_t piece = k++;
			if (piece < sp->piece)
				continue;
			bool whole = final || piece + 1 < npieces;
			uint64_t at = (uint64_t)piece * FS_PIECE;
			pthread_mutex_lock(&m->lock);
			uint64_t have = sp->have;
			pthread_mutex_unlock(&m->lock);
			if (at >= m->opt.max_output_bytes) {
				sp->truncated = true;
				break;
			}
			if (!whole && at + en->size <= have)
				break; /* the growing piece, nothing new */
			char path[256];
			snprintf(path, sizeof(path), "%s/%s", dir, en->name);
			uint64_t got = 0;
			if (lseek(sp->fd, (off_t)at, SEEK_SET) < 0 ||
			    backend_file_get_progress(m->backend, url, path, sp->fd, en->size,
						      NULL, NULL, &got, &err) != BACKEND_OK)
				break; /* the next pass tries again */
			uint64_t end = at + got;
			if (end > m->opt.max_output_bytes) {
				end = m->opt.max_output_bytes;
				(void)ftruncate(sp->fd, (off_t)end);
				sp->truncated = true;
			}
			pthread_mutex_lock(&m->lock);
			if (end > sp->have)
				sp->have = end;
			pthread_cond_broadcast(&m->cond);
			pthread_mutex_unlock(&m->lock);
			if (whole)
				sp->piece = piece + 1;
			else
				break;
		}
	}
	if (out)
		*out = l;
	else
		backend_listing_clear(&l);
	return found > INT32_MAX ? INT32_MAX : (int)found;
}
