/*
 * test_workspace_locks — two workspaces of one cache do not wait for each
 * other: while a thread holds one workspace's lock (a reader waiting for a
 * slow download of sandbox A, its interrupted callback called with that
 * lock held and made to linger), lookups and listings of sandbox B are
 * answered at once. With one lock for every workspace they waited until
 * A's callback returned.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "common/clock.h"
#include "wstest.h"

static struct srv S;
static struct backend *B;

#define BIG	 (2 << 20) /* streams on a thread of its own (WS_STREAM_MIN) */
#define LINGER_MS 2000

static atomic_int hooked;     /* the callback lingers now */
static atomic_int hook_armed; /* the next call lingers */

/* Called by a reader's wait with its workspace's lock held. */
static bool lingering_interrupted(void *ctx)
{
	(void)ctx;
	if (atomic_exchange(&hook_armed, 0)) {
		atomic_store(&hooked, 1);
		usleep(LINGER_MS * 1000);
		atomic_store(&hooked, 2);
	}
	return false;
}

static bool is_hooked(void *arg)
{
	(void)arg;
	return atomic_load(&hooked) == 1;
}

static int read_rc;

/* Opens big.bin in A and reads its end: waits for the download. */
static void *reader(void *arg)
{
	struct workspace *ws = arg;
	struct wsopen fi = {.flags = O_RDONLY};
	read_rc = workspace_open(ws, "big.bin", &fi);
	if (read_rc < 0)
		return NULL;
	static char buf[4096];
	atomic_store(&hook_armed, 1);
	read_rc = workspace_read(fi.fh, buf, sizeof(buf), BIG - (off_t)sizeof(buf));
	workspace_release(fi.fh);
	return NULL;
}

int main(int argc, char **argv)
{
	B = wstest_begin(argc, argv, &S, true);
	char cdir[512];
	snprintf(cdir, sizeof(cdir), "%s/cache", S.dir);
	struct wscache_config cfg = {
	    .backend = B,
	    .cache_dir = cdir,
	    .max_bytes = 64 << 20,
	    .listing_ttl_ms = 60000,
	    .uid = getuid(),
	    .gid = getgid(),
	    .interrupted = lingering_interrupted,
	};
	struct wscache *c = wscache_new(&cfg);
	CHECK(c != NULL);
	if (!c)
		return 1;
	char *big = malloc(BIG + 1);
	memset(big, 'x', BIG);
	big[BIG] = '\0';
	srv_put(&S, "big.bin", big);
	free(big);
	srv_put(&S, "small.txt", "small\n");

	struct workspace *a = workspace_get(c, "sbA", S.url);
	struct workspace *b = workspace_get(c, "sbB", S.url);
	struct stat st;
	CHECK_EQ(workspace_getattr(a, "big.bin", &st, 0), 0);
	CHECK_EQ(st.st_size, BIG);
	CHECK_EQ(workspace_getattr(b, "small.txt", &st, 0), 0);

	/* A's download is slow: about 8 s at 256 KiB/s. */
	CHECK(srv_faults(&S, "{\"body_rate_kbps\": 256}"));
	pthread_t t;
	pthread_create(&t, NULL, reader, a);
	CHECK(wait_for(is_hooked, NULL, 10000));

	/* A's lock is held for LINGER_MS: B answers meanwhile. */
	uint64_t t0 = common_now_ms();
	CHECK_EQ(workspace_getattr(b, "small.txt", &st, 0), 0);
	CHECK_EQ(st.st_size, 6);
	CHECK_EQ(workspace_getattr(b, "missing", &st, 0), -ENOENT);
	struct names nm = {0};
	CHECK_EQ(workspace_readdir(b, "", &nm, names_fill, 0, 0, false), 0);
	CHECK(names_has(&nm, "small.txt") && names_has(&nm, "big.bin"));
	names_clear(&nm);
	uint64_t took = common_now_ms() - t0;
	bool still = atomic_load(&hooked) == 1;
	if (took >= LINGER_MS / 2 || !still)
		fprintf(stderr, "  B waited %llu ms for A's lock\n", (unsigned long long)took);
	CHECK(took < LINGER_MS / 2);
	CHECK(still);

	CHECK(srv_faults(&S, "{}"));
	pthread_join(t, NULL);
	CHECK_EQ(read_rc, 4096);

	wscache_free(c);
	backend_free(B);
	srv_stop(&S);
	curl_global_cleanup();
	return check_done("workspace locks");
}
