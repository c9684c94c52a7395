/*
 * test_contract.c — every sandbox-contract call against the real local
 * server: execute, file get/put/delete, listing, health; the error classes
 * the server produces (400, 404, 409, 413, 500); awkward names that must
 * round-trip; streaming of large files past the JSON bounds; hostile
 * listings dropped and counted.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend_i.h"
#include "check.h"
#include "harness.h"

static struct server srv;
static struct backend *b;

static void execute_calls(void)
{
	struct backend_exec_result r;
	struct backend_error e;

	CHECK_ST(
	    backend_execute(b, srv.url, "echo out; echo err >&2; exit 3", 30, &r, &e),
	    BACKEND_OK);
	CHECK(r.exit_code == 3 && strcmp(r.out, "out\n") == 0 && r.out_len == 4);
	CHECK(strcmp(r.err, "err\n") == 0 && !r.truncated && r.duration_ms >= 0);
	CHECK(e.status == BACKEND_OK);
	backend_exec_result_clear(&r);

	/* The workspace is the working directory. */
	CHECK_ST(backend_execute(b, srv.url, "pwd", 30, &r, &e), BACKEND_OK);
	CHECK(r.out && strncmp(r.out, srv.workspace, strlen(srv.workspace)) == 0);
	backend_exec_result_clear(&r);

	/* The contract's timeout: exit code 124. */
	CHECK_ST(backend_execute(b, srv.url, "sleep 5", 1, &r, &e), BACKEND_OK);
	CHECK(r.exit_code == 124);
	backend_exec_result_clear(&r);

	/* Output over 1 MiB per stream is truncated by the server. */
	CHECK_ST(backend_execute(b, srv.url, "head -c 1200000 /dev/zero | tr '\\0' x", 30,
				 &r, &e),
		 BACKEND_OK);
	CHECK(r.truncated && r.out_len == 1048576);
	backend_exec_result_clear(&r);

	/* timeout 0: no limit, still returns. */
	CHECK_ST(backend_execute(b, srv.url, "true", 0, &r, &e), BACKEND_OK);
	CHECK(r.exit_code == 0);
	backend_exec_result_clear(&r);
}

struct busy_arg {
	enum backend_status st;
};

static void *busy_thread(void *p)
{
	struct busy_arg *a = p;
	struct backend_exec_result r;
	struct backend_error e;

	a->st = backend_execute(b, srv.url, "touch busy.marker; sleep 2", 30, &r, &e);
	backend_exec_result_clear(&r);
	return NULL;
}

static void error_classes(void)
{
	struct backend_exec_result r;
	struct backend_error e;
	struct busy_arg a;
	pthread_t t;
	uint64_t got;
	int fd = temp_fd(0, 0);
	char *big;

	/* 404 */
	CHECK_ST(backend_file_get(b, srv.url, "no/such/file", fd, &got, &e),
		 BACKEND_NOT_FOUND);
	CHECK(e.http_status == 404 && strlen(e.message) > 0);
	check_no_secret(&e, srv.url, srv.port, NULL);
	CHECK(backend_errno(e.status, BACKEND_OP_FILE) == ENOENT);
	CHECK(lseek(fd, 0, SEEK_END) == 0); /* the error body never reached fd */
	CHECK_ST(backend_file_delete(b, srv.url, "no-such", &e), BACKEND_NOT_FOUND);

	/* 400: a FIFO is neither a file nor a directory. */
	CHECK_ST(backend_execute(b, srv.url, "mkfifo fifo", 30, &r, &e), BACKEND_OK);
	backend_exec_result_clear(&r);
	CHECK_ST(backend_file_get(b, srv.url, "fifo", fd, &got, &e), BACKEND_INVALID);
	CHECK(e.http_status == 400 && backend_errno(e.status, BACKEND_OP_FILE) == EINVAL);
	check_no_secret(&e, srv.url, srv.port, NULL);

	/* 409: one seat. The marker says the first command is running. */
	pthread_create(&t, NULL, busy_thread, &a);
	{
		char marker[400];
		struct stat sb;

		snprintf(marker, sizeof(marker), "%s/busy.marker", srv.workspace);
		for (int i = 0; i < 1000 && stat(marker, &sb) != 0; i++)
			usleep(10000);
	}
	CHECK_ST(backend_execute(b, srv.url, "echo second", 30, &r, &e),
		 BACKEND_CONFLICT);
	CHECK(e.http_status == 409 &&
	      backend_errno(e.status, BACKEND_OP_EXECUTE) == EBUSY);
	CHECK(strstr(e.message, "already running") != NULL); /* the server's words */
	check_no_secret(&e, srv.url, srv.port, NULL);
	pthread_join(t, NULL);
	CHECK(a.st == BACKEND_OK);

	/* 413: a command larger than the server accepts (8 MiB). */
	big = malloc(9 << 20);
	memset(big, 'x', 9 << 20);
	memcpy(big, "echo ", 5);
	big[(9 << 20) - 1] = '\0';
	CHECK_ST(backend_execute(b, srv.url, big, 30, &r, &e), BACKEND_TOO_LARGE);
	CHECK(e.http_status == 413 &&
	      backend_errno(e.status, BACKEND_OP_EXECUTE) == EFBIG);
	check_no_secret(&e, srv.url, srv.port, NULL);
	free(big);

	/* 500 */
	admin_faults(srv.url, "{\"error_rate\":1.0}");
	CHECK_ST(backend_health(b, srv.url, &e), BACKEND_SERVER_ERROR);
	CHECK(e.http_status == 500 && strstr(e.message, "injected fault"));
	CHECK(backend_errno(e.status, BACKEND_OP_HEALTH) == EIO);
	check_no_secret(&e, srv.url, srv.port, NULL);
	admin_faults(srv.url, "{}");
	close(fd);
}

static void files_and_names(void)
{
	static const char *names[] = {
	    "plain.txt",
	    "with space.txt",
	    "hash#tag",
	    "question?mark",
	    "percent%41%zz",
	    "plus+equals=amp&semi;",
	    "caf\xc3\xa9",
	    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e.txt",
	    "dir with space/inner #?%.txt",
	    "\xf0\x9f\x98\x80/emoji dir/file",
	    "'quotes\" and \\backslash",
	    "~tilde-_.",
	};
	struct backend_error e;
	struct backend_listing l;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char path[256], parent[256] = "";
		const char *base = names[i], *slash = strrchr(names[i], '/');
		int in = temp_fd(100 + i * 37, (unsigned)i), out = temp_fd(0, 0);
		uint64_t got = 0;
		bool listed = false;
		struct stat sb;

		snprintf(path, sizeof(path), "names/%s", names[i]);
		if (slash) {
			snprintf(parent, sizeof(parent), "names/%.*s",
				 (int)(slash - names[i]), names[i]);
			base = slash + 1;
		} else {
			snprintf(parent, sizeof(parent), "names");
		}
		CHECK_ST(backend_file_put(b, srv.url, path, in, 100 + i * 37, &e),
			 BACKEND_OK);
		CHECK_ST(backend_file_get(b, srv.url, path, out, &got, &e), BACKEND_OK);
		CHECK(got == 100 + i * 37 && fd_matches(out, 100 + i * 37, (unsigned)i));
		CHECK_ST(backend_list(b, srv.url, parent, &l, &e), BACKEND_OK);
		for (size_t k = 0; k < l.count; k++)
			listed |= strcmp(l.entries[k].name, base) == 0 &&
				  l.entries[k].size == 100 + i * 37 &&
				  !l.entries[k].is_dir;
		CHECK(listed);
		if (!listed)
			fprintf(stderr, "  name %zu not listed\n", i);
		backend_listing_clear(&l);
		/* Exactly that file on the server's disk. */
		{
			char disk[600];

			snprintf(disk, sizeof(disk), "%s/%s", srv.workspace, path);
			CHECK(stat(disk, &sb) == 0 &&
			      sb.st_size == (off_t)(100 + i * 37));
		}
		CHECK_ST(backend_file_delete(b, srv.url, path, &e), BACKEND_OK);
		CHECK_ST(backend_file_get(b, srv.url, path, out, &got, &e),
			 BACKEND_NOT_FOUND);
		close(in);
		close(out);
	}

	/* The root lists, and a directory entry says so. */
	CHECK_ST(backend_list(b, srv.url, "", &l, &e), BACKEND_OK);
	{
		bool dir = false;

		for (size_t k = 0; k < l.count; k++)
			dir |= strcmp(l.entries[k].name, "names") == 0 &&
			       l.entries[k].is_dir;
		CHECK(dir);
	}
	backend_listing_clear(&l);
	/* A tree goes with one DELETE. */
	CHECK_ST(backend_file_delete(b, srv.url, "names", &e), BACKEND_OK);
	CHECK_ST(backend_list(b, srv.url, "names", &l, &e), BACKEND_NOT_FOUND);
	/* Listing a file is refused as a bad answer, not shown as entries. */
	{
		int in = temp_fd(10, 1);

		CHECK_ST(backend_file_put(b, srv.url, "notadir", in, 10, &e), BACKEND_OK);
		CHECK_ST(backend_list(b, srv.url, "notadir", &l, &e), BACKEND_BAD_ANSWER);
		close(in);
	}
	/* An empty file. */
	{
		int in = temp_fd(0, 0), out = temp_fd(0, 0);
		uint64_t got = 99;

		CHECK_ST(backend_file_put(b, srv.url, "empty", in, 0, &e), BACKEND_OK);
		CHECK_ST(backend_file_get(b, srv.url, "empty", out, &got, &e),
			 BACKEND_OK);
		CHECK(got == 0);
		close(in);
		close(out);
	}
}

/* Files stream: much larger than every JSON bound, byte-exact. */
static void large_files(void)
{
	struct backend_config cfg;
	struct backend *small;
	struct backend_error e;
	struct backend_listing l;
	size_t size = 24u << 20;
	int in = temp_fd(size, 7), out = temp_fd(0, 0);
	uint64_t got = 0;

	backend_config_defaults(&cfg);
	cfg.max_json_bytes = 4096;
	cfg.max_exec_bytes = 4096;
	cfg.max_listing_bytes = 4096;
	small = backend_new(&cfg);
	CHECK_ST(backend_file_put(small, srv.url, "big/file.bin", in, size, &e),
		 BACKEND_OK);
	CHECK_ST(backend_file_get(small, srv.url, "big/file.bin", out, &got, &e),
		 BACKEND_OK);
	CHECK(got == size && fd_matches(out, size, 7));
	/* put_size smaller than the file: only that prefix is sent. */
	CHECK_ST(backend_file_put(small, srv.url, "big/prefix", in, 1000, &e),
		 BACKEND_OK);
	CHECK_ST(backend_list(small, srv.url, "big", &l, &e), BACKEND_OK);
	CHECK(l.count == 2 && l.entries[1].size == 1000);
	backend_listing_clear(&l);
	/* A size larger than the file: refused locally, nothing half-written. */
	CHECK_ST(backend_file_put(small, srv.url, "big/short", in, size + 10, &e),
		 BACKEND_LOCAL);
	CHECK_ST(backend_file_get(small, srv.url, "big/short", out, &got, &e),
		 BACKEND_NOT_FOUND);
	/* A descriptor that cannot be written: local error. */
	{
		int ro = open("/dev/null", O_RDONLY);

		CHECK_ST(backend_file_get(small, srv.url, "big/prefix", ro, &got, &e),
			 BACKEND_LOCAL);
		close(ro);
	}
	backend_free(small);
	close(in);
	close(out);
}

static void hostile_listing(void)
{
	struct backend_error e;
	struct backend_listing l;
	struct backend_stats s0, s1;
	int in = temp_fd(5, 3);

	CHECK_ST(backend_file_put(b, srv.url, "hostile/real.txt", in, 5, &e), BACKEND_OK);
	backend_get_stats(b, &s0);
	admin_faults(srv.url, "{\"hostile_listing\":true}");
	CHECK_ST(backend_list(b, srv.url, "hostile", &l, &e), BACKEND_OK);
	admin_faults(srv.url, "{}");
	CHECK(l.count == 1 && strcmp(l.entries[0].name, "real.txt") == 0);
	CHECK(l.dropped == 8);
	printf("hostile listing: %zu kept, %zu dropped\n", l.count, l.dropped);
	backend_get_stats(b, &s1);
	CHECK(s1.names_dropped - s0.names_dropped == l.dropped);
	backend_listing_clear(&l);
	close(in);
}

static void health_and_stats(void)
{
	struct backend_error e;
	struct backend_stats s;

	CHECK_ST(backend_health(b, srv.url, &e), BACKEND_OK);
	/* A base URL with a trailing slash works the same. */
	{
		char u[80];

		snprintf(u, sizeof(u), "%s/", srv.url);
		CHECK_ST(backend_health(b, u, &e), BACKEND_OK);
	}
	backend_get_stats(b, &s);
	CHECK(s.requests[BACKEND_OP_EXECUTE] > 0 && s.requests[BACKEND_OP_FILE] > 0 &&
	      s.requests[BACKEND_OP_HEALTH] > 0);
	CHECK(s.errors > 0 && s.bytes_sent > 0 && s.bytes_received > 0);
	CHECK(s.connections_opened > 0);
	CHECK(s.latency_p50_us > 0 && s.latency_p99_us >= s.latency_p50_us);
	printf("stats: requests exec=%llu file=%llu health=%llu errors=%llu "
	       "connections=%llu p50=%lluus p99=%lluus\n",
	       (unsigned long long)s.requests[BACKEND_OP_EXECUTE],
	       (unsigned long long)s.requests[BACKEND_OP_FILE],
	       (unsigned long long)s.requests[BACKEND_OP_HEALTH],
	       (unsigned long long)s.errors, (unsigned long long)s.connections_opened,
	       (unsigned long long)s.latency_p50_us,
	       (unsigned long long)s.latency_p99_us);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	server_start(&srv);
	b = backend_new(NULL);
	execute_calls();
	error_classes();
	files_and_names();
	large_files();
	hostile_listing();
	health_and_stats();
	backend_free(b);
	server_stop(&srv);
	return check_done("test_contract");
}
