/*
 * preflight.c — checks of the mountpoint and of FUSE before anything
 * starts, so a user sees one line saying what to do instead of libfuse's
 * message from deep inside the mount.
 */
#include "preflight_i.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fuse_i.h" /* fs_log */

#define FS_FUSE_DEVICE "/dev/fuse"
/* libfuse runs fusermount3 from its install directory first, then PATH */
#define FS_FUSERMOUNT_DIR "/usr/bin"
#define FS_FUSERMOUNT	  "fusermount3"

static int fs_dir_is_empty(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return -errno;
	struct dirent *e;
	int empty = 1;
	errno = 0;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			empty = 0;
			break;
		}
	}
	int err = errno;
	closedir(d);
	return err ? -err : empty;
}

/* Something is mounted on path: its device differs from its parent's. */
static bool fs_is_mount_point(const char *path, const struct stat *st)
{
	char parent[PATH_MAX];
	struct stat pst;
	if (snprintf(parent, sizeof(parent), "%s/..", path) >= (int)sizeof(parent))
		return false;
	return stat(parent, &pst) == 0 && pst.st_dev != st->st_dev;
}

int fs_preflight_mountpoint(const char *path, bool nonempty)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		int err = errno;
		if (err == ENOENT)
			fs_log("mountpoint %s does not exist: create it first "
			       "(mkdir -p %s)",
			       path, path);
		else if (err == ENOTCONN)
			fs_log("mountpoint %s is a dead FUSE mount: unmount "
			       "it first (fusermount3 -u %s)",
			       path, path);
		else
			fs_log("mountpoint %s: %s: mount on a directory you "
			       "can use",
			       path, strerror(err));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fs_log("mountpoint %s is not a directory: mount on an "
		       "empty directory",
		       path);
		return -1;
	}
	if (nonempty)
		return 0;
	int rc = fs_dir_is_empty(path);
	if (rc == -ENOTCONN) {
		fs_log("mountpoint %s is a dead FUSE mount: unmount it first "
		       "(fusermount3 -u %s)",
		       path, path);
		return -1;
	}
	if (rc < 0) {
		fs_log("mountpoint %s: %s: mount on a directory you can "
		       "read",
		       path, strerror(-rc));
		return -1;
	}
	if (!rc && fs_is_mount_point(path, &st)) {
		fs_log("mountpoint %s is already a mount point with files "
		       "in it (sandboxfs mounted twice?): unmount it "
		       "first (fusermount3 -u %s), or add -o nonempty",
		       path, path);
		return -1;
	}
	if (!rc) {
		fs_log("mountpoint %s is not empty: its files would be "
		       "hidden; use an empty directory, or add -o "
		       "nonempty to mount over them",
		       path);
		return -1;
	}
	return 0;
}

static bool fs_executable(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

static bool fs_fusermount_found(void)
{
	if (fs_executable(FS_FUSERMOUNT_DIR "/" FS_FUSERMOUNT))
		return true;
	const char *path = getenv("PATH");
	if (!path)
		return false;
	char *copy = strdup(path);
	bool found = false;
	char *save = NULL;
	for (char *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir && !found;
	     dir = strtok_r(NULL, ":", &save)) {
		char p[PATH_MAX];
		if (snprintf(p, sizeof(p), "%s/%s", *dir ? dir : ".", FS_FUSERMOUNT) <
		    (int)sizeof(p))
			found = fs_executable(p);
	}
	free(copy);
	return found;
}

int fs_preflight_fuse(bool need_fusermount)
{
	struct stat st;
	if (stat(FS_FUSE_DEVICE, &st) < 0) {
		fs_log(FS_FUSE_DEVICE " is missing (%s): load the FUSE "
				      "module (modprobe fuse), or in a container "
				      "pass the device (docker run --device "
				      "/dev/fuse)",
		       strerror(errno));
		return -1;
	}
	if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != 10 || minor(st.st_rdev) != 229) {
		fs_log(FS_FUSE_DEVICE " is not the FUSE device (expected "
				      "character device 10:229): recreate it "
				      "(mknod -m 0666 /dev/fuse c 10 229) or pass "
				      "the host's (docker run --device /dev/fuse)");
		return -1;
	}
	if (need_fusermount && !fs_fusermount_found()) {
		fs_log(FS_FUSERMOUNT " not found in " FS_FUSERMOUNT_DIR
				     " or PATH: install it (apt-get "
				     "install fuse3), or add its "
				     "directory to PATH");
		return -1;
	}
	return 0;
}
