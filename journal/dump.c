/*
 * dump.c — the journal in plain text, for people.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "journal_i.h"

#define SHOW_MAX 80 /* bytes of a command, path or error shown */

/* Prints s with C escapes, at most max bytes of it, then "…" if cut. */
static void put_escaped(FILE *out, const char *s, size_t len, size_t max, bool quote)
{
	size_t n = len < max ? len : max;
	if (quote)
		fputc('"', out);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", out);
		else if (c == '\t')
			fputs("\\t", out);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(out, "\\x%02x", c);
		else
			fputc(c, out);
	}
	if (quote)
		fputc('"', out);
	if (n < len)
		fprintf(out, "…(%zu bytes)", len);
}

static void put_str(FILE *out, const char *key, const char *s)
{
	if (!s)
		return;
	fprintf(out, " %s=", key);
	put_escaped(out, s, strlen(s), SHOW_MAX, true);
}

/* A URL is a capability: only its scheme is shown. */
static void put_url(FILE *out, const char *url)
{
	if (!url)
		return;
	const char *sep = strstr(url, "://");
	fputs(" url=", out);
	if (sep && sep - url <= 16) {
		put_escaped(out, url, (size_t)(sep - url), 16, false);
		fputs("://…", out);
	} else {
		fputs("…", out);
	}
}

static void put_output(FILE *out, const char *name, const struct journal_output *o)
{
	if (!o->data && !o->file && !o->len && !o->crc32)
		return;
	fprintf(out, " %s=%zuB", name, o->len);
	if (o->data)
		fputs(",inline", out);
	if (o->file) {
		fputs(",file=", out);
		put_escaped(out, o->file, strlen(o->file), SHOW_MAX, true);
	}
	fprintf(out, ",crc=%08" PRIx32, o->crc32);
}

static const char *const sb_states[] = {
    "creating",		  "ready", "failed",   "create_unknown", "deleting",
    "delete_unconfirmed", "gone",  "detached",
};

static int dump_one(void *ctx, const struct journal_record *r, uint64_t offset)
{
	FILE *out = ctx;
	char when[48];

	journal_format_time(r->time_ms, when, sizeof(when));
	fprintf(out, "%s %s ", when, journal_kind_name(r->kind));
	if (r->sandbox)
		put_escaped(out, r->sandbox, strlen(r->sandbox), 64, false);
	else
		fputc('-', out);
	if (r->kind == JOURNAL_SNAPSHOT && r->sandbox)
		fprintf(out, " state=%s owned=%s commands_run=%" PRIu64,
			sb_states[r->sb_state % 8], r->owned ? "yes" : "no",
			r->commands_run);
	put_url(out, r->url);
	put_str(out, "pool", r->pool);
	put_str(out, "image", r->image);
	if (r->port)
		fprintf(out, " port=%d", r->port);
	if (r->idle_s)
		fprintf(out, " idle=%lds", r->idle_s);
	if (r->foreign)
		fputs(" foreign", out);
	if (r->bound_s > 0)
		fprintf(out, " bound=%lds", r->bound_s);
	else if (r->bound_s == JOURNAL_BOUND_NONE)
		fputs(" bound=none", out);
	/* a spec may carry secrets (environment values, artifact URLs) */
	if (r->spec)
		fprintf(out, " spec=(%zu bytes, not shown)", strlen(r->spec));
	/* so may an environment: its names are shown, never its values */
	if (r->env) {
		fputs(" env=", out);
		const char *p = r->env;
		bool first = true;
		while (*p) {
			const char *eq = strchr(p, '='), *nl = strchr(p, '\n');
			if (!nl)
				nl = p + strlen(p);
			if (eq && eq < nl) {
				fprintf(out, "%s%.*s", first ? "" : ",", (int)(eq - p), p);
				first = false;
			}
			p = *nl ? nl + 1 : nl;
		}
		fputs(first ? "(none)" : " (values not shown)", out);
	}
	if (r->seq)
		fprintf(out, " seq=%" PRIu64, r->seq);
	if (r->job)
		fprintf(out, " job=%" PRIu64, r->job);
	if (r->pid)
		fprintf(out, " pid=%ld", r->pid);
	if (r->timeout_s)
		fprintf(out, " timeout=%lds", r->timeout_s);
	put_str(out, "command", r->command);
	if (r->internal)
		fputs(" internal", out);
	if (r->kind == JOURNAL_JOB_EXITED)
		fprintf(out, " exit=%d", r->exit_code);
	if (r->kind == JOURNAL_EXEC_RESULT)
		fprintf(out, " exit=%d duration=%ldms%s", r->exit_code, r->duration_ms,
			r->truncated ? " truncated" : "");
	put_output(out, "stdout", &r->out);
	put_output(out, "stderr", &r->err);
	if (r->upload_id)
		fprintf(out, " upload=%" PRIu64, r->upload_id);
	put_str(out, "path", r->path);
	put_str(out, "target", r->target);
	put_str(out, "cache", r->cache_file);
	if (r->kind == JOURNAL_UPLOAD_INTENT && r->size == JOURNAL_SIZE_STREAMED)
		fprintf(out, " size=streamed");
	else if (r->size || r->kind == JOURNAL_UPLOAD_INTENT)
		fprintf(out, " size=%" PRIu64, r->size);
	if (r->checksum || r->kind == JOURNAL_UPLOAD_INTENT)
		fprintf(out, " crc=%08" PRIx32, r->checksum);
	put_str(out, "error", r->error);
	fputc('\n', out);
	return 0;
}

int journal_dump(const char *path, FILE *out)
{
	struct journal_scan_result res;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	journal_scan(fd, dump_one, out, &res);
	close(fd);
	switch (res.end) {
	case JOURNAL_SCAN_WHOLE:
		fprintf(out, "-- %zu records, %" PRIu64 " bytes, whole\n", res.records,
			res.file_bytes);
		return 0;
	case JOURNAL_SCAN_TORN:
		fprintf(out,
			"-- %zu records; torn last record at byte %" PRIu64 " (%" PRIu64
			" bytes): cut at the next mount\n",
			res.records, res.good_bytes, res.file_bytes - res.good_bytes);
		return 1;
	case JOURNAL_SCAN_DAMAGED:
		fprintf(out,
			"-- %zu records; DAMAGED at byte %" PRIu64 ": %s (%" PRIu64
			" bytes not read)\n",
			res.records, res.good_bytes, res.why ? res.why : "bad record",
			res.file_bytes - res.good_bytes);
		return 1;
	default:
		fprintf(out, "-- %zu records; read error at byte %" PRIu64 ": %s\n",
			res.records, res.good_bytes, strerror(res.err));
		return -res.err;
	}
}
