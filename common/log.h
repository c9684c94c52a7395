/*
 * log.h — the diagnostic lines of sandboxfs and its tools, on stderr.
 *
 * Each line is "PROGRAM: MESSAGE", written whole, so lines of threads do
 * not mix. Messages never hold a sandbox URL or a token.
 */
#ifndef SANDBOXFS_COMMON_LOG_H
#define SANDBOXFS_COMMON_LOG_H

#include <stdarg.h>

/* Sets PROGRAM (a string that outlives every log call); until then it is
 * the name the program was started by. */
void common_log_init(const char *program);

/* Writes "PROGRAM: " fmt "\n"; a message over 1 KiB is cut. */
void common_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* common_log with a va_list. */
void common_vlog(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

#endif
