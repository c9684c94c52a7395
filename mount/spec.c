/*
 * spec.c — create specs (DESIGN.md §4): the template every mkdir uses, a
 * create's own fields merged over it, the request bound it sends, and the
 * masked form info shows.
 */
#include "mount_i.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A template or a spec larger than this is a mistake, not a spec. */
#define FS_SPEC_MAX (256 * 1024)

int fs_template_load(const char *path, char **out, char *msg, size_t len)
{
	*out = NULL;
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(msg, len, "template=%s: %s", path, strerror(errno));
		return -1;
	}
	char *text = malloc(FS_SPEC_MAX + 1);
	size_t n = text ? fread(text, 1, FS_SPEC_MAX + 1, f) : 0;
	bool read_error = ferror(f);
	fclose(f);
	if (!text || read_error || n > FS_SPEC_MAX) {
		snprintf(msg, len, "template=%s: %s", path,
			 !text ? "out of memory"
			 : read_error ? "read error"
				      : "larger than 256 KiB");
		free(text);
		return -1;
	}
	text[n] = '\0';
	cJSON *o = cJSON_ParseWithLength(text, n);
	free(text);
	if (!cJSON_IsObject(o)) {
		snprintf(msg, len, "template=%s: not a JSON object", path);
		cJSON_Delete(o);
		return -1;
	}
	if (cJSON_GetObjectItemCaseSensitive(o, "id")) {
		snprintf(msg, len, "template=%s: \"id\" is the directory's name, not a "
			 "template field", path);
		cJSON_Delete(o);
		return -1;
	}
	*out = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!*out) {
		snprintf(msg, len, "template=%s: out of memory", path);
		return -1;
	}
	return 0;
}

/* Sets v's field of o (replacing one of the same name); v, a detached
 * member of another object, is consumed. */
static void fs_json_set(cJSON *o, cJSON *v)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, v->string);
	cJSON_AddItemToObject(o, v->string, v);
}

static const char *fs_json_string(const cJSON *o, const char *name)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsString(it) ? it->valuestring : NULL;
}

/* An integer field: its value, dflt when absent, -2 when not an integer
 * in 0..max. */
static long fs_json_count(const cJSON *o, const char *name, long dflt, long max)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, name);
	if (!it)
		return dflt;
	if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > max ||
	    it->valuedouble != (double)(long)it->valuedouble)
		return -2;
	return (long)it->valuedouble;
}

int fs_spec_build(struct fs_mount *m, const char *overlay, struct fs_spec *out,
		  char *msg, size_t len)
{
	memset(out, 0, sizeof(*out));
	cJSON *spec = m->template_json ? cJSON_Parse(m->template_json)
				       : cJSON_CreateObject();
	if (!spec) {
		snprintf(msg, len, "out of memory");
		return -ENOMEM;
	}
	if (overlay) {
		cJSON *o = cJSON_Parse(overlay);
		if (!cJSON_IsObject(o)) {
			snprintf(msg, len, "the create spec is not a JSON object");
			cJSON_Delete(o);
			cJSON_Delete(spec);
			return -EINVAL;
		}
		/* A create's pool or image replaces the template's choice. */
		if (cJSON_GetObjectItemCaseSensitive(o, "pool") ||
		    cJSON_GetObjectItemCaseSensitive(o, "image")) {
			cJSON_DeleteItemFromObjectCaseSensitive(spec, "pool");
			cJSON_DeleteItemFromObjectCaseSensitive(spec, "image");
			cJSON_DeleteItemFromObjectCaseSensitive(spec, "port");
		}
		cJSON *it = o->child;
		while (it) {
			cJSON *next = it->next;
			cJSON *v = cJSON_DetachItemViaPointer(o, it);
			fs_json_set(spec, v);
			it = next;
		}
		cJSON_Delete(o);
	}
	cJSON_DeleteItemFromObjectCaseSensitive(spec, "id"); /* the directory's */
	int rc = -EINVAL;
	const cJSON *pool = cJSON_GetObjectItemCaseSensitive(spec, "pool");
	const cJSON *image = cJSON_GetObjectItemCaseSensitive(spec, "image");
	if ((pool && !cJSON_IsString(pool)) || (image && !cJSON_IsString(image))) {
		snprintf(msg, len, "pool and image must be strings");
		goto out;
	}
	if (pool && image) {
		snprintf(msg, len, "a create names exactly one of pool and image");
		goto out;
	}
	if (!pool && !image)
		cJSON_AddStringToObject(spec, "pool", m->opt.pool);
	long port = fs_json_count(spec, "port", 0, 65535);
	if (image && port <= 0) {
		snprintf(msg, len, "a create with an image needs its port (1-65535)");
		goto out;
	}
	/* The request bound: the spec's, else none (DESIGN.md §4: sandboxfs
	 * bounds each request itself, so a bound of the proxy's could only
	 * cut a long command or transfer the mount allows). */
	long bound = fs_json_count(spec, "timeoutSeconds", -1, 3600);
	if (bound == -2) {
		snprintf(msg, len, "timeoutSeconds must be an integer from 0 to 3600");
		goto out;
	}
	if (bound < 0) {
		bound = 0;
		cJSON_AddNumberToObject(spec, "timeoutSeconds", 0);
	}
	long idle = fs_json_count(spec, "idleTimeoutSeconds", 0, 1L << 30);
	if (idle == -2) {
		snprintf(msg, len, "idleTimeoutSeconds must be an integer >= 0");
		goto out;
	}
	out->bound_s = bound ? bound : JOURNAL_BOUND_NONE;
	out->idle_s = idle;
	out->port = (int)(port > 0 ? port : 0);
	out->pool = fs_strdup0(fs_json_string(spec, "pool"));
	out->image = fs_strdup0(fs_json_string(spec, "image"));
	out->json = cJSON_PrintUnformatted(spec);
	rc = 0;
	if (!out->json || (!out->pool && !out->image)) {
		snprintf(msg, len, "out of memory");
		rc = -ENOMEM;
	} else if (strlen(out->json) > FS_SPEC_MAX) {
		snprintf(msg, len, "the create spec is larger than 256 KiB");
		rc = -EFBIG;
	}
out:
	cJSON_Delete(spec);
	if (rc < 0)
		fs_spec_clear(out);
	return rc;
}

void fs_spec_clear(struct fs_spec *s)
{
	free(s->json);
	free(s->pool);
	free(s->image);
	memset(s, 0, sizeof(*s));
}

/* Replaces member it of object o by "***", keeping its name. Returns the
 * replacement (it when out of memory). */
static cJSON *fs_mask_member(cJSON *o, cJSON *it)
{
	cJSON *masked = cJSON_CreateString("***");
	char *name = masked ? strdup(it->string) : NULL;
	if (!name) {
		cJSON_Delete(masked);
		return it;
	}
	masked->string = name;
	cJSON_ReplaceItemViaPointer(o, it, masked);
	return masked;
}

/* Replaces every value of an object with "***" (environment values). */
static void fs_mask_values(cJSON *o)
{
	if (!cJSON_IsObject(o))
		return;
	for (cJSON *it = o->child; it; it = it->next)
		if (!cJSON_IsNull(it))
			it = fs_mask_member(o, it);
}

cJSON *fs_spec_masked(const char *json)
{
	if (!json)
		return NULL;
	cJSON *spec = cJSON_Parse(json);
	if (!cJSON_IsObject(spec)) {
		cJSON_Delete(spec);
		return NULL;
	}
	fs_mask_values(cJSON_GetObjectItemCaseSensitive(spec, "environment"));
	/* Artifact sources are URLs that may carry credentials. */
	cJSON *arts = cJSON_GetObjectItemCaseSensitive(spec, "artifacts");
	cJSON *a;
	cJSON_ArrayForEach(a, arts)
	{
		cJSON *in = cJSON_GetObjectItemCaseSensitive(a, "in");
		const char *t = fs_json_string(a, "type");
		if (cJSON_IsString(in) && (!t || strcmp(t, "download") == 0 ||
					   strstr(in->valuestring, "://")))
			fs_mask_member(a, in);
		cJSON *sync = cJSON_GetObjectItemCaseSensitive(a, "sync");
		if (cJSON_IsString(sync))
			fs_mask_member(a, sync);
	}
	return spec;
}

long fs_sandbox_bound(const struct fs_sandbox *sb)
{
	if (sb->bound_s == JOURNAL_BOUND_NONE)
		return 0;
	return sb->bound_s > 0 ? sb->bound_s : FS_BOUND_ASSUMED;
}

int fs_timeout_check(const struct fs_sandbox *sb, long timeout_s)
{
	long bound = fs_sandbox_bound(sb);
	if (!bound)
		return 0;
	/* 0: no limit, which outlives any bound; a command as long as the
	 * bound would have its answer cut */
	return timeout_s > 0 && timeout_s < bound ? 0 : -EINVAL;
}
