/* exec.c — spawning a command with bounds on time and output. */
#include "exec.h"

#include "common/clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* How long to keep reading output after the shell exited: a background
 * process may hold the pipes open forever. */
#define DRAIN_MS 200

void exec_result_free(struct exec_result *res)
{
	free(res->out);
	free(res->err);
	res->out = res->err = NULL;
}

/* Pid of the parent of a process, from /proc/PID/stat, or -1. */
static int parent_of(int pid)
{
	char path[64], buf[512];
	FILE *f;
	char *p;
	int ppid = -1;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f)) {
		p = strrchr(buf, ')');
		if (p && sscanf(p + 1, " %*c %d", &ppid) != 1)
			ppid = -1;
	}
	fclose(f);
	return ppid;
}

void exec_kill_tree(int pgid)
{
	int *pids = NULL, *ppids = NULL;
	size_t n = 0, cap = 0;
	DIR *d;
	struct dirent *e;

	/* Find the descendants first: once the group dies they are
	 * reparented and can no longer be told apart. */
	d = opendir("/proc");
	while (d && (e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);

		if (*end || pid <= 0)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 256;
			int *a = realloc(pids, nc * sizeof(int));
			int *b = a ? realloc(ppids, nc * sizeof(int)) : NULL;

			if (a)
				pids = a;
			if (!a || !b)
				break;
			ppids = b;
			cap = nc;
		}
		pids[n] = (int)pid;
		ppids[n] = parent_of((int)pid);
		n++;
	}
	if (d)
		closedir(d);

	kill(-pgid, SIGKILL);
	/* Mark descendants by walking the parent links until nothing changes;
	 * a marked entry has its ppid set to 0. */
	bool changed = true;
	char *mark = calloc(n ? n : 1, 1);

	while (mark && changed) {
		changed = false;
		for (size_t i = 0; i < n; i++) {
			if (mark[i])
				continue;
			bool desc = ppids[i] == pgid;

			for (size_t j = 0; !desc && j < n; j++)
				desc = mark[j] && pids[j] == ppids[i];
			if (desc) {
				mark[i] = 1;
				changed = true;
				kill(pids[i], SIGKILL);
			}
		}
	}
	free(mark);
	free(pids);
	free(ppids);
}

struct stream {
	int fd;
	char *buf;
	size_t len;
};

/* Read what is available; keep at most EXEC_STREAM_CAP bytes. Returns
 * false at end of file. */
static bool stream_read(struct stream *s, bool *truncated)
{
	char tmp[65536];

	for (;;) {
		ssize_t n = read(s->fd, tmp, sizeof(tmp));

		if (n == 0)
			return false;
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		size_t keep = (size_t)n;

		if (s->len + keep > EXEC_STREAM_CAP) {
			keep = EXEC_STREAM_CAP - s->len;
			*truncated = true;
		}
		if (keep) {
			char *b = realloc(s->buf, s->len + keep);

			if (!b)
				return false;
			s->buf = b;
			memcpy(s->buf + s->len, tmp, keep);
			s->len += keep;
		}
	}
}

int exec_run(const struct exec_spec *spec, struct exec_result *res, char *err,
	     size_t errlen)
{
	int outp[2] = {-1, -1}, errp[2] = {-1, -1};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, defs;
	pid_t pid;
	char *argv[] = {(char *)spec->shell, "-c", (char *)spec->command, NULL};
	struct stream so = {-1, NULL, 0}, se = {-1, NULL, 0};
	int rc, status = 0, pidfd;
	bool exited = false;
	long long start, deadline = 0, drain_until = 0;

	memset(res, 0, sizeof(*res));
	if (pipe2(outp, O_CLOEXEC) || pipe2(errp, O_CLOEXEC)) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		goto fail_pipes;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
	posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
	posix_spawn_file_actions_addfchdir_np(&fa, spec->cwd_fd);
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	sigemptyset(&defs);
	for (int sig = 1; sig < 32; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaddset(&defs, sig);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &defs);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
					    POSIX_SPAWN_SETSIGDEF);
	start = (long long)common_now_ms();
	rc = posix_spawn(&pid, spec->shell, &fa, &attr, argv,
			 spec->envp ? spec->envp : environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(outp[1]);
	close(errp[1]);
	if (rc) {
		snprintf(err, errlen, "cannot start the shell: %s", strerror(rc));
		close(outp[0]);
		close(errp[0]);
		return -1;
	}
	if (spec->pgid_slot)
		atomic_store(spec->pgid_slot, pid);
	so.fd = outp[0];
	se.fd = errp[0];
	fcntl(so.fd, F_SETFL, O_NONBLOCK);
	fcntl(se.fd, F_SETFL, O_NONBLOCK);
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (spec->timeout_ms > 0)
		deadline = start + spec->timeout_ms;

	for (;;) {
		long long now = (long long)common_now_ms();
		struct pollfd p[3];
		int np = 0, wait = -1;

		if (exited && ((so.fd < 0 && se.fd < 0) || now >= drain_until))
			break;
		if (!exited && deadline && now >= deadline) {
			exec_kill_tree(pid);
			waitpid(pid, &status, 0);
			exited = true;
			res->timed_out = true;
			drain_until = (long long)common_now_ms() + DRAIN_MS;
			continue;
		}
		if (so.fd >= 0)
			p[np++] = (struct pollfd){so.fd, POLLIN, 0};
		if (se.fd >= 0)
			p[np++] = (struct pollfd){se.fd, POLLIN, 0};
		if (!exited && pidfd >= 0)
			p[np++] = (struct pollfd){pidfd, POLLIN, 0};
		if (exited)
			wait = (int)(drain_until - now);
		else if (deadline)
			wait = deadline - now > 60000 ? 60000 : (int)(deadline - now);
		if (!exited && pidfd < 0 && (wait < 0 || wait > 50))
			wait = 50; /* no pidfd: poll for the exit */
		if (poll(p, (nfds_t)np, wait) < 0 && errno != EINTR)
			break;
		if (so.fd >= 0 && !stream_read(&so, &res->truncated)) {
			close(so.fd);
			so.fd = -1;
		}
		if (se.fd >= 0 && !stream_read(&se, &res->truncated)) {
			close(se.fd);
			se.fd = -1;
		}
		if (!exited && waitpid(pid, &status, WNOHANG) == pid) {
			exited = true;
			drain_until = (long long)common_now_ms() + DRAIN_MS;
		}
	}
	if (!exited)
		waitpid(pid, &status, 0);
	if (spec->pgid_slot)
		atomic_store(spec->pgid_slot, 0);
	if (pidfd >= 0)
		close(pidfd);
	if (so.fd >= 0)
		close(so.fd);
	if (se.fd >= 0)
		close(se.fd);
	res->duration_ms = (long long)common_now_ms() - start;
	if (res->timed_out)
		res->exit_code = EXEC_TIMEOUT_EXIT;
	else if (WIFEXITED(status))
		res->exit_code = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		res->exit_code = 128 + WTERMSIG(status);
	else
		res->exit_code = -1;
	res->out = so.buf;
	res->out_len = so.len;
	res->err = se.buf;
	res->err_len = se.len;
	return 0;

fail_pipes:
	for (int i = 0; i < 2; i++) {
		if (outp[i] >= 0)
			close(outp[i]);
		if (errp[i] >= 0)
			close(errp[i]);
	}
	return -1;
}
