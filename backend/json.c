/*
 * json.c — decoding the answers and encoding the requests (cJSON).
 *
 * Every answer is untrusted: types are checked before use, numbers must be
 * integers in range, and anything unexpected is refused rather than
 * guessed at.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend_i.h"
#include "backend_json_i.h"

/* 2^53: the largest range in which a double holds every integer. */
#define JSON_MAX_INT 9007199254740992.0

/* cJSON's parser writes a process-wide error position (for
 * cJSON_GetErrorPtr) on every call, so two threads parsing at once race on
 * it (Helgrind shows it). Parsing is serialised; walking the trees is not,
 * and no network call is ever made under this lock. */
static pthread_mutex_t parse_lock = PTHREAD_MUTEX_INITIALIZER;

/* The value of 4 hex digits at p (end bounds it), or -1. */
static long hex4(const char *p, const char *end)
{
	long v = 0;

	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

static bool is_high_surrogate(long v)
{
	return v >= 0xd800 && v <= 0xdbff;
}

static bool is_low_surrogate(long v)
{
	return v >= 0xdc00 && v <= 0xdfff;
}

/* At p, just past a "\uXXXX" holding a high surrogate: true when a
 * "\uXXXX" low surrogate follows, making a pair. */
static bool low_follows(const char *p, const char *end)
{
	return end - p >= 6 && p[0] == '\\' && p[1] == 'u' &&
	       is_low_surrogate(hex4(p + 2, end));
}

/* A lone surrogate escape ("\ud800" without its pair: what Python and
 * Node servers send for a file name or an output that is not UTF-8) is
 * valid JSON syntax but not Unicode, and cJSON refuses the whole document
 * for it: one such name would fail a whole listing. Returns a copy of buf
 * in which each one is "\u001a" (SUBSTITUTE, a control character, which no
 * name, id or URL may hold, so what held one is refused on its own), or
 * NULL when buf has none (or no memory: *oom). In valid JSON a backslash
 * only appears in a string and always starts an escape, so no tracking of
 * strings is needed; other input stays as invalid as it was. */
static char *mend_surrogates(const char *buf, size_t len, bool *oom)
{
	const char *end = buf + len, *p = buf;
	char *copy = NULL;

	*oom = false;
	while ((p = memchr(p, '\\', (size_t)(end - p)))) {
		long v;

		if (end - p < 2) {
			break;
		} else if (p[1] != 'u' || (v = hex4(p + 2, end)) < 0) {
			p += 2;
		} else if (is_high_surrogate(v) && low_follows(p + 6, end)) {
			p += 12;
		} else if (is_high_surrogate(v) || is_low_surrogate(v)) {
			if (!copy) {
				copy = malloc(len);
				if (!copy) {
					*oom = true;
					return NULL;
				}
				memcpy(copy, buf, len);
			}
			memcpy(copy + (p - buf), "\\u001a", 6);
			p += 6;
		} else {
			p += 6;
		}
	}
	return copy;
}

static cJSON *parse(const char *buf, size_t len)
{
	cJSON *root;
	char *mended;
	bool oom;

	if (!buf || len == 0)
		return NULL;
	mended = mend_surrogates(buf, len, &oom);
	if (oom)
		return NULL;
	pthread_mutex_lock(&parse_lock);
	root = cJSON_ParseWithLength(mended ? mended : buf, len);
	pthread_mutex_unlock(&parse_lock);
	free(mended);
	return root;
}

/* --- reading strings from the text itself --------------------------------
 * cJSON hands strings out as C strings, which end at the first NUL: an
 * output stream holding "\u0000" would lose everything after it. The
 * execute answer's streams are read from the text instead, once cJSON has
 * checked the document; these helpers follow cJSON where it is lenient
 * (raw bytes inside a string are kept as they are; a leading UTF-8 byte
 * order mark and any byte up to ' ' count as white space; the first of
 * duplicate members wins). */

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (unsigned char)*p <= ' ')
		p++;
	return p;
}

/* p at a '"': the byte past the closing quote, or NULL. */
static const char *skip_string(const char *p, const char *end)
{
	for (p++; p < end; p++) {
		if (*p == '"')
			return p + 1;
		if (*p == '\\')
			p++;
	}
	return NULL;
}

/* p at a value: the byte past it, or NULL. Nesting is counted, not
 * recursed into. */
static const char *skip_value(const char *p, const char *end)
{
	size_t depth = 0;

	do {
		if (p >= end)
			return NULL;
		if (*p == '"') {
			p = skip_string(p, end);
			if (!p)
				return NULL;
		} else if (*p == '{' || *p == '[') {
			depth++;
			p++;
		} else if (*p == '}' || *p == ']') {
			if (depth == 0)
				return NULL;
			depth--;
			p++;
		} else if (depth == 0) {
			/* A number or a literal: up to what ends it. */
			while (p < end && (unsigned char)*p > ' ' && *p != ',' &&
			       *p != '}' && *p != ']')
				p++;
			return p;
		} else {
			p++;
		}
	} while (depth > 0);
	return p;
}

/* Appends the UTF-8 form of code point v (up to 4 bytes) to out at *n. A lone surrogate
 * from U+DC80 to U+DCFF is the byte 0x80-0xFF it stands for (Python's surrogateescape,
 * how a Python server sends bytes that are not UTF-8); another keeps its 3-byte form. */
static void put_code(char *out, size_t *n, unsigned long v)
{
	unsigned char b[4];
	size_t k;

	if (v >= 0xdc80 && v <= 0xdcff) {
		b[0] = (unsigned char)(v - 0xdc00);
		k = 1;
	} else if (v < 0x80) {
		b[0] = (unsigned char)v;
		k = 1;
	} else if (v < 0x800) {
		b[0] = (unsigned char)(0xc0 | (v >> 6));
		b[1] = (unsigned char)(0x80 | (v & 0x3f));
		k = 2;
	} else if (v < 0x10000) {
		b[0] = (unsigned char)(0xe0 | (v >> 12));
		b[1] = (unsigned char)(0x80 | ((v >> 6) & 0x3f));
		b[2] = (unsigned char)(0x80 | (v & 0x3f));
		k = 3;
	} else {
		b[0] = (unsigned char)(0xf0 | (v >> 18));
		b[1] = (unsigned char)(0x80 | ((v >> 12) & 0x3f));
		b[2] = (unsigned char)(0x80 | ((v >> 6) & 0x3f));
		b[3] = (unsigned char)(0x80 | (v & 0x3f));
		k = 4;
	}
	memcpy(out + *n, b, k);
	*n += k;
}

/* Decodes the string at p (at its '"') into out, of which only the first
 * cap bytes are written (out NULL: only counts); returns its whole length
 * in bytes, or (size_t)-1 when it does not parse. The decoded length is
 * never more than the raw one. */
static size_t decode_string(const char *p, const char *end, char *out, size_t cap)
{
	char code[4];

	size_t n = 0;

	for (p++; p < end; p++) {
		long v;

		if (*p == '"')
			return n;
		if (*p != '\\') {
			if (out && n < cap)
				out[n] = *p;
			n++;
			continue;
		}
		if (++p >= end)
			return (size_t)-1;
		switch (*p) {
		case 'b':
			v = '\b';
			break;
		case 'f':
			v = '\f';
			break;
		case 'n':
			v = '\n';
			break;
		case 'r':
			v = '\r';
			break;
		case 't':
			v = '\t';
			break;
		case '"':
		case '\\':
		case '/':
			v = *p;
			break;
		case 'u':
			v = hex4(p + 1, end);
			if (v < 0)
				return (size_t)-1;
			p += 4;
			if (is_high_surrogate(v) && low_follows(p + 1, end)) {
				long lo = hex4(p + 3, end);

				v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
				p += 6;
			}
			{
				size_t k = 0;

				put_code(code, &k, (unsigned long)v);
				for (size_t i = 0; i < k; i++, n++)
					if (out && n < cap)
						out[n] = code[i];
			}
			continue;
		default:
			return (size_t)-1;
		}
		if (out && n < cap)
			out[n] = (char)v;
		n++;
	}
	return (size_t)-1;
}

/* The value of the first member named key of the object buf holds: a
 * pointer to its first byte, or NULL. Names compare as cJSON compares
 * them, as C strings (up to a NUL), so that this is the member cJSON
 * checked. */
static const char *member_raw(const char *buf, size_t len, const char *key)
{
	const char *end = buf + len, *p = buf;
	size_t kl = strlen(key);

	if (len >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0)
		p += 3;
	p = skip_ws(p, end);
	if (p >= end || *p != '{')
		return NULL;
	p = skip_ws(p + 1, end);
	while (p < end && *p == '"') {
		char name[32];
		size_t n = decode_string(p, end, name, sizeof(name));
		bool match;

		if (n == (size_t)-1)
			return NULL;
		if (n > kl)
			n = strnlen(name, kl + 1); /* kl < sizeof(name) */
		match = n == kl && memcmp(name, key, kl) == 0;
		p = skip_string(p, end);
		if (!p)
			return NULL;
		p = skip_ws(p, end);
		if (p >= end || *p != ':')
			return NULL;
		p = skip_ws(p + 1, end);
		if (match)
			return p < end ? p : NULL;
		p = skip_value(p, end);
		if (!p)
			return NULL;
		p = skip_ws(p, end);
		if (p >= end || *p != ',')
			return NULL;
		p = skip_ws(p + 1, end);
	}
	return NULL;
}

/* The string member key of the object buf holds, every byte of it, into a
 * malloc'd buffer (NUL-terminated past *out_len). BACKEND_BAD_ANSWER when
 * it is not there or not a string, BACKEND_LOCAL without memory. */
static enum backend_status member_bytes(const char *buf, size_t len, const char *key,
					char **out, size_t *out_len)
{
	const char *end = buf + len, *v = member_raw(buf, len, key);
	size_t n;

	*out = NULL;
	*out_len = 0;
	if (!v || *v != '"' || (n = decode_string(v, end, NULL, 0)) == (size_t)-1)
		return BACKEND_BAD_ANSWER;
	*out = malloc(n + 1);
	if (!*out)
		return BACKEND_LOCAL;
	decode_string(v, end, *out, n);
	(*out)[n] = '\0';
	*out_len = n;
	return BACKEND_OK;
}

cJSON *backend_json_parse(const char *buf, size_t len)
{
	return parse(buf, len);
}

/* Reads an integral number in [lo, hi]; false otherwise. */
static bool get_int(const cJSON *v, double lo, double hi, double *out)
{
	double d;

	if (!cJSON_IsNumber(v))
		return false;
	d = v->valuedouble;
	if (!isfinite(d) || d != floor(d) || d < lo || d > hi)
		return false;
	*out = d;
	return true;
}

bool backend_json_int(const cJSON *v, double lo, double hi, double *out)
{
	return get_int(v, lo, hi, out);
}

/* An optional string member: absent, null and "" give NULL; another type
 * is an error. */
static bool get_opt_string(const cJSON *obj, const char *name, char **out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

	*out = NULL;
	if (!v || cJSON_IsNull(v))
		return true;
	if (!cJSON_IsString(v) || !v->valuestring)
		return false;
	if (!*v->valuestring)
		return true;
	*out = strdup(v->valuestring);
	return *out != NULL;
}

enum backend_status backend_json_exec(const char *buf, size_t len,
				      struct backend_exec_result *out)
{
	cJSON *root = parse(buf, len);
	const cJSON *code, *so, *se, *dur, *tr;
	enum backend_status st;
	double d;

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsObject(root))
		goto bad;
	code = cJSON_GetObjectItemCaseSensitive(root, "exitCode");
	so = cJSON_GetObjectItemCaseSensitive(root, "stdout");
	se = cJSON_GetObjectItemCaseSensitive(root, "stderr");
	dur = cJSON_GetObjectItemCaseSensitive(root, "durationMillis");
	tr = cJSON_GetObjectItemCaseSensitive(root, "truncated");
	if (!get_int(code, -2147483648.0, 2147483647.0, &d))
		goto bad;
	out->exit_code = (int)d;
	if (!cJSON_IsString(so) || !cJSON_IsString(se))
		goto bad;
	if (dur) {
		if (!get_int(dur, 0, 1e15, &d))
			goto bad;
		out->duration_ms = (long)d;
	}
	if (tr) {
		if (!cJSON_IsBool(tr))
			goto bad;
		out->truncated = cJSON_IsTrue(tr);
	}
	cJSON_Delete(root);
	/* Every byte of the streams, NULs (\u0000) included: read from the
	 * text cJSON has just checked, not from its C strings. */
	st = member_bytes(buf, len, "stdout", &out->out, &out->out_len);
	if (st == BACKEND_OK)
		st = member_bytes(buf, len, "stderr", &out->err, &out->err_len);
	if (st != BACKEND_OK)
		backend_exec_result_clear(out);
	return st;
bad:
	cJSON_Delete(root);
	return BACKEND_BAD_ANSWER;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct backend_entry *x = a, *y = b;

	return strcmp(x->name, y->name);
}

enum backend_status backend_json_listing(const char *buf, size_t len,
					 struct backend_listing *out)
{
	cJSON *root = parse(buf, len);
	const cJSON *entries, *e;
	size_t n, k = 0, dropped = 0;

	memset(out, 0, sizeof(*out));
	entries = cJSON_GetObjectItemCaseSensitive(root, "entries");
	if (!cJSON_IsObject(root) || !cJSON_IsArray(entries)) {
		cJSON_Delete(root);
		return BACKEND_BAD_ANSWER;
	}
	n = (size_t)cJSON_GetArraySize(entries);
	out->entries = calloc(n ? n : 1, sizeof(*out->entries));
	if (!out->entries) {
		cJSON_Delete(root);
		return BACKEND_LOCAL;
	}
	cJSON_ArrayForEach(e, entries)
	{
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
		const cJSON *size = cJSON_GetObjectItemCaseSensitive(e, "size");
		const cJSON *dir = cJSON_GetObjectItemCaseSensitive(e, "isDir");
		double d;

		if (!cJSON_IsObject(e) || !cJSON_IsString(name) ||
		    !backend_name_valid(name->valuestring) ||
		    !get_int(size, 0, JSON_MAX_INT, &d) || !cJSON_IsBool(dir)) {
			dropped++;
			continue;
		}
		out->entries[k].name = strdup(name->valuestring);
		if (!out->entries[k].name) {
			out->count = k;
			backend_listing_clear(out);
			cJSON_Delete(root);
			return BACKEND_LOCAL;
		}
		out->entries[k].size = (uint64_t)d;
		out->entries[k].is_dir = cJSON_IsTrue(dir);
		k++;
	}
	cJSON_Delete(root);

	/* Sorted, so that a duplicate name (which no real directory has) is
	 * dropped rather than shown twice. */
	qsort(out->entries, k, sizeof(*out->entries), entry_cmp);
	n = 0;
	for (size_t i = 0; i < k; i++) {
		if (n > 0 &&
		    strcmp(out->entries[n - 1].name, out->entries[i].name) == 0) {
			free(out->entries[i].name);
			dropped++;
			continue;
		}
		out->entries[n++] = out->entries[i];
	}
	out->count = n;
	out->dropped = dropped;
	return BACKEND_OK;
}

bool backend_url_valid(const char *s)
{
	const char *host;
	size_t hostlen;

	if (!s)
		return false;
	if (strncasecmp(s, "http://", 7) == 0)
		host = s + 7;
	else if (strncasecmp(s, "https://", 8) == 0)
		host = s + 8;
	else
		return backend_unix_url_parse(s, NULL, NULL) == 0;
	hostlen = strcspn(host, "/?#");
	if (hostlen == 0 || host[0] == ':' || host[0] == '@')
		return false;
	/* Paths are appended to it: no query, no fragment. */
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p <= 0x20 || *p == 0x7f || *p == '#' || *p == '?')
			return false;
	return true;
}

static enum backend_sandbox_state parse_state(const char *s)
{
	if (strcmp(s, "creating") == 0)
		return BACKEND_SANDBOX_CREATING;
	if (strcmp(s, "ready") == 0)
		return BACKEND_SANDBOX_READY;
	if (strcmp(s, "failed") == 0)
		return BACKEND_SANDBOX_FAILED;
	if (strcmp(s, "deleting") == 0)
		return BACKEND_SANDBOX_DELETING;
	return BACKEND_SANDBOX_UNKNOWN_STATE;
}

/* Decodes one status object; BACKEND_BAD_ANSWER leaves out cleared. */
static enum backend_status sandbox_from(const cJSON *obj, struct backend_sandbox *out)
{
	const cJSON *id, *st;

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsObject(obj))
		return BACKEND_BAD_ANSWER;
	id = cJSON_GetObjectItemCaseSensitive(obj, "id");
	st = cJSON_GetObjectItemCaseSensitive(obj, "status");
	if (!cJSON_IsString(id) || !backend_sandbox_id_valid(id->valuestring) ||
	    !cJSON_IsString(st))
		return BACKEND_BAD_ANSWER;
	out->state = parse_state(st->valuestring);
	out->id = strdup(id->valuestring);
	if (!out->id || !get_opt_string(obj, "poolId", &out->pool) ||
	    !get_opt_string(obj, "image", &out->image) ||
	    !get_opt_string(obj, "url", &out->url) ||
	    !get_opt_string(obj, "error", &out->error) ||
	    (out->url && !backend_url_valid(out->url))) {
		backend_sandbox_clear(out);
		return BACKEND_BAD_ANSWER;
	}
	return BACKEND_OK;
}

enum backend_status backend_json_sandbox(const char *buf, size_t len,
					 struct backend_sandbox *out)
{
	cJSON *root = parse(buf, len);
	enum backend_status st = sandbox_from(root, out);

	cJSON_Delete(root);
	return st;
}

enum backend_status backend_json_sandbox_list(const char *buf, size_t len,
					      struct backend_sandbox_list *out)
{
	cJSON *root = parse(buf, len);
	const cJSON *arr, *e;
	size_t n;

	memset(out, 0, sizeof(*out));
	arr = cJSON_GetObjectItemCaseSensitive(root, "sandboxes");
	if (!cJSON_IsObject(root) || !cJSON_IsArray(arr)) {
		cJSON_Delete(root);
		return BACKEND_BAD_ANSWER;
	}
	n = (size_t)cJSON_GetArraySize(arr);
	out->items = calloc(n ? n : 1, sizeof(*out->items));
	if (!out->items) {
		cJSON_Delete(root);
		return BACKEND_LOCAL;
	}
	cJSON_ArrayForEach(e, arr)
	{
		if (sandbox_from(e, &out->items[out->count]) == BACKEND_OK)
			out->count++;
		else
			out->dropped++;
	}
	cJSON_Delete(root);
	return BACKEND_OK;
}

bool backend_json_error_message(const char *buf, size_t len, char *msg, size_t size)
{
	cJSON *root = parse(buf, len);
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
	size_t i;

	if (!cJSON_IsObject(root) || !cJSON_IsString(e) || !*e->valuestring ||
	    size == 0) {
		cJSON_Delete(root);
		return false;
	}
	for (i = 0; i + 1 < size && e->valuestring[i]; i++) {
		unsigned char c = (unsigned char)e->valuestring[i];

		msg[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	msg[i] = '\0';
	cJSON_Delete(root);
	return true;
}

bool backend_json_health(const char *buf, size_t len)
{
	cJSON *root = parse(buf, len);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "status");
	bool ok = cJSON_IsObject(root) && cJSON_IsString(st) &&
		  strcmp(st->valuestring, "ok") == 0;

	cJSON_Delete(root);
	return ok;
}

char *backend_json_exec_request(const char *command, long timeout_s)
{
	cJSON *o = cJSON_CreateObject();
	char *s = NULL;

	if (o && cJSON_AddStringToObject(o, "command", command) &&
	    cJSON_AddNumberToObject(o, "timeoutSeconds", (double)timeout_s))
		s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

/* Removes every member named name (a spec may repeat one). */
static void drop_all(cJSON *o, const char *name)
{
	while (cJSON_GetObjectItemCaseSensitive(o, name))
		cJSON_DeleteItemFromObjectCaseSensitive(o, name);
}

static bool set_string(cJSON *o, const char *name, const char *v)
{
	drop_all(o, name);
	return cJSON_AddStringToObject(o, name, v) != NULL;
}

static bool set_number(cJSON *o, const char *name, double v)
{
	drop_all(o, name);
	return cJSON_AddNumberToObject(o, name, v) != NULL;
}

enum backend_status backend_json_create_request(const struct backend_create_request *req,
						char **out)
{
	cJSON *o;
	bool ok;

	*out = NULL;
	if (req->spec_json) {
		o = parse(req->spec_json, strlen(req->spec_json));
		if (!cJSON_IsObject(o)) {
			cJSON_Delete(o);
			return BACKEND_BAD_REQUEST;
		}
	} else {
		o = cJSON_CreateObject();
	}
	ok = o != NULL;
	if (ok && req->id)
		ok = set_string(o, "id", req->id);
	/* Exactly one of pool and image: the struct's wins, and the other
	 * (with the port that goes with an image) leaves the body. */
	if (ok && req->pool) {
		drop_all(o, "image");
		drop_all(o, "port");
		ok = set_string(o, "pool", req->pool);
	}
	if (ok && req->image) {
		drop_all(o, "pool");
		ok = set_string(o, "image", req->image) &&
		     set_number(o, "port", req->port);
	}
	if (ok && req->idle_timeout_s > 0)
		ok = set_number(o, "idleTimeoutSeconds", (double)req->idle_timeout_s);
	if (ok && req->send_timeout)
		ok = set_number(o, "timeoutSeconds", (double)req->timeout_s);
	if (ok)
		*out = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return *out ? BACKEND_OK : BACKEND_LOCAL;
}
