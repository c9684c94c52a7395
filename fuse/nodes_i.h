/*
 * nodes_i.h — private to fuse/: the node table between the kernel's inode
 * numbers and the model's paths (nodes.c), used by the low-level adapter
 * (lowlevel.c), its directory handles (readdir.c) and extended attributes
 * (xattr.c).
 *
 * A node stands for one name the kernel was given (lookup, create, mkdir,
 * readdirplus) and counts the lookups the kernel holds; it is freed when
 * the kernel forgets it and no named child needs it for its path. A name a
 * command turned into another type gets a new node and number, so the
 * kernel never sees an inode change type. Numbers are never reused. One
 * mutex guards the table; it is never held across a call out of it.
 */
#ifndef SANDBOXFS_FUSE_NODES_I_H
#define SANDBOXFS_FUSE_NODES_I_H

#include "fuse_i.h"

/* The node for parent/name with type st_mode, one more lookup counted.
 * Returns its number, or 0 (out of memory, or parent unknown). */
fuse_ino_t ll_remember(fuse_ino_t parent, const char *name, mode_t st_mode);
/* The type (S_IFMT) the kernel was given for ino; 0 when unknown. */
mode_t ll_type(fuse_ino_t ino);
/* Handle fh was opened on ino (before the reply: a getattr may follow at
 * once), or is being released (after this, no ll_fh_take gives it, and
 * none taken is still in use). */
void ll_opened(fuse_ino_t ino, uint64_t fh);
void ll_closing(fuse_ino_t ino, uint64_t fh);
/* A handle open on ino, for reading its attributes when its name is gone;
 * true with *fh set and in use until ll_fh_put. */
bool ll_fh_take(fuse_ino_t ino, uint64_t *fh);
void ll_fh_put(fuse_ino_t ino);
/* The kernel forgot nlookup lookups of ino. */
void ll_forget_one(fuse_ino_t ino, uint64_t nlookup);
/* The model's path of ino ("/" for the root), with "/child" appended when
 * child is given; malloc'ed. NULL with *err set: ESTALE (unknown number),
 * ENOENT (its name is gone), ENOMEM. */
char *ll_path(fuse_ino_t ino, const char *child, int *err);
/* parent/name was renamed to newparent/newname (replacing any node there). */
void ll_moved(fuse_ino_t parent, const char *name, fuse_ino_t newparent,
	      const char *newname);
/* parent/name was removed; its node keeps its number while the kernel
 * holds it. */
void ll_removed(fuse_ino_t parent, const char *name);

/* --- the adapter's request helpers (lowlevel.c) ------------------------------*/
/* The request the calling thread answers now (NULL: none), for
 * fs_ll_interrupted. */
void ll_serving(fuse_req_t req);
/* The kernel's attribute and entry timeout (attr_timeout). */
double ll_timeout(fuse_req_t req);
/* Answers a lookup of parent/name from the model's attributes, one lookup
 * counted in the node table: 0 and *e, or -errno. */
int ll_entry(fuse_req_t req, fuse_ino_t parent, const char *name,
	     struct fuse_entry_param *e);

/* --- directory handles (readdir.c), in fs_ll_ops -----------------------------*/
void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi);
void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi);
void ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

/* --- extended attributes (xattr.c), in fs_ll_ops -----------------------------*/
void ll_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void ll_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void ll_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		 size_t size, int flags);
void ll_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

#endif
