/*
 * dirops.c — lookups and readdirs of one directory in parallel
 * (FUSE_PARALLEL_DIROPS), which libfuse before 3.16 asks for and never
 * tells the kernel.
 *
 * libfuse 3.14 (Debian 12) documents FUSE_CAP_PARALLEL_DIROPS as on by
 * default but leaves FUSE_PARALLEL_DIROPS out of its INIT reply (fixed
 * upstream by libfuse pull request 861), so the kernel takes a directory's
 * mutex around every LOOKUP and READDIR in it. All the sandboxes of a
 * mount live in its root: the first lookup of each waited for every other
 * one, and 500 opens of ID/ctl at once took up to 20 s on a busy machine.
 * The model is made for parallel requests (its locks are per workspace,
 * per node table and per sandbox, never per kernel directory).
 *
 * So the session's reads and writes of /dev/fuse go through
 * fuse_session_custom_io: the INIT request's offer is noted, and when the
 * kernel offered the flag, it is added to libfuse's reply. Nothing else is
 * looked at or changed; every other message passes as it is.
 */
#include "fuse_i.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* The INIT request: its unique, whether the kernel offered the flag, and
 * whether the reply carried it (then nothing more is looked at). One
 * session per process. */
static _Atomic uint64_t dirops_init_unique;
static atomic_bool dirops_offered, dirops_sent;

static ssize_t dirops_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *in = buf;
	if (n >= (ssize_t)(sizeof(*in) + sizeof(struct fuse_init_in)) &&
	    in->opcode == FUSE_INIT) {
		const struct fuse_init_in *arg = (const void *)(in + 1);
		atomic_store(&dirops_offered, (arg->flags & FUSE_PARALLEL_DIROPS) != 0);
		atomic_store(&dirops_init_unique, in->unique);
	}
	return n;
}

static ssize_t dirops_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	/* libfuse sends a reply as its header, then its argument */
	if (count >= 2 && atomic_load(&dirops_offered) && !atomic_load(&dirops_sent) &&
	    iov[0].iov_len == sizeof(struct fuse_out_header) &&
	    iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + sizeof(uint32_t)) {
		const struct fuse_out_header *out = iov[0].iov_base;
		if (out->error == 0 && out->unique != 0 &&
		    out->unique == atomic_load(&dirops_init_unique)) {
			struct fuse_init_out *arg = iov[1].iov_base;
			arg->flags |= FUSE_PARALLEL_DIROPS;
			atomic_store(&dirops_sent, true);
		}
	}
	return writev(fd, iov, count);
}

int fs_dirops_parallel(struct fuse_session *se)
{
	static const struct fuse_custom_io io = {
	    .read = dirops_read,
	    .writev = dirops_writev,
	};
	int fd = fuse_session_fd(se);
	if (fd < 0)
		return -EBADF;
	int rc = fuse_session_custom_io(se, &io, fd);
	return rc < 0 ? rc : 0;
}
