/*
 * backend.c — the shared client: life cycle, errno mapping, statistics.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_i.h"

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

/* curl_global_init is not thread-safe in every libcurl: run it once. */
static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

void backend_config_defaults(struct backend_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->connect_timeout_ms = 10000;
	cfg->request_timeout_ms = 60000;
	cfg->execute_grace_ms = 30000;
	cfg->stall_seconds = 30;
	cfg->min_rate_bytes = 1024;
	cfg->max_json_bytes = 8u << 20;
	cfg->max_exec_bytes = 16u << 20;
	cfg->max_listing_bytes = 64u << 20;
	cfg->max_download_bytes = 0;
	cfg->tls_insecure = false;
	cfg->ca_file = NULL;
	cfg->proxy = NULL;
}

int backend_errno(enum backend_status status, enum backend_op op)
{
	switch (status) {
	case BACKEND_OK:
		return 0;
	case BACKEND_NOT_SENT:
		return ENOTCONN;
	case BACKEND_ANSWER_LOST:
		return EIO;
	case BACKEND_INVALID:
		return EINVAL;
	case BACKEND_DENIED:
		return EACCES;
	case BACKEND_NOT_FOUND:
		return ENOENT;
	case BACKEND_CONFLICT:
		return op == BACKEND_OP_CREATE ? EEXIST : EBUSY;
	case BACKEND_TOO_LARGE:
		return EFBIG;
	case BACKEND_EXHAUSTED:
		return EAGAIN;
	case BACKEND_SERVER_ERROR:
	case BACKEND_BAD_ANSWER:
		return EIO;
	case BACKEND_BAD_REQUEST:
		return EINVAL;
	case BACKEND_LOCAL:
		return EIO;
	}
	return EIO;
}

const char *backend_status_name(enum backend_status status)
{
	switch (status) {
	case BACKEND_OK:
		return "ok";
	case BACKEND_NOT_SENT:
		return "not sent";
	case BACKEND_ANSWER_LOST:
		return "answer lost";
	case BACKEND_INVALID:
		return "invalid request";
	case BACKEND_DENIED:
		return "denied";
	case BACKEND_NOT_FOUND:
		return "not found";
	case BACKEND_CONFLICT:
		return "conflict";
	case BACKEND_TOO_LARGE:
		return "too large";
	case BACKEND_EXHAUSTED:
		return "exhausted";
	case BACKEND_SERVER_ERROR:
		return "server error";
	case BACKEND_BAD_ANSWER:
		return "bad answer";
	case BACKEND_BAD_REQUEST:
		return "bad request";
	case BACKEND_LOCAL:
		return "local error";
	}
	return "unknown";
}

void backend_set_error(struct backend_error *err, enum backend_status status,
		       int http_status, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	err->status = status;
	err->http_status = http_status;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
}

enum backend_status backend_gateway_timeout(const struct backend_req *r,
					    enum backend_status st,
					    struct backend_error *err)
{
	if (!r->once || st != BACKEND_SERVER_ERROR || r->http_status != 504)
		return st;
	backend_set_error(err, BACKEND_ANSWER_LOST, 504,
			  "the request was cut by a gateway timeout (504); the "
			  "outcome is unknown");
	return BACKEND_ANSWER_LOST;
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *userp)
{
	struct backend *b = userp;

	(void)h;
	(void)access;
	pthread_mutex_lock(&b->share_locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *userp)
{
	struct backend *b = userp;

	(void)h;
	pthread_mutex_unlock(&b->share_locks[data]);
}

/* Thread exit: the thread's handle waits for the next new thread, its
 * connections alive, unless enough already wait. */
static void handle_destroy(void *p)
{
	struct backend_handle *h = p;
	struct backend *b = h->owner;

	pthread_mutex_lock(&b->handles_lock);
	if (b->nidle < BACKEND_IDLE_HANDLES) {
		h->idle_next = b->idle;
		b->idle = h;
		b->nidle++;
		pthread_mutex_unlock(&b->handles_lock);
		return;
	}
	if (h->prev)
		h->prev->next = h->next;
	else
		b->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&b->handles_lock);
	curl_easy_cleanup(h->curl);
	free(h);
}

struct backend *backend_new(const struct backend_config *cfg)
{
	struct backend *b;
	struct backend_config defaults;

	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK)
		return NULL;
	if (!cfg) {
		backend_config_defaults(&defaults);
		cfg = &defaults;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->cfg = *cfg;
	if (cfg->ca_file) {
		b->ca_file = strdup(cfg->ca_file);
		if (!b->ca_file)
			goto fail_free;
	}
	b->cfg.ca_file = b->ca_file;
	if (cfg->proxy) {
		b->proxy = strdup(cfg->proxy);
		if (!b->proxy)
			goto fail_free;
	}
	b->cfg.proxy = b->proxy;
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&b->share_locks[i], NULL);
	pthread_mutex_init(&b->handles_lock, NULL);
	if (pthread_key_create(&b->key, handle_destroy) != 0)
		goto fail_locks;
	b->share = curl_share_init();
	if (!b->share)
		goto fail_key;
	/* Connections are not shared: libcurl does not support one
	 * connection cache used by concurrent threads. Each thread's handle
	 * keeps its own connections alive instead. */
	if (curl_share_setopt(b->share, CURLSHOPT_LOCKFUNC, share_lock) ||
	    curl_share_setopt(b->share, CURLSHOPT_UNLOCKFUNC, share_unlock) ||
	    curl_share_setopt(b->share, CURLSHOPT_USERDATA, b) ||
	    curl_share_setopt(b->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) ||
	    curl_share_setopt(b->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION))
		goto fail_share;
	return b;

fail_share:
	curl_share_cleanup(b->share);
fail_key:
	pthread_key_delete(b->key);
fail_locks:
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&b->share_locks[i]);
	pthread_mutex_destroy(&b->handles_lock);
fail_free:
	free(b->ca_file);
	free(b->proxy);
	free(b);
	return NULL;
}

void backend_thread_done(struct backend *b)
{
	if (!b)
		return;
	struct backend_handle *h = pthread_getspecific(b->key);
	if (!h)
		return;
	(void)pthread_setspecific(b->key, NULL); /* no destructor at exit */
	handle_destroy(h);
}

void backend_free(struct backend *b)
{
	struct backend_handle *h, *next;

	if (!b)
		return;
	/* Every thread must be done with b; handles of threads that are
	 * still alive are cleaned up here, their keys forgotten. */
	pthread_key_delete(b->key);
	for (h = b->handles; h; h = next) {
		next = h->next;
		curl_easy_cleanup(h->curl);
		free(h);
	}
	curl_share_cleanup(b->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&b->share_locks[i]);
	pthread_mutex_destroy(&b->handles_lock);
	free(b->ca_file);
	free(b->proxy);
	free(b);
}

static uint64_t load(const atomic_uint_fast64_t *p)
{
	return atomic_load_explicit(p, memory_order_relaxed);
}

/* The upper edge of bucket i in microseconds: 2^((i+1)/4). */
static uint64_t bucket_edge(int i)
{
	static const double quarter[4] = {1.0, 1.189207115, 1.414213562, 1.681792831};
	int e = i + 1;

	return (uint64_t)((double)(1ull << (e / 4)) * quarter[e % 4] + 0.5);
}

static uint64_t percentile(const uint64_t *hist, uint64_t total, double q)
{
	uint64_t want, seen = 0;

	if (total == 0)
		return 0;
	want = (uint64_t)(q * (double)total);
	if (want == 0)
		want = 1;
	for (int i = 0; i < BACKEND_LAT_BUCKETS; i++) {
		seen += hist[i];
		if (seen >= want)
			return bucket_edge(i);
	}
	return bucket_edge(BACKEND_LAT_BUCKETS - 1);
}

void backend_get_stats(struct backend *b, struct backend_stats *out)
{
	uint64_t hist[BACKEND_LAT_BUCKETS], total = 0;

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < BACKEND_NOPS; i++)
		out->requests[i] = load(&b->requests[i]);
	out->errors = load(&b->errors);
	out->bytes_sent = load(&b->bytes_sent);
	out->bytes_received = load(&b->bytes_received);
	out->connections_opened = load(&b->connections_opened);
	out->names_dropped = load(&b->names_dropped);
	for (int i = 0; i < BACKEND_LAT_BUCKETS; i++) {
		hist[i] = load(&b->latency[i]);
		total += hist[i];
	}
	out->latency_p50_us = percentile(hist, total, 0.50);
	out->latency_p99_us = percentile(hist, total, 0.99);
}

enum backend_status backend_refuse(struct backend *b, enum backend_op op,
				   enum backend_status st, struct backend_error *err,
				   const char *msg)
{
	backend_add(&b->requests[op], 1);
	backend_add(&b->errors, 1);
	backend_set_error(err, st, 0, "%s", msg);
	return st;
}

void backend_req_init(struct backend_req *r, enum backend_op op, const char *method,
		      const char *url, const char *path)
{
	memset(r, 0, sizeof(*r));
	r->op = op;
	r->method = method;
	r->base_url = url;
	r->path = path;
	r->put_fd = -1;
	r->get_fd = -1;
}

void backend_count_error(struct backend *b)
{
	backend_add(&b->errors, 1);
}

void backend_count_dropped(struct backend *b, size_t n)
{
	if (n)
		backend_add(&b->names_dropped, n);
}

void backend_exec_result_clear(struct backend_exec_result *r)
{
	if (!r)
		return;
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof(*r));
}

void backend_listing_clear(struct backend_listing *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->count; i++)
		free(l->entries[i].name);
	free(l->entries);
	memset(l, 0, sizeof(*l));
}

void backend_sandbox_clear(struct backend_sandbox *s)
{
	if (!s)
		return;
	free(s->id);
	free(s->pool);
	free(s->image);
	free(s->url);
	free(s->error);
	memset(s, 0, sizeof(*s));
}

void backend_sandbox_list_clear(struct backend_sandbox_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->count; i++)
		backend_sandbox_clear(&l->items[i]);
	free(l->items);
	memset(l, 0, sizeof(*l));
}
