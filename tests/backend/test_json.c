/*
 * test_json.c — the decoders on good, hostile and malformed answers.
 * No server needed.
 */
#include "backend_i.h"
#include "backend_json_i.h"
#include "check.h"

#define S(lit) lit, sizeof(lit) - 1

static void exec_answers(void)
{
	struct backend_exec_result r;

	CHECK_ST(
	    backend_json_exec(S("{\"exitCode\":3,\"stdout\":\"4\\n\",\"stderr\":\"e\","
				"\"durationMillis\":41,\"truncated\":true}"),
			      &r),
	    BACKEND_OK);
	CHECK(r.exit_code == 3 && r.out_len == 2 && strcmp(r.out, "4\n") == 0);
	CHECK(r.err_len == 1 && r.duration_ms == 41 && r.truncated);
	backend_exec_result_clear(&r);
	CHECK(r.out == NULL);
	/* Optional members absent. */
	CHECK_ST(
	    backend_json_exec(S("{\"exitCode\":-1,\"stdout\":\"\",\"stderr\":\"\"}"), &r),
	    BACKEND_OK);
	CHECK(r.exit_code == -1 && !r.truncated && r.duration_ms == 0);
	backend_exec_result_clear(&r);
	/* Unicode escapes decode to UTF-8. */
	CHECK_ST(backend_json_exec(
		     S("{\"exitCode\":0,\"stdout\":\"caf\\u00e9\",\"stderr\":\"\"}"), &r),
		 BACKEND_OK);
	CHECK(strcmp(r.out, "caf\xc3\xa9") == 0 && r.out_len == 5);
	backend_exec_result_clear(&r);

	static const char *bad[] = {
	    "",
	    "null",
	    "[]",
	    "{}",
	    "{\"exitCode\":0,\"stdout\":\"\"}",
	    "{\"exitCode\":\"0\",\"stdout\":\"\",\"stderr\":\"\"}",
	    "{\"exitCode\":1.5,\"stdout\":\"\",\"stderr\":\"\"}",
	    "{\"exitCode\":1e300,\"stdout\":\"\",\"stderr\":\"\"}",
	    "{\"exitCode\":0,\"stdout\":1,\"stderr\":\"\"}",
	    "{\"exitCode\":0,\"stdout\":\"\",\"stderr\":null}",
	    "{\"exitCode\":0,\"stdout\":\"\",\"stderr\":\"\",\"truncated\":\"no\"}",
	    "{\"exitCode\":0,\"stdout\":\"\",\"stderr\":\"\",\"durationMillis\":-5}",
	    "{\"exitCode\":0,\"stdout\":\"\",\"stderr\":\"\"",
	    "<html>502 Bad Gateway</html>",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_ST(backend_json_exec(bad[i], strlen(bad[i]), &r),
			 BACKEND_BAD_ANSWER);
		CHECK(r.out == NULL && r.err == NULL);
	}
	/* Every byte of an output stream: NULs, escapes, raw bytes. */
	{
		static const struct {
			const char *json, *want;
			size_t want_len;
		} streams[] = {
		    {"{\"exitCode\":0,\"stdout\":\"a\\u0000b\",\"stderr\":\"\\u0000\"}",
		     "a\0b", 3},
		    /* Python's surrogateescape: the bytes that were not UTF-8. */
		    {"{\"exitCode\":0,\"stdout\":\"\\udcff\\udc80x\",\"stderr\":\"\"}",
		     "\xff\x80x", 3},
		    /* Another lone surrogate keeps its 3-byte form; a pair is
		     * one code point. */
		    {"{\"exitCode\":0,\"stdout\":\"\\ud800|\\ud83d\\ude00\",\"stderr\":"
		     "\"\"}",
		     "\xed\xa0\x80|\xf0\x9f\x98\x80", 8},
		    {"{\"exitCode\":0,\"stdout\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\","
		     "\"stderr\":\"\"}",
		     "\"\\/\b\f\n\r\t\xc3\xa9", 10},
		    /* Raw bytes inside the string, as cJSON takes them. */
		    {"{\"exitCode\":0,\"stdout\":\"\x01\xff\",\"stderr\":\"\"}",
		     "\x01\xff", 2},
		    /* The member itself: escaped name, first of duplicates, not
		     * one inside another value, after a byte order mark. */
		    {"{\"exitCode\":0,\"\\u0073tdout\":\"first\",\"stdout\":\"second\","
		     "\"stderr\":\"\"}",
		     "first", 5},
		    {"{\"x\":{\"stdout\":\"inner\"},\"y\":[\"stdout\",{\"a\":\"}\"}],"
		     "\"z\":-1.5e3,"
		     "\"exitCode\":0,\"stdout\":\"outer\",\"stderr\":\"\"}",
		     "outer", 5},
		    /* Names compare as C strings, as cJSON compares them. */
		    {"{\"exitCode\":0,\"stdout\\u0000x\":\"A\",\"stdout\":\"B\","
		     "\"stderr\":\"\"}",
		     "A", 1},
		    {"\xef\xbb\xbf {\"exitCode\":0,\"stdout\":\"bom\",\"stderr\":\"\"}",
		     "bom", 3},
		};
		for (size_t i = 0; i < sizeof(streams) / sizeof(streams[0]); i++) {
			CHECK_ST(backend_json_exec(streams[i].json,
						   strlen(streams[i].json), &r),
				 BACKEND_OK);
			CHECK_EQ(r.out_len, streams[i].want_len);
			CHECK(r.out && r.out_len == streams[i].want_len &&
			      memcmp(r.out, streams[i].want, r.out_len) == 0 &&
			      r.out[r.out_len] == '\0');
			if (i == 0)
				CHECK(r.err_len == 1 && r.err[0] == '\0');
			backend_exec_result_clear(&r);
		}
	}
	/* Not NUL-terminated: only len bytes are read. */
	{
		char buf[] = "{\"exitCode\":0,\"stdout\":\"\",\"stderr\":\"\"}GARBAGE";

		CHECK_ST(backend_json_exec(buf, strlen(buf) - 7, &r), BACKEND_OK);
		backend_exec_result_clear(&r);
	}
}

static void listings(void)
{
	struct backend_listing l;
	const char *hostile = "{\"entries\":["
			      "{\"name\":\"b.txt\",\"size\":12,\"isDir\":false},"
			      "{\"name\":\"a dir\",\"size\":0,\"isDir\":true},"
			      "{\"name\":\"\",\"size\":1,\"isDir\":false},"
			      "{\"name\":\".\",\"size\":1,\"isDir\":true},"
			      "{\"name\":\"..\",\"size\":1,\"isDir\":true},"
			      "{\"name\":\"x/y\",\"size\":1,\"isDir\":false},"
			      "{\"name\":\"ctl\\u0001\",\"size\":1,\"isDir\":false},"
			      "{\"name\":\"nl\\n\",\"size\":1,\"isDir\":false},"
			      "{\"name\":\"neg\",\"size\":-1,\"isDir\":false},"
			      "{\"name\":\"frac\",\"size\":1.5,\"isDir\":false},"
			      "{\"name\":\"huge\",\"size\":1e30,\"isDir\":false},"
			      "{\"name\":\"strsize\",\"size\":\"12\",\"isDir\":false},"
			      "{\"name\":\"nodir\",\"size\":1},"
			      "{\"name\":7,\"size\":1,\"isDir\":false},"
			      "{\"size\":1,\"isDir\":false},"
			      "\"just a string\","
			      "[1,2],"
			      "null,"
			      "{\"name\":\"b.txt\",\"size\":99,\"isDir\":false},"
			      "{\"name\":\"caf\\u00e9 #?%\",\"size\":5,\"isDir\":false}"
			      "]}";

	CHECK_ST(backend_json_listing(hostile, strlen(hostile), &l), BACKEND_OK);
	CHECK(l.count == 3);
	CHECK(l.dropped == 17);
	if (l.count == 3) {
		CHECK(strcmp(l.entries[0].name, "a dir") == 0 && l.entries[0].is_dir);
		CHECK(strcmp(l.entries[1].name, "b.txt") == 0 &&
		      l.entries[1].size == 12 && !l.entries[1].is_dir);
		CHECK(strcmp(l.entries[2].name, "caf\xc3\xa9 #?%") == 0 &&
		      l.entries[2].size == 5);
	}
	backend_listing_clear(&l);
	CHECK(l.entries == NULL && l.count == 0);

	/* A name in lone surrogate escapes (valid JSON, not Unicode: what
	 * Python and Node servers send for a name that is not UTF-8) is
	 * dropped and counted; the rest of the listing stands. */
	CHECK_ST(
	    backend_json_listing(
		S("{\"entries\":[{\"name\":\"\\ud800abc\",\"size\":1,\"isDir\":false},"
		  "{\"name\":\"bad\\udcff\",\"size\":1,\"isDir\":true},"
		  "{\"name\":\"\\udc00\\ud800\",\"size\":1,\"isDir\":false},"
		  "{\"name\":\"smile\\ud83d\\ude00\",\"size\":2,\"isDir\":false},"
		  "{\"name\":\"ok.txt\",\"size\":3,\"isDir\":false}]}"),
		&l),
	    BACKEND_OK);
	CHECK(l.count == 2 && l.dropped == 3);
	if (l.count == 2) {
		CHECK(strcmp(l.entries[0].name, "ok.txt") == 0 && l.entries[0].size == 3);
		CHECK(strcmp(l.entries[1].name, "smile\xf0\x9f\x98\x80") == 0);
	}
	backend_listing_clear(&l);

	CHECK_ST(backend_json_listing(S("{\"entries\":[]}"), &l), BACKEND_OK);
	CHECK(l.count == 0 && l.dropped == 0);
	backend_listing_clear(&l);
	/* Large sizes up to 2^53 survive. */
	CHECK_ST(backend_json_listing(S("{\"entries\":[{\"name\":\"big\",\"size\":"
					"9007199254740992,\"isDir\":false}]}"),
				      &l),
		 BACKEND_OK);
	CHECK(l.count == 1 && l.entries[0].size == 9007199254740992ull);
	backend_listing_clear(&l);

	CHECK_ST(backend_json_listing(S("{\"entries\":{}}"), &l), BACKEND_BAD_ANSWER);
	CHECK_ST(backend_json_listing(S("{}"), &l), BACKEND_BAD_ANSWER);
	CHECK_ST(backend_json_listing(S("[]"), &l), BACKEND_BAD_ANSWER);
	CHECK_ST(backend_json_listing(S("plain file bytes"), &l), BACKEND_BAD_ANSWER);
	CHECK_ST(backend_json_listing(NULL, 0, &l), BACKEND_BAD_ANSWER);
	CHECK(l.entries == NULL);
}

static void sandboxes(void)
{
	struct backend_sandbox s;
	struct backend_sandbox_list l;

	CHECK_ST(
	    backend_json_sandbox(S("{\"id\":\"sb-1\",\"poolId\":\"default\",\"status\":"
				   "\"ready\",\"url\":\"http://127.0.0.1:4000\","
				   "\"urls\":{\"3000\":\"x\"},\"cpu\":1}"),
				 &s),
	    BACKEND_OK);
	CHECK(strcmp(s.id, "sb-1") == 0 && strcmp(s.pool, "default") == 0);
	CHECK(s.state == BACKEND_SANDBOX_READY && s.url && !s.image && !s.error);
	backend_sandbox_clear(&s);
	CHECK(s.id == NULL);

	CHECK_ST(backend_json_sandbox(S("{\"id\":\"x\",\"status\":\"failed\",\"error\":"
					"\"no capacity\",\"url\":null,\"poolId\":\"\"}"),
				      &s),
		 BACKEND_OK);
	CHECK(s.state == BACKEND_SANDBOX_FAILED && !s.url && !s.pool &&
	      strcmp(s.error, "no capacity") == 0);
	backend_sandbox_clear(&s);
	CHECK_ST(backend_json_sandbox(S("{\"id\":\"x\",\"status\":\"hibernating\"}"), &s),
		 BACKEND_OK);
	CHECK(s.state == BACKEND_SANDBOX_UNKNOWN_STATE);
	backend_sandbox_clear(&s);

	static const char *bad[] = {
	    "{\"status\":\"ready\"}",
	    "{\"id\":\"x\"}",
	    "{\"id\":5,\"status\":\"ready\"}",
	    "{\"id\":\"x\",\"status\":true}",
	    "{\"id\":\"Bad Id\",\"status\":\"ready\"}",
	    "{\"id\":\"../etc\",\"status\":\"ready\"}",
	    "{\"id\":\"x\",\"status\":\"ready\",\"url\":\"file:///etc/passwd\"}",
	    "{\"id\":\"x\",\"status\":\"ready\",\"url\":\"javascript:x\"}",
	    "{\"id\":\"x\",\"status\":\"ready\",\"url\":7}",
	    "{\"id\":\"x\",\"status\":\"ready\",\"poolId\":[]}",
	    "{\"id\":\"x\",\"status\":\"ready\",\"error\":{}}",
	    "[]",
	    "",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_ST(backend_json_sandbox(bad[i], strlen(bad[i]), &s),
			 BACKEND_BAD_ANSWER);
		CHECK(s.id == NULL && s.url == NULL);
	}

	CHECK_ST(
	    backend_json_sandbox_list(
		S("{\"sandboxes\":[{\"id\":\"a\",\"status\":\"ready\"},{\"id\":\"B\","
		  "\"status\":\"ready\"},3,{\"id\":\"c\",\"status\":\"creating\","
		  "\"url\":\"https://c.example\"}]}"),
		&l),
	    BACKEND_OK);
	CHECK(l.count == 2 && l.dropped == 2);
	CHECK(l.count == 2 && strcmp(l.items[1].id, "c") == 0 &&
	      l.items[1].state == BACKEND_SANDBOX_CREATING);
	backend_sandbox_list_clear(&l);
	/* A lone surrogate drops its sandbox, not the list. */
	CHECK_ST(backend_json_sandbox_list(
		     S("{\"sandboxes\":[{\"id\":\"a\\ud800\",\"status\":\"ready\"},"
		       "{\"id\":\"b\",\"status\":\"ready\"}]}"),
		     &l),
		 BACKEND_OK);
	CHECK(l.count == 1 && l.dropped == 1);
	backend_sandbox_list_clear(&l);
	CHECK_ST(backend_json_sandbox_list(S("{\"sandboxes\":null}"), &l),
		 BACKEND_BAD_ANSWER);
	CHECK_ST(backend_json_sandbox_list(S("{\"items\":[]}"), &l), BACKEND_BAD_ANSWER);
}

static void errors_and_requests(void)
{
	char msg[16];
	char *s;

	CHECK(backend_json_error_message(S("{\"error\":\"pool exhausted\"}"), msg,
					 sizeof(msg)));
	CHECK(strcmp(msg, "pool exhausted") == 0);
	CHECK(backend_json_error_message(S("{\"error\":\"a very long message here\"}"),
					 msg, sizeof(msg)));
	CHECK(strlen(msg) == sizeof(msg) - 1);
	CHECK(backend_json_error_message(S("{\"error\":\"two\\nlines\"}"), msg,
					 sizeof(msg)));
	CHECK(strcmp(msg, "two?lines") == 0);
	CHECK(!backend_json_error_message(S("{\"error\":5}"), msg, sizeof(msg)));
	CHECK(!backend_json_error_message(S("not json"), msg, sizeof(msg)));
	CHECK(backend_json_health(S("{\"status\":\"ok\"}")));
	CHECK(!backend_json_health(S("{\"status\":\"starting\"}")));
	CHECK(!backend_json_health(S("ok")));

	s = backend_json_exec_request("echo \"hi\"\n", 30);
	CHECK(s &&
	      strcmp(s, "{\"command\":\"echo \\\"hi\\\"\\n\",\"timeoutSeconds\":30}") ==
		  0);
	free(s);
	CHECK_ST(backend_json_create_request(
		     &(struct backend_create_request){
			 .id = "a", .pool = "default", .idle_timeout_s = 60},
		     &s),
		 BACKEND_OK);
	CHECK(
	    s &&
	    strcmp(s, "{\"id\":\"a\",\"pool\":\"default\",\"idleTimeoutSeconds\":60}") ==
		0);
	free(s);
	CHECK_ST(
	    backend_json_create_request(
		&(struct backend_create_request){.image = "img:1", .port = 3000}, &s),
	    BACKEND_OK);
	CHECK(s && strcmp(s, "{\"image\":\"img:1\",\"port\":3000}") == 0);
	free(s);
}

/* The create body: the spec as given, the struct's members over it. */
static void create_specs(void)
{
	static const struct {
		struct backend_create_request req;
		const char *want; /* NULL: refused as BACKEND_BAD_REQUEST */
	} cases[] = {
	    /* The spec alone, as given. */
	    {{.spec_json = "{\"pool\":\"py\",\"environment\":{\"A\":\"1\"},"
			   "\"ports\":[8080],\"command\":\"serve\"}"},
	     "{\"pool\":\"py\",\"environment\":{\"A\":\"1\"},\"ports\":[8080],"
	     "\"command\":\"serve\"}"},
	    /* The struct's id, pool, bounds win; the spec's image and port go. */
	    {{.id = "mine",
	      .pool = "py",
	      .idle_timeout_s = 60,
	      .send_timeout = true,
	      .timeout_s = 0,
	      .spec_json = "{\"id\":\"theirs\",\"image\":\"x:1\",\"port\":9,"
			   "\"timeoutSeconds\":5,\"idleTimeoutSeconds\":7,"
			   "\"artifacts\":[{\"a\":1}]}"},
	     "{\"artifacts\":[{\"a\":1}],\"id\":\"mine\",\"pool\":\"py\","
	     "\"idleTimeoutSeconds\":60,\"timeoutSeconds\":0}"},
	    /* The struct's image removes the spec's pool. */
	    {{.image = "img:2",
	      .port = 3000,
	      .spec_json = "{\"pool\":\"py\",\"cpu\":0.5,\"memory\":256}"},
	     "{\"cpu\":0.5,\"memory\":256,\"image\":\"img:2\",\"port\":3000}"},
	    /* Unset members leave the spec's fields alone; a repeated field
	     * the struct sets is sent once. */
	    {{.id = "a",
	      .spec_json = "{\"id\":\"b\",\"id\":\"c\",\"idleTimeoutSeconds\":7,"
			   "\"timeoutSeconds\":9,\"image\":\"i\",\"port\":1}"},
	     "{\"idleTimeoutSeconds\":7,\"timeoutSeconds\":9,\"image\":\"i\","
	     "\"port\":1,\"id\":\"a\"}"},
	    {{.pool = "p", .send_timeout = true, .timeout_s = 3600, .spec_json = "{}"},
	     "{\"pool\":\"p\",\"timeoutSeconds\":3600}"},
	    {{.pool = "p", .spec_json = "[1]"}, NULL},
	    {{.pool = "p", .spec_json = "\"str\""}, NULL},
	    {{.pool = "p", .spec_json = "{\"a\":"}, NULL},
	    {{.pool = "p", .spec_json = ""}, NULL},
	    {{.pool = "p", .spec_json = "null"}, NULL},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		char *s = (char *)"unset";
		enum backend_status st = backend_json_create_request(&cases[i].req, &s);

		if (!cases[i].want) {
			CHECK_ST(st, BACKEND_BAD_REQUEST);
			CHECK(s == NULL);
			continue;
		}
		CHECK_ST(st, BACKEND_OK);
		CHECK(s && strcmp(s, cases[i].want) == 0);
		if (s && strcmp(s, cases[i].want) != 0)
			printf("case %zu: got %s\n", i, s);
		free(s);
	}
}

/* Pools: the list and one pool; absent fields, malformed entries. */
static void pools(void)
{
	struct backend_pool_list l;
	static const char *const bad[] = {
	    "{\"pools\":null}", "{}", "[]", "not json", "{\"pools\":{}}",
	};
	static const char *const bad_one[] = {
	    "{\"image\":\"x\"}",
	    "{\"id\":\"\"}",
	    "{\"id\":\"a/b\"}",
	    "{\"id\":5}",
	    "{\"id\":\"p\",\"size\":-1}",
	    "{\"id\":\"p\",\"warm\":1.5}",
	    "{\"id\":\"p\",\"claimed\":\"1\"}",
	    "{\"id\":\"p\",\"image\":7}",
	    "[{\"id\":\"p\"}]",
	};

	CHECK_ST(backend_json_pool_list(
		     S("{\"pools\":[{\"id\":\"py\",\"image\":\"python:3.12-slim\","
		       "\"size\":4,\"warm\":4,\"claimed\":1},"
		       "{\"id\":\"bare\",\"image\":null,\"size\":null},"
		       "{\"id\":\"bad\",\"size\":\"four\"},{\"image\":\"x\"},7,"
		       "{\"id\":\"ctl\\n\"},{\"id\":\"node\",\"image\":\"\","
		       "\"size\":0,\"extra\":[1]}]}"),
		     &l),
		 BACKEND_OK);
	CHECK(l.count == 3 && l.dropped == 4);
	if (l.count == 3) {
		CHECK(strcmp(l.items[0].id, "py") == 0 && l.items[0].image &&
		      strcmp(l.items[0].image, "python:3.12-slim") == 0 &&
		      l.items[0].size == 4 && l.items[0].warm == 4 &&
		      l.items[0].claimed == 1);
		CHECK(strcmp(l.items[1].id, "bare") == 0 && l.items[1].image == NULL &&
		      l.items[1].size == -1 && l.items[1].warm == -1 &&
		      l.items[1].claimed == -1);
		CHECK(strcmp(l.items[2].id, "node") == 0 && l.items[2].image == NULL &&
		      l.items[2].size == 0);
	}
	backend_pool_list_clear(&l);
	CHECK(l.items == NULL && l.count == 0);
	CHECK_ST(backend_json_pool_list(S("{\"pools\":[]}"), &l), BACKEND_OK);
	CHECK(l.count == 0 && l.dropped == 0);
	backend_pool_list_clear(&l);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		CHECK_ST(backend_json_pool_list(bad[i], strlen(bad[i]), &l),
			 BACKEND_BAD_ANSWER);
		CHECK(l.items == NULL && l.count == 0);
	}
	CHECK_ST(backend_json_pool_list(NULL, 0, &l), BACKEND_BAD_ANSWER);

	CHECK_ST(backend_json_pool(S("{\"id\":\"py\",\"image\":\"python:3.12-slim\","
				     "\"size\":4,\"warm\":3,\"claimed\":1}"),
				   &l),
		 BACKEND_OK);
	CHECK(l.count == 1 && l.dropped == 0 && strcmp(l.items[0].id, "py") == 0 &&
	      l.items[0].warm == 3);
	backend_pool_list_clear(&l);
	for (size_t i = 0; i < sizeof(bad_one) / sizeof(*bad_one); i++) {
		CHECK_ST(backend_json_pool(bad_one[i], strlen(bad_one[i]), &l),
			 BACKEND_BAD_ANSWER);
		CHECK(l.items == NULL && l.count == 0);
	}
	CHECK(backend_pool_id_valid("python-3.12_slim"));
	CHECK(!backend_pool_id_valid("") && !backend_pool_id_valid("a/b") &&
	      !backend_pool_id_valid("a\tb") && !backend_pool_id_valid(NULL));
}

int main(void)
{
	exec_answers();
	listings();
	sandboxes();
	errors_and_requests();
	create_specs();
	pools();
	return check_done("test_json");
}
