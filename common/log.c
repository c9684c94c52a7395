/*
 * log.c — "PROGRAM: MESSAGE" lines on stderr.
 */
#include "common/log.h"

#include <errno.h>
#include <stdio.h>

static const char *log_program;

void common_log_init(const char *program)
{
	log_program = program;
}

void common_vlog(const char *fmt, va_list ap)
{
	char line[1024];

	vsnprintf(line, sizeof(line), fmt, ap);
	/* stderr is unbuffered: one fprintf is one write. */
	fprintf(stderr, "%s: %s\n",
		log_program ? log_program : program_invocation_short_name, line);
}

void common_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	common_vlog(fmt, ap);
	va_end(ap);
}
