/*
 * files.c — the control-file tree, declared once: every small file of the
 * mount with the directories it appears in, its mode, what renders it,
 * what a write does and whether a read waits for a running command (as
 * procfs declares its entries); path resolution against it; the writes.
 */
#include "node_i.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FS_WRITE_FN(name)                                                                \
	static int name(struct fs_mount *m, struct fs_ctl_handle *h, const char *buf,     \
			size_t size, off_t off)
FS_WRITE_FN(fs_write_ctl);
FS_WRITE_FN(fs_write_mctl);
FS_WRITE_FN(fs_write_timeout);
FS_WRITE_FN(fs_write_env);
FS_WRITE_FN(fs_write_cwd);
FS_WRITE_FN(fs_write_stdin);
FS_WRITE_FN(fs_write_spawn);
FS_WRITE_FN(fs_write_jobctl);

#define SB FS_IN_SB
#define RUN FS_IN_RUN
#define MDIR FS_IN_MDIR
#define JOB FS_IN_JOB

/* In listing order. Columns: the file, its name, where it appears, its
 * mode, whether a read waits for the running command, whether a write may
 * wait (for a command or the orchestrator), whether stat shows the size a
 * read would give now (not for files that change as they are read or cost
 * a request), what renders it, what a write does. */
static const struct fs_file_def fs_files[] = {
    /* ID/, ID/runs/SEQ/ and ID/jobs/N/ (whose files jobs.c renders) */
    {FS_F_CTL, "ctl", SB, 0600, false, true, false, fs_render_empty, fs_write_ctl},
    {FS_F_JOBCTL, "ctl", JOB, 0600, false, true, false, fs_render_empty, fs_write_jobctl},
    {FS_F_COMMAND, "command", RUN | JOB, 0444, false, false, true, fs_render_command, NULL},
    {FS_F_STDOUT, "stdout", SB | RUN | JOB, 0444, true, false, true, fs_render_output, NULL},
    {FS_F_STDERR, "stderr", SB | RUN | JOB, 0444, true, false, true, fs_render_output, NULL},
    {FS_F_EXIT, "exit", SB | RUN | JOB, 0444, true, false, true, fs_render_line, NULL},
    {FS_F_STATUS, "status", SB | RUN | JOB, 0444, false, false, true, fs_render_line, NULL},
    {FS_F_LAST, "last", SB, 0444, false, false, true, fs_render_line, NULL},
    {FS_F_TIMEOUT, "timeout", SB, 0644, false, false, true, fs_render_line, fs_write_timeout},
    {FS_F_STATE, "state", SB, 0444, false, false, true, fs_render_line, NULL},
    {FS_F_INFO, "info", SB | RUN | JOB, 0444, false, false, true, fs_render_info, NULL},
    {FS_F_ENV, "env", SB, 0600, false, false, true, fs_render_env, fs_write_env},
    {FS_F_CWD, "cwd", SB, 0644, false, false, true, fs_render_cwd, fs_write_cwd},
    {FS_F_STDIN, "stdin", SB, 0600, false, false, true, fs_render_stdin, fs_write_stdin},
    {FS_F_SPAWN, "spawn", SB, 0600, false, true, false, fs_render_empty, fs_write_spawn},
    /* .sandboxfs/ */
    {FS_F_MCTL, "ctl", MDIR, 0600, false, true, false, fs_render_empty, fs_write_mctl},
    {FS_F_HEALTH, "health", MDIR, 0444, false, false, false, fs_render_health, NULL},
    {FS_F_STATS, "stats", MDIR, 0444, false, false, false, fs_render_stats, NULL},
    {FS_F_POOLS, "pools", MDIR, 0444, false, false, false, fs_render_pools, NULL},
    {FS_F_VERSION, "version", MDIR, 0444, false, false, true, fs_render_version, NULL},
};

#undef SB
#undef RUN
#undef MDIR
#undef JOB

#define N(a) (sizeof(a) / sizeof((a)[0]))

const struct fs_file_def *fs_file_def(enum fs_file f)
{
	for (size_t i = 0; i < N(fs_files); i++)
		if (fs_files[i].file == f)
			return &fs_files[i];
	return NULL; /* not reached: every enum value has its line */
}

const struct fs_file_def *fs_file_next(unsigned in, size_t *i)
{
	while (*i < N(fs_files)) {
		const struct fs_file_def *d = &fs_files[(*i)++];
		if (d->in & in)
			return d;
	}
	return NULL;
}

bool fs_file_waits(const struct fs_loc *loc)
{
	return (loc->node == FS_N_SBFILE || loc->node == FS_N_RUNFILE ||
		loc->node == FS_N_JOBFILE) &&
	       fs_file_def(loc->file)->waits;
}

static int fs_match(const char *name, size_t len, unsigned in, enum fs_file *out)
{
	size_t i = 0;
	for (const struct fs_file_def *d; (d = fs_file_next(in, &i));)
		if (strlen(d->name) == len && memcmp(d->name, name, len) == 0) {
			*out = d->file;
			return 0;
		}
	return -ENOENT;
}

/* The next segment of p: its start and length; advances p. */
static bool fs_segment(const char **p, const char **seg, size_t *len)
{
	while (**p == '/')
		(*p)++;
	if (!**p)
		return false;
	*seg = *p;
	while (**p && **p != '/')
		(*p)++;
	*len = (size_t)(*p - *seg);
	return true;
}

/* A run's or a job's number: decimal, no leading zero, not 0. */
static int fs_number(const char *seg, size_t len, uint64_t *out)
{
	char num[24];
	if (len >= sizeof(num) || seg[0] == '0')
		return -ENOENT;
	memcpy(num, seg, len);
	num[len] = '\0';
	char *end;
	unsigned long long n = strtoull(num, &end, 10);
	if (*end || n == 0 || !isdigit((unsigned char)num[0]))
		return -ENOENT;
	*out = n;
	return 0;
}

/* What follows ID/runs/ or ID/jobs/ (at p): the directory, SEQ/ or N/,
 * or one of its files. */
static int fs_resolve_numbered(struct fs_mount *m, struct fs_sandbox *sb, const char *p,
			       bool jobs, struct fs_loc *loc)
{
	const char *seg;
	size_t len;
	if (!fs_segment(&p, &seg, &len)) {
		loc->node = jobs ? FS_N_JOBS : FS_N_RUNS;
		return 0;
	}
	if (fs_number(seg, len, &loc->seq) < 0)
		return -ENOENT;
	bool have;
	if (jobs) {
		have = fs_job_exists(m, sb, loc->seq);
	} else {
		pthread_mutex_lock(&m->lock);
		have = fs_sandbox_user_run(sb, loc->seq) != NULL;
		pthread_mutex_unlock(&m->lock);
	}
	if (!have)
		return -ENOENT;
	if (!fs_segment(&p, &seg, &len)) {
		loc->node = jobs ? FS_N_JOB : FS_N_RUN;
		return 0;
	}
	if (fs_match(seg, len, jobs ? FS_IN_JOB : FS_IN_RUN, &loc->file) < 0)
		return -ENOENT;
	loc->node = jobs ? FS_N_JOBFILE : FS_N_RUNFILE;
	return fs_segment(&p, &seg, &len) ? -ENOTDIR : 0;
}

int fs_resolve(struct fs_mount *m, const char *path, struct fs_loc *loc)
{
	memset(loc, 0, sizeof(*loc));
	const char *p = path, *seg;
	size_t len;
	if (!fs_segment(&p, &seg, &len)) {
		loc->node = FS_N_ROOT;
		return 0;
	}
	if (len == 10 && memcmp(seg, ".sandboxfs", 10) == 0) {
		if (!fs_segment(&p, &seg, &len)) {
			loc->node = FS_N_MDIR;
			return 0;
		}
		if (fs_match(seg, len, FS_IN_MDIR, &loc->file) < 0)
			return -ENOENT;
		loc->node = FS_N_MFILE;
		return fs_segment(&p, &seg, &len) ? -ENOTDIR : 0;
	}
	char id[64];
	if (len >= sizeof(id))
		return -ENOENT;
	memcpy(id, seg, len);
	id[len] = '\0';
	if (!backend_sandbox_id_valid(id))
		return -ENOENT;
	pthread_mutex_lock(&m->lock);
	struct fs_sandbox *sb = fs_sandbox_find(m, id);
	bool found = sb && sb->present;
	pthread_mutex_unlock(&m->lock);
	if (!found && m->have_orch) {
		/* maybe created elsewhere: one cached listing tells */
		fs_orch_refresh(m, false);
		pthread_mutex_lock(&m->lock);
		sb = fs_sandbox_find(m, id);
		found = sb && sb->present;
		pthread_mutex_unlock(&m->lock);
	}
	if (!found)
		return -ENOENT;
	loc->sb = sb;
	if (!fs_segment(&p, &seg, &len)) {
		loc->node = FS_N_SB;
		return 0;
	}
	if (len == 9 && memcmp(seg, "workspace", 9) == 0) {
		loc->node = FS_N_WS;
		while (*p == '/')
			p++;
		loc->rel = p;
		return 0;
	}
	bool jobs = len == 4 && memcmp(seg, "jobs", 4) == 0;
	if (jobs || (len == 4 && memcmp(seg, "runs", 4) == 0))
		return fs_resolve_numbered(m, sb, p, jobs, loc);
	if (fs_match(seg, len, FS_IN_SB, &loc->file) < 0)
		return -ENOENT;
	loc->node = FS_N_SBFILE;
	return fs_segment(&p, &seg, &len) ? -ENOTDIR : 0;
}

/* --- writes ------------------------------------------------------------------*/

/* A command longer than this may have been split by the kernel: a direct
 * write(2) is cut into pieces of at most max_write bytes, and fewer when
 * the user's buffer is not page aligned, so only a piece shorter than
 * max_write minus one page is surely a whole write. */
static size_t fs_max_command(void)
{
	long page = sysconf(_SC_PAGESIZE);
	if (page <= 0)
		page = 4096;
	return FS_MAX_WRITE - (size_t)page;
}

FS_WRITE_FN(fs_write_ctl)
{
	(void)off; /* each write is one command, wherever the shell put it */
	size_t len = size;
	atomic_fetch_add(&m->n.ctl_writes, 1);
	/* A piece of a longer write(2), or of a stdio stream that a shell's
	 * echo flushes in 4 KiB multiples, is never run: the rest of the
	 * command would run as another one. Once a piece was refused, so is
	 * the rest of this descriptor. */
	if (h->refused || size > fs_max_command() ||
	    (size >= 4096 && size % 4096 == 0 && buf[size - 1] != '\n')) {
		h->refused = true;
		atomic_fetch_add(&m->n.efbig_refused, 1);
		return -EFBIG;
	}
	if (h->sent_unknown)
		return -EIO;
	if (len && buf[len - 1] == '\n')
		len--;
	if (len == 0)
		return -EINVAL;
	uint64_t seq = 0;
	int rc = fs_command_run(m, h->loc.sb, buf, len, true, false, &seq);
	if (rc == -EINTR || (rc == -EIO && fs_command_unknown(m, h->loc.sb, seq)))
		h->sent_unknown = true;
	return rc;
}

/* spawn: one write is one job, as ctl's one command */
FS_WRITE_FN(fs_write_spawn)
{
	(void)off;
	if (h->refused || size > fs_max_command() ||
	    (size >= 4096 && size % 4096 == 0 && buf[size - 1] != '\n')) {
		h->refused = true;
		atomic_fetch_add(&m->n.efbig_refused, 1);
		return -EFBIG;
	}
	if (h->sent_unknown)
		return -EIO;
	int rc = fs_job_spawn(m, h->loc.sb, buf, size);
	if (rc == -EIO)
		h->sent_unknown = true; /* a write again must not start it twice */
	return rc;
}

/* jobs/N/ctl: "kill" */
FS_WRITE_FN(fs_write_jobctl)
{
	(void)off;
	while (size && (buf[size - 1] == '\n' || buf[size - 1] == ' '))
		size--;
	if (size == 4 && memcmp(buf, "kill", 4) == 0)
		return fs_job_kill(m, h->loc.sb, h->loc.seq);
	return -EINVAL;
}

FS_WRITE_FN(fs_write_mctl)
{
	(void)h;
	(void)off;
	atomic_fetch_add(&m->n.ctl_writes, 1);
	if (size > 65536)
		return -EFBIG;
	return fs_mount_ctl(m, buf, size);
}

/* Parses a decimal timeout: "N" with an optional newline. */
static int fs_parse_timeout(const char *buf, size_t size, long *out)
{
	char tmp[32];
	while (size && (buf[size - 1] == '\n' || buf[size - 1] == ' '))
		size--;
	if (size == 0 || size >= sizeof(tmp))
		return -EINVAL;
	memcpy(tmp, buf, size);
	tmp[size] = '\0';
	for (size_t i = 0; i < size; i++)
		if (!isdigit((unsigned char)tmp[i]))
			return -EINVAL;
	long v = strtol(tmp, NULL, 10);
	if (v < 0 || v > 86400)
		return -EINVAL;
	*out = v;
	return 0;
}

FS_WRITE_FN(fs_write_timeout)
{
	(void)off;
	long t;
	int rc = fs_parse_timeout(buf, size, &t);
	if (rc < 0)
		return rc;
	/* 0 means no limit: journaled as -1, 0 there means unset */
	return fs_sandbox_set_timeout(m, h->loc.sb, t == 0 ? -1 : t);
}

/* env and cwd: what this descriptor wrote so far, with buf at off; each
 * write sets the whole (a shell may write a line at a time). */
static int fs_write_whole(struct fs_ctl_handle *h, const char *buf, size_t size, off_t off,
			  size_t max)
{
	if (off < 0 || (size_t)off > h->wlen || (size_t)off + size > max)
		return -EFBIG;
	char *nb = realloc(h->wbuf, (size_t)off + size + 1);
	if (!nb)
		return -ENOMEM;
	memcpy(nb + off, buf, size);
	h->wbuf = nb;
	h->wlen = (size_t)off + size;
	nb[h->wlen] = '\0';
	return 0;
}

FS_WRITE_FN(fs_write_env)
{
	int rc = fs_write_whole(h, buf, size, off, 65536);
	return rc < 0 ? rc : fs_sandbox_set_env(m, h->loc.sb, h->wbuf, h->wlen);
}

FS_WRITE_FN(fs_write_cwd)
{
	int rc = fs_write_whole(h, buf, size, off, 4096);
	return rc < 0 ? rc : fs_sandbox_set_cwd(m, h->loc.sb, h->wbuf, h->wlen);
}

/* stdin: written in pieces like any file, up to FS_STDIN_MAX. */
FS_WRITE_FN(fs_write_stdin)
{
	return fs_stdin_write(m, h->loc.sb, buf, size, off);
}

int fs_file_write(struct fs_mount *m, struct fs_ctl_handle *h, const char *buf, size_t size,
		  off_t off)
{
	const struct fs_file_def *d = fs_file_def(h->loc.file);
	if (!d || !d->write)
		return -EACCES;
	int rc = d->write(m, h, buf, size, off);
	return rc < 0 ? rc : (int)size;
}

int fs_file_truncate(struct fs_mount *m, const struct fs_loc *loc, off_t size)
{
	const struct fs_file_def *d = fs_file_def(loc->file);
	if (!d || !d->write || size != 0)
		return -EACCES;
	switch (loc->file) {
	case FS_F_ENV:
		return fs_sandbox_set_env(m, loc->sb, "", 0);
	case FS_F_CWD:
		return fs_sandbox_set_cwd(m, loc->sb, "", 0);
	case FS_F_STDIN:
		return fs_stdin_truncate(m, loc->sb);
	default:
		return 0; /* O_TRUNC of ctl or timeout is harmless */
	}
}
