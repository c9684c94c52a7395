/*
 * sandbox.h — one sandbox: the contract of CONTRACT.md (POST /execute,
 * GET|PUT|DELETE /files/..., GET /healthz) served over one workspace
 * directory on its own port or Unix socket.
 */
#ifndef SBX_SANDBOX_H
#define SBX_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "faults.h"

struct sandbox;
struct svc;

struct sandbox_config {
	const char *workspace; /* created when missing */
	const char *shell;     /* default /bin/sh */
	char *const *env;      /* extra "NAME=VALUE" for commands, or NULL */
	const char *listen;    /* default 127.0.0.1 */
	uint16_t port;	       /* 0: ephemeral */
	const char *unix_path; /* listen there instead (svc.h), or NULL */
	bool admin;	       /* serve /_admin/ */
	long bound_s;	       /* per-request bound (bound.h); 0: none */
	struct faults faults;
};

/* Start serving. Returns NULL with a message in err on failure. */
struct sandbox *sandbox_start(const struct sandbox_config *c, char *err, size_t errlen);

/* The bound TCP port; 0 on a Unix socket. */
uint16_t sandbox_port(const struct sandbox *sb);
struct svc *sandbox_svc(struct sandbox *sb);

/* Milliseconds since the last request or command ended; 0 while a
 * request or a command is in progress. */
long long sandbox_idle_ms(struct sandbox *sb);

/* Kill the running command's process tree, stop serving, free. */
void sandbox_stop(struct sandbox *sb);

#endif
