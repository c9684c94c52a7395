/*
 * jsonstr.h — command output as JSON string text.
 *
 * A command's output is bytes; JSON strings are Unicode. Valid UTF-8 passes
 * unchanged, each byte of an invalid sequence becomes U+FFFD (as decoders
 * with replacement do), and control characters, including NUL, are escaped.
 */
#ifndef SBX_JSONSTR_H
#define SBX_JSONSTR_H

#include <stddef.h>

/* The most output bytes jsonstr_escape writes for n input bytes. */
#define JSONSTR_MAX(n) (6 * (n))

/* Write the escaped form of s[0..n) at *o (no quotes, no NUL) and advance
 * *o past it. The buffer must hold JSONSTR_MAX(n) bytes. */
void jsonstr_escape(char **o, const unsigned char *s, size_t n);

#endif
