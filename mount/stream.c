/*
 * stream.c — stdout and stderr readable while a command runs, and kept
 * whole past the contract's 1 MiB (DESIGN.md §2).
 *
 * /execute answers only at the end, with each stream cut at 1 MiB; /files
 * is not serialized by the seat. So a command is sent wrapped: its output
 * goes through split(1) into 1 MiB pieces named OUT/SEQ.NONCE.out.* and
 * .err.*, OUT being a hidden directory of the workspace root
 * (.sandboxfs-out, made by the first run and kept, hidden by
 * vfs/listing.c), which a poller here lists and fetches twice a second,
 * from the first read of the output while the run lasts, into a spool
 * file per stream (piece k at offset k MiB, so the growing last piece is
 * fetched again in place: a byte of output crosses the wire about once).
 * Readers read the spool; a read at its end waits for more or for the end.
 *
 * At the end, a run whose pieces fit the contract's answer (one piece a
 * stream) is printed back whole by the wrapper and its pieces removed:
 * /execute carries it and no more requests are made. A run with no output
 * leaves nothing to remove, and the workspace root is not touched: each
 * process start counts (2-10 ms of CPU: tests/bench/RESULTS.md), so
 * a quiet command costs the command, two splits and the change list's
 * find. A longer one moves its pieces into a directory of their own,
 * OUT/SEQ.NONCE, and prints a marker instead; the mount fetches what it
 * has not, keeps the spool as the run's output, and deletes the directory
 * with one request. A wrapper killed by the timeout or a signal (exit 124,
 * 128+N) leaves its pieces where they are: the mount looks in both places
 * then, and deletes them one by one. Where OUT cannot be made (or split is
 * missing) the command runs plainly. The exit code is the user's
 * command's own: it runs in a subshell whose status the wrapper reads back
 * from OUT/rc (one run at a time holds a sandbox's seat).
 */
#include "node_i.h"
#include "spool_i.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/files.h"
#include "common/thread.h"

#define FS_POLL_MS 500
#define FS_MARKER "sandboxfs-stream "
#define FS_CHANGED "sandboxfs-changed "
/* Output pieces and the status file, kept between runs so that a run
 * makes no directory (and changes nothing in the workspace root, which
 * the change list would then report). */
#define FS_OUT_DIR ".sandboxfs-out"
#define FS_RC	   FS_OUT_DIR "/rc"
/* What the command changed, listed by its own shell after it ran (for
 * workspace_note_changes): what find sees changed since a mark. A symbolic
 * link's line is followed by a line of its target (readlink), as long as
 * the link's size says.
 *
 * Two marks take turns. Before each list the older one is made anew (N),
 * and find lists what changed since the other (R), which was made anew
 * before the previous list: so what changed while that list ran, or
 * between two commands (another client's PUT), is listed by the next one.
 * A file timestamp comes from a clock that may tick every few ms (before
 * Linux 6.13), and a change in the same tick as N would be as old as N to
 * the next find: so after making N the wrapper waits, a bounded number of
 * turns, until a file it truncates is newer than N (at once where the
 * kernel gives fine-grained times); if it never is, N says "u" and the
 * next list is not whole. A mark that is missing (the first command, or a
 * command removed it) is dated 2000: that list has everything. The marks
 * are this mount's own (fs_mark_id): another mount of the same sandbox
 * turns its own, so what its commands changed is still listed here.
 *
 * GNU find compares the change time (-cnewer), so a chmod or a touch into
 * the past is listed too. BusyBox's find (a link to busybox, noted in the
 * marks as "b") has -newer only, in whole seconds: there N is dated one
 * second back, what changed in that second is listed again, harmlessly,
 * and no list is whole (a file rewritten with an old time is not listed:
 * the mount forgets all it holds of the workspace after each command).
 * Only a GNU list without "u" ends with WS_CHANGES_END. The wrapper's
 * first line names the marks: $__sfs_ma and $__sfs_mb. */
#define FS_MARK ".sandboxfs-mark."
#define FS_TICK ".sandboxfs-tick"
#define FS_TICK_TURNS "200"
#define FS_MARK_TURN                                                                     \
	"{ [ -f $__sfs_ma ] && [ -f $__sfs_mb ]; } || { __sfs_k=; "                             \
	"[ -L \"$(command -v find)\" ] && __sfs_k=b; echo $__sfs_k >$__sfs_ma; "                \
	"echo $__sfs_k >$__sfs_mb; touch -t 200001010000 $__sfs_ma $__sfs_mb; } 2>/dev/null\n"    \
	"if [ $__sfs_ma -nt $__sfs_mb ]; then __sfs_r=$__sfs_ma __sfs_m=$__sfs_mb; "               \
	"else __sfs_r=$__sfs_mb __sfs_m=$__sfs_ma; fi\n"                                          \
	"read __sfs_k <$__sfs_r 2>/dev/null || __sfs_k=\n"                                       \
	"if [ \"$__sfs_k\" = b ]; then __sfs_n=-newer; echo b >$__sfs_m; "                        \
	"touch -d \"@$(($(date +%s)-1))\" $__sfs_m; else __sfs_n=-cnewer; : >$__sfs_m; "         \
	"__sfs_i=0; : >" FS_TICK "; until [ " FS_TICK " -nt $__sfs_m ]; do "                    \
	"[ $__sfs_i -lt " FS_TICK_TURNS " ] || { echo u >$__sfs_m; break; }; : >" FS_TICK "; "  \
	"__sfs_i=$((__sfs_i+1)); done; fi 2>/dev/null\n"
/* Without parentheses: BusyBox's find never runs an "-exec {} +" inside
 * "\( \)" (tests/mount/test_busybox.py). */
#define FS_FIND                                                                          \
	"find . -name '.sandboxfs-*' -prune -o $__sfs_n \"$__sfs_r\" -type l -exec sh -c "   \
	"'for f; do stat -c \"%f %Y %s %n\" \"$f\" && { readlink -n -- \"$f\"; echo; }; "   \
	"done' sh {} + -o $__sfs_n \"$__sfs_r\" ! -type l -exec stat -c '%f %Y %s %n' {} + " \
	"2>/dev/null"
/* The list (after FS_MARK_TURN), then a last line when find ran to the end
 * (and exited 0) and the list can be trusted whole: only a list that says
 * so lets the mount forget less than all it holds of the workspace
 * (struct ws_changes). */
#define FS_LIST                                                                          \
	"{ " FS_FIND " && [ -z \"$__sfs_k\" ] && echo " WS_CHANGES_END "; }"


struct fs_stream {
	struct fs_mount *m;
	struct fs_sandbox *sb;
	char *id, *url;
	uint64_t seq;
	char dir[64];	 /* OUT/SEQ.NONCE: the pieces' prefix; a long run's directory */
	char prefix[48]; /* SEQ.NONCE.: the pieces' names start with it */
	struct fs_spool s[2]; /* stdout, stderr */
	pthread_t poller;
	/* guarded by m->lock: the request left, the poller runs, the run
	 * ended (no poller starts then) */
	bool sent, poller_started, finished;
	pthread_mutex_t lock; /* the poller's stop flag and passes */
	pthread_cond_t cv;
	bool stop;
	int refs; /* the run's, and readers' (guarded by m->lock) */
	bool plain; /* -o stream=no: no pieces, only the change list */
	struct ws_changes chg; /* the change list's summary (fs_stream_finish) */
	bool chg_known;
};

static void fs_stream_free(struct fs_stream *s);

/* This mount's marks' name: a hash of the host's name and the state
 * directory, so that two mounts of one sandbox keep marks of their own
 * (a mount moved or renamed starts with new ones, which list everything
 * once). Made once, at the first command; copied to out (16 bytes). */
static void fs_mark_id(struct fs_mount *m, char *out)
{
	pthread_mutex_lock(&m->lock);
	if (!m->mark_id[0]) {
		char host[256] = "";
		(void)gethostname(host, sizeof(host) - 1);
		uLong c = crc32(0L, Z_NULL, 0);
		c = crc32(c, (const Bytef *)host, (uInt)strlen(host) + 1);
		if (m->state_dir)
			c = crc32(c, (const Bytef *)m->state_dir, (uInt)strlen(m->state_dir));
		snprintf(m->mark_id, sizeof(m->mark_id), "%08lx",
			 (unsigned long)c & 0xffffffffUL);
	}
	memcpy(out, m->mark_id, sizeof(m->mark_id));
	pthread_mutex_unlock(&m->lock);
}

int fs_stream_new(struct fs_mount *m, struct fs_sandbox *sb, uint64_t seq, const char *url,
		  const char *inner, size_t inner_len, char **send, struct fs_stream **out)
{
	*send = NULL;
	*out = NULL;
	struct fs_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	uint64_t nonce = 0;
	if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
		nonce = common_now_ms() ^ (uint64_t)(uintptr_t)s;
	snprintf(s->prefix, sizeof(s->prefix), "%" PRIu64 ".%016" PRIx64 ".", seq, nonce);
	snprintf(s->dir, sizeof(s->dir), FS_OUT_DIR "/%.*s", (int)strlen(s->prefix) - 1,
		 s->prefix);
	s->m = m;
	s->sb = sb;
	s->refs = 1;
	s->seq = seq;
	s->id = strdup(sb->id);
	s->url = strdup(url);
	s->s[0].fd = s->s[1].fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	common_cond_init(&s->cv);
	s->plain = !m->opt.stream_on;
	int rc = !s->id || !s->url ? -ENOMEM : 0;
	for (int i = 0; rc == 0 && !s->plain && i < 2; i++) {
		char name[128];
		snprintf(name, sizeof(name), "%s.%" PRIu64 ".%s", sb->id, seq,
			 i ? "stderr" : "stdout");
		rc = fs_spool_open(m, &s->s[i], name);
	}
	char *buf = NULL;
	size_t blen = 0;
	FILE *f = rc == 0 ? open_memstream(&buf, &blen) : NULL;
	if (rc == 0 && !f)
		rc = -ENOMEM;
	if (rc < 0) {
		fs_stream_free(s);
		return rc;
	}
	char mark_id[sizeof(m->mark_id)];
	fs_mark_id(m, mark_id);
	fprintf(f, "__sfs_d='%s' __sfs_ma=" FS_MARK "%s.a __sfs_mb=" FS_MARK "%s.b\n", s->dir,
		mark_id, mark_id);
	if (s->plain) {
	plain:
		/* the command as it is, then what it changed */
		fputs("(\n", f);
		fwrite(inner, 1, inner_len, f);
		fputs("\n); __sfs_rc=$?\n" FS_MARK_TURN
		      "printf '\\n%s\\n' \"" FS_CHANGED "$__sfs_d\"; " FS_LIST "\n"
		      "exit \"$__sfs_rc\"\n",
		      f);
		goto done;
	}
	fputs("if command -v split >/dev/null 2>&1 && { [ -d " FS_OUT_DIR " ] || mkdir " FS_OUT_DIR
	      "; } 2>/dev/null && : >" FS_RC " 2>/dev/null; then\n"
	      "{ { (\n",
	      f);
	fwrite(inner, 1, inner_len, f);
	fprintf(f, "\n); echo $? >" FS_RC "; } 2>&1 >&3 3>&- |"
		   " split -b %d -a 5 - \"$__sfs_d.err.\"; } 3>&1 |"
		   " split -b %d -a 5 - \"$__sfs_d.out.\"\n",
		FS_PIECE, FS_PIECE);
	/* $__sfs_o and $# count the pieces (an unmatched glob stays itself);
	 * rm, cat and the stat of the change list run only when needed */
	fputs("read __sfs_rc <" FS_RC " || __sfs_rc=125\n"
	      "set -- \"$__sfs_d\".out.*; [ -f \"$1\" ] || shift; __sfs_o=$#\n"
	      "set -- \"$__sfs_d\".err.*; [ -f \"$1\" ] || shift\n"
	      "if [ \"$__sfs_o\" -le 1 ] && [ $# -le 1 ]; then\n"
	      "[ \"$__sfs_o\" = 0 ] || cat \"$__sfs_d\".out.*\n"
	      "[ $# = 0 ] || cat \"$@\" >&2\n"
	      "[ \"$__sfs_o$#\" = 00 ] || rm -f \"$__sfs_d\".out.* \"$__sfs_d\".err.*\n"
	      FS_MARK_TURN
	      "printf '\\n%s\\n' \"" FS_CHANGED "$__sfs_d\"; " FS_LIST "\n"
	      "elif mkdir \"$__sfs_d\" 2>/dev/null && mv -f -- \"$__sfs_d\".* \"$__sfs_d\"/ "
	      "2>/dev/null; then " FS_MARK_TURN FS_LIST " >\"$__sfs_d/changed\"; printf '%s' \""
	      FS_MARKER "$__sfs_d\"\n"
	      "else printf '%s' \"" FS_MARKER "$__sfs_d\"; fi\n"
	      "exit \"$__sfs_rc\"\n"
	      "fi\n",
	      f);
	/* No split, or no directory: the command runs plainly, and what it
	 * changed is still listed (every mode shows it) */
	goto plain;
done:
	if (fclose(f) != 0) {
		free(buf);
		fs_stream_free(s);
		return -ENOMEM;
	}
	*send = buf;
	*out = s;
	return 0;
}

/* One pass while the run lasts, over OUT (fs_pieces_pass). */
static void fs_stream_pass(struct fs_stream *s)
{
	/* not there, or not listed: the next pass tries again */
	(void)fs_pieces_pass(s->m, s->url, FS_OUT_DIR, s->prefix, s->s, false, NULL);
}

/* Polls while the run lasts: a pass at once (someone is reading), then
 * every FS_POLL_MS. */
static void *fs_stream_main(void *arg)
{
	struct fs_stream *s = arg;
	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		pthread_mutex_unlock(&s->lock);
		fs_stream_pass(s);
		pthread_mutex_lock(&s->lock);
		struct timespec ts;
		common_deadline_in(&ts, FS_POLL_MS);
		if (!s->stop)
			pthread_cond_timedwait(&s->cv, &s->lock, &ts);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

void fs_stream_start(struct fs_stream *s)
{
	pthread_mutex_lock(&s->m->lock);
	s->sent = true;
	pthread_mutex_unlock(&s->m->lock);
}

/* Someone reads the output (or its size) while the run lasts: the poller
 * starts, once. Nobody reading costs nothing: no thread, no request.
 * m->lock held. */
static void fs_stream_want(struct fs_stream *s)
{
	if (s->plain || !s->sent || s->finished || s->poller_started)
		return;
	s->poller_started = common_thread_start(&s->poller, fs_stream_main, s) == 0;
}

static void fs_stream_stop(struct fs_stream *s)
{
	pthread_mutex_lock(&s->m->lock);
	s->finished = true; /* no poller starts after this */
	bool started = s->poller_started;
	pthread_mutex_unlock(&s->m->lock);
	if (!started)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->poller, NULL);
	pthread_mutex_lock(&s->m->lock);
	s->poller_started = false;
	pthread_mutex_unlock(&s->m->lock);
}

/* Copies a spool file into the run's output as fs_output_store would keep
 * it: its bytes are read back in pieces for the checksum. */
static int fs_spool_output(struct fs_stream *s, int i, char **data, size_t *len)
{
	struct fs_spool *sp = &s->s[i];
	pthread_mutex_lock(&s->m->lock);
	uint64_t have = sp->have;
	pthread_mutex_unlock(&s->m->lock);
	char *b = malloc(have + 1);
	if (!b)
		return -ENOMEM;
	size_t done = 0;
	while (done < have) {
		ssize_t r = pread(sp->fd, b + done, have - done, (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			free(b);
			return r < 0 ? -errno : -EIO;
		}
		done += (size_t)r;
	}
	b[have] = '\0';
	*data = b;
	*len = have;
	return 0;
}

static void fs_stream_apply(struct fs_stream *s, const char *list, size_t len)
{
	struct workspace *ws = fs_sandbox_workspace(s->m, s->sb);
	if (ws) {
		(void)workspace_note_changes(ws, list, len, &s->chg);
		s->chg_known = s->chg.whole;
	}
}

const struct ws_changes *fs_stream_changes(const struct fs_stream *s)
{
	return s && s->chg_known ? &s->chg : NULL;
}

/* Output that fit the answer: its stdout ends with the change list after
 * a line of its own; the list goes to the workspace, the rest is the
 * command's stdout. Only the list can have been cut by the contract's
 * 1 MiB (each stream was one piece, under it). */
static void fs_stream_answer_changes(struct fs_stream *s, struct backend_exec_result *res)
{
	char sep[128];
	int n = snprintf(sep, sizeof(sep), "\n" FS_CHANGED "%s\n", s->dir);
	if (!res->out || n <= 0 || (size_t)n >= sizeof(sep))
		return;
	char *at = NULL;
	for (char *p = memmem(res->out, res->out_len, sep, (size_t)n); p;
	     p = memmem(p + 1, res->out_len - (size_t)(p + 1 - res->out), sep, (size_t)n))
		at = p;
	if (!at)
		return;
	size_t keep = (size_t)(at - res->out);
	bool cut = res->truncated; /* the list may end early at a whole line */
	fs_stream_apply(s, at + n, res->out_len - keep - (size_t)n);
	if (cut)
		s->chg_known = false;
	res->out_len = keep;
	res->out[keep] = '\0';
	res->truncated = false;
}

/* A run whose output stayed in the directory: its change list too. */
static void fs_stream_file_changes(struct fs_stream *s)
{
	FILE *f = tmpfile();
	if (!f)
		return;
	char path[128];
	snprintf(path, sizeof(path), "%s/changed", s->dir);
	struct backend_error err;
	uint64_t got = 0;
	if (backend_file_get(s->m->backend, s->url, path, fileno(f), &got, &err) == BACKEND_OK &&
	    got > 0 && got < (64u << 20)) {
		char *b = malloc(got);
		if (b && pread(fileno(f), b, got, 0) == (ssize_t)got)
			fs_stream_apply(s, b, got);
		free(b);
	}
	fclose(f);
}

/* The rest of a run's pieces, at its end, and then they go: from the
 * run's own directory when the wrapper moved them there (a long run: one
 * DELETE), else from beside the others in OUT, one by one (a killed
 * wrapper, or one that could not make the directory). The number of
 * pieces found, or -errno. */
static int fs_stream_collect(struct fs_stream *s, bool left)
{
	struct backend_error err;
	int n = fs_pieces_pass(s->m, s->url, s->dir, s->prefix, s->s, true, NULL);
	if (n >= 0) {
		if (left)
			fs_stream_file_changes(s);
		(void)backend_file_delete(s->m->backend, s->url, s->dir, &err);
		return n;
	}
	if (n != -ENOENT)
		return n;
	struct backend_listing l;
	n = fs_pieces_pass(s->m, s->url, FS_OUT_DIR, s->prefix, s->s, true, &l);
	if (n < 0)
		return n;
	size_t pl = strlen(s->prefix);
	for (size_t e = 0; e < l.count; e++) {
		if (strncmp(l.entries[e].name, s->prefix, pl) != 0)
			continue;
		char path[512];
		snprintf(path, sizeof(path), FS_OUT_DIR "/%s", l.entries[e].name);
		(void)backend_file_delete(s->m->backend, s->url, path, &err);
	}
	backend_listing_clear(&l);
	return n;
}

int fs_stream_finish(struct fs_stream *s, enum backend_status st,
		     struct backend_exec_result *res)
{
	fs_stream_stop(s);
	if (st != BACKEND_OK)
		return 0; /* unknown or failed: what was read stays as it was */
	size_t ml = strlen(FS_MARKER);
	bool left = res->out_len == ml + strlen(s->dir) &&
		    memcmp(res->out, FS_MARKER, ml) == 0 &&
		    memcmp(res->out + ml, s->dir, strlen(s->dir)) == 0;
	/* A wrapper that was killed (the timeout, a signal: 124, 128+N) never
	 * printed its pieces back: they are still in the directory, if it
	 * got that far. */
	bool killed = res->exit_code == 124 || res->exit_code >= 128 || res->exit_code < 0;
	if (s->plain || (!left && !killed)) {
		fs_stream_answer_changes(s, res);
		return 0; /* the answer has it all (or the command ran plainly) */
	}
	int rc = fs_stream_collect(s, left);
	if (!left && (rc == 0 || rc == -ENOENT))
		return 0; /* none of its pieces: the answer has what there is */
	if (rc < 0)
		return rc;
	char *out = NULL, *errb = NULL;
	size_t olen = 0, elen = 0;
	rc = fs_spool_output(s, 0, &out, &olen);
	if (rc == 0)
		rc = fs_spool_output(s, 1, &errb, &elen);
	if (rc < 0) {
		free(out);
		return rc;
	}
	free(res->out);
	free(res->err);
	res->out = out;
	res->out_len = olen;
	res->err = errb;
	res->err_len = elen;
	res->truncated = res->truncated || s->s[0].truncated || s->s[1].truncated;
	return 0;
}

static void fs_stream_free(struct fs_stream *s)
{
	fs_stream_stop(s);
	for (int i = 0; i < 2; i++)
		fs_spool_close(&s->s[i]);
	ws_changes_clear(&s->chg);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cv);
	free(s->id);
	free(s->url);
	free(s);
}

void fs_stream_put(struct fs_mount *m, struct fs_stream *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&m->lock);
	bool last = --s->refs == 0;
	pthread_mutex_unlock(&m->lock);
	if (last)
		fs_stream_free(s);
}

int fs_stream_read(struct fs_mount *m, const struct fs_loc *loc, char *buf, size_t size,
		   off_t off, bool nonblock)
{
	int which = loc->file == FS_F_STDERR;
	pthread_mutex_lock(&m->lock);
	for (;;) {
		struct fs_run *r = fs_loc_run(loc);
		if (!r || r->status != FS_RUN_RUNNING || !r->stream) {
			pthread_mutex_unlock(&m->lock);
			return -ENODATA; /* read the stored output */
		}
		struct fs_stream *s = r->stream;
		fs_stream_want(s);
		uint64_t have = s->s[which].have;
		if (off >= 0 && (uint64_t)off < have) {
			s->refs++;
			pthread_mutex_unlock(&m->lock);
			size_t n = have - (uint64_t)off < size ? (size_t)(have - (uint64_t)off)
							       : size;
			ssize_t got = pread(s->s[which].fd, buf, n, off);
			int rc = got < 0 ? -errno : (int)got;
			fs_stream_put(m, s);
			return rc;
		}
		if (nonblock) {
			pthread_mutex_unlock(&m->lock);
			return -EAGAIN;
		}
		if (fs_wait_step(m, true) < 0) {
			pthread_mutex_unlock(&m->lock);
			return -EINTR;
		}
	}
}

int fs_stream_open_wait(struct fs_mount *m, const struct fs_loc *loc, bool wait)
{
	if (loc->file != FS_F_STDOUT && loc->file != FS_F_STDERR)
		return 0;
	/* A read of nothing at offset 0: it returns once there is a byte or
	 * the output is whole, as a read would */
	char none;
	int rc;
	if (loc->node == FS_N_JOBFILE)
		rc = fs_job_read(m, loc, &none, 0, 0, !wait);
	else if (loc->node == FS_N_SBFILE || loc->node == FS_N_RUNFILE)
		rc = fs_stream_read(m, loc, &none, 0, 0, !wait);
	else
		return 0;
	return rc == -EAGAIN ? 1 : rc == -EINTR ? -EINTR : 0;
}

off_t fs_stream_size(struct fs_mount *m, const struct fs_run *r, int which)
{
	(void)m;
	if (!r->stream)
		return 0;
	fs_stream_want(r->stream); /* tail -f watches the size */
	return (off_t)r->stream->s[which].have;
}
