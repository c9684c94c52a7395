/*
 * lifecycle.c — sandboxes: the orchestrator's listing, create (the id is the
 * idempotency key), delete, attach, detach, recover (DESIGN.md §4, §5).
 * Every create and delete writes its intent durably before the request.
 */
#include "mount_i.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum fs_sb_state fs_state_of(enum backend_sandbox_state s)
{
	switch (s) {
	case BACKEND_SANDBOX_CREATING:
		return FS_SB_CREATING;
	case BACKEND_SANDBOX_READY:
		return FS_SB_READY;
	case BACKEND_SANDBOX_FAILED:
		return FS_SB_FAILED;
	case BACKEND_SANDBOX_DELETING:
		return FS_SB_DELETING;
	default:
		return FS_SB_UNKNOWN;
	}
}

static int fs_journal(struct fs_mount *m, const struct journal_record *r)
{
	int rc = journal_append(m->journal, r, true);
	if (rc < 0)
		fs_log("journal append (%s %s) failed: %s", journal_kind_name(r->kind),
		       r->sandbox ? r->sandbox : "", strerror(-rc));
	return rc;
}

/* The i-th sandbox, claimed for a lifecycle operation (lifecycle_busy)
 * when want says it needs one and nothing else holds it; else NULL. */
static struct fs_sandbox *fs_claim_at(struct fs_mount *m, size_t i,
				      bool (*want)(const struct fs_sandbox *))
{
	pthread_mutex_lock(&m->lock);
	struct fs_sandbox *sb = m->sbs[i];
	if (sb->lifecycle_busy || !want(sb))
		sb = NULL;
	else
		sb->lifecycle_busy = true;
	pthread_mutex_unlock(&m->lock);
	return sb;
}

/* Ends the create, delete or reconcile that set sb->lifecycle_busy. */
static void fs_unclaim(struct fs_mount *m, struct fs_sandbox *sb)
{
	pthread_mutex_lock(&m->lock);
	sb->lifecycle_busy = false;
	pthread_mutex_unlock(&m->lock);
}

/* Tells the workspaces of sandboxes that moved or vanished (flags set by
 * a listing). The sandbox objects live as long as the mount; the array may
 * move, so it is read under the lock. */
static void fs_workspaces_follow(struct fs_mount *m)
{
	pthread_mutex_lock(&m->lock);
	size_t n = m->nsbs;
	pthread_mutex_unlock(&m->lock);
	for (size_t i = 0; i < n; i++) {
		pthread_mutex_lock(&m->lock);
		struct fs_sandbox *sb = m->sbs[i];
		bool vanished = sb->ws_vanished, moved = sb->ws_moved;
		struct workspace *ws = vanished ? NULL : sb->ws;
		sb->ws_vanished = false;
		pthread_mutex_unlock(&m->lock);
		if (!vanished && !moved)
			continue;
		/* Restored pending uploads make a workspace before any use;
		 * a vanished sandbox's was unhooked by the listing. */
		if (!ws)
			ws = workspace_find(m->wscache, sb->id);
		if (vanished) {
			if (ws) {
				workspace_sandbox_gone(ws);
				workspace_forget(m->wscache, sb->id);
			}
			continue;
		}
		pthread_mutex_lock(&m->lock);
		if (ws && !sb->ws && sb->ws_moved)
			sb->ws = ws;
		pthread_mutex_unlock(&m->lock);
		if (fs_sandbox_follow(m, sb) < 0)
			fs_log("sandbox %s moved; its workspace waits until the new "
			       "address is journaled",
			       sb->id);
	}
}

int fs_orch_refresh(struct fs_mount *m, bool force)
{
	if (!m->have_orch)
		return 0;
	uint64_t now = common_wall_ms();
	pthread_mutex_lock(&m->lock);
	bool fresh =
	    m->list_try_ms && now - m->list_try_ms < (uint64_t)m->opt.listing_ttl_ms;
	int last = m->list_errno;
	pthread_mutex_unlock(&m->lock);
	if (fresh && !force)
		return last;

	pthread_mutex_lock(&m->list_lock);
	/* another thread may have refreshed while we waited */
	pthread_mutex_lock(&m->lock);
	fresh = m->list_try_ms && m->list_try_ms >= now;
	last = m->list_errno;
	pthread_mutex_unlock(&m->lock);
	if (fresh) {
		pthread_mutex_unlock(&m->list_lock);
		return last;
	}

	uint64_t start = common_wall_ms();
	struct backend_sandbox_list l = {0};
	struct backend_error err = {0};
	enum backend_status st = backend_orch_list(m->backend, &m->orch, &l, &err);
	atomic_fetch_add(&m->n.list_refreshes, 1);

	pthread_mutex_lock(&m->lock);
	m->list_try_ms = start;
	if (st != BACKEND_OK) {
		atomic_fetch_add(&m->n.list_errors, 1);
		m->list_errno = backend_errno(st, BACKEND_OP_SANDBOX);
		snprintf(m->list_error, sizeof(m->list_error), "%s: %s",
			 backend_status_name(st), err.message);
		last = m->list_errno; /* read under the lock it is written under */
		pthread_mutex_unlock(&m->lock);
		pthread_mutex_unlock(&m->list_lock);
		return last;
	}
	m->list_errno = 0;
	m->list_error[0] = '\0';
	m->list_ms = start;
	/* Sandboxes whose URL changed (ws_moved) or that vanished
	 * (ws_vanished): their workspaces are told below, without the lock
	 * (a journal append). */
	bool tell = false;
	for (size_t i = 0; i < l.count; i++) {
		struct backend_sandbox *s = &l.items[i];
		if (!s->id || !backend_sandbox_id_valid(s->id))
			continue;
		struct fs_sandbox *sb = fs_sandbox_find(m, s->id);
		if (sb && sb->attached && sb->present)
			continue; /* an attached one with the same id wins */
		if (!sb) {
			sb = fs_sandbox_add(m, s->id);
			if (!sb)
				continue; /* out of memory: shown at the next refresh */
			sb->owned = true;
		}
		if (sb->lifecycle_busy)
			continue;
		if (!sb->present) {
			/* deleted or detached by us earlier, live again */
			sb->present = true;
			sb->owned = true;
			sb->attached = false;
		}
		sb->listed_ms = start;
		sb->state = fs_state_of(s->state);
		bool had_url = sb->url != NULL;
		if (s->url && (!sb->url || strcmp(sb->url, s->url) != 0) &&
		    fs_set_str(&sb->url, s->url) == 0) {
			sb->journaled = false; /* else the next refresh retries */
			/* The workspace follows: file operations and retries
			 * go to the new URL, never the old one. */
			if (had_url)
				tell = sb->ws_moved = true;
		}
		if (!sb->pool)
			fs_set_str(&sb->pool, s->pool);
		if (!sb->image)
			fs_set_str(&sb->image, s->image);
		if (s->error)
			fs_set_str(&sb->last_error, s->error);
		if (!sb->created_ms)
			sb->created_ms = start;
	}
	/* Owned sandboxes missing from a listing newer than their creation
	 * vanished: they show "gone" and are never recreated. */
	for (size_t i = 0; i < m->nsbs; i++) {
		struct fs_sandbox *sb = m->sbs[i];
		if (!sb->present || sb->attached || sb->listed_ms == start ||
		    sb->lifecycle_busy)
			continue;
		if (sb->created_ms >= start)
			continue;
		if (sb->state == FS_SB_UNKNOWN && !sb->url)
			continue; /* a lost create: reconciled by id */
		if (!sb->in_journal_state) {
			sb->present = false; /* only ever seen in a listing */
			continue;
		}
		if (sb->state == FS_SB_DELETING) {
			/* our delete went through after all */
			continue;
		}
		if (sb->state != FS_SB_GONE) {
			sb->state = FS_SB_GONE;
			fs_set_str(&sb->last_error,
				   "the sandbox vanished from the orchestrator");
			/* Its URL is no longer its own: nothing goes there
			 * again, and its unsaved files go to rescue. */
			tell = sb->ws_vanished = true;
			sb->ws_moved = false;
			sb->ws = NULL; /* found again by id to be told */
			fs_set_str(&sb->url, NULL);
			sb->journaled = false;
		}
	}
	pthread_mutex_unlock(&m->lock);
	pthread_mutex_unlock(&m->list_lock);
	backend_sandbox_list_clear(&l);

	if (tell)
		fs_workspaces_follow(m);
	return 0;
}

/* Polls GET /v1/sandbox/ID until it leaves "creating" (bounded). */
static enum backend_status fs_wait_ready(struct fs_mount *m, const char *id,
					 struct backend_sandbox *s,
					 struct backend_error *err)
{
	long waited = 0, step = 100;
	enum backend_status st = BACKEND_OK;
	while (s->state == BACKEND_SANDBOX_CREATING && waited < 120000) {
		usleep((useconds_t)step * 1000);
		waited += step;
		if (step < 2000)
			step *= 2;
		backend_sandbox_clear(s);
		st = backend_orch_get(m->backend, &m->orch, id, s, err);
		if (st != BACKEND_OK)
			return st;
	}
	return st;
}

/* Applies a create's answer: journal, then model. Returns 0 or -errno. */
static int fs_create_settle(struct fs_mount *m, struct fs_sandbox *sb,
			    struct backend_sandbox *s, enum journal_kind kind)
{
	struct journal_record r = {.kind = kind};
	r.sandbox = sb->id;
	int res = 0;
	if (s->state == BACKEND_SANDBOX_READY && s->url) {
		r.url = s->url;
	} else {
		r.kind = JOURNAL_CREATE_FAILED;
		r.error = s->error ? s->error : "the sandbox did not become ready";
		res = -EIO;
	}
	int rc = fs_journal(m, &r);
	pthread_mutex_lock(&m->lock);
	if (res == 0 && fs_set_str(&sb->url, s->url) < 0) {
		/* journaled with its URL: the next mount shows it ready */
		sb->state = FS_SB_UNREACHABLE;
		(void)fs_set_str(&sb->last_error, "out of memory");
	} else if (res == 0) {
		sb->journaled = rc == 0;
		sb->state = FS_SB_READY;
	} else {
		sb->state = FS_SB_FAILED;
		fs_set_str(&sb->last_error, r.error);
	}
	fs_set_str(&sb->pool, s->pool);
	fs_set_str(&sb->image, s->image);
	sb->listed_ms = common_wall_ms();
	pthread_mutex_unlock(&m->lock);
	return res;
}

/* Reads GET /v1/sandbox/ID after a create whose answer was lost. */
static int fs_reconcile_one(struct fs_mount *m, struct fs_sandbox *sb)
{
	struct backend_sandbox s = {0};
	struct backend_error err = {0};
	enum backend_status st = BACKEND_NOT_SENT;
	for (int attempt = 0; attempt < 3; attempt++) {
		st = backend_orch_get(m->backend, &m->orch, sb->id, &s, &err);
		if (st != BACKEND_NOT_SENT && st != BACKEND_ANSWER_LOST &&
		    st != BACKEND_SERVER_ERROR)
			break;
		usleep((useconds_t)(200000 << attempt));
	}
	if (st == BACKEND_OK) {
		if (s.state == BACKEND_SANDBOX_CREATING)
			st = fs_wait_ready(m, sb->id, &s, &err);
	}
	int res;
	if (st == BACKEND_OK) {
		res = fs_create_settle(m, sb, &s, JOURNAL_CREATE_RECONCILED);
	} else if (st == BACKEND_NOT_FOUND) {
		/* the create never took effect: it does not exist */
		struct journal_record r = {.kind = JOURNAL_CREATE_RECONCILED};
		r.sandbox = sb->id;
		fs_journal(m, &r);
		pthread_mutex_lock(&m->lock);
		sb->state = FS_SB_GONE;
		sb->present = false;
		fs_set_str(&sb->last_error,
			   "create not confirmed: the orchestrator does not know it");
		pthread_mutex_unlock(&m->lock);
		res = -EIO;
	} else {
		pthread_mutex_lock(&m->lock);
		sb->state = FS_SB_UNKNOWN;
		char why[384];
		snprintf(why, sizeof(why), "create outcome unknown (%s): %s",
			 backend_status_name(st), err.message);
		fs_set_str(&sb->last_error, why);
		pthread_mutex_unlock(&m->lock);
		res = -EIO;
	}
	backend_sandbox_clear(&s);
	return res;
}

/* A create of ours whose outcome is not known yet (m->lock held). */
static bool fs_create_unsettled(const struct fs_sandbox *sb)
{
	return sb->present && sb->owned && !sb->url &&
	       (sb->state == FS_SB_UNKNOWN || sb->state == FS_SB_CREATING);
}

void fs_reconcile_creates(struct fs_mount *m)
{
	if (!m->have_orch)
		return;
	pthread_mutex_lock(&m->lock);
	size_t n = m->nsbs;
	pthread_mutex_unlock(&m->lock);
	for (size_t i = 0; i < n; i++) {
		struct fs_sandbox *sb = fs_claim_at(m, i, fs_create_unsettled);
		if (!sb)
			continue;
		fs_reconcile_one(m, sb);
		fs_unclaim(m, sb);
	}
}

int fs_sandbox_create(struct fs_mount *m, const char *id, const char *pool,
		      const char *image, int port, long idle_s)
{
	if (!backend_sandbox_id_valid(id))
		return -EINVAL;
	if (!m->have_orch)
		return -EPERM;
	if (image && port <= 0)
		return -EINVAL;
	if (!image && !pool)
		pool = m->opt.pool;

	fs_orch_refresh(m, false);
	pthread_mutex_lock(&m->lock);
	struct fs_sandbox *sb = fs_sandbox_find(m, id);
	if (sb && (sb->present || sb->lifecycle_busy)) {
		pthread_mutex_unlock(&m->lock);
		return -EEXIST;
	}
	sb = fs_sandbox_add(m, id);
	if (!sb) {
		pthread_mutex_unlock(&m->lock);
		return -ENOMEM;
	}
	/* a fresh object state for a reused id */
	sb->present = true;
	sb->owned = true;
	sb->attached = false;
	sb->lifecycle_busy = true;
	sb->state = FS_SB_CREATING;
	sb->created_ms = common_wall_ms();
	sb->listed_ms = 0;
	sb->journaled = false;
	fs_set_str(&sb->url, NULL);
	fs_set_str(&sb->pool, image ? NULL : pool);
	fs_set_str(&sb->image, image);
	fs_set_str(&sb->last_error, NULL);
	pthread_mutex_unlock(&m->lock);
	atomic_fetch_add(&m->n.creates, 1);

	struct journal_record r = {.kind = JOURNAL_CREATE_INTENT};
	r.sandbox = (char *)id;
	r.pool = image ? NULL : (char *)pool;
	r.image = (char *)image;
	r.port = port;
	r.idle_s = idle_s;
	int res = fs_journal(m, &r);
	if (res < 0) {
		pthread_mutex_lock(&m->lock);
		sb->present = false;
		sb->lifecycle_busy = false;
		pthread_mutex_unlock(&m->lock);
		atomic_fetch_add(&m->n.create_failures, 1);
		return -EIO;
	}
	pthread_mutex_lock(&m->lock);
	sb->in_journal_state = true;
	pthread_mutex_unlock(&m->lock);

	struct backend_create_request req = {
	    .id = id,
	    .pool = image ? NULL : pool,
	    .image = image,
	    .port = port,
	    .idle_timeout_s = idle_s,
	};
	struct backend_sandbox s = {0};
	struct backend_error err = {0};
	enum backend_status st =
	    backend_orch_create(m->backend, &m->orch, &req, &s, &err);
	if (st == BACKEND_OK && s.state == BACKEND_SANDBOX_CREATING)
		st = fs_wait_ready(m, id, &s, &err);

	if (st == BACKEND_OK) {
		res = fs_create_settle(m, sb, &s, JOURNAL_CREATED);
	} else if (st == BACKEND_ANSWER_LOST || st == BACKEND_BAD_ANSWER ||
		   st == BACKEND_SERVER_ERROR) {
		/* maybe created: reconcile by id, never create again */
		struct journal_record u = {.kind = JOURNAL_CREATE_UNKNOWN};
		u.sandbox = (char *)id;
		char why[384];
		snprintf(why, sizeof(why), "%s: %s", backend_status_name(st),
			 err.message);
		u.error = why;
		fs_journal(m, &u);
		pthread_mutex_lock(&m->lock);
		sb->state = FS_SB_UNKNOWN;
		fs_set_str(&sb->last_error, why);
		pthread_mutex_unlock(&m->lock);
		res = fs_reconcile_one(m, sb);
	} else {
		/* Refused or never sent: nothing of ours exists (409: the id
		 * is someone else's live sandbox). Recorded as reconciled to
		 * nothing, so neither replay nor recover ever touches it. */
		struct journal_record f = {.kind = JOURNAL_CREATE_RECONCILED};
		f.sandbox = (char *)id;
		char why[384];
		snprintf(why, sizeof(why), "create refused (%s): %s",
			 backend_status_name(st), err.message);
		fs_journal(m, &f);
		res = -backend_errno(st, BACKEND_OP_CREATE);
		pthread_mutex_lock(&m->lock);
		/* nothing was created: the directory goes away again */
		sb->present = false;
		sb->state = FS_SB_FAILED;
		fs_set_str(&sb->last_error, why);
		pthread_mutex_unlock(&m->lock);
	}
	backend_sandbox_clear(&s);
	fs_unclaim(m, sb);
	if (res < 0)
		atomic_fetch_add(&m->n.create_failures, 1);
	if (res == -EEXIST)
		fs_orch_refresh(m, true); /* show the live one */
	return res;
}

/* DELETE through the orchestrator, intent first. Returns 0 or -errno. */
static int fs_delete_owned(struct fs_mount *m, struct fs_sandbox *sb)
{
	struct journal_record r = {.kind = JOURNAL_DELETE_INTENT};
	r.sandbox = sb->id;
	if (fs_journal(m, &r) < 0)
		return -EIO;
	pthread_mutex_lock(&m->lock);
	sb->state = FS_SB_DELETING;
	sb->in_journal_state = true;
	pthread_mutex_unlock(&m->lock);
	atomic_fetch_add(&m->n.deletes, 1);

	struct backend_error err = {0};
	enum backend_status st = backend_orch_delete(m->backend, &m->orch, sb->id, &err);
	if (st == BACKEND_OK || st == BACKEND_NOT_FOUND) {
		struct journal_record d = {.kind = JOURNAL_DELETED};
		d.sandbox = sb->id;
		fs_journal(m, &d);
		pthread_mutex_lock(&m->lock);
		sb->state = FS_SB_GONE;
		sb->present = false;
		struct workspace *ws = sb->ws;
		sb->ws = NULL;
		fs_set_str(&sb->url, NULL);
		sb->journaled = false;
		pthread_mutex_unlock(&m->lock);
		if (ws && m->wscache) {
			workspace_sandbox_gone(ws);
			workspace_forget(m->wscache, sb->id);
		}
		return 0;
	}
	char why[384];
	snprintf(why, sizeof(why), "delete not confirmed (%s): %s",
		 backend_status_name(st), err.message);
	struct journal_record u = {.kind = JOURNAL_DELETE_UNCONFIRMED};
	u.sandbox = sb->id;
	u.error = why;
	fs_journal(m, &u);
	pthread_mutex_lock(&m->lock);
	sb->state = FS_SB_DELETING;
	fs_set_str(&sb->last_error, why);
	pthread_mutex_unlock(&m->lock);
	atomic_fetch_add(&m->n.delete_failures, 1);
	int e = backend_errno(st, BACKEND_OP_SANDBOX);
	return -(e ? e : EIO);
}

int fs_sandbox_remove(struct fs_mount *m, const char *id)
{
	pthread_mutex_lock(&m->lock);
	struct fs_sandbox *sb = fs_sandbox_find(m, id);
	if (!sb || !sb->present) {
		pthread_mutex_unlock(&m->lock);
		return -ENOENT;
	}
	if (sb->busy || sb->lifecycle_busy) {
		pthread_mutex_unlock(&m->lock);
		return -EBUSY;
	}
	bool attached = sb->attached;
	if (!attached && m->have_orch)
		sb->lifecycle_busy = true;
	pthread_mutex_unlock(&m->lock);

	if (attached)
		return fs_sandbox_detach(m, id); /* never deleted: not ours */
	if (!m->have_orch)
		return -EPERM;
	int rc = fs_delete_owned(m, sb);
	fs_unclaim(m, sb);
	return rc;
}

/* http(s) or http+unix (backend.h), of a sane length */
static bool fs_url_valid(const char *url)
{
	return strlen(url) < 2048 && backend_url_valid(url);
}

int fs_sandbox_attach(struct fs_mount *m, const char *id, const char *url)
{
	if (!backend_sandbox_id_valid(id) || !fs_url_valid(url))
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	struct fs_sandbox *sb = fs_sandbox_find(m, id);
	if (sb && sb->present) {
		bool same =
		    sb->attached && sb->url && strcmp(sb->url, url) == 0 && sb->journaled;
		pthread_mutex_unlock(&m->lock);
		return same ? 0 : -EEXIST;
	}
	if (sb && sb->lifecycle_busy) {
		pthread_mutex_unlock(&m->lock);
		return -EBUSY;
	}
	pthread_mutex_unlock(&m->lock);

	struct journal_record r = {.kind = JOURNAL_ATTACH};
	r.sandbox = (char *)id;
	r.url = (char *)url;
	if (fs_journal(m, &r) < 0)
		return -EIO;
	pthread_mutex_lock(&m->lock);
	sb = fs_sandbox_add(m, id);
	if (!sb || fs_set_str(&sb->url, url) < 0) {
		/* journaled: the next mount shows it attached */
		pthread_mutex_unlock(&m->lock);
		return -ENOMEM;
	}
	sb->present = true;
	sb->attached = true;
	sb->owned = false;
	sb->journaled = true;
	sb->in_journal_state = true;
	sb->state = FS_SB_READY;
	if (!sb->created_ms)
		sb->created_ms = common_wall_ms();
	(void)fs_set_str(&sb->last_error, NULL);
	pthread_mutex_unlock(&m->lock);
	atomic_fetch_add(&m->n.attaches, 1);
	return 0;
}

int fs_sandbox_detach(struct fs_mount *m, const char *id)
{
	pthread_mutex_lock(&m->lock);
	struct fs_sandbox *sb = fs_sandbox_find(m, id);
	if (!sb || !sb->present) {
		pthread_mutex_unlock(&m->lock);
		return -ENOENT;
	}
	if (!sb->attached) {
		pthread_mutex_unlock(&m->lock);
		return -EINVAL; /* owned: rmdir deletes it */
	}
	if (sb->busy) {
		pthread_mutex_unlock(&m->lock);
		return -EBUSY;
	}
	pthread_mutex_unlock(&m->lock);
	struct journal_record r = {.kind = JOURNAL_DETACH};
	r.sandbox = (char *)id;
	if (fs_journal(m, &r) < 0)
		return -EIO;
	pthread_mutex_lock(&m->lock);
	sb->present = false;
	sb->attached = false;
	struct workspace *ws = sb->ws;
	sb->ws = NULL;
	pthread_mutex_unlock(&m->lock);
	if (ws && m->wscache)
		workspace_forget(m->wscache, id);
	atomic_fetch_add(&m->n.detaches, 1);
	return 0;
}

/* An unconfirmed delete of ours, or a failed create whose record the
 * orchestrator may still keep; never one running a command (m->lock
 * held). */
static bool fs_disposal_unconfirmed(const struct fs_sandbox *sb)
{
	return sb->present && sb->owned && !sb->busy &&
	       (sb->state == FS_SB_DELETING || sb->state == FS_SB_FAILED);
}

int fs_recover(struct fs_mount *m, FILE *report)
{
	if (!m->have_orch)
		return -EPERM;
	fs_reconcile_creates(m);
	int failures = 0;
	pthread_mutex_lock(&m->lock);
	size_t n = m->nsbs;
	pthread_mutex_unlock(&m->lock);
	for (size_t i = 0; i < n; i++) {
		struct fs_sandbox *sb = fs_claim_at(m, i, fs_disposal_unconfirmed);
		if (!sb)
			continue;
		int rc = fs_delete_owned(m, sb);
		if (report)
			fprintf(report, "%s: %s\n", sb->id,
				rc == 0 ? "deleted" : strerror(-rc));
		if (rc < 0)
			failures++;
		fs_unclaim(m, sb);
	}
	return failures ? -EIO : 0;
}

int fs_attach_file(struct fs_mount *m, const char *path, char *msg, size_t msglen)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(msg, msglen, "sandboxes=%s: %s", path, strerror(errno));
		return -1;
	}
	char line[4096];
	int lineno = 0, rc = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		char *p = line;
		while (isspace((unsigned char)*p))
			p++;
		if (!*p || *p == '#')
			continue;
		char *save = NULL;
		char *id = strtok_r(p, " \t\r\n", &save);
		char *url = strtok_r(NULL, " \t\r\n", &save);
		char *extra = strtok_r(NULL, " \t\r\n", &save);
		if (!id || !url || extra) {
			snprintf(msg, msglen, "sandboxes=%s line %d: expected \"ID URL\"",
				 path, lineno);
			rc = -1;
			break;
		}
		int e = fs_sandbox_attach(m, id, url);
		if (e == -EEXIST) {
			/* attached earlier with another URL: the file wins */
			pthread_mutex_lock(&m->lock);
			struct fs_sandbox *sb = fs_sandbox_find(m, id);
			bool att = sb && sb->attached;
			pthread_mutex_unlock(&m->lock);
			if (att && fs_sandbox_detach(m, id) == 0)
				e = fs_sandbox_attach(m, id, url);
		}
		if (e < 0) {
			snprintf(msg, msglen, "sandboxes=%s line %d: sandbox %s: %s",
				 path, lineno, id,
				 e == -EINVAL ? "invalid id or URL" : strerror(-e));
			rc = -1;
			break;
		}
	}
	fclose(f);
	return rc;
}

int fs_sandbox_set_timeout(struct fs_mount *m, struct fs_sandbox *sb, long t)
{
	struct journal_record r = {.kind = JOURNAL_SET_TIMEOUT};
	r.sandbox = sb->id;
	r.timeout_s = t;
	if (fs_journal(m, &r) < 0)
		return -EIO;
	pthread_mutex_lock(&m->lock);
	sb->timeout_s = t;
	pthread_mutex_unlock(&m->lock);
	return 0;
}
