/* bound.c — the per-request bound of a sandbox's URL (bound.h). */
#include "bound.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "svc.h"

#include "common/clock.h"

struct bound_call {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* on CLOCK_MONOTONIC */
	bool done;	     /* the worker's finish() returned */
	bool abandoned;	     /* answered 504: drop the late answer */
	bool orphan;	     /* the connection is gone: the worker frees */
	unsigned int status;
	struct MHD_Response *resp;
	enum MHD_Result ret;
};

static void call_free(struct bound_call *bc)
{
	if (bc->resp)
		MHD_destroy_response(bc->resp);
	pthread_cond_destroy(&bc->cond);
	pthread_mutex_destroy(&bc->lock);
	free(bc);
}

static void *worker_main(void *arg)
{
	struct req *r = arg;
	struct svc *s = r->svc;
	struct bound_call *bc = r->bound;
	enum MHD_Result ret = s->ops->finish(r);
	bool orphan;

	pthread_mutex_lock(&bc->lock);
	bc->ret = ret;
	bc->done = true;
	if (bc->abandoned && bc->resp) {
		MHD_destroy_response(bc->resp);
		bc->resp = NULL;
	}
	orphan = bc->orphan;
	pthread_cond_signal(&bc->cond);
	pthread_mutex_unlock(&bc->lock);
	if (orphan) {
		r->bound = NULL;
		call_free(bc);
		svc_req_free(r);
	}
	atomic_fetch_sub(&s->workers, 1);
	return NULL;
}

enum MHD_Result bound_capture(struct req *r, unsigned int status,
			      struct MHD_Response *resp)
{
	struct bound_call *bc = r->bound;

	pthread_mutex_lock(&bc->lock);
	if (bc->abandoned) {
		MHD_destroy_response(resp);
	} else {
		if (bc->resp)
			MHD_destroy_response(bc->resp);
		bc->resp = resp;
		bc->status = status;
	}
	pthread_mutex_unlock(&bc->lock);
	return MHD_YES;
}

static enum MHD_Result reply_504(struct req *r)
{
	char *json = NULL;
	struct MHD_Response *resp;
	enum MHD_Result ret;
	int n = asprintf(&json,
			 "{\"error\":\"request exceeded the sandbox's timeoutSeconds "
			 "(%ld s)\"}",
			 r->svc->bound_s);

	if (n < 0)
		return MHD_NO;
	resp = MHD_create_response_from_buffer((size_t)n, json, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(json);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	atomic_fetch_add(&r->svc->stats.errors, 1);
	atomic_fetch_add(&r->svc->stats.bounded, 1);
	ret = MHD_queue_response(r->conn, 504, resp);
	MHD_destroy_response(resp);
	return ret;
}

enum MHD_Result bound_finish(struct req *r)
{
	struct svc *s = r->svc;
	struct bound_call *bc = calloc(1, sizeof(*bc));
	long long deadline = r->start_ms + (long long)s->bound_s * 1000;
	pthread_condattr_t ca;
	pthread_attr_t pa;
	pthread_t t;
	enum MHD_Result ret;
	struct timespec ts;

	if (!bc)
		return svc_reply_error(r, 500, "out of memory");
	pthread_mutex_init(&bc->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&bc->cond, &ca);
	pthread_condattr_destroy(&ca);
	r->bound = bc;
	atomic_fetch_add(&s->workers, 1);
	pthread_attr_init(&pa);
	pthread_attr_setdetachstate(&pa, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &pa, worker_main, r)) {
		pthread_attr_destroy(&pa);
		atomic_fetch_sub(&s->workers, 1);
		r->bound = NULL;
		call_free(bc);
		return s->ops->finish(r); /* unbounded rather than not at all */
	}
	pthread_attr_destroy(&pa);

	/* common_now_ms is CLOCK_MONOTONIC, like the condition's clock. */
	ts.tv_sec = (time_t)(deadline / 1000);
	ts.tv_nsec = (long)(deadline % 1000) * 1000000L;
	pthread_mutex_lock(&bc->lock);
	while (!bc->done && (long long)common_now_ms() < deadline)
		if (pthread_cond_timedwait(&bc->cond, &bc->lock, &ts) == ETIMEDOUT)
			break;
	if (!bc->done) {
		bc->abandoned = true;
		if (bc->resp) {
			MHD_destroy_response(bc->resp);
			bc->resp = NULL;
		}
		pthread_mutex_unlock(&bc->lock);
		return reply_504(r);
	}
	pthread_mutex_unlock(&bc->lock);
	if (!bc->resp)
		return bc->ret;
	ret = MHD_queue_response(r->conn, bc->status, bc->resp);
	MHD_destroy_response(bc->resp);
	bc->resp = NULL;
	return ret;
}

bool bound_release(struct req *r)
{
	struct bound_call *bc = r->bound;
	bool running;

	pthread_mutex_lock(&bc->lock);
	running = !bc->done;
	bc->orphan = running;
	pthread_mutex_unlock(&bc->lock);
	if (running)
		return false;
	r->bound = NULL;
	call_free(bc);
	return true;
}
