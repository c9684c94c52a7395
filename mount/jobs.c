/*
 * jobs.c — background jobs (DESIGN.md §1, ID/spawn and ID/jobs/N/).
 *
 * A write to ID/spawn is one /execute, through the seat like any command
 * (EBUSY while a foreground command runs), that starts the user's text
 * detached: `setsid sh -c JOB sh DIR` with every descriptor redirected,
 * then prints its pid (its session and process group). So /execute
 * answers at once and the job outlives it. The job writes its output as
 * pieces into DIR (.sandboxfs-job.N.NONCE in the workspace root, hidden
 * from listings), as a streamed run does (spool_i.h), and when the user's
 * command ends its exit code to DIR/rc (written aside, then renamed). All
 * a job's facts after its start come from GET /files of DIR, which needs
 * no seat: its output is fetched into spool files while someone reads it
 * (each byte crosses the wire about once), its end is seen by rc.
 *
 * `kill` on jobs/N/ctl is another /execute (EBUSY while the seat is
 * taken): TERM to the job's process group, up to FS_JOB_GRACE_S for it to
 * go, then KILL, and DIR/killed unless it had ended by itself.
 *
 * Journal (DESIGN.md §5): JOB_INTENT (number, text, DIR) durably before
 * the spawn is sent, then STARTED (pid), NOT_RUN or UNKNOWN; EXITED or
 * KILLED when seen. An unknown spawn is never sent again. Jobs come back
 * at mount from the journal, and what they are now is fetched afresh
 * from DIR. The history keeps -o max_runs jobs a sandbox; the directory
 * of one that leaves it is deleted if it had ended.
 */
#include "node_i.h"
#include "jobs_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/shquote.h"

#define FS_JOB_DIR	   ".sandboxfs-job."
#define FS_JOB_MARK	   "sandboxfs-job "
#define FS_JOB_KILLED_MARK "sandboxfs-killed"
#define FS_JOB_SPAWN_S	   30  /* timeoutSeconds of a spawn */
#define FS_JOB_GRACE_S	   5   /* between TERM and KILL */
#define FS_JOB_KILL_S	   30  /* timeoutSeconds of a kill */
#define FS_JOB_POLL_MS	   500 /* between passes while someone reads */
#define FS_JOB_IDLE_MS	   10000 /* a poller nobody wanted this long stops */
#define FS_JOB_CHECK_MS	   1000 /* status: listed again after this long */


const char *fs_job_status_name(enum fs_job_status s)
{
	static const char *const names[] = {"running", "running", "exited",
					    "killed",  "unknown", "failed"};
	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown";
}

static bool fs_job_ended(const struct fs_job *jb)
{
	return jb->status == FS_JOB_EXITED || jb->status == FS_JOB_KILLED;
}

/* m->lock held */
struct fs_job *fs_job_find(struct fs_sandbox *sb, uint64_t n)
{
	for (size_t i = 0; i < sb->njobs; i++)
		if (sb->jobs[i]->n == n)
			return sb->jobs[i];
	return NULL;
}

static void fs_job_free(struct fs_job *jb)
{
	for (int i = 0; i < 2; i++)
		fs_spool_close(&jb->s[i]);
	free(jb->command);
	free(jb->dir);
	free(jb->error);
	free(jb);
}

/* Drops one hold (m->lock held); frees at the last. */
void fs_job_put_locked(struct fs_job *jb)
{
	if (--jb->refs == 0)
		fs_job_free(jb);
}

static struct fs_job *fs_job_new(uint64_t n, const char *command, const char *dir)
{
	struct fs_job *jb = calloc(1, sizeof(*jb));
	if (!jb)
		return NULL;
	jb->n = n;
	jb->command = fs_strdup0(command ? command : "");
	jb->dir = fs_strdup0(dir ? dir : "");
	jb->s[0].fd = jb->s[1].fd = -1;
	jb->refs = 1;
	if (!jb->command || !jb->dir) {
		fs_job_free(jb);
		return NULL;
	}
	return jb;
}

/* Adds jb to the history, dropping the oldest beyond max_runs (m->lock
 * held). *gone gets the directory of a dropped job that had ended (the
 * caller deletes it), else NULL. */
static int fs_job_push(struct fs_mount *m, struct fs_sandbox *sb, struct fs_job *jb,
		       char **gone)
{
	*gone = NULL;
	size_t max = m->opt.max_runs > 0 ? (size_t)m->opt.max_runs : 100;
	struct fs_job **v = realloc(sb->jobs, (sb->njobs + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	sb->jobs = v;
	while (sb->njobs >= max) {
		struct fs_job *old = sb->jobs[0];
		if (old->status == FS_JOB_EXITED || old->status == FS_JOB_KILLED ||
		    old->status == FS_JOB_FAILED) {
			free(*gone);
			*gone = fs_strdup0(old->dir);
		}
		memmove(&sb->jobs[0], &sb->jobs[1], (sb->njobs - 1) * sizeof(*v));
		sb->njobs--;
		fs_job_put_locked(old);
	}
	sb->jobs[sb->njobs++] = jb;
	return 0;
}

bool fs_jobs_running(const struct fs_sandbox *sb)
{
	for (size_t i = 0; i < sb->njobs; i++)
		if (sb->jobs[i]->status == FS_JOB_RUNNING ||
		    sb->jobs[i]->status == FS_JOB_STARTING)
			return true;
	return false;
}

/* The kernel forgets what it holds of jobs/N (its files and the list). */
static void fs_job_invalidate(struct fs_mount *m, struct fs_sandbox *sb, uint64_t n)
{
	static const char *const files[] = {"status", "exit", "stdout", "stderr", "info"};
	if (!m->kernel || atomic_load(&m->stopping))
		return;
	char path[512];
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "/%s/jobs/%" PRIu64 "/%s", sb->id, n, files[i]);
		m->kernel->invalidate_path(m, path);
	}
	snprintf(path, sizeof(path), "/%s/jobs", sb->id);
	m->kernel->invalidate_path(m, path);
}

static void fs_job_journal(struct fs_mount *m, struct fs_sandbox *sb, enum journal_kind kind,
			   uint64_t n, long pid, int code, const char *error, bool durable)
{
	struct journal_record r = {.kind = kind};
	r.sandbox = sb->id;
	r.job = n;
	r.pid = pid;
	r.exit_code = code;
	r.error = (char *)error;
	int rc = journal_append(m->journal, &r, durable);
	if (rc < 0)
		fs_log("sandbox %s job %" PRIu64 ": journal append failed: %s", sb->id, n,
		       strerror(-rc));
}

/* The job ended (seen in its directory, or killed here): recorded once. */
static void fs_job_end(struct fs_mount *m, struct fs_sandbox *sb, struct fs_job *jb,
		       bool killed, int code)
{
	pthread_mutex_lock(&m->lock);
	bool first = jb->status == FS_JOB_RUNNING;
	if (first) {
		jb->status = killed ? FS_JOB_KILLED : FS_JOB_EXITED;
		jb->exit_code = killed ? 0 : code;
		jb->ended_ms = common_wall_ms();
	}
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
	if (!first)
		return;
	fs_job_journal(m, sb, killed ? JOURNAL_JOB_KILLED : JOURNAL_JOB_EXITED, jb->n, 0,
		       killed ? 0 : code, NULL, false);
	fs_job_invalidate(m, sb, jb->n);
}

/* What the listing l of the job's directory says of its end. */
static void fs_job_markers(struct fs_mount *m, struct fs_sandbox *sb, struct fs_job *jb,
			   const char *url, const struct backend_listing *l)
{
	bool rc = false, killed = false;
	for (size_t i = 0; i < l->count; i++) {
		rc |= strcmp(l->entries[i].name, "rc") == 0;
		killed |= strcmp(l->entries[i].name, "killed") == 0;
	}
	if (killed && !rc) {
		fs_job_end(m, sb, jb, true, 0);
		return;
	}
	if (!rc)
		return;
	char path[256], buf[32] = "";
	snprintf(path, sizeof(path), "%s/rc", jb->dir);
	FILE *f = tmpfile();
	struct backend_error err;
	uint64_t got = 0;
	if (!f)
		return;
	if (backend_file_get(m->backend, url, path, fileno(f), &got, &err) == BACKEND_OK &&
	    got < sizeof(buf) && pread(fileno(f), buf, got, 0) == (ssize_t)got) {
		buf[got] = '\0';
		char *end;
		long code = strtol(buf, &end, 10);
		if (end != buf)
			fs_job_end(m, sb, jb, false, (int)code);
	}
	fclose(f);
}

/* A copy of the sandbox's URL (m->lock held), NULL when it has none. */
static char *fs_job_url(struct fs_sandbox *sb)
{
	return sb->present && sb->url ? fs_strdup0(sb->url) : NULL;
}

/* Lists the job's directory and records its end when it shows one; for
 * a status read, at most once a second. No lock held. */
void fs_job_check(struct fs_mount *m, struct fs_sandbox *sb, struct fs_job *jb)
{
	pthread_mutex_lock(&m->lock);
	uint64_t now = common_now_ms();
	bool due = jb->status == FS_JOB_RUNNING && now - jb->checked_ms >= FS_JOB_CHECK_MS;
	char *url = due ? fs_job_url(sb) : NULL;
	if (url) {
		jb->checked_ms = now;
		jb->refs++;
	}
	pthread_mutex_unlock(&m->lock);
	if (!url)
		return;
	struct backend_listing l;
	struct backend_error err;
	enum backend_status st = backend_list(m->backend, url, jb->dir, &l, &err);
	if (st == BACKEND_OK) {
		fs_job_markers(m, sb, jb, url, &l);
		backend_listing_clear(&l);
	}
	free(url);
	pthread_mutex_lock(&m->lock);
	fs_job_put_locked(jb);
	pthread_mutex_unlock(&m->lock);
}

/* --- the poller -----------------------------------------------------------------*/

struct fs_job_poll {
	struct fs_mount *m;
	struct fs_sandbox *sb;
	struct fs_job *jb;
	char *url;
};

/* Sleeps up to ms, or less when the mount stops (m->lock held). */
static void fs_job_nap(struct fs_mount *m, uint64_t ms)
{
	uint64_t until = common_now_ms() + ms;
	while (!atomic_load(&m->stopping) && common_now_ms() < until)
		(void)fs_wait_step(m, false);
}

static void *fs_job_poll_main(void *arg)
{
	struct fs_job_poll *p = arg;
	struct fs_mount *m = p->m;
	struct fs_job *jb = p->jb;
	bool ok = true;
	if (!jb->spooled) {
		for (int i = 0; ok && i < 2; i++) {
			char name[160];
			snprintf(name, sizeof(name), "%s.job.%" PRIu64 ".%s", p->sb->id, jb->n,
				 i ? "stderr" : "stdout");
			ok = fs_spool_open(m, &jb->s[i], name) == 0;
		}
		pthread_mutex_lock(&m->lock);
		jb->spooled = ok;
		pthread_mutex_unlock(&m->lock);
	}
	while (ok && !atomic_load(&m->stopping)) {
		pthread_mutex_lock(&m->lock);
		bool ended = jb->status != FS_JOB_RUNNING;
		bool idle = common_now_ms() - jb->want_ms > FS_JOB_IDLE_MS;
		pthread_mutex_unlock(&m->lock);
		struct backend_listing l;
		int rc = fs_pieces_pass(m, p->url, jb->dir, "", jb->s, ended, &l);
		if (rc >= 0 && !ended) {
			pthread_mutex_lock(&m->lock);
			jb->checked_ms = common_now_ms();
			pthread_mutex_unlock(&m->lock);
			fs_job_markers(m, p->sb, jb, p->url, &l);
		}
		if (rc >= 0)
			backend_listing_clear(&l);
		if (ended || (rc == -ENOENT && !ended)) {
			/* everything there is (a directory gone: nothing more) */
			pthread_mutex_lock(&m->lock);
			if (rc == -ENOENT && jb->status == FS_JOB_RUNNING) {
				jb->status = FS_JOB_UNKNOWN;
				fs_set_str(&jb->error, "its directory is gone from the workspace");
			}
			jb->final_done = true;
			pthread_cond_broadcast(&m->cond);
			pthread_mutex_unlock(&m->lock);
			break;
		}
		pthread_mutex_lock(&m->lock);
		bool now_ended = jb->status != FS_JOB_RUNNING;
		if (!now_ended && idle) {
			pthread_mutex_unlock(&m->lock);
			break;
		}
		if (!now_ended)
			fs_job_nap(m, FS_JOB_POLL_MS);
		pthread_mutex_unlock(&m->lock);
	}
	pthread_mutex_lock(&m->lock);
	if (!ok)
		jb->final_done = true; /* no spool: nothing to read */
	jb->polling = false;
	pthread_cond_broadcast(&m->cond);
	fs_job_put_locked(jb);
	pthread_mutex_unlock(&m->lock);
	free(p->url);
	free(p);
	fs_worker_exit(m);
	return NULL;
}

/* Someone reads the job's output or waits for its end: the poller runs
 * (once), and keeps running while someone does. No lock held. */
void fs_job_want(struct fs_mount *m, struct fs_sandbox *sb, struct fs_job *jb)
{
	struct fs_job_poll *p = NULL;
	pthread_mutex_lock(&m->lock);
	jb->want_ms = common_now_ms();
	bool start = !jb->polling && !jb->final_done &&
		     (jb->status == FS_JOB_RUNNING || fs_job_ended(jb)) &&
		     !atomic_load(&m->stopping);
	char *url = start ? fs_job_url(sb) : NULL;
	if (url && (p = calloc(1, sizeof(*p)))) {
		jb->polling = true;
		jb->refs++;
		*p = (struct fs_job_poll){.m = m, .sb = sb, .jb = jb, .url = url};
	} else {
		free(url);
	}
	pthread_mutex_unlock(&m->lock);
	if (p && fs_worker_start(m, fs_job_poll_main, p) != 0) {
		pthread_mutex_lock(&m->lock);
		jb->polling = false;
		fs_job_put_locked(jb);
		pthread_mutex_unlock(&m->lock);
		free(p->url);
		free(p);
	}
}

/* --- spawn and kill ---------------------------------------------------------------*/

/* What /execute runs to start job n in dir: inner is the user's text as
 * a command would run it (env, cwd). Malloc'ed, NULL when out of memory. */
static char *fs_job_script(const char *dir, const char *inner)
{
	char *job = NULL, *qjob = NULL, *out = NULL;
	if (asprintf(&job,
		     "__sfs_d=$1\n"
		     "echo $$ >\"$__sfs_d/pid.tmp\" && mv -f \"$__sfs_d/pid.tmp\" \"$__sfs_d/pid\"\n"
		     "{ { (\n%s\n); echo $? >\"$__sfs_d/rc.tmp\"; } 2>&1 >&3 3>&- |"
		     " split -b %d -a 5 - \"$__sfs_d/err.\"; } 3>&1 |"
		     " split -b %d -a 5 - \"$__sfs_d/out.\"\n"
		     "mv -f \"$__sfs_d/rc.tmp\" \"$__sfs_d/rc\"\n",
		     inner, FS_PIECE, FS_PIECE) < 0)
		return NULL;
	qjob = common_sh_quote(job);
	free(job);
	if (!qjob)
		return NULL;
	/* 127: no setsid; 125: the directory could not be made */
	if (asprintf(&out,
		     "__sfs_j='%s'\n"
		     "command -v setsid >/dev/null 2>&1 || "
		     "{ echo 'sandboxfs: setsid is not installed in the sandbox' >&2; exit 127; }\n"
		     "command -v split >/dev/null 2>&1 || "
		     "{ echo 'sandboxfs: split is not installed in the sandbox' >&2; exit 127; }\n"
		     "mkdir \"$__sfs_j\" || exit 125\n"
		     "setsid sh -c %s sh \"$__sfs_j\" </dev/null >/dev/null 2>&1 &\n"
		     /* its own pid, the leader of its session and group
		      * (setsid forks when it already leads a group) */
		     "__sfs_i=0; while [ ! -s \"$__sfs_j/pid\" ] && [ $__sfs_i -lt 200 ]; "
		     "do sleep 0.05; __sfs_i=$((__sfs_i+1)); done\n"
		     "read __sfs_p <\"$__sfs_j/pid\" || exit 125\n"
		     "echo \"" FS_JOB_MARK "$__sfs_p\"\n",
		     dir, qjob) < 0)
		out = NULL;
	free(qjob);
	return out;
}

struct fs_spawn {
	struct fs_mount *m;
	struct fs_sandbox *sb;
	uint64_t n;
	const char *command, *dir;
	struct fs_job *jb; /* set once journaled and in the history */
};

/* Before the spawn's /execute intent: the job's own, durably, then the
 * job in the history. */
static int fs_spawn_before(void *ctx, uint64_t seq)
{
	(void)seq;
	struct fs_spawn *sp = ctx;
	struct fs_mount *m = sp->m;
	struct fs_job *jb = fs_job_new(sp->n, sp->command, sp->dir);
	if (!jb)
		return -ENOMEM;
	struct journal_record r = {.kind = JOURNAL_JOB_INTENT};
	r.sandbox = sp->sb->id;
	r.job = sp->n;
	r.command = (char *)sp->command;
	r.path = (char *)sp->dir;
	int rc = fs_journal(m, &r);
	char *gone = NULL;
	pthread_mutex_lock(&m->lock);
	jb->started_ms = common_wall_ms();
	if (rc == 0)
		rc = fs_job_push(m, sp->sb, jb, &gone);
	if (rc == 0) {
		jb->refs++; /* the spawn's */
		sp->jb = jb;
	}
	char *url = gone ? fs_job_url(sp->sb) : NULL;
	pthread_mutex_unlock(&m->lock);
	if (rc < 0)
		fs_job_free(jb);
	if (url) {
		struct backend_error err;
		(void)backend_file_delete(m->backend, url, gone, &err);
	}
	free(url);
	free(gone);
	return rc;
}

/* What became of the spawn: the run's answer gives the pid. */
static int fs_spawn_outcome(struct fs_spawn *sp, int rc, uint64_t seq)
{
	struct fs_mount *m = sp->m;
	struct fs_sandbox *sb = sp->sb;
	struct fs_job *jb = sp->jb;
	char why[512] = "";
	long pid = 0;
	bool unknown = rc == -EIO && fs_command_unknown(m, sb, seq);
	pthread_mutex_lock(&m->lock);
	struct fs_run *r = seq ? fs_sandbox_run(sb, seq) : NULL;
	if (rc == 0 && r && r->status == FS_RUN_EXITED && r->exit_code == 0 && r->out.data) {
		const char *at = strstr(r->out.data, FS_JOB_MARK);
		pid = at ? strtol(at + strlen(FS_JOB_MARK), NULL, 10) : 0;
	}
	if (pid <= 0 && !unknown) {
		if (rc == 0 && r && r->err.data && r->err.len)
			snprintf(why, sizeof(why), "not started (exit %d): %.*s", r->exit_code,
				 (int)strcspn(r->err.data, "\n"), r->err.data);
		else if (rc == 0 && r)
			snprintf(why, sizeof(why), "not started (exit %d)", r->exit_code);
		else
			snprintf(why, sizeof(why), "not started: %s",
				 r && r->error ? r->error : strerror(-rc));
	} else if (unknown) {
		snprintf(why, sizeof(why), "%s",
			 r && r->error ? r->error : "the spawn's outcome is unknown");
	}
	jb->pid = pid > 0 ? pid : 0;
	jb->status = pid > 0 ? FS_JOB_RUNNING : unknown ? FS_JOB_UNKNOWN : FS_JOB_FAILED;
	if (why[0]) {
		fs_set_str(&jb->error, why);
		fs_set_str(&sb->last_error, why);
	}
	if (jb->status == FS_JOB_FAILED)
		jb->ended_ms = common_wall_ms();
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
	fs_job_journal(m, sb,
		       pid > 0	 ? JOURNAL_JOB_STARTED
		       : unknown ? JOURNAL_JOB_UNKNOWN
				 : JOURNAL_JOB_NOT_RUN,
		       jb->n, jb->pid, 0, why[0] ? why : NULL, false);
	fs_job_invalidate(m, sb, jb->n);
	if (pid > 0)
		return 0;
	return rc < 0 ? (rc == -EINTR ? -EIO : rc) : -EIO;
}

int fs_job_spawn(struct fs_mount *m, struct fs_sandbox *sb, const char *text, size_t len)
{
	if (len && text[len - 1] == '\n')
		len--;
	if (len == 0 || memchr(text, '\0', len))
		return -EINVAL;
	char *command = strndup(text, len);
	if (!command)
		return -ENOMEM;
	/* Refused before a number is given, as fs_command_run would. */
	pthread_mutex_lock(&m->lock);
	int rc = !sb->present ? -ENOENT
		 : !sb->url || sb->state == FS_SB_GONE || sb->state == FS_SB_DELETING ||
			 sb->lifecycle_busy
		     ? -ENOTCONN
		 : sb->busy ? -EBUSY
			    : 0;
	uint64_t n = rc == 0 ? ++sb->last_job : 0;
	char *url = rc == 0 ? fs_strdup0(sb->url) : NULL;
	pthread_mutex_unlock(&m->lock);
	if (rc == -EBUSY)
		atomic_fetch_add(&m->n.busy_refused, 1);
	if (rc == 0 && !url)
		rc = -ENOMEM;
	if (rc < 0) {
		free(command);
		free(url);
		return rc;
	}
	uint64_t nonce = 0;
	if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
		nonce = common_now_ms() ^ (uint64_t)(uintptr_t)command;
	char dir[80];
	snprintf(dir, sizeof(dir), FS_JOB_DIR "%" PRIu64 ".%016" PRIx64, n, nonce);

	/* env and cwd as for a command; a job's stdin is /dev/null (ID/stdin
	 * waits for the next foreground command) */
	char why[512] = "", *wrapped = NULL;
	rc = fs_command_prepare(m, sb, url, 0, command, false, &wrapped, why, sizeof(why));
	char *inner = rc < 0 ? NULL : wrapped ? wrapped : fs_sh_eval(command);
	char *script = inner ? fs_job_script(dir, inner) : NULL;
	if (inner != wrapped)
		free(inner);
	free(wrapped);
	free(url);
	if (!script) {
		free(command);
		return rc < 0 ? rc : -ENOMEM;
	}
	struct fs_spawn sp = {.m = m, .sb = sb, .n = n, .command = command, .dir = dir};
	struct fs_command_opts o = {.internal = true,
				    .flush = true,
				    .send = script,
				    .timeout_s = FS_JOB_SPAWN_S,
				    .before = fs_spawn_before,
				    .ctx = &sp};
	char label[64];
	int ll = snprintf(label, sizeof(label), "spawn job %" PRIu64, n);
	uint64_t seq = 0;
	rc = fs_command_run_opts(m, sb, label, (size_t)ll, &o, &seq);
	free(script);
	if (sp.jb) {
		rc = fs_spawn_outcome(&sp, rc, seq);
		pthread_mutex_lock(&m->lock);
		fs_job_put_locked(sp.jb);
		pthread_mutex_unlock(&m->lock);
	}
	free(command);
	return rc;
}

int fs_job_kill(struct fs_mount *m, struct fs_sandbox *sb, uint64_t n)
{
	pthread_mutex_lock(&m->lock);
	struct fs_job *jb = fs_job_find(sb, n);
	int rc = !jb ? -ENOENT : sb->busy ? -EBUSY : 0;
	bool nothing = jb && jb->status != FS_JOB_RUNNING;
	long pid = jb ? jb->pid : 0;
	char *dir = jb ? fs_strdup0(jb->dir) : NULL;
	if (jb)
		jb->refs++;
	pthread_mutex_unlock(&m->lock);
	if (rc == -EBUSY)
		atomic_fetch_add(&m->n.busy_refused, 1);
	if (rc == 0 && nothing)
		goto out; /* ended already, or never started: nothing to stop */
	char *cmd = NULL;
	if (rc == 0 && (!dir || pid <= 0 ||
			asprintf(&cmd,
				 "__sfs_d='%s'; __sfs_p=%ld\n"
				 /* a member of the group that is not a zombie
				  * (an orphan's parent may never reap it) */
				 "__sfs_alive() { kill -0 -$__sfs_p 2>/dev/null || return 1\n"
				 "[ -r /proc/self/stat ] || return 0\n"
				 "for __sfs_f in /proc/[0-9]*/stat; do { read -r __sfs_l <\"$__sfs_f\"; } "
				 "2>/dev/null || continue; set -- ${__sfs_l##*) }\n"
				 "[ \"$3\" = \"$__sfs_p\" ] && [ \"$1\" != Z ] && return 0; done; "
				 "return 1; }\n"
				 "[ -e \"$__sfs_d/rc\" ] && exit 0\n"
				 /* a pid used again by another process: the
				  * job's group is gone (a group's id is never
				  * reused while it has members) */
				 "__sfs_c=$(tr '\\0' '\\n' </proc/$__sfs_p/cmdline 2>/dev/null)\n"
				 "if [ -n \"$__sfs_c\" ] && ! printf '%%s\\n' \"$__sfs_c\" | "
				 "grep -qxF \"$__sfs_d\"; then :; else\n"
				 "kill -TERM -$__sfs_p 2>/dev/null; __sfs_i=0\n"
				 "while __sfs_alive && [ $__sfs_i -lt %d ]; "
				 "do sleep 0.1; __sfs_i=$((__sfs_i+1)); done\n"
				 "kill -KILL -$__sfs_p 2>/dev/null; fi\n"
				 "[ -e \"$__sfs_d/rc\" ] && exit 0\n"
				 ": >\"$__sfs_d/killed\" && echo " FS_JOB_KILLED_MARK "\n",
				 dir, pid, FS_JOB_GRACE_S * 10) < 0))
		rc = -ENOMEM;
	if (rc == 0) {
		char label[64];
		int ll = snprintf(label, sizeof(label), "kill job %" PRIu64, n);
		struct fs_command_opts o = {.internal = true,
					    .send = cmd,
					    .timeout_s = FS_JOB_KILL_S};
		uint64_t seq = 0;
		rc = fs_command_run_opts(m, sb, label, (size_t)ll, &o, &seq);
		bool killed = false;
		pthread_mutex_lock(&m->lock);
		struct fs_run *r = fs_sandbox_run(sb, seq);
		if (rc == 0 && r && (r->status != FS_RUN_EXITED || r->exit_code != 0))
			rc = -EIO;
		killed = rc == 0 && r && r->out.data && strstr(r->out.data, FS_JOB_KILLED_MARK);
		if (rc == 0)
			jb->checked_ms = 0; /* ended by itself: the next look says so */
		pthread_mutex_unlock(&m->lock);
		if (killed)
			fs_job_end(m, sb, jb, true, 0);
		else if (rc == 0)
			fs_job_check(m, sb, jb);
	}
	free(cmd);
out:
	free(dir);
	if (jb) {
		pthread_mutex_lock(&m->lock);
		fs_job_put_locked(jb);
		pthread_mutex_unlock(&m->lock);
	}
	return rc;
}

/* --- at mount ---------------------------------------------------------------------*/

int fs_jobs_load(struct fs_mount *m, struct fs_sandbox *sb, const struct journal_sandbox *j)
{
	sb->last_job = j->last_job;
	for (size_t k = 0; k < j->njobs; k++) {
		const struct journal_job *src = &j->jobs[k];
		struct fs_job *jb = fs_job_new(src->job, src->command, src->dir);
		char *gone = NULL;
		if (!jb || fs_job_push(m, sb, jb, &gone) < 0) {
			if (jb)
				fs_job_free(jb);
			return -ENOMEM;
		}
		free(gone); /* the journal kept no more than the bound */
		static const enum fs_job_status map[] = {
		    [JOURNAL_JOBST_PENDING] = FS_JOB_UNKNOWN,
		    [JOURNAL_JOBST_RUNNING] = FS_JOB_RUNNING,
		    [JOURNAL_JOBST_EXITED] = FS_JOB_EXITED,
		    [JOURNAL_JOBST_KILLED] = FS_JOB_KILLED,
		    [JOURNAL_JOBST_UNKNOWN] = FS_JOB_UNKNOWN,
		    [JOURNAL_JOBST_NOT_RUN] = FS_JOB_FAILED,
		};
		jb->status = (unsigned)src->status < sizeof(map) / sizeof(map[0])
				 ? map[src->status]
				 : FS_JOB_UNKNOWN;
		jb->pid = src->pid;
		jb->exit_code = src->exit_code;
		jb->started_ms = src->started_ms;
		jb->ended_ms = src->ended_ms;
		if (src->error && fs_set_str(&jb->error, src->error) < 0)
			return -ENOMEM;
		if (src->job > sb->last_job)
			sb->last_job = src->job;
	}
	return 0;
}
