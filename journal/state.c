/*
 * state.c — the lifecycle state as a pure function of the records.
 *
 * Records that do not fit (an outcome without its intent, a record for a
 * sandbox never seen) are kept as facts where that makes sense: the
 * sandbox is added, attached (not owned) until a record says otherwise.
 * Allocation failures drop the detail that could not be kept; they never
 * crash.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "journal_i.h"

#define DEFAULT_MAX_RUNS 100

void journal_state_init(struct journal_state *st, size_t max_runs)
{
	memset(st, 0, sizeof(*st));
	st->max_runs = max_runs ? max_runs : DEFAULT_MAX_RUNS;
	st->next_upload_id = 1;
}

static void output_free(struct journal_output *o)
{
	free(o->data);
	free(o->file);
	memset(o, 0, sizeof(*o));
}

static void run_free(struct journal_run *run)
{
	free(run->command);
	output_free(&run->out);
	output_free(&run->err);
	free(run->error);
	memset(run, 0, sizeof(*run));
}

static void upload_free(struct journal_upload *u)
{
	free(u->path);
	free(u->cache_file);
	free(u->error);
	memset(u, 0, sizeof(*u));
}

static void job_free(struct journal_job *jb)
{
	free(jb->command);
	free(jb->dir);
	free(jb->error);
	memset(jb, 0, sizeof(*jb));
}

static void sandbox_free(struct journal_sandbox *sb)
{
	free(sb->id);
	free(sb->url);
	free(sb->spec);
	free(sb->env);
	free(sb->cwd);
	free(sb->pool);
	free(sb->image);
	for (size_t i = 0; i < sb->nruns; i++)
		run_free(&sb->runs[i]);
	free(sb->runs);
	for (size_t i = 0; i < sb->nuploads; i++)
		upload_free(&sb->uploads[i]);
	free(sb->uploads);
	journal_links_free(sb);
	for (size_t i = 0; i < sb->njobs; i++)
		job_free(&sb->jobs[i]);
	free(sb->jobs);
	free(sb->last_error);
	memset(sb, 0, sizeof(*sb));
}

void journal_state_clear(struct journal_state *st)
{
	for (size_t i = 0; i < st->count; i++)
		sandbox_free(&st->sandboxes[i]);
	free(st->sandboxes);
	size_t max_runs = st->max_runs;
	journal_state_init(st, max_runs);
}

struct journal_sandbox *journal_state_find(struct journal_state *st, const char *id)
{
	if (!id)
		return NULL;
	for (size_t i = 0; i < st->count; i++)
		if (strcmp(st->sandboxes[i].id, id) == 0)
			return &st->sandboxes[i];
	return NULL;
}

/* Replaces *dst with a copy of src (NULL clears it); keeps *dst on ENOMEM. */
static void set_str(char **dst, const char *src)
{
	char *s = NULL;
	if (src && !(s = strdup(src)))
		return;
	free(*dst);
	*dst = s;
}

static void set_output(struct journal_output *dst, const struct journal_output *src)
{
	struct journal_output o = *src;
	o.data = NULL;
	o.file = NULL;
	if (src->data) {
		if (!(o.data = malloc(src->len + 1)))
			return;
		memcpy(o.data, src->data, src->len);
		o.data[src->len] = '\0';
	}
	if (src->file && !(o.file = strdup(src->file))) {
		free(o.data);
		return;
	}
	output_free(dst);
	*dst = o;
}

static struct journal_sandbox *sandbox_get(struct journal_state *st, const char *id)
{
	struct journal_sandbox *sb = journal_state_find(st, id);
	if (sb || !id)
		return sb;
	char *copy = strdup(id);
	if (!copy)
		return NULL;
	sb = realloc(st->sandboxes, (st->count + 1) * sizeof(*sb));
	if (!sb) {
		free(copy);
		return NULL;
	}
	st->sandboxes = sb;
	sb = &st->sandboxes[st->count++];
	memset(sb, 0, sizeof(*sb));
	sb->id = copy;
	sb->state = JOURNAL_SB_READY;
	return sb;
}

static struct journal_run *run_find(struct journal_sandbox *sb, uint64_t seq)
{
	for (size_t i = 0; i < sb->nruns; i++)
		if (sb->runs[i].seq == seq)
			return &sb->runs[i];
	return NULL;
}

/* The run the history drops to make room: the oldest internal one (never
 * shown to the user), else the oldest. */
static size_t run_victim(const struct journal_sandbox *sb)
{
	for (size_t i = 0; i < sb->nruns; i++)
		if (sb->runs[i].internal)
			return i;
	return 0;
}

/* Inserts a run in sequence order and keeps at most max_runs, dropping
 * internal runs first, then the oldest. Returns NULL when the new run is
 * itself the one dropped. */
static struct journal_run *run_insert(struct journal_state *st,
				      struct journal_sandbox *sb, uint64_t seq,
				      bool internal)
{
	size_t pos = sb->nruns;
	while (pos > 0 && sb->runs[pos - 1].seq > seq)
		pos--;
	if (sb->nruns >= st->max_runs) {
		size_t victim = run_victim(sb);
		/* The new run is the one dropped when it is older than every
		 * one kept and no internal run makes room for it. */
		if (pos == 0 && (internal || !sb->runs[victim].internal))
			return NULL;
		run_free(&sb->runs[victim]);
		memmove(&sb->runs[victim], &sb->runs[victim + 1],
			(sb->nruns - victim - 1) * sizeof(sb->runs[0]));
		sb->nruns--;
		if (victim < pos)
			pos--;
	} else {
		struct journal_run *runs =
		    realloc(sb->runs, (sb->nruns + 1) * sizeof(sb->runs[0]));
		if (!runs)
			return NULL;
		sb->runs = runs;
	}
	memmove(&sb->runs[pos + 1], &sb->runs[pos],
		(sb->nruns - pos) * sizeof(sb->runs[0]));
	sb->nruns++;
	memset(&sb->runs[pos], 0, sizeof(sb->runs[0]));
	sb->runs[pos].seq = seq;
	sb->runs[pos].internal = internal;
	return &sb->runs[pos];
}

/* The run an outcome belongs to. An outcome for a sequence number beyond
 * any intent is kept as a run of its own; one for an older run no longer
 * in the history is dropped with it. */
static struct journal_run *run_for_outcome(struct journal_state *st,
					   struct journal_sandbox *sb, uint64_t seq)
{
	struct journal_run *run = run_find(sb, seq);
	if (run || seq <= sb->last_seq)
		return run;
	sb->commands_run++;
	sb->last_seq = seq;
	return run_insert(st, sb, seq, false);
}

static struct journal_upload *upload_find(struct journal_sandbox *sb, uint64_t id)
{
	for (size_t i = 0; i < sb->nuploads; i++)
		if (sb->uploads[i].upload_id == id)
			return &sb->uploads[i];
	return NULL;
}

static struct journal_upload *upload_get(struct journal_sandbox *sb, uint64_t id)
{
	struct journal_upload *u = upload_find(sb, id);
	if (u)
		return u;
	u = realloc(sb->uploads, (sb->nuploads + 1) * sizeof(*u));
	if (!u)
		return NULL;
	sb->uploads = u;
	u = &sb->uploads[sb->nuploads++];
	memset(u, 0, sizeof(*u));
	u->upload_id = id;
	return u;
}

static void upload_remove(struct journal_sandbox *sb, uint64_t id)
{
	struct journal_upload *u = upload_find(sb, id);
	if (!u)
		return;
	size_t i = (size_t)(u - sb->uploads);
	upload_free(u);
	memmove(&sb->uploads[i], &sb->uploads[i + 1],
		(sb->nuploads - i - 1) * sizeof(sb->uploads[0]));
	sb->nuploads--;
}

static void apply_exec(struct journal_state *st, struct journal_sandbox *sb,
		       const struct journal_record *r)
{
	struct journal_run *run;

	if (r->kind == JOURNAL_EXEC_INTENT) {
		run = run_find(sb, r->seq);
		if (run) {
			/* The same intent again: it starts over. */
			run_free(run);
			run->seq = r->seq;
		} else {
			sb->commands_run++;
			run = run_insert(st, sb, r->seq, r->internal);
		}
		if (r->seq > sb->last_seq)
			sb->last_seq = r->seq;
		if (!run)
			return;
		set_str(&run->command, r->command);
		run->timeout_s = r->timeout_s;
		run->internal = r->internal;
		run->status = JOURNAL_RUN_PENDING;
		run->started_ms = r->time_ms;
		return;
	}
	run = run_for_outcome(st, sb, r->seq);
	if (r->kind != JOURNAL_EXEC_RESULT && r->error)
		set_str(&sb->last_error, r->error);
	if (!run)
		return;
	/* A later outcome replaces an earlier one whole. */
	output_free(&run->out);
	output_free(&run->err);
	run->exit_code = 0;
	run->duration_ms = 0;
	run->truncated = false;
	run->ended_ms = r->time_ms;
	set_str(&run->error, r->error);
	switch (r->kind) {
	case JOURNAL_EXEC_RESULT:
		run->status = JOURNAL_RUN_DONE;
		run->exit_code = r->exit_code;
		run->duration_ms = r->duration_ms;
		run->truncated = r->truncated;
		set_output(&run->out, &r->out);
		set_output(&run->err, &r->err);
		break;
	case JOURNAL_EXEC_UNKNOWN:
		run->status = JOURNAL_RUN_UNKNOWN;
		break;
	default:
		run->status = JOURNAL_RUN_NOT_RUN;
		break;
	}
}

static void apply_upload(struct journal_sandbox *sb, const struct journal_record *r)
{
	struct journal_upload *u;

	switch (r->kind) {
	case JOURNAL_UPLOAD_INTENT:
		if (!(u = upload_get(sb, r->upload_id)))
			return;
		set_str(&u->path, r->path);
		set_str(&u->cache_file, r->cache_file);
		set_str(&u->error, r->error);
		u->size = r->size;
		u->checksum = r->checksum;
		u->abandoned = false;
		break;
	case JOURNAL_UPLOAD_DONE:
		upload_remove(sb, r->upload_id);
		break;
	default: /* ABANDONED: kept, even without its intent, for rescue */
		if (!(u = upload_get(sb, r->upload_id)))
			return;
		u->abandoned = true;
		set_str(&u->error, r->error);
		if (r->error)
			set_str(&sb->last_error, r->error);
		break;
	}
}

static struct journal_job *job_find(struct journal_sandbox *sb, uint64_t job)
{
	for (size_t i = 0; i < sb->njobs; i++)
		if (sb->jobs[i].job == job)
			return &sb->jobs[i];
	return NULL;
}

/* Jobs are kept in number order, at most max_runs: the oldest is dropped
 * (its directory in the workspace is the mount's to remove). */
static void apply_job(struct journal_state *st, struct journal_sandbox *sb,
		      const struct journal_record *r)
{
	if (!r->job)
		return;
	struct journal_job *jb = job_find(sb, r->job);
	if (r->kind == JOURNAL_JOB_INTENT) {
		if (r->job > sb->last_job)
			sb->last_job = r->job;
		if (jb) {
			job_free(jb); /* the same intent again: it starts over */
			jb->job = r->job;
		} else {
			if (sb->njobs && r->job < sb->jobs[0].job && sb->njobs >= st->max_runs)
				return; /* older than every job kept */
			if (sb->njobs >= st->max_runs) {
				job_free(&sb->jobs[0]);
				memmove(&sb->jobs[0], &sb->jobs[1],
					(sb->njobs - 1) * sizeof(sb->jobs[0]));
				sb->njobs--;
			} else {
				struct journal_job *v =
				    realloc(sb->jobs, (sb->njobs + 1) * sizeof(*v));
				if (!v)
					return;
				sb->jobs = v;
			}
			size_t pos = sb->njobs;
			while (pos > 0 && sb->jobs[pos - 1].job > r->job)
				pos--;
			memmove(&sb->jobs[pos + 1], &sb->jobs[pos],
				(sb->njobs - pos) * sizeof(sb->jobs[0]));
			sb->njobs++;
			jb = &sb->jobs[pos];
			memset(jb, 0, sizeof(*jb));
			jb->job = r->job;
		}
		set_str(&jb->command, r->command);
		set_str(&jb->dir, r->path);
		jb->status = JOURNAL_JOBST_PENDING;
		jb->started_ms = r->time_ms;
		return;
	}
	if (r->kind != JOURNAL_JOB_STARTED && r->kind != JOURNAL_JOB_EXITED &&
	    r->kind != JOURNAL_JOB_KILLED && r->error)
		set_str(&sb->last_error, r->error);
	if (!jb)
		return; /* an outcome without its intent, or dropped from history */
	switch (r->kind) {
	case JOURNAL_JOB_STARTED:
		jb->status = JOURNAL_JOBST_RUNNING;
		jb->pid = r->pid;
		break;
	case JOURNAL_JOB_EXITED:
		jb->status = JOURNAL_JOBST_EXITED;
		jb->exit_code = r->exit_code;
		jb->ended_ms = r->time_ms;
		break;
	case JOURNAL_JOB_KILLED:
		jb->status = JOURNAL_JOBST_KILLED;
		jb->ended_ms = r->time_ms;
		break;
	case JOURNAL_JOB_UNKNOWN:
		jb->status = JOURNAL_JOBST_UNKNOWN;
		set_str(&jb->error, r->error);
		break;
	default:
		jb->status = JOURNAL_JOBST_NOT_RUN;
		jb->ended_ms = r->time_ms;
		set_str(&jb->error, r->error);
		break;
	}
}

static void apply_snapshot(struct journal_sandbox *sb, const struct journal_record *r)
{
	if (r->sb_state >= JOURNAL_SB_CREATING && r->sb_state <= JOURNAL_SB_DETACHED)
		sb->state = (enum journal_sandbox_state)r->sb_state;
	sb->owned = r->owned;
	sb->foreign = r->foreign;
	set_str(&sb->url, r->url);
	set_str(&sb->spec, r->spec);
	sb->bound_s = r->bound_s;
	set_str(&sb->pool, r->pool);
	set_str(&sb->image, r->image);
	sb->port = r->port;
	sb->idle_s = r->idle_s;
	sb->timeout_s = r->timeout_s;
	set_str(&sb->env, r->env);
	set_str(&sb->cwd, r->path && *r->path ? r->path : NULL);
	sb->created_ms = r->time_ms;
	sb->last_seq = r->seq;
	sb->commands_run = r->commands_run;
	if (r->job > sb->last_job)
		sb->last_job = r->job;
	set_str(&sb->last_error, r->error);
}

void journal_state_apply(struct journal_state *st, const struct journal_record *r)
{
	if (r->upload_id && r->upload_id != UINT64_MAX &&
	    r->upload_id >= st->next_upload_id)
		st->next_upload_id = r->upload_id + 1;
	if (r->kind == JOURNAL_SNAPSHOT && !r->sandbox)
		return; /* journal-wide facts: only the upload id, above */

	struct journal_sandbox *sb = sandbox_get(st, r->sandbox);
	if (!sb)
		return; /* no sandbox named, or out of memory */

	switch (r->kind) {
	case JOURNAL_CREATE_INTENT:
		sb->state = JOURNAL_SB_CREATING;
		sb->owned = true;
		sb->foreign = false;
		set_str(&sb->url, NULL);
		set_str(&sb->spec, r->spec);
		sb->bound_s = r->bound_s;
		set_str(&sb->pool, r->pool);
		set_str(&sb->image, r->image);
		sb->port = r->port;
		sb->idle_s = r->idle_s;
		sb->created_ms = r->time_ms;
		set_str(&sb->last_error, NULL);
		break;
	case JOURNAL_CREATED:
		sb->state = JOURNAL_SB_READY;
		sb->owned = true;
		set_str(&sb->url, r->url);
		break;
	case JOURNAL_CREATE_FAILED:
		sb->state = JOURNAL_SB_FAILED;
		sb->owned = true;
		set_str(&sb->last_error, r->error);
		break;
	case JOURNAL_CREATE_UNKNOWN:
		sb->state = JOURNAL_SB_CREATE_UNKNOWN;
		sb->owned = true;
		set_str(&sb->last_error, r->error);
		break;
	case JOURNAL_CREATE_RECONCILED:
		/* Ours when it settles a create of ours; a sandbox first
		 * heard of here was listed by the orchestrator: foreign. */
		sb->foreign = r->foreign || !sb->owned;
		sb->owned = !sb->foreign;
		sb->state = r->url ? JOURNAL_SB_READY : JOURNAL_SB_GONE;
		set_str(&sb->url, r->url);
		break;
	case JOURNAL_ATTACH:
		sb->state = JOURNAL_SB_READY;
		sb->owned = false;
		sb->foreign = false;
		set_str(&sb->url, r->url);
		break;
	case JOURNAL_DETACH:
		sb->state = JOURNAL_SB_DETACHED;
		set_str(&sb->url, NULL); /* a capability we no longer need */
		break;
	case JOURNAL_EXEC_INTENT:
	case JOURNAL_EXEC_RESULT:
	case JOURNAL_EXEC_UNKNOWN:
	case JOURNAL_EXEC_NOT_RUN:
		apply_exec(st, sb, r);
		break;
	case JOURNAL_UPLOAD_INTENT:
	case JOURNAL_UPLOAD_DONE:
	case JOURNAL_UPLOAD_ABANDONED:
		apply_upload(sb, r);
		break;
	case JOURNAL_DELETE_INTENT:
		sb->state = JOURNAL_SB_DELETING;
		if (r->foreign) { /* an explicit delete of someone else's */
			sb->foreign = true;
			sb->owned = false;
		}
		break;
	case JOURNAL_DELETED:
		sb->state = JOURNAL_SB_GONE;
		set_str(&sb->url, NULL);
		break;
	case JOURNAL_DELETE_UNCONFIRMED:
		sb->state = JOURNAL_SB_DELETE_UNCONFIRMED;
		set_str(&sb->last_error, r->error);
		break;
	case JOURNAL_SET_TIMEOUT:
		sb->timeout_s = r->timeout_s;
		break;
	case JOURNAL_SET_ENV:
		set_str(&sb->env, r->env && *r->env ? r->env : NULL);
		break;
	case JOURNAL_SET_CWD:
		set_str(&sb->cwd, r->path && *r->path ? r->path : NULL);
		break;
	case JOURNAL_JOB_INTENT:
	case JOURNAL_JOB_STARTED:
	case JOURNAL_JOB_UNKNOWN:
	case JOURNAL_JOB_NOT_RUN:
	case JOURNAL_JOB_EXITED:
	case JOURNAL_JOB_KILLED:
		apply_job(st, sb, r);
		break;
	case JOURNAL_SNAPSHOT:
		apply_snapshot(sb, r);
		break;
	case JOURNAL_LINK_INTENT:
	case JOURNAL_LINK_DONE:
	case JOURNAL_LINK_GONE:
		journal_links_apply(sb, r);
		break;
	default:
		break;
	}
}

/* --- copy and compare -----------------------------------------------------*/

char *journal_dup_or_null(const char *s, int *err)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*err = -ENOMEM;
	return d;
}

void journal_copy_output(struct journal_output *dst, const struct journal_output *src,
			 int *err)
{
	if (journal_output_copy(dst, src) < 0)
		*err = -ENOMEM;
}

int journal_state_copy(struct journal_state *dst, const struct journal_state *src)
{
	int err = 0;

	journal_state_init(dst, src->max_runs);
	dst->next_upload_id = src->next_upload_id;
	if (!src->count)
		return 0;
	dst->sandboxes = calloc(src->count, sizeof(*dst->sandboxes));
	if (!dst->sandboxes)
		return -ENOMEM;
	dst->count = src->count;
	for (size_t i = 0; i < src->count; i++) {
		const struct journal_sandbox *s = &src->sandboxes[i];
		struct journal_sandbox *d = &dst->sandboxes[i];
		*d = *s;
		d->id = journal_dup_or_null(s->id, &err);
		d->url = journal_dup_or_null(s->url, &err);
		d->spec = journal_dup_or_null(s->spec, &err);
		d->env = journal_dup_or_null(s->env, &err);
		d->cwd = journal_dup_or_null(s->cwd, &err);
		d->pool = journal_dup_or_null(s->pool, &err);
		d->image = journal_dup_or_null(s->image, &err);
		d->last_error = journal_dup_or_null(s->last_error, &err);
		d->runs = NULL;
		d->uploads = NULL;
		d->jobs = NULL;
		d->nruns = d->nuploads = d->njobs = 0;
		if (s->njobs && (d->jobs = calloc(s->njobs, sizeof(*d->jobs))))
			d->njobs = s->njobs;
		if (d->njobs != s->njobs)
			err = -ENOMEM;
		for (size_t k = 0; k < d->njobs; k++) {
			const struct journal_job *sj = &s->jobs[k];
			struct journal_job *dj = &d->jobs[k];
			*dj = *sj;
			dj->command = journal_dup_or_null(sj->command, &err);
			dj->dir = journal_dup_or_null(sj->dir, &err);
			dj->error = journal_dup_or_null(sj->error, &err);
		}
		if (s->nruns && (d->runs = calloc(s->nruns, sizeof(*d->runs))))
			d->nruns = s->nruns;
		if (s->nuploads &&
		    (d->uploads = calloc(s->nuploads, sizeof(*d->uploads))))
			d->nuploads = s->nuploads;
		if (d->nruns != s->nruns || d->nuploads != s->nuploads)
			err = -ENOMEM;
		if (journal_links_copy(d, s) < 0)
			err = -ENOMEM;
		for (size_t k = 0; k < d->nruns; k++) {
			const struct journal_run *sr = &s->runs[k];
			struct journal_run *dr = &d->runs[k];
			*dr = *sr;
			dr->command = journal_dup_or_null(sr->command, &err);
			dr->error = journal_dup_or_null(sr->error, &err);
			journal_copy_output(&dr->out, &sr->out, &err);
			journal_copy_output(&dr->err, &sr->err, &err);
		}
		for (size_t k = 0; k < d->nuploads; k++) {
			const struct journal_upload *su = &s->uploads[k];
			struct journal_upload *du = &d->uploads[k];
			*du = *su;
			du->path = journal_dup_or_null(su->path, &err);
			du->cache_file = journal_dup_or_null(su->cache_file, &err);
			du->error = journal_dup_or_null(su->error, &err);
		}
	}
	if (err)
		journal_state_clear(dst);
	return err;
}

static bool run_eq(const struct journal_run *a, const struct journal_run *b)
{
	return a->seq == b->seq && journal_str_equal(a->command, b->command) &&
	       a->timeout_s == b->timeout_s && a->internal == b->internal &&
	       a->status == b->status && a->exit_code == b->exit_code &&
	       a->duration_ms == b->duration_ms && a->truncated == b->truncated &&
	       journal_output_equal(&a->out, &b->out) &&
	       journal_output_equal(&a->err, &b->err) && a->started_ms == b->started_ms &&
	       a->ended_ms == b->ended_ms && journal_str_equal(a->error, b->error);
}

static bool upload_eq(const struct journal_upload *a, const struct journal_upload *b)
{
	return a->upload_id == b->upload_id && journal_str_equal(a->path, b->path) &&
	       journal_str_equal(a->cache_file, b->cache_file) && a->size == b->size &&
	       a->checksum == b->checksum && a->abandoned == b->abandoned &&
	       journal_str_equal(a->error, b->error);
}

static bool job_eq(const struct journal_job *a, const struct journal_job *b)
{
	return a->job == b->job && journal_str_equal(a->command, b->command) &&
	       journal_str_equal(a->dir, b->dir) && a->pid == b->pid &&
	       a->status == b->status && a->exit_code == b->exit_code &&
	       a->started_ms == b->started_ms && a->ended_ms == b->ended_ms &&
	       journal_str_equal(a->error, b->error);
}

static bool sandbox_eq(const struct journal_sandbox *a, const struct journal_sandbox *b)
{
	if (!journal_str_equal(a->id, b->id) || a->state != b->state ||
	    a->owned != b->owned || a->foreign != b->foreign ||
	    !journal_str_equal(a->spec, b->spec) || a->bound_s != b->bound_s ||
	    !journal_str_equal(a->env, b->env) || !journal_str_equal(a->cwd, b->cwd) ||
	    !journal_str_equal(a->url, b->url) || !journal_str_equal(a->pool, b->pool) ||
	    !journal_str_equal(a->image, b->image) || a->port != b->port ||
	    a->idle_s != b->idle_s || a->timeout_s != b->timeout_s ||
	    a->created_ms != b->created_ms || a->last_seq != b->last_seq ||
	    a->commands_run != b->commands_run || a->nruns != b->nruns ||
	    a->nuploads != b->nuploads || a->njobs != b->njobs ||
	    a->last_job != b->last_job ||
	    !journal_str_equal(a->last_error, b->last_error))
		return false;
	for (size_t i = 0; i < a->njobs; i++)
		if (!job_eq(&a->jobs[i], &b->jobs[i]))
			return false;
	for (size_t i = 0; i < a->nruns; i++)
		if (!run_eq(&a->runs[i], &b->runs[i]))
			return false;
	for (size_t i = 0; i < a->nuploads; i++)
		if (!upload_eq(&a->uploads[i], &b->uploads[i]))
			return false;
	return journal_links_equal(a, b);
}

bool journal_state_equal(const struct journal_state *a, const struct journal_state *b)
{
	if (a->count != b->count || a->max_runs != b->max_runs ||
	    a->next_upload_id != b->next_upload_id)
		return false;
	for (size_t i = 0; i < a->count; i++)
		if (!sandbox_eq(&a->sandboxes[i], &b->sandboxes[i]))
			return false;
	return true;
}
