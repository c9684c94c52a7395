/*
 * workspace.c — the wscache and workspace objects: creation, restore from
 * the journal, health and stats, invalidation after commands, the queued
 * modes applied before a command, sandboxes that are gone. The FUSE
 * operations are in workspace_ops.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/files.h"
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

char *ws_join(const char *a, const char *b)
{
	if (!a[0])
		return strdup(b);
	char *s = NULL;
	if (asprintf(&s, "%s/%s", a, b) < 0)
		return NULL;
	return s;
}

char *ws_shell_quote(const char *s)
{
	size_t n = 3;
	for (const char *p = s; *p; p++)
		n += *p == '\'' ? 4 : 1;
	char *q = malloc(n), *o = q;
	if (!q)
		return NULL;
	*o++ = '\'';
	for (; *s; s++) {
		if (*s == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = *s;
		}
	}
	*o++ = '\'';
	*o = '\0';
	return q;
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

/* --- hash table ---------------------------------------------------------------*/

static size_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return (size_t)h;
}

#define HTAB_MIN_BUCKETS 16

int htab_init(struct htab *t, size_t nb)
{
	size_t want = HTAB_MIN_BUCKETS;
	while (want < nb && want <= SIZE_MAX / 2 / sizeof(*t->b))
		want *= 2;
	t->b = calloc(want, sizeof(*t->b));
	t->nb = t->b ? want : 0;
	t->n = 0;
	return t->b ? 0 : -ENOMEM;
}

void htab_free(struct htab *t)
{
	free(t->b);
	t->b = NULL;
	t->nb = t->n = 0;
}

/* Doubles the bucket array; on failure keeps the old one. */
static void htab_grow(struct htab *t)
{
	if (t->nb > SIZE_MAX / 2 / sizeof(*t->b))
		return;
	size_t nb = t->nb * 2;
	struct hlink **b = calloc(nb, sizeof(*b));
	if (!b)
		return;
	for (size_t i = 0; i < t->nb; i++) {
		struct hlink *l = t->b[i];
		while (l) {
			struct hlink *next = l->next;
			size_t k = hash_str(l->key) & (nb - 1);
			l->next = b[k];
			b[k] = l;
			l = next;
		}
	}
	free(t->b);
	t->b = b;
	t->nb = nb;
}

void htab_add(struct htab *t, struct hlink *l)
{
	size_t i = hash_str(l->key) & (t->nb - 1);
	l->next = t->b[i];
	t->b[i] = l;
	if (++t->n > t->nb)
		htab_grow(t);
}

void htab_del(struct htab *t, struct hlink *l)
{
	size_t i = hash_str(l->key) & (t->nb - 1);
	for (struct hlink **p = &t->b[i]; *p; p = &(*p)->next)
		if (*p == l) {
			*p = l->next;
			t->n--;
			return;
		}
}

struct hlink *htab_find(const struct htab *t, const char *key)
{
	size_t i = hash_str(key) & (t->nb - 1);
	for (struct hlink *l = t->b[i]; l; l = l->next)
		if (strcmp(l->key, key) == 0)
			return l;
	return NULL;
}

/* --- local metadata -------------------------------------------------------------*/

struct wsmeta *meta_get(struct workspace *ws, const char *path, bool create)
{
	struct hlink *l = htab_find(&ws->metas, path);
	if (l)
		return ws_container_of(l, struct wsmeta, h);
	if (!create)
		return NULL;
	struct wsmeta *m = calloc(1, sizeof(*m));
	if (!m || !(m->path = strdup(path))) {
		free(m);
		return NULL;
	}
	m->h.key = m->path;
	htab_add(&ws->metas, &m->h);
	return m;
}

static void meta_free(struct workspace *ws, struct wsmeta *m)
{
	htab_del(&ws->metas, &m->h);
	free(m->path);
	free(m);
}

void meta_drop(struct workspace *ws, const char *path)
{
	struct wsmeta *m = meta_get(ws, path, false);
	if (m)
		meta_free(ws, m);
}

/* Moves the metadata of from, and of everything below it, to to. */
void meta_move(struct workspace *ws, const char *from, const char *to)
{
	size_t nfrom = strlen(from);
	struct wsmeta **moved = NULL;
	size_t n = 0, cap = 0;
	for (size_t i = 0; i < ws->metas.nb; i++)
		for (struct hlink *l = ws->metas.b[i]; l; l = l->next) {
			struct wsmeta *m = ws_container_of(l, struct wsmeta, h);
			if (strcmp(m->path, from) != 0 && !ws_is_under(m->path, from))
				continue;
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				struct wsmeta **p = realloc(moved, cap * sizeof(*p));
				if (!p)
					goto out;
				moved = p;
			}
			moved[n++] = m;
		}
	for (size_t i = 0; i < n; i++)
		htab_del(&ws->metas, &moved[i]->h);
	/* What was at the destination is replaced. */
	meta_drop(ws, to);
	for (size_t i = 0; i < n; i++) {
		struct wsmeta *m = moved[i];
		char *np = NULL;
		if (asprintf(&np, "%s%s", to, m->path + nfrom) < 0) {
			free(m->path);
			free(m);
			continue;
		}
		meta_drop(ws, np);
		free(m->path);
		m->path = np;
		m->h.key = np;
		/* A file put at a new name has the server's default mode. */
		if (m->has_mode)
			m->mode_queued = true;
		htab_add(&ws->metas, &m->h);
	}
out:
	free(moved);
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
	    common_mkdirs(c->cache_dir, 0700) < 0 ||
	    common_mkdirs(c->files_dir, 0700) < 0) {
		free(c->cache_dir);
		free(c->files_dir);
		free(c->rescue_dir);
		free(c->incomplete_dir);
		free(c);
		return NULL;
	}
	chmod(c->cache_dir, 0700);
	chmod(c->files_dir, 0700);
	pthread_mutex_init(&c->lock, NULL);
	common_cond_init(&c->cond);
	c->rand_state = (unsigned)time(NULL) ^ (unsigned)getpid();
	return c;
}

int wscache_start(struct wscache *c)
{
	if (c->running)
		return 0;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int rc = pthread_create(&c->thread, NULL, upload_thread, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return -rc;
	c->running = true;
	return 0;
}

static void workspace_free(struct workspace *ws)
{
	pthread_cond_destroy(&ws->inval_cv);
	while (ws->all) {
		struct wsfile *f = ws->all;
		ws->all = f->ws_next;
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
			struct wsmeta *m = ws_container_of(l, struct wsmeta, h);
			free(m->path);
			free(m);
			l = next;
		}
	}
	htab_free(&ws->metas);
	dir_free_all(ws);
	for (size_t i = 0; i < ws->nmade; i++)
		free(ws->made_dirs[i]);
	free(ws->made_dirs);
	free(ws->rescue_dir);
	free(ws->id);
	free(ws->url);
	free(ws);
}

/* Names f and why it is not uploaded in stuck (once). c->lock held. */
static void note_stuck(char *stuck, size_t len, const struct wsfile *f, int err)
{
	if (stuck && len && !stuck[0])
		snprintf(stuck, len, "%s (%s)", f->path, strerror(err ? err : EIO));
}

/* Uploads every dirty file of ws once (or of every workspace when ws is
 * NULL), starting none after budget_ms. Returns the number not uploaded;
 * stuck (may be NULL) gets the first of them and why. With due_only, a
 * failed upload whose retry is not due yet fails the flush at once, and
 * nothing is uploaded: a caller that loops (a command refused, written
 * again) keeps to the retries' backoff instead of hammering the sandbox
 * and journaling a new intent each time. */
static int flush_all(struct wscache *c, struct workspace *only, uint64_t budget_ms,
		     bool due_only, char *stuck, size_t stuck_len)
{
	int failed = 0;
	uint64_t deadline = common_now_ms() + budget_ms;
	if (stuck && stuck_len)
		stuck[0] = '\0';
	pthread_mutex_lock(&c->lock);
	if (!c->unsaved_files) { /* the common case: no walk of every file */
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	for (struct workspace *ws = due_only ? c->wss : NULL; ws; ws = ws->next) {
		if ((only && ws != only) || ws->gone)
			continue;
		uint64_t now = common_now_ms();
		for (struct wsfile *f = ws->all; f; f = f->ws_next)
			if (f->pending && !f->unlinked && f->path &&
			    f->next_try_ms > now) {
				failed++;
				note_stuck(stuck, stuck_len, f, f->last_err);
			}
	}
	if (failed) {
		pthread_mutex_unlock(&c->lock);
		return failed;
	}
	for (;;) {
		if (common_now_ms() > deadline) {
			for (struct workspace *ws = c->wss; ws; ws = ws->next)
				for (struct wsfile *f = ws->all; f; f = f->ws_next)
					if ((!only || ws == only) && !ws->gone &&
					    (f->dirty || f->pending) && !f->unlinked &&
					    f->path && !f->flush_parked) {
						failed++;
						note_stuck(stuck, stuck_len, f,
							   ETIMEDOUT);
					}
			break;
		}
		struct wsfile *pick = NULL;
		for (struct workspace *ws = c->wss; ws && !pick; ws = ws->next) {
			if ((only && ws != only) || ws->gone)
				continue;
			for (struct wsfile *f = ws->all; f; f = f->ws_next)
				if ((f->dirty || f->pending) && !f->unlinked && f->path &&
				    !f->flush_parked) {
					pick = f;
					break;
				}
		}
		if (!pick || file_ref(pick) < 0)
			break;
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_lock(&pick->mx);
		int rc = upload_locked(pick, UPLOAD_DURABLE_FIRST);
		pthread_mutex_unlock(&pick->mx);
		pthread_mutex_lock(&c->lock);
		if (rc < 0) {
			failed++;
			pick->flush_parked = true; /* not picked again in this pass */
			if (pick->path)
				note_stuck(stuck, stuck_len, pick, -rc);
		}
		file_unref(pick);
	}
	for (struct workspace *ws = c->wss; ws; ws = ws->next)
		for (struct wsfile *f = ws->all; f && (!only || ws == only);
		     f = f->ws_next)
			f->flush_parked = false;
	pthread_mutex_unlock(&c->lock);
	return failed;
}

void wscache_free(struct wscache *c)
{
	if (!c)
		return;
	cache_fetch_stop_all(c);
	if (c->running) {
		pthread_mutex_lock(&c->lock);
		c->stop = true;
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->thread, NULL);
		c->running = false;
	}
	int failed = flush_all(c, NULL, 10000, false, NULL, 0);
	if (failed)
		common_log("%d uploads still pending; they are retried at the next mount",
			   failed);
	while (c->wss) {
		struct workspace *ws = c->wss;
		c->wss = ws->next;
		workspace_free(ws);
	}
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c->cache_dir);
	free(c->files_dir);
	free(c->rescue_dir);
	free(c->incomplete_dir);
	free(c);
}

/* --- workspaces ---------------------------------------------------------------*/

static struct workspace *ws_find(struct wscache *c, const char *id)
{
	for (struct workspace *ws = c->wss; ws; ws = ws->next)
		if (!ws->retired && strcmp(ws->id, id) == 0)
			return ws;
	return NULL;
}

static struct workspace *ws_get_locked(struct wscache *c, const char *id, const char *url)
{
	struct workspace *ws = ws_find(c, id);
	if (ws) {
		if (url && (!ws->url || strcmp(ws->url, url) != 0)) {
			char *u = strdup(url);
			if (u) {
				free(ws->url);
				ws->url = u;
			}
		}
		return ws;
	}
	ws = calloc(1, sizeof(*ws));
	if (!ws)
		return NULL;
	ws->c = c;
	ws->id = strdup(id);
	ws->url = url ? strdup(url) : NULL;
	ws->epoch = 1;
	clock_gettime(CLOCK_REALTIME, &ws->born);
	if (!ws->id || (url && !ws->url) || htab_init(&ws->dirs, 0) < 0 ||
	    htab_init(&ws->metas, 0) < 0 || htab_init(&ws->files, 0) < 0) {
		htab_free(&ws->dirs);
		htab_free(&ws->metas);
		htab_free(&ws->files);
		free(ws->id);
		free(ws->url);
		free(ws);
		return NULL;
	}
	pthread_cond_init(&ws->inval_cv, NULL);
	ws->next = c->wss;
	c->wss = ws;
	return ws;
}

struct workspace *workspace_get(struct wscache *c, const char *sandbox_id,
				const char *url)
{
	if (!c || !sandbox_id)
		return NULL;
	pthread_mutex_lock(&c->lock);
	struct workspace *ws = ws_get_locked(c, sandbox_id, url);
	pthread_mutex_unlock(&c->lock);
	return ws;
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

static void workspace_invalidate_pass(struct workspace *ws);

void workspace_invalidate(struct workspace *ws)
{
	if (!ws)
		return;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&c->lock);
	ws->epoch++;
	for (size_t i = 0; i < ws->nmade; i++)
		free(ws->made_dirs[i]);
	ws->nmade = 0;
	uint64_t mine = ++ws->inval_asked;
	/* A pass costs time in the number of paths shown; commands that end
	 * while one runs are all covered by the next one (see
	 * tests/bench/RESULTS.md), which the running caller starts. */
	while (ws->inval_running && ws->inval_done < mine)
		pthread_cond_wait(&ws->inval_cv, &c->lock);
	if (ws->inval_done >= mine) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	ws->inval_running = true;
	while (ws->inval_done < ws->inval_asked) {
		uint64_t covers = ws->inval_asked;
		workspace_invalidate_pass(ws);
		pthread_mutex_lock(&c->lock);
		ws->inval_done = covers;
		pthread_cond_broadcast(&ws->inval_cv);
	}
	ws->inval_running = false;
	pthread_cond_broadcast(&ws->inval_cv);
	pthread_mutex_unlock(&c->lock);
}

/* Whether the kernel may still hold attributes given at *shown_ms: it
 * keeps them attr_timeout from when it got the answer, which is a little
 * after *shown_ms (hence the margin). Clears the mark: the pass that asks
 * drops them. c->lock held. */
static bool kernel_may_hold(struct wscache *c, uint64_t *shown_ms)
{
	const uint64_t margin_ms = 1000;
	uint64_t at = *shown_ms;
	if (!at)
		return false;
	*shown_ms = 0;
	return common_now_ms() - at <= (uint64_t)c->cfg.attr_timeout_ms + margin_ms;
}

/* Tells the kernel to drop what it holds of every path this mount showed
 * within attr_timeout (older answers have expired there already), and of
 * open files (their pages); called with c->lock held, returns with it
 * released. */
static void workspace_invalidate_pass(struct workspace *ws)
{
	struct wscache *c = ws->c;
	/* The kernel may hold pages and sizes of files a command changed:
	 * everything this mount showed (cached files, listed entries). */
	char **paths = NULL;
	size_t n = 0, cap = 0;
	bool full = !c->cfg.invalidate;
#define ADD_PATH(expr)                                                                   \
	do {                                                                             \
		if (full || n >= 50000)                                                  \
			break;                                                           \
		if (n == cap) {                                                          \
			cap = cap ? cap * 2 : 256;                                       \
			char **p_ = realloc(paths, cap * sizeof(*p_));                   \
			if (!p_) {                                                       \
				full = true;                                             \
				break;                                                   \
			}                                                                \
			paths = p_;                                                      \
		}                                                                        \
		if ((paths[n] = (expr)))                                                 \
			n++;                                                             \
	} while (0)
	for (struct wsfile *f = ws->all; f; f = f->ws_next)
		if (f->path && !f->dirty &&
		    (f->opens > 0 || kernel_may_hold(c, &f->shown_ms)))
			ADD_PATH(strdup(f->path));
	for (size_t i = 0; i < ws->dirs.nb && !full; i++)
		for (struct hlink *l = ws->dirs.b[i]; l && !full; l = l->next) {
			struct wsdir *d = ws_container_of(l, struct wsdir, h);
			if (!d->loaded || d->err || !kernel_may_hold(c, &d->shown_ms))
				continue;
			for (size_t k = 0; k < d->n && !full; k++)
				if (kernel_may_hold(c, &d->ents[k].shown_ms))
					ADD_PATH(ws_join(d->path, d->ents[k].name));
		}
#undef ADD_PATH
	pthread_mutex_unlock(&c->lock);
	for (size_t i = 0; i < n; i++) {
		ws_kernel_invalidate(ws, paths[i]);
		free(paths[i]);
	}
	free(paths);
}

/* The batch runs as "sh -c CMD": Linux refuses (E2BIG) any single exec
 * argument over MAX_ARG_STRLEN, 128 KiB, so a batch stays well under it,
 * counted as quoted. */
#define MODE_BATCH_BYTES (96 * 1024)

static size_t quoted_len(const char *s)
{
	size_t n = 3; /* space and two quotes */
	for (; *s; s++)
		n += *s == '\'' ? 4 : 1;
	return n;
}

void workspace_seat(struct workspace *ws, bool held)
{
	if (!ws)
		return;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&c->lock);
	ws->seats += held ? 1 : -1;
	if (ws->seats < 0)
		ws->seats = 0;
	pthread_cond_broadcast(&c->cond); /* the retry thread may go on */
	pthread_mutex_unlock(&c->lock);
}

int workspace_before_command(struct workspace *ws, char *why, size_t whylen)
{
	if (why && whylen)
		why[0] = '\0';
	if (!ws)
		return 0;
	struct wscache *c = ws->c;
	/* The command sees what was written here, even by descriptors still
	 * open or not yet released (an empty "touch" is uploaded at release,
	 * which the kernel sends after close returns). An upload that cannot
	 * be delivered now stops the command: it would run before the write,
	 * and the retry would then put old data over what it made. */
	char stuck[512];
	int failed = flush_all(c, ws, 60000, true, stuck, sizeof(stuck));
	if (failed > 0) {
		if (why && whylen)
			snprintf(why, whylen,
				 "not sent: the upload of workspace/%s is still "
				 "pending%s; the command would overtake it",
				 stuck[0] ? stuck : "a file",
				 failed > 1 ? " (and others)" : "");
		return -EIO;
	}
	for (int round = 0; round < 64; round++) {
		/* One command per round: "chmod MODE -- 'a' 'b'" groups. */
		pthread_mutex_lock(&c->lock);
		struct wsmeta **batch = NULL;
		size_t n = 0, cap = 0, bytes = 0;
		for (size_t i = 0; i < ws->metas.nb && bytes < MODE_BATCH_BYTES; i++)
			for (struct hlink *l = ws->metas.b[i];
			     l && bytes < MODE_BATCH_BYTES; l = l->next) {
				struct wsmeta *m = ws_container_of(l, struct wsmeta, h);
				if (!m->mode_queued)
					continue;
				/* Not on the server yet: applied after its upload. */
				struct wsfile *f = file_find(ws, m->path);
				if (f && !f->remote_exists)
					continue;
				if (n == cap) {
					cap = cap ? cap * 2 : 32;
					struct wsmeta **p =
					    realloc(batch, cap * sizeof(*p));
					if (!p)
						break;
					batch = p;
				}
				batch[n++] = m;
				bytes += quoted_len(m->path) + 1;
			}
		if (n == 0) {
			pthread_mutex_unlock(&c->lock);
			free(batch);
			break;
		}
		if (!c->cfg.exec) {
			pthread_mutex_unlock(&c->lock);
			free(batch);
			return -ENOTSUP;
		}
		char *cmd = NULL;
		size_t len = 0;
		FILE *out = open_memstream(&cmd, &len);
		char **paths = calloc(n, sizeof(*paths));
		int rc = out && paths ? 0 : -ENOMEM;
		if (rc == 0)
			fputs("r=0;", out);
		for (size_t i = 0; i < n && rc == 0; i++) {
			if (!batch[i])
				continue;
			mode_t mode = batch[i]->mode & 07777;
			fprintf(out, " chmod %04o --", (unsigned)mode);
			for (size_t k = i; k < n && rc == 0; k++) {
				if (!batch[k] || (batch[k]->mode & 07777) != mode)
					continue;
				char *q = ws_shell_quote(batch[k]->path);
				if (!q) {
					rc = -ENOMEM;
					break;
				}
				fprintf(out, " %s", q);
				free(q);
				batch[k]->mode_queued = false;
				paths[k] = strdup(batch[k]->path);
				batch[k] = NULL;
			}
			fputs(" || r=1;", out);
		}
		if (out) {
			fputs(" exit $r", out);
			if (ferror(out) && rc == 0)
				rc = -ENOMEM;
			fclose(out);
		}
		pthread_mutex_unlock(&c->lock);
		free(batch);

		int code = 0;
		if (rc == 0)
			rc = c->cfg.exec(c->cfg.exec_ctx, ws->id, cmd, &code);
		free(cmd);

		pthread_mutex_lock(&c->lock);
		for (size_t i = 0; i < n; i++) {
			if (!paths || !paths[i])
				continue;
			struct wsmeta *m = meta_get(ws, paths[i], false);
			/* EIO: sent, outcome unknown; like any command it is
			 * never sent again, and its modes are not known to be
			 * applied. Other errors: not sent, still queued. */
			if (m && rc < 0 && rc != -EIO)
				m->mode_queued = true;
			else if (m && (rc == -EIO || code != 0))
				m->has_mode = false;
			free(paths[i]);
		}
		pthread_mutex_unlock(&c->lock);
		free(paths);
		/* A mode not applied is reported by the file's mode, never by
		 * holding the user's command back. */
		if (rc < 0) {
			ws_log(ws, "queued modes not applied: %s", strerror(-rc));
			break;
		}
		if (code != 0)
			ws_log(ws, "applying queued modes failed (exit %d)", code);
	}
	return 0;
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
static int rescue_keep(const char *base, const char *id, const char *path,
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
	pthread_mutex_lock(&c->lock);
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
		for (struct wsfile *f = ws->all; f; f = f->ws_next)
			if (f->pending && !f->permanent)
				f->next_try_ms = common_now_ms();
		dir_stale_all(ws);
	}
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
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
	pthread_mutex_lock(&c->lock);
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
	pthread_mutex_unlock(&c->lock);
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
		pthread_mutex_lock(&c->lock);
		if (!ws->rescue_dir)
			ws->rescue_dir = dir;
		else
			free(dir);
		pthread_mutex_unlock(&c->lock);
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
	flush_all(c, ws, 10000, false, NULL, 0);
	/* Open handles may still point into it, and the retry thread keeps
	 * trying what is pending: the object lives until wscache_free. */
	pthread_mutex_lock(&c->lock);
	ws->retired = true;
	pthread_mutex_unlock(&c->lock);
}

/* --- restore, health, stats --------------------------------------------------*/

static int upload_cmp_desc(const void *a, const void *b)
{
	const struct journal_upload *x = *(const struct journal_upload *const *)a;
	const struct journal_upload *y = *(const struct journal_upload *const *)b;
	return x->upload_id < y->upload_id ? 1 : x->upload_id > y->upload_id ? -1 : 0;
}

/* The size and crc32 of the cache file at path; false when it cannot be
 * read whole. */
static bool file_sum(const char *path, uint64_t *size, uint32_t *crc)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct stat sb;
	unsigned char *buf = malloc(1 << 20);
	bool ok = buf && fstat(fd, &sb) == 0;
	uLong v = crc32(0L, Z_NULL, 0);
	uint64_t got = 0;
	ssize_t r = 0;
	while (ok && ((r = read(fd, buf, 1 << 20)) > 0 || (r < 0 && errno == EINTR)))
		if (r > 0) {
			v = crc32(v, buf, (uInt)r);
			got += (uint64_t)r;
		}
	ok = ok && r == 0 && got == (uint64_t)sb.st_size;
	free(buf);
	close(fd);
	*size = got;
	*crc = (uint32_t)v;
	return ok;
}

/* The kernel's id of the running boot, or false. */
static bool boot_id_now(char *out, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!f)
		return false;
	bool ok = fgets(out, (int)len, f) != NULL;
	fclose(f);
	out[ok ? strcspn(out, "\n") : 0] = '\0';
	return out[0] != '\0';
}

/* cache_dir/boot_id names the boot in which the last mount over this cache
 * ran; it is written once that mount's restore is done. The same boot as
 * now means no power cut since: the page cache outlived any crash of the
 * daemon, so each cache file holds exactly what was last written to it. */
static bool last_mount_in_this_boot(const struct wscache *c, const char *now)
{
	char *p = ws_join(c->cache_dir, "boot_id");
	FILE *f = p ? fopen(p, "re") : NULL;
	char was[64] = "";
	if (f) {
		if (!fgets(was, sizeof(was), f))
			was[0] = '\0';
		fclose(f);
	}
	free(p);
	was[strcspn(was, "\n")] = '\0';
	return now[0] && strcmp(was, now) == 0;
}

static void boot_id_record(const struct wscache *c, const char *now)
{
	char *p = ws_join(c->cache_dir, "boot_id");
	/* Not synced: a power cut can only leave another boot's id or none,
	 * and both mean "not this boot" at the next restore. */
	int fd = p ? open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;
	if (fd >= 0) {
		dprintf(fd, "%s\n", now);
		close(fd);
	}
	free(p);
}

/* Journals a new intent for u's cache file as it is now (size, crc), made
 * durable cache file first, and supersedes u. For a cache file written on
 * after u by a descriptor the daemon's crash closed: u's bytes are gone,
 * the newer ones are the user's latest. Returns the new id, or 0. */
static uint64_t restore_reintend(struct wscache *c, const char *sandbox,
				 const struct journal_upload *u, uint64_t size,
				 uint32_t crc)
{
	struct journal *j = c->cfg.journal;
	if (!j)
		return 0;
	int fd = open(u->cache_file, O_RDONLY | O_CLOEXEC);
	bool ok = fd >= 0 && fsync(fd) == 0;
	if (fd >= 0)
		close(fd);
	int dfd = ok ? open(c->files_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	ok = ok && dfd >= 0 && fsync(dfd) == 0;
	if (dfd >= 0)
		close(dfd);
	if (!ok)
		return 0;
	pthread_mutex_lock(&c->lock);
	c->n.syncs += 2;
	pthread_mutex_unlock(&c->lock);
	uint64_t id = journal_next_upload_id(j);
	struct journal_record r = {.kind = JOURNAL_UPLOAD_INTENT,
				   .sandbox = (char *)sandbox,
				   .upload_id = id,
				   .path = u->path,
				   .cache_file = u->cache_file,
				   .size = size,
				   .checksum = crc};
	if (journal_append(j, &r, true) < 0)
		return 0;
	upload_supersede(c, sandbox, u->upload_id, true);
	return id;
}

/* Abandons a restored intent for good (journaled durably): it is never
 * retried. */
static void restore_abandon(struct wscache *c, const char *sandbox, uint64_t id,
			    const char *why)
{
	if (!c->cfg.journal)
		return;
	struct journal_record r = {.kind = JOURNAL_UPLOAD_ABANDONED,
				   .sandbox = (char *)sandbox,
				   .upload_id = id,
				   .error = (char *)why};
	journal_append(c->cfg.journal, &r, true);
}

static bool path_seen(char **seen, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(seen[i], path) == 0)
			return true;
	return false;
}

int wscache_restore(struct wscache *c, const struct journal_state *st)
{
	if (!c || !st)
		return -EINVAL;
	int restored = 0;
	char boot[64] = "";
	bool known_boot = boot_id_now(boot, sizeof(boot));
	bool same_boot = known_boot && last_mount_in_this_boot(c, boot);
	for (size_t s = 0; s < st->count; s++) {
		const struct journal_sandbox *sb = &st->sandboxes[s];
		if (!sb->nuploads)
			continue;
		const struct journal_upload **ups = calloc(sb->nuploads, sizeof(*ups));
		/* Paths whose newest intent was handled: older ones lose. */
		char **seen = calloc(sb->nuploads, sizeof(*seen));
		size_t nseen = 0;
		if (!ups || !seen) {
			free(ups);
			free(seen);
			return -ENOMEM;
		}
		for (size_t i = 0; i < sb->nuploads; i++)
			ups[i] = &sb->uploads[i];
		qsort(ups, sb->nuploads, sizeof(*ups), upload_cmp_desc);
		for (size_t i = 0; i < sb->nuploads; i++) {
			const struct journal_upload *u = ups[i];
			if (u->abandoned || !u->path || !u->cache_file)
				continue;
			struct stat sb_st;
			bool missing = stat(u->cache_file, &sb_st) < 0;
			if (sb->state == JOURNAL_SB_GONE && !missing) {
				/* Every version is kept for the user. */
				char *dir = NULL;
				int krc = rescue_keep(c->rescue_dir, sb->id, u->path,
						      u->cache_file, &dir);
				free(dir);
				if (krc < 0) {
					common_log("workspace of %s: error: an unsaved "
						   "file could not be kept for rescue "
						   "(%s); it stays journaled",
						   sb->id, strerror(-krc));
					continue;
				}
				restore_abandon(
				    c, sb->id, u->upload_id,
				    "the sandbox is gone; data kept for rescue");
				continue;
			}
			if (path_seen(seen, nseen, u->path)) {
				/* A newer intent for the same path decides. */
				upload_supersede(c, sb->id, u->upload_id, true);
				pthread_mutex_lock(&c->lock);
				struct workspace *ws = ws_find(c, sb->id);
				struct wsfile *f = ws ? file_find(ws, u->path) : NULL;
				bool keep =
				    f && strcmp(f->cache_path, u->cache_file) == 0;
				pthread_mutex_unlock(&c->lock);
				if (!keep)
					unlink(u->cache_file);
				continue;
			}
			if ((seen[nseen] = strdup(u->path)))
				nseen++;
			if (missing) {
				/* A power cut during an upload its caller waited for
				 * (made durable only when it fails), or damage. */
				fprintf(
				    stderr,
				    "sandboxfs: workspace of %s: the cache file of an "
				    "unfinished upload is missing; it is not retried "
				    "(the server's copy is left as it is)\n",
				    sb->id);
				pthread_mutex_lock(&c->lock);
				c->lost_uploads++;
				pthread_mutex_unlock(&c->lock);
				restore_abandon(c, sb->id, u->upload_id,
						"cache file missing at restore");
				continue;
			}
			/* A cache file that is not the intent's bytes: written on
			 * after the intent (an upload of a file still open, before
			 * a command or by the retries, failed; its writer never got
			 * its close), or torn by a power cut. In the same boot it
			 * can only be the former, and its newest content is
			 * uploaded, as it would have been at that close. After a
			 * reboot it is kept aside and the server's copy left as
			 * it is. */
			uint64_t id = u->upload_id, size = 0;
			uint32_t crc = 0;
			bool whole = file_sum(u->cache_file, &size, &crc);
			bool matches = whole && size == u->size && crc == u->checksum;
			if (!matches && whole && same_boot &&
			    (id = restore_reintend(c, sb->id, u, size, crc)) != 0) {
				fprintf(
				    stderr,
				    "sandboxfs: workspace of %s: the local copy of an "
				    "interrupted upload was written on after its intent "
				    "by a descriptor still open when the daemon ended; "
				    "its newest content is uploaded\n",
				    sb->id);
				matches = true;
			}
			if (!matches) {
				char *dir = NULL;
				int krc = rescue_keep(c->incomplete_dir, sb->id, u->path,
						      u->cache_file, &dir);
				fprintf(
				    stderr,
				    "sandboxfs: workspace of %s: an interrupted upload "
				    "is not retried: its local copy was incomplete "
				    "(not the size and checksum journaled); %s%s; the "
				    "server's copy is left as it is\n",
				    sb->id, krc == 0 ? "kept in " : "could not keep it",
				    krc == 0 && dir ? dir : "");
				free(dir);
				pthread_mutex_lock(&c->lock);
				c->n.incomplete++;
				pthread_mutex_unlock(&c->lock);
				restore_abandon(
				    c, sb->id, u->upload_id,
				    "local copy incomplete at restore; not uploaded");
				continue;
			}
			pthread_mutex_lock(&c->lock);
			struct workspace *ws = ws_get_locked(c, sb->id, sb->url);
			struct wsfile *f =
			    ws ? file_new(ws, u->path, u->cache_file) : NULL;
			if (!f) {
				pthread_mutex_unlock(&c->lock);
				continue;
			}
			f->present = true;
			f->remote_exists = true;
			f->size = 0;
			c->bytes += (uint64_t)sb_st.st_size;
			f->size = (uint64_t)sb_st.st_size;
			cache_set_state(f, true, true);
			f->upload_id = id;
			f->wgen = 1;
			f->intent_gen = 1;
			f->intent_synced = true;
			f->next_try_ms = common_now_ms();
			f->mtime.tv_sec = sb_st.st_mtim.tv_sec;
			f->mtime.tv_nsec = sb_st.st_mtim.tv_nsec;
			pthread_cond_broadcast(&c->cond);
			pthread_mutex_unlock(&c->lock);
			restored++;
		}
		for (size_t i = 0; i < nseen; i++)
			free(seen[i]);
		free(seen);
		free(ups);
	}
	/* Every intent of an earlier boot has been checked: later restores
	 * may trust cache files written from now on. */
	if (known_boot)
		boot_id_record(c, boot);

	/* Cache files nothing refers to are leftovers of an earlier mount. */
	DIR *d = opendir(c->files_dir);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			char *p = ws_join(c->files_dir, de->d_name);
			if (!p)
				continue;
			bool used = false;
			pthread_mutex_lock(&c->lock);
			for (struct workspace *ws = c->wss; ws && !used; ws = ws->next)
				for (struct wsfile *f = ws->all; f && !used;
				     f = f->ws_next)
					used = strcmp(f->cache_path, p) == 0;
			pthread_mutex_unlock(&c->lock);
			if (!used)
				unlink(p);
			free(p);
		}
		closedir(d);
	}
	return restored;
}

int wscache_health(struct wscache *c, FILE *out)
{
	if (!c)
		return 0;
	int problems = 0;
	size_t pending = 0, stuck = 0;
	pthread_mutex_lock(&c->lock);
	for (struct workspace *ws = c->wss; ws; ws = ws->next)
		for (struct wsfile *f = ws->all; f; f = f->ws_next)
			if (f->pending && !f->unlinked) {
				pending++;
				stuck += f->permanent;
			}
	uint64_t lost = c->lost_uploads;
	DIR *d;
	if (pending) {
		fprintf(out, "%zu uploads pending\n", pending);
		problems++;
	}
	/* Which ones: a command in their sandbox waits for them. */
	size_t named = 0;
	for (struct workspace *ws = c->wss; ws && pending; ws = ws->next)
		for (struct wsfile *f = ws->all; f; f = f->ws_next) {
			if (!f->pending || f->unlinked || !f->path)
				continue;
			if (named++ == 10) {
				fprintf(out, "(and %zu more pending uploads)\n",
					pending - 10);
				goto named_all;
			}
			fprintf(out,
				"upload of %s/workspace/%s pending (%s); commands in %s "
				"are refused until it is delivered\n",
				ws->id, f->path,
				strerror(f->last_err ? f->last_err : EIO), ws->id);
		}
named_all:
	pthread_mutex_unlock(&c->lock);
	if (stuck) {
		fprintf(out,
			"%zu uploads refused by the server (retried at the next close)\n",
			stuck);
		problems++;
	}
	if (lost) {
		fprintf(out,
			"%" PRIu64 " unfinished uploads lost their cache file (not "
			"retried; the server's copy is left as it is)\n",
			lost);
		problems++;
	}
	d = opendir(c->incomplete_dir);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			fprintf(out,
				"interrupted uploads of sandbox %s were not retried: "
				"their local copy was incomplete (the server's copy is "
				"left as it is); kept in %s/%s\n",
				de->d_name, c->incomplete_dir, de->d_name);
			problems++;
		}
		closedir(d);
	}
	d = opendir(c->rescue_dir);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			fprintf(out, "data of gone sandbox %s is kept in %s/%s\n",
				de->d_name, c->rescue_dir, de->d_name);
			problems++;
		}
		closedir(d);
	}
	return problems;
}

void wscache_stats(struct wscache *c, FILE *out)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	struct wscache_counters n = c->n;
	uint64_t bytes = c->bytes, dirty = c->dirty_bytes, files = 0, pending = 0;
	for (struct workspace *ws = c->wss; ws; ws = ws->next)
		for (struct wsfile *f = ws->all; f; f = f->ws_next) {
			files++;
			pending += f->pending;
		}
	uint64_t max = c->cfg.max_bytes;
	pthread_mutex_unlock(&c->lock);
	/* Device flushes: of cache files and their directory, and of the
	 * journal (commands' intents included). */
	uint64_t syncs = n.syncs + (c->cfg.journal ? journal_syncs(c->cfg.journal) : 0);
	fprintf(out,
		"cache_hits %" PRIu64 "\n"
		"cache_misses %" PRIu64 "\n"
		"cache_files %" PRIu64 "\n"
		"cache_bytes %" PRIu64 "\n"
		"cache_dirty_bytes %" PRIu64 "\n"
		"cache_max_bytes %" PRIu64 "\n"
		"cache_evictions %" PRIu64 "\n"
		"cache_enospc %" PRIu64 "\n"
		"download_bytes %" PRIu64 "\n"
		"uploads %" PRIu64 "\n"
		"upload_failures %" PRIu64 "\n"
		"upload_bytes %" PRIu64 "\n"
		"uploads_pending %" PRIu64 "\n"
		"listings_fetched %" PRIu64 "\n"
		"listing_cache_hits %" PRIu64 "\n"
		"renames %" PRIu64 "\n"
		"dir_renames %" PRIu64 "\n"
		"syncs %" PRIu64 "\n"
		"checksum_passes %" PRIu64 "\n"
		"uploads_incomplete %" PRIu64 "\n",
		n.hits, n.misses, files, bytes, dirty, max, n.evictions, n.enospc,
		n.fetched_bytes, n.uploads, n.upload_failures, n.uploaded_bytes, pending,
		n.listings, n.listing_hits, n.renames, n.dir_renames, syncs,
		n.checksum_passes, n.incomplete);
	cache_stats(c, out);
}
