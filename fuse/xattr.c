/*
 * xattr.c — extended attributes through the low-level API: the model's
 * (ops.c) user.sandbox.* facts of sandbox and run directories, served by
 * path like the rest of the adapter (lowlevel.c).
 */
#include "fuse_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nodes_i.h"

/* getxattr and listxattr: with size 0 the length, else the bytes. */
static void ll_reply_xattr(fuse_req_t req, int rc, size_t size, const char *buf)
{
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)rc);
	else
		fuse_reply_buf(req, buf, (size_t)rc);
}

void ll_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	/* The mount has user.* attributes only. Security labels and POSIX
	 * ACLs are not supported, which is what ENOTSUP says (ENODATA would
	 * say "supported, none here"): ls -l and cp then stop asking on this
	 * device after the first name instead of sending two requests per
	 * entry (coreutils remembers a device that answers ENOTSUP), and the
	 * kernel's security.capability check before a write costs no path. */
	if (strncmp(name, "user.", 5) != 0) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	int err = 0;
	char *path = ll_path(ino, NULL, &err);
	char *buf = size ? malloc(size) : NULL;
	int rc = !path ? -err : size && !buf ? -ENOMEM : fs_ops.getxattr(path, name, buf, size);
	free(path);
	ll_reply_xattr(req, rc, size, buf);
	free(buf);
}

void ll_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	int err = 0;
	char *path = ll_path(ino, NULL, &err);
	char *buf = size ? malloc(size) : NULL;
	int rc = !path ? -err : size && !buf ? -ENOMEM : fs_ops.listxattr(path, buf, size);
	free(path);
	ll_reply_xattr(req, rc, size, buf);
	free(buf);
}

void ll_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	int err = 0;
	char *path = ll_path(ino, NULL, &err);
	int rc = path ? fs_ops.setxattr(path, name, value, size, flags) : -err;
	free(path);
	fuse_reply_err(req, rc < 0 ? -rc : 0);
}

void ll_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	int err = 0;
	char *path = ll_path(ino, NULL, &err);
	int rc = path ? fs_ops.removexattr(path, name) : -err;
	free(path);
	fuse_reply_err(req, rc < 0 ? -rc : 0);
}

