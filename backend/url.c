/*
 * url.c — base URLs on a Unix socket: http+unix://ENCODED_PATH[/BASE].
 *
 * The socket path is percent-encoded as the host (as requests-unixsocket,
 * Docker's and other clients write it), so a URL still names one server
 * and a base path after it: http+unix://%2Frun%2Fsbx%2Fa1b2c3d4/v1 is the
 * server on /run/sbx/a1b2c3d4 with base /v1. libcurl gets the path as
 * CURLOPT_UNIX_SOCKET_PATH and http://localhost/BASE as the URL.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend_i.h"

#define UNIX_PREFIX "http+unix://"
/* sun_path holds the path and its NUL. */
#define UNIX_PATH_MAX 107

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool backend_url_is_unix(const char *url)
{
	return url && strncasecmp(url, UNIX_PREFIX, strlen(UNIX_PREFIX)) == 0;
}

int backend_unix_url_parse(const char *url, char **curl_url, char **socket_path)
{
	const char *host, *rest;
	char path[UNIX_PATH_MAX + 1];
	size_t n = 0;

	if (curl_url)
		*curl_url = NULL;
	if (socket_path)
		*socket_path = NULL;
	if (!backend_url_is_unix(url))
		return -1;
	host = url + strlen(UNIX_PREFIX);
	rest = host + strcspn(host, "/?#");
	/* The host: unreserved characters and %XX only, decoding to an
	 * absolute path without NUL or control characters. */
	for (const char *p = host; p < rest; p++) {
		int c = (unsigned char)*p;

		if (c == '%') {
			int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);

			if (lo < 0)
				return -1;
			c = hi * 16 + lo;
			p += 2;
		} else if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9') || strchr("-._~", c))) {
			return -1;
		}
		if (c < 0x20 || c == 0x7f || n == UNIX_PATH_MAX)
			return -1;
		path[n++] = (char)c;
	}
	path[n] = '\0';
	if (n < 2 || path[0] != '/')
		return -1;
	/* The base path, as for http: no whitespace, query or fragment. */
	for (const unsigned char *p = (const unsigned char *)rest; *p; p++)
		if (*p <= 0x20 || *p == 0x7f || *p == '#' || *p == '?')
			return -1;
	if (curl_url) {
		size_t len = strlen("http://localhost") + strlen(rest) + 1;

		*curl_url = malloc(len);
		if (!*curl_url)
			return -2;
		strcpy(*curl_url, "http://localhost");
		strcat(*curl_url, rest);
	}
	if (socket_path) {
		*socket_path = strdup(path);
		if (!*socket_path) {
			if (curl_url) {
				free(*curl_url);
				*curl_url = NULL;
			}
			return -2;
		}
	}
	return 0;
}

char *backend_url_socket_path(const char *url)
{
	char *path = NULL;

	if (backend_unix_url_parse(url, NULL, &path) < 0)
		return NULL;
	return path;
}
