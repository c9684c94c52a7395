/*
 * files.h — directories and private files on the local disk.
 *
 * Every function returns 0 or a negative errno, and leaves errno set to
 * that error on failure (for callers that print strerror(errno)).
 */
#ifndef SANDBOXFS_COMMON_FILES_H
#define SANDBOXFS_COMMON_FILES_H

#include <stddef.h>
#include <sys/types.h>

/* mkdir -p: creates path and its missing parents, each with mode (less
 * the umask). Parts that exist as directories (or links to them) are
 * fine; a part that exists as anything else, the last one included, is
 * -ENOTDIR. Existing directories keep their mode. */
int common_mkdirs(const char *path, mode_t mode);

/* Replaces path with a file of mode 0600 holding len bytes of data, so
 * that no reader ever sees a partial file or one open to others: the data
 * go to a new file beside it (never through a symbolic link), are synced,
 * and that file is renamed over path. The directory itself is not synced.
 * For tokens, URLs and the like. */
int common_write_secret(const char *path, const void *data, size_t len);

/* common_write_secret for name in the directory dirfd (or AT_FDCWD). */
int common_write_secret_at(int dirfd, const char *name, const void *data, size_t len);

/* Raises the soft limit of open files to the hard one, as servers do: a
 * process that holds a few descriptors per sandbox or running command
 * passes the usual 1,024 long before the machine's limit. 0 or -1 (errno
 * set). */
int common_raise_nofile(void);

#endif
