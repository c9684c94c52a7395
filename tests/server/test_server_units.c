/* Unit tests of sandbox-server's pure parts: paths, faults, ids, JSON
 * string escaping, and resolution beneath a directory. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec.h"
#include "faults.h"
#include "files.h"
#include "jsonstr.h"
#include "orch.h"

static int failures;

#define CHECK(cond)                                                                      \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, \
				#cond);                                                  \
			failures++;                                                      \
		}                                                                        \
	} while (0)

static void check_norm(const char *in, int status, const char *want)
{
	struct files_error fe = {0};
	char *out = NULL;
	int rc = files_normalize(in, &out, &fe);

	CHECK(rc == status);
	if (rc == 0) {
		CHECK(strcmp(out, want) == 0);
		free(out);
	}
}

static void test_normalize(void)
{
	check_norm("", 0, "");
	check_norm("a", 0, "a");
	check_norm("a/b/c.txt", 0, "a/b/c.txt");
	check_norm("a//b/./c/", 0, "a/b/c");
	check_norm("./a", 0, "a");
	check_norm("...", 0, "...");
	check_norm("..a/b..", 0, "..a/b..");
	check_norm("/etc/passwd", 400, NULL);
	check_norm("..", 400, NULL);
	check_norm("a/../b", 400, NULL);
	check_norm("a/..", 400, NULL);
	check_norm("../", 400, NULL);
}

static void test_faults(void)
{
	struct faults f = {0};
	cJSON *j;

	CHECK(!faults_any(&f));
	CHECK(faults_set(&f, "lose_answer") == NULL && f.lose_answer);
	CHECK(faults_set(&f, "lose_answer=false") == NULL && !f.lose_answer);
	CHECK(faults_set(&f, "error_rate=0.25") == NULL && f.error_rate == 0.25);
	CHECK(faults_set(&f, "error_rate=2") != NULL);
	CHECK(faults_set(&f, "delay_ms=150") == NULL && f.delay_ms == 150);
	CHECK(faults_set(&f, "delay_ms") != NULL);
	CHECK(faults_set(&f, "routes=files") == NULL && f.routes == FAULT_ROUTES_FILES);
	CHECK(faults_set(&f, "routes=nope") != NULL);
	CHECK(faults_set(&f, "bogus") != NULL);
	CHECK(faults_set(&f, "truncate_answer") == NULL && f.truncate_answer);
	CHECK(faults_set(&f, "body_rate_kbps=64") == NULL && f.body_rate_kbps == 64);
	CHECK(faults_set(&f, "body_rate_kbps=-1") != NULL);
	CHECK(faults_set(&f, "refuse_chunked") == NULL && f.refuse_chunked);
	CHECK(faults_set(&f, "drop_chunked_kb=64") == NULL && f.drop_chunked_kb == 64);
	CHECK(faults_set(&f, "drop_chunked_kb") != NULL);
	CHECK(faults_any(&f));
	{
		struct faults g = {0};
		cJSON *in =
		    cJSON_Parse("{\"create_lose_answer\": true, \"hide_new_ms\": 500}");

		CHECK(faults_set(&g, "create_lose_answer") == NULL &&
		      g.create_lose_answer);
		CHECK(faults_any(&g));
		CHECK(faults_set(&g, "create_lose_answer=false") == NULL &&
		      !g.create_lose_answer && !faults_any(&g));
		CHECK(faults_set(&g, "hide_new_ms=250") == NULL && g.hide_new_ms == 250);
		CHECK(faults_any(&g));
		CHECK(faults_set(&g, "hide_new_ms") != NULL);
		CHECK(faults_set(&g, "hide_new_ms=-3") != NULL);
		CHECK(faults_from_json(&g, in) == NULL && g.create_lose_answer &&
		      g.hide_new_ms == 500 && !g.lose_answer);
		cJSON_Delete(in);
		in = faults_to_json(&g);
		CHECK(cJSON_IsTrue(cJSON_GetObjectItem(in, "create_lose_answer")));
		CHECK(cJSON_GetObjectItem(in, "hide_new_ms")->valuedouble == 500);
		cJSON_Delete(in);
		in = cJSON_Parse("{\"hide_new_ms\": \"x\"}");
		CHECK(faults_from_json(&g, in) != NULL);
		cJSON_Delete(in);
	}

	j = cJSON_Parse("{\"hostile_listing\": true, \"routes\": \"orchestrator\"}");
	CHECK(faults_from_json(&f, j) == NULL);
	CHECK(f.hostile_listing && !f.lose_answer && f.delay_ms == 0 &&
	      f.routes == FAULT_ROUTES_ORCHESTRATOR);
	cJSON_Delete(j);
	j = cJSON_Parse("{\"lose_answer\": 1}");
	CHECK(faults_from_json(&f, j) != NULL);
	CHECK(f.hostile_listing); /* unchanged on error */
	cJSON_Delete(j);
	j = cJSON_Parse("{\"unknown\": true}");
	CHECK(faults_from_json(&f, j) != NULL);
	cJSON_Delete(j);

	j = faults_to_json(&f);
	CHECK(cJSON_IsTrue(cJSON_GetObjectItem(j, "hostile_listing")));
	CHECK(strcmp(cJSON_GetObjectItem(j, "routes")->valuestring, "orchestrator") == 0);
	cJSON_Delete(j);
}

static void test_ids(void)
{
	char long_id[65];

	CHECK(orch_valid_id("a"));
	CHECK(orch_valid_id("default-0123abcd"));
	CHECK(orch_valid_id("0abc"));
	CHECK(!orch_valid_id(""));
	CHECK(!orch_valid_id("-a"));
	CHECK(!orch_valid_id("a-"));
	CHECK(!orch_valid_id("A"));
	CHECK(!orch_valid_id("a_b"));
	CHECK(!orch_valid_id("a.b"));
	memset(long_id, 'x', 64);
	long_id[64] = '\0';
	CHECK(!orch_valid_id(long_id));
	long_id[63] = '\0';
	CHECK(orch_valid_id(long_id));
}

static void check_escape(const char *in, size_t n, const char *want)
{
	char buf[256], *p = buf;

	jsonstr_escape(&p, (const unsigned char *)in, n);
	*p = '\0';
	if (strcmp(buf, want) != 0)
		fprintf(stderr, "escape: got [%s] want [%s]\n", buf, want);
	CHECK(strcmp(buf, want) == 0);
}

static void test_escape(void)
{
	check_escape("plain", 5, "plain");
	check_escape("q\"b\\", 4, "q\\\"b\\\\");
	check_escape("a\nb\tc\r", 6, "a\\nb\\tc\\r");
	check_escape("\0\x01\x7f", 3, "\\u0000\\u0001\\u007f");
	check_escape("\xc3\xa9", 2, "\xc3\xa9");		 /* é */
	check_escape("\xe2\x82\xac", 3, "\xe2\x82\xac");	 /* € */
	check_escape("\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80"); /* emoji */
	check_escape("\xff", 1, "\xef\xbf\xbd");		 /* invalid byte */
	check_escape("\xc3", 1, "\xef\xbf\xbd");		 /* cut sequence */
	check_escape("\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd"); /* overlong */
	check_escape("\xe0\x80\xaf", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	check_escape("\xed\xa0\x80", 3,
		     "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"); /* surrogate */
	check_escape("\xf4\x90\x80\x80", 4,
		     "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"); /* > U+10FFFF */
}

static void test_beneath(void)
{
	char dir[] = "/tmp/sbx-unit-XXXXXX";
	char path[256];
	struct files_error fe;
	const char *name;
	int wsfd, fd;

	CHECK(mkdtemp(dir) != NULL);
	wsfd = open(dir, O_RDONLY | O_DIRECTORY);
	CHECK(wsfd >= 0);
	snprintf(path, sizeof(path), "%s/out", dir);
	CHECK(symlink("/", path) == 0);
	snprintf(path, sizeof(path), "%s/in", dir);
	CHECK(symlink(".", path) == 0);

	fd = files_open_beneath(wsfd, "out/etc", O_RDONLY | O_DIRECTORY, 0);
	CHECK(fd == -EXDEV);
	fd = files_open_beneath(wsfd, "in", O_RDONLY | O_DIRECTORY, 0);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	CHECK(files_open_beneath(wsfd, "missing", O_RDONLY, 0) == -ENOENT);

	/* Parents are created; a parent through an outside link is refused. */
	fd = files_open_parent(wsfd, "x/y/z/file", true, &name, &fe);
	CHECK(fd >= 0 && strcmp(name, "file") == 0);
	if (fd >= 0)
		close(fd);
	snprintf(path, sizeof(path), "%s/x/y/z", dir);
	struct stat st;

	CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
	fd = files_open_parent(wsfd, "out/tmp/sbx-unit-escape/f", true, &name, &fe);
	CHECK(fd < 0 && fe.status == 403);
	CHECK(access("/tmp/sbx-unit-escape", F_OK) != 0);

	/* Deleting a link removes the link only; trees go entirely. */
	CHECK(files_delete(wsfd, "out", &fe) == 0);
	CHECK(access("/etc", F_OK) == 0);
	CHECK(files_delete(wsfd, "x", &fe) == 0);
	snprintf(path, sizeof(path), "%s/x", dir);
	CHECK(access(path, F_OK) != 0);
	CHECK(files_delete(wsfd, "x", &fe) == 404);
	CHECK(files_delete(wsfd, "", &fe) == 400);
	CHECK(files_delete(wsfd, "in", &fe) == 0);
	close(wsfd);
	CHECK(rmdir(dir) == 0);
}

static void test_exec(void)
{
	struct exec_result res;
	char err[128];
	int cwd = open("/", O_RDONLY | O_DIRECTORY);
	struct exec_spec spec = {
	    .shell = "/bin/sh", .cwd_fd = cwd, .command = "pwd; exit 3"};

	CHECK(exec_run(&spec, &res, err, sizeof(err)) == 0);
	CHECK(res.exit_code == 3 && res.out_len == 2 && memcmp(res.out, "/\n", 2) == 0);
	exec_result_free(&res);

	spec.command = "kill -9 $$";
	CHECK(exec_run(&spec, &res, err, sizeof(err)) == 0);
	CHECK(res.exit_code == 128 + 9 && !res.timed_out);
	exec_result_free(&res);

	spec.command = "sleep 5";
	spec.timeout_ms = 200;
	CHECK(exec_run(&spec, &res, err, sizeof(err)) == 0);
	CHECK(res.timed_out && res.exit_code == EXEC_TIMEOUT_EXIT);
	CHECK(res.duration_ms >= 190 && res.duration_ms < 2000);
	exec_result_free(&res);

	spec.shell = "/nonexistent/shell";
	CHECK(exec_run(&spec, &res, err, sizeof(err)) == -1);
	close(cwd);
}

int main(void)
{
	test_normalize();
	test_faults();
	test_ids();
	test_escape();
	test_beneath();
	test_exec();
	if (failures)
		fprintf(stderr, "%d checks failed\n", failures);
	return failures ? 1 : 0;
}
