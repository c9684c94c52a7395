/*
 * fuse_i.h — private to fuse/, the only folder that includes a FUSE
 * header: the adapter between the kernel and the mount's model (mount/).
 *
 * lowlevel.c answers the kernel's requests through libfuse's low-level
 * API with the node table of nodes.c (directory handles in readdir.c,
 * extended attributes in xattr.c); ops.c gives the model's operations
 * by path; wsadapt.c translates the workspace core's (vfs/) types;
 * options.c parses the command line; main.c starts and stops it all.
 */
#ifndef SANDBOXFS_FUSE_FUSE_I_H
#define SANDBOXFS_FUSE_FUSE_I_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 314
#endif
#include <fuse.h>
#include <fuse_lowlevel.h>

#include "mount_i.h"

/* The session of a mount (m->session). */
static inline struct fuse_session *fs_session(struct fs_mount *m)
{
	return m->session;
}

/* --- the command line (options.c) -------------------------------------------*/
/* Parses argv into o; args keeps what goes to libfuse (mount options).
 * Returns 0, or -1 after printing a one-line error. */
int fs_options_parse(struct fuse_args *args, struct fs_options *o);
void fs_options_help(const char *prog);
void fs_options_free(struct fs_options *o);

/* --- the workspace core's FUSE side (wsadapt.c) -------------------------*/
/* workspace_open (create NULL) or workspace_create (mode *create) with
 * fi translated to a struct wsopen and back. */
int fs_ws_open(struct workspace *ws, const char *rel, const mode_t *create,
	       struct fuse_file_info *fi);
/* The ws_fill_fn of workspace_readdir: ctx is a struct fs_ws_filler. */
struct fs_ws_filler {
	void *buf;
	fuse_fill_dir_t filler;
};
int fs_ws_fill(void *ctx, const char *name, const struct stat *st, off_t off, bool plus);
/* The kernel callbacks of struct wscache_config; ctx is the mount, whose
 * session is set. */
void fs_ws_invalidate(void *ctx, const char *sandbox_id, const char *rel);
bool fs_ws_interrupted(void *ctx);
bool fs_ws_exited(void *ctx);

/* --- FUSE operations (ops.c) and file contents (content.c) --------------*/
/* The model's operations, by path, in libfuse's high-level shapes;
 * lowlevel.c serves them to the kernel. */
extern const struct fuse_operations fs_ops;
/* At the kernel's INIT: starts what runs beside the requests. */
void fs_ops_start(struct fs_mount *m, struct fuse_conn_info *conn);
/* Whether an open of path with flags may wait for a command's output. */
bool fs_ops_open_may_wait(const char *path, int flags);
/* Whether a read (or write) of the open file fh may wait for a command. */
bool fs_ops_may_wait(uint64_t fh, bool write);

/* --- the low-level adapter (lowlevel.c) -----------------------------------*/
extern const struct fuse_lowlevel_ops fs_ll_ops;
/* Sets up the node table; debug: -d logs each request's path. 0 or
 * -ENOMEM. */
int fs_ll_setup(bool debug);
/* Whether the request this thread answers was interrupted. */
bool fs_ll_interrupted(void);
/* Drops the kernel's attributes and pages of path, if it holds any. */
void fs_ll_invalidate_path(struct fs_mount *m, const char *path);
/* After a command: the kernel drops the attributes and pages of every node
 * it holds under path, and looks every name up again (see nodes.c). */
void fs_ll_invalidate_tree(struct fs_mount *m, const char *path);

/* The session gate (nodes.c). Unmounting closes the session's descriptor,
 * and its number may then be given to any file this process opens: a
 * reply or notification written by a thread of our own after that would
 * land in that file. Such writes go through the gate: fs_ll_gate_enter
 * returns true (leave with fs_ll_gate_leave after the write) until
 * fs_ll_gate_close, which waits (up to 2 s: a notification the kernel
 * blocks must not stop the unmount) for the writes under way. */
bool fs_ll_gate_enter(void);
void fs_ll_gate_leave(void);
void fs_ll_gate_close(void);
/* A reply to req through the gate: false (req freed, nothing sent) once
 * the gate is closed; else true with the gate entered. */
bool fs_ll_reply_gate(fuse_req_t req);

/* --- parallel lookups and readdirs in a directory (dirops.c) --------------*/
/* After fuse_session_mount: the session's reads and writes go through
 * dirops.c, which asks the kernel for FUSE_PARALLEL_DIROPS in the INIT
 * reply where libfuse leaves it out. 0 or -errno (then all stays as
 * libfuse does it). */
int fs_dirops_parallel(struct fuse_session *se);

/* The kernel side as the model sees it (struct fs_kernel_ops). */
extern const struct fs_kernel_ops fs_kernel_fuse;

#endif
