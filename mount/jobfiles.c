/*
 * jobfiles.c — what the files of ID/jobs/N/ say (jobs.c runs the jobs):
 * stdout and stderr as they grow, exit once it ended, status, command,
 * info, the extended attributes.
 */
#include "jobs_i.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int fs_job_read(struct fs_mount *m, const struct fs_loc *loc, char *buf, size_t size,
		off_t off, bool nonblock)
{
	int which = loc->file == FS_F_STDERR;
	pthread_mutex_lock(&m->lock);
	for (;;) {
		struct fs_job *jb = fs_job_find(loc->sb, loc->seq);
		if (!jb) {
			pthread_mutex_unlock(&m->lock);
			return -ENOENT;
		}
		if (jb->status == FS_JOB_FAILED || jb->status == FS_JOB_UNKNOWN) {
			pthread_mutex_unlock(&m->lock);
			return 0; /* no output known: info says why */
		}
		uint64_t have = jb->spooled ? jb->s[which].have : 0;
		if (off >= 0 && (uint64_t)off < have) {
			jb->refs++;
			pthread_mutex_unlock(&m->lock);
			size_t n = have - (uint64_t)off < size ? (size_t)(have - (uint64_t)off)
							       : size;
			ssize_t got = pread(jb->s[which].fd, buf, n, off);
			pthread_mutex_lock(&m->lock);
			fs_job_put_locked(jb);
			pthread_mutex_unlock(&m->lock);
			return got < 0 ? -errno : (int)got;
		}
		if (jb->final_done) {
			pthread_mutex_unlock(&m->lock);
			return 0;
		}
		jb->refs++;
		pthread_mutex_unlock(&m->lock);
		fs_job_want(m, loc->sb, jb);
		pthread_mutex_lock(&m->lock);
		fs_job_put_locked(jb);
		if (nonblock) {
			pthread_mutex_unlock(&m->lock);
			return -EAGAIN;
		}
		if (fs_wait_step(m, true) < 0) {
			pthread_mutex_unlock(&m->lock);
			return -EINTR;
		}
	}
}

int fs_job_wait(struct fs_mount *m, const struct fs_loc *loc, bool nonblock)
{
	pthread_mutex_lock(&m->lock);
	for (;;) {
		struct fs_job *jb = fs_job_find(loc->sb, loc->seq);
		if (!jb || (jb->status != FS_JOB_RUNNING && jb->status != FS_JOB_STARTING))
			break;
		if (nonblock) {
			pthread_mutex_unlock(&m->lock);
			return -EAGAIN;
		}
		jb->refs++;
		pthread_mutex_unlock(&m->lock);
		fs_job_want(m, loc->sb, jb);
		pthread_mutex_lock(&m->lock);
		fs_job_put_locked(jb);
		if (fs_wait_step(m, true) < 0) {
			pthread_mutex_unlock(&m->lock);
			return -EINTR;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return 0;
}

bool fs_job_exists(struct fs_mount *m, struct fs_sandbox *sb, uint64_t n)
{
	pthread_mutex_lock(&m->lock);
	bool have = fs_job_find(sb, n) != NULL;
	pthread_mutex_unlock(&m->lock);
	return have;
}

size_t fs_job_numbers(struct fs_mount *m, struct fs_sandbox *sb, uint64_t **out)
{
	pthread_mutex_lock(&m->lock);
	size_t n = sb->njobs;
	uint64_t *v = calloc(n + 1, sizeof(*v));
	for (size_t i = 0; v && i < n; i++)
		v[i] = sb->jobs[i]->n;
	pthread_mutex_unlock(&m->lock);
	*out = v;
	return v ? n : 0;
}

static void fs_job_time(cJSON *o, const char *key, uint64_t ms)
{
	char t[40];
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&s, &tm);
	strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (ms)
		cJSON_AddStringToObject(o, key, t);
	else
		cJSON_AddNullToObject(o, key);
}

/* info: lock held */
static char *fs_job_json(const struct fs_job *jb)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "job", (double)jb->n);
	cJSON_AddStringToObject(o, "command", jb->command);
	cJSON_AddStringToObject(o, "status", fs_job_status_name(jb->status));
	if (jb->status == FS_JOB_EXITED)
		cJSON_AddNumberToObject(o, "exit", jb->exit_code);
	else
		cJSON_AddNullToObject(o, "exit");
	if (jb->pid > 0)
		cJSON_AddNumberToObject(o, "pid", (double)jb->pid);
	else
		cJSON_AddNullToObject(o, "pid");
	cJSON_AddStringToObject(o, "directory", jb->dir);
	cJSON_AddNumberToObject(o, "stdout_bytes", jb->spooled ? (double)jb->s[0].have : 0);
	cJSON_AddNumberToObject(o, "stderr_bytes", jb->spooled ? (double)jb->s[1].have : 0);
	cJSON_AddBoolToObject(o, "truncated",
			      jb->spooled && (jb->s[0].truncated || jb->s[1].truncated));
	fs_job_time(o, "started", jb->started_ms);
	fs_job_time(o, "ended", jb->ended_ms);
	if (jb->error)
		cJSON_AddStringToObject(o, "error", jb->error);
	else
		cJSON_AddNullToObject(o, "error");
	char *s = cJSON_Print(o);
	cJSON_Delete(o);
	return s;
}

int fs_job_render(struct fs_mount *m, const struct fs_loc *loc, char **buf, size_t *len)
{
	if (loc->file == FS_F_STATUS || loc->file == FS_F_INFO) {
		/* what it is now: its directory is listed (at most once a
		 * second) */
		pthread_mutex_lock(&m->lock);
		struct fs_job *jb = fs_job_find(loc->sb, loc->seq);
		if (jb)
			jb->refs++;
		pthread_mutex_unlock(&m->lock);
		if (jb) {
			fs_job_check(m, loc->sb, jb);
			pthread_mutex_lock(&m->lock);
			fs_job_put_locked(jb);
			pthread_mutex_unlock(&m->lock);
		}
	}
	char *s = NULL;
	int rc = 0;
	pthread_mutex_lock(&m->lock);
	struct fs_job *jb = fs_job_find(loc->sb, loc->seq);
	if (!jb) {
		rc = -ENOENT;
	} else if (loc->file == FS_F_COMMAND) {
		rc = asprintf(&s, "%s\n", jb->command) < 0 ? -ENOMEM : 0;
	} else if (loc->file == FS_F_STATUS) {
		rc = asprintf(&s, "%s\n", fs_job_status_name(jb->status)) < 0 ? -ENOMEM : 0;
	} else if (loc->file == FS_F_EXIT) {
		rc = (jb->status == FS_JOB_EXITED ? asprintf(&s, "%d\n", jb->exit_code)
						   : asprintf(&s, "%s", "")) < 0
			 ? -ENOMEM
			 : 0;
	} else if (loc->file == FS_F_INFO) {
		char *j = fs_job_json(jb);
		rc = !j || asprintf(&s, "%s\n", j) < 0 ? -ENOMEM : 0;
		cJSON_free(j);
	} else {
		rc = asprintf(&s, "%s", "") < 0 ? -ENOMEM : 0; /* ctl; output: fs_job_read */
	}
	pthread_mutex_unlock(&m->lock);
	if (rc < 0)
		return rc;
	*buf = s;
	*len = strlen(s);
	return 0;
}

off_t fs_job_output_size(struct fs_mount *m, const struct fs_loc *loc)
{
	pthread_mutex_lock(&m->lock);
	struct fs_job *jb = fs_job_find(loc->sb, loc->seq);
	off_t size = jb && jb->spooled ? (off_t)jb->s[loc->file == FS_F_STDERR].have : 0;
	if (jb)
		jb->refs++;
	pthread_mutex_unlock(&m->lock);
	if (jb) {
		fs_job_want(m, loc->sb, jb); /* tail -f watches the size */
		pthread_mutex_lock(&m->lock);
		fs_job_put_locked(jb);
		pthread_mutex_unlock(&m->lock);
	}
	return size;
}

uint64_t fs_job_mtime(struct fs_mount *m, const struct fs_loc *loc)
{
	pthread_mutex_lock(&m->lock);
	struct fs_job *jb = loc->node == FS_N_JOBS ? NULL : fs_job_find(loc->sb, loc->seq);
	uint64_t t = jb ? (jb->ended_ms ? jb->ended_ms : jb->started_ms) : 0;
	pthread_mutex_unlock(&m->lock);
	return t ? t : m->mount_ms;
}

void fs_job_xattrs(struct fs_mount *m, const struct fs_loc *loc, FILE *f)
{
	pthread_mutex_lock(&m->lock);
	struct fs_job *jb = fs_job_find(loc->sb, loc->seq);
	if (jb) {
		fprintf(f, "user.sandbox.status%c%s%c", 0, fs_job_status_name(jb->status), 0);
		if (jb->status == FS_JOB_EXITED)
			fprintf(f, "user.sandbox.exit%c%d%c", 0, jb->exit_code, 0);
		if (jb->pid > 0)
			fprintf(f, "user.sandbox.pid%c%ld%c", 0, jb->pid, 0);
	}
	pthread_mutex_unlock(&m->lock);
}
