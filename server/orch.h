/*
 * orch.h — the local orchestrator: the /v1/sandbox API of CONTRACT.md over
 * sandboxes that are directories under a root, each served by its own
 * contract server: on 127.0.0.1, or in Unix mode on a Unix socket.
 *
 * Layout of the root (mode 0700): ROOT/.lock (held while serving),
 * ROOT/ID/sandbox.json (mode 0600: id, pool, image, port or socket, ...)
 * and ROOT/ID/workspace/. At start every sandbox found there is served
 * again on the port or socket it had, so its URL stays valid across
 * restarts.
 *
 * Unix mode (unix_path set): the API listens on unix_path, and each
 * sandbox on DIR/XXXXXXXX (8 random hex digits, kept in sandbox.json),
 * DIR being unix_path's directory, which must be private (svc.h,
 * unixsock.h); its URL is http+unix:// and DIR/XXXXXXXX percent-encoded.
 * No TCP port at all.
 */
#ifndef SBX_ORCH_H
#define SBX_ORCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "faults.h"

struct orch;

struct orch_config {
	const char *root;
	const char *token;	  /* bearer token, or NULL for none */
	const char *const *pools; /* "NAME" or "NAME:MAX" (MAX live sandboxes) */
	size_t npools;
	const char *listen; /* the API's address; sandboxes use 127.0.0.1 */
	uint16_t port;
	const char *unix_path;	/* Unix mode: the API's socket (absolute) */
	const char *shell;	/* for the sandboxes' commands */
	bool admin;		/* /_admin/ on the API and on every sandbox */
	bool machinery;		/* new workspaces hold .pool/, .sandbox-agent, ... */
	long default_timeout_s; /* timeoutSeconds of a create that gives none */
	long image_start_ms;	/* an image create is "creating" this long */
	struct faults faults;
};

struct orch *orch_start(const struct orch_config *c, char *err, size_t errlen);
/* The API's TCP port; 0 in Unix mode. */
uint16_t orch_port(const struct orch *o);

/* Stop serving the API and the sandboxes; they stay on disk. */
void orch_stop(struct orch *o);

/* True when s is an RFC 1123 label of at most 63 characters. */
bool orch_valid_id(const char *s);

#endif
