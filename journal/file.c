/*
 * file.c — the journal file: open and replay, append, compaction.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/files.h"
#include "journal_i.h"

#define DEFAULT_COMPACT_BYTES (16u << 20)
#define UNKNOWN_WHY	      "no outcome was recorded before the mount stopped"

int journal_crash_step;
unsigned journal_sync_delay_us;

struct journal {
	pthread_mutex_t mu;	  /* guards everything below */
	pthread_cond_t synced_cv; /* a group sync ended */
	char *dir;
	char path[PATH_MAX];
	int fd;	    /* DIR/journal, O_APPEND */
	int lockfd; /* DIR/lock, flock'ed: one mount per state directory */
	uint64_t size;
	struct journal_state st;
	struct journal_options opt;
	uint64_t next_id;	   /* upload ids handed out, not yet recorded */
	uint64_t compact_retry_at; /* after a failed compaction */
	int broken; /* -errno: a failed write or sync left the file in doubt */
	/* Group commit: records are numbered as they are written; one
	 * fdatasync, run with mu released, makes every record written before
	 * it durable, so appends from several threads share it. */
	uint64_t appended;     /* records written since open */
	uint64_t synced;       /* records known durable */
	bool syncing;	       /* a thread is in fdatasync with mu released */
	uint64_t syncs;	       /* device flushes since open (stats) */
	uint64_t append_syncs; /* of which fdatasyncs of appends (tests) */
};

void journal_options_defaults(struct journal_options *o)
{
	memset(o, 0, sizeof(*o));
	o->compact_bytes = DEFAULT_COMPACT_BYTES;
	o->max_runs = 100;
	o->sync = true;
}

static void crash_point(int step)
{
	if (journal_crash_step == step)
		_exit(99);
}

static int fail(struct journal_open_report *rep, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct journal_open_report *rep, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rep->message, sizeof(rep->message), fmt, ap);
	va_end(ap);
	return err;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Creates dir and its missing parents 0700. An existing dir must be ours;
 * group or world access is removed, since the files in it hold sandbox
 * URLs (capabilities). */
static int ensure_dir(const char *dir, struct journal_open_report *rep)
{
	struct stat st;

	if (strlen(dir) >= PATH_MAX)
		return fail(rep, -ENAMETOOLONG, "%s: path too long", dir);
	int rc = common_mkdirs(dir, 0700);
	if (rc == -ENOTDIR)
		return fail(rep, rc, "%s: not a directory", dir);
	if (rc)
		return fail(rep, rc, "%s: cannot create: %s", dir, strerror(-rc));
	if (stat(dir, &st))
		return fail(rep, -errno, "%s: %s", dir, strerror(errno));
	if (st.st_uid != geteuid())
		return fail(rep, -EACCES, "%s: owned by another user", dir);
	if ((st.st_mode & 0777) != 0700 && chmod(dir, 0700))
		return fail(rep, -errno, "%s: cannot make it private (0700): %s", dir,
			    strerror(errno));
	return 0;
}

/* Copies bytes [from, size) of fd to a new file DIR/journal.<what>.<time>
 * (0600), durably. */
static int save_aside(struct journal *j, uint64_t from, uint64_t size, const char *what,
		      char *out, size_t outsize)
{
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	int fd = -1;

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	for (int i = 0; i < 1000 && fd < 0; i++) {
		if (i)
			snprintf(out, outsize, "%s/journal.%s.%s.%d", j->dir, what, stamp,
				 i);
		else
			snprintf(out, outsize, "%s/journal.%s.%s", j->dir, what, stamp);
		fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			return -errno;
	}
	if (fd < 0)
		return -EEXIST;
	uint8_t b[65536];
	int rc = 0;
	while (from < size && !rc) {
		size_t want = size - from < sizeof(b) ? (size_t)(size - from) : sizeof(b);
		ssize_t n = pread(j->fd, b, want, (off_t)from);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n ? -errno : -EIO;
			break;
		}
		rc = write_all(fd, b, (size_t)n);
		from += (uint64_t)n;
	}
	if (!rc && fsync(fd))
		rc = -errno;
	close(fd);
	if (!rc)
		rc = journal_fsync_dir(j->dir);
	return rc;
}

static int cut_at(struct journal *j, uint64_t off)
{
	if (ftruncate(j->fd, (off_t)off) || fsync(j->fd))
		return -errno;
	j->size = off;
	return 0;
}

/* Writes one record at the end of the file. On a failed write the file is
 * cut back, so a later append never follows a partial record. */
static int append_locked(struct journal *j, const uint8_t *buf, size_t len)
{
	if (j->broken)
		return j->broken;
	int rc = write_all(j->fd, buf, len);
	if (rc) {
		if (ftruncate(j->fd, (off_t)j->size))
			j->broken = -EIO;
		return rc;
	}
	j->size += len;
	j->appended++;
	return 0;
}

static int append_record_locked(struct journal *j, const struct journal_record *r)
{
	uint8_t *buf;
	size_t len;
	int rc = journal_encode(r, &buf, &len);
	if (rc)
		return rc;
	rc = append_locked(j, buf, len);
	free(buf);
	if (!rc)
		journal_state_apply(&j->st, r);
	return rc;
}

/* Returns once the first `upto` records written are durable. The first
 * thread to need a sync runs it for every record written so far, with mu
 * released so that others append meanwhile; they wait for it, and one of
 * them then syncs for all that came after. */
static int sync_upto_locked(struct journal *j, uint64_t upto)
{
	while (!j->broken && j->synced < upto) {
		if (j->syncing) {
			pthread_cond_wait(&j->synced_cv, &j->mu);
			continue;
		}
		uint64_t target = j->appended;
		int fd = j->fd; /* compaction waits for !syncing to replace it */
		j->syncing = true;
		pthread_mutex_unlock(&j->mu);
		if (journal_sync_delay_us)
			usleep(journal_sync_delay_us);
		int rc = fdatasync(fd);
		pthread_mutex_lock(&j->mu);
		j->syncing = false;
		j->syncs++;
		j->append_syncs++;
		/* After a failed sync nothing written can be trusted to be on
		 * disk: refuse further appends rather than pretend. */
		if (rc)
			j->broken = -EIO;
		else if (target > j->synced)
			j->synced = target;
		pthread_cond_broadcast(&j->synced_cv);
	}
	return j->broken;
}

static int sync_locked(struct journal *j)
{
	return sync_upto_locked(j, j->appended);
}

/* --- compaction ---------------------------------------------------------*/

static void free_records(struct journal_record *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		journal_record_clear(&v[i]);
	free(v);
}

static int compact_locked(struct journal *j)
{
	struct journal_record *recs;
	size_t n;
	char newpath[PATH_MAX];
	struct journal_state st;
	uint64_t size = 0;
	/* A group sync in flight uses j->fd, which this replaces. */
	while (j->syncing)
		pthread_cond_wait(&j->synced_cv, &j->mu);
	int rc = journal_state_records(&j->st, &recs, &n);
	if (rc)
		return rc;

	snprintf(newpath, sizeof(newpath), "%s/journal.new", j->dir);
	int fd = open(newpath, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	crash_point(1);
	journal_state_init(&st, j->st.max_runs);
	for (size_t i = 0; i < n && !rc; i++) {
		uint8_t *buf;
		size_t len;
		if (i == n / 2)
			crash_point(2);
		rc = journal_encode(&recs[i], &buf, &len);
		if (!rc) {
			rc = write_all(fd, buf, len);
			free(buf);
			size += len;
		}
		journal_state_apply(&st, &recs[i]);
	}
	if (!rc) {
		crash_point(3);
		j->syncs++;
		if (fsync(fd))
			rc = -errno;
	}
	if (!rc) {
		crash_point(4);
		if (rename(newpath, j->path))
			rc = -errno;
	}
	if (rc) {
		journal_state_clear(&st);
		close(fd);
		unlink(newpath);
		goto out;
	}
	crash_point(5);
	/* The rename is the commit point: from here the new file is the
	 * journal, even if syncing the directory fails. */
	j->syncs++;
	rc = journal_fsync_dir(j->dir);
	crash_point(6);
	close(j->fd);
	j->fd = fd;
	j->size = size;
	j->synced = j->appended; /* the state of every record, fsynced */
	journal_state_clear(&j->st);
	j->st = st;
out:
	free_records(recs, n);
	return rc;
}

static bool compact_due(const struct journal *j)
{
	return j->opt.compact_bytes && j->size > j->opt.compact_bytes &&
	       j->size >= j->compact_retry_at && !j->broken;
}

static void maybe_compact_locked(struct journal *j)
{
	if (!compact_due(j))
		return;
	/* Waiting for a group sync releases mu: another thread may have
	 * compacted meanwhile. */
	while (j->syncing)
		pthread_cond_wait(&j->synced_cv, &j->mu);
	if (!compact_due(j))
		return;
	if (compact_locked(j))
		j->compact_retry_at = j->size + j->opt.compact_bytes / 4;
	else
		j->compact_retry_at = 0;
}

/* --- open -----------------------------------------------------------------*/

static int replay_one(void *ctx, const struct journal_record *r, uint64_t offset)
{
	journal_state_apply(ctx, r);
	return 0;
}

/* Appends the *_UNKNOWN records for intents left without outcome. */
static int mark_unknown(struct journal *j, size_t *count)
{
	struct journal_record *v = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	*count = 0;
	for (size_t i = 0; i < j->st.count; i++) {
		struct journal_sandbox *sb = &j->st.sandboxes[i];
		size_t want = sb->nruns + sb->njobs + 1;
		if (n + want > cap) {
			cap = (n + want) * 2;
			struct journal_record *nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				free(v);
				return -ENOMEM;
			}
			v = nv;
		}
		for (size_t k = 0; k < sb->nruns; k++) {
			if (sb->runs[k].status != JOURNAL_RUN_PENDING)
				continue;
			v[n] = (struct journal_record){.kind = JOURNAL_EXEC_UNKNOWN,
						       .sandbox = sb->id,
						       .seq = sb->runs[k].seq,
						       .error = (char *)UNKNOWN_WHY};
			n++;
		}
		for (size_t k = 0; k < sb->njobs; k++) {
			if (sb->jobs[k].status != JOURNAL_JOBST_PENDING)
				continue;
			v[n++] = (struct journal_record){.kind = JOURNAL_JOB_UNKNOWN,
							 .sandbox = sb->id,
							 .job = sb->jobs[k].job,
							 .error = (char *)UNKNOWN_WHY};
		}
		if (sb->state == JOURNAL_SB_CREATING)
			v[n++] = (struct journal_record){.kind = JOURNAL_CREATE_UNKNOWN,
							 .sandbox = sb->id,
							 .error = (char *)UNKNOWN_WHY};
		else if (sb->state == JOURNAL_SB_DELETING)
			v[n++] =
			    (struct journal_record){.kind = JOURNAL_DELETE_UNCONFIRMED,
						    .sandbox = sb->id,
						    .error = (char *)UNKNOWN_WHY};
	}
	/* The records point into the state that applying them changes:
	 * copy the names first. */
	for (size_t i = 0; i < n; i++) {
		v[i].sandbox = strdup(v[i].sandbox);
		v[i].error = strdup(UNKNOWN_WHY);
		v[i].time_ms = common_wall_ms();
		if (!v[i].sandbox || !v[i].error)
			rc = -ENOMEM;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		rc = append_record_locked(j, &v[i]);
		if (!rc)
			(*count)++;
	}
	if (!rc && n && j->opt.sync)
		rc = sync_locked(j);
	free_records(v, n);
	return rc;
}

static int open_files(struct journal *j, struct journal_open_report *rep)
{
	char p[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof(p), "%s/lock", j->dir);
	j->lockfd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (j->lockfd < 0)
		return fail(rep, -errno, "%s: %s", p, strerror(errno));
	if (flock(j->lockfd, LOCK_EX | LOCK_NB))
		return fail(rep, errno == EWOULDBLOCK ? -EBUSY : -errno,
			    "%s: journal in use by another process", j->path);

	/* A journal.new is never authoritative: the rename is the commit. */
	snprintf(p, sizeof(p), "%s/journal.new", j->dir);
	if (unlink(p) == 0)
		journal_fsync_dir(j->dir);

	bool created = true;
	j->fd = open(j->path, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
	if (j->fd < 0 && errno == EEXIST) {
		created = false;
		j->fd = open(j->path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
	}
	if (j->fd < 0)
		return fail(rep, -errno, "%s: %s", j->path, strerror(errno));
	if (fstat(j->fd, &st))
		return fail(rep, -errno, "%s: %s", j->path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return fail(rep, -EINVAL, "%s: not a regular file", j->path);
	if ((st.st_mode & 0777) != 0600 && fchmod(j->fd, 0600))
		return fail(rep, -errno, "%s: cannot make it private (0600): %s", j->path,
			    strerror(errno));
	if (created) {
		int rc = journal_fsync_dir(j->dir);
		if (rc)
			return fail(rep, rc, "%s: %s", j->dir, strerror(-rc));
	}
	return 0;
}

static int replay(struct journal *j, struct journal_open_report *rep)
{
	struct journal_scan_result res;
	int rc;

	journal_scan(j->fd, replay_one, &j->st, &res);
	rep->records = res.records;
	j->size = res.good_bytes;
	/* Written, not known durable (a daemon that crashed may have left
	 * them in the page cache only): the first sync covers them too. */
	j->appended = res.records;
	switch (res.end) {
	case JOURNAL_SCAN_WHOLE:
		return 0;
	case JOURNAL_SCAN_IOERR:
		return fail(rep, -res.err, "%s: read failed: %s", j->path,
			    strerror(res.err));
	case JOURNAL_SCAN_TORN:
		rc = save_aside(j, res.good_bytes, res.file_bytes, "torn", rep->torn_copy,
				sizeof(rep->torn_copy));
		if (!rc)
			rc = cut_at(j, res.good_bytes);
		if (rc)
			return fail(
			    rep, rc, "%s: cannot cut the torn tail at byte %llu: %s",
			    j->path, (unsigned long long)res.good_bytes, strerror(-rc));
		rep->torn_tail = true;
		rep->torn_offset = res.good_bytes;
		fail(rep, 0,
		     "%s: torn last record at byte %llu cut (%llu bytes kept in %s)",
		     j->path, (unsigned long long)res.good_bytes,
		     (unsigned long long)(res.file_bytes - res.good_bytes),
		     rep->torn_copy);
		return 0;
	case JOURNAL_SCAN_DAMAGED:
		if (!j->opt.repair)
			return fail(
			    rep, -EBADMSG,
			    "%s: damaged record at byte %llu (%s); %llu bytes from "
			    "there on not read; open with repair to cut it there "
			    "(the rest is kept aside)",
			    j->path, (unsigned long long)res.good_bytes,
			    res.why ? res.why : "bad record",
			    (unsigned long long)(res.file_bytes - res.good_bytes));
		char aside[512];
		rc = save_aside(j, res.good_bytes, res.file_bytes, "damaged", aside,
				sizeof(aside));
		if (!rc)
			rc = cut_at(j, res.good_bytes);
		if (rc)
			return fail(rep, rc, "%s: cannot repair at byte %llu: %s",
				    j->path, (unsigned long long)res.good_bytes,
				    strerror(-rc));
		rep->repaired = true;
		fail(rep, 0,
		     "%s: damaged record at byte %llu (%s); repaired: cut there, "
		     "%llu bytes kept in %s",
		     j->path, (unsigned long long)res.good_bytes,
		     res.why ? res.why : "bad record",
		     (unsigned long long)(res.file_bytes - res.good_bytes), aside);
		return 0;
	}
	return -EINVAL;
}

int journal_open(const struct journal_options *o, struct journal **out,
		 struct journal_open_report *report)
{
	struct journal_open_report dummy = {0};
	struct journal_open_report *rep = report ? report : &dummy;
	struct journal *j;
	int rc;

	memset(rep, 0, sizeof(*rep));
	*out = NULL;
	if (!o || !o->dir || !*o->dir)
		return fail(rep, -EINVAL, "no journal directory given");
	if ((rc = ensure_dir(o->dir, rep)))
		return rc;
	if (!(j = calloc(1, sizeof(*j))))
		return fail(rep, -ENOMEM, "out of memory");
	j->fd = j->lockfd = -1;
	j->opt = *o;
	j->opt.dir = NULL;
	journal_state_init(&j->st, o->max_runs);
	pthread_mutex_init(&j->mu, NULL);
	pthread_cond_init(&j->synced_cv, NULL);
	j->dir = realpath(o->dir, NULL);
	if (!j->dir) {
		rc = fail(rep, -errno, "%s: %s", o->dir, strerror(errno));
		goto err;
	}
	if (strlen(j->dir) + sizeof("/journal.damaged.YYYYmmddTHHMMSSZ.999") >=
	    sizeof(j->path)) {
		rc = fail(rep, -ENAMETOOLONG, "%s: path too long", j->dir);
		goto err;
	}
	snprintf(j->path, sizeof(j->path), "%s/journal", j->dir);
	if ((rc = open_files(j, rep)))
		goto err;
	/* Registered before replay, so a damaged journal that refuses to
	 * open still shows in the preflight check. */
	int reg = journal_registry_add(j->dir);
	if ((rc = replay(j, rep)))
		goto err;
	pthread_mutex_lock(&j->mu); /* the sync releases and retakes it */
	rc = mark_unknown(j, &rep->unknown_marked);
	if (!rc)
		maybe_compact_locked(j);
	pthread_mutex_unlock(&j->mu);
	if (rc) {
		rc = fail(rep, rc, "%s: cannot record the unknown outcomes: %s", j->path,
			  strerror(-rc));
		goto err;
	}
	if (reg && !rep->message[0])
		fail(rep, 0, "could not register %s in the journal registry: %s", j->dir,
		     strerror(-reg));
	*out = j;
	return 0;
err:
	journal_close(j);
	return rc;
}

void journal_close(struct journal *j)
{
	if (!j)
		return;
	if (j->fd >= 0)
		close(j->fd);
	if (j->lockfd >= 0)
		close(j->lockfd);
	journal_state_clear(&j->st);
	pthread_mutex_destroy(&j->mu);
	pthread_cond_destroy(&j->synced_cv);
	free(j->dir);
	free(j);
}

/* --- the live journal -----------------------------------------------------*/

int journal_append(struct journal *j, const struct journal_record *r, bool durable)
{
	struct journal_record rec = *r;
	uint8_t *buf;
	size_t len;

	if (!rec.time_ms)
		rec.time_ms = common_wall_ms();
	int rc = journal_encode(&rec, &buf, &len);
	if (rc)
		return rc;
	pthread_mutex_lock(&j->mu);
	rc = append_locked(j, buf, len);
	if (!rc) {
		/* Applied in file order, before the sync: if the sync fails
		 * the journal is broken and this state is never written. */
		uint64_t mine = j->appended;
		journal_state_apply(&j->st, &rec);
		maybe_compact_locked(j);
		if (durable && j->opt.sync)
			rc = sync_upto_locked(j, mine);
	}
	pthread_mutex_unlock(&j->mu);
	free(buf);
	return rc;
}

int journal_sync(struct journal *j)
{
	pthread_mutex_lock(&j->mu);
	int rc = sync_locked(j);
	pthread_mutex_unlock(&j->mu);
	return rc;
}

int journal_snapshot(struct journal *j, struct journal_state *out)
{
	pthread_mutex_lock(&j->mu);
	int rc = journal_state_copy(out, &j->st);
	pthread_mutex_unlock(&j->mu);
	return rc;
}

uint64_t journal_next_upload_id(struct journal *j)
{
	pthread_mutex_lock(&j->mu);
	uint64_t id =
	    j->next_id > j->st.next_upload_id ? j->next_id : j->st.next_upload_id;
	j->next_id = id + 1;
	pthread_mutex_unlock(&j->mu);
	return id;
}

int journal_compact(struct journal *j)
{
	pthread_mutex_lock(&j->mu);
	int rc = j->broken ? j->broken : compact_locked(j);
	pthread_mutex_unlock(&j->mu);
	return rc;
}

uint64_t journal_append_syncs(struct journal *j)
{
	pthread_mutex_lock(&j->mu);
	uint64_t n = j->append_syncs;
	pthread_mutex_unlock(&j->mu);
	return n;
}

uint64_t journal_syncs(struct journal *j)
{
	pthread_mutex_lock(&j->mu);
	uint64_t n = j->syncs;
	pthread_mutex_unlock(&j->mu);
	return n;
}

uint64_t journal_size(struct journal *j)
{
	pthread_mutex_lock(&j->mu);
	uint64_t size = j->size;
	pthread_mutex_unlock(&j->mu);
	return size;
}
