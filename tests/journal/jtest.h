/*
 * jtest.h — small helpers shared by the journal unit tests.
 */
#ifndef SANDBOXFS_JTEST_H
#define SANDBOXFS_JTEST_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../lib/check.h"
#include "journal_i.h"

static int jt_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(p);
}

static inline void jt_rm_rf(const char *dir)
{
	nftw(dir, jt_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh scratch directory; the registry goes under it too. */
static inline char *jt_tmpdir(void)
{
	const char *t = getenv("TMPDIR");
	char tmpl[4096];
	snprintf(tmpl, sizeof(tmpl), "%s/jtest.XXXXXX", t && *t ? t : "/tmp");
	char *d = mkdtemp(tmpl);
	if (!d) {
		perror("mkdtemp");
		exit(2);
	}
	return strdup(d);
}

static inline void jt_isolate_registry(const char *root)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/xdg-state", root);
	setenv("XDG_STATE_HOME", p, 1);
}

/* Tests stop at the first failed allocation. */
static inline void *jt_realloc(void *p, size_t n)
{
	void *q = realloc(p, n);
	if (!q) {
		perror("realloc");
		abort();
	}
	return q;
}

static inline int jt_write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	size_t n = fwrite(data, 1, len, f);
	fclose(f);
	return n == len ? 0 : -1;
}

static inline uint8_t *jt_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	*len = 0;
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	uint8_t *b = malloc(cap);
	size_t r;
	while ((r = fread(b + n, 1, cap - n, f)) > 0) {
		n += r;
		if (n == cap)
			b = jt_realloc(b, cap *= 2);
	}
	fclose(f);
	*len = n;
	return b;
}

static inline char *jt_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static inline struct journal_output jt_inline(const char *data, size_t len)
{
	struct journal_output o = {0};
	o.data = malloc(len + 1);
	memcpy(o.data, data, len);
	o.data[len] = '\0';
	o.len = len;
	o.crc32 = (uint32_t)crc32(0, (const unsigned char *)data, (uInt)len);
	return o;
}

/* One full record of the given kind, every field its kind uses set. */
static inline void jt_sample(struct journal_record *r, enum journal_kind kind, int i)
{
	char id[32];
	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->time_ms = 1764000000000ull + (uint64_t)i * 1111;
	snprintf(id, sizeof(id), "sb-%d", i % 3);
	r->sandbox = strdup(id);
	switch (kind) {
	case JOURNAL_CREATE_INTENT:
		r->pool = strdup("default");
		r->image = strdup("openruntimes/executor:v5");
		r->port = 3000;
		r->idle_s = 600;
		r->spec = strdup("{\"environment\":{\"TOKEN\":\"s3cret\"},\"ports\":[5173]}");
		r->bound_s = i % 2 ? JOURNAL_BOUND_NONE : 900;
		break;
	case JOURNAL_CREATED:
	case JOURNAL_CREATE_RECONCILED:
	case JOURNAL_ATTACH:
		r->url = strdup("http://127.0.0.1:4242/sandbox/secret-token-abc");
		r->foreign = kind == JOURNAL_CREATE_RECONCILED && i % 2;
		break;
	case JOURNAL_EXEC_INTENT:
		r->seq = (uint64_t)i + 1;
		r->command = strdup("make test && echo \"done\"\n");
		r->timeout_s = 60;
		r->internal = i % 2;
		break;
	case JOURNAL_EXEC_RESULT:
		r->seq = (uint64_t)i;
		r->exit_code = -3;
		r->duration_ms = 1234;
		r->truncated = true;
		r->out = jt_inline("out\0put\n", 8);
		r->err.file = strdup("runs/sb-1/3/stderr");
		r->err.len = 1u << 20;
		r->err.crc32 = 0xdeadbeef;
		break;
	case JOURNAL_EXEC_UNKNOWN:
	case JOURNAL_EXEC_NOT_RUN:
		r->seq = (uint64_t)i;
		r->error = strdup("connection lost");
		break;
	case JOURNAL_UPLOAD_INTENT:
		r->upload_id = (uint64_t)i + 7;
		r->path = strdup("src/main.c");
		r->cache_file = strdup("/var/state/cache/7");
		r->size = 123456789012ull;
		r->checksum = 0x12345678;
		break;
	case JOURNAL_UPLOAD_DONE:
	case JOURNAL_UPLOAD_ABANDONED:
		r->upload_id = (uint64_t)i + 7;
		if (kind == JOURNAL_UPLOAD_ABANDONED)
			r->error = strdup("sandbox gone");
		break;
	case JOURNAL_CREATE_FAILED:
	case JOURNAL_CREATE_UNKNOWN:
	case JOURNAL_DELETE_UNCONFIRMED:
		r->error = strdup("HTTP 500: \xe2\x80\x9coops\xe2\x80\x9d");
		break;
	case JOURNAL_SET_TIMEOUT:
		r->timeout_s = 3600;
		break;
	case JOURNAL_JOB_INTENT:
		r->job = (uint64_t)i;
		r->command = strdup("while sleep 1; do date; done");
		r->path = strdup(".sandboxfs-job.3.00c0ffee00c0ffee");
		break;
	case JOURNAL_JOB_STARTED:
	case JOURNAL_JOB_EXITED:
	case JOURNAL_JOB_KILLED:
		r->job = (uint64_t)i;
		r->pid = kind == JOURNAL_JOB_STARTED ? 31337 : 0;
		r->exit_code = kind == JOURNAL_JOB_EXITED ? 7 : 0;
		break;
	case JOURNAL_JOB_UNKNOWN:
	case JOURNAL_JOB_NOT_RUN:
		r->job = (uint64_t)i;
		r->error = strdup("connection lost");
		break;
	case JOURNAL_SNAPSHOT:
		r->sb_state = JOURNAL_SB_DELETE_UNCONFIRMED;
		r->owned = true;
		r->spec = strdup("{\"command\":\"agent\"}");
		r->bound_s = 120;
		r->url = strdup("https://example.com/x");
		r->pool = strdup("p");
		r->seq = 41;
		r->job = 12;
		r->commands_run = 99;
		r->error = strdup("e");
		break;
	default:
		break;
	}
}

/* What a journal_scan delivered, copied (the first 256 records). */
struct jt_collect {
	struct journal_record v[256];
	size_t n;
};

static inline int jt_collect_one(void *ctx, const struct journal_record *r, uint64_t off)
{
	struct jt_collect *c = ctx;
	if (c->n < 256)
		journal_record_copy(&c->v[c->n++], r);
	return 0;
}

static inline void jt_collect_clear(struct jt_collect *c)
{
	for (size_t i = 0; i < c->n; i++)
		journal_record_clear(&c->v[i]);
	c->n = 0;
}

#endif
