/*
 * journal_i.h — private to journal/ and its tests.
 */
#ifndef SANDBOXFS_JOURNAL_I_H
#define SANDBOXFS_JOURNAL_I_H

#include <pthread.h>
#include <sys/types.h>

#include "journal.h"

/*
 * Frame (little endian):
 *   0  magic "SFJR"
 *   4  u16 format version (1)
 *   6  u16 flags (0)
 *   8  u32 payload length (at most JOURNAL_MAX_PAYLOAD)
 *  12  u32 crc32 of bytes 0..11: a flipped length is caught before it is
 *      trusted, so a bad length is never taken for a torn tail
 *  16  u32 crc32 of bytes 0..15 and the payload
 *  20  payload: fields, each u8 tag, u32 length, bytes; unknown tags are
 *      skipped so later versions may add fields.
 */
#define JOURNAL_MAGIC	    "SFJR"
#define JOURNAL_VERSION	    1
#define JOURNAL_HEADER_SIZE 20
#define JOURNAL_MAX_PAYLOAD (64u << 20)

/* Like journal_decode, with *why set to a short reason on CORRUPT. */
enum journal_decode_result journal_decode_why(const uint8_t *buf, size_t len,
					      struct journal_record *r, size_t *used,
					      const char **why);

/* Decodes a bare payload (no frame): for the fuzzer and the framing code. */
enum journal_decode_result journal_decode_payload(const uint8_t *p, size_t len,
						  struct journal_record *r,
						  const char **why);

/* Copies of a record's parts (record.c), shared with state.c. The copy
 * owns its strings; on -ENOMEM it is partly filled, and clearing it is
 * still safe. Equal: NULL equals only NULL. */
int journal_output_copy(struct journal_output *dst, const struct journal_output *src);
bool journal_output_equal(const struct journal_output *a, const struct journal_output *b);
bool journal_str_equal(const char *a, const char *b);
/* For the copies of state.c and rebuild.c: a strdup of s (NULL stays
 * NULL), and an output copy, each setting *err to -ENOMEM on failure. */
char *journal_dup_or_null(const char *s, int *err);
void journal_copy_output(struct journal_output *dst, const struct journal_output *src,
			 int *err);

bool journal_record_equal(const struct journal_record *a, const struct journal_record *b);
int journal_record_copy(struct journal_record *dst, const struct journal_record *src);
bool journal_state_equal(const struct journal_state *a, const struct journal_state *b);

/* The records that rebuild st from nothing (compaction). The caller frees
 * each record (journal_record_clear) and the array. */
int journal_state_records(const struct journal_state *st, struct journal_record **recs,
			  size_t *n);

/* The links of a sandbox's state (links.c, for state.c). */
void journal_links_free(struct journal_sandbox *sb);
void journal_links_apply(struct journal_sandbox *sb, const struct journal_record *r);
/* d's links become a deep copy of s's (-ENOMEM: partly copied; freeing
 * d is still safe). */
int journal_links_copy(struct journal_sandbox *d, const struct journal_sandbox *s);
bool journal_links_equal(const struct journal_sandbox *a, const struct journal_sandbox *b);
/* Fills r's kind, path and target with the record that rebuilds the i-th
 * link of sb (r's sandbox and time are the caller's). */
int journal_links_record(const struct journal_sandbox *sb, size_t i,
			 struct journal_record *r);

/* --- reading a journal file ---------------------------------------------*/

enum journal_scan_end {
	JOURNAL_SCAN_WHOLE,   /* every byte belongs to a good record */
	JOURNAL_SCAN_TORN,    /* a torn last record (or a zero-filled tail) */
	JOURNAL_SCAN_DAMAGED, /* a bad record with data after it */
	JOURNAL_SCAN_IOERR,
};

struct journal_scan_result {
	enum journal_scan_end end;
	size_t records;
	uint64_t good_bytes; /* offset just after the last good record */
	uint64_t file_bytes;
	const char *why; /* DAMAGED: the reason; IOERR: strerror */
	int err;	 /* IOERR: errno */
};

/* Reads every record of the file open at fd from offset 0, calling fn for
 * each (fn returns nonzero to stop: the scan then ends WHOLE at that
 * record). Never reads more than one frame into memory. */
typedef int (*journal_scan_fn)(void *ctx, const struct journal_record *r,
			       uint64_t offset);
void journal_scan(int fd, journal_scan_fn fn, void *ctx, struct journal_scan_result *res);

/* --- test hooks -----------------------------------------------------------*/

/* Compaction steps, for crash injection:
 *   1 journal.new created   2 half the records written   3 all written
 *   4 journal.new fsynced   5 renamed over journal       6 dir fsynced
 * When journal_crash_step is N > 0, compaction calls _exit(99) right after
 * step N (the test runs it in a child process). 0 = off. */
extern int journal_crash_step;

/* Group commit: when nonzero, each fdatasync of an append is preceded by a
 * sleep of this many microseconds (a slow disk, so that appends from other
 * threads pile up behind it). journal_append_syncs counts the fdatasyncs
 * made for appends (journal_syncs adds those of compactions). */
extern unsigned journal_sync_delay_us;
uint64_t journal_append_syncs(struct journal *j);

/* Helpers shared by the file code. */
int journal_fsync_dir(const char *dir);
void journal_format_time(uint64_t ms, char *buf, size_t size);

#endif
