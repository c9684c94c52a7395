/*
 * fuzz_journal.c — libFuzzer harness for the journal reader: journal_decode
 * and replay over arbitrary bytes, the payload decoder behind a valid frame,
 * and journal_dump of the bytes as a file.
 *
 * Invariants checked (abort on violation): a decoded record re-encodes and
 * decodes to an equal record; the records compaction would write for the
 * replayed state rebuild an equal state.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "journal_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_journal: invariant broken: %s\n", what);
		abort();
	}
}

static void check_round_trip(const struct journal_record *r)
{
	uint8_t *buf;
	size_t len, used;
	struct journal_record d;

	must(journal_encode(r, &buf, &len) == 0, "a decoded record encodes");
	must(journal_decode(buf, len, &d, &used) == JOURNAL_DECODE_OK && used == len,
	     "an encoded record decodes");
	must(journal_record_equal(r, &d), "decode(encode(r)) == r");
	journal_record_clear(&d);
	free(buf);
}

static void check_compaction(const struct journal_state *st)
{
	struct journal_record *v;
	size_t n;
	struct journal_state re;

	if (journal_state_records(st, &v, &n))
		return;
	journal_state_init(&re, st->max_runs);
	for (size_t i = 0; i < n; i++) {
		journal_state_apply(&re, &v[i]);
		journal_record_clear(&v[i]);
	}
	free(v);
	must(journal_state_equal(st, &re), "replay(records(state)) == state");
	journal_state_clear(&re);
}

/* The bytes as a journal: decode record after record, replay them. */
static void replay_bytes(const uint8_t *data, size_t size)
{
	struct journal_state st;
	size_t off = 0;

	journal_state_init(&st, 3);
	for (;;) {
		struct journal_record r;
		size_t used;
		enum journal_decode_result res =
		    journal_decode(data + off, size - off, &r, &used);
		if (res != JOURNAL_DECODE_OK)
			break;
		must(used >= JOURNAL_HEADER_SIZE && used <= size - off,
		     "used is in bounds");
		check_round_trip(&r);
		journal_state_apply(&st, &r);
		journal_record_clear(&r);
		off += used;
	}
	check_compaction(&st);
	journal_state_clear(&st);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* The bytes as payloads behind valid frames, so the fuzzer reaches the
 * field decoder without having to forge checksums. Records are split at
 * 0xFF 0xFF bytes to give replay several of them. */
static void replay_payloads(const uint8_t *data, size_t size)
{
	uint8_t *frames = malloc(size * 2 + JOURNAL_HEADER_SIZE * 64);
	size_t flen = 0, start = 0, nframes = 0;

	if (!frames)
		return;
	for (size_t i = 0; i <= size && nframes < 64; i++) {
		if (i < size && !(data[i] == 0xff && i + 1 < size && data[i + 1] == 0xff))
			continue;
		uint32_t plen = (uint32_t)(i - start);
		uint8_t *h = frames + flen;
		memcpy(h, JOURNAL_MAGIC, 4);
		h[4] = JOURNAL_VERSION;
		h[5] = h[6] = h[7] = 0;
		put32(h + 8, plen);
		put32(h + 12, (uint32_t)crc32(0, h, 12));
		memcpy(h + JOURNAL_HEADER_SIZE, data + start, plen);
		uLong c = crc32(0, h, 16);
		c = crc32(c, h + JOURNAL_HEADER_SIZE, plen);
		put32(h + 16, (uint32_t)c);
		flen += JOURNAL_HEADER_SIZE + plen;
		nframes++;
		start = i + 2;
		i++;
	}
	replay_bytes(frames, flen);
	free(frames);
}

static int scan_count(void *ctx, const struct journal_record *r, uint64_t off)
{
	(*(size_t *)ctx)++;
	return 0;
}

/* The bytes as a file: the scanner, and the dump people read. */
static void dump_bytes(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static FILE *devnull;
	char path[64];

	if (fd < 0) {
		fd = memfd_create("fuzz_journal", MFD_CLOEXEC);
		devnull = fopen("/dev/null", "w");
		if (fd < 0 || !devnull)
			abort();
	}
	if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		abort();
	struct journal_scan_result res;
	size_t n = 0;
	journal_scan(fd, scan_count, &n, &res);
	must(res.records == n && res.good_bytes <= size && res.file_bytes == size,
	     "scan counts are consistent");
	must(res.end != JOURNAL_SCAN_WHOLE || res.good_bytes == size,
	     "whole means all bytes");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int rc = journal_dump(path, devnull);
	must(rc == (res.end == JOURNAL_SCAN_WHOLE ? 0 : 1),
	     "dump agrees with the scanner");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	replay_bytes(data, size);
	replay_payloads(data, size);
	dump_bytes(data, size);
	return 0;
}
