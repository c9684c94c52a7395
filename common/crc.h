/*
 * crc.h — the CRC-32 of bulk data: the sums of cache files that the
 * journal's upload intents carry and restore checks.
 *
 * The CRC of zlib's crc32() and of gzip (reflected polynomial 0xEDB88320),
 * so a sum is the same whichever computes it and journals written before
 * stay valid. Built with ISA-L (Debian's libisal-dev), crc32_gzip_refl
 * computes it with carry-less multiplication (PCLMULQDQ) where the CPU has
 * it; zlib's table-driven crc32_z took a quarter of the daemon's CPU in a
 * large write. Without ISA-L, zlib computes it.
 */
#ifndef SANDBOXFS_COMMON_CRC_H
#define SANDBOXFS_COMMON_CRC_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32 of buf continued from crc (0 for a new sum), as zlib's
 * crc32(crc, buf, len). */
uint32_t common_crc32(uint32_t crc, const void *buf, size_t len);

/* "isa-l" or "zlib": what computes common_crc32 in this build. */
const char *common_crc32_impl(void);

#endif
