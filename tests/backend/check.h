/*
 * check.h — tests/lib/check.h, and the assertions only the backend tests
 * need: a backend status, and a failure message free of secrets.
 */
#ifndef SANDBOXFS_TEST_BACKEND_CHECK_H
#define SANDBOXFS_TEST_BACKEND_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/check.h"
#include "backend.h"

#define CHECK_ST(expr, want)                                                             \
	do {                                                                             \
		enum backend_status got_ = (expr);                                       \
		check_count++;                                                           \
		if (got_ != (want)) {                                                    \
			check_failures++;                                                \
			fprintf(stderr, "%s:%d: %s: got '%s', want '%s'\n", __FILE__,    \
				__LINE__, #expr, backend_status_name(got_),              \
				backend_status_name(want));                              \
		}                                                                        \
	} while (0)

/* A failure message must not name the URL, host:port, port or token. */
static inline void check_no_secret(const struct backend_error *e, const char *url,
				   int port, const char *token)
{
	char hp[64], p[16];

	snprintf(hp, sizeof(hp), "127.0.0.1:%d", port);
	snprintf(p, sizeof(p), "%d", port);
	check_secrets++;
	CHECK(e->message[0] != '\0');
	CHECK(strstr(e->message, url) == NULL);
	CHECK(strstr(e->message, hp) == NULL);
	CHECK(strstr(e->message, p) == NULL);
	CHECK(strstr(e->message, "127.0.0.1") == NULL);
	CHECK(!token || strstr(e->message, token) == NULL);
}

#endif
