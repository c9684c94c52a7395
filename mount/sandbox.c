/*
 * sandbox.c — the model: sandboxes and their runs, rebuilt from the journal
 * at mount, updated by the command and lifecycle paths.
 */
#include "mount_i.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct fs_mount *fs_mount_global;

char *fs_strdup0(const char *s)
{
	if (!s)
		return NULL;
	return strdup(s);
}

const char *fs_sb_state_name(enum fs_sb_state s)
{
	switch (s) {
	case FS_SB_CREATING:
		return "creating";
	case FS_SB_READY:
		return "ready";
	case FS_SB_FAILED:
		return "failed";
	case FS_SB_DELETING:
		return "deleting";
	case FS_SB_GONE:
		return "gone";
	case FS_SB_UNREACHABLE:
		return "unreachable";
	case FS_SB_UNKNOWN:
		return "unknown";
	}
	return "unknown";
}

const char *fs_run_status_name(enum fs_run_status s)
{
	switch (s) {
	case FS_RUN_RUNNING:
		return "running";
	case FS_RUN_EXITED:
		return "exited";
	case FS_RUN_TIMEOUT:
		return "timeout";
	case FS_RUN_UNKNOWN:
		return "unknown";
	case FS_RUN_FAILED:
		return "failed";
	}
	return "unknown";
}

int fs_set_str(char **field, const char *value)
{
	char *v = fs_strdup0(value);
	if (value && !v)
		return -ENOMEM;
	free(*field);
	*field = v;
	return 0;
}

static size_t sb_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return (size_t)h;
}

static void sb_index_put(struct fs_sandbox **idx, size_t cap, struct fs_sandbox *sb)
{
	size_t i = sb_hash(sb->id) & (cap - 1);
	while (idx[i])
		i = (i + 1) & (cap - 1);
	idx[i] = sb;
}

/* Room in the index for n sandboxes (at most half full), rehashing those
 * in sbs when it grows; false: the larger index could not be allocated. */
static bool sb_index_reserve(struct fs_mount *m, size_t n)
{
	if (n <= m->sb_index_cap / 2)
		return true;
	size_t cap = m->sb_index_cap ? m->sb_index_cap : 32;
	while (cap / 2 < n) {
		if (cap > SIZE_MAX / 2 / sizeof(*m->sb_index))
			return false;
		cap *= 2;
	}
	struct fs_sandbox **idx = calloc(cap, sizeof(*idx));
	if (!idx)
		return false;
	for (size_t i = 0; i < m->nsbs; i++)
		sb_index_put(idx, cap, m->sbs[i]);
	free(m->sb_index);
	m->sb_index = idx;
	m->sb_index_cap = cap;
	return true;
}

struct fs_sandbox *fs_sandbox_find(struct fs_mount *m, const char *id)
{
	if (m->sb_index && !m->sb_index_broken) {
		size_t mask = m->sb_index_cap - 1;
		for (size_t i = sb_hash(id) & mask; m->sb_index[i]; i = (i + 1) & mask)
			if (strcmp(m->sb_index[i]->id, id) == 0)
				return m->sb_index[i];
		return NULL;
	}
	for (size_t i = 0; i < m->nsbs; i++)
		if (strcmp(m->sbs[i]->id, id) == 0)
			return m->sbs[i];
	return NULL;
}

struct fs_sandbox *fs_sandbox_add(struct fs_mount *m, const char *id)
{
	struct fs_sandbox *sb = fs_sandbox_find(m, id);
	if (sb)
		return sb;
	if (m->nsbs == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 16;
		struct fs_sandbox **n = realloc(m->sbs, cap * sizeof(*n));
		if (!n)
			return NULL;
		m->sbs = n;
		m->cap = cap;
	}
	sb = calloc(1, sizeof(*sb));
	if (!sb || !(sb->id = strdup(id))) {
		free(sb);
		return NULL;
	}
	sb->state = FS_SB_UNKNOWN;
	/* Without memory for a larger index, lookups scan sbs from now on:
	 * slower, never wrong. */
	if (!m->sb_index_broken && !sb_index_reserve(m, m->nsbs + 1))
		m->sb_index_broken = true;
	m->sbs[m->nsbs++] = sb;
	if (!m->sb_index_broken)
		sb_index_put(m->sb_index, m->sb_index_cap, sb);
	return sb;
}

static void fs_output_clear(struct journal_output *o)
{
	free(o->data);
	free(o->file);
	memset(o, 0, sizeof(*o));
}

void fs_run_clear(struct fs_run *r)
{
	free(r->command);
	free(r->error);
	fs_output_clear(&r->out);
	fs_output_clear(&r->err);
	memset(r, 0, sizeof(*r));
}

static void fs_output_unlink(struct fs_mount *m, const struct journal_output *o)
{
	if (!o->file || !m->state_dir)
		return;
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", m->state_dir, o->file);
	unlink(path);
}

/* The run to drop to make room: the oldest finished internal one (never
 * shown), else the oldest (the journal's history keeps the same). */
static size_t fs_run_victim(const struct fs_sandbox *sb)
{
	for (size_t i = 0; i < sb->nruns; i++)
		if (sb->runs[i].internal && sb->runs[i].status != FS_RUN_RUNNING)
			return i;
	return 0;
}

struct fs_run *fs_sandbox_push_run(struct fs_mount *m, struct fs_sandbox *sb)
{
	size_t max = (size_t)m->opt.max_runs;
	while (sb->nruns >= max) {
		/* never the running one: it is the newest */
		size_t v = fs_run_victim(sb);
		fs_output_unlink(m, &sb->runs[v].out);
		fs_output_unlink(m, &sb->runs[v].err);
		fs_run_clear(&sb->runs[v]);
		memmove(&sb->runs[v], &sb->runs[v + 1],
			(sb->nruns - v - 1) * sizeof(sb->runs[0]));
		sb->nruns--;
	}
	struct fs_run *n = realloc(sb->runs, (sb->nruns + 1) * sizeof(*n));
	if (!n)
		return NULL;
	sb->runs = n;
	struct fs_run *r = &sb->runs[sb->nruns++];
	memset(r, 0, sizeof(*r));
	return r;
}

struct fs_run *fs_sandbox_run(struct fs_sandbox *sb, uint64_t seq)
{
	for (size_t i = 0; i < sb->nruns; i++)
		if (sb->runs[i].seq == seq)
			return &sb->runs[i];
	return NULL;
}

struct fs_run *fs_sandbox_user_run(struct fs_sandbox *sb, uint64_t seq)
{
	struct fs_run *r = fs_sandbox_run(sb, seq);
	return r && !r->internal ? r : NULL;
}

size_t fs_run_numbers(struct fs_mount *m, struct fs_sandbox *sb, uint64_t **out)
{
	pthread_mutex_lock(&m->lock);
	uint64_t *v = calloc(sb->nruns + 1, sizeof(*v));
	size_t n = 0;
	for (size_t i = 0; v && i < sb->nruns; i++)
		if (!sb->runs[i].internal)
			v[n++] = sb->runs[i].seq;
	pthread_mutex_unlock(&m->lock);
	*out = v;
	return n;
}

struct fs_run *fs_sandbox_latest(const struct fs_sandbox *sb)
{
	for (size_t i = sb->nruns; i > 0; i--)
		if (!sb->runs[i - 1].internal)
			return &sb->runs[i - 1];
	return NULL;
}

uint64_t fs_sandbox_last(const struct fs_sandbox *sb)
{
	for (size_t i = sb->nruns; i > 0; i--)
		if (!sb->runs[i - 1].internal)
			return sb->runs[i - 1].seq;
	return 0;
}

long fs_sandbox_timeout(struct fs_mount *m, const struct fs_sandbox *sb)
{
	if (sb->timeout_s < 0)
		return 0;
	if (sb->timeout_s > 0)
		return sb->timeout_s;
	return m->opt.timeout;
}

static int fs_output_copy(struct journal_output *dst, const struct journal_output *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->len = src->len;
	dst->crc32 = src->crc32;
	dst->file = fs_strdup0(src->file);
	if (src->file && !dst->file)
		return -ENOMEM;
	if (src->data) {
		dst->data = malloc(src->len + 1);
		if (!dst->data)
			return -ENOMEM;
		memcpy(dst->data, src->data, src->len);
		dst->data[src->len] = '\0';
	}
	return 0;
}

/* The exit code 124 is a timeout when the command ran for its limit. */
bool fs_run_is_timeout(int exit_code, long timeout_s, long duration_ms);
bool fs_run_is_timeout(int exit_code, long timeout_s, long duration_ms)
{
	return exit_code == 124 && timeout_s > 0 && duration_ms + 500 >= timeout_s * 1000;
}

/* 0, or -ENOMEM with r partly filled (fs_run_clear frees it). */
static int fs_run_from_journal(struct fs_run *r, const struct journal_run *j)
{
	r->seq = j->seq;
	r->internal = j->internal;
	r->command = fs_strdup0(j->command);
	r->timeout_s = j->timeout_s < 0 ? 0 : j->timeout_s;
	r->exit_code = j->exit_code;
	r->duration_ms = j->duration_ms;
	r->truncated = j->truncated;
	r->started_ms = j->started_ms;
	r->ended_ms = j->ended_ms;
	r->error = fs_strdup0(j->error);
	if ((j->command && !r->command) || (j->error && !r->error) ||
	    fs_output_copy(&r->out, &j->out) < 0 || fs_output_copy(&r->err, &j->err) < 0)
		return -ENOMEM;
	switch (j->status) {
	case JOURNAL_RUN_DONE:
		r->status = fs_run_is_timeout(j->exit_code, r->timeout_s, j->duration_ms)
				? FS_RUN_TIMEOUT
				: FS_RUN_EXITED;
		break;
	case JOURNAL_RUN_NOT_RUN:
		r->status = FS_RUN_FAILED;
		r->result_errno = ENOTCONN;
		break;
	case JOURNAL_RUN_PENDING: /* replay marks these unknown; be safe */
	case JOURNAL_RUN_UNKNOWN:
	default:
		r->status = FS_RUN_UNKNOWN;
		r->result_errno = EIO;
		if (!r->error &&
		    !(r->error = fs_strdup0("outcome unknown: the mount stopped "
					    "while the command ran")))
			return -ENOMEM;
		break;
	}
	return 0;
}

int fs_model_load(struct fs_mount *m, const struct journal_state *st)
{
	for (size_t i = 0; i < st->count; i++) {
		const struct journal_sandbox *j = &st->sandboxes[i];
		if (!j->id)
			continue;
		struct fs_sandbox *sb = fs_sandbox_add(m, j->id);
		if (!sb)
			return -ENOMEM;
		sb->in_journal_state = true;
		sb->owned = j->owned;
		sb->foreign = j->foreign;
		sb->attached = !j->owned && !j->foreign;
		sb->bound_s = j->bound_s;
		sb->idle_s = j->idle_s;
		if (fs_set_str(&sb->spec, j->spec) < 0)
			return -ENOMEM;
		if (fs_set_str(&sb->url, j->url) < 0 || fs_set_str(&sb->pool, j->pool) < 0 ||
		    fs_set_str(&sb->image, j->image) < 0)
			return -ENOMEM;
		sb->journaled = j->url != NULL;
		sb->created_ms = j->created_ms;
		sb->timeout_s = j->timeout_s;
		if (fs_set_str(&sb->env, j->env) < 0 || fs_set_str(&sb->cwd, j->cwd) < 0)
			return -ENOMEM;
		sb->last_seq = j->last_seq;
		sb->commands_run = j->commands_run;
		fs_set_str(&sb->last_error, j->last_error);
		sb->present = true;
		switch (j->state) {
		case JOURNAL_SB_CREATING:
			sb->state = FS_SB_CREATING;
			break;
		case JOURNAL_SB_READY:
			sb->state = FS_SB_READY;
			break;
		case JOURNAL_SB_FAILED:
			sb->state = FS_SB_FAILED;
			break;
		case JOURNAL_SB_CREATE_UNKNOWN:
			sb->state = FS_SB_UNKNOWN;
			break;
		case JOURNAL_SB_DELETING:
		case JOURNAL_SB_DELETE_UNCONFIRMED:
			sb->state = FS_SB_DELETING;
			break;
		case JOURNAL_SB_GONE:
			sb->state = FS_SB_GONE;
			sb->present = false;
			break;
		case JOURNAL_SB_DETACHED:
			sb->present = false;
			sb->attached = false;
			break;
		}
		if (fs_jobs_load(m, sb, j) < 0)
			return -ENOMEM;
		for (size_t k = 0; k < j->nruns; k++) {
			struct fs_run *r = fs_sandbox_push_run(m, sb);
			if (!r)
				return -ENOMEM;
			if (fs_run_from_journal(r, &j->runs[k]) < 0)
				return -ENOMEM; /* the mount fails to start */
		}
	}
	return 0;
}

int fs_sandbox_adopt(struct fs_mount *m, struct fs_sandbox *sb)
{
	pthread_mutex_lock(&m->lock);
	bool need = !sb->journaled && sb->url;
	char *url = need ? fs_strdup0(sb->url) : NULL;
	pthread_mutex_unlock(&m->lock);
	if (!need)
		return 0;
	if (!url)
		return -ENOMEM;
	/* A sandbox known only from the orchestrator's listing: the journal
	 * holds its id and URL before the URL is first used (DESIGN.md §5). */
	struct journal_record r = {.kind = JOURNAL_CREATE_RECONCILED};
	r.sandbox = sb->id;
	r.url = url;
	r.foreign = sb->foreign;
	int rc = journal_append(m->journal, &r, true);
	free(url);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&m->lock);
	sb->journaled = true;
	sb->in_journal_state = true;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

int fs_sandbox_follow(struct fs_mount *m, struct fs_sandbox *sb)
{
	pthread_mutex_lock(&m->lock);
	struct workspace *ws = sb->ws;
	bool moved = sb->ws_moved;
	if (!ws)
		sb->ws_moved = false; /* one made later gets the URL then */
	pthread_mutex_unlock(&m->lock);
	if (!ws || !moved)
		return 0;
	/* Nothing goes to the old URL while the new one is journaled. */
	workspace_set_url(ws, NULL);
	int rc = fs_sandbox_adopt(m, sb);
	char *url = NULL;
	pthread_mutex_lock(&m->lock);
	/* Moved again meanwhile: that URL is not journaled yet. */
	if (rc == 0 && sb->ws == ws && sb->journaled && sb->url) {
		url = fs_strdup0(sb->url);
		if (url)
			sb->ws_moved = false;
	}
	pthread_mutex_unlock(&m->lock);
	if (url)
		workspace_set_url(ws, url);
	free(url);
	return rc < 0 ? rc : url ? 0 : -EAGAIN;
}

struct workspace *fs_sandbox_workspace(struct fs_mount *m, struct fs_sandbox *sb)
{
	pthread_mutex_lock(&m->lock);
	struct workspace *ws = sb->ws;
	bool has_url = sb->url != NULL;
	bool moved = sb->ws_moved;
	pthread_mutex_unlock(&m->lock);
	if (ws && moved)
		fs_sandbox_follow(m, sb);
	if (ws || !has_url || !m->wscache)
		return ws;
	if (fs_sandbox_adopt(m, sb) < 0)
		return NULL;
	pthread_mutex_lock(&m->lock);
	char *url = fs_strdup0(sb->url);
	pthread_mutex_unlock(&m->lock);
	/* workspace_get returns the same object for the same id */
	ws = url ? workspace_get(m->wscache, sb->id, url) : NULL;
	free(url);
	pthread_mutex_lock(&m->lock);
	if (ws)
		sb->ws = ws;
	pthread_mutex_unlock(&m->lock);
	return ws;
}
