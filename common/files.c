/*
 * files.c — mkdir -p and atomically written private files.
 */
#include "common/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* Returns -e with errno set to e. */
static int fail(int e)
{
	errno = e;
	return -e;
}

/* mkdir that counts an existing directory as success. */
static int make_one(const char *p, mode_t mode, bool last)
{
	struct stat st;

	if (mkdir(p, mode) == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	/* A part in the middle that is not a directory fails the next
	 * mkdir with ENOTDIR; only the last one needs a look. */
	if (!last)
		return 0;
	if (stat(p, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int common_mkdirs(const char *path, mode_t mode)
{
	if (!path || !*path)
		return fail(ENOENT);
	char *p = strdup(path);
	if (!p)
		return fail(ENOMEM);
	int rc = 0;
	for (char *s = p + 1; *s && !rc; s++) {
		if (*s != '/' || s[-1] == '/')
			continue;
		*s = '\0';
		rc = make_one(p, mode, false);
		*s = '/';
	}
	if (!rc)
		rc = make_one(p, mode, true);
	free(p);
	return rc ? fail(-rc) : 0;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int common_write_secret_at(int dirfd, const char *name, const void *data, size_t len)
{
	static atomic_uint seq;
	char tmp[4096];
	int n = snprintf(tmp, sizeof(tmp), "%s.%ld.%u.tmp", name, (long)getpid(),
			 atomic_fetch_add(&seq, 1));

	if (n < 0 || (size_t)n >= sizeof(tmp))
		return fail(ENAMETOOLONG);
	/* Unique to this process and call, so two writers never share it;
	 * O_TRUNC and fchmod cover one a crash of an earlier process with
	 * the same pid left behind. */
	int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
			0600);
	if (fd < 0)
		return fail(errno);
	int rc = fchmod(fd, 0600) < 0 ? -errno : 0;
	if (!rc)
		rc = write_all(fd, data, len);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (!rc && renameat(dirfd, tmp, dirfd, name) < 0)
		rc = -errno;
	if (rc) {
		unlinkat(dirfd, tmp, 0);
		return fail(-rc);
	}
	return 0;
}

int common_write_secret(const char *path, const void *data, size_t len)
{
	return common_write_secret_at(AT_FDCWD, path, data, len);
}

int common_raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return -1;
	if (rl.rlim_cur >= rl.rlim_max)
		return 0;
	rl.rlim_cur = rl.rlim_max;
	return setrlimit(RLIMIT_NOFILE, &rl);
}
