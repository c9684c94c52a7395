/*
 * bench-direct — the direct-HTTP baseline of the benchmarks: the same
 * requests sandboxfs makes, sent by the project's own client (backend/) on
 * one thread with keep-alive, and timed without any FUSE in between.
 *
 * The sandbox URL comes from the file named by env SANDBOX_URL_FILE (never
 * from the command line, never printed). Each verb prints one line
 * "name us=T1,T2,... connections=N" where Ti are the per-operation times in
 * microseconds (total time for the "-all" verbs: one number).
 *
 *   exec N CMD             N executes of CMD (keep-alive)
 *   exec-thread N CMD      the same, each from a new thread (as sandboxfs
 *                          runs each command)
 *   put FILE PATH          one PUT of a local file
 *   get PATH OUT           one GET of a file, streamed into the local file OUT
 *   put-all N SIZE DIR     N PUTs of SIZE bytes to DIR/f0000..; total time
 *   get-all N DIR OUT      N GETs of DIR/f0000.. into OUT (truncated before
 *                          each); total time
 *   list N PATH            N listings of a directory
 *   walk PATH              list a tree recursively, one listing per directory;
 *                          prints the entry count too
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "common/clock.h"

static int failed(const char *what, const struct backend_error *e)
{
	fprintf(stderr, "bench-direct: %s: %s (HTTP %d)\n", what, e->message,
		e->http_status);
	return 1;
}

static char *read_url(void)
{
	const char *f = getenv("SANDBOX_URL_FILE");
	FILE *fp = f ? fopen(f, "r") : NULL;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (!fp) {
		fprintf(stderr,
			"bench-direct: set SANDBOX_URL_FILE to a readable file\n");
		return NULL;
	}
	n = getline(&line, &cap, fp);
	fclose(fp);
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == ' '))
		line[--n] = '\0';
	if (n <= 0) {
		free(line);
		return NULL;
	}
	return line;
}

static void print_times(const char *name, const uint64_t *t, long n, struct backend *b)
{
	struct backend_stats s;

	backend_get_stats(b, &s);
	printf("%s us=", name);
	for (long i = 0; i < n; i++)
		printf("%s%llu", i ? "," : "", (unsigned long long)t[i]);
	printf(" connections=%llu\n", (unsigned long long)s.connections_opened);
}

/* A file of size bytes of a pattern, unlinked, for uploads. */
static int pattern_file(long size)
{
	char tmpl[] = "/tmp/bench-direct-XXXXXX";
	char buf[4096];
	int fd = mkstemp(tmpl);

	if (fd < 0)
		return -1;
	unlink(tmpl);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)('a' + i % 26);
	for (long left = size; left > 0;) {
		size_t k = left < (long)sizeof(buf) ? (size_t)left : sizeof(buf);

		if (write(fd, buf, k) != (ssize_t)k) {
			close(fd);
			return -1;
		}
		left -= (long)k;
	}
	return fd;
}

static long walk(struct backend *b, const char *url, const char *path,
		 struct backend_error *e, int *rc)
{
	struct backend_listing l;
	long count = 0;

	if (backend_list(b, url, path, &l, e) != BACKEND_OK) {
		*rc = failed("list", e);
		return 0;
	}
	for (size_t i = 0; i < l.count && !*rc; i++) {
		count++;
		if (l.entries[i].is_dir) {
			char sub[4096];

			snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "/" : "",
				 l.entries[i].name);
			count += walk(b, url, sub, e, rc);
		}
	}
	backend_listing_clear(&l);
	return count;
}

struct thread_exec {
	struct backend *b;
	const char *url, *command;
	enum backend_status st;
	struct backend_error e;
};

static void *exec_thread(void *arg)
{
	struct thread_exec *x = arg;
	struct backend_exec_result r;

	x->st = backend_execute(x->b, x->url, x->command, 60, &r, &x->e);
	if (x->st == BACKEND_OK)
		backend_exec_result_clear(&r);
	return NULL;
}

static int run(struct backend *b, const char *url, int argc, char **argv)
{
	const char *verb = argv[0];
	struct backend_error e;
	uint64_t t;

	if (strcmp(verb, "exec") == 0 && argc == 3) {
		long n = atol(argv[1]);
		uint64_t *lat = calloc((size_t)n, sizeof(*lat));

		for (long i = 0; i < n; i++) {
			struct backend_exec_result r;

			t = common_now_us();
			if (backend_execute(b, url, argv[2], 60, &r, &e) != BACKEND_OK)
				return failed("execute", &e);
			lat[i] = common_now_us() - t;
			backend_exec_result_clear(&r);
		}
		print_times("exec", lat, n, b);
		free(lat);
		return 0;
	}
	if (strcmp(verb, "exec-thread") == 0 && argc == 3) {
		long n = atol(argv[1]);
		uint64_t *lat = calloc((size_t)n, sizeof(*lat));

		for (long i = 0; i < n; i++) {
			struct thread_exec x = {.b = b, .url = url, .command = argv[2]};
			pthread_t tid;

			t = common_now_us();
			if (pthread_create(&tid, NULL, exec_thread, &x) != 0)
				return perror("pthread_create"), 1;
			pthread_join(tid, NULL);
			if (x.st != BACKEND_OK)
				return failed("execute", &x.e);
			lat[i] = common_now_us() - t;
		}
		print_times("exec-thread", lat, n, b);
		free(lat);
		return 0;
	}
	if (strcmp(verb, "put") == 0 && argc == 3) {
		int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
		struct stat st;

		if (fd < 0 || fstat(fd, &st) != 0)
			return perror(argv[1]), 1;
		t = common_now_us();
		if (backend_file_put(b, url, argv[2], fd, (uint64_t)st.st_size, &e) !=
		    BACKEND_OK)
			return failed("put", &e);
		t = common_now_us() - t;
		close(fd);
		print_times("put", &t, 1, b);
		return 0;
	}
	if (strcmp(verb, "get") == 0 && argc == 3) {
		int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		if (fd < 0)
			return perror(argv[2]), 1;
		t = common_now_us();
		if (backend_file_get(b, url, argv[1], fd, NULL, &e) != BACKEND_OK)
			return failed("get", &e);
		t = common_now_us() - t;
		close(fd);
		print_times("get", &t, 1, b);
		return 0;
	}
	if (strcmp(verb, "put-all") == 0 && argc == 4) {
		long n = atol(argv[1]), size = atol(argv[2]);
		int fd = pattern_file(size);
		char path[4096];

		if (fd < 0)
			return perror("temporary file"), 1;
		t = common_now_us();
		for (long i = 0; i < n; i++) {
			snprintf(path, sizeof(path), "%s/f%04ld", argv[3], i);
			if (backend_file_put(b, url, path, fd, (uint64_t)size, &e) !=
			    BACKEND_OK)
				return failed("put", &e);
		}
		t = common_now_us() - t;
		close(fd);
		print_times("put-all", &t, 1, b);
		return 0;
	}
	if (strcmp(verb, "get-all") == 0 && argc == 4) {
		long n = atol(argv[1]);
		int fd = open(argv[3], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		char path[4096];

		if (fd < 0)
			return perror(argv[3]), 1;
		t = common_now_us();
		for (long i = 0; i < n; i++) {
			snprintf(path, sizeof(path), "%s/f%04ld", argv[2], i);
			if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0)
				return perror(argv[3]), 1;
			if (backend_file_get(b, url, path, fd, NULL, &e) != BACKEND_OK)
				return failed("get", &e);
		}
		t = common_now_us() - t;
		close(fd);
		print_times("get-all", &t, 1, b);
		return 0;
	}
	if (strcmp(verb, "list") == 0 && argc == 3) {
		long n = atol(argv[1]);
		uint64_t *lat = calloc((size_t)n, sizeof(*lat));
		size_t count = 0;

		for (long i = 0; i < n; i++) {
			struct backend_listing l;

			t = common_now_us();
			if (backend_list(b, url, argv[2], &l, &e) != BACKEND_OK)
				return failed("list", &e);
			lat[i] = common_now_us() - t;
			count = l.count;
			backend_listing_clear(&l);
		}
		print_times("list", lat, n, b);
		printf("entries=%zu\n", count);
		free(lat);
		return 0;
	}
	if (strcmp(verb, "walk") == 0 && argc == 2) {
		int rc = 0;
		long count;

		t = common_now_us();
		count = walk(b, url, argv[1], &e, &rc);
		t = common_now_us() - t;
		if (rc)
			return rc;
		print_times("walk", &t, 1, b);
		printf("entries=%ld\n", count);
		return 0;
	}
	fprintf(stderr, "bench-direct: bad arguments (see the comment in direct.c)\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct backend_config cfg;
	struct backend *b;
	char *url;
	int rc;

	if (argc < 2) {
		fprintf(stderr, "usage: bench-direct VERB ARGS (see direct.c)\n");
		return 2;
	}
	url = read_url();
	if (!url)
		return 2;
	backend_config_defaults(&cfg);
	b = backend_new(&cfg);
	if (!b)
		return 1;
	rc = run(b, url, argc - 1, argv + 1);
	backend_free(b);
	free(url);
	return rc;
}
