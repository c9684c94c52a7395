/*
 * test_file.c — the journal file: round trip through a file, permissions,
 * UNKNOWN marking on reopen, damage and repair, compaction, the dump, the
 * registry, concurrent appends.
 */
#include <pthread.h>

#include "jtest.h"

static char *root;

static char *path_in(const char *dir, const char *name)
{
	static char p[8][4096];
	static int k;
	k = (k + 1) % 8;
	snprintf(p[k], sizeof(p[k]), "%s/%s", dir, name);
	return p[k];
}

static int mode_of(const char *p)
{
	struct stat st;
	return stat(p, &st) ? -1 : (int)(st.st_mode & 07777);
}

static struct journal *open_dir(const char *dir, struct journal_open_report *rep, int *rc,
				size_t max_runs, uint64_t compact)
{
	struct journal_options o;
	struct journal *j = NULL;
	journal_options_defaults(&o);
	o.dir = dir;
	if (max_runs)
		o.max_runs = max_runs;
	if (compact)
		o.compact_bytes = compact;
	*rc = journal_open(&o, &j, rep);
	return j;
}

static enum journal_scan_end scan_path(const char *p, struct jt_collect *c)
{
	struct journal_scan_result res;
	int fd = open(p, O_RDONLY);
	if (fd < 0)
		return JOURNAL_SCAN_IOERR;
	journal_scan(fd, c ? jt_collect_one : NULL, c, &res);
	close(fd);
	return res.end;
}

static void test_every_kind_through_file(void)
{
	char *dir = path_in(root, "kinds");
	struct journal_open_report rep;
	struct journal_record recs[JOURNAL_KIND_MAX];
	int rc, n = 0;

	umask(0); /* the modes below must not depend on the caller's umask */
	struct journal *j = open_dir(dir, &rep, &rc, 0, 0);
	CHECK_EQ(rc, 0);
	CHECK_EQ(mode_of(dir), 0700);
	CHECK_EQ(mode_of(path_in(dir, "journal")), 0600);
	CHECK_EQ(mode_of(path_in(dir, "lock")), 0600);
	CHECK_EQ(rep.records, 0);
	for (int k = 1; k < JOURNAL_KIND_MAX; k++) {
		jt_sample(&recs[n], (enum journal_kind)k, k);
		CHECK_EQ(journal_append(j, &recs[n], k % 2 == 0), 0);
		n++;
	}
	CHECK_EQ(journal_sync(j), 0);
	journal_close(j);

	struct jt_collect c = {0};
	CHECK_EQ(scan_path(path_in(dir, "journal"), &c), JOURNAL_SCAN_WHOLE);
	CHECK_EQ(c.n, n);
	for (int i = 0; i < n && i < (int)c.n; i++) {
		CHECK(journal_record_equal(&recs[i], &c.v[i]));
		if (!journal_record_equal(&recs[i], &c.v[i]))
			fprintf(stderr, "kind %s differs after the file\n",
				journal_kind_name(recs[i].kind));
	}
	jt_collect_clear(&c);

	/* A second mount of the same directory is refused while open. */
	struct journal *j1 = open_dir(dir, &rep, &rc, 0, 0);
	CHECK_EQ(rc, 0);
	CHECK_EQ(rep.records, n);
	struct journal *j2 = open_dir(dir, &rep, &rc, 0, 0);
	CHECK_EQ(rc, -EBUSY);
	CHECK(j2 == NULL && strstr(rep.message, "in use"));
	journal_close(j1);
	for (int i = 0; i < n; i++)
		journal_record_clear(&recs[i]);
	umask(022);
}

static void test_private_dir(void)
{
	char *dir = path_in(root, "loose");
	mkdir(dir, 0755);
	chmod(dir, 0755);
	struct journal_open_report rep;
	int rc;
	struct journal *j = open_dir(dir, &rep, &rc, 0, 0);
	CHECK_EQ(rc, 0);
	/* A group/world-accessible directory is made private. */
	CHECK_EQ(mode_of(dir), 0700);
	journal_close(j);
	chmod(path_in(dir, "journal"), 0644);
	j = open_dir(dir, &rep, &rc, 0, 0);
	CHECK_EQ(rc, 0);
	CHECK_EQ(mode_of(path_in(dir, "journal")), 0600);
	journal_close(j);
	/* Nested directories are created 0700 too. */
	char *deep = path_in(root, "a/b/c");
	j = open_dir(deep, &rep, &rc, 0, 0);
	CHECK_EQ(rc, 0);
	CHECK_EQ(mode_of(path_in(root, "a")), 0700);
	CHECK_EQ(mode_of(path_in(root, "a/b")), 0700);
	journal_close(j);
	struct journal_options o;
	journal_options_defaults(&o);
	CHECK_EQ(journal_open(&o, &j, &rep), -EINVAL);
	jt_write_file(path_in(root, "plainfile"), "x", 1);
	o.dir = path_in(root, "plainfile");
	CHECK_EQ(journal_open(&o, &j, &rep), -ENOTDIR);
}

static void rec(struct journal *j, enum journal_kind kind, const char *sb, uint64_t seq)
{
	struct journal_record r = {.kind = kind, .sandbox = (char *)sb, .seq = seq};
	if (kind == JOURNAL_EXEC_INTENT)
		r.command = (char *)"sleep 100";
	if (kind == JOURNAL_CREATED || kind == JOURNAL_ATTACH)
		r.url = (char *)"http://127.0.0.1:1/secret";
	if (kind == JOURNAL_UPLOAD_INTENT) {
		r.upload_id = seq;
		r.path = (char *)"f";
		r.cache_file = (char *)"/tmp/none";
	}
	CHECK_EQ(journal_append(j, &r, true), 0);
}

static void test_unknown_marking(void)
{
	char *dir = path_in(root, "unknown");
	struct journal_open_report rep;
	int rc;
	struct journal *j = open_dir(dir, &rep, &rc, 0, 0);
	rec(j, JOURNAL_ATTACH, "att", 0);
	rec(j, JOURNAL_EXEC_INTENT, "att", 1);
	rec(j, JOURNAL_EXEC_RESULT, "att", 1);
	rec(j, JOURNAL_EXEC_INTENT, "att", 2);	 /* no outcome */
	rec(j, JOURNAL_CREATE_INTENT, "new", 0); /* no outcome */
	rec(j, JOURNAL_CREATE_INTENT, "old", 0);
	rec(j, JOURNAL_CREATED, "old", 0);
	rec(j, JOURNAL_DELETE_INTENT, "old", 0); /* no outcome */
	rec(j, JOURNAL_UPLOAD_INTENT, "att", 1); /* stays pending */
	struct journal_record jr = {.kind = JOURNAL_JOB_INTENT, .sandbox = (char *)"att",
				    .job = 1, .command = (char *)"sleep 9"};
	CHECK_EQ(journal_append(j, &jr, true), 0); /* no outcome */
	uint64_t id = journal_next_upload_id(j);
	CHECK(id >= 2);
	CHECK(journal_next_upload_id(j) == id + 1);
	journal_close(j);

	j = open_dir(dir, &rep, &rc, 0, 0);
	CHECK_EQ(rc, 0);
	CHECK_EQ(rep.records, 10);
	CHECK_EQ(rep.unknown_marked, 4);
	CHECK(!rep.torn_tail && !rep.repaired);
	struct journal_state st;
	CHECK_EQ(journal_snapshot(j, &st), 0);
	struct journal_sandbox *att = journal_state_find(&st, "att");
	CHECK(att && att->nruns == 2 && att->runs[1].status == JOURNAL_RUN_UNKNOWN);
	CHECK(att && att->runs[0].status == JOURNAL_RUN_DONE);
	CHECK(att && att->nuploads == 1 && !att->uploads[0].abandoned);
	CHECK(att && att->njobs == 1 && att->jobs[0].status == JOURNAL_JOBST_UNKNOWN);
	CHECK(journal_state_find(&st, "new")->state == JOURNAL_SB_CREATE_UNKNOWN);
	CHECK(journal_state_find(&st, "old")->state == JOURNAL_SB_DELETE_UNCONFIRMED);
	CHECK(journal_next_upload_id(j) >= 2);
	journal_state_clear(&st);
	journal_close(j);

	/* The marks are records in the file: written once. */
	struct jt_collect c = {0};
	CHECK_EQ(scan_path(path_in(dir, "journal"), &c), JOURNAL_SCAN_WHOLE);
	CHECK_EQ(c.n, 14);
	if (c.n == 14) {
		CHECK(c.v[10].kind == JOURNAL_EXEC_UNKNOWN && c.v[10].seq == 2);
		CHECK(c.v[11].kind == JOURNAL_JOB_UNKNOWN && c.v[11].job == 1);
		CHECK(c.v[12].kind == JOURNAL_CREATE_UNKNOWN);
		CHECK(c.v[13].kind == JOURNAL_DELETE_UNCONFIRMED);
		CHECK(c.v[10].time_ms > 0 && c.v[10].error != NULL);
	}
	jt_collect_clear(&c);
	j = open_dir(dir, &rep, &rc, 0, 0);
	CHECK_EQ(rep.unknown_marked, 0);
	CHECK_EQ(rep.records, 14);
	journal_close(j);
}

static void test_damage_and_repair(void)
{
	char *dir = path_in(root, "damage");
	struct journal_open_report rep;
	int rc;
	struct journal *j = open_dir(dir, &rep, &rc, 0, 0);
	rec(j, JOURNAL_ATTACH, "s", 0);
	uint64_t first = journal_size(j);
	rec(j, JOURNAL_EXEC_INTENT, "s", 1);
	rec(j, JOURNAL_EXEC_RESULT, "s", 1);
	journal_close(j);

	size_t len;
	uint8_t *b = jt_read_file(path_in(dir, "journal"), &len);
	b[first + 30] ^= 0x40;
	jt_write_file(path_in(dir, "journal"), b, len);
	j = open_dir(dir, &rep, &rc, 0, 0);
	CHECK_EQ(rc, -EBADMSG);
	CHECK(j == NULL);
	char want[64];
	snprintf(want, sizeof(want), "at byte %llu", (unsigned long long)first);
	CHECK(strstr(rep.message, want) != NULL);
	CHECK(strstr(rep.message, "/damage/journal") != NULL);
	printf("damage message: %s\n", rep.message);

	struct journal_options o;
	journal_options_defaults(&o);
	o.dir = dir;
	o.repair = true;
	CHECK_EQ(journal_open(&o, &j, &rep), 0);
	CHECK(rep.repaired && rep.records == 1);
	CHECK(strstr(rep.message, "journal.damaged.") != NULL);
	CHECK_EQ(journal_size(j), first);
	journal_close(j);
	free(b);

	/* A zero-filled tail (size grew, data never written) is torn. */
	dir = path_in(root, "zeros");
	j = open_dir(dir, &rep, &rc, 0, 0);
	rec(j, JOURNAL_ATTACH, "s", 0);
	first = journal_size(j);
	journal_close(j);
	FILE *f = fopen(path_in(dir, "journal"), "ab");
	for (int i = 0; i < 100; i++)
		fputc(0, f);
	fclose(f);
	j = open_dir(dir, &rep, &rc, 0, 0);
	CHECK_EQ(rc, 0);
	CHECK(rep.torn_tail && rep.torn_offset == first);
	CHECK_EQ(mode_of(rep.torn_copy), 0600);
	CHECK_EQ(journal_size(j), first);
	journal_close(j);
}

/* Writes a journal of an ATTACH and a long EXEC_INTENT in dir; returns
 * the offset of the second record, *len the file's size. */
static uint64_t two_records(const char *dir, size_t *len)
{
	struct journal_open_report rep;
	int rc;
	struct journal *j = open_dir(dir, &rep, &rc, 0, 0);
	rec(j, JOURNAL_ATTACH, "s", 0);
	uint64_t second = journal_size(j);
	char cmd[3000];
	for (size_t i = 0; i < sizeof(cmd) - 1; i++)
		cmd[i] = (char)('a' + i % 26);
	cmd[sizeof(cmd) - 1] = '\0';
	struct journal_record r = {
	    .kind = JOURNAL_EXEC_INTENT, .sandbox = (char *)"s", .seq = 1, .command = cmd};
	CHECK_EQ(journal_append(j, &r, true), 0);
	*len = (size_t)journal_size(j);
	journal_close(j);
	return second;
}

/* What a power cut leaves on ext4: the last record's header reached the
 * disk, its payload (or the payload's last blocks) reads as zeros. That
 * is a torn tail, cut and kept aside; a flipped bit or zeros that do not
 * reach the end stay damage. */
static void test_zero_filled_last_record(void)
{
	static const struct {
		const char *name;
		size_t from, to; /* zeroed, relative to the payload; to 0: the end */
		bool flip;	 /* flip one bit instead */
		bool torn;
	} cases[] = {
	    {"whole-payload", 0, 0, false, true},
	    {"last-blocks", 1500, 0, false, true},
	    {"crc-and-payload", 0, 0, false, true},
	    {"bit-flip", 0, 0, true, false},
	    {"zeros-in-the-middle", 600, 1800, false, false},
	    {"short-zero-end", 2990, 0, false, false},
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		char name[64];
		snprintf(name, sizeof(name), "powercut-%s", cases[c].name);
		char *dir = strdup(path_in(root, name));
		size_t len;
		uint64_t second = two_records(dir, &len);
		uint8_t *b = jt_read_file(path_in(dir, "journal"), &len);
		size_t payload = (size_t)second + 20;
		if (cases[c].flip) {
			b[payload + 100] ^= 0x08;
		} else {
			size_t from = payload + cases[c].from;
			if (!strcmp(cases[c].name, "crc-and-payload"))
				from = (size_t)second + 16;
			size_t to = cases[c].to ? payload + cases[c].to : len;
			memset(b + from, 0, to - from);
		}
		jt_write_file(path_in(dir, "journal"), b, len);
		free(b);
		struct journal_open_report rep;
		int rc;
		struct journal *j = open_dir(dir, &rep, &rc, 0, 0);
		if (cases[c].torn) {
			CHECK_EQ(rc, 0);
			CHECK(j != NULL);
			CHECK(rep.torn_tail && rep.torn_offset == second);
			CHECK_EQ(mode_of(rep.torn_copy), 0600);
			if (j) {
				CHECK_EQ(journal_size(j), second);
				journal_close(j);
			}
		} else {
			CHECK_EQ(rc, -EBADMSG);
			CHECK(j == NULL);
		}
		free(dir);
	}
}

static void test_compaction(void)
{
	char *dir = path_in(root, "compact");
	struct journal_open_report rep;
	int rc;
	struct journal *j = open_dir(dir, &rep, &rc, 5, 4096);
	rec(j, JOURNAL_ATTACH, "s", 0);
	uint64_t max = 0;
	for (uint64_t q = 1; q <= 300; q++) {
		rec(j, JOURNAL_EXEC_INTENT, "s", q);
		rec(j, JOURNAL_EXEC_RESULT, "s", q);
		if (journal_size(j) > max)
			max = journal_size(j);
	}
	rec(j, JOURNAL_UPLOAD_INTENT, "s", 77);
	/* Compaction kept the file near its bound. */
	CHECK(max < 4096 + 1024);
	struct journal_state before, after;
	CHECK_EQ(journal_snapshot(j, &before), 0);
	CHECK_EQ(before.sandboxes[0].commands_run, 300);
	CHECK_EQ(before.sandboxes[0].nruns, 5);
	CHECK_EQ(before.sandboxes[0].runs[0].seq, 296);
	CHECK_EQ(journal_compact(j), 0);
	journal_close(j);
	CHECK(access(path_in(dir, "journal.new"), F_OK) != 0);
	CHECK_EQ(mode_of(path_in(dir, "journal")), 0600);

	j = open_dir(dir, &rep, &rc, 5, 4096);
	CHECK_EQ(rc, 0);
	CHECK_EQ(journal_snapshot(j, &after), 0);
	CHECK(journal_state_equal(&before, &after));
	CHECK(journal_next_upload_id(j) == 78);
	journal_close(j);
	journal_state_clear(&before);
	journal_state_clear(&after);
}

static void test_dump(void)
{
	char *dir = path_in(root, "dump");
	struct journal_open_report rep;
	int rc;
	struct journal *j = open_dir(dir, &rep, &rc, 0, 0);
	for (int k = 1; k < JOURNAL_KIND_MAX; k++) {
		struct journal_record r;
		jt_sample(&r, (enum journal_kind)k, k);
		if (k == JOURNAL_EXEC_INTENT) {
			free(r.command);
			r.command = malloc(500);
			memset(r.command, 'x', 499);
			r.command[499] = '\0';
		}
		journal_append(j, &r, false);
		journal_record_clear(&r);
	}
	journal_close(j);
	FILE *f = fopen(path_in(dir, "journal"), "ab");
	fwrite("SFJR\1\0", 1, 6, f);
	fclose(f);

	char *out = NULL;
	size_t outlen = 0;
	FILE *m = open_memstream(&out, &outlen);
	CHECK_EQ(journal_dump(path_in(dir, "journal"), m), 1);
	fclose(m);
	fputs(out, stdout);
	int lines = 0;
	for (char *p = out; *p; p++)
		lines += *p == '\n';
	CHECK_EQ(lines, JOURNAL_KIND_MAX - 1 + 1);
	for (int k = 1; k < JOURNAL_KIND_MAX; k++)
		CHECK(strstr(out, journal_kind_name((enum journal_kind)k)) != NULL);
	CHECK(strstr(out, "secret") == NULL && strstr(out, "127.0.0.1") == NULL);
	CHECK(strstr(out, "url=http://…") != NULL &&
	      strstr(out, "url=https://…") != NULL);
	CHECK(strstr(out, "…(500 bytes)") == NULL && strstr(out, "…(499 bytes)") != NULL);
	CHECK(strstr(out, "2025-11-24T") != NULL);
	CHECK(strstr(out, "error=\"HTTP 500: \\xe2\\x80\\x9coops\\xe2\\x80\\x9d\"") !=
	      NULL);
	CHECK(strstr(out, "torn last record at byte") != NULL);
	free(out);

	m = open_memstream(&out, &outlen);
	CHECK_EQ(journal_dump(path_in(root, "no-such-file"), m), -ENOENT);
	fclose(m);
	free(out);
}

static void test_registry(void)
{
	char *a = strdup(path_in(root, "reg-a")), *b = strdup(path_in(root, "reg-b")),
	     *c = strdup(path_in(root, "reg-c"));
	struct journal_open_report rep;
	int rc;
	char *dirs[3] = {a, b, c};
	for (int i = 0; i < 3; i++) {
		for (int twice = 0; twice < 2; twice++) {
			struct journal *j = open_dir(dirs[i], &rep, &rc, 0, 0);
			CHECK_EQ(rc, 0);
			rec(j, JOURNAL_ATTACH, "s", 0);
			rec(j, JOURNAL_DETACH, "s", 0);
			journal_close(j);
		}
	}
	char reg[4096];
	snprintf(reg, sizeof(reg), "%s/xdg-state/sandboxfs/journals", root);
	CHECK_EQ(mode_of(reg), 0600);
	size_t len;
	char *all = (char *)jt_read_file(reg, &len);
	all = jt_realloc(all, len + 1);
	all[len] = '\0';
	for (int i = 0; i < 3; i++) {
		char *first = strstr(all, dirs[i]);
		CHECK(first && !strstr(first + 1, dirs[i]));
	}
	free(all);

	uint8_t *bytes = jt_read_file(path_in(b, "journal"), &len);
	bytes[len - 10] ^= 1;
	jt_write_file(path_in(b, "journal"), bytes, len);
	free(bytes);
	jt_rm_rf(c);

	/* A journal damaged before this mount ever opened it is listed too. */
	char *d = strdup(path_in(root, "reg-d"));
	mkdir(d, 0700);
	jt_write_file(path_in(d, "journal"), "not a journal", 13);
	struct journal *jd = open_dir(d, &rep, &rc, 0, 0);
	CHECK_EQ(rc, -EBADMSG);
	CHECK(jd == NULL && strstr(rep.message, "at byte 0 (bad magic)"));

	char *out = NULL;
	size_t outlen = 0;
	FILE *m = open_memstream(&out, &outlen);
	CHECK_EQ(journal_registry_check(m), 3);
	fclose(m);
	fputs(out, stdout);
	char want[8192];
	snprintf(want, sizeof(want), "ok %s\n", a);
	CHECK(strstr(out, want) != NULL);
	snprintf(want, sizeof(want), "damaged %s: %s/journal: damaged record at byte", b,
		 b);
	CHECK(strstr(out, want) != NULL);
	snprintf(want, sizeof(want), "missing %s\n", c);
	CHECK(strstr(out, want) != NULL);
	snprintf(want, sizeof(want),
		 "damaged %s: %s/journal: damaged record at byte 0 (bad magic)\n", d, d);
	CHECK(strstr(out, want) != NULL);
	free(d);
	free(out);
	free(a);
	free(b);
	free(c);
}

struct worker {
	struct journal *j;
	int id;
};

static void *appender(void *arg)
{
	struct worker *w = arg;
	char sb[16];
	snprintf(sb, sizeof(sb), "t%d", w->id);
	for (uint64_t q = 1; q <= 200; q++) {
		struct journal_record r = {
		    .kind = JOURNAL_EXEC_INTENT, .sandbox = sb, .seq = q};
		r.command = (char *)"echo hi";
		if (journal_append(w->j, &r, q % 50 == 0))
			return (void *)1;
	}
	return NULL;
}

static void test_threads(void)
{
	char *dir = path_in(root, "threads");
	struct journal_open_report rep;
	int rc;
	struct journal_options o;
	journal_options_defaults(&o);
	o.dir = dir;
	o.sync = false;
	o.max_runs = 1000;
	struct journal *j;
	CHECK_EQ(journal_open(&o, &j, &rep), 0);
	pthread_t th[4];
	struct worker w[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){j, i};
		pthread_create(&th[i], NULL, appender, &w[i]);
	}
	for (int i = 0; i < 4; i++) {
		void *res;
		pthread_join(th[i], &res);
		CHECK(res == NULL);
	}
	struct journal_state live;
	journal_snapshot(j, &live);
	journal_close(j);
	j = open_dir(dir, &rep, &rc, 1000, 0);
	CHECK_EQ(rep.records, 800);
	CHECK_EQ(rep.unknown_marked, 800);
	CHECK_EQ(live.count, 4);
	for (size_t i = 0; i < live.count; i++)
		CHECK_EQ(live.sandboxes[i].commands_run, 200);
	journal_state_clear(&live);
	journal_close(j);
}

struct group_worker {
	struct journal *j;
	int id;
	bool results; /* each intent followed by its result, durably too */
	int failed;
};

static void *durable_appender(void *arg)
{
	struct group_worker *w = arg;
	char sb[16];
	snprintf(sb, sizeof(sb), "g%d", w->id);
	for (uint64_t q = 1; q <= 200; q++) {
		struct journal_record r = {.kind = JOURNAL_EXEC_INTENT,
					   .sandbox = sb,
					   .seq = q,
					   .command = (char *)"make -j4 test"};
		if (journal_append(w->j, &r, true))
			w->failed++;
		if (!w->results)
			continue;
		r = (struct journal_record){.kind = JOURNAL_EXEC_RESULT,
					    .sandbox = sb,
					    .seq = q,
					    .exit_code = (int)(q % 3),
					    .out = jt_inline("ok\n", 3)};
		if (journal_append(w->j, &r, true))
			w->failed++;
		free(r.out.data);
	}
	return NULL;
}

/* 8 threads append durably at once: appends share fdatasyncs, and every
 * record is there after a reopen, also with compactions swapping the file
 * between the syncs. */
static void group_commit(const char *name, bool results, size_t max_runs,
			 uint64_t compact)
{
	char *dir = jt_strdup(path_in(root, name));
	struct journal_open_report rep;
	int rc;
	enum { THREADS = 8 };
	size_t appends = THREADS * 200 * (results ? 2 : 1);

	struct journal *j = open_dir(dir, &rep, &rc, max_runs, compact);
	CHECK_EQ(rc, 0);
	/* A slow disk, so that the appends of the other threads queue up
	 * behind each sync however fast this one is. */
	journal_sync_delay_us = 500;
	pthread_t th[THREADS];
	struct group_worker w[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct group_worker){.j = j, .id = i, .results = results};
		CHECK_EQ(pthread_create(&th[i], NULL, durable_appender, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(w[i].failed, 0);
	}
	journal_sync_delay_us = 0;
	uint64_t syncs = journal_append_syncs(j);
	fprintf(stderr, "group commit %s: %zu durable appends, %llu fdatasyncs\n", name,
		appends, (unsigned long long)syncs);
	CHECK(syncs > 0);
	CHECK(syncs <= appends / 2);
	struct journal_state live, replayed;
	CHECK_EQ(journal_snapshot(j, &live), 0);
	journal_close(j);

	j = open_dir(dir, &rep, &rc, max_runs, compact);
	CHECK_EQ(rc, 0);
	CHECK(!rep.torn_tail);
	if (!compact)
		CHECK_EQ(rep.records, appends);
	CHECK_EQ(rep.unknown_marked, results ? 0 : THREADS * 200);
	CHECK_EQ(journal_snapshot(j, &replayed), 0);
	CHECK_EQ(replayed.count, THREADS);
	for (size_t i = 0; i < replayed.count; i++) {
		struct journal_sandbox *sb = &replayed.sandboxes[i];
		CHECK_EQ(sb->commands_run, 200);
		CHECK_EQ(sb->nruns, max_runs < 200 ? max_runs : 200);
		for (size_t k = 0; k < sb->nruns; k++) {
			CHECK_EQ(sb->runs[k].seq, 200 - sb->nruns + k + 1);
			CHECK_EQ(sb->runs[k].status,
				 results ? JOURNAL_RUN_DONE : JOURNAL_RUN_UNKNOWN);
		}
	}
	if (results)
		CHECK(journal_state_equal(&live, &replayed));
	journal_state_clear(&live);
	journal_state_clear(&replayed);
	journal_close(j);
	free(dir);
}

static void test_group_commit(void)
{
	group_commit("group", false, 1000, 0);
	group_commit("group-compacting", true, 20, 16384);
}

int main(void)
{
	root = jt_tmpdir();
	jt_isolate_registry(root);
	test_every_kind_through_file();
	test_private_dir();
	test_unknown_marking();
	test_damage_and_repair();
	test_compaction();
	test_dump();
	test_registry();
	test_zero_filled_last_record(); /* registers damaged journals */
	test_threads();
	test_group_commit();
	int rc = check_done("test_file");
	if (!rc)
		jt_rm_rf(root);
	else
		fprintf(stderr, "scratch kept in %s\n", root);
	free(root);
	return rc;
}
