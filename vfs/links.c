/*
 * links.c — symbolic links of the workspace (DESIGN.md §3). The contract
 * has none: its listing follows a link for the kind and size and gives no
 * target. So the core remembers which names are links and their targets
 * (ws->links), from two sources:
 *  - symlink through the mount: journaled (LINK_INTENT, durably) before
 *    it returns, queued, and made in the sandbox by "ln -s" in a batch
 *    command through cfg.exec, at once when the seat is free, else before
 *    the next command (workspace_before_command), as modes are;
 *  - the list of what a command changed (workspace_note_changes), whose
 *    lines for links carry their targets.
 * The knowledge outlives listing refreshes (links_fix_listing gives the
 * listed name the link's type and size) and is forgotten when the name is
 * removed or renamed through the mount, when a change list says it is no
 * longer a link, or when a fresh listing no longer has it. Links known in
 * the sandbox are journaled too (LINK_DONE), so they are links again
 * after a remount (wscache_restore).
 *
 * A link is removed or renamed in the sandbox through a command ("rm -f",
 * "mv -f"), never with the contract's DELETE: a server that followed the
 * link would delete its target, a whole tree for a link to a directory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workspace_i.h"

/* A batch of "ln -s" stays well under Linux's 128 KiB bound of one exec
 * argument (it runs as "sh -c CMD"). */
#define LINK_BATCH_BYTES (64 * 1024)
/* Targets as long as a path may be (readlink's PATH_MAX). */
#define LINK_TARGET_MAX 4095

struct wslink *link_find(struct workspace *ws, const char *path)
{
	struct hlink *l = htab_find(&ws->links, path);
	return l ? htab_entry(l, struct wslink, h) : NULL;
}

static void link_free(struct workspace *ws, struct wslink *l)
{
	htab_del(&ws->links, &l->h);
	free(l->path);
	free(l->target);
	free(l);
}

void link_drop(struct workspace *ws, const char *path)
{
	struct wslink *l = link_find(ws, path);
	if (l)
		link_free(ws, l);
}

struct wslink *link_set(struct workspace *ws, const char *path, const char *target,
			bool queued)
{
	struct wslink *l = link_find(ws, path);
	char *t = strdup(target);
	if (!t)
		return NULL;
	if (!l) {
		l = calloc(1, sizeof(*l));
		if (!l || !(l->path = strdup(path))) {
			free(l);
			free(t);
			return NULL;
		}
		l->h.key = l->path;
		htab_add(&ws->links, &l->h);
	}
	free(l->target);
	l->target = t;
	l->queued = queued;
	return l;
}

void links_free_all(struct workspace *ws)
{
	for (size_t i = 0; i < ws->links.nb; i++) {
		struct hlink *h = ws->links.b[i];
		while (h) {
			struct hlink *next = h->next;
			link_free(ws, htab_entry(h, struct wslink, h));
			h = next;
		}
	}
	htab_free(&ws->links);
}

/* The name of path in directory dir, or NULL when path is not in it. */
static const char *name_in(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	const char *name = path;
	if (n) {
		if (strncmp(path, dir, n) != 0 || path[n] != '/')
			return NULL;
		name = path + n + 1;
	}
	return strchr(name, '/') ? NULL : name;
}

/* Gives the entry of l in its parent's cached listing the link's type. */
static void link_show(struct workspace *ws, struct wslink *l)
{
	dir_upsert(ws, l->path, strlen(l->target), false, NULL);
	const char *name;
	char *parent = ws_parent(l->path, &name);
	struct wsentry *e = parent ? dir_find(dir_cached(ws, parent), name) : NULL;
	if (e)
		e->is_link = true;
	free(parent);
}

void links_fix_listing(struct workspace *ws, struct wsdir *d, const struct timespec *now)
{
	if (!d->loaded || d->err || !ws->links.n)
		return;
	/* a pass over every link of the workspace, for each listing loaded */
	for (size_t i = 0; i < ws->links.nb; i++) {
		struct hlink *h = ws->links.b[i];
		while (h) {
			struct hlink *next = h->next;
			struct wslink *l = htab_entry(h, struct wslink, h);
			const char *name = name_in(l->path, d->path);
			struct wsentry *e = name ? dir_find(d, name) : NULL;
			if (name && !e && (l->queued || l->applying)) {
				/* not in the sandbox yet */
				dir_put(d, name, strlen(l->target), false, now);
				e = dir_find(d, name);
			}
			if (e) {
				e->is_dir = false;
				e->is_link = true;
				e->size = strlen(l->target);
			} else if (name) {
				/* removed in the sandbox */
				link_free(ws, l);
			}
			h = next;
		}
	}
}

/* --- the journal ----------------------------------------------------------*/

static void link_journal(struct workspace *ws, enum journal_kind kind, const char *path,
			 const char *target, bool durable, int *rc)
{
	struct journal *j = ws->c->cfg.journal;
	if (!j)
		return;
	struct journal_record r = {.kind = kind};
	r.sandbox = ws->id;
	r.path = (char *)path;
	r.target = (char *)target;
	int jrc = journal_append(j, &r, durable);
	if (jrc < 0) {
		ws_log(ws, "journal: link %s: %s", journal_kind_name(kind), strerror(-jrc));
		if (rc)
			*rc = jrc;
	}
}

void links_journal(struct workspace *ws, struct wslinkrec *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		link_journal(ws, v[i].kind, v[i].path, v[i].target, false, NULL);
		free(v[i].path);
		free(v[i].target);
	}
	free(v);
}

int linkrec_add(struct wslinkrec **v, size_t *n, enum journal_kind kind, const char *path,
		const char *target)
{
	struct wslinkrec *p = realloc(*v, (*n + 1) * sizeof(*p));
	if (!p)
		return -ENOMEM;
	*v = p;
	p[*n] = (struct wslinkrec){.kind = kind, .path = strdup(path),
				   .target = target ? strdup(target) : NULL};
	if (!p[*n].path || (target && !p[*n].target)) {
		free(p[*n].path);
		free(p[*n].target);
		return -ENOMEM;
	}
	(*n)++;
	return 0;
}

void links_move(struct workspace *ws, const char *from, const char *to,
		struct wslinkrec **recs, size_t *nrecs)
{
	size_t nfrom = strlen(from);
	struct wslink **moved = NULL;
	size_t n = 0;
	for (size_t i = 0; i < ws->links.nb; i++)
		for (struct hlink *h = ws->links.b[i]; h; h = h->next) {
			struct wslink *l = htab_entry(h, struct wslink, h);
			if (!ws_is_under(l->path, from))
				continue;
			struct wslink **p = realloc(moved, (n + 1) * sizeof(*p));
			if (!p)
				break;
			moved = p;
			moved[n++] = l;
		}
	for (size_t i = 0; i < n; i++)
		htab_del(&ws->links, &moved[i]->h);
	for (size_t i = 0; i < n; i++) {
		struct wslink *l = moved[i];
		char *np = NULL;
		if (asprintf(&np, "%s%s", to, l->path + nfrom) < 0) {
			free(l->path);
			free(l->target);
			free(l);
			continue;
		}
		(void)linkrec_add(recs, nrecs,
				  l->queued ? JOURNAL_LINK_INTENT : JOURNAL_LINK_DONE, np,
				  l->target);
		(void)linkrec_add(recs, nrecs, JOURNAL_LINK_GONE, l->path, NULL);
		link_drop(ws, np);
		free(l->path);
		l->path = np;
		l->h.key = np;
		htab_add(&ws->links, &l->h);
	}
	free(moved);
}

/* --- making the queued links in the sandbox ---------------------------------*/

struct linkitem {
	char *path, *target;
};

/* One command for items: each link made unless it is there already with
 * its target (so a batch whose outcome was unknown can be sent again),
 * and refused (exit 1) when something else has the name. */
static int links_run(struct workspace *ws, struct linkitem *it, size_t n, bool in_seat,
		     int *code)
{
	char *cmd = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&cmd, &len);
	if (!out)
		return -ENOMEM;
	int rc = 0;
	fputs("r=0;", out);
	for (size_t i = 0; i < n && rc == 0; i++) {
		char *p = common_sh_quote(it[i].path), *t = common_sh_quote(it[i].target);
		if (!p || !t)
			rc = -ENOMEM;
		else
			fprintf(out,
				" if [ -L %s ] && [ \"$(readlink -- %s)\" = %s ]; then :;"
				" elif [ -e %s ] || [ -L %s ]; then r=1;"
				" else ln -s -- %s %s || r=1; fi;",
				p, p, t, p, p, t, p);
		free(p);
		free(t);
	}
	fputs(" exit $r", out);
	if (ferror(out) && rc == 0)
		rc = -ENOMEM;
	fclose(out);
	*code = 0;
	if (rc == 0)
		rc = ws->c->cfg.exec(ws->c->cfg.exec_ctx, ws->id, cmd, in_seat, code);
	free(cmd);
	return rc;
}

int links_apply(struct workspace *ws, bool in_seat)
{
	struct wscache *c = ws->c;
	if (!c->cfg.exec)
		return -ENOTSUP;
	int rc = 0;
	for (int round = 0; round < 64 && rc == 0; round++) {
		struct linkitem *it = NULL;
		size_t n = 0, bytes = 0;
		pthread_mutex_lock(&ws->lock);
		for (size_t i = 0; i < ws->links.nb && bytes < LINK_BATCH_BYTES; i++)
			for (struct hlink *h = ws->links.b[i];
			     h && bytes < LINK_BATCH_BYTES; h = h->next) {
				struct wslink *l = htab_entry(h, struct wslink, h);
				if (!l->queued || l->applying)
					continue;
				struct linkitem *p = realloc(it, (n + 1) * sizeof(*p));
				if (!p)
					break;
				it = p;
				it[n].path = strdup(l->path);
				it[n].target = strdup(l->target);
				if (!it[n].path || !it[n].target) {
					free(it[n].path);
					free(it[n].target);
					break;
				}
				l->applying = true;
				bytes += 5 * strlen(l->path) + 2 * strlen(l->target) + 120;
				n++;
			}
		pthread_mutex_unlock(&ws->lock);
		if (n == 0) {
			free(it);
			break;
		}
		int code = 0;
		rc = links_run(ws, it, n, in_seat, &code);
		/* Which one failed: each again alone (those made are there). */
		int *codes = calloc(n, sizeof(*codes));
		int *rcs = calloc(n, sizeof(*rcs));
		for (size_t i = 0; i < n && codes && rcs; i++) {
			codes[i] = code;
			rcs[i] = rc;
		}
		if (rc == 0 && code != 0 && n > 1 && codes && rcs)
			for (size_t i = 0; i < n; i++) {
				rcs[i] = links_run(ws, &it[i], 1, in_seat, &codes[i]);
				if (rcs[i] < 0)
					rc = rcs[i];
			}
		struct wslinkrec *recs = NULL;
		size_t nrecs = 0;
		pthread_mutex_lock(&ws->lock);
		for (size_t i = 0; i < n; i++) {
			struct wslink *l = link_find(ws, it[i].path);
			int ri = rcs ? rcs[i] : rc, ci = codes ? codes[i] : code;
			if (l && strcmp(l->target, it[i].target) == 0 && l->applying) {
				l->applying = false;
				if (ri == 0 && ci == 0) {
					l->queued = false;
					(void)linkrec_add(&recs, &nrecs, JOURNAL_LINK_DONE,
							  l->path, l->target);
				} else if (ri == 0) {
					/* Refused in the sandbox (its parent went, or
					 * something else took the name): it is not a
					 * link there, so it is not shown as one. */
					ws_log(ws, "a link made here could not be made in "
						   "the sandbox (exit %d); it is dropped", ci);
					(void)linkrec_add(&recs, &nrecs, JOURNAL_LINK_GONE,
							  l->path, NULL);
					dir_remove(ws, l->path);
					const char *name;
					char *parent = ws_parent(l->path, &name);
					if (parent)
						dir_stale(ws, parent);
					free(parent);
					link_free(ws, l);
				}
				/* Not sent, or its outcome unknown: still queued;
				 * the next batch checks before it makes it. */
			} else if (l) {
				l->applying = false;
			}
			free(it[i].path);
			free(it[i].target);
		}
		pthread_mutex_unlock(&ws->lock);
		free(it);
		free(codes);
		free(rcs);
		links_journal(ws, recs, nrecs);
	}
	if (rc < 0 && rc != -EBUSY)
		ws_log(ws, "queued links not made: %s", strerror(-rc));
	return rc;
}

/* --- operations ---------------------------------------------------------------*/

int workspace_symlink(struct workspace *ws, const char *target, const char *rel)
{
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	if (!rel[0])
		return -EEXIST;
	if (!target[0])
		return -ENOENT;
	if (strlen(target) > LINK_TARGET_MAX)
		return -ENAMETOOLONG;
	struct wscache *c = ws->c;
	/* Made in the sandbox by a command: without one, EPERM is
	 * symlink(2)'s "not supported by this filesystem". */
	if (!c->cfg.exec)
		return -EPERM;
	pthread_mutex_lock(&ws->lock);
	ws_moves_wait(ws, rel);
	struct wsattr a;
	rc = ws_lookup(ws, rel, &a);
	if (rc == 0)
		rc = -EEXIST;
	else if (rc == -ENOENT)
		rc = ws_parent_is_dir(ws, rel);
	pthread_mutex_unlock(&ws->lock);
	if (rc < 0)
		return rc;
	/* The intent first: a crash after symlink returned still makes it. */
	link_journal(ws, JOURNAL_LINK_INTENT, rel, target, true, &rc);
	if (rc < 0)
		return -EIO;
	pthread_mutex_lock(&ws->lock);
	struct wslink *l = link_set(ws, rel, target, true);
	if (l) {
		link_show(ws, l);
		meta_drop(ws, rel);
	}
	pthread_mutex_unlock(&ws->lock);
	if (!l)
		return -ENOMEM;
	/* Made now when the seat is free, so the sandbox has it without
	 * waiting for a command; else before the next one. */
	(void)links_apply(ws, false);
	return 0;
}

int workspace_readlink(struct workspace *ws, const char *rel, char *buf, size_t size)
{
	int rc = ws_check(ws, rel);
	if (rc < 0)
		return rc;
	if (!size)
		return -EINVAL;
	pthread_mutex_lock(&ws->lock);
	struct wsattr a;
	rc = rel[0] ? ws_lookup(ws, rel, &a) : -EINVAL;
	struct wslink *l = rc == 0 ? link_find(ws, rel) : NULL;
	if (rc == 0 && (!a.is_link || !l)) {
		rc = -EINVAL; /* not a link */
	} else if (rc == 0) {
		size_t n = strlen(l->target);
		if (n >= size)
			n = size - 1;
		memcpy(buf, l->target, n);
		buf[n] = '\0';
	}
	pthread_mutex_unlock(&ws->lock);
	return rc;
}

/* Runs "rm -f -- A" (b NULL) or "mv -f -- A B" for a link; 0, or -EIO
 * when it failed there. */
static int link_command(struct workspace *ws, const char *a, const char *b)
{
	struct wscache *c = ws->c;
	if (!c->cfg.exec)
		return -ENOTSUP;
	char *qa = common_sh_quote(a), *qb = b ? common_sh_quote(b) : NULL, *cmd = NULL;
	if (qa && (!b || qb) &&
	    asprintf(&cmd, "%s -f -- %s %s", b ? "mv" : "rm", qa, qb ? qb : "") < 0)
		cmd = NULL;
	free(qa);
	free(qb);
	int code = 0;
	int rc = cmd ? c->cfg.exec(c->cfg.exec_ctx, ws->id, cmd, false, &code) : -ENOMEM;
	free(cmd);
	if (rc == 0 && code != 0) {
		ws_log(ws, "a command on a link failed there (exit %d)", code);
		rc = -EIO;
	}
	return rc;
}

int ws_link_unlink(struct workspace *ws, const char *rel)
{
	pthread_mutex_lock(&ws->lock);
	struct wslink *l = link_find(ws, rel);
	int rc = !l ? -ENOENT : l->applying ? -EBUSY : 0;
	bool queued = l && l->queued;
	if (rc == 0 && queued) {
		/* Never made in the sandbox: forgetting it is enough. */
		link_free(ws, l);
		dir_remove(ws, rel);
		meta_drop(ws, rel);
	}
	pthread_mutex_unlock(&ws->lock);
	if (rc < 0)
		return rc;
	if (!queued) {
		rc = link_command(ws, rel, NULL);
		if (rc < 0)
			return rc;
		pthread_mutex_lock(&ws->lock);
		link_drop(ws, rel);
		dir_remove(ws, rel);
		meta_drop(ws, rel);
		pthread_mutex_unlock(&ws->lock);
	}
	link_journal(ws, JOURNAL_LINK_GONE, rel, NULL, true, NULL);
	return 0;
}

int ws_link_rename(struct workspace *ws, const char *from, const char *to, bool dst_exists)
{
	if (dst_exists) {
		/* rename(2) replaces it; a link there must go as a link. */
		int rc = workspace_unlink(ws, to);
		if (rc < 0 && rc != -ENOENT)
			return rc;
	}
	pthread_mutex_lock(&ws->lock);
	struct wslink *l = link_find(ws, from);
	int rc = !l ? -ENOENT : l->applying ? -EBUSY : 0;
	bool queued = l && l->queued;
	char *target = l ? strdup(l->target) : NULL;
	pthread_mutex_unlock(&ws->lock);
	if (rc == 0 && !target)
		rc = -ENOMEM;
	if (rc == 0 && !queued)
		rc = link_command(ws, from, to);
	if (rc == 0) {
		link_journal(ws, queued ? JOURNAL_LINK_INTENT : JOURNAL_LINK_DONE, to, target,
			     true, &rc);
		if (rc < 0)
			rc = -EIO;
	}
	if (rc < 0) {
		free(target);
		return rc;
	}
	pthread_mutex_lock(&ws->lock);
	link_drop(ws, from);
	dir_remove(ws, from);
	meta_move_one(ws, from, to);
	struct wslink *nl = link_set(ws, to, target, queued);
	if (nl)
		link_show(ws, nl);
	pthread_mutex_unlock(&ws->lock);
	link_journal(ws, JOURNAL_LINK_GONE, from, NULL, true, NULL);
	free(target);
	if (queued)
		(void)links_apply(ws, false);
	return 0;
}

/* --- what a command changed, and a remount ------------------------------------*/

bool link_target_escapes(const char *path, const char *target)
{
	if (target[0] == '/')
		return true;
	/* the depth of the link's directory below the workspace root */
	long depth = 0;
	for (const char *p = path; *p; p++)
		if (*p == '/')
			depth++;
	for (const char *p = target; *p;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (--depth < 0)
				return true;
		} else if (n && !(n == 1 && p[0] == '.')) {
			depth++;
		}
		p += n + (e ? 1 : 0);
	}
	return false;
}

void links_note(struct workspace *ws, const char *path, const char *target,
		struct wslinkrec **recs, size_t *nrecs)
{
	struct wslink *l = link_find(ws, path);
	/* A link a command made whose target leaves the workspace is not
	 * shown as a link: the kernel would follow it on this machine (to a
	 * local file, or to the mount's own ctl files, where a write runs a
	 * command). It is what the contract's /files makes of it (the
	 * listing's kind and size; a read gets the server's answer, which
	 * refuses a path out of the workspace). Links made through the mount
	 * are the user's own and stay links whatever their target. */
	if (target && link_target_escapes(path, target) &&
	    !(l && (l->queued || l->applying || strcmp(l->target, target) == 0)))
		target = NULL;
	if (!target) {
		if (l && !l->queued && !l->applying) {
			link_free(ws, l);
			(void)linkrec_add(recs, nrecs, JOURNAL_LINK_GONE, path, NULL);
			/* its listed kind and size are the listing's again */
			const char *name;
			char *parent = ws_parent(path, &name);
			if (parent)
				dir_stale(ws, parent);
			free(parent);
		}
		return;
	}
	if (l && !l->queued && strcmp(l->target, target) == 0)
		return;
	if (l && l->applying)
		return; /* its batch decides */
	if ((l = link_set(ws, path, target, false))) {
		link_show(ws, l);
		(void)linkrec_add(recs, nrecs, JOURNAL_LINK_DONE, path, target);
	}
}

void links_restore(struct wscache *c, const struct journal_sandbox *sb)
{
	if (!sb->nlinks || sb->state == JOURNAL_SB_GONE || sb->state == JOURNAL_SB_DETACHED)
		return;
	struct workspace *ws = ws_get_lock(c, sb->id, sb->url);
	if (!ws)
		return;
	for (size_t i = 0; i < sb->nlinks; i++)
		if (ws_check_path(sb->links[i].path) == 0 && sb->links[i].path[0])
			(void)link_set(ws, sb->links[i].path, sb->links[i].target,
				       sb->links[i].queued);
	pthread_mutex_unlock(&ws->lock);
}
