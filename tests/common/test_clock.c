/*
 * test_clock.c — common/clock.h: deadline arithmetic, the monotonic clock
 * under pthread_cond_timedwait.
 */
#include <errno.h>
#include <pthread.h>

#include "../lib/check.h"
#include "common/clock.h"

static void test_add_ms(void)
{
	struct timespec ts = {10, 999999999};

	/* One nanosecond short of a second, plus 1 ms: the next second. */
	common_timespec_add_ms(&ts, 1);
	CHECK_EQ(ts.tv_sec, 11);
	CHECK_EQ(ts.tv_nsec, 999999);

	ts = (struct timespec){10, 500000000};
	common_timespec_add_ms(&ts, 500);
	CHECK_EQ(ts.tv_sec, 11);
	CHECK_EQ(ts.tv_nsec, 0);

	ts = (struct timespec){10, 400000000};
	common_timespec_add_ms(&ts, 2599);
	CHECK_EQ(ts.tv_sec, 12);
	CHECK_EQ(ts.tv_nsec, 999000000);

	ts = (struct timespec){0, 0};
	common_timespec_add_ms(&ts, 0);
	CHECK_EQ(ts.tv_sec, 0);
	CHECK_EQ(ts.tv_nsec, 0);

	ts = (struct timespec){7, 123};
	common_timespec_add_ms(&ts, 86400000);
	CHECK_EQ(ts.tv_sec, 7 + 86400);
	CHECK_EQ(ts.tv_nsec, 123);
}

static void test_clocks(void)
{
	uint64_t ms = common_now_ms(), us = common_now_us();
	struct timespec mono;

	clock_gettime(CLOCK_MONOTONIC, &mono);
	/* The same clock: now_us / 1000 is within a few ms of now_ms. */
	CHECK(us / 1000 >= ms && us / 1000 - ms < 1000);
	CHECK((uint64_t)mono.tv_sec * 1000 >= ms - 1000 &&
	      (uint64_t)mono.tv_sec * 1000 <= ms + 1000);
	CHECK(common_now_ms() >= ms);

	/* The wall clock is the epoch's: after 2020, near time(). */
	uint64_t wall = common_wall_ms();
	CHECK(wall > 1577836800000ULL);
	uint64_t t = (uint64_t)time(NULL) * 1000;
	CHECK(wall + 2000 >= t && wall <= t + 2000);
}

static void test_deadline(void)
{
	struct timespec before, dl, after;

	clock_gettime(CLOCK_MONOTONIC, &before);
	common_deadline_in(&dl, 1500);
	clock_gettime(CLOCK_MONOTONIC, &after);
	CHECK(dl.tv_nsec >= 0 && dl.tv_nsec < 1000000000L);
	int64_t lo = (int64_t)before.tv_sec * 1000 + before.tv_nsec / 1000000 + 1500;
	int64_t hi = (int64_t)after.tv_sec * 1000 + after.tv_nsec / 1000000 + 1500;
	int64_t got = (int64_t)dl.tv_sec * 1000 + dl.tv_nsec / 1000000;
	CHECK(got >= lo && got <= hi);

	/* A condition from common_cond_init waits until a common deadline,
	 * not for a wall-clock time (which would be decades away). */
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cond;
	CHECK_EQ(common_cond_init(&cond), 0);
	uint64_t t0 = common_now_ms();
	common_deadline_in(&dl, 50);
	pthread_mutex_lock(&mu);
	int rc;
	do
		rc = pthread_cond_timedwait(&cond, &mu, &dl);
	while (rc == 0);
	pthread_mutex_unlock(&mu);
	uint64_t waited = common_now_ms() - t0;
	CHECK_EQ(rc, ETIMEDOUT);
	CHECK(waited >= 49 && waited < 10000);
	pthread_cond_destroy(&cond);
}

int main(void)
{
	test_add_ms();
	test_clocks();
	test_deadline();
	return check_done("common clock");
}
