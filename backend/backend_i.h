/*
 * backend_i.h — private: the shared client, the request machinery, and the
 * helpers shared by the contract and orchestrator clients.
 */
#ifndef SANDBOXFS_BACKEND_I_H
#define SANDBOXFS_BACKEND_I_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>

#include "backend.h"

#define BACKEND_NOPS 5
/* Latency histogram: bucket i holds latencies in [2^(i/4), 2^((i+1)/4)) us,
 * so 4 buckets per doubling (19 % wide) from 1 us to about 2^32 us. */
#define BACKEND_LAT_BUCKETS 128

/* At most this many handles of exited threads are kept, with their live
 * connections, for the next new threads (FUSE starts and ends workers as
 * load comes and goes). */
#define BACKEND_IDLE_HANDLES 32

/* One easy handle per thread that uses this backend. All are listed so
 * that backend_free can clean up the handles of threads still alive;
 * handles of exited threads wait in the idle list. */
struct backend_handle {
	CURL *curl;
	struct backend *owner;
	struct backend_handle *prev, *next; /* all handles */
	struct backend_handle *idle_next;   /* idle list */
};

struct backend {
	struct backend_config cfg;
	char *ca_file; /* owned copy of cfg.ca_file */
	char *proxy;   /* owned copy of cfg.proxy */

	CURLSH *share;
	/* One lock per kind of shared data (DNS, TLS sessions, the share
	 * itself), so that DNS look-ups never wait on TLS session use. */
	pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];

	pthread_key_t key;
	pthread_mutex_t handles_lock; /* only guards the lists, never I/O */
	struct backend_handle *handles;
	struct backend_handle *idle;
	size_t nidle;

	/* Statistics: plain counters updated with relaxed atomics. */
	atomic_uint_fast64_t requests[BACKEND_NOPS];
	atomic_uint_fast64_t errors;
	atomic_uint_fast64_t bytes_sent;
	atomic_uint_fast64_t bytes_received;
	atomic_uint_fast64_t connections_opened;
	atomic_uint_fast64_t names_dropped;
	atomic_uint_fast64_t latency[BACKEND_LAT_BUCKETS];
};

/* One HTTP request, described by the caller of backend_http. */
struct backend_req {
	enum backend_op op;
	const char *method;   /* "GET", "PUT", "POST", "DELETE" */
	const char *base_url; /* secret: sandbox URL or orchestrator base */
	const char *path;     /* encoded, begins with '/' */
	const char *token;    /* bearer token or NULL */

	const char *body; /* POST body (JSON), body_len bytes */
	size_t body_len;
	int put_fd; /* PUT: send put_size bytes of put_fd, -1 otherwise */
	uint64_t put_size;
	int get_fd; /* 2xx answer body goes to get_fd; -1: into memory */
	backend_progress_fn get_progress; /* after each write to get_fd, and
					     at least once a second */
	void *get_progress_ctx;
	uint64_t max_fd_bytes;	     /* get_fd bound, 0 = none */
	enum backend_status fd_over; /* what a body past it fails as */
	size_t max_answer;	     /* bound for an answer kept in memory */
	/* Called last in the handle's set-up, to set what this request
	 * needs beyond the fields above (a streamed body: putstream.c). */
	CURLcode (*tune)(CURL *curl, void *ctx);
	void *tune_ctx;

	long timeout_ms; /* total bound, 0 = none */
	bool stall;	 /* fail a transfer under min_rate_bytes a second for
			    stall_seconds (LOW_SPEED_*) */
	/* The request has effects and must never be sent twice (execute,
	 * create): its body cannot be rewound, so libcurl can never resend
	 * it, and it reuses only connections idle for under a second. */
	bool once;

	/* Results. */
	long http_status;
	char *answer; /* in-memory answer, NUL-terminated, or NULL */
	size_t answer_len;
	uint64_t fd_bytes; /* bytes written to get_fd */
};

/* Performs r with the calling thread's handle. Returns BACKEND_OK for a
 * 2xx answer (r->answer holds it when get_fd is -1); otherwise the status
 * by meaning, with err filled (server "error" message when it sent one).
 * Always counts the request in the statistics. The caller frees
 * r->answer. */
enum backend_status backend_http(struct backend *b, struct backend_req *r,
				 struct backend_error *err);

/* Fills err (when not NULL) with status and a message. */
void backend_set_error(struct backend_error *err, enum backend_status status,
		       int http_status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A call refused locally, before backend_http: counted (so that
 * stats.errors covers every non-OK return), err set to msg. Returns st. */
enum backend_status backend_refuse(struct backend *b, enum backend_op op,
				   enum backend_status st, struct backend_error *err,
				   const char *msg);

/* The largest message backend_scrub handles (struct backend_error's). */
#define BACKEND_SCRUB_MAX 256

/* Rebuilds msg, a string in a buffer of size bytes (at most
 * BACKEND_SCRUB_MAX), with every occurrence of secret replaced by
 * "[redacted]", cut to fit the buffer. A secret under 4 bytes is left
 * alone. cut says msg's end is a cut (it went on): then a start of secret
 * (4 bytes or more) at the end is redacted as well. Returns whether msg's
 * end is now a cut: cut, or this rebuild cut it. Never writes past size
 * bytes and never reads past msg's first NUL or its size. */
bool backend_scrub(char *msg, size_t size, const char *secret, bool cut);

/* After backend_http of a request with effects (r->once: execute,
 * create): a 504 (a proxy cut the request at its bound; the server may
 * have acted on it) is BACKEND_ANSWER_LOST, http_status 504, with a
 * message saying so. Any other st is returned as it is. */
enum backend_status backend_gateway_timeout(const struct backend_req *r,
					    enum backend_status st,
					    struct backend_error *err);

/* Zeroes r and sets what every request has; no descriptors. */
void backend_req_init(struct backend_req *r, enum backend_op op, const char *method,
		      const char *url, const char *path);

/* Counts an error found after a successful exchange (bad answer). */
void backend_count_error(struct backend *b);

void backend_count_dropped(struct backend *b, size_t n);

/* Percent-encodes a workspace path for /files/: each segment with the
 * RFC 3986 unreserved set kept as is, '/' between segments kept. Returns
 * a malloc'd string "/files/<encoded>" or NULL (invalid path or no
 * memory; *invalid tells which). */
char *backend_files_path(const char *path, bool *invalid);

/* Percent-encodes s into a malloc'd string (unreserved bytes kept). */
char *backend_percent_encode(const char *s);

/* --- base URLs on a Unix socket (url.c) --- */

/* True when url begins with http+unix:// (in any case). */
bool backend_url_is_unix(const char *url);

/* Parses http+unix://ENCODED_PATH[/BASE] (see backend.h). Returns 0 and,
 * for each pointer given, a malloc'd copy of the URL libcurl requests
 * (http://localhost/BASE) and of the socket path; -1 when url is not a
 * valid one, -2 when out of memory (nothing allocated either way). */
int backend_unix_url_parse(const char *url, char **curl_url, char **socket_path);

/* Relaxed atomic add, for counters read by backend_get_stats. */
static inline void backend_add(atomic_uint_fast64_t *p, uint64_t n)
{
	atomic_fetch_add_explicit(p, n, memory_order_relaxed);
}

#endif
