/*
 * mountctl.c — .sandboxfs/ctl: one write is one command.
 *   attach ID URL | detach ID | create ID [pool=P] [image=I port=N] [idle=S]
 *   [{JSON spec}] | delete ID | recover
 */
#include "node_i.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int fs_parse_long(const char *s, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0)
		return -EINVAL;
	*out = v;
	return 0;
}

/* The create spec of "create ID [pool=P] [image=I port=N] [idle=S]
 * [{JSON}]": the JSON object, with the key=value words over it, as text
 * (malloc'ed) in *overlay; NULL when the line gives nothing. */
static int fs_create_overlay(char **words, int nwords, const char *json, char **overlay)
{
	*overlay = NULL;
	cJSON *o = json ? cJSON_Parse(json) : cJSON_CreateObject();
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		return json ? -EINVAL : -ENOMEM;
	}
	int rc = 0;
	bool image = false, pool = false;
	long port = 0;
	for (int i = 0; i < nwords && rc == 0; i++) {
		char *a = words[i];
		long v = 0;
		cJSON *item = NULL;
		const char *name = NULL;
		if (strncmp(a, "pool=", 5) == 0 && a[5]) {
			name = "pool";
			pool = true;
			item = cJSON_CreateString(a + 5);
			cJSON_DeleteItemFromObjectCaseSensitive(o, "image");
		} else if (strncmp(a, "image=", 6) == 0 && a[6]) {
			name = "image";
			image = true;
			item = cJSON_CreateString(a + 6);
			cJSON_DeleteItemFromObjectCaseSensitive(o, "pool");
		} else if (strncmp(a, "port=", 5) == 0 &&
			   (rc = fs_parse_long(a + 5, &port)) == 0) {
			name = "port";
			item = cJSON_CreateNumber((double)port);
		} else if (strncmp(a, "idle=", 5) == 0 &&
			   (rc = fs_parse_long(a + 5, &v)) == 0) {
			name = "idleTimeoutSeconds";
			item = cJSON_CreateNumber((double)v);
		} else {
			rc = -EINVAL;
		}
		if (rc == 0 && !item)
			rc = -ENOMEM;
		if (rc == 0) {
			cJSON_DeleteItemFromObjectCaseSensitive(o, name);
			cJSON_AddItemToObject(o, name, item);
		}
	}
	/* exactly one of pool= and image=, and image= with its port= */
	if (!image && !pool && cJSON_GetObjectItemCaseSensitive(o, "image"))
		image = port > 0 || cJSON_GetObjectItemCaseSensitive(o, "port");
	if (rc == 0 && ((pool && image) || (image && port <= 0) || (!image && port) ||
			port > 65535))
		rc = -EINVAL;
	if (rc == 0 && o->child && !(*overlay = cJSON_PrintUnformatted(o)))
		rc = -ENOMEM;
	cJSON_Delete(o);
	return rc;
}

int fs_mount_ctl(struct fs_mount *m, const char *cmd, size_t len)
{
	if (len && cmd[len - 1] == '\n')
		len--;
	if (len == 0 || memchr(cmd, '\0', len) || memchr(cmd, '\n', len))
		return -EINVAL;
	char *line = strndup(cmd, len);
	if (!line)
		return -ENOMEM;
	/* A create's JSON spec is the rest of the line from its first '{'. */
	char *json = strchr(line, '{');
	if (json)
		*json = '\0';
	char *argv[8];
	int argc = 0;
	char *save = NULL;
	for (char *t = strtok_r(line, " \t", &save); t;
	     t = strtok_r(NULL, " \t", &save)) {
		if (argc == 8) {
			free(line);
			return -EINVAL;
		}
		argv[argc++] = t;
	}
	int rc = -EINVAL;
	if (json) {
		*json = '{';
		if (argc < 2 || strcmp(argv[0], "create") != 0)
			argc = 0; /* only a create takes a spec */
	}
	if (argc == 0) {
		rc = -EINVAL;
	} else if (strcmp(argv[0], "attach") == 0 && argc == 3) {
		rc = fs_sandbox_attach(m, argv[1], argv[2]);
	} else if (strcmp(argv[0], "detach") == 0 && argc == 2) {
		rc = fs_sandbox_detach(m, argv[1]);
	} else if (strcmp(argv[0], "delete") == 0 && argc == 2) {
		rc = fs_sandbox_delete(m, argv[1]);
	} else if (strcmp(argv[0], "recover") == 0 && argc == 1) {
		rc = fs_recover(m, NULL);
	} else if (strcmp(argv[0], "create") == 0 && argc >= 2) {
		char *overlay = NULL;
		rc = fs_create_overlay(argv + 2, argc - 2, json, &overlay);
		if (rc == -EINVAL)
			fs_mount_error(m, "create %s: %s", argv[1],
				       json ? "the spec is not a JSON object, or a "
					      "word is not pool=, image=, port=, idle="
					    : "a word is not pool=, image=, port=, idle=");
		if (rc == 0)
			rc = fs_sandbox_create(m, argv[1], overlay);
		free(overlay);
	}
	free(line);
	return rc;
}
