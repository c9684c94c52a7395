/*
 * check.h — the assertions every C unit test uses (tests/backend,
 * tests/journal, tests/vfs, tests/fs). A failed check prints where and why
 * and is counted; a test returns check_done(NAME) from main: 1 when any
 * check failed.
 * Header only: each test program keeps its own counters.
 */
#ifndef SANDBOXFS_TEST_CHECK_H
#define SANDBOXFS_TEST_CHECK_H

#include <stdio.h>

static int check_failures;
static int check_count;
static int check_secrets; /* failure messages checked for secrets */

#define CHECK(cond)                                                                      \
	do {                                                                             \
		check_count++;                                                           \
		if (!(cond)) {                                                           \
			check_failures++;                                                \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
				#cond);                                                  \
		}                                                                        \
	} while (0)

#define CHECK_EQ(a, b)                                                                   \
	do {                                                                             \
		long long a_ = (long long)(a), b_ = (long long)(b);                      \
		check_count++;                                                           \
		if (a_ != b_) {                                                          \
			check_failures++;                                                \
			fprintf(stderr,                                                  \
				"%s:%d: CHECK failed: %s == %s (%lld != %lld)\n",        \
				__FILE__, __LINE__, #a, #b, a_, b_);                     \
		}                                                                        \
	} while (0)

static inline int check_done(const char *name)
{
	if (check_secrets)
		printf("%s: %d failure messages checked for secrets\n", name,
		       check_secrets);
	printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
	return check_failures ? 1 : 0;
}

#endif
