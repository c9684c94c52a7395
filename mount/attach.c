/*
 * attach.c — sandboxes given by id and URL (DESIGN.md §4): attach, detach,
 * and the -o sandboxes= file. sandboxfs never owns an attached sandbox:
 * rmdir only detaches it.
 */
#include "mount_i.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* http(s) or http+unix (backend.h), of a sane length */
static bool fs_url_valid(const char *url)
{
	return strlen(url) < 2048 && backend_url_valid(url);
}

int fs_sandbox_attach(struct fs_mount *m, const char *id, const char *url)
{
	if (!backend_sandbox_id_valid(id) || !fs_url_valid(url))
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	struct fs_sandbox *sb = fs_sandbox_find(m, id);
	if (sb && sb->present) {
		bool same =
		    sb->attached && sb->url && strcmp(sb->url, url) == 0 && sb->journaled;
		pthread_mutex_unlock(&m->lock);
		return same ? 0 : -EEXIST;
	}
	if (sb && sb->lifecycle_busy) {
		pthread_mutex_unlock(&m->lock);
		return -EBUSY;
	}
	pthread_mutex_unlock(&m->lock);

	struct journal_record r = {.kind = JOURNAL_ATTACH};
	r.sandbox = (char *)id;
	r.url = (char *)url;
	if (fs_journal(m, &r) < 0)
		return -EIO;
	pthread_mutex_lock(&m->lock);
	sb = fs_sandbox_add(m, id);
	if (!sb || fs_set_str(&sb->url, url) < 0) {
		/* journaled: the next mount shows it attached */
		pthread_mutex_unlock(&m->lock);
		return -ENOMEM;
	}
	sb->present = true;
	sb->attached = true;
	sb->owned = false;
	sb->journaled = true;
	sb->in_journal_state = true;
	sb->state = FS_SB_READY;
	if (!sb->created_ms)
		sb->created_ms = common_wall_ms();
	(void)fs_set_str(&sb->last_error, NULL);
	pthread_mutex_unlock(&m->lock);
	atomic_fetch_add(&m->n.attaches, 1);
	return 0;
}

int fs_sandbox_detach(struct fs_mount *m, const char *id)
{
	pthread_mutex_lock(&m->lock);
	struct fs_sandbox *sb = fs_sandbox_find(m, id);
	if (!sb || !sb->present) {
		pthread_mutex_unlock(&m->lock);
		return -ENOENT;
	}
	if (!sb->attached) {
		pthread_mutex_unlock(&m->lock);
		return -EINVAL; /* owned: rmdir deletes it */
	}
	if (sb->busy) {
		pthread_mutex_unlock(&m->lock);
		return -EBUSY;
	}
	pthread_mutex_unlock(&m->lock);
	struct journal_record r = {.kind = JOURNAL_DETACH};
	r.sandbox = (char *)id;
	if (fs_journal(m, &r) < 0)
		return -EIO;
	pthread_mutex_lock(&m->lock);
	sb->present = false;
	sb->attached = false;
	struct workspace *ws = sb->ws;
	sb->ws = NULL;
	pthread_mutex_unlock(&m->lock);
	if (ws && m->wscache)
		workspace_forget(m->wscache, id);
	atomic_fetch_add(&m->n.detaches, 1);
	return 0;
}

int fs_attach_file(struct fs_mount *m, const char *path, char *msg, size_t msglen)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(msg, msglen, "sandboxes=%s: %s", path, strerror(errno));
		return -1;
	}
	char line[4096];
	int lineno = 0, rc = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		char *p = line;
		while (isspace((unsigned char)*p))
			p++;
		if (!*p || *p == '#')
			continue;
		char *save = NULL;
		char *id = strtok_r(p, " \t\r\n", &save);
		char *url = strtok_r(NULL, " \t\r\n", &save);
		char *extra = strtok_r(NULL, " \t\r\n", &save);
		if (!id || !url || extra) {
			snprintf(msg, msglen, "sandboxes=%s line %d: expected \"ID URL\"",
				 path, lineno);
			rc = -1;
			break;
		}
		int e = fs_sandbox_attach(m, id, url);
		if (e == -EEXIST) {
			/* attached earlier with another URL: the file wins */
			pthread_mutex_lock(&m->lock);
			struct fs_sandbox *sb = fs_sandbox_find(m, id);
			bool att = sb && sb->attached;
			pthread_mutex_unlock(&m->lock);
			if (att && fs_sandbox_detach(m, id) == 0)
				e = fs_sandbox_attach(m, id, url);
		}
		if (e < 0) {
			snprintf(msg, msglen, "sandboxes=%s line %d: sandbox %s: %s",
				 path, lineno, id,
				 e == -EINVAL ? "invalid id or URL" : strerror(-e));
			rc = -1;
			break;
		}
	}
	fclose(f);
	return rc;
}

