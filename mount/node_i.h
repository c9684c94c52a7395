/*
 * node_i.h — private to mount/ and fuse/: what a path of the mount names,
 * the control-file table (files.c) and the contents of the small files
 * (content.c).
 */
#ifndef SANDBOXFS_MOUNT_NODE_I_H
#define SANDBOXFS_MOUNT_NODE_I_H

#include "handle.h"
#include "mount_i.h"

enum fs_node {
	FS_N_ROOT,
	FS_N_MDIR,    /* .sandboxfs/ */
	FS_N_MFILE,   /* .sandboxfs/FILE */
	FS_N_SB,      /* ID/ */
	FS_N_SBFILE,  /* ID/FILE */
	FS_N_RUNS,    /* ID/runs/ */
	FS_N_RUN,     /* ID/runs/SEQ/ */
	FS_N_RUNFILE, /* ID/runs/SEQ/FILE */
	FS_N_WS,      /* ID/workspace[/REL] */
	FS_N_JOBS,    /* ID/jobs/ */
	FS_N_JOB,     /* ID/jobs/N/ */
	FS_N_JOBFILE, /* ID/jobs/N/FILE */
};

enum fs_file {
	FS_F_CTL,
	FS_F_STDOUT,
	FS_F_STDERR,
	FS_F_EXIT,
	FS_F_STATUS,
	FS_F_LAST,
	FS_F_TIMEOUT,
	FS_F_STATE,
	FS_F_INFO,
	FS_F_COMMAND,
	FS_F_MCTL,
	FS_F_HEALTH,
	FS_F_STATS,
	FS_F_POOLS,
	FS_F_VERSION,
	FS_F_ENV,
	FS_F_CWD,
	FS_F_STDIN,
	FS_F_SPAWN,
	FS_F_JOBCTL,
};

struct fs_loc {
	enum fs_node node;
	enum fs_file file;
	struct fs_sandbox *sb;
	uint64_t seq;	 /* FS_N_RUN, FS_N_RUNFILE; the job's number in FS_N_JOB* */
	const char *rel; /* FS_N_WS: "" or a relative path (points into path) */
};

/* The handle of an open control file (fi->fh). */
struct fs_ctl_handle {
	struct fs_handle h; /* FS_HANDLE_CONTROL */
	struct fs_loc loc;
	pthread_mutex_t lock;
	bool loaded;
	char *buf;
	size_t len;
	int flags;
	bool refused; /* ctl: a piece of an over-long command was refused */
	/* ctl: a command sent through this descriptor has no known outcome
	 * (EIO) or still runs (EINTR): the bytes a client library keeps and
	 * writes again must not run it twice, so later writes are EIO. */
	bool sent_unknown;
	/* env, cwd: the bytes written through this descriptor so far (a
	 * shell may write a line at a time); each write sets them whole */
	char *wbuf;
	size_t wlen;
};

/* One FUSE write at most (DESIGN.md §2). */
#define FS_MAX_WRITE (1024 * 1024)

/* Where a control file appears. */
enum {
	FS_IN_SB = 1,	/* ID/ */
	FS_IN_RUN = 2,	/* ID/runs/SEQ/ */
	FS_IN_MDIR = 4, /* .sandboxfs/ */
	FS_IN_JOB = 8,	/* ID/jobs/N/ */
};

typedef int fs_render_fn(struct fs_mount *m, const struct fs_loc *loc, char **buf,
			 size_t *len);

/* One line of the control-file table (files.c). */
struct fs_file_def {
	enum fs_file file;
	const char *name;
	unsigned in;	  /* FS_IN_* */
	mode_t mode;	  /* 0444 unless a write does something */
	bool waits;	  /* a read waits for the running command */
	bool write_waits; /* a write may wait (a command, the orchestrator) */
	bool size_known;  /* stat shows the size a read would give now */
	/* the whole contents, into a malloc'ed buffer; never waits */
	fs_render_fn *render;
	/* one write(2); 0 or -errno */
	int (*write)(struct fs_mount *m, struct fs_ctl_handle *h, const char *buf,
		     size_t size, off_t off);
};

/* The table's line of f. */
const struct fs_file_def *fs_file_def(enum fs_file f);
/* The next file that appears in `in` (FS_IN_*), from *i (start at 0), in
 * listing order; NULL after the last. */
const struct fs_file_def *fs_file_next(unsigned in, size_t *i);
/* A write(2) at off to an open control file: its size or -errno. */
int fs_file_write(struct fs_mount *m, struct fs_ctl_handle *h, const char *buf, size_t size,
		  off_t off);
/* A truncate to size of a control file (O_TRUNC of a shell's ">"): env,
 * cwd and stdin are emptied; for other writable files it does nothing. */
int fs_file_truncate(struct fs_mount *m, const struct fs_loc *loc, off_t size);

/* A read of stdout or stderr (loc) while its run streams: the bytes read,
 * -EAGAIN (nonblock, none yet), -EINTR, or -ENODATA when the run does not
 * stream (ended, or -o stream=no): the caller reads the stored output. A
 * read at the end waits for more or for the end of the run. */
int fs_stream_read(struct fs_mount *m, const struct fs_loc *loc, char *buf, size_t size,
		   off_t off, bool nonblock);
/* An open of stdout or stderr (loc) for reading while its run streams and
 * has written nothing there yet waits for the first byte or the end of the
 * run, as the open of a FIFO waits for a writer: a reader that sees size 0
 * reads to the end first (GNU tail's -f), and a streamed file has no end
 * until the run's (a job's too). With wait false, only says whether it
 * would wait (1) or not (0); else 0 once it need not, or -EINTR. */
int fs_stream_open_wait(struct fs_mount *m, const struct fs_loc *loc, bool wait);
/* The run a file speaks of (m->lock held): the latest, or runs/SEQ. */
struct fs_run *fs_loc_run(const struct fs_loc *loc);

/* The files of jobs/N/ (jobs.c); these take the lock themselves. */
/* stdout or stderr: what the job wrote so far; a read at the end waits for
 * more or for its end (-EAGAIN with nonblock, -EINTR). */
int fs_job_read(struct fs_mount *m, const struct fs_loc *loc, char *buf, size_t size,
		off_t off, bool nonblock);
/* exit: waits for the job's end (-EAGAIN with nonblock, -EINTR). */
int fs_job_wait(struct fs_mount *m, const struct fs_loc *loc, bool nonblock);
/* command, status, exit, info (status and info list its directory first,
 * at most once a second), ctl. */
int fs_job_render(struct fs_mount *m, const struct fs_loc *loc, char **buf, size_t *len);
off_t fs_job_output_size(struct fs_mount *m, const struct fs_loc *loc);
uint64_t fs_job_mtime(struct fs_mount *m, const struct fs_loc *loc);
/* Its extended attributes, "name\0value\0" pairs onto f. */
void fs_job_xattrs(struct fs_mount *m, const struct fs_loc *loc, FILE *f);
bool fs_job_exists(struct fs_mount *m, struct fs_sandbox *sb, uint64_t n);
/* The numbers of sb's jobs, oldest first, into a malloc'ed *out. */
size_t fs_job_numbers(struct fs_mount *m, struct fs_sandbox *sb, uint64_t **out);

/* Resolves path; 0 or -ENOENT. */
int fs_resolve(struct fs_mount *m, const char *path, struct fs_loc *loc);
/* The renderers of the table (content.c). */
fs_render_fn fs_render_empty, fs_render_version, fs_render_health, fs_render_stats,
    fs_render_pools, fs_render_output, fs_render_line, fs_render_command, fs_render_info,
    fs_render_env, fs_render_cwd, fs_render_stdin;
/* Renders the contents of a small file into a malloc'ed buffer. Never
 * waits. Returns 0 or -errno. */
int fs_render(struct fs_mount *m, const struct fs_loc *loc, char **buf, size_t *len);
/* The size a read of the file would return now, without reading output
 * files and without waiting. */
off_t fs_render_size(struct fs_mount *m, const struct fs_loc *loc);
/* Modification time of a node, ms since the epoch. */
uint64_t fs_node_mtime(struct fs_mount *m, const struct fs_loc *loc);
/* True when reading the file waits for a running command. */
bool fs_file_waits(const struct fs_loc *loc);
/* .sandboxfs/ctl: one write is one command. Returns 0 or -errno. */
int fs_mount_ctl(struct fs_mount *m, const char *cmd, size_t len);
/* Extended attributes of ID/ and ID/runs/SEQ/: "name\0value\0..." pairs
 * in a malloc'ed buffer. */
int fs_xattrs(struct fs_mount *m, const struct fs_loc *loc, char **buf, size_t *len);

#endif
