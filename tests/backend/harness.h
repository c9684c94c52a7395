/*
 * harness.h — starting the real local sandbox-server for backend tests,
 * and talking to its /_admin/ routes.
 *
 * The server binary comes from argv[1] (meson passes the sandbox_server
 * executable) or env SANDBOX_SERVER. Each server runs on 127.0.0.1 with an
 * ephemeral port (--port 0 --port-file) in its own temporary directory,
 * and is stopped by its PID.
 */
#ifndef SANDBOXFS_TEST_HARNESS_H
#define SANDBOXFS_TEST_HARNESS_H

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

struct server {
	pid_t pid;
	int port;
	char url[64];  /* http://127.0.0.1:PORT */
	char dir[256]; /* private temporary directory */
	char workspace[300];
	char token[65]; /* orchestrator mode: the bearer token */
	bool orchestrator;
};

/* Sets the server binary from argv/env; exits 1 when there is none. */
void harness_init(int argc, char **argv);

/* Starts a single-sandbox server (--faults on). Exits 1 on failure. */
void server_start(struct server *s);
/* Starts an orchestrator (--faults on, a random token, pools 'default'
 * and 'tiny' (at most one live sandbox)). */
void server_start_orchestrator(struct server *s);
/* Stops the server by PID and removes its directory. */
void server_stop(struct server *s);

/* POST JSON to url + path (an admin route); returns the HTTP status. */
long admin_post(const char *url, const char *path, const char *json);
/* GET url + path as JSON; NULL on failure. cJSON_Delete it. */
cJSON *admin_get(const char *url, const char *path);
/* A number from /_admin/stats, -1 on failure. */
long admin_stat(const char *url, const char *name);
/* How many times cmd appears in /_admin/log; -1 on failure. */
int admin_log_count(const char *url, const char *cmd);
/* Sets the fault set (a JSON object) of a server. */
void admin_faults(const char *url, const char *json);

/* A canned HTTP responder on 127.0.0.1: answers every request on a new
 * connection with the same raw response, then closes. */
struct canned {
	int fd;
	int port;
	char url[64];
	char *response; /* raw HTTP/1.1 response (copy): canned_set */
	char *last_body; /* the body of the last request served */
	void *lock;
	atomic_int stop;
	atomic_ulong served;
	void *thread;
};
void canned_start(struct canned *c);
void canned_stop(struct canned *c);
/* Sets the response for the next requests (published to the thread). */
void canned_set(struct canned *c, const char *response);
/* A copy of the body of the last request served (free it), or NULL. */
char *canned_last_body(struct canned *c);

/* A raw HTTP responder on 127.0.0.1 for file bodies the real server
 * never sends: a 200 head (with content_length, or none and the body
 * ends at close), then body bytes without end, two bytes a second, or
 * nothing at all, until the client goes or streamer_stop. One connection
 * at a time. */
enum streamer_mode {
	STREAM_FOREVER, /* 64 KiB pieces as fast as they go */
	STREAM_TRICKLE, /* one byte every half second */
	STREAM_SILENT,	/* the head, then silence */
};
struct streamer {
	int fd;
	int port;
	char url[64];
	enum streamer_mode mode;
	long long content_length; /* announced; -1: none */
	atomic_int stop;
	atomic_ullong sent; /* body bytes sent, all connections */
	void *thread;
};
void streamer_start(struct streamer *s, enum streamer_mode mode,
		    long long content_length);
void streamer_stop(struct streamer *s);

/* Writes size bytes of a pattern to a new unlinked temporary file. */
int temp_fd(size_t size, unsigned seed);
/* True when the first size bytes of fd and the pattern agree. */
bool fd_matches(int fd, size_t size, unsigned seed);

#endif
