/*
 * pools.c — the orchestrator's pools (GET /v1/sandbox-pool): decoding the
 * answers and freeing them. The call is in orchestrator.c.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "backend_i.h"
#include "backend_json_i.h"

/* 2^53: the largest range in which a double holds every integer. */
#define JSON_MAX_INT 9007199254740992.0

void backend_pool_clear(struct backend_pool *p)
{
	if (!p)
		return;
	free(p->id);
	free(p->image);
	memset(p, 0, sizeof(*p));
}

void backend_pool_list_clear(struct backend_pool_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->count; i++)
		backend_pool_clear(&l->items[i]);
	free(l->items);
	memset(l, 0, sizeof(*l));
}

bool backend_pool_id_valid(const char *id)
{
	size_t n = 0;

	if (!id || !*id)
		return false;
	for (const unsigned char *p = (const unsigned char *)id; *p; p++, n++)
		if (*p < 0x20 || *p == 0x7f || *p == '/' || n >= 255)
			return false;
	return true;
}

/* An optional count: absent and null give -1; another type, a fraction or
 * a negative number is an error. */
static bool get_count(const cJSON *obj, const char *name, long *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
	double d;

	*out = -1;
	if (!v || cJSON_IsNull(v))
		return true;
	if (!backend_json_int(v, 0, JSON_MAX_INT, &d))
		return false;
	*out = (long)d;
	return true;
}

/* Decodes one pool object; BACKEND_BAD_ANSWER leaves out cleared. */
static enum backend_status pool_from(const cJSON *obj, struct backend_pool *out)
{
	const cJSON *id, *image;

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsObject(obj))
		return BACKEND_BAD_ANSWER;
	id = cJSON_GetObjectItemCaseSensitive(obj, "id");
	image = cJSON_GetObjectItemCaseSensitive(obj, "image");
	if (!cJSON_IsString(id) || !backend_pool_id_valid(id->valuestring) ||
	    (image && !cJSON_IsNull(image) && !cJSON_IsString(image)) ||
	    !get_count(obj, "size", &out->size) || !get_count(obj, "warm", &out->warm) ||
	    !get_count(obj, "claimed", &out->claimed))
		return BACKEND_BAD_ANSWER;
	out->id = strdup(id->valuestring);
	if (cJSON_IsString(image) && *image->valuestring)
		out->image = strdup(image->valuestring);
	if (!out->id || (cJSON_IsString(image) && *image->valuestring && !out->image)) {
		backend_pool_clear(out);
		return BACKEND_LOCAL;
	}
	return BACKEND_OK;
}

enum backend_status backend_json_pool(const char *buf, size_t len,
				      struct backend_pool_list *out)
{
	cJSON *root = backend_json_parse(buf, len);
	enum backend_status st;

	memset(out, 0, sizeof(*out));
	out->items = calloc(1, sizeof(*out->items));
	if (!out->items) {
		cJSON_Delete(root);
		return BACKEND_LOCAL;
	}
	st = pool_from(root, &out->items[0]);
	cJSON_Delete(root);
	if (st != BACKEND_OK) {
		backend_pool_list_clear(out);
		return st;
	}
	out->count = 1;
	return BACKEND_OK;
}

enum backend_status backend_json_pool_list(const char *buf, size_t len,
					   struct backend_pool_list *out)
{
	cJSON *root = backend_json_parse(buf, len);
	const cJSON *arr, *e;
	size_t n;

	memset(out, 0, sizeof(*out));
	arr = cJSON_GetObjectItemCaseSensitive(root, "pools");
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
		enum backend_status st = pool_from(e, &out->items[out->count]);

		if (st == BACKEND_LOCAL) {
			cJSON_Delete(root);
			backend_pool_list_clear(out);
			return st;
		}
		if (st == BACKEND_OK)
			out->count++;
		else
			out->dropped++;
	}
	cJSON_Delete(root);
	return BACKEND_OK;
}
