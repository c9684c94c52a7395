/*
 * harness.c — see harness.h.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static const char *server_bin;

void harness_init(int argc, char **argv)
{
	server_bin = argc > 1 ? argv[1] : getenv("SANDBOX_SERVER");
	if (!server_bin || access(server_bin, X_OK) != 0) {
		fprintf(stderr, "harness: no sandbox-server binary (argv[1] or "
				"SANDBOX_SERVER)\n");
		exit(1);
	}
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static void random_hex(char *out, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char buf[32];
	int fd = open("/dev/urandom", O_RDONLY);

	if (fd < 0 || read(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf)) {
		perror("urandom");
		exit(1);
	}
	close(fd);
	for (size_t i = 0; i + 1 < n && i < 64; i++)
		out[i] = hex[(buf[i / 2] >> (i % 2 ? 0 : 4)) & 15];
	out[n - 1] = '\0';
}

static void start(struct server *s, bool orch)
{
	char portfile[320], root[320], tokfile[320], *args[32];
	int n = 0;

	memset(s, 0, sizeof(*s));
	s->orchestrator = orch;
	snprintf(s->dir, sizeof(s->dir), "/tmp/sandboxfs-backend-test-XXXXXX");
	if (!mkdtemp(s->dir)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(portfile, sizeof(portfile), "%s/port", s->dir);
	args[n++] = (char *)server_bin;
	args[n++] = "--port";
	args[n++] = "0";
	args[n++] = "--port-file";
	args[n++] = portfile;
	args[n++] = "--faults";
	if (orch) {
		FILE *f;

		random_hex(s->token, sizeof(s->token));
		snprintf(root, sizeof(root), "%s/root", s->dir);
		snprintf(tokfile, sizeof(tokfile), "%s/token", s->dir);
		f = fopen(tokfile, "w");
		if (!f || fprintf(f, "%s\n", s->token) < 0 || fclose(f) != 0) {
			perror("token file");
			exit(1);
		}
		chmod(tokfile, 0600);
		args[n++] = "--orchestrator";
		args[n++] = "--root";
		args[n++] = root;
		args[n++] = "--token-file";
		args[n++] = tokfile;
		args[n++] = "--pool";
		args[n++] = "default";
		args[n++] = "--pool";
		args[n++] = "tiny:1";
	} else {
		snprintf(s->workspace, sizeof(s->workspace), "%s/ws", s->dir);
		mkdir(s->workspace, 0700);
		args[n++] = "--workspace";
		args[n++] = s->workspace;
	}
	args[n] = NULL;
	s->pid = fork();
	if (s->pid < 0) {
		perror("fork");
		exit(1);
	}
	if (s->pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		/* The server's own chatter is not this test's output. */
		if (devnull >= 0)
			dup2(devnull, 1);
		execv(server_bin, args);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		FILE *f = fopen(portfile, "r");
		int status;

		if (f) {
			if (fscanf(f, "%d", &s->port) == 1 && s->port > 0) {
				fclose(f);
				snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%d",
					 s->port);
				return;
			}
			fclose(f);
		}
		if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
			fprintf(stderr, "harness: sandbox-server exited at start\n");
			exit(1);
		}
		sleep_ms(10);
	}
	fprintf(stderr, "harness: sandbox-server did not start in 10 s\n");
	kill(s->pid, SIGKILL);
	exit(1);
}

void server_start(struct server *s)
{
	start(s, false);
}

void server_start_orchestrator(struct server *s)
{
	start(s, true);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void server_stop(struct server *s)
{
	int status;

	if (s->pid <= 0)
		return;
	kill(s->pid, SIGTERM);
	for (int i = 0; i < 500; i++) {
		if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
			s->pid = 0;
			break;
		}
		sleep_ms(10);
	}
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, &status, 0);
		s->pid = 0;
	}
	nftw(s->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

struct membuf {
	char *p;
	size_t n;
};

static size_t mem_write(char *p, size_t size, size_t nmemb, void *userp)
{
	struct membuf *m = userp;
	size_t k = size * nmemb;
	char *np = realloc(m->p, m->n + k + 1);

	if (!np)
		return 0;
	memcpy(np + m->n, p, k);
	m->p = np;
	m->n += k;
	m->p[m->n] = '\0';
	return k;
}

/* One plain request with a fresh handle (never the backend under test). */
static long raw(const char *url, const char *path, const char *post, struct membuf *m)
{
	CURL *c = curl_easy_init();
	char full[512];
	long code = 0;
	struct curl_slist *h = NULL;

	snprintf(full, sizeof(full), "%s%s", url, path);
	curl_easy_setopt(c, CURLOPT_URL, full);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, mem_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, m);
	if (post) {
		h = curl_slist_append(h, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, post);
	}
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return code;
}

long admin_post(const char *url, const char *path, const char *json)
{
	struct membuf m = {0};
	long code = raw(url, path, json, &m);

	free(m.p);
	return code;
}

void admin_faults(const char *url, const char *json)
{
	if (admin_post(url, "/_admin/faults", json) != 200) {
		fprintf(stderr, "harness: cannot set faults\n");
		exit(1);
	}
}

cJSON *admin_get(const char *url, const char *path)
{
	struct membuf m = {0};
	cJSON *j = NULL;

	if (raw(url, path, NULL, &m) == 200 && m.p)
		j = cJSON_Parse(m.p);
	free(m.p);
	return j;
}

long admin_stat(const char *url, const char *name)
{
	cJSON *j = admin_get(url, "/_admin/stats");
	cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
	long n = cJSON_IsNumber(v) ? (long)v->valuedouble : -1;

	cJSON_Delete(j);
	return n;
}

int admin_log_count(const char *url, const char *cmd)
{
	cJSON *j = admin_get(url, "/_admin/log");
	cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "commands"), *e;
	int n = 0;

	if (!cJSON_IsArray(arr)) {
		cJSON_Delete(j);
		return -1;
	}
	cJSON_ArrayForEach(e, arr)
	{
		const char *s = cJSON_IsString(e) ? e->valuestring : NULL;
		cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "command");

		if (!s && cJSON_IsString(c))
			s = c->valuestring;
		if (s && strcmp(s, cmd) == 0)
			n++;
	}
	cJSON_Delete(j);
	return n;
}

/* The answer as sent: this server closes every connection after one
 * answer, so it says so (Connection: close) unless the test's answer
 * speaks of the connection itself; a client would otherwise keep the
 * connection for its next request and find it closed under it. */
static char *canned_closing(const char *response)
{
	const char *eol = strstr(response, "\r\n");
	if (!eol || strcasestr(response, "\r\nconnection:"))
		return strdup(response);
	char *out = NULL;
	if (asprintf(&out, "%.*s\r\nConnection: close%s", (int)(eol - response), response,
		     eol) < 0)
		return NULL;
	return out;
}

static void *canned_main(void *arg)
{
	struct canned *c = arg;

	while (!atomic_load_explicit(&c->stop, memory_order_acquire)) {
		char buf[65536];
		size_t got = 0;
		char *resp;
		int fd = accept(c->fd, NULL, NULL);

		if (fd < 0)
			continue;
		buf[0] = '\0';
		if (atomic_load_explicit(&c->stop, memory_order_acquire)) {
			close(fd);
			break;
		}
		/* Read the head and whatever body Content-Length says. */
		for (;;) {
			ssize_t r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
			char *end, *cl;

			if (r <= 0)
				break;
			got += (size_t)r;
			buf[got] = '\0';
			end = strstr(buf, "\r\n\r\n");
			if (!end)
				continue;
			cl = strcasestr(buf, "content-length:");
			if (!cl ||
			    (size_t)(end + 4 - buf) + strtoul(cl + 15, NULL, 10) <= got)
				break;
		}
		pthread_mutex_lock(c->lock);
		resp = canned_closing(c->response);
		{
			char *end = strstr(buf, "\r\n\r\n");

			free(c->last_body);
			c->last_body = strdup(end ? end + 4 : "");
		}
		pthread_mutex_unlock(c->lock);
		/* Counted before the answer goes: a client that has it may
		 * look at the count at once. */
		atomic_fetch_add(&c->served, 1);
		if (resp && send(fd, resp, strlen(resp), MSG_NOSIGNAL) < 0)
			perror("canned send");
		free(resp);
		shutdown(fd, SHUT_WR);
		close(fd);
	}
	return NULL;
}

void canned_start(struct canned *c)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	pthread_t *t = malloc(sizeof(*t));

	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (!t || c->fd < 0 || bind(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(c->fd, 16) != 0 ||
	    getsockname(c->fd, (struct sockaddr *)&a, &len) != 0) {
		perror("canned");
		exit(1);
	}
	c->port = ntohs(a.sin_port);
	snprintf(c->url, sizeof(c->url), "http://127.0.0.1:%d", c->port);
	c->stop = 0;
	c->served = 0;
	c->response = strdup("HTTP/1.1 500 Unset\r\nContent-Length: 0\r\n\r\n");
	c->last_body = NULL;
	c->lock = malloc(sizeof(pthread_mutex_t));
	pthread_mutex_init(c->lock, NULL);
	pthread_create(t, NULL, canned_main, c);
	c->thread = t;
}

void canned_set(struct canned *c, const char *response)
{
	char *copy = strdup(response);

	pthread_mutex_lock(c->lock);
	free(c->response);
	c->response = copy;
	pthread_mutex_unlock(c->lock);
}

void canned_stop(struct canned *c)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)c->port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	atomic_store_explicit(&c->stop, 1, memory_order_release);
	/* Wake the accept with one last connection. */
	if (fd >= 0) {
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
			perror("canned wake");
		close(fd);
	}
	pthread_join(*(pthread_t *)c->thread, NULL);
	free(c->thread);
	close(c->fd);
	pthread_mutex_destroy(c->lock);
	free(c->lock);
	free(c->response);
	free(c->last_body);
}

char *canned_last_body(struct canned *c)
{
	char *copy;

	pthread_mutex_lock(c->lock);
	copy = c->last_body ? strdup(c->last_body) : NULL;
	pthread_mutex_unlock(c->lock);
	return copy;
}

static void stream_one(struct streamer *s, int fd)
{
	char buf[65536], head[256];
	size_t got = 0;
	int n;

	/* The request head; a GET has no body. */
	while (got < sizeof(buf) - 1) {
		ssize_t r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);

		if (r <= 0)
			return;
		got += (size_t)r;
		buf[got] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			break;
	}
	if (s->content_length >= 0)
		n = snprintf(
		    head, sizeof(head),
		    "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
		    "Content-Length: %lld\r\n\r\n",
		    s->content_length);
	else
		n = snprintf(
		    head, sizeof(head),
		    "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
		    "Connection: close\r\n\r\n");
	if (send(fd, head, (size_t)n, MSG_NOSIGNAL) != n)
		return;
	memset(buf, 'x', sizeof(buf));
	while (!atomic_load_explicit(&s->stop, memory_order_acquire)) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t w;

		if (s->mode == STREAM_SILENT) {
			char c;

			/* Until the client hangs up. */
			if (poll(&p, 1, 100) > 0 && recv(fd, &c, 1, MSG_DONTWAIT) <= 0)
				return;
			continue;
		}
		w = send(fd, buf, s->mode == STREAM_TRICKLE ? 1 : sizeof(buf),
			 MSG_NOSIGNAL);
		if (w <= 0)
			return;
		atomic_fetch_add(&s->sent, (unsigned long long)w);
		if (s->mode == STREAM_TRICKLE)
			sleep_ms(500);
	}
}

static void *streamer_main(void *arg)
{
	struct streamer *s = arg;

	while (!atomic_load_explicit(&s->stop, memory_order_acquire)) {
		int fd = accept(s->fd, NULL, NULL);

		if (fd < 0)
			continue;
		if (!atomic_load_explicit(&s->stop, memory_order_acquire))
			stream_one(s, fd);
		close(fd);
	}
	return NULL;
}

void streamer_start(struct streamer *s, enum streamer_mode mode, long long content_length)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	pthread_t *t = malloc(sizeof(*t));

	memset(s, 0, sizeof(*s));
	s->mode = mode;
	s->content_length = content_length;
	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (!t || s->fd < 0 || bind(s->fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(s->fd, 16) != 0 ||
	    getsockname(s->fd, (struct sockaddr *)&a, &len) != 0) {
		perror("streamer");
		exit(1);
	}
	s->port = ntohs(a.sin_port);
	snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%d", s->port);
	pthread_create(t, NULL, streamer_main, s);
	s->thread = t;
}

void streamer_stop(struct streamer *s)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)s->port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	atomic_store_explicit(&s->stop, 1, memory_order_release);
	/* Wake the accept with one last connection. */
	if (fd >= 0) {
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
			perror("streamer wake");
		close(fd);
	}
	pthread_join(*(pthread_t *)s->thread, NULL);
	free(s->thread);
	close(s->fd);
}

static unsigned char pattern(size_t i, unsigned seed)
{
	return (unsigned char)((i * 2654435761u + seed * 40503u) >> 13);
}

int temp_fd(size_t size, unsigned seed)
{
	char tmpl[] = "/tmp/sandboxfs-backend-data-XXXXXX";
	int fd = mkstemp(tmpl);
	unsigned char buf[65536];

	if (fd < 0) {
		perror("mkstemp");
		exit(1);
	}
	unlink(tmpl);
	for (size_t off = 0; off < size;) {
		size_t k = size - off < sizeof(buf) ? size - off : sizeof(buf);

		for (size_t i = 0; i < k; i++)
			buf[i] = pattern(off + i, seed);
		if (write(fd, buf, k) != (ssize_t)k) {
			perror("write");
			exit(1);
		}
		off += k;
	}
	return fd;
}

bool fd_matches(int fd, size_t size, unsigned seed)
{
	unsigned char buf[65536];
	struct stat sb;

	if (fstat(fd, &sb) != 0 || (size_t)sb.st_size != size)
		return false;
	for (size_t off = 0; off < size;) {
		ssize_t k = pread(fd, buf, sizeof(buf), (off_t)off);

		if (k <= 0)
			return false;
		for (ssize_t i = 0; i < k; i++)
			if (buf[i] != pattern(off + (size_t)i, seed))
				return false;
		off += (size_t)k;
	}
	return true;
}
