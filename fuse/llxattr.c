/*
 * llxattr.c — the extended attributes of the mount's files, served
 * through the low-level API (lowlevel.c's table points here).
 */
#include "fuse_i.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>

#include "nodes_i.h"

void ll_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	int err = 0;
	char *path = ll_path(ino, NULL, &err);
	char *buf = size ? malloc(size) : NULL;
	int rc = !path ? -err : size && !buf ? -ENOMEM : fs_ops.getxattr(path, name, buf, size);
	free(path);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)rc);
	else
		fuse_reply_buf(req, buf, (size_t)rc);
	free(buf);
}

void ll_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	int err = 0;
	char *path = ll_path(ino, NULL, &err);
	char *buf = size ? malloc(size) : NULL;
	int rc = !path ? -err : size && !buf ? -ENOMEM : fs_ops.listxattr(path, buf, size);
	free(path);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)rc);
	else
		fuse_reply_buf(req, buf, (size_t)rc);
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

