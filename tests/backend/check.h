/*
 * check.h — the few assertions the backend tests use. A failed CHECK
 * prints where and why and makes the test exit 1 at the end.
 */
#ifndef SANDBOXFS_TEST_CHECK_H
#define SANDBOXFS_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

static int check_failures;
static int check_count;

#define CHECK(cond)                                                                      \
	do {                                                                             \
		check_count++;                                                           \
		if (!(cond)) {                                                           \
			check_failures++;                                                \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
				#cond);                                                  \
		}                                                                        \
	} while (0)

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

static int check_secrets;

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

static inline int check_done(const char *name)
{
	if (check_secrets)
		printf("%s: %d failure messages checked for secrets\n", name,
		       check_secrets);
	printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
	return check_failures ? 1 : 0;
}

#endif
