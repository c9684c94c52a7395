/*
 * runenv.c — what a sandbox's later commands run with: ID/env (KEY=VALUE
 * lines), ID/cwd (a directory of the workspace) and ID/stdin (the bytes the
 * next command reads). env and cwd are journaled and survive a remount;
 * stdin waits in a private file of the state directory until the next
 * command takes it.
 *
 * The contract's /execute knows none of this (it runs `sh -c command` in
 * the workspace root), so a command is sent wrapped in a few lines of sh
 * that set them up and then run the user's text unchanged with eval: the
 * same shell, so its exit code, $?, signals and the timeout's kill of the
 * process group stay what they are. A command with none of them set is
 * sent as the user wrote it.
 */
#include "mount_i.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "common/shquote.h"

/* The workspace-root name a command's stdin is uploaded to; hidden from
 * listings (vfs/listing.c: the mount's own ".sandboxfs-" names). */
#define FS_STDIN_NAME ".sandboxfs-stdin."

/* --- env -----------------------------------------------------------------------*/

static bool fs_env_name_ok(const char *s, size_t n)
{
	if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return false;
	return true;
}

int fs_env_normalize(const char *buf, size_t len, char **out, char *why, size_t whylen)
{
	*out = NULL;
	if (memchr(buf, '\0', len)) {
		snprintf(why, whylen, "env: a NUL byte");
		return -EINVAL;
	}
	char *norm = malloc(len + 2);
	if (!norm)
		return -ENOMEM;
	size_t n = 0;
	for (size_t i = 0, line = 1; i < len; line++) {
		const char *s = buf + i;
		const char *nl = memchr(s, '\n', len - i);
		size_t l = nl ? (size_t)(nl - s) : len - i;
		i += l + (nl ? 1 : 0);
		if (l && s[l - 1] == '\r')
			l--;
		if (l == 0)
			continue; /* blank lines are allowed */
		const char *eq = memchr(s, '=', l);
		if (!eq || !fs_env_name_ok(s, (size_t)(eq - s))) {
			snprintf(why, whylen, "env line %zu: not KEY=VALUE with a shell name",
				 line);
			free(norm);
			return -EINVAL;
		}
		memcpy(norm + n, s, l);
		n += l;
		norm[n++] = '\n';
	}
	norm[n] = '\0';
	if (n == 0) {
		free(norm);
		norm = NULL; /* empty: no environment */
	}
	*out = norm;
	return 0;
}

int fs_sandbox_set_env(struct fs_mount *m, struct fs_sandbox *sb, const char *buf, size_t len)
{
	char why[160] = "";
	char *env;
	int rc = fs_env_normalize(buf, len, &env, why, sizeof(why));
	if (rc < 0) {
		if (why[0]) {
			pthread_mutex_lock(&m->lock);
			(void)fs_set_str(&sb->last_error, why);
			pthread_mutex_unlock(&m->lock);
		}
		return rc;
	}
	struct journal_record r = {.kind = JOURNAL_SET_ENV};
	r.sandbox = sb->id;
	r.env = env ? env : (char *)"";
	if (fs_journal(m, &r) < 0) {
		free(env);
		return -EIO;
	}
	pthread_mutex_lock(&m->lock);
	free(sb->env);
	sb->env = env;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

/* --- cwd -----------------------------------------------------------------------*/

int fs_sandbox_set_cwd(struct fs_mount *m, struct fs_sandbox *sb, const char *buf, size_t len)
{
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '/'))
		len--;
	while (len && buf[0] == '.' && (len == 1 || buf[1] == '/')) {
		buf += len == 1 ? 1 : 2; /* a leading "./" */
		len -= len == 1 ? 1 : 2;
	}
	if (len >= 4096 || memchr(buf, '\0', len) || memchr(buf, '\n', len) ||
	    (len && buf[0] == '/'))
		return -EINVAL;
	char *cwd = len ? strndup(buf, len) : NULL;
	if (len && !cwd)
		return -ENOMEM;
	/* no way out of the workspace: no ".." segment */
	for (const char *p = cwd; p && *p;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		if (n == 0 || (n == 2 && p[0] == '.' && p[1] == '.')) {
			free(cwd);
			return -EINVAL;
		}
		p = slash ? slash + 1 : p + n;
	}
	struct journal_record r = {.kind = JOURNAL_SET_CWD};
	r.sandbox = sb->id;
	r.path = cwd ? cwd : (char *)"";
	if (fs_journal(m, &r) < 0) {
		free(cwd);
		return -EIO;
	}
	pthread_mutex_lock(&m->lock);
	free(sb->cwd);
	sb->cwd = cwd;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

/* --- stdin ----------------------------------------------------------------------*/

static int fs_stdin_path(struct fs_mount *m, const char *id, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/stdin/%s", m->state_dir, id);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int fs_stdin_write(struct fs_mount *m, struct fs_sandbox *sb, const char *buf, size_t size,
		   off_t off)
{
	char path[4096];
	int rc = fs_stdin_path(m, sb->id, path, sizeof(path));
	if (rc < 0)
		return rc;
	if (off < 0 || (uint64_t)off + size > FS_STDIN_MAX)
		return -EFBIG;
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/stdin", m->state_dir);
	if ((rc = common_mkdirs(dir, 0700)) < 0)
		return rc;
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	/* a write from the start replaces what waits; later ones add to it */
	if (off == 0 && ftruncate(fd, 0) < 0)
		rc = -errno;
	for (size_t done = 0; rc == 0 && done < size;) {
		ssize_t w = pwrite(fd, buf + done, size - done, off + (off_t)done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			rc = -errno;
		else
			done += (size_t)w;
	}
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

int fs_stdin_truncate(struct fs_mount *m, struct fs_sandbox *sb)
{
	char path[4096];
	int rc = fs_stdin_path(m, sb->id, path, sizeof(path));
	if (rc < 0)
		return rc;
	return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

off_t fs_stdin_size(struct fs_mount *m, const struct fs_sandbox *sb)
{
	char path[4096];
	struct stat st;
	if (fs_stdin_path(m, sb->id, path, sizeof(path)) < 0 || stat(path, &st) < 0)
		return 0;
	return st.st_size;
}

/* --- the wrapper ----------------------------------------------------------------*/

char *fs_sh_eval(const char *command)
{
	char *q = common_sh_quote(command), *s = NULL;
	if (q && asprintf(&s, "eval %s", q) < 0)
		s = NULL;
	free(q);
	return s;
}

/* Appends s quoted for sh to f; false when out of memory. */
static bool fs_put_quoted(FILE *f, const char *s)
{
	char *q = common_sh_quote(s);
	if (q)
		fputs(q, f);
	free(q);
	return q != NULL;
}

int fs_command_prepare(struct fs_mount *m, struct fs_sandbox *sb, const char *url,
		       uint64_t seq, const char *command, bool take_stdin, char **send,
		       char *why, size_t whylen)
{
	*send = NULL;
	pthread_mutex_lock(&m->lock);
	char *env = fs_strdup0(sb->env), *cwd = fs_strdup0(sb->cwd);
	bool oom = (sb->env && !env) || (sb->cwd && !cwd);
	pthread_mutex_unlock(&m->lock);
	int rc = oom ? -ENOMEM : 0;

	/* The next command's stdin goes up first, under a hidden name. */
	char stdin_name[64] = "";
	char path[4096];
	int fd = -1;
	struct stat st;
	if (rc == 0 && take_stdin && fs_stdin_path(m, sb->id, path, sizeof(path)) == 0 &&
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0 && fstat(fd, &st) == 0 &&
	    st.st_size > 0) {
		snprintf(stdin_name, sizeof(stdin_name), FS_STDIN_NAME "%llu",
			 (unsigned long long)seq);
		struct backend_error err;
		enum backend_status bs = backend_file_put(m->backend, url, stdin_name, fd,
							  (uint64_t)st.st_size, &err);
		if (bs != BACKEND_OK) {
			snprintf(why, whylen, "not sent: its stdin could not be uploaded (%s)",
				 backend_status_name(bs));
			rc = -EIO;
		} else {
			(void)unlink(path); /* one write, one command */
		}
	} else {
		stdin_name[0] = '\0';
	}
	if (fd >= 0)
		close(fd);
	if (rc < 0 || (!env && !cwd && !stdin_name[0])) {
		free(env);
		free(cwd);
		return rc;
	}

	char *buf = NULL;
	size_t blen = 0;
	FILE *f = open_memstream(&buf, &blen);
	if (!f) {
		free(env);
		free(cwd);
		return -ENOMEM;
	}
	/* 125: the wrapper itself failed, as env(1) says it */
	if (stdin_name[0])
		fprintf(f, "exec 0<'./%s' && rm -f './%s' || exit 125\n", stdin_name,
			stdin_name);
	bool ok = true;
	if (cwd) {
		fputs("cd -- ", f);
		ok &= fs_put_quoted(f, cwd);
		fputs(" || exit 125\n", f);
	}
	for (const char *p = env; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		char *line = strndup(p, n);
		fputs("export ", f);
		ok &= line && fs_put_quoted(f, line);
		free(line);
		fputc('\n', f);
		p += n + (nl ? 1 : 0);
	}
	fputs("eval ", f);
	ok &= fs_put_quoted(f, command);
	fputc('\n', f);
	free(env);
	free(cwd);
	if (fclose(f) != 0 || !ok) {
		free(buf);
		return -ENOMEM;
	}
	*send = buf;
	return 0;
}
