/*
 * test_workspace_upload — nothing is lost: a failed upload makes flush and
 * fsync return EIO, stays pending (journaled), is retried by the thread
 * once the server's 500 fault clears, survives a crash (a child process
 * that dies without cleanup; a new wscache over the same journal and cache
 * dir restores it), unsaved data may take the cache past its bound, clean
 * data is evicted (a closed file larger than the bound first), ENOSPC
 * comes only past the reserve of the cache directory's file system, and
 * the data of a gone sandbox is kept for rescue.
 *
 * And what it costs: a close whose PUT succeeds makes no device flush, a
 * failed one makes its pending upload durable before returning; a cache
 * file written on after its intent is uploaded as it is after a crash of
 * the daemon, and one that no longer matches its intent after a reboot
 * (torn) is never uploaded; the running crc32 of in-order writes equals
 * the file's.
 */
#include <zlib.h>

#include "wstest.h"

static struct srv S;
static struct backend *B;
static char state_dir[512], cache_dir[600];

static const char *FAULT_500 = "{\"error_rate\": 1.0, \"routes\": \"files\"}";

static struct journal *journal_new(void)
{
	struct journal_options o;
	journal_options_defaults(&o);
	o.dir = state_dir;
	struct journal *j = NULL;
	struct journal_open_report rep;
	int rc = journal_open(&o, &j, &rep);
	if (rc < 0) {
		fprintf(stderr, "journal_open: %s\n", rep.message);
		exit(1);
	}
	return j;
}

static struct wscache *cache_new(const char *dir, struct journal *j, uint64_t max)
{
	struct wscache_config cfg = {
	    .backend = B,
	    .journal = j,
	    .cache_dir = dir,
	    .max_bytes = max,
	    .listing_ttl_ms = 60000,
	    .uid = getuid(),
	    .gid = getgid(),
	};
	struct wscache *c = wscache_new(&cfg);
	if (!c) {
		fprintf(stderr, "wscache_new failed\n");
		exit(1);
	}
	return c;
}

static char *health_of(struct wscache *c, int *problems)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	*problems = wscache_health(c, out);
	fclose(out);
	return buf;
}

static long stat_of(struct wscache *c, const char *key)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	wscache_stats(c, out);
	fclose(out);
	char want[64];
	snprintf(want, sizeof(want), "\n%s ", key);
	char *p = buf ? strstr(buf, want) : NULL;
	long v = p ? atol(p + strlen(want)) : -1;
	free(buf);
	return v;
}

/* The checksum journaled by the newest pending intent for path. */
static bool intent_crc(struct journal *j, const char *sandbox, const char *path,
		       uint64_t *size, uint32_t *crc)
{
	struct journal_state st;
	bool found = false;
	uint64_t best = 0;
	if (journal_snapshot(j, &st) < 0)
		return false;
	struct journal_sandbox *sb = journal_state_find(&st, sandbox);
	for (size_t i = 0; sb && i < sb->nuploads; i++) {
		struct journal_upload *u = &sb->uploads[i];
		if (!u->abandoned && u->path && strcmp(u->path, path) == 0 &&
		    u->upload_id > best) {
			best = u->upload_id;
			*size = u->size;
			*crc = u->checksum;
			found = true;
		}
	}
	journal_state_clear(&st);
	return found;
}

static size_t pending_in_journal(struct journal *j, const char *sandbox)
{
	struct journal_state st;
	size_t n = 0;
	if (journal_snapshot(j, &st) < 0)
		return (size_t)-1;
	struct journal_sandbox *sb = journal_state_find(&st, sandbox);
	for (size_t i = 0; sb && i < sb->nuploads; i++)
		n += !sb->uploads[i].abandoned;
	journal_state_clear(&st);
	return n;
}

struct want {
	const char *rel, *data;
};

static bool has_file(void *arg)
{
	struct want *w = arg;
	size_t n;
	char *got = srv_read(&S, w->rel, &n);
	bool ok = got && n == strlen(w->data) && memcmp(got, w->data, n) == 0;
	free(got);
	return ok;
}

static bool healthy(void *arg)
{
	int problems;
	free(health_of(arg, &problems));
	return problems == 0;
}

/* The fault hits listings too: read the root's listing before it. */
static void warm(struct workspace *ws)
{
	struct stat st;
	CHECK_EQ(workspace_getattr(ws, "nothing-here", &st, 0), -ENOENT);
}

static void test_fail_then_retry(void)
{
	struct journal *j = journal_new();
	struct wscache *c = cache_new(cache_dir, j, 64 << 20);
	struct workspace *ws = workspace_get(c, "sb1", S.url);
	warm(ws);

	CHECK(srv_faults(&S, FAULT_500));
	struct wsopen fi = {.flags = O_WRONLY | O_CREAT};
	CHECK_EQ(workspace_create(ws, "p.txt", 0644, &fi), 0);
	CHECK_EQ(workspace_write(fi.fh, "pending data", 12, 0), 12);
	CHECK_EQ(workspace_fsync(fi.fh, 0), -EIO);
	CHECK_EQ(workspace_flush(fi.fh), -EIO);
	CHECK_EQ(workspace_release(fi.fh), 0);
	CHECK(!srv_exists(&S, "p.txt"));

	int problems;
	char *h = health_of(c, &problems);
	CHECK(problems >= 1 && h && strstr(h, "1 uploads pending"));
	free(h);
	CHECK_EQ(pending_in_journal(j, "sb1"), 1);

	/* Still readable here, with its local size. */
	struct stat st;
	CHECK_EQ(workspace_getattr(ws, "p.txt", &st, 0), 0);
	CHECK_EQ(st.st_size, 12);

	/* The fault clears: the thread delivers it, nobody else acts. */
	CHECK(srv_faults(&S, "{}"));
	CHECK_EQ(wscache_start(c), 0);
	struct want w = {"p.txt", "pending data"};
	CHECK(wait_for(has_file, &w, 15000));
	CHECK(wait_for(healthy, c, 5000));
	CHECK_EQ(pending_in_journal(j, "sb1"), 0);

	wscache_free(c);
	journal_close(j);
}

/* The child writes with the fault on and dies without any cleanup. */
static void crash_child(void)
{
	struct backend_config bc;
	backend_config_defaults(&bc);
	B = backend_new(&bc);
	struct journal *j = journal_new();
	struct wscache *c = cache_new(cache_dir, j, 64 << 20);
	struct journal_state st;
	int bad = journal_snapshot(j, &st) != 0;
	bad |= wscache_restore(c, &st) != 0; /* as the daemon does at mount */
	journal_state_clear(&st);
	struct workspace *ws = workspace_get(c, "sb1", S.url);
	warm(ws);
	bad |= !srv_faults(&S, FAULT_500);
	struct wsopen fi = {.flags = O_WRONLY | O_CREAT};
	bad |= workspace_create(ws, "c1.txt", 0644, &fi) != 0;
	bad |= workspace_write(fi.fh, "crash data", 10, 0) != 10;
	bad |= workspace_flush(fi.fh) != -EIO;
	bad |= workspace_release(fi.fh) != 0;
	/* Written on after its intent (a failed upload of a file still
	 * open, as before a command), then the daemon dies before the
	 * close: the intent's bytes are gone, the cache file holds the
	 * user's latest ones, and nothing can have torn them (no reboot). */
	fi = (struct wsopen){.flags = O_WRONLY | O_CREAT};
	bad |= workspace_create(ws, "c2.txt", 0644, &fi) != 0;
	bad |= workspace_write(fi.fh, "first", 5, 0) != 5;
	bad |= workspace_flush(fi.fh) != -EIO;
	bad |= workspace_write(fi.fh, "FIRST+more", 10, 0) != 10;
	_exit(bad ? 3 : 0);
}

static void test_crash_restore(void)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0)
		crash_child();
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(!srv_exists(&S, "c1.txt"));
	CHECK(srv_faults(&S, "{}"));

	struct journal *j = journal_new();
	CHECK_EQ(pending_in_journal(j, "sb1"), 2);
	struct journal_state st;
	CHECK_EQ(journal_snapshot(j, &st), 0);
	struct wscache *c = cache_new(cache_dir, j, 64 << 20);
	CHECK_EQ(wscache_restore(c, &st), 2);
	journal_state_clear(&st);
	int problems;
	char *h = health_of(c, &problems);
	CHECK(h && strstr(h, "2 uploads pending") && !strstr(h, "incomplete"));
	free(h);
	CHECK_EQ(pending_in_journal(j, "sb1"), 2);
	workspace_get(c, "sb1", S.url); /* the mount attaches it again */
	CHECK_EQ(wscache_start(c), 0);
	struct want w1 = {"c1.txt", "crash data"};
	CHECK(wait_for(has_file, &w1, 15000));
	struct want w2 = {"c2.txt", "FIRST+more"};
	CHECK(wait_for(has_file, &w2, 15000));
	CHECK(wait_for(healthy, c, 5000));
	CHECK_EQ(pending_in_journal(j, "sb1"), 0);
	CHECK_EQ(stat_of(c, "uploads_incomplete"), 0);
	wscache_free(c);
	journal_close(j);
}

/* Says the last mount over cache_dir ran in another boot: a power cut
 * (or any reboot) came between. */
static void another_boot(void)
{
	char p[700];
	snprintf(p, sizeof(p), "%s/boot_id", cache_dir);
	FILE *f = fopen(p, "w");
	CHECK(f && fputs("00000000-0000-4000-8000-000000000000\n", f) >= 0);
	if (f)
		fclose(f);
}

/* The child makes r.txt pending, writes on after its intent and dies
 * without any cleanup (no close, no release). */
static void written_on_child(void)
{
	struct backend_config bc;
	backend_config_defaults(&bc);
	B = backend_new(&bc);
	struct journal *j = journal_new();
	struct wscache *c = cache_new(cache_dir, j, 64 << 20);
	struct workspace *ws = workspace_get(c, "sb8", S.url);
	warm(ws);
	int bad = ws_put(ws, "r.txt", "server copy\n", O_CREAT | O_WRONLY) != 0;
	bad |= !srv_faults(&S, FAULT_500);
	struct wsopen fi = {.flags = O_WRONLY | O_TRUNC};
	bad |= workspace_open(ws, "r.txt", &fi) != 0;
	bad |= workspace_write(fi.fh, "first", 5, 0) != 5;
	bad |= workspace_fsync(fi.fh, 0) != -EIO;
	bad |= workspace_write(fi.fh, "+more", 5, 5) != 5;
	_exit(bad ? 3 : 0);
}

/* Written on after its intent too, but the machine rebooted since: a
 * power cut may have torn what was written after the intent's sync, so
 * it is never uploaded: kept aside, said in health, the server's copy
 * left as it is. */
static void test_written_on_then_reboot(void)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0)
		written_on_child();
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(srv_faults(&S, "{}"));
	another_boot();

	struct journal *j = journal_new();
	CHECK_EQ(pending_in_journal(j, "sb8"), 1);
	struct journal_state st;
	CHECK_EQ(journal_snapshot(j, &st), 0);
	struct wscache *c = cache_new(cache_dir, j, 64 << 20);
	CHECK_EQ(wscache_restore(c, &st), 0);
	journal_state_clear(&st);
	CHECK_EQ(pending_in_journal(j, "sb8"), 0);
	int problems;
	char *h = health_of(c, &problems);
	CHECK(problems >= 1 && h &&
	      strstr(h, "interrupted uploads of sandbox sb8 were not retried: their "
			"local copy was incomplete") &&
	      !strstr(h, "pending"));
	free(h);
	workspace_get(c, "sb8", S.url);
	CHECK_EQ(wscache_start(c), 0);
	usleep(500 * 1000);
	CHECK(srv_has(&S, "r.txt", "server copy\n"));
	char p[800];
	snprintf(p, sizeof(p), "%s/incomplete/sb8/r.txt", cache_dir);
	char buf[32] = {0};
	FILE *f = fopen(p, "r");
	CHECK(f && fread(buf, 1, sizeof(buf) - 1, f) == 10 &&
	      strcmp(buf, "first+more") == 0);
	if (f)
		fclose(f);
	CHECK_EQ(stat_of(c, "uploads_incomplete"), 1);
	wscache_free(c);
	journal_close(j);
	snprintf(p, sizeof(p), "%s/incomplete", cache_dir);
	rm_rf(p);
}

/* A close whose PUT succeeds makes no device flush; a failed one makes its
 * pending upload durable (cache file, directory, journal) before it
 * returns; an upload after close returned (an empty create's, at release)
 * is made durable before its PUT. */
static void test_syncs(void)
{
	struct journal *j = journal_new();
	struct wscache *c = cache_new(cache_dir, j, 64 << 20);
	struct workspace *ws = workspace_get(c, "sb6", S.url);
	warm(ws);
	long s0 = stat_of(c, "syncs");
	CHECK(s0 >= 0);
	for (int i = 0; i < 10; i++) {
		char rel[32], data[32];
		snprintf(rel, sizeof(rel), "small%d.txt", i);
		snprintf(data, sizeof(data), "small file %d\n", i);
		CHECK_EQ(ws_put(ws, rel, data, O_CREAT | O_WRONLY), 0);
		struct wsopen fi = {.flags = O_WRONLY};
		CHECK_EQ(workspace_open(ws, rel, &fi), 0);
		CHECK_EQ(workspace_write(fi.fh, "x", 1, 0), 1);
		CHECK_EQ(workspace_fsync(fi.fh, 0), 0);
		CHECK_EQ(workspace_release(fi.fh), 0);
	}
	CHECK(srv_has(&S, "small9.txt", "xmall file 9\n"));
	CHECK_EQ(stat_of(c, "syncs"), s0);
	CHECK_EQ(pending_in_journal(j, "sb6"), 0);

	/* Empty create: uploaded at release, after close said 0. */
	struct wsopen fi = {.flags = O_WRONLY | O_CREAT};
	CHECK_EQ(workspace_create(ws, "empty.txt", 0644, &fi), 0);
	CHECK_EQ(workspace_flush(fi.fh), 0);
	CHECK(stat_of(c, "syncs") > s0);
	CHECK_EQ(workspace_release(fi.fh), 0);
	CHECK(srv_has(&S, "empty.txt", ""));

	long s1 = stat_of(c, "syncs");
	CHECK(srv_faults(&S, FAULT_500));
	CHECK_EQ(ws_put(ws, "failed.txt", "kept durable", O_CREAT | O_WRONLY), -EIO);
	/* fsync of the cache file and of its directory, the journal's sync */
	CHECK(stat_of(c, "syncs") >= s1 + 3);
	CHECK_EQ(pending_in_journal(j, "sb6"), 1);
	CHECK(srv_faults(&S, "{}"));
	CHECK_EQ(wscache_start(c), 0);
	struct want w = {"failed.txt", "kept durable"};
	CHECK(wait_for(has_file, &w, 15000));
	CHECK(wait_for(healthy, c, 5000));
	wscache_free(c);
	journal_close(j);
}

/* A power cut tore the cache file of a pending upload (same size, other
 * bytes): restore does not upload it, keeps it aside, says so in health,
 * and leaves the server's copy as it is. */
static void test_torn_cache_file(void)
{
	struct journal *j = journal_new();
	struct wscache *c = cache_new(cache_dir, j, 64 << 20);
	struct workspace *ws = workspace_get(c, "sb7", S.url);
	warm(ws);
	CHECK_EQ(ws_put(ws, "t.txt", "server copy\n", O_CREAT | O_WRONLY), 0);
	CHECK(srv_faults(&S, FAULT_500));
	CHECK_EQ(ws_put(ws, "t.txt", "local edit\n", O_TRUNC | O_WRONLY), -EIO);
	wscache_free(c); /* its last try fails too: still pending */
	CHECK(srv_faults(&S, "{}"));

	struct journal_state st;
	CHECK_EQ(journal_snapshot(j, &st), 0);
	struct journal_sandbox *sb = journal_state_find(&st, "sb7");
	const char *cache_file = NULL;
	for (size_t i = 0; sb && i < sb->nuploads; i++)
		if (!sb->uploads[i].abandoned)
			cache_file = sb->uploads[i].cache_file;
	CHECK(cache_file != NULL);
	FILE *f = cache_file ? fopen(cache_file, "r+") : NULL;
	CHECK(f && fwrite("\0\0\0\0\0", 1, 5, f) == 5);
	if (f)
		fclose(f);
	another_boot(); /* what tears a cache file: a power cut */

	c = cache_new(cache_dir, j, 64 << 20);
	CHECK_EQ(wscache_restore(c, &st), 0);
	journal_state_clear(&st);
	CHECK_EQ(pending_in_journal(j, "sb7"), 0);
	int problems;
	char *h = health_of(c, &problems);
	CHECK(problems >= 1 && h &&
	      strstr(h, "interrupted uploads of sandbox sb7 were not retried: their "
			"local copy was incomplete") &&
	      !strstr(h, "pending"));
	free(h);
	workspace_get(c, "sb7", S.url);
	CHECK_EQ(wscache_start(c), 0);
	usleep(500 * 1000);
	CHECK(srv_has(&S, "t.txt", "server copy\n"));
	char p[800];
	snprintf(p, sizeof(p), "%s/incomplete/sb7/t.txt", cache_dir);
	char buf[32] = {0};
	f = fopen(p, "r");
	CHECK(f && fread(buf, 1, sizeof(buf) - 1, f) == 11 &&
	      memcmp(buf + 5, " edit\n", 6) == 0);
	if (f)
		fclose(f);
	wscache_free(c);
	journal_close(j);
	snprintf(p, sizeof(p), "%s/incomplete", cache_dir);
	rm_rf(p);
}

/* The crc32 journaled with an intent: summed while writes arrive in order
 * (no pass over the file), read from the file after any other change. */
static void test_running_crc(void)
{
	struct journal *j = journal_new();
	struct wscache *c = cache_new(cache_dir, j, 64 << 20);
	struct workspace *ws = workspace_get(c, "sb5", S.url);
	warm(ws);
	static unsigned char data[300000], other[200000];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 7 + i / 251);
	for (size_t i = 0; i < sizeof(other); i++)
		other[i] = (unsigned char)(i * 13 + 5);
	uint64_t size = 0;
	uint32_t crc = 0;
	CHECK(srv_faults(&S, FAULT_500)); /* intents stay pending: readable */

	/* In order, in chunks: no pass over the file. */
	long passes = stat_of(c, "checksum_passes");
	struct wsopen a = {.flags = O_WRONLY | O_CREAT};
	CHECK_EQ(workspace_create(ws, "seq.bin", 0644, &a), 0);
	for (size_t off = 0; off < sizeof(data); off += 65536) {
		size_t n = sizeof(data) - off < 65536 ? sizeof(data) - off : 65536;
		CHECK_EQ(workspace_write(a.fh, (char *)data + off, n, (off_t)off),
			 (int)n);
	}
	CHECK_EQ(workspace_fsync(a.fh, 0), -EIO);
	CHECK_EQ(stat_of(c, "checksum_passes"), passes);
	CHECK(intent_crc(j, "sb5", "seq.bin", &size, &crc));
	CHECK_EQ(size, sizeof(data));
	CHECK_EQ(crc, (uint32_t)crc32(0, data, sizeof(data)));

	/* Out of order: one pass, the same crc. */
	struct wsopen b = {.flags = O_WRONLY | O_CREAT};
	CHECK_EQ(workspace_create(ws, "rand.bin", 0644, &b), 0);
	CHECK_EQ(workspace_write(b.fh, (char *)data + 100000, 200000, 100000), 200000);
	CHECK_EQ(workspace_write(b.fh, (char *)data, 100000, 0), 100000);
	CHECK_EQ(workspace_fsync(b.fh, 0), -EIO);
	CHECK_EQ(stat_of(c, "checksum_passes"), passes + 1);
	CHECK(intent_crc(j, "sb5", "rand.bin", &size, &crc));
	CHECK_EQ(crc, (uint32_t)crc32(0, data, sizeof(data)));

	/* A rewrite in place, then appends: one pass. */
	CHECK_EQ(workspace_write(b.fh, "zz", 2, 10), 2);
	data[10] = data[11] = 'z';
	CHECK_EQ(workspace_write(b.fh, (char *)other, 1000, sizeof(data)), 1000);
	CHECK_EQ(workspace_fsync(b.fh, 0), -EIO);
	CHECK_EQ(stat_of(c, "checksum_passes"), passes + 2);
	CHECK(intent_crc(j, "sb5", "rand.bin", &size, &crc));
	CHECK_EQ(size, sizeof(data) + 1000);
	CHECK_EQ(crc, (uint32_t)crc32(crc32(0, data, sizeof(data)), other, 1000));

	/* Truncated to nothing, then written in order: summed again. */
	CHECK_EQ(workspace_truncate(ws, "seq.bin", 0, a.fh), 0);
	CHECK_EQ(workspace_write(a.fh, (char *)other, 100000, 0), 100000);
	CHECK_EQ(workspace_write(a.fh, (char *)other + 100000, 100000, 100000), 100000);
	CHECK_EQ(workspace_fsync(a.fh, 0), -EIO);
	CHECK_EQ(stat_of(c, "checksum_passes"), passes + 2);
	CHECK(intent_crc(j, "sb5", "seq.bin", &size, &crc));
	CHECK_EQ(crc, (uint32_t)crc32(0, other, sizeof(other)));

	/* Cut short: one pass. */
	CHECK_EQ(workspace_truncate(ws, "seq.bin", 4096, a.fh), 0);
	CHECK_EQ(workspace_fsync(a.fh, 0), -EIO);
	CHECK_EQ(stat_of(c, "checksum_passes"), passes + 3);
	CHECK(intent_crc(j, "sb5", "seq.bin", &size, &crc));
	CHECK_EQ(size, 4096);
	CHECK_EQ(crc, (uint32_t)crc32(0, other, 4096));

	/* The server gets those bytes once the fault clears. */
	CHECK(srv_faults(&S, "{}"));
	CHECK_EQ(workspace_flush(a.fh), 0);
	CHECK_EQ(workspace_flush(b.fh), 0);
	workspace_release(a.fh);
	workspace_release(b.fh);
	size_t n = 0;
	char *got = srv_read(&S, "seq.bin", &n);
	CHECK(got && n == 4096 && memcmp(got, other, 4096) == 0);
	free(got);
	got = srv_read(&S, "rand.bin", &n);
	CHECK(got && n == sizeof(data) + 1000 && memcmp(got, data, sizeof(data)) == 0 &&
	      memcmp(got + sizeof(data), other, 1000) == 0);
	free(got);
	CHECK(healthy(c));
	wscache_free(c);
	journal_close(j);
}

/* Reads rel whole through a handle; returns the bytes read or -errno. */
static long ws_read_all(struct workspace *ws, const char *rel)
{
	struct wsopen fi = {.flags = O_RDONLY};
	int rc = workspace_open(ws, rel, &fi);
	if (rc < 0)
		return rc;
	static char buf[16 << 10];
	long total = 0;
	for (;;) {
		int n = workspace_read(fi.fh, buf, sizeof(buf), total);
		if (n <= 0) {
			if (n < 0)
				total = n;
			break;
		}
		total += n;
	}
	workspace_release(fi.fh);
	return total;
}

static void srv_fill(const char *rel, size_t size, char c)
{
	char *data = malloc(size + 1);
	memset(data, c, size);
	data[size] = '\0';
	srv_put(&S, rel, data);
	free(data);
}

/* max_bytes bounds the copies kept, not a file in use: clean copies are
 * evicted to make room, a file being written or read may take the cache
 * past the bound, and once closed and clean the largest goes first. */
static void test_bound(void)
{
	char dir[700];
	snprintf(dir, sizeof(dir), "%s/small", S.dir);
	struct wscache *c = cache_new(dir, NULL, 64 << 10);
	struct workspace *ws = workspace_get(c, "sb1", S.url);
	static char block[40 << 10];
	memset(block, 'z', sizeof(block));

	/* Clean copies are evicted to make room. */
	for (int i = 0; i < 4; i++) {
		char rel[16];
		snprintf(rel, sizeof(rel), "e%d", i);
		srv_fill(rel, 30 << 10, 'e');
	}
	workspace_invalidate(ws);
	for (int i = 0; i < 4; i++) {
		char rel[16];
		snprintf(rel, sizeof(rel), "e%d", i);
		CHECK_EQ(ws_read_all(ws, rel), 30 << 10);
	}
	CHECK(stat_of(c, "cache_evictions") >= 2);
	CHECK(stat_of(c, "cache_bytes") <= 64 << 10);

	/* Unsaved data is never dropped, and may take the cache past its
	 * bound: the writes go on. */
	warm(ws);
	CHECK(srv_faults(&S, FAULT_500));
	struct wsopen fi = {.flags = O_WRONLY | O_CREAT};
	CHECK_EQ(workspace_create(ws, "big1", 0644, &fi), 0);
	CHECK_EQ(workspace_write(fi.fh, block, 40 << 10, 0), 40 << 10);
	CHECK_EQ(workspace_flush(fi.fh), -EIO);
	workspace_release(fi.fh);
	fi = (struct wsopen){.flags = O_WRONLY | O_CREAT};
	CHECK_EQ(workspace_create(ws, "big2", 0644, &fi), 0);
	CHECK_EQ(workspace_write(fi.fh, block, 40 << 10, 0), 40 << 10);
	CHECK_EQ(workspace_write(fi.fh, block, 40 << 10, 40 << 10), 40 << 10);
	CHECK(stat_of(c, "cache_bytes") >= 120 << 10);
	CHECK_EQ(stat_of(c, "cache_enospc"), 0);
	CHECK(srv_faults(&S, "{}"));
	CHECK_EQ(workspace_flush(fi.fh), 0);
	workspace_release(fi.fh);
	/* Saved and closed, the file larger than the bound went at once; the
	 * copies kept are e2 and e3, and big1 waits for its retry. */
	CHECK_EQ(stat_of(c, "cache_kept_bytes"), 60 << 10);
	CHECK_EQ(stat_of(c, "cache_bytes"), 100 << 10);
	fi = (struct wsopen){.flags = O_WRONLY};
	CHECK_EQ(workspace_open(ws, "big1", &fi), 0);
	CHECK_EQ(workspace_fsync(fi.fh, 0), 0);
	workspace_release(fi.fh);
	CHECK(stat_of(c, "cache_kept_bytes") <= 64 << 10);

	/* A file larger than the bound is read whole, and goes first once
	 * closed: a small copy read before it stays. */
	srv_fill("small", 10 << 10, 's');
	srv_fill("large", 200 << 10, 'l');
	workspace_invalidate(ws);
	CHECK_EQ(ws_read_all(ws, "small"), 10 << 10);
	long ev = stat_of(c, "cache_evictions");
	CHECK_EQ(ws_read_all(ws, "large"), 200 << 10);
	CHECK(stat_of(c, "cache_bytes") <= 64 << 10);
	CHECK(stat_of(c, "cache_evictions") >= ev + 1);
	long misses = stat_of(c, "cache_misses");
	CHECK_EQ(ws_read_all(ws, "small"), 10 << 10);
	CHECK_EQ(stat_of(c, "cache_misses"), misses); /* still there */
	wscache_free(c);
	size_t n = 0;
	char *got = srv_read(&S, "big1", &n);
	CHECK(got && n == (40 << 10));
	free(got);
	got = srv_read(&S, "big2", &n);
	CHECK(got && n == (80 << 10));
	free(got);
}

/* The reserve of the cache directory's file system is the limit: here all
 * of it (100 %), so that any growth is past it: ENOSPC, said in health,
 * and nothing else refused. */
static void test_reserve(void)
{
	char dir[700];
	snprintf(dir, sizeof(dir), "%s/reserve", S.dir);
	struct wscache_config cfg = {
	    .backend = B,
	    .cache_dir = dir,
	    .listing_ttl_ms = 60000,
	    .reserve_percent = 100,
	    .uid = getuid(),
	    .gid = getgid(),
	};
	struct wscache *c = wscache_new(&cfg);
	CHECK(c != NULL);
	if (!c)
		return;
	struct workspace *ws = workspace_get(c, "sb1", S.url);
	srv_fill("r1", 1000, 'r');
	workspace_invalidate(ws);
	int problems;
	char *h = health_of(c, &problems);
	CHECK(problems == 0);
	free(h);
	/* No room for a download. */
	CHECK_EQ(ws_read_all(ws, "r1"), -ENOSPC);
	CHECK_EQ(stat_of(c, "cache_enospc"), 1);
	h = health_of(c, &problems);
	CHECK(problems == 1 && h && strstr(h, "above the reserve the cache leaves free"));
	free(h);
	/* An empty file is no growth: created and saved; a write is not. */
	struct wsopen fi = {.flags = O_WRONLY | O_CREAT};
	CHECK_EQ(workspace_create(ws, "w1", 0644, &fi), 0);
	CHECK_EQ(workspace_write(fi.fh, "abc", 3, 0), -ENOSPC);
	CHECK_EQ(workspace_truncate(NULL, NULL, 10, fi.fh), -ENOSPC);
	CHECK_EQ(workspace_flush(fi.fh), 0);
	workspace_release(fi.fh);
	CHECK(srv_has(&S, "w1", ""));
	wscache_free(c);

	/* The same cache directory with the usual reserve: room again, and
	 * health is well. */
	cfg.reserve_percent = 0;
	c = wscache_new(&cfg);
	ws = workspace_get(c, "sb1", S.url);
	CHECK_EQ(ws_read_all(ws, "r1"), 1000);
	/* No file system has room for this. */
	CHECK_EQ(workspace_truncate(ws, "w1", INT64_MAX, 0), -ENOSPC);
	CHECK(!healthy(c));
	CHECK_EQ(ws_put(ws, "w1", "abc", O_WRONLY), 0);
	CHECK(srv_has(&S, "w1", "abc"));
	CHECK(healthy(c));
	wscache_free(c);
}

static void test_gone(void)
{
	struct journal *j = journal_new();
	struct wscache *c = cache_new(cache_dir, j, 64 << 20);
	struct workspace *ws = workspace_get(c, "sb9", S.url);
	warm(ws);
	CHECK(srv_faults(&S, FAULT_500));
	CHECK_EQ(workspace_mkdir(ws, "docs", 0755), -EIO);
	CHECK_EQ(ws_put(ws, "g.txt", "rescue me", O_CREAT | O_WRONLY), -EIO);
	CHECK(srv_faults(&S, "{}"));
	workspace_sandbox_gone(ws);
	CHECK_EQ(pending_in_journal(j, "sb9"), 0);
	int problems;
	char *h = health_of(c, &problems);
	CHECK(problems >= 1 && h && strstr(h, "data of gone sandbox sb9 is kept in "));
	free(h);
	char p[800];
	snprintf(p, sizeof(p), "%s/rescue/sb9/g.txt", cache_dir);
	FILE *f = fopen(p, "r");
	char buf[32] = {0};
	CHECK(f && fread(buf, 1, sizeof(buf) - 1, f) == 9 &&
	      strcmp(buf, "rescue me") == 0);
	if (f)
		fclose(f);
	CHECK(!srv_exists(&S, "g.txt"));
	wscache_free(c);
	journal_close(j);
}

/* A sandbox deleted while an upload of it was pending: the next mount
 * keeps the data for rescue instead of retrying forever. */
static void test_gone_at_restore(void)
{
	struct journal *j = journal_new();
	struct wscache *c = cache_new(cache_dir, j, 64 << 20);
	struct workspace *ws = workspace_get(c, "sb8", S.url);
	warm(ws);
	CHECK(srv_faults(&S, FAULT_500));
	CHECK_EQ(ws_put(ws, "lost.txt", "save me", O_CREAT | O_WRONLY), -EIO);
	wscache_free(c); /* its last try fails too: still pending */
	CHECK(srv_faults(&S, "{}"));
	CHECK_EQ(pending_in_journal(j, "sb8"), 1);
	struct journal_record r = {.kind = JOURNAL_DELETE_INTENT, .sandbox = "sb8"};
	CHECK_EQ(journal_append(j, &r, true), 0);
	r.kind = JOURNAL_DELETED;
	CHECK_EQ(journal_append(j, &r, true), 0);

	struct journal_state st;
	CHECK_EQ(journal_snapshot(j, &st), 0);
	c = cache_new(cache_dir, j, 64 << 20);
	CHECK_EQ(wscache_restore(c, &st), 0);
	journal_state_clear(&st);
	CHECK_EQ(pending_in_journal(j, "sb8"), 0);
	int problems;
	char *h = health_of(c, &problems);
	CHECK(h && strstr(h, "data of gone sandbox sb8 is kept in ") &&
	      !strstr(h, "pending"));
	free(h);
	char p[800];
	snprintf(p, sizeof(p), "%s/rescue/sb8/lost.txt", cache_dir);
	FILE *f = fopen(p, "r");
	char buf[32] = {0};
	CHECK(f && fread(buf, 1, sizeof(buf) - 1, f) == 7 && strcmp(buf, "save me") == 0);
	if (f)
		fclose(f);
	CHECK(!srv_exists(&S, "lost.txt"));
	wscache_free(c);
	journal_close(j);
}

int main(int argc, char **argv)
{
	B = wstest_begin(argc, argv, &S, true);
	setenv("XDG_STATE_HOME", S.dir, 1); /* keep the user's journal registry clean */
	snprintf(state_dir, sizeof(state_dir), "%s/state", S.dir);
	snprintf(cache_dir, sizeof(cache_dir), "%s/cache", state_dir);

	test_fail_then_retry();
	test_crash_restore();
	test_written_on_then_reboot();
	test_syncs();
	test_torn_cache_file();
	test_running_crc();
	test_bound();
	test_reserve();
	test_gone();
	test_gone_at_restore();

	backend_free(B);
	srv_stop(&S);
	curl_global_cleanup();
	return check_done("workspace upload");
}
