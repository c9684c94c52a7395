/*
 * workspace.h — the workspace core (vfs/): ID/workspace/ as a POSIX-enough
 * filesystem over the contract's whole-file HTTP (DESIGN.md §3), with a
 * local write-back cache. A static library that depends on common/,
 * backend/ and journal/ only; the mount (mount/, fuse/) links it.
 *
 * Two objects:
 *  - struct wscache, one per mount: the cache directory and its size bound,
 *    the listing cache, the upload queue and its retry thread, the journal
 *    records of uploads;
 *  - struct workspace, one per sandbox, created by the mount when it learns
 *    of a sandbox.
 *
 * The FUSE side (fuse/ops.c) resolves MOUNT/ID/workspace/REL to
 * (workspace, REL) and calls the workspace_* operation; REL is "" for the
 * workspace root and never starts or ends with '/'. Operations return 0 or
 * a negative errno, like FUSE operations. Open files and directories
 * carry a handle (a uint64_t, 0 for none) that points to a struct whose
 * first member is an unsigned int tag, WS_HANDLE_FILE or WS_HANDLE_DIR,
 * so a caller that mixes these handles with its own can tell them apart.
 *
 * The core includes no FUSE header and calls nothing of the mount: what
 * it needs of it (run a command in the sandbox, tell the kernel to forget
 * a path, whether the request was interrupted, whether the session ended)
 * comes in as callbacks of struct wscache_config, and the mount's FUSE
 * adapter (fuse/wsadapt.c) translates its file info and directory filler
 * to and from struct wsopen and ws_fill_fn.
 *
 * Lock order (workspace_i.h has the details). Three kinds of mutex:
 *  - ws->lock, one per workspace, guards that workspace's maps, listings
 *    and files, so sandboxes never wait for each other; it is never held
 *    across a network call (a listing fetch drops and retakes it);
 *  - c->lock, one per wscache, guards only what the workspaces share (the
 *    LRUs of idle copies and listings, the retry heap, totals, the list
 *    of workspaces): a short leaf, never held across I/O;
 *  - f->mx, one per cached file, serialises that file's whole-file work
 *    (download, write, truncate, upload, rename); it may be held across
 *    a network call.
 * Order: f->mx, then ws->lock, then c->lock, never the reverse; two
 * files' f->mx (a rename) in address order; never two workspaces' locks
 * but by trylock. The waits on a download, a listing fetch or a rename
 * are condition waits on ws->lock, the retry queue's on c->lock. The
 * callbacks exec and invalidate are called with no lock held;
 * interrupted may be called with a ws->lock held; none of them may call
 * back into the core.
 */
#ifndef SANDBOXFS_VFS_WORKSPACE_H
#define SANDBOXFS_VFS_WORKSPACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>

#include "backend.h"
#include "journal.h"

struct wscache_config {
	struct backend *backend;
	struct journal *journal;
	const char *cache_dir;     /* created 0700; files 0600 */
	/* Bound of the cache files kept after close (default 1 GiB): the
	 * clean copies nobody uses, evicted least recently used first past
	 * it. A file in use (open, downloading, unsaved) is not bounded by
	 * it but by the reserve below; once closed and clean, one larger
	 * than the bound is the first to go. */
	uint64_t max_bytes;
	/* The part of the cache directory's file system that cache files
	 * leave free, in percent (0: 5 %): a write, truncate or download
	 * that would take the free space below it fails with ENOSPC. */
	unsigned int reserve_percent;
	long listing_ttl_ms;       /* default 1000 */
	/* Bound of the listing cache's memory (names, sizes, times of every
	 * cached listing): least recently used listings are evicted past it,
	 * those of open directories never (default 64 MiB). */
	uint64_t listing_max_bytes;
	bool show_machinery;       /* show .pool/, .sandbox-agent, ... */
	uid_t uid;                 /* owner reported for every entry */
	gid_t gid;
	/* Runs a shell command in a sandbox through the mount's command path
	 * (journaled like any command; EBUSY when the seat is taken). Used
	 * for what the file API cannot do: modes, directory rename. Returns
	 * 0 and the exit code, or a negative errno: -EIO when the outcome is
	 * unknown (it may have run; never send it again). in_seat: called
	 * from workspace_before_command, so the command runs within the seat
	 * the caller's own command already holds (it takes none, and is
	 * never EBUSY for it). May be NULL in tests. */
	int (*exec)(void *ctx, const char *sandbox_id, const char *command, bool in_seat,
		    int *exit_code);
	void *exec_ctx;
	/* The kernel side of the mount; NULL in tests, where no kernel holds
	 * anything. invalidate makes the kernel forget what it holds of
	 * ID/workspace/REL (REL "" for the root); interrupted tells whether
	 * the request the calling thread serves was interrupted (a wait then
	 * ends with EINTR); exited tells whether the session ended (an
	 * unmount: a download stops). Each gets kernel_ctx. */
	void (*invalidate)(void *ctx, const char *sandbox_id, const char *rel);
	bool (*interrupted)(void *ctx);
	bool (*exited)(void *ctx);
	void *kernel_ctx;
};

struct wscache;
struct workspace;

/* The tags that start what a handle points to. */
#define WS_HANDLE_FILE 0x5c7102u
#define WS_HANDLE_DIR  0x5c7103u

/* An open or a create: flags in; the handle and how the kernel should
 * treat the file's pages out (the FUSE file info fields of the same
 * names; the caller copies them back). */
struct wsopen {
	int flags;	 /* in: open flags */
	uint64_t fh;	 /* out: the handle */
	bool keep_cache; /* out: the pages the kernel holds are still right */
	bool direct_io;	 /* out: reads and writes bypass the page cache */
	bool noflush;	 /* out: nothing to do at a close (no FLUSH) */
};

/* Called by workspace_readdir for each entry: st NULL for "..", off the
 * offset of the next entry, plus true when st is complete enough for a
 * READDIRPLUS reply. Returns nonzero when the buffer is full. */
typedef int (*ws_fill_fn)(void *buf, const char *name, const struct stat *st, off_t off,
			  bool plus);

struct wscache *wscache_new(const struct wscache_config *cfg);
/* Starts the upload retry thread: call from the FUSE init callback. */
int wscache_start(struct wscache *c);
/* Stops the thread, tries a last upload of what is pending, frees. */
void wscache_free(struct wscache *c);
/* Re-queues the pending uploads a replayed journal holds. */
int wscache_restore(struct wscache *c, const struct journal_state *st);
/* Appends health lines ("N uploads pending", "data of gone sandbox ID is
 * kept in DIR") to out; prints nothing when all is well. Returns the
 * number of problems. */
int wscache_health(struct wscache *c, FILE *out);
/* True while the mount holds something of ws: an open file, or content
 * not yet on the server (dirty or pending). Takes the cache lock. */
bool workspace_held(struct workspace *ws);
/* Appends "key value" stat lines (cache hits, misses, bytes, ...). */
void wscache_stats(struct wscache *c, FILE *out);

/* The workspace of a sandbox; created on first call, then the same. */
struct workspace *workspace_get(struct wscache *c, const char *sandbox_id,
				const char *url);
/* The workspace of a sandbox if there is one (restored pending uploads
 * make one at mount), else NULL; never creates one. */
struct workspace *workspace_find(struct wscache *c, const char *sandbox_id);
/* Drops cached listings and marks cached file contents for revalidation:
 * called after a command the mount ran in that sandbox whose change list
 * it does not have whole (else workspace_invalidate_changed). */
void workspace_invalidate(struct workspace *ws);
/* Applies what must reach the sandbox before its next command: uploads of
 * files written here and not yet uploaded, then the queued links in
 * batched "ln -s" commands and the queued modes in batched chmod
 * commands through cfg->exec. Called by the command path
 * with the seat held by this mount, before it sends the user's command
 * (cfg->exec runs nested in that seat). Returns 0, or -EIO when an upload
 * could not be delivered: the command must not be sent, since it would
 * overtake the write (why, when given, names the file). A failed mode
 * batch is logged and does not stop the command. */
int workspace_before_command(struct workspace *ws, char *why, size_t whylen);
/* What a change list says the kernel must forget (workspace_note_changes
 * fills it when asked): whole when the list ends with the wrapper's
 * WS_CHANGES_END line (its find ran to the end); dirs when a directory,
 * the root or a link was listed (names may have come, gone or changed
 * type); else the regular files listed, up to WS_CHANGES_FILES (many past
 * that). Only a whole list without dirs or many lets a mount forget less
 * than everything it holds of the workspace. */
#define WS_CHANGES_END	 "sandboxfs-listed"
#define WS_CHANGES_FILES 64
struct ws_changes {
	bool whole, dirs, many;
	size_t nfiles;
	char *files[WS_CHANGES_FILES];
};
void ws_changes_clear(struct ws_changes *sum);
/* True when sum lets a mount forget only the files it lists: whole, with
 * no directory, link or root in it, and not too many files. */
bool ws_changes_precise(const struct ws_changes *sum);
/* What a command changed, as its own shell listed it after it ran: lines
 * "MODE MTIME SIZE ./PATH" (MODE in hex as stat -c %f gives it, MTIME in
 * seconds). Each file and directory there shows the sandbox's permission
 * bits and modification time from now on (the listing has neither), so
 * tools that compare times (make, rsync, git) see a same-size change. A
 * symbolic link's line (MODE a1ff) is followed by a line of its target,
 * SIZE bytes: the name shows as that link from now on (journaled); a
 * name listed as anything else is no longer a link. A line that does not
 * parse is skipped. Returns how many were taken. With sum, what the
 * list says the kernel must forget (struct ws_changes). */
size_t workspace_note_changes(struct workspace *ws, const char *list, size_t len,
			      struct ws_changes *sum);
/* After a command, with its change list's summary (NULL: not known): when
 * ws_changes_precise, listings are dropped as by workspace_invalidate, but
 * only the listed files' cached contents are fetched again; every other
 * copy, and a download of it under way, stays good (the command did not
 * change it on the server). Else workspace_invalidate. */
void workspace_invalidate_changed(struct workspace *ws, const struct ws_changes *sum);
/* The sandbox's seat is held (a command of this mount runs there) or free
 * again: while it is held the retry thread uploads nothing into it. */
void workspace_seat(struct workspace *ws, bool held);
/* The sandbox is served at a new URL (NULL: none for now, nothing is
 * sent): every later request of the workspace, the retries of pending
 * uploads included, goes there. The caller journals a URL before it
 * gives it. */
void workspace_set_url(struct workspace *ws, const char *url);
/* The sandbox is gone: pending uploads are abandoned (journaled) and their
 * data kept for rescue under the state directory; nothing is sent to its
 * URL again. */
void workspace_sandbox_gone(struct workspace *ws);
/* Detach/forget: flush what can be flushed and drop the object. */
void workspace_forget(struct wscache *c, const char *sandbox_id);

/* The file operations on REL inside the workspace, as FUSE calls them.
 * fh is the handle of an open file when there is one, else 0; an
 * operation on a handle answers -EBADF for one that is not a workspace
 * file's. */

/* The attributes of REL, or of the open file fh (ws and rel may then be
 * NULL). Sizes come from the cache when it holds newer content than the
 * listing. */
int workspace_getattr(struct workspace *ws, const char *rel, struct stat *st,
		      uint64_t fh);
/* Opens directory REL: the handle keeps a snapshot of the listing taken
 * when a pass starts (offset 0), so the chunks of one pass are
 * consistent: offsets into a listing that changes between chunks would
 * skip names. It also keeps the listing from eviction while open. */
int workspace_opendir(struct workspace *ws, const char *rel, uint64_t *fh);
/* Frees a directory handle (0 or another kind of handle: nothing). */
void workspace_releasedir(uint64_t fh);
/* Lists directory REL from offset off through filler ("." is 1, ".." 2,
 * then the names of the snapshot); fh 0 (tests): the whole listing in one
 * pass. plus: a READDIRPLUS pass, whose entries carry full attributes. */
int workspace_readdir(struct workspace *ws, const char *rel, void *buf, ws_fill_fn filler,
		      off_t off, uint64_t fh, bool plus);
/* Opens file REL with o->flags (O_TRUNC empties it); its content is
 * fetched, or a download started that reads wait for. Sets o->fh and
 * what the kernel should do with its pages. */
int workspace_open(struct workspace *ws, const char *rel, struct wsopen *o);
/* Creates file REL (opens it when it exists and O_EXCL is not set): empty
 * in the cache, uploaded at its close; a mode other than the default is
 * queued for the next command. Sets o->fh. */
int workspace_create(struct workspace *ws, const char *rel, mode_t mode,
		     struct wsopen *o);
/* Reads from the cache file; what a download has not brought yet is
 * waited for (the wait ends with -EINTR when interrupted). Returns the
 * bytes read. */
int workspace_read(uint64_t fh, char *buf, size_t size, off_t off);
/* Writes into the cache file (O_APPEND: at its end) and marks it dirty;
 * nothing is sent. Returns the bytes written, or -ENOSPC past the reserve
 * of the cache directory's file system (cfg.reserve_percent; max_bytes
 * does not bound a file in use). */
int workspace_write(uint64_t fh, const char *buf, size_t size, off_t off);
/* A close of a descriptor: uploads what it wrote and returns the upload's
 * error (-EIO: kept as a pending upload, retried); one that wrote nothing
 * only journals what release will upload. */
int workspace_flush(uint64_t fh);
/* Uploads the file now and returns the upload's error. */
int workspace_fsync(uint64_t fh, int datasync);
/* The last close of a handle: uploads what is written and not yet handled
 * once no handle is left, then frees the handle: fh is not valid after. */
int workspace_release(uint64_t fh);
/* Sets the size of REL, or of the open file fh (ws and rel may then be
 * NULL); with no handle open on the file it is uploaded before the call
 * returns. */
int workspace_truncate(struct workspace *ws, const char *rel, off_t size, uint64_t fh);
/* Removes file REL on the server; open descriptors keep reading it. */
int workspace_unlink(struct workspace *ws, const char *rel);
/* Makes directory REL on the server; a mode other than the default is
 * queued for the next command. */
int workspace_mkdir(struct workspace *ws, const char *rel, mode_t mode);
/* Removes directory REL on the server when it is empty there and no file
 * of it waits here for an upload (-ENOTEMPTY otherwise). */
int workspace_rmdir(struct workspace *ws, const char *rel);
/* Renames a file (a PUT of the new name, then a DELETE of the old) or a
 * directory (an "mv" run through cfg->exec); flags: RENAME_NOREPLACE
 * only (-EINVAL for the others). */
int workspace_rename(struct workspace *ws, const char *from, const char *to,
		     unsigned int flags);
/* Queues a mode change of REL, applied in a batched chmod before the
 * next command (workspace_before_command); -ENOTSUP without cfg->exec. */
int workspace_chmod(struct workspace *ws, const char *rel, mode_t mode);
/* Accepts only the owner every entry has (cfg->uid, cfg->gid): -EPERM
 * for another. */
int workspace_chown(struct workspace *ws, const char *rel, uid_t uid, gid_t gid);
/* Keeps times for REL here (the contract carries none); getattr shows
 * them until a write sets the time again. */
int workspace_utimens(struct workspace *ws, const char *rel, const struct timespec tv[2]);
/* Makes REL a symbolic link to target: journaled (durably) before it
 * returns, shown and readable at once, made in the sandbox by "ln -s"
 * through cfg->exec now when the seat is free, else before the next
 * command (workspace_before_command). -EPERM without cfg->exec. */
int workspace_symlink(struct workspace *ws, const char *target, const char *rel);
/* The target of link REL, NUL-terminated in buf (cut to size - 1 bytes),
 * from what the mount knows: no request. -EINVAL when REL is not a link. */
int workspace_readlink(struct workspace *ws, const char *rel, char *buf, size_t size);
/* -EPERM: the contract has no hard links. */
int workspace_link(struct workspace *ws, const char *from, const char *to);
/* The space of the cache directory's filesystem, where written data lands
 * first; its free space less the reserve that cache files leave free. */
int workspace_statfs(struct workspace *ws, struct statvfs *st);
/* lseek on the cache file (SEEK_DATA, SEEK_HOLE, SEEK_END once a download
 * has ended). */
off_t workspace_lseek(uint64_t fh, off_t off, int whence);

#endif
