/*
 * exec.h — run one command the way the sandbox contract says: the shell
 * with -c, in the workspace, in its own process group, stdin from
 * /dev/null, each output stream capped, and on timeout the whole process
 * tree killed with exit code 124.
 */
#ifndef SBX_EXEC_H
#define SBX_EXEC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define EXEC_STREAM_CAP	  (1024 * 1024)
#define EXEC_TIMEOUT_EXIT 124

struct exec_result {
	int exit_code;
	bool timed_out;
	bool truncated;
	long long duration_ms;
	char *out, *err; /* malloc'd, not NUL-terminated */
	size_t out_len, err_len;
};

struct exec_spec {
	const char *shell;
	int cwd_fd;	   /* the workspace */
	char *const *envp; /* NULL: the server's environment */
	const char *command;
	long long timeout_ms; /* 0: no limit */
	/* While the command runs its process group id is stored here, so
	 * another thread can kill it (sandbox teardown). */
	atomic_int *pgid_slot;
};

/* Returns 0 (the result is filled; free it with exec_result_free), or -1
 * with a message in err when the command could not be started. */
int exec_run(const struct exec_spec *spec, struct exec_result *res, char *err,
	     size_t errlen);

void exec_result_free(struct exec_result *res);

/* Kill a process group and every descendant of its leader (also those
 * that left the group), with SIGKILL. */
void exec_kill_tree(int pgid);

#endif
