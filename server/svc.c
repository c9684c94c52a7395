/* svc.c — request life cycle, replies, counters and /_admin/ routes. */
#include "svc.h"
#include "bound.h"
#include "unixsock.h"

#include "common/clock.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ADMIN_BODY_LIMIT (64 * 1024)
#define LOG_ENTRY_MAX	 (64 * 1024)

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* Decode %XX in place. Returns false on a bad escape or a NUL byte. */
static bool percent_decode(char *s)
{
	char *o = s;

	for (char *p = s; *p; p++) {
		if (*p != '%') {
			*o++ = *p;
			continue;
		}
		unsigned int v;
		char hex[3] = {p[1], p[1] ? p[2] : 0, 0};

		if (!hex[0] || !hex[1] || !strchr("0123456789abcdefABCDEF", hex[0]) ||
		    !strchr("0123456789abcdefABCDEF", hex[1]))
			return false;
		v = (unsigned int)strtoul(hex, NULL, 16);
		if (v == 0)
			return false;
		*o++ = (char)v;
		p += 2;
	}
	*o = '\0';
	return true;
}

/* The path is decoded by the request handler itself, so that a bad escape
 * or %00 is a 400 rather than a silently cut path. */
static size_t unescape_none(void *cls, struct MHD_Connection *c, char *uri)
{
	return strlen(uri);
}

void svc_fail(struct req *r, int status, const char *fmt, ...)
{
	va_list ap;

	if (r->status)
		return;
	r->status = status;
	va_start(ap, fmt);
	vsnprintf(r->errmsg, sizeof(r->errmsg), fmt, ap);
	va_end(ap);
}

const char *svc_header(struct req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

enum MHD_Result svc_reply(struct req *r, unsigned int status, struct MHD_Response *resp)
{
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO;
	if (r->faulted && r->f.lose_answer) {
		atomic_fetch_add(&r->svc->stats.faults, 1);
		MHD_destroy_response(resp);
		return MHD_NO;
	}
	if (r->faulted && r->f.delay_ms > 0)
		sleep_ms(r->f.delay_ms);
	if (status >= 400)
		atomic_fetch_add(&r->svc->stats.errors, 1);
	if (r->bound)
		return bound_capture(r, status, resp);
	ret = MHD_queue_response(r->conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* The truncate_answer fault: the headers announce the whole body, half of
 * it is sent, then the connection is closed. The body_rate_kbps fault sends
 * a file body at that rate (each connection has its own thread, so the
 * sleeps delay only this answer). */
struct half_body {
	char *buf; /* or */
	int fd;
	uint64_t limit;
	uint64_t rate; /* bytes per second, 0: full speed */
	long long start_ms;
};

static ssize_t half_body_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct half_body *h = cls;
	size_t n;

	if (pos >= h->limit)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	n = h->limit - pos < max ? (size_t)(h->limit - pos) : max;
	if (h->rate) {
		/* Pieces of a 20th of a second, each sent when it is due. */
		uint64_t piece = h->rate / 20 + 1;
		long long due = h->start_ms + (long long)(pos * 1000 / h->rate);
		long long now = (long long)common_now_ms();

		if (n > piece)
			n = (size_t)piece;
		if (due > now)
			sleep_ms((long)(due - now));
	}
	if (h->buf) {
		memcpy(out, h->buf + pos, n);
		return (ssize_t)n;
	}
	ssize_t got = pread(h->fd, out, n, (off_t)pos);

	return got > 0 ? got : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void half_body_free(void *cls)
{
	struct half_body *h = cls;

	free(h->buf);
	if (h->fd >= 0)
		close(h->fd);
	free(h);
}

static struct MHD_Response *half_body_response(char *buf, int fd, uint64_t size,
					       bool half, uint64_t rate)
{
	struct half_body *h = malloc(sizeof(*h));
	struct MHD_Response *resp;

	if (!h) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	h->buf = buf;
	h->fd = fd;
	h->limit = half ? size / 2 : size;
	h->rate = rate;
	h->start_ms = (long long)common_now_ms();
	resp = MHD_create_response_from_callback(size, 64 * 1024, half_body_read, h,
						 half_body_free);
	if (!resp)
		half_body_free(h);
	return resp;
}

enum MHD_Result svc_reply_fd(struct req *r, unsigned int status, int fd, uint64_t size,
			     const char *content_type)
{
	struct MHD_Response *resp;

	bool half = r->faulted && r->f.truncate_answer;
	bool slow = r->faulted && r->f.body_rate_kbps > 0;

	if ((half || slow) && size > 0) {
		atomic_fetch_add(&r->svc->stats.faults, 1);
		resp =
		    half_body_response(NULL, fd, size, half,
				       slow ? (uint64_t)r->f.body_rate_kbps * 1024 : 0);
	} else {
		/* MHD sends it with sendfile and closes fd. */
		resp = MHD_create_response_from_fd64(size, fd);
		if (!resp)
			close(fd);
	}
	if (!resp)
		return svc_reply_error(r, 500, "cannot send the file");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	return svc_reply(r, status, resp);
}

enum MHD_Result svc_reply_text_json(struct req *r, unsigned int status, char *json,
				    size_t len)
{
	struct MHD_Response *resp;

	if (!json)
		return MHD_NO;
	if (r->faulted && r->f.malformed_json) {
		/* A prefix of an object followed by `,"` never parses. */
		size_t cut = len / 2;

		if (len >= 2) {
			json[cut] = ',';
			json[cut + 1] = '"';
			len = cut + 2;
		}
		atomic_fetch_add(&r->svc->stats.faults, 1);
	}
	if (r->faulted && r->f.truncate_answer && len > 0) {
		atomic_fetch_add(&r->svc->stats.faults, 1);
		resp = half_body_response(json, -1, len, true, 0);
		if (!resp)
			return MHD_NO;
	} else {
		resp = MHD_create_response_from_buffer(len, json, MHD_RESPMEM_MUST_FREE);
		if (!resp) {
			free(json);
			return MHD_NO;
		}
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	return svc_reply(r, status, resp);
}

enum MHD_Result svc_reply_json(struct req *r, unsigned int status, cJSON *body)
{
	char *s = cJSON_PrintUnformatted(body);

	cJSON_Delete(body);
	if (!s)
		return MHD_NO;
	return svc_reply_text_json(r, status, s, strlen(s));
}

enum MHD_Result svc_reply_error(struct req *r, unsigned int status, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	cJSON *o = cJSON_CreateObject();

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON_AddStringToObject(o, "error", msg);
	return svc_reply_json(r, status, o);
}

enum MHD_Result svc_reply_empty(struct req *r, unsigned int status)
{
	return svc_reply(
	    r, status, MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT));
}

void svc_log_command(struct svc *s, const char *cmd)
{
	size_t n = strnlen(cmd, LOG_ENTRY_MAX);
	char *copy = strndup(cmd, n);

	if (!copy)
		return;
	pthread_mutex_lock(&s->lock);
	if (s->log_count == SVC_LOG_MAX) {
		free(s->log[s->log_start]);
		s->log[s->log_start] = copy;
		s->log_start = (s->log_start + 1) % SVC_LOG_MAX;
	} else {
		s->log[(s->log_start + s->log_count) % SVC_LOG_MAX] = copy;
		s->log_count++;
	}
	pthread_mutex_unlock(&s->lock);
}

void svc_set_faults(struct svc *s, const struct faults *f)
{
	pthread_mutex_lock(&s->lock);
	s->faults = *f;
	pthread_mutex_unlock(&s->lock);
}

static cJSON *stats_json(struct svc *s)
{
	cJSON *o = cJSON_CreateObject();
	struct svc_stats *t = &s->stats;
#define STAT(name) cJSON_AddNumberToObject(o, #name, (double)atomic_load(&t->name))
	STAT(connections);
	STAT(requests);
	STAT(executes);
	STAT(commands);
	STAT(timeouts);
	STAT(busy);
	STAT(puts);
	STAT(chunked_puts);
	STAT(gets);
	STAT(lists);
	STAT(deletes);
	STAT(health);
	STAT(creates);
	STAT(destroys);
	STAT(errors);
	STAT(faults);
	STAT(bounded);
#undef STAT
	cJSON_AddNumberToObject(o, "active", atomic_load(&s->active) - 1);
	return o;
}

static enum MHD_Result admin_finish(struct req *r)
{
	struct svc *s = r->svc;
	const char *p = r->path + strlen("/_admin/");

	if (strcmp(p, "faults") == 0) {
		struct faults f;
		cJSON *o;

		if (strcmp(r->method, "POST") == 0 || strcmp(r->method, "PUT") == 0) {
			const char *e;
			cJSON *in = cJSON_ParseWithLength(r->body ? r->body : "", r->len);

			if (!in)
				return svc_reply_error(r, 400, "body is not JSON");
			e = faults_from_json(&f, in);
			cJSON_Delete(in);
			if (e)
				return svc_reply_error(r, 400, "%s", e);
			svc_set_faults(s, &f);
			if (s->ops->faults_changed)
				s->ops->faults_changed(s, &f);
		} else if (strcmp(r->method, "GET") != 0) {
			return svc_reply_error(r, 405, "method not allowed");
		}
		pthread_mutex_lock(&s->lock);
		f = s->faults;
		pthread_mutex_unlock(&s->lock);
		o = faults_to_json(&f);
		return svc_reply_json(r, 200, o);
	}
	if (strcmp(r->method, "GET") != 0)
		return svc_reply_error(r, 405, "method not allowed");
	if (strcmp(p, "stats") == 0)
		return svc_reply_json(r, 200, stats_json(s));
	if (strcmp(p, "log") == 0) {
		cJSON *o = cJSON_CreateObject();
		cJSON *a = cJSON_AddArrayToObject(o, "commands");

		pthread_mutex_lock(&s->lock);
		for (size_t i = 0; i < s->log_count; i++)
			cJSON_AddItemToArray(
			    a,
			    cJSON_CreateString(s->log[(s->log_start + i) % SVC_LOG_MAX]));
		pthread_mutex_unlock(&s->lock);
		return svc_reply_json(r, 200, o);
	}
	if (s->ops->admin_finish)
		return s->ops->admin_finish(r, p);
	return svc_reply_error(r, 404, "no such admin route");
}

static bool route_matches(enum route route, enum fault_routes which)
{
	switch (which) {
	case FAULT_ROUTES_ALL:
		return route != ROUTE_ADMIN;
	case FAULT_ROUTES_EXECUTE:
		return route == ROUTE_EXECUTE;
	case FAULT_ROUTES_FILES:
		return route == ROUTE_FILES;
	case FAULT_ROUTES_ORCHESTRATOR:
		return route == ROUTE_ORCH;
	}
	return false;
}

/* SO_PEERCRED of a Unix socket's peer: the same uid as the server. */
static bool peer_is_self(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

	return ci && unixsock_peer_is_self(ci->connect_fd);
}

static struct req *req_begin(struct svc *s, struct MHD_Connection *c, const char *url,
			     const char *method)
{
	struct req *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->svc = s;
	r->conn = c;
	r->method_copy = strdup(method);
	r->method = r->method_copy ? r->method_copy : "";
	r->start_ms = (long long)common_now_ms();
	r->limit = 1024 * 1024;
	r->path = strdup(url);
	atomic_fetch_add(&s->active, 1);
	atomic_store(&s->last_activity_ms, (long long)common_now_ms());
	if (s->unix_path && !peer_is_self(c)) {
		svc_fail(r, 403, "this server serves its own user only");
		atomic_fetch_add(&s->stats.requests, 1);
		return r;
	}
	if (!r->path || !percent_decode(r->path)) {
		svc_fail(r, 400, "bad percent-encoding in the path");
		atomic_fetch_add(&s->stats.requests, 1);
		return r;
	}
	if (s->admin && strncmp(r->path, "/_admin/", 8) == 0) {
		r->route = ROUTE_ADMIN;
		r->limit = ADMIN_BODY_LIMIT;
		return r;
	}
	atomic_fetch_add(&s->stats.requests, 1);
	pthread_mutex_lock(&s->lock);
	r->f = s->faults;
	pthread_mutex_unlock(&s->lock);
	{
		const char *te = MHD_lookup_connection_value(
		    c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
		r->chunked = te && strcasestr(te, "chunked");
	}
	s->ops->begin(r);
	r->faulted = faults_any(&r->f) && route_matches(r->route, r->f.routes);
	return r;
}

static void body_append(struct req *r, const char *data, size_t n)
{
	if (r->len + n > r->limit) {
		svc_fail(r, 413, "request body too large");
		return;
	}
	if (r->len + n + 1 > r->cap) {
		size_t cap = r->cap ? r->cap : 4096;
		char *b;

		while (cap < r->len + n + 1)
			cap *= 2;
		b = realloc(r->body, cap);
		if (!b) {
			svc_fail(r, 500, "out of memory");
			return;
		}
		r->body = b;
		r->cap = cap;
	}
	memcpy(r->body + r->len, data, n);
	r->len += n;
	r->body[r->len] = '\0';
}

static enum MHD_Result access_cb(void *cls, struct MHD_Connection *c, const char *url,
				 const char *method, const char *version,
				 const char *upload_data, size_t *upload_data_size,
				 void **con_cls)
{
	struct svc *s = cls;
	struct req *r = *con_cls;

	if (!r) {
		r = req_begin(s, c, url, method);
		if (!r)
			return MHD_NO;
		*con_cls = r;
		return MHD_YES;
	}
	if (*upload_data_size) {
		r->got += *upload_data_size;
		if (r->faulted && r->chunked && r->f.refuse_chunked) {
			atomic_fetch_add(&s->stats.faults, 1);
			*upload_data_size = 0;
			return svc_reply_error(r, 411,
					       "a body needs a Content-Length here");
		}
		if (r->faulted && r->chunked && r->f.drop_chunked_kb > 0 &&
		    r->got >= (unsigned long long)r->f.drop_chunked_kb * 1024) {
			atomic_fetch_add(&s->stats.faults, 1);
			return MHD_NO;
		}
		if (!r->status) {
			if (r->stream)
				s->ops->data(r, upload_data, *upload_data_size);
			else
				body_append(r, upload_data, *upload_data_size);
		}
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (r->faulted && r->f.drop_before) {
		atomic_fetch_add(&s->stats.faults, 1);
		return MHD_NO;
	}
	if (r->faulted && r->f.error_rate > 0 &&
	    arc4random_uniform(1000000) < (uint32_t)(r->f.error_rate * 1000000)) {
		atomic_fetch_add(&s->stats.faults, 1);
		return svc_reply_error(r, 500, "injected fault");
	}
	if (r->status)
		return svc_reply_error(r, (unsigned int)r->status, "%s", r->errmsg);
	if (r->route == ROUTE_ADMIN)
		return admin_finish(r);
	if (s->bound_s > 0)
		return bound_finish(r);
	return s->ops->finish(r);
}

static void completed_cb(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct svc *s = cls;
	struct req *r = *con_cls;

	if (!r)
		return;
	*con_cls = NULL;
	atomic_store(&s->last_activity_ms, (long long)common_now_ms());
	atomic_fetch_sub(&s->active, 1);
	if (r->bound && !bound_release(r))
		return; /* its worker frees it */
	svc_req_free(r);
}

void svc_req_free(struct req *r)
{
	if (r->svc->ops->cleanup)
		r->svc->ops->cleanup(r);
	free(r->body);
	free(r->path);
	free(r->method_copy);
	free(r);
}

static void connection_cb(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct svc *s = cls;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED)
		atomic_fetch_add(&s->stats.connections, 1);
}

/* Listen on c->unix_path: the daemon takes the bound socket. */
static int svc_start_unix(struct svc *s, const struct svc_config *c, unsigned int flags,
			  char *err, size_t errlen)
{
	struct stat st;
	int fd = unixsock_listen(c->unix_path, err, errlen);

	if (fd < 0)
		return -1;
	if (lstat(c->unix_path, &st) < 0 || !(s->unix_path = strdup(c->unix_path))) {
		snprintf(err, errlen, "cannot listen on %s", c->unix_path);
		close(fd);
		unlink(c->unix_path);
		return -1;
	}
	s->unix_dev = st.st_dev;
	s->unix_ino = st.st_ino;
	s->daemon = MHD_start_daemon(
	    flags, 0, NULL, NULL, access_cb, s, MHD_OPTION_LISTEN_SOCKET, fd,
	    MHD_OPTION_NOTIFY_COMPLETED, completed_cb, s, MHD_OPTION_NOTIFY_CONNECTION,
	    connection_cb, s, MHD_OPTION_UNESCAPE_CALLBACK, unescape_none, NULL,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)600, MHD_OPTION_END);
	if (!s->daemon) {
		snprintf(err, errlen, "cannot serve on %s", c->unix_path);
		close(fd);
		unlink(c->unix_path);
		free(s->unix_path);
		s->unix_path = NULL;
		return -1;
	}
	s->port = 0;
	return 0;
}

int svc_start(struct svc *s, const struct svc_config *c, char *err, size_t errlen)
{
	struct sockaddr_storage ss = {0};
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	const char *addr = c->listen ? c->listen : "127.0.0.1";
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD |
			     MHD_USE_THREAD_PER_CONNECTION | MHD_USE_AUTO;
	const union MHD_DaemonInfo *info;

	s->ops = c->ops;
	s->owner = c->owner;
	s->admin = c->admin;
	s->faults = c->faults;
	s->bound_s = c->bound_s;
	pthread_mutex_init(&s->lock, NULL);
	atomic_store(&s->last_activity_ms, (long long)common_now_ms());

	if (c->unix_path)
		return svc_start_unix(s, c, flags, err, errlen);
	if (inet_pton(AF_INET, addr, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(c->port);
	} else if (inet_pton(AF_INET6, addr, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(c->port);
		flags |= MHD_USE_IPv6;
	} else {
		snprintf(err, errlen, "not an IP address: %s", addr);
		return -1;
	}
	s->daemon = MHD_start_daemon(
	    flags, c->port, NULL, NULL, access_cb, s, MHD_OPTION_SOCK_ADDR,
	    (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED, completed_cb, s,
	    MHD_OPTION_NOTIFY_CONNECTION, connection_cb, s, MHD_OPTION_UNESCAPE_CALLBACK,
	    unescape_none, NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)600,
	    MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned int)1, MHD_OPTION_END);
	if (!s->daemon) {
		snprintf(err, errlen, "cannot listen on %s port %u", addr,
			 (unsigned)c->port);
		return -1;
	}
	info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : c->port;
	return 0;
}

bool svc_stop(struct svc *s)
{
	if (s->daemon)
		MHD_stop_daemon(s->daemon);
	s->daemon = NULL;
	/* A bounded request's work outlives its answer; a command is killed
	 * by the sandbox's teardown, a file call ends by itself. */
	for (int i = 0; i < 3000 && atomic_load(&s->workers) > 0; i++)
		sleep_ms(10);
	if (s->unix_path) {
		struct stat st;

		if (lstat(s->unix_path, &st) == 0 && st.st_dev == s->unix_dev &&
		    st.st_ino == s->unix_ino)
			unlink(s->unix_path);
		free(s->unix_path);
		s->unix_path = NULL;
	}
	if (atomic_load(&s->workers) > 0)
		return false;
	for (size_t i = 0; i < s->log_count; i++)
		free(s->log[(s->log_start + i) % SVC_LOG_MAX]);
	s->log_count = 0;
	pthread_mutex_destroy(&s->lock);
	return true;
}
