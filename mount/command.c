/*
 * command.c — the journal-first command path (DESIGN.md §2, §5).
 *
 * A ctl write claims the sandbox's seat in the model, appends the exec
 * intent durably, then hands the request to a detached worker thread and
 * only waits for it: an interrupted write returns EINTR while the worker
 * still records the outcome. An exec whose outcome is unknown is recorded
 * as such and never sent again.
 */
#include "mount_i.h"

#include "common/crc.h"
#include "common/files.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Output up to this size is kept inline in the journal record. */
#define FS_INLINE_OUTPUT 4096

bool fs_run_is_timeout(int exit_code, long timeout_s, long duration_ms);

struct fs_exec {
	struct fs_mount *m;
	struct fs_sandbox *sb;
	uint64_t seq;
	char *command;
	char *send; /* what goes to /execute when not command (runenv.c) */
	struct fs_stream *stream; /* output while it runs (stream.c), or NULL */
	char *url;
	long timeout_s;
	long bound_s;	   /* the sandbox's request bound, 0 none */
	uint64_t sent_ms;  /* monotonic, when the request left */
	bool internal;
	struct workspace *seat_ws; /* told of the seat, told again when it frees */
	/* guarded by m->lock */
	pthread_cond_t done_cv; /* the writer waits on it alone (fs_exec_wait) */
	int refs;
	bool done;
	int result;    /* 0 or -errno for the writer */
	int exit_code; /* valid when result == 0 */
};

static void fs_exec_put(struct fs_exec *ex)
{
	struct fs_mount *m = ex->m;
	pthread_mutex_lock(&m->lock);
	bool last = --ex->refs == 0;
	pthread_mutex_unlock(&m->lock);
	if (!last)
		return;
	free(ex->command);
	free(ex->send);
	fs_stream_put(ex->m, ex->stream);
	free(ex->url);
	pthread_cond_destroy(&ex->done_cv);
	free(ex);
}

/* The writer's wait backstop: an interrupt wakes it at once
 * (watch_interrupt), the end of the session within this. */
#define FS_EXEC_WAIT_MS 500

static void fs_exec_wake(void *arg)
{
	struct fs_exec *ex = arg;
	atomic_fetch_add(&ex->m->n.interrupts_delivered, 1);
	pthread_mutex_lock(&ex->m->lock);
	pthread_cond_broadcast(&ex->done_cv);
	pthread_mutex_unlock(&ex->m->lock);
}

/* Waits for the run's end; -EINTR when the write was interrupted or the
 * mount is going away. The writer sleeps on its own condition: hundreds
 * of writers at once on the mount's m->cond, each woken by every
 * broadcast and every 50 ms, took m->lock thousands of times a second. */
static int fs_exec_wait(struct fs_mount *m, struct fs_exec *ex, bool interruptible)
{
	bool watch = interruptible && m->kernel && m->kernel->watch_interrupt;
	if (watch)
		m->kernel->watch_interrupt(fs_exec_wake, ex);
	int rc = 0;
	pthread_mutex_lock(&m->lock);
	while (!ex->done) {
		if (interruptible && fs_should_stop_waiting(m)) {
			rc = -EINTR;
			break;
		}
		struct timespec ts;
		common_deadline_in(&ts, watch ? FS_EXEC_WAIT_MS : 50);
		pthread_cond_timedwait(&ex->done_cv, &m->lock, &ts);
	}
	pthread_mutex_unlock(&m->lock);
	if (watch)
		m->kernel->watch_interrupt(NULL, NULL);
	return rc;
}

/* Stores one stream: inline when small, else a durable file under
 * STATE/outputs/ID/. */
static int fs_output_store(struct fs_mount *m, const char *id, uint64_t seq,
			   const char *name, const char *data, size_t len,
			   struct journal_output *o)
{
	memset(o, 0, sizeof(*o));
	o->len = len;
	o->crc32 = common_crc32(0, data, len);
	if (len <= FS_INLINE_OUTPUT) {
		o->data = malloc(len + 1);
		if (!o->data)
			return -ENOMEM;
		memcpy(o->data, data, len);
		o->data[len] = '\0';
		return 0;
	}
	char rel[512], dir[4096], path[4096];
	snprintf(rel, sizeof(rel), "outputs/%s/%llu.%s", id, (unsigned long long)seq,
		 name);
	snprintf(dir, sizeof(dir), "%s/outputs/%s", m->state_dir, id);
	snprintf(path, sizeof(path), "%s/%s", m->state_dir, rel);
	int rc = common_mkdirs(dir, 0700);
	if (rc < 0)
		return rc;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	size_t done = 0;
	while (done < len) {
		ssize_t w = write(fd, data + done, len - done);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			close(fd);
			return rc;
		}
		done += (size_t)w;
	}
	if (fdatasync(fd) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	close(fd);
	o->file = fs_strdup0(rel);
	return o->file ? 0 : -ENOMEM;
}

int fs_output_load(struct fs_mount *m, const struct journal_output *o, char **buf,
		   size_t *len)
{
	*buf = NULL;
	*len = 0;
	if (o->data || !o->file) {
		*buf = malloc(o->len + 1);
		if (!*buf)
			return -ENOMEM;
		if (o->data && o->len)
			memcpy(*buf, o->data, o->len);
		*len = o->data ? o->len : 0;
		return 0;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", m->state_dir, o->file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fs_log("output %s: %s", o->file, strerror(errno));
		return -EIO;
	}
	char *b = malloc(o->len + 1);
	if (!b) {
		close(fd);
		return -ENOMEM;
	}
	size_t got = 0;
	while (got < o->len) {
		ssize_t r = pread(fd, b + got, o->len - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	uint32_t c = common_crc32(0, b, got);
	if (got != o->len || c != o->crc32) {
		fs_log("output %s: damaged (length or crc32 mismatch)", o->file);
		free(b);
		return -EIO;
	}
	b[got] = '\0';
	*buf = b;
	*len = got;
	return 0;
}

static void fs_invalidate_results(struct fs_mount *m, struct fs_sandbox *sb)
{
	static const char *const files[] = {"stdout", "stderr", "exit",
					    "status", "last",	"info"};
	if (!m->kernel || atomic_load(&m->stopping))
		return;
	char path[512];
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "/%s/%s", sb->id, files[i]);
		m->kernel->invalidate_path(m, path);
	}
	snprintf(path, sizeof(path), "/%s/runs", sb->id);
	m->kernel->invalidate_path(m, path);
}

/* What the mount and the kernel hold of the workspace and the command may
 * have changed. With the run's whole change list and no directory in it,
 * no name came, went or changed type: the files listed are fetched again
 * and every other cached copy stays (workspace_invalidate_changed); the
 * kernel forgets the attributes and pages of the files listed and keeps
 * every name, here and in every other sandbox (a new name-cache epoch is
 * the whole mount's: at hundreds of commands a second, every lookup
 * anywhere went to the daemon again). Else both forget everything they
 * hold under the workspace, names too. */
static void fs_invalidate_workspace(struct fs_mount *m, struct fs_sandbox *sb,
				    struct workspace *ws, const struct ws_changes *chg)
{
	if (atomic_load(&m->stopping))
		return;
	if (ws)
		workspace_invalidate_changed(ws, chg);
	if (!m->kernel || atomic_load(&m->stopping))
		return;
	char path[4200];
	if (ws_changes_precise(chg)) {
		for (size_t i = 0; i < chg->nfiles; i++) {
			int n = snprintf(path, sizeof(path), "/%s/workspace/%s", sb->id,
					 chg->files[i]);
			if (n > 0 && (size_t)n < sizeof(path))
				m->kernel->invalidate_path(m, path);
		}
		atomic_fetch_add(&m->n.precise_invalidations, 1);
		return;
	}
	snprintf(path, sizeof(path), "/%s/workspace", sb->id);
	m->kernel->invalidate_tree(m, path);
}

/* Records the outcome in the journal and the model, frees the seat. */
static void fs_exec_finish(struct fs_exec *ex, enum backend_status st,
			  struct backend_exec_result *res,
			  const struct backend_error *err)
{
	struct fs_mount *m = ex->m;
	struct fs_sandbox *sb = ex->sb;
	struct journal_record r = {0};
	r.sandbox = sb->id;
	r.seq = ex->seq;
	struct journal_output out = {0}, errout = {0};
	enum fs_run_status status;
	int result = 0;
	char why[640] = "";

	if (st == BACKEND_OK) {
		int rc = fs_output_store(m, sb->id, ex->seq, "stdout",
					 res->out ? res->out : "", res->out_len, &out);
		if (rc == 0)
			rc = fs_output_store(m, sb->id, ex->seq, "stderr",
					     res->err ? res->err : "", res->err_len,
					     &errout);
		if (rc < 0) {
			fs_log("sandbox %s run %llu: cannot store output: %s", sb->id,
			       (unsigned long long)ex->seq, strerror(-rc));
			/* Keep no half-stored stream: empty and marked truncated. */
			free(out.data);
			free(out.file);
			free(errout.data);
			free(errout.file);
			memset(&out, 0, sizeof(out));
			memset(&errout, 0, sizeof(errout));
			out.crc32 = errout.crc32 = 0; /* the CRC-32 of nothing */
			res->truncated = true;
		}
		r.kind = JOURNAL_EXEC_RESULT;
		r.exit_code = res->exit_code;
		r.duration_ms = res->duration_ms;
		r.truncated = res->truncated;
		r.out = out;
		r.err = errout;
		status =
		    fs_run_is_timeout(res->exit_code, ex->timeout_s, res->duration_ms)
			? FS_RUN_TIMEOUT
			: FS_RUN_EXITED;
	} else {
		bool unknown = st == BACKEND_ANSWER_LOST || st == BACKEND_BAD_ANSWER ||
			       st == BACKEND_SERVER_ERROR || st == BACKEND_LOCAL;
		/* A proxy cuts a request at the sandbox's bound: a 504, or
		 * a connection closed once the bound has passed. */
		bool cut = unknown && ex->bound_s > 0 &&
			   (err->http_status == 504 ||
			    common_now_ms() - ex->sent_ms >= (uint64_t)ex->bound_s * 1000);
		if (cut) {
			r.kind = JOURNAL_EXEC_UNKNOWN;
			status = FS_RUN_UNKNOWN;
			result = -EIO;
			snprintf(why, sizeof(why),
				 "outcome unknown: the request was cut at the sandbox's "
				 "request bound (timeoutSeconds %ld s%s); the command "
				 "may still run there (%s)",
				 ex->bound_s,
				 ex->sb->bound_s > 0 ? "" : ", assumed: not set by this mount",
				 err->message);
		} else if (unknown) {
			r.kind = JOURNAL_EXEC_UNKNOWN;
			status = FS_RUN_UNKNOWN;
			result = -EIO;
			snprintf(why, sizeof(why), "outcome unknown (%s): %s",
				 backend_status_name(st), err->message);
		} else {
			r.kind = JOURNAL_EXEC_NOT_RUN;
			status = FS_RUN_FAILED;
			result = -backend_errno(st, BACKEND_OP_EXECUTE);
			if (result == 0)
				result = -EIO;
			snprintf(why, sizeof(why), "not run (%s): %s",
				 backend_status_name(st), err->message);
		}
		r.error = why;
	}

	/* Written, not synced: only the intent must be durable before the
	 * request (never resent). A power loss before the next sync turns
	 * this outcome into "unknown" at replay, the safe side; a crash of
	 * the daemon alone loses nothing (the page cache keeps it). Saves
	 * one fdatasync per command (see tests/bench/RESULTS.md). */
	int jrc = journal_append(m->journal, &r, false);
	if (jrc < 0)
		fs_log("sandbox %s run %llu: journal append failed: %s", sb->id,
		       (unsigned long long)ex->seq, strerror(-jrc));

	struct workspace *ws;
	pthread_mutex_lock(&m->lock);
	struct fs_run *run = fs_sandbox_run(sb, ex->seq);
	if (run) {
		run->status = status;
		run->stream = NULL; /* readers now read the stored output */
		run->ended_ms = common_wall_ms();
		run->result_errno = -result;
		if (st == BACKEND_OK) {
			run->exit_code = res->exit_code;
			run->duration_ms = res->duration_ms;
			run->truncated = res->truncated;
			run->out = out;
			run->err = errout;
			memset(&out, 0, sizeof(out));
			memset(&errout, 0, sizeof(errout));
		} else {
			run->duration_ms = (long)(run->ended_ms - run->started_ms);
			fs_set_str(&run->error, why);
		}
	}
	sb->commands_run++;
	if (st != BACKEND_OK)
		fs_set_str(&sb->last_error, why);
	if (st == BACKEND_NOT_SENT && sb->state == FS_SB_READY && sb->attached)
		sb->state = FS_SB_UNREACHABLE;
	else if (st == BACKEND_OK && sb->state == FS_SB_UNREACHABLE)
		sb->state = FS_SB_READY;
	ws = sb->ws;
	pthread_mutex_unlock(&m->lock);

	free(out.data);
	free(out.file);
	free(errout.data);
	free(errout.file);

	/* Before the writer returns and the seat is free: what the kernel
	 * holds of the results and of the workspace is older than the
	 * command, and a script reads them right after its write. */
	fs_invalidate_results(m, sb);
	if (!ex->internal && st != BACKEND_NOT_SENT)
		fs_invalidate_workspace(m, sb, ws,
					st == BACKEND_OK ? fs_stream_changes(ex->stream) : NULL);

	/* The command is over: the workspace's retries may go on (the seat
	 * count is the workspace's own, so no order with the model's). */
	workspace_seat(ex->seat_ws, false);
	pthread_mutex_lock(&m->lock);
	if (sb->busy && sb->busy_seq == ex->seq)
		sb->busy = false;
	ex->done = true;
	pthread_cond_broadcast(&ex->done_cv);
	ex->result = result;
	ex->exit_code = st == BACKEND_OK ? res->exit_code : -1;
	if (status == FS_RUN_EXITED || status == FS_RUN_TIMEOUT)
		atomic_fetch_add(&m->n.commands_exited, 1);
	else if (status == FS_RUN_UNKNOWN)
		atomic_fetch_add(&m->n.commands_unknown, 1);
	else
		atomic_fetch_add(&m->n.commands_failed, 1);
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
}

static void *fs_exec_main(void *arg)
{
	struct fs_exec *ex = arg;
	struct fs_mount *m = ex->m;
	struct backend_exec_result res;
	struct backend_error err;
	memset(&res, 0, sizeof(res));
	memset(&err, 0, sizeof(err));

	ex->sent_ms = common_now_ms();
	if (ex->stream)
		fs_stream_start(ex->stream);
	enum backend_status st =
	    backend_execute(m->backend, ex->url, ex->send ? ex->send : ex->command,
			    ex->timeout_s, &res, &err);
	if (ex->stream) {
		int src = fs_stream_finish(ex->stream, st, &res);
		if (src < 0)
			fs_log("sandbox %s run %llu: the rest of its output: %s", ex->sb->id,
			       (unsigned long long)ex->seq, strerror(-src));
	}
	fs_exec_finish(ex, st, &res, &err);
	backend_exec_result_clear(&res);
	fs_exec_put(ex);
	fs_worker_exit(m);
	return NULL;
}

/* Marks a run that never reached the wire as failed and frees the seat
 * (and tells seat_ws, when given, that it is free). */
static void fs_run_abort(struct fs_mount *m, struct fs_sandbox *sb, uint64_t seq,
			 const char *why, int errnum, struct workspace *seat_ws)
{
	workspace_seat(seat_ws, false);
	pthread_mutex_lock(&m->lock);
	struct fs_run *run = fs_sandbox_run(sb, seq);
	if (run) {
		run->status = FS_RUN_FAILED;
		run->stream = NULL; /* its creator drops it */
		run->ended_ms = common_wall_ms();
		run->result_errno = errnum;
		fs_set_str(&run->error, why);
	}
	fs_set_str(&sb->last_error, why);
	if (sb->busy && sb->busy_seq == seq)
		sb->busy = false;
	atomic_fetch_add(&m->n.commands_failed, 1);
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
}

int fs_command_run(struct fs_mount *m, struct fs_sandbox *sb, const char *command,
		   size_t len, bool interruptible, bool internal, uint64_t *seq_out)
{
	struct fs_command_opts o = {.interruptible = interruptible, .internal = internal};
	return fs_command_run_opts(m, sb, command, len, &o, seq_out);
}

int fs_command_run_opts(struct fs_mount *m, struct fs_sandbox *sb, const char *command,
			size_t len, const struct fs_command_opts *o, uint64_t *seq_out)
{
	bool internal = o->internal, interruptible = o->interruptible;
	if (len == 0 || memchr(command, '\0', len))
		return -EINVAL;

	/* What the run needs is allocated before the seat is taken, so that
	 * running out of memory is an errno here, never an abort in a FUSE
	 * operation or a seat left taken. */
	char *cmd = strndup(command, len);	   /* the journal's, then the worker's */
	char *run_command = strndup(command, len); /* the run history's */
	struct fs_exec *ex = calloc(1, sizeof(*ex));
	char *osend = o->send ? strdup(o->send) : NULL;
	int refused = -ENOMEM;
	if (!cmd || !run_command || !ex || (o->send && !osend))
		goto refuse;

	/* A command the workspace runs from workspace_before_command, on
	 * this thread, uses the seat the user's command already holds. */
	bool nested = internal && o->in_seat;

	pthread_mutex_lock(&m->lock);
	if (!sb->present || !sb->url || sb->state == FS_SB_GONE ||
	    sb->state == FS_SB_DELETING || sb->lifecycle_busy) {
		refused = sb->present ? -ENOTCONN : -ENOENT;
		pthread_mutex_unlock(&m->lock);
		goto refuse;
	}
	/* A command the orchestrator's proxy would cut is never sent: its
	 * outcome could only be unknown (DESIGN.md §4, request bounds). */
	long timeout_s = o->timeout_s > 0 ? o->timeout_s : fs_sandbox_timeout(m, sb);
	if (fs_timeout_check(sb, timeout_s) < 0) {
		char why[256];
		snprintf(why, sizeof(why),
			 "not sent: the command timeout (%ld s, 0 = none) is not under "
			 "the sandbox's request bound (%ld s%s); write a smaller one to "
			 "timeout",
			 timeout_s, fs_sandbox_bound(sb),
			 sb->bound_s > 0 ? "" : ", assumed");
		(void)fs_set_str(&sb->last_error, why);
		pthread_mutex_unlock(&m->lock);
		refused = -EINVAL;
		goto refuse;
	}
	if (!nested) {
		if (sb->busy) {
			pthread_mutex_unlock(&m->lock);
			atomic_fetch_add(&m->n.busy_refused, 1);
			refused = -EBUSY;
			goto refuse;
		}
		sb->busy = true;
		sb->busy_seq = 0; /* claimed; the run gets its number below */
	}
	pthread_mutex_unlock(&m->lock);

	/* The workspace holds no retry into the sandbox while the seat is
	 * ours (told before its flush, so no retry slips in after it). */
	struct workspace *ws = fs_sandbox_workspace(m, sb);
	struct workspace *seat_ws = nested ? NULL : ws;
	workspace_seat(seat_ws, true);

	/* What was written here reaches the sandbox before the command, and
	 * batched workspace changes (modes) with it, with the seat held by
	 * this mount; they run as commands of their own, numbered before
	 * this one. An upload that cannot be delivered stops the command. */
	char refusal[640] = "";
	if ((!internal || o->flush) && ws) {
		int wrc = workspace_before_command(ws, refusal, sizeof(refusal));
		if (wrc < 0 && !refusal[0])
			snprintf(refusal, sizeof(refusal), "not sent: %s",
				 strerror(-wrc));
	}

	pthread_mutex_lock(&m->lock);
	struct fs_run *run = fs_sandbox_push_run(m, sb);
	if (!run) {
		/* nothing journaled or sent yet: give the seat back */
		if (!nested) {
			sb->busy = false;
			pthread_cond_broadcast(&m->cond);
		}
		pthread_mutex_unlock(&m->lock);
		workspace_seat(seat_ws, false);
		goto refuse;
	}
	uint64_t seq = ++sb->last_seq;
	long bound_s = fs_sandbox_bound(sb);
	if (!nested)
		sb->busy_seq = seq;
	run->seq = seq;
	run->internal = internal;
	run->command = run_command;
	run->timeout_s = timeout_s;
	run->status = FS_RUN_RUNNING;
	run->started_ms = common_wall_ms();
	char *url = fs_strdup0(sb->url);
	pthread_mutex_unlock(&m->lock);
	atomic_fetch_add(&m->n.commands, 1);
	fs_invalidate_results(m, sb);
	if (seq_out)
		*seq_out = seq;

	/* Its stdin goes up and its env and cwd wrap it (runenv.c). */
	char *send = osend; /* internal: as given, or the command */
	osend = NULL;
	bool upload_pending = refusal[0] != '\0';
	if (!refusal[0] && !internal && url) {
		int prc = fs_command_prepare(m, sb, url, seq, cmd, true, &send, refusal,
					     sizeof(refusal));
		if (prc < 0 && !refusal[0])
			snprintf(refusal, sizeof(refusal), "not sent: %s", strerror(-prc));
	}
	/* Its output readable while it runs, and what it changed listed after
	 * it (stream.c; with -o stream=no only the listing). */
	struct fs_stream *stream = NULL;
	if (!refusal[0] && !internal && url) {
		char *inner = send ? send : fs_sh_eval(cmd);
		char *wrapped = NULL;
		int src = inner ? fs_stream_new(m, sb, seq, url, inner, strlen(inner), &wrapped,
						&stream)
				: -ENOMEM;
		if (inner != send)
			free(inner);
		if (src == 0) {
			free(send);
			send = wrapped;
			pthread_mutex_lock(&m->lock);
			struct fs_run *sr = fs_sandbox_run(sb, seq);
			if (sr && m->opt.stream_on)
				sr->stream = stream; /* readers read it while it runs */
			pthread_mutex_unlock(&m->lock);
		} else {
			fs_log("sandbox %s: command %llu runs without streamed output: %s",
			       sb->id, (unsigned long long)seq, strerror(-src));
		}
	}
	if (refusal[0]) {
		/* Never sent: a failed run (exit empty, info says why), not
		 * journaled, like a run the journal could not take. */
		if (upload_pending)
			fs_log("sandbox %s: command %llu not sent: an upload there is "
			       "still pending (see .sandboxfs/health)",
			       sb->id, (unsigned long long)seq);
		else
			fs_log("sandbox %s: command %llu %s", sb->id,
			       (unsigned long long)seq, refusal);
		fs_run_abort(m, sb, seq, refusal, EIO, seat_ws);
		free(cmd);
		free(send);
		free(url);
		free(ex);
		return -EIO;
	}

	int rc = url ? fs_sandbox_adopt(m, sb) : -ENOMEM;
	if (rc == 0 && o->before)
		rc = o->before(o->ctx, seq);
	struct journal_record r = {.kind = JOURNAL_EXEC_INTENT};
	r.sandbox = sb->id;
	r.seq = seq;
	r.timeout_s = timeout_s;
	r.command = cmd;
	r.internal = internal;
	if (rc == 0)
		rc = journal_append(m->journal, &r, true);
	if (rc < 0) {
		char why[256];
		snprintf(why, sizeof(why), "not run: %s%s", url ? "journal: " : "",
			 strerror(-rc));
		fs_log("sandbox %s: %s", sb->id, why);
		fs_run_abort(m, sb, seq, why, EIO, seat_ws);
		fs_stream_put(m, stream);
		free(cmd);
		free(send);
		free(url);
		free(ex);
		return -EIO;
	}

	ex->m = m;
	ex->sb = sb;
	ex->seq = seq;
	ex->command = cmd;
	ex->url = url;
	ex->send = send;
	ex->stream = stream;
	ex->timeout_s = timeout_s;
	ex->bound_s = bound_s;
	ex->internal = internal;
	ex->seat_ws = seat_ws;
	ex->refs = 2;
	common_cond_init(&ex->done_cv);

	if (nested || fs_worker_start(m, fs_exec_main, ex) != 0) {
		/* nested, or no thread: run it here, uninterruptibly */
		atomic_fetch_add(&m->workers, 1);
		fs_exec_main(ex);
	}

	if (fs_exec_wait(m, ex, interruptible) < 0) {
		atomic_fetch_add(&m->n.interrupted_writes, 1);
		fs_exec_put(ex);
		return -EINTR;
	}
	pthread_mutex_lock(&m->lock);
	rc = ex->result;
	pthread_mutex_unlock(&m->lock);
	fs_exec_put(ex);
	return rc;

refuse: /* before the seat was taken: nothing to undo but memory */
	free(osend);
	free(cmd);
	free(run_command);
	free(ex);
	return refused;
}

bool fs_command_unknown(struct fs_mount *m, struct fs_sandbox *sb, uint64_t seq)
{
	if (!seq)
		return false;
	pthread_mutex_lock(&m->lock);
	struct fs_run *r = fs_sandbox_run(sb, seq);
	bool unknown = r && r->status == FS_RUN_UNKNOWN;
	pthread_mutex_unlock(&m->lock);
	return unknown;
}

int fs_command_wait_idle(struct fs_mount *m, struct fs_sandbox *sb, uint64_t seq,
			 bool nonblock)
{
	pthread_mutex_lock(&m->lock);
	bool counted = false;
	for (;;) {
		bool running;
		if (seq) {
			struct fs_run *r = fs_sandbox_run(sb, seq);
			running = r && r->status == FS_RUN_RUNNING;
		} else {
			running = sb->busy;
		}
		if (!running)
			break;
		if (nonblock) {
			pthread_mutex_unlock(&m->lock);
			return -EAGAIN;
		}
		if (!counted) {
			atomic_fetch_add(&m->n.waits, 1);
			counted = true;
		}
		if (fs_wait_step(m, true) < 0) {
			pthread_mutex_unlock(&m->lock);
			return -EINTR;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return 0;
}

int fs_command_exec_cb(void *ctx, const char *sandbox_id, const char *command,
		       bool in_seat, int *exit_code)
{
	struct fs_mount *m = ctx;
	pthread_mutex_lock(&m->lock);
	struct fs_sandbox *sb = fs_sandbox_find(m, sandbox_id);
	pthread_mutex_unlock(&m->lock);
	if (!sb)
		return -ENOENT;
	uint64_t seq = 0;
	struct fs_command_opts o = {.internal = true, .in_seat = in_seat};
	int rc = fs_command_run_opts(m, sb, command, strlen(command), &o, &seq);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&m->lock);
	struct fs_run *r = fs_sandbox_run(sb, seq);
	if (r && exit_code)
		*exit_code = r->exit_code;
	pthread_mutex_unlock(&m->lock);
	return r ? 0 : -EIO;
}
