/*
 * strjoin.h — "A/B" strings built without printf: a path joined per
 * listed name (vfs/workspace.c) and a node key per listed name
 * (fuse/nodes.c), where the printf family showed in a tree walk's profile.
 */
#ifndef SANDBOXFS_COMMON_STRJOIN_H
#define SANDBOXFS_COMMON_STRJOIN_H

#include <stddef.h>

/* a, sep, then b, NUL-terminated: in buf (of size cap) when it fits, else
 * in a new string (buf NULL: always new; the caller frees what is not
 * buf). NULL when out of memory. */
char *common_join(char *buf, size_t cap, const char *a, char sep, const char *b);

#endif
