/*
 * scan.c — reading a journal file record by record, and small file helpers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "journal_i.h"

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

void journal_format_time(uint64_t ms, char *buf, size_t size)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	if (!gmtime_r(&t, &tm)) {
		snprintf(buf, size, "?");
		return;
	}
	char s[32];
	strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, size, "%s.%03uZ", s, (unsigned)(ms % 1000));
}

int journal_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) ? -errno : 0;
	close(fd);
	return rc;
}

/* True when every byte from off to the end of the file is zero: the file
 * grew but the data never reached the disk (a crash mid-append on some
 * file systems). That is a torn tail, not damage. */
static bool zero_tail(int fd, uint64_t off)
{
	uint8_t b[4096];
	for (;;) {
		ssize_t n = pread(fd, b, sizeof(b), (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return false;
		if (n == 0)
			return true;
		for (ssize_t i = 0; i < n; i++)
			if (b[i])
				return false;
		off += (uint64_t)n;
	}
}

/* A last record whose header is whole but whose payload ends in zeros that
 * reach the end of the file: the size and the header reached the disk,
 * the payload's last blocks did not (ext4 after a power cut zero-fills
 * them). buf holds the whole frame at file offset off. The zeros must
 * start at the payload or cover a whole 512-byte block of it, so that a
 * flipped bit in a record that merely ends in a zero byte stays damage. */
static bool zero_filled_last_record(int fd, const uint8_t *buf, uint64_t off)
{
	if (get_le32(buf + 12) != crc32(0, buf, 12))
		return false; /* the header itself is not whole */
	uint64_t plen = get_le32(buf + 8);
	uint64_t payload = off + JOURNAL_HEADER_SIZE, frame_end = payload + plen;
	if (plen == 0 || !zero_tail(fd, frame_end))
		return false;
	uint64_t zeros = frame_end; /* file offset where the trailing zeros start */
	while (zeros > payload && buf[zeros - off - 1] == 0)
		zeros--;
	if (zeros == frame_end)
		return false;
	uint64_t block = (zeros + 511) & ~(uint64_t)511;
	return zeros == payload || block + 512 <= frame_end;
}

void journal_scan(int fd, journal_scan_fn fn, void *ctx, struct journal_scan_result *res)
{
	size_t cap = 64 * 1024, start = 0, end = 0;
	uint64_t off = 0; /* file offset of buf[start] */
	bool eof = false;
	uint8_t *buf = malloc(cap);

	memset(res, 0, sizeof(*res));
	if (!buf) {
		res->end = JOURNAL_SCAN_IOERR;
		res->err = ENOMEM;
		res->why = strerror(ENOMEM);
		return;
	}
	for (;;) {
		struct journal_record r;
		size_t used, avail = end - start;
		const char *why = NULL;

		if (avail == 0 && eof) {
			res->end = JOURNAL_SCAN_WHOLE;
			break;
		}
		enum journal_decode_result d =
		    avail ? journal_decode_why(buf + start, avail, &r, &used, &why)
			  : JOURNAL_DECODE_SHORT;
		if (d == JOURNAL_DECODE_OK) {
			int stop = fn ? fn(ctx, &r, off) : 0;
			journal_record_clear(&r);
			start += used;
			off += used;
			res->records++;
			res->good_bytes = off;
			if (stop) {
				res->end = JOURNAL_SCAN_WHOLE;
				break;
			}
			continue;
		}
		if (d == JOURNAL_DECODE_CORRUPT) {
			bool framed =
			    avail >= JOURNAL_HEADER_SIZE &&
			    avail - JOURNAL_HEADER_SIZE >= get_le32(buf + start + 8);
			bool torn =
			    zero_tail(fd, off) ||
			    (framed && zero_filled_last_record(fd, buf + start, off));
			res->end = torn ? JOURNAL_SCAN_TORN : JOURNAL_SCAN_DAMAGED;
			res->why = why;
			break;
		}
		if (eof) {
			res->end = JOURNAL_SCAN_TORN;
			break;
		}
		/* SHORT: read at least the rest of this frame (its length is
		 * trusted only once the header checksum passed). */
		size_t need = JOURNAL_HEADER_SIZE;
		if (avail >= 16)
			need += get_le32(buf + start + 8);
		if (start) {
			memmove(buf, buf + start, avail);
			start = 0;
			end = avail;
		}
		if (need > cap) {
			uint8_t *nb = realloc(buf, need);
			if (!nb) {
				res->end = JOURNAL_SCAN_IOERR;
				res->err = ENOMEM;
				break;
			}
			buf = nb;
			cap = need;
		}
		while (!eof && end < cap) {
			ssize_t n = pread(fd, buf + end, cap - end, (off_t)(off + end));
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				res->end = JOURNAL_SCAN_IOERR;
				res->err = errno;
				goto out;
			}
			if (n == 0)
				eof = true;
			end += (size_t)n;
			if (end >= need)
				break;
		}
	}
out:
	if (res->end == JOURNAL_SCAN_IOERR)
		res->why = strerror(res->err);
	off_t size = lseek(fd, 0, SEEK_END);
	res->file_bytes = size < 0 ? off + (end - start) : (uint64_t)size;
	free(buf);
}
