/*
 * shquote.h — quoting for the commands the mount builds and sends to a
 * sandbox's shell (a rename's mv, a batch of chmod, the wrappers of
 * mount/runenv.c and mount/stream.c).
 */
#ifndef SANDBOXFS_COMMON_SHQUOTE_H
#define SANDBOXFS_COMMON_SHQUOTE_H

/* s in single quotes for sh ("'" as '\''), malloc'ed; NULL when out of
 * memory. */
char *common_sh_quote(const char *s);

#endif
