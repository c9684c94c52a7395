/*
 * clock.h — the clocks of sandboxfs and its tools.
 *
 * Durations, timeouts and deadlines use the monotonic clock only: a wall
 * clock set back or forward by NTP or by hand must not stretch or cut a
 * wait. The wall clock is for timestamps people read or the journal keeps.
 */
#ifndef SANDBOXFS_COMMON_CLOCK_H
#define SANDBOXFS_COMMON_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Milliseconds on CLOCK_MONOTONIC: for durations and deadlines only. */
uint64_t common_now_ms(void);

/* Microseconds on CLOCK_MONOTONIC: for latencies. */
uint64_t common_now_us(void);

/* Milliseconds since the epoch on CLOCK_REALTIME: for timestamps shown to
 * users or journaled, never for measuring time. */
uint64_t common_wall_ms(void);

/* Adds ms to *ts, keeping tv_nsec in [0, 1e9). */
void common_timespec_add_ms(struct timespec *ts, uint64_t ms);

/* *ts = CLOCK_MONOTONIC now + ms: the absolute time pthread_cond_timedwait
 * takes for a condition made by common_cond_init. */
void common_deadline_in(struct timespec *ts, uint64_t ms);

/* Initializes cond to time its waits on CLOCK_MONOTONIC (as
 * common_deadline_in counts). Returns 0 or an error number. */
int common_cond_init(pthread_cond_t *cond);

#endif
