/*
 * mount_i.h — the model of one mount (mount/), with no FUSE type: what
 * it needs of the kernel comes in through struct fs_kernel_ops.
 *
 * One struct fs_mount per process holds the options, the backend, the
 * journal, the workspace cache and the sandboxes. A single mutex (lock)
 * guards the model; it is never held across a network call or a journal
 * append. Sandbox objects are never freed while mounted (a detached or
 * deleted one is only hidden), so a pointer to one stays valid.
 */
#ifndef SANDBOXFS_MOUNT_MOUNT_I_H
#define SANDBOXFS_MOUNT_MOUNT_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "backend.h"
#include "common/clock.h"
#include "common/log.h"
#include "journal.h"
#include "options_i.h"
#include "workspace.h"

/* The state file of a sandbox (DESIGN.md §1). */
enum fs_sb_state {
	FS_SB_CREATING,
	FS_SB_READY,
	FS_SB_FAILED,
	FS_SB_DELETING,
	FS_SB_GONE,
	FS_SB_UNREACHABLE,
	FS_SB_UNKNOWN,
};
const char *fs_sb_state_name(enum fs_sb_state s);

/* The status file of a command. */
enum fs_run_status {
	FS_RUN_RUNNING,
	FS_RUN_EXITED,
	FS_RUN_TIMEOUT,
	FS_RUN_UNKNOWN,
	FS_RUN_FAILED,
};
const char *fs_run_status_name(enum fs_run_status s);

struct fs_run {
	uint64_t seq;
	char *command;
	long timeout_s; /* as sent: 0 = no limit */
	enum fs_run_status status;
	int exit_code;
	long duration_ms;
	bool truncated;
	struct journal_output out, err;
	uint64_t started_ms, ended_ms;
	char *error;	  /* why unknown / failed */
	int result_errno; /* what the ctl write returns (0: the byte count) */
	/* Run by the mount for itself (a directory rename's mv, a batch of
	 * modes): counted in info, never shown as the user's run. */
	bool internal;
	/* While it runs with -o stream=yes: its output as it arrives. */
	struct fs_stream *stream;
};

/* The status file of a background job (jobs.c). */
enum fs_job_status {
	FS_JOB_STARTING, /* its spawn is under way (shown as running) */
	FS_JOB_RUNNING,
	FS_JOB_EXITED,
	FS_JOB_KILLED,
	FS_JOB_UNKNOWN,
	FS_JOB_FAILED, /* it did not start */
};
const char *fs_job_status_name(enum fs_job_status s);
struct fs_job;

struct fs_sandbox {
	char *id;	       /* fixed for the object's life */
	bool present;	       /* shown in the root */
	bool owned;	       /* created by this mount: rmdir deletes it */
	bool attached;	       /* given by id and URL: rmdir only detaches */
	bool foreign;	       /* listed by the orchestrator, created elsewhere:
				  rmdir is EPERM, only "delete ID" deletes it */
	bool journaled;	       /* the journal holds its URL (created/attached) */
	bool in_journal_state; /* the journal knows it at all */
	char *url;	       /* a capability: never printed */
	bool ws_moved;	       /* ws does not have url yet (fs_sandbox_follow) */
	bool ws_vanished;      /* its workspace is not told it is gone yet */
	char *pool, *image;
	char *spec;	/* the create spec sent (JSON; may hold secrets) */
	long bound_s;	/* request bound sent at create: seconds,
			   JOURNAL_BOUND_NONE, or 0 not known */
	long idle_s;	/* idleTimeoutSeconds sent at create, 0 not known */
	uint64_t keepalive_ms; /* monotonic: last keepalive request */
	/* a create of ours whose answer was lost, forgotten by rmdir: a 409
	 * at the next create of this id adopts it */
	bool lost_create;
	enum fs_sb_state state;
	uint64_t created_ms;
	uint64_t listed_ms; /* last orchestrator listing that showed it */
	long timeout_s;	    /* -1: no limit; 0: the mount default */
	char *env;	    /* ID/env: "KEY=VALUE\n" lines, or NULL (secret) */
	char *cwd;	    /* ID/cwd: workspace-relative, or NULL (the root) */
	uint64_t last_seq;
	uint64_t commands_run;
	/* oldest first, at most opt.max_runs (internal ones dropped first) */
	struct fs_run *runs;
	size_t nruns;
	/* background jobs, oldest first, at most opt.max_runs (jobs.c) */
	struct fs_job **jobs;
	size_t njobs;
	uint64_t last_job;
	bool busy; /* a command of this mount holds the seat */
	uint64_t busy_seq;
	bool lifecycle_busy; /* a create/delete is in flight */
	char *last_error;
	struct workspace *ws;
};

struct fs_counters {
	atomic_uint_fast64_t commands, commands_exited, commands_unknown, commands_failed,
	    busy_refused, efbig_refused, interrupted_writes, interrupts_delivered, waits, creates,
	    create_failures, deletes, delete_failures, attaches, detaches, list_refreshes,
	    list_errors, ctl_writes, keepalives, keepalive_errors,
	    kernel_epochs, /* name-cache epochs sent to the kernel after commands */
	    precise_invalidations; /* commands whose change list spared the names */
};

struct fs_mount;
/* The kernel side of the mount (fuse/), as the model sees it: whether the
 * request the calling thread serves was interrupted, whether the session
 * ended, and what the kernel must forget after a command. */
struct fs_kernel_ops {
	bool (*interrupted)(void);
	/* Calls wake(arg), from another thread, when the request the calling
	 * thread serves is interrupted (at once when it already was);
	 * watch_interrupt(NULL, NULL) ends that, and once it returns wake is
	 * not running. A no-op on a thread that serves no request. So a long
	 * wait sleeps without polling interrupted(). */
	void (*watch_interrupt)(void (*wake)(void *arg), void *arg);
	bool (*exited)(struct fs_mount *m);
	/* the attributes and pages of one path */
	void (*invalidate_path)(struct fs_mount *m, const char *path);
	/* the attributes and pages of everything the kernel holds under path */
	void (*invalidate_tree)(struct fs_mount *m, const char *path);
};

struct fs_mount {
	struct fs_options opt;
	uid_t uid;
	gid_t gid;
	uint64_t mount_ms;
	char *state_dir;
	/* The change list's marks' name in each workspace (stream.c): made
	 * at the first command, with m->lock */
	char mark_id[16];
	struct backend *backend;
	bool have_orch;
	struct backend_orchestrator orch;
	char *token; /* secret */
	struct journal *journal;
	struct journal_open_report jreport;
	struct wscache *wscache;
	/* What the model asks of the kernel side; set by fuse/ before the
	 * mount starts, NULL in tests without a kernel. */
	const struct fs_kernel_ops *kernel;
	void *session; /* fuse/'s, opaque here */
	atomic_int ll_waiters;	 /* requests answered from threads of their own */
	char *template_json; /* -o template=PATH, validated at start */
	pthread_t keepalive;
	bool keepalive_started;

	pthread_mutex_t lock;
	pthread_cond_t cond;	 /* broadcast when a run ends or the seat frees;
				    timed on CLOCK_MONOTONIC */
	struct fs_sandbox **sbs; /* never removed before unmount; the array may move */
	size_t nsbs, cap;
	/* sbs by id (sandbox.c): open addressing, a power of two of slots at
	 * most half full, kept in step by fs_sandbox_add. If it could not
	 * grow, sb_index_broken is set and fs_sandbox_find scans sbs. */
	struct fs_sandbox **sb_index;
	size_t sb_index_cap;
	bool sb_index_broken;

	pthread_mutex_t list_lock; /* one orchestrator listing at a time */
	uint64_t list_ms;	   /* when the last listing succeeded */
	uint64_t list_try_ms;	   /* when the last listing was tried */
	int list_errno;		   /* its result */
	char list_error[384];
	/* the last refused lifecycle request (health's "last error" line);
	   guarded by lock */
	char last_error[512];

	atomic_int workers; /* command threads still running */
	/* command threads to join (guarded by lock): a thread's destructors
	 * (the backend's per-thread handle) run after its function returns,
	 * so the backend is freed only once they are joined */
	struct fs_worker {
		pthread_t tid;
		bool finished;
	} * wk;
	size_t nwk, capwk;
	atomic_bool stopping;
	struct fs_counters n;
};

extern struct fs_mount *fs_mount_global;

/* strdup that takes NULL (and gives NULL); NULL also when out of memory,
 * so a caller that needs the copy checks `s && !copy`. Never aborts: the
 * model is changed from inside FUSE operations. */
char *fs_strdup0(const char *s);
/* Logs a line on stderr with a "sandboxfs: " prefix (common_log). */
#define fs_log(...) common_log(__VA_ARGS__)

/* --- model (sandbox.c); call with m->lock held unless said otherwise ----*/
struct fs_sandbox *fs_sandbox_find(struct fs_mount *m, const char *id);
/* The sandbox with that id, created when new; NULL when out of memory
 * (callers in FUSE operations answer ENOMEM, never abort). */
struct fs_sandbox *fs_sandbox_add(struct fs_mount *m, const char *id);
/* Sets a string field: frees the old value, copies the new one. Out of
 * memory: -ENOMEM and the field keeps its old value. */
int fs_set_str(char **field, const char *value);
void fs_run_clear(struct fs_run *r);
/* Appends a run, dropping (and unlinking outputs of) the oldest beyond
 * max_runs. Returns the new run, or NULL when out of memory. */
struct fs_run *fs_sandbox_push_run(struct fs_mount *m, struct fs_sandbox *sb);
/* Any run by its number, internal ones included. */
struct fs_run *fs_sandbox_run(struct fs_sandbox *sb, uint64_t seq);
/* What the user sees (stdout, exit, status, last, runs/): the user's own
 * runs only. The latest may be NULL; fs_sandbox_last is 0 then. */
struct fs_run *fs_sandbox_user_run(struct fs_sandbox *sb, uint64_t seq);
/* The numbers of sb's user runs (runs/), oldest first, into a malloc'ed
 * *out (NULL when out of memory); takes m->lock. */
size_t fs_run_numbers(struct fs_mount *m, struct fs_sandbox *sb, uint64_t **out);
struct fs_run *fs_sandbox_latest(const struct fs_sandbox *sb);
uint64_t fs_sandbox_last(const struct fs_sandbox *sb);
/* Builds the model from the replayed journal (no lock needed: start-up). */
int fs_model_load(struct fs_mount *m, const struct journal_state *st);
/* The workspace of a sandbox, journaling its URL at first use. Takes the
 * lock itself. NULL when the sandbox has no URL (yet). */
struct workspace *fs_sandbox_workspace(struct fs_mount *m, struct fs_sandbox *sb);
/* Makes sure the journal holds the URL of a sandbox known only from the
 * orchestrator's listing, before the URL is used. Takes the lock. */
int fs_sandbox_adopt(struct fs_mount *m, struct fs_sandbox *sb);
/* The orchestrator reported a new URL for sb (ws_moved): journals it, then
 * gives it to the workspace, which sends nothing meanwhile. Takes the
 * lock. Returns 0 or -errno (the workspace then waits for a later call). */
int fs_sandbox_follow(struct fs_mount *m, struct fs_sandbox *sb);
/* The effective timeoutSeconds for a command (lock held). */
long fs_sandbox_timeout(struct fs_mount *m, const struct fs_sandbox *sb);

/* --- create specs and request bounds (spec.c) ---------------------------*/
/* The request bound assumed of a sandbox whose bound this mount did not
 * set (the orchestrator's default). */
#define FS_BOUND_ASSUMED 300L
struct fs_spec {
	char *json; /* the whole create body but the id */
	char *pool, *image;
	int port;
	long bound_s; /* as fs_sandbox.bound_s, never 0 */
	long idle_s;
};
/* Reads and checks -o template=PATH (a JSON object). 0, or -1 with msg. */
int fs_template_load(const char *path, char **json, char *msg, size_t len);
/* The spec of one create: the template, overlay's fields over it (NULL:
 * none), the mount's pool when it names neither pool nor image, and
 * timeoutSeconds 0 unless it sets one. 0 or -errno (msg says why). */
int fs_spec_build(struct fs_mount *m, const char *overlay, struct fs_spec *out,
		  char *msg, size_t len);
void fs_spec_clear(struct fs_spec *s);
/* The spec with environment values and artifact sources masked, for info
 * (a cJSON object, or NULL). */
struct cJSON *fs_spec_masked(const char *json);
/* The request bound of sb in seconds, 0 for none (lock held). */
long fs_sandbox_bound(const struct fs_sandbox *sb);
/* 0 when a command with this timeout (0 = none) ends before sb's request
 * bound, else -EINVAL (lock held). */
int fs_timeout_check(const struct fs_sandbox *sb, long timeout_s);

/* --- keepalive (keepalive.c) --------------------------------------------*/
/* Starts and stops the thread that keeps held sandboxes from their idle
 * teardown (DESIGN.md §4). */
int fs_keepalive_start(struct fs_mount *m);
void fs_keepalive_stop(struct fs_mount *m);

/* --- lifecycle (orchlist.c, lifecycle.c, attach.c); these take the lock
 *     themselves ---------------------------------------------------------*/
/* Refreshes the orchestrator's list when older than the listing TTL
 * (force: now). Returns 0 or a positive errno. */
int fs_orch_refresh(struct fs_mount *m, bool force);
/* Creates sandbox id with the template and overlay (a JSON object of
 * create fields, NULL for none) merged over it. 0 or -errno. */
int fs_sandbox_create(struct fs_mount *m, const char *id, const char *overlay);
/* rmdir: deletes an owned sandbox, detaches an attached one, forgets a
 * create of ours whose outcome is unknown; EPERM for a foreign one. */
int fs_sandbox_remove(struct fs_mount *m, const char *id);
/* "delete ID": deletes an owned or foreign sandbox through the
 * orchestrator. */
int fs_sandbox_delete(struct fs_mount *m, const char *id);
/* Appends r durably; logs a failure. 0 or -errno. */
int fs_journal(struct fs_mount *m, const struct journal_record *r);
/* Records a refused lifecycle request for health's last error line. */
void fs_mount_error(struct fs_mount *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int fs_sandbox_attach(struct fs_mount *m, const char *id, const char *url);
int fs_sandbox_detach(struct fs_mount *m, const char *id);
int fs_recover(struct fs_mount *m, FILE *report);
/* Reconciles creates whose outcome is unknown (at mount and on recover). */
void fs_reconcile_creates(struct fs_mount *m);
/* Attaches every "ID URL" line of the sandboxes= file. */
int fs_attach_file(struct fs_mount *m, const char *path, char *msg, size_t msglen);
/* Sets the timeout of a sandbox, journaled. -1 = no limit. */
int fs_sandbox_set_timeout(struct fs_mount *m, struct fs_sandbox *sb, long t);

/* --- commands (command.c) -----------------------------------------------*/
/* Runs command in sb through the journal (intent first). Waits for the
 * end; with interruptible, returns -EINTR when the FUSE request is
 * interrupted (the command keeps running). On success *seq_out is its
 * sequence number. Returns 0 or -errno per DESIGN.md §2. */
int fs_command_run(struct fs_mount *m, struct fs_sandbox *sb, const char *command,
		   size_t len, bool interruptible, bool internal, uint64_t *seq_out);
/* fs_command_run with more said: what the mount runs for a job. */
struct fs_command_opts {
	bool interruptible;
	bool internal;
	/* internal, yet what was written here reaches the sandbox first, as
	 * before the user's own commands (a job's spawn) */
	bool flush;
	/* internal, run by the workspace from workspace_before_command on
	 * this thread: within the seat the user's command already holds
	 * (takes none, runs on this thread) */
	bool in_seat;
	/* internal: sent instead of the command, which is what the journal
	 * and the run history keep (NULL: the command) */
	const char *send;
	long timeout_s; /* > 0: instead of the sandbox's timeout */
	/* called once the seat is held and the run numbered, before its
	 * intent is journaled; a negative errno stops it unsent */
	int (*before)(void *ctx, uint64_t seq);
	void *ctx;
};
int fs_command_run_opts(struct fs_mount *m, struct fs_sandbox *sb, const char *command,
			size_t len, const struct fs_command_opts *o, uint64_t *seq_out);
/* True when run seq of sb was sent and its outcome is unknown (takes the
 * lock). */
bool fs_command_unknown(struct fs_mount *m, struct fs_sandbox *sb, uint64_t seq);
/* Waits until sb has no running command of this mount. Returns 0,
 * -EAGAIN (nonblock and running), -EINTR (interrupted or unmounting). */
int fs_command_wait_idle(struct fs_mount *m, struct fs_sandbox *sb, uint64_t seq,
			 bool nonblock);
/* Starts fn(arg) on a thread of its own, counted in m->workers and
 * joined at unmount before the backend is freed; fn ends with
 * fs_worker_exit. 0 or -errno (then nothing was started). */
int fs_worker_start(struct fs_mount *m, void *(*fn)(void *), void *arg);
void fs_worker_exit(struct fs_mount *m);
/* True when a FUSE operation's wait should end: interrupted, unmounting. */
bool fs_should_stop_waiting(struct fs_mount *m);
/* One step of a wait on m->cond (m->lock held): -EINTR when it should end
 * (interruptible only), else 0 after a change or 50 ms. */
int fs_wait_step(struct fs_mount *m, bool interruptible);
/* The wscache exec callback. */
int fs_command_exec_cb(void *ctx, const char *sandbox_id, const char *command,
		       bool in_seat, int *exit_code);
/* Reads an output stream of a run into a malloc'ed buffer (lock NOT
 * held; out is a copy). */
int fs_output_load(struct fs_mount *m, const struct journal_output *o, char **buf,
		   size_t *len);
/* --- env, cwd and stdin of later commands (runenv.c) ----------------------*/
/* The most bytes ID/stdin holds for the next command. */
#define FS_STDIN_MAX (16 * 1024 * 1024)
/* Checks ID/env text (KEY=VALUE lines, blank lines allowed) into *out
 * ("KEY=VALUE\n" lines, NULL when empty). -EINVAL with why set. */
int fs_env_normalize(const char *buf, size_t len, char **out, char *why, size_t whylen);
/* Journal, then set, the environment (or working directory) of later
 * commands; an empty text clears it. 0 or -errno. */
int fs_sandbox_set_env(struct fs_mount *m, struct fs_sandbox *sb, const char *buf,
		       size_t len);
int fs_sandbox_set_cwd(struct fs_mount *m, struct fs_sandbox *sb, const char *buf,
		       size_t len);
/* ID/stdin: bytes written at off (0 replaces what waits), dropped, and
 * how many wait. */
int fs_stdin_write(struct fs_mount *m, struct fs_sandbox *sb, const char *buf, size_t size,
		   off_t off);
int fs_stdin_truncate(struct fs_mount *m, struct fs_sandbox *sb);
off_t fs_stdin_size(struct fs_mount *m, const struct fs_sandbox *sb);
/* "eval 'command'", quoted for sh; malloc'ed, NULL when out of memory. */
char *fs_sh_eval(const char *command);
/* What to send for a command: NULL in *send when nothing is set (the
 * user's text as is), else a malloc'ed sh wrapper that takes the waiting
 * stdin (with take_stdin; uploaded here, under a hidden name), enters cwd,
 * exports env and evals the user's text. 0, or -errno with why set (the
 * command must not be sent). */
int fs_command_prepare(struct fs_mount *m, struct fs_sandbox *sb, const char *url,
		       uint64_t seq, const char *command, bool take_stdin, char **send,
		       char *why, size_t whylen);

/* --- background jobs (jobs.c); these take the lock themselves -----------*/
/* ID/spawn: starts text (one trailing newline dropped) detached, as job
 * last_job + 1. 0, or -errno: EBUSY (the seat is taken), ENOTCONN, EIO
 * (not started, or its outcome is unknown: the job shows why). */
int fs_job_spawn(struct fs_mount *m, struct fs_sandbox *sb, const char *text, size_t len);
/* jobs/N/ctl "kill": TERM to its process group, KILL after a grace. 0 or
 * -errno (EBUSY: the seat is taken). */
int fs_job_kill(struct fs_mount *m, struct fs_sandbox *sb, uint64_t n);
/* True when a job of sb runs, as far as this mount knows (lock held). */
bool fs_jobs_running(const struct fs_sandbox *sb);
/* The jobs of a replayed sandbox (start-up, no lock). */
int fs_jobs_load(struct fs_mount *m, struct fs_sandbox *sb, const struct journal_sandbox *j);

/* --- output while a command runs (stream.c) ------------------------------*/
struct fs_stream;
/* For a command about to be sent: *send is the sh around inner (the text
 * that would be sent otherwise) that splits its output into the hidden
 * directory the poller fetches; *out the stream, held once for the run. */
int fs_stream_new(struct fs_mount *m, struct fs_sandbox *sb, uint64_t seq, const char *url,
		  const char *inner, size_t inner_len, char **send, struct fs_stream **out);
/* The request leaves: from now on a reader of the output starts the
 * poller (nobody reading costs no thread and no request). */
void fs_stream_start(struct fs_stream *s);
/* After /execute answered: stops the poller and, when the output was too
 * long for the answer, fetches the rest into res (and deletes the
 * directory). 0 or -errno (res then keeps the answer's own). */
int fs_stream_finish(struct fs_stream *s, enum backend_status st,
		     struct backend_exec_result *res);
/* After fs_stream_finish: what the run's change list says the kernel must
 * forget, or NULL when no whole list came (the kernel then forgets all it
 * holds of the workspace). */
const struct ws_changes *fs_stream_changes(const struct fs_stream *s);
/* Drops one hold (m->lock NOT held). */
void fs_stream_put(struct fs_mount *m, struct fs_stream *s);
/* The bytes of stdout (which 0) or stderr (1) read so far (m->lock held). */
off_t fs_stream_size(struct fs_mount *m, const struct fs_run *r, int which);

/* Waits (bounded) for the command threads at unmount and joins them.
 * Returns how many are still running. */
int fs_command_drain(struct fs_mount *m, int seconds);

#endif
