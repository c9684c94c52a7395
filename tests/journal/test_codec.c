/*
 * test_codec.c — every record kind round-trips through encode/decode; every
 * prefix of a frame is SHORT, every single-bit flip is caught.
 */
#include "jtest.h"

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* A frame around an arbitrary payload, with correct checksums. */
static uint8_t *frame(const uint8_t *payload, uint32_t plen, size_t *len)
{
	uint8_t *b = calloc(1, JOURNAL_HEADER_SIZE + plen + 1);
	memcpy(b, JOURNAL_MAGIC, 4);
	b[4] = JOURNAL_VERSION;
	put32(b + 8, plen);
	put32(b + 12, (uint32_t)crc32(0, b, 12));
	memcpy(b + JOURNAL_HEADER_SIZE, payload, plen);
	uLong c = crc32(0, b, 16);
	c = crc32(c, b + JOURNAL_HEADER_SIZE, plen);
	put32(b + 16, (uint32_t)c);
	*len = JOURNAL_HEADER_SIZE + plen;
	return b;
}

static void test_round_trip_every_kind(void)
{
	int kinds = 0;
	for (int k = 1; k < JOURNAL_KIND_MAX; k++) {
		struct journal_record r, d;
		uint8_t *buf;
		size_t len, used;

		jt_sample(&r, (enum journal_kind)k, k);
		CHECK(strcmp(journal_kind_name(r.kind), "UNKNOWN_KIND") != 0);
		CHECK_EQ(journal_encode(&r, &buf, &len), 0);
		CHECK_EQ(journal_decode(buf, len, &d, &used), JOURNAL_DECODE_OK);
		CHECK_EQ(used, len);
		CHECK(journal_record_equal(&r, &d));
		journal_record_clear(&d);

		/* With trailing bytes: only the first record is consumed. */
		uint8_t *two = malloc(len * 2);
		memcpy(two, buf, len);
		memcpy(two + len, buf, len);
		CHECK_EQ(journal_decode(two, len * 2, &d, &used), JOURNAL_DECODE_OK);
		CHECK_EQ(used, len);
		journal_record_clear(&d);
		free(two);

		/* Every prefix is torn, never corrupt, never OK. */
		for (size_t n = 0; n < len; n++) {
			enum journal_decode_result res =
			    journal_decode(buf, n, &d, &used);
			if (res != JOURNAL_DECODE_SHORT)
				fprintf(stderr, "kind %d prefix %zu: %d\n", k, n, res);
			CHECK(res == JOURNAL_DECODE_SHORT);
		}
		/* Every single-bit flip is caught. */
		for (size_t i = 0; i < len; i++) {
			for (int bit = 0; bit < 8; bit++) {
				buf[i] ^= (uint8_t)(1u << bit);
				enum journal_decode_result res =
				    journal_decode(buf, len, &d, &used);
				CHECK(res != JOURNAL_DECODE_OK);
				if (res == JOURNAL_DECODE_OK)
					journal_record_clear(&d);
				buf[i] ^= (uint8_t)(1u << bit);
			}
		}
		struct journal_record copy;
		CHECK_EQ(journal_record_copy(&copy, &r), 0);
		CHECK(journal_record_equal(&r, &copy));
		journal_record_clear(&copy);
		free(buf);
		journal_record_clear(&r);
		kinds++;
	}
	CHECK_EQ(kinds, JOURNAL_KIND_MAX - 1);
	printf("round trip: %d kinds, each prefix and each bit flip checked\n", kinds);
}

static void test_null_vs_empty(void)
{
	struct journal_record r = {.kind = JOURNAL_EXEC_RESULT, .sandbox = (char *)""};
	struct journal_record d;
	uint8_t *buf;
	size_t len, used;

	r.out.data = (char *)"";
	r.out.len = 0;
	CHECK_EQ(journal_encode(&r, &buf, &len), 0);
	CHECK_EQ(journal_decode(buf, len, &d, &used), JOURNAL_DECODE_OK);
	CHECK(d.sandbox && d.sandbox[0] == '\0');
	CHECK(d.out.data && d.out.len == 0);
	CHECK(d.err.data == NULL && d.url == NULL && d.command == NULL);
	CHECK(journal_record_equal(&r, &d));
	journal_record_clear(&d);
	free(buf);
}

static void test_bad_frames(void)
{
	struct journal_record d;
	size_t used, len;
	uint8_t *buf;

	/* A length beyond the bound is corrupt even with a good header crc:
	 * nothing is allocated for it. */
	uint8_t h[JOURNAL_HEADER_SIZE] = {0};
	memcpy(h, JOURNAL_MAGIC, 4);
	h[4] = JOURNAL_VERSION;
	put32(h + 8, JOURNAL_MAX_PAYLOAD + 1);
	put32(h + 12, (uint32_t)crc32(0, h, 12));
	CHECK_EQ(journal_decode(h, sizeof(h), &d, &used), JOURNAL_DECODE_CORRUPT);

	/* Another version. */
	h[4] = 2;
	put32(h + 8, 0);
	put32(h + 12, (uint32_t)crc32(0, h, 12));
	CHECK_EQ(journal_decode(h, sizeof(h), &d, &used), JOURNAL_DECODE_CORRUPT);

	CHECK_EQ(journal_decode((const uint8_t *)"XXXX", 4, &d, &used),
		 JOURNAL_DECODE_CORRUPT);
	CHECK_EQ(journal_decode((const uint8_t *)"SF", 2, &d, &used),
		 JOURNAL_DECODE_SHORT);
	CHECK_EQ(journal_decode((const uint8_t *)"", 0, &d, &used), JOURNAL_DECODE_SHORT);

	/* Payloads with good checksums but bad content. */
	static const uint8_t no_kind[] = {2, 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
	static const uint8_t bad_int[] = {1, 4, 0, 0, 0, 1, 0, 0, 0};
	static const uint8_t bad_kind[] = {1, 8, 0, 0, 0, 99, 0, 0, 0, 0, 0, 0, 0};
	static const uint8_t nul_str[] = {1, 8, 0, 0, 0, 2, 0, 0,   0, 0,  0,
					  0, 0, 3, 3, 0, 0, 0, 'a', 0, 'b'};
	static const uint8_t past_end[] = {1, 8, 0, 0, 0, 2, 0, 0, 0,  0,
					   0, 0, 0, 3, 9, 0, 0, 0, 'a'};
	static const uint8_t short_field[] = {1, 8, 0, 0, 0, 2, 0, 0,
					      0, 0, 0, 0, 0, 3, 0};
	static const uint8_t bad_bool[] = {1,  8, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0,
					   14, 8, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0};
	const struct {
		const uint8_t *p;
		size_t n;
	} bad[] = {
	    {no_kind, sizeof(no_kind)},	  {bad_int, sizeof(bad_int)},
	    {bad_kind, sizeof(bad_kind)}, {nul_str, sizeof(nul_str)},
	    {past_end, sizeof(past_end)}, {short_field, sizeof(short_field)},
	    {bad_bool, sizeof(bad_bool)},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		buf = frame(bad[i].p, (uint32_t)bad[i].n, &len);
		CHECK_EQ(journal_decode(buf, len, &d, &used), JOURNAL_DECODE_CORRUPT);
		free(buf);
	}

	/* Unknown fields (from a later writer) are skipped. */
	static const uint8_t extra[] = {1,   8, 0, 0, 0, 2,   0,   0, 0, 0, 0, 0, 0,
					200, 2, 0, 0, 0, 'x', 'y', 3, 1, 0, 0, 0, 'z'};
	buf = frame(extra, sizeof(extra), &len);
	CHECK_EQ(journal_decode(buf, len, &d, &used), JOURNAL_DECODE_OK);
	CHECK(d.kind == JOURNAL_CREATED && d.sandbox && strcmp(d.sandbox, "z") == 0);
	journal_record_clear(&d);
	free(buf);

	struct journal_record r = {.kind = JOURNAL_KIND_MAX};
	CHECK_EQ(journal_encode(&r, &buf, &len), -EINVAL);
	r.kind = 0;
	CHECK_EQ(journal_encode(&r, &buf, &len), -EINVAL);
	CHECK(strcmp(journal_kind_name(JOURNAL_KIND_MAX), "UNKNOWN_KIND") == 0);
	CHECK(strcmp(journal_kind_name((enum journal_kind)0), "UNKNOWN_KIND") == 0);
}

int main(void)
{
	test_round_trip_every_kind();
	test_null_vs_empty();
	test_bad_frames();
	return check_done("test_codec");
}
