/*
 * lifecycle.c — sandboxes this mount creates and disposes of: create (the
 * id is the idempotency key; the request on a worker thread), reconcile a
 * lost create, delete, forget, recover (DESIGN.md §4, §5). The listing is
 * in orchlist.c, attach and detach in attach.c.
 * Every create and delete writes its intent durably before the request.
 */
#include "mount_i.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int fs_journal(struct fs_mount *m, const struct journal_record *r)
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

/* Reads GET /v1/sandbox/ID after a create whose answer was lost. When
 * exists (a 409 to our retry said so), a 404 is a read that lags: it is
 * asked again for a while. */
static int fs_reconcile_one(struct fs_mount *m, struct fs_sandbox *sb, bool exists)
{
	struct backend_sandbox s = {0};
	struct backend_error err = {0};
	enum backend_status st = BACKEND_NOT_SENT;
	int attempts = exists ? 8 : 3;
	for (int attempt = 0; attempt < attempts; attempt++) {
		st = backend_orch_get(m->backend, &m->orch, sb->id, &s, &err);
		bool again = st == BACKEND_NOT_SENT || st == BACKEND_ANSWER_LOST ||
			     st == BACKEND_SERVER_ERROR || (exists && st == BACKEND_NOT_FOUND);
		if (!again || attempt + 1 == attempts)
			break;
		/* 0.2 s doubling to 1.6 s: 9 s in all when it exists */
		usleep((useconds_t)(200000 << (attempt < 3 ? attempt : 3)));
	}
	if (st == BACKEND_OK) {
		if (s.state == BACKEND_SANDBOX_CREATING)
			st = fs_wait_ready(m, sb->id, &s, &err);
	}
	int res;
	if (st == BACKEND_OK) {
		res = fs_create_settle(m, sb, &s, JOURNAL_CREATE_RECONCILED);
	} else if (st == BACKEND_NOT_FOUND) {
		/* A 404 is no proof the create never happened (a read model
		 * may lag): it stays unknown and shown until rmdir forgets it
		 * or a listing shows it. */
		pthread_mutex_lock(&m->lock);
		sb->state = FS_SB_UNKNOWN;
		fs_set_str(&sb->last_error,
			   "create outcome unknown: its answer was lost and the "
			   "orchestrator does not show it (yet); rmdir forgets it, "
			   "a later create of this id adopts it when it exists");
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
		fs_reconcile_one(m, sb, false);
		fs_unclaim(m, sb);
	}
}

void fs_mount_error(struct fs_mount *m, const char *fmt, ...)
{
	char line[sizeof(m->last_error)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&m->lock);
	memcpy(m->last_error, line, sizeof(line));
	pthread_mutex_unlock(&m->lock);
	fs_log("%s", line);
}

/* Claims id for a create: a new sandbox object, or the old one of a
 * create of ours that rmdir forgot (*retry). NULL with *rc set when the
 * id is taken. */
static struct fs_sandbox *fs_create_claim(struct fs_mount *m, const char *id,
					  const struct fs_spec *spec, bool *retry, int *rc)
{
	pthread_mutex_lock(&m->lock);
	struct fs_sandbox *sb = fs_sandbox_find(m, id);
	if (sb && (sb->present || sb->lifecycle_busy)) {
		pthread_mutex_unlock(&m->lock);
		*rc = -EEXIST;
		return NULL;
	}
	*retry = sb && sb->lost_create;
	sb = fs_sandbox_add(m, id);
	if (!sb) {
		pthread_mutex_unlock(&m->lock);
		*rc = -ENOMEM;
		return NULL;
	}
	/* a fresh object state for a reused id */
	sb->present = true;
	sb->owned = true;
	sb->attached = false;
	sb->foreign = false;
	sb->lost_create = false;
	sb->lifecycle_busy = true;
	sb->state = FS_SB_CREATING;
	sb->created_ms = common_wall_ms();
	sb->listed_ms = 0;
	sb->journaled = false;
	sb->bound_s = spec->bound_s;
	sb->idle_s = spec->idle_s;
	sb->keepalive_ms = 0;
	fs_set_str(&sb->url, NULL);
	fs_set_str(&sb->pool, spec->pool);
	fs_set_str(&sb->image, spec->image);
	fs_set_str(&sb->spec, spec->json);
	fs_set_str(&sb->last_error, NULL);
	pthread_mutex_unlock(&m->lock);
	return sb;
}

/* The create's request, after its intent: POST, wait for ready, settle
 * (journal, then model). Returns 0 or -errno. */
static int fs_create_send(struct fs_mount *m, struct fs_sandbox *sb,
			  const struct fs_spec *spec, bool retry)
{
	const char *id = sb->id;
	int res;
	struct backend_create_request req = {
	    .id = id,
	    .pool = spec->pool,
	    .image = spec->image,
	    .port = spec->port,
	    .idle_timeout_s = spec->idle_s,
	    .send_timeout = true,
	    .timeout_s = spec->bound_s > 0 ? spec->bound_s : 0,
	    .spec_json = spec->json,
	};
	struct backend_sandbox s = {0};
	struct backend_error err = {0};
	enum backend_status st =
	    backend_orch_create(m->backend, &m->orch, &req, &s, &err);
	if (st == BACKEND_OK && s.state == BACKEND_SANDBOX_CREATING)
		st = fs_wait_ready(m, id, &s, &err);

	if (st == BACKEND_OK) {
		res = fs_create_settle(m, sb, &s, JOURNAL_CREATED);
		if (res == 0) { /* health's last error was about an earlier one */
			pthread_mutex_lock(&m->lock);
			m->last_error[0] = '\0';
			pthread_mutex_unlock(&m->lock);
		}
	} else if (st == BACKEND_ANSWER_LOST || st == BACKEND_BAD_ANSWER ||
		   st == BACKEND_SERVER_ERROR || (st == BACKEND_CONFLICT && retry)) {
		/* Maybe created (or, after a lost create, created then):
		 * reconcile by id, never create again. */
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
		res = fs_reconcile_one(m, sb, st == BACKEND_CONFLICT);
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
		fs_mount_error(m, "create %s: %s", id, why);
	}
	backend_sandbox_clear(&s);
	fs_unclaim(m, sb);
	if (res < 0)
		atomic_fetch_add(&m->n.create_failures, 1);
	if (res == -EEXIST)
		fs_orch_refresh(m, true); /* show the live one */
	return res;
}


/* A create whose request runs on a worker thread. */
struct fs_create_job {
	struct fs_mount *m;
	struct fs_sandbox *sb;
	struct fs_spec spec;
	bool retry;
	/* guarded by m->lock */
	int refs;
	bool done;
	int result;
};

static void fs_create_job_put(struct fs_create_job *job)
{
	struct fs_mount *m = job->m;
	pthread_mutex_lock(&m->lock);
	bool last = --job->refs == 0;
	pthread_mutex_unlock(&m->lock);
	if (!last)
		return;
	fs_spec_clear(&job->spec);
	free(job);
}

static void *fs_create_main(void *arg)
{
	struct fs_create_job *job = arg;
	struct fs_mount *m = job->m;
	int res = fs_create_send(m, job->sb, &job->spec, job->retry);
	pthread_mutex_lock(&m->lock);
	job->done = true;
	job->result = res;
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
	fs_create_job_put(job);
	fs_worker_exit(m);
	return NULL;
}

int fs_sandbox_create(struct fs_mount *m, const char *id, const char *overlay)
{
	if (!backend_sandbox_id_valid(id))
		return -EINVAL;
	if (!m->have_orch)
		return -EPERM;
	struct fs_spec spec;
	char msg[384];
	int res = fs_spec_build(m, overlay, &spec, msg, sizeof(msg));
	if (res < 0) {
		fs_mount_error(m, "create %s: %s", id, msg);
		return res;
	}

	fs_orch_refresh(m, false);
	bool retry = false;
	struct fs_sandbox *sb = fs_create_claim(m, id, &spec, &retry, &res);
	if (!sb) {
		fs_spec_clear(&spec);
		return res;
	}
	atomic_fetch_add(&m->n.creates, 1);

	struct journal_record r = {.kind = JOURNAL_CREATE_INTENT};
	r.sandbox = (char *)id;
	r.pool = spec.pool;
	r.image = spec.image;
	r.port = spec.port;
	r.idle_s = spec.idle_s;
	r.spec = spec.json;
	r.bound_s = spec.bound_s;
	res = fs_journal(m, &r);
	if (res < 0) {
		pthread_mutex_lock(&m->lock);
		sb->present = false;
		sb->lifecycle_busy = false;
		pthread_mutex_unlock(&m->lock);
		atomic_fetch_add(&m->n.create_failures, 1);
		fs_spec_clear(&spec);
		return -EIO;
	}
	pthread_mutex_lock(&m->lock);
	sb->in_journal_state = true;
	pthread_mutex_unlock(&m->lock);

	/* The request runs on a thread of its own: a create from an image
	 * may take seconds, readers see "creating" meanwhile, and the
	 * caller's wait ends when it is interrupted (the create goes on and
	 * its outcome is recorded). */
	struct fs_create_job *job = calloc(1, sizeof(*job));
	if (!job) {
		res = fs_create_send(m, sb, &spec, retry);
		fs_spec_clear(&spec);
		return res;
	}
	job->m = m;
	job->sb = sb;
	job->spec = spec;
	job->retry = retry;
	job->refs = 2;
	if (fs_worker_start(m, fs_create_main, job) != 0) {
		atomic_fetch_add(&m->workers, 1);
		fs_create_main(job);
	}
	pthread_mutex_lock(&m->lock);
	while (!job->done) {
		if (fs_wait_step(m, true) < 0) {
			pthread_mutex_unlock(&m->lock);
			fs_create_job_put(job);
			return -EINTR;
		}
	}
	res = job->result;
	pthread_mutex_unlock(&m->lock);
	fs_create_job_put(job);
	return res;
}

/* DELETE through the orchestrator, intent first. Returns 0 or -errno. */
static int fs_delete_owned(struct fs_mount *m, struct fs_sandbox *sb)
{
	struct journal_record r = {.kind = JOURNAL_DELETE_INTENT};
	r.sandbox = sb->id;
	r.foreign = sb->foreign; /* an explicit "delete" of someone else's */
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

/* rmdir of a create of ours whose outcome is unknown: forgotten here,
 * remembered (lost_create) so that a 409 at the next create adopts it. */
static int fs_forget_lost_create(struct fs_mount *m, struct fs_sandbox *sb)
{
	struct journal_record r = {.kind = JOURNAL_CREATE_RECONCILED};
	r.sandbox = sb->id;
	r.error = "forgotten by rmdir while its create's outcome was unknown";
	if (fs_journal(m, &r) < 0)
		return -EIO;
	pthread_mutex_lock(&m->lock);
	sb->present = false;
	sb->state = FS_SB_GONE;
	sb->lost_create = true;
	fs_set_str(&sb->last_error, r.error);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

/* What rmdir and "delete" may do with sb (lock held). */
enum fs_disposal { FS_DISPOSE_DELETE, FS_DISPOSE_DETACH, FS_DISPOSE_FORGET };

static int fs_dispose(struct fs_mount *m, const char *id, bool explicit_delete)
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
	enum fs_disposal how = FS_DISPOSE_DELETE;
	int refuse = 0;
	if (sb->attached)
		/* never deleted: not ours, and "delete" has no id the
		 * orchestrator is known to hold */
		how = FS_DISPOSE_DETACH;
	else if (sb->owned && !sb->url && sb->state == FS_SB_UNKNOWN && !explicit_delete)
		how = FS_DISPOSE_FORGET;
	else if (sb->foreign && !explicit_delete)
		refuse = -EPERM; /* someone else's: only "delete ID" */
	if (refuse || (how == FS_DISPOSE_DELETE && !m->have_orch)) {
		pthread_mutex_unlock(&m->lock);
		return refuse ? refuse : -EPERM;
	}
	if (how != FS_DISPOSE_DETACH)
		sb->lifecycle_busy = true;
	pthread_mutex_unlock(&m->lock);

	int rc;
	if (how == FS_DISPOSE_DETACH)
		return explicit_delete ? -EINVAL : fs_sandbox_detach(m, id);
	if (how == FS_DISPOSE_FORGET)
		rc = fs_forget_lost_create(m, sb);
	else
		rc = fs_delete_owned(m, sb);
	fs_unclaim(m, sb);
	return rc;
}

int fs_sandbox_remove(struct fs_mount *m, const char *id)
{
	return fs_dispose(m, id, false);
}

int fs_sandbox_delete(struct fs_mount *m, const char *id)
{
	if (!backend_sandbox_id_valid(id))
		return -EINVAL;
	if (!m->have_orch)
		return -EPERM;
	fs_orch_refresh(m, false);
	return fs_dispose(m, id, true);
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

int fs_sandbox_set_timeout(struct fs_mount *m, struct fs_sandbox *sb, long t)
{
	/* A timeout the orchestrator's proxy would cut is refused here,
	 * where the user sets it (DESIGN.md §4, request bounds). */
	pthread_mutex_lock(&m->lock);
	long bound = fs_sandbox_bound(sb);
	bool assumed = sb->bound_s == 0;
	int check = fs_timeout_check(sb, t < 0 ? 0 : t);
	if (check < 0) {
		char why[256];
		snprintf(why, sizeof(why),
			 "timeout %ld refused: not under the sandbox's request bound "
			 "(%ld s%s)",
			 t < 0 ? 0 : t, bound,
			 assumed ? ", assumed: not set by this mount" : "");
		(void)fs_set_str(&sb->last_error, why);
	}
	pthread_mutex_unlock(&m->lock);
	if (check < 0)
		return check;
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
