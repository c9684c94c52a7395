/*
 * crc.c — common_crc32 (common/crc.h): ISA-L's crc32_gzip_refl when the
 * build has it, else zlib's crc32_z.
 */
#include "common/crc.h"

#ifdef SANDBOXFS_HAVE_ISAL
#include <isa-l/crc.h>
#else
#include <zlib.h>
#endif

uint32_t common_crc32(uint32_t crc, const void *buf, size_t len)
{
#ifdef SANDBOXFS_HAVE_ISAL
	return crc32_gzip_refl(crc, buf, (uint64_t)len);
#else
	return (uint32_t)crc32_z(crc, buf, len);
#endif
}

const char *common_crc32_impl(void)
{
#ifdef SANDBOXFS_HAVE_ISAL
	return "isa-l";
#else
	return "zlib";
#endif
}
