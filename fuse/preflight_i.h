/*
 * preflight_i.h — private to fuse/: checks of the machine that run before
 * anything starts, each failing with one line that names the cause and
 * what to do (a missing or non-empty mountpoint, /dev/fuse, fusermount3).
 */
#ifndef SANDBOXFS_FS_PREFLIGHT_I_H
#define SANDBOXFS_FS_PREFLIGHT_I_H

#include <stdbool.h>

/* The mountpoint exists, is a directory, is not a dead FUSE mount and,
 * unless nonempty, is empty. Returns 0, or -1 after printing one line. */
int fs_preflight_mountpoint(const char *path, bool nonempty);

/* /dev/fuse is the FUSE device and, when libfuse will need it (not root,
 * or auto_unmount), fusermount3 can be run. Returns 0, or -1 after
 * printing one line. */
int fs_preflight_fuse(bool need_fusermount);

#endif
