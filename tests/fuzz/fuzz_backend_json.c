/*
 * fuzz_backend_json.c — libFuzzer harness for the backend's JSON decoders:
 * the execute answer, the directory listing, one sandbox status, the
 * sandbox list, and (together) the error message, the health answer and
 * the pools. The first byte picks the decoder;
 * every decoder must return without crashing or leaking, and what it
 * accepts must hold its invariants.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend_json_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

/* The stream the decoder read from the text is the string cJSON reads,
 * wherever cJSON can read it whole: up to its first NUL, and all of it
 * when it has none. */
static void same_as_cjson(const char *buf, size_t len, const char *key, const char *got,
			  size_t got_len)
{
	cJSON *root = cJSON_ParseWithLength(buf, len);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);

	if (cJSON_IsString(v)) {
		size_t n = strlen(v->valuestring);

		check(n <= got_len && memcmp(got, v->valuestring, n) == 0);
		check(n == got_len || got[n] == '\0');
	}
	cJSON_Delete(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf;
	size_t len;

	if (size < 1)
		return 0;
	buf = (const char *)data + 1;
	len = size - 1;
	switch (data[0] % 5) {
	case 0: {
		struct backend_exec_result r;

		if (backend_json_exec(buf, len, &r) == BACKEND_OK) {
			check(r.out && r.err && r.out[r.out_len] == '\0' &&
			      r.err[r.err_len] == '\0' && r.out_len < len &&
			      r.err_len < len && r.duration_ms >= 0);
			same_as_cjson(buf, len, "stdout", r.out, r.out_len);
			same_as_cjson(buf, len, "stderr", r.err, r.err_len);
			backend_exec_result_clear(&r);
		}
		break;
	}
	case 1: {
		struct backend_listing l;

		if (backend_json_listing(buf, len, &l) == BACKEND_OK) {
			for (size_t i = 0; i < l.count; i++) {
				check(backend_name_valid(l.entries[i].name));
				check(i == 0 || strcmp(l.entries[i - 1].name,
						       l.entries[i].name) < 0);
			}
			backend_listing_clear(&l);
		}
		break;
	}
	case 2: {
		struct backend_sandbox s;

		if (backend_json_sandbox(buf, len, &s) == BACKEND_OK) {
			check(backend_sandbox_id_valid(s.id));
			check(!s.url || backend_url_valid(s.url));
			backend_sandbox_clear(&s);
		}
		break;
	}
	case 3: {
		struct backend_sandbox_list l;

		if (backend_json_sandbox_list(buf, len, &l) == BACKEND_OK) {
			for (size_t i = 0; i < l.count; i++)
				check(backend_sandbox_id_valid(l.items[i].id));
			backend_sandbox_list_clear(&l);
		}
		break;
	}
	default: {
		/* The small decoders share the last selector, so that the
		 * committed seeds keep the decoder they were made for. */
		char msg[64];
		struct backend_pool_list l;

		if (backend_json_error_message(buf, len, msg, sizeof(msg)))
			check(strlen(msg) < sizeof(msg));
		(void)backend_json_health(buf, len);
		if (backend_json_pool_list(buf, len, &l) == BACKEND_OK) {
			for (size_t i = 0; i < l.count; i++)
				check(backend_pool_id_valid(l.items[i].id) &&
				      l.items[i].size >= -1 && l.items[i].warm >= -1 &&
				      l.items[i].claimed >= -1 &&
				      (!l.items[i].image || *l.items[i].image));
			backend_pool_list_clear(&l);
		}
		if (backend_json_pool(buf, len, &l) == BACKEND_OK) {
			check(l.count == 1 && backend_pool_id_valid(l.items[0].id));
			backend_pool_list_clear(&l);
		}
		break;
	}
	}
	return 0;
}
