/*
 * contract.c — the sandbox contract: /execute, /files, /healthz.
 */
#include <stdlib.h>
#include <string.h>

#include "backend_i.h"
#include "backend_json_i.h"

/* Sets up a request on /files/PATH with the bounds of a file transfer
 * (error answers only kept, stall limit); the caller adds its own. *p is
 * the encoded path, the caller's to free. BACKEND_OK, or the refusal. */
static enum backend_status files_req(struct backend *b, struct backend_req *r,
				     const char *method, const char *url,
				     const char *path, char **p,
				     struct backend_error *err)
{
	bool invalid;

	*p = backend_files_path(path, &invalid);
	if (!*p)
		return backend_refuse(b, BACKEND_OP_FILE,
				      invalid ? BACKEND_BAD_REQUEST : BACKEND_LOCAL, err,
				      invalid ? "invalid path" : "out of memory");
	backend_req_init(r, BACKEND_OP_FILE, method, url, *p);
	r->max_answer = b->cfg.max_json_bytes;
	r->stall = true;
	return BACKEND_OK;
}

static void set_ok(struct backend_error *err)
{
	backend_set_error(err, BACKEND_OK, 200, "ok");
}

/* Sends a /files request whose answer says no more than its status, and
 * frees p, the encoded path files_req made. */
static enum backend_status files_send(struct backend *b, struct backend_req *r, char *p,
				      struct backend_error *err)
{
	enum backend_status st = backend_http(b, r, err);
	if (st == BACKEND_OK)
		set_ok(err);
	free(r->answer);
	free(p);
	return st;
}

enum backend_status backend_execute(struct backend *b, const char *url,
				    const char *command, long timeout_s,
				    struct backend_exec_result *out,
				    struct backend_error *err)
{
	struct backend_req r;
	enum backend_status st;
	char *body;

	memset(out, 0, sizeof(*out));
	if (!command || timeout_s < 0)
		return backend_refuse(b, BACKEND_OP_EXECUTE, BACKEND_BAD_REQUEST, err,
				      "no command or negative timeout");
	body = backend_json_exec_request(command, timeout_s);
	if (!body)
		return backend_refuse(b, BACKEND_OP_EXECUTE, BACKEND_LOCAL, err,
				      "out of memory");
	backend_req_init(&r, BACKEND_OP_EXECUTE, "POST", url, "/execute");
	r.body = body;
	r.body_len = strlen(body);
	r.max_answer = b->cfg.max_exec_bytes;
	r.once = true;
	/* The server says nothing while the command runs: no stall limit,
	 * only the command's own timeout plus the grace period. */
	/* Past ten years it is no limit rather than an overflow. */
	r.timeout_ms = timeout_s > 0 && timeout_s < 315360000L
			   ? timeout_s * 1000 + b->cfg.execute_grace_ms
			   : 0;
	st = backend_gateway_timeout(&r, backend_http(b, &r, err), err);
	free(body);
	if (st == BACKEND_OK) {
		st = backend_json_exec(r.answer, r.answer_len, out);
		if (st != BACKEND_OK) {
			backend_set_error(err, st, (int)r.http_status,
					  st == BACKEND_LOCAL
					      ? "out of memory"
					      : "execute answer does not parse; "
						"the outcome is unknown");
			backend_count_error(b);
		} else {
			set_ok(err);
		}
	}
	free(r.answer);
	return st;
}

uint64_t backend_download_bound(uint64_t expect)
{
	uint64_t slack = expect / 8 > 64 * 1024 ? expect / 8 : 64 * 1024;

	if (expect == BACKEND_SIZE_UNKNOWN || expect > UINT64_MAX - slack)
		return UINT64_MAX;
	return expect + slack;
}

long backend_download_deadline_ms(const struct backend *b, uint64_t bound)
{
	uint64_t rate = b->cfg.min_rate_bytes > 0 ? (uint64_t)b->cfg.min_rate_bytes : 1;
	uint64_t ms;

	if (bound == 0)
		return 0;
	/* Past ten years it is no deadline rather than an overflow. */
	if (bound / rate > 315360000u)
		return 0;
	ms = bound / rate * 1000 + bound % rate * 1000 / rate;
	return (long)ms + b->cfg.request_timeout_ms;
}

enum backend_status backend_file_get(struct backend *b, const char *url, const char *path,
				     int fd, uint64_t *size_out,
				     struct backend_error *err)
{
	return backend_file_get_progress(b, url, path, fd, BACKEND_SIZE_UNKNOWN, NULL,
					 NULL, size_out, err);
}

enum backend_status backend_file_get_progress(struct backend *b, const char *url,
					      const char *path, int fd, uint64_t expect,
					      backend_progress_fn progress, void *ctx,
					      uint64_t *size_out,
					      struct backend_error *err)
{
	struct backend_req r;
	enum backend_status st;
	char *p;

	if (size_out)
		*size_out = 0;
	if (fd < 0)
		return backend_refuse(b, BACKEND_OP_FILE, BACKEND_BAD_REQUEST, err,
				      "bad descriptor");
	st = files_req(b, &r, "GET", url, path, &p, err);
	if (st != BACKEND_OK)
		return st;
	r.get_fd = fd; /* the body streams there, not into r.answer */
	r.get_progress = progress;
	r.get_progress_ctx = ctx;
	if (expect != BACKEND_SIZE_UNKNOWN) {
		/* A server that lists 1 byte and streams without end fills
		 * no disk; one that trickles holds no reader for ever. */
		r.max_fd_bytes = backend_download_bound(expect);
		r.fd_over = BACKEND_BAD_ANSWER;
	} else {
		r.max_fd_bytes = b->cfg.max_download_bytes;
		r.fd_over = BACKEND_TOO_LARGE;
	}
	r.timeout_ms = backend_download_deadline_ms(b, r.max_fd_bytes);
	st = files_send(b, &r, p, err);
	if (size_out)
		*size_out = r.fd_bytes;
	return st;
}

enum backend_status backend_file_put(struct backend *b, const char *url, const char *path,
				     int fd, uint64_t size, struct backend_error *err)
{
	struct backend_req r;
	enum backend_status st;
	char *p;

	if (fd < 0)
		return backend_refuse(b, BACKEND_OP_FILE, BACKEND_BAD_REQUEST, err,
				      "bad descriptor");
	if (!*path)
		return backend_refuse(b, BACKEND_OP_FILE, BACKEND_BAD_REQUEST, err,
				      "cannot PUT the workspace root");
	st = files_req(b, &r, "PUT", url, path, &p, err);
	if (st != BACKEND_OK)
		return st;
	r.put_fd = fd;
	r.put_size = size;
	return files_send(b, &r, p, err);
}

enum backend_status backend_file_delete(struct backend *b, const char *url,
					const char *path, struct backend_error *err)
{
	struct backend_req r;
	enum backend_status st;
	char *p;

	if (!*path)
		return backend_refuse(b, BACKEND_OP_FILE, BACKEND_BAD_REQUEST, err,
				      "cannot DELETE the workspace root");
	st = files_req(b, &r, "DELETE", url, path, &p, err);
	if (st != BACKEND_OK)
		return st;
	r.timeout_ms = b->cfg.request_timeout_ms;
	return files_send(b, &r, p, err);
}

enum backend_status backend_list(struct backend *b, const char *url, const char *path,
				 struct backend_listing *out, struct backend_error *err)
{
	struct backend_req r;
	enum backend_status st;
	char *p;

	memset(out, 0, sizeof(*out));
	st = files_req(b, &r, "GET", url, path, &p, err);
	if (st != BACKEND_OK)
		return st;
	r.max_answer = b->cfg.max_listing_bytes;
	r.timeout_ms = b->cfg.request_timeout_ms;
	st = backend_http(b, &r, err);
	if (st == BACKEND_OK) {
		st = backend_json_listing(r.answer, r.answer_len, out);
		if (st == BACKEND_OK) {
			backend_count_dropped(b, out->dropped);
			set_ok(err);
		} else {
			/* A file, not a directory, answers with its bytes. */
			backend_set_error(
			    err, st, (int)r.http_status,
			    st == BACKEND_LOCAL
				? "out of memory"
				: "listing does not parse (not a directory?)");
			backend_count_error(b);
		}
	}
	free(r.answer);
	free(p);
	return st;
}

enum backend_status backend_health(struct backend *b, const char *url,
				   struct backend_error *err)
{
	struct backend_req r;
	enum backend_status st;

	backend_req_init(&r, BACKEND_OP_HEALTH, "GET", url, "/healthz");
	r.max_answer = 64 * 1024;
	r.timeout_ms = b->cfg.request_timeout_ms;
	r.stall = true;
	st = backend_http(b, &r, err);
	if (st == BACKEND_OK) {
		if (backend_json_health(r.answer, r.answer_len)) {
			set_ok(err);
		} else {
			st = BACKEND_BAD_ANSWER;
			backend_set_error(err, st, (int)r.http_status,
					  "health answer is not {\"status\":\"ok\"}");
			backend_count_error(b);
		}
	}
	free(r.answer);
	return st;
}
