/*
 * worker.c — the threads a mount runs requests on (a command's /execute, a
 * job's output poller): started with the FUSE threads' signals blocked,
 * counted, and joined at unmount before the backend is freed; and the
 * bounded wait step every wait of the model takes.
 */
#include "mount_i.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/thread.h"

/* True when the FUSE request of the calling thread was interrupted or the
 * mount is going away. */
bool fs_should_stop_waiting(struct fs_mount *m)
{
	if (atomic_load(&m->stopping))
		return true;
	if (m->kernel && m->kernel->interrupted())
		return true;
	if (m->kernel && m->kernel->exited(m))
		return true;
	return false;
}

int fs_wait_step(struct fs_mount *m, bool interruptible)
{
	if (interruptible && fs_should_stop_waiting(m))
		return -EINTR;
	struct timespec ts;
	common_deadline_in(&ts, 50);
	pthread_cond_timedwait(&m->cond, &m->lock, &ts);
	return 0;
}

void fs_worker_exit(struct fs_mount *m)
{
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->nwk; i++)
		if (pthread_equal(m->wk[i].tid, pthread_self()))
			m->wk[i].finished = true;
	pthread_mutex_unlock(&m->lock);
	atomic_fetch_sub(&m->workers, 1);
}

/* Joins the command threads that have finished, up to 64 of them;
 * returns how many it joined. */
static size_t fs_workers_reap(struct fs_mount *m)
{
	pthread_t done[64];
	size_t n = 0;
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->nwk && n < 64;) {
		if (m->wk[i].finished) {
			done[n++] = m->wk[i].tid;
			m->wk[i] = m->wk[--m->nwk];
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&m->lock);
	for (size_t i = 0; i < n; i++)
		pthread_join(done[i], NULL);
	return n;
}

int fs_worker_start(struct fs_mount *m, void *(*fn)(void *), void *arg)
{
	fs_workers_reap(m);
	pthread_mutex_lock(&m->lock);
	int rc = -ENOMEM;
	if (m->nwk == m->capwk) {
		size_t cap = m->capwk ? m->capwk * 2 : 16;
		struct fs_worker *n = realloc(m->wk, cap * sizeof(*n));
		if (n) {
			m->wk = n;
			m->capwk = cap;
		}
	}
	if (m->nwk < m->capwk) {
		pthread_t tid;
		atomic_fetch_add(&m->workers, 1);
		rc = -common_thread_start(&tid, fn, arg);
		if (rc == 0) {
			/* registered before the thread can look for itself:
			 * it takes the lock to mark itself finished */
			m->wk[m->nwk].tid = tid;
			m->wk[m->nwk].finished = false;
			m->nwk++;
		} else {
			atomic_fetch_sub(&m->workers, 1);
		}
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int fs_command_drain(struct fs_mount *m, int seconds)
{
	for (int i = 0; i < seconds * 20 && atomic_load(&m->workers) > 0; i++)
		usleep(50000);
	/* every finished thread is joined before the backend goes */
	while (fs_workers_reap(m) > 0)
		;
	return atomic_load(&m->workers);
}
