/*
 * record.c — records: names, ownership, equality, and the frame codec.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "journal_i.h"

static const char *const kind_names[JOURNAL_KIND_MAX] = {
    [JOURNAL_CREATE_INTENT] = "CREATE_INTENT",
    [JOURNAL_CREATED] = "CREATED",
    [JOURNAL_CREATE_FAILED] = "CREATE_FAILED",
    [JOURNAL_CREATE_UNKNOWN] = "CREATE_UNKNOWN",
    [JOURNAL_CREATE_RECONCILED] = "CREATE_RECONCILED",
    [JOURNAL_ATTACH] = "ATTACH",
    [JOURNAL_DETACH] = "DETACH",
    [JOURNAL_EXEC_INTENT] = "EXEC_INTENT",
    [JOURNAL_EXEC_RESULT] = "EXEC_RESULT",
    [JOURNAL_EXEC_UNKNOWN] = "EXEC_UNKNOWN",
    [JOURNAL_EXEC_NOT_RUN] = "EXEC_NOT_RUN",
    [JOURNAL_UPLOAD_INTENT] = "UPLOAD_INTENT",
    [JOURNAL_UPLOAD_DONE] = "UPLOAD_DONE",
    [JOURNAL_UPLOAD_ABANDONED] = "UPLOAD_ABANDONED",
    [JOURNAL_DELETE_INTENT] = "DELETE_INTENT",
    [JOURNAL_DELETED] = "DELETED",
    [JOURNAL_DELETE_UNCONFIRMED] = "DELETE_UNCONFIRMED",
    [JOURNAL_SET_TIMEOUT] = "SET_TIMEOUT",
    [JOURNAL_SNAPSHOT] = "SNAPSHOT",
    [JOURNAL_SET_ENV] = "SET_ENV",
    [JOURNAL_SET_CWD] = "SET_CWD",
    [JOURNAL_LINK_INTENT] = "LINK_INTENT",
    [JOURNAL_LINK_DONE] = "LINK_DONE",
    [JOURNAL_LINK_GONE] = "LINK_GONE",
    [JOURNAL_JOB_INTENT] = "JOB_INTENT",
    [JOURNAL_JOB_STARTED] = "JOB_STARTED",
    [JOURNAL_JOB_UNKNOWN] = "JOB_UNKNOWN",
    [JOURNAL_JOB_NOT_RUN] = "JOB_NOT_RUN",
    [JOURNAL_JOB_EXITED] = "JOB_EXITED",
    [JOURNAL_JOB_KILLED] = "JOB_KILLED",
};

const char *journal_kind_name(enum journal_kind kind)
{
	if ((int)kind <= 0 || kind >= JOURNAL_KIND_MAX || !kind_names[kind])
		return "UNKNOWN_KIND";
	return kind_names[kind];
}

static void output_clear(struct journal_output *o)
{
	free(o->data);
	free(o->file);
	memset(o, 0, sizeof(*o));
}

void journal_record_clear(struct journal_record *r)
{
	if (!r)
		return;
	free(r->sandbox);
	free(r->url);
	free(r->pool);
	free(r->image);
	free(r->command);
	output_clear(&r->out);
	output_clear(&r->err);
	free(r->path);
	free(r->cache_file);
	free(r->error);
	free(r->spec);
	free(r->env);
	free(r->target);
	memset(r, 0, sizeof(*r));
}

static int dup_str(char **dst, const char *src)
{
	*dst = NULL;
	if (!src)
		return 0;
	*dst = strdup(src);
	return *dst ? 0 : -ENOMEM;
}

int journal_output_copy(struct journal_output *dst, const struct journal_output *src)
{
	*dst = *src;
	dst->data = NULL;
	dst->file = NULL;
	if (src->data) {
		dst->data = malloc(src->len + 1);
		if (!dst->data)
			return -ENOMEM;
		memcpy(dst->data, src->data, src->len);
		dst->data[src->len] = '\0';
	}
	return dup_str(&dst->file, src->file);
}

int journal_record_copy(struct journal_record *dst, const struct journal_record *src)
{
	*dst = *src;
	dst->sandbox = dst->url = dst->pool = dst->image = dst->command = NULL;
	dst->path = dst->cache_file = dst->error = NULL;
	dst->spec = dst->env = dst->target = NULL;
	dst->out.data = dst->out.file = dst->err.data = dst->err.file = NULL;
	if (dup_str(&dst->sandbox, src->sandbox) || dup_str(&dst->url, src->url) ||
	    dup_str(&dst->pool, src->pool) || dup_str(&dst->image, src->image) ||
	    dup_str(&dst->command, src->command) ||
	    journal_output_copy(&dst->out, &src->out) ||
	    journal_output_copy(&dst->err, &src->err) || dup_str(&dst->path, src->path) ||
	    dup_str(&dst->cache_file, src->cache_file) ||
	    dup_str(&dst->error, src->error) || dup_str(&dst->spec, src->spec) ||
	    dup_str(&dst->env, src->env) || dup_str(&dst->target, src->target)) {
		journal_record_clear(dst);
		return -ENOMEM;
	}
	return 0;
}

bool journal_str_equal(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

bool journal_output_equal(const struct journal_output *a, const struct journal_output *b)
{
	if (a->len != b->len || a->crc32 != b->crc32 ||
	    !journal_str_equal(a->file, b->file))
		return false;
	if (!a->data || !b->data)
		return a->data == b->data;
	return memcmp(a->data, b->data, a->len) == 0;
}

bool journal_record_equal(const struct journal_record *a, const struct journal_record *b)
{
	return a->kind == b->kind && a->time_ms == b->time_ms &&
	       journal_str_equal(a->sandbox, b->sandbox) &&
	       journal_str_equal(a->url, b->url) && journal_str_equal(a->pool, b->pool) &&
	       journal_str_equal(a->image, b->image) && a->port == b->port &&
	       a->idle_s == b->idle_s && a->seq == b->seq &&
	       journal_str_equal(a->command, b->command) &&
	       a->timeout_s == b->timeout_s && a->exit_code == b->exit_code &&
	       a->duration_ms == b->duration_ms && a->truncated == b->truncated &&
	       a->internal == b->internal && journal_output_equal(&a->out, &b->out) &&
	       journal_output_equal(&a->err, &b->err) && a->upload_id == b->upload_id &&
	       journal_str_equal(a->path, b->path) &&
	       journal_str_equal(a->cache_file, b->cache_file) && a->size == b->size &&
	       a->checksum == b->checksum && journal_str_equal(a->error, b->error) &&
	       a->sb_state == b->sb_state && a->owned == b->owned &&
	       a->commands_run == b->commands_run && a->foreign == b->foreign &&
	       journal_str_equal(a->spec, b->spec) && a->bound_s == b->bound_s &&
	       journal_str_equal(a->env, b->env) && journal_str_equal(a->target, b->target) &&
	       a->job == b->job && a->pid == b->pid;
}

/* --- payload fields -------------------------------------------------------*/

enum tag {
	T_KIND = 1,
	T_TIME,
	T_SANDBOX,
	T_URL,
	T_POOL,
	T_IMAGE,
	T_PORT,
	T_IDLE,
	T_SEQ,
	T_COMMAND,
	T_TIMEOUT,
	T_EXIT,
	T_DURATION,
	T_TRUNCATED,
	T_OUT_DATA,
	T_OUT_LEN,
	T_OUT_FILE,
	T_OUT_CRC,
	T_ERR_DATA,
	T_ERR_LEN,
	T_ERR_FILE,
	T_ERR_CRC,
	T_UPLOAD_ID,
	T_PATH,
	T_CACHE_FILE,
	T_SIZE,
	T_CHECKSUM,
	T_ERROR,
	T_SB_STATE,
	T_OWNED,
	T_COMMANDS_RUN,
	T_INTERNAL,
	T_FOREIGN,
	T_SPEC,
	T_BOUND,
	T_ENV,
	T_TARGET,
	T_JOB,
	T_PID,
};

struct wbuf {
	uint8_t *p;
	size_t len, cap;
	int err;
};

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void w_raw(struct wbuf *w, const void *data, size_t n)
{
	if (w->err)
		return;
	if (w->len + n > w->cap) {
		size_t cap = w->cap ? w->cap : 256;
		while (cap < w->len + n)
			cap *= 2;
		uint8_t *p = realloc(w->p, cap);
		if (!p) {
			w->err = -ENOMEM;
			return;
		}
		w->p = p;
		w->cap = cap;
	}
	if (n)
		memcpy(w->p + w->len, data, n);
	w->len += n;
}

static void w_field(struct wbuf *w, enum tag t, const void *data, size_t n)
{
	uint8_t h[5];
	if (n > JOURNAL_MAX_PAYLOAD) {
		w->err = -EFBIG;
		return;
	}
	h[0] = (uint8_t)t;
	put_le(h + 1, n, 4);
	w_raw(w, h, 5);
	w_raw(w, data, n);
}

static void w_u64(struct wbuf *w, enum tag t, uint64_t v)
{
	uint8_t b[8];
	if (!v)
		return;
	put_le(b, v, 8);
	w_field(w, t, b, 8);
}

static void w_i64(struct wbuf *w, enum tag t, int64_t v)
{
	w_u64(w, t, (uint64_t)v);
}

static void w_str(struct wbuf *w, enum tag t, const char *s)
{
	if (s)
		w_field(w, t, s, strlen(s));
}

static void w_output(struct wbuf *w, const struct journal_output *o, enum tag data)
{
	/* Tags follow the order DATA, LEN, FILE, CRC. */
	if (o->data)
		w_field(w, data, o->data, o->len);
	else
		w_u64(w, data + 1, o->len);
	w_str(w, data + 2, o->file);
	w_u64(w, data + 3, o->crc32);
}

int journal_encode(const struct journal_record *r, uint8_t **buf, size_t *len)
{
	struct wbuf w = {0};
	uint8_t hdr[JOURNAL_HEADER_SIZE] = {0};

	*buf = NULL;
	*len = 0;
	if ((int)r->kind <= 0 || r->kind >= JOURNAL_KIND_MAX)
		return -EINVAL;
	w_raw(&w, hdr, sizeof(hdr));
	w_u64(&w, T_KIND, (uint64_t)r->kind);
	w_u64(&w, T_TIME, r->time_ms);
	w_str(&w, T_SANDBOX, r->sandbox);
	w_str(&w, T_URL, r->url);
	w_str(&w, T_POOL, r->pool);
	w_str(&w, T_IMAGE, r->image);
	w_i64(&w, T_PORT, r->port);
	w_i64(&w, T_IDLE, r->idle_s);
	w_u64(&w, T_SEQ, r->seq);
	w_str(&w, T_COMMAND, r->command);
	w_i64(&w, T_TIMEOUT, r->timeout_s);
	w_i64(&w, T_EXIT, r->exit_code);
	w_i64(&w, T_DURATION, r->duration_ms);
	w_u64(&w, T_TRUNCATED, r->truncated);
	w_output(&w, &r->out, T_OUT_DATA);
	w_output(&w, &r->err, T_ERR_DATA);
	w_u64(&w, T_UPLOAD_ID, r->upload_id);
	w_str(&w, T_PATH, r->path);
	w_str(&w, T_CACHE_FILE, r->cache_file);
	w_u64(&w, T_SIZE, r->size);
	w_u64(&w, T_CHECKSUM, r->checksum);
	w_str(&w, T_ERROR, r->error);
	w_i64(&w, T_SB_STATE, r->sb_state);
	w_u64(&w, T_OWNED, r->owned);
	w_u64(&w, T_COMMANDS_RUN, r->commands_run);
	w_u64(&w, T_INTERNAL, r->internal);
	w_u64(&w, T_FOREIGN, r->foreign);
	w_str(&w, T_SPEC, r->spec);
	w_i64(&w, T_BOUND, r->bound_s);
	w_str(&w, T_ENV, r->env);
	w_str(&w, T_TARGET, r->target);
	w_u64(&w, T_JOB, r->job);
	w_i64(&w, T_PID, r->pid);
	if (!w.err && w.len - JOURNAL_HEADER_SIZE > JOURNAL_MAX_PAYLOAD)
		w.err = -EFBIG;
	if (w.err) {
		free(w.p);
		return w.err;
	}

	memcpy(w.p, JOURNAL_MAGIC, 4);
	put_le(w.p + 4, JOURNAL_VERSION, 2);
	put_le(w.p + 6, 0, 2);
	put_le(w.p + 8, w.len - JOURNAL_HEADER_SIZE, 4);
	put_le(w.p + 12, crc32(0, w.p, 12), 4);
	uLong crc = crc32(0, w.p, 16);
	crc = crc32(crc, w.p + JOURNAL_HEADER_SIZE, (uInt)(w.len - JOURNAL_HEADER_SIZE));
	put_le(w.p + 16, crc, 4);
	*buf = w.p;
	*len = w.len;
	return 0;
}

/* --- decoding -------------------------------------------------------------*/

static int set_str(char **dst, const uint8_t *v, size_t n, const char **why)
{
	if (memchr(v, '\0', n)) {
		*why = "NUL inside a string field";
		return -1;
	}
	char *s = malloc(n + 1);
	if (!s) {
		*why = "out of memory";
		return -1;
	}
	memcpy(s, v, n);
	s[n] = '\0';
	free(*dst);
	*dst = s;
	return 0;
}

static int set_bytes(struct journal_output *o, const uint8_t *v, size_t n,
		     const char **why)
{
	char *s = malloc(n + 1);
	if (!s) {
		*why = "out of memory";
		return -1;
	}
	memcpy(s, v, n);
	s[n] = '\0';
	free(o->data);
	o->data = s;
	o->len = n;
	return 0;
}

static int get_int(const uint8_t *v, size_t n, int64_t min, int64_t max, int64_t *out,
		   const char **why)
{
	if (n != 8) {
		*why = "bad integer field length";
		return -1;
	}
	int64_t x = (int64_t)get_le(v, 8);
	if (x < min || x > max) {
		*why = "integer field out of range";
		return -1;
	}
	*out = x;
	return 0;
}

static int get_u64(const uint8_t *v, size_t n, uint64_t *out, const char **why)
{
	if (n != 8) {
		*why = "bad integer field length";
		return -1;
	}
	*out = get_le(v, 8);
	return 0;
}

static int get_u32(const uint8_t *v, size_t n, uint32_t *out, const char **why)
{
	int64_t x;
	if (get_int(v, n, 0, UINT32_MAX, &x, why))
		return -1;
	*out = (uint32_t)x;
	return 0;
}

static int get_bool(const uint8_t *v, size_t n, bool *out, const char **why)
{
	int64_t x;
	if (get_int(v, n, 0, 1, &x, why))
		return -1;
	*out = x != 0;
	return 0;
}

static int decode_field(struct journal_record *r, unsigned tag, const uint8_t *v,
			size_t n, uint64_t lens[2], const char **why)
{
	int64_t x = 0;
	int rc = 0;

	switch (tag) {
	case T_KIND:
		rc = get_int(v, n, 1, JOURNAL_KIND_MAX - 1, &x, why);
		r->kind = (enum journal_kind)x;
		return rc;
	case T_TIME:
		return get_u64(v, n, &r->time_ms, why);
	case T_SANDBOX:
		return set_str(&r->sandbox, v, n, why);
	case T_URL:
		return set_str(&r->url, v, n, why);
	case T_POOL:
		return set_str(&r->pool, v, n, why);
	case T_IMAGE:
		return set_str(&r->image, v, n, why);
	case T_PORT:
		rc = get_int(v, n, INT32_MIN, INT32_MAX, &x, why);
		r->port = (int)x;
		return rc;
	case T_IDLE:
		rc = get_int(v, n, INT64_MIN, INT64_MAX, &x, why);
		r->idle_s = (long)x;
		return rc;
	case T_SEQ:
		return get_u64(v, n, &r->seq, why);
	case T_COMMAND:
		return set_str(&r->command, v, n, why);
	case T_TIMEOUT:
		rc = get_int(v, n, INT64_MIN, INT64_MAX, &x, why);
		r->timeout_s = (long)x;
		return rc;
	case T_EXIT:
		rc = get_int(v, n, INT32_MIN, INT32_MAX, &x, why);
		r->exit_code = (int)x;
		return rc;
	case T_DURATION:
		rc = get_int(v, n, INT64_MIN, INT64_MAX, &x, why);
		r->duration_ms = (long)x;
		return rc;
	case T_TRUNCATED:
		return get_bool(v, n, &r->truncated, why);
	case T_OUT_DATA:
		return set_bytes(&r->out, v, n, why);
	case T_OUT_LEN:
		return get_u64(v, n, &lens[0], why);
	case T_OUT_FILE:
		return set_str(&r->out.file, v, n, why);
	case T_OUT_CRC:
		return get_u32(v, n, &r->out.crc32, why);
	case T_ERR_DATA:
		return set_bytes(&r->err, v, n, why);
	case T_ERR_LEN:
		return get_u64(v, n, &lens[1], why);
	case T_ERR_FILE:
		return set_str(&r->err.file, v, n, why);
	case T_ERR_CRC:
		return get_u32(v, n, &r->err.crc32, why);
	case T_UPLOAD_ID:
		return get_u64(v, n, &r->upload_id, why);
	case T_PATH:
		return set_str(&r->path, v, n, why);
	case T_CACHE_FILE:
		return set_str(&r->cache_file, v, n, why);
	case T_SIZE:
		return get_u64(v, n, &r->size, why);
	case T_CHECKSUM:
		return get_u32(v, n, &r->checksum, why);
	case T_ERROR:
		return set_str(&r->error, v, n, why);
	case T_SB_STATE:
		rc = get_int(v, n, JOURNAL_SB_CREATING, JOURNAL_SB_DETACHED, &x, why);
		r->sb_state = (int)x;
		return rc;
	case T_OWNED:
		return get_bool(v, n, &r->owned, why);
	case T_COMMANDS_RUN:
		return get_u64(v, n, &r->commands_run, why);
	case T_INTERNAL:
		return get_bool(v, n, &r->internal, why);
	case T_FOREIGN:
		return get_bool(v, n, &r->foreign, why);
	case T_SPEC:
		return set_str(&r->spec, v, n, why);
	case T_ENV:
		return set_str(&r->env, v, n, why);
	case T_TARGET:
		return set_str(&r->target, v, n, why);
	case T_BOUND:
		rc = get_int(v, n, INT32_MIN, INT32_MAX, &x, why);
		r->bound_s = (long)x;
		return rc;
	case T_JOB:
		return get_u64(v, n, &r->job, why);
	case T_PID:
		rc = get_int(v, n, INT32_MIN, INT32_MAX, &x, why);
		r->pid = (long)x;
		return rc;
	default:
		return 0; /* a field from a later writer: skipped */
	}
}

enum journal_decode_result journal_decode_payload(const uint8_t *p, size_t len,
						  struct journal_record *r,
						  const char **why)
{
	uint64_t lens[2] = {0, 0};
	size_t i = 0;

	memset(r, 0, sizeof(*r));
	*why = NULL;
	while (i < len) {
		if (len - i < 5) {
			*why = "truncated field";
			goto bad;
		}
		unsigned tag = p[i];
		size_t n = (size_t)get_le(p + i + 1, 4);
		i += 5;
		if (n > len - i) {
			*why = "field runs past the record";
			goto bad;
		}
		if (decode_field(r, tag, p + i, n, lens, why))
			goto bad;
		i += n;
	}
	if (!r->kind) {
		*why = "record without a kind";
		goto bad;
	}
	/* An inline output's length is its data's; a separate length is for
	 * outputs kept in files. */
	struct journal_output *o[2] = {&r->out, &r->err};
	for (int k = 0; k < 2; k++) {
		if (o[k]->data && lens[k] && lens[k] != o[k]->len) {
			*why = "output length disagrees with its data";
			goto bad;
		}
		if (!o[k]->data)
			o[k]->len = (size_t)lens[k];
	}
	return JOURNAL_DECODE_OK;
bad:
	journal_record_clear(r);
	return JOURNAL_DECODE_CORRUPT;
}

enum journal_decode_result journal_decode_why(const uint8_t *buf, size_t len,
					      struct journal_record *r, size_t *used,
					      const char **why)
{
	memset(r, 0, sizeof(*r));
	*used = 0;
	*why = NULL;
	if (len == 0)
		return JOURNAL_DECODE_SHORT;
	/* A prefix of the magic is a torn header; anything else is not ours. */
	if (memcmp(buf, JOURNAL_MAGIC, len < 4 ? len : 4) != 0) {
		*why = "bad magic";
		return JOURNAL_DECODE_CORRUPT;
	}
	if (len < 16)
		return JOURNAL_DECODE_SHORT;
	if (get_le(buf + 12, 4) != crc32(0, buf, 12)) {
		*why = "bad header checksum";
		return JOURNAL_DECODE_CORRUPT;
	}
	if (get_le(buf + 4, 2) != JOURNAL_VERSION) {
		*why = "unsupported format version";
		return JOURNAL_DECODE_CORRUPT;
	}
	if (get_le(buf + 6, 2) != 0) {
		*why = "unknown flags";
		return JOURNAL_DECODE_CORRUPT;
	}
	size_t plen = (size_t)get_le(buf + 8, 4);
	if (plen > JOURNAL_MAX_PAYLOAD) {
		*why = "record length out of bounds";
		return JOURNAL_DECODE_CORRUPT;
	}
	if (len < JOURNAL_HEADER_SIZE + plen)
		return JOURNAL_DECODE_SHORT;
	uLong crc = crc32(0, buf, 16);
	crc = crc32(crc, buf + JOURNAL_HEADER_SIZE, (uInt)plen);
	if (get_le(buf + 16, 4) != crc) {
		*why = "bad checksum";
		return JOURNAL_DECODE_CORRUPT;
	}
	enum journal_decode_result res =
	    journal_decode_payload(buf + JOURNAL_HEADER_SIZE, plen, r, why);
	if (res == JOURNAL_DECODE_OK)
		*used = JOURNAL_HEADER_SIZE + plen;
	return res;
}

enum journal_decode_result journal_decode(const uint8_t *buf, size_t len,
					  struct journal_record *r, size_t *used)
{
	const char *why;
	return journal_decode_why(buf, len, r, used, &why);
}
