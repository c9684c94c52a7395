/*
 * strjoin.c — "A/B" strings built without printf (common/strjoin.h).
 */
#include "common/strjoin.h"

#include <stdlib.h>
#include <string.h>

char *common_join(char *buf, size_t cap, const char *a, char sep, const char *b)
{
	size_t al = strlen(a), bl = strlen(b);
	char *s = buf && al + 1 + bl < cap ? buf : malloc(al + 1 + bl + 1);
	if (!s)
		return NULL;
	memcpy(s, a, al);
	s[al] = sep;
	memcpy(s + al + 1, b, bl + 1);
	return s;
}
