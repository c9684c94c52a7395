/*
 * files.h — workspace paths that never escape the workspace.
 *
 * Every path is resolved with openat2(RESOLVE_BENEATH) from the workspace
 * directory, so neither `..` nor a symlink can reach outside it. Errors are
 * HTTP statuses with a short message.
 */
#ifndef SBX_FILES_H
#define SBX_FILES_H

#include <stdbool.h>
#include <sys/types.h>

struct cJSON;

/* Names of PUT's temporary files start with this; listings hide them. */
#define FILES_TMP_PREFIX ".sandbox-put-"

struct files_error {
	int status;
	const char *msg;
};

/* Normalise a path relative to the workspace: drop "." and empty
 * segments, refuse absolute paths, ".." and empty names. *out is "" for
 * the root. Returns 0, or 400 with err set. */
int files_normalize(const char *in, char **out, struct files_error *err);

/* openat2 beneath dirfd. Returns an fd or -errno. */
int files_open_beneath(int dirfd, const char *rel, int flags, mode_t mode);

/* The HTTP status for an errno from resolving a path. */
int files_errno_status(int e, const char **msg);

/* A listing of a directory: {"entries":[{"name","size","isDir"}...]} sorted
 * by name, or NULL with err set. */
struct cJSON *files_list(int dirfd, struct files_error *err);

/* Remove a file or a whole tree. Returns 0 or a status with err set. */
int files_delete(int wsfd, const char *rel, struct files_error *err);

/* Open the parent directory of rel, creating missing directories, and
 * split off the last name. Returns the parent fd or -status. */
int files_open_parent(int wsfd, const char *rel, bool create, const char **name,
		      struct files_error *err);

#endif
