/*
 * mountctl.c — .sandboxfs/ctl: one write is one command.
 *   attach ID URL | detach ID | create ID [pool=P] [image=I port=N] [idle=S]
 *   | recover
 */
#include "node_i.h"

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

int fs_mount_ctl(struct fs_mount *m, const char *cmd, size_t len)
{
	if (len && cmd[len - 1] == '\n')
		len--;
	if (len == 0 || memchr(cmd, '\0', len) || memchr(cmd, '\n', len))
		return -EINVAL;
	char *line = strndup(cmd, len);
	if (!line)
		return -ENOMEM;
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
	if (argc == 0) {
		rc = -EINVAL;
	} else if (strcmp(argv[0], "attach") == 0 && argc == 3) {
		rc = fs_sandbox_attach(m, argv[1], argv[2]);
	} else if (strcmp(argv[0], "detach") == 0 && argc == 2) {
		rc = fs_sandbox_detach(m, argv[1]);
	} else if (strcmp(argv[0], "recover") == 0 && argc == 1) {
		rc = fs_recover(m, NULL);
	} else if (strcmp(argv[0], "create") == 0 && argc >= 2) {
		const char *pool = NULL, *image = NULL;
		long port = 0, idle = 0;
		rc = 0;
		for (int i = 2; i < argc && rc == 0; i++) {
			char *a = argv[i];
			if (strncmp(a, "pool=", 5) == 0 && a[5])
				pool = a + 5;
			else if (strncmp(a, "image=", 6) == 0 && a[6])
				image = a + 6;
			else if (strncmp(a, "port=", 5) == 0)
				rc = fs_parse_long(a + 5, &port);
			else if (strncmp(a, "idle=", 5) == 0)
				rc = fs_parse_long(a + 5, &idle);
			else
				rc = -EINVAL;
		}
		if (rc == 0 && ((pool && image) || (image && port <= 0) ||
				(!image && port) || port > 65535))
			rc = -EINVAL;
		if (rc == 0)
			rc = fs_sandbox_create(m, argv[1], pool, image, (int)port, idle);
	}
	free(line);
	return rc;
}
