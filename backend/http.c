/*
 * http.c — performing one request with the calling thread's easy handle,
 * and telling what happened by meaning.
 *
 * "Not sent" versus "answer lost": libcurl's CURLOPT_PREREQFUNCTION runs
 * once a connection is made (or reused) and right before the request is
 * written. If a transfer fails before it ever ran, no byte of the request
 * left this process: BACKEND_NOT_SENT. Once it ran, the server may have the
 * request: BACKEND_ANSWER_LOST.
 *
 * Never sending an effectful request twice: libcurl silently retries a
 * request on a fresh connection when a *reused* connection dies before any
 * answer byte arrives (Curl_retry_request). For POST /execute that would
 * run the command twice: the server can have run it and closed the
 * connection without answering (tests/backend/test_faults.c shows plain
 * libcurl doing exactly that). Requests marked `once` hand their body out
 * through a read callback whose seek callback refuses to rewind once a
 * byte was handed out; a resend needs that rewind, so libcurl fails with
 * CURLE_SEND_FAIL_REWIND (answer lost) instead of resending. Only a
 * request none of whose body left this process may be sent again.
 *
 * They still reuse keep-alive connections (a fresh connection per execute
 * costs a TCP and TLS handshake, 0.5 ms locally and several round trips to
 * a remote sandbox), but only one idle for under a second
 * (CURLOPT_MAXAGE_CONN): a server or proxy that closes idle connections
 * does so after seconds, so the refused resend — an outcome reported
 * unknown although the command never arrived — stays a true rarity.
 * Idempotent requests (GET, PUT, DELETE) keep libcurl's resend.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend_i.h"
#include "backend_json_i.h"
#include "common/clock.h"

/* Error answers (non-2xx) are kept only this far, for their "error". */
#define ERROR_BODY_MAX (64 * 1024)

struct xfer {
	struct backend *b;
	struct backend_req *r;
	CURL *curl;

	bool started;	     /* PREREQFUNCTION ran: the request may be sent */
	bool too_large;	     /* the answer went over max_answer */
	bool rewind_refused; /* libcurl wanted to resend a `once` body */
	bool cancelled;	     /* the caller's progress said stop */
	bool fd_over;	     /* the body went over max_fd_bytes */
	int local_errno;     /* a descriptor read/write failed, or short file */
	bool short_file;
	char *unix_socket; /* http+unix:// base: the socket path (a secret) */

	/* Body to send. */
	uint64_t sent; /* bytes handed to libcurl */

	/* Answer status, read from the handle on the first body byte. */
	long status;
	/* In-memory answer (2xx with get_fd < 0, or any error answer). */
	char *buf;
	size_t len, cap, limit;
};

static struct backend_handle *thread_handle(struct backend *b)
{
	struct backend_handle *h = pthread_getspecific(b->key);

	if (h && h->owner == b)
		return h;
	pthread_mutex_lock(&b->handles_lock);
	h = b->idle;
	if (h) {
		b->idle = h->idle_next;
		b->nidle--;
	}
	pthread_mutex_unlock(&b->handles_lock);
	if (h) {
		if (pthread_setspecific(b->key, h) == 0)
			return h;
		/* Back where it was; this call goes without a handle. */
		pthread_mutex_lock(&b->handles_lock);
		h->idle_next = b->idle;
		b->idle = h;
		b->nidle++;
		pthread_mutex_unlock(&b->handles_lock);
		return NULL;
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->curl = curl_easy_init();
	if (!h->curl) {
		free(h);
		return NULL;
	}
	h->owner = b;
	if (pthread_setspecific(b->key, h) != 0) {
		curl_easy_cleanup(h->curl);
		free(h);
		return NULL;
	}
	pthread_mutex_lock(&b->handles_lock);
	h->next = b->handles;
	if (b->handles)
		b->handles->prev = h;
	b->handles = h;
	pthread_mutex_unlock(&b->handles_lock);
	return h;
}

static int prereq_cb(void *userp, char *conn_primary_ip, char *conn_local_ip,
		     int conn_primary_port, int conn_local_port)
{
	struct xfer *x = userp;

	(void)conn_primary_ip;
	(void)conn_local_ip;
	(void)conn_primary_port;
	(void)conn_local_port;
	x->started = true;
	return CURL_PREREQFUNC_OK;
}

static bool buf_append(struct xfer *x, const char *p, size_t n)
{
	if (n > x->limit - x->len)
		return false;
	if (x->len + n + 1 > x->cap) {
		size_t cap = x->cap ? x->cap : 4096;
		char *nb;

		while (cap < x->len + n + 1)
			cap *= 2;
		if (cap > x->limit + 1)
			cap = x->limit + 1;
		nb = realloc(x->buf, cap);
		if (!nb) {
			x->local_errno = ENOMEM;
			return false;
		}
		x->buf = nb;
		x->cap = cap;
	}
	memcpy(x->buf + x->len, p, n);
	x->len += n;
	x->buf[x->len] = '\0';
	return true;
}

static bool write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return false;
		}
		p += w;
		n -= (size_t)w;
	}
	return true;
}

static size_t write_cb(char *p, size_t size, size_t nmemb, void *userp)
{
	struct xfer *x = userp;
	size_t n = size * nmemb;

	if (x->status == 0) {
		curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &x->status);
		x->limit = (x->status >= 200 && x->status < 300) ? x->r->max_answer
								 : ERROR_BODY_MAX;
	}
	if (x->status >= 200 && x->status < 300 && x->r->get_fd >= 0) {
		uint64_t max = x->r->max_fd_bytes;

		if (max && x->r->fd_bytes == 0) {
			curl_off_t announced = -1;

			/* Announced longer than allowed: not one byte of it. */
			curl_easy_getinfo(x->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
					  &announced);
			if (announced > 0 && (uint64_t)announced > max) {
				x->fd_over = true;
				return 0;
			}
		}
		if (max && n > max - x->r->fd_bytes) {
			/* Keep what fits, never more. */
			n = (size_t)(max - x->r->fd_bytes);
			x->fd_over = true;
		}
		if (!write_all(x->r->get_fd, p, n)) {
			x->local_errno = errno ? errno : EIO;
			return 0;
		}
		x->r->fd_bytes += n;
		if (x->fd_over)
			return 0;
		if (x->r->get_progress &&
		    !x->r->get_progress(x->r->get_progress_ctx, x->r->fd_bytes)) {
			x->cancelled = true;
			return 0;
		}
		return n;
	}
	if (!buf_append(x, p, n)) {
		if (x->status >= 200 && x->status < 300) {
			if (!x->local_errno)
				x->too_large = true;
			return 0;
		}
		/* An error answer is only read for its message: keep the
		 * start, drop the rest. */
		if (x->local_errno)
			return 0;
	}
	return n;
}

/* libcurl calls it at least once a second, bytes or not: a caller's
 * progress can stop even a transfer that has gone silent. */
static int xferinfo_cb(void *userp, curl_off_t dltotal, curl_off_t dlnow,
		       curl_off_t ultotal, curl_off_t ulnow)
{
	struct xfer *x = userp;

	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	if (x->r->get_progress &&
	    !x->r->get_progress(x->r->get_progress_ctx, x->r->fd_bytes)) {
		x->cancelled = true;
		return 1;
	}
	return 0;
}

static size_t read_cb(char *p, size_t size, size_t nmemb, void *userp)
{
	struct xfer *x = userp;
	struct backend_req *r = x->r;
	size_t room = size * nmemb;

	if (r->put_fd >= 0) {
		uint64_t left = r->put_size - x->sent;
		ssize_t n;

		if (left == 0)
			return 0;
		if (room > left)
			room = (size_t)left;
		do
			n = pread(r->put_fd, p, room, (off_t)x->sent);
		while (n < 0 && errno == EINTR);
		if (n < 0) {
			x->local_errno = errno;
			return CURL_READFUNC_ABORT;
		}
		if (n == 0) {
			/* The file shrank under us: never send a short body
			 * that the server would take as the whole file. */
			x->short_file = true;
			x->local_errno = EIO;
			return CURL_READFUNC_ABORT;
		}
		x->sent += (uint64_t)n;
		return (size_t)n;
	}
	if (x->sent >= r->body_len)
		return 0;
	if (room > r->body_len - x->sent)
		room = r->body_len - (size_t)x->sent;
	memcpy(p, r->body + x->sent, room);
	x->sent += room;
	return room;
}

static int seek_cb(void *userp, curl_off_t offset, int origin)
{
	struct xfer *x = userp;

	if (origin != SEEK_SET || offset < 0)
		return CURL_SEEKFUNC_CANTSEEK;
	if (x->r->once && x->sent > 0) {
		/* libcurl wants to send the body again: refuse. */
		x->rewind_refused = true;
		return CURL_SEEKFUNC_FAIL;
	}
	if ((uint64_t)offset > (x->r->put_fd >= 0 ? x->r->put_size : x->r->body_len))
		return CURL_SEEKFUNC_FAIL;
	x->sent = (uint64_t)offset;
	return CURL_SEEKFUNC_OK;
}

static enum backend_status status_of_http(long code)
{
	switch (code) {
	case 400:
	case 415:
		return BACKEND_INVALID;
	case 401:
	case 403:
		return BACKEND_DENIED;
	case 404:
		return BACKEND_NOT_FOUND;
	case 409:
		return BACKEND_CONFLICT;
	case 413:
		return BACKEND_TOO_LARGE;
	case 429:
		return BACKEND_EXHAUSTED;
	default:
		return BACKEND_SERVER_ERROR;
	}
}

bool backend_scrub(char *msg, size_t size, const char *secret, bool cut)
{
	static const char red[] = "[redacted]";
	char out[BACKEND_SCRUB_MAX];
	size_t sl, in_len, o = 0, room;

	if (!msg || size == 0)
		return cut;
	if (size > sizeof(out))
		size = sizeof(out);
	in_len = strnlen(msg, size - 1);
	if (msg[in_len] != '\0') {
		msg[in_len] = '\0'; /* longer than its buffer: cut */
		cut = true;
	}
	if (!secret || (sl = strlen(secret)) < 4)
		return cut;
	room = size - 1;
	/* One pass over the original, appending to out: what was put in out
	 * is never searched again, so a secret that is part of "[redacted]"
	 * cannot make it loop, and out never takes more than room bytes. */
	for (size_t i = 0; i < in_len && o < room;) {
		size_t left = in_len - i;
		const char *piece = msg + i;
		size_t n = 1;

		if (left >= sl && memcmp(piece, secret, sl) == 0) {
			piece = red;
			n = sizeof(red) - 1;
			i += sl;
		} else {
			i++;
		}
		if (n > room - o) {
			n = room - o;
			cut = true;
		}
		memcpy(out + o, piece, n);
		o += n;
		if (o == room && i < in_len)
			cut = true;
	}
	if (cut) {
		/* The end went on: if it is the start of the secret, it may be
		 * the secret. */
		for (size_t k = sl - 1 < o ? sl - 1 : o; k >= 4; k--) {
			if (memcmp(out + o - k, secret, k) == 0) {
				size_t n = sizeof(red) - 1;

				o -= k;
				if (n > room - o)
					n = room - o;
				memcpy(out + o, red, n);
				o += n;
				break;
			}
		}
	}
	memcpy(msg, out, o);
	msg[o] = '\0';
	explicit_bzero(out, o);
	return cut;
}

/* The authority (host[:port]) of url, into out: also a secret. */
static void authority(const char *url, char *out, size_t size)
{
	const char *h = strstr(url, "://");
	size_t n;

	out[0] = '\0';
	if (!h)
		return;
	h += 3;
	n = strcspn(h, "/?#");
	if (n >= size)
		n = size - 1;
	memcpy(out, h, n);
	out[n] = '\0';
}

/* Classifies a failed transfer. Messages are libcurl's generic texts or
 * ours; never libcurl's error buffer, which names the host and port. */
static enum backend_status classify(struct xfer *x, CURLcode rc,
				    struct backend_error *err)
{
	if (x->too_large) {
		/* After an execute or a create, the server acted: an answer
		 * too large to read leaves the outcome unknown. */
		enum backend_status st =
		    x->r->once ? BACKEND_BAD_ANSWER : BACKEND_TOO_LARGE;

		backend_set_error(err, st, (int)x->status, "answer larger than %zu bytes",
				  x->r->max_answer);
		return st;
	}
	if (x->fd_over) {
		enum backend_status st = x->r->fd_over;

		backend_set_error(err, st, (int)x->status,
				  st == BACKEND_TOO_LARGE
				      ? "file larger than %" PRIu64 " bytes"
				      : "body longer than the file's listed size "
					"allows (%" PRIu64 " bytes)",
				  x->r->max_fd_bytes);
		return st;
	}
	if (x->cancelled) {
		backend_set_error(err, BACKEND_LOCAL, (int)x->status,
				  "transfer stopped by its caller");
		return BACKEND_LOCAL;
	}
	if (x->local_errno) {
		/* The body was cut or the answer not stored: if the request
		 * went out, the server may still have acted on it (an
		 * execute's body is in memory, so this is a download or an
		 * upload, both idempotent). */
		backend_set_error(err, BACKEND_LOCAL, (int)x->status, "%s: %s",
				  x->short_file ? "file shorter than its size"
						: "local descriptor I/O failed",
				  strerror(x->local_errno));
		return BACKEND_LOCAL;
	}
	if (!x->started) {
		const char *what;

		switch (rc) {
		case CURLE_COULDNT_RESOLVE_HOST:
			what = "could not resolve host";
			break;
		case CURLE_COULDNT_CONNECT:
			what = "could not connect (refused or unreachable)";
			break;
		case CURLE_OPERATION_TIMEDOUT:
			what = "connect timed out";
			break;
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_SSL_CACERT_BADFILE:
		case CURLE_SSL_CONNECT_ERROR:
			what = "TLS handshake failed";
			break;
		case CURLE_OUT_OF_MEMORY:
			backend_set_error(err, BACKEND_LOCAL, 0, "out of memory");
			return BACKEND_LOCAL;
		case CURLE_URL_MALFORMAT:
			backend_set_error(err, BACKEND_BAD_REQUEST, 0, "malformed URL");
			return BACKEND_BAD_REQUEST;
		default:
			what = curl_easy_strerror(rc);
			break;
		}
		backend_set_error(err, BACKEND_NOT_SENT, 0, "%s (%s)", what,
				  curl_easy_strerror(rc));
		return BACKEND_NOT_SENT;
	}
	{
		const char *what;

		switch (rc) {
		case CURLE_OPERATION_TIMEDOUT:
			what = "timed out after the request was sent";
			break;
		case CURLE_GOT_NOTHING:
			what = "connection closed without an answer";
			break;
		case CURLE_RECV_ERROR:
		case CURLE_SEND_ERROR:
			what = "connection reset";
			break;
		case CURLE_PARTIAL_FILE:
			what = "answer cut short";
			break;
		case CURLE_SEND_FAIL_REWIND:
			what = x->rewind_refused ? "connection died; not resent"
						 : "body cannot be sent again";
			break;
		default:
			what = curl_easy_strerror(rc);
			break;
		}
		backend_set_error(err, BACKEND_ANSWER_LOST, (int)x->status, "%s (%s)",
				  what, curl_easy_strerror(rc));
	}
	return BACKEND_ANSWER_LOST;
}

static void count_latency(struct backend *b, uint64_t us)
{
	int i = 0;

	/* Bucket: 4 * log2(us), by doubling then quarter steps. */
	if (us > 1) {
		static const double quarter[4] = {1.0, 1.189207115, 1.414213562,
						  1.681792831};
		int e = 63 - __builtin_clzll(us);
		double frac = (double)us / (double)(1ull << e);
		int q = 0;

		while (q < 3 && frac >= quarter[q + 1])
			q++;
		i = 4 * e + q;
	}
	if (i >= BACKEND_LAT_BUCKETS)
		i = BACKEND_LAT_BUCKETS - 1;
	backend_add(&b->latency[i], 1);
}

static bool header_safe(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

/* Appends s to *list; the list stays the caller's to free either way. */
static bool append(struct curl_slist **list, const char *s)
{
	struct curl_slist *n = curl_slist_append(*list, s);

	if (!n)
		return false;
	*list = n;
	return true;
}

static enum backend_status setup(struct backend *b, struct xfer *x, CURL *c,
				 const char *url, struct curl_slist **hdrs,
				 struct backend_error *err)
{
	struct backend_req *r = x->r;
	CURLcode rc = CURLE_OK;
	bool ok;

#define SET(opt, val)                                                                    \
	do {                                                                             \
		if (rc == CURLE_OK)                                                      \
			rc = curl_easy_setopt(c, opt, val);                              \
	} while (0)
	SET(CURLOPT_URL, url);
	if (x->unix_socket)
		SET(CURLOPT_UNIX_SOCKET_PATH, x->unix_socket);
#if LIBCURL_VERSION_NUM >= 0x075500
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
#else
	SET(CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	SET(CURLOPT_SHARE, b->share);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_USERAGENT, "sandboxfs/" SANDBOXFS_VERSION);
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_CONNECTTIMEOUT_MS, b->cfg.connect_timeout_ms);
	SET(CURLOPT_TIMEOUT_MS, r->timeout_ms);
	if (r->stall) {
		SET(CURLOPT_LOW_SPEED_LIMIT, b->cfg.min_rate_bytes);
		SET(CURLOPT_LOW_SPEED_TIME, b->cfg.stall_seconds);
	}
	if (r->get_progress) {
		SET(CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
		SET(CURLOPT_XFERINFODATA, x);
		SET(CURLOPT_NOPROGRESS, 0L);
	}
	/* A dead peer on an unbounded execute is found by TCP keepalive. */
	SET(CURLOPT_TCP_KEEPALIVE, 1L);
	SET(CURLOPT_TCP_KEEPIDLE, 30L);
	SET(CURLOPT_TCP_KEEPINTVL, 10L);
	SET(CURLOPT_SSL_VERIFYPEER, b->cfg.tls_insecure ? 0L : 1L);
	SET(CURLOPT_SSL_VERIFYHOST, b->cfg.tls_insecure ? 0L : 2L);
	if (b->cfg.ca_file)
		SET(CURLOPT_CAINFO, b->cfg.ca_file);
	/* Only the proxy the user named: "" makes libcurl ignore the
	 * *_proxy environment variables, and an empty no-proxy list makes
	 * it ignore no_proxy too. */
	SET(CURLOPT_PROXY, b->cfg.proxy ? b->cfg.proxy : "");
	SET(CURLOPT_NOPROXY, "");
	SET(CURLOPT_PREREQFUNCTION, prereq_cb);
	SET(CURLOPT_PREREQDATA, x);
	SET(CURLOPT_WRITEFUNCTION, write_cb);
	SET(CURLOPT_WRITEDATA, x);
	if (r->once)
		SET(CURLOPT_MAXAGE_CONN, 1L);

	if (strcmp(r->method, "PUT") == 0) {
		SET(CURLOPT_UPLOAD, 1L);
		SET(CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->put_size);
	} else if (strcmp(r->method, "POST") == 0) {
		SET(CURLOPT_POST, 1L);
		SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
	} else if (strcmp(r->method, "DELETE") == 0) {
		SET(CURLOPT_CUSTOMREQUEST, "DELETE");
	} else {
		SET(CURLOPT_HTTPGET, 1L);
	}
	if (r->put_fd >= 0 || r->body) {
		SET(CURLOPT_READFUNCTION, read_cb);
		SET(CURLOPT_READDATA, x);
		SET(CURLOPT_SEEKFUNCTION, seek_cb);
		SET(CURLOPT_SEEKDATA, x);
	}
#undef SET
	if (rc == CURLE_OK && r->tune)
		rc = r->tune(c, r->tune_ctx);

	/* No "Expect: 100-continue": it costs a round trip (or a 1 s wait
	 * with servers that ignore it) on every upload over 1 MiB. */
	ok = append(hdrs, "Expect:");
	if (ok && r->body)
		ok = append(hdrs, "Content-Type: application/json");
	if (ok && r->token) {
		char *auth = NULL;

		ok = asprintf(&auth, "Authorization: Bearer %s", r->token) >= 0;
		if (ok) {
			ok = append(hdrs, auth);
			explicit_bzero(auth, strlen(auth));
			free(auth);
		}
	}
	if (!ok) {
		backend_set_error(err, BACKEND_LOCAL, 0, "out of memory");
		return BACKEND_LOCAL;
	}
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
	if (rc != CURLE_OK) {
		backend_set_error(err, BACKEND_LOCAL, 0, "cannot set up request: %s",
				  curl_easy_strerror(rc));
		return BACKEND_LOCAL;
	}
	return BACKEND_OK;
}

enum backend_status backend_http(struct backend *b, struct backend_req *r,
				 struct backend_error *err)
{
	struct xfer x = {.b = b, .r = r};
	struct backend_handle *h;
	struct curl_slist *hdrs = NULL;
	enum backend_status st;
	char *url = NULL;
	uint64_t t0 = common_now_us();
	CURLcode rc;

	r->http_status = 0;
	r->answer = NULL;
	r->answer_len = 0;
	r->fd_bytes = 0;
	x.limit = r->max_answer;
	backend_add(&b->requests[r->op], 1);

	if (!backend_url_valid(r->base_url)) {
		backend_set_error(err, BACKEND_BAD_REQUEST, 0,
				  "not an http(s) or http+unix base URL (no query, "
				  "no fragment)");
		st = BACKEND_BAD_REQUEST;
		goto out;
	}
	if (r->token && !header_safe(r->token)) {
		backend_set_error(err, BACKEND_BAD_REQUEST, 0,
				  "token contains control characters");
		st = BACKEND_BAD_REQUEST;
		goto out;
	}
	{
		char *unix_base = NULL;
		const char *base = r->base_url;

		if (backend_url_is_unix(base) &&
		    backend_unix_url_parse(base, &unix_base, &x.unix_socket) < 0) {
			backend_set_error(err, BACKEND_LOCAL, 0, "out of memory");
			st = BACKEND_LOCAL;
			goto out;
		}
		base = unix_base ? unix_base : base;
		size_t bl = strlen(base);

		/* The base never ends in '/': r->path brings its own. */
		while (bl > 0 && base[bl - 1] == '/')
			bl--;
		int n = asprintf(&url, "%.*s%s", (int)bl, base, r->path);

		free(unix_base);
		if (n < 0) {
			url = NULL;
			backend_set_error(err, BACKEND_LOCAL, 0, "out of memory");
			st = BACKEND_LOCAL;
			goto out;
		}
	}
	h = thread_handle(b);
	if (!h) {
		backend_set_error(err, BACKEND_LOCAL, 0, "cannot create an HTTP handle");
		st = BACKEND_LOCAL;
		goto out;
	}
	/* Reset keeps the handle's connections, DNS and TLS caches. */
	curl_easy_reset(h->curl);
	x.curl = h->curl;
	st = setup(b, &x, h->curl, url, &hdrs, err);
	if (st != BACKEND_OK)
		goto out;

	rc = curl_easy_perform(h->curl);

	{
		long conns = 0;
		curl_off_t up = 0, down = 0;

		curl_easy_getinfo(h->curl, CURLINFO_NUM_CONNECTS, &conns);
		curl_easy_getinfo(h->curl, CURLINFO_SIZE_UPLOAD_T, &up);
		curl_easy_getinfo(h->curl, CURLINFO_SIZE_DOWNLOAD_T, &down);
		curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &x.status);
		if (conns > 0)
			backend_add(&b->connections_opened, (uint64_t)conns);
		backend_add(&b->bytes_sent, (uint64_t)up);
		backend_add(&b->bytes_received, (uint64_t)down);
	}
	/* The URL (a capability) stays only in the handle until the next
	 * call; set something harmless to drop it now. */
	curl_easy_setopt(h->curl, CURLOPT_URL, "http://0.0.0.0/");
	curl_easy_setopt(h->curl, CURLOPT_UNIX_SOCKET_PATH, NULL);
	curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, NULL); /* freed below */
	r->http_status = x.status;

	if (rc != CURLE_OK) {
		st = classify(&x, rc, err);
		goto out;
	}
	if (x.status >= 200 && x.status < 300) {
		if (r->get_fd < 0) {
			r->answer = x.buf;
			r->answer_len = x.len;
			x.buf = NULL;
			if (!r->answer) {
				r->answer = strdup("");
				if (!r->answer) {
					backend_set_error(err, BACKEND_LOCAL, 0,
							  "out of memory");
					st = BACKEND_LOCAL;
					goto out;
				}
			}
		}
		st = BACKEND_OK;
		goto out;
	}
	st = status_of_http(x.status);
	{
		char msg[sizeof(err->message)];
		char auth[256];
		bool cut = false;

		if (backend_json_error_message(x.buf, x.len, msg, sizeof(msg)))
			cut = strlen(msg) + 1 == sizeof(msg); /* it may go on */
		else
			snprintf(msg, sizeof(msg), "HTTP %ld", x.status);
		/* A server could echo a secret; never pass one on. */
		cut = backend_scrub(msg, sizeof(msg), r->token, cut);
		cut = backend_scrub(msg, sizeof(msg), r->base_url, cut);
		authority(r->base_url, auth, sizeof(auth));
		cut = backend_scrub(msg, sizeof(msg), auth, cut);
		backend_scrub(msg, sizeof(msg), x.unix_socket, cut);
		backend_set_error(err, st, (int)x.status, "%s", msg);
	}
out:
	if (st != BACKEND_OK)
		backend_add(&b->errors, 1);
	count_latency(b, common_now_us() - t0);
	curl_slist_free_all(hdrs);
	free(x.buf);
	free(x.unix_socket);
	free(url);
	return st;
}
