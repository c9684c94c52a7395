/*
 * unixsock.h — listening on a Unix socket that only the server's own user
 * may use: the socket file is mode 0600, an orchestrator's sockets live in
 * a private (0700) directory, and every request's peer is checked with
 * SO_PEERCRED (defence in depth: a peer of another uid, say root, that
 * gets through the file modes is still refused).
 */
#ifndef SBX_UNIXSOCK_H
#define SBX_UNIXSOCK_H

#include <stdbool.h>
#include <stddef.h>

/* The longest socket path: sun_path holds it and its NUL. */
#define UNIXSOCK_PATH_MAX 107

/* Binds and listens on path, mode 0600. A socket file left by a server
 * that died is replaced; one a live server accepts on is not, nor is
 * anything that is not a socket. Returns the descriptor, or -1 with a
 * message in err. */
int unixsock_listen(const char *path, char *err, size_t errlen);

/* Makes dir a private directory of this user: created mode 0700 when
 * missing; an existing one must be a real directory (not a symlink) owned
 * by this user, and is set to 0700. Returns 0, or -1 with err set. */
int unixsock_private_dir(const char *dir, char *err, size_t errlen);

/* True when the peer of the connected socket fd runs as this process's
 * effective uid. */
bool unixsock_peer_is_self(int fd);

/* The URL clients use for the socket at path, http+unix://ENCODED with
 * the path percent-encoded as the host (malloc'd; NULL on no memory). */
char *unixsock_url(const char *path);

#endif
