/*
 * lowlevel.c — the mount served through libfuse's low-level API.
 *
 * The kernel names files by inode number; the model (ops.c) by path. This
 * keeps the table between the two, as the kernel sees it: one node per
 * name the kernel was given (lookup, create, mkdir, readdirplus), with the
 * exact count of lookups it holds, freed when the kernel forgets it. A node
 * a command replaced by another type gets a new number, so the kernel
 * never sees an inode change type.
 *
 * Operations that can wait for a sandbox (a write to ctl or .sandboxfs/ctl,
 * a read of a result the running command has not written yet, mkdir and
 * rmdir of a sandbox) are answered from a thread of their own: the FUSE
 * worker that took the request goes back to the kernel at once, so a mount
 * with hundreds of running commands still answers ls and stat. The reply
 * is sent when the work ends; FUSE_INTERRUPT still ends a wait with EINTR
 * (fs_ll_interrupted). Everything else runs on the worker that got it.
 */
#include "fuse_i.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "handle.h"
#include "node_i.h"
#include "nodes_i.h"

/* The request this thread is answering, for fs_ll_interrupted. */
static __thread fuse_req_t ll_current;

static struct fs_mount *ll_m(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* --- requests ---------------------------------------------------------------*/

bool fs_ll_interrupted(void)
{
	return ll_current && fuse_req_interrupted(ll_current);
}

/* What watch_interrupt registered: a thread's own slot, which libfuse's
 * INTERRUPT handler reads from its thread while it is registered. */
struct ll_watch {
	void (*wake)(void *arg);
	void *arg;
};
static __thread struct ll_watch ll_watch_slot;

/* Called by libfuse with the request's lock held: wake must only take
 * locks the waiter does not hold while it registers (mount/command.c). */
static void ll_interrupt_wake(fuse_req_t req, void *data)
{
	(void)req;
	struct ll_watch *w = data;
	w->wake(w->arg);
}

static void ll_watch_interrupt(void (*wake)(void *arg), void *arg)
{
	if (!ll_current)
		return;
	if (!wake) {
		fuse_req_interrupt_func(ll_current, NULL, NULL);
		return;
	}
	ll_watch_slot = (struct ll_watch){.wake = wake, .arg = arg};
	fuse_req_interrupt_func(ll_current, ll_interrupt_wake, &ll_watch_slot);
}

void ll_serving(fuse_req_t req)
{
	ll_current = req;
}

double ll_timeout(fuse_req_t req)
{
	return ll_m(req)->opt.attr_timeout;
}

int ll_entry(fuse_req_t req, fuse_ino_t parent, const char *name,
	     struct fuse_entry_param *e)
{
	int err = 0;
	char *path = ll_path(parent, name, &err);
	if (!path)
		return -err;
	memset(e, 0, sizeof(*e));
	int rc = fs_ops.getattr(path, &e->attr, NULL);
	free(path);
	if (rc < 0)
		return rc;
	e->ino = ll_remember(parent, name, e->attr.st_mode);
	if (!e->ino)
		return -ENOMEM;
	e->attr.st_ino = e->ino;
	e->attr_timeout = e->entry_timeout = ll_timeout(req);
	return 0;
}

static void ll_reply_entry(fuse_req_t req, fuse_ino_t parent, const char *name, int rc)
{
	struct fuse_entry_param e;
	if (rc == 0)
		rc = ll_entry(req, parent, name, &e);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else if (fuse_reply_entry(req, &e) == -ENOENT)
		ll_forget_one(e.ino, 1); /* the caller was interrupted */
}

static void ll_init(void *userdata, struct fuse_conn_info *conn)
{
	fs_ops_start(userdata, conn);
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	ll_current = req;
	ll_reply_entry(req, parent, name, 0);
	ll_current = NULL;
}

static void ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	ll_forget_one(ino, nlookup);
	fuse_reply_none(req);
}

static void ll_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	for (size_t i = 0; i < count; i++)
		ll_forget_one(f[i].ino, f[i].nlookup);
	fuse_reply_none(req);
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int err = 0;
	char *path = ll_path(ino, NULL, &err);
	struct stat st;
	memset(&st, 0, sizeof(st));
	int rc = path || fi ? fs_ops.getattr(path, &st, fi) : -err;
	uint64_t fh;
	if (!path && !fi && err == ENOENT && ll_fh_take(ino, &fh)) {
		/* unlinked while open (fstat gives no handle): by a handle */
		struct fuse_file_info by = {.fh = fh};
		rc = fs_ops.getattr(NULL, &st, &by);
		ll_fh_put(ino);
	}
	free(path);
	/* A command turned the name into another type: the inode the kernel
	 * holds is gone (a lookup gives the name a new one); the new type
	 * would make the kernel call it bad (EIO) instead. */
	mode_t type = ll_type(ino);
	if (rc == 0 && type && type != (st.st_mode & S_IFMT))
		rc = -ESTALE;
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	st.st_ino = ino;
	fuse_reply_attr(req, &st, ll_timeout(req));
}

static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	int err = 0;
	char *path = ll_path(ino, NULL, &err);
	int rc = 0;
	ll_current = req;
	if (!path && !(fi && to_set == FUSE_SET_ATTR_SIZE)) {
		rc = -err;
		goto out;
	}
	if (to_set & FUSE_SET_ATTR_MODE)
		rc = fs_ops.chmod(path, attr->st_mode, fi);
	if (rc == 0 && (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
		rc = fs_ops.chown(path, to_set & FUSE_SET_ATTR_UID ? attr->st_uid : (uid_t)-1,
				  to_set & FUSE_SET_ATTR_GID ? attr->st_gid : (gid_t)-1, fi);
	if (rc == 0 && (to_set & FUSE_SET_ATTR_SIZE))
		rc = fs_ops.truncate(path, attr->st_size, fi);
	if (rc == 0 && (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		struct timespec tv[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_OMIT}};
		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			tv[0].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_ATIME)
			tv[0] = attr->st_atim;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			tv[1].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_MTIME)
			tv[1] = attr->st_mtim;
		rc = fs_ops.utimens(path, tv, fi);
	}
out:
	ll_current = NULL;
	free(path);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		ll_getattr(req, ino, fi);
}

/* --- what waits runs on a thread of its own ---------------------------------*/

struct ll_async {
	fuse_req_t req;
	void (*run)(struct ll_async *a);
	fuse_ino_t ino;
	char *name;
	mode_t mode;
	struct fuse_file_info fi;
	char *buf;
	size_t size;
	off_t off;
};

static void ll_async_free(struct ll_async *a)
{
	free(a->name);
	free(a->buf);
	free(a);
}

static void *ll_async_main(void *arg)
{
	struct ll_async *a = arg;
	struct fs_mount *m = ll_m(a->req);
	ll_current = a->req;
	a->run(a);
	ll_current = NULL;
	ll_async_free(a);
	/* Nobody joins this thread: the unmount waits for ll_waiters, then
	 * frees the backend, which the thread's exit would still use. */
	backend_thread_done(m->backend);
	atomic_fetch_sub(&m->ll_waiters, 1);
	return NULL;
}

/* Runs a->run on a detached thread, or here when none can be started. */
static void ll_async_start(struct ll_async *a)
{
	struct fs_mount *m = ll_m(a->req);
	pthread_attr_t attr;
	pthread_t t;
	atomic_fetch_add(&m->ll_waiters, 1);
	if (pthread_attr_init(&attr) == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		int rc = pthread_create(&t, &attr, ll_async_main, a);
		pthread_attr_destroy(&attr);
		if (rc == 0)
			return;
	}
	ll_async_main(a);
}

/* Runs a->run on a thread of its own when it may wait, else here. */
static void ll_async_run(struct ll_async *a, bool may_wait)
{
	if (may_wait) {
		ll_async_start(a);
		return;
	}
	ll_current = a->req;
	a->run(a);
	ll_current = NULL;
	ll_async_free(a);
}

static struct ll_async *ll_async_new(fuse_req_t req, void (*run)(struct ll_async *),
				     fuse_ino_t ino, const char *name)
{
	struct ll_async *a = calloc(1, sizeof(*a));
	if (!a || (name && !(a->name = strdup(name)))) {
		free(a);
		return NULL;
	}
	a->req = req;
	a->run = run;
	a->ino = ino;
	return a;
}

/* --- directories -------------------------------------------------------------*/

static void ll_do_mkdir(struct ll_async *a)
{
	int err = 0;
	char *path = ll_path(a->ino, a->name, &err);
	int rc = path ? fs_ops.mkdir(path, a->mode) : -err;
	free(path);
	if (fs_ll_reply_gate(a->req)) {
		ll_reply_entry(a->req, a->ino, a->name, rc);
		fs_ll_gate_leave();
	}
}

static void ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct ll_async *a = ll_async_new(req, ll_do_mkdir, parent, name);
	if (!a) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	a->mode = mode;
	ll_async_run(a, parent == FUSE_ROOT_ID); /* a create may take seconds */
}

/* unlink (mode 0) or rmdir (S_IFDIR). */
static void ll_do_remove(struct ll_async *a)
{
	int err = 0;
	char *path = ll_path(a->ino, a->name, &err);
	int rc = !path ? -err : a->mode ? fs_ops.rmdir(path) : fs_ops.unlink(path);
	free(path);
	if (rc == 0)
		ll_removed(a->ino, a->name);
	if (fs_ll_reply_gate(a->req)) {
		fuse_reply_err(a->req, rc < 0 ? -rc : 0);
		fs_ll_gate_leave();
	}
}

static void ll_remove(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t dir)
{
	struct ll_async *a = ll_async_new(req, ll_do_remove, parent, name);
	if (!a) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	a->mode = dir;
	ll_async_run(a, dir && parent == FUSE_ROOT_ID); /* a delete may take seconds */
}

static void ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	ll_remove(req, parent, name, S_IFDIR);
}

static void ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	ll_remove(req, parent, name, 0);
}

static void ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	int err = 0;
	char *from = ll_path(parent, name, &err);
	char *to = from ? ll_path(newparent, newname, &err) : NULL;
	ll_current = req;
	int rc = from && to ? fs_ops.rename(from, to, flags) : -err;
	ll_current = NULL;
	free(from);
	free(to);
	if (rc == 0)
		ll_moved(parent, name, newparent, newname);
	fuse_reply_err(req, rc < 0 ? -rc : 0);
}

static void ll_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	int err = 0;
	char *path = ll_path(parent, name, &err);
	ll_current = req;
	int rc = path ? fs_ops.symlink(link, path) : -err;
	ll_current = NULL;
	free(path);
	ll_reply_entry(req, parent, name, rc);
}

static void ll_readlink(fuse_req_t req, fuse_ino_t ino)
{
	int err = 0;
	char *path = ll_path(ino, NULL, &err);
	char buf[PATH_MAX + 1];
	int rc = path ? fs_ops.readlink(path, buf, sizeof(buf)) : -err;
	free(path);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_readlink(req, buf);
}

static void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	int err = 0;
	char *from = ll_path(ino, NULL, &err);
	char *to = from ? ll_path(newparent, newname, &err) : NULL;
	int rc = from && to ? fs_ops.link(from, to) : -err;
	free(from);
	free(to);
	ll_reply_entry(req, newparent, newname, rc);
}

/* --- files ---------------------------------------------------------------------*/

/* a->name is the path, or NULL with a->mode the errno of finding it */
static void ll_do_open(struct ll_async *a)
{
	int rc = a->name ? fs_ops.open(a->name, &a->fi) : -(int)a->mode;
	if (!fs_ll_reply_gate(a->req)) { /* unmounting: nobody gets it */
		if (rc == 0)
			fs_ops.release(NULL, &a->fi);
		return;
	}
	if (rc < 0) {
		fuse_reply_err(a->req, -rc);
	} else {
		ll_opened(a->ino, a->fi.fh);
		if (fuse_reply_open(a->req, &a->fi) == -ENOENT) {
			ll_closing(a->ino, a->fi.fh);
			fs_ops.release(NULL, &a->fi); /* the caller was interrupted */
		}
	}
	fs_ll_gate_leave();
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ll_async *a = ll_async_new(req, ll_do_open, ino, NULL);
	if (!a) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int err = 0;
	a->name = ll_path(ino, NULL, &err);
	a->mode = (mode_t)err;
	a->fi = *fi;
	/* the open of a running command's output may wait for its first byte */
	ll_async_run(a, a->name && fs_ops_open_may_wait(a->name, fi->flags));
}

static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	int err = 0;
	char *path = ll_path(parent, name, &err);
	ll_current = req;
	int rc = path ? fs_ops.create(path, mode, fi) : -err;
	ll_current = NULL;
	free(path);
	struct fuse_entry_param e;
	if (rc == 0) {
		rc = ll_entry(req, parent, name, &e);
		if (rc < 0)
			fs_ops.release(NULL, fi);
	}
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	ll_opened(e.ino, fi->fh);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		ll_closing(e.ino, fi->fh);
		fs_ops.release(NULL, fi);
		ll_forget_one(e.ino, 1);
	}
}

static void ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	(void)rdev;
	if (!S_ISREG(mode)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	/* a plain file: created and closed, as mknod(2) asks */
	int err = 0;
	char *path = ll_path(parent, name, &err);
	struct fuse_file_info fi = {.flags = O_CREAT | O_EXCL | O_WRONLY};
	ll_current = req;
	int rc = path ? fs_ops.create(path, mode, &fi) : -err;
	if (rc == 0) {
		fs_ops.flush(path, &fi);
		fs_ops.release(path, &fi);
	}
	ll_current = NULL;
	free(path);
	ll_reply_entry(req, parent, name, rc);
}

static void ll_do_read(struct ll_async *a)
{
	char *buf = malloc(a->size ? a->size : 1);
	int rc = buf ? fs_ops.read(NULL, buf, a->size, a->off, &a->fi) : -ENOMEM;
	if (fs_ll_reply_gate(a->req)) {
		if (rc < 0)
			fuse_reply_err(a->req, -rc);
		else
			fuse_reply_buf(a->req, buf, (size_t)rc);
		fs_ll_gate_leave();
	}
	free(buf);
}

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct ll_async a = {.req = req, .fi = *fi, .size = size, .off = off};
	if (fs_ops_may_wait(fi->fh, false)) {
		struct ll_async *p = ll_async_new(req, ll_do_read, ino, NULL);
		if (p) {
			p->fi = *fi;
			p->size = size;
			p->off = off;
			ll_async_start(p);
			return;
		}
	}
	ll_current = req;
	ll_do_read(&a);
	ll_current = NULL;
}

static void ll_do_write(struct ll_async *a)
{
	int rc = fs_ops.write(NULL, a->buf, a->size, a->off, &a->fi);
	if (fs_ll_reply_gate(a->req)) {
		if (rc < 0)
			fuse_reply_err(a->req, -rc);
		else
			fuse_reply_write(a->req, (size_t)rc);
		fs_ll_gate_leave();
	}
}

static void ll_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	if (fs_ops_may_wait(fi->fh, true)) {
		/* the bytes belong to the request: the thread gets a copy */
		struct ll_async *p = ll_async_new(req, ll_do_write, ino, NULL);
		if (p && (p->buf = malloc(size + 1))) {
			/* NUL-terminated, as libfuse's own buffer reads past the
			 * bytes (the model parses commands as strings) */
			memcpy(p->buf, buf, size);
			p->buf[size] = '\0';
			p->fi = *fi;
			p->size = size;
			p->off = off;
			ll_async_start(p);
			return;
		}
		if (p)
			ll_async_free(p);
	}
	struct ll_async a = {.req = req, .fi = *fi, .buf = (char *)buf, .size = size, .off = off};
	ll_current = req;
	ll_do_write(&a);
	ll_current = NULL;
}

static void ll_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	ll_current = req;
	int rc = fs_ops.flush(NULL, fi);
	ll_current = NULL;
	fuse_reply_err(req, rc < 0 ? -rc : 0);
}

static void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	ll_closing(ino, fi->fh);
	fs_ops.release(NULL, fi);
	fuse_reply_err(req, 0);
}

static void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	ll_current = req;
	int rc = fs_ops.fsync(NULL, datasync, fi);
	ll_current = NULL;
	fuse_reply_err(req, rc < 0 ? -rc : 0);
}

static void ll_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	off_t rc = fs_ops.lseek(NULL, off, whence, fi);
	if (rc < 0)
		fuse_reply_err(req, (int)-rc);
	else
		fuse_reply_lseek(req, rc);
}

static void ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	int err = 0;
	char *path = ll_path(ino, NULL, &err);
	struct statvfs st;
	int rc = fs_ops.statfs(path ? path : "/", &st);
	free(path);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_statfs(req, &st);
}

const struct fuse_lowlevel_ops fs_ll_ops = {
    .init = ll_init,
    .lookup = ll_lookup,
    .forget = ll_forget,
    .forget_multi = ll_forget_multi,
    .getattr = ll_getattr,
    .setattr = ll_setattr,
    .mknod = ll_mknod,
    .mkdir = ll_mkdir,
    .unlink = ll_unlink,
    .rmdir = ll_rmdir,
    .symlink = ll_symlink,
    .readlink = ll_readlink,
    .rename = ll_rename,
    .link = ll_link,
    .open = ll_open,
    .read = ll_read,
    .write = ll_write,
    .flush = ll_flush,
    .release = ll_release,
    .fsync = ll_fsync,
    .opendir = ll_opendir,
    .readdir = ll_readdir,
    .readdirplus = ll_readdirplus,
    .releasedir = ll_releasedir,
    .statfs = ll_statfs,
    .setxattr = ll_setxattr,
    .getxattr = ll_getxattr,
    .listxattr = ll_listxattr,
    .removexattr = ll_removexattr,
    .create = ll_create,
    .lseek = ll_lseek,
};

static bool ll_exited(struct fs_mount *m)
{
	return fs_session(m) && fuse_session_exited(fs_session(m)) != 0;
}

const struct fs_kernel_ops fs_kernel_fuse = {
    .interrupted = fs_ll_interrupted,
    .watch_interrupt = ll_watch_interrupt,
    .exited = ll_exited,
    .invalidate_path = fs_ll_invalidate_path,
    .invalidate_tree = fs_ll_invalidate_tree,
};
