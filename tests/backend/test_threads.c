/*
 * test_threads.c — connection reuse (1,000 small calls open a handful of
 * connections, counted by the server) and 16 threads using one backend at
 * once, with byte-exact results and consistent statistics. Run it under
 * ThreadSanitizer (meson -Db_sanitize=thread) to check for races.
 */
#include <pthread.h>
#include <unistd.h>

#include "backend_i.h"
#include "check.h"
#include "harness.h"

#define NTHREADS 16
#define ROUNDS	 25

static struct server srv;
static struct backend *b;

static void reuse(void)
{
	struct backend *one = backend_new(NULL);
	struct backend_error e;
	struct backend_stats s;
	struct backend_listing l;
	long before, after;
	int ok = 0, fd = temp_fd(64, 9), out = temp_fd(0, 0);

	before = admin_stat(srv.url, "connections");
	for (int i = 0; i < 1000; i++) {
		enum backend_status st;

		switch ((i + 3) % 4) {
		case 0:
			st = backend_health(one, srv.url, &e);
			break;
		case 1:
			st = backend_list(one, srv.url, "reuse", &l, &e);
			backend_listing_clear(&l);
			break;
		case 2:
			st = ftruncate(out, 0) == 0 ? BACKEND_OK : BACKEND_LOCAL;
			st = st != BACKEND_OK
				 ? st
				 : backend_file_get(one, srv.url, "reuse/small", out,
						    NULL, &e);
			break;
		default:
			st = backend_file_put(one, srv.url, "reuse/small", fd, 64, &e);
			break;
		}
		ok += st == BACKEND_OK;
	}
	after = admin_stat(srv.url, "connections");
	backend_get_stats(one, &s);
	CHECK(ok == 1000);
	/* The second admin_stat opened one connection of its own. */
	printf("connection reuse: 1000 small calls (health, list, get, put) opened %ld "
	       "connection(s) by the server's count, %llu by the backend's; p50 %llu us, "
	       "p99 %llu us\n",
	       after - before - 1, (unsigned long long)s.connections_opened,
	       (unsigned long long)s.latency_p50_us,
	       (unsigned long long)s.latency_p99_us);
	CHECK(after - before - 1 >= 1 && after - before - 1 <= 3);
	CHECK(s.connections_opened == (uint64_t)(after - before - 1));
	backend_free(one);
	close(fd);
	close(out);
}

struct worker {
	int id;
	int failures;
	int execs_ok, execs_busy;
	uint64_t calls;
};

static void *work(void *p)
{
	struct worker *w = p;
	struct backend_error e;
	struct backend_listing l;
	struct backend_exec_result r;
	char path[64], dir[32];

	snprintf(dir, sizeof(dir), "t%02d", w->id);
	for (int i = 0; i < ROUNDS; i++) {
		size_t size = (size_t)(w->id * 1000 + i * 313) % 70000;
		int in = temp_fd(size, (unsigned)(w->id * 100 + i)), out = temp_fd(0, 0);
		uint64_t got = 0;
		enum backend_status st;

		snprintf(path, sizeof(path), "%s/f %d#?.bin", dir, i % 5);
		w->failures +=
		    backend_file_put(b, srv.url, path, in, size, &e) != BACKEND_OK;
		w->failures +=
		    backend_file_get(b, srv.url, path, out, &got, &e) != BACKEND_OK;
		w->failures +=
		    got != size || !fd_matches(out, size, (unsigned)(w->id * 100 + i));
		w->failures += backend_list(b, srv.url, dir, &l, &e) != BACKEND_OK;
		w->failures += l.count < 1 || l.count > 5 || l.dropped != 0;
		backend_listing_clear(&l);
		w->failures += backend_health(b, srv.url, &e) != BACKEND_OK;
		w->calls += 4;
		if (i % 5 == 0) {
			/* One seat for 16 threads: busy is an answer too. */
			st = backend_execute(b, srv.url, "echo hi", 30, &r, &e);
			if (st == BACKEND_OK)
				w->execs_ok +=
				    r.exit_code == 0 && strcmp(r.out, "hi\n") == 0;
			else if (st == BACKEND_CONFLICT)
				w->execs_busy++;
			else
				w->failures++;
			backend_exec_result_clear(&r);
			w->calls++;
		}
		close(in);
		close(out);
	}
	return NULL;
}

static void threads(void)
{
	pthread_t t[NTHREADS];
	struct worker w[NTHREADS];
	struct backend_stats s0, s;
	long before = admin_stat(srv.url, "connections"), after;
	uint64_t calls = 0, total = 0;
	int failures = 0, ok = 0, busy = 0;

	backend_get_stats(b, &s0);
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){.id = i};
		pthread_create(&t[i], NULL, work, &w[i]);
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(t[i], NULL);
		failures += w[i].failures;
		calls += w[i].calls;
		ok += w[i].execs_ok;
		busy += w[i].execs_busy;
	}
	after = admin_stat(srv.url, "connections");
	backend_get_stats(b, &s);
	for (int i = 0; i < BACKEND_NOPS; i++)
		total += s.requests[i] - s0.requests[i];
	CHECK(failures == 0);
	CHECK(total == calls);
	CHECK(s.errors - s0.errors == (uint64_t)busy);
	CHECK(ok + busy == NTHREADS * ROUNDS / 5 && ok > 0);
	printf("16 threads: %llu calls, %d failures, executes %d ok / %d busy, %ld "
	       "connection(s)\n",
	       (unsigned long long)calls, failures, ok, busy, after - before - 1);
	/* About one connection per thread. */
	CHECK(after - before - 1 <= 2 * NTHREADS);
}

static void *health_only(void *p)
{
	struct backend_error e;

	*(enum backend_status *)p = backend_health(b, srv.url, &e);
	return NULL;
}

/* New threads after the old ones exited take over their handles, and
 * with them their live connections. */
static void recycled(void)
{
	pthread_t t[NTHREADS];
	enum backend_status st[NTHREADS];
	struct backend_stats s0, s;
	int ok = 0;

	backend_get_stats(b, &s0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&t[i], NULL, health_only, &st[i]);
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(t[i], NULL);
		ok += st[i] == BACKEND_OK;
	}
	backend_get_stats(b, &s);
	CHECK(ok == NTHREADS);
	printf("16 new threads after the first 16 exited: %llu new connection(s)\n",
	       (unsigned long long)(s.connections_opened - s0.connections_opened));
	CHECK(s.connections_opened - s0.connections_opened <= 2);
}

/* A detached thread that gives its handle back before it says it is done:
 * the backend may be freed as soon as it has said so (the sanitized
 * builds catch a thread exit that would still touch it). */
struct detached {
	struct backend *b;
	enum backend_status st;
	atomic_int done;
};

static void *detached_main(void *p)
{
	struct detached *d = p;
	struct backend_error e;

	d->st = backend_health(d->b, srv.url, &e);
	backend_thread_done(d->b);
	backend_thread_done(d->b); /* nothing left: a no-op */
	atomic_store(&d->done, 1);
	return NULL;
}

static void thread_done(void)
{
	struct detached d = {.b = backend_new(NULL)};
	struct backend_stats s;
	pthread_attr_t attr;
	pthread_t t;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	CHECK(pthread_create(&t, &attr, detached_main, &d) == 0);
	pthread_attr_destroy(&attr);
	while (!atomic_load(&d.done))
		usleep(1000);
	CHECK(d.st == BACKEND_OK);
	/* its handle is idle now: this thread takes it, connection and all */
	{
		struct backend_error e;

		CHECK_ST(backend_health(d.b, srv.url, &e), BACKEND_OK);
	}
	backend_get_stats(d.b, &s);
	CHECK(s.connections_opened == 1);
	backend_thread_done(d.b);
	backend_free(d.b);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	server_start(&srv);
	b = backend_new(NULL);
	reuse();
	threads();
	recycled();
	thread_done();
	/* Freed with the main thread's handle still registered. */
	{
		struct backend_error e;

		CHECK_ST(backend_health(b, srv.url, &e), BACKEND_OK);
	}
	backend_free(b);
	server_stop(&srv);
	return check_done("test_threads");
}
