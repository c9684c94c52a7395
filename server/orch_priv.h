/*
 * orch_priv.h — what the local orchestrator's files share: orch.c (the
 * API's routing, the sandboxes' life cycle on disk) and orch_create.c
 * (creates, pools, and the orchestrator's own test routes and faults).
 */
#ifndef SBX_ORCH_PRIV_H
#define SBX_ORCH_PRIV_H

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "faults.h"
#include "svc.h"

#define META_NAME     "sandbox.json"
#define CONTRACT_PORT 3000 /* the reference server's port, for "urls" */
#define CREATES_MAX   1000 /* create bodies kept for GET /_admin/creates */

struct box {
	char id[64];
	char *pool, *image, *error;
	int cport;     /* the sandbox's own port, the key of "urls" */
	uint16_t port; /* where it is served on 127.0.0.1 (TCP mode) */
	char sock[9];  /* its socket's name in sockdir (Unix mode): 8 hex */
	const char *status;
	cJSON *cpu, *memory, *environment; /* as given */
	long idle_s, timeout_s;
	long long created;    /* wall clock, seconds */
	long long created_ms; /* monotonic: when it was listed (hide_new_ms) */
	bool doomed;	      /* deleted while creating: its create cleans up */
	struct sandbox *sb;
	struct box *next;
};

struct orch {
	struct svc svc;
	pthread_mutex_t lock; /* boxes, sandbox_faults and creates */
	struct box *boxes;
	char *root;
	int rootfd, lockfd;
	char *sockdir; /* Unix mode: the private directory of every socket */
	char *token;
	char **pools;
	long *pool_max; /* 0: no limit */
	size_t npools;
	char *shell;
	bool admin;
	bool machinery;
	long default_timeout_s; /* a create's timeoutSeconds when it gives none */
	long image_start_ms;	/* how long an image create stays "creating" */
	struct faults sandbox_faults;
	cJSON *creates[CREATES_MAX]; /* ring of the create bodies received */
	size_t creates_start, creates_count;
	pthread_t reaper;
	bool reaper_started;
	atomic_bool stopping;
};

/* orch.c; the caller holds o->lock unless told otherwise. */
struct orch *orch_of(struct req *r);
struct box *box_find(struct orch *o, const char *id);
void box_unlink(struct orch *o, struct box *b);
void box_free(struct box *b);
cJSON *dup_or_null(const cJSON *v);
void add_str_or_null(cJSON *o, const char *k, const char *v);
void box_pick_socket(const struct orch *o, struct box *b);
cJSON *box_status(const struct orch *o, const struct box *b);
int box_save(struct orch *o, const struct box *b);
/* Serve a box's workspace on its port (0: a new one) or socket. */
void box_serve(struct orch *o, struct box *b, uint16_t port);
void machinery_create(struct orch *o, const struct box *b);
/* Stop serving a box no longer listed and remove it; without the lock. */
void box_destroy(struct orch *o, struct box *b);

/* orch_create.c */
enum MHD_Result create_finish(struct req *r);
cJSON *pools_json(struct orch *o, const char *only);
/* True when a GET must not show b yet (the hide_new_ms fault). */
bool box_hidden(const struct req *r, const struct box *b);
/* GET /_admin/creates; other admin routes are 404. */
enum MHD_Result orch_admin_finish(struct req *r, const char *name);
void orch_creates_free(struct orch *o);

#endif
