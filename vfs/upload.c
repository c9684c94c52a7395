/*
 * upload.c — write-back of dirty cache files (DESIGN.md §5).
 *
 * Each PUT has an UPLOAD_INTENT (path, cache file, size, crc32) in the
 * journal before it is sent, and UPLOAD_DONE after a success. A failed
 * upload stays pending: the cache file is pinned and a background thread
 * retries it with exponential backoff and jitter, capped; pending intents
 * survive a crash and are re-queued at mount by wscache_restore, which
 * uploads a cache file only if it still has the intent's size and crc32.
 *
 * When the upload is made durable depends on who waits for it:
 *  - An upload done synchronously inside close, fsync or truncate(2),
 *    whose PUT succeeds before the call returns: the application is told
 *    its data is saved only once the server has it, so nothing local
 *    needs to survive a power cut. The intent is appended before the PUT
 *    without fdatasync (a crash of the daemon alone keeps it: the page
 *    cache holds it), the cache file and its directory are not fsync'ed,
 *    and UPLOAD_DONE follows without sync. No device flush at all.
 *  - If that PUT fails (any error: the call returns EIO or another errno
 *    and the data stays pending for the retries), then before the call
 *    returns the cache file and its directory are fsync'ed and the
 *    journal is synced, so the pending intent and the file it names
 *    survive a power cut (DESIGN.md §5: a pending upload is retried from
 *    a cache file made durable before its intent).
 *  - Any other upload (at release, after close returned; the retries;
 *    the flushes before a command, at detach and at unmount; rename) may
 *    carry data the application was already told is saved: the cache file
 *    and its directory are fsync'ed and the intent appended durably
 *    before the PUT, as before.
 * A power cut during a PUT of the first kind can leave an intent whose
 * cache file is torn or missing: restore checks size and crc32 and never
 * uploads such a file (it is kept aside and reported in health).
 *
 * The crc32 comes from the running sum of in-order writes (cache.c) when
 * it covers the whole file, else from one pass over the file (crc_of).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/crc.h"
#include "workspace_i.h"

#define RETRY_BASE_MS 200
#define RETRY_CAP_MS  30000

/* crc32 of the first size bytes of fd, read from the file. */
static int crc_of(int fd, uint64_t size, uint32_t *out)
{
	size_t bufsz = 1 << 20;
	unsigned char *buf = malloc(bufsz);
	if (!buf)
		return -ENOMEM;
	uint32_t crc = 0;
	uint64_t off = 0;
	while (off < size) {
		size_t want = size - off < bufsz ? (size_t)(size - off) : bufsz;
		ssize_t n = pread(fd, buf, want, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(buf);
			return n < 0 ? -errno : -EIO;
		}
		crc = common_crc32(crc, buf, (size_t)n);
		off += (uint64_t)n;
	}
	free(buf);
	*out = crc;
	return 0;
}

void upload_supersede(struct wscache *c, const char *sandbox, uint64_t id, bool durable)
{
	if (!c->cfg.journal || !id)
		return;
	struct journal_record r = {
	    .kind = JOURNAL_UPLOAD_DONE, .sandbox = (char *)sandbox, .upload_id = id};
	if (journal_append(c->cfg.journal, &r, durable) < 0)
		common_log("workspace %s: cannot journal a superseded upload", sandbox);
}

void upload_schedule(struct wsfile *f, int err)
{
	struct wscache *c = f->ws->c;
	cache_set_state(f, f->dirty, true);
	f->attempts++;
	f->last_err = err;
	int shift = f->attempts < 1 ? 0 : f->attempts - 1 < 10 ? f->attempts - 1 : 10;
	uint64_t delay = (uint64_t)RETRY_BASE_MS << shift;
	if (delay > RETRY_CAP_MS)
		delay = RETRY_CAP_MS;
	/* Jitter: 75%..125% of the delay, so retries of many files spread. */
	pthread_mutex_lock(&c->lock);
	delay = delay * 3 / 4 + (uint64_t)rand_r(&c->rand_state) % (delay / 2 + 1);
	f->next_try_ms = common_now_ms() + delay;
	due_update(f);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static bool status_permanent(enum backend_status st)
{
	return st == BACKEND_INVALID || st == BACKEND_TOO_LARGE ||
	       st == BACKEND_BAD_REQUEST || st == BACKEND_DENIED;
}

/* fsyncs f's cache file and, once, the directory entry of its name. */
static int cache_file_sync(struct wsfile *f, int fd)
{
	struct workspace *ws = f->ws;
	struct wscache *c = ws->c;
	int syncs = 1, rc = 0;
	if (fsync(fd) < 0) {
		rc = -errno;
		ws_log(ws, "cannot make a cache file durable: %s", strerror(-rc));
		rc = -EIO;
	}
	if (rc == 0 && !f->dir_synced) {
		/* The cache file's name must survive a crash too. */
		int dfd = open(c->files_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			syncs++;
			if (fsync(dfd) == 0)
				f->dir_synced = true;
			close(dfd);
		}
	}
	WS_COUNT(c, syncs, syncs);
	return rc;
}

/* The crc32 of f's first size bytes: the running sum when it covers them
 * (f->mx held, so no write is changing it), else a pass over the file. */
static int content_crc(struct wsfile *f, int fd, uint64_t size, uint32_t *crc)
{
	if (f->crc_ok && f->crc_len == size) {
		*crc = f->crc;
		return 0;
	}
	WS_COUNT(f->ws->c, checksum_passes, 1);
	return crc_of(fd, size, crc);
}

/* Journals an UPLOAD_INTENT for f's content (generation gen), superseding
 * old_id; with durable, the cache file is made durable first and the
 * records are synced. *idp gets the intent's id. f->mx held. */
static int intent_write(struct wsfile *f, const char *sandbox, const char *path,
			uint64_t size, uint64_t gen, uint64_t old_id, int fd,
			bool durable, uint64_t *idp)
{
	struct workspace *ws = f->ws;
	struct wscache *c = ws->c;
	struct journal *j = c->cfg.journal;
	uint64_t id;
	int rc;
	uint32_t crc = 0;
	if (durable && (rc = cache_file_sync(f, fd)) < 0)
		return rc;
	rc = content_crc(f, fd, size, &crc);
	if (rc < 0) {
		ws_log(ws, "cannot read a cache file: %s", strerror(-rc));
		return -EIO;
	}
	if (j) {
		id = journal_next_upload_id(j);
		struct journal_record r = {.kind = JOURNAL_UPLOAD_INTENT,
					   .sandbox = (char *)sandbox,
					   .upload_id = id,
					   .path = (char *)path,
					   .cache_file = f->cache_path,
					   .size = size,
					   .checksum = crc};
		rc = journal_append(j, &r, durable);
		if (rc < 0) {
			ws_log(ws, "cannot journal an upload intent: %s", strerror(-rc));
			return -EIO;
		}
	} else {
		pthread_mutex_lock(&c->lock);
		id = ++c->name_seq;
		pthread_mutex_unlock(&c->lock);
	}
	/* Not durable: if the supersede is lost, the old intent's cache file
	 * (this one, rewritten) no longer matches it and restore skips it. */
	if (old_id)
		upload_supersede(c, sandbox, old_id, durable);
	pthread_mutex_lock(&ws->lock);
	f->upload_id = id;
	f->intent_gen = gen;
	f->intent_synced = durable;
	pthread_mutex_unlock(&ws->lock);
	*idp = id;
	return 0;
}

/* Makes the intent already journaled for f's content durable: its cache
 * file, then the journal (which holds the intent). f->mx held. */
static int intent_sync(struct wsfile *f, int fd)
{
	struct wscache *c = f->ws->c;
	int rc = cache_file_sync(f, fd);
	if (rc == 0 && c->cfg.journal && (rc = journal_sync(c->cfg.journal)) < 0) {
		ws_log(f->ws, "cannot make an upload intent durable: %s", strerror(-rc));
		rc = -EIO;
	}
	if (rc == 0) {
		pthread_mutex_lock(&f->ws->lock);
		f->intent_synced = true;
		pthread_mutex_unlock(&f->ws->lock);
	}
	return rc;
}

int upload_intent_locked(struct wsfile *f)
{
	struct workspace *ws = f->ws;
	/* Its intent is folded into f's first, so the one written here is
	 * the newest of the path. */
	earlyput_reap(f);
	pthread_mutex_lock(&ws->lock);
	file_moves_wait(f); /* the intent names the path */
	if (!f->dirty || f->unlinked || !f->path || ws->gone) {
		pthread_mutex_unlock(&ws->lock);
		return 0;
	}
	int fd = f->fd;
	if (f->upload_id && f->intent_gen == f->wgen) {
		bool synced = f->intent_synced;
		pthread_mutex_unlock(&ws->lock);
		return synced ? 0 : intent_sync(f, fd);
	}
	char *path = strdup(f->path);
	char *sandbox = strdup(ws->id);
	uint64_t size = f->size, gen = f->wgen, old_id = f->upload_id, id;
	pthread_mutex_unlock(&ws->lock);
	int rc = path && sandbox
		     ? intent_write(f, sandbox, path, size, gen, old_id, fd, true, &id)
		     : -ENOMEM;
	free(path);
	free(sandbox);
	return rc;
}

/* The PUT of f is over (sent or not): a directory rename may wait. */
static void put_done(struct wsfile *f)
{
	struct workspace *ws = f->ws;
	pthread_mutex_lock(&ws->lock);
	if (f->put_path) {
		f->put_path = NULL;
		pthread_cond_broadcast(&ws->cond);
	}
	pthread_mutex_unlock(&ws->lock);
}

int upload_locked(struct wsfile *f, enum upload_caller who)
{
	struct workspace *ws = f->ws;
	struct wscache *c = ws->c;
	struct journal *j = c->cfg.journal;
	bool durable_first = who == UPLOAD_DURABLE_FIRST;
	/* Only a close may end an early PUT as its own; any other upload
	 * abandons it first, so that no two PUTs of f are on the wire. */
	bool early = false;
	if (f->early && who != UPLOAD_CALLER_CLOSES)
		earlyput_reap(f);

	pthread_mutex_lock(&ws->lock);
	file_moves_wait(f); /* a directory rename moves it: then the new path */
	if (f->early) {
		bool can = f->dirty && !f->unlinked && f->path && !ws->gone && ws->url;
		uint64_t now = f->size;
		pthread_mutex_unlock(&ws->lock);
		/* The size is stable: writes and truncates take f->mx. */
		if (can)
			early = earlyput_ready(f, now);
		else
			earlyput_reap(f);
		pthread_mutex_lock(&ws->lock);
	}
	if ((!f->dirty && !f->pending) || f->unlinked || !f->path) {
		pthread_mutex_unlock(&ws->lock);
		return 0;
	}
	if (ws->gone) {
		pthread_mutex_unlock(&ws->lock);
		earlyput_reap(f);
		return -EIO;
	}
	char *path = strdup(f->path);
	char *url = ws->url ? strdup(ws->url) : NULL;
	bool no_url = !ws->url;
	char *sandbox = strdup(ws->id);
	uint64_t size = f->size;
	uint64_t gen = f->wgen;
	bool need_intent = !(f->upload_id && f->intent_gen == gen);
	bool need_sync = !need_intent && durable_first && !f->intent_synced;
	uint64_t old_id = need_intent ? f->upload_id : 0;
	uint64_t id = f->upload_id;
	int fd = f->fd;
	f->put_path = path;
	pthread_mutex_unlock(&ws->lock);

	int rc = 0;
	enum backend_status st = BACKEND_OK; /* the PUT's, once sent */
	if (!path || (!url && !no_url) || !sandbox) {
		rc = -ENOMEM;
		goto fail;
	}
	if (need_intent)
		rc = intent_write(f, sandbox, path, size, gen, old_id, fd, durable_first,
				  &id);
	else if (need_sync)
		rc = intent_sync(f, fd);
	if (rc < 0)
		goto fail;
	if (no_url) {
		rc = -ENOTCONN;
		goto fail;
	}

	struct backend_error err = {0};
	st = BACKEND_LOCAL;
	if (early && strcmp(path, earlyput_path(f)) == 0) {
		/* The early PUT sends the rest; it is this upload if the server
		 * answers 2xx after every byte. Else one PUT of the whole file
		 * replaces what it left. */
		st = earlyput_finish(f, size, &err);
		if (st != BACKEND_OK)
			ws_log(ws,
			       "early upload not completed (%s: %s); uploading the "
			       "whole file",
			       backend_status_name(st), err.message);
	} else if (early) {
		earlyput_reap(f);
	}
	if (st != BACKEND_OK)
		st = backend_file_put(c->cfg.backend, url, path, fd, size, &err);
	put_done(f);
	if (st == BACKEND_OK) {
		if (j) {
			struct journal_record r = {.kind = JOURNAL_UPLOAD_DONE,
						   .sandbox = sandbox,
						   .upload_id = id};
			if (journal_append(j, &r, false) < 0)
				ws_log(ws, "cannot journal an upload outcome");
		}
		pthread_mutex_lock(&ws->lock);
		WS_COUNT(c, uploads, 1);
		WS_COUNT(c, uploaded_bytes, size);
		f->upload_id = 0;
		f->attempts = 0;
		f->permanent = false;
		f->last_err = 0;
		cache_set_state(f, f->wgen != gen, false); /* and the due heap */
		f->remote_exists = true;
		f->epoch = ws->epoch;
		if (f->path && strcmp(f->path, path) == 0) {
			struct wsmeta *m = meta_get(ws, path, false);
			dir_upsert(ws, path, size, false,
				   m && m->has_times ? NULL : &f->mtime);
			/* The time of its last write stays its mtime after its
			 * listing is evicted or its copy leaves the cache (the
			 * listing has no times); a later write, or a command
			 * that changes it, gives it a new one. Times set by
			 * utimens since the write are kept. */
			if (f->wgen == gen && !(m && m->has_times) &&
			    (m = meta_get(ws, path, true))) {
				m->has_times = true;
				m->mtime = m->atime = f->mtime;
			}
			/* A PUT may have replaced the file: apply its mode again. */
			if (m && m->has_mode && m->mode != WS_FILE_MODE)
				m->mode_queued = true;
		}
		pthread_mutex_unlock(&ws->lock);
		goto out;
	}
	/* DESIGN.md §3: a failed upload is EIO at close/fsync, whatever the
	 * cause (unreachable included), unless it can never succeed. */
	rc = status_permanent(st) ? -ws_backend_errno(st) : -EIO;
	ws_log(ws, "upload failed (%s), kept pending: %s", backend_status_name(st),
	       err.message);
fail:
	earlyput_reap(f); /* when it failed before its PUT */
	put_done(f); /* before a wait for a rename, which waits for it */
	/* The caller is about to hear of the failure, and the data stays
	 * pending: make it survive a power cut before that (see the top). */
	if (!durable_first)
		upload_intent_locked(f);
	pthread_mutex_lock(&ws->lock);
	if (!no_url)
		WS_COUNT(c, upload_failures, 1);
	if (st != BACKEND_OK)
		f->permanent = status_permanent(st);
	upload_schedule(f, -rc);
	pthread_mutex_unlock(&ws->lock);
out:
	free(path);
	free(url);
	free(sandbox);
	return rc;
}

/* The workspace of the pending file due first, or NULL; *wait_ms says
 * how long to wait (c->lock held). */
static struct workspace *next_due_ws(struct wscache *c, uint64_t *wait_ms)
{
	uint64_t now = common_now_ms();
	struct wsfile *f = due_first(c);
	*wait_ms = 1000;
	if (!f)
		return NULL;
	if (f->next_try_ms > now) {
		if (f->next_try_ms - now < *wait_ms)
			*wait_ms = f->next_try_ms - now;
		return NULL;
	}
	return f->ws;
}

/* Picks the file due first if it is of ws, referenced; ws->lock held.
 * NULL: none is due there now (another's may be). */
static struct wsfile *pick_due(struct wscache *c, struct workspace *ws)
{
	uint64_t now = common_now_ms();
	pthread_mutex_lock(&c->lock);
	struct wsfile *f = due_first(c);
	if (f && (f->ws != ws || f->next_try_ms > now))
		f = NULL;
	if (f && (ws->gone || ws->seats)) {
		/* While a command holds the seat, an upload would land in the
		 * middle of it: the command uploads what is unsaved before it
		 * runs, and the retry comes after. A gone sandbox's files
		 * wait for rescue, rarely looked at again. */
		f->next_try_ms = now + (ws->gone ? RETRY_CAP_MS : RETRY_BASE_MS);
		due_update(f);
		f = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	if (f && file_ref(f) < 0) {
		ws_log(ws, "cannot open a pending cache file: %s", strerror(errno));
		f->permanent = true;
		pthread_mutex_lock(&c->lock);
		due_update(f);
		pthread_mutex_unlock(&c->lock);
		f = NULL;
	}
	return f;
}

/* The retry thread. The due heap is the cache's (c->lock), the file the
 * workspace's: it learns the workspace of the first due under c->lock,
 * releases it, takes that ws->lock and c->lock in order and looks again
 * (workspaces live until wscache_free, files may not). */
void *upload_thread(void *arg)
{
	struct wscache *c = arg;
	pthread_mutex_lock(&c->lock);
	while (!c->stop) {
		uint64_t wait_ms;
		struct workspace *ws = next_due_ws(c, &wait_ms);
		if (!ws) {
			struct timespec ts;
			common_deadline_in(&ts, wait_ms);
			pthread_cond_timedwait(&c->cond, &c->lock, &ts);
			continue;
		}
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_lock(&ws->lock);
		struct wsfile *f = pick_due(c, ws);
		pthread_mutex_unlock(&ws->lock);
		if (!f) {
			pthread_mutex_lock(&c->lock);
			continue;
		}
		if (pthread_mutex_trylock(&f->mx) == 0) {
			/* A command that took the seat since the pick flushes
			 * its sandbox first, under f->mx: it waits for this
			 * upload when it is already running, else this one
			 * leaves the file to it. */
			pthread_mutex_lock(&ws->lock);
			bool seated = ws->seats > 0;
			pthread_mutex_unlock(&ws->lock);
			if (!seated)
				upload_locked(f, UPLOAD_DURABLE_FIRST);
			pthread_mutex_unlock(&f->mx);
			pthread_mutex_lock(&ws->lock);
		} else {
			/* Busy with a user operation, which uploads it anyway. */
			pthread_mutex_lock(&ws->lock);
			pthread_mutex_lock(&c->lock);
			f->next_try_ms = common_now_ms() + RETRY_BASE_MS;
			due_update(f);
			pthread_mutex_unlock(&c->lock);
		}
		file_unref(f);
		cache_trim(c, ws); /* delivered and closed: it may go now */
		pthread_mutex_unlock(&ws->lock);
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}
