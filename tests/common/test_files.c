/*
 * test_files.c — common/files.h: mkdir -p and private files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/check.h"
#include "common/files.h"

static char root[1024];

static const char *at(const char *rel)
{
	static char bufs[4][4096];
	static int i;
	char *b = bufs[i++ % 4];
	snprintf(b, sizeof(bufs[0]), "%s/%s", root, rel);
	return b;
}

static int mode_of(const char *p)
{
	struct stat st;
	return lstat(p, &st) ? -1 : (int)(st.st_mode & 07777);
}

static bool is_dir(const char *p)
{
	struct stat st;
	return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void put(const char *p, const char *s)
{
	FILE *f = fopen(p, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(s, f);
		fclose(f);
	}
}

static char *slurp(const char *p)
{
	static char buf[4096];
	FILE *f = fopen(p, "r");
	if (!f)
		return NULL;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* Entries in dir other than . and .. */
static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void test_mkdirs(void)
{
	CHECK_EQ(common_mkdirs(at("a/b/c"), 0700), 0);
	CHECK(is_dir(at("a")) && is_dir(at("a/b")) && is_dir(at("a/b/c")));
	CHECK_EQ(mode_of(at("a")), 0700);
	CHECK_EQ(mode_of(at("a/b/c")), 0700);

	/* Existing parts are fine and keep their mode; new ones get mode. */
	CHECK_EQ(chmod(at("a/b"), 0750), 0);
	CHECK_EQ(common_mkdirs(at("a/b/c"), 0755), 0);
	CHECK_EQ(common_mkdirs(at("a/b/d/e"), 0755), 0);
	CHECK_EQ(mode_of(at("a/b")), 0750);
	CHECK_EQ(mode_of(at("a/b/c")), 0700);
	CHECK_EQ(mode_of(at("a/b/d")), 0755);
	CHECK_EQ(mode_of(at("a/b/d/e")), 0755);

	/* Doubled and trailing slashes. */
	CHECK_EQ(common_mkdirs(at("x//y///z/"), 0700), 0);
	CHECK(is_dir(at("x/y/z")));

	/* A link to a directory counts as one. */
	CHECK_EQ(symlink(at("a/b"), at("link")), 0);
	CHECK_EQ(common_mkdirs(at("link/new"), 0700), 0);
	CHECK(is_dir(at("a/b/new")));

	/* A file in the way, in the middle or at the end. */
	put(at("a/file"), "x");
	errno = 0;
	CHECK_EQ(common_mkdirs(at("a/file/sub"), 0700), -ENOTDIR);
	CHECK_EQ(errno, ENOTDIR);
	errno = 0;
	CHECK_EQ(common_mkdirs(at("a/file"), 0700), -ENOTDIR);
	CHECK_EQ(errno, ENOTDIR);
	CHECK_EQ(strcmp(slurp(at("a/file")), "x"), 0);

	/* A dangling link at the end is not a directory either. */
	CHECK_EQ(symlink(at("nowhere"), at("dangling")), 0);
	CHECK(common_mkdirs(at("dangling"), 0700) < 0);

	/* Relative paths, from the working directory. */
	CHECK_EQ(chdir(root), 0);
	CHECK_EQ(common_mkdirs("rel/one", 0700), 0);
	CHECK(is_dir(at("rel/one")));

	CHECK_EQ(common_mkdirs("", 0700), -ENOENT);
	CHECK_EQ(common_mkdirs("/", 0700), 0);

	/* A directory that cannot be written to. */
	if (geteuid() != 0) {
		CHECK_EQ(common_mkdirs(at("ro"), 0500), 0);
		CHECK_EQ(common_mkdirs(at("ro/sub"), 0700), -EACCES);
		CHECK_EQ(errno, EACCES);
	}
}

static void test_secret(void)
{
	const char *p = at("s/token");

	CHECK_EQ(common_mkdirs(at("s"), 0700), 0);
	/* 0600 whatever the umask. */
	CHECK_EQ(common_write_secret(p, "abc\n", 4), 0);
	CHECK_EQ(mode_of(p), 0600);
	CHECK_EQ(strcmp(slurp(p), "abc\n"), 0);

	/* Replaces an existing file open to others, and its content. */
	CHECK_EQ(chmod(p, 0644), 0);
	CHECK_EQ(common_write_secret(p, "de", 2), 0);
	CHECK_EQ(mode_of(p), 0600);
	CHECK_EQ(strcmp(slurp(p), "de"), 0);
	CHECK_EQ(common_write_secret(p, "", 0), 0);
	CHECK_EQ(strcmp(slurp(p), ""), 0);

	/* A link at path is replaced, never written through. */
	put(at("s/target"), "keep");
	CHECK_EQ(symlink(at("s/target"), at("s/link")), 0);
	CHECK_EQ(common_write_secret(at("s/link"), "new", 3), 0);
	CHECK_EQ(strcmp(slurp(at("s/target")), "keep"), 0);
	CHECK_EQ(mode_of(at("s/link")), 0600);
	CHECK_EQ(strcmp(slurp(at("s/link")), "new"), 0);

	/* No temporary file is left: token, target, link. */
	CHECK_EQ(entries(at("s")), 3);

	/* Relative to a directory descriptor. */
	int dfd = open(at("s"), O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0);
	CHECK_EQ(common_write_secret_at(dfd, "meta.json", "{}", 2), 0);
	close(dfd);
	CHECK_EQ(strcmp(slurp(at("s/meta.json")), "{}"), 0);
	CHECK_EQ(mode_of(at("s/meta.json")), 0600);
	CHECK_EQ(entries(at("s")), 4);

	/* A directory that does not exist. */
	errno = 0;
	CHECK_EQ(common_write_secret(at("missing/token"), "x", 1), -ENOENT);
	CHECK_EQ(errno, ENOENT);

	/* A directory at path: the rename fails, nothing is left behind. */
	CHECK_EQ(common_mkdirs(at("s/dir"), 0700), 0);
	CHECK(common_write_secret(at("s/dir"), "x", 1) < 0);
	CHECK(is_dir(at("s/dir")));
	CHECK_EQ(entries(at("s")), 5);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	chmod(p, 0700);
	return remove(p);
}

int main(void)
{
	const char *t = getenv("TMPDIR");
	snprintf(root, sizeof(root), "%s/common-files.XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 2;
	}
	umask(0);
	test_mkdirs();
	test_secret();
	nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return check_done("common files");
}
