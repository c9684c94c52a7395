/*
 * backend.h — the HTTP client of sandboxfs.
 *
 * A typed C API over libcurl and cJSON for the two wire contracts of
 * CONTRACT.md: the sandbox contract (execute, files, health) served at each
 * sandbox's URL, and the orchestrator's /v1/sandbox API. It knows HTTP and
 * JSON and nothing of FUSE or the journal.
 *
 * Thread safety: one struct backend is shared by every thread. Each calling
 * thread gets its own reused curl easy handle (connections are kept alive and
 * reused; a handle outlives its thread and passes, connections and all, to
 * the next new thread); no lock is held across a network call.
 * backend_free may only be called once no thread is inside a call.
 *
 * Every call returns an enum backend_status and, when err is not NULL, fills
 * *err. Messages never contain a sandbox URL or a token.
 *
 * Never twice: an execute and a create send a body libcurl cannot rewind,
 * so libcurl's silent resend of a request whose reused keep-alive
 * connection died can never run a command (or create a sandbox) twice: it
 * fails as BACKEND_ANSWER_LOST instead. They reuse only connections idle
 * for under a second, which servers do not close. Idempotent calls (files,
 * health, orchestrator get, list, delete) keep libcurl's resend.
 *
 * Gateway timeout: a 504 answer to an execute or a create is a proxy
 * cutting the request at its bound (a sandbox's timeoutSeconds bounds each
 * request to its URL), and the command or the create may have taken
 * effect: it is BACKEND_ANSWER_LOST (EIO) with http_status 504 and a
 * message saying the request was cut by a gateway timeout (504), never
 * resent. A 504 to any other call is BACKEND_SERVER_ERROR with
 * http_status 504.
 */
#ifndef SANDBOXFS_BACKEND_H
#define SANDBOXFS_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What happened to a call, by meaning. */
enum backend_status {
	BACKEND_OK = 0,
	/* The request never reached the server (refused, unreachable, DNS,
	 * connect timeout): it is safe to send it again. */
	BACKEND_NOT_SENT,
	/* The request may have been received (timeout or reset after it was
	 * written, truncated or missing answer): the outcome is unknown. */
	BACKEND_ANSWER_LOST,
	BACKEND_INVALID,      /* 400, 415 */
	BACKEND_DENIED,	      /* 401, 403 */
	BACKEND_NOT_FOUND,    /* 404 */
	BACKEND_CONFLICT,     /* 409: id live on create, seat busy on execute */
	BACKEND_TOO_LARGE,    /* 413, or an answer over the configured bound */
	BACKEND_EXHAUSTED,    /* 429 */
	BACKEND_SERVER_ERROR, /* 5xx, or another unexpected HTTP status;
				 but see "Gateway timeout" */
	/* A 2xx answer that does not parse or lacks required fields. For a
	 * request with effects (execute, create) the outcome is unknown. */
	BACKEND_BAD_ANSWER,
	BACKEND_BAD_REQUEST, /* refused locally before sending (bad name, bad URL) */
	BACKEND_LOCAL,	     /* local failure: descriptor I/O, memory */
};

/* The call an error came from; errno mapping depends on it (409). */
enum backend_op {
	BACKEND_OP_EXECUTE,
	BACKEND_OP_FILE,
	BACKEND_OP_HEALTH,
	BACKEND_OP_CREATE,
	BACKEND_OP_SANDBOX, /* orchestrator get, list, delete, pools */
};

struct backend_error {
	enum backend_status status;
	int http_status; /* 0 when no HTTP answer was read */
	/* The server's own "error" message when it sent one, else a short
	 * description of the failure. Never contains a URL or a token. */
	char message[256];
};

/* errno for a status, per DESIGN.md §4: 400 EINVAL, 401/403 EACCES,
 * 404 ENOENT, 409 EEXIST on create and EBUSY otherwise, 413 EFBIG,
 * 429 EAGAIN, 5xx EIO, not sent ENOTCONN, answer lost EIO. Returns a
 * positive errno, 0 for BACKEND_OK. */
int backend_errno(enum backend_status status, enum backend_op op);

/* A short constant name for a status ("not sent", "answer lost", ...). */
const char *backend_status_name(enum backend_status status);

struct backend_config {
	long connect_timeout_ms;  /* default 10000 */
	long request_timeout_ms;  /* small calls: health, delete, listing,
				     orchestrator; default 60000 */
	long execute_grace_ms;    /* added to timeoutSeconds; default 30000 */
	long stall_seconds;       /* a transfer under min_rate_bytes a second
				     for this long fails; default 30 */
	long min_rate_bytes;      /* default 1024: a peer trickling two bytes
				     a second holds nothing for long */
	size_t max_json_bytes;    /* default 8 MiB */
	size_t max_exec_bytes;    /* execute answers: two 1 MiB streams,
				     JSON-escaped; default 16 MiB */
	size_t max_listing_bytes; /* default 64 MiB */
	/* A download of unknown size longer than this fails as
	 * BACKEND_TOO_LARGE; default 0: no bound. */
	uint64_t max_download_bytes;
	bool tls_insecure;        /* default false: TLS peers are verified */
	const char *ca_file;      /* NULL: the system's CA store */
	/* The proxy every request goes through (libcurl's proxy URL, e.g.
	 * http://proxy:3128), or NULL: none. The http_proxy, https_proxy,
	 * all_proxy and no_proxy environment variables are never used: a
	 * token or a sandbox URL only goes to a proxy named here. */
	const char *proxy;
};

/* Fills every field with its default. */
void backend_config_defaults(struct backend_config *cfg);

struct backend;

/* Creates the shared client; copies cfg. NULL on allocation failure. */
struct backend *backend_new(const struct backend_config *cfg);
void backend_free(struct backend *b);
/* The calling thread is done with b: its handle is given back now, as it
 * would be when the thread exits. For a thread nobody joins (others wait
 * for it by a counter it lowers last): backend_free may then come at any
 * time without racing the thread's exit. */
void backend_thread_done(struct backend *b);

/* Counters since backend_new, for .sandboxfs/stats and the benchmarks. */
struct backend_stats {
	uint64_t requests[5]; /* by enum backend_op */
	uint64_t errors;      /* calls that did not return BACKEND_OK */
	uint64_t bytes_sent;
	uint64_t bytes_received;
	uint64_t connections_opened; /* new TCP connections, not reuses */
	uint64_t names_dropped;      /* invalid names dropped from listings */
	uint64_t latency_p50_us;
	uint64_t latency_p99_us;
};
void backend_get_stats(struct backend *b, struct backend_stats *out);

/* --- names --------------------------------------------------------------*/

/* True when name is a valid single path segment: not empty, not "." or
 * "..", no '/', no control character (C0, DEL, C1), valid UTF-8 (a name the
 * JSON listings could not carry back unchanged is refused), at most 255
 * bytes. */
bool backend_name_valid(const char *name);

/* The longest path: one the kernel can give (4095 bytes) and a name
 * below it (mkdir puts a placeholder inside the new directory). */
#define BACKEND_PATH_MAX (4095 + 1 + 255)

/* True when path is a valid workspace-relative path: "" (the root) or
 * valid segments joined by single '/', no leading or trailing '/', at
 * most BACKEND_PATH_MAX bytes. */
bool backend_path_valid(const char *path);

/* --- base URLs ------------------------------------------------------------
 * A base URL (a sandbox's URL, an orchestrator's base_url) is one of
 *   http://HOST[:PORT][/BASE]       https://HOST[:PORT][/BASE]
 *   http+unix://ENCODED_PATH[/BASE]
 * with no query, no fragment, no whitespace; request paths (/execute,
 * /files/..., /v1/sandbox) are appended to BASE. The third form is a server
 * on the Unix socket at PATH, percent-encoded whole as the host ('/' is
 * %2F), as requests-unixsocket and others write it:
 *   http+unix://%2Fhome%2Fme%2F.local%2Fstate%2Fsandboxfs%2Fx%2Frun%2Forch
 * PATH is absolute and at most 107 bytes (sun_path). It never goes through
 * a proxy. Any other scheme is refused (BACKEND_BAD_REQUEST). A URL, its
 * host and its socket path are secrets: never in a message.
 *
 * A sandbox URL on a Unix socket is taken from an orchestrator only when
 * that orchestrator is on a Unix socket itself: a remote orchestrator can
 * never point sandboxfs at a local socket. */

/* True when url is a base URL of one of these forms. */
bool backend_url_valid(const char *url);

/* The socket path of a valid http+unix:// URL (malloc'd); NULL for any
 * other URL, or when out of memory. */
char *backend_url_socket_path(const char *url);

/* --- the sandbox contract -----------------------------------------------
 * url: the sandbox's base URL (above), without trailing path.
 * path: workspace-relative, see backend_path_valid; each segment is
 * percent-encoded on the wire. */

struct backend_exec_result {
	int exit_code;
	/* stdout: out_len bytes, every byte the answer held (NULs too),
	 * followed by a NUL that is not part of it */
	char *out;
	size_t out_len;
	char *err; /* stderr, the same way */
	size_t err_len;
	long duration_ms;
	bool truncated;
};
void backend_exec_result_clear(struct backend_exec_result *r);

/* POST /execute. timeout_s 0 = no limit (and the call waits without
 * bound; TCP keepalive finds a dead peer); otherwise the call waits
 * timeout_s plus the grace period, then returns BACKEND_ANSWER_LOST.
 * Behind an orchestrator's proxy the sandbox's request bound
 * (timeoutSeconds at create) may cut it first: a 504, returned as
 * BACKEND_ANSWER_LOST with http_status 504 (see "Gateway timeout").
 * An answer over max_exec_bytes is BACKEND_BAD_ANSWER (the command ran;
 * its outcome is unknown), not BACKEND_TOO_LARGE. */
enum backend_status backend_execute(struct backend *b, const char *url,
				    const char *command, long timeout_s,
				    struct backend_exec_result *out,
				    struct backend_error *err);

/* A download's size is not known (no listing gave it). */
#define BACKEND_SIZE_UNKNOWN UINT64_MAX

/* The most a download whose listing gave expect bytes may bring: expect
 * plus max(expect / 8, 64 KiB). The slack is for a file that grew between
 * the listing and the GET (a log being written, a job still appending):
 * an eighth keeps a busy large file readable, 64 KiB a small one; past
 * that the listing is too old to size the download by, and the next
 * listing gives the new size. */
uint64_t backend_download_bound(uint64_t expect);

/* The deadline of a download of at most bound bytes, in ms: the time a
 * transfer at min_rate_bytes a second takes, plus request_timeout_ms for
 * the connection and the server's start. 0 (none) for bound 0. */
long backend_download_deadline_ms(const struct backend *b, uint64_t bound);

/* GET /files/path of a file, streamed to fd with write(2) from its
 * current offset. *size_out (may be NULL) receives the bytes written. On
 * failure fd may hold part of the body: discard it. The size is unknown:
 * the body is bounded by max_download_bytes (when set, with its deadline);
 * any transfer under min_rate_bytes a second for stall_seconds fails. */
enum backend_status backend_file_get(struct backend *b, const char *url,
				     const char *path, int fd,
				     uint64_t *size_out,
				     struct backend_error *err);

/* backend_file_get of a file whose listing gave expect bytes
 * (BACKEND_SIZE_UNKNOWN: as backend_file_get): a body longer than
 * backend_download_bound(expect) is cut and fails as BACKEND_BAD_ANSWER
 * (EIO) with no more than that in fd (a Content-Length over it fails
 * before any byte is written), and the whole download has
 * backend_download_deadline_ms (BACKEND_ANSWER_LOST past it).
 * progress(ctx, written) is called after each piece of the body is written
 * to fd, written being the body bytes written so far (the piece is in fd
 * when it is called), and also at least once a second while nothing
 * arrives; a progress that returns false stops the transfer within about a
 * second, even a silent one: the call fails with BACKEND_LOCAL. progress
 * may be NULL. */
typedef bool (*backend_progress_fn)(void *ctx, uint64_t written);
enum backend_status backend_file_get_progress(struct backend *b, const char *url,
					      const char *path, int fd, uint64_t expect,
					      backend_progress_fn progress, void *ctx,
					      uint64_t *size_out,
					      struct backend_error *err);

/* PUT /files/path with the first size bytes of fd, read with pread(2)
 * from offset 0 (the descriptor's offset is not used). A file shorter than
 * size fails with BACKEND_LOCAL and never sends a short body as whole. */
enum backend_status backend_file_put(struct backend *b, const char *url,
				     const char *path, int fd, uint64_t size,
				     struct backend_error *err);

/* Where the body of a streamed PUT comes from (backend_file_put_stream).
 * read fills at most len bytes of buf and returns how many (> 0), 0 at the
 * end of the body, or -1 to abandon the transfer; it may wait, with a
 * bound, for more bytes to be there. alive (may be NULL) is asked at least
 * once a second while the transfer waits on the network: false abandons
 * it within about a second. An abandoned transfer fails with
 * BACKEND_LOCAL. */
struct backend_put_source {
	long (*read)(void *ctx, char *buf, size_t len);
	bool (*alive)(void *ctx);
	void *ctx;
};

/* PUT /files/path with a body whose length is not known when it starts,
 * sent with chunked transfer encoding as src produces it (no Content-
 * Length). Bounded by the stall rule (min_rate_bytes for stall_seconds),
 * not by a deadline. BACKEND_OK only for a 2xx answer that came after
 * the end of the body: an answer before it means the server did not wait
 * for the body (a server that reads no chunked body takes an empty one),
 * which fails as BACKEND_BAD_ANSWER. *refused (may be NULL) is set when
 * the server said or showed it takes no chunked body (that early answer,
 * 411, 501 or 505): the caller then sends whole files there. */
enum backend_status backend_file_put_stream(struct backend *b, const char *url,
					    const char *path,
					    const struct backend_put_source *src,
					    bool *refused, struct backend_error *err);

/* DELETE /files/path (a file or a whole tree). */
enum backend_status backend_file_delete(struct backend *b, const char *url,
					const char *path,
					struct backend_error *err);

struct backend_entry {
	char *name;
	uint64_t size;
	bool is_dir;
};
struct backend_listing {
	struct backend_entry *entries;
	size_t count;
	size_t dropped; /* entries refused: invalid name, negative size,
			   wrong types */
};
void backend_listing_clear(struct backend_listing *l);

/* GET /files/path of a directory ("" is the root, /files/). Entries come
 * back sorted by name (strcmp), invalid and duplicate names dropped and
 * counted. A path that is a file answers with its bytes, which do not
 * parse: BACKEND_BAD_ANSWER. */
enum backend_status backend_list(struct backend *b, const char *url,
				 const char *path, struct backend_listing *out,
				 struct backend_error *err);

/* GET /healthz: BACKEND_OK when it answers {"status":"ok"}. */
enum backend_status backend_health(struct backend *b, const char *url,
				   struct backend_error *err);

/* --- the orchestrator API ------------------------------------------------*/

struct backend_orchestrator {
	const char *base_url; /* e.g. http://127.0.0.1:8080 (no /v1/...) */
	const char *token;    /* bearer token, NULL for none */
};

enum backend_sandbox_state {
	BACKEND_SANDBOX_CREATING,
	BACKEND_SANDBOX_READY,
	BACKEND_SANDBOX_FAILED,
	BACKEND_SANDBOX_DELETING,
	BACKEND_SANDBOX_UNKNOWN_STATE, /* a status string we do not know */
};

struct backend_sandbox {
	char *id;
	char *pool;  /* NULL when poolless */
	char *image; /* NULL when absent */
	char *url;   /* NULL when nothing serves; a valid base URL otherwise */
	char *error; /* why it failed, NULL otherwise */
	enum backend_sandbox_state state;
};
void backend_sandbox_clear(struct backend_sandbox *s);

struct backend_sandbox_list {
	struct backend_sandbox *items;
	size_t count;
	size_t dropped; /* malformed entries refused */
};
void backend_sandbox_list_clear(struct backend_sandbox_list *l);

struct backend_create_request {
	const char *id;           /* NULL: the orchestrator generates one */
	const char *pool;	  /* at most one of pool and image; neither */
	const char *image;	  /* only when spec_json gives them */
	int port;                 /* required with image */
	long idle_timeout_s;      /* 0: not sent */
	/* The request bound (timeoutSeconds): sent when send_timeout. */
	bool send_timeout;
	long timeout_s;
	/* NULL, or the text of a JSON object of further create fields
	 * (environment, ports, artifacts, command, cpu, memory, runtimeClass,
	 * volumes, idleTimeoutSeconds, timeoutSeconds, pool, image, port, ...)
	 * sent as given. The members above win over the spec's fields of the
	 * same name when set (id; pool or image+port when non-NULL;
	 * idleTimeoutSeconds when idle_timeout_s > 0; timeoutSeconds when
	 * send_timeout). Not an object, or unparsable: BACKEND_BAD_REQUEST
	 * before anything is sent. */
	const char *spec_json;
};

/* True when id is an RFC-1123 label: 1-63 lowercase alphanumerics and
 * interior hyphens. */
bool backend_sandbox_id_valid(const char *id);

/* POST /v1/sandbox. The body is spec_json with the struct's members put
 * over it. Exactly one of pool and image is sent: a pool given here
 * removes the spec's image and port, an image given here removes the
 * spec's pool; when the struct gives neither, the spec's are sent as they
 * are (and the spec must give one: without a spec, the struct must).
 * Refused before sending (BACKEND_BAD_REQUEST): an invalid id, both pool
 * and image, an image without a port in 1-65535, a negative
 * idle_timeout_s, send_timeout with timeout_s outside 0-3600 (0 = no
 * bound), a spec_json that is not a JSON object. The spec's own fields
 * are the orchestrator's to check: an unknown or invalid one is its 400,
 * BACKEND_INVALID with its message. Sent once (see "Never twice"); a 504
 * is BACKEND_ANSWER_LOST (see backend_execute). */
enum backend_status backend_orch_create(struct backend *b,
					const struct backend_orchestrator *o,
					const struct backend_create_request *req,
					struct backend_sandbox *out,
					struct backend_error *err);
enum backend_status backend_orch_get(struct backend *b,
				     const struct backend_orchestrator *o,
				     const char *id, struct backend_sandbox *out,
				     struct backend_error *err);
enum backend_status backend_orch_list(struct backend *b,
				      const struct backend_orchestrator *o,
				      struct backend_sandbox_list *out,
				      struct backend_error *err);
/* 404 (already gone) is returned as BACKEND_NOT_FOUND; callers that only
 * want it gone treat that as success. */
enum backend_status backend_orch_delete(struct backend *b,
					const struct backend_orchestrator *o,
					const char *id,
					struct backend_error *err);

/* --- pools (GET /v1/sandbox-pool) --- */

struct backend_pool {
	char *id;
	char *image;		  /* NULL when absent */
	long size, warm, claimed; /* -1 when absent */
};
struct backend_pool_list {
	struct backend_pool *items;
	size_t count;
	size_t dropped; /* malformed entries refused */
};
void backend_pool_clear(struct backend_pool *p);
void backend_pool_list_clear(struct backend_pool_list *l);

/* True when id can name a pool in a request path: 1-255 bytes, no '/',
 * no control character. */
bool backend_pool_id_valid(const char *id);

/* GET /v1/sandbox-pool (id NULL) or /v1/sandbox-pool/{id} (one item; an
 * unknown pool is BACKEND_NOT_FOUND; an answer about another pool is
 * BACKEND_BAD_ANSWER; an invalid id is BACKEND_BAD_REQUEST). Bounded like
 * the other orchestrator calls (request_timeout_ms; the list by
 * max_listing_bytes, one pool by max_json_bytes); malformed entries of
 * the list are dropped and counted in out->dropped; counted as
 * BACKEND_OP_SANDBOX in the statistics. */
enum backend_status backend_orch_pools(struct backend *b,
				       const struct backend_orchestrator *o,
				       const char *id, struct backend_pool_list *out,
				       struct backend_error *err);

#endif
