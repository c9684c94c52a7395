/* jsonstr.c — bytes to the inside of a JSON string. */
#include "jsonstr.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Append bytes as the inside of a JSON string: valid UTF-8 passes, any
 * invalid byte becomes U+FFFD, control characters are escaped. */
void jsonstr_escape(char **o, const unsigned char *s, size_t n)
{
	char *p = *o;

	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		size_t len = 0;

		if (c < 0x80) {
			if (c == '"' || c == '\\') {
				*p++ = '\\';
				*p++ = (char)c;
			} else if (c == '\n') {
				*p++ = '\\';
				*p++ = 'n';
			} else if (c == '\t') {
				*p++ = '\\';
				*p++ = 't';
			} else if (c == '\r') {
				*p++ = '\\';
				*p++ = 'r';
			} else if (c < 0x20 || c == 0x7f) {
				p += sprintf(p, "\\u%04x", c);
			} else {
				*p++ = (char)c;
			}
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			len = 2;
		else if (c >= 0xe0 && c <= 0xef)
			len = 3;
		else if (c >= 0xf0 && c <= 0xf4)
			len = 4;
		bool ok = len && i + len <= n;

		for (size_t k = 1; ok && k < len; k++)
			ok = (s[i + k] & 0xc0) == 0x80;
		if (ok && len == 3)
			ok = !(c == 0xe0 && s[i + 1] < 0xa0) &&
			     !(c == 0xed && s[i + 1] > 0x9f);
		if (ok && len == 4)
			ok = !(c == 0xf0 && s[i + 1] < 0x90) &&
			     !(c == 0xf4 && s[i + 1] > 0x8f);
		if (ok) {
			memcpy(p, s + i, len);
			p += len;
			i += len;
		} else {
			memcpy(p, "\xef\xbf\xbd", 3);
			p += 3;
			i++;
		}
	}
	*o = p;
}
