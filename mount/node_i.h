/*
 * node_i.h — private to fs/: what a path of the mount names, and the
 * contents of the small files.
 */
#ifndef SANDBOXFS_FS_NODE_I_H
#define SANDBOXFS_FS_NODE_I_H

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
};

struct fs_loc {
	enum fs_node node;
	enum fs_file file;
	struct fs_sandbox *sb;
	uint64_t seq;	 /* FS_N_RUN, FS_N_RUNFILE */
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
};

/* Resolves path; 0 or -ENOENT. */
int fs_resolve(struct fs_mount *m, const char *path, struct fs_loc *loc);
/* The file name table, for readdir and resolve. */
const char *fs_file_name(enum fs_file f);
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
