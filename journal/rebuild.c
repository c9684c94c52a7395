/*
 * rebuild.c — the records that rebuild a state from nothing, for
 * compaction: per sandbox its runs, jobs and uploads, then a snapshot of
 * its scalar facts.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "journal_i.h"

/* --- the records that rebuild a state (compaction) ------------------------*/

struct recs {
	struct journal_record *v;
	size_t n, cap;
	int err;
};

static struct journal_record *recs_add(struct recs *rs, enum journal_kind kind,
				       const char *sandbox, uint64_t time_ms)
{
	if (rs->err)
		return NULL;
	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 64;
		struct journal_record *v = realloc(rs->v, cap * sizeof(*v));
		if (!v) {
			rs->err = -ENOMEM;
			return NULL;
		}
		rs->v = v;
		rs->cap = cap;
	}
	struct journal_record *r = &rs->v[rs->n++];
	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->time_ms = time_ms;
	r->sandbox = journal_dup_or_null(sandbox, &rs->err);
	return r;
}

static void emit_run(struct recs *rs, const char *id, const struct journal_run *run)
{
	struct journal_record *r = recs_add(rs, JOURNAL_EXEC_INTENT, id, run->started_ms);
	if (!r)
		return;
	r->seq = run->seq;
	r->command = journal_dup_or_null(run->command, &rs->err);
	r->timeout_s = run->timeout_s;
	r->internal = run->internal;
	static const enum journal_kind outcome[] = {
	    [JOURNAL_RUN_DONE] = JOURNAL_EXEC_RESULT,
	    [JOURNAL_RUN_UNKNOWN] = JOURNAL_EXEC_UNKNOWN,
	    [JOURNAL_RUN_NOT_RUN] = JOURNAL_EXEC_NOT_RUN,
	};
	if (run->status == JOURNAL_RUN_PENDING)
		return;
	if (!(r = recs_add(rs, outcome[run->status], id, run->ended_ms)))
		return;
	r->seq = run->seq;
	r->error = journal_dup_or_null(run->error, &rs->err);
	if (run->status == JOURNAL_RUN_DONE) {
		r->exit_code = run->exit_code;
		r->duration_ms = run->duration_ms;
		r->truncated = run->truncated;
		journal_copy_output(&r->out, &run->out, &rs->err);
		journal_copy_output(&r->err, &run->err, &rs->err);
	}
}

static void emit_job(struct recs *rs, const char *id, const struct journal_job *jb)
{
	struct journal_record *r = recs_add(rs, JOURNAL_JOB_INTENT, id, jb->started_ms);
	if (!r)
		return;
	r->job = jb->job;
	r->command = journal_dup_or_null(jb->command, &rs->err);
	r->path = journal_dup_or_null(jb->dir, &rs->err);
	if (jb->status == JOURNAL_JOBST_PENDING)
		return;
	if (jb->status == JOURNAL_JOBST_UNKNOWN || jb->status == JOURNAL_JOBST_NOT_RUN) {
		r = recs_add(rs,
			     jb->status == JOURNAL_JOBST_UNKNOWN ? JOURNAL_JOB_UNKNOWN
								 : JOURNAL_JOB_NOT_RUN,
			     id, jb->ended_ms);
		if (r) {
			r->job = jb->job;
			r->error = journal_dup_or_null(jb->error, &rs->err);
		}
		return;
	}
	if (!(r = recs_add(rs, JOURNAL_JOB_STARTED, id, jb->started_ms)))
		return;
	r->job = jb->job;
	r->pid = jb->pid;
	if (jb->status == JOURNAL_JOBST_RUNNING)
		return;
	r = recs_add(rs,
		     jb->status == JOURNAL_JOBST_EXITED ? JOURNAL_JOB_EXITED
							: JOURNAL_JOB_KILLED,
		     id, jb->ended_ms);
	if (r) {
		r->job = jb->job;
		r->exit_code = jb->status == JOURNAL_JOBST_EXITED ? jb->exit_code : 0;
	}
}

static void emit_sandbox(struct recs *rs, const struct journal_sandbox *sb)
{
	struct journal_record *r;

	for (size_t i = 0; i < sb->njobs; i++)
		emit_job(rs, sb->id, &sb->jobs[i]);
	for (size_t i = 0; i < sb->nruns; i++)
		emit_run(rs, sb->id, &sb->runs[i]);
	for (size_t i = 0; i < sb->nuploads; i++) {
		const struct journal_upload *u = &sb->uploads[i];
		if (!(r = recs_add(rs, JOURNAL_UPLOAD_INTENT, sb->id, 0)))
			return;
		r->upload_id = u->upload_id;
		r->path = journal_dup_or_null(u->path, &rs->err);
		r->cache_file = journal_dup_or_null(u->cache_file, &rs->err);
		r->size = u->size;
		r->checksum = u->checksum;
		r->error = journal_dup_or_null(u->error, &rs->err);
		if (u->abandoned) {
			if (!(r = recs_add(rs, JOURNAL_UPLOAD_ABANDONED, sb->id, 0)))
				return;
			r->upload_id = u->upload_id;
			r->error = journal_dup_or_null(u->error, &rs->err);
		}
	}
	for (size_t i = 0; i < sb->nlinks; i++) {
		if (!(r = recs_add(rs, JOURNAL_LINK_DONE, sb->id, 0)))
			return;
		if (journal_links_record(sb, i, r) < 0)
			rs->err = -ENOMEM;
	}
	if (!(r = recs_add(rs, JOURNAL_SNAPSHOT, sb->id, sb->created_ms)))
		return;
	r->sb_state = (int)sb->state;
	r->owned = sb->owned;
	r->foreign = sb->foreign;
	r->spec = journal_dup_or_null(sb->spec, &rs->err);
	r->bound_s = sb->bound_s;
	r->url = journal_dup_or_null(sb->url, &rs->err);
	r->pool = journal_dup_or_null(sb->pool, &rs->err);
	r->image = journal_dup_or_null(sb->image, &rs->err);
	r->port = sb->port;
	r->idle_s = sb->idle_s;
	r->timeout_s = sb->timeout_s;
	r->env = journal_dup_or_null(sb->env, &rs->err);
	r->path = journal_dup_or_null(sb->cwd, &rs->err);
	r->seq = sb->last_seq;
	r->commands_run = sb->commands_run;
	r->job = sb->last_job;
	r->error = journal_dup_or_null(sb->last_error, &rs->err);
}

int journal_state_records(const struct journal_state *st, struct journal_record **out,
			  size_t *n)
{
	struct recs rs = {0};

	for (size_t i = 0; i < st->count && !rs.err; i++)
		emit_sandbox(&rs, &st->sandboxes[i]);
	if (st->next_upload_id > 1) {
		struct journal_record *r = recs_add(&rs, JOURNAL_SNAPSHOT, NULL, 0);
		if (r)
			r->upload_id = st->next_upload_id - 1;
	}
	if (rs.err) {
		for (size_t i = 0; i < rs.n; i++)
			journal_record_clear(&rs.v[i]);
		free(rs.v);
		*out = NULL;
		*n = 0;
		return rs.err;
	}
	*out = rs.v;
	*n = rs.n;
	return 0;
}
