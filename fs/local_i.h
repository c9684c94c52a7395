/*
 * local_i.h — private to fs/: the embedded local orchestrator (--local).
 */
#ifndef SANDBOXFS_FS_LOCAL_I_H
#define SANDBOXFS_FS_LOCAL_I_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct fs_local {
	pid_t pid;
	char url[64];	 /* http://127.0.0.1:PORT */
	char token[128]; /* secret */
};

/* Starts sandbox-server --orchestrator with its root in STATE/local and a
 * fresh random token (STATE/local.token, 0600), waits (bounded) for its
 * port file. tie_to_parent: the server dies with this process. Returns 0,
 * or -1 with msg set. */
int fs_local_start(struct fs_local *l, const char *state_dir, const char *server_opt,
		   bool tie_to_parent, char *msg, size_t msglen);
/* SIGTERM, a bounded wait, then SIGKILL. */
void fs_local_stop(pid_t pid);

#endif
