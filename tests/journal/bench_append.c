/*
 * bench_append.c — journal_append throughput, with and without fdatasync.
 *
 *   bench_append [DIR]   (default: a scratch directory under $TMPDIR)
 */
#include <pthread.h>
#include <time.h>

#include "jtest.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void run(const char *base, const char *name, bool sync, int n, size_t out_bytes)
{
	char dir[4096];
	struct journal_options o;
	struct journal_open_report rep;
	struct journal *j;

	snprintf(dir, sizeof(dir), "%s/%s", base, name);
	journal_options_defaults(&o);
	o.dir = dir;
	o.sync = sync;
	o.compact_bytes = 1ull << 40; /* measure appends, not compaction */
	if (journal_open(&o, &j, &rep)) {
		fprintf(stderr, "open %s: %s\n", dir, rep.message);
		exit(1);
	}
	char *out = malloc(out_bytes + 1);
	memset(out, 'o', out_bytes);
	double t0 = now_s();
	for (int i = 0; i < n; i++) {
		struct journal_record r = {.sandbox = (char *)"bench-sandbox",
					   .seq = (uint64_t)i + 1};
		if (out_bytes) {
			r.kind = JOURNAL_EXEC_RESULT;
			r.out.data = out;
			r.out.len = out_bytes;
			r.duration_ms = 12;
		} else {
			r.kind = JOURNAL_EXEC_INTENT;
			r.command =
			    (char *)"make -j4 test && ./run-integration --verbose";
			r.timeout_s = 60;
		}
		if (journal_append(j, &r, true)) {
			fprintf(stderr, "append failed\n");
			exit(1);
		}
	}
	double dt = now_s() - t0;
	printf("%-28s sync=%-3s %7d records in %6.3f s: %9.0f records/s, %6.1f MB/s\n",
	       name, sync ? "on" : "off", n, dt, n / dt,
	       (double)journal_size(j) / dt / 1e6);
	journal_close(j);
	free(out);
}

struct appender {
	struct journal *j;
	int id, n;
};

static void *append_durably(void *arg)
{
	struct appender *a = arg;
	char sb[32];
	snprintf(sb, sizeof(sb), "bench-sandbox-%d", a->id);
	for (int i = 0; i < a->n; i++) {
		struct journal_record r = {.kind = JOURNAL_EXEC_INTENT,
					   .sandbox = sb,
					   .seq = (uint64_t)i + 1,
					   .command = (char *)"make -j4 test",
					   .timeout_s = 60};
		if (journal_append(a->j, &r, true)) {
			fprintf(stderr, "append failed\n");
			exit(1);
		}
	}
	return NULL;
}

/* Durable appends from several threads at once (several commands or
 * uploads in flight). */
static void run_threads(const char *base, const char *name, int threads, int n)
{
	char dir[4096];
	struct journal_options o;
	struct journal_open_report rep;
	struct journal *j;
	pthread_t th[64];
	struct appender a[64];

	snprintf(dir, sizeof(dir), "%s/%s", base, name);
	journal_options_defaults(&o);
	o.dir = dir;
	o.compact_bytes = 1ull << 40;
	if (journal_open(&o, &j, &rep)) {
		fprintf(stderr, "open %s: %s\n", dir, rep.message);
		exit(1);
	}
	double t0 = now_s();
	for (int i = 0; i < threads; i++) {
		a[i] = (struct appender){j, i, n};
		pthread_create(&th[i], NULL, append_durably, &a[i]);
	}
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	double dt = now_s() - t0;
	printf("%-28s sync=on  %7d records in %6.3f s: %9.0f records/s (%d threads)\n",
	       name, threads * n, dt, threads * n / dt, threads);
	journal_close(j);
}

int main(int argc, char **argv)
{
	char *base = argc > 1 ? strdup(argv[1]) : jt_tmpdir();
	jt_isolate_registry(base);
	run(base, "exec-intent", true, 2000, 0);
	run(base, "exec-intent-nosync", false, 200000, 0);
	run(base, "exec-result-4KiB", true, 1000, 4096);
	run(base, "exec-result-4KiB-nosync", false, 50000, 4096);
	run_threads(base, "exec-intent-8-threads", 8, 250);
	if (argc <= 1)
		jt_rm_rf(base);
	free(base);
	return 0;
}
