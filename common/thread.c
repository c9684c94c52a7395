/*
 * thread.c — threads started with every signal blocked (common/thread.h).
 */
#include "common/thread.h"

#include <signal.h>

int common_thread_start(pthread_t *tid, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int rc = pthread_create(tid, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}
