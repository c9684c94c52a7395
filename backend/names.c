/*
 * names.c — validation of names and paths, percent-encoding of segments.
 */
#include <stdlib.h>
#include <string.h>

#include "backend_i.h"

/* Length of the UTF-8 sequence starting at s (at most n bytes), or 0 when
 * it is not valid UTF-8 (overlong forms, surrogates, > U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

/* Checks the segment s[0..n). */
static bool segment_valid(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;

	if (n == 0 || n > 255)
		return false;
	if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
		return false;
	for (size_t i = 0; i < n;) {
		size_t l;

		/* C0 controls, DEL; C1 controls arrive as UTF-8 below. */
		if (u[i] < 0x20 || u[i] == 0x7f || u[i] == '/')
			return false;
		l = utf8_seq(u + i, n - i);
		if (l == 0)
			return false;
		/* U+0080..U+009F, the C1 controls. */
		if (l == 2 && u[i] == 0xc2 && u[i + 1] < 0xa0)
			return false;
		i += l;
	}
	return true;
}

bool backend_name_valid(const char *name)
{
	return name && segment_valid(name, strlen(name));
}

bool backend_path_valid(const char *path)
{
	const char *p, *slash;

	if (!path)
		return false;
	if (!*path)
		return true;
	if (strlen(path) > BACKEND_PATH_MAX)
		return false;
	for (p = path;; p = slash + 1) {
		slash = strchr(p, '/');
		if (!segment_valid(p, slash ? (size_t)(slash - p) : strlen(p)))
			return false;
		if (!slash)
			return true;
	}
}

bool backend_sandbox_id_valid(const char *id)
{
	size_t n;

	if (!id)
		return false;
	n = strlen(id);
	if (n == 0 || n > 63 || id[0] == '-' || id[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return false;
	}
	return true;
}

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
}

/* Encodes s[0..n) at out; returns the bytes written (at most 3n). */
static size_t encode(char *out, const char *s, size_t n, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (unreserved(c) || (keep_slash && c == '/')) {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	return o;
}

char *backend_percent_encode(const char *s)
{
	size_t n = strlen(s);
	char *out = malloc(3 * n + 1);

	if (!out)
		return NULL;
	out[encode(out, s, n, false)] = '\0';
	return out;
}

char *backend_files_path(const char *path, bool *invalid)
{
	static const char prefix[] = "/files/";
	size_t n, o;
	char *out;

	*invalid = !backend_path_valid(path);
	if (*invalid)
		return NULL;
	n = strlen(path);
	out = malloc(sizeof(prefix) + 3 * n);
	if (!out)
		return NULL;
	memcpy(out, prefix, sizeof(prefix) - 1);
	/* The path is valid, so every '/' separates two segments. */
	o = sizeof(prefix) - 1 + encode(out + sizeof(prefix) - 1, path, n, true);
	out[o] = '\0';
	return out;
}
