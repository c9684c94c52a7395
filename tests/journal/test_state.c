/*
 * test_state.c — the lifecycle state as a pure function of the records,
 * including records in a garbage order.
 */
#include "jtest.h"

static struct journal_state st;

static void apply(enum journal_kind kind, const char *sb, uint64_t seq, const char *s)
{
	struct journal_record r = {.kind = kind, .sandbox = (char *)sb, .seq = seq};
	r.time_ms = 1000 + seq;
	switch (kind) {
	case JOURNAL_CREATED:
	case JOURNAL_ATTACH:
	case JOURNAL_CREATE_RECONCILED:
		r.url = (char *)s;
		break;
	case JOURNAL_EXEC_INTENT:
		r.command = (char *)s;
		r.timeout_s = 30;
		break;
	default:
		r.error = (char *)s;
		break;
	}
	journal_state_apply(&st, &r);
}

static void upload(enum journal_kind kind, const char *sb, uint64_t id)
{
	struct journal_record r = {.kind = kind, .sandbox = (char *)sb, .upload_id = id};
	r.path = (char *)"a/b";
	r.cache_file = (char *)"/c/1";
	r.size = 5;
	r.checksum = 77;
	journal_state_apply(&st, &r);
}

static void test_create_delete(void)
{
	journal_state_init(&st, 0);
	CHECK_EQ(st.max_runs, 100);
	CHECK_EQ(st.next_upload_id, 1);
	struct journal_record r = {.kind = JOURNAL_CREATE_INTENT, .sandbox = (char *)"a"};
	r.pool = (char *)"gpu";
	r.idle_s = 60;
	r.time_ms = 42;
	journal_state_apply(&st, &r);
	struct journal_sandbox *sb = journal_state_find(&st, "a");
	CHECK(sb && sb->state == JOURNAL_SB_CREATING && sb->owned && !sb->url);
	CHECK(sb && sb->pool && strcmp(sb->pool, "gpu") == 0 && sb->created_ms == 42);
	apply(JOURNAL_CREATED, "a", 0, "http://x/secret");
	CHECK(sb->state == JOURNAL_SB_READY && strcmp(sb->url, "http://x/secret") == 0);
	apply(JOURNAL_DELETE_INTENT, "a", 0, NULL);
	CHECK(sb->state == JOURNAL_SB_DELETING);
	apply(JOURNAL_DELETE_UNCONFIRMED, "a", 0, "timeout");
	CHECK(sb->state == JOURNAL_SB_DELETE_UNCONFIRMED &&
	      strcmp(sb->last_error, "timeout") == 0);
	apply(JOURNAL_DELETED, "a", 0, NULL);
	CHECK(sb->state == JOURNAL_SB_GONE && !sb->url);

	apply(JOURNAL_CREATE_INTENT, "b", 0, NULL);
	apply(JOURNAL_CREATE_FAILED, "b", 0, "409");
	sb = journal_state_find(&st, "b");
	CHECK(sb->state == JOURNAL_SB_FAILED && strcmp(sb->last_error, "409") == 0);
	apply(JOURNAL_CREATE_INTENT, "c", 0, NULL);
	apply(JOURNAL_CREATE_UNKNOWN, "c", 0, "lost");
	sb = journal_state_find(&st, "c");
	CHECK(sb->state == JOURNAL_SB_CREATE_UNKNOWN);
	apply(JOURNAL_CREATE_RECONCILED, "c", 0, "http://c/");
	CHECK(sb->state == JOURNAL_SB_READY && sb->url && sb->owned);
	apply(JOURNAL_CREATE_RECONCILED, "c", 0, NULL);
	CHECK(sb->state == JOURNAL_SB_GONE && !sb->url);

	apply(JOURNAL_ATTACH, "d", 0, "http://d/");
	sb = journal_state_find(&st, "d");
	CHECK(sb->state == JOURNAL_SB_READY && !sb->owned &&
	      strcmp(sb->url, "http://d/") == 0);
	struct journal_record t = {
	    .kind = JOURNAL_SET_TIMEOUT, .sandbox = (char *)"d", .timeout_s = 5};
	journal_state_apply(&st, &t);
	CHECK_EQ(sb->timeout_s, 5);
	apply(JOURNAL_DETACH, "d", 0, NULL);
	CHECK(sb->state == JOURNAL_SB_DETACHED && !sb->url);
	CHECK_EQ(st.count, 4);
	CHECK(journal_state_find(&st, "nope") == NULL &&
	      journal_state_find(&st, NULL) == NULL);
	journal_state_clear(&st);
	CHECK_EQ(st.count, 0);
}

static void test_runs(void)
{
	journal_state_init(&st, 3);
	apply(JOURNAL_ATTACH, "s", 0, "http://s/");
	struct journal_sandbox *sb = journal_state_find(&st, "s");
	apply(JOURNAL_EXEC_INTENT, "s", 1, "true");
	CHECK(sb->nruns == 1 && sb->runs[0].status == JOURNAL_RUN_PENDING);
	CHECK(sb->last_seq == 1 && sb->commands_run == 1 && sb->runs[0].timeout_s == 30);
	struct journal_record r = {
	    .kind = JOURNAL_EXEC_RESULT, .sandbox = (char *)"s", .seq = 1};
	r.exit_code = 3;
	r.duration_ms = 7;
	r.truncated = true;
	r.out = jt_inline("a\0b", 3);
	r.time_ms = 2000;
	journal_state_apply(&st, &r);
	free(r.out.data);
	CHECK(sb->runs[0].status == JOURNAL_RUN_DONE && sb->runs[0].exit_code == 3);
	CHECK(sb->runs[0].out.len == 3 && memcmp(sb->runs[0].out.data, "a\0b", 3) == 0);
	CHECK(sb->runs[0].truncated && sb->runs[0].ended_ms == 2000 &&
	      sb->runs[0].started_ms == 1001);
	apply(JOURNAL_EXEC_INTENT, "s", 2, "x");
	apply(JOURNAL_EXEC_UNKNOWN, "s", 2, "lost answer");
	CHECK(sb->runs[1].status == JOURNAL_RUN_UNKNOWN &&
	      strcmp(sb->last_error, "lost answer") == 0);
	apply(JOURNAL_EXEC_INTENT, "s", 3, "y");
	apply(JOURNAL_EXEC_NOT_RUN, "s", 3, "refused");
	CHECK(sb->runs[2].status == JOURNAL_RUN_NOT_RUN);
	for (uint64_t q = 4; q <= 6; q++)
		apply(JOURNAL_EXEC_INTENT, "s", q, "z");
	/* History keeps the newest max_runs; the count keeps everything. */
	CHECK_EQ(sb->nruns, 3);
	CHECK_EQ(sb->runs[0].seq, 4);
	CHECK_EQ(sb->runs[2].seq, 6);
	CHECK_EQ(sb->commands_run, 6);
	CHECK_EQ(sb->last_seq, 6);
	/* An outcome for a run dropped from the history changes nothing. */
	apply(JOURNAL_EXEC_UNKNOWN, "s", 1, NULL);
	CHECK_EQ(sb->nruns, 3);
	CHECK_EQ(sb->runs[0].seq, 4);
	/* The same intent again starts the run over (no double count). */
	apply(JOURNAL_EXEC_INTENT, "s", 6, "again");
	CHECK_EQ(sb->commands_run, 6);
	CHECK(strcmp(sb->runs[2].command, "again") == 0);
	journal_state_clear(&st);
}

static void exec_intent(const char *sb, uint64_t seq, bool internal)
{
	struct journal_record r = {
	    .kind = JOURNAL_EXEC_INTENT, .sandbox = (char *)sb, .seq = seq};
	r.command = (char *)(internal ? "mv -- 'a' 'b'" : "make");
	r.internal = internal;
	journal_state_apply(&st, &r);
}

/* Runs the mount made for itself keep their flag through compaction and
 * the codec, and the history drops them before any run of the user. */
static void test_internal_runs(void)
{
	journal_state_init(&st, 3);
	apply(JOURNAL_ATTACH, "s", 0, "http://s/");
	struct journal_sandbox *sb = journal_state_find(&st, "s");
	exec_intent("s", 1, false);
	exec_intent("s", 2, true);
	exec_intent("s", 3, false);
	CHECK(sb->nruns == 3 && !sb->runs[0].internal && sb->runs[1].internal);
	exec_intent("s", 4, false);
	CHECK_EQ(sb->nruns, 3);
	CHECK(sb->runs[0].seq == 1 && sb->runs[1].seq == 3 && sb->runs[2].seq == 4);
	exec_intent("s", 5, true);
	CHECK(sb->runs[0].seq == 3 && sb->runs[2].seq == 5 && sb->runs[2].internal);
	exec_intent("s", 6, true); /* the older internal one makes room */
	CHECK(sb->runs[0].seq == 3 && sb->runs[1].seq == 4 && sb->runs[2].seq == 6);
	apply(JOURNAL_EXEC_UNKNOWN, "s", 6, "lost");
	CHECK(sb->runs[2].internal && sb->runs[2].status == JOURNAL_RUN_UNKNOWN);
	CHECK_EQ(sb->commands_run, 6);

	struct journal_record *v;
	size_t n;
	CHECK_EQ(journal_state_records(&st, &v, &n), 0);
	struct journal_state re;
	journal_state_init(&re, 3);
	for (size_t i = 0; i < n; i++) {
		uint8_t *buf;
		size_t len, used;
		struct journal_record d;
		CHECK_EQ(journal_encode(&v[i], &buf, &len), 0);
		CHECK_EQ(journal_decode(buf, len, &d, &used), JOURNAL_DECODE_OK);
		CHECK_EQ(d.internal, v[i].internal);
		journal_state_apply(&re, &d);
		journal_record_clear(&d);
		journal_record_clear(&v[i]);
		free(buf);
	}
	free(v);
	CHECK(journal_state_equal(&st, &re));
	struct journal_sandbox *rs = journal_state_find(&re, "s");
	CHECK(rs && rs->nruns == 3 && rs->runs[2].internal && !rs->runs[0].internal);
	journal_state_clear(&re);
	journal_state_clear(&st);
}

static void test_garbage_order(void)
{
	journal_state_init(&st, 4);
	/* An outcome with no intent, for a sandbox never seen. */
	apply(JOURNAL_EXEC_RESULT, "ghost", 9, NULL);
	struct journal_sandbox *sb = journal_state_find(&st, "ghost");
	CHECK(sb && !sb->owned && sb->state == JOURNAL_SB_READY && !sb->url);
	CHECK(sb && sb->nruns == 1 && sb->runs[0].seq == 9 && !sb->runs[0].command &&
	      sb->runs[0].status == JOURNAL_RUN_DONE);
	CHECK(sb && sb->last_seq == 9 && sb->commands_run == 1);
	/* Outcomes before intents for every kind; NULL sandbox ignored. */
	apply(JOURNAL_DELETED, "g2", 0, NULL);
	apply(JOURNAL_CREATED, "g3", 0, NULL);
	apply(JOURNAL_DETACH, "g4", 0, NULL);
	apply(JOURNAL_EXEC_INTENT, NULL, 1, "x");
	upload(JOURNAL_UPLOAD_DONE, "g5", 3);
	upload(JOURNAL_UPLOAD_ABANDONED, "g6", 4);
	CHECK_EQ(st.count, 6);
	CHECK(journal_state_find(&st, "g2")->state == JOURNAL_SB_GONE);
	CHECK(journal_state_find(&st, "g6")->nuploads == 1);
	CHECK(journal_state_find(&st, "g6")->uploads[0].abandoned);
	CHECK(st.next_upload_id == 5);
	/* Kinds out of range are ignored. */
	struct journal_record bad = {.kind = JOURNAL_KIND_MAX, .sandbox = (char *)"g7"};
	journal_state_apply(&st, &bad);
	struct journal_record snap = {
	    .kind = JOURNAL_SNAPSHOT, .sandbox = (char *)"g7", .sb_state = 1000};
	journal_state_apply(&st, &snap);
	CHECK(journal_state_find(&st, "g7")->state == JOURNAL_SB_READY);
	journal_state_clear(&st);
}

static void test_uploads(void)
{
	journal_state_init(&st, 0);
	upload(JOURNAL_UPLOAD_INTENT, "u", 5);
	upload(JOURNAL_UPLOAD_INTENT, "u", 2);
	upload(JOURNAL_UPLOAD_INTENT, "u", 9);
	CHECK_EQ(st.next_upload_id, 10);
	struct journal_sandbox *sb = journal_state_find(&st, "u");
	CHECK_EQ(sb->nuploads, 3);
	upload(JOURNAL_UPLOAD_DONE, "u", 2);
	CHECK_EQ(sb->nuploads, 2);
	CHECK(sb->uploads[0].upload_id == 5 && sb->uploads[1].upload_id == 9);
	CHECK(strcmp(sb->uploads[0].path, "a/b") == 0 && sb->uploads[0].checksum == 77);
	upload(JOURNAL_UPLOAD_ABANDONED, "u", 9);
	CHECK(sb->uploads[1].abandoned);
	upload(JOURNAL_UPLOAD_DONE, "u", 5);
	upload(JOURNAL_UPLOAD_DONE, "u", 5);
	CHECK_EQ(sb->nuploads, 1);
	CHECK_EQ(st.next_upload_id, 10);
	struct journal_record g = {.kind = JOURNAL_SNAPSHOT, .upload_id = 40};
	journal_state_apply(&st, &g);
	CHECK_EQ(st.next_upload_id, 41);
	CHECK_EQ(st.count, 1);
	journal_state_clear(&st);
}

/* The records compaction writes rebuild the same state. */
static void test_state_records(void)
{
	journal_state_init(&st, 3);
	for (int i = 0; i < 40; i++) {
		struct journal_record r;
		jt_sample(&r, (enum journal_kind)(1 + i % (JOURNAL_KIND_MAX - 1)), i);
		journal_state_apply(&st, &r);
		journal_record_clear(&r);
	}
	apply(JOURNAL_EXEC_RESULT, "orphan", 50, NULL);
	upload(JOURNAL_UPLOAD_ABANDONED, "orphan", 60);
	CHECK(st.count >= 3);

	struct journal_record *v;
	size_t n;
	CHECK_EQ(journal_state_records(&st, &v, &n), 0);
	struct journal_state re;
	journal_state_init(&re, 3);
	for (size_t i = 0; i < n; i++) {
		/* Through the codec too. */
		uint8_t *buf;
		size_t len, used;
		struct journal_record d;
		CHECK_EQ(journal_encode(&v[i], &buf, &len), 0);
		CHECK_EQ(journal_decode(buf, len, &d, &used), JOURNAL_DECODE_OK);
		journal_state_apply(&re, &d);
		journal_record_clear(&d);
		journal_record_clear(&v[i]);
		free(buf);
	}
	free(v);
	CHECK(journal_state_equal(&st, &re));

	struct journal_state cp;
	CHECK_EQ(journal_state_copy(&cp, &st), 0);
	CHECK(journal_state_equal(&st, &cp));
	/* A difference is seen. */
	cp.sandboxes[0].commands_run++;
	CHECK(!journal_state_equal(&st, &cp));
	journal_state_clear(&cp);
	journal_state_clear(&re);
	journal_state_clear(&st);
}

/* Whose sandbox is whose (DESIGN.md §4): a sandbox first heard of from the
 * orchestrator's listing is foreign; a reconcile of our own lost create
 * stays ours; the create spec and request bound survive compaction. */
/* The state the records compaction writes for st replay into (initialized
 * here; the caller clears it). */
static void replay_compacted(const struct journal_state *from, struct journal_state *to)
{
	struct journal_record *recs;
	size_t n;
	journal_state_init(to, 0);
	CHECK_EQ(journal_state_records(from, &recs, &n), 0);
	for (size_t i = 0; i < n; i++) {
		journal_state_apply(to, &recs[i]);
		journal_record_clear(&recs[i]);
	}
	free(recs);
}

static void test_ownership(void)
{
	journal_state_init(&st, 0);
	apply(JOURNAL_CREATE_RECONCILED, "theirs", 0, "http://t/");
	struct journal_sandbox *t = journal_state_find(&st, "theirs");
	CHECK(t && t->foreign && !t->owned && t->state == JOURNAL_SB_READY);

	struct journal_record r = {.kind = JOURNAL_CREATE_INTENT,
				   .sandbox = (char *)"mine"};
	r.spec = (char *)"{\"environment\":{\"A\":\"b\"}}";
	r.bound_s = JOURNAL_BOUND_NONE;
	journal_state_apply(&st, &r);
	apply(JOURNAL_CREATE_UNKNOWN, "mine", 0, "answer lost");
	apply(JOURNAL_CREATE_RECONCILED, "mine", 0, "http://m/");
	struct journal_sandbox *m = journal_state_find(&st, "mine");
	CHECK(m && m->owned && !m->foreign && m->bound_s == JOURNAL_BOUND_NONE);
	CHECK(m && m->spec && strstr(m->spec, "environment"));

	/* The same id deleted, then listed again: someone else's now. */
	apply(JOURNAL_DELETED, "mine", 0, NULL);
	struct journal_record f = {.kind = JOURNAL_CREATE_RECONCILED,
				   .sandbox = (char *)"mine"};
	f.url = (char *)"http://m2/";
	f.foreign = true;
	journal_state_apply(&st, &f);
	m = journal_state_find(&st, "mine");
	CHECK(m && m->foreign && !m->owned);

	/* An attach is neither owned nor foreign. */
	apply(JOURNAL_ATTACH, "att", 0, "http://a/");
	struct journal_sandbox *a = journal_state_find(&st, "att");
	CHECK(a && !a->owned && !a->foreign);

	/* Compaction keeps all of it. */
	struct journal_state again;
	replay_compacted(&st, &again);
	CHECK(journal_state_equal(&st, &again));
	struct journal_sandbox *t2 = journal_state_find(&again, "theirs");
	CHECK(t2 && t2->foreign && !t2->owned);
	journal_state_clear(&again);
	journal_state_clear(&st);
}

/* A sandbox's environment and working directory: set, replaced, cleared,
 * kept by compaction and by the record encoding; the dump names the
 * variables and never shows their values. */
static void test_env_cwd(void)
{
	journal_state_init(&st, 0);
	apply(JOURNAL_ATTACH, "e", 0, "http://e/");
	struct journal_record r = {.kind = JOURNAL_SET_ENV, .sandbox = (char *)"e"};
	r.env = (char *)"TOKEN=s3cret\nMODE=fast\n";
	journal_state_apply(&st, &r);
	struct journal_record c = {.kind = JOURNAL_SET_CWD, .sandbox = (char *)"e"};
	c.path = (char *)"src/app";
	journal_state_apply(&st, &c);
	struct journal_sandbox *e = journal_state_find(&st, "e");
	CHECK(e && e->env && strcmp(e->env, "TOKEN=s3cret\nMODE=fast\n") == 0);
	CHECK(e && e->cwd && strcmp(e->cwd, "src/app") == 0);

	/* Through the encoding: what is read back is what was written. */
	uint8_t *buf = NULL;
	size_t len = 0;
	CHECK_EQ(journal_encode(&r, &buf, &len), 0);
	struct journal_record back;
	size_t used = 0;
	CHECK_EQ(journal_decode(buf, len, &back, &used), JOURNAL_DECODE_OK);
	CHECK(used == len && back.kind == JOURNAL_SET_ENV && back.env &&
	      strcmp(back.env, r.env) == 0);
	journal_record_clear(&back);
	free(buf);

	/* Compaction keeps both. */
	struct journal_state again;
	replay_compacted(&st, &again);
	CHECK(journal_state_equal(&st, &again));
	journal_state_clear(&again);

	/* An empty write clears them. */
	r.env = (char *)"";
	journal_state_apply(&st, &r);
	c.path = (char *)"";
	journal_state_apply(&st, &c);
	e = journal_state_find(&st, "e");
	CHECK(e && !e->env && !e->cwd);
	journal_state_clear(&st);
}

static void job(enum journal_kind kind, const char *sb, uint64_t n, long pid, int code,
		const char *s)
{
	struct journal_record r = {.kind = kind, .sandbox = (char *)sb, .job = n};
	r.time_ms = 5000 + n;
	r.pid = pid;
	r.exit_code = code;
	if (kind == JOURNAL_JOB_INTENT) {
		r.command = (char *)s;
		r.path = (char *)".sandboxfs-job.x";
	} else {
		r.error = (char *)s;
	}
	journal_state_apply(&st, &r);
}

/* Background jobs: each outcome, the bound on the history, the highest
 * number kept when the oldest are dropped, and compaction. */
static void test_jobs(void)
{
	journal_state_init(&st, 3);
	apply(JOURNAL_ATTACH, "j", 0, "http://j/");
	job(JOURNAL_JOB_INTENT, "j", 1, 0, 0, "sleep 100");
	struct journal_sandbox *sb = journal_state_find(&st, "j");
	CHECK(sb && sb->njobs == 1 && sb->jobs[0].status == JOURNAL_JOBST_PENDING);
	CHECK(sb && sb->jobs[0].dir && strcmp(sb->jobs[0].command, "sleep 100") == 0);
	job(JOURNAL_JOB_STARTED, "j", 1, 4242, 0, NULL);
	CHECK(sb->jobs[0].status == JOURNAL_JOBST_RUNNING && sb->jobs[0].pid == 4242);
	job(JOURNAL_JOB_INTENT, "j", 2, 0, 0, "exit 3");
	job(JOURNAL_JOB_STARTED, "j", 2, 4243, 0, NULL);
	job(JOURNAL_JOB_EXITED, "j", 2, 0, 3, NULL);
	job(JOURNAL_JOB_INTENT, "j", 3, 0, 0, "lost");
	job(JOURNAL_JOB_UNKNOWN, "j", 3, 0, 0, "answer lost");
	job(JOURNAL_JOB_KILLED, "j", 1, 0, 0, NULL);
	CHECK(sb->njobs == 3 && sb->last_job == 3);
	CHECK(sb->jobs[0].status == JOURNAL_JOBST_KILLED);
	CHECK(sb->jobs[1].status == JOURNAL_JOBST_EXITED && sb->jobs[1].exit_code == 3);
	CHECK(sb->jobs[2].status == JOURNAL_JOBST_UNKNOWN && sb->jobs[2].error);
	/* an outcome for a job never announced is not a job */
	job(JOURNAL_JOB_STARTED, "j", 9, 1, 0, NULL);
	CHECK(sb->njobs == 3);

	/* Compaction keeps jobs and the highest number, also once dropped. */
	job(JOURNAL_JOB_INTENT, "j", 4, 0, 0, "true");
	job(JOURNAL_JOB_NOT_RUN, "j", 4, 0, 0, "setsid: not found");
	CHECK(sb->njobs == 3 && sb->jobs[0].job == 2 && sb->last_job == 4);
	CHECK(sb->jobs[2].status == JOURNAL_JOBST_NOT_RUN);
	struct journal_record *recs;
	size_t n;
	CHECK_EQ(journal_state_records(&st, &recs, &n), 0);
	struct journal_state again;
	journal_state_init(&again, 3);
	for (size_t i = 0; i < n; i++) {
		uint8_t *buf = NULL;
		size_t len = 0, used = 0;
		struct journal_record back;
		CHECK_EQ(journal_encode(&recs[i], &buf, &len), 0);
		CHECK_EQ(journal_decode(buf, len, &back, &used), JOURNAL_DECODE_OK);
		CHECK(journal_record_equal(&recs[i], &back));
		journal_state_apply(&again, &back);
		journal_record_clear(&back);
		journal_record_clear(&recs[i]);
		free(buf);
	}
	free(recs);
	CHECK(journal_state_equal(&st, &again));
	struct journal_state copy;
	CHECK_EQ(journal_state_copy(&copy, &st), 0);
	CHECK(journal_state_equal(&st, &copy));
	journal_state_clear(&copy);
	journal_state_clear(&again);
	journal_state_clear(&st);
}

int main(void)
{
	test_jobs();
	test_env_cwd();
	test_ownership();
	test_create_delete();
	test_runs();
	test_internal_runs();
	test_garbage_order();
	test_uploads();
	test_state_records();
	return check_done("test_state");
}
