/* sandbox.c — the routes of the sandbox contract. */
#include "sandbox.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec.h"
#include "files.h"
#include "jsonstr.h"
#include "svc.h"

#include "common/clock.h"
#include "common/files.h"
#include "common/log.h"

#define EXECUTE_BODY_LIMIT (8 * 1024 * 1024)
#define DEFAULT_TIMEOUT_S  60

extern char **environ;

struct sandbox {
	struct svc svc;
	int wsfd;
	char *shell;
	char **envp; /* NULL: inherit */
	atomic_bool busy;
	atomic_bool closing; /* being torn down: no new command */
	atomic_int pgid;
};

/* A PUT in progress: the body goes to a temporary file beside the
 * target, renamed over it once complete. */
struct put {
	int dirfd;
	int fd;
	char *tmp;
	char *name;
	int error; /* errno of a failed write */
};

static struct sandbox *sb_of(struct req *r)
{
	return r->svc->owner;
}

static void put_begin(struct req *r, const char *rel)
{
	struct sandbox *sb = sb_of(r);
	struct files_error fe;
	struct put *p;
	const char *name;
	struct stat st;
	mode_t mode = 0644;
	unsigned char rnd[8];
	char tmp[64];
	int dfd;

	if (!*rel) {
		svc_fail(r, 400, "cannot PUT the workspace root");
		return;
	}
	dfd = files_open_parent(sb->wsfd, rel, true, &name, &fe);
	if (dfd < 0) {
		svc_fail(r, fe.status, "%s", fe.msg);
		return;
	}
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISDIR(st.st_mode)) {
			close(dfd);
			svc_fail(r, 400, "the path is a directory");
			return;
		}
		if (S_ISREG(st.st_mode))
			mode = st.st_mode & 07777;
	}
	arc4random_buf(rnd, sizeof(rnd));
	snprintf(tmp, sizeof(tmp), FILES_TMP_PREFIX "%02x%02x%02x%02x%02x%02x%02x%02x",
		 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	p = calloc(1, sizeof(*p));
	if (!p) {
		close(dfd);
		svc_fail(r, 500, "out of memory");
		return;
	}
	p->dirfd = dfd;
	p->fd =
	    openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	p->tmp = strdup(tmp);
	p->name = strdup(name);
	r->ctx = p;
	if (p->fd < 0 || !p->tmp || !p->name) {
		const char *msg;
		int status = files_errno_status(errno, &msg);

		svc_fail(r, status, "cannot create the file: %s", msg);
		return;
	}
	if (mode != 0644)
		fchmod(p->fd, mode);
	r->stream = true;
}

static void put_data(struct req *r, const char *buf, size_t n)
{
	struct put *p = r->ctx;

	while (n && !p->error) {
		ssize_t w = write(p->fd, buf, n);

		if (w < 0) {
			if (errno != EINTR)
				p->error = errno;
			continue;
		}
		buf += w;
		n -= (size_t)w;
	}
}

static void put_cleanup(struct put *p)
{
	if (p->fd >= 0)
		close(p->fd);
	if (p->tmp)
		unlinkat(p->dirfd, p->tmp, 0);
	close(p->dirfd);
	free(p->tmp);
	free(p->name);
	free(p);
}

static enum MHD_Result put_finish(struct req *r)
{
	struct put *p = r->ctx;
	const char *msg;

	if (!p->error && close(p->fd))
		p->error = errno;
	p->fd = -1;
	if (p->error)
		return svc_reply_error(r, (unsigned)files_errno_status(p->error, &msg),
				       "cannot write the file: %s", msg);
	if (renameat(p->dirfd, p->tmp, p->dirfd, p->name)) {
		int status = files_errno_status(errno, &msg);

		return svc_reply_error(r, (unsigned)status, "cannot replace the file: %s",
				       msg);
	}
	free(p->tmp);
	p->tmp = NULL; /* renamed: nothing to remove */
	atomic_fetch_add(&r->svc->stats.puts, 1);
	if (r->chunked)
		atomic_fetch_add(&r->svc->stats.chunked_puts, 1);
	return svc_reply_empty(r, 204);
}

/* Entries that no client may show, mixed with the real ones. */
static void add_hostile_entries(cJSON *listing)
{
	static const struct {
		const char *name;
		double size;
		int dir;
	} bad[] = {
	    {"..", 4096, 1},
	    {".", 0, 1},
	    {"a/b", 3, 0},
	    {"", 1, 0},
	    {"negative-size", -5, 0},
	    {"/etc/passwd", 10, 0},
	};
	cJSON *arr = cJSON_GetObjectItem(listing, "entries");
	size_t i = 0;

	for (; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cJSON *it = cJSON_CreateObject();

		cJSON_AddStringToObject(it, "name", bad[i].name);
		cJSON_AddNumberToObject(it, "size", bad[i].size);
		cJSON_AddBoolToObject(it, "isDir", bad[i].dir);
		/* Alternate front and back so valid entries sit between. */
		if (i % 2)
			cJSON_AddItemToArray(arr, it);
		else
			cJSON_InsertItemInArray(arr, 0, it);
	}
	cJSON *num = cJSON_CreateObject();

	cJSON_AddNumberToObject(num, "name", 42);
	cJSON_AddNumberToObject(num, "size", 1);
	cJSON_AddBoolToObject(num, "isDir", 0);
	cJSON_AddItemToArray(arr, num);
	cJSON *nosize = cJSON_CreateObject();

	cJSON_AddStringToObject(nosize, "name", "no-size");
	cJSON_AddStringToObject(nosize, "isDir", "no");
	cJSON_AddItemToArray(arr, nosize);
}

static enum MHD_Result get_finish(struct req *r, const char *rel)
{
	struct sandbox *sb = sb_of(r);
	int fd = files_open_beneath(sb->wsfd, rel, O_RDONLY | O_NONBLOCK, 0);
	struct stat st;
	const char *msg;

	if (fd < 0) {
		int status = files_errno_status(-fd, &msg);

		return svc_reply_error(r, (unsigned)status, "%s", msg);
	}
	if (fstat(fd, &st)) {
		close(fd);
		return svc_reply_error(r, 500, "cannot stat the path");
	}
	if (S_ISDIR(st.st_mode)) {
		struct files_error fe;
		cJSON *listing = files_list(fd, &fe);

		close(fd);
		if (!listing)
			return svc_reply_error(r, (unsigned)fe.status, "%s", fe.msg);
		if (r->faulted && r->f.hostile_listing) {
			add_hostile_entries(listing);
			atomic_fetch_add(&r->svc->stats.faults, 1);
		}
		atomic_fetch_add(&r->svc->stats.lists, 1);
		return svc_reply_json(r, 200, listing);
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return svc_reply_error(r, 400, "not a regular file or directory");
	}
	fcntl(fd, F_SETFL, 0);
	atomic_fetch_add(&r->svc->stats.gets, 1);
	return svc_reply_fd(r, 200, fd, (uint64_t)st.st_size, "application/octet-stream");
}

static enum MHD_Result files_finish(struct req *r)
{
	struct sandbox *sb = sb_of(r);
	const char *raw = r->path + strlen("/files");
	struct files_error fe;
	char *rel;
	enum MHD_Result ret;

	if (strcmp(r->method, "PUT") == 0)
		return put_finish(r);
	if (*raw == '/')
		raw++;
	if (files_normalize(raw, &rel, &fe))
		return svc_reply_error(r, (unsigned)fe.status, "%s", fe.msg);
	if (strcmp(r->method, "DELETE") == 0) {
		if (files_delete(sb->wsfd, rel, &fe))
			ret = svc_reply_error(r, (unsigned)fe.status, "%s", fe.msg);
		else {
			atomic_fetch_add(&r->svc->stats.deletes, 1);
			ret = svc_reply_empty(r, 204);
		}
	} else {
		ret = get_finish(r, rel);
	}
	free(rel);
	return ret;
}

static char *execute_json(const struct exec_result *res, size_t *len)
{
	/* Each byte takes at most 6 (\u00XX) output bytes. */
	size_t cap = JSONSTR_MAX(res->out_len + res->err_len) + 256;
	char *buf = malloc(cap), *p = buf;

	if (!buf)
		return NULL;
	p += sprintf(p, "{\"exitCode\":%d,\"stdout\":\"", res->exit_code);
	jsonstr_escape(&p, (const unsigned char *)res->out, res->out_len);
	p += sprintf(p, "\",\"stderr\":\"");
	jsonstr_escape(&p, (const unsigned char *)res->err, res->err_len);
	p += sprintf(p, "\",\"durationMillis\":%lld,\"truncated\":%s}", res->duration_ms,
		     res->truncated ? "true" : "false");
	*len = (size_t)(p - buf);
	return buf;
}

static enum MHD_Result execute_finish(struct req *r)
{
	struct sandbox *sb = sb_of(r);
	cJSON *in = cJSON_ParseWithLength(r->body ? r->body : "", r->len);
	const cJSON *cmd, *to;
	double timeout = DEFAULT_TIMEOUT_S;
	struct exec_result res;
	char err[200];
	enum MHD_Result ret;
	size_t len = 0;
	char *json;

	atomic_fetch_add(&r->svc->stats.executes, 1);
	if (!cJSON_IsObject(in)) {
		cJSON_Delete(in);
		return svc_reply_error(r, 400, "the body must be a JSON object");
	}
	cmd = cJSON_GetObjectItemCaseSensitive(in, "command");
	to = cJSON_GetObjectItemCaseSensitive(in, "timeoutSeconds");
	if (!cJSON_IsString(cmd)) {
		cJSON_Delete(in);
		return svc_reply_error(r, 400, "command must be a string");
	}
	if (to && !cJSON_IsNull(to)) {
		if (!cJSON_IsNumber(to) || to->valuedouble < 0 || to->valuedouble > 1e7) {
			cJSON_Delete(in);
			return svc_reply_error(r, 400,
					       "timeoutSeconds must be a number >= 0");
		}
		timeout = to->valuedouble;
	}
	if (atomic_exchange(&sb->busy, true)) {
		cJSON_Delete(in);
		atomic_fetch_add(&r->svc->stats.busy, 1);
		return svc_reply_error(r, 409, "a command is already running");
	}
	if (atomic_load(&sb->closing)) {
		atomic_store(&sb->busy, false);
		cJSON_Delete(in);
		return svc_reply_error(r, 503, "the sandbox is being deleted");
	}
	svc_log_command(r->svc, cmd->valuestring);
	atomic_fetch_add(&r->svc->stats.commands, 1);
	struct exec_spec spec = {
	    .shell = sb->shell,
	    .cwd_fd = sb->wsfd,
	    .envp = sb->envp,
	    .command = cmd->valuestring,
	    .timeout_ms = (long long)(timeout * 1000),
	    .pgid_slot = &sb->pgid,
	};
	int rc = exec_run(&spec, &res, err, sizeof(err));

	atomic_store(&r->svc->last_activity_ms, (long long)common_now_ms());
	atomic_store(&sb->busy, false);
	cJSON_Delete(in);
	if (rc)
		return svc_reply_error(r, 500, "%s", err);
	if (res.timed_out)
		atomic_fetch_add(&r->svc->stats.timeouts, 1);
	json = execute_json(&res, &len);
	exec_result_free(&res);
	ret = svc_reply_text_json(r, 200, json, len);
	return ret;
}

static void sb_begin(struct req *r)
{
	const char *p = r->path, *m = r->method;
	bool get = !strcmp(m, "GET") || !strcmp(m, "HEAD");

	if (!strcmp(p, "/healthz")) {
		r->route = ROUTE_HEALTH;
		if (!get)
			svc_fail(r, 405, "method not allowed");
	} else if (!strcmp(p, "/execute")) {
		r->route = ROUTE_EXECUTE;
		r->limit = EXECUTE_BODY_LIMIT;
		if (strcmp(m, "POST"))
			svc_fail(r, 405, "method not allowed");
	} else if (!strcmp(p, "/files") || !strncmp(p, "/files/", 7)) {
		r->route = ROUTE_FILES;
		if (!strcmp(m, "PUT")) {
			const char *raw = p[6] ? p + 7 : "";
			struct files_error fe;
			char *rel;

			if (files_normalize(raw, &rel, &fe)) {
				svc_fail(r, fe.status, "%s", fe.msg);
				return;
			}
			if (*raw && raw[strlen(raw) - 1] == '/') {
				/* "dir/" names a directory, never a file. */
				free(rel);
				svc_fail(r, 400, "a file path cannot end with '/'");
				return;
			}
			put_begin(r, rel);
			free(rel);
		} else if (!get && strcmp(m, "DELETE")) {
			svc_fail(r, 405, "method not allowed");
		}
	} else {
		svc_fail(r, 404, "no such route");
	}
}

static enum MHD_Result sb_finish(struct req *r)
{
	switch (r->route) {
	case ROUTE_HEALTH: {
		cJSON *o = cJSON_CreateObject();

		atomic_fetch_add(&r->svc->stats.health, 1);
		cJSON_AddStringToObject(o, "status", "ok");
		return svc_reply_json(r, 200, o);
	}
	case ROUTE_EXECUTE:
		return execute_finish(r);
	case ROUTE_FILES:
		return files_finish(r);
	default:
		return svc_reply_error(r, 404, "no such route");
	}
}

static void sb_cleanup(struct req *r)
{
	if (r->ctx)
		put_cleanup(r->ctx);
	r->ctx = NULL;
}

static const struct svc_ops sandbox_ops = {
    .begin = sb_begin,
    .data = put_data,
    .finish = sb_finish,
    .cleanup = sb_cleanup,
};

/* The server's environment with the sandbox's variables on top. */
static char **build_env(char *const *extra)
{
	size_t n = 0, m = 0, k = 0;
	char **env;

	if (!extra || !extra[0])
		return NULL;
	while (environ[n])
		n++;
	while (extra[m])
		m++;
	env = calloc(n + m + 1, sizeof(char *));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		size_t klen = strcspn(environ[i], "=");
		bool overridden = false;

		for (size_t j = 0; j < m && !overridden; j++)
			overridden =
			    !strncmp(extra[j], environ[i], klen) && extra[j][klen] == '=';
		if (!overridden)
			env[k++] = strdup(environ[i]);
	}
	for (size_t j = 0; j < m; j++)
		env[k++] = strdup(extra[j]);
	return env;
}

struct sandbox *sandbox_start(const struct sandbox_config *c, char *err, size_t errlen)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));
	struct svc_config sc = {
	    .listen = c->listen,
	    .port = c->port,
	    .unix_path = c->unix_path,
	    .admin = c->admin,
	    .faults = c->faults,
	    .bound_s = c->bound_s,
	    .ops = &sandbox_ops,
	    .owner = sb,
	};

	if (!sb) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	sb->wsfd = -1;
	if (common_mkdirs(c->workspace, 0755) < 0 ||
	    (sb->wsfd = open(c->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "workspace %s: %s", c->workspace, strerror(errno));
		free(sb);
		return NULL;
	}
	sb->shell = strdup(c->shell ? c->shell : "/bin/sh");
	sb->envp = build_env(c->env);
	if (svc_start(&sb->svc, &sc, err, errlen)) {
		sandbox_stop(sb);
		return NULL;
	}
	return sb;
}

uint16_t sandbox_port(const struct sandbox *sb)
{
	return sb->svc.port;
}

struct svc *sandbox_svc(struct sandbox *sb)
{
	return &sb->svc;
}

long long sandbox_idle_ms(struct sandbox *sb)
{
	if (atomic_load(&sb->busy) || atomic_load(&sb->svc.active) > 0)
		return 0;
	return (long long)common_now_ms() - atomic_load(&sb->svc.last_activity_ms);
}

void sandbox_stop(struct sandbox *sb)
{
	/* Kill the running command until the seat is free, so stopping the
	 * daemon (which joins the connection threads) cannot hang on it. */
	atomic_store(&sb->closing, true);
	for (int i = 0; i < 1000 && atomic_load(&sb->busy); i++) {
		int pg = atomic_load(&sb->pgid);

		if (pg > 0)
			exec_kill_tree(pg);
		usleep(10000);
	}
	if (sb->svc.daemon && !svc_stop(&sb->svc)) {
		/* A worker still uses it: leave it rather than free it. */
		common_log("a sandbox's request did not end; its memory is kept");
		return;
	}
	if (sb->wsfd >= 0)
		close(sb->wsfd);
	if (sb->envp)
		for (char **e = sb->envp; *e; e++)
			free(*e);
	free(sb->envp);
	free(sb->shell);
	free(sb);
}
