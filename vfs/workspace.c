/*
 * workspace.c — the wscache and workspace objects: creation, flushes,
 * freeing, workspaces found by sandbox id, files kept (rescued) when a
 * sandbox is gone, and the helpers every file of vfs/ shares. Restore,
 * health and stats are in restore.c, modes in modes.c, links in links.c;
 * the operations of the mount in workspace_ops.c, fileio.c, rename.c and
 * readdir.c. What the kernel holds is the mount's to track and to tell
 * (fuse/nodes.c): this core only drops its own caches after a command.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "common/strjoin.h"
#include "common/thread.h"
#include "workspace_i.h"

/* --- small helpers ----------------------------------------------------------*/

int ws_check_path(const char *rel)
{
	if (!rel)
		return -EINVAL;
	size_t len = strlen(rel);
	if (len >= 4096)
		return -ENAMETOOLONG;
	if (len == 0)
		return 0;
	const char *p = rel;
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		if (n > 255)
			return -ENAMETOOLONG;
		char seg[256];
		memcpy(seg, p, n);
		seg[n] = '\0';
		if (!backend_name_valid(seg))
			return -EINVAL;
		if (strcmp(seg, WS_PLACEHOLDER) == 0)
			return -EINVAL; /* reserved for mkdir, never shown */
		if (!slash)
			return 0;
		p = slash + 1;
	}
}

/* ws_check_path, and the hidden machinery of the root is not there. */
int ws_check(const struct workspace *ws, const char *rel)
{
	int rc = ws_check_path(rel);
	if (rc < 0)
		return rc;
	const char *slash = strchr(rel, '/');
	size_t n = slash ? (size_t)(slash - rel) : strlen(rel);
	char first[256];
	memcpy(first, rel, n);
	first[n] = '\0';
	if (n && ws_machinery(ws, "", first))
		return -ENOENT;
	return 0;
}

char *ws_parent(const char *rel, const char **name)
{
	const char *slash = strrchr(rel, '/');
	if (!slash) {
		*name = rel;
		return strdup("");
	}
	*name = slash + 1;
	return strndup(rel, (size_t)(slash - rel));
}

const char *ws_child_name(const char *rel, const char *dir)
{
	const char *slash = strrchr(rel, '/');
	size_t len = slash ? (size_t)(slash - rel) : 0;
	if (strlen(dir) != len || strncmp(rel, dir, len) != 0)
		return NULL;
	return slash ? slash + 1 : rel;
}

char *ws_join(const char *a, const char *b)
{
	/* not asprintf: a tree walk joins one per listed name */
	return a[0] ? common_join(NULL, 0, a, '/', b) : strdup(b);
}

bool ws_is_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (n == 0)
		return path[0] != '\0';
	return strncmp(path, dir, n) == 0 && path[n] == '/';
}

void ws_log(const struct workspace *ws, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	common_log("workspace of %s: %s", ws ? ws->id : "?", msg);
}

int ws_cache_truncate_fd(int fd, off_t size)
{
	struct stat st;
	if (fstat(fd, &st) == 0 && st.st_size == size)
		return 0;
	return ftruncate(fd, size) < 0 ? -errno : 0;
}

int ws_backend_errno(enum backend_status st)
{
	int e = backend_errno(st, BACKEND_OP_FILE);
	return e ? e : EIO;
}

void ws_kernel_invalidate(struct workspace *ws, const char *rel)
{
	const struct wscache_config *cfg = &ws->c->cfg;
	if (cfg->invalidate)
		cfg->invalidate(cfg->kernel_ctx, ws->id, rel);
}

/* --- wscache ------------------------------------------------------------------*/

struct wscache *wscache_new(const struct wscache_config *cfg)
{
	if (!cfg || !cfg->backend || !cfg->cache_dir || !cfg->cache_dir[0])
		return NULL;
	struct wscache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->cfg = *cfg;
	if (!c->cfg.max_bytes)
		c->cfg.max_bytes = 1ULL << 30;
	if (!c->cfg.reserve_percent)
		c->cfg.reserve_percent = 5;
	else if (c->cfg.reserve_percent > 100)
		c->cfg.reserve_percent = 100;
	if (c->cfg.listing_ttl_ms < 0)
		c->cfg.listing_ttl_ms = 1000;
	if (!c->cfg.listing_max_bytes)
		c->cfg.listing_max_bytes = 64ULL << 20;
	/* Absolute, so the journal's cache_file paths survive a chdir. */
	if (common_mkdirs(cfg->cache_dir, 0700) == 0)
		c->cache_dir = realpath(cfg->cache_dir, NULL);
	else
		c->cache_dir = NULL;
	c->files_dir = c->cache_dir ? ws_join(c->cache_dir, "files") : NULL;
	c->rescue_dir = c->cache_dir ? ws_join(c->cache_dir, "rescue") : NULL;
	c->incomplete_dir = c->cache_dir ? ws_join(c->cache_dir, "incomplete") : NULL;
	c->cfg.cache_dir = c->cache_dir;
	if (!c->files_dir || !c->rescue_dir || !c->incomplete_dir ||
	    htab_init(&c->by_id, 0) < 0 || common_mkdirs(c->cache_dir, 0700) < 0 ||
	    common_mkdirs(c->files_dir, 0700) < 0) {
		free(c->cache_dir);
		free(c->files_dir);
		free(c->rescue_dir);
		free(c->incomplete_dir);
		htab_free(&c->by_id);
		free(c);
		return NULL;
	}
	chmod(c->cache_dir, 0700);
	chmod(c->files_dir, 0700);
	pthread_mutex_init(&c->lock, NULL);
	common_cond_init(&c->cond);
	c->rand_state = (unsigned)time(NULL) ^ (unsigned)getpid();
	if (prefetch_init(c) < 0)
		common_log("listings will not be fetched ahead of walks: out of memory");
	return c;
}

int wscache_start(struct wscache *c)
{
	if (c->running)
		return 0;
	int rc = common_thread_start(&c->thread, upload_thread, c);
	if (rc)
		return -rc;
	c->running = true;
	return 0;
}

static void workspace_free(struct workspace *ws)
{
	pthread_cond_destroy(&ws->cond);
	pthread_mutex_destroy(&ws->lock);
	while (ws->all) {
		struct wsfile *f = ws->all;
		ws->all = f->ws_next;
		ws->c->nfiles--;
		ws->c->pending_files -= f->pending;
		if (f->fd >= 0)
			close(f->fd);
		/* Dirty data stays on disk for the next mount's restore. */
		if (!f->dirty && !f->pending)
			unlink(f->cache_path);
		pthread_mutex_destroy(&f->mx);
		free(f->path);
		free(f->cache_path);
		free(f);
	}
	htab_free(&ws->files);
	for (size_t i = 0; i < ws->metas.nb; i++) {
		struct hlink *l = ws->metas.b[i];
		while (l) {
			struct hlink *next = l->next;
			struct wsmeta *m = htab_entry(l, struct wsmeta, h);
			free(m->path);
			free(m);
			l = next;
		}
	}
	htab_free(&ws->metas);
	links_free_all(ws);
	dir_free_all(ws);
	for (size_t i = 0; i < ws->nmade; i++)
		free(ws->made_dirs[i]);
	free(ws->made_dirs);
	free(ws->rescue_dir);
	free(ws->id);
	free(ws->url);
	free(ws);
}

/* Names f and why it is not uploaded in stuck (once). ws->lock held. */
static void note_stuck(char *stuck, size_t len, const struct wsfile *f, int err)
{
	if (stuck && len && !stuck[0])
		snprintf(stuck, len, "%s (%s)", f->path, strerror(err ? err : EIO));
}

/* The first workspace (c->lock taken for the head only: a workspace's
 * next is set once, before it is listed, and none leaves before
 * wscache_free). */
struct workspace *ws_first(struct wscache *c)
{
	pthread_mutex_lock(&c->lock);
	struct workspace *ws = c->wss;
	pthread_mutex_unlock(&c->lock);
	return ws;
}

static bool flush_wanted(const struct wsfile *f)
{
	return (f->dirty || f->pending) && !f->unlinked && f->path && !f->flush_parked;
}

/* Uploads every dirty file of ws once (or of every workspace when ws is
 * NULL), starting none after budget_ms. Returns the number not uploaded;
 * stuck (may be NULL) gets the first of them and why. With due_only, a
 * failed upload whose retry is not due yet fails the flush at once, and
 * nothing is uploaded: a caller that loops (a command refused, written
 * again) keeps to the retries' backoff instead of hammering the sandbox
 * and journaling a new intent each time. One workspace's lock at a time,
 * never with c->lock. */
int ws_flush_all(struct wscache *c, struct workspace *only, uint64_t budget_ms,
		 bool due_only, char *stuck, size_t stuck_len)
{
	int failed = 0;
	uint64_t deadline = common_now_ms() + budget_ms;
	if (stuck && stuck_len)
		stuck[0] = '\0';
	pthread_mutex_lock(&c->lock);
	size_t unsaved = c->unsaved_files;
	pthread_mutex_unlock(&c->lock);
	if (!unsaved) /* the common case: no walk of every file */
		return 0;
	struct workspace *first = only ? only : ws_first(c);
	for (struct workspace *ws = due_only ? first : NULL; ws;
	     ws = only ? NULL : ws->next) {
		pthread_mutex_lock(&ws->lock);
		uint64_t now = common_now_ms();
		for (struct wsfile *f = ws->gone ? NULL : ws->all; f; f = f->ws_next)
			if (f->pending && !f->unlinked && f->path &&
			    f->next_try_ms > now) {
				failed++;
				note_stuck(stuck, stuck_len, f, f->last_err);
			}
		pthread_mutex_unlock(&ws->lock);
	}
	if (failed)
		return failed;
	for (;;) {
		if (common_now_ms() > deadline) {
			for (struct workspace *ws = first; ws; ws = only ? NULL : ws->next) {
				pthread_mutex_lock(&ws->lock);
				for (struct wsfile *f = ws->gone ? NULL : ws->all; f;
				     f = f->ws_next)
					if (flush_wanted(f)) {
						failed++;
						note_stuck(stuck, stuck_len, f,
							   ETIMEDOUT);
					}
				pthread_mutex_unlock(&ws->lock);
			}
			break;
		}
		struct wsfile *pick = NULL;
		struct workspace *pws = NULL;
		for (struct workspace *ws = first; ws && !pick; ws = only ? NULL : ws->next) {
			pthread_mutex_lock(&ws->lock);
			for (struct wsfile *f = ws->gone ? NULL : ws->all; f; f = f->ws_next)
				if (flush_wanted(f)) {
					pick = f;
					break;
				}
			if (pick && file_ref(pick) < 0)
				pick = NULL;
			if (pick)
				pws = ws;
			else
				pthread_mutex_unlock(&ws->lock);
		}
		if (!pick)
			break;
		pthread_mutex_unlock(&pws->lock);
		pthread_mutex_lock(&pick->mx);
		int rc = upload_locked(pick, UPLOAD_DURABLE_FIRST);
		pthread_mutex_unlock(&pick->mx);
		pthread_mutex_lock(&pws->lock);
		if (rc < 0) {
			failed++;
			pick->flush_parked = true; /* not picked again in this pass */
			if (pick->path)
				note_stuck(stuck, stuck_len, pick, -rc);
		}
		file_unref(pick);
		pthread_mutex_unlock(&pws->lock);
	}
	for (struct workspace *ws = first; ws; ws = only ? NULL : ws->next) {
		pthread_mutex_lock(&ws->lock);
		for (struct wsfile *f = ws->all; f; f = f->ws_next)
			f->flush_parked = false;
		pthread_mutex_unlock(&ws->lock);
	}
	return failed;
}

void wscache_free(struct wscache *c)
{
	if (!c)
		return;
	cache_fetch_stop_all(c);
	prefetch_stop(c);
	spare_stop(c);
	if (c->running) {
		pthread_mutex_lock(&c->lock);
		c->stop = true;
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->thread, NULL);
		c->running = false;
	}
	int failed = ws_flush_all(c, NULL, 10000, false, NULL, 0);
	if (failed)
		common_log("%d uploads still pending; they are retried at the next mount",
			   failed);
	earlyput_reap_all(c);
	while (c->wss) {
		struct workspace *ws = c->wss;
		c->wss = ws->next;
		workspace_free(ws);
	}
	htab_free(&c->by_id);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c->cache_dir);
	free(c->files_dir);
	free(c->rescue_dir);
	free(c->incomplete_dir);
	free(c->due); /* its files went with their workspaces */
	free(c);
}

/* --- workspaces ---------------------------------------------------------------*/

struct workspace *ws_find(struct wscache *c, const char *id)
{
	struct hlink *l = htab_find(&c->by_id, id);
	return l ? htab_entry(l, struct workspace, by_id) : NULL;
}

struct workspace *ws_get_locked(struct wscache *c, const char *id, const char *url)
{
	struct workspace *ws = ws_find(c, id);
	if (ws)
		return ws;
	ws = calloc(1, sizeof(*ws));
	if (!ws)
		return NULL;
	ws->c = c;
	ws->id = strdup(id);
	ws->url = url ? strdup(url) : NULL;
	ws->epoch = 1;
	clock_gettime(CLOCK_REALTIME, &ws->born);
	if (!ws->id || (url && !ws->url) || htab_init(&ws->dirs, 0) < 0 ||
	    htab_init(&ws->metas, 0) < 0 || htab_init(&ws->files, 0) < 0 ||
	    htab_init(&ws->links, 0) < 0) {
		htab_free(&ws->links);
		htab_free(&ws->dirs);
		htab_free(&ws->metas);
		htab_free(&ws->files);
		free(ws->id);
		free(ws->url);
		free(ws);
		return NULL;
	}
	pthread_mutex_init(&ws->lock, NULL);
	common_cond_init(&ws->cond);
	ws->next = c->wss;
	c->wss = ws;
	ws->by_id.key = ws->id;
	htab_add(&c->by_id, &ws->by_id);
	return ws;
}

struct workspace *workspace_get(struct wscache *c, const char *sandbox_id,
				const char *url)
{
	if (!c || !sandbox_id)
		return NULL;
	struct workspace *ws = ws_get_lock(c, sandbox_id, url);
	if (ws)
		pthread_mutex_unlock(&ws->lock);
	return ws;
}

struct workspace *ws_get_lock(struct wscache *c, const char *id, const char *url)
{
	pthread_mutex_lock(&c->lock);
	struct workspace *ws = ws_get_locked(c, id, url);
	pthread_mutex_unlock(&c->lock);
	if (!ws)
		return NULL;
	pthread_mutex_lock(&ws->lock);
	if (url && (!ws->url || strcmp(ws->url, url) != 0)) {
		char *u = strdup(url);
		if (u) {
			free(ws->url);
			ws->url = u;
		}
	}
	return ws;
}

/* Directories made here are merged into listings until a command runs;
 * from then on the sandbox's own listing says whether they are there (the
 * command may have removed them). ws->lock held. */
static void made_dirs_forget(struct workspace *ws)
{
	for (size_t i = 0; i < ws->nmade; i++)
		free(ws->made_dirs[i]);
	ws->nmade = 0;
}

/* The kernel side is the mount's: it knows what the kernel holds and
 * tells it after a command itself. Here, only this module's caches. */
void workspace_invalidate(struct workspace *ws)
{
	if (!ws)
		return;
	pthread_mutex_lock(&ws->lock);
	ws->epoch++;
	made_dirs_forget(ws);
	pthread_mutex_unlock(&ws->lock);
}

/* A new epoch makes every listing and copy stale (their epoch is the
 * old one). The copies of live names move into the new one, with the
 * downloads under way for them, then the listed files' go back: one pass
 * over the workspace's files and a lookup per listed name. */
void workspace_invalidate_changed(struct workspace *ws, const struct ws_changes *sum)
{
	if (!ws_changes_precise(sum)) {
		workspace_invalidate(ws);
		return;
	}
	if (!ws)
		return;
	pthread_mutex_lock(&ws->lock);
	uint64_t was = ws->epoch++;
	int64_t kept = 0;
	for (struct wsfile *f = ws->all; f; f = f->ws_next) {
		if (!f->path || f->unlinked)
			continue;
		if (f->epoch == was) {
			f->epoch = ws->epoch;
			kept += f->present;
		}
		struct wsfetch *fe = atomic_load(&f->fetch);
		if (fe && fe->epoch == was)
			fe->epoch = ws->epoch;
	}
	for (size_t i = 0; i < sum->nfiles; i++) {
		struct wsfile *f = file_find(ws, sum->files[i]);
		if (!f)
			continue;
		if (f->epoch == ws->epoch) {
			f->epoch = was;
			kept -= f->present;
		}
		struct wsfetch *fe = atomic_load(&f->fetch);
		if (fe && fe->epoch == ws->epoch)
			fe->epoch = was;
	}
	made_dirs_forget(ws);
	if (kept > 0)
		WS_COUNT(ws->c, copies_kept_after_commands, kept);
	pthread_mutex_unlock(&ws->lock);
}

struct workspace *workspace_find(struct wscache *c, const char *sandbox_id)
{
	if (!c || !sandbox_id)
		return NULL;
	pthread_mutex_lock(&c->lock);
	struct workspace *ws = ws_find(c, sandbox_id);
	pthread_mutex_unlock(&c->lock);
	return ws;
}

/* Keeps the cache file of path for the user under BASE/ID/path (base:
 * the rescue or the incomplete directory). */
/* Links cache_file at dest, or dest.1, dest.2, ... when taken. */
static int rescue_link(const char *cache_file, const char *dest)
{
	char *try = strdup(dest);
	int rc = try ? 0 : -ENOMEM;
	for (int i = 1; try && link(cache_file, try) < 0; i++) {
		if (errno != EEXIST || i > 1000) {
			rc = -errno;
			break;
		}
		free(try);
		if (asprintf(&try, "%s.%d", dest, i) < 0) {
			try = NULL;
			rc = -ENOMEM;
		}
	}
	free(try);
	return rc;
}

/* A workspace path deeper than the local file system takes under base
 * (PATH_MAX) is kept flat: DIR/long-path-N with its path in
 * DIR/long-path-N.path, so no data is lost for want of a name. */
static int rescue_keep_flat(const char *dir, const char *path, const char *cache_file)
{
	int rc = common_mkdirs(dir, 0700);
	for (int i = 1; rc == 0 && i <= 100000; i++) {
		char *dest = NULL, *note = NULL;
		if (asprintf(&dest, "%s/long-path-%d", dir, i) < 0 ||
		    asprintf(&note, "%s.path", dest) < 0) {
			free(dest);
			return -ENOMEM;
		}
		int fd = open(note, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0) {
			rc = errno == EEXIST ? 0 : -errno;
		} else {
			size_t len = strlen(path);
			bool ok = write(fd, path, len) == (ssize_t)len &&
				  write(fd, "\n", 1) == 1;
			close(fd);
			rc = ok ? (link(cache_file, dest) < 0 ? -errno : 0) : -EIO;
			if (rc == 0) {
				free(dest);
				free(note);
				return 0;
			}
			unlink(note);
		}
		free(dest);
		free(note);
	}
	return rc ? rc : -EEXIST;
}

/* Keeps a cache file under base/ID/PATH (rescue or incomplete) and removes
 * it from the cache. *dir_out: base/ID. Nonzero: nothing was kept, and
 * the cache file is still there. */
int rescue_keep(const char *base, const char *id, const char *path,
		const char *cache_file, char **dir_out)
{
	char *dir = ws_join(base, id);
	char *dest = dir ? ws_join(dir, path) : NULL;
	if (!dest) {
		free(dir);
		return -ENOMEM;
	}
	char *slash = strrchr(dest, '/');
	*slash = '\0';
	int rc = common_mkdirs(dest, 0700);
	*slash = '/';
	if (rc == 0)
		rc = rescue_link(cache_file, dest);
	if (rc == -ENAMETOOLONG)
		rc = rescue_keep_flat(dir, path, cache_file);
	if (rc == 0)
		unlink(cache_file);
	free(dest);
	if (dir_out)
		*dir_out = dir;
	else
		free(dir);
	return rc;
}

void workspace_set_url(struct workspace *ws, const char *url)
{
	if (!ws)
		return;
	struct wscache *c = ws->c;
	char *u = url ? strdup(url) : NULL;
	pthread_mutex_lock(&ws->lock);
	if (url && !u) {
		/* out of memory: send nothing rather than to the old URL */
		free(ws->url);
		ws->url = NULL;
	} else if (!ws->gone) {
		free(ws->url);
		ws->url = u;
		u = NULL;
	}
	if (ws->url) {
		/* What waits for the sandbox is tried at its new place now. */
		pthread_mutex_lock(&c->lock);
		for (struct wsfile *f = ws->all; f; f = f->ws_next)
			if (f->pending && !f->permanent) {
				f->next_try_ms = common_now_ms();
				due_update(f);
			}
		pthread_mutex_unlock(&c->lock);
		dir_stale_all(ws);
	}
	pthread_cond_broadcast(&ws->cond);
	pthread_mutex_lock(&c->lock);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&ws->lock);
	free(u);
}

void workspace_sandbox_gone(struct workspace *ws)
{
	if (!ws)
		return;
	struct wscache *c = ws->c;
	struct item {
		char *path, *cache;
		uint64_t id;
	} *items = NULL;
	size_t n = 0;
	pthread_mutex_lock(&ws->lock);
	ws->gone = true;
	/* Whoever serves that URL now is not this sandbox. */
	free(ws->url);
	ws->url = NULL;
	for (struct wsfile *f = ws->all; f; f = f->ws_next)
		n += (f->dirty || f->pending) && f->path && !f->unlinked;
	items = calloc(n ? n : 1, sizeof(*items));
	size_t k = 0;
	for (struct wsfile *f = ws->all; f && items; f = f->ws_next) {
		if (!((f->dirty || f->pending) && f->path && !f->unlinked))
			continue;
		/* A copy to rescue: open handles keep the original. */
		char *copy = NULL;
		if (asprintf(&copy, "%s.rescue", f->cache_path) < 0)
			copy = NULL;
		if (copy && link(f->cache_path, copy) < 0) {
			free(copy);
			copy = NULL;
		}
		items[k++] = (struct item){strdup(f->path), copy, f->upload_id};
		f->upload_id = 0;
		cache_set_state(f, false, false);
	}
	pthread_mutex_unlock(&ws->lock);
	char *dir = NULL;
	for (size_t i = 0; i < k; i++) {
		bool kept = false;
		if (items[i].cache && items[i].path) {
			char *d = NULL;
			int krc = rescue_keep(c->rescue_dir, ws->id, items[i].path,
					      items[i].cache, &d);
			kept = krc == 0;
			if (!kept)
				ws_log(
				    ws,
				    "error: an unsaved file of a sandbox that is gone "
				    "could not be kept for rescue (%s); its upload stays "
				    "journaled",
				    strerror(-krc));
			if (kept && !dir)
				dir = d;
			else
				free(d);
		}
		if (c->cfg.journal && items[i].id && kept) {
			struct journal_record r = {
			    .kind = JOURNAL_UPLOAD_ABANDONED,
			    .sandbox = ws->id,
			    .upload_id = items[i].id,
			    .error = "the sandbox is gone; data kept for rescue"};
			journal_append(c->cfg.journal, &r, true);
		}
		free(items[i].path);
		free(items[i].cache);
	}
	free(items);
	if (dir) {
		ws_log(ws, "the sandbox is gone; its unsaved files are kept in %s", dir);
		pthread_mutex_lock(&ws->lock);
		if (!ws->rescue_dir)
			ws->rescue_dir = dir;
		else
			free(dir);
		pthread_mutex_unlock(&ws->lock);
	}
}

void workspace_forget(struct wscache *c, const char *sandbox_id)
{
	if (!c || !sandbox_id)
		return;
	pthread_mutex_lock(&c->lock);
	struct workspace *ws = ws_find(c, sandbox_id);
	pthread_mutex_unlock(&c->lock);
	if (!ws)
		return;
	ws_flush_all(c, ws, 10000, false, NULL, 0);
	/* Open handles may still point into it, and the retry thread keeps
	 * trying what is pending: the object lives until wscache_free. */
	pthread_mutex_lock(&ws->lock);
	pthread_mutex_lock(&c->lock);
	ws->retired = true;
	htab_del(&c->by_id, &ws->by_id);
	pthread_mutex_unlock(&c->lock);
	/* What nobody uses goes now, not at unmount: listings nobody pins
	 * and clean copies nobody has open. */
	dir_release(ws);
	cache_drop_idle(ws);
	pthread_mutex_unlock(&ws->lock);
}
