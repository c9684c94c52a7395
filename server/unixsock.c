/* unixsock.c — private Unix sockets for the servers. */
#include "unixsock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

_Static_assert(UNIXSOCK_PATH_MAX < sizeof(((struct sockaddr_un *)0)->sun_path),
	       "sun_path holds the path and its NUL");

static int fill_addr(struct sockaddr_un *a, const char *path, char *err, size_t errlen)
{
	size_t n = strlen(path);

	if (n == 0 || n > UNIXSOCK_PATH_MAX) {
		snprintf(err, errlen,
			 "the socket path %s is %zu bytes long; a Unix socket path "
			 "holds at most %d",
			 path, n, UNIXSOCK_PATH_MAX);
		return -1;
	}
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	memcpy(a->sun_path, path, n);
	return 0;
}

/* A socket file nobody accepts on is a leftover: remove it. */
static int clear_stale(const struct sockaddr_un *a, const char *path, char *err,
		       size_t errlen)
{
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "%s exists and is not a socket", path);
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	rc = connect(fd, (const struct sockaddr *)a, sizeof(*a));
	close(fd);
	if (rc == 0) {
		snprintf(err, errlen, "%s: another server is listening there", path);
		return -1;
	}
	if (unlink(path) < 0 && errno != ENOENT) {
		snprintf(err, errlen, "%s: cannot remove the old socket: %s", path,
			 strerror(errno));
		return -1;
	}
	return 0;
}

int unixsock_listen(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un a;
	bool bound = false;
	int fd;

	if (fill_addr(&a, path, err, errlen) || clear_stale(&a, path, err, errlen))
		return -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	/* On Linux the file takes the socket's mode (less the umask) at bind:
	 * it is never, even for a moment, open to others. */
	if (fchmod(fd, 0600) == 0 &&
	    (bound = bind(fd, (const struct sockaddr *)&a, sizeof(a)) == 0) &&
	    chmod(a.sun_path, 0600) == 0 && listen(fd, 64) == 0)
		return fd;
	snprintf(err, errlen, "cannot listen on %s: %s", a.sun_path, strerror(errno));
	close(fd);
	if (bound)
		unlink(a.sun_path);
	return -1;
}

int unixsock_private_dir(const char *dir, char *err, size_t errlen)
{
	struct stat st;
	int fd;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s: %s", dir,
			 errno == ELOOP || errno == ENOTDIR ? "not a directory"
							    : strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (st.st_uid != geteuid()) {
		snprintf(err, errlen,
			 "%s is owned by another user: its sockets would not "
			 "be private",
			 dir);
		close(fd);
		return -1;
	}
	if ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700) < 0) {
		snprintf(err, errlen, "cannot make %s private (0700): %s", dir,
			 strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

bool unixsock_peer_is_self(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
	    len != sizeof(cred))
		return false;
	return cred.uid == geteuid();
}

char *unixsock_url(const char *path)
{
	static const char hex[] = "0123456789ABCDEF";
	static const char prefix[] = "http+unix://";
	size_t n = strlen(path);
	char *url = malloc(sizeof(prefix) + 3 * n);
	char *o;

	if (!url)
		return NULL;
	memcpy(url, prefix, sizeof(prefix) - 1);
	o = url + sizeof(prefix) - 1;
	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~", *p)) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return url;
}
