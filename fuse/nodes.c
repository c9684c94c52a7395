/*
 * nodes.c — the node table of the low-level adapter (nodes_i.h): one node
 * per name the kernel was given, with the exact count of lookups it holds.
 */
#include "nodes_i.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/htab.h"
#include "common/strjoin.h"

/* --- the node table --------------------------------------------------------*/

struct ll_node {
	struct hlink by_ino;  /* key: ino_key */
	struct hlink by_name; /* key: name_key; in the table while named */
	fuse_ino_t ino;
	struct ll_node *parent; /* NULL: the root, or unnamed */
	char *name;		/* NULL once unlinked, removed or replaced */
	char *name_key;		/* "<parent ino>/<name>" */
	uint64_t nlookup;	/* what the kernel holds */
	unsigned children;	/* named nodes whose parent this is */
	struct ll_node *kids;	/* those nodes, through next_kid/prev_kid */
	struct ll_node *next_kid, *prev_kid;
	mode_t type;		/* S_IFMT of what the kernel was told */
	char ino_key[24];
	/* The handles open on it: once its name is gone (unlinked while
	 * open), its attributes are read through one of them. fh_users:
	 * getattrs using one now (a release waits for them). */
	uint64_t *fhs;
	unsigned nfh, capfh, fh_users;
};

static struct {
	pthread_mutex_t lock;
	struct htab by_ino, by_name;
	fuse_ino_t next_ino;
	struct ll_node root;
	bool ready;
	bool debug; /* -d: each request's path too (libfuse prints numbers) */
} ll = {.lock = PTHREAD_MUTEX_INITIALIZER};
static pthread_cond_t ll_fh_cond = PTHREAD_COND_INITIALIZER; /* fh_users fell */

static int ll_table_init(void)
{
	if (ll.ready)
		return 0;
	if (htab_init(&ll.by_ino, 1024) < 0 || htab_init(&ll.by_name, 1024) < 0)
		return -ENOMEM;
	ll.root.ino = FUSE_ROOT_ID;
	ll.root.type = S_IFDIR;
	ll.root.nlookup = 1; /* never forgotten */
	snprintf(ll.root.ino_key, sizeof(ll.root.ino_key), "%" PRIx64,
		 (uint64_t)FUSE_ROOT_ID);
	ll.root.by_ino.key = ll.root.ino_key;
	htab_add(&ll.by_ino, &ll.root.by_ino);
	ll.next_ino = FUSE_ROOT_ID + 1;
	ll.ready = true;
	return 0;
}

/* v in lowercase hex as "%" PRIx64 prints it, at out (17 bytes or more).
 * By hand: every request and every listed name formats one,
 * and the printf family showed in the profile of a tree walk. */
static void ll_hex(char *out, uint64_t v)
{
	char tmp[16];
	size_t n = 0;
	do {
		tmp[n++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	for (size_t i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	out[n] = '\0';
}

/* ll.lock held. */
static struct ll_node *ll_node_of(fuse_ino_t ino)
{
	char key[24];
	ll_hex(key, (uint64_t)ino);
	struct hlink *l = htab_find(&ll.by_ino, key);
	return l ? htab_entry(l, struct ll_node, by_ino) : NULL;
}

mode_t ll_type(fuse_ino_t ino)
{
	pthread_mutex_lock(&ll.lock);
	struct ll_node *n = ll_node_of(ino);
	mode_t type = n ? n->type : 0;
	pthread_mutex_unlock(&ll.lock);
	return type;
}

/* "PARENT/name" (PARENT in hex) into buf of size cap, or a new string
 * when it does not fit (buf NULL: always new); NULL when out of memory. */
static char *ll_name_key_in(char *buf, size_t cap, fuse_ino_t parent, const char *name)
{
	char hex[24];
	ll_hex(hex, (uint64_t)parent);
	return common_join(buf, cap, hex, '/', name);
}

static char *ll_name_key(fuse_ino_t parent, const char *name)
{
	return ll_name_key_in(NULL, 0, parent, name);
}

/* The named child of parent, or NULL. ll.lock held. */
static struct ll_node *ll_child(fuse_ino_t parent, const char *name)
{
	char buf[256];
	char *k = ll_name_key_in(buf, sizeof(buf), parent, name);
	if (!k)
		return NULL;
	struct hlink *l = htab_find(&ll.by_name, k);
	if (k != buf)
		free(k);
	return l ? htab_entry(l, struct ll_node, by_name) : NULL;
}

static void ll_maybe_free(struct ll_node *n);

/* Takes the node's name away (unlinked, removed, replaced): the kernel may
 * still hold its number, the model no longer knows it. ll.lock held. */
static void ll_unname(struct ll_node *n)
{
	if (!n->name)
		return;
	htab_del(&ll.by_name, &n->by_name);
	if (n->prev_kid)
		n->prev_kid->next_kid = n->next_kid;
	else if (n->parent)
		n->parent->kids = n->next_kid;
	if (n->next_kid)
		n->next_kid->prev_kid = n->prev_kid;
	n->next_kid = n->prev_kid = NULL;
	free(n->name);
	free(n->name_key);
	n->name = n->name_key = NULL;
	struct ll_node *p = n->parent;
	n->parent = NULL;
	if (p) {
		p->children--;
		ll_maybe_free(p);
	}
	ll_maybe_free(n);
}

/* Frees a node the kernel forgot and that no named child needs for its
 * path. ll.lock held. */
static void ll_maybe_free(struct ll_node *n)
{
	if (n == &ll.root || n->nlookup > 0 || n->children > 0 || n->nfh > 0 ||
	    n->fh_users > 0)
		return;
	if (n->name) {
		ll_unname(n); /* comes back here unnamed */
		return;
	}
	htab_del(&ll.by_ino, &n->by_ino);
	free(n->fhs);
	free(n);
}

/* Gives parent/name to n. ll.lock held; 0 or -ENOMEM. */
static int ll_name(struct ll_node *n, struct ll_node *parent, const char *name)
{
	char *nm = strdup(name);
	char *k = ll_name_key(parent->ino, name);
	if (!nm || !k) {
		free(nm);
		free(k);
		return -ENOMEM;
	}
	n->name = nm;
	n->name_key = k;
	n->by_name.key = k;
	n->parent = parent;
	parent->children++;
	n->prev_kid = NULL;
	n->next_kid = parent->kids;
	if (parent->kids)
		parent->kids->prev_kid = n;
	parent->kids = n;
	htab_add(&ll.by_name, &n->by_name);
	return 0;
}

/* The node the kernel is told about for parent/name with type st_mode, one
 * more lookup counted; a name whose type changed gets a fresh number.
 * Returns its number, or 0 when out of memory. */
fuse_ino_t ll_remember(fuse_ino_t parent_ino, const char *name, mode_t st_mode)
{
	fuse_ino_t ino = 0;
	pthread_mutex_lock(&ll.lock);
	struct ll_node *parent = ll_node_of(parent_ino);
	if (!parent || (!parent->name && parent != &ll.root))
		goto out;
	struct ll_node *n = ll_child(parent_ino, name);
	if (n && n->type != (st_mode & S_IFMT)) {
		ll_unname(n);
		n = NULL;
	}
	if (!n) {
		n = calloc(1, sizeof(*n));
		if (!n)
			goto out;
		n->ino = ll.next_ino++;
		n->type = st_mode & S_IFMT;
		ll_hex(n->ino_key, (uint64_t)n->ino);
		n->by_ino.key = n->ino_key;
		if (ll_name(n, parent, name) < 0) {
			free(n);
			goto out;
		}
		htab_add(&ll.by_ino, &n->by_ino);
	}
	n->nlookup++;
	ino = n->ino;
out:
	pthread_mutex_unlock(&ll.lock);
	return ino;
}

void ll_opened(fuse_ino_t ino, uint64_t fh)
{
	pthread_mutex_lock(&ll.lock);
	struct ll_node *n = ll_node_of(ino);
	if (n && n->nfh == n->capfh) {
		unsigned cap = n->capfh ? n->capfh * 2 : 2;
		uint64_t *v = realloc(n->fhs, cap * sizeof(*v));
		if (v) {
			n->fhs = v;
			n->capfh = cap;
		}
	}
	if (n && n->nfh < n->capfh) /* else: a stat after an unlink gets ENOENT */
		n->fhs[n->nfh++] = fh;
	pthread_mutex_unlock(&ll.lock);
}

void ll_closing(fuse_ino_t ino, uint64_t fh)
{
	pthread_mutex_lock(&ll.lock);
	struct ll_node *n = ll_node_of(ino);
	for (unsigned i = 0; n && i < n->nfh; i++)
		if (n->fhs[i] == fh) {
			n->fhs[i] = n->fhs[--n->nfh];
			break;
		}
	/* a getattr may be reading through this very handle */
	while (n && n->fh_users > 0)
		pthread_cond_wait(&ll_fh_cond, &ll.lock);
	if (n && n != &ll.root)
		ll_maybe_free(n);
	pthread_mutex_unlock(&ll.lock);
}

bool ll_fh_take(fuse_ino_t ino, uint64_t *fh)
{
	pthread_mutex_lock(&ll.lock);
	struct ll_node *n = ll_node_of(ino);
	bool ok = n && n->nfh > 0;
	if (ok) {
		*fh = n->fhs[0];
		n->fh_users++;
	}
	pthread_mutex_unlock(&ll.lock);
	return ok;
}

void ll_fh_put(fuse_ino_t ino)
{
	pthread_mutex_lock(&ll.lock);
	struct ll_node *n = ll_node_of(ino);
	if (n && n->fh_users > 0 && --n->fh_users == 0) {
		pthread_cond_broadcast(&ll_fh_cond);
		if (n != &ll.root)
			ll_maybe_free(n);
	}
	pthread_mutex_unlock(&ll.lock);
}

void ll_forget_one(fuse_ino_t ino, uint64_t nlookup)
{
	pthread_mutex_lock(&ll.lock);
	struct ll_node *n = ll_node_of(ino);
	if (n && n != &ll.root) {
		n->nlookup = nlookup < n->nlookup ? n->nlookup - nlookup : 0;
		ll_maybe_free(n);
	}
	pthread_mutex_unlock(&ll.lock);
}

/* The model's path of a node ("/" for the root), malloc'ed; NULL with
 * *err set when the number is unknown (ESTALE) or the name is gone
 * (ENOENT), or out of memory. ll.lock held. */
static char *ll_path_locked(fuse_ino_t ino, const char *child, int *err)
{
	struct ll_node *n = ll_node_of(ino);
	if (!n) {
		*err = ESTALE;
		return NULL;
	}
	size_t len = child ? strlen(child) + 1 : 0;
	for (struct ll_node *p = n; p != &ll.root; p = p->parent) {
		if (!p->name) {
			*err = ENOENT;
			return NULL;
		}
		len += strlen(p->name) + 1;
	}
	char *path = malloc(len + 2);
	if (!path) {
		*err = ENOMEM;
		return NULL;
	}
	char *end = path + len + 1;
	*end = '\0';
	if (child) {
		size_t l = strlen(child);
		end -= l;
		memcpy(end, child, l);
		*--end = '/';
	}
	for (struct ll_node *p = n; p != &ll.root; p = p->parent) {
		size_t l = strlen(p->name);
		end -= l;
		memcpy(end, p->name, l);
		*--end = '/';
	}
	if (end == path + len + 1) { /* the root itself */
		path[0] = '/';
		path[1] = '\0';
		return path;
	}
	memmove(path, end, strlen(end) + 1);
	return path;
}

char *ll_path(fuse_ino_t ino, const char *child, int *err)
{
	pthread_mutex_lock(&ll.lock);
	char *p = ll_path_locked(ino, child, err);
	pthread_mutex_unlock(&ll.lock);
	if (ll.debug)
		fuse_log(FUSE_LOG_DEBUG, "   node %" PRIu64 "%s%s: %s\n", (uint64_t)ino,
			 child ? " name " : "", child ? child : "", p ? p : strerror(*err));
	return p;
}

/* A node's name changes with a rename. */
void ll_moved(fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		     const char *newname)
{
	pthread_mutex_lock(&ll.lock);
	struct ll_node *n = ll_child(parent, name);
	struct ll_node *np = ll_node_of(newparent);
	struct ll_node *old = ll_child(newparent, newname);
	if (old && old != n)
		ll_unname(old);
	if (n && np) {
		n->nlookup++; /* kept alive while it has no name */
		ll_unname(n);
		n->nlookup--;
		if (ll_name(n, np, newname) < 0)
			ll_maybe_free(n);
	}
	pthread_mutex_unlock(&ll.lock);
}

void ll_removed(fuse_ino_t parent, const char *name)
{
	pthread_mutex_lock(&ll.lock);
	struct ll_node *n = ll_child(parent, name);
	if (n)
		ll_unname(n);
	pthread_mutex_unlock(&ll.lock);
}

/* --- the kernel's caches -----------------------------------------------------*/

/* The node of a path, walked from the root by name; NULL when the kernel
 * holds nothing of it. ll.lock held. */
static struct ll_node *ll_walk(const char *path)
{
	struct ll_node *n = &ll.root;
	const char *p = path;
	while (*p == '/')
		p++;
	while (*p && n) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		char *name = strndup(p, len);
		n = name ? ll_child(n->ino, name) : NULL;
		free(name);
		p += len;
		while (*p == '/')
			p++;
	}
	return n;
}


/* FUSE_NOTIFY_INC_EPOCH (protocol 7.44, Linux 6.16): every name the kernel
 * caches is looked up again before its next use. Unlike notify_inval_entry
 * it takes no lock in the kernel, so it cannot hang a daemon killed while
 * it is sent. libfuse 3.14 has no call for it: the header is written
 * as libfuse writes its own notifications. */
#ifndef FUSE_NOTIFY_INC_EPOCH
#define FUSE_NOTIFY_INC_EPOCH 8
#endif
static atomic_int ll_epoch_works = 1; /* 0 once the kernel refused it */

static void ll_notify_epoch(struct fs_mount *m)
{
	if (!atomic_load(&ll_epoch_works))
		return;
	struct fuse_out_header h = {.len = sizeof(h), .error = FUSE_NOTIFY_INC_EPOCH};
	ssize_t w = write(fuse_session_fd(fs_session(m)), &h, sizeof(h));
	if (w == (ssize_t)sizeof(h)) {
		atomic_fetch_add(&m->n.kernel_epochs, 1);
	} else if (w < 0 && errno == EINVAL) {
		/* an older kernel: a name a command removed is found gone at
		 * its next open instead (ESTALE, fs_open) */
		atomic_store(&ll_epoch_works, 0);
		fs_log("the kernel has no name-cache epoch (Linux < 6.16): names a "
		       "command removed are found at their next open");
	}
}

static struct {
	pthread_rwlock_t lock;
	atomic_bool closed;
} ll_gate = {.lock = PTHREAD_RWLOCK_INITIALIZER};

bool fs_ll_gate_enter(void)
{
	pthread_rwlock_rdlock(&ll_gate.lock);
	if (!atomic_load(&ll_gate.closed))
		return true;
	pthread_rwlock_unlock(&ll_gate.lock);
	return false;
}

void fs_ll_gate_leave(void)
{
	pthread_rwlock_unlock(&ll_gate.lock);
}

void fs_ll_gate_close(void)
{
	/* closed first: no write starts; then the ones under way end */
	atomic_store(&ll_gate.closed, true);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts); /* the clock timedwrlock takes */
	ts.tv_sec += 2;
	if (pthread_rwlock_timedwrlock(&ll_gate.lock, &ts) == 0)
		pthread_rwlock_unlock(&ll_gate.lock);
	else
		fs_log("unmount: a notification to the kernel is still under way");
}

bool fs_ll_reply_gate(fuse_req_t req)
{
	if (fs_ll_gate_enter())
		return true;
	fuse_reply_none(req);
	return false;
}

void fs_ll_invalidate_tree(struct fs_mount *m, const char *path)
{
	if (!fs_session(m) || atomic_load(&m->stopping))
		return;
	fuse_ino_t *v = NULL;
	size_t n = 0, cap = 0;
	bool oom = false;
	pthread_mutex_lock(&ll.lock);
	struct ll_node *top = ll_walk(path);
	/* depth first through the named children, without recursion */
	for (struct ll_node *x = top; x && !oom;) {
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			fuse_ino_t *nv = realloc(v, nc * sizeof(*nv));
			if (!nv) {
				oom = true;
				break;
			}
			v = nv;
			cap = nc;
		}
		v[n++] = x->ino;
		if (x->type == S_IFDIR && x->kids) {
			x = x->kids;
			continue;
		}
		while (x && x != top && !x->next_kid)
			x = x->parent;
		x = x && x != top ? x->next_kid : NULL;
	}
	pthread_mutex_unlock(&ll.lock);
	/* Attributes and pages of each, then a new epoch for the names;
	 * never notify_inval_entry: it takes the directory's lock in the
	 * kernel, and a request that holds it waits for this daemon; killed
	 * then (kill -9), the thread in the notify never leaves it, the
	 * connection is never closed, and the mount hangs for good. */
	if (fs_ll_gate_enter()) {
		for (size_t i = 0; i < n; i++)
			fuse_lowlevel_notify_inval_inode(fs_session(m), v[i], 0, 0);
		ll_notify_epoch(m);
		fs_ll_gate_leave();
	}
	free(v);
	if (oom) /* the name cache may stay stale up to attr_timeout */
		fs_log("after a command: out of memory telling the kernel what changed");
}

void fs_ll_invalidate_path(struct fs_mount *m, const char *path)
{
	if (!fs_session(m) || atomic_load(&m->stopping))
		return;
	pthread_mutex_lock(&ll.lock);
	struct ll_node *n = ll_walk(path);
	fuse_ino_t ino = n ? n->ino : 0;
	pthread_mutex_unlock(&ll.lock);
	if (ino && fs_ll_gate_enter()) { /* else the kernel holds nothing of it */
		fuse_lowlevel_notify_inval_inode(fs_session(m), ino, 0, 0);
		fs_ll_gate_leave();
	}
}

int fs_ll_setup(bool debug)
{
	pthread_mutex_lock(&ll.lock);
	ll.debug = debug;
	int rc = ll_table_init();
	pthread_mutex_unlock(&ll.lock);
	return rc;
}

