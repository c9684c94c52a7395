/*
 * check.h — the few assertions the backend tests use. A failed CHECK
 * prints where and why and makes the test exit 1 at the end.
 */
#ifndef SANDBOXFS_TEST_CHECK_H
#define SANDBOXFS_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
			fprintf(stderr, "%s:%d: %s: got '%s', want '%s'\n", __FILE__,     \
				__LINE__, #expr, backend_status_name(got_),              \
				backend_status_name(want));                              \
		}                                                                        \
	} while (0)

static inline int check_done(const char *name)
{
	printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
	return check_failures ? 1 : 0;
}

#endif
