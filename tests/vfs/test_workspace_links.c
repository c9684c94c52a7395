/*
 * test_workspace_links — the workspace's symbolic links against a real
 * sandbox-server, without a mount: symlink made in the sandbox by a
 * command, readlink from what is known, the type kept across listing
 * refreshes, links learnt and forgotten from a command's change list and
 * from listings, unlink and rename of a link by commands (a link to a
 * directory never takes the directory with it). Checked on the server's
 * disk.
 */
#include <limits.h>

#include "wstest.h"

static struct srv S;
static struct backend *B;

static int test_exec(void *ctx, const char *id, const char *command, bool in_seat,
		     int *exit_code)
{
	(void)in_seat;
	struct backend_exec_result r = {0};
	struct backend_error err;
	enum backend_status st = backend_execute(B, S.url, command, 30, &r, &err);
	if (st != BACKEND_OK)
		return -backend_errno(st, BACKEND_OP_EXECUTE);
	*exit_code = r.exit_code;
	backend_exec_result_clear(&r);
	(*(int *)ctx)++;
	return 0;
}

static struct wscache *cache_new(const char *dir, bool with_exec, int *execs)
{
	struct wscache_config cfg = {
	    .backend = B,
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

/* The target of a link on the server's disk, "" when it is not one. */
static const char *srv_link(const char *rel)
{
	static char buf[PATH_MAX];
	char p[1024];
	snprintf(p, sizeof(p), "%s/%s", S.ws, rel);
	ssize_t n = readlink(p, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static bool is_link(struct workspace *ws, const char *rel, const char *target)
{
	struct stat st;
	char buf[256];
	return workspace_getattr(ws, rel, &st, 0) == 0 && S_ISLNK(st.st_mode) &&
	       st.st_size == (off_t)strlen(target) &&
	       workspace_readlink(ws, rel, buf, sizeof(buf)) == 0 && strcmp(buf, target) == 0;
}

int main(int argc, char **argv)
{
	B = wstest_begin(argc, argv, &S, false);
	char cdir[512], cdir2[512];
	snprintf(cdir, sizeof(cdir), "%s/cache", S.dir);
	snprintf(cdir2, sizeof(cdir2), "%s/cache2", S.dir);
	int execs = 0, noexecs = 0;
	struct wscache *c = cache_new(cdir, true, &execs);
	struct wscache *c0 = cache_new(cdir2, false, &noexecs);
	CHECK(c && c0);
	if (!c || !c0)
		return 1;
	struct workspace *ws = workspace_get(c, "sb1", S.url);
	struct workspace *ws0 = workspace_get(c0, "sb1", S.url);
	char buf[256];
	struct stat st;

	/* made through the workspace: a command made it there, at once */
	srv_put(&S, "t.txt", "hello\n");
	CHECK_EQ(workspace_symlink(ws, "t.txt", "l1"), 0);
	CHECK_EQ(execs, 1);
	CHECK(strcmp(srv_link("l1"), "t.txt") == 0);
	CHECK(is_link(ws, "l1", "t.txt"));
	CHECK_EQ(workspace_symlink(ws, "other", "l1"), -EEXIST);
	CHECK_EQ(workspace_readlink(ws, "t.txt", buf, sizeof(buf)), -EINVAL);
	/* the listing follows it (a file of 6 bytes): still a link after a
	 * refresh */
	workspace_invalidate(ws);
	CHECK(is_link(ws, "l1", "t.txt"));

	/* from a command's change list, with its target on the next line */
	char p[1024];
	snprintf(p, sizeof(p), "%s/cl", S.ws);
	CHECK_EQ(symlink("sub dir/x", p), 0);
	const char list[] = "81a4 1600000000 6 ./t.txt\n"
			    "a1ff 1600000000 9 ./cl\nsub dir/x\n"
			    "a1ff 1600000000 99 ./bad\nshort\n";
	CHECK_EQ(workspace_note_changes(ws, list, sizeof(list) - 1, NULL), 2);
	CHECK(is_link(ws, "cl", "sub dir/x"));
	CHECK_EQ(workspace_getattr(ws, "bad", &st, 0), -ENOENT);
	/* listed as a file later: no longer a link */
	const char later[] = "81a4 1600000001 2 ./cl\n";
	CHECK_EQ(workspace_note_changes(ws, later, sizeof(later) - 1, NULL), 1);
	/* at once (what the kernel was told is the mount's: fuse/nodes.c) */
	CHECK_EQ(workspace_getattr(ws, "cl", &st, 0), 0);
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(workspace_readlink(ws, "cl", buf, sizeof(buf)), -EINVAL);

	/* gone from a fresh listing: forgotten */
	snprintf(p, sizeof(p), "%s/l1", S.ws);
	CHECK_EQ(unlink(p), 0);
	workspace_invalidate(ws);
	CHECK_EQ(workspace_getattr(ws, "l1", &st, 0), -ENOENT);
	CHECK_EQ(workspace_readlink(ws, "l1", buf, sizeof(buf)), -ENOENT);

	/* unlink of a link to a directory removes the link only */
	CHECK_EQ(workspace_mkdir(ws, "dir", 0755), 0);
	srv_put(&S, "dir/keep", "keep\n");
	CHECK_EQ(workspace_symlink(ws, "dir", "ld"), 0);
	CHECK(strcmp(srv_link("ld"), "dir") == 0);
	CHECK_EQ(workspace_rmdir(ws, "ld"), -ENOTDIR);
	CHECK_EQ(workspace_unlink(ws, "ld"), 0);
	CHECK(!srv_exists(&S, "ld") && srv_link("ld")[0] == '\0');
	CHECK(srv_has(&S, "dir/keep", "keep\n"));
	CHECK_EQ(workspace_getattr(ws, "ld", &st, 0), -ENOENT);

	/* rename moves the link, never its target */
	CHECK_EQ(workspace_symlink(ws, "dir", "r1"), 0);
	CHECK_EQ(workspace_rename(ws, "r1", "r2", 0), 0);
	CHECK(strcmp(srv_link("r2"), "dir") == 0 && srv_link("r1")[0] == '\0');
	CHECK(is_link(ws, "r2", "dir"));
	CHECK_EQ(workspace_getattr(ws, "r1", &st, 0), -ENOENT);
	CHECK(srv_has(&S, "dir/keep", "keep\n"));
	/* and a directory rename takes the links below it along */
	CHECK_EQ(workspace_symlink(ws, "../t.txt", "dir/in"), 0);
	CHECK_EQ(workspace_rename(ws, "dir", "dir2", 0), 0);
	CHECK(is_link(ws, "dir2/in", "../t.txt"));
	CHECK(strcmp(srv_link("dir2/in"), "../t.txt") == 0);

	/* without a way to run commands: no links, and never hard ones */
	CHECK_EQ(workspace_symlink(ws0, "x", "nolink"), -EPERM);
	CHECK_EQ(workspace_link(ws, "t.txt", "hard"), -EPERM);

	wscache_free(c);
	wscache_free(c0);
	backend_free(B);
	srv_stop(&S);
	curl_global_cleanup();
	return check_done("workspace links");
}
