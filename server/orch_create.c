/*
 * orch_create.c — the local orchestrator's creates (checks, the cold start
 * of an image create), its pools, and its own test routes and faults:
 * GET /_admin/creates, create_lose_answer, hide_new_ms.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "files.h"
#include "orch.h"
#include "orch_priv.h"
#include "sandbox.h"
#include "svc.h"

#include "common/clock.h"

static bool json_is_int(const cJSON *v, double lo, double hi)
{
	return cJSON_IsNumber(v) && v->valuedouble >= lo && v->valuedouble <= hi &&
	       v->valuedouble == (double)(long long)v->valuedouble;
}

static bool pool_known(struct orch *o, const char *name)
{
	for (size_t i = 0; i < o->npools; i++)
		if (!strcmp(o->pools[i], name))
			return true;
	return false;
}

static long pool_live(struct orch *o, const char *name)
{
	long live = 0;

	for (struct box *b = o->boxes; b; b = b->next)
		live += b->pool && !strcmp(b->pool, name);
	return live;
}

/* True when the pool has a size and it is used up. Caller holds the lock. */
static bool pool_full(struct orch *o, const char *name)
{
	for (size_t i = 0; i < o->npools; i++)
		if (!strcmp(o->pools[i], name))
			return o->pool_max[i] > 0 && pool_live(o, name) >= o->pool_max[i];
	return false;
}

static const char *const create_fields[] = {
    "pool",
    "image",
    "port",
    "id",
    "idleTimeoutSeconds",
    "timeoutSeconds",
    "environment",
    "ports",
    "artifacts",
    "command",
    "cpu",
    "memory",
    "runtimeClass",
    "volumes",
};

/* Check a create body. Returns 0, or an HTTP status with msg set. */
static int create_check(struct orch *o, const cJSON *in, char *msg, size_t len)
{
	const cJSON *it, *pool, *image, *port, *id;
	bool known;

	if (!cJSON_IsObject(in)) {
		snprintf(msg, len, "the body must be a JSON object");
		return 400;
	}
	cJSON_ArrayForEach(it, in)
	{
		known = false;
		for (size_t i = 0; i < sizeof(create_fields) / sizeof(*create_fields);
		     i++)
			known = known || !strcmp(it->string, create_fields[i]);
		if (!known) {
			snprintf(msg, len, "unknown field: %.60s", it->string);
			return 400;
		}
	}
	pool = cJSON_GetObjectItemCaseSensitive(in, "pool");
	image = cJSON_GetObjectItemCaseSensitive(in, "image");
	port = cJSON_GetObjectItemCaseSensitive(in, "port");
	id = cJSON_GetObjectItemCaseSensitive(in, "id");
	if (!pool == !image) {
		snprintf(msg, len, "exactly one of pool or image is required");
		return 400;
	}
	if ((pool && (!cJSON_IsString(pool) || !*pool->valuestring)) ||
	    (image && (!cJSON_IsString(image) || !*image->valuestring))) {
		snprintf(msg, len, "pool and image must be non-empty strings");
		return 400;
	}
	if (image && !port) {
		snprintf(msg, len, "port is required with image");
		return 400;
	}
	if (port && !json_is_int(port, 1, 65535)) {
		snprintf(msg, len, "port must be an integer from 1 to 65535");
		return 400;
	}
	if (pool) {
		static const char *const poolless[] = {"cpu", "memory", "runtimeClass",
						       "volumes"};

		for (size_t i = 0; i < 4; i++)
			if (cJSON_GetObjectItemCaseSensitive(in, poolless[i])) {
				snprintf(msg, len,
					 "%s is only for creates without a pool",
					 poolless[i]);
				return 400;
			}
	}
	if (id && (!cJSON_IsString(id) || !orch_valid_id(id->valuestring))) {
		snprintf(msg, len,
			 "id must be an RFC 1123 label: lowercase letters, digits and "
			 "interior "
			 "hyphens, at most 63 characters");
		return 400;
	}
	it = cJSON_GetObjectItemCaseSensitive(in, "idleTimeoutSeconds");
	if (it && !json_is_int(it, 0, 1e9)) {
		snprintf(msg, len, "idleTimeoutSeconds must be an integer >= 0");
		return 400;
	}
	it = cJSON_GetObjectItemCaseSensitive(in, "timeoutSeconds");
	if (it && !json_is_int(it, 0, 3600)) {
		snprintf(msg, len, "timeoutSeconds must be an integer from 0 to 3600");
		return 400;
	}
	it = cJSON_GetObjectItemCaseSensitive(in, "environment");
	if (it) {
		const cJSON *v;
		bool ok = cJSON_IsObject(it);

		cJSON_ArrayForEach(v, it) ok =
		    ok && cJSON_IsString(v) && *v->string && !strchr(v->string, '=');
		if (!ok) {
			snprintf(msg, len, "environment must map names to strings");
			return 400;
		}
	}
	it = cJSON_GetObjectItemCaseSensitive(in, "ports");
	if (it) {
		const cJSON *v;
		bool ok = cJSON_IsArray(it);

		cJSON_ArrayForEach(v, it) ok = ok && json_is_int(v, 1, 65535);
		if (!ok) {
			snprintf(msg, len, "ports must be a list of port numbers");
			return 400;
		}
	}
	it = cJSON_GetObjectItemCaseSensitive(in, "command");
	if (it && !cJSON_IsString(it) && !cJSON_IsArray(it)) {
		snprintf(msg, len, "command must be a string or a list of strings");
		return 400;
	}
	if ((it = cJSON_GetObjectItemCaseSensitive(in, "artifacts")) &&
	    !cJSON_IsArray(it)) {
		snprintf(msg, len, "artifacts must be a list");
		return 400;
	}
	if ((it = cJSON_GetObjectItemCaseSensitive(in, "volumes")) &&
	    !cJSON_IsArray(it)) {
		snprintf(msg, len, "volumes must be a list");
		return 400;
	}
	if ((it = cJSON_GetObjectItemCaseSensitive(in, "runtimeClass")) &&
	    !cJSON_IsString(it)) {
		snprintf(msg, len, "runtimeClass must be a string");
		return 400;
	}
	it = cJSON_GetObjectItemCaseSensitive(in, "cpu");
	if (it && (!cJSON_IsNumber(it) || it->valuedouble <= 0)) {
		snprintf(msg, len, "cpu must be a positive number");
		return 400;
	}
	it = cJSON_GetObjectItemCaseSensitive(in, "memory");
	if (it && !json_is_int(it, 1, 1e15)) {
		snprintf(msg, len, "memory must be a positive integer");
		return 400;
	}
	if (pool && !pool_known(o, pool->valuestring)) {
		snprintf(msg, len, "no such pool");
		return 404;
	}
	return 0;
}

/* Keep a create body for GET /_admin/creates. */
static void creates_record(struct orch *o, const cJSON *in)
{
	cJSON *copy = cJSON_Duplicate(in, true);

	if (!copy)
		return;
	pthread_mutex_lock(&o->lock);
	if (o->creates_count == CREATES_MAX) {
		cJSON_Delete(o->creates[o->creates_start]);
		o->creates[o->creates_start] = copy;
		o->creates_start = (o->creates_start + 1) % CREATES_MAX;
	} else {
		o->creates[(o->creates_start + o->creates_count) % CREATES_MAX] = copy;
		o->creates_count++;
	}
	pthread_mutex_unlock(&o->lock);
}

void orch_creates_free(struct orch *o)
{
	for (size_t i = 0; i < o->creates_count; i++)
		cJSON_Delete(o->creates[(o->creates_start + i) % CREATES_MAX]);
	o->creates_count = 0;
}

enum MHD_Result orch_admin_finish(struct req *r, const char *name)
{
	struct orch *o = orch_of(r);
	cJSON *a;

	if (strcmp(name, "creates"))
		return svc_reply_error(r, 404, "no such admin route");
	a = cJSON_CreateArray();
	pthread_mutex_lock(&o->lock);
	for (size_t i = 0; i < o->creates_count; i++)
		cJSON_AddItemToArray(
		    a, cJSON_Duplicate(o->creates[(o->creates_start + i) % CREATES_MAX],
				       true));
	pthread_mutex_unlock(&o->lock);
	return svc_reply_json(r, 200, a);
}

bool box_hidden(const struct req *r, const struct box *b)
{
	return r->faulted && r->f.hide_new_ms > 0 &&
	       (long long)common_now_ms() - b->created_ms < r->f.hide_new_ms;
}

/* An image create's cold start. Returns false when the orchestrator
 * stops meanwhile. */
static bool cold_start(struct orch *o, long ms)
{
	long long end = (long long)common_now_ms() + ms;

	while (!atomic_load(&o->stopping)) {
		long long left = end - (long long)common_now_ms();

		if (left <= 0)
			return true;
		usleep((useconds_t)(left < 50 ? left : 50) * 1000);
	}
	return false;
}

/* A box from a checked create body. */
static struct box *box_new(struct orch *o, const cJSON *in)
{
	const cJSON *pool = cJSON_GetObjectItemCaseSensitive(in, "pool");
	const cJSON *image = cJSON_GetObjectItemCaseSensitive(in, "image");
	const cJSON *it;
	struct box *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->pool = pool ? strdup(pool->valuestring) : NULL;
	b->image = image ? strdup(image->valuestring) : NULL;
	it = cJSON_GetObjectItemCaseSensitive(in, "port");
	b->cport = image ? (int)it->valuedouble : CONTRACT_PORT;
	b->cpu = (it = cJSON_GetObjectItemCaseSensitive(in, "cpu"))
		     ? cJSON_Duplicate(it, 1)
		     : NULL;
	b->memory = (it = cJSON_GetObjectItemCaseSensitive(in, "memory"))
			? cJSON_Duplicate(it, 1)
			: NULL;
	b->environment = (it = cJSON_GetObjectItemCaseSensitive(in, "environment"))
			     ? cJSON_Duplicate(it, 1)
			     : NULL;
	it = cJSON_GetObjectItemCaseSensitive(in, "idleTimeoutSeconds");
	b->idle_s = it ? (long)it->valuedouble : 0;
	it = cJSON_GetObjectItemCaseSensitive(in, "timeoutSeconds");
	b->timeout_s = it ? (long)it->valuedouble : o->default_timeout_s;
	b->created = (long long)time(NULL);
	b->status = "creating";
	return b;
}

enum MHD_Result create_finish(struct req *r)
{
	struct orch *o = orch_of(r);
	cJSON *in = cJSON_ParseWithLength(r->body ? r->body : "", r->len), *st;
	const cJSON *id;
	struct files_error fe;
	char msg[200];
	int status;
	bool listed = false;
	struct box *b;

	if (!in)
		return svc_reply_error(r, 400, "the body is not JSON");
	creates_record(o, in);
	status = create_check(o, in, msg, sizeof(msg));
	if (status) {
		cJSON_Delete(in);
		return svc_reply_error(r, (unsigned)status, "%s", msg);
	}
	b = box_new(o, in);
	if (!b) {
		cJSON_Delete(in);
		return svc_reply_error(r, 500, "out of memory");
	}
	id = cJSON_GetObjectItemCaseSensitive(in, "id");
	pthread_mutex_lock(&o->lock);
	if (id) {
		snprintf(b->id, sizeof(b->id), "%s", id->valuestring);
	} else {
		/* {pool}-{8 hex}; an image create has no pool. */
		const char *prefix = b->pool ? b->pool : "sandbox";

		do
			snprintf(b->id, sizeof(b->id), "%.54s-%08x", prefix,
				 arc4random());
		while (box_find(o, b->id));
	}
	cJSON_Delete(in);
	if (box_find(o, b->id)) {
		pthread_mutex_unlock(&o->lock);
		box_free(b);
		return svc_reply_error(r, 409, "a sandbox with this id is live");
	}
	if (b->pool && pool_full(o, b->pool)) {
		pthread_mutex_unlock(&o->lock);
		box_free(b);
		return svc_reply_error(r, 429, "the pool is exhausted");
	}
	/* A directory left by an interrupted delete is not a live sandbox. */
	files_delete(o->rootfd, b->id, &fe);
	if (mkdirat(o->rootfd, b->id, 0700) && errno != EEXIST) {
		pthread_mutex_unlock(&o->lock);
		box_free(b);
		return svc_reply_error(r, 500, "cannot create the sandbox directory");
	}
	if (o->sockdir)
		box_pick_socket(o, b);
	b->created_ms = (long long)common_now_ms();
	if (b->image && o->image_start_ms > 0) {
		/* A cold start: listed as "creating", with no url, meanwhile.
		 * Its directory has no record yet: a restart removes it. */
		bool up;

		b->next = o->boxes;
		o->boxes = b;
		listed = true;
		pthread_mutex_unlock(&o->lock);
		up = cold_start(o, o->image_start_ms);
		pthread_mutex_lock(&o->lock);
		if (!up || b->doomed) {
			bool doomed = b->doomed;

			if (!doomed)
				box_unlink(o, b);
			files_delete(o->rootfd, b->id, &fe);
			pthread_mutex_unlock(&o->lock);
			b->status = "deleting";
			st = box_status(o, b);
			box_free(b);
			if (!doomed) {
				cJSON_Delete(st);
				return svc_reply_error(r, 503,
						       "the orchestrator is stopping");
			}
			return svc_reply_json(r, 201, st); /* deleted meanwhile */
		}
	}
	box_serve(o, b, 0);
	if (o->machinery && b->sb)
		machinery_create(o, b);
	if (box_save(o, b)) {
		if (listed)
			box_unlink(o, b);
		if (b->sb)
			sandbox_stop(b->sb);
		b->sb = NULL;
		files_delete(o->rootfd, b->id, &fe);
		pthread_mutex_unlock(&o->lock);
		box_free(b);
		return svc_reply_error(r, 500, "cannot record the sandbox");
	}
	if (!listed) {
		b->next = o->boxes;
		o->boxes = b;
	}
	b->created_ms = (long long)common_now_ms();
	atomic_fetch_add(&o->svc.stats.creates, 1);
	st = box_status(o, b);
	pthread_mutex_unlock(&o->lock);
	if (r->faulted && r->f.create_lose_answer)
		r->f.lose_answer = true; /* created; the answer is lost */
	return svc_reply_json(r, 201, st);
}

/* The pools of the guide: size (MAX, or the live count without one),
 * warm (seats free) and claimed (live sandboxes). */
cJSON *pools_json(struct orch *o, const char *only)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; i < o->npools; i++) {
		if (only && strcmp(only, o->pools[i]))
			continue;
		cJSON *p = cJSON_CreateObject();
		long live = pool_live(o, o->pools[i]), max = o->pool_max[i];
		long size = max > 0 ? max : live;

		cJSON_AddStringToObject(p, "id", o->pools[i]);
		cJSON_AddStringToObject(p, "image", "local");
		cJSON_AddNumberToObject(p, "size", (double)size);
		cJSON_AddNumberToObject(p, "warm",
					(double)(size > live ? size - live : 0));
		cJSON_AddNumberToObject(p, "claimed", (double)live);
		cJSON_AddItemToArray(arr, p);
	}
	return arr;
}
