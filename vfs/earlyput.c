/*
 * earlyput.c — the early PUT of a file written in order from offset 0.
 *
 * While a new or truncated file is written sequentially, its PUT can
 * already be on the wire: once it holds WS_EARLY_MIN bytes, a thread of
 * its own sends a chunked PUT (backend_file_put_stream) whose body is read
 * from the cache file with pread as the writes land; its read callback
 * waits, with a bound, for more bytes or for the close. The close then
 * only waits for the tail: it sets the final size, and its PUT is that one
 * when the server answers 2xx after every byte.
 *
 * Anything else abandons it, and the close makes its one whole-file PUT as
 * before, which replaces whatever the abandoned one left: a write not at
 * the end (a seek back, a hole), a truncate, fsync, any other upload of
 * the file (a flush before a command, a rename, a retry), an unlink, a
 * directory rename above it, the unmount, a writer silent for
 * EARLY_IDLE_MS, or a failed transfer. So a close never reports success
 * before the server answered the PUT that carried every byte.
 *
 * The journal (DESIGN.md §5): before any byte is sent the thread appends,
 * durably, an UPLOAD_INTENT of size JOURNAL_SIZE_STREAMED. The close
 * journals the usual intent (size, crc32) over it before its PUT may end,
 * and UPLOAD_DONE only after the 2xx to the PUT that carried the whole
 * file. An abandoned early PUT's intent stays the file's pending one until
 * a whole upload supersedes it. After a crash no cache file matches a
 * streamed intent, so restore never takes it as done: in the same boot it
 * uploads the cache file whole (its newest content), after a reboot it
 * keeps it aside (wscache_restore).
 *
 * Locks: e->mx is a leaf (nothing is taken while holding it). f->early is
 * set and cleared with f->mx and ws->lock held, so either one reads it;
 * e->running is ws->lock's, and its end is broadcast on ws->cond;
 * c->early_running is c->lock's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "workspace_i.h"
#include "common/thread.h"

/* A writer silent this long loses its early PUT (the close PUTs whole). */
#define EARLY_IDLE_MS 30000
#define EARLY_OPEN    UINT64_MAX /* final: the close has not come */
/* Early PUTs of a sandbox that failed in a row, not abandoned here: no
 * more are tried there (see earlyput_reap). */
#define EARLY_FAILURES_MAX 2

struct wsearly {
	struct wscache *c;
	struct workspace *ws;
	pthread_t tid;
	bool running; /* ws->lock: the thread has not ended */
	pthread_mutex_t mx;
	pthread_cond_t cond; /* with mx: bytes, close, stop, journaled, end */
	uint64_t avail;	     /* bytes from offset 0 that may be sent */
	uint64_t sent;	     /* handed to the transfer */
	uint64_t final;	     /* the whole size, once the close came */
	bool stop;	     /* abandoned */
	bool journaled;	     /* its intent is durable (or could not be) */
	bool ended;
	bool carried; /* it was the close's PUT and succeeded */
	uint64_t intent_id;
	enum backend_status st;
	bool refused;
	struct backend_error err;
	int fd; /* a duplicate of the cache file's descriptor */
	char *url, *path, *sandbox, *cache_file;
};

static void early_error(struct backend_error *err, const char *msg)
{
	if (!err)
		return;
	memset(err, 0, sizeof(*err));
	err->status = BACKEND_LOCAL;
	snprintf(err->message, sizeof(err->message), "%s", msg);
}

static bool early_alive(void *ctx)
{
	struct wsearly *e = ctx;
	pthread_mutex_lock(&e->mx);
	bool stop = e->stop;
	pthread_mutex_unlock(&e->mx);
	return !stop && !atomic_load(&e->c->fetch_stop);
}

/* The body: what the writer has written, as it lands; 0 once the close
 * set the size and all of it went. */
static long early_read(void *ctx, char *buf, size_t len)
{
	struct wsearly *e = ctx;
	uint64_t idle_from = common_now_ms();
	pthread_mutex_lock(&e->mx);
	for (;;) {
		if (e->stop || atomic_load(&e->c->fetch_stop)) {
			pthread_mutex_unlock(&e->mx);
			return -1;
		}
		if (e->sent < e->avail)
			break;
		if (e->final != EARLY_OPEN && e->sent >= e->final) {
			pthread_mutex_unlock(&e->mx);
			return 0;
		}
		if (common_now_ms() - idle_from > EARLY_IDLE_MS) {
			pthread_mutex_unlock(&e->mx);
			return -1;
		}
		struct timespec ts;
		common_deadline_in(&ts, 1000);
		pthread_cond_timedwait(&e->cond, &e->mx, &ts);
	}
	uint64_t off = e->sent, n = e->avail - off;
	pthread_mutex_unlock(&e->mx);
	if (n > len)
		n = len;
	ssize_t got;
	do
		got = pread(e->fd, buf, (size_t)n, (off_t)off);
	while (got < 0 && errno == EINTR);
	if (got <= 0)
		return -1; /* cut under us: it was abandoned anyway */
	pthread_mutex_lock(&e->mx);
	e->sent += (uint64_t)got;
	pthread_mutex_unlock(&e->mx);
	atomic_fetch_add_explicit(&e->c->n.early_put_bytes, (uint64_t)got,
				  memory_order_relaxed);
	return (long)got;
}

static void *early_thread(void *arg)
{
	struct wsearly *e = arg;
	struct wscache *c = e->c;
	struct journal *j = c->cfg.journal;
	enum backend_status st = BACKEND_LOCAL;
	struct backend_error err = {0};
	bool refused = false;
	uint64_t id = 0;
	if (j) {
		/* DESIGN.md §5: the intent is durable before any byte goes. */
		id = journal_next_upload_id(j);
		struct journal_record r = {.kind = JOURNAL_UPLOAD_INTENT,
					   .sandbox = e->sandbox,
					   .upload_id = id,
					   .path = e->path,
					   .cache_file = e->cache_file,
					   .size = JOURNAL_SIZE_STREAMED};
		if (journal_append(j, &r, true) < 0) {
			id = 0;
			snprintf(err.message, sizeof(err.message),
				 "cannot journal its intent");
		}
	}
	pthread_mutex_lock(&e->mx);
	e->intent_id = id;
	e->journaled = true;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->mx);
	if ((id || !j) && early_alive(e)) {
		struct backend_put_source src = {
		    .read = early_read, .alive = early_alive, .ctx = e};
		st = backend_file_put_stream(c->cfg.backend, e->url, e->path, &src,
					     &refused, &err);
	}
	pthread_mutex_lock(&e->mx);
	e->st = st;
	e->refused = refused;
	e->err = err;
	e->ended = true;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->mx);
	struct workspace *ws = e->ws;
	pthread_mutex_lock(&ws->lock);
	e->running = false;
	pthread_mutex_lock(&c->lock);
	c->early_running--;
	pthread_mutex_unlock(&c->lock);
	pthread_cond_broadcast(&ws->cond); /* a directory rename may wait */
	pthread_mutex_unlock(&ws->lock);
	return NULL;
}

/* Takes one of the WS_EARLY_MAX places for an early PUT thread. */
static bool early_slot_take(struct wscache *c)
{
	pthread_mutex_lock(&c->lock);
	bool ok = c->early_running < WS_EARLY_MAX;
	if (ok)
		c->early_running++;
	pthread_mutex_unlock(&c->lock);
	return ok;
}

static void early_slot_give(struct wscache *c)
{
	pthread_mutex_lock(&c->lock);
	c->early_running--;
	pthread_mutex_unlock(&c->lock);
}

static void early_free(struct wsearly *e)
{
	if (e->fd >= 0)
		close(e->fd);
	free(e->url);
	free(e->path);
	free(e->sandbox);
	free(e->cache_file);
	pthread_mutex_destroy(&e->mx);
	pthread_cond_destroy(&e->cond);
	free(e);
}

/* Starts f's early PUT with size bytes there (f->mx held). */
static void early_start(struct wsfile *f, uint64_t size)
{
	struct workspace *ws = f->ws;
	struct wscache *c = ws->c;
	struct wsearly *e = NULL;
	pthread_mutex_lock(&ws->lock);
	bool ok = !f->early_tried && c->cfg.backend && ws->url && !ws->gone &&
		  !ws->no_chunked && !ws->moves && f->path && !f->unlinked &&
		  !f->pending && f->fd >= 0 && !atomic_load(&c->fetch_stop) &&
		  early_slot_take(c);
	bool slot = ok;
	if (ok) {
		/* Whatever happens now, not again until the file is closed. */
		atomic_store_explicit(&f->early_tried, true, memory_order_relaxed);
		e = calloc(1, sizeof(*e));
		ok = e != NULL;
	}
	if (ok) {
		e->fd = -1;
		e->c = c;
		e->ws = ws;
		e->avail = size;
		e->final = EARLY_OPEN;
		pthread_mutex_init(&e->mx, NULL);
		common_cond_init(&e->cond);
		e->url = strdup(ws->url);
		e->path = strdup(f->path);
		e->sandbox = strdup(ws->id);
		e->cache_file = strdup(f->cache_path);
		e->fd = fcntl(f->fd, F_DUPFD_CLOEXEC, 0);
		ok = e->url && e->path && e->sandbox && e->cache_file && e->fd >= 0;
		if (ok)
			e->running = true;
	}
	pthread_mutex_unlock(&ws->lock);
	if (!ok) {
		if (slot)
			early_slot_give(c);
		if (e)
			early_free(e);
		return;
	}
	int rc = common_thread_start(&e->tid, early_thread, e);
	pthread_mutex_lock(&ws->lock);
	if (rc != 0) {
		early_slot_give(c);
		pthread_mutex_unlock(&ws->lock);
		early_free(e);
		return;
	}
	WS_COUNT(c, early_puts, 1);
	f->early = e;
	pthread_mutex_unlock(&ws->lock);
}

void earlyput_wrote(struct wsfile *f, uint64_t size)
{
	/* Every byte so far was written in order from 0 (the running crc
	 * covers the whole file only then). */
	bool in_order = f->crc_ok && f->crc_len == size;
	struct wsearly *e = f->early;
	if (e) {
		pthread_mutex_lock(&e->mx);
		if (!in_order)
			e->stop = true;
		else if (!e->stop)
			e->avail = size;
		pthread_cond_broadcast(&e->cond);
		pthread_mutex_unlock(&e->mx);
		return;
	}
	/* A racy look first (the flag is ws->lock's): after the first start,
	 * writes do not take the lock again for it. */
	if (in_order && size >= WS_EARLY_MIN &&
	    !atomic_load_explicit(&f->early_tried, memory_order_relaxed))
		early_start(f, size);
}

void earlyput_abandon(struct wsfile *f)
{
	struct wsearly *e = f->early;
	if (!e)
		return;
	pthread_mutex_lock(&e->mx);
	e->stop = true;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->mx);
}

/* Its intent becomes f's pending one (the newest for the path), for the
 * next upload to supersede; the older one is superseded now. */
static void early_fold(struct wsfile *f, struct wsearly *e)
{
	struct workspace *ws = f->ws;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&e->mx);
	uint64_t id = e->intent_id;
	e->intent_id = 0;
	pthread_mutex_unlock(&e->mx);
	if (!id)
		return;
	pthread_mutex_lock(&f->ws->lock);
	uint64_t old = f->upload_id;
	f->upload_id = id;
	f->intent_gen = UINT64_MAX; /* covers no content: never current */
	f->intent_synced = true;
	pthread_mutex_unlock(&ws->lock);
	if (old)
		upload_supersede(c, f->ws->id, old, false);
}

void earlyput_reap(struct wsfile *f)
{
	struct wsearly *e = f->early;
	if (!e)
		return;
	struct workspace *ws = f->ws;
	struct wscache *c = ws->c;
	earlyput_abandon(f);
	pthread_join(e->tid, NULL); /* it stops within about a second */
	early_fold(f, e);
	pthread_mutex_lock(&ws->lock);
	f->early = NULL;
	if (!e->carried)
		WS_COUNT(c, early_puts_abandoned, 1);
	/* A server that takes no chunked body mostly answers at once and
	 * closes the connection while the body is still being sent: the
	 * answer is then lost to the reset, and the failure looks like a
	 * dropped connection. Two such failures in a row say the same. */
	if (e->carried)
		ws->early_failures = 0;
	else if (e->ended && (e->st == BACKEND_ANSWER_LOST ||
			      e->st == BACKEND_BAD_ANSWER || e->st == BACKEND_INVALID))
		ws->early_failures++;
	bool refused = e->refused || ws->early_failures >= EARLY_FAILURES_MAX;
	bool tell = refused && !ws->no_chunked;
	if (refused)
		ws->no_chunked = true;
	pthread_mutex_unlock(&ws->lock);
	if (tell)
		ws_log(ws,
		       "the server takes no chunked upload (%s); files go there "
		       "whole at close",
		       e->err.message);
	early_free(e);
}

bool earlyput_ready(struct wsfile *f, uint64_t size)
{
	struct wsearly *e = f->early;
	if (!e)
		return false;
	bool in_order = f->crc_ok && f->crc_len == size;
	pthread_mutex_lock(&e->mx);
	/* The intent is journaled first thing: a close that comes before it
	 * is done waits for it (one local append). */
	for (int i = 0; i < 10 && !e->journaled && !e->ended && !e->stop; i++) {
		struct timespec ts;
		common_deadline_in(&ts, 1000);
		pthread_cond_timedwait(&e->cond, &e->mx, &ts);
	}
	bool ok = in_order && e->journaled && !e->ended && !e->stop && e->avail == size;
	pthread_mutex_unlock(&e->mx);
	if (!ok) {
		earlyput_reap(f);
		return false;
	}
	early_fold(f, e);
	return true;
}

enum backend_status earlyput_finish(struct wsfile *f, uint64_t size,
				    struct backend_error *err)
{
	struct wsearly *e = f->early;
	struct wscache *c = f->ws->c;
	if (!e) {
		early_error(err, "no early upload");
		return BACKEND_LOCAL;
	}
	pthread_mutex_lock(&e->mx);
	uint64_t before = e->sent;
	if (!e->stop && !e->ended) {
		e->final = size;
		e->avail = size;
		pthread_cond_broadcast(&e->cond);
	}
	/* Bounded by the transfer's own rules: the stall limit, and the
	 * read callback never waits once the size is set. */
	while (!e->ended) {
		struct timespec ts;
		common_deadline_in(&ts, 1000);
		pthread_cond_timedwait(&e->cond, &e->mx, &ts);
	}
	enum backend_status st = e->st;
	bool whole = st == BACKEND_OK && e->sent == size && e->final == size;
	e->carried = whole;
	if (err)
		*err = e->err;
	pthread_mutex_unlock(&e->mx);
	WS_COUNT(c, early_put_bytes_before_close, before);
	if (whole)
		WS_COUNT(c, early_puts_done, 1);
	earlyput_reap(f);
	if (whole)
		return BACKEND_OK;
	if (st == BACKEND_OK) {
		st = BACKEND_BAD_ANSWER;
		early_error(err, "the early upload did not carry every byte");
		if (err)
			err->status = st;
	}
	return st;
}

const char *earlyput_path(const struct wsfile *f)
{
	return f->early ? f->early->path : "";
}

bool earlyput_stop_under(struct workspace *ws, const char *dir)
{
	bool any = false;
	for (struct wsfile *f = ws->all; f; f = f->ws_next) {
		struct wsearly *e = f->early;
		if (!e || !e->running || !f->path || !ws_is_under(f->path, dir))
			continue;
		pthread_mutex_lock(&e->mx);
		e->stop = true;
		pthread_cond_broadcast(&e->cond);
		pthread_mutex_unlock(&e->mx);
		any = true;
	}
	return any;
}

void earlyput_reap_all(struct wscache *c)
{
	for (;;) {
		struct wsfile *pick = NULL;
		for (struct workspace *ws = ws_first(c); ws && !pick; ws = ws->next) {
			pthread_mutex_lock(&ws->lock);
			for (struct wsfile *f = ws->all; f && !pick; f = f->ws_next)
				if (f->early)
					pick = f;
			pthread_mutex_unlock(&ws->lock);
		}
		if (!pick)
			return;
		pthread_mutex_lock(&pick->mx);
		earlyput_reap(pick);
		pthread_mutex_unlock(&pick->mx);
	}
}
