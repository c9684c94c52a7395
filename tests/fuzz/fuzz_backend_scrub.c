/*
 * fuzz_backend_scrub.c — libFuzzer harness for backend_scrub, which takes
 * secrets out of a server's error message. Input: the buffer size (1 to
 * BACKEND_SCRUB_MAX), a flags byte (bit 0: the message's end is a cut),
 * the secret's length, the secret, then the message. The message sits in
 * a heap buffer of exactly that size, so a write or read past it is an
 * AddressSanitizer report; the result must be a string within the buffer
 * with no occurrence of the secret left.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

/* True when s holds a byte of "[redacted]": such a secret may meet
 * itself again in the marker that replaces it. */
static bool marker_byte(const char *s)
{
	return strpbrk(s, "[]redact") != NULL;
}

static bool ends_with_start_of(const char *msg, size_t len, const char *secret)
{
	size_t sl = strlen(secret);

	for (size_t k = 4; k < sl && k <= len; k++)
		if (memcmp(msg + len - k, secret, k) == 0)
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t bufsize, sl, ml, len;
	char secret[256], *msg, *before;
	bool cut, was_cut;

	if (size < 3)
		return 0;
	bufsize = 1 + data[0] % BACKEND_SCRUB_MAX;
	cut = data[1] & 1;
	sl = data[2];
	data += 3;
	size -= 3;
	if (sl > size)
		sl = size;
	memcpy(secret, data, sl);
	secret[sl] = '\0';
	data += sl;
	size -= sl;

	ml = size < bufsize ? size : bufsize;
	msg = malloc(bufsize);
	before = malloc(bufsize + 1);
	check(msg && before);
	memcpy(msg, data, ml);
	if (ml < bufsize)
		msg[ml] = '\0';
	memcpy(before, msg, ml);
	before[ml] = '\0';
	/* What the message is as a string: up to its NUL or its buffer. */
	before[strnlen(before, bufsize - 1)] = '\0';

	was_cut = backend_scrub(msg, bufsize, secret, cut);
	len = strnlen(msg, bufsize);
	check(len < bufsize);
	check(!cut || was_cut);
	if (strlen(secret) < 4 || !strstr(before, secret)) {
		/* Nothing to take out: the message is kept as it was, unless
		 * a cut end holds the start of the secret. */
		if (!(was_cut && strlen(secret) >= 4 &&
		      ends_with_start_of(before, strlen(before), secret)))
			check(strcmp(msg, before) == 0);
	}
	if (strlen(secret) >= 4 && !marker_byte(secret)) {
		check(strstr(msg, secret) == NULL);
		if (was_cut)
			check(!ends_with_start_of(msg, len, secret));
	}
	free(msg);
	free(before);
	return 0;
}
