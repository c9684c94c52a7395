/*
 * svc.h — one HTTP service on libmicrohttpd: a sandbox's contract server or
 * the orchestrator's API.
 *
 * The service owns the daemon (one thread per connection, so a long
 * /execute never blocks file calls; keep-alive), the request life cycle,
 * percent-decoding of the path, JSON replies and errors, counters, the
 * command log, and the test switches of /_admin/ (--faults).
 *
 * A request goes through the ops of its service: begin() on the first
 * call (route it, maybe start streaming the body), data() for each chunk
 * of a streamed body, finish() once the body is complete, cleanup() when
 * the request is over, answered or not.
 */
#ifndef SBX_SVC_H
#define SBX_SVC_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "faults.h"

struct cJSON;
struct svc;
struct req;

enum route {
	ROUTE_OTHER,
	ROUTE_HEALTH,
	ROUTE_EXECUTE,
	ROUTE_FILES,
	ROUTE_ORCH,
	ROUTE_ADMIN,
};

struct svc_ops {
	void (*begin)(struct req *r);
	void (*data)(struct req *r, const char *buf, size_t n);
	enum MHD_Result (*finish)(struct req *r);
	void (*cleanup)(struct req *r);
	/* After POST /_admin/faults changed this service's faults. */
	void (*faults_changed)(struct svc *s, const struct faults *f);
	/* GET /_admin/NAME for a NAME the service adds, or NULL. */
	enum MHD_Result (*admin_finish)(struct req *r, const char *name);
};

/* Counters shown by GET /_admin/stats. Requests to /_admin/ are not
 * counted. */
struct svc_stats {
	atomic_long connections; /* TCP connections accepted */
	atomic_long requests;
	atomic_long executes; /* /execute requests */
	atomic_long commands; /* commands started */
	atomic_long timeouts; /* commands killed by their timeout */
	atomic_long busy;     /* /execute refused with 409 */
	atomic_long puts, gets, lists, deletes, health;
	atomic_long chunked_puts;      /* of puts: with a chunked body */
	atomic_long creates, destroys; /* orchestrator */
	atomic_long errors;	       /* answers >= 400 */
	atomic_long faults;	       /* injected faults */
	atomic_long bounded;	       /* answered 504 past the request bound */
};

#define SVC_LOG_MAX 1000

struct svc {
	const struct svc_ops *ops;
	void *owner;
	bool admin;
	struct MHD_Daemon *daemon;
	uint16_t port;	 /* 0 on a Unix socket */
	char *unix_path; /* the socket file, removed at stop; NULL on TCP */
	dev_t unix_dev;	 /* which file: never remove another server's */
	ino_t unix_ino;
	pthread_mutex_t lock; /* faults and log */
	struct faults faults;
	struct svc_stats stats;
	char *log[SVC_LOG_MAX]; /* ring of commands started */
	size_t log_start, log_count;
	atomic_llong last_activity_ms; /* monotonic; for idle teardown */
	atomic_int active;	       /* requests in progress */
	long bound_s;		       /* per-request bound (bound.h); 0: none */
	atomic_int workers;	       /* bounded requests' workers running */
};

struct req {
	struct svc *svc;
	struct MHD_Connection *conn;
	const char *method;
	char *path; /* percent-decoded URL path */
	enum route route;
	int status; /* early error, answered at finish */
	char errmsg[160];
	bool stream; /* the body goes to ops->data */
	char *body;
	size_t len, cap, limit;
	struct faults f;	  /* snapshot when the request began */
	bool faulted;		  /* f applies to this request */
	void *ctx;		  /* the service's per-request state */
	long long start_ms;	  /* monotonic, when the request began */
	char *method_copy;	  /* r->method, valid after the connection */
	struct bound_call *bound; /* its worker (bound.h), or NULL */
	bool chunked;		  /* the body is chunked (no Content-Length) */
	unsigned long long got;	  /* body bytes received */
};

struct svc_config {
	const char *listen; /* address, default 127.0.0.1 */
	uint16_t port;	    /* 0: ephemeral */
	bool admin;	    /* serve /_admin/ */
	struct faults faults;
	const struct svc_ops *ops;
	void *owner;
	/* Listen on this Unix socket (mode 0600) instead of TCP; every
	 * request from a peer of another uid is refused with 403. */
	const char *unix_path;
	/* Answer 504 to a request unanswered this many seconds after it
	 * began (bound.h); 0: no bound. /_admin/ is never bounded. */
	long bound_s;
};

/* Start listening. Returns 0, or -1 with a message in err. */
int svc_start(struct svc *s, const struct svc_config *c, char *err, size_t errlen);

/* Stop the daemon (waits for the connection threads and, for a while,
 * for the workers of bounded requests) and free the log. Returns false
 * when a worker still runs: the caller must then not free s. */
bool svc_stop(struct svc *s);

/* Free a request (after ops->cleanup). */
void svc_req_free(struct req *r);

/* Record an early error; finish() is then skipped and it is answered. */
void svc_fail(struct req *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Answers. Each applies this request's faults (delay, malformed JSON,
 * lost answer) and returns what the access handler must return. */
enum MHD_Result svc_reply(struct req *r, unsigned int status, struct MHD_Response *resp);
enum MHD_Result svc_reply_json(struct req *r, unsigned int status, struct cJSON *body);
enum MHD_Result svc_reply_text_json(struct req *r, unsigned int status, char *json,
				    size_t len);
enum MHD_Result svc_reply_error(struct req *r, unsigned int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
enum MHD_Result svc_reply_empty(struct req *r, unsigned int status);

/* A file's bytes (takes fd). */
enum MHD_Result svc_reply_fd(struct req *r, unsigned int status, int fd, uint64_t size,
			     const char *content_type);

/* Append a command to the log (a copy, cut at 64 KiB). */
void svc_log_command(struct svc *s, const char *cmd);

/* Set the faults (as POST /_admin/faults does, without the hook). */
void svc_set_faults(struct svc *s, const struct faults *f);

/* A request header, or NULL. */
const char *svc_header(struct req *r, const char *name);

#endif
