/*
 * test_names.c — name and path validation, percent-encoding, sandbox ids,
 * URL checks, errno mapping. No server needed.
 */
#include <errno.h>

#include "backend_i.h"
#include "backend_json_i.h"
#include "check.h"

static void names(void)
{
	char long_ok[256], long_bad[257];

	CHECK(backend_name_valid("a.py"));
	CHECK(backend_name_valid("with space"));
	CHECK(backend_name_valid("#hash?q%25"));
	CHECK(backend_name_valid("caf\xc3\xa9"));	       /* café */
	CHECK(backend_name_valid("\xe6\x97\xa5\xe6\x9c\xac")); /* 日本 */
	CHECK(backend_name_valid("\xf0\x9f\x98\x80"));	       /* emoji */
	CHECK(backend_name_valid(".hidden"));
	CHECK(backend_name_valid("..."));
	CHECK(!backend_name_valid(NULL));
	CHECK(!backend_name_valid(""));
	CHECK(!backend_name_valid("."));
	CHECK(!backend_name_valid(".."));
	CHECK(!backend_name_valid("a/b"));
	CHECK(!backend_name_valid("/"));
	CHECK(!backend_name_valid("a\nb"));
	CHECK(!backend_name_valid("tab\t"));
	CHECK(!backend_name_valid("del\x7f"));
	CHECK(!backend_name_valid("c1\xc2\x85"));   /* U+0085 NEL */
	CHECK(!backend_name_valid("bad\xff"));	    /* not UTF-8 */
	CHECK(!backend_name_valid("\xc0\xaf"));	    /* overlong '/' */
	CHECK(!backend_name_valid("\xed\xa0\x80")); /* surrogate */
	CHECK(!backend_name_valid("\xc3"));	    /* cut sequence */
	memset(long_ok, 'x', 255);
	long_ok[255] = '\0';
	memset(long_bad, 'x', 256);
	long_bad[256] = '\0';
	CHECK(backend_name_valid(long_ok));
	CHECK(!backend_name_valid(long_bad));
}

static void paths(void)
{
	CHECK(backend_path_valid(""));
	CHECK(backend_path_valid("a"));
	CHECK(backend_path_valid("a/b/c.txt"));
	CHECK(!backend_path_valid(NULL));
	CHECK(!backend_path_valid("/a"));
	CHECK(!backend_path_valid("a/"));
	CHECK(!backend_path_valid("a//b"));
	CHECK(!backend_path_valid("a/../b"));
	CHECK(!backend_path_valid("./a"));
	CHECK(!backend_path_valid("a/\x01"));

	/* A path as long as the kernel gives (4095 bytes, 250-byte names)
	 * and a name below it; one byte more is refused. */
	char deep[BACKEND_PATH_MAX + 2];
	size_t n = 0;
	while (n + 251 <= BACKEND_PATH_MAX + 1) {
		memset(deep + n, 'd', 250);
		deep[n + 250] = '/';
		n += 251;
	}
	memset(deep + n, 'f', BACKEND_PATH_MAX - n);
	deep[BACKEND_PATH_MAX] = '\0';
	CHECK(strlen(deep) == BACKEND_PATH_MAX && BACKEND_PATH_MAX >= 4095 + 17);
	CHECK(backend_path_valid(deep));
	deep[BACKEND_PATH_MAX] = 'f';
	deep[BACKEND_PATH_MAX + 1] = '\0';
	CHECK(!backend_path_valid(deep));
}

static void encoding(void)
{
	bool invalid;
	char *p;

	p = backend_files_path("", &invalid);
	CHECK(p && !invalid && strcmp(p, "/files/") == 0);
	free(p);
	p = backend_files_path("dir/a b#c?d%e", &invalid);
	CHECK(p && strcmp(p, "/files/dir/a%20b%23c%3Fd%25e") == 0);
	free(p);
	p = backend_files_path("caf\xc3\xa9/x+y=z&w;v", &invalid);
	CHECK(p && strcmp(p, "/files/caf%C3%A9/x%2By%3Dz%26w%3Bv") == 0);
	free(p);
	p = backend_files_path("A-Z_a.z~0", &invalid);
	CHECK(p && strcmp(p, "/files/A-Z_a.z~0") == 0);
	free(p);
	p = backend_files_path("a/../b", &invalid);
	CHECK(!p && invalid);
	p = backend_percent_encode("a/b c");
	CHECK(p && strcmp(p, "a%2Fb%20c") == 0);
	free(p);
}

static void ids(void)
{
	char id63[64], id64[65];

	CHECK(backend_sandbox_id_valid("a"));
	CHECK(backend_sandbox_id_valid("default-0a1b2c3d"));
	CHECK(backend_sandbox_id_valid("9lives"));
	CHECK(!backend_sandbox_id_valid(""));
	CHECK(!backend_sandbox_id_valid(NULL));
	CHECK(!backend_sandbox_id_valid("-a"));
	CHECK(!backend_sandbox_id_valid("a-"));
	CHECK(!backend_sandbox_id_valid("Upper"));
	CHECK(!backend_sandbox_id_valid("a_b"));
	CHECK(!backend_sandbox_id_valid("a.b"));
	CHECK(!backend_sandbox_id_valid(".sandboxfs"));
	memset(id63, 'a', 63);
	id63[63] = '\0';
	memset(id64, 'a', 64);
	id64[64] = '\0';
	CHECK(backend_sandbox_id_valid(id63));
	CHECK(!backend_sandbox_id_valid(id64));
}

static void urls(void)
{
	CHECK(backend_url_valid("http://127.0.0.1:3000"));
	CHECK(backend_url_valid("HTTPS://example.com/base/"));
	CHECK(backend_url_valid("http://[::1]:80"));
	CHECK(!backend_url_valid(NULL));
	CHECK(!backend_url_valid(""));
	CHECK(!backend_url_valid("ftp://host"));
	CHECK(!backend_url_valid("file:///etc/passwd"));
	CHECK(!backend_url_valid("http://"));
	CHECK(!backend_url_valid("http:///path"));
	CHECK(!backend_url_valid("http://host/a b"));
	CHECK(!backend_url_valid("http://host/\r\nX: y"));
	CHECK(!backend_url_valid("http://host/#frag"));
	CHECK(!backend_url_valid("http://host/?token=x"));
	CHECK(!backend_url_valid("javascript:alert(1)"));
}

static void errnos(void)
{
	CHECK(backend_errno(BACKEND_OK, BACKEND_OP_FILE) == 0);
	CHECK(backend_errno(BACKEND_NOT_SENT, BACKEND_OP_EXECUTE) == ENOTCONN);
	CHECK(backend_errno(BACKEND_ANSWER_LOST, BACKEND_OP_EXECUTE) == EIO);
	CHECK(backend_errno(BACKEND_INVALID, BACKEND_OP_FILE) == EINVAL);
	CHECK(backend_errno(BACKEND_DENIED, BACKEND_OP_SANDBOX) == EACCES);
	CHECK(backend_errno(BACKEND_NOT_FOUND, BACKEND_OP_FILE) == ENOENT);
	CHECK(backend_errno(BACKEND_CONFLICT, BACKEND_OP_CREATE) == EEXIST);
	CHECK(backend_errno(BACKEND_CONFLICT, BACKEND_OP_EXECUTE) == EBUSY);
	CHECK(backend_errno(BACKEND_TOO_LARGE, BACKEND_OP_FILE) == EFBIG);
	CHECK(backend_errno(BACKEND_EXHAUSTED, BACKEND_OP_CREATE) == EAGAIN);
	CHECK(backend_errno(BACKEND_SERVER_ERROR, BACKEND_OP_FILE) == EIO);
	CHECK(backend_errno(BACKEND_BAD_ANSWER, BACKEND_OP_EXECUTE) == EIO);
	CHECK(backend_errno(BACKEND_BAD_REQUEST, BACKEND_OP_FILE) == EINVAL);
	CHECK(backend_errno(BACKEND_LOCAL, BACKEND_OP_FILE) == EIO);
	for (int s = BACKEND_OK; s <= BACKEND_LOCAL; s++)
		CHECK(strcmp(backend_status_name((enum backend_status)s), "unknown") !=
		      0);
}

/* Calls refused before sending: counted, never sent, clear messages. */
static void refused_locally(void)
{
	struct backend *b = backend_new(NULL);
	struct backend_error e;
	struct backend_stats s;
	struct backend_listing l;
	struct backend_orchestrator o = {"http://127.0.0.1:1", NULL};
	struct backend_create_request both = {
	    .id = "x", .pool = "p", .image = "i", .port = 1};
	struct backend_create_request noport = {.id = "x", .image = "i"};
	struct backend_create_request badid = {.id = "Bad_Id", .pool = "p"};
	struct backend_sandbox sb;

	CHECK(b != NULL);
	CHECK_ST(backend_list(b, "http://127.0.0.1:1", "../etc", &l, &e),
		 BACKEND_BAD_REQUEST);
	CHECK(e.status == BACKEND_BAD_REQUEST && e.http_status == 0);
	CHECK_ST(backend_list(b, "file:///etc", "", &l, &e), BACKEND_BAD_REQUEST);
	CHECK_ST(backend_file_delete(b, "http://127.0.0.1:1", "", &e),
		 BACKEND_BAD_REQUEST);
	CHECK_ST(backend_health(b, "http://127.0.0.1:99999", &e), BACKEND_BAD_REQUEST);
	CHECK_ST(backend_orch_create(b, &o, &both, &sb, &e), BACKEND_BAD_REQUEST);
	CHECK_ST(backend_orch_create(b, &o, &noport, &sb, &e), BACKEND_BAD_REQUEST);
	CHECK_ST(backend_orch_create(b, &o, &badid, &sb, &e), BACKEND_BAD_REQUEST);
	CHECK_ST(backend_orch_get(b, &o, "../x", &sb, &e), BACKEND_BAD_REQUEST);
	o.token = "tok\r\nX-Injected: 1";
	CHECK_ST(backend_orch_list(b, &o, &(struct backend_sandbox_list){0}, &e),
		 BACKEND_BAD_REQUEST);
	backend_get_stats(b, &s);
	CHECK(s.errors == 9);
	CHECK(s.requests[BACKEND_OP_FILE] == 3);
	CHECK(s.requests[BACKEND_OP_HEALTH] == 1);
	CHECK(s.requests[BACKEND_OP_CREATE] == 3);
	CHECK(s.connections_opened == 0);
	backend_free(b);
}

int main(void)
{
	names();
	paths();
	encoding();
	ids();
	urls();
	errnos();
	refused_locally();
	return check_done("test_names");
}
