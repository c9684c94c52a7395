/* files.c — path resolution beneath the workspace, listings, deletion. */
#include "files.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int fail(struct files_error *err, int status, const char *msg)
{
	err->status = status;
	err->msg = msg;
	return status;
}

int files_normalize(const char *in, char **out, struct files_error *err)
{
	size_t n = strlen(in);
	char *res = malloc(n + 1), *o = res;
	const char *p = in;

	if (!res)
		return fail(err, 500, "out of memory");
	if (*in == '/') {
		free(res);
		return fail(err, 400, "absolute paths are not allowed");
	}
	while (*p) {
		const char *e = strchrnul(p, '/');
		size_t len = (size_t)(e - p);

		if (len == 2 && p[0] == '.' && p[1] == '.') {
			free(res);
			return fail(err, 400, "'..' is not allowed in a path");
		}
		if (len && !(len == 1 && p[0] == '.')) {
			if (o != res)
				*o++ = '/';
			memcpy(o, p, len);
			o += len;
		}
		p = *e ? e + 1 : e;
	}
	*o = '\0';
	*out = res;
	return 0;
}

int files_open_beneath(int dirfd, const char *rel, int flags, mode_t mode)
{
	struct open_how how = {
	    .flags = (unsigned long long)(flags | O_CLOEXEC),
	    .mode = (flags & O_CREAT) ? mode : 0,
	    .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	long fd;

	do
		fd = syscall(SYS_openat2, dirfd, *rel ? rel : ".", &how, sizeof(how));
	while (fd < 0 && (errno == EAGAIN || errno == EINTR));
	return fd < 0 ? -errno : (int)fd;
}

int files_errno_status(int e, const char **msg)
{
	switch (e) {
	case ENOENT:
	case ENOTDIR:
		*msg = "no such file or directory";
		return 404;
	case EXDEV:
		*msg = "the path leads outside the workspace";
		return 403;
	case ELOOP:
		*msg = "too many symbolic links";
		return 400;
	case EACCES:
	case EPERM:
		*msg = "permission denied";
		return 403;
	case ENAMETOOLONG:
		*msg = "name too long";
		return 400;
	case EISDIR:
		*msg = "is a directory";
		return 400;
	case ENOSPC:
	case EDQUOT:
		*msg = "no space left on the device";
		return 507;
	default:
		*msg = "cannot access the path";
		return 500;
	}
}

static int name_cmp(const void *a, const void *b)
{
	const cJSON *x = *(cJSON *const *)a, *y = *(cJSON *const *)b;

	return strcmp(cJSON_GetObjectItem(x, "name")->valuestring,
		      cJSON_GetObjectItem(y, "name")->valuestring);
}

cJSON *files_list(int dirfd, struct files_error *err)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	cJSON **items = NULL;
	size_t n = 0, cap = 0;
	cJSON *root, *arr;

	if (!d) {
		if (fd >= 0)
			close(fd);
		fail(err, 500, "cannot read the directory");
		return NULL;
	}
	rewinddir(d);
	while ((e = readdir(d))) {
		struct stat st;
		cJSON *it;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    !strncmp(e->d_name, FILES_TMP_PREFIX, strlen(FILES_TMP_PREFIX)))
			continue;
		/* Follow symlinks for the kind and size; a dangling link is a
		 * file of its own size. */
		if (fstatat(dirfd, e->d_name, &st, 0) &&
		    fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		it = cJSON_CreateObject();
		cJSON_AddStringToObject(it, "name", e->d_name);
		cJSON_AddNumberToObject(it, "size",
					S_ISDIR(st.st_mode) ? 0 : (double)st.st_size);
		cJSON_AddBoolToObject(it, "isDir", S_ISDIR(st.st_mode));
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			cJSON **grown = realloc(items, nc * sizeof(*items));

			if (!grown) {
				cJSON_Delete(it);
				break;
			}
			items = grown;
			cap = nc;
		}
		items[n++] = it;
	}
	closedir(d);
	if (n)
		qsort(items, n, sizeof(*items), name_cmp);
	root = cJSON_CreateObject();
	arr = cJSON_AddArrayToObject(root, "entries");
	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(arr, items[i]);
	free(items);
	return root;
}

/* Remove everything inside an open directory. */
static int clear_dir(int dfd)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	int rc = 0;

	if (!d) {
		close(dfd);
		return -errno;
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) == 0)
			continue;
		if (errno != EISDIR && errno != EPERM) {
			rc = -errno;
			continue;
		}
		int sub = openat(dirfd(d), e->d_name,
				 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (sub < 0) {
			rc = -errno;
			continue;
		}
		int r = clear_dir(sub);

		if (r)
			rc = r;
		else if (unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR))
			rc = -errno;
	}
	closedir(d);
	return rc;
}

/* Create the directories of prefix one by one; each is opened again from
 * the workspace root so a symlink cannot lead out. Returns an fd or -errno. */
static int mkdirs(int wsfd, char *prefix)
{
	int parent = files_open_beneath(wsfd, "", O_RDONLY | O_DIRECTORY, 0);
	char *seg = prefix;

	while (parent >= 0) {
		char *e = strchrnul(seg, '/');
		char save = *e;
		int next;

		*e = '\0';
		if (mkdirat(parent, seg, 0755) && errno != EEXIST) {
			next = -errno;
		} else {
			next =
			    files_open_beneath(wsfd, prefix, O_RDONLY | O_DIRECTORY, 0);
		}
		*e = save;
		close(parent);
		parent = next;
		if (!save)
			break;
		seg = e + 1;
	}
	return parent;
}

int files_open_parent(int wsfd, const char *rel, bool create, const char **name,
		      struct files_error *err)
{
	const char *slash = strrchr(rel, '/');
	char *prefix = strndup(rel, slash ? (size_t)(slash - rel) : 0);
	int fd;

	*name = slash ? slash + 1 : rel;
	if (!prefix)
		return -fail(err, 500, "out of memory");
	fd = files_open_beneath(wsfd, prefix, O_RDONLY | O_DIRECTORY, 0);
	if (fd == -ENOENT && create)
		fd = mkdirs(wsfd, prefix);
	free(prefix);
	if (fd < 0) {
		const char *msg;
		int st = files_errno_status(-fd, &msg);

		if (fd == -ENOTDIR || fd == -EEXIST) {
			st = create ? 400 : 404;
			msg = create ? "a parent of the path is not a directory"
				     : "no such file or directory";
		}
		return -fail(err, st, msg);
	}
	return fd;
}

int files_delete(int wsfd, const char *rel, struct files_error *err)
{
	const char *name, *msg;
	struct stat st;
	int pfd, rc = 0;

	if (!*rel)
		return fail(err, 400, "the workspace root cannot be deleted");
	pfd = files_open_parent(wsfd, rel, false, &name, err);
	if (pfd < 0)
		return -pfd;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
		rc = fail(err, files_errno_status(errno, &msg), NULL);
		err->msg = msg;
	} else if (S_ISDIR(st.st_mode)) {
		int dfd =
		    openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int r = dfd < 0 ? -errno : clear_dir(dfd);

		if (!r && unlinkat(pfd, name, AT_REMOVEDIR))
			r = -errno;
		if (r) {
			rc = fail(err, files_errno_status(-r, &msg), NULL);
			err->msg = msg;
		}
	} else if (unlinkat(pfd, name, 0)) {
		rc = fail(err, files_errno_status(errno, &msg), NULL);
		err->msg = msg;
	}
	close(pfd);
	return rc;
}
