/*
 * orchestrator.c — the orchestrator's /v1/sandbox and /v1/sandbox-pool API
 * (the pools' decoders are in pools.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_i.h"
#include "backend_json_i.h"

/* Every orchestrator call: the token, a JSON answer, the request bounds. */
static void req_init(struct backend_req *r, struct backend *b, enum backend_op op,
		     const char *method, const struct backend_orchestrator *o,
		     const char *path)
{
	backend_req_init(r, op, method, o->base_url, path);
	r->token = o->token;
	r->max_answer = b->cfg.max_json_bytes;
	r->timeout_ms = b->cfg.request_timeout_ms;
	r->stall = true;
}

/* A sandbox on a Unix socket is a local one: only an orchestrator on a
 * Unix socket itself may name one, so that a remote orchestrator cannot
 * point sandboxfs at a local service's socket. */
static bool url_from_here(const struct backend_orchestrator *o, const char *url)
{
	return !url || !backend_url_is_unix(url) || backend_url_is_unix(o->base_url);
}

/* Decodes a status answer; a bad one is counted and reported. */
static enum backend_status decode_sandbox(struct backend *b,
					  const struct backend_orchestrator *o,
					  struct backend_req *r,
					  struct backend_sandbox *out, bool effects,
					  struct backend_error *err)
{
	enum backend_status st = backend_json_sandbox(r->answer, r->answer_len, out);

	if (st == BACKEND_OK && !url_from_here(o, out->url)) {
		backend_sandbox_clear(out);
		st = BACKEND_BAD_ANSWER;
	}
	if (st == BACKEND_OK) {
		backend_set_error(err, BACKEND_OK, (int)r->http_status, "ok");
		return st;
	}
	backend_count_error(b);
	backend_set_error(err, st, (int)r->http_status, "%s",
			  st == BACKEND_LOCAL ? "out of memory"
			  : effects ? "sandbox status does not parse (missing id or "
				      "status, wrong types, or a bad url); the outcome "
				      "is unknown"
				    : "sandbox status does not parse (missing id or "
				      "status, wrong types, or a bad url)");
	return st;
}

enum backend_status backend_orch_create(struct backend *b,
					const struct backend_orchestrator *o,
					const struct backend_create_request *req,
					struct backend_sandbox *out,
					struct backend_error *err)
{
	struct backend_req r;
	enum backend_status st;
	char *body;

	memset(out, 0, sizeof(*out));
	if (req->id && !backend_sandbox_id_valid(req->id))
		return backend_refuse(b, BACKEND_OP_CREATE, BACKEND_BAD_REQUEST, err,
				      "invalid sandbox id (RFC-1123 label)");
	if (req->pool && req->image)
		return backend_refuse(b, BACKEND_OP_CREATE, BACKEND_BAD_REQUEST, err,
				      "exactly one of pool and image");
	if (!req->pool && !req->image && !req->spec_json)
		return backend_refuse(b, BACKEND_OP_CREATE, BACKEND_BAD_REQUEST, err,
				      "exactly one of pool and image (or a spec "
				      "giving one)");
	if (req->image && (req->port < 1 || req->port > 65535))
		return backend_refuse(b, BACKEND_OP_CREATE, BACKEND_BAD_REQUEST, err,
				      "an image needs a port in 1-65535");
	if (req->idle_timeout_s < 0)
		return backend_refuse(b, BACKEND_OP_CREATE, BACKEND_BAD_REQUEST, err,
				      "negative idle timeout");
	if (req->send_timeout && (req->timeout_s < 0 || req->timeout_s > 3600))
		return backend_refuse(b, BACKEND_OP_CREATE, BACKEND_BAD_REQUEST, err,
				      "request timeout outside 0-3600 seconds");
	st = backend_json_create_request(req, &body);
	if (st != BACKEND_OK)
		return backend_refuse(b, BACKEND_OP_CREATE, st, err,
				      st == BACKEND_BAD_REQUEST
					  ? "the create spec is not a JSON object"
					  : "out of memory");
	req_init(&r, b, BACKEND_OP_CREATE, "POST", o, "/v1/sandbox");
	r.body = body;
	r.body_len = strlen(body);
	r.once = true;
	st = backend_gateway_timeout(&r, backend_http(b, &r, err), err);
	free(body);
	if (st == BACKEND_OK)
		st = decode_sandbox(b, o, &r, out, true, err);
	free(r.answer);
	return st;
}

enum backend_status backend_orch_get(struct backend *b,
				     const struct backend_orchestrator *o, const char *id,
				     struct backend_sandbox *out,
				     struct backend_error *err)
{
	struct backend_req r;
	enum backend_status st;
	char path[96];

	memset(out, 0, sizeof(*out));
	if (!backend_sandbox_id_valid(id))
		return backend_refuse(b, BACKEND_OP_SANDBOX, BACKEND_BAD_REQUEST, err,
				      "invalid sandbox id (RFC-1123 label)");
	/* A valid id needs no encoding. */
	snprintf(path, sizeof(path), "/v1/sandbox/%s", id);
	req_init(&r, b, BACKEND_OP_SANDBOX, "GET", o, path);
	st = backend_http(b, &r, err);
	if (st == BACKEND_OK) {
		st = decode_sandbox(b, o, &r, out, false, err);
		/* The orchestrator must answer about the id asked. */
		if (st == BACKEND_OK && strcmp(out->id, id) != 0) {
			backend_sandbox_clear(out);
			backend_count_error(b);
			st = BACKEND_BAD_ANSWER;
			backend_set_error(err, st, (int)r.http_status,
					  "status is about another sandbox");
		}
	}
	free(r.answer);
	return st;
}

enum backend_status backend_orch_list(struct backend *b,
				      const struct backend_orchestrator *o,
				      struct backend_sandbox_list *out,
				      struct backend_error *err)
{
	struct backend_req r;
	enum backend_status st;

	memset(out, 0, sizeof(*out));
	req_init(&r, b, BACKEND_OP_SANDBOX, "GET", o, "/v1/sandbox");
	r.max_answer = b->cfg.max_listing_bytes;
	st = backend_http(b, &r, err);
	if (st == BACKEND_OK) {
		st = backend_json_sandbox_list(r.answer, r.answer_len, out);
		for (size_t i = 0; st == BACKEND_OK && i < out->count;) {
			if (url_from_here(o, out->items[i].url)) {
				i++;
				continue;
			}
			backend_sandbox_clear(&out->items[i]);
			out->items[i] = out->items[--out->count];
			out->dropped++;
		}
		if (st == BACKEND_OK) {
			backend_set_error(err, BACKEND_OK, (int)r.http_status, "ok");
		} else {
			backend_count_error(b);
			backend_set_error(err, st, (int)r.http_status, "%s",
					  st == BACKEND_LOCAL
					      ? "out of memory"
					      : "sandbox list does not parse");
		}
	}
	free(r.answer);
	return st;
}

enum backend_status backend_orch_delete(struct backend *b,
					const struct backend_orchestrator *o,
					const char *id, struct backend_error *err)
{
	struct backend_req r;
	enum backend_status st;
	char path[96];

	if (!backend_sandbox_id_valid(id))
		return backend_refuse(b, BACKEND_OP_SANDBOX, BACKEND_BAD_REQUEST, err,
				      "invalid sandbox id (RFC-1123 label)");
	snprintf(path, sizeof(path), "/v1/sandbox/%s", id);
	req_init(&r, b, BACKEND_OP_SANDBOX, "DELETE", o, path);
	st = backend_http(b, &r, err);
	if (st == BACKEND_OK)
		backend_set_error(err, BACKEND_OK, (int)r.http_status, "ok");
	free(r.answer);
	return st;
}

enum backend_status backend_orch_pools(struct backend *b,
				       const struct backend_orchestrator *o,
				       const char *id, struct backend_pool_list *out,
				       struct backend_error *err)
{
	struct backend_req r;
	enum backend_status st;
	char *enc = NULL, *path = NULL;

	memset(out, 0, sizeof(*out));
	if (id && !backend_pool_id_valid(id))
		return backend_refuse(b, BACKEND_OP_SANDBOX, BACKEND_BAD_REQUEST, err,
				      "invalid pool id");
	if (id && (!(enc = backend_percent_encode(id)) ||
		   asprintf(&path, "/v1/sandbox-pool/%s", enc) < 0)) {
		free(enc);
		return backend_refuse(b, BACKEND_OP_SANDBOX, BACKEND_LOCAL, err,
				      "out of memory");
	}
	free(enc);
	req_init(&r, b, BACKEND_OP_SANDBOX, "GET", o, id ? path : "/v1/sandbox-pool");
	if (!id)
		r.max_answer = b->cfg.max_listing_bytes;
	st = backend_http(b, &r, err);
	free(path);
	if (st == BACKEND_OK) {
		st = id ? backend_json_pool(r.answer, r.answer_len, out)
			: backend_json_pool_list(r.answer, r.answer_len, out);
		/* The orchestrator must answer about the pool asked. */
		if (st == BACKEND_OK && id && strcmp(out->items[0].id, id) != 0) {
			backend_pool_list_clear(out);
			st = BACKEND_BAD_ANSWER;
		}
		if (st == BACKEND_OK) {
			backend_set_error(err, BACKEND_OK, (int)r.http_status, "ok");
		} else {
			backend_count_error(b);
			backend_set_error(err, st, (int)r.http_status, "%s",
					  st == BACKEND_LOCAL ? "out of memory"
					  : id ? "pool does not parse (missing id, wrong "
						 "types), or is about another pool"
					       : "pool list does not parse");
		}
	}
	free(r.answer);
	return st;
}
