/*
 * content.c — paths to nodes, and what the small files say: status, exit,
 * info, runs/, .sandboxfs/health and stats, the extended attributes.
 * Nothing here waits or talks to the network except the root lookup of an
 * unknown id (one cached orchestrator listing).
 */
#include "node_i.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

struct fs_run *fs_loc_run(const struct fs_loc *loc)
{
	if (loc->node == FS_N_RUN || loc->node == FS_N_RUNFILE)
		return fs_sandbox_user_run(loc->sb, loc->seq);
	return fs_sandbox_latest(loc->sb);
}

uint64_t fs_node_mtime(struct fs_mount *m, const struct fs_loc *loc)
{
	if (loc->node == FS_N_JOB || loc->node == FS_N_JOBFILE || loc->node == FS_N_JOBS)
		return fs_job_mtime(m, loc);
	uint64_t t = m->mount_ms;
	if (!loc->sb)
		return t;
	pthread_mutex_lock(&m->lock);
	if (loc->sb->created_ms)
		t = loc->sb->created_ms;
	if (loc->node != FS_N_SB) {
		struct fs_run *r = fs_loc_run(loc);
		if (r)
			t = r->ended_ms ? r->ended_ms : r->started_ms;
	}
	pthread_mutex_unlock(&m->lock);
	return t ? t : m->mount_ms;
}

static char *fs_iso8601(uint64_t ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

static int fs_json_out(cJSON *o, char **buf, size_t *len)
{
	char *s = cJSON_Print(o);
	cJSON_Delete(o);
	if (!s)
		return -ENOMEM;
	size_t n = strlen(s);
	char *b = malloc(n + 2);
	if (!b) {
		cJSON_free(s);
		return -ENOMEM;
	}
	memcpy(b, s, n);
	b[n] = '\n';
	b[n + 1] = '\0';
	cJSON_free(s);
	*buf = b;
	*len = n + 1;
	return 0;
}

static void fs_json_time(cJSON *o, const char *key, uint64_t ms)
{
	char t[40];
	if (ms)
		cJSON_AddStringToObject(o, key, fs_iso8601(ms, t, sizeof(t)));
	else
		cJSON_AddNullToObject(o, key);
}

static void fs_json_str(cJSON *o, const char *key, const char *v)
{
	if (v)
		cJSON_AddStringToObject(o, key, v);
	else
		cJSON_AddNullToObject(o, key);
}

/* lock held */
static cJSON *fs_run_json(const struct fs_run *r)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "seq", (double)r->seq);
	fs_json_str(o, "command", r->command);
	cJSON_AddStringToObject(o, "status", fs_run_status_name(r->status));
	if (r->status == FS_RUN_EXITED || r->status == FS_RUN_TIMEOUT)
		cJSON_AddNumberToObject(o, "exit", r->exit_code);
	else
		cJSON_AddNullToObject(o, "exit");
	cJSON_AddNumberToObject(o, "timeout", (double)r->timeout_s);
	cJSON_AddNumberToObject(o, "duration_ms", (double)r->duration_ms);
	cJSON_AddBoolToObject(o, "truncated", r->truncated);
	cJSON_AddNumberToObject(o, "stdout_bytes", (double)r->out.len);
	cJSON_AddNumberToObject(o, "stderr_bytes", (double)r->err.len);
	fs_json_time(o, "started", r->started_ms);
	fs_json_time(o, "ended", r->ended_ms);
	fs_json_str(o, "error", r->error);
	return o;
}

/* "owned", "foreign" or "attached" (DESIGN.md §4, whose sandbox is whose). */
static const char *fs_sandbox_owner(const struct fs_sandbox *sb)
{
	if (sb->attached)
		return "attached";
	return sb->foreign ? "foreign" : "owned";
}

/* lock held; never the URL */
static cJSON *fs_sandbox_json(struct fs_mount *m, const struct fs_sandbox *sb)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "id", sb->id);
	fs_json_str(o, "pool", sb->pool);
	if (sb->image)
		cJSON_AddStringToObject(o, "image", sb->image);
	cJSON_AddStringToObject(o, "state", fs_sb_state_name(sb->state));
	cJSON_AddStringToObject(o, "owner", fs_sandbox_owner(sb));
	cJSON_AddBoolToObject(o, "owned", sb->owned);
	cJSON_AddBoolToObject(o, "attached", sb->attached);
	cJSON_AddBoolToObject(o, "foreign", sb->foreign);
	cJSON *spec = fs_spec_masked(sb->spec);
	if (spec)
		cJSON_AddItemToObject(o, "spec", spec);
	else
		cJSON_AddNullToObject(o, "spec");
	if (sb->idle_s > 0)
		cJSON_AddNumberToObject(o, "idle_timeout", (double)sb->idle_s);
	else
		cJSON_AddNullToObject(o, "idle_timeout");
	/* the proxy's bound on each request: 0 none; assumed when not set here */
	cJSON_AddNumberToObject(o, "request_bound", (double)fs_sandbox_bound(sb));
	cJSON_AddBoolToObject(o, "request_bound_assumed", sb->bound_s == 0);
	fs_json_time(o, "created", sb->created_ms);
	cJSON_AddNumberToObject(o, "commands_run", (double)sb->commands_run);
	cJSON_AddNumberToObject(o, "last", (double)fs_sandbox_last(sb));
	cJSON_AddBoolToObject(o, "running", sb->busy);
	cJSON_AddNumberToObject(o, "timeout", (double)fs_sandbox_timeout(m, sb));
	const struct fs_run *r = fs_sandbox_latest(sb);
	cJSON_AddStringToObject(o, "status", r ? fs_run_status_name(r->status) : "idle");
	fs_json_str(o, "last_error", sb->last_error);
	if (r && r->error)
		cJSON_AddStringToObject(o, "why", r->error);
	return o;
}

static int fs_strbuf(const char *s, char **buf, size_t *len)
{
	*buf = strdup(s);
	if (!*buf)
		return -ENOMEM;
	*len = strlen(s);
	return 0;
}

static int fs_memstream_done(FILE *f, char **mbuf, size_t *msize, char **buf, size_t *len)
{
	if (fclose(f) != 0)
		return -ENOMEM;
	*buf = *mbuf;
	*len = *msize;
	return 0;
}

static int fs_render_health_text(struct fs_mount *m, char **buf, size_t *len)
{
	char *mb = NULL;
	size_t ms = 0;
	FILE *f = open_memstream(&mb, &ms);
	if (!f)
		return -ENOMEM;
	int problems = 0;
	if (m->jreport.repaired) {
		fprintf(f, "journal: repaired at mount: %s\n", m->jreport.message);
		problems++;
	}
	if (m->jreport.torn_tail) {
		fprintf(f,
			"journal: a torn last record was cut at offset %" PRIu64
			" (kept in %s)\n",
			m->jreport.torn_offset, m->jreport.torn_copy);
		problems++;
	}
	if (m->have_orch) {
		fs_orch_refresh(m, false);
		pthread_mutex_lock(&m->lock);
		if (m->list_errno) {
			fprintf(f, "orchestrator unreachable or refusing: %s\n",
				m->list_error);
			problems++;
		}
		pthread_mutex_unlock(&m->lock);
	}
	struct backend_stats bs;
	backend_get_stats(m->backend, &bs);
	if (bs.names_dropped) {
		fprintf(f,
			"%" PRIu64 " listing entries hidden since mount: names that are "
			"not valid UTF-8 or not file names, duplicates, malformed "
			"entries (counted at each listing)\n",
			bs.names_dropped);
		problems++;
	}
	size_t deleting = 0, unknown = 0, unreachable = 0, failed = 0;
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->nsbs; i++) {
		struct fs_sandbox *sb = m->sbs[i];
		if (!sb->present)
			continue;
		if (sb->state == FS_SB_DELETING && !sb->lifecycle_busy)
			deleting++;
		else if (sb->state == FS_SB_UNKNOWN && sb->owned && !sb->url)
			unknown++;
		else if (sb->state == FS_SB_UNREACHABLE)
			unreachable++;
		else if (sb->state == FS_SB_FAILED && sb->owned)
			failed++;
	}
	pthread_mutex_unlock(&m->lock);
	if (deleting)
		fprintf(f,
			"%zu sandboxes with unconfirmed delete (write \"recover\" to "
			".sandboxfs/ctl)\n",
			deleting);
	if (unknown)
		fprintf(f,
			"%zu sandboxes with unconfirmed create (write \"recover\" to "
			".sandboxfs/ctl)\n",
			unknown);
	if (unreachable)
		fprintf(f, "%zu sandboxes unreachable\n", unreachable);
	if (failed)
		fprintf(f, "%zu failed sandboxes to dispose of (rmdir or recover)\n",
			failed);
	problems += (deleting || unknown || unreachable || failed) ? 1 : 0;
	if (m->wscache)
		problems += wscache_health(m->wscache, f);
	pthread_mutex_lock(&m->lock);
	if (m->last_error[0]) {
		fprintf(f, "last error: %s\n", m->last_error);
		problems++;
	}
	pthread_mutex_unlock(&m->lock);
	if (!problems)
		fputs("ok\n", f);
	return fs_memstream_done(f, &mb, &ms, buf, len);
}

static int fs_render_stats_text(struct fs_mount *m, char **buf, size_t *len)
{
	char *mb = NULL;
	size_t ms = 0;
	FILE *f = open_memstream(&mb, &ms);
	if (!f)
		return -ENOMEM;
	struct backend_stats bs;
	backend_get_stats(m->backend, &bs);
	static const char *const ops[] = {"execute", "file", "health", "create",
					  "sandbox"};
	for (int i = 0; i < 5; i++)
		fprintf(f, "requests_%s %" PRIu64 "\n", ops[i], bs.requests[i]);
	fprintf(f, "request_errors %" PRIu64 "\n", bs.errors);
	fprintf(f, "bytes_out %" PRIu64 "\n", bs.bytes_sent);
	fprintf(f, "bytes_in %" PRIu64 "\n", bs.bytes_received);
	fprintf(f, "connections_opened %" PRIu64 "\n", bs.connections_opened);
	fprintf(f, "names_dropped %" PRIu64 "\n", bs.names_dropped);
	fprintf(f, "latency_p50_us %" PRIu64 "\n", bs.latency_p50_us);
	fprintf(f, "latency_p99_us %" PRIu64 "\n", bs.latency_p99_us);
#define C(name) fprintf(f, #name " %" PRIu64 "\n", (uint64_t)atomic_load(&m->n.name))
	C(commands);
	C(commands_exited);
	C(commands_unknown);
	C(commands_failed);
	C(busy_refused);
	C(efbig_refused);
	C(interrupted_writes);
	C(interrupts_delivered);
	C(waits);
	C(creates);
	C(create_failures);
	C(deletes);
	C(delete_failures);
	C(attaches);
	C(detaches);
	C(list_refreshes);
	C(list_errors);
	C(keepalives);
	C(keepalive_errors);
	C(ctl_writes);
	C(kernel_epochs);
	C(precise_invalidations);
#undef C
	fprintf(f, "command_threads %d\n", atomic_load(&m->workers));
	fprintf(f, "journal_bytes %" PRIu64 "\n", journal_size(m->journal));
	if (m->wscache)
		wscache_stats(m->wscache, f);
	return fs_memstream_done(f, &mb, &ms, buf, len);
}

/* .sandboxfs/pools: one line a pool, "ID size=N warm=N claimed=N", so
 * that a user sees why a create was refused with EAGAIN (429). */
static int fs_render_pools_text(struct fs_mount *m, char **buf, size_t *len)
{
	if (!m->have_orch)
		return fs_strbuf("", buf, len);
	struct backend_pool_list l = {0};
	struct backend_error err = {0};
	enum backend_status st = backend_orch_pools(m->backend, &m->orch, NULL, &l, &err);
	if (st != BACKEND_OK) {
		fs_log("pools: %s: %s", backend_status_name(st), err.message);
		int e = backend_errno(st, BACKEND_OP_SANDBOX);
		return -(e ? e : EIO);
	}
	char *mb = NULL;
	size_t ms = 0;
	FILE *f = open_memstream(&mb, &ms);
	if (!f) {
		backend_pool_list_clear(&l);
		return -ENOMEM;
	}
	for (size_t i = 0; i < l.count; i++) {
		const struct backend_pool *p = &l.items[i];
		fprintf(f, "%s", p->id);
		if (p->size >= 0)
			fprintf(f, " size=%ld", p->size);
		if (p->warm >= 0)
			fprintf(f, " warm=%ld", p->warm);
		if (p->claimed >= 0)
			fprintf(f, " claimed=%ld", p->claimed);
		if (p->image)
			fprintf(f, " image=%s", p->image);
		fputc('\n', f);
	}
	backend_pool_list_clear(&l);
	return fs_memstream_done(f, &mb, &ms, buf, len);
}

/* --- the contents of each file (the table in files.c points here) --------*/

int fs_render_empty(struct fs_mount *m, const struct fs_loc *loc, char **buf, size_t *len)
{
	(void)m;
	(void)loc;
	return fs_strbuf("", buf, len);
}

int fs_render_version(struct fs_mount *m, const struct fs_loc *loc, char **buf,
		      size_t *len)
{
	(void)m;
	(void)loc;
	return fs_strbuf("sandboxfs " SANDBOXFS_VERSION "\n", buf, len);
}

int fs_render_health(struct fs_mount *m, const struct fs_loc *loc, char **buf,
		     size_t *len)
{
	(void)loc;
	return fs_render_health_text(m, buf, len);
}

int fs_render_stats(struct fs_mount *m, const struct fs_loc *loc, char **buf, size_t *len)
{
	(void)loc;
	return fs_render_stats_text(m, buf, len);
}

int fs_render_pools(struct fs_mount *m, const struct fs_loc *loc, char **buf, size_t *len)
{
	(void)loc;
	return fs_render_pools_text(m, buf, len);
}

/* stdout and stderr of the latest run or of runs/SEQ: empty while it
 * runs (a reader waits first, fs_file_def.waits). */
int fs_render_output(struct fs_mount *m, const struct fs_loc *loc, char **buf, size_t *len)
{
	struct journal_output o = {0};
	bool output = false;
	int rc = 0;
	pthread_mutex_lock(&m->lock);
	struct fs_run *r = fs_loc_run(loc);
	if (loc->node == FS_N_RUNFILE && !r) {
		pthread_mutex_unlock(&m->lock);
		return -ENOENT;
	}
	if (r && r->status != FS_RUN_RUNNING) {
		const struct journal_output *src = loc->file == FS_F_STDOUT ? &r->out : &r->err;
		o.len = src->len;
		o.crc32 = src->crc32;
		o.file = src->file;
		o.data = src->data;
		output = true;
		/* fs_output_load copies; keep the lock meanwhile for inline
		 * data, release it for files */
		if (src->data) {
			rc = fs_output_load(m, &o, buf, len);
			output = false;
		} else if (!(o.file = fs_strdup0(src->file)) && src->file) {
			rc = -ENOMEM;
			output = false;
		}
	} else {
		rc = fs_strbuf("", buf, len);
	}
	pthread_mutex_unlock(&m->lock);
	if (output) {
		o.data = NULL;
		rc = fs_output_load(m, &o, buf, len);
		free(o.file);
	}
	return rc;
}

/* The one-line files of a run or a sandbox, rendered under the lock. */
int fs_render_line(struct fs_mount *m, const struct fs_loc *loc, char **buf, size_t *len)
{
	char tmp[64];
	struct fs_sandbox *sb = loc->sb;
	int rc = 0;
	pthread_mutex_lock(&m->lock);
	struct fs_run *r = fs_loc_run(loc);
	if (loc->node == FS_N_RUNFILE && !r) {
		pthread_mutex_unlock(&m->lock);
		return -ENOENT;
	}
	switch (loc->file) {
	case FS_F_EXIT:
		if (r && (r->status == FS_RUN_EXITED || r->status == FS_RUN_TIMEOUT))
			snprintf(tmp, sizeof(tmp), "%d\n", r->exit_code);
		else
			tmp[0] = '\0';
		break;
	case FS_F_STATUS:
		snprintf(tmp, sizeof(tmp), "%s\n", r ? fs_run_status_name(r->status) : "idle");
		break;
	case FS_F_LAST:
		snprintf(tmp, sizeof(tmp), "%" PRIu64 "\n", fs_sandbox_last(sb));
		break;
	case FS_F_TIMEOUT:
		snprintf(tmp, sizeof(tmp), "%ld\n", fs_sandbox_timeout(m, sb));
		break;
	case FS_F_STATE:
		snprintf(tmp, sizeof(tmp), "%s\n", fs_sb_state_name(sb->state));
		break;
	default:
		rc = -ENOENT;
	}
	if (rc == 0)
		rc = fs_strbuf(tmp, buf, len);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* runs/SEQ/command: the user's own text. */
int fs_render_command(struct fs_mount *m, const struct fs_loc *loc, char **buf,
		      size_t *len)
{
	int rc = 0;
	pthread_mutex_lock(&m->lock);
	struct fs_run *r = fs_loc_run(loc);
	size_t n = r ? strlen(r->command) : 0;
	if (!r)
		rc = -ENOENT;
	else if (!(*buf = malloc(n + 2)))
		rc = -ENOMEM;
	if (rc == 0) {
		memcpy(*buf, r->command, n);
		(*buf)[n] = '\n';
		(*buf)[n + 1] = '\0';
		*len = n + 1;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* info of a sandbox or of runs/SEQ, as JSON. */
int fs_render_info(struct fs_mount *m, const struct fs_loc *loc, char **buf, size_t *len)
{
	pthread_mutex_lock(&m->lock);
	struct fs_run *r = fs_loc_run(loc);
	int rc;
	if (loc->node == FS_N_RUNFILE && !r)
		rc = -ENOENT;
	else
		rc = fs_json_out(loc->node == FS_N_RUNFILE ? fs_run_json(r)
							   : fs_sandbox_json(m, loc->sb),
				 buf, len);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* ID/env: the user's own lines (mode 0600: the owner only). */
int fs_render_env(struct fs_mount *m, const struct fs_loc *loc, char **buf, size_t *len)
{
	pthread_mutex_lock(&m->lock);
	int rc = fs_strbuf(loc->sb->env ? loc->sb->env : "", buf, len);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int fs_render_cwd(struct fs_mount *m, const struct fs_loc *loc, char **buf, size_t *len)
{
	pthread_mutex_lock(&m->lock);
	int rc = 0;
	if (loc->sb->cwd) {
		size_t n = strlen(loc->sb->cwd);
		if ((*buf = malloc(n + 2))) {
			memcpy(*buf, loc->sb->cwd, n);
			(*buf)[n] = '\n';
			(*buf)[n + 1] = '\0';
			*len = n + 1;
		} else {
			rc = -ENOMEM;
		}
	} else {
		rc = fs_strbuf("", buf, len);
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* ID/stdin: what waits for the next command. */
int fs_render_stdin(struct fs_mount *m, const struct fs_loc *loc, char **buf, size_t *len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/stdin/%s", m->state_dir, loc->sb->id);
	FILE *f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? fs_strbuf("", buf, len) : -errno;
	struct stat st;
	size_t want = fstat(fileno(f), &st) == 0 && st.st_size < FS_STDIN_MAX
			  ? (size_t)st.st_size
			  : FS_STDIN_MAX;
	char *b = malloc(want + 1);
	size_t n = b ? fread(b, 1, want, f) : 0;
	int err = b && ferror(f) ? -EIO : 0;
	fclose(f);
	if (!b)
		return -ENOMEM;
	if (err) {
		free(b);
		return err;
	}
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
}

int fs_render(struct fs_mount *m, const struct fs_loc *loc, char **buf, size_t *len)
{
	*buf = NULL;
	*len = 0;
	if (loc->node == FS_N_JOBFILE)
		return fs_job_render(m, loc, buf, len);
	if (loc->node != FS_N_MFILE && loc->node != FS_N_SBFILE && loc->node != FS_N_RUNFILE)
		return -EISDIR;
	return fs_file_def(loc->file)->render(m, loc, buf, len);
}

off_t fs_render_size(struct fs_mount *m, const struct fs_loc *loc)
{
	if (loc->file == FS_F_STDIN)
		return fs_stdin_size(m, loc->sb);
	if (loc->node == FS_N_JOBFILE && (loc->file == FS_F_STDOUT || loc->file == FS_F_STDERR))
		return fs_job_output_size(m, loc);
	if (loc->file == FS_F_STDOUT || loc->file == FS_F_STDERR) {
		/* output files are not read for a stat */
		off_t size = 0;
		pthread_mutex_lock(&m->lock);
		struct fs_run *r = fs_loc_run(loc);
		if (r && r->status != FS_RUN_RUNNING)
			size =
			    (off_t)(loc->file == FS_F_STDOUT ? r->out.len : r->err.len);
		else if (r)
			size = fs_stream_size(m, r, loc->file == FS_F_STDERR);
		pthread_mutex_unlock(&m->lock);
		return size;
	}
	char *buf;
	size_t len;
	if (fs_render(m, loc, &buf, &len) < 0)
		return 0;
	free(buf);
	return (off_t)len;
}

static void fs_xattr_add(FILE *f, const char *name, const char *value)
{
	fputs(name, f);
	fputc('\0', f);
	fputs(value, f);
	fputc('\0', f);
}

int fs_xattrs(struct fs_mount *m, const struct fs_loc *loc, char **buf, size_t *len)
{
	char *mb = NULL;
	size_t ms = 0;
	FILE *f = open_memstream(&mb, &ms);
	if (!f)
		return -ENOMEM;
	char tmp[64];
	if (loc->node == FS_N_JOB)
		fs_job_xattrs(m, loc, f);
	pthread_mutex_lock(&m->lock);
	struct fs_sandbox *sb = loc->sb;
	if (loc->node == FS_N_SB) {
		struct fs_run *r = fs_sandbox_latest(sb);
		fs_xattr_add(f, "user.sandbox.id", sb->id);
		fs_xattr_add(f, "user.sandbox.state", fs_sb_state_name(sb->state));
		fs_xattr_add(f, "user.sandbox.status",
			     r ? fs_run_status_name(r->status) : "idle");
		if (r && (r->status == FS_RUN_EXITED || r->status == FS_RUN_TIMEOUT)) {
			snprintf(tmp, sizeof(tmp), "%d", r->exit_code);
			fs_xattr_add(f, "user.sandbox.exit", tmp);
		}
		snprintf(tmp, sizeof(tmp), "%" PRIu64, fs_sandbox_last(sb));
		fs_xattr_add(f, "user.sandbox.last", tmp);
		snprintf(tmp, sizeof(tmp), "%ld", fs_sandbox_timeout(m, sb));
		fs_xattr_add(f, "user.sandbox.timeout", tmp);
		fs_xattr_add(f, "user.sandbox.owner", fs_sandbox_owner(sb));
		if (sb->pool)
			fs_xattr_add(f, "user.sandbox.pool", sb->pool);
	} else if (loc->node == FS_N_RUN) {
		struct fs_run *r = fs_sandbox_user_run(sb, loc->seq);
		if (r) {
			fs_xattr_add(f, "user.sandbox.status",
				     fs_run_status_name(r->status));
			if (r->status == FS_RUN_EXITED || r->status == FS_RUN_TIMEOUT) {
				snprintf(tmp, sizeof(tmp), "%d", r->exit_code);
				fs_xattr_add(f, "user.sandbox.exit", tmp);
			}
		}
	}
	pthread_mutex_unlock(&m->lock);
	return fs_memstream_done(f, &mb, &ms, buf, len);
}
