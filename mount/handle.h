/*
 * handle.h — what fuse_file_info.fh points to.
 *
 * Every open file of the mount carries a handle whose first member is a
 * struct fs_handle, so an operation that gets no path (release after the
 * file was unlinked) can still tell which module owns it.
 */
#ifndef SANDBOXFS_FS_HANDLE_H
#define SANDBOXFS_FS_HANDLE_H

#include <stdint.h>

#include "workspace.h"

enum fs_handle_kind {
	FS_HANDLE_CONTROL = 0x5c7101,   /* ctl, stdout, status, ... (mount/files.c) */
	FS_HANDLE_WORKSPACE = WS_HANDLE_FILE, /* a file under ID/workspace/ */
	FS_HANDLE_WSDIR = WS_HANDLE_DIR,      /* a directory under ID/workspace/ */
};
/* The workspace core tags its handles with an unsigned int. */
_Static_assert(sizeof(enum fs_handle_kind) == sizeof(unsigned int),
	       "a handle's tag is read as either type");

struct fs_handle {
	enum fs_handle_kind kind;
};

static inline struct fs_handle *fs_handle_of(uint64_t fh)
{
	return (struct fs_handle *)(uintptr_t)fh;
}

#endif
