/*
 * restore.c — a wscache's start from the journal (wscache_restore: cache
 * files uploaded again, kept or rescued), its health check and its stats.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc.h"
#include "common/files.h"
#include "workspace_i.h"

/* --- restore, health, stats --------------------------------------------------*/

static int upload_cmp_desc(const void *a, const void *b)
{
	const struct journal_upload *x = *(const struct journal_upload *const *)a;
	const struct journal_upload *y = *(const struct journal_upload *const *)b;
	return x->upload_id < y->upload_id ? 1 : x->upload_id > y->upload_id ? -1 : 0;
}

/* The size and crc32 of the cache file at path; false when it cannot be
 * read whole. */
static bool file_sum(const char *path, uint64_t *size, uint32_t *crc)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct stat sb;
	unsigned char *buf = malloc(1 << 20);
	bool ok = buf && fstat(fd, &sb) == 0;
	uint32_t v = 0;
	uint64_t got = 0;
	ssize_t r = 0;
	while (ok && ((r = read(fd, buf, 1 << 20)) > 0 || (r < 0 && errno == EINTR)))
		if (r > 0) {
			v = common_crc32(v, buf, (size_t)r);
			got += (uint64_t)r;
		}
	ok = ok && r == 0 && got == (uint64_t)sb.st_size;
	free(buf);
	close(fd);
	*size = got;
	*crc = v;
	return ok;
}

/* The kernel's id of the running boot, or false. */
static bool boot_id_now(char *out, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!f)
		return false;
	bool ok = fgets(out, (int)len, f) != NULL;
	fclose(f);
	out[ok ? strcspn(out, "\n") : 0] = '\0';
	return out[0] != '\0';
}

/* cache_dir/boot_id names the boot in which the last mount over this cache
 * ran; it is written once that mount's restore is done. The same boot as
 * now means no power cut since: the page cache outlived any crash of the
 * daemon, so each cache file holds exactly what was last written to it. */
static bool last_mount_in_this_boot(const struct wscache *c, const char *now)
{
	char *p = ws_join(c->cache_dir, "boot_id");
	FILE *f = p ? fopen(p, "re") : NULL;
	char was[64] = "";
	if (f) {
		if (!fgets(was, sizeof(was), f))
			was[0] = '\0';
		fclose(f);
	}
	free(p);
	was[strcspn(was, "\n")] = '\0';
	return now[0] && strcmp(was, now) == 0;
}

static void boot_id_record(const struct wscache *c, const char *now)
{
	char *p = ws_join(c->cache_dir, "boot_id");
	/* Not synced: a power cut can only leave another boot's id or none,
	 * and both mean "not this boot" at the next restore. */
	int fd = p ? open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;
	if (fd >= 0) {
		dprintf(fd, "%s\n", now);
		close(fd);
	}
	free(p);
}

/* Journals a new intent for u's cache file as it is now (size, crc), made
 * durable cache file first, and supersedes u. For a cache file written on
 * after u by a descriptor the daemon's crash closed: u's bytes are gone,
 * the newer ones are the user's latest. Returns the new id, or 0. */
static uint64_t restore_reintend(struct wscache *c, const char *sandbox,
				 const struct journal_upload *u, uint64_t size,
				 uint32_t crc)
{
	struct journal *j = c->cfg.journal;
	if (!j)
		return 0;
	int fd = open(u->cache_file, O_RDONLY | O_CLOEXEC);
	bool ok = fd >= 0 && fsync(fd) == 0;
	if (fd >= 0)
		close(fd);
	int dfd = ok ? open(c->files_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	ok = ok && dfd >= 0 && fsync(dfd) == 0;
	if (dfd >= 0)
		close(dfd);
	if (!ok)
		return 0;
	WS_COUNT(c, syncs, 2);
	uint64_t id = journal_next_upload_id(j);
	struct journal_record r = {.kind = JOURNAL_UPLOAD_INTENT,
				   .sandbox = (char *)sandbox,
				   .upload_id = id,
				   .path = u->path,
				   .cache_file = u->cache_file,
				   .size = size,
				   .checksum = crc};
	if (journal_append(j, &r, true) < 0)
		return 0;
	upload_supersede(c, sandbox, u->upload_id, true);
	return id;
}

/* Abandons a restored intent for good (journaled durably): it is never
 * retried. */
static void restore_abandon(struct wscache *c, const char *sandbox, uint64_t id,
			    const char *why)
{
	if (!c->cfg.journal)
		return;
	struct journal_record r = {.kind = JOURNAL_UPLOAD_ABANDONED,
				   .sandbox = (char *)sandbox,
				   .upload_id = id,
				   .error = (char *)why};
	journal_append(c->cfg.journal, &r, true);
}

static bool path_seen(char **seen, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(seen[i], path) == 0)
			return true;
	return false;
}

int wscache_restore(struct wscache *c, const struct journal_state *st)
{
	if (!c || !st)
		return -EINVAL;
	int restored = 0;
	char boot[64] = "";
	bool known_boot = boot_id_now(boot, sizeof(boot));
	bool same_boot = known_boot && last_mount_in_this_boot(c, boot);
	for (size_t s = 0; s < st->count; s++) {
		const struct journal_sandbox *sb = &st->sandboxes[s];
		links_restore(c, sb);
		if (!sb->nuploads)
			continue;
		const struct journal_upload **ups = calloc(sb->nuploads, sizeof(*ups));
		/* Paths whose newest intent was handled: older ones lose. */
		char **seen = calloc(sb->nuploads, sizeof(*seen));
		size_t nseen = 0;
		if (!ups || !seen) {
			free(ups);
			free(seen);
			return -ENOMEM;
		}
		for (size_t i = 0; i < sb->nuploads; i++)
			ups[i] = &sb->uploads[i];
		qsort(ups, sb->nuploads, sizeof(*ups), upload_cmp_desc);
		for (size_t i = 0; i < sb->nuploads; i++) {
			const struct journal_upload *u = ups[i];
			if (u->abandoned || !u->path || !u->cache_file)
				continue;
			struct stat sb_st;
			bool missing = stat(u->cache_file, &sb_st) < 0;
			if (sb->state == JOURNAL_SB_GONE && !missing) {
				/* Every version is kept for the user. */
				char *dir = NULL;
				int krc = rescue_keep(c->rescue_dir, sb->id, u->path,
						      u->cache_file, &dir);
				free(dir);
				if (krc < 0) {
					common_log("workspace of %s: error: an unsaved "
						   "file could not be kept for rescue "
						   "(%s); it stays journaled",
						   sb->id, strerror(-krc));
					continue;
				}
				restore_abandon(
				    c, sb->id, u->upload_id,
				    "the sandbox is gone; data kept for rescue");
				continue;
			}
			if (path_seen(seen, nseen, u->path)) {
				/* A newer intent for the same path decides. */
				upload_supersede(c, sb->id, u->upload_id, true);
				struct workspace *ws = workspace_find(c, sb->id);
				if (ws)
					pthread_mutex_lock(&ws->lock);
				struct wsfile *f = ws ? file_find(ws, u->path) : NULL;
				bool keep =
				    f && strcmp(f->cache_path, u->cache_file) == 0;
				if (ws)
					pthread_mutex_unlock(&ws->lock);
				if (!keep)
					unlink(u->cache_file);
				continue;
			}
			if ((seen[nseen] = strdup(u->path)))
				nseen++;
			if (missing) {
				/* A power cut during an upload its caller waited for
				 * (made durable only when it fails), or damage. */
				fprintf(
				    stderr,
				    "sandboxfs: workspace of %s: the cache file of an "
				    "unfinished upload is missing; it is not retried "
				    "(the server's copy is left as it is)\n",
				    sb->id);
				pthread_mutex_lock(&c->lock);
				c->lost_uploads++;
				pthread_mutex_unlock(&c->lock);
				restore_abandon(c, sb->id, u->upload_id,
						"cache file missing at restore");
				continue;
			}
			/* A cache file that is not the intent's bytes: written on
			 * after the intent (an upload of a file still open, before
			 * a command or by the retries, failed; its writer never got
			 * its close), or torn by a power cut. In the same boot it
			 * can only be the former, and its newest content is
			 * uploaded, as it would have been at that close. After a
			 * reboot it is kept aside and the server's copy left as
			 * it is. */
			uint64_t id = u->upload_id, size = 0;
			uint32_t crc = 0;
			bool whole = file_sum(u->cache_file, &size, &crc);
			bool matches = whole && size == u->size && crc == u->checksum;
			bool streamed = u->size == JOURNAL_SIZE_STREAMED;
			if (!matches && whole && same_boot &&
			    (id = restore_reintend(c, sb->id, u, size, crc)) != 0) {
				fprintf(
				    stderr,
				    streamed
					? "sandboxfs: workspace of %s: a file was being "
					  "uploaded while it was written (early upload) "
					  "when the daemon ended; its local copy is "
					  "uploaded whole\n"
					: "sandboxfs: workspace of %s: the local copy of "
					  "an "
					  "interrupted upload was written on after its "
					  "intent "
					  "by a descriptor still open when the daemon "
					  "ended; "
					  "its newest content is uploaded\n",
				    sb->id);
				matches = true;
			}
			if (!matches) {
				char *dir = NULL;
				int krc = rescue_keep(c->incomplete_dir, sb->id, u->path,
						      u->cache_file, &dir);
				fprintf(
				    stderr,
				    "sandboxfs: workspace of %s: an interrupted upload "
				    "is not retried: its local copy was incomplete "
				    "(not the size and checksum journaled); %s%s; the "
				    "server's copy is left as it is\n",
				    sb->id, krc == 0 ? "kept in " : "could not keep it",
				    krc == 0 && dir ? dir : "");
				free(dir);
				WS_COUNT(c, incomplete, 1);
				restore_abandon(
				    c, sb->id, u->upload_id,
				    "local copy incomplete at restore; not uploaded");
				continue;
			}
			struct workspace *ws = ws_get_lock(c, sb->id, sb->url);
			struct wsfile *f =
			    ws ? file_new(ws, u->path, u->cache_file) : NULL;
			if (!f) {
				if (ws)
					pthread_mutex_unlock(&ws->lock);
				continue;
			}
			f->present = true;
			f->remote_exists = true;
			cache_account(f, (uint64_t)sb_st.st_size);
			cache_set_state(f, true, true);
			f->upload_id = id;
			f->wgen = 1;
			f->intent_gen = 1;
			f->intent_synced = true;
			f->mtime.tv_sec = sb_st.st_mtim.tv_sec;
			f->mtime.tv_nsec = sb_st.st_mtim.tv_nsec;
			pthread_mutex_lock(&c->lock);
			f->next_try_ms = common_now_ms();
			due_update(f);
			pthread_cond_broadcast(&c->cond);
			pthread_mutex_unlock(&c->lock);
			pthread_mutex_unlock(&ws->lock);
			restored++;
		}
		for (size_t i = 0; i < nseen; i++)
			free(seen[i]);
		free(seen);
		free(ups);
	}
	/* Every intent of an earlier boot has been checked: later restores
	 * may trust cache files written from now on. */
	if (known_boot)
		boot_id_record(c, boot);

	/* Cache files nothing refers to are leftovers of an earlier mount. */
	DIR *d = opendir(c->files_dir);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			char *p = ws_join(c->files_dir, de->d_name);
			if (!p)
				continue;
			bool used = false;
			for (struct workspace *ws = ws_first(c); ws && !used;
			     ws = ws->next) {
				pthread_mutex_lock(&ws->lock);
				for (struct wsfile *f = ws->all; f && !used;
				     f = f->ws_next)
					used = strcmp(f->cache_path, p) == 0;
				pthread_mutex_unlock(&ws->lock);
			}
			if (!used)
				unlink(p);
			free(p);
		}
		closedir(d);
	}
	/* The leftovers are gone: from now on, cache files made ahead of
	 * need (spare.c) are not taken for them. */
	spare_start(c);
	return restored;
}

int wscache_health(struct wscache *c, FILE *out)
{
	if (!c)
		return 0;
	int problems = 0;
	size_t pending = 0, stuck = 0;
	for (struct workspace *ws = ws_first(c); ws; ws = ws->next) {
		pthread_mutex_lock(&ws->lock);
		for (struct wsfile *f = ws->all; f; f = f->ws_next)
			if (f->pending && !f->unlinked) {
				pending++;
				stuck += f->permanent;
			}
		pthread_mutex_unlock(&ws->lock);
	}
	pthread_mutex_lock(&c->lock);
	uint64_t lost = c->lost_uploads;
	pthread_mutex_unlock(&c->lock);
	DIR *d;
	if (pending) {
		fprintf(out, "%zu uploads pending\n", pending);
		problems++;
	}
	/* Which ones: a command in their sandbox waits for them. */
	size_t named = 0;
	for (struct workspace *ws = pending ? ws_first(c) : NULL; ws && named <= 10;
	     ws = ws->next) {
		pthread_mutex_lock(&ws->lock);
		for (struct wsfile *f = ws->all; f; f = f->ws_next) {
			if (!f->pending || f->unlinked || !f->path)
				continue;
			if (named++ == 10) {
				/* counted a moment ago: it may have changed */
				if (pending > 10)
					fprintf(out, "(and %zu more pending uploads)\n",
						pending - 10);
				break;
			}
			fprintf(out,
				"upload of %s/workspace/%s pending (%s); commands in %s "
				"are refused until it is delivered\n",
				ws->id, f->path,
				strerror(f->last_err ? f->last_err : EIO), ws->id);
		}
		pthread_mutex_unlock(&ws->lock);
	}
	problems += cache_health(c, out);
	if (stuck) {
		fprintf(out,
			"%zu uploads refused by the server (retried at the next close)\n",
			stuck);
		problems++;
	}
	if (lost) {
		fprintf(out,
			"%" PRIu64 " unfinished uploads lost their cache file (not "
			"retried; the server's copy is left as it is)\n",
			lost);
		problems++;
	}
	d = opendir(c->incomplete_dir);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			fprintf(out,
				"interrupted uploads of sandbox %s were not retried: "
				"their local copy was incomplete (the server's copy is "
				"left as it is); kept in %s/%s\n",
				de->d_name, c->incomplete_dir, de->d_name);
			problems++;
		}
		closedir(d);
	}
	d = opendir(c->rescue_dir);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			fprintf(out, "data of gone sandbox %s is kept in %s/%s\n",
				de->d_name, c->rescue_dir, de->d_name);
			problems++;
		}
		closedir(d);
	}
	return problems;
}

void wscache_stats(struct wscache *c, FILE *out)
{
	if (!c)
		return;
	struct wscache_counters n;
	/* every member is an atomic_uint_fast64_t: a snapshot, one by one */
	_Static_assert(sizeof(n) % sizeof(atomic_uint_fast64_t) == 0,
		       "wscache_counters holds counters only");
	const atomic_uint_fast64_t *from = (const atomic_uint_fast64_t *)&c->n;
	atomic_uint_fast64_t *to = (atomic_uint_fast64_t *)&n;
	for (size_t i = 0; i < sizeof(n) / sizeof(*to); i++)
		atomic_init(&to[i], atomic_load_explicit(&from[i], memory_order_relaxed));
	pthread_mutex_lock(&c->lock);
	uint64_t bytes = c->bytes, dirty = c->dirty_bytes;
	uint64_t files = c->nfiles, pending = c->pending_files;
	uint64_t kept = c->idle_bytes;
	uint64_t max = c->cfg.max_bytes;
	int early_running = c->early_running;
	uint64_t early_sent =
	    atomic_load_explicit(&c->n.early_put_bytes, memory_order_relaxed);
	pthread_mutex_unlock(&c->lock);
	/* Device flushes: of cache files and their directory, and of the
	 * journal (commands' intents included). */
	uint64_t syncs = n.syncs + (c->cfg.journal ? journal_syncs(c->cfg.journal) : 0);
	fprintf(out,
		"cache_hits %" PRIu64 "\n"
		"cache_misses %" PRIu64 "\n"
		"cache_files %" PRIu64 "\n"
		"cache_bytes %" PRIu64 "\n"
		"cache_dirty_bytes %" PRIu64 "\n"
		"cache_kept_bytes %" PRIu64 "\n"
		"cache_max_bytes %" PRIu64 "\n"
		"cache_evictions %" PRIu64 "\n"
		"cache_enospc %" PRIu64 "\n"
		"download_bytes %" PRIu64 "\n"
		"uploads %" PRIu64 "\n"
		"upload_failures %" PRIu64 "\n"
		"upload_bytes %" PRIu64 "\n"
		"uploads_pending %" PRIu64 "\n"
		"listings_fetched %" PRIu64 "\n"
		"listing_cache_hits %" PRIu64 "\n"
		"listings_prefetched %" PRIu64 "\n"
		"cache_files_made_ahead %d\n"
		"cache_files_made_ahead_taken %" PRIu64 "\n"
		"renames %" PRIu64 "\n"
		"dir_renames %" PRIu64 "\n"
		"syncs %" PRIu64 "\n"
		"checksum_passes %" PRIu64 "\n"
		"uploads_incomplete %" PRIu64 "\n"
		"early_puts %" PRIu64 "\n"
		"early_puts_running %d\n"
		"early_puts_done %" PRIu64 "\n"
		"early_puts_abandoned %" PRIu64 "\n"
		"early_put_bytes_before_close %" PRIu64 "\n"
		"early_put_bytes %" PRIu64 "\n"
		"copies_kept_after_commands %" PRIu64 "\n",
		n.hits, n.misses, files, bytes, dirty, kept, max, n.evictions, n.enospc,
		n.fetched_bytes, n.uploads, n.upload_failures, n.uploaded_bytes, pending,
		n.listings, n.listing_hits, n.listings_prefetched, spare_ready(c), n.spares_taken,
		n.renames, n.dir_renames, syncs,
		n.checksum_passes, n.incomplete, n.early_puts, early_running,
		n.early_puts_done, n.early_puts_abandoned, n.early_put_bytes_before_close,
		early_sent, n.copies_kept_after_commands);
	cache_stats(c, out);
}
