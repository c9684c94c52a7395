/*
 * test_crc.c — common_crc32 (common/crc.h) against zlib's crc32, the sum
 * journals already hold: known values, every length from 0 to 300 at every
 * alignment up to 16, large buffers, and a sum continued over pieces of
 * any size equal to the sum of the whole. No server, no mount.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../lib/check.h"
#include "common/crc.h"

static uint32_t zlib_crc(uint32_t crc, const unsigned char *p, size_t n)
{
	return (uint32_t)crc32_z(crc, p, n);
}

int main(void)
{
	printf("# common_crc32 computed by %s\n", common_crc32_impl());
	/* the check value of CRC-32 (gzip, zlib, PNG) */
	CHECK_EQ(common_crc32(0, "123456789", 9), 0xCBF43926u);
	CHECK_EQ(common_crc32(0, "", 0), 0u);
	CHECK_EQ(common_crc32(0x12345678u, "", 0), 0x12345678u);

	size_t big = (8u << 20) + 7;
	unsigned char *buf = malloc(big + 64);
	if (!buf)
		return 1;
	uint64_t x = 0x9E3779B97F4A7C15ull;
	for (size_t i = 0; i < big + 64; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (unsigned char)x;
	}
	for (size_t off = 0; off < 16; off++)
		for (size_t n = 0; n <= 300; n++)
			CHECK_EQ(common_crc32(0, buf + off, n), zlib_crc(0, buf + off, n));
	CHECK_EQ(common_crc32(0, buf, big), zlib_crc(0, buf, big));
	CHECK_EQ(common_crc32(0, buf + 3, big), zlib_crc(0, buf + 3, big));

	/* continued over pieces, as the running sum of in-order writes is */
	uint32_t whole = zlib_crc(0, buf, big);
	size_t pieces[] = {1, 7, 4096, 131072, 1048576, 3};
	for (size_t k = 0; k < sizeof(pieces) / sizeof(*pieces); k++) {
		uint32_t crc = 0;
		for (size_t at = 0; at < big; at += pieces[k]) {
			size_t n = big - at < pieces[k] ? big - at : pieces[k];
			crc = common_crc32(crc, buf + at, n);
		}
		CHECK_EQ(crc, whole);
	}
	/* continued from a zlib sum, and zlib continued from ours */
	uint32_t half = zlib_crc(0, buf, big / 2);
	CHECK_EQ(common_crc32(half, buf + big / 2, big - big / 2), whole);
	half = common_crc32(0, buf, big / 2);
	CHECK_EQ(zlib_crc(half, buf + big / 2, big - big / 2), whole);
	free(buf);
	return check_done("crc");
}
