/*
 * putstream.c — a PUT whose body is not all there when it starts: sent
 * with chunked transfer encoding as its source produces it.
 *
 * The contract's PUT replaces the whole file, so success must mean the
 * server took the whole body: a 2xx answer counts only when it came after
 * the source said the body ended. A server that reads no chunked body can
 * answer at once (it took an empty or partial body) while the rest is still
 * being sent; that answer is caught in the header callback and fails the
 * call, and the caller is told the server refuses chunked bodies.
 */
#include <stdlib.h>
#include <string.h>

#include "backend_i.h"

struct stream {
	const struct backend_put_source *src;
	bool ended;	   /* the source returned 0: the body is complete */
	bool abandoned;	   /* the source returned -1, or alive said stop */
	bool early;	   /* a final answer came before the end of the body */
	long early_status; /* its status */
};

static size_t stream_read(char *buf, size_t size, size_t nmemb, void *userp)
{
	struct stream *s = userp;
	long n = s->src->read(s->src->ctx, buf, size * nmemb);

	if (n < 0) {
		s->abandoned = true;
		return CURL_READFUNC_ABORT;
	}
	if (n == 0)
		s->ended = true;
	return (size_t)n;
}

/* Status lines only: "HTTP/1.1 204 No Content". A 1xx is not an answer. */
static size_t stream_header(char *buf, size_t size, size_t nmemb, void *userp)
{
	struct stream *s = userp;
	size_t n = size * nmemb;
	long code = 0;

	if (n > 9 && memcmp(buf, "HTTP/", 5) == 0) {
		const char *sp = memchr(buf, ' ', n);

		for (size_t i = sp ? (size_t)(sp - buf) + 1 : n; i < n && i < 32; i++) {
			if (buf[i] < '0' || buf[i] > '9')
				break;
			code = code * 10 + (buf[i] - '0');
		}
		if (code >= 200 && !s->ended && !s->early) {
			s->early = true;
			s->early_status = code;
		}
	}
	return n;
}

static bool stream_alive(void *ctx, uint64_t written)
{
	struct stream *s = ctx;

	(void)written;
	if (s->src->alive && !s->src->alive(s->src->ctx)) {
		s->abandoned = true;
		return false;
	}
	return true;
}

static CURLcode stream_tune(CURL *c, void *ctx)
{
	CURLcode rc = curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)-1);

	if (rc == CURLE_OK)
		rc = curl_easy_setopt(c, CURLOPT_READFUNCTION, stream_read);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(c, CURLOPT_READDATA, ctx);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, stream_header);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(c, CURLOPT_HEADERDATA, ctx);
	/* Bigger pieces: fewer chunk headers and wake-ups per MiB. */
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 512L * 1024);
	return rc;
}

enum backend_status backend_file_put_stream(struct backend *b, const char *url,
					    const char *path,
					    const struct backend_put_source *src,
					    bool *refused, struct backend_error *err)
{
	struct stream s = {.src = src};
	struct backend_req r;
	enum backend_status st;
	bool invalid;
	char *p;

	if (refused)
		*refused = false;
	if (!src || !src->read)
		return backend_refuse(b, BACKEND_OP_FILE, BACKEND_BAD_REQUEST, err,
				      "no body source");
	if (!*path)
		return backend_refuse(b, BACKEND_OP_FILE, BACKEND_BAD_REQUEST, err,
				      "cannot PUT the workspace root");
	p = backend_files_path(path, &invalid);
	if (!p)
		return backend_refuse(b, BACKEND_OP_FILE,
				      invalid ? BACKEND_BAD_REQUEST : BACKEND_LOCAL, err,
				      invalid ? "invalid path" : "out of memory");
	backend_req_init(&r, BACKEND_OP_FILE, "PUT", url, p);
	r.max_answer = b->cfg.max_json_bytes;
	r.stall = true;
	r.tune = stream_tune;
	r.tune_ctx = &s;
	/* Asked once a second from the transfer loop (xferinfo). */
	r.get_progress = stream_alive;
	r.get_progress_ctx = &s;
	st = backend_http(b, &r, err);
	free(r.answer);
	free(p);

	if (s.early) {
		/* Whatever the answer says, the server did not have the whole
		 * body when it gave it. */
		if (st == BACKEND_OK)
			backend_count_error(b);
		long c = s.early_status;
		if (refused)
			*refused = (c >= 200 && c < 300) || c == 400 || c == 411 ||
				   c == 501 || c == 505;
		backend_set_error(err, BACKEND_BAD_ANSWER, (int)s.early_status,
				  "the server answered %ld before the end of a chunked "
				  "body",
				  s.early_status);
		return BACKEND_BAD_ANSWER;
	}
	if (st == BACKEND_OK && !s.ended) {
		backend_count_error(b);
		backend_set_error(err, BACKEND_BAD_ANSWER, (int)r.http_status,
				  "answered before the end of the body");
		return BACKEND_BAD_ANSWER;
	}
	if (st != BACKEND_OK && s.abandoned) {
		backend_set_error(err, BACKEND_LOCAL, (int)r.http_status,
				  "streamed upload abandoned");
		return BACKEND_LOCAL;
	}
	if (refused &&
	    (r.http_status == 411 || r.http_status == 501 || r.http_status == 505))
		*refused = true;
	if (st == BACKEND_OK)
		backend_set_error(err, BACKEND_OK, (int)r.http_status, "ok");
	return st;
}
