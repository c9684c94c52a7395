/*
 * local_i.h — private to mount/ and fuse/: the embedded local orchestrator
 * (--local).
 */
#ifndef SANDBOXFS_FS_LOCAL_I_H
#define SANDBOXFS_FS_LOCAL_I_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "journal.h"

/* sun_path holds a socket path of at most this many bytes. */
#define FS_LOCAL_SOCKET_MAX 107

struct fs_local {
	pid_t pid;
	char run_dir[PATH_MAX]; /* every socket, and nothing else (local.c) */
	char url[512];		/* http+unix://...%2Frun%2Forch (secret) */
	char token[128];	/* secret */
};

/* Starts sandbox-server --orchestrator with its root in STATE/local, its
 * API on the Unix socket RUN/orch and its sandboxes on sockets in RUN (no
 * TCP port), RUN being STATE/run or, when STATE is too long for socket
 * paths, a short private directory (local.c), and a fresh random token
 * (STATE/local.token, 0600); waits (bounded) for STATE/local.url and
 * checks it names that socket. tie_to_parent: the server dies with this
 * process. Returns 0, or -1 with msg set. */
int fs_local_start(struct fs_local *l, const char *state_dir, const char *server_opt,
		   bool tie_to_parent, char *msg, size_t msglen);
/* True when url is the URL of a socket in l's run directory: a sandbox of
 * this local orchestrator. */
bool fs_local_url_ours(const struct fs_local *l, const char *url);

/* Drops from st the URLs of owned sandboxes that are not ours (a TCP port
 * of an earlier version, say): nothing is sent there; the orchestrator's
 * listing gives their URLs. Returns how many were dropped. */
size_t fs_local_forget_foreign(const struct fs_local *l, struct journal_state *st);

/* SIGTERM, a bounded wait, then SIGKILL. */
void fs_local_stop(pid_t pid);

#endif
