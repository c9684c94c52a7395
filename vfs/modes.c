/*
 * modes.c — local metadata (struct wsmeta: the modes set here, which the
 * contract does not carry) and the queued chmod batches run in the sandbox
 * before a command (workspace_before_command), plus the command seats.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "workspace_i.h"

/* --- local metadata -------------------------------------------------------------*/

struct wsmeta *meta_get(struct workspace *ws, const char *path, bool create)
{
	struct hlink *l = htab_find(&ws->metas, path);
	if (l)
		return htab_entry(l, struct wsmeta, h);
	if (!create)
		return NULL;
	struct wsmeta *m = calloc(1, sizeof(*m));
	if (!m || !(m->path = strdup(path))) {
		free(m);
		return NULL;
	}
	m->h.key = m->path;
	htab_add(&ws->metas, &m->h);
	return m;
}

static void meta_free(struct workspace *ws, struct wsmeta *m)
{
	htab_del(&ws->metas, &m->h);
	free(m->path);
	free(m);
}

void meta_drop(struct workspace *ws, const char *path)
{
	struct wsmeta *m = meta_get(ws, path, false);
	if (m)
		meta_free(ws, m);
}

void meta_move_one(struct workspace *ws, const char *from, const char *to)
{
	if (strcmp(from, to) == 0)
		return;
	struct wsmeta *m = meta_get(ws, from, false);
	if (m)
		htab_del(&ws->metas, &m->h);
	meta_drop(ws, to); /* what was at the destination is replaced */
	if (!m)
		return;
	char *np = strdup(to);
	if (!np) {
		free(m->path);
		free(m);
		return;
	}
	free(m->path);
	m->path = np;
	m->h.key = np;
	/* A file put at a new name has the server's default mode. */
	if (m->has_mode)
		m->mode_queued = true;
	htab_add(&ws->metas, &m->h);
}

/* Moves the metadata of from, and of everything below it, to to. */
void meta_move(struct workspace *ws, const char *from, const char *to)
{
	size_t nfrom = strlen(from);
	struct wsmeta **moved = NULL;
	size_t n = 0, cap = 0;
	for (size_t i = 0; i < ws->metas.nb; i++)
		for (struct hlink *l = ws->metas.b[i]; l; l = l->next) {
			struct wsmeta *m = htab_entry(l, struct wsmeta, h);
			if (strcmp(m->path, from) != 0 && !ws_is_under(m->path, from))
				continue;
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				struct wsmeta **p = realloc(moved, cap * sizeof(*p));
				if (!p)
					goto out;
				moved = p;
			}
			moved[n++] = m;
		}
	for (size_t i = 0; i < n; i++)
		htab_del(&ws->metas, &moved[i]->h);
	/* What was at the destination is replaced. */
	meta_drop(ws, to);
	for (size_t i = 0; i < n; i++) {
		struct wsmeta *m = moved[i];
		char *np = NULL;
		if (asprintf(&np, "%s%s", to, m->path + nfrom) < 0) {
			free(m->path);
			free(m);
			continue;
		}
		meta_drop(ws, np);
		free(m->path);
		m->path = np;
		m->h.key = np;
		/* A file put at a new name has the server's default mode. */
		if (m->has_mode)
			m->mode_queued = true;
		htab_add(&ws->metas, &m->h);
	}
out:
	free(moved);
}

/* The batch runs as "sh -c CMD": Linux refuses (E2BIG) any single exec
 * argument over MAX_ARG_STRLEN, 128 KiB, so a batch stays well under it,
 * counted as quoted. */
#define MODE_BATCH_BYTES (96 * 1024)

static size_t quoted_len(const char *s)
{
	size_t n = 3; /* space and two quotes */
	for (; *s; s++)
		n += *s == '\'' ? 4 : 1;
	return n;
}

void workspace_seat(struct workspace *ws, bool held)
{
	if (!ws)
		return;
	struct wscache *c = ws->c;
	pthread_mutex_lock(&ws->lock);
	ws->seats += held ? 1 : -1;
	if (ws->seats < 0)
		ws->seats = 0;
	pthread_mutex_unlock(&ws->lock);
	pthread_mutex_lock(&c->lock);
	pthread_cond_broadcast(&c->cond); /* the retry thread may go on */
	pthread_mutex_unlock(&c->lock);
}

int workspace_before_command(struct workspace *ws, char *why, size_t whylen)
{
	if (why && whylen)
		why[0] = '\0';
	if (!ws)
		return 0;
	struct wscache *c = ws->c;
	/* The command sees what was written here, even by descriptors still
	 * open or not yet released (an empty "touch" is uploaded at release,
	 * which the kernel sends after close returns). An upload that cannot
	 * be delivered now stops the command: it would run before the write,
	 * and the retry would then put old data over what it made. */
	char stuck[512];
	int failed = ws_flush_all(c, ws, 60000, true, stuck, sizeof(stuck));
	if (failed > 0) {
		if (why && whylen)
			snprintf(why, whylen,
				 "not sent: the upload of workspace/%s is still "
				 "pending%s; the command would overtake it",
				 stuck[0] ? stuck : "a file",
				 failed > 1 ? " (and others)" : "");
		return -EIO;
	}
	/* Links made here, then modes (a link's own mode is never set). A
	 * link not made is logged and does not stop the command. */
	if (c->cfg.exec)
		(void)links_apply(ws, true);
	for (int round = 0; round < 64; round++) {
		/* One command per round: "chmod MODE -- 'a' 'b'" groups. */
		pthread_mutex_lock(&ws->lock);
		struct wsmeta **batch = NULL;
		size_t n = 0, cap = 0, bytes = 0;
		for (size_t i = 0; i < ws->metas.nb && bytes < MODE_BATCH_BYTES; i++)
			for (struct hlink *l = ws->metas.b[i];
			     l && bytes < MODE_BATCH_BYTES; l = l->next) {
				struct wsmeta *m = htab_entry(l, struct wsmeta, h);
				if (!m->mode_queued)
					continue;
				/* Not on the server yet: applied after its upload. */
				struct wsfile *f = file_find(ws, m->path);
				if (f && !f->remote_exists)
					continue;
				if (n == cap) {
					cap = cap ? cap * 2 : 32;
					struct wsmeta **p =
					    realloc(batch, cap * sizeof(*p));
					if (!p)
						break;
					batch = p;
				}
				batch[n++] = m;
				bytes += quoted_len(m->path) + 1;
			}
		if (n == 0) {
			pthread_mutex_unlock(&ws->lock);
			free(batch);
			break;
		}
		if (!c->cfg.exec) {
			pthread_mutex_unlock(&ws->lock);
			free(batch);
			return -ENOTSUP;
		}
		char *cmd = NULL;
		size_t len = 0;
		FILE *out = open_memstream(&cmd, &len);
		char **paths = calloc(n, sizeof(*paths));
		int rc = out && paths ? 0 : -ENOMEM;
		if (rc == 0)
			fputs("r=0;", out);
		for (size_t i = 0; i < n && rc == 0; i++) {
			if (!batch[i])
				continue;
			mode_t mode = batch[i]->mode & 07777;
			fprintf(out, " chmod %04o --", (unsigned)mode);
			for (size_t k = i; k < n && rc == 0; k++) {
				if (!batch[k] || (batch[k]->mode & 07777) != mode)
					continue;
				char *q = common_sh_quote(batch[k]->path);
				if (!q) {
					rc = -ENOMEM;
					break;
				}
				fprintf(out, " %s", q);
				free(q);
				batch[k]->mode_queued = false;
				paths[k] = strdup(batch[k]->path);
				batch[k] = NULL;
			}
			fputs(" || r=1;", out);
		}
		if (out) {
			fputs(" exit $r", out);
			if (ferror(out) && rc == 0)
				rc = -ENOMEM;
			fclose(out);
		}
		pthread_mutex_unlock(&ws->lock);
		free(batch);

		int code = 0;
		if (rc == 0)
			rc = c->cfg.exec(c->cfg.exec_ctx, ws->id, cmd, true, &code);
		free(cmd);

		pthread_mutex_lock(&ws->lock);
		for (size_t i = 0; i < n; i++) {
			if (!paths || !paths[i])
				continue;
			struct wsmeta *m = meta_get(ws, paths[i], false);
			/* EIO: sent, outcome unknown; like any command it is
			 * never sent again, and its modes are not known to be
			 * applied. Other errors: not sent, still queued. */
			if (m && rc < 0 && rc != -EIO)
				m->mode_queued = true;
			else if (m && (rc == -EIO || code != 0))
				m->has_mode = false;
			free(paths[i]);
		}
		pthread_mutex_unlock(&ws->lock);
		free(paths);
		/* A mode not applied is reported by the file's mode, never by
		 * holding the user's command back. */
		if (rc < 0) {
			ws_log(ws, "queued modes not applied: %s", strerror(-rc));
			break;
		}
		if (code != 0)
			ws_log(ws, "applying queued modes failed (exit %d)", code);
	}
	return 0;
}

void ws_changes_clear(struct ws_changes *sum)
{
	for (size_t i = 0; i < sum->nfiles; i++)
		free(sum->files[i]);
	memset(sum, 0, sizeof(*sum));
}

bool ws_changes_precise(const struct ws_changes *sum)
{
	return sum && sum->whole && !sum->dirs && !sum->many;
}

/* Names may have come, gone or changed type (a directory, link or the
 * root was listed), or a line was not understood: the kernel must forget
 * everything it holds of the workspace. */
static void changes_any_name(struct ws_changes *sum)
{
	if (sum)
		sum->dirs = true;
}

/* One listed name for the summary: a regular file is kept by path. */
static void changes_add(struct ws_changes *sum, unsigned mode, const char *path)
{
	if (!sum)
		return;
	if (!S_ISREG(mode)) {
		changes_any_name(sum);
		return;
	}
	char *p = sum->nfiles < WS_CHANGES_FILES ? strdup(path) : NULL;
	if (p)
		sum->files[sum->nfiles++] = p;
	else
		sum->many = true;
}

size_t workspace_note_changes(struct workspace *ws, const char *list, size_t len,
			      struct ws_changes *sum)
{
	if (sum) {
		ws_changes_clear(sum);
		/* the wrapper's last line, after find's: it ran to the end */
		size_t el = strlen(WS_CHANGES_END);
		sum->whole = len >= el + 1 && list[len - 1] == '\n' &&
			     memcmp(list + len - 1 - el, WS_CHANGES_END, el) == 0 &&
			     (len == el + 1 || list[len - el - 2] == '\n');
	}
	if (!ws) {
		changes_any_name(sum);
		return 0;
	}
	size_t taken = 0;
	struct wslinkrec *recs = NULL;
	size_t nrecs = 0;
	pthread_mutex_lock(&ws->lock);
	for (size_t i = 0; i < len;) {
		const char *line = list + i;
		const char *nl = memchr(line, '\n', len - i);
		size_t n = nl ? (size_t)(nl - line) : len - i;
		i += n + (nl ? 1 : 0);
		if (!nl)
			break; /* a cut last line */
		char buf[4200];
		if (n >= sizeof(buf)) {
			changes_any_name(sum);
			continue;
		}
		memcpy(buf, line, n);
		buf[n] = '\0';
		unsigned mode;
		long long mtime, size;
		int at = 0;
		if (sscanf(buf, "%x %lld %lld %n", &mode, &mtime, &size, &at) != 3 || !at) {
			if (strcmp(buf, WS_CHANGES_END) != 0)
				changes_any_name(sum); /* not understood */
			continue;
		}
		/* A link's line is followed by one of its target, whose
		 * length is the link's size (a target holding a newline
		 * does not match it and is not taken). */
		char target[4200];
		bool link_ok = false;
		if (S_ISLNK(mode)) {
			const char *tl = list + i;
			const char *tnl = i < len ? memchr(tl, '\n', len - i) : NULL;
			if (!tnl)
				break;
			size_t tn = (size_t)(tnl - tl);
			i += tn + 1;
			if (size > 0 && tn == (size_t)size && tn < sizeof(target)) {
				memcpy(target, tl, tn);
				target[tn] = '\0';
				link_ok = true;
			}
		}
		const char *path = buf + at;
		if (strncmp(path, "./", 2) != 0 || !path[2] || ws_check_path(path + 2) < 0) {
			changes_any_name(sum); /* "." itself (the root changed), or odd */
			continue;
		}
		path += 2;
		changes_add(sum, mode, path);
		if (S_ISLNK(mode)) {
			if (link_ok) {
				links_note(ws, path, target, &recs, &nrecs);
				taken++;
			}
			continue;
		}
		links_note(ws, path, NULL, &recs, &nrecs); /* not a link (any more) */
		if (!S_ISREG(mode) && !S_ISDIR(mode))
			continue;
		struct wsmeta *m = meta_get(ws, path, true);
		if (!m) {
			changes_any_name(sum); /* the rest is not read */
			break;
		}
		m->has_mode = true;
		m->mode = mode & 07777;
		m->mode_queued = false; /* the sandbox's own */
		m->has_times = true;
		m->mtime.tv_sec = (time_t)mtime;
		m->mtime.tv_nsec = 0;
		m->atime = m->mtime;
		taken++;
	}
	pthread_mutex_unlock(&ws->lock);
	links_journal(ws, recs, nrecs);
	return taken;
}
