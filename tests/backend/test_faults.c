/*
 * test_faults.c — "not sent" versus "answer lost" against the real server
 * and its fault mode; the bounds (stall, execute grace, request timeout,
 * answer size); malformed answers; and that no message ever names the
 * URL, host:port or port.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend_i.h"
#include "check.h"
#include "harness.h"

static struct server srv;
static struct backend *b;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Every call on an address where nothing listens: never sent. */
static void not_sent(void)
{
	struct server dead;
	struct backend_error e;
	struct backend_exec_result r;
	struct backend_listing l;
	struct backend_sandbox sb;
	struct backend_sandbox_list sl;
	struct backend_orchestrator o;
	struct backend_create_request cr = {.id = "x", .pool = "default"};
	int fd = temp_fd(10, 1);
	uint64_t got;

	server_start(&dead);
	server_stop(&dead); /* its port is now closed: connection refused */
	o.base_url = dead.url;
	o.token = "secret-token-value";

	CHECK_ST(backend_execute(b, dead.url, "echo never", 5, &r, &e), BACKEND_NOT_SENT);
	CHECK(e.http_status == 0);
	check_no_secret(&e, dead.url, dead.port, NULL);
	CHECK_ST(backend_file_put(b, dead.url, "f", fd, 10, &e), BACKEND_NOT_SENT);
	check_no_secret(&e, dead.url, dead.port, NULL);
	CHECK_ST(backend_file_get(b, dead.url, "f", fd, &got, &e), BACKEND_NOT_SENT);
	CHECK_ST(backend_file_delete(b, dead.url, "f", &e), BACKEND_NOT_SENT);
	CHECK_ST(backend_list(b, dead.url, "", &l, &e), BACKEND_NOT_SENT);
	CHECK_ST(backend_health(b, dead.url, &e), BACKEND_NOT_SENT);
	CHECK_ST(backend_orch_create(b, &o, &cr, &sb, &e), BACKEND_NOT_SENT);
	CHECK(strstr(e.message, o.token) == NULL);
	check_no_secret(&e, dead.url, dead.port, NULL);
	CHECK_ST(backend_orch_get(b, &o, "x", &sb, &e), BACKEND_NOT_SENT);
	CHECK_ST(backend_orch_list(b, &o, &sl, &e), BACKEND_NOT_SENT);
	CHECK_ST(backend_orch_delete(b, &o, "x", &e), BACKEND_NOT_SENT);
	check_no_secret(&e, dead.url, dead.port, NULL);
	CHECK(backend_errno(e.status, BACKEND_OP_SANDBOX) == ENOTCONN);

	/* A name that cannot resolve. */
	CHECK_ST(backend_health(b, "http://sandboxfs-no-such-host.invalid:3000", &e),
		 BACKEND_NOT_SENT);
	CHECK(strstr(e.message, "sandboxfs-no-such-host") == NULL);
	check_no_secret(&e, "http://sandboxfs-no-such-host.invalid:3000", 3000, NULL);

	/* A connect that never completes: a listener whose accept queue is
	 * full drops further SYNs. Not sent, within the connect timeout. */
	{
		struct backend_config cfg;
		struct backend *quick;
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t alen = sizeof(a);
		int lfd = socket(AF_INET, SOCK_STREAM, 0), fill[8];
		char url[64];
		double t0;

		CHECK(bind(lfd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		      listen(lfd, 0) == 0 &&
		      getsockname(lfd, (struct sockaddr *)&a, &alen) == 0);
		for (int i = 0; i < 8; i++) {
			fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
			connect(fill[i], (struct sockaddr *)&a, sizeof(a));
		}
		snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
		backend_config_defaults(&cfg);
		cfg.connect_timeout_ms = 500;
		quick = backend_new(&cfg);
		t0 = now_s();
		CHECK_ST(backend_execute(quick, url, "echo never", 5, &r, &e),
			 BACKEND_NOT_SENT);
		printf("connect timeout: not sent after %.2f s: %s\n", now_s() - t0,
		       e.message);
		CHECK(now_s() - t0 < 3.0);
		check_no_secret(&e, url, ntohs(a.sin_port), NULL);
		backend_free(quick);
		for (int i = 0; i < 8; i++)
			close(fill[i]);
		close(lfd);
	}
	close(fd);
}

static void answer_lost(void)
{
	struct backend_stats s0, s1;
	struct backend_error e;
	struct backend_exec_result r;
	struct backend_listing l;
	char disk[400];
	struct stat sb;

	/* lose_answer: the server runs the command, then closes without an
	 * answer. The outcome is unknown to us: answer lost. */
	admin_faults(srv.url, "{\"lose_answer\":true,\"routes\":\"execute\"}");
	CHECK_ST(backend_execute(b, srv.url, "echo ran > lost-1.txt", 30, &r, &e),
		 BACKEND_ANSWER_LOST);
	check_no_secret(&e, srv.url, srv.port, NULL);
	CHECK(backend_errno(e.status, BACKEND_OP_EXECUTE) == EIO);
	CHECK(admin_log_count(srv.url, "echo ran > lost-1.txt") == 1);
	snprintf(disk, sizeof(disk), "%s/lost-1.txt", srv.workspace);
	CHECK(stat(disk, &sb) == 0);

	/* The same on a thread whose handle holds a live keep-alive
	 * connection: libcurl would silently resend a request on a fresh
	 * connection when a reused one dies without an answer. An execute
	 * must go out exactly once. */
	admin_faults(srv.url, "{}");
	CHECK_ST(backend_health(b, srv.url, &e), BACKEND_OK);
	CHECK_ST(backend_list(b, srv.url, "", &l, &e), BACKEND_OK);
	backend_listing_clear(&l);
	admin_faults(srv.url, "{\"lose_answer\":true,\"routes\":\"execute\"}");
	for (int i = 0; i < 5; i++) {
		char cmd[64];

		snprintf(cmd, sizeof(cmd), "echo once-%d", i);
		backend_get_stats(b, &s0);
		CHECK_ST(backend_execute(b, srv.url, cmd, 30, &r, &e),
			 BACKEND_ANSWER_LOST);
		backend_get_stats(b, &s1);
		/* It went out on the reused connection; libcurl wanted to send
		 * it again on a new one (which libcurl 7.88 connects before it
		 * rewinds) and was refused the rewind. */
		CHECK(s1.connections_opened - s0.connections_opened <= 1);
		CHECK(strstr(e.message, "not resent") != NULL);
		if (i == 0)
			printf("keep-alive execute, answer lost: %s\n", e.message);
		CHECK(admin_log_count(srv.url, cmd) == 1);
		/* Keep a reusable connection in the handle for the next round. */
		admin_faults(srv.url, "{}");
		CHECK_ST(backend_health(b, srv.url, &e), BACKEND_OK);
		admin_faults(srv.url, "{\"lose_answer\":true,\"routes\":\"execute\"}");
	}

	/* drop_before: the server closes before running anything. From the
	 * client's side it is indistinguishable from lose_answer (the request
	 * was written, no answer came back), so it must also be "answer lost":
	 * only the server knows it did not run the command. */
	admin_faults(srv.url, "{\"drop_before\":true,\"routes\":\"execute\"}");
	CHECK_ST(backend_execute(b, srv.url, "echo dropped", 30, &r, &e),
		 BACKEND_ANSWER_LOST);
	CHECK(admin_log_count(srv.url, "echo dropped") == 0);
	check_no_secret(&e, srv.url, srv.port, NULL);

	/* Idempotent calls that lose their answer: answer lost too. */
	admin_faults(srv.url, "{\"lose_answer\":true,\"routes\":\"files\"}");
	{
		int fd = temp_fd(100, 2);

		CHECK_ST(backend_file_put(b, srv.url, "lost.bin", fd, 100, &e),
			 BACKEND_ANSWER_LOST);
		CHECK_ST(backend_list(b, srv.url, "", &l, &e), BACKEND_ANSWER_LOST);
		check_no_secret(&e, srv.url, srv.port, NULL);
		close(fd);
	}
	admin_faults(srv.url, "{}");
}

/* Control experiment, printed for the record: what plain libcurl does
 * with a rewindable POST on a reused connection whose answer is lost. */
static void control_plain_curl(void)
{
	CURL *c = curl_easy_init();
	char url[128];
	CURLcode rc;

	admin_faults(srv.url, "{}");
	snprintf(url, sizeof(url), "%s/healthz", srv.url);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, fwrite);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, fopen("/dev/null", "w"));
	curl_easy_perform(c);
	admin_faults(srv.url, "{\"lose_answer\":true,\"routes\":\"execute\"}");
	snprintf(url, sizeof(url), "%s/execute", srv.url);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{\"command\":\"echo control\"}");
	rc = curl_easy_perform(c);
	printf("control: plain libcurl, reused connection, lost answer: '%s', the "
	       "server ran the command %d time(s)\n",
	       curl_easy_strerror(rc), admin_log_count(srv.url, "echo control"));
	admin_faults(srv.url, "{}");
	curl_easy_cleanup(c);
}

static void bounds(void)
{
	struct backend_config cfg;
	struct backend *bb;
	struct backend_error e;
	struct backend_exec_result r;
	struct backend_listing l;
	double t0;
	int fd = temp_fd(1000, 4);
	uint64_t got;

	backend_config_defaults(&cfg);
	cfg.stall_seconds = 1;
	cfg.execute_grace_ms = 300;
	cfg.request_timeout_ms = 700;
	cfg.max_exec_bytes = 1024;
	cfg.max_listing_bytes = 2048;
	bb = backend_new(&cfg);

	CHECK_ST(backend_file_put(bb, srv.url, "slow.bin", fd, 1000, &e), BACKEND_OK);

	/* A transfer that stalls fails after stall_seconds (no total bound
	 * on file transfers). */
	admin_faults(srv.url, "{\"delay_ms\":4000,\"routes\":\"files\"}");
	t0 = now_s();
	CHECK_ST(backend_file_get(bb, srv.url, "slow.bin", fd, &got, &e),
		 BACKEND_ANSWER_LOST);
	CHECK(now_s() - t0 < 3.5);
	printf("stall: failed after %.2f s: %s\n", now_s() - t0, e.message);
	check_no_secret(&e, srv.url, srv.port, NULL);

	/* Small calls are bounded by request_timeout_ms. */
	admin_faults(srv.url, "{\"delay_ms\":3000}");
	t0 = now_s();
	CHECK_ST(backend_health(bb, srv.url, &e), BACKEND_ANSWER_LOST);
	CHECK(now_s() - t0 < 2.0);
	check_no_secret(&e, srv.url, srv.port, NULL);

	/* An execute waits timeoutSeconds + grace, then gives up: unknown. */
	admin_faults(srv.url, "{\"delay_ms\":4000,\"routes\":\"execute\"}");
	t0 = now_s();
	CHECK_ST(backend_execute(bb, srv.url, "echo slow", 1, &r, &e),
		 BACKEND_ANSWER_LOST);
	CHECK(now_s() - t0 >= 1.2 && now_s() - t0 < 3.0);
	printf("execute bound: gave up after %.2f s (timeout 1 s + grace 0.3 s)\n",
	       now_s() - t0);
	CHECK(admin_log_count(srv.url, "echo slow") == 1);
	admin_faults(srv.url, "{}");

	/* An execute answer over max_exec_bytes: the command ran, so the
	 * outcome is unknown (bad answer), and nothing past the bound was
	 * kept. */
	CHECK_ST(backend_execute(bb, srv.url, "head -c 4096 /dev/zero | tr '\\0' y", 30,
				 &r, &e),
		 BACKEND_BAD_ANSWER);
	CHECK(strstr(e.message, "larger than 1024") != NULL);
	CHECK(r.out == NULL);
	/* A listing over max_listing_bytes: too large. */
	CHECK_ST(backend_execute(b, srv.url,
				 "mkdir many && cd many && for i in $(seq 100); do "
				 ": > file-number-$i; done",
				 30, &r, &e),
		 BACKEND_OK);
	backend_exec_result_clear(&r);
	CHECK_ST(backend_list(bb, srv.url, "many", &l, &e), BACKEND_TOO_LARGE);
	CHECK(backend_errno(e.status, BACKEND_OP_FILE) == EFBIG);
	CHECK_ST(backend_list(b, srv.url, "many", &l, &e), BACKEND_OK);
	CHECK(l.count == 100);
	backend_listing_clear(&l);
	check_no_secret(&e, srv.url, srv.port, NULL);
	backend_free(bb);
	close(fd);
}

static void malformed(void)
{
	struct backend_error e;
	struct backend_exec_result r;
	struct backend_listing l;

	admin_faults(srv.url, "{\"malformed_json\":true}");
	CHECK_ST(backend_execute(b, srv.url, "echo garbled", 30, &r, &e),
		 BACKEND_BAD_ANSWER);
	CHECK(e.http_status == 200 && strstr(e.message, "unknown") != NULL);
	CHECK(backend_errno(e.status, BACKEND_OP_EXECUTE) == EIO);
	CHECK(admin_log_count(srv.url, "echo garbled") == 1);
	CHECK_ST(backend_list(b, srv.url, "", &l, &e), BACKEND_BAD_ANSWER);
	CHECK_ST(backend_health(b, srv.url, &e), BACKEND_BAD_ANSWER);
	check_no_secret(&e, srv.url, srv.port, NULL);
	/* An error answer that is not JSON still gives its status. */
	CHECK_ST(backend_file_delete(b, srv.url, "no-such", &e), BACKEND_NOT_FOUND);
	check_no_secret(&e, srv.url, srv.port, NULL);
	admin_faults(srv.url, "{}");
}

static off_t fd_size(int fd)
{
	struct stat sb;

	return fstat(fd, &sb) == 0 ? sb.st_size : -1;
}

/* A new empty unlinked file. */
static int empty_fd(void)
{
	int fd = temp_fd(0, 0);

	CHECK(fd_size(fd) == 0);
	return fd;
}

/* A progress that says stop once the clock passes *ctx (seconds). */
static bool stop_at_cb(void *ctx, uint64_t written)
{
	(void)written;
	return now_s() < *(double *)ctx;
}

/* A download is bounded by the size its listing gave (plus slack), by a
 * minimum rate and by a deadline scaled by that size; its caller can stop
 * it even while the server says nothing. */
static void download_bounds(void)
{
	struct backend_config cfg;
	struct backend *bb;
	struct backend_error e;
	struct streamer st;
	uint64_t got, bound1 = backend_download_bound(1);
	double t0;
	int fd;

	CHECK(backend_download_bound(0) == 64 * 1024);
	CHECK(backend_download_bound(1) == 64 * 1024 + 1);
	CHECK(backend_download_bound(1 << 20) == (1 << 20) + (1 << 17));
	CHECK(backend_download_bound(BACKEND_SIZE_UNKNOWN) == UINT64_MAX);
	CHECK(backend_download_bound(UINT64_MAX - 5) == UINT64_MAX);

	/* Listed as 1 byte, then a body without end and without a length:
	 * cut at the bound, EIO, and nothing past the bound on disk. */
	streamer_start(&st, STREAM_FOREVER, -1);
	fd = empty_fd();
	t0 = now_s();
	CHECK_ST(backend_file_get_progress(b, st.url, "f", fd, 1, NULL, NULL, &got, &e),
		 BACKEND_BAD_ANSWER);
	printf("endless body of a 1-byte file: cut after %.2f s, %llu bytes kept: %s\n",
	       now_s() - t0, (unsigned long long)got, e.message);
	CHECK(now_s() - t0 < 10.0);
	CHECK(backend_errno(e.status, BACKEND_OP_FILE) == EIO);
	CHECK(got == bound1 && (uint64_t)fd_size(fd) == bound1);
	check_no_secret(&e, st.url, st.port, NULL);
	close(fd);
	/* Of unknown size: max_download_bytes bounds it (EFBIG). */
	backend_config_defaults(&cfg);
	cfg.max_download_bytes = 100000;
	bb = backend_new(&cfg);
	fd = empty_fd();
	CHECK_ST(backend_file_get(bb, st.url, "f", fd, &got, &e), BACKEND_TOO_LARGE);
	CHECK(got == 100000 && fd_size(fd) == 100000);
	CHECK(backend_errno(e.status, BACKEND_OP_FILE) == EFBIG);
	close(fd);
	backend_free(bb);
	streamer_stop(&st);

	/* A length announced past the bound: not one byte is written. */
	streamer_start(&st, STREAM_FOREVER, 10LL << 30);
	fd = empty_fd();
	CHECK_ST(backend_file_get_progress(b, st.url, "f", fd, 1, NULL, NULL, &got, &e),
		 BACKEND_BAD_ANSWER);
	CHECK(got == 0 && fd_size(fd) == 0);
	close(fd);
	streamer_stop(&st);

	/* The real server: a file that grew within the slack reads whole;
	 * past it, EIO before any byte. */
	fd = temp_fd(100000, 7);
	CHECK_ST(backend_file_put(b, srv.url, "grown.bin", fd, 100000, &e), BACKEND_OK);
	close(fd);
	fd = empty_fd();
	CHECK_ST(backend_file_get_progress(b, srv.url, "grown.bin", fd, 90000, NULL, NULL,
					   &got, &e),
		 BACKEND_OK);
	CHECK(got == 100000 && fd_matches(fd, 100000, 7));
	close(fd);
	fd = empty_fd();
	CHECK_ST(backend_file_get_progress(b, srv.url, "grown.bin", fd, 1000, NULL, NULL,
					   &got, &e),
		 BACKEND_BAD_ANSWER);
	CHECK(got == 0 && fd_size(fd) == 0);
	close(fd);

	/* Two bytes a second: under the minimum rate for stall_seconds,
	 * answer lost (EIO). */
	streamer_start(&st, STREAM_TRICKLE, -1);
	backend_config_defaults(&cfg);
	cfg.stall_seconds = 2;
	bb = backend_new(&cfg);
	fd = empty_fd();
	t0 = now_s();
	CHECK_ST(backend_file_get_progress(bb, st.url, "f", fd, 1, NULL, NULL, &got, &e),
		 BACKEND_ANSWER_LOST);
	printf("trickle: failed after %.2f s (%llu bytes): %s\n", now_s() - t0,
	       (unsigned long long)got, e.message);
	CHECK(now_s() - t0 < 8.0);
	close(fd);
	backend_free(bb);

	/* The deadline: fast enough for the minimum rate check (30 s), but
	 * not done by request_timeout_ms + bound / min_rate_bytes. */
	backend_config_defaults(&cfg);
	cfg.request_timeout_ms = 500;
	cfg.min_rate_bytes = 64 * 1024; /* bound 64 KiB: a 1.5 s deadline */
	bb = backend_new(&cfg);
	CHECK(backend_download_deadline_ms(bb, backend_download_bound(0)) == 1500);
	fd = empty_fd();
	t0 = now_s();
	CHECK_ST(backend_file_get_progress(bb, st.url, "f", fd, 0, NULL, NULL, &got, &e),
		 BACKEND_ANSWER_LOST);
	printf("deadline: failed after %.2f s: %s\n", now_s() - t0, e.message);
	CHECK(now_s() - t0 >= 1.3 && now_s() - t0 < 6.0);
	close(fd);
	backend_free(bb);
	streamer_stop(&st);

	/* A silent server: the caller's progress is asked at least once a
	 * second, and its "stop" ends the transfer long before the stall
	 * limit (30 s). */
	streamer_start(&st, STREAM_SILENT, 1000);
	fd = empty_fd();
	t0 = now_s();
	{
		double stop_at = t0 + 1.5;

		CHECK_ST(backend_file_get_progress(b, st.url, "f", fd, 1000, stop_at_cb,
						   &stop_at, &got, &e),
			 BACKEND_LOCAL);
	}
	printf("silent server, caller stops: after %.2f s: %s\n", now_s() - t0,
	       e.message);
	CHECK(now_s() - t0 >= 1.5 && now_s() - t0 < 6.0);
	CHECK(strstr(e.message, "stopped") != NULL);
	close(fd);
	streamer_stop(&st);
}

/* Only a proxy named in the configuration is used: the environment's
 * proxy variables (here a dead port) never are; a named dead proxy makes
 * every call "not sent". */
static void proxies(void)
{
	struct server dead;
	struct backend_config cfg;
	struct backend *bp;
	struct backend_error e;
	char proxy[80];
	static const char *const vars[] = {"http_proxy", "HTTPS_PROXY", "https_proxy",
					   "ALL_PROXY", "all_proxy"};

	server_start(&dead);
	server_stop(&dead); /* nothing listens on its port now */
	snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", dead.port);
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		setenv(vars[i], proxy, 1);
	setenv("no_proxy", "", 1);
	setenv("NO_PROXY", "", 1);
	backend_config_defaults(&cfg);
	bp = backend_new(&cfg);
	CHECK_ST(backend_health(bp, srv.url, &e), BACKEND_OK);
	backend_free(bp);

	cfg.proxy = proxy;
	bp = backend_new(&cfg);
	CHECK_ST(backend_health(bp, srv.url, &e), BACKEND_NOT_SENT);
	CHECK(backend_errno(e.status, BACKEND_OP_HEALTH) == ENOTCONN);
	check_no_secret(&e, srv.url, srv.port, NULL);
	CHECK(strstr(e.message, proxy + 7) == NULL);
	backend_free(bp);
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	unsetenv("no_proxy");
	unsetenv("NO_PROXY");
}

/* Answers 401 {"error": msg} to every request on c. */
static void canned_error(struct canned *c, const char *msg)
{
	char resp[1024];

	snprintf(resp, sizeof(resp),
		 "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
		 "Content-Length: %zu\r\nConnection: close\r\n\r\n{\"error\":\"%s\"}",
		 strlen(msg) + 12, msg);
	canned_set(c, resp);
}

/* A server that echoes a secret in its error message: the message passed
 * on holds no part of it, whatever its length and place (a short token
 * ending at the end of the 256-byte message once overflowed the stack). */
static void echoed_secrets(void)
{
	struct canned c;
	struct backend_error e;
	struct backend_sandbox sb;
	struct backend_orchestrator o;
	char msg[400];

	canned_start(&c);
	o.base_url = c.url;

	/* A 5-byte token, shorter than "[redacted]", ending the message at
	 * its 255th byte. */
	o.token = "tk5ab";
	memset(msg, 'x', 250);
	strcpy(msg + 250, "tk5ab");
	canned_error(&c, msg);
	CHECK_ST(backend_orch_get(b, &o, "x", &sb, &e), BACKEND_DENIED);
	CHECK(strlen(e.message) < sizeof(e.message));
	CHECK(strstr(e.message, "tk5ab") == NULL);
	CHECK(strstr(e.message, "[reda") != NULL);

	/* A token that is part of "[redacted]" itself. */
	o.token = "dact";
	canned_error(&c, "bad token dact, try again");
	CHECK_ST(backend_orch_get(b, &o, "x", &sb, &e), BACKEND_DENIED);
	CHECK(strcmp(e.message, "bad token [redacted], try again") == 0);

	/* A long token cut by the end of the message: its start is redacted
	 * too. */
	o.token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	memset(msg, 'y', 240);
	snprintf(msg + 240, sizeof(msg) - 240, "%s and more", o.token);
	canned_error(&c, msg);
	CHECK_ST(backend_orch_get(b, &o, "x", &sb, &e), BACKEND_DENIED);
	CHECK(strstr(e.message, "0123456789abcde") == NULL);
	CHECK(strstr(e.message, "[reda") != NULL);

	/* The URL and host:port echoed, many times over. */
	o.token = NULL;
	msg[0] = '\0';
	strcat(strcat(msg, c.url), "/v1");
	for (int i = 0; i < 4; i++)
		strcat(strcat(msg, " "), c.url + 7);
	canned_error(&c, msg);
	CHECK_ST(backend_orch_get(b, &o, "x", &sb, &e), BACKEND_DENIED);
	check_no_secret(&e, c.url, c.port, NULL);
	canned_stop(&c);
}

/* backend_scrub on its own: bounds, a secret at every place, the cut
 * end, and a buffer smaller than the message. */
static void scrub_unit(void)
{
	char m[BACKEND_SCRUB_MAX];

	for (size_t at = 0; at + 5 < sizeof(m); at++) {
		memset(m, 'z', at);
		strcpy(m + at, "s3cr!");
		memset(m + at + 5, 'q', sizeof(m) - 1 - at - 5);
		m[sizeof(m) - 1] = '\0';
		backend_scrub(m, sizeof(m), "s3cr!", false);
		CHECK(strlen(m) == sizeof(m) - 1);
		CHECK(strstr(m, "s3cr!") == NULL);
		CHECK(strncmp(m + at, "[redacted]",
			      strlen(m + at) < 10 ? strlen(m + at) : 10) == 0);
	}
	strcpy(m, "no secret here");
	CHECK(!backend_scrub(m, sizeof(m), "absent", false));
	CHECK(strcmp(m, "no secret here") == 0);
	strcpy(m, "short abc stays");
	backend_scrub(m, sizeof(m), "abc", false); /* under 4 bytes: kept */
	CHECK(strcmp(m, "short abc stays") == 0);
	strcpy(m, "ends with the start of toke");
	CHECK(backend_scrub(m, sizeof(m), "token-value", true));
	CHECK(strcmp(m, "ends with the start of [redacted]") == 0);
	strcpy(m, "ends with the start of toke");
	CHECK(!backend_scrub(m, sizeof(m), "token-value", false));
	CHECK(strcmp(m, "ends with the start of toke") == 0);
	strcpy(m, "abcd abcd");
	CHECK(backend_scrub(m, 12, "abcd", false)); /* grows past 12: cut */
	CHECK(strcmp(m, "[redacted] ") == 0);
}

/* A 504 (a proxy cutting a request at the sandbox's request bound): for
 * an execute or a create the outcome is unknown, and it is never resent;
 * for any other call it is a server error. */
static void gateway_timeout(void)
{
	struct canned c;
	struct backend_error e;
	struct backend_exec_result r;
	struct backend_sandbox sb;
	struct backend_listing l;
	struct backend_pool_list pl;
	struct backend_orchestrator o;
	struct backend_create_request cr = {.id = "x", .pool = "default"};
	const char *token = "gateway-secret-token";
	unsigned long served;
	int fd = temp_fd(10, 3);

	canned_start(&c);
	o.base_url = c.url;
	o.token = token;
	canned_set(&c,
		   "HTTP/1.1 504 Gateway Timeout\r\nContent-Type: application/json\r\n"
		   "Content-Length: 28\r\n\r\n{\"error\":\"upstream timeout\"}");

	served = atomic_load(&c.served);
	CHECK_ST(backend_execute(b, c.url, "sleep 400", 30, &r, &e), BACKEND_ANSWER_LOST);
	CHECK(e.status == BACKEND_ANSWER_LOST && e.http_status == 504);
	CHECK(strstr(e.message, "gateway timeout (504)") != NULL);
	CHECK(backend_errno(e.status, BACKEND_OP_EXECUTE) == EIO);
	CHECK(r.out == NULL && r.err == NULL);
	check_no_secret(&e, c.url, c.port, NULL);
	/* Sent once: the one request the server saw. */
	CHECK(atomic_load(&c.served) == served + 1);

	served = atomic_load(&c.served);
	CHECK_ST(backend_orch_create(b, &o, &cr, &sb, &e), BACKEND_ANSWER_LOST);
	CHECK(e.http_status == 504 && strstr(e.message, "gateway timeout (504)"));
	CHECK(sb.id == NULL);
	check_no_secret(&e, c.url, c.port, token);
	CHECK(atomic_load(&c.served) == served + 1);

	/* Other calls: a server error, with the server's message. */
	CHECK_ST(backend_health(b, c.url, &e), BACKEND_SERVER_ERROR);
	CHECK(e.http_status == 504 && strcmp(e.message, "upstream timeout") == 0);
	CHECK_ST(backend_list(b, c.url, "", &l, &e), BACKEND_SERVER_ERROR);
	CHECK(e.http_status == 504);
	CHECK_ST(backend_file_put(b, c.url, "f", fd, 10, &e), BACKEND_SERVER_ERROR);
	CHECK(e.http_status == 504);
	CHECK_ST(backend_orch_get(b, &o, "x", &sb, &e), BACKEND_SERVER_ERROR);
	CHECK(e.http_status == 504);
	CHECK_ST(backend_orch_pools(b, &o, NULL, &pl, &e), BACKEND_SERVER_ERROR);
	CHECK(e.http_status == 504);
	CHECK_ST(backend_orch_delete(b, &o, "x", &e), BACKEND_SERVER_ERROR);
	CHECK(e.http_status == 504);
	check_no_secret(&e, c.url, c.port, token);

	/* Another 5xx to an execute stays a server error. */
	canned_set(&c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n");
	CHECK_ST(backend_execute(b, c.url, "true", 30, &r, &e), BACKEND_SERVER_ERROR);
	CHECK(e.http_status == 502);
	close(fd);
	canned_stop(&c);
}

int main(int argc, char **argv)
{
	struct backend_stats s;

	harness_init(argc, argv);
	server_start(&srv);
	b = backend_new(NULL);
	not_sent();
	answer_lost();
	control_plain_curl();
	bounds();
	malformed();
	echoed_secrets();
	gateway_timeout();
	scrub_unit();
	proxies();
	download_bounds();
	backend_get_stats(b, &s);
	CHECK(s.errors > 0);
	backend_free(b);
	server_stop(&srv);
	return check_done("test_faults");
}
