/*
 * wstest.h — what the workspace unit tests share: a real sandbox-server on
 * 127.0.0.1 (ephemeral port, private temp dir, stopped by its PID), its
 * admin routes, and a wscache over a real backend and journal. Checks on
 * the server side read the server's workspace directory and /_admin/stats.
 */
#ifndef SANDBOXFS_TEST_WSTEST_H
#define SANDBOXFS_TEST_WSTEST_H

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../lib/check.h"
#include "workspace.h"

struct srv {
	pid_t pid;
	char dir[256]; /* private temp dir */
	char ws[300];  /* the served workspace */
	char url[64];
};

static inline void die(const char *what)
{
	fprintf(stderr, "test setup failed: %s: %s\n", what, strerror(errno));
	exit(1);
}

static inline void srv_start(struct srv *s, const char *bin, bool faults)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "/tmp/sbxfs-wstest-XXXXXX");
	if (!mkdtemp(s->dir))
		die("mkdtemp");
	snprintf(s->ws, sizeof(s->ws), "%s/ws", s->dir);
	if (mkdir(s->ws, 0700) < 0)
		die("mkdir");
	char portfile[320];
	snprintf(portfile, sizeof(portfile), "%s/port", s->dir);
	s->pid = fork();
	if (s->pid < 0)
		die("fork");
	if (s->pid == 0) {
		char log[320];
		snprintf(log, sizeof(log), "%s/server.log", s->dir);
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(bin, bin, "--port", "0", "--port-file", portfile, "--workspace",
		      s->ws, faults ? "--faults" : NULL, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		FILE *f = fopen(portfile, "r");
		int port = 0;
		if (f) {
			if (fscanf(f, "%d", &port) != 1)
				port = 0;
			fclose(f);
		}
		if (port > 0) {
			snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%d", port);
			return;
		}
		int st;
		if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
			errno = ECHILD;
			die("sandbox-server exited");
		}
		usleep(10000);
	}
	errno = ETIMEDOUT;
	die("sandbox-server port file");
}

/* A test's start: its one argument (the sandbox-server binary), curl, the
 * server (with its fault routes when asked) and a backend with the
 * defaults. Exits 2 on a wrong command line. */
static inline struct backend *wstest_begin(int argc, char **argv, struct srv *s, bool faults)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s SANDBOX-SERVER\n", argv[0]);
		exit(2);
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	srv_start(s, argv[1], faults);
	struct backend_config bc;
	backend_config_defaults(&bc);
	return backend_new(&bc);
}

static inline void rm_rf(const char *dir)
{
	pid_t p = fork();
	if (p == 0) {
		execlp("rm", "rm", "-rf", "--", dir, (char *)NULL);
		_exit(127);
	}
	int st;
	if (p > 0)
		waitpid(p, &st, 0);
}

static inline void srv_stop(struct srv *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		int st;
		for (int i = 0; i < 300 && waitpid(s->pid, &st, WNOHANG) == 0; i++)
			usleep(10000);
		if (waitpid(s->pid, &st, WNOHANG) == 0) {
			kill(s->pid, SIGKILL);
			waitpid(s->pid, &st, 0);
		}
		s->pid = 0;
	}
	rm_rf(s->dir);
}

struct membuf {
	char *p;
	size_t n;
};

static inline size_t membuf_write(void *data, size_t size, size_t nmemb, void *user)
{
	struct membuf *m = user;
	size_t len = size * nmemb;
	char *p = realloc(m->p, m->n + len + 1);
	if (!p)
		return 0;
	memcpy(p + m->n, data, len);
	m->p = p;
	m->n += len;
	p[m->n] = '\0';
	return len;
}

/* An admin call; returns the answer body (malloc'ed) or NULL. */
static inline char *srv_admin(struct srv *s, const char *route, const char *post)
{
	CURL *h = curl_easy_init();
	if (!h)
		return NULL;
	char url[128];
	snprintf(url, sizeof(url), "%s%s", s->url, route);
	struct membuf m = {0};
	struct curl_slist *hdr = NULL;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, membuf_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &m);
	if (post) {
		hdr = curl_slist_append(hdr, "Content-Type: application/json");
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, post);
	}
	CURLcode rc = curl_easy_perform(h);
	long code = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(hdr);
	curl_easy_cleanup(h);
	if (rc != CURLE_OK || code != 200) {
		free(m.p);
		return NULL;
	}
	return m.p ? m.p : strdup("");
}

static inline long srv_stat(struct srv *s, const char *key)
{
	char *body = srv_admin(s, "/_admin/stats", NULL);
	long v = -1;
	cJSON *j = body ? cJSON_Parse(body) : NULL;
	cJSON *it = j ? cJSON_GetObjectItem(j, key) : NULL;
	if (cJSON_IsNumber(it))
		v = (long)it->valuedouble;
	cJSON_Delete(j);
	free(body);
	return v;
}

static inline bool srv_faults(struct srv *s, const char *json)
{
	char *b = srv_admin(s, "/_admin/faults", json);
	free(b);
	return b != NULL;
}

/* A file of the server's workspace, read from its disk; NULL if missing. */
static inline char *srv_read(struct srv *s, const char *rel, size_t *len)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/%s", s->ws, rel);
	FILE *f = fopen(p, "rb");
	if (!f)
		return NULL;
	struct membuf m = {0};
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		membuf_write(buf, 1, n, &m);
	fclose(f);
	if (len)
		*len = m.n;
	return m.p ? m.p : strdup("");
}

static inline bool srv_has(struct srv *s, const char *rel, const char *want)
{
	size_t n;
	char *got = srv_read(s, rel, &n);
	bool ok = got && n == strlen(want) && memcmp(got, want, n) == 0;
	if (!ok)
		fprintf(stderr, "  server %s: got %s%.60s%s, want \"%.60s\"\n", rel,
			got ? "\"" : "", got ? got : "(missing)", got ? "\"" : "", want);
	free(got);
	return ok;
}

static inline bool srv_exists(struct srv *s, const char *rel)
{
	char p[1024];
	struct stat sb;
	snprintf(p, sizeof(p), "%s/%s", s->ws, rel);
	return stat(p, &sb) == 0;
}

static inline void srv_put(struct srv *s, const char *rel, const char *data)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/%s", s->ws, rel);
	FILE *f = fopen(p, "wb");
	if (!f)
		die("server file");
	fputs(data, f);
	fclose(f);
}

/* Names a readdir returned. */
struct names {
	char *v[256];
	int n;
};

static inline int names_fill(void *buf, const char *name, const struct stat *st,
			     off_t off, bool plus)
{
	struct names *nm = buf;
	if (nm->n < 256)
		nm->v[nm->n++] = strdup(name);
	return 0;
}

static inline bool names_has(const struct names *nm, const char *name)
{
	for (int i = 0; i < nm->n; i++)
		if (strcmp(nm->v[i], name) == 0)
			return true;
	return false;
}

static inline void names_clear(struct names *nm)
{
	for (int i = 0; i < nm->n; i++)
		free(nm->v[i]);
	nm->n = 0;
}

/* Helpers through the workspace API, as the FUSE dispatcher calls it. */
static inline int ws_put(struct workspace *ws, const char *rel, const char *data,
			 int flags)
{
	struct wsopen fi = {.flags = flags};
	int rc = (flags & O_CREAT) ? workspace_create(ws, rel, 0644, &fi)
				   : workspace_open(ws, rel, &fi);
	if (rc < 0)
		return rc;
	size_t len = strlen(data);
	int w = workspace_write(fi.fh, data, len, 0);
	int f = workspace_flush(fi.fh);
	workspace_release(fi.fh);
	if (w < 0)
		return w;
	return f;
}

static inline char *ws_get(struct workspace *ws, const char *rel, int *err)
{
	struct wsopen fi = {.flags = O_RDONLY};
	int rc = workspace_open(ws, rel, &fi);
	if (rc < 0) {
		*err = rc;
		return NULL;
	}
	static char buf[1 << 16];
	int n = workspace_read(fi.fh, buf, sizeof(buf) - 1, 0);
	workspace_flush(fi.fh);
	workspace_release(fi.fh);
	if (n < 0) {
		*err = n;
		return NULL;
	}
	buf[n] = '\0';
	*err = 0;
	return strdup(buf);
}

static inline bool wait_for(bool (*cond)(void *), void *arg, int ms)
{
	for (int i = 0; i < ms / 20; i++) {
		if (cond(arg))
			return true;
		usleep(20000);
	}
	return cond(arg);
}

#endif
