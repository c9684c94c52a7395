/*
 * test_unix.c — base URLs on a Unix socket (http+unix://ENCODED_PATH/BASE)
 * against the real local orchestrator in its Unix mode (sandbox-server
 * --orchestrator --unix): every call of both contracts over sockets, a
 * base path, a dead socket (not sent), no proxy ever, no socket path in a
 * message; and a TCP orchestrator (a canned responder) that names a
 * sandbox on a local socket is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend_i.h"
#include "check.h"
#include "harness.h"

static const char *server_bin;
static char dir[64], orch_url[512];
static const char *token = "unix-test-token-0123456789";
static pid_t pid;
static struct backend *b;

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static void start(void)
{
	char root[128], api[128], urlfile[128], tokfile[128];
	FILE *f;

	snprintf(dir, sizeof(dir), "/tmp/sandboxfs-unix-test-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(root, sizeof(root), "%s/root", dir);
	snprintf(api, sizeof(api), "%s/run/orch", dir);
	snprintf(urlfile, sizeof(urlfile), "%s/url", dir);
	snprintf(tokfile, sizeof(tokfile), "%s/token", dir);
	f = fopen(tokfile, "w");
	if (!f || fprintf(f, "%s\n", token) < 0 || fclose(f) != 0) {
		perror("token file");
		exit(1);
	}
	pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		if (devnull >= 0)
			dup2(devnull, 1);
		execl(server_bin, server_bin, "--orchestrator", "--root", root, "--unix",
		      api, "--url-file", urlfile, "--token-file", tokfile, "--faults",
		      (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		f = fopen(urlfile, "r");
		if (f) {
			bool ok = fgets(orch_url, sizeof(orch_url), f) != NULL;

			fclose(f);
			orch_url[strcspn(orch_url, "\n")] = '\0';
			if (ok)
				return;
		}
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			fprintf(stderr, "test_unix: sandbox-server exited at start\n");
			exit(1);
		}
		sleep_ms(10);
	}
	fprintf(stderr, "test_unix: sandbox-server did not start in 10 s\n");
	kill(pid, SIGKILL);
	exit(1);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void stop(void)
{
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A message names neither the URL, nor its host, nor the socket path. */
static void check_no_unix_secret(const struct backend_error *e, const char *url)
{
	char *path = backend_url_socket_path(url);
	const char *host = url + strlen("http+unix://");

	check_secrets++;
	CHECK(path != NULL);
	CHECK(e->message[0] != '\0');
	CHECK(strstr(e->message, url) == NULL);
	CHECK(strstr(e->message, host) == NULL);
	CHECK(!path || strstr(e->message, path) == NULL);
	CHECK(strstr(e->message, dir) == NULL);
	free(path);
}

static void parsing(void)
{
	char *u = NULL, *p = NULL;
	char long_path[300] = "http+unix://%2F";

	CHECK(backend_url_valid("http+unix://%2Frun%2Fsbx%2Fa1b2c3d4"));
	CHECK(backend_url_valid("HTTP+UNIX://%2frun%2fsbx/v1/"));
	CHECK(backend_url_valid("http+unix://%2Ftmp%2Fa%20b.sock/base"));
	CHECK(!backend_url_valid("http+unix://"));
	CHECK(!backend_url_valid("http+unix:///run/sbx"));    /* no host */
	CHECK(!backend_url_valid("http+unix://run%2Fsbx"));   /* relative */
	CHECK(!backend_url_valid("http+unix://%2Frun%00x"));  /* NUL */
	CHECK(!backend_url_valid("http+unix://%2Frun%0Ax"));  /* newline */
	CHECK(!backend_url_valid("http+unix://%2Frun%2"));    /* cut escape */
	CHECK(!backend_url_valid("http+unix://%2Frun%zz"));   /* bad escape */
	CHECK(!backend_url_valid("http+unix://%2Frun@x"));    /* userinfo */
	CHECK(!backend_url_valid("http+unix://%2Frun:80"));   /* a port */
	CHECK(!backend_url_valid("http+unix://%2Frun/?q=1")); /* query */
	CHECK(!backend_url_valid("http+unix://%2Frun/a b"));  /* space */
	CHECK(!backend_url_valid("https+unix://%2Frun"));     /* no TLS form */
	CHECK(!backend_url_valid("unix:///run/sbx"));	      /* other schemes */
	CHECK(!backend_url_valid("http+unix://%2F"));	      /* just "/" */
	for (int i = 0; i < 106; i++)
		strcat(long_path, "a");
	CHECK(backend_url_valid(long_path)); /* 107 bytes: fits sun_path */
	strcat(long_path, "a");
	CHECK(!backend_url_valid(long_path));

	CHECK(backend_unix_url_parse("http+unix://%2Frun%2Fs%20x/v1/", &u, &p) == 0);
	CHECK(u && strcmp(u, "http://localhost/v1/") == 0);
	CHECK(p && strcmp(p, "/run/s x") == 0);
	free(u);
	free(p);
	CHECK(backend_unix_url_parse("http://127.0.0.1:1", &u, &p) == -1);
	CHECK(u == NULL && p == NULL);
	p = backend_url_socket_path("http+unix://%2Fa%2Fb");
	CHECK(p && strcmp(p, "/a/b") == 0);
	free(p);
	CHECK(backend_url_socket_path("https://example.com/") == NULL);
}

static void contract_over_sockets(void)
{
	struct backend_orchestrator o = {orch_url, token};
	struct backend_create_request req = {.id = "sock", .pool = "default"};
	struct backend_sandbox s;
	struct backend_sandbox_list l;
	struct backend_listing ls;
	struct backend_exec_result r;
	struct backend_error e;
	struct backend_stats st;
	int fd = temp_fd(100000, 7), out;
	uint64_t got = 0;

	CHECK(strncmp(orch_url, "http+unix://", 12) == 0);
	CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_OK);
	CHECK(s.url && backend_url_is_unix(s.url));
	if (!s.url)
		return;
	CHECK_ST(backend_health(b, s.url, &e), BACKEND_OK);
	CHECK_ST(backend_execute(b, s.url, "echo over a socket", 30, &r, &e), BACKEND_OK);
	CHECK(r.out && strcmp(r.out, "over a socket\n") == 0);
	backend_exec_result_clear(&r);
	CHECK_ST(backend_file_put(b, s.url, "d/f.bin", fd, 100000, &e), BACKEND_OK);
	out = temp_fd(0, 0);
	CHECK_ST(backend_file_get(b, s.url, "d/f.bin", out, &got, &e), BACKEND_OK);
	CHECK(got == 100000 && fd_matches(out, 100000, 7));
	close(out);
	close(fd);
	CHECK_ST(backend_list(b, s.url, "d", &ls, &e), BACKEND_OK);
	CHECK(ls.count == 1 && strcmp(ls.entries[0].name, "f.bin") == 0);
	backend_listing_clear(&ls);
	CHECK_ST(backend_file_delete(b, s.url, "d", &e), BACKEND_OK);
	CHECK_ST(backend_list(b, s.url, "d", &ls, &e), BACKEND_NOT_FOUND);
	check_no_unix_secret(&e, s.url);
	CHECK_ST(backend_orch_list(b, &o, &l, &e), BACKEND_OK);
	CHECK(l.count == 1 && l.dropped == 0 && l.items[0].url &&
	      strcmp(l.items[0].url, s.url) == 0);
	backend_sandbox_list_clear(&l);

	/* Connections are kept alive over sockets too. */
	backend_get_stats(b, &st);
	uint64_t opened = st.connections_opened;
	for (int i = 0; i < 5; i++)
		CHECK_ST(backend_health(b, s.url, &e), BACKEND_OK);
	backend_get_stats(b, &st);
	CHECK(st.connections_opened == opened);

	/* The URL's path after the socket is the base path. */
	{
		char based[600];

		snprintf(based, sizeof(based), "%s/base", s.url);
		CHECK_ST(backend_health(b, based, &e), BACKEND_NOT_FOUND);
		check_no_unix_secret(&e, s.url);
	}
	/* A wrong token: 401, with no secret in the message. */
	o.token = "wrong";
	CHECK_ST(backend_orch_get(b, &o, "sock", &(struct backend_sandbox){0}, &e),
		 BACKEND_DENIED);
	check_no_unix_secret(&e, orch_url);
	o.token = token;
	CHECK_ST(backend_orch_delete(b, &o, "sock", &e), BACKEND_OK);
	/* Its socket is gone with it: nothing listens, nothing was sent. */
	CHECK_ST(backend_health(b, s.url, &e), BACKEND_NOT_SENT);
	CHECK_ST(backend_execute(b, s.url, "true", 30, &r, &e), BACKEND_NOT_SENT);
	check_no_unix_secret(&e, s.url);
	backend_sandbox_clear(&s);
}

/* A proxy in the environment is never used for a socket. */
static void never_a_proxy(void)
{
	struct backend_orchestrator o = {orch_url, token};
	struct backend_sandbox_list l;
	struct backend_error e;

	setenv("http_proxy", "http://127.0.0.1:1", 1);
	setenv("HTTP_PROXY", "http://127.0.0.1:1", 1);
	setenv("ALL_PROXY", "http://127.0.0.1:1", 1);
	CHECK_ST(backend_orch_list(b, &o, &l, &e), BACKEND_OK);
	backend_sandbox_list_clear(&l);
	unsetenv("http_proxy");
	unsetenv("HTTP_PROXY");
	unsetenv("ALL_PROXY");
}

#define HEAD(code)                                                                       \
	"HTTP/1.1 " code "\r\nConnection: close\r\nContent-Type: application/json\r\n"

/* An orchestrator reached over TCP may not name a local socket. */
static void remote_orchestrator_cannot_name_a_socket(void)
{
	static const char status[] = "{\"id\":\"x\",\"status\":\"ready\",\"url\":"
				     "\"http+unix://%2Fvar%2Frun%2Fdocker.sock\"}";
	static const char list[] =
	    "{\"sandboxes\":[{\"id\":\"x\",\"status\":\"ready\",\"url\":"
	    "\"http+unix://%2Fvar%2Frun%2Fdocker.sock\"},{\"id\":\"y\",\"status\":"
	    "\"ready\",\"url\":\"http://127.0.0.1:1\"}]}";
	struct backend_create_request req = {.id = "x", .pool = "default"};
	struct backend_orchestrator o = {NULL, "t0k3n-for-canned"};
	struct backend_sandbox s;
	struct backend_sandbox_list l;
	struct backend_error e;
	struct canned c;
	char buf[1024];

	canned_start(&c);
	o.base_url = c.url;
	snprintf(buf, sizeof(buf), HEAD("201 Created") "Content-Length: %zu\r\n\r\n%s",
		 strlen(status), status);
	canned_set(&c, buf);
	CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_BAD_ANSWER);
	CHECK(s.id == NULL && s.url == NULL);
	CHECK_ST(backend_orch_get(b, &o, "x", &s, &e), BACKEND_BAD_ANSWER);
	snprintf(buf, sizeof(buf), HEAD("200 OK") "Content-Length: %zu\r\n\r\n%s",
		 strlen(list), list);
	canned_set(&c, buf);
	CHECK_ST(backend_orch_list(b, &o, &l, &e), BACKEND_OK);
	CHECK(l.count == 1 && l.dropped == 1 && strcmp(l.items[0].id, "y") == 0);
	backend_sandbox_list_clear(&l);
	canned_stop(&c);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	server_bin = argv[1];
	parsing();
	start();
	b = backend_new(NULL);
	contract_over_sockets();
	never_a_proxy();
	remote_orchestrator_cannot_name_a_socket();
	backend_free(b);
	stop();
	return check_done("test_unix");
}
