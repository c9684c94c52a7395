/*
 * orchlist.c — the orchestrator's list of sandboxes (DESIGN.md §4): what
 * the root shows, refreshed at most every listing_ttl. A sandbox first
 * seen here is foreign; one of ours that left the list is gone, and its
 * workspace is told (its unsaved files go to rescue).
 */
#include "mount_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static enum fs_sb_state fs_state_of(enum backend_sandbox_state s)
{
	switch (s) {
	case BACKEND_SANDBOX_CREATING:
		return FS_SB_CREATING;
	case BACKEND_SANDBOX_READY:
		return FS_SB_READY;
	case BACKEND_SANDBOX_FAILED:
		return FS_SB_FAILED;
	case BACKEND_SANDBOX_DELETING:
		return FS_SB_DELETING;
	default:
		return FS_SB_UNKNOWN;
	}
}

/* Tells the workspaces of sandboxes that moved or vanished (flags set by
 * a listing). The sandbox objects live as long as the mount; the array may
 * move, so it is read under the lock. */
static void fs_workspaces_follow(struct fs_mount *m)
{
	pthread_mutex_lock(&m->lock);
	size_t n = m->nsbs;
	pthread_mutex_unlock(&m->lock);
	for (size_t i = 0; i < n; i++) {
		pthread_mutex_lock(&m->lock);
		struct fs_sandbox *sb = m->sbs[i];
		bool vanished = sb->ws_vanished, moved = sb->ws_moved;
		struct workspace *ws = vanished ? NULL : sb->ws;
		sb->ws_vanished = false;
		pthread_mutex_unlock(&m->lock);
		if (!vanished && !moved)
			continue;
		/* Restored pending uploads make a workspace before any use;
		 * a vanished sandbox's was unhooked by the listing. */
		if (!ws)
			ws = workspace_find(m->wscache, sb->id);
		if (vanished) {
			if (ws) {
				workspace_sandbox_gone(ws);
				workspace_forget(m->wscache, sb->id);
			}
			continue;
		}
		pthread_mutex_lock(&m->lock);
		if (ws && !sb->ws && sb->ws_moved)
			sb->ws = ws;
		pthread_mutex_unlock(&m->lock);
		if (fs_sandbox_follow(m, sb) < 0)
			fs_log("sandbox %s moved; its workspace waits until the new "
			       "address is journaled",
			       sb->id);
	}
}

int fs_orch_refresh(struct fs_mount *m, bool force)
{
	if (!m->have_orch)
		return 0;
	uint64_t now = common_wall_ms();
	pthread_mutex_lock(&m->lock);
	bool fresh =
	    m->list_try_ms && now - m->list_try_ms < (uint64_t)m->opt.listing_ttl_ms;
	int last = m->list_errno;
	pthread_mutex_unlock(&m->lock);
	if (fresh && !force)
		return last;

	pthread_mutex_lock(&m->list_lock);
	/* another thread may have refreshed while we waited */
	pthread_mutex_lock(&m->lock);
	fresh = m->list_try_ms && m->list_try_ms >= now;
	last = m->list_errno;
	pthread_mutex_unlock(&m->lock);
	if (fresh) {
		pthread_mutex_unlock(&m->list_lock);
		return last;
	}

	uint64_t start = common_wall_ms();
	struct backend_sandbox_list l = {0};
	struct backend_error err = {0};
	enum backend_status st = backend_orch_list(m->backend, &m->orch, &l, &err);
	atomic_fetch_add(&m->n.list_refreshes, 1);

	pthread_mutex_lock(&m->lock);
	m->list_try_ms = start;
	if (st != BACKEND_OK) {
		atomic_fetch_add(&m->n.list_errors, 1);
		m->list_errno = backend_errno(st, BACKEND_OP_SANDBOX);
		snprintf(m->list_error, sizeof(m->list_error), "%s: %s",
			 backend_status_name(st), err.message);
		last = m->list_errno; /* read under the lock it is written under */
		pthread_mutex_unlock(&m->lock);
		pthread_mutex_unlock(&m->list_lock);
		return last;
	}
	m->list_errno = 0;
	m->list_error[0] = '\0';
	m->list_ms = start;
	/* Sandboxes whose URL changed (ws_moved) or that vanished
	 * (ws_vanished): their workspaces are told below, without the lock
	 * (a journal append). */
	bool tell = false;
	for (size_t i = 0; i < l.count; i++) {
		struct backend_sandbox *s = &l.items[i];
		if (!s->id || !backend_sandbox_id_valid(s->id))
			continue;
		struct fs_sandbox *sb = fs_sandbox_find(m, s->id);
		if (sb && sb->attached && sb->present)
			continue; /* an attached one with the same id wins */
		if (!sb) {
			/* not created by this mount: someone else's */
			sb = fs_sandbox_add(m, s->id);
			if (!sb)
				continue; /* out of memory: shown at the next refresh */
			sb->foreign = true;
		}
		if (sb->lifecycle_busy)
			continue;
		if (!sb->present) {
			/* deleted, detached or forgotten by us earlier, live
			 * again: a create of ours that was lost after all, or
			 * someone else's with the same id */
			sb->present = true;
			sb->attached = false;
			sb->owned = sb->lost_create;
			sb->foreign = !sb->lost_create;
			sb->lost_create = false;
			if (sb->foreign) {
				sb->bound_s = 0;
				sb->idle_s = 0;
				fs_set_str(&sb->spec, NULL);
				sb->journaled = false; /* adopted as foreign */
			}
		}
		sb->listed_ms = start;
		sb->state = fs_state_of(s->state);
		bool had_url = sb->url != NULL;
		if (s->url && (!sb->url || strcmp(sb->url, s->url) != 0) &&
		    fs_set_str(&sb->url, s->url) == 0) {
			sb->journaled = false; /* else the next refresh retries */
			/* The workspace follows: file operations and retries
			 * go to the new URL, never the old one. */
			if (had_url)
				tell = sb->ws_moved = true;
		}
		if (!sb->pool)
			fs_set_str(&sb->pool, s->pool);
		if (!sb->image)
			fs_set_str(&sb->image, s->image);
		if (s->error)
			fs_set_str(&sb->last_error, s->error);
		if (!sb->created_ms)
			sb->created_ms = start;
	}
	/* Owned sandboxes missing from a listing newer than their creation
	 * vanished: they show "gone" and are never recreated. */
	for (size_t i = 0; i < m->nsbs; i++) {
		struct fs_sandbox *sb = m->sbs[i];
		if (!sb->present || sb->attached || sb->listed_ms == start ||
		    sb->lifecycle_busy)
			continue;
		if (sb->created_ms >= start)
			continue;
		if (sb->state == FS_SB_UNKNOWN && !sb->url)
			continue; /* a lost create: reconciled by id */
		if (!sb->in_journal_state) {
			sb->present = false; /* only ever seen in a listing */
			continue;
		}
		if (sb->state == FS_SB_DELETING) {
			/* our delete went through after all */
			continue;
		}
		if (sb->state != FS_SB_GONE) {
			sb->state = FS_SB_GONE;
			fs_set_str(&sb->last_error,
				   "the sandbox vanished from the orchestrator");
			/* Its URL is no longer its own: nothing goes there
			 * again, and its unsaved files go to rescue. */
			tell = sb->ws_vanished = true;
			sb->ws_moved = false;
			sb->ws = NULL; /* found again by id to be told */
			fs_set_str(&sb->url, NULL);
			sb->journaled = false;
		}
	}
	pthread_mutex_unlock(&m->lock);
	pthread_mutex_unlock(&m->list_lock);
	backend_sandbox_list_clear(&l);

	if (tell)
		fs_workspaces_follow(m);
	return 0;
}

