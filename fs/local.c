/*
 * local.c — the embedded default (DESIGN.md §8): start the project's own
 * orchestrator, sandbox-server --orchestrator, on 127.0.0.1 with a random
 * token, its sandboxes under STATE/local; stop it by its PID at unmount.
 */
#include "local_i.h"

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
 * sandboxfs (installed), ../contrib/ (build tree), then PATH. */
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
			if (snprintf(out, len, "%s/../contrib/sandbox-server", self) <
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

static int fs_write_secret(const char *path, const char *data)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	size_t n = strlen(data);
	if (write(fd, data, n) != (ssize_t)n || fsync(fd) < 0) {
		int e = errno ? errno : EIO;
		close(fd);
		unlink(tmp);
		return -e;
	}
	close(fd);
	if (rename(tmp, path) < 0)
		return -errno;
	return 0;
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
	char root[PATH_MAX], tokfile[PATH_MAX], portfile[PATH_MAX], logfile[PATH_MAX],
	    pidfile[PATH_MAX];
	snprintf(root, sizeof(root), "%s/local", state_dir);
	snprintf(tokfile, sizeof(tokfile), "%s/local.token", state_dir);
	snprintf(portfile, sizeof(portfile), "%s/local.port", state_dir);
	snprintf(logfile, sizeof(logfile), "%s/local.log", state_dir);
	snprintf(pidfile, sizeof(pidfile), "%s/local.pid", state_dir);
	if (mkdir(root, 0700) < 0 && errno != EEXIST) {
		snprintf(msg, msglen, "--local: %s: %s", root, strerror(errno));
		return -1;
	}
	fs_stop_stale(pidfile, root);

	unsigned char rnd[24];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		snprintf(msg, msglen, "--local: no random bytes for the token");
		return -1;
	}
	char token[2 * sizeof(rnd) + 2];
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(token + 2 * i, 3, "%02x", rnd[i]);
	int rc = fs_write_secret(tokfile, token);
	if (rc < 0) {
		snprintf(msg, msglen, "--local: %s: %s", tokfile, strerror(-rc));
		return -1;
	}
	unlink(portfile);

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
		execl(server, server, "--orchestrator", "--root", root, "--port", "0",
		      "--port-file", portfile, "--token-file", tokfile, (char *)NULL);
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

	/* wait (bounded) for the port file, while the server lives */
	for (int i = 0; i < 200; i++) {
		FILE *f = fopen(portfile, "re");
		int port = 0;
		if (f) {
			if (fscanf(f, "%d", &port) != 1)
				port = 0;
			fclose(f);
		}
		if (port > 0 && port < 65536) {
			chmod(portfile, 0600); /* the server made it with its umask */
			snprintf(l->url, sizeof(l->url), "http://127.0.0.1:%d", port);
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
