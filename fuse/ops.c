/*
 * ops.c — the model's operations by path, in libfuse's high-level shapes:
 * translate a path to a node and call the model, the command path, the
 * lifecycle or the workspace. Thin on purpose; lowlevel.c serves them.
 */
#include "fuse_i.h"
#include "node_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

static struct fs_mount *fs_m(void)
{
	return fs_mount_global;
}

/* The workspace of a WS location, or NULL. */
static struct workspace *fs_ws(struct fs_mount *m, const struct fs_loc *loc)
{
	if (loc->node != FS_N_WS)
		return NULL;
	return fs_sandbox_workspace(m, loc->sb);
}

/* A node of the mount's own (not the workspace): owned by the mounting
 * user, all three times from ms. */
static void fs_fill_node(struct fs_mount *m, struct stat *st, mode_t mode, uint64_t ms)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = mode;
	st->st_uid = m->uid;
	st->st_gid = m->gid;
	st->st_mtim.tv_sec = (time_t)(ms / 1000);
	st->st_mtim.tv_nsec = (long)(ms % 1000) * 1000000;
	st->st_atim = st->st_ctim = st->st_mtim;
}

static void fs_fill_dir(struct fs_mount *m, struct stat *st, uint64_t ms)
{
	fs_fill_node(m, st, S_IFDIR | 0755, ms);
	st->st_nlink = 2;
}

static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	struct fs_mount *m = fs_m();
	if (!path && fi) {
		if (fs_handle_of(fi->fh)->kind == FS_HANDLE_WORKSPACE)
			return workspace_getattr(NULL, NULL, st, fi->fh);
		return -ESTALE;
	}
	struct fs_loc loc;
	int rc = fs_resolve(m, path, &loc);
	if (rc < 0)
		return rc;
	switch (loc.node) {
	case FS_N_ROOT:
	case FS_N_MDIR:
	case FS_N_SB:
	case FS_N_RUNS:
	case FS_N_RUN:
	case FS_N_JOBS:
	case FS_N_JOB:
		fs_fill_dir(m, st, fs_node_mtime(m, &loc));
		return 0;
	case FS_N_WS: {
		struct workspace *ws = fs_ws(m, &loc);
		if (ws)
			return workspace_getattr(ws, loc.rel, st, fi ? fi->fh : 0);
		if (loc.rel[0])
			return -ENOENT;
		/* no URL yet (creating, failed): an empty directory */
		fs_fill_dir(m, st, fs_node_mtime(m, &loc));
		return 0;
	}
	default:
		break;
	}
	const struct fs_file_def *d = fs_file_def(loc.file);
	fs_fill_node(m, st, S_IFREG | d->mode, fs_node_mtime(m, &loc));
	st->st_nlink = 1;
	/* the size of what a read would return now (0 while running) */
	if (d->size_known)
		st->st_size = fs_render_size(m, &loc);
	st->st_blksize = 4096;
	st->st_blocks = (st->st_size + 511) / 512;
	return 0;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	struct fs_mount *m = fs_m();
	struct fs_loc loc;
	int rc = fs_resolve(m, path, &loc);
	if (rc < 0)
		return rc;
	if (loc.node == FS_N_WS) {
		struct workspace *ws = fs_ws(m, &loc);
		struct fs_ws_filler wf = {buf, filler};
		if (ws)
			return workspace_readdir(ws, loc.rel, &wf, fs_ws_fill, off,
						 fi ? fi->fh : 0,
						 (flags & FUSE_READDIR_PLUS) != 0);
		if (loc.rel[0])
			return -ENOENT;
		filler(buf, ".", NULL, 0, 0);
		filler(buf, "..", NULL, 0, 0);
		return 0;
	}
	filler(buf, ".", NULL, 0, 0);
	filler(buf, "..", NULL, 0, 0);
	const struct fs_file_def *d;
	switch (loc.node) {
	case FS_N_ROOT: {
		fs_orch_refresh(m, false);
		filler(buf, ".sandboxfs", NULL, 0, 0);
		/* A sandbox object and its id live as long as the mount: the
		 * names need no copies, only the array may move. */
		pthread_mutex_lock(&m->lock);
		size_t n = m->nsbs;
		const char **names = calloc(n + 1, sizeof(*names));
		size_t k = 0;
		for (size_t i = 0; names && i < n; i++)
			if (m->sbs[i]->present)
				names[k++] = m->sbs[i]->id;
		pthread_mutex_unlock(&m->lock);
		if (!names)
			return -ENOMEM;
		for (size_t i = 0; i < k; i++)
			filler(buf, names[i], NULL, 0, 0);
		free(names);
		return 0;
	}
	case FS_N_MDIR:
		for (size_t i = 0; (d = fs_file_next(FS_IN_MDIR, &i));)
			filler(buf, d->name, NULL, 0, 0);
		return 0;
	case FS_N_SB:
		for (size_t i = 0; (d = fs_file_next(FS_IN_SB, &i));)
			filler(buf, d->name, NULL, 0, 0);
		filler(buf, "runs", NULL, 0, 0);
		filler(buf, "jobs", NULL, 0, 0);
		filler(buf, "workspace", NULL, 0, 0);
		return 0;
	case FS_N_JOBS:
	case FS_N_RUNS: {
		uint64_t *v;
		size_t n = loc.node == FS_N_JOBS ? fs_job_numbers(m, loc.sb, &v)
						 : fs_run_numbers(m, loc.sb, &v);
		if (!v)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++) {
			char name[24];
			snprintf(name, sizeof(name), "%llu", (unsigned long long)v[i]);
			filler(buf, name, NULL, 0, 0);
		}
		free(v);
		return 0;
	}
	case FS_N_JOB:
		for (size_t i = 0; (d = fs_file_next(FS_IN_JOB, &i));)
			filler(buf, d->name, NULL, 0, 0);
		return 0;
	case FS_N_RUN:
		for (size_t i = 0; (d = fs_file_next(FS_IN_RUN, &i));)
			filler(buf, d->name, NULL, 0, 0);
		return 0;
	default:
		return -ENOTDIR;
	}
}

/* A workspace directory gets a handle that keeps its listing between the
 * chunks of one readdir pass (workspace_readdir); other directories are
 * small and need none. */
static int fs_opendir(const char *path, struct fuse_file_info *fi)
{
	struct fs_mount *m = fs_m();
	struct fs_loc loc;
	fi->fh = 0;
	int rc = fs_resolve(m, path, &loc);
	if (rc < 0)
		return rc;
	struct workspace *ws = fs_ws(m, &loc);
	return ws ? workspace_opendir(ws, loc.rel, &fi->fh) : 0;
}

static int fs_releasedir(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	workspace_releasedir(fi->fh);
	return 0;
}

static bool fs_file_writable(const struct fs_loc *loc)
{
	return (loc->node == FS_N_SBFILE || loc->node == FS_N_MFILE ||
		loc->node == FS_N_JOBFILE) &&
	       fs_file_def(loc->file)->write;
}

static int fs_open(const char *path, struct fuse_file_info *fi)
{
	struct fs_mount *m = fs_m();
	struct fs_loc loc;
	int rc = fs_resolve(m, path, &loc);
	if (rc < 0)
		return rc;
	if (loc.node == FS_N_WS) {
		struct workspace *ws = fs_ws(m, &loc);
		rc = ws ? fs_ws_open(ws, loc.rel, NULL, fi) : -ENOENT;
		/* The kernel opens an inode it still knows by this name: gone,
		 * or a directory now, means another client changed it (after a
		 * command the kernel was told). ESTALE makes the kernel look
		 * the path up again and retry once, so O_CREAT creates it. */
		if (rc == -ENOENT || rc == -EISDIR)
			return -ESTALE;
		return rc;
	}
	if (loc.node != FS_N_SBFILE && loc.node != FS_N_RUNFILE && loc.node != FS_N_MFILE &&
	    loc.node != FS_N_JOBFILE)
		return -EISDIR;
	if ((fi->flags & O_ACCMODE) != O_RDONLY && !fs_file_writable(&loc))
		return -EACCES;
	if (!(fi->flags & O_NONBLOCK)) {
		rc = fs_stream_open_wait(m, &loc, true);
		if (rc < 0)
			return rc;
	}
	if (loc.node == FS_N_SBFILE && loc.file == FS_F_CTL &&
	    (fi->flags & O_ACCMODE) != O_RDONLY) {
		/* The kernel holds the inode lock of ctl for the whole of a
		 * running write, and truncates (O_TRUNC of a shell's ">")
		 * under that lock after this open: a second writer would
		 * hang until the command ends. Refuse it here instead, where
		 * the shell reports it. */
		pthread_mutex_lock(&m->lock);
		bool busy = loc.sb->busy;
		pthread_mutex_unlock(&m->lock);
		if (busy) {
			atomic_fetch_add(&m->n.busy_refused, 1);
			return -EBUSY;
		}
	}
	/* O_TRUNC comes with the open (atomic_o_trunc): env, cwd and stdin
	 * are emptied by a shell's ">" */
	if ((fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY) {
		rc = fs_file_truncate(m, &loc, 0);
		if (rc < 0)
			return rc;
	}
	struct fs_ctl_handle *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->h.kind = FS_HANDLE_CONTROL;
	h->loc = loc;
	h->loc.rel = NULL;
	h->flags = fi->flags;
	pthread_mutex_init(&h->lock, NULL);
	fi->fh = (uint64_t)(uintptr_t)h;
	/* never served stale from the page cache, never split */
	fi->direct_io = 1;
	fi->keep_cache = 0;
	fi->noflush = 1; /* nothing to do at close: spare the kernel's FLUSH */
	return 0;
}

static int fs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	struct fs_mount *m = fs_m();
	struct fs_loc loc;
	int rc = fs_resolve(m, path, &loc);
	if (rc == 0 && loc.node == FS_N_WS) {
		struct workspace *ws = fs_ws(m, &loc);
		return ws ? fs_ws_open(ws, loc.rel, &mode, fi) : -ENOENT;
	}
	if (rc == 0)
		return fs_open(path, fi); /* O_CREAT on an existing file */
	return -EACCES;
}

static int fs_read(const char *path, char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct fs_handle *hh = fs_handle_of(fi->fh);
	if (hh->kind == FS_HANDLE_WORKSPACE)
		return workspace_read(fi->fh, buf, size, off);
	if (hh->kind != FS_HANDLE_CONTROL)
		return -EBADF;
	struct fs_mount *m = fs_m();
	struct fs_ctl_handle *h = (struct fs_ctl_handle *)hh;
	/* stdout and stderr of a job: what it wrote so far */
	if ((h->loc.file == FS_F_STDOUT || h->loc.file == FS_F_STDERR) &&
	    h->loc.node == FS_N_JOBFILE)
		return fs_job_read(m, &h->loc, buf, size, off, (fi->flags & O_NONBLOCK) != 0);
	/* stdout and stderr of a run that streams: what it wrote so far */
	if ((h->loc.file == FS_F_STDOUT || h->loc.file == FS_F_STDERR) &&
	    (h->loc.node == FS_N_SBFILE || h->loc.node == FS_N_RUNFILE)) {
		pthread_mutex_lock(&h->lock);
		bool loaded = h->loaded;
		pthread_mutex_unlock(&h->lock);
		if (!loaded) {
			int n = fs_stream_read(m, &h->loc, buf, size, off,
					       (fi->flags & O_NONBLOCK) != 0);
			if (n != -ENODATA)
				return n;
		}
	}
	pthread_mutex_lock(&h->lock);
	if (!h->loaded) {
		if (fs_file_waits(&h->loc)) {
			/* wait for the running command outside the handle
			 * lock; a signal interrupts the wait */
			pthread_mutex_unlock(&h->lock);
			bool nb = (fi->flags & O_NONBLOCK) != 0;
			int w = h->loc.node == FS_N_JOBFILE
				    ? fs_job_wait(m, &h->loc, nb)
				    : fs_command_wait_idle(
					  m, h->loc.sb,
					  h->loc.node == FS_N_RUNFILE ? h->loc.seq : 0, nb);
			if (w < 0)
				return w;
			pthread_mutex_lock(&h->lock);
		}
		if (!h->loaded) {
			int rc = fs_render(m, &h->loc, &h->buf, &h->len);
			if (rc < 0) {
				pthread_mutex_unlock(&h->lock);
				return rc;
			}
			h->loaded = true;
		}
	}
	size_t n = 0;
	if (off >= 0 && (size_t)off < h->len) {
		n = h->len - (size_t)off;
		if (n > size)
			n = size;
		memcpy(buf, h->buf + off, n);
	}
	pthread_mutex_unlock(&h->lock);
	return (int)n;
}

static int fs_write(const char *path, const char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs_handle *hh = fs_handle_of(fi->fh);
	if (hh->kind == FS_HANDLE_WORKSPACE)
		return workspace_write(fi->fh, buf, size, off);
	if (hh->kind != FS_HANDLE_CONTROL)
		return -EBADF;
	return fs_file_write(fs_m(), (struct fs_ctl_handle *)hh, buf, size, off);
}

static int fs_flush(const char *path, struct fuse_file_info *fi)
{
	if (fs_handle_of(fi->fh)->kind == FS_HANDLE_WORKSPACE)
		return workspace_flush(fi->fh);
	return 0;
}

static int fs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	if (fs_handle_of(fi->fh)->kind == FS_HANDLE_WORKSPACE)
		return workspace_fsync(fi->fh, datasync);
	return 0;
}

static int fs_release(const char *path, struct fuse_file_info *fi)
{
	struct fs_handle *hh = fs_handle_of(fi->fh);
	if (hh->kind == FS_HANDLE_WORKSPACE)
		return workspace_release(fi->fh);
	if (hh->kind == FS_HANDLE_CONTROL) {
		struct fs_ctl_handle *h = (struct fs_ctl_handle *)hh;
		pthread_mutex_destroy(&h->lock);
		free(h->buf);
		free(h->wbuf);
		free(h);
	}
	return 0;
}

static int fs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	struct fs_mount *m = fs_m();
	struct fs_loc loc;
	if (!path && fi) {
		struct fs_handle *h = fs_handle_of(fi->fh);
		if (h->kind == FS_HANDLE_WORKSPACE) /* unlinked, still open */
			return workspace_truncate(NULL, NULL, size, fi->fh);
		if (h->kind == FS_HANDLE_CONTROL)
			loc = ((struct fs_ctl_handle *)h)->loc;
		else
			return -ESTALE;
	} else {
		int rc = fs_resolve(m, path, &loc);
		if (rc < 0)
			return rc;
	}
	if (loc.node == FS_N_WS) {
		struct workspace *ws = fs_ws(m, &loc);
		return ws ? workspace_truncate(ws, loc.rel, size, fi ? fi->fh : 0)
			  : -ENOENT;
	}
	/* O_TRUNC of a control file (shell redirection): env, cwd and stdin
	 * are emptied, the others keep what they have */
	if (fs_file_writable(&loc))
		return fs_file_truncate(m, &loc, size);
	return loc.node == FS_N_SBFILE || loc.node == FS_N_RUNFILE ||
		       loc.node == FS_N_MFILE || loc.node == FS_N_JOBFILE
		   ? -EACCES
		   : -EISDIR;
}

static int fs_mkdir(const char *path, mode_t mode)
{
	struct fs_mount *m = fs_m();
	const char *p = path + 1;
	if (*p && !strchr(p, '/')) {
		/* MOUNT/ID: create a sandbox with that id */
		if (!backend_sandbox_id_valid(p))
			return strcmp(p, ".sandboxfs") == 0 ? -EEXIST : -EINVAL;
		return fs_sandbox_create(m, p, NULL);
	}
	struct fs_loc loc;
	int rc = fs_resolve(m, path, &loc);
	if (rc < 0)
		return rc == -ENOENT ? -EPERM : rc;
	if (loc.node != FS_N_WS || !loc.rel[0])
		return -EEXIST;
	struct workspace *ws = fs_ws(m, &loc);
	return ws ? workspace_mkdir(ws, loc.rel, mode) : -EPERM;
}

static int fs_rmdir(const char *path)
{
	struct fs_mount *m = fs_m();
	struct fs_loc loc;
	int rc = fs_resolve(m, path, &loc);
	if (rc < 0)
		return rc;
	switch (loc.node) {
	case FS_N_SB:
		return fs_sandbox_remove(m, loc.sb->id);
	case FS_N_WS: {
		if (!loc.rel[0])
			return -EPERM;
		struct workspace *ws = fs_ws(m, &loc);
		return ws ? workspace_rmdir(ws, loc.rel) : -ENOENT;
	}
	case FS_N_MDIR:
	case FS_N_ROOT:
	case FS_N_RUNS:
	case FS_N_RUN:
	case FS_N_JOBS:
	case FS_N_JOB: /* the history keeps max_runs jobs */
		return -EPERM;
	default:
		return -ENOTDIR;
	}
}

static int fs_unlink(const char *path)
{
	struct fs_mount *m = fs_m();
	struct fs_loc loc;
	int rc = fs_resolve(m, path, &loc);
	if (rc < 0)
		return rc;
	if (loc.node == FS_N_WS && loc.rel[0]) {
		struct workspace *ws = fs_ws(m, &loc);
		return ws ? workspace_unlink(ws, loc.rel) : -ENOENT;
	}
	return -EPERM;
}

static int fs_rename(const char *from, const char *to, unsigned int flags)
{
	struct fs_mount *m = fs_m();
	struct fs_loc a, b;
	int rc = fs_resolve(m, from, &a);
	if (rc < 0)
		return rc;
	rc = fs_resolve(m, to, &b);
	if (rc < 0)
		return rc;
	if (a.node != FS_N_WS || b.node != FS_N_WS || !a.rel[0] || !b.rel[0])
		return -EPERM;
	if (a.sb != b.sb)
		return -EXDEV;
	struct workspace *ws = fs_ws(m, &a);
	return ws ? workspace_rename(ws, a.rel, b.rel, flags) : -ENOENT;
}

static int fs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	struct fs_mount *m = fs_m();
	struct fs_loc loc;
	int rc = fs_resolve(m, path, &loc);
	if (rc < 0)
		return rc;
	if (loc.node == FS_N_WS) {
		struct workspace *ws = fs_ws(m, &loc);
		return ws ? workspace_chmod(ws, loc.rel, mode) : -ENOENT;
	}
	return -EPERM;
}

static int fs_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	struct fs_mount *m = fs_m();
	struct fs_loc loc;
	int rc = fs_resolve(m, path, &loc);
	if (rc < 0)
		return rc;
	if (loc.node == FS_N_WS) {
		struct workspace *ws = fs_ws(m, &loc);
		return ws ? workspace_chown(ws, loc.rel, uid, gid) : -ENOENT;
	}
	return -EPERM;
}

static int fs_utimens(const char *path, const struct timespec tv[2],
		      struct fuse_file_info *fi)
{
	struct fs_mount *m = fs_m();
	struct fs_loc loc;
	int rc = fs_resolve(m, path, &loc);
	if (rc < 0)
		return rc;
	if (loc.node == FS_N_WS) {
		struct workspace *ws = fs_ws(m, &loc);
		return ws ? workspace_utimens(ws, loc.rel, tv) : -ENOENT;
	}
	/* touch of a control file: times are the mount's to keep */
	return fs_file_writable(&loc) ? 0 : -EPERM;
}

static int fs_symlink(const char *target, const char *path)
{
	struct fs_mount *m = fs_m();
	struct fs_loc loc;
	int rc = fs_resolve(m, path, &loc);
	if (rc < 0)
		return rc == -ENOENT ? -EPERM : rc;
	if (loc.node != FS_N_WS)
		return -EPERM;
	struct workspace *ws = fs_ws(m, &loc);
	return ws ? workspace_symlink(ws, target, loc.rel) : -EPERM;
}

static int fs_readlink(const char *path, char *buf, size_t size)
{
	struct fs_mount *m = fs_m();
	struct fs_loc loc;
	int rc = fs_resolve(m, path, &loc);
	if (rc < 0)
		return rc;
	struct workspace *ws = fs_ws(m, &loc);
	return ws && loc.rel[0] ? workspace_readlink(ws, loc.rel, buf, size) : -EINVAL;
}

static int fs_link(const char *from, const char *to)
{
	struct fs_mount *m = fs_m();
	struct fs_loc a, b;
	int rc = fs_resolve(m, from, &a);
	if (rc < 0)
		return rc;
	rc = fs_resolve(m, to, &b);
	if (rc < 0)
		return rc == -ENOENT ? -EPERM : rc;
	if (a.node != FS_N_WS || b.node != FS_N_WS)
		return -EPERM;
	if (a.sb != b.sb)
		return -EXDEV;
	struct workspace *ws = fs_ws(m, &a);
	return ws ? workspace_link(ws, a.rel, b.rel) : -EPERM;
}

static int fs_statfs(const char *path, struct statvfs *st)
{
	struct fs_mount *m = fs_m();
	struct fs_loc loc;
	if (path && fs_resolve(m, path, &loc) == 0 && loc.node == FS_N_WS) {
		struct workspace *ws = fs_ws(m, &loc);
		if (ws)
			return workspace_statfs(ws, st);
	}
	/* Elsewhere too, the local filesystem that holds the state and the
	 * cache (where written data lands first): `df MOUNT` is then the same
	 * as `df MOUNT/ID/workspace`, never all zeros. */
	memset(st, 0, sizeof(*st));
	if (statvfs(m->state_dir, st) < 0) {
		memset(st, 0, sizeof(*st));
		st->f_bsize = 4096;
		st->f_frsize = 4096;
	}
	st->f_namemax = 255;
	return 0;
}

static off_t fs_lseek(const char *path, off_t off, int whence, struct fuse_file_info *fi)
{
	if (fs_handle_of(fi->fh)->kind == FS_HANDLE_WORKSPACE)
		return workspace_lseek(fi->fh, off, whence);
	if (whence == SEEK_SET)
		return off;
	return -EINVAL;
}

/* The extended attributes of path, as fs_xattrs gives them. */
static int fs_path_xattrs(const char *path, char **buf, size_t *len)
{
	struct fs_mount *m = fs_m();
	struct fs_loc loc;
	int rc = fs_resolve(m, path, &loc);
	return rc < 0 ? rc : fs_xattrs(m, &loc, buf, len);
}

/* Steps through fs_xattrs' "name\0value\0..." list from offset *i. */
static bool fs_xattr_next(const char *buf, size_t len, size_t *i, const char **k,
			  const char **v)
{
	if (*i >= len)
		return false;
	*k = buf + *i;
	*v = *k + strlen(*k) + 1;
	*i = (size_t)(*v + strlen(*v) + 1 - buf);
	return true;
}

static int fs_getxattr(const char *path, const char *name, char *value, size_t size)
{
	/* user.* only: the adapter answers the rest ENOTSUP (fuse/xattr.c) */
	char *buf;
	size_t len;
	int rc = fs_path_xattrs(path, &buf, &len);
	if (rc < 0)
		return rc;
	rc = -ENODATA;
	const char *k, *v;
	for (size_t i = 0; fs_xattr_next(buf, len, &i, &k, &v);) {
		if (strcmp(k, name) != 0)
			continue;
		size_t vl = strlen(v);
		if (size == 0) {
			rc = (int)vl;
		} else if (size < vl) {
			rc = -ERANGE;
		} else {
			memcpy(value, v, vl); /* xattr values carry no NUL */
			rc = (int)vl;
		}
		break;
	}
	free(buf);
	return rc;
}

static int fs_listxattr(const char *path, char *list, size_t size)
{
	char *buf;
	size_t len;
	int rc = fs_path_xattrs(path, &buf, &len);
	if (rc < 0)
		return rc;
	size_t need = 0;
	const char *k, *v;
	for (size_t i = 0; fs_xattr_next(buf, len, &i, &k, &v);) {
		size_t kl = strlen(k) + 1;
		if (size && need + kl <= size)
			memcpy(list + need, k, kl);
		need += kl;
	}
	free(buf);
	if (size && need > size)
		return -ERANGE;
	return (int)need;
}

static int fs_setxattr(const char *path, const char *name, const char *value, size_t size,
		       int flags)
{
	return -ENOTSUP;
}

static int fs_removexattr(const char *path, const char *name)
{
	return -ENOTSUP;
}

void fs_ops_start(struct fs_mount *m, struct fuse_conn_info *conn)
{
	conn->max_write = FS_MAX_WRITE;
	if (m->wscache) {
		int rc = wscache_start(m->wscache);
		if (rc < 0)
			fs_log("workspace cache: cannot start its thread: %s",
			       strerror(-rc));
	}
	int krc = fs_keepalive_start(m);
	if (krc < 0)
		fs_log("keepalive: cannot start its thread: %s", strerror(-krc));
}

bool fs_ops_open_may_wait(const char *path, int flags)
{
	struct fs_mount *m = fs_m();
	struct fs_loc loc;
	if ((flags & O_NONBLOCK) || (flags & O_ACCMODE) != O_RDONLY ||
	    fs_resolve(m, path, &loc) < 0 || loc.node == FS_N_WS)
		return false;
	return fs_stream_open_wait(m, &loc, false) == 1;
}

bool fs_ops_may_wait(uint64_t fh, bool write)
{
	struct fs_handle *hh = fs_handle_of(fh);
	if (hh->kind != FS_HANDLE_CONTROL)
		return false;
	struct fs_ctl_handle *h = (struct fs_ctl_handle *)hh;
	if (write)
		return fs_file_def(h->loc.file)->write_waits;
	pthread_mutex_lock(&h->lock);
	bool waits = !h->loaded && fs_file_waits(&h->loc);
	pthread_mutex_unlock(&h->lock);
	return waits;
}

const struct fuse_operations fs_ops = {
    .getattr = fs_getattr,
    .opendir = fs_opendir,
    .readdir = fs_readdir,
    .releasedir = fs_releasedir,
    .open = fs_open,
    .create = fs_create,
    .read = fs_read,
    .write = fs_write,
    .flush = fs_flush,
    .fsync = fs_fsync,
    .release = fs_release,
    .truncate = fs_truncate,
    .mkdir = fs_mkdir,
    .rmdir = fs_rmdir,
    .unlink = fs_unlink,
    .rename = fs_rename,
    .chmod = fs_chmod,
    .chown = fs_chown,
    .utimens = fs_utimens,
    .symlink = fs_symlink,
    .link = fs_link,
    .readlink = fs_readlink,
    .statfs = fs_statfs,
    .lseek = fs_lseek,
    .getxattr = fs_getxattr,
    .listxattr = fs_listxattr,
    .setxattr = fs_setxattr,
    .removexattr = fs_removexattr,
};
