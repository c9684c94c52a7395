/*
 * local.c — the embedded default (DESIGN.md §8): start the project's own
 * orchestrator, sandbox-server --orchestrator, with a random token, its
 * sandboxes under STATE/local; stop it by its PID at unmount.
 *
 * It is private to the mounting user: the orchestrator and every sandbox
 * listen on Unix sockets in a directory of this user's alone (0700; the
 * sockets 0600, and the server refuses a peer of another uid), never on a
 * TCP port.
 *
 * That directory is STATE/run whenever its sockets fit in sun_path (107
 * bytes: STATE up to 94): the state directory is private, persistent and
 * the same for every mount of this state, so a sandbox is served again at
 * the same socket, under the same URL, after a remount, and no other user
 * can ever take that address (a TCP port can be taken). A longer STATE
 * (a deep home or mountpoint gives one) cannot hold sockets; its sockets
 * go to a short directory with a random name, sandboxfs-<16 hex>, in
 * $XDG_RUNTIME_DIR (made for sockets, private to the user) or else /tmp,
 * created 0700 and checked to be ours (never a symlink, never another
 * user's: a name taken by someone else is replaced by a new one), its path
 * recorded in STATE/local.rundir so a remount uses it again. It is second
 * best: /run/user/UID vanishes at logout under a mount that outlives the
 * session, and /tmp may be cleaned.
 */
#include "local_i.h"

#include "backend.h"
#include "common/files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static bool fs_executable(const char *path)
{
	return access(path, X_OK) == 0;
}

/* The sandbox-server binary: the option, env SANDBOXFS_SERVER, beside
 * sandboxfs (installed), ../server/ (build tree), then PATH. */
static int fs_find_server(const char *opt, char *out, size_t len)
{
	const char *env = getenv("SANDBOXFS_SERVER");
	if (opt && *opt) {
		snprintf(out, len, "%s", opt);
		return fs_executable(out) ? 0 : -ENOENT;
	}
	if (env && *env) {
		snprintf(out, len, "%s", env);
		return fs_executable(out) ? 0 : -ENOENT;
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			if (snprintf(out, len, "%s/sandbox-server", self) < (int)len &&
			    fs_executable(out))
				return 0;
			if (snprintf(out, len, "%s/../server/sandbox-server", self) <
				(int)len &&
			    fs_executable(out))
				return 0;
		}
	}
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	char *copy = strdup(path), *save = NULL;
	if (!copy)
		return -ENOMEM;
	for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(out, len, "%s/sandbox-server", d);
		if (fs_executable(out)) {
			free(copy);
			return 0;
		}
	}
	free(copy);
	return -ENOENT;
}

/* "http+unix://" and path with every byte but the unreserved ones
 * percent-encoded, as sandbox-server writes it. */
static int fs_unix_url(const char *path, char *out, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = (size_t)snprintf(out, len, "http+unix://");
	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		if (o + 4 > len)
			return -ENAMETOOLONG;
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~", *p)) {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	out[o] = '\0';
	return 0;
}

/* dir is a private directory of this user: created 0700 when missing; an
 * existing one must be a real directory (not a symlink) owned by this
 * user, and is made 0700. Returns 0 or -errno (-EPERM: someone else's). */
static int fs_private_dir(const char *dir)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? -EPERM : -errno;
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st) < 0)
		rc = -errno;
	else if (st.st_uid != getuid())
		rc = -EPERM;
	else if ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* The longest socket in dir is a sandbox's: dir/ and 8 hex digits. */
static bool fs_sockets_fit(const char *dir)
{
	return strlen(dir) + 1 + 8 <= FS_LOCAL_SOCKET_MAX;
}

#define FS_SHORT_NAME "/sandboxfs-"
#define FS_SHORT_HEX  16

/* Where a short socket directory goes: $XDG_RUNTIME_DIR when it is this
 * user's private directory, else /tmp. */
static const char *fs_short_base(void)
{
	const char *x = getenv("XDG_RUNTIME_DIR");
	struct stat st;
	if (!x || x[0] != '/' || lstat(x, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != getuid() || (st.st_mode & 077))
		return "/tmp";
	/* X/sandboxfs-<hex>/ and a sandbox's 8 hex digits */
	size_t longest = strlen(x) + strlen(FS_SHORT_NAME) + FS_SHORT_HEX + 1 + 8;
	return longest <= FS_LOCAL_SOCKET_MAX ? x : "/tmp";
}

/* True when dir is BASE/sandboxfs-<16 hex>, a name fs_choose_run_dir gave. */
static bool fs_short_dir_named(const char *dir, const char *base)
{
	size_t n = strlen(base), k = strlen(FS_SHORT_NAME);
	if (strncmp(dir, base, n) != 0 || strncmp(dir + n, FS_SHORT_NAME, k) != 0 ||
	    strlen(dir + n + k) != FS_SHORT_HEX)
		return false;
	return strspn(dir + n + k, "0123456789abcdef") == FS_SHORT_HEX;
}

/* Sets l->run_dir, the directory of every socket (see the top). */
static int fs_choose_run_dir(struct fs_local *l, const char *state_dir, char *msg,
			     size_t msglen)
{
	snprintf(l->run_dir, sizeof(l->run_dir), "%s/run", state_dir);
	if (fs_sockets_fit(l->run_dir))
		return 0;
	char record[PATH_MAX], dir[PATH_MAX] = "";
	snprintf(record, sizeof(record), "%s/local.rundir", state_dir);
	const char *base = fs_short_base();
	FILE *f = fopen(record, "re");
	if (f) {
		if (!fgets(dir, sizeof(dir), f))
			dir[0] = '\0';
		fclose(f);
		dir[strcspn(dir, "\n")] = '\0';
	}
	if (fs_short_dir_named(dir, base) && fs_private_dir(dir) == 0) {
		snprintf(l->run_dir, sizeof(l->run_dir), "%s", dir);
		return 0;
	}
	/* None yet, another base, or someone else holds that name now. */
	for (int tries = 0; tries < 16; tries++) {
		unsigned char rnd[FS_SHORT_HEX / 2];
		char hex[FS_SHORT_HEX + 1];
		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
			break;
		for (size_t i = 0; i < sizeof(rnd); i++)
			snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
		snprintf(dir, sizeof(dir), "%s" FS_SHORT_NAME "%s", base, hex);
		if (mkdir(dir, 0700) < 0) {
			if (errno == EEXIST)
				continue; /* a fresh name only */
			break;
		}
		int rc = fs_private_dir(dir);
		if (rc == 0)
			rc = common_write_secret(record, dir, strlen(dir));
		if (rc < 0) {
			/* its name is part of every URL: not shown */
			snprintf(msg, msglen,
				 "--local: cannot set up a private socket directory in "
				 "%s: %s",
				 base, strerror(-rc));
			return -1;
		}
		snprintf(l->run_dir, sizeof(l->run_dir), "%s", dir);
		return 0;
	}
	snprintf(msg, msglen,
		 "--local: the state directory %s is too long for Unix sockets, and "
		 "no private directory for them could be made in %s: %s",
		 state_dir, base, strerror(errno ? errno : EEXIST));
	return -1;
}

static bool fs_pid_alive(pid_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* A server left behind by a daemon that was killed: it is ours when its
 * command line names our root. */
static void fs_stop_stale(const char *pidfile, const char *root)
{
	FILE *f = fopen(pidfile, "re");
	if (!f)
		return;
	long pid = 0;
	if (fscanf(f, "%ld", &pid) != 1)
		pid = 0;
	fclose(f);
	if (pid <= 1)
		return;
	char p[64], cmd[8192];
	snprintf(p, sizeof(p), "/proc/%ld/cmdline", pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, cmd, sizeof(cmd) - 1);
	close(fd);
	if (n <= 0)
		return;
	bool ours = false;
	for (ssize_t i = 0; i < n;) {
		const char *arg = cmd + i;
		if (strcmp(arg, root) == 0)
			ours = true;
		i += (ssize_t)strlen(arg) + 1;
	}
	if (ours)
		fs_local_stop((pid_t)pid);
}

int fs_local_start(struct fs_local *l, const char *state_dir, const char *server_opt,
		   bool tie_to_parent, char *msg, size_t msglen)
{
	memset(l, 0, sizeof(*l));
	char server[PATH_MAX];
	if (fs_find_server(server_opt, server, sizeof(server)) < 0) {
		snprintf(msg, msglen,
			 "--local: sandbox-server not found (set -o server=PATH "
			 "or SANDBOXFS_SERVER)");
		return -1;
	}
	char root[PATH_MAX], tokfile[PATH_MAX], urlfile[PATH_MAX], logfile[PATH_MAX],
	    pidfile[PATH_MAX], oldport[PATH_MAX], api[PATH_MAX + 8];
	snprintf(root, sizeof(root), "%s/local", state_dir);
	snprintf(tokfile, sizeof(tokfile), "%s/local.token", state_dir);
	snprintf(urlfile, sizeof(urlfile), "%s/local.url", state_dir);
	snprintf(logfile, sizeof(logfile), "%s/local.log", state_dir);
	snprintf(pidfile, sizeof(pidfile), "%s/local.pid", state_dir);
	snprintf(oldport, sizeof(oldport), "%s/local.port", state_dir);
	if (fs_choose_run_dir(l, state_dir, msg, msglen) < 0)
		return -1;
	snprintf(api, sizeof(api), "%s/orch", l->run_dir);
	if (fs_unix_url(api, l->url, sizeof(l->url)) < 0) {
		snprintf(msg, msglen, "--local: the socket path is too long");
		return -1;
	}
	if (mkdir(root, 0700) < 0 && errno != EEXIST) {
		snprintf(msg, msglen, "--local: %s: %s", root, strerror(errno));
		return -1;
	}
	fs_stop_stale(pidfile, root);
	/* Only sockets now: a port file of an earlier version goes. */
	unlink(oldport);

	unsigned char rnd[24];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		snprintf(msg, msglen, "--local: no random bytes for the token");
		return -1;
	}
	char token[2 * sizeof(rnd) + 2];
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(token + 2 * i, 3, "%02x", rnd[i]);
	int rc = common_write_secret(tokfile, token, strlen(token));
	if (rc < 0) {
		snprintf(msg, msglen, "--local: %s: %s", tokfile, strerror(-rc));
		return -1;
	}
	unlink(urlfile);

	int logfd = open(logfile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(msg, msglen, "--local: fork: %s", strerror(errno));
		if (logfd >= 0)
			close(logfd);
		return -1;
	}
	if (pid == 0) {
		if (tie_to_parent) {
			/* a daemon killed with -9 takes its server along */
			prctl(PR_SET_PDEATHSIG, SIGTERM);
			if (getppid() != parent)
				_exit(1);
		}
		setpgid(0, 0); /* Ctrl-C of the foreground mount is ours */
		int nullfd = open("/dev/null", O_RDONLY);
		if (nullfd >= 0)
			dup2(nullfd, 0);
		if (logfd >= 0) {
			dup2(logfd, 1);
			dup2(logfd, 2);
		}
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execl(server, server, "--orchestrator", "--root", root, "--unix", api,
		      "--url-file", urlfile, "--token-file", tokfile, (char *)NULL);
		_exit(127);
	}
	if (logfd >= 0)
		close(logfd);
	l->pid = pid;
	/* State files are 0600 whatever the umask (DESIGN.md §5). */
	int pfd = open(pidfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	FILE *pf = pfd >= 0 ? fdopen(pfd, "w") : NULL;
	if (pf) {
		fchmod(pfd, 0600);
		fprintf(pf, "%ld\n", (long)pid);
		fclose(pf);
	} else if (pfd >= 0) {
		close(pfd);
	}

	/* wait (bounded) for the URL file, while the server lives */
	for (int i = 0; i < 200; i++) {
		char got[sizeof(l->url) + 2] = "";
		FILE *f = fopen(urlfile, "re");
		if (f) {
			if (!fgets(got, sizeof(got), f))
				got[0] = '\0';
			fclose(f);
			got[strcspn(got, "\n")] = '\0';
		}
		if (got[0] && strcmp(got, l->url) != 0) {
			/* Never talk to an address we did not choose. */
			fs_local_stop(pid);
			l->pid = 0;
			snprintf(msg, msglen,
				 "--local: sandbox-server does not listen on the "
				 "socket it was given; see %s",
				 logfile);
			return -1;
		}
		if (got[0]) {
			snprintf(l->token, sizeof(l->token), "%s", token);
			return 0;
		}
		int status;
		if (waitpid(pid, &status, WNOHANG) == pid) {
			l->pid = 0;
			snprintf(msg, msglen,
				 "--local: sandbox-server exited (status %d); see %s",
				 WIFEXITED(status) ? WEXITSTATUS(status) : -1, logfile);
			return -1;
		}
		usleep(50000);
	}
	fs_local_stop(pid);
	l->pid = 0;
	snprintf(msg, msglen, "--local: sandbox-server did not start within 10 s; see %s",
		 logfile);
	return -1;
}

bool fs_local_url_ours(const struct fs_local *l, const char *url)
{
	char *path = backend_url_socket_path(url);
	if (!path)
		return false;
	size_t n = strlen(l->run_dir);
	bool ours = strncmp(path, l->run_dir, n) == 0 && path[n] == '/' &&
		    strchr(path + n + 1, '/') == NULL;
	free(path);
	return ours;
}

size_t fs_local_forget_foreign(const struct fs_local *l, struct journal_state *st)
{
	size_t n = 0;
	for (size_t i = 0; i < st->count; i++) {
		struct journal_sandbox *j = &st->sandboxes[i];
		if (!j->owned || !j->url || fs_local_url_ours(l, j->url))
			continue;
		explicit_bzero(j->url, strlen(j->url));
		free(j->url);
		j->url = NULL;
		n++;
	}
	return n;
}

void fs_local_stop(pid_t pid)
{
	if (pid <= 1)
		return;
	kill(pid, SIGTERM);
	for (int i = 0; i < 100; i++) {
		int status;
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid || (r < 0 && !fs_pid_alive(pid)))
			return;
		usleep(50000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}
