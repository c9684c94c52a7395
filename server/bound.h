/*
 * bound.h — the per-request bound of a sandbox's URL, as an
 * orchestrator's proxy applies it (the create's timeoutSeconds).
 *
 * With a bound, a request's work (its finish()) runs on a worker thread
 * while the connection's thread waits for its answer until the request's
 * start + the bound. An answer not ready by then is replaced by 504
 * {"error": "request exceeded the sandbox's timeoutSeconds (N s)"}; the
 * work goes on to its own end (a command keeps its seat until it ends)
 * and its late answer is dropped.
 */
#ifndef SBX_BOUND_H
#define SBX_BOUND_H

#include <microhttpd.h>
#include <stdbool.h>

struct req;

/* Run the request's finish() under the bound of its service. */
enum MHD_Result bound_finish(struct req *r);

/* svc_reply on a bounded request: keep the answer for the connection's
 * thread instead of queueing it. Takes resp. */
enum MHD_Result bound_capture(struct req *r, unsigned int status,
			      struct MHD_Response *resp);

/* The connection is done with a bounded request. True when the caller
 * frees it now; false when the worker still runs and frees it itself. */
bool bound_release(struct req *r);

#endif
