/*
 * jobs_i.h — private to jobs.c and jobfiles.c: one background job of the
 * model. Its fields are guarded by m->lock, but for the spools, which
 * only its poller writes (readers read up to have).
 */
#ifndef SANDBOXFS_MOUNT_JOBS_I_H
#define SANDBOXFS_MOUNT_JOBS_I_H

#include "node_i.h"
#include "spool_i.h"

struct fs_job {
	uint64_t n;
	char *command, *dir, *error;
	long pid;
	enum fs_job_status status;
	int exit_code;
	uint64_t started_ms, ended_ms; /* wall clock */
	/* the output, fetched by the poller (the only writer of spools) */
	struct fs_spool s[2];
	bool spooled;	     /* s[] open */
	bool final_done;     /* everything there is was fetched */
	bool polling;	     /* a poller thread runs */
	uint64_t want_ms;    /* monotonic: last reader */
	uint64_t checked_ms; /* monotonic: last listing of DIR */
	int refs;	     /* the history's, a poller's, readers' */
};

/* Job n of sb, or NULL (m->lock held). */
struct fs_job *fs_job_find(struct fs_sandbox *sb, uint64_t n);
/* Drops one hold (m->lock held); frees it at the last. */
void fs_job_put_locked(struct fs_job *jb);
/* Someone reads its output or waits for its end: its poller runs while
 * someone does (no lock held). */
void fs_job_want(struct fs_mount *m, struct fs_sandbox *sb, struct fs_job *jb);
/* Lists its directory, at most once a second, and records an end seen
 * there (no lock held). */
void fs_job_check(struct fs_mount *m, struct fs_sandbox *sb, struct fs_job *jb);

#endif
