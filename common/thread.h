/*
 * thread.h — the threads sandboxfs starts beside libfuse's.
 *
 * Signals meant for the process (SIGINT, SIGTERM, SIGHUP that end the
 * mount) are taken by libfuse's threads; a thread of our own must never
 * take one, so each starts with every signal blocked.
 */
#ifndef SANDBOXFS_COMMON_THREAD_H
#define SANDBOXFS_COMMON_THREAD_H

#include <pthread.h>

/* pthread_create(tid, NULL, fn, arg) with every signal blocked in the new
 * thread (the caller's mask is unchanged). Returns 0 or an error number. */
int common_thread_start(pthread_t *tid, void *(*fn)(void *), void *arg);

#endif
