/*
 * workspace_i.h — private types of the workspace core (vfs/workspace*.c,
 * vfs/cache.c, vfs/listing.c, vfs/upload.c). Not for other modules.
 *
 * Locking. Each workspace has its own mutex (ws->lock): it guards that
 * workspace's tables (files, all, dirs and their listings, metas, links,
 * moves, made_dirs) and the fields of its files,
 * listings and downloads; sandboxes never wait for each other's. The
 * cache's mutex (c->lock) guards only what all workspaces share: the idle
 * LRU, the listing LRU, the due heap, byte and file totals, the reserve,
 * wss and by_id, fetch_workers, early_running, stop. A field both sides
 * read (f->size, f->next_try_ms, f->due_pos, f->idle*, d->lru_*, d->bytes)
 * is written with both held, read with either.
 * Counters (c->n) are atomic (WS_COUNT). Each cached file has its own
 * mutex (f->mx) that serialises its whole-file work (fetch, write,
 * truncate, upload, rename); it may be held across a network call.
 *
 * Order: f->mx, then ws->lock, then c->lock (a leaf, never held across
 * I/O or a wait on another lock). The prefetch queue's lock (prefetch.c)
 * is a leaf too: taken under ws->lock, released before its threads take
 * one. Neither ws->lock nor c->lock is held
 * across a network call. Work on another workspace's files while holding
 * c->lock (eviction from the LRUs) takes that workspace's lock with
 * pthread_mutex_trylock only, and skips it when busy; the retry thread
 * and the passes over every workspace take one ws->lock at a time, with
 * c->lock released, and look again at what they picked.
 */
#ifndef SANDBOXFS_VFS_WORKSPACE_I_H
#define SANDBOXFS_VFS_WORKSPACE_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "common/clock.h"
#include "common/htab.h"
#include "common/shquote.h"
#include "common/log.h"
#include "workspace.h"

/* Name of the empty file mkdir puts inside a new directory (then deletes);
 * never shown in listings. */
#define WS_PLACEHOLDER ".sandboxfs-mkdir"

/* The modes shown for files and directories whose mode was never set
 * here: the contract reports none, and a PUT creates files with the
 * server's default. */
#define WS_FILE_MODE 0644
#define WS_DIR_MODE  0755


/* --- listings -------------------------------------------------------------*/

struct wsentry {
	char *name;
	uint64_t size;
	bool is_dir;
	struct timespec seen; /* when this name with this size was first seen */
	bool is_link;	      /* a symbolic link (ws->links knows its target) */
};

struct wsdir {
	struct hlink h; /* key: directory path ("" is the root) */
	char *path;
	struct wsentry *ents; /* sorted by name */
	size_t n, cap;
	int err;	     /* 0, or -errno the last fetch gave (cached too) */
	bool loaded;	     /* ents/err hold a fetch result */
	bool fetching;	     /* a thread is fetching it; others wait */
	bool raced;	     /* changed here while fetching: fetch again */
	uint64_t fetched_ms; /* monotonic; 0 = stale */
	uint64_t epoch;	     /* ws->epoch at the fetch */
	/* The listing cache is bounded (listing.c): listings are evicted
	 * least recently used first, past cfg.listing_max_bytes. */
	struct workspace *ws;
	struct wsdir *lru_prev, *lru_next; /* c->dir_lru, oldest first */
	uint64_t bytes;			   /* accounted in c->listing_bytes */
	int pins; /* open directory handles, fetches: never evicted */
	uint64_t pass_ms; /* monotonic: a directory handle last read it */
};

/* --- local metadata the contract has no place for --------------------------*/

struct wsmeta {
	struct hlink h; /* key: path */
	char *path;
	bool has_mode;
	mode_t mode;	  /* permission bits, applied or queued */
	bool mode_queued; /* not yet applied in the sandbox */
	bool has_times;
	struct timespec atime, mtime;
};

/* --- symbolic links (links.c) ---------------------------------------------*/

struct wslink {
	struct hlink h; /* in ws->links, key: path */
	char *path;
	char *target;
	bool queued;   /* made here, not yet in the sandbox (LINK_INTENT) */
	bool applying; /* its "ln -s" batch runs */
};

/* A link record to journal once ws->lock is released. */
struct wslinkrec {
	enum journal_kind kind;
	char *path, *target;
};

/* --- cached files ---------------------------------------------------------*/

/* A download of a file's content into its cache file (cache.c). While it
 * runs it is f->fetch and owns the cache file's content: reads of the part
 * already written proceed, reads beyond it wait, and whoever changes the
 * content (write, truncate, rename) waits for it to end (cache_fetch_idle).
 * It never takes f->mx, so waiting for it with f->mx held is safe. Handles
 * opened on it keep a reference, to learn how it ended. */
struct wsfetch {
	struct wsfile *f;
	char *url, *path;
	pthread_cond_t cond; /* with ws->lock: progress (when waited for), end */
	int refs;	     /* ws->lock: the download and its handles */
	/* body bytes in the cache file */
	atomic_uint_fast64_t avail;
	/* the least end a reader waits for, UINT64_MAX when none waits */
	atomic_uint_fast64_t wake_at;
	atomic_bool done;    /* set under ws->lock with err */
	int err;	     /* -errno of a failed download, 0 */
	bool size_known;     /* the listing gave the size: expect */
	uint64_t expect;     /* reserved, in c->fetch_expect while it runs */
	uint64_t counted;    /* of avail, in c->fetch_written */
	uint64_t epoch; /* ws->epoch when it started */
};

struct wsfile {
	struct hlink h;		/* in ws->files, key: path; unused when unlinked */
	/* every file of ws, live or unlinked (freed in O(1): eviction of a
	 * file must not cost a pass over the workspace's others) */
	struct wsfile *ws_next, *ws_prev;
	/* In ws->unsaved while dirty or pending (cache_set_state): a listing
	 * merges these names without a pass over every cached file. */
	struct wsfile *unsaved_next, *unsaved_prev;
	/* In c->idle while nobody uses it and it is clean (cache.c). */
	struct wsfile *idle_prev, *idle_next;
	bool idle;
	struct workspace *ws;
	char *path;	  /* NULL once unlinked */
	char *cache_path; /* absolute path of the cache file */
	int fd;		  /* open while refs > 0, else -1 */
	pthread_mutex_t mx;

	struct wsfetch *_Atomic fetch; /* the download running, or NULL
					  (written under ws->lock) */
	int refs;	       /* handles + internal users */
	int opens;	       /* open handles */
	int writers;	       /* open handles that may write */
	/* Set when newer content of the path went to a new cache file while
	 * this one was open (file_supersede): the path it was the content
	 * of, for as long as handles read it. */
	char *version_of;
	/* The kernel may hold pages of another version of this path: the
	 * next open drops them (keep_cache off). */
	bool kernel_mixed;
	bool present;	    /* the cache file holds the whole content */
	uint64_t size;	    /* bytes of the cache file, accounted in c->bytes */
	uint64_t epoch;	    /* ws->epoch when fetched or last uploaded */
	bool remote_exists; /* known to exist on the server */
	bool unlinked;

	bool dirty;	     /* local content not yet on the server */
	uint64_t wgen;	     /* bumped by every change of the content */
	uint64_t upload_id;  /* pending UPLOAD_INTENT, 0 = none */
	uint64_t intent_gen; /* wgen the pending intent covers */
	bool pending;	     /* a failed upload waits in the retry queue */
	bool permanent;	     /* its last failure will not heal by retrying */
	bool dir_synced;     /* the cache file's directory entry is durable */
	bool intent_synced;  /* the pending intent and its cache file are durable */
	/* crc32 of the cache file's first crc_len bytes, summed as writes
	 * arrive in order; when crc_ok, crc_len == size. Any other change
	 * clears crc_ok, and the upload reads the file again (crc_of). */
	bool crc_ok;
	uint32_t crc;
	uint64_t crc_len;
	/* The path a PUT of it on its way was sent to, else NULL (ws->lock):
	 * a directory rename waits for it to end. */
	const char *put_path;
	/* The early PUT of this file while it is written in order from
	 * offset 0 (earlyput.c), or NULL; set and cleared under f->mx.
	 * early_tried: one was started since the file was last emptied or
	 * closed, so no other starts (one per open file). */
	struct wsearly *early;
	atomic_bool early_tried;
	int attempts;
	bool flush_parked; /* failed in the running flush_all pass: skip it */
	uint64_t next_try_ms;
	size_t due_pos; /* 1 + its index in c->due (due.c), 0: not there */
	int last_err;
	struct timespec mtime;
};

/* What the handle of a workspace file points to. */
struct wshandle {
	unsigned int kind; /* WS_HANDLE_FILE, first member */
	struct wsfile *f;
	int flags;
	/* written or truncated through this handle: set under f->mx, read
	 * by a close without it (a dup of the descriptor may write meanwhile) */
	atomic_bool wrote;
	/* The download this handle was opened on, while it may still run or
	 * failed: reads wait for it or answer its error. NULL otherwise. */
	struct wsfetch *fetch;
};

/* A directory being renamed (rename_dir in workspace_ops.c): until the
 * rename ends, no request for a path at or below it is sent by another
 * thread (ws_moves_wait), so that nothing lands at the old name after
 * the move; the waiters then go on with the new path. */
struct wsmove {
	struct wsmove *next;
	const char *dir; /* owned by the renamer */
	pthread_t by;
};

struct workspace {
	struct workspace *next; /* set once, before it is in c->wss */
	struct wscache *c;
	pthread_mutex_t lock; /* this workspace's state (see the top) */
	/* with lock: its listing fetches done, renames, PUTs and early PUTs
	 * ended (a directory rename waits for them) */
	pthread_cond_t cond;
	char *id;
	struct hlink by_id; /* in c->by_id while not retired */
	char *url;
	uint64_t epoch; /* bumped by workspace_invalidate */
	/* The root's times: the contract has none, and 1970 would look like
	 * damage; when this mount first met the workspace is honest. */
	struct timespec born;
	bool gone;
	bool retired;	    /* forgotten: not found by workspace_get any more */
	int seats;	    /* commands of this mount running there: no retries */
	struct htab dirs;   /* struct wsdir */
	struct htab metas;  /* struct wsmeta */
	struct htab files;  /* struct wsfile, live names only */
	struct htab links;  /* struct wslink */
	struct wsfile *all; /* every wsfile of this workspace */
	struct wsfile *unsaved; /* of which dirty or pending (changed with c->lock too) */
	char **made_dirs;   /* made by mkdir since the last command */
	size_t nmade;
	char *rescue_dir;	  /* set once data of this gone sandbox was kept */
	struct wsmove *moves;	  /* directories being renamed */
	size_t old_versions_open; /* files with version_of set */
	/* Its server answered a chunked PUT as one that takes no chunked
	 * body: files go there whole at close only. */
	bool no_chunked;
	int early_failures; /* early PUTs there that failed in a row */
};

/* Counters for stats: bumped with WS_COUNT whatever lock is held, read
 * with relaxed loads (wscache_stats). */
struct wscache_counters {
	atomic_uint_fast64_t hits, misses, fetched_bytes;
	atomic_uint_fast64_t uploads, upload_failures, uploaded_bytes;
	atomic_uint_fast64_t listings, listing_hits, negative_hits;
	/* listings fetched ahead of a tree walk (prefetch.c) */
	atomic_uint_fast64_t listings_prefetched;
	/* new cache files that were made ahead (spare.c) */
	atomic_uint_fast64_t spares_taken;
	atomic_uint_fast64_t evictions, enospc;
	atomic_uint_fast64_t renames, dir_renames;
	/* fsyncs of cache files and their directory */
	atomic_uint_fast64_t syncs;
	/* uploads that read their file for the crc */
	atomic_uint_fast64_t checksum_passes;
	/* intents whose cache file did not match */
	atomic_uint_fast64_t incomplete;
	/* new content given a new cache file (supersede) */
	atomic_uint_fast64_t versions;
	atomic_uint_fast64_t listing_evictions;
	/* Early PUTs (earlyput.c): started; the ones that carried the whole
	 * file; abandoned (then one PUT at close); bytes they had sent when
	 * their close came; bytes sent by every early PUT so far. */
	atomic_uint_fast64_t early_puts, early_puts_done, early_puts_abandoned;
	atomic_uint_fast64_t early_put_bytes_before_close;
	atomic_uint_fast64_t early_put_bytes;
	/* cached copies a command's change list spared (workspace.c) */
	atomic_uint_fast64_t copies_kept_after_commands;
};

struct wscache {
	struct wscache_config cfg;
	char *cache_dir;
	char *files_dir;  /* cache_dir/files: the cache files */
	char *rescue_dir; /* cache_dir/rescue/ID/PATH: data of gone sandboxes */
	/* cache_dir/incomplete/ID/PATH: cache files of interrupted uploads
	 * that no longer matched their intent (never uploaded). */
	char *incomplete_dir;
	pthread_mutex_t lock; /* the shared state only (see the top) */
	pthread_cond_t cond;  /* with lock: retry queue changed, stop */
	pthread_t thread;
	bool running, stop;
	struct workspace *wss;
	struct htab by_id; /* the workspaces not retired, by sandbox id */
	/* The clean copies nobody uses (no reference, nothing unsaved): the
	 * only ones ever evicted, from the head, and what max_bytes bounds
	 * (idle_bytes). A file joins at the tail when its last reference
	 * goes, at the head when it is larger than max_bytes: such a file is
	 * the first to go once clean. */
	struct wsfile *idle_head, *idle_tail;
	uint64_t idle_bytes;
	uint64_t bytes;	      /* sum of cache file sizes */
	size_t nfiles;	      /* files of every workspace (stats, no pass) */
	size_t pending_files; /* of which pending: their upload is retried */
	uint64_t dirty_bytes; /* of which dirty or pending */
	size_t unsaved_files; /* files dirty or pending: scans skip when 0 */
	uint64_t name_seq;
	unsigned int rand_state;
	uint64_t lost_uploads; /* pending uploads whose cache file vanished */
	/* Threads of downloads that run on their own (cache.c): joined
	 * when they end, and all before the backend is freed, since a
	 * thread's exit still uses the backend (its connection handle). */
	struct fetch_worker *fetch_workers;
	/* Pending files by next retry, a min-heap (due.c). */
	struct wsfile **due;
	size_t ndue, due_cap;
	atomic_bool fetch_stop; /* unmounting, downloads stop */
	/* The reserve of the cache directory's file system (cache.c): growth
	 * that would leave it less free than reserve_percent is ENOSPC.
	 * room is what may still be taken above the reserve: free space as
	 * of room_ms (a statvfs), less what running downloads announced and
	 * have not written yet, less what was reserved since. */
	uint64_t fetch_expect;	/* sizes announced by running downloads */
	atomic_uint_fast64_t fetch_written; /* what they have written of them */
	int64_t room;
	uint64_t room_ms;	/* 0: never measured */
	uint64_t reserve_bytes; /* the reserve, as of room_ms */
	/* The last growth asked for was refused (its size), so health says
	 * so until room is made. */
	uint64_t refused;
	struct wsdir *dir_lru_head, *dir_lru_tail; /* every workspace's */
	uint64_t listing_bytes;			   /* of every cached listing */
	uint64_t listing_entries;
	int early_running; /* early PUT threads alive (earlyput.c) */
	struct wsprefetch *prefetch; /* prefetch.c; NULL if it could not start */
	struct wsspares *spares;     /* spare.c; NULL before the restore */
	struct wscache_counters n; /* WS_COUNT bumps, relaxed loads read */
};

/* Bumps a counter of c->n, whatever lock is held. */
#define WS_COUNT(c, field, v)                                                            \
	atomic_fetch_add_explicit(&(c)->n.field, (uint64_t)(v), memory_order_relaxed)

/* --- helpers shared by the files ------------------------------------------*/

int ws_check_path(const char *rel);
/* ws_check_path, and hidden machinery of the root is not there (ENOENT). */
int ws_check(const struct workspace *ws, const char *rel);
/* Splits rel into parent (malloc'ed) and name (points into rel). */
char *ws_parent(const char *rel, const char **name);
/* rel's name when rel is directly in dir ("" is the root), else NULL. */
const char *ws_child_name(const char *rel, const char *dir);
char *ws_join(const char *a, const char *b);
bool ws_is_under(const char *path, const char *dir); /* path inside dir/ */
/* common_log, "workspace of ID: " first. */
void ws_log(const struct workspace *ws, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int ws_backend_errno(enum backend_status st);
/* ftruncate of a cache file, skipped when it has that size already: ext4
 * flushes a file at its close once it was truncated to 0 (its
 * auto_da_alloc rule for files rewritten in place), which made every new
 * cache file's close wait for the disk. -errno on failure. */
int ws_cache_truncate_fd(int fd, off_t size);
void ws_kernel_invalidate(struct workspace *ws, const char *rel);

/* prefetch.c: listings fetched ahead of a tree walk. prefetch_init may
 * fail (no prefetching then); prefetch_stop joins its threads and is
 * called before any workspace is freed. dir_walked: a directory handle
 * read d now (ws->lock held); at the start of a pass, when its parent was
 * read just before, the listings of its subdirectories are queued. */
int prefetch_init(struct wscache *c);
void prefetch_stop(struct wscache *c);
void dir_walked(struct workspace *ws, struct wsdir *d, bool pass_start);

/* spare.c: empty cache files made ahead of need by a thread, allowed from
 * the end of wscache_restore (spare_start; the first take starts the
 * thread) to wscache_free (spare_stop, which deletes the ones not taken). spare_take: one, or false when none is
 * ready (file_new then makes its own). */
void spare_start(struct wscache *c);
bool spare_take(struct wscache *c, char **path, int *fd);
void spare_stop(struct wscache *c);
int spare_ready(struct wscache *c); /* made and not taken yet */
/* A new cache file's path, unique (cache.c; NULL: no memory). */
char *cache_name_new(struct wscache *c);

/* listing.c (ws->lock held; dir_load may drop and retake it) */
int dir_load(struct workspace *ws, const char *path, struct wsdir **out);
struct wsdir *dir_cached(struct workspace *ws, const char *path);
struct wsentry *dir_find(struct wsdir *d, const char *name);
/* Adds or updates path's entry in its parent's cached listing; mtime
 * (may be NULL) forces the entry's time. */
void dir_upsert(struct workspace *ws, const char *path, uint64_t size, bool is_dir,
		const struct timespec *mtime);
/* path is a new directory: its listing is known to be empty. */
void dir_set_empty(struct workspace *ws, const char *path);
void dir_remove(struct workspace *ws, const char *path);
/* Inserts (or updates) name in the loaded listing d, sorted. */
void dir_put(struct wsdir *d, const char *name, uint64_t size, bool is_dir,
	     const struct timespec *seen);
/* Marks path's cached listing stale; dir_drop: path's and every one below. */
void dir_stale(struct workspace *ws, const char *path);
void dir_drop(struct workspace *ws, const char *path);
void dir_stale_all(struct workspace *ws);
void dir_free_all(struct workspace *ws);
/* Frees ws's listings that nobody pins or fetches (a retired workspace). */
void dir_release(struct workspace *ws);
/* An open directory handle keeps path's listing from eviction: the
 * chunks of one pass read it. dir_pin returns it (NULL: no memory);
 * dir_unpin may drop and retake ws->lock. */
struct wsdir *dir_pin(struct workspace *ws, const char *path);
void dir_unpin(struct wsdir *d);
/* path has no listing here that is fresh or being fetched. */
bool dir_wanted(struct workspace *ws, const char *path);
/* Fetches path's listing if dir_wanted: 1 when it did, 0 when not wanted,
 * or -errno (may drop and retake ws->lock). */
int dir_prefetch(struct workspace *ws, const char *path);
/* Appends the listing cache's stat lines (ws->lock not held). */
void dir_stats(struct wscache *c, FILE *out);
bool ws_machinery(const struct workspace *ws, const char *dir, const char *name);

/* What a path is, from the live cache or the parent's listing. */
struct wsattr {
	bool is_dir;
	bool is_link; /* size is the target's length */
	uint64_t size;
	struct timespec mtime;
};

/* workspace_ops.c: names and lookups (ws->lock held unless said otherwise) */
struct wshandle *ws_handle_of(uint64_t fh); /* NULL: not a file handle */
/* The cache entry, not the listing, tells f's size. */
bool file_auth(const struct wsfile *f);
/* What rel is; may drop and retake ws->lock (listing fetch). */
int ws_lookup(struct workspace *ws, const char *rel, struct wsattr *a);
/* The parent of rel is a directory (ws->lock may be dropped). */
int ws_parent_is_dir(struct workspace *ws, const char *rel);
/* Queues permission bits for the chmod before the next command. */
int ws_mode_queue(struct workspace *ws, const char *rel, mode_t perm);
void ws_fill_stat(struct workspace *ws, const char *rel, const struct wsattr *a,
		  struct stat *st);
/* PUT then DELETE of a placeholder inside rel makes the directory. */
int ws_make_dir_remote(struct workspace *ws, const char *rel);
void ws_made_dirs_drop(struct workspace *ws, const char *rel);
/* rel is empty on the server (a fresh listing) and here; ws->lock may be
 * dropped. */
int ws_dir_check_empty(struct workspace *ws, const char *rel);

/* fileio.c: the file helpers the other operations share */
/* No pending upload of f may land after what the caller does next.
 * f->mx held, ws->lock not held. */
void file_upload_cancel(struct wsfile *f);
/* DELETE of rel (a file or a tree); a name already gone counts as
 * deleted. */
int ws_delete_remote(struct workspace *ws, const char *url, const char *rel,
		     struct backend_error *err);
/* Drops a reference taken by an operation (ws->lock not held). */
void file_drop_ref(struct wsfile *f);
/* The cache entry of an existing file, referenced; ws->lock held. */
int file_for(struct workspace *ws, const char *rel, struct wsfile **out);

/* rename.c, ws->lock held (dropped while it waits): waits while rel is at
 * or below a directory that another thread is renaming. */
void ws_moves_wait(struct workspace *ws, const char *rel);
/* The same for f's path, which the rename may change while it waits. */
void file_moves_wait(struct wsfile *f);

/* workspace.c, ws->lock held */
struct workspace *ws_find(struct wscache *c, const char *id);
/* ws->lock not held: the first of c->wss; then ws->next, which never
 * changes (workspaces leave only at wscache_free). */
struct workspace *ws_first(struct wscache *c);
/* Finds or makes (with url, may be NULL) the workspace of sandbox id; an
 * existing one keeps its url (ws_get_lock sets it). */
struct workspace *ws_get_locked(struct wscache *c, const char *id, const char *url);
/* ws->lock not held: the same, url set, returned with its ws->lock held. */
struct workspace *ws_get_lock(struct wscache *c, const char *id, const char *url);
/* Uploads the dirty files of only (NULL: of every workspace) once; returns
 * how many were not uploaded (ws->lock not held). */
int ws_flush_all(struct wscache *c, struct workspace *only, uint64_t budget_ms,
		 bool due_only, char *stuck, size_t stuck_len);
/* Moves a cache file to base/ID/PATH; nonzero: nothing kept. */
int rescue_keep(const char *base, const char *id, const char *path,
		const char *cache_file, char **dir_out);

/* links.c, ws->lock held unless said otherwise */
/* Whether target, of a link at workspace path, leads out of the
 * workspace: absolute, or climbing above its root. */
bool link_target_escapes(const char *path, const char *target);
struct wslink *link_find(struct workspace *ws, const char *path);
struct wslink *link_set(struct workspace *ws, const char *path, const char *target,
			bool queued);
void link_drop(struct workspace *ws, const char *path);
void links_free_all(struct workspace *ws);
/* A listing of d just came (or was made): links there get their type and
 * size, queued ones are added, others it no longer has are forgotten. */
void links_fix_listing(struct workspace *ws, struct wsdir *d, const struct timespec *now);
/* Moves the links below directory from to to; the records to journal
 * are appended to recs. */
void links_move(struct workspace *ws, const char *from, const char *to,
		struct wslinkrec **recs, size_t *nrecs);
/* What a command's change list says of path: a link to target, or (NULL)
 * not a link. */
void links_note(struct workspace *ws, const char *path, const char *target,
		struct wslinkrec **recs, size_t *nrecs);
int linkrec_add(struct wslinkrec **v, size_t *n, enum journal_kind kind, const char *path,
		const char *target);
/* ws->lock not held: */
/* Journals the records (not durably) and frees them. */
void links_journal(struct workspace *ws, struct wslinkrec *v, size_t n);
/* Makes the queued links in the sandbox through cfg.exec, in batches;
 * 0, or the exec's error (-EBUSY: the seat is taken; they stay queued). */
int links_apply(struct workspace *ws, bool in_seat);
/* unlink and rename of a link, by commands (never a DELETE). */
int ws_link_unlink(struct workspace *ws, const char *rel);
int ws_link_rename(struct workspace *ws, const char *from, const char *to, bool dst_exists);
/* The links a replayed journal holds for sb (wscache_restore). */
void links_restore(struct wscache *c, const struct journal_sandbox *sb);

/* metadata (modes.c, ws->lock held) */
struct wsmeta *meta_get(struct workspace *ws, const char *path, bool create);
void meta_drop(struct workspace *ws, const char *path);
/* Moves the metadata of from (a file or a tree) to to, replacing to's:
 * a pass over every path with metadata. */
void meta_move(struct workspace *ws, const char *from, const char *to);
/* The same for a file or a link: its own metadata only, by its name. */
void meta_move_one(struct workspace *ws, const char *from, const char *to);

/* cache.c (ws->lock held unless said otherwise) */
struct wsfile *file_find(struct workspace *ws, const char *path);
/* A clean copy fetched before the last command is not the content any
 * more: it is fetched again at its next use. */
void file_expire_after_command(struct wsfile *f);
/* f's content is not the current one (a command ran since, or it never
 * came) and handles that only read are open on it, or a download of the
 * old content still runs into it: rather than refill its cache file
 * under them, the new content goes to a new one (file_supersede). Not
 * with a handle that may write open: its writes must reach the name. */
bool file_needs_version(const struct wsfile *f);
/* A new cache entry for f's path, which f leaves: f stays with its
 * handles, which read it whole until they close (as NFS's close-to-open:
 * opens that come later get the new content). NULL when out of memory. */
struct wsfile *file_supersede(struct wsfile *f);
/* The last handle of f is gone (release). */
void file_closed(struct wsfile *f);
/* Appends this file's stat lines (versions, listing memory). */
void cache_stats(struct wscache *c, FILE *out);
/* adopt: an existing cache file to take over (restore), or NULL: then a
 * new empty cache file, left open for the caller's file_ref. */
struct wsfile *file_new(struct workspace *ws, const char *path, const char *adopt);
void cache_account(struct wsfile *f, uint64_t size);
int file_ref(struct wsfile *f); /* opens the fd when needed */
void file_unref(struct wsfile *f);
bool file_live(const struct wsfile *f);
void file_detach(struct wsfile *f); /* unlinks the name; keeps the data */
void file_set_path(struct wsfile *f, const char *path);
void file_drop_clean(struct wsfile *f); /* forgets a clean, unused copy */
/* Makes room for f (in use: open, downloading or unsaved) to grow to
 * new_size bytes, whatever max_bytes, as long as the cache directory's
 * file system keeps its reserve free; clean copies nobody uses are
 * evicted for it when it is short. Returns -ENOSPC past the reserve,
 * logged and said in health. */
int cache_reserve(struct wscache *c, struct wsfile *f, uint64_t new_size);
/* Evicts clean copies nobody uses until they are within max_bytes;
 * called where a file may just have become one (its last reference gone,
 * its upload done). held: the workspace whose lock the caller holds (its
 * copies may go), or NULL. No pointer to a file without a reference may be held
 * across it. */
void cache_trim(struct wscache *c, struct workspace *held);
/* Evicts every clean copy of ws nobody uses (a retired workspace). */
void cache_drop_idle(struct workspace *ws);
/* --- upload retries by due time (due.c), c->lock and f->ws->lock held -------*/
/* f's pending state, permanence, unlinking or next_try_ms changed. */
void due_update(struct wsfile *f);
/* f leaves the heap (it is freed). */
void due_remove(struct wsfile *f);
/* The file whose retry is due first, or NULL. */
struct wsfile *due_first(struct wscache *c);

/* Appends the reserve's health line, if writes are refused (takes
 * c->lock). Returns the number of problems. */
int cache_health(struct wscache *c, FILE *out);
void cache_set_dirty(struct wsfile *f, bool dirty);
void cache_set_state(struct wsfile *f, bool dirty, bool pending);
/* Files of at least this size (by the listing) download on a thread of
 * their own while the opener's reads proceed; smaller ones in open. */
#define WS_STREAM_MIN (1024 * 1024)

/* f->mx held, ws->lock not held: */
/* Downloads f's content (waits for a download already running first). */
int cache_fetch(struct wsfile *f);
/* Starts a download of f (none running, content not present): publishes it
 * as f->fetch and returns it with one reference for the caller besides the
 * download's own; then call cache_fetch_run (or cache_fetch_spawn). */
int cache_fetch_begin(struct wsfile *f, struct wsfetch **out);
/* ws->lock not held, f->mx need not be held: */
/* Runs the download to its end; returns 0 or -errno. Drops the download's
 * reference. */
int cache_fetch_run(struct wsfetch *fe);
/* Runs it on a thread of its own when it is large; false: not started,
 * run it here. */
bool cache_fetch_spawn(struct wsfetch *fe);
/* Waits until end bytes are there or the download ended: 0, its -errno,
 * or -EINTR when the FUSE request was interrupted. */
int cache_fetch_wait(struct wsfetch *fe, uint64_t end);
/* Waits until no download runs into f's cache file: 0 or -EINTR. */
int cache_fetch_idle(struct wsfile *f);
/* Drops a reference (ws->lock held). */
void cache_fetch_put(struct wsfetch *fe);
/* Stops running downloads and joins their threads (unmount): when it
 * returns, no download thread is left. */
void cache_fetch_stop_all(struct wscache *c);
int cache_truncate(struct wsfile *f, uint64_t size);
/* Keeps the running crc after n bytes written at off, or drops it. */
void cache_crc_write(struct wsfile *f, const void *buf, size_t n, uint64_t off);

/* upload.c: f->mx held, ws->lock not held */
/* Who waits for an upload; decides when it is made durable (upload.c). */
enum upload_caller {
	/* close/fsync/truncate(2), which return the PUT's outcome: durable
	 * only if the PUT fails, before the call returns. */
	UPLOAD_CALLER_WAITS,
	/* anything else (release, retries, flushes before a command): the
	 * data may already be acknowledged, so durable before the PUT. */
	UPLOAD_DURABLE_FIRST,
	/* The close of a descriptor that wrote: as UPLOAD_CALLER_WAITS, and
	 * an early PUT of the file may carry it (earlyput.c). */
	UPLOAD_CALLER_CLOSES,
};
int upload_locked(struct wsfile *f, enum upload_caller who);
/* Journals, durably, the intent of f's dirty content without uploading it
 * (the PUT comes later), so a crash before the PUT cannot lose it; makes a
 * non-durable intent durable. f->mx held. */
int upload_intent_locked(struct wsfile *f);
/* earlyput.c: the early PUT of a file written in order from offset 0.
 * f->mx held, ws->lock not held, unless said otherwise. */
/* Files smaller than this at their close are never streamed. */
#define WS_EARLY_MIN (1024 * 1024)
/* At most this many early PUTs run at once per mount. */
#define WS_EARLY_MAX 4
/* After a write of f, which is now size bytes: hands the new bytes to its early PUT,
 * abandons it when the write was not at the end, or starts one. */
void earlyput_wrote(struct wsfile *f, uint64_t size);
/* Abandons f's early PUT without waiting for it (a truncate). */
void earlyput_abandon(struct wsfile *f);
/* Abandons f's early PUT and waits for its thread to end (bounded: about
 * a second): afterwards nothing of it is on the wire. Its intent becomes
 * f's pending one (f->upload_id), for the next upload to supersede. */
void earlyput_reap(struct wsfile *f);
/* At a close: whether f's early PUT can carry its content of size bytes;
 * if so its intent is now f's (f->upload_id), else it was reaped. */
bool earlyput_ready(struct wsfile *f, uint64_t size);
/* Lets f's early PUT (earlyput_ready said yes) send the rest and waits for
 * the server's answer; reaps it. BACKEND_OK only when the server answered
 * 2xx after every one of the size bytes. */
enum backend_status earlyput_finish(struct wsfile *f, uint64_t size,
				    struct backend_error *err);
/* A directory rename (ws->lock held): abandons the early PUTs of files
 * below dir; true while one of their threads still runs (they end on
 * ws->cond). */
bool earlyput_stop_under(struct workspace *ws, const char *dir);
/* The path f's early PUT goes to ("" when none). */
const char *earlyput_path(const struct wsfile *f);
/* Reaps the early PUTs still there (unmount, after the last flush). */
void earlyput_reap_all(struct wscache *c);

void upload_supersede(struct wscache *c, const char *sandbox, uint64_t id, bool durable);
void upload_schedule(struct wsfile *f, int err); /* ws->lock held */
void *upload_thread(void *arg);

#endif
