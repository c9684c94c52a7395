/*
 * test_orch.c — the orchestrator client against the real local
 * orchestrator (create, get, list, delete; 401, 404, 409; a lost create
 * reconciled by id, sent once; malformed answers), and against a canned
 * responder for what the local orchestrator never says (429, 403, 415,
 * 502, a bad url, a missing id, an answer cut short, an error message
 * that echoes a secret).
 */
#include <errno.h>
#include <unistd.h>

#include "backend_i.h"
#include "check.h"
#include "harness.h"

static struct server orch;
static struct backend *b;

static void lifecycle(void)
{
	struct backend_orchestrator o = {orch.url, orch.token};
	struct backend_create_request req = {
	    .id = "alpha", .pool = "default", .idle_timeout_s = 600};
	struct backend_sandbox s, s2;
	struct backend_sandbox_list l;
	struct backend_exec_result r;
	struct backend_error e;
	bool found = false;

	CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_OK);
	CHECK(s.id && strcmp(s.id, "alpha") == 0 && s.pool &&
	      strcmp(s.pool, "default") == 0);
	CHECK(s.state == BACKEND_SANDBOX_READY || s.state == BACKEND_SANDBOX_CREATING);
	CHECK(s.url != NULL);
	/* The sandbox's own URL serves the contract. */
	if (s.url) {
		CHECK_ST(backend_health(b, s.url, &e), BACKEND_OK);
		CHECK_ST(backend_execute(b, s.url, "echo hello", 30, &r, &e), BACKEND_OK);
		CHECK(r.out && strcmp(r.out, "hello\n") == 0);
		backend_exec_result_clear(&r);
	}

	/* 409 on create: EEXIST. */
	CHECK_ST(backend_orch_create(b, &o, &req, &s2, &e), BACKEND_CONFLICT);
	CHECK(e.http_status == 409 &&
	      backend_errno(e.status, BACKEND_OP_CREATE) == EEXIST);
	CHECK(strstr(e.message, "live") != NULL);
	check_no_secret(&e, orch.url, orch.port, orch.token);
	/* 404: an unknown pool. */
	req.id = "beta";
	req.pool = "no-such-pool";
	CHECK_ST(backend_orch_create(b, &o, &req, &s2, &e), BACKEND_NOT_FOUND);
	check_no_secret(&e, orch.url, orch.port, orch.token);
	/* 429: the pool is full. */
	req.id = "tiny-one";
	req.pool = "tiny";
	CHECK_ST(backend_orch_create(b, &o, &req, &s2, &e), BACKEND_OK);
	backend_sandbox_clear(&s2);
	req.id = "tiny-two";
	CHECK_ST(backend_orch_create(b, &o, &req, &s2, &e), BACKEND_EXHAUSTED);
	CHECK(e.http_status == 429 &&
	      backend_errno(e.status, BACKEND_OP_CREATE) == EAGAIN);
	printf("pool full: %s\n", e.message);
	check_no_secret(&e, orch.url, orch.port, orch.token);
	CHECK_ST(backend_orch_delete(b, &o, "tiny-one", &e), BACKEND_OK);
	/* A generated id is a valid label. */
	req.id = NULL;
	req.pool = "default";
	CHECK_ST(backend_orch_create(b, &o, &req, &s2, &e), BACKEND_OK);
	CHECK(s2.id && backend_sandbox_id_valid(s2.id) &&
	      strncmp(s2.id, "default-", 8) == 0);
	if (s2.id)
		CHECK_ST(backend_orch_delete(b, &o, s2.id, &e), BACKEND_OK);
	backend_sandbox_clear(&s2);

	CHECK_ST(backend_orch_get(b, &o, "alpha", &s2, &e), BACKEND_OK);
	CHECK(s2.id && strcmp(s2.id, "alpha") == 0 && s2.url && s.url &&
	      strcmp(s2.url, s.url) == 0);
	backend_sandbox_clear(&s2);
	CHECK_ST(backend_orch_get(b, &o, "missing", &s2, &e), BACKEND_NOT_FOUND);
	CHECK(backend_errno(e.status, BACKEND_OP_SANDBOX) == ENOENT);

	CHECK_ST(backend_orch_list(b, &o, &l, &e), BACKEND_OK);
	for (size_t i = 0; i < l.count; i++)
		found |= strcmp(l.items[i].id, "alpha") == 0;
	CHECK(found && l.dropped == 0);
	backend_sandbox_list_clear(&l);

	/* 401: a wrong token, and none. */
	o.token = "wrong-token";
	CHECK_ST(backend_orch_list(b, &o, &l, &e), BACKEND_DENIED);
	CHECK(e.http_status == 401 &&
	      backend_errno(e.status, BACKEND_OP_SANDBOX) == EACCES);
	check_no_secret(&e, orch.url, orch.port, "wrong-token");
	o.token = NULL;
	CHECK_ST(backend_orch_get(b, &o, "alpha", &s2, &e), BACKEND_DENIED);
	o.token = orch.token;

	CHECK_ST(backend_orch_delete(b, &o, "alpha", &e), BACKEND_OK);
	CHECK_ST(backend_orch_delete(b, &o, "alpha", &e), BACKEND_NOT_FOUND);
	CHECK_ST(backend_orch_get(b, &o, "alpha", &s2, &e), BACKEND_NOT_FOUND);
	if (s.url)
		CHECK(backend_health(b, s.url, &e) != BACKEND_OK);
	backend_sandbox_clear(&s);
}

static void lost_create(void)
{
	struct backend_orchestrator o = {orch.url, orch.token};
	struct backend_create_request req = {.id = "lost", .pool = "default"};
	struct backend_sandbox s;
	struct backend_sandbox_list l;
	struct backend_error e;
	long creates;

	/* A keep-alive connection in this thread's handle first. */
	CHECK_ST(backend_orch_list(b, &o, &l, &e), BACKEND_OK);
	backend_sandbox_list_clear(&l);
	creates = admin_stat(orch.url, "creates");
	admin_faults(orch.url, "{\"lose_answer\":true,\"routes\":\"orchestrator\"}");
	CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_ANSWER_LOST);
	check_no_secret(&e, orch.url, orch.port, orch.token);
	admin_faults(orch.url, "{}");
	/* Sent exactly once, and reconciled by reading the id. */
	CHECK(admin_stat(orch.url, "creates") == creates + 1);
	CHECK_ST(backend_orch_get(b, &o, "lost", &s, &e), BACKEND_OK);
	backend_sandbox_clear(&s);

	admin_faults(orch.url, "{\"malformed_json\":true,\"routes\":\"orchestrator\"}");
	req.id = "garbled";
	CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_BAD_ANSWER);
	CHECK(strstr(e.message, "unknown") != NULL);
	CHECK_ST(backend_orch_get(b, &o, "lost", &s, &e), BACKEND_BAD_ANSWER);
	CHECK_ST(backend_orch_list(b, &o, &l, &e), BACKEND_BAD_ANSWER);
	check_no_secret(&e, orch.url, orch.port, orch.token);
	admin_faults(orch.url, "{}");
	CHECK_ST(backend_orch_delete(b, &o, "lost", &e), BACKEND_OK);
	CHECK_ST(backend_orch_delete(b, &o, "garbled", &e), BACKEND_OK);
}

/* The saved record of a sandbox (ROOT/ID/sandbox.json): what the local
 * orchestrator took from the create body. */
static cJSON *record(const char *id)
{
	char path[512], text[8192];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/root/%s/sandbox.json", orch.dir, id);
	f = fopen(path, "r");
	if (!f)
		return NULL;
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	return cJSON_Parse(text);
}

static double record_number(const cJSON *rec, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, name);

	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* A create spec reaches the orchestrator merged with the struct's members. */
static void create_spec(void)
{
	struct backend_orchestrator o = {orch.url, orch.token};
	struct backend_create_request req = {
	    .id = "spec",
	    .pool = "default",
	    .idle_timeout_s = 900,
	    .send_timeout = true,
	    .timeout_s = 120,
	    .spec_json = "{\"id\":\"other\",\"image\":\"x:1\",\"port\":80,"
			 "\"environment\":{\"SPEC_VAR\":\"from-spec\"},"
			 "\"timeoutSeconds\":5,\"idleTimeoutSeconds\":6}"};
	struct backend_sandbox s;
	struct backend_exec_result r;
	struct backend_error e;
	const cJSON *env;
	cJSON *rec;

	CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_OK);
	CHECK(s.id && strcmp(s.id, "spec") == 0 && s.pool &&
	      strcmp(s.pool, "default") == 0 && s.image == NULL);
	rec = record("spec");
	CHECK(rec != NULL);
	env = cJSON_GetObjectItemCaseSensitive(rec, "environment");
	CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(env, "SPEC_VAR")) &&
	      strcmp(cJSON_GetObjectItemCaseSensitive(env, "SPEC_VAR")->valuestring,
		     "from-spec") == 0);
	CHECK(record_number(rec, "timeoutSeconds") == 120);
	CHECK(record_number(rec, "idleTimeoutSeconds") == 900);
	cJSON_Delete(rec);
	if (s.url) {
		CHECK_ST(backend_execute(b, s.url, "echo \"$SPEC_VAR\"", 30, &r, &e),
			 BACKEND_OK);
		CHECK(r.out && strcmp(r.out, "from-spec\n") == 0);
		backend_exec_result_clear(&r);
	}
	backend_sandbox_clear(&s);
	CHECK_ST(backend_orch_delete(b, &o, "spec", &e), BACKEND_OK);

	/* The spec alone: its pool, its id, its bounds. */
	req = (struct backend_create_request){
	    .spec_json = "{\"pool\":\"default\",\"id\":\"spec-only\","
			 "\"timeoutSeconds\":0,\"idleTimeoutSeconds\":60}"};
	CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_OK);
	CHECK(s.id && strcmp(s.id, "spec-only") == 0);
	backend_sandbox_clear(&s);
	rec = record("spec-only");
	CHECK(record_number(rec, "timeoutSeconds") == 0 &&
	      record_number(rec, "idleTimeoutSeconds") == 60);
	cJSON_Delete(rec);
	CHECK_ST(backend_orch_delete(b, &o, "spec-only", &e), BACKEND_OK);

	/* An unknown field: the orchestrator's 400, its message, EINVAL. */
	req = (struct backend_create_request){
	    .id = "spec-bad", .pool = "default", .spec_json = "{\"gpuCount\":1}"};
	CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_INVALID);
	CHECK(e.http_status == 400 &&
	      backend_errno(e.status, BACKEND_OP_CREATE) == EINVAL);
	CHECK(strstr(e.message, "gpuCount") != NULL);
	check_no_secret(&e, orch.url, orch.port, orch.token);
	/* An out-of-range bound the orchestrator refuses too. */
	req.spec_json = "{\"timeoutSeconds\":7200}";
	CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_INVALID);
	CHECK(strstr(e.message, "timeoutSeconds") != NULL);
	CHECK_ST(backend_orch_get(b, &o, "spec-bad", &s, &e), BACKEND_NOT_FOUND);

	/* Refused before sending: not an object, a bound out of range,
	 * neither pool nor image nor spec. */
	{
		long creates = admin_stat(orch.url, "creates");

		req.spec_json = "[\"environment\"]";
		CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_BAD_REQUEST);
		req.spec_json = "{\"environment\":";
		CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_BAD_REQUEST);
		req.spec_json = NULL;
		req.send_timeout = true;
		req.timeout_s = 3601;
		CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_BAD_REQUEST);
		req.timeout_s = -1;
		CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_BAD_REQUEST);
		req.send_timeout = false;
		req.pool = NULL;
		CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_BAD_REQUEST);
		CHECK(admin_stat(orch.url, "creates") == creates);
	}
}

#define HEAD(code)                                                                       \
	"HTTP/1.1 " code "\r\nConnection: close\r\nContent-Type: application/json\r\n"

/* A complete answer with the right Content-Length. */
static const char *answer(const char *status, const char *body)
{
	static char buf[1024];

	snprintf(buf, sizeof(buf), HEAD("%s") "Content-Length: %zu\r\n\r\n%s", status,
		 strlen(body), body);
	return buf;
}

/* The exact body sent, as a server receives it. */
static void create_body(struct canned *c, const struct backend_orchestrator *o)
{
	struct backend_create_request req = {
	    .id = "x",
	    .image = "img:2",
	    .port = 3000,
	    .send_timeout = true,
	    .timeout_s = 0,
	    .spec_json = "{\"pool\":\"py\",\"environment\":{\"K\":\"v\"},"
			 "\"ports\":[8080],\"cpu\":1.5,\"timeoutSeconds\":30}"};
	struct backend_sandbox s;
	struct backend_error e;
	char *body;

	canned_set(c, answer("201 Created", "{\"id\":\"x\",\"status\":\"ready\"}"));
	CHECK_ST(backend_orch_create(b, o, &req, &s, &e), BACKEND_OK);
	backend_sandbox_clear(&s);
	body = canned_last_body(c);
	CHECK(body && strcmp(body, "{\"environment\":{\"K\":\"v\"},\"ports\":[8080],"
				   "\"cpu\":1.5,\"id\":\"x\",\"image\":\"img:2\","
				   "\"port\":3000,\"timeoutSeconds\":0}") == 0);
	if (body)
		printf("create body: %s\n", body);
	free(body);
}

/* Pools, from the local orchestrator (which gives the guide's id, image,
 * size, warm and claimed) and from canned answers. */
static void pools_local(void)
{
	struct backend_orchestrator o = {orch.url, orch.token};
	struct backend_pool_list l;
	struct backend_error e;
	struct backend_stats before, after;
	bool def = false, tiny = false;

	backend_get_stats(b, &before);
	CHECK_ST(backend_orch_pools(b, &o, NULL, &l, &e), BACKEND_OK);
	for (size_t i = 0; i < l.count; i++) {
		def |= strcmp(l.items[i].id, "default") == 0;
		tiny |= strcmp(l.items[i].id, "tiny") == 0;
		CHECK(l.items[i].image && strcmp(l.items[i].image, "local") == 0);
		CHECK(l.items[i].size >= 0 && l.items[i].warm >= 0 && l.items[i].claimed >= 0);
		CHECK(l.items[i].warm + l.items[i].claimed >= l.items[i].size);
	}
	CHECK(def && tiny && l.count == 2 && l.dropped == 0);
	backend_pool_list_clear(&l);
	CHECK_ST(backend_orch_pools(b, &o, "tiny", &l, &e), BACKEND_OK);
	CHECK(l.count == 1 && strcmp(l.items[0].id, "tiny") == 0);
	backend_pool_list_clear(&l);
	CHECK_ST(backend_orch_pools(b, &o, "no-such-pool", &l, &e), BACKEND_NOT_FOUND);
	CHECK(e.http_status == 404 && l.count == 0 && l.items == NULL);
	CHECK(backend_errno(e.status, BACKEND_OP_SANDBOX) == ENOENT);
	/* Encoded on the wire: a name with a space is still one segment. */
	CHECK_ST(backend_orch_pools(b, &o, "no such pool", &l, &e), BACKEND_NOT_FOUND);
	CHECK_ST(backend_orch_pools(b, &o, "../sandbox", &l, &e), BACKEND_BAD_REQUEST);
	CHECK_ST(backend_orch_pools(b, &o, "", &l, &e), BACKEND_BAD_REQUEST);
	o.token = "wrong-token";
	CHECK_ST(backend_orch_pools(b, &o, NULL, &l, &e), BACKEND_DENIED);
	check_no_secret(&e, orch.url, orch.port, "wrong-token");
	backend_get_stats(b, &after);
	CHECK(after.requests[BACKEND_OP_SANDBOX] - before.requests[BACKEND_OP_SANDBOX] ==
	      7);
	CHECK(after.errors - before.errors == 5);
}

static void pools_canned(struct canned *c, const struct backend_orchestrator *o)
{
	struct backend_pool_list l;
	struct backend_error e;

	canned_set(c, answer("200 OK",
			     "{\"pools\":[{\"id\":\"py\",\"image\":\"python:3.12-slim\","
			     "\"size\":4,\"warm\":4,\"claimed\":1},{\"id\":9}]}"));
	CHECK_ST(backend_orch_pools(b, o, NULL, &l, &e), BACKEND_OK);
	CHECK(l.count == 1 && l.dropped == 1 && strcmp(l.items[0].id, "py") == 0 &&
	      strcmp(l.items[0].image, "python:3.12-slim") == 0 && l.items[0].size == 4 &&
	      l.items[0].warm == 4 && l.items[0].claimed == 1);
	backend_pool_list_clear(&l);
	canned_set(c, answer("200 OK", "{\"id\":\"py\",\"size\":2,\"warm\":0}"));
	CHECK_ST(backend_orch_pools(b, o, "py", &l, &e), BACKEND_OK);
	CHECK(l.count == 1 && l.items[0].size == 2 && l.items[0].warm == 0 &&
	      l.items[0].claimed == -1);
	backend_pool_list_clear(&l);
	/* About another pool; malformed; not an object. */
	CHECK_ST(backend_orch_pools(b, o, "node", &l, &e), BACKEND_BAD_ANSWER);
	CHECK(l.items == NULL && l.count == 0);
	canned_set(c, answer("200 OK", "{\"id\":\"py\",\"size\":-2}"));
	CHECK_ST(backend_orch_pools(b, o, "py", &l, &e), BACKEND_BAD_ANSWER);
	canned_set(c, answer("200 OK", "{\"pools\":7}"));
	CHECK_ST(backend_orch_pools(b, o, NULL, &l, &e), BACKEND_BAD_ANSWER);
	CHECK(strcmp(e.message, "pool list does not parse") == 0);
	check_no_secret(&e, c->url, c->port, o->token);
}

static void canned_answers(void)
{
	struct canned c;
	struct backend_orchestrator o;
	struct backend_create_request req = {.id = "x", .pool = "default"};
	struct backend_sandbox s;
	struct backend_error e;
	const char *token = "canned-secret-token";
	char echo[512];

	canned_start(&c);
	o.base_url = c.url;
	o.token = token;
	create_body(&c, &o);
	pools_canned(&c, &o);

	canned_set(&c, answer("429 Too Many Requests", "{\"error\":\"pool exhausted\"}"));
	CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_EXHAUSTED);
	CHECK(e.http_status == 429 && strcmp(e.message, "pool exhausted") == 0);
	CHECK(backend_errno(e.status, BACKEND_OP_CREATE) == EAGAIN);

	canned_set(&c, HEAD("403 Forbidden") "Content-Length: 2\r\n\r\n{}");
	CHECK_ST(backend_orch_get(b, &o, "x", &s, &e), BACKEND_DENIED);
	CHECK(strcmp(e.message, "HTTP 403") == 0);
	canned_set(&c, HEAD("415 Unsupported Media Type") "Content-Length: 0\r\n\r\n");
	CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_INVALID);
	canned_set(
	    &c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 14\r\n\r\n<html>x</html>");
	CHECK_ST(backend_orch_list(b, &o, &(struct backend_sandbox_list){0}, &e),
		 BACKEND_SERVER_ERROR);
	CHECK(strcmp(e.message, "HTTP 502") == 0);
	/* A status with a url that is not http(s): refused. */
	canned_set(
	    &c,
	    answer("201 Created",
		   "{\"id\":\"x\",\"status\":\"ready\",\"url\":\"file:///etc/passwd\"}"));
	CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_BAD_ANSWER);
	CHECK(s.id == NULL && s.url == NULL);
	/* Missing id; wrong types. */
	canned_set(&c, answer("201 Created", "{\"status\":\"ready\"}"));
	CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_BAD_ANSWER);
	canned_set(&c, answer("200 OK", "{\"id\":\"x\",\"status\":123}"));
	CHECK_ST(backend_orch_get(b, &o, "x", &s, &e), BACKEND_BAD_ANSWER);
	/* An answer about another sandbox. */
	canned_set(&c, answer("200 OK", "{\"id\":\"y\",\"status\":\"ready\"}"));
	CHECK_ST(backend_orch_get(b, &o, "x", &s, &e), BACKEND_BAD_ANSWER);
	/* An answer cut short: the outcome is unknown. */
	canned_set(&c, HEAD("201 Created") "Content-Length: 500\r\n\r\n{\"id\":\"x\",");
	CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_ANSWER_LOST);
	check_no_secret(&e, c.url, c.port, token);
	/* Nothing at all. */
	canned_set(&c, "");
	CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_ANSWER_LOST);
	check_no_secret(&e, c.url, c.port, token);
	/* A server that echoes secrets in its error: they never pass on. */
	{
		char body[400];

		snprintf(body, sizeof(body),
			 "{\"error\":\"bad token %s for %s/v1/sandbox at 127.0.0.1:%d\"}",
			 token, c.url, c.port);
		snprintf(echo, sizeof(echo),
			 HEAD("400 Bad Request") "Content-Length: %zu\r\n\r\n%s",
			 strlen(body), body);
		canned_set(&c, echo);
		CHECK_ST(backend_orch_create(b, &o, &req, &s, &e), BACKEND_INVALID);
		CHECK(strstr(e.message, "[redacted]") != NULL);
		check_no_secret(&e, c.url, c.port, token);
	}
	/* The sandbox contract's calls too: 429 on a file call. */
	canned_set(&c, HEAD("429 Too Many Requests") "Content-Length: 0\r\n\r\n");
	CHECK_ST(backend_health(b, c.url, &e), BACKEND_EXHAUSTED);
	canned_stop(&c);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	server_start_orchestrator(&orch);
	b = backend_new(NULL);
	lifecycle();
	lost_create();
	create_spec();
	pools_local();
	canned_answers();
	backend_free(b);
	server_stop(&orch);
	return check_done("test_orch");
}
