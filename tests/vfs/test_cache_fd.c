/*
 * test_cache_fd.c — ws_cache_truncate_fd (vfs/workspace.c): a cache file
 * is truncated only when its size changes. On ext4 a truncate to 0, even
 * of an empty file, makes the file's close wait for its data to reach the
 * disk (auto_da_alloc), which every new cache file paid. Linux updates a
 * file's mtime at every truncate, so an old mtime that stays shows the
 * call was skipped.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/check.h"
#include "workspace_i.h"

static void make_old(int fd)
{
	struct timespec old[2] = {{946684800, 0}, {946684800, 0}}; /* 2000-01-01 */
	CHECK(futimens(fd, old) == 0);
}

static long long mtime_of(int fd)
{
	struct stat st;
	CHECK(fstat(fd, &st) == 0);
	return (long long)st.st_mtim.tv_sec;
}

static long long size_of(int fd)
{
	struct stat st;
	CHECK(fstat(fd, &st) == 0);
	return (long long)st.st_size;
}

int main(void)
{
	char path[] = "/tmp/sandboxfs-test-cache-fd.XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd < 0)
		return check_done("cache fd");
	unlink(path);

	/* an empty file truncated to 0: nothing is done */
	make_old(fd);
	CHECK_EQ(ws_cache_truncate_fd(fd, 0), 0);
	CHECK_EQ(mtime_of(fd), 946684800);

	/* a new size is applied */
	CHECK_EQ(ws_cache_truncate_fd(fd, 5), 0);
	CHECK_EQ(size_of(fd), 5);
	CHECK(mtime_of(fd) != 946684800);

	/* the same size again: nothing is done */
	make_old(fd);
	CHECK_EQ(ws_cache_truncate_fd(fd, 5), 0);
	CHECK_EQ(mtime_of(fd), 946684800);
	CHECK_EQ(size_of(fd), 5);

	/* back to 0 is a change */
	CHECK_EQ(ws_cache_truncate_fd(fd, 0), 0);
	CHECK_EQ(size_of(fd), 0);

	/* a descriptor that is not open: the error comes back */
	close(fd);
	CHECK(ws_cache_truncate_fd(fd, 3) < 0);
	return check_done("cache fd");
}
