/*
 * test_log.c — common/log.h: one "PROGRAM: MESSAGE" line per call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/check.h"
#include "common/log.h"

/* Runs the log calls with stderr on a file and returns what they wrote. */
static char *captured(void (*fn)(void))
{
	static char buf[8192];
	FILE *f = tmpfile();
	int saved = dup(2);
	if (!f || saved < 0)
		return NULL;
	dup2(fileno(f), 2);
	fn();
	dup2(saved, 2);
	close(saved);
	rewind(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void before_init(void)
{
	common_log("x=%d", 1);
}

static void after_init(void)
{
	common_log_init("sandboxfs");
	common_log("state directory %s: %s", "/s", "gone");
	common_log("%s", "");
}

static void long_message(void)
{
	char big[3000];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	common_log("%s", big);
}

int main(void)
{
	char *s = captured(before_init);
	/* Until init, the name the program was started by. */
	CHECK(s && strcmp(s, "test_common_log: x=1\n") == 0);
	s = captured(after_init);
	CHECK(s && strcmp(s, "sandboxfs: state directory /s: gone\nsandboxfs: \n") == 0);
	s = captured(long_message);
	/* Cut, but still one line. */
	CHECK(s && strncmp(s, "sandboxfs: aaa", 14) == 0);
	CHECK(s && strlen(s) == strlen("sandboxfs: ") + 1023 + 1);
	CHECK(s && strchr(s, '\n') == s + strlen(s) - 1);
	return check_done("common log");
}
