/*
 * faults.h — switchable misbehaviour for tests (sandbox-server --faults).
 *
 * A fault set is a plain value. Each service (a sandbox or the
 * orchestrator) holds one under a lock; every request takes a snapshot of
 * it when it starts, so a change applies to the requests that start after.
 */
#ifndef SBX_FAULTS_H
#define SBX_FAULTS_H

#include <stdbool.h>

struct cJSON;

/* Which requests a fault set applies to. /_admin/ never is faulted. */
enum fault_routes {
	FAULT_ROUTES_ALL,	   /* every route but /_admin/ */
	FAULT_ROUTES_EXECUTE,	   /* POST /execute */
	FAULT_ROUTES_FILES,	   /* /files/... */
	FAULT_ROUTES_ORCHESTRATOR, /* /v1/... */
};

struct faults {
	bool lose_answer;     /* do the work, then close without answering */
	bool drop_before;     /* close before doing the work */
	double error_rate;    /* 0..1: answer 500 without doing the work */
	long delay_ms;	      /* sleep before every answer */
	bool malformed_json;  /* JSON answers are cut and garbled */
	bool hostile_listing; /* listings carry invalid entries too */
	bool truncate_answer; /* announce the whole body, send half, close */
	long body_rate_kbps;  /* send file bodies at this many KiB/s (0: full speed) */
	/* PUTs with a chunked body (Transfer-Encoding: chunked) only: */
	bool refuse_chunked;  /* answer 411 at once, as a server that wants a
				 Content-Length does */
	long drop_chunked_kb; /* close the connection once this many KiB of
				 the body came (0: off) */
	/* The orchestrator's: */
	bool create_lose_answer; /* create, then close without answering */
	long hide_new_ms;	 /* GETs show no sandbox for this long after its create */
	enum fault_routes routes;
};

/* Replace *f by the fields of a JSON object; a field that is absent takes
 * its default (all off, routes "all"). Returns NULL or a static message. */
const char *faults_from_json(struct faults *f, const struct cJSON *obj);

/* Apply one "NAME[=VALUE]" setting (the --fault flag). A boolean without a
 * value is true. Returns NULL or a static message. */
const char *faults_set(struct faults *f, const char *setting);

/* A new JSON object describing *f. */
struct cJSON *faults_to_json(const struct faults *f);

/* True when any fault is on. */
bool faults_any(const struct faults *f);

#endif
