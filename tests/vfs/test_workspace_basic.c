/*
 * test_workspace_basic — the workspace operations against a real
 * sandbox-server, without a mount: listings, reads, writes, append,
 * truncate, rename, mkdir/rmdir, unlink of open files, names, modes,
 * invalidation. Every result is checked on the server side.
 */
#include <pthread.h>
#include <sys/statvfs.h>

#include "wstest.h"

static struct srv S;
static struct backend *B;

/* Called once after the next command ran in the sandbox and before its
 * answer is handed back (the window in which a slow answer is on its way). */
static void (*after_exec)(void);
/* in_seat of the last exec: set by workspace_before_command only. */
static int last_in_seat = -1;

/* The exec callback of a mount, reduced to a direct POST /execute. */
static int test_exec(void *ctx, const char *id, const char *command, bool in_seat,
		     int *exit_code)
{
	struct backend_exec_result r = {0};
	struct backend_error err;
	last_in_seat = in_seat;
	enum backend_status st = backend_execute(B, S.url, command, 30, &r, &err);
	if (st != BACKEND_OK)
		return -backend_errno(st, BACKEND_OP_EXECUTE);
	*exit_code = r.exit_code;
	backend_exec_result_clear(&r);
	(*(int *)ctx)++;
	void (*hook)(void) = after_exec;
	after_exec = NULL;
	if (hook)
		hook();
	return 0;
}

static struct wscache *cache_new(const char *dir, bool with_exec, int *execs)
{
	struct wscache_config cfg = {
	    .backend = B,
	    .journal = NULL,
	    .cache_dir = dir,
	    .max_bytes = 64 << 20,
	    .listing_ttl_ms = 60000,
	    .uid = getuid(),
	    .gid = getgid(),
	    .exec = with_exec ? test_exec : NULL,
	    .exec_ctx = execs,
	};
	return wscache_new(&cfg);
}

static void test_listing(struct workspace *ws)
{
	srv_put(&S, "a.txt", "hello\n");
	srv_put(&S, "b.txt", "bb\n");
	char p[512];
	snprintf(p, sizeof(p), "%s/sub", S.ws);
	mkdir(p, 0755);
	srv_put(&S, "sub/c.txt", "ccc\n");
	srv_put(&S, ".sandbox-agent", "machinery");

	long lists0 = srv_stat(&S, "lists");
	struct names nm = {0};
	CHECK_EQ(workspace_readdir(ws, "", &nm, names_fill, 0, 0, false), 0);
	CHECK(names_has(&nm, "a.txt") && names_has(&nm, "b.txt") &&
	      names_has(&nm, "sub"));
	CHECK(!names_has(&nm, ".sandbox-agent"));
	names_clear(&nm);

	struct stat st;
	CHECK_EQ(workspace_getattr(ws, "a.txt", &st, 0), 0);
	CHECK_EQ(st.st_size, 6);
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(workspace_getattr(ws, "b.txt", &st, 0), 0);
	CHECK_EQ(st.st_size, 3);
	CHECK_EQ(workspace_getattr(ws, "sub", &st, 0), 0);
	CHECK(S_ISDIR(st.st_mode));
	/* Negative lookups come from the same listing. */
	CHECK_EQ(workspace_getattr(ws, "missing", &st, 0), -ENOENT);
	CHECK_EQ(workspace_getattr(ws, ".sandbox-agent", &st, 0), -ENOENT);
	CHECK_EQ(workspace_getattr(ws, ".pool/x", &st, 0), -ENOENT);
	CHECK_EQ(workspace_readdir(ws, ".pool", &nm, names_fill, 0, 0, false), -ENOENT);
	CHECK_EQ(srv_stat(&S, "lists") - lists0, 1);

	/* One more listing for the subdirectory, however many lookups. */
	CHECK_EQ(workspace_getattr(ws, "sub/c.txt", &st, 0), 0);
	CHECK_EQ(st.st_size, 4);
	CHECK_EQ(workspace_getattr(ws, "sub/nope", &st, 0), -ENOENT);
	CHECK_EQ(workspace_readdir(ws, "sub", &nm, names_fill, 0, 0, false), 0);
	CHECK(names_has(&nm, "c.txt"));
	names_clear(&nm);
	CHECK_EQ(srv_stat(&S, "lists") - lists0, 2);
	CHECK_EQ(workspace_getattr(ws, "nodir/x", &st, 0), -ENOENT);
}

static void test_read_write(struct workspace *ws)
{
	int err;
	long gets0 = srv_stat(&S, "gets");
	char *s = ws_get(ws, "a.txt", &err);
	CHECK(s && strcmp(s, "hello\n") == 0);
	free(s);
	s = ws_get(ws, "a.txt", &err);
	CHECK(s && strcmp(s, "hello\n") == 0);
	free(s);
	CHECK_EQ(srv_stat(&S, "gets") - gets0, 1); /* the second read is a cache hit */

	/* New file: one PUT at close. */
	long puts0 = srv_stat(&S, "puts");
	CHECK_EQ(ws_put(ws, "new.txt", "new content", O_CREAT | O_WRONLY | O_EXCL), 0);
	CHECK(srv_has(&S, "new.txt", "new content"));
	CHECK_EQ(srv_stat(&S, "puts") - puts0, 1);

	/* Size of an open, dirty file comes from its cache file. */
	struct wsopen fi = {.flags = O_RDWR};
	CHECK_EQ(workspace_open(ws, "new.txt", &fi), 0);
	CHECK_EQ(workspace_write(fi.fh, "0123456789ABCDEF", 16, 11), 16);
	struct stat st;
	CHECK_EQ(workspace_getattr(ws, "new.txt", &st, 0), 0);
	CHECK_EQ(st.st_size, 27);
	CHECK(srv_has(&S, "new.txt", "new content")); /* not before close */
	char buf[64];
	CHECK_EQ(workspace_read(fi.fh, buf, sizeof(buf), 0), 27);
	CHECK_EQ(workspace_lseek(fi.fh, 0, SEEK_END), 27);
	CHECK_EQ(workspace_flush(fi.fh), 0);
	CHECK_EQ(workspace_release(fi.fh), 0);
	CHECK(srv_has(&S, "new.txt", "new content0123456789ABCDEF"));

	/* O_APPEND writes at the end whatever the offset. */
	fi = (struct wsopen){.flags = O_WRONLY | O_APPEND};
	CHECK_EQ(workspace_open(ws, "a.txt", &fi), 0);
	CHECK_EQ(workspace_write(fi.fh, "more\n", 5, 0), 5);
	CHECK_EQ(workspace_flush(fi.fh), 0);
	workspace_release(fi.fh);
	CHECK(srv_has(&S, "a.txt", "hello\nmore\n"));

	/* O_TRUNC empties it before the write. */
	CHECK_EQ(ws_put(ws, "a.txt", "x", O_WRONLY | O_TRUNC), 0);
	CHECK(srv_has(&S, "a.txt", "x"));

	/* truncate(2) of a closed file reaches the server at once. */
	CHECK_EQ(workspace_truncate(ws, "new.txt", 3, 0), 0);
	CHECK(srv_has(&S, "new.txt", "new"));
	CHECK_EQ(workspace_truncate(ws, "new.txt", 5, 0), 0);
	size_t n;
	char *raw = srv_read(&S, "new.txt", &n);
	CHECK(raw && n == 5 && memcmp(raw, "new\0\0", 5) == 0);
	free(raw);

	/* ftruncate on a handle: uploaded at its close. */
	fi = (struct wsopen){.flags = O_RDWR};
	CHECK_EQ(workspace_open(ws, "new.txt", &fi), 0);
	CHECK_EQ(workspace_truncate(ws, "new.txt", 1, fi.fh), 0);
	CHECK_EQ(workspace_getattr(ws, NULL, &st, fi.fh), 0);
	CHECK_EQ(st.st_size, 1);
	CHECK_EQ(workspace_flush(fi.fh), 0);
	workspace_release(fi.fh);
	CHECK(srv_has(&S, "new.txt", "n"));

	/* Files written then read back through the API. */
	s = ws_get(ws, "new.txt", &err);
	CHECK(s && strcmp(s, "n") == 0);
	free(s);
	CHECK(ws_get(ws, "ghost", &err) == NULL && err == -ENOENT);
	fi = (struct wsopen){.flags = O_RDONLY};
	CHECK_EQ(workspace_open(ws, "sub", &fi), -EISDIR);
}

static void test_rename(struct workspace *ws)
{
	CHECK_EQ(ws_put(ws, "r1", "one", O_CREAT | O_WRONLY), 0);
	CHECK_EQ(workspace_rename(ws, "r1", "r2", 0), 0);
	CHECK(!srv_exists(&S, "r1"));
	CHECK(srv_has(&S, "r2", "one"));
	struct stat st;
	CHECK_EQ(workspace_getattr(ws, "r1", &st, 0), -ENOENT);
	CHECK_EQ(workspace_getattr(ws, "r2", &st, 0), 0);

	/* Over an existing file, and of a file never read here. */
	srv_put(&S, "r3", "three");
	CHECK_EQ(workspace_rename(ws, "r3", "r2", 0), -ENOENT); /* listing is cached */
	workspace_invalidate(ws);
	CHECK_EQ(workspace_rename(ws, "r3", "r2", 0), 0);
	CHECK(srv_has(&S, "r2", "three"));
	CHECK(!srv_exists(&S, "r3"));

	/* RENAME_NOREPLACE and EXCHANGE. */
	CHECK_EQ(ws_put(ws, "r4", "four", O_CREAT | O_WRONLY), 0);
	CHECK_EQ(workspace_rename(ws, "r4", "r2", RENAME_NOREPLACE), -EEXIST);
	CHECK_EQ(workspace_rename(ws, "r4", "r2", RENAME_EXCHANGE), -EINVAL);
	CHECK(srv_has(&S, "r2", "three"));

	/* An open file: the handle follows the new name. */
	struct wsopen fi = {.flags = O_RDWR};
	CHECK_EQ(workspace_open(ws, "r4", &fi), 0);
	CHECK_EQ(workspace_rename(ws, "r4", "sub/r5", 0), 0);
	CHECK_EQ(workspace_write(fi.fh, "FOUR", 4, 0), 4);
	CHECK_EQ(workspace_flush(fi.fh), 0);
	workspace_release(fi.fh);
	CHECK(srv_has(&S, "sub/r5", "FOUR"));
	CHECK(!srv_exists(&S, "r4"));

	/* A dirty, open file renamed before its close (editors' temp files). */
	fi = (struct wsopen){.flags = O_WRONLY | O_CREAT};
	CHECK_EQ(workspace_create(ws, "tmp.swp", 0644, &fi), 0);
	CHECK_EQ(workspace_write(fi.fh, "saved", 5, 0), 5);
	CHECK_EQ(workspace_rename(ws, "tmp.swp", "saved.txt", 0), 0);
	CHECK_EQ(workspace_flush(fi.fh), 0);
	workspace_release(fi.fh);
	CHECK(srv_has(&S, "saved.txt", "saved"));
	CHECK(!srv_exists(&S, "tmp.swp"));

	/* Renames into a missing directory or onto a directory. */
	CHECK_EQ(workspace_rename(ws, "r2", "nodir/x", 0), -ENOENT);
	CHECK_EQ(workspace_rename(ws, "r2", "sub", 0), -EISDIR);
	CHECK_EQ(workspace_rename(ws, "ghost", "x", 0), -ENOENT);
}

static void test_dirs(struct workspace *ws, int *execs)
{
	struct stat st;
	CHECK_EQ(workspace_mkdir(ws, "d1", 0755), 0);
	char p[512];
	snprintf(p, sizeof(p), "%s/d1", S.ws);
	CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode));
	struct names nm = {0};
	CHECK_EQ(workspace_readdir(ws, "d1", &nm, names_fill, 0, 0, false), 0);
	CHECK_EQ(nm.n, 2); /* . and .. only: the placeholder is gone */
	names_clear(&nm);
	CHECK_EQ(workspace_mkdir(ws, "d1", 0755), -EEXIST);
	CHECK_EQ(workspace_mkdir(ws, "nodir/d", 0755), -ENOENT);
	CHECK_EQ(workspace_getattr(ws, "d1", &st, 0), 0);
	CHECK(S_ISDIR(st.st_mode));

	CHECK_EQ(ws_put(ws, "d1/f", "f", O_CREAT | O_WRONLY), 0);
	CHECK_EQ(workspace_rmdir(ws, "d1"), -ENOTEMPTY);
	CHECK_EQ(workspace_rmdir(ws, "d1/f"), -ENOTDIR);
	CHECK_EQ(workspace_unlink(ws, "d1"), -EISDIR);

	/* Directory rename through the file API (no exec callback here). */
	CHECK_EQ(workspace_mkdir(ws, "d1/empty", 0755), 0);
	CHECK_EQ(workspace_rename(ws, "d1", "d2", 0), 0);
	CHECK(srv_has(&S, "d2/f", "f"));
	snprintf(p, sizeof(p), "%s/d2/empty", S.ws);
	CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode));
	CHECK(!srv_exists(&S, "d1"));
	CHECK_EQ(workspace_getattr(ws, "d2/f", &st, 0), 0);
	CHECK_EQ(workspace_getattr(ws, "d1/f", &st, 0), -ENOENT);

	CHECK_EQ(workspace_unlink(ws, "d2/f"), 0);
	CHECK(!srv_exists(&S, "d2/f"));
	CHECK_EQ(workspace_rmdir(ws, "d2/empty"), 0);
	CHECK_EQ(workspace_rmdir(ws, "d2"), 0);
	CHECK(!srv_exists(&S, "d2"));
	CHECK_EQ(workspace_getattr(ws, "d2", &st, 0), -ENOENT);
	CHECK_EQ(workspace_rmdir(ws, "d2"), -ENOENT);
}

static void test_unlink_open(struct workspace *ws)
{
	CHECK_EQ(ws_put(ws, "u.txt", "keep me", O_CREAT | O_WRONLY), 0);
	struct wsopen fi = {.flags = O_RDWR};
	CHECK_EQ(workspace_open(ws, "u.txt", &fi), 0);
	CHECK_EQ(workspace_unlink(ws, "u.txt"), 0);
	CHECK(!srv_exists(&S, "u.txt"));
	struct stat st;
	CHECK_EQ(workspace_getattr(ws, "u.txt", &st, 0), -ENOENT);
	char buf[32] = {0};
	CHECK_EQ(workspace_read(fi.fh, buf, sizeof(buf), 0), 7);
	CHECK(strcmp(buf, "keep me") == 0);
	CHECK_EQ(workspace_write(fi.fh, "KEEP", 4, 0), 4);
	CHECK_EQ(workspace_getattr(ws, NULL, &st, fi.fh), 0);
	CHECK_EQ(st.st_size, 7);
	CHECK_EQ(workspace_flush(fi.fh), 0);
	workspace_release(fi.fh);
	CHECK(!srv_exists(&S, "u.txt")); /* not uploaded again */
	CHECK_EQ(workspace_unlink(ws, "u.txt"), -ENOENT);
}

static void test_names(struct workspace *ws)
{
	char longname[300];
	memset(longname, 'x', 256);
	longname[256] = '\0';
	struct stat st;
	long req0 = srv_stat(&S, "lists") + srv_stat(&S, "gets") + srv_stat(&S, "puts");
	CHECK_EQ(workspace_getattr(ws, longname, &st, 0), -ENAMETOOLONG);
	CHECK_EQ(workspace_mkdir(ws, longname, 0755), -ENAMETOOLONG);
	CHECK_EQ(workspace_getattr(ws, "bad\x01name", &st, 0), -EINVAL);
	struct wsopen fi = {.flags = O_WRONLY | O_CREAT};
	CHECK_EQ(workspace_create(ws, "bad\nname", 0644, &fi), -EINVAL);
	CHECK_EQ(workspace_getattr(ws, "a/../b", &st, 0), -EINVAL);
	CHECK_EQ(srv_stat(&S, "lists") + srv_stat(&S, "gets") + srv_stat(&S, "puts"),
		 req0);
	memset(longname, 'y', 255);
	longname[255] = '\0';
	CHECK_EQ(ws_put(ws, longname, "ok", O_CREAT | O_WRONLY), 0);
	CHECK(srv_has(&S, longname, "ok"));
	CHECK_EQ(ws_put(ws, "with space 'quote'", "q", O_CREAT | O_WRONLY), 0);
	CHECK(srv_has(&S, "with space 'quote'", "q"));
}

/* Names a hostile server lists ('..', 'a/b', "", control characters)
 * are never shown. */
static void test_hostile_listing(struct workspace *ws)
{
	CHECK(srv_faults(&S, "{\"hostile_listing\": true}"));
	workspace_invalidate(ws);
	struct names nm = {0};
	CHECK_EQ(workspace_readdir(ws, "", &nm, names_fill, 0, 0, false), 0);
	CHECK(srv_faults(&S, "{}"));
	CHECK(names_has(&nm, "b.txt"));
	for (int i = 0; i < nm.n; i++) {
		const char *n = nm.v[i];
		if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
			continue;
		CHECK(backend_name_valid(n));
	}
	int dots = 0;
	for (int i = 0; i < nm.n; i++)
		dots += strcmp(nm.v[i], "..") == 0;
	CHECK_EQ(dots, 1); /* only the one readdir adds itself */
	names_clear(&nm);
	workspace_invalidate(ws);
}

static void test_invalidate(struct workspace *ws)
{
	int err;
	srv_put(&S, "inv.txt", "before");
	workspace_invalidate(ws);
	char *s = ws_get(ws, "inv.txt", &err);
	CHECK(s && strcmp(s, "before") == 0);
	free(s);
	/* Same size, changed behind our back: after a command, read anew. */
	srv_put(&S, "inv.txt", "after!");
	workspace_invalidate(ws);
	s = ws_get(ws, "inv.txt", &err);
	CHECK(s && strcmp(s, "after!") == 0);
	free(s);
	/* A new size in the listing revalidates even without a command. */
	srv_put(&S, "inv.txt", "longer now");
	workspace_invalidate(ws);
	struct stat st;
	CHECK_EQ(workspace_getattr(ws, "inv.txt", &st, 0), 0);
	CHECK_EQ(st.st_size, 10);
	s = ws_get(ws, "inv.txt", &err);
	CHECK(s && strcmp(s, "longer now") == 0);
	free(s);
}

/* rel reads want through the workspace. */
static bool ws_reads(struct workspace *ws, const char *rel, const char *want)
{
	int err;
	char *s = ws_get(ws, rel, &err);
	bool ok = s && strcmp(s, want) == 0;
	free(s);
	return ok;
}

/* A command's change list (one line, and the end line when whole) taken
 * and applied as after a run; whether it was precise. */
static bool after_list(struct workspace *ws, struct ws_changes *sum, const char *list)
{
	CHECK_EQ(workspace_note_changes(ws, list, strlen(list), sum), 1);
	bool precise = ws_changes_precise(sum);
	workspace_invalidate_changed(ws, sum);
	return precise;
}

/* A command's whole change list spares the copies it does not name
 * (workspace_invalidate_changed); one that is not whole, or names a
 * directory, spares none. Both files change on the server behind our
 * back, at the same size: only what the mount fetched again shows it. */
static void test_invalidate_changed(struct workspace *ws)
{
	srv_put(&S, "kept.txt", "one");
	srv_put(&S, "listed.txt", "uno");
	workspace_invalidate(ws);
	CHECK(ws_reads(ws, "kept.txt", "one") && ws_reads(ws, "listed.txt", "uno"));
	srv_put(&S, "kept.txt", "two");
	srv_put(&S, "listed.txt", "dos");
	struct ws_changes sum = {0};
	long gets = srv_stat(&S, "gets");
	CHECK(after_list(ws, &sum, "81a4 1700000000 3 ./listed.txt\n" WS_CHANGES_END "\n"));
	CHECK(ws_reads(ws, "kept.txt", "one")); /* spared: the list says unchanged */
	CHECK(ws_reads(ws, "listed.txt", "dos"));
	CHECK_EQ(srv_stat(&S, "gets"), gets + 1);
	/* a list that was cut (no last line), or names a directory */
	CHECK(!after_list(ws, &sum, "81a4 1700000000 3 ./listed.txt\n"));
	CHECK(ws_reads(ws, "kept.txt", "two"));
	srv_put(&S, "kept.txt", "six");
	CHECK(!after_list(ws, &sum, "41ed 1700000000 4096 ./sub\n" WS_CHANGES_END "\n"));
	CHECK(ws_reads(ws, "kept.txt", "six"));
	ws_changes_clear(&sum);
	/* no summary at all: everything */
	srv_put(&S, "kept.txt", "ten");
	workspace_invalidate_changed(ws, NULL);
	CHECK(ws_reads(ws, "kept.txt", "ten"));
}

/* A descriptor of a file below a directory being renamed, closed by
 * another thread while the mv has run and its answer has not come back:
 * the upload waits for the rename and goes to the new name, and the old
 * directory is never made again on the server. (Through a mount, libfuse
 * orders a close after a rename of a directory above it; the retry thread
 * and the workspace core's other callers have no such lock.) */
static struct wsopen race_fi;
static pthread_t race_thread;
static int race_flush = 1;
static bool race_done;
static pthread_mutex_t race_mx = PTHREAD_MUTEX_INITIALIZER;

static void *race_close(void *arg)
{
	int w = workspace_write(race_fi.fh, "+second", 7, 5);
	int rc = workspace_flush(race_fi.fh);
	pthread_mutex_lock(&race_mx);
	race_flush = w == 7 ? rc : -EIO;
	race_done = true;
	pthread_mutex_unlock(&race_mx);
	return arg;
}

static bool race_finished(void *arg)
{
	pthread_mutex_lock(&race_mx);
	bool d = race_done;
	pthread_mutex_unlock(&race_mx);
	return d;
}

static void race_during_mv(void)
{
	CHECK(srv_exists(&S, "race2/open") && !srv_exists(&S, "race1")); /* moved */
	CHECK_EQ(pthread_create(&race_thread, NULL, race_close, NULL), 0);
	/* Long enough for an upload that does not wait to be done. */
	wait_for(race_finished, NULL, 2000);
}

static void test_rename_race(struct workspace *ws)
{
	CHECK_EQ(workspace_mkdir(ws, "race1", 0755), 0);
	race_fi = (struct wsopen){.flags = O_RDWR | O_CREAT};
	CHECK_EQ(workspace_create(ws, "race1/open", 0644, &race_fi), 0);
	CHECK_EQ(workspace_write(race_fi.fh, "first", 5, 0), 5);
	after_exec = race_during_mv;
	last_in_seat = -1;
	CHECK_EQ(workspace_rename(ws, "race1", "race2", 0), 0);
	CHECK_EQ(last_in_seat, 0); /* the mv takes a seat of its own */
	CHECK_EQ(pthread_join(race_thread, NULL), 0);
	CHECK_EQ(race_flush, 0);
	workspace_release(race_fi.fh);
	CHECK(srv_has(&S, "race2/open", "first+second"));
	CHECK(!srv_exists(&S, "race1"));
}

static void test_modes(struct workspace *ws, struct workspace *ws_noexec, int *execs)
{
	struct stat st;
	CHECK_EQ(ws_put(ws, "run.sh", "#!/bin/sh\necho hi\n", O_CREAT | O_WRONLY), 0);
	/* Without a way to run chmod, a change is refused, not faked. */
	workspace_invalidate(ws_noexec);
	CHECK_EQ(workspace_chmod(ws_noexec, "run.sh", 0755), -ENOTSUP);
	CHECK_EQ(workspace_chmod(ws_noexec, "run.sh", 0644), 0);

	int e0 = *execs;
	CHECK_EQ(workspace_chmod(ws, "run.sh", 0755), 0);
	CHECK_EQ(workspace_getattr(ws, "run.sh", &st, 0), 0);
	CHECK_EQ(st.st_mode & 07777, 0755);
	CHECK_EQ(*execs, e0); /* queued, not run yet */
	CHECK_EQ(workspace_mkdir(ws, "private", 0700), 0);
	last_in_seat = -1;
	CHECK_EQ(workspace_before_command(ws, NULL, 0), 0);
	CHECK_EQ(*execs, e0 + 1); /* one batched command */
	CHECK_EQ(last_in_seat, 1); /* in the seat of the command it precedes */
	char p[512];
	snprintf(p, sizeof(p), "%s/run.sh", S.ws);
	CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0755);
	snprintf(p, sizeof(p), "%s/private", S.ws);
	CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0700);
	CHECK_EQ(workspace_before_command(ws, NULL, 0), 0);
	CHECK_EQ(*execs, e0 + 1); /* nothing queued: no command */

	/* Owners and times. */
	CHECK_EQ(workspace_chown(ws, "run.sh", getuid(), getgid()), 0);
	CHECK_EQ(workspace_chown(ws, "run.sh", (uid_t)-1, (gid_t)-1), 0);
	if (getuid() != 12345)
		CHECK_EQ(workspace_chown(ws, "run.sh", 12345, (gid_t)-1), -EPERM);
	struct timespec tv[2] = {{1000000000, 5}, {1234567890, 0}};
	CHECK_EQ(workspace_utimens(ws, "run.sh", tv), 0);
	CHECK_EQ(workspace_getattr(ws, "run.sh", &st, 0), 0);
	CHECK_EQ(st.st_mtim.tv_sec, 1234567890);
	CHECK_EQ(st.st_atim.tv_sec, 1000000000);
	/* links need a command path (test_workspace_links has the rest) */
	CHECK_EQ(workspace_symlink(ws_noexec, "x", "link"), -EPERM);
	CHECK_EQ(workspace_link(ws, "run.sh", "hard"), -EPERM);
	struct statvfs sv;
	CHECK_EQ(workspace_statfs(ws, &sv), 0);
	CHECK_EQ(sv.f_namemax, 255);
	CHECK(sv.f_blocks > 0);

	/* Directory rename through the exec callback, with a file open and
	 * written under it: the handle follows, its data lands in the new
	 * tree. */
	CHECK_EQ(workspace_mkdir(ws, "m1", 0755), 0);
	CHECK_EQ(ws_put(ws, "m1/x", "x", O_CREAT | O_WRONLY), 0);
	struct wsopen fi = {.flags = O_RDWR | O_CREAT};
	CHECK_EQ(workspace_create(ws, "m1/open", 0644, &fi), 0);
	CHECK_EQ(workspace_write(fi.fh, "first", 5, 0), 5);
	int e1 = *execs;
	CHECK_EQ(workspace_rename(ws, "m1", "m2", 0), 0);
	CHECK_EQ(*execs, e1 + 1); /* one mv in the sandbox */
	CHECK_EQ(workspace_write(fi.fh, "+second", 7, 5), 7);
	CHECK_EQ(workspace_flush(fi.fh), 0);
	workspace_release(fi.fh);
	CHECK(srv_has(&S, "m2/open", "first+second"));
	CHECK(!srv_exists(&S, "m1/open"));
	CHECK(srv_has(&S, "m2/x", "x"));
	CHECK(!srv_exists(&S, "m1"));
	CHECK_EQ(workspace_getattr(ws, "m2/x", &st, 0), 0);
}

/* A filler that takes at most `room` names per call, like a kernel
 * buffer, and remembers the offset of the last one it took. */
struct chunk {
	struct names nm;
	int room;
	off_t last;
	bool plus_with_stat; /* every name after ".." came with a stat */
};

static int chunk_fill(void *buf, const char *name, const struct stat *st, off_t off,
		      bool plus)
{
	struct chunk *ck = buf;
	if (ck->room-- <= 0)
		return 1;
	if (strcmp(name, ".") && strcmp(name, "..") && (!st || !plus || off <= 0))
		ck->plus_with_stat = false;
	ck->last = off;
	return names_fill(&ck->nm, name, st, off, plus);
}

/* One readdir pass in chunks of 7 through a directory handle: every name
 * exactly once, with a real offset and its attributes (READDIRPLUS), even
 * when the directory changes between chunks. */
static void test_readdir_chunks(struct workspace *ws)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/chunks", S.ws);
	mkdir(p, 0755);
	for (int i = 0; i < 40; i++) {
		char name[32];
		snprintf(name, sizeof(name), "chunks/f%02d", i);
		srv_put(&S, name, "x");
	}
	struct wsopen fi = {0};
	CHECK_EQ(workspace_opendir(ws, "chunks", &fi.fh), 0);
	struct chunk ck = {.plus_with_stat = true};
	off_t off = 0;
	int calls = 0;
	do {
		ck.room = 7;
		int before = ck.nm.n;
		CHECK_EQ(
		    workspace_readdir(ws, "chunks", &ck, chunk_fill, off, fi.fh, true),
		    0);
		if (ck.nm.n == before)
			break;
		off = ck.last;
		if (calls++ == 1) { /* a name removed between chunks */
			snprintf(p, sizeof(p), "%s/chunks/f00", S.ws);
			CHECK_EQ(unlink(p), 0);
			workspace_invalidate(ws);
		}
	} while (calls < 50);
	CHECK_EQ(ck.nm.n, 42);
	CHECK(ck.plus_with_stat);
	for (int i = 0; i < 40; i++) {
		char name[32];
		snprintf(name, sizeof(name), "f%02d", i);
		int seen = 0;
		for (int k = 0; k < ck.nm.n; k++)
			seen += strcmp(ck.nm.v[k], name) == 0;
		CHECK_EQ(seen, 1);
	}
	names_clear(&ck.nm);
	/* a new pass (offset 0) sees the change */
	ck.room = 1000;
	CHECK_EQ(workspace_readdir(ws, "chunks", &ck, chunk_fill, 0, fi.fh, false), 0);
	CHECK_EQ(ck.nm.n, 41);
	CHECK(!names_has(&ck.nm, "f00"));
	names_clear(&ck.nm);
	workspace_releasedir(fi.fh);
}

int main(int argc, char **argv)
{
	B = wstest_begin(argc, argv, &S, true);
	char cdir[512], cdir2[512];
	snprintf(cdir, sizeof(cdir), "%s/cache", S.dir);
	snprintf(cdir2, sizeof(cdir2), "%s/cache2", S.dir);
	int execs = 0, execs2 = 0;
	struct wscache *c = cache_new(cdir, false, &execs);
	struct wscache *c2 = cache_new(cdir2, true, &execs2);
	CHECK(c && c2);
	if (!c || !c2)
		return 1;
	CHECK_EQ(wscache_start(c), 0);
	struct workspace *ws = workspace_get(c, "sb1", S.url);
	CHECK(ws == workspace_get(c, "sb1", NULL));
	struct workspace *ws2 = workspace_get(c2, "sb1", S.url);

	test_listing(ws);
	test_readdir_chunks(ws);
	test_read_write(ws);
	test_rename(ws);
	test_dirs(ws, &execs);
	test_unlink_open(ws);
	test_names(ws);
	test_hostile_listing(ws);
	test_invalidate(ws);
	test_invalidate_changed(ws);
	test_modes(ws2, ws, &execs2);
	test_rename_race(ws2);

	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	CHECK_EQ(wscache_health(c, out), 0);
	wscache_stats(c, out);
	fclose(out);
	CHECK(strstr(buf, "cache_hits ") != NULL);
	free(buf);

	wscache_free(c);
	wscache_free(c2);
	backend_free(B);
	srv_stop(&S);
	curl_global_cleanup();
	return check_done("workspace basic");
}
