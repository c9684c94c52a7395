/*
 * backend_json_i.h — private: the JSON decoders of the backend.
 *
 * Exposed only for the unit tests and the libFuzzer harness; the rest of
 * sandboxfs uses backend.h. Each decoder takes an answer body of len bytes
 * (not necessarily NUL-terminated), never crashes on any input, and
 * returns BACKEND_OK or BACKEND_BAD_ANSWER. On BACKEND_BAD_ANSWER the
 * output is left cleared (nothing to free). On BACKEND_OK the output is
 * owned by the caller (the matching *_clear function frees it).
 */
#ifndef SANDBOXFS_BACKEND_JSON_I_H
#define SANDBOXFS_BACKEND_JSON_I_H

#include "backend.h"

/* {"exitCode": int, "stdout": str, "stderr": str, "durationMillis": int,
 * "truncated": bool}. The first three are required; the others default
 * to 0 and false but must have the right type when present. The streams
 * keep every byte, "\u0000" included (out_len, err_len). */
enum backend_status backend_json_exec(const char *buf, size_t len,
				      struct backend_exec_result *out);

/* {"entries": [{"name": str, "size": int >= 0, "isDir": bool}, ...]}.
 * Entries with an invalid name (backend_name_valid), a duplicate name, a
 * missing field or a field of the wrong type are dropped and counted in
 * out->dropped. The entries come back sorted by name (strcmp). A missing
 * or non-array "entries" is BACKEND_BAD_ANSWER. */
enum backend_status backend_json_listing(const char *buf, size_t len,
					 struct backend_listing *out);

/* One sandbox status: "id" (a valid sandbox id) and "status" (a string)
 * are required; "poolId", "image", "url", "error" are optional strings
 * (null and "" mean absent); "url" must be an http(s) URL. */
enum backend_status backend_json_sandbox(const char *buf, size_t len,
					 struct backend_sandbox *out);

/* {"sandboxes": [status, ...]}: malformed statuses are dropped and
 * counted in out->dropped. */
enum backend_status backend_json_sandbox_list(const char *buf, size_t len,
					      struct backend_sandbox_list *out);

/* One pool {"id": str, "image": str, "size": int, "warm": int,
 * "claimed": int} (GET /v1/sandbox-pool/{id}), as a list of one. "id" is
 * required (backend_pool_id_valid); the others are optional (null means
 * absent: image NULL, counts -1) but must have the right type, the
 * counts integers >= 0. */
enum backend_status backend_json_pool(const char *buf, size_t len,
				      struct backend_pool_list *out);

/* {"pools": [pool, ...]}: malformed pools are dropped and counted in
 * out->dropped. A missing or non-array "pools" is BACKEND_BAD_ANSWER. */
enum backend_status backend_json_pool_list(const char *buf, size_t len,
					   struct backend_pool_list *out);

/* json.c's parser (lone surrogate escapes mended, parsing serialised)
 * and integer reader (an integral number in [lo, hi]), for the decoders
 * in other files. */
struct cJSON;
struct cJSON *backend_json_parse(const char *buf, size_t len);
bool backend_json_int(const struct cJSON *v, double lo, double hi, double *out);

/* Copies the "error" string of an error answer {"error": "..."} into
 * msg (cut to size, control characters replaced by '?'). Returns false
 * (msg untouched) when the body has no such string. */
bool backend_json_error_message(const char *buf, size_t len, char *msg, size_t size);

/* True when the body is {"status": "ok"} (other members allowed). */
bool backend_json_health(const char *buf, size_t len);

/* Builds the bodies sent; NULL on allocation failure. Free with free(). */
char *backend_json_exec_request(const char *command, long timeout_s);

/* The create body: req->spec_json (when set) with the struct's members put
 * over it (see struct backend_create_request), into *out (free it).
 * BACKEND_BAD_REQUEST when spec_json is not the text of a JSON object,
 * BACKEND_LOCAL without memory; *out is NULL then. The struct's members
 * are not checked here (backend_orch_create does). */
enum backend_status backend_json_create_request(const struct backend_create_request *req,
						char **out);

#endif
