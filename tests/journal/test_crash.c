/*
 * test_crash.c — crash tests: a sample journal cut at every byte offset,
 * every byte flipped, and a crash injected at each step of compaction.
 */
#include <sys/mman.h>
#include <sys/wait.h>

#include "jtest.h"

static char *root;
static uint8_t *orig;
static size_t orig_len;
static struct journal_record recs[64];
static size_t bounds[65]; /* bounds[i]: offset where record i starts */
static size_t nrecs;

static const char *jpath(const char *dir)
{
	static char p[8192];
	snprintf(p, sizeof(p), "%s/journal", dir);
	return p;
}

static void fresh_dir(const char *dir)
{
	jt_rm_rf(dir);
	mkdir(dir, 0700);
}

static struct journal *open_dir(const char *dir, bool repair, int *rc,
				struct journal_open_report *rep)
{
	struct journal_options o;
	struct journal *j = NULL;
	journal_options_defaults(&o);
	o.dir = dir;
	o.sync = false; /* the disk is not what is under test here */
	o.repair = repair;
	o.max_runs = 4;
	*rc = journal_open(&o, &j, rep);
	return j;
}

static void add(struct journal *j, enum journal_kind kind, const char *sb, uint64_t seq)
{
	struct journal_record r;
	jt_sample(&r, kind, (int)seq);
	free(r.sandbox);
	r.sandbox = strdup(sb);
	r.seq = seq;
	if (kind == JOURNAL_UPLOAD_INTENT || kind == JOURNAL_UPLOAD_DONE)
		r.upload_id = seq;
	CHECK_EQ(journal_append(j, &r, false), 0);
	journal_record_clear(&r);
}

/* A journal with every kind, intents with and without outcomes, runs
 * beyond the history bound. */
static void build_sample(void)
{
	char dir[4096];
	struct journal_open_report rep;
	int rc;
	snprintf(dir, sizeof(dir), "%s/sample", root);
	struct journal *j = open_dir(dir, false, &rc, &rep);
	add(j, JOURNAL_CREATE_INTENT, "a", 0);
	add(j, JOURNAL_CREATED, "a", 0);
	add(j, JOURNAL_SET_TIMEOUT, "a", 0);
	for (uint64_t q = 1; q <= 6; q++) {
		add(j, JOURNAL_EXEC_INTENT, "a", q);
		add(j, q % 3 ? JOURNAL_EXEC_RESULT : JOURNAL_EXEC_NOT_RUN, "a", q);
	}
	add(j, JOURNAL_EXEC_INTENT, "a", 7);
	add(j, JOURNAL_UPLOAD_INTENT, "a", 1);
	add(j, JOURNAL_UPLOAD_INTENT, "a", 2);
	add(j, JOURNAL_UPLOAD_DONE, "a", 1);
	add(j, JOURNAL_ATTACH, "b", 0);
	add(j, JOURNAL_EXEC_INTENT, "b", 1);
	add(j, JOURNAL_EXEC_UNKNOWN, "b", 1);
	add(j, JOURNAL_UPLOAD_ABANDONED, "b", 5);
	add(j, JOURNAL_DETACH, "b", 0);
	add(j, JOURNAL_CREATE_INTENT, "c", 0);
	add(j, JOURNAL_CREATE_FAILED, "c", 0);
	add(j, JOURNAL_CREATE_INTENT, "d", 0);
	add(j, JOURNAL_CREATE_UNKNOWN, "d", 0);
	add(j, JOURNAL_CREATE_RECONCILED, "d", 0);
	add(j, JOURNAL_DELETE_INTENT, "d", 0);
	add(j, JOURNAL_DELETE_UNCONFIRMED, "d", 0);
	add(j, JOURNAL_DELETE_INTENT, "d", 0);
	add(j, JOURNAL_DELETED, "d", 0);
	add(j, JOURNAL_CREATE_INTENT, "e", 0);
	add(j, JOURNAL_DELETE_INTENT, "a", 0);
	journal_close(j);

	orig = jt_read_file(jpath(dir), &orig_len);
	size_t off = 0, used;
	while (off < orig_len && nrecs < 64) {
		bounds[nrecs] = off;
		CHECK_EQ(journal_decode(orig + off, orig_len - off, &recs[nrecs], &used),
			 JOURNAL_DECODE_OK);
		off += used;
		nrecs++;
	}
	bounds[nrecs] = off;
	CHECK_EQ(off, orig_len);
	printf("sample journal: %zu records, %zu bytes\n", nrecs, orig_len);
}

static enum journal_scan_end scan_fd(int fd, struct jt_collect *c)
{
	struct journal_scan_result res;
	journal_scan(fd, jt_collect_one, c, &res);
	return res.end;
}

static bool is_mark(enum journal_kind k)
{
	return k == JOURNAL_EXEC_UNKNOWN || k == JOURNAL_CREATE_UNKNOWN ||
	       k == JOURNAL_DELETE_UNCONFIRMED;
}

/* After an open, the file holds the first m sample records, then only the
 * marks that open appended, and the live state is the replay of it. */
static void check_prefix_file(const char *dir, struct journal *j, size_t m, size_t marks)
{
	struct jt_collect c = {0};
	int fd = open(jpath(dir), O_RDONLY);
	CHECK_EQ(scan_fd(fd, &c), JOURNAL_SCAN_WHOLE);
	close(fd);
	CHECK_EQ(c.n, m + marks);
	bool same = c.n >= m;
	for (size_t i = 0; i < m && i < c.n; i++)
		same = same && journal_record_equal(&c.v[i], &recs[i]);
	CHECK(same);
	for (size_t i = m; i < c.n; i++)
		CHECK(is_mark(c.v[i].kind));
	struct journal_state replay, live;
	journal_state_init(&replay, 4);
	for (size_t i = 0; i < c.n; i++)
		journal_state_apply(&replay, &c.v[i]);
	CHECK_EQ(journal_snapshot(j, &live), 0);
	CHECK(journal_state_equal(&replay, &live));
	journal_state_clear(&replay);
	journal_state_clear(&live);
	jt_collect_clear(&c);
}

static void test_cut_everywhere(void)
{
	char dir[4096];
	int opened = 0, torn = 0;
	snprintf(dir, sizeof(dir), "%s/cut", root);
	for (size_t k = 0; k <= orig_len; k++) {
		struct journal_open_report rep;
		int rc;
		size_t m = 0;
		while (m < nrecs && bounds[m + 1] <= k)
			m++;
		fresh_dir(dir);
		jt_write_file(jpath(dir), orig, k);
		struct journal *j = open_dir(dir, false, &rc, &rep);
		CHECK_EQ(rc, 0);
		if (!j)
			continue;
		opened++;
		CHECK_EQ(rep.records, m);
		CHECK_EQ(rep.torn_tail, k != bounds[m]);
		if (rep.torn_tail) {
			torn++;
			CHECK_EQ(rep.torn_offset, bounds[m]);
			size_t tl;
			uint8_t *tail = jt_read_file(rep.torn_copy, &tl);
			CHECK(tail && tl == k - bounds[m] &&
			      memcmp(tail, orig + bounds[m], tl) == 0);
			free(tail);
		}
		check_prefix_file(dir, j, m, rep.unknown_marked);
		journal_close(j);
	}
	CHECK_EQ(opened, orig_len + 1);
	printf("cut at every offset: %d opens, %d torn tails reported and cut\n", opened,
	       torn);
}

static void test_flip_every_byte(void)
{
	char dir[4096];
	int damaged = 0, torn = 0, scans = 0;
	uint8_t *b = malloc(orig_len);
	snprintf(dir, sizeof(dir), "%s/flip", root);
	for (size_t i = 0; i < orig_len; i++) {
		struct journal_open_report rep;
		int rc;
		size_t m = 0;
		while (m < nrecs && bounds[m + 1] <= i)
			m++;
		memcpy(b, orig, orig_len);
		b[i] ^= 0xff;
		fresh_dir(dir);
		jt_write_file(jpath(dir), b, orig_len);
		struct journal *j = open_dir(dir, false, &rc, &rep);
		/* Never accepted: refused as damage, or cut as torn. */
		CHECK(rc == -EBADMSG || (rc == 0 && rep.torn_tail));
		if (rc == -EBADMSG) {
			damaged++;
			char want[64];
			snprintf(want, sizeof(want), "at byte %zu ", bounds[m]);
			CHECK(strstr(rep.message, want) != NULL);
		} else if (j) {
			torn++;
			check_prefix_file(dir, j, m, rep.unknown_marked);
		}
		journal_close(j);
		/* Repair keeps exactly the records before the bad one. */
		j = open_dir(dir, true, &rc, &rep);
		CHECK_EQ(rc, 0);
		CHECK_EQ(rep.records, m);
		if (j)
			check_prefix_file(dir, j, m, rep.unknown_marked);
		journal_close(j);
	}
	/* Every single-bit flip, at the reader: never a record that differs. */
	int fd = memfd_create("flip", MFD_CLOEXEC);
	for (size_t i = 0; i < orig_len; i++) {
		for (int bit = 0; bit < 8; bit++) {
			struct jt_collect c = {0};
			memcpy(b, orig, orig_len);
			b[i] ^= (uint8_t)(1u << bit);
			CHECK(ftruncate(fd, 0) == 0);
			CHECK(pwrite(fd, b, orig_len, 0) == (ssize_t)orig_len);
			enum journal_scan_end end = scan_fd(fd, &c);
			CHECK(end == JOURNAL_SCAN_DAMAGED || end == JOURNAL_SCAN_TORN);
			bool prefix = c.n <= nrecs;
			for (size_t k = 0; k < c.n && prefix; k++)
				prefix = journal_record_equal(&c.v[k], &recs[k]);
			CHECK(prefix);
			jt_collect_clear(&c);
			scans++;
		}
	}
	close(fd);
	free(b);
	CHECK_EQ(damaged + torn, orig_len);
	printf("flip every byte: %d refused as damaged, %d cut as torn; %d bit flips all "
	       "caught\n",
	       damaged, torn, scans);
}

/* A crash (the child exits) right after each compaction step leaves the old
 * or the new journal whole, replaying to the same state. */
static void test_compaction_crash(void)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/compact", root);
	for (int step = 1; step <= 6; step++) {
		struct journal_open_report rep;
		int rc;
		fresh_dir(dir);
		/* The sample, opened once so its marks are written. */
		jt_write_file(jpath(dir), orig, orig_len);
		struct journal *j = open_dir(dir, false, &rc, &rep);
		struct journal_state before;
		CHECK_EQ(journal_snapshot(j, &before), 0);
		journal_close(j);
		size_t old_len, new_len = 0;
		uint8_t *old = jt_read_file(jpath(dir), &old_len);

		/* The bytes compaction writes. */
		struct journal_record *v;
		size_t n;
		CHECK_EQ(journal_state_records(&before, &v, &n), 0);
		uint8_t *want_new = NULL;
		for (size_t i = 0; i < n; i++) {
			uint8_t *buf;
			size_t len;
			journal_encode(&v[i], &buf, &len);
			want_new = jt_realloc(want_new, new_len + len);
			memcpy(want_new + new_len, buf, len);
			new_len += len;
			free(buf);
			journal_record_clear(&v[i]);
		}
		free(v);
		CHECK(new_len < old_len);

		pid_t pid = fork();
		if (pid == 0) {
			struct journal *cj = open_dir(dir, false, &rc, &rep);
			if (!cj)
				_exit(2);
			journal_crash_step = step;
			journal_compact(cj);
			_exit(3);
		}
		int status = 0;
		waitpid(pid, &status, 0);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 99);

		size_t now_len;
		uint8_t *now = jt_read_file(jpath(dir), &now_len);
		bool is_old = now_len == old_len && memcmp(now, old, old_len) == 0;
		bool is_new = now_len == new_len && memcmp(now, want_new, new_len) == 0;
		CHECK(is_old || is_new);
		CHECK(step >= 5 ? is_new : is_old);
		if (step <= 4)
			CHECK(access(jpath(dir), F_OK) == 0);

		j = open_dir(dir, false, &rc, &rep);
		CHECK_EQ(rc, 0);
		CHECK(!rep.torn_tail && rep.unknown_marked == 0);
		char leftover[4200];
		snprintf(leftover, sizeof(leftover), "%s/journal.new", dir);
		CHECK(access(leftover, F_OK) != 0);
		struct journal_state after;
		CHECK_EQ(journal_snapshot(j, &after), 0);
		CHECK(journal_state_equal(&before, &after));
		journal_close(j);
		printf("compaction crash after step %d: %s journal whole, same state\n",
		       step, is_new ? "new" : "old");
		journal_state_clear(&before);
		journal_state_clear(&after);
		free(old);
		free(now);
		free(want_new);
	}
}

int main(void)
{
	root = jt_tmpdir();
	jt_isolate_registry(root);
	build_sample();
	test_cut_everywhere();
	test_flip_every_byte();
	test_compaction_crash();
	for (size_t i = 0; i < nrecs; i++)
		journal_record_clear(&recs[i]);
	free(orig);
	int rc = check_done("test_crash");
	if (!rc)
		jt_rm_rf(root);
	else
		fprintf(stderr, "scratch kept in %s\n", root);
	free(root);
	return rc;
}
