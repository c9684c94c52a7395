/*
 * test_workspace_upload — nothing is lost: a failed upload makes flush and
 * fsync return EIO, stays pending (journaled), is retried by the thread
 * once the server's 500 fault clears, survives a crash (a child process
 * that dies without cleanup; a new wscache over the same journal and cache
 * dir restores it), a cache full of dirty data gives ENOSPC, clean data is
 * evicted, and the data of a gone sandbox is kept for rescue.
 */
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
	CHECK_EQ(workspace_getattr(ws, "nothing-here", &st, NULL), -ENOENT);
}

static void test_fail_then_retry(void)
{
	struct journal *j = journal_new();
	struct wscache *c = cache_new(cache_dir, j, 64 << 20);
	struct workspace *ws = workspace_get(c, "sb1", S.url);
	warm(ws);

	CHECK(srv_faults(&S, FAULT_500));
	struct fuse_file_info fi = {.flags = O_WRONLY | O_CREAT};
	CHECK_EQ(workspace_create(ws, "p.txt", 0644, &fi), 0);
	CHECK_EQ(workspace_write(&fi, "pending data", 12, 0), 12);
	CHECK_EQ(workspace_fsync(&fi, 0), -EIO);
	CHECK_EQ(workspace_flush(&fi), -EIO);
	CHECK_EQ(workspace_release(&fi), 0);
	CHECK(!srv_exists(&S, "p.txt"));

	int problems;
	char *h = health_of(c, &problems);
	CHECK(problems >= 1 && h && strstr(h, "1 uploads pending"));
	free(h);
	CHECK_EQ(pending_in_journal(j, "sb1"), 1);

	/* Still readable here, with its local size. */
	struct stat st;
	CHECK_EQ(workspace_getattr(ws, "p.txt", &st, NULL), 0);
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
	struct workspace *ws = workspace_get(c, "sb1", S.url);
	warm(ws);
	int bad = !srv_faults(&S, FAULT_500);
	struct fuse_file_info fi = {.flags = O_WRONLY | O_CREAT};
	bad |= workspace_create(ws, "c1.txt", 0644, &fi) != 0;
	bad |= workspace_write(&fi, "crash data", 10, 0) != 10;
	bad |= workspace_flush(&fi) != -EIO;
	bad |= workspace_release(&fi) != 0;
	/* Written again after its intent, never flushed: the newer bytes
	 * must win at restore. */
	fi = (struct fuse_file_info){.flags = O_WRONLY | O_CREAT};
	bad |= workspace_create(ws, "c2.txt", 0644, &fi) != 0;
	bad |= workspace_write(&fi, "first", 5, 0) != 5;
	bad |= workspace_flush(&fi) != -EIO;
	bad |= workspace_write(&fi, "FIRST+more", 10, 0) != 10;
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
	CHECK(h && strstr(h, "2 uploads pending"));
	free(h);
	workspace_get(c, "sb1", S.url); /* the mount attaches it again */
	CHECK_EQ(wscache_start(c), 0);
	struct want w1 = {"c1.txt", "crash data"}, w2 = {"c2.txt", "FIRST+more"};
	CHECK(wait_for(has_file, &w1, 15000));
	CHECK(wait_for(has_file, &w2, 15000));
	CHECK(wait_for(healthy, c, 5000));
	CHECK_EQ(pending_in_journal(j, "sb1"), 0);
	wscache_free(c);
	journal_close(j);
}

static void test_enospc_and_eviction(void)
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
		char p[800];
		snprintf(p, sizeof(p), "%s/%s", S.ws, rel);
		FILE *f = fopen(p, "wb");
		fwrite(block, 1, 30 << 10, f);
		fclose(f);
	}
	workspace_invalidate(ws);
	for (int i = 0; i < 4; i++) {
		char rel[16];
		snprintf(rel, sizeof(rel), "e%d", i);
		struct fuse_file_info fi = {.flags = O_RDONLY};
		CHECK_EQ(workspace_open(ws, rel, &fi), 0);
		char buf[64];
		CHECK_EQ(workspace_read(&fi, buf, sizeof(buf), 0), 64);
		workspace_release(&fi);
	}
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	wscache_stats(c, out);
	fclose(out);
	long ev = 0;
	char *p = strstr(buf, "cache_evictions ");
	if (p)
		ev = atol(p + strlen("cache_evictions "));
	CHECK(ev >= 2);
	free(buf);

	/* Dirty data is never dropped: writes fail instead. */
	warm(ws);
	CHECK(srv_faults(&S, FAULT_500));
	struct fuse_file_info fi = {.flags = O_WRONLY | O_CREAT};
	CHECK_EQ(workspace_create(ws, "big1", 0644, &fi), 0);
	CHECK_EQ(workspace_write(&fi, block, 40 << 10, 0), 40 << 10);
	CHECK_EQ(workspace_flush(&fi), -EIO);
	workspace_release(&fi);
	fi = (struct fuse_file_info){.flags = O_WRONLY | O_CREAT};
	CHECK_EQ(workspace_create(ws, "big2", 0644, &fi), 0);
	CHECK_EQ(workspace_write(&fi, block, 30 << 10, 0), -ENOSPC);
	CHECK_EQ(workspace_write(&fi, block, 1 << 10, 0), 1 << 10);
	workspace_release(&fi);
	CHECK(srv_faults(&S, "{}"));
	wscache_free(c); /* a last try delivers what is pending */
	size_t n = 0;
	char *got = srv_read(&S, "big1", &n);
	CHECK(got && n == (40 << 10));
	free(got);
	got = srv_read(&S, "big2", &n);
	CHECK(got && n == (1 << 10));
	free(got);
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
	if (argc < 2) {
		fprintf(stderr, "usage: %s SANDBOX-SERVER\n", argv[0]);
		return 2;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	srv_start(&S, argv[1], true);
	setenv("XDG_STATE_HOME", S.dir, 1); /* keep the user's journal registry clean */
	snprintf(state_dir, sizeof(state_dir), "%s/state", S.dir);
	snprintf(cache_dir, sizeof(cache_dir), "%s/cache", state_dir);
	struct backend_config bc;
	backend_config_defaults(&bc);
	B = backend_new(&bc);

	test_fail_then_retry();
	test_crash_restore();
	test_enospc_and_eviction();
	test_gone();
	test_gone_at_restore();

	backend_free(B);
	srv_stop(&S);
	curl_global_cleanup();
	return check_done("workspace upload");
}
