/*
 * keepalive.c — keeps the sandboxes this mount holds something of (an open
 * file, a pending upload, a running command) from the orchestrator's idle
 * teardown (DESIGN.md §4): a GET /healthz at half the idle timeout the
 * mount set at create, or every FS_KEEPALIVE_DEFAULT_S seconds when the
 * sandbox's idle timeout is not known here. -o keepalive=no turns it off.
 */
#include "mount_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/thread.h"

/* A pool's maxIdleSeconds is not known here; a minute is cheap and shorter
 * than any idle timeout a pool would sensibly set. */
#define FS_KEEPALIVE_DEFAULT_S 60

/* How often the thread looks; the shortest interval it keeps. */
#define FS_KEEPALIVE_TICK_MS 500

struct fs_keepalive_due {
	struct fs_sandbox *sb; /* sandbox objects live as long as the mount */
	char *url;
};

static uint64_t fs_keepalive_interval_ms(const struct fs_sandbox *sb)
{
	if (sb->idle_s > 0)
		return (uint64_t)sb->idle_s * 500; /* half of it, in ms */
	return (uint64_t)FS_KEEPALIVE_DEFAULT_S * 1000;
}

/* The sandboxes whose keepalive is due, with copies of their URLs (the
 * lock is not held across the requests). */
static size_t fs_keepalive_collect(struct fs_mount *m, struct fs_keepalive_due **out)
{
	uint64_t now = common_now_ms();
	*out = NULL;
	pthread_mutex_lock(&m->lock);
	size_t n = 0;
	struct fs_keepalive_due *due = calloc(m->nsbs + 1, sizeof(*due));
	for (size_t i = 0; due && i < m->nsbs; i++) {
		struct fs_sandbox *sb = m->sbs[i];
		if (!sb->present || !sb->url || sb->state != FS_SB_READY ||
		    sb->lifecycle_busy)
			continue;
		if (sb->keepalive_ms && now - sb->keepalive_ms < fs_keepalive_interval_ms(sb))
			continue;
		due[n].sb = sb;
		due[n].url = strdup(sb->url);
		if (due[n].url)
			n++;
	}
	pthread_mutex_unlock(&m->lock);
	*out = due;
	return n;
}

static void fs_keepalive_pass(struct fs_mount *m)
{
	struct fs_keepalive_due *due;
	size_t n = fs_keepalive_collect(m, &due);
	for (size_t i = 0; i < n; i++) {
		struct fs_sandbox *sb = due[i].sb;
		if (atomic_load(&m->stopping)) {
			free(due[i].url);
			continue;
		}
		pthread_mutex_lock(&m->lock);
		bool busy = sb->busy || fs_jobs_running(sb);
		struct workspace *ws = sb->ws;
		pthread_mutex_unlock(&m->lock);
		/* Held: a command or a job runs, or a file is open or unsaved. */
		if (busy || workspace_held(ws)) {
			struct backend_error err = {0};
			enum backend_status st = backend_health(m->backend, due[i].url, &err);
			atomic_fetch_add(&m->n.keepalives, 1);
			if (st != BACKEND_OK)
				atomic_fetch_add(&m->n.keepalive_errors, 1);
			pthread_mutex_lock(&m->lock);
			sb->keepalive_ms = common_now_ms();
			pthread_mutex_unlock(&m->lock);
		}
		free(due[i].url);
	}
	free(due);
}

static void *fs_keepalive_main(void *arg)
{
	struct fs_mount *m = arg;
	pthread_mutex_lock(&m->lock);
	while (!atomic_load(&m->stopping)) {
		struct timespec ts;
		common_deadline_in(&ts, FS_KEEPALIVE_TICK_MS);
		pthread_cond_timedwait(&m->cond, &m->lock, &ts);
		if (atomic_load(&m->stopping))
			break;
		pthread_mutex_unlock(&m->lock);
		fs_keepalive_pass(m);
		pthread_mutex_lock(&m->lock);
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

int fs_keepalive_start(struct fs_mount *m)
{
	if (!m->opt.keepalive_on || m->keepalive_started)
		return 0;
	int rc = common_thread_start(&m->keepalive, fs_keepalive_main, m);
	if (rc != 0)
		return -rc;
	m->keepalive_started = true;
	return 0;
}

void fs_keepalive_stop(struct fs_mount *m)
{
	if (!m->keepalive_started)
		return;
	pthread_mutex_lock(&m->lock);
	atomic_store(&m->stopping, true);
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
	pthread_join(m->keepalive, NULL);
	m->keepalive_started = false;
}
