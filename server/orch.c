/* orch.c — the local orchestrator's API and the sandboxes' life cycle. */
#include "orch.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "files.h"
#include "sandbox.h"
#include "svc.h"
#include "unixsock.h"

#include "common/files.h"

#include "orch_priv.h"

bool orch_valid_id(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		      s[i] == '-'))
			return false;
	return true;
}

struct orch *orch_of(struct req *r)
{
	return r->svc->owner;
}

struct box *box_find(struct orch *o, const char *id)
{
	for (struct box *b = o->boxes; b; b = b->next)
		if (!strcmp(b->id, id))
			return b;
	return NULL;
}

void box_unlink(struct orch *o, struct box *b)
{
	for (struct box **pp = &o->boxes; *pp; pp = &(*pp)->next)
		if (*pp == b) {
			*pp = b->next;
			return;
		}
}

void box_free(struct box *b)
{
	free(b->pool);
	free(b->image);
	free(b->error);
	cJSON_Delete(b->cpu);
	cJSON_Delete(b->memory);
	cJSON_Delete(b->environment);
	free(b);
}

cJSON *dup_or_null(const cJSON *v)
{
	return v ? cJSON_Duplicate(v, true) : cJSON_CreateNull();
}

void add_str_or_null(cJSON *o, const char *k, const char *v)
{
	if (v)
		cJSON_AddStringToObject(o, k, v);
	else
		cJSON_AddNullToObject(o, k);
}

static void box_socket_path(const struct orch *o, const struct box *b, char *out,
			    size_t len)
{
	snprintf(out, len, "%s/%s", o->sockdir, b->sock);
}

/* Where a box is served: http+unix://... in Unix mode (malloc'd). */
static char *box_url(const struct orch *o, const struct box *b)
{
	char path[4096], *url = NULL;

	if (o->sockdir) {
		box_socket_path(o, b, path, sizeof(path));
		return unixsock_url(path);
	}
	if (asprintf(&url, "http://127.0.0.1:%u", (unsigned)b->port) < 0)
		return NULL;
	return url;
}

/* A fresh socket name for a box: no live box nor file has it, so an old
 * URL never reaches a new sandbox. Caller holds the lock. */
void box_pick_socket(const struct orch *o, struct box *b)
{
	char path[4096];
	struct stat st;
	bool taken;

	do {
		taken = false;
		snprintf(b->sock, sizeof(b->sock), "%08x", arc4random());
		for (const struct box *x = o->boxes; x && !taken; x = x->next)
			taken = x != b && !strcmp(x->sock, b->sock);
		box_socket_path(o, b, path, sizeof(path));
		taken = taken || lstat(path, &st) == 0;
	} while (taken);
}

static bool socket_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n != 8)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* The status object of CONTRACT.md: poolId, image, cpu and memory only
 * when set, error only when failed. Caller holds the lock. */
cJSON *box_status(const struct orch *o, const struct box *b)
{
	cJSON *j = cJSON_CreateObject(), *urls = cJSON_CreateObject();
	char key[16], *url = b->sb ? box_url(o, b) : NULL;

	cJSON_AddStringToObject(j, "id", b->id);
	if (b->pool)
		cJSON_AddStringToObject(j, "poolId", b->pool);
	cJSON_AddStringToObject(j, "status", b->status);
	if (url) {
		snprintf(key, sizeof(key), "%d", b->cport);
		cJSON_AddStringToObject(j, "url", url);
		cJSON_AddStringToObject(urls, key, url);
		free(url);
	}
	cJSON_AddItemToObject(j, "urls", urls);
	if (b->image)
		cJSON_AddStringToObject(j, "image", b->image);
	if (b->cpu)
		cJSON_AddItemToObject(j, "cpu", cJSON_Duplicate(b->cpu, true));
	if (b->memory)
		cJSON_AddItemToObject(j, "memory", cJSON_Duplicate(b->memory, true));
	cJSON_AddNumberToObject(j, "timeoutSeconds", (double)b->timeout_s);
	if (b->error && !strcmp(b->status, "failed"))
		cJSON_AddStringToObject(j, "error", b->error);
	return j;
}

/* Write ROOT/ID/sandbox.json atomically (mode 0600: it holds the port or
 * socket, and the URL is a capability). Caller holds the lock. */
int box_save(struct orch *o, const struct box *b)
{
	cJSON *m = cJSON_CreateObject();
	char *text;
	int dfd, rc = -1;

	cJSON_AddStringToObject(m, "id", b->id);
	add_str_or_null(m, "poolId", b->pool);
	add_str_or_null(m, "image", b->image);
	cJSON_AddNumberToObject(m, "containerPort", b->cport);
	cJSON_AddNumberToObject(m, "hostPort", b->port);
	if (b->sock[0])
		cJSON_AddStringToObject(m, "socket", b->sock);
	cJSON_AddStringToObject(m, "status", b->status);
	add_str_or_null(m, "error", b->error);
	cJSON_AddItemToObject(m, "cpu", dup_or_null(b->cpu));
	cJSON_AddItemToObject(m, "memory", dup_or_null(b->memory));
	cJSON_AddItemToObject(m, "environment", dup_or_null(b->environment));
	cJSON_AddNumberToObject(m, "idleTimeoutSeconds", (double)b->idle_s);
	cJSON_AddNumberToObject(m, "timeoutSeconds", (double)b->timeout_s);
	cJSON_AddNumberToObject(m, "created", (double)b->created);
	text = cJSON_Print(m);
	cJSON_Delete(m);
	if (!text)
		return -1;
	dfd = openat(o->rootfd, b->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		goto out;
	if (common_write_secret_at(dfd, META_NAME, text, strlen(text)) == 0 &&
	    fsync(dfd) == 0)
		rc = 0;
	close(dfd);
out:
	free(text);
	return rc;
}

/* Serve a box's workspace on its port (port 0: a new ephemeral one), or
 * in Unix mode on its socket. */
void box_serve(struct orch *o, struct box *b, uint16_t port)
{
	char ws[4096], err[200];
	char **env = NULL;
	size_t n = 0;
	const cJSON *it;
	struct sandbox_config sc = {
	    .shell = o->shell,
	    .port = port,
	    .admin = o->admin,
	    .bound_s = b->timeout_s,
	    .faults = o->sandbox_faults,
	};

	char sock[4096];

	snprintf(ws, sizeof(ws), "%s/%s/workspace", o->root, b->id);
	sc.workspace = ws;
	if (o->sockdir) {
		box_socket_path(o, b, sock, sizeof(sock));
		sc.unix_path = sock;
	}
	if (cJSON_IsObject(b->environment)) {
		env = calloc((size_t)cJSON_GetArraySize(b->environment) + 1,
			     sizeof(char *));
		cJSON_ArrayForEach(it, b->environment)
		{
			if (env && cJSON_IsString(it) &&
			    asprintf(&env[n], "%s=%s", it->string, it->valuestring) > 0)
				n++;
		}
		sc.env = env;
	}
	b->sb = sandbox_start(&sc, err, sizeof(err));
	for (size_t i = 0; i < n; i++)
		free(env[i]);
	free(env);
	if (b->sb) {
		b->port = sandbox_port(b->sb);
		b->status = "ready";
		free(b->error);
		b->error = NULL;
	} else {
		b->status = "failed";
		free(b->error);
		b->error = strdup(err);
	}
}

/* What a real orchestrator's agent leaves in the workspace root
 * (CONTRACT.md), for clients that must hide it. */
void machinery_create(struct orch *o, const struct box *b)
{
	char ws[4096];
	int dfd, fd;

	snprintf(ws, sizeof(ws), "%s/%s/workspace", o->root, b->id);
	dfd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	mkdirat(dfd, ".pool", 0755);
	mkfifoat(dfd, ".pool-exec.fifo", 0600);
	fd = openat(dfd, ".sandbox-agent", O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
	if (fd >= 0) {
		(void)!write(fd, "#!/bin/sh\n", 10);
		close(fd);
	}
	fd = openat(dfd, ".pool-shim.log", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0) {
		(void)!write(fd, "shim started\n", 13);
		close(fd);
	}
	close(dfd);
}

/* Stop serving a box and remove it from disk. The box is no longer in
 * the list. */
void box_destroy(struct orch *o, struct box *b)
{
	struct files_error fe;

	b->status = "deleting";
	pthread_mutex_lock(&o->lock);
	box_save(o, b);
	pthread_mutex_unlock(&o->lock);
	if (b->sb)
		sandbox_stop(b->sb);
	b->sb = NULL;
	files_delete(o->rootfd, b->id, &fe);
	atomic_fetch_add(&o->svc.stats.destroys, 1);
	box_free(b);
}

static enum MHD_Result orch_finish(struct req *r)
{
	struct orch *o = orch_of(r);
	const char *p = r->path, *m = r->method;
	cJSON *res;
	struct box *b;

	if (!strcmp(p, "/v1/sandbox") || !strcmp(p, "/v1/sandbox/")) {
		if (!strcmp(m, "POST"))
			return create_finish(r);
		res = cJSON_CreateObject();
		cJSON *arr = cJSON_AddArrayToObject(res, "sandboxes");

		pthread_mutex_lock(&o->lock);
		for (b = o->boxes; b; b = b->next)
			if (!box_hidden(r, b))
				cJSON_AddItemToArray(arr, box_status(o, b));
		pthread_mutex_unlock(&o->lock);
		return svc_reply_json(r, 200, res);
	}
	if (!strncmp(p, "/v1/sandbox/", 12)) {
		const char *id = p + 12;

		pthread_mutex_lock(&o->lock);
		b = box_find(o, id);
		if (!b || (strcmp(m, "DELETE") && box_hidden(r, b))) {
			pthread_mutex_unlock(&o->lock);
			return svc_reply_error(r, 404, "no such sandbox");
		}
		if (!strcmp(m, "DELETE")) {
			box_unlink(o, b);
			if (!strcmp(b->status, "creating")) {
				b->doomed = true; /* its create removes it */
				pthread_mutex_unlock(&o->lock);
				return svc_reply_empty(r, 204);
			}
			pthread_mutex_unlock(&o->lock);
			box_destroy(o, b);
			return svc_reply_empty(r, 204);
		}
		res = box_status(o, b);
		pthread_mutex_unlock(&o->lock);
		return svc_reply_json(r, 200, res);
	}
	if (!strcmp(p, "/v1/sandbox-pool") || !strcmp(p, "/v1/sandbox-pool/")) {
		res = cJSON_CreateObject();
		pthread_mutex_lock(&o->lock);
		cJSON_AddItemToObject(res, "pools", pools_json(o, NULL));
		pthread_mutex_unlock(&o->lock);
		return svc_reply_json(r, 200, res);
	}
	/* /v1/sandbox-pool/{id} */
	pthread_mutex_lock(&o->lock);
	cJSON *arr = pools_json(o, p + strlen("/v1/sandbox-pool/"));
	pthread_mutex_unlock(&o->lock);
	if (cJSON_GetArraySize(arr) == 0) {
		cJSON_Delete(arr);
		return svc_reply_error(r, 404, "no such pool");
	}
	res = cJSON_DetachItemFromArray(arr, 0);
	cJSON_Delete(arr);
	return svc_reply_json(r, 200, res);
}

/* Compare without an early exit, so timing does not reveal the token. */
static bool token_ok(const char *given, const char *want)
{
	size_t gl = strlen(given), wl = strlen(want);
	unsigned char d = gl != wl;

	for (size_t i = 0; i < wl; i++)
		d |= (unsigned char)(want[i] ^ (i < gl ? given[i] : 0));
	return d == 0;
}

static void orch_begin(struct req *r)
{
	struct orch *o = orch_of(r);
	const char *p = r->path, *m = r->method;
	bool get = !strcmp(m, "GET") || !strcmp(m, "HEAD");

	if (strncmp(p, "/v1/", 4)) {
		if (!strcmp(p, "/healthz")) {
			r->route = ROUTE_HEALTH;
			return;
		}
		svc_fail(r, 404, "no such route");
		return;
	}
	r->route = ROUTE_ORCH;
	if (o->token) {
		const char *auth = svc_header(r, MHD_HTTP_HEADER_AUTHORIZATION);

		if (!auth || strncmp(auth, "Bearer ", 7) ||
		    !token_ok(auth + 7, o->token)) {
			svc_fail(r, 401, "missing or wrong bearer token");
			return;
		}
	}
	if (!strcmp(p, "/v1/sandbox") || !strcmp(p, "/v1/sandbox/")) {
		if (!strcmp(m, "POST")) {
			const char *ct = svc_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
			size_t n = strlen("application/json");

			if (!ct || strncasecmp(ct, "application/json", n) ||
			    (ct[n] && ct[n] != ';' && ct[n] != ' '))
				svc_fail(r, 415, "Content-Type must be application/json");
		} else if (!get) {
			svc_fail(r, 405, "method not allowed");
		}
	} else if (!strncmp(p, "/v1/sandbox/", 12)) {
		if (!get && strcmp(m, "DELETE"))
			svc_fail(r, 405, "method not allowed");
	} else if (!strcmp(p, "/v1/sandbox-pool") || !strcmp(p, "/v1/sandbox-pool/") ||
		   !strncmp(p, "/v1/sandbox-pool/", 17)) {
		if (!get)
			svc_fail(r, 405, "method not allowed");
	} else {
		svc_fail(r, 404, "no such route");
	}
}

static enum MHD_Result orch_finish_any(struct req *r)
{
	if (r->route == ROUTE_HEALTH) {
		cJSON *o = cJSON_CreateObject();

		atomic_fetch_add(&r->svc->stats.health, 1);
		cJSON_AddStringToObject(o, "status", "ok");
		return svc_reply_json(r, 200, o);
	}
	return orch_finish(r);
}

/* POST /_admin/faults on the orchestrator sets every sandbox's too. */
static void orch_faults_changed(struct svc *s, const struct faults *f)
{
	struct orch *o = s->owner;

	pthread_mutex_lock(&o->lock);
	o->sandbox_faults = *f;
	for (struct box *b = o->boxes; b; b = b->next)
		if (b->sb)
			svc_set_faults(sandbox_svc(b->sb), f);
	pthread_mutex_unlock(&o->lock);
}

static const struct svc_ops orch_ops = {
    .begin = orch_begin,
    .finish = orch_finish_any,
    .faults_changed = orch_faults_changed,
    .admin_finish = orch_admin_finish,
};

/* Tear down sandboxes idle for longer than their idleTimeoutSeconds. */
static void *reaper_main(void *arg)
{
	struct orch *o = arg;

	while (!atomic_load(&o->stopping)) {
		struct box *victim = NULL;

		usleep(200000);
		pthread_mutex_lock(&o->lock);
		for (struct box *b = o->boxes; b && !victim; b = b->next) {
			if (b->idle_s > 0 && b->sb &&
			    sandbox_idle_ms(b->sb) > (long long)b->idle_s * 1000)
				victim = b;
		}
		if (victim)
			box_unlink(o, victim);
		pthread_mutex_unlock(&o->lock);
		if (victim)
			box_destroy(o, victim);
	}
	return NULL;
}

static struct box *box_load(struct orch *o, const char *id)
{
	char path[4096];
	FILE *f;
	char *text = NULL;
	size_t cap = 0;
	cJSON *m, *it;
	struct box *b;

	snprintf(path, sizeof(path), "%s/%s/" META_NAME, o->root, id);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	ssize_t n = getdelim(&text, &cap, '\0', f);

	fclose(f);
	m = n > 0 ? cJSON_Parse(text) : NULL;
	free(text);
	if (!m)
		return NULL;
	b = calloc(1, sizeof(*b));
	snprintf(b->id, sizeof(b->id), "%s", id);
#define STR(k)                                                                           \
	(cJSON_IsString(it = cJSON_GetObjectItem(m, k)) ? strdup(it->valuestring) : NULL)
#define NUM(k) (cJSON_IsNumber(it = cJSON_GetObjectItem(m, k)) ? it->valuedouble : 0)
#define OBJ(k)                                                                           \
	((it = cJSON_GetObjectItem(m, k)) && !cJSON_IsNull(it) ? cJSON_Duplicate(it, 1)  \
							       : NULL)
	b->pool = STR("poolId");
	b->image = STR("image");
	b->error = STR("error");
	b->cport = (int)NUM("containerPort");
	b->port = (uint16_t)NUM("hostPort");
	b->idle_s = (long)NUM("idleTimeoutSeconds");
	b->timeout_s = (long)NUM("timeoutSeconds");
	b->created = (long long)NUM("created");
	b->cpu = OBJ("cpu");
	b->memory = OBJ("memory");
	b->environment = OBJ("environment");
	it = cJSON_GetObjectItem(m, "socket");
	if (cJSON_IsString(it) && socket_name_valid(it->valuestring))
		snprintf(b->sock, sizeof(b->sock), "%s", it->valuestring);
	it = cJSON_GetObjectItem(m, "status");
	b->status = cJSON_IsString(it) && !strcmp(it->valuestring, "failed") ? "failed"
		    : cJSON_IsString(it) && !strcmp(it->valuestring, "deleting")
			? "deleting"
			: "ready";
#undef STR
#undef NUM
#undef OBJ
	cJSON_Delete(m);
	return b;
}

/* Serve again every sandbox recorded under the root. */
static void orch_recover(struct orch *o)
{
	int fd = dup(o->rootfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	while (d && (e = readdir(d))) {
		struct box *b;

		if (!orch_valid_id(e->d_name))
			continue;
		b = box_load(o, e->d_name);
		if (!b) {
			/* No record: a create that never finished. */
			struct files_error fe;

			files_delete(o->rootfd, e->d_name, &fe);
			continue;
		}
		if (!strcmp(b->status, "deleting")) {
			box_destroy(o, b);
			continue;
		}
		if (strcmp(b->status, "failed")) {
			uint16_t port = b->port;

			/* A sandbox of a TCP run gets its first socket. */
			if (o->sockdir && !b->sock[0])
				box_pick_socket(o, b);
			box_serve(o, b, port);
			if (!b->sb) {
				b->port = port; /* keep the port it is known by */
				free(b->error);
				b->error = strdup(
				    o->sockdir
					? "cannot serve the sandbox on its socket again"
					: "cannot serve the sandbox on its port again");
			} else {
				box_save(o, b);
			}
		}
		b->next = o->boxes;
		o->boxes = b;
	}
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
}

/* Unix mode: the API's socket and every sandbox's are in one private
 * directory, the API's own; a sandbox's path must fit in sun_path. */
static int orch_unix_setup(struct orch *o, const char *api_path, char *err, size_t errlen)
{
	const char *slash = strrchr(api_path, '/');

	if (api_path[0] != '/' || !slash) {
		snprintf(err, errlen, "--unix needs an absolute path");
		return -1;
	}
	o->sockdir = slash == api_path ? strdup("/")
				       : strndup(api_path, (size_t)(slash - api_path));
	if (!o->sockdir) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (strlen(o->sockdir) + 1 + 8 > UNIXSOCK_PATH_MAX) {
		snprintf(err, errlen,
			 "the directory %s is too long for the sandboxes' sockets: "
			 "%zu bytes, at most %d",
			 o->sockdir, strlen(o->sockdir), UNIXSOCK_PATH_MAX - 9);
		return -1;
	}
	return unixsock_private_dir(o->sockdir, err, errlen);
}

struct orch *orch_start(const struct orch_config *c, char *err, size_t errlen)
{
	struct orch *o = calloc(1, sizeof(*o));
	struct svc_config sc = {
	    .listen = c->listen,
	    .port = c->port,
	    .unix_path = c->unix_path,
	    .admin = c->admin,
	    .faults = c->faults,
	    .ops = &orch_ops,
	    .owner = o,
	};

	if (!o)
		return NULL;
	pthread_mutex_init(&o->lock, NULL);
	o->rootfd = o->lockfd = -1;
	o->root = strdup(c->root);
	o->token = c->token ? strdup(c->token) : NULL;
	o->shell = strdup(c->shell ? c->shell : "/bin/sh");
	o->admin = c->admin;
	o->machinery = c->machinery;
	o->default_timeout_s = c->default_timeout_s;
	o->image_start_ms = c->image_start_ms;
	o->sandbox_faults = c->faults;
	o->npools = c->npools;
	o->pools = calloc(c->npools ? c->npools : 1, sizeof(char *));
	o->pool_max = calloc(c->npools ? c->npools : 1, sizeof(long));
	for (size_t i = 0; i < c->npools; i++) {
		const char *colon = strchr(c->pools[i], ':');

		o->pools[i] = colon ? strndup(c->pools[i], (size_t)(colon - c->pools[i]))
				    : strdup(c->pools[i]);
		o->pool_max[i] = colon ? strtol(colon + 1, NULL, 10) : 0;
	}

	if (mkdir(o->root, 0700) && errno != EEXIST) {
		snprintf(err, errlen, "cannot create the root %s: %s", o->root,
			 strerror(errno));
		goto fail;
	}
	o->rootfd = open(o->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (o->rootfd < 0) {
		snprintf(err, errlen, "cannot open the root %s: %s", o->root,
			 strerror(errno));
		goto fail;
	}
	fchmod(o->rootfd, 0700);
	o->lockfd = openat(o->rootfd, ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (o->lockfd < 0 || flock(o->lockfd, LOCK_EX | LOCK_NB)) {
		snprintf(err, errlen, "another orchestrator is using the root %s",
			 o->root);
		goto fail;
	}
	if (c->unix_path && orch_unix_setup(o, c->unix_path, err, errlen))
		goto fail;
	orch_recover(o);
	if (svc_start(&o->svc, &sc, err, errlen))
		goto fail;
	if (pthread_create(&o->reaper, NULL, reaper_main, o) == 0)
		o->reaper_started = true;
	return o;
fail:
	orch_stop(o);
	return NULL;
}

uint16_t orch_port(const struct orch *o)
{
	return o->svc.port;
}

void orch_stop(struct orch *o)
{
	atomic_store(&o->stopping, true);
	if (o->reaper_started)
		pthread_join(o->reaper, NULL);
	if (o->svc.daemon)
		svc_stop(&o->svc);
	while (o->boxes) {
		struct box *b = o->boxes;

		o->boxes = b->next;
		if (b->sb)
			sandbox_stop(b->sb);
		box_free(b);
	}
	if (o->lockfd >= 0)
		close(o->lockfd);
	if (o->rootfd >= 0)
		close(o->rootfd);
	for (size_t i = 0; i < o->npools; i++)
		free(o->pools[i]);
	free(o->pools);
	free(o->pool_max);
	free(o->root);
	if (o->sockdir)
		rmdir(o->sockdir); /* when every socket is gone; made again at start */
	free(o->sockdir);
	free(o->token);
	free(o->shell);
	orch_creates_free(o);
	pthread_mutex_destroy(&o->lock);
	free(o);
}
