/*
 * journal.h — the local lifecycle journal of sandboxfs (DESIGN.md §5).
 *
 * An append-only file of framed records, one per fact about the outside
 * world that sandboxfs cannot re-derive: an intent is appended, durably,
 * before the request it describes is sent, and its outcome after the answer.
 * The lifecycle state is a pure function of the records (journal_state_apply).
 * It knows records and files, nothing of HTTP or FUSE.
 *
 * Files: DIR/journal (0600, in a 0700 DIR). A torn tail is copied aside to
 * DIR/journal.torn.<time> and cut. Compaction writes DIR/journal.new and
 * renames it over DIR/journal.
 *
 * DIR is created 0700 (with missing parents); an existing DIR owned by this
 * user but open to group or others is made 0700 (the files hold sandbox
 * URLs); one owned by another user is refused (-EACCES). DIR/lock is
 * flock'ed while the journal is open: a second open of the same DIR gets
 * -EBUSY. A stale DIR/journal.new (a compaction that crashed before its
 * rename) is removed at open.
 *
 * Frame: magic "SFJR", u16 version, u16 flags, u32 payload length (at most
 * 64 MiB), crc32 of those 12 bytes, crc32 of header and payload, then the
 * payload as tag-length-value fields (journal_i.h). The header's own
 * checksum means a damaged length is never taken for a torn tail. A last
 * record cut short, or a tail of zero bytes (the file grew, its data never
 * reached the disk), is torn; any other bad record is damage.
 */
#ifndef SANDBOXFS_JOURNAL_H
#define SANDBOXFS_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The size of an UPLOAD_INTENT journaled before a PUT whose body is sent
 * while the file is still being written (its size and checksum are not
 * known yet). No cache file matches it: after a crash its cache file is
 * uploaded again whole when the page cache can be trusted (same boot),
 * else kept aside, never taken as uploaded. */
#define JOURNAL_SIZE_STREAMED UINT64_MAX

enum journal_kind {
	/* Sandboxes this mount creates through the orchestrator. */
	JOURNAL_CREATE_INTENT = 1, /* sandbox, pool | image+port, idle_s, spec,
				      bound_s */
	JOURNAL_CREATED,	   /* sandbox, url */
	JOURNAL_CREATE_FAILED,	   /* sandbox, error */
	JOURNAL_CREATE_UNKNOWN,	   /* sandbox, error: answer lost / crash */
	JOURNAL_CREATE_RECONCILED, /* sandbox, url (NULL: it does not exist);
				      foreign: known from the orchestrator's
				      listing, not created by this mount */
	/* Sandboxes given by id and URL; never owned. */
	JOURNAL_ATTACH, /* sandbox, url */
	JOURNAL_DETACH, /* sandbox */
	/* Commands. */
	JOURNAL_EXEC_INTENT,  /* sandbox, seq, command, timeout_s, internal */
	JOURNAL_EXEC_RESULT,  /* sandbox, seq, exit_code, duration_ms,
				 truncated, outputs */
	JOURNAL_EXEC_UNKNOWN, /* sandbox, seq, error */
	JOURNAL_EXEC_NOT_RUN, /* sandbox, seq, error */
	/* Uploads of dirty workspace files. */
	JOURNAL_UPLOAD_INTENT,	  /* sandbox, upload_id, path, cache_file, size,
				     checksum; size JOURNAL_SIZE_STREAMED:
				     see there */
	JOURNAL_UPLOAD_DONE,	  /* sandbox, upload_id */
	JOURNAL_UPLOAD_ABANDONED, /* sandbox, upload_id, error: the sandbox is
				     gone; cache_file kept for rescue */
	/* Teardown of owned sandboxes. */
	JOURNAL_DELETE_INTENT,	    /* sandbox */
	JOURNAL_DELETED,	    /* sandbox */
	JOURNAL_DELETE_UNCONFIRMED, /* sandbox, error */
	/* Small facts the mount keeps per sandbox. */
	JOURNAL_SET_TIMEOUT, /* sandbox, timeout_s */
	/* Written by compaction only: the scalar facts of one sandbox (after
	 * its runs and uploads), or with sandbox NULL the journal-wide facts
	 * (upload_id: the highest upload id ever given). */
	JOURNAL_SNAPSHOT, /* sandbox, sb_state, owned, url, pool, image, port,
			     idle_s, timeout_s, time_ms = created, seq =
			     last_seq, commands_run, error = last_error,
			     foreign, spec, bound_s, env, path = cwd */
	/* More small facts (format 1; older readers skip them). */
	JOURNAL_SET_ENV, /* sandbox, env: "KEY=VALUE\n" lines (NULL: none) */
	JOURNAL_SET_CWD, /* sandbox, path: workspace-relative ("" or NULL: the root) */
	/* Symbolic links of the workspace (the contract's listing cannot
	 * tell them from files). */
	JOURNAL_LINK_INTENT, /* sandbox, path, target: made through the mount,
				not yet made in the sandbox (durable before
				symlink returns) */
	JOURNAL_LINK_DONE,   /* sandbox, path, target: a link there (made by
				the mount, or listed after a command) */
	JOURNAL_LINK_GONE,   /* sandbox, path: no longer a link */
	/* Background jobs (ID/spawn): the intent before the spawn is sent,
	 * then what became of it. job is the job's number in its sandbox. */
	JOURNAL_JOB_INTENT,  /* sandbox, job, command (the user's text), path =
				its hidden directory in the workspace */
	JOURNAL_JOB_STARTED, /* sandbox, job, pid (= its process group) */
	JOURNAL_JOB_UNKNOWN, /* sandbox, job, error: the spawn's answer was lost
				(never sent again) */
	JOURNAL_JOB_NOT_RUN, /* sandbox, job, error: it did not start */
	JOURNAL_JOB_EXITED,  /* sandbox, job, exit_code: seen ended */
	JOURNAL_JOB_KILLED,  /* sandbox, job: stopped by its ctl's kill */
	JOURNAL_KIND_MAX
};

/* The output of one stream of a command: inline bytes, or a file under
 * the state directory written by the caller, with its length and crc32. */
struct journal_output {
	char *data;	/* inline bytes (may hold NULs), or NULL */
	size_t len;	/* length of the output, inline or in the file */
	char *file;	/* path relative to the journal's directory, or NULL */
	uint32_t crc32; /* zlib crc32 of the output */
};

/* One record. Fields a kind does not use are zero / NULL. Strings are
 * NUL-terminated; the struct owns them after a read (journal_record_clear). */
struct journal_record {
	enum journal_kind kind;
	uint64_t time_ms; /* wall clock, ms since the epoch; 0 on append means
			     "now" */
	char *sandbox;	  /* sandbox id */
	char *url;	  /* CREATED, RECONCILED, ATTACH: a capability */
	char *pool;
	char *image;
	int port;
	long idle_s;
	uint64_t seq; /* EXEC_*: sequence number within the sandbox */
	char *command;
	long timeout_s;
	int exit_code;
	long duration_ms;
	bool truncated;
	/* EXEC_INTENT: a command the mount ran for itself (a directory
	 * rename's mv, a batch of modes), never shown as the user's run. A
	 * field added in format 1: older readers skip it. */
	bool internal;
	struct journal_output out; /* EXEC_RESULT stdout */
	struct journal_output err; /* EXEC_RESULT stderr */
	uint64_t upload_id;	   /* UPLOAD_*: unique within the journal */
	char *path;		   /* workspace-relative path */
	char *cache_file;	   /* absolute path of the durable cache copy */
	uint64_t size;		   /* or JOURNAL_SIZE_STREAMED */
	uint32_t checksum; /* zlib crc32 of the uploaded bytes */
	char *error;	   /* why: FAILED, UNKNOWN, NOT_RUN, UNCONFIRMED */
	/* SNAPSHOT only. */
	int sb_state; /* enum journal_sandbox_state */
	bool owned;
	uint64_t commands_run;
	/* Fields added in format 1 (older readers skip them). */
	bool foreign; /* RECONCILED, SNAPSHOT: someone else's sandbox */
	/* CREATE_INTENT, SNAPSHOT: the create spec sent (a JSON object; it
	 * may hold secrets: the journal is private). */
	char *spec;
	/* CREATE_INTENT, SNAPSHOT: the request bound (timeoutSeconds) the
	 * create sent: seconds, JOURNAL_BOUND_NONE for none, 0 not known. */
	long bound_s;
	/* SET_ENV, SNAPSHOT: the environment of later commands, "KEY=VALUE\n"
	 * lines (values may be secrets: the dump never shows them). */
	char *env;
	char *target; /* LINK_INTENT, LINK_DONE: the link's target */
	/* JOB_*: the job's number; SNAPSHOT: the highest ever used. */
	uint64_t job;
	long pid; /* JOB_STARTED: the job's process id and group */
};
#define JOURNAL_BOUND_NONE (-1L)
void journal_record_clear(struct journal_record *r);
const char *journal_kind_name(enum journal_kind kind);

/* --- state: a pure function of the records ------------------------------*/

enum journal_sandbox_state {
	JOURNAL_SB_CREATING,	   /* create intent, no outcome yet */
	JOURNAL_SB_READY,	   /* created, reconciled, or attached */
	JOURNAL_SB_FAILED,	   /* create failed */
	JOURNAL_SB_CREATE_UNKNOWN, /* create outcome unknown: reconcile by id */
	JOURNAL_SB_DELETING,	   /* delete intent, no outcome yet */
	JOURNAL_SB_DELETE_UNCONFIRMED,
	JOURNAL_SB_GONE, /* deleted, or reconciled as nonexistent */
	JOURNAL_SB_DETACHED,
};

enum journal_run_status {
	JOURNAL_RUN_PENDING, /* intent only (live only: replay turns it
				into UNKNOWN) */
	JOURNAL_RUN_DONE,
	JOURNAL_RUN_UNKNOWN,
	JOURNAL_RUN_NOT_RUN,
};

struct journal_run {
	uint64_t seq;
	char *command;
	long timeout_s;
	bool internal; /* run by the mount for itself (EXEC_INTENT's flag) */
	enum journal_run_status status;
	int exit_code;
	long duration_ms;
	bool truncated;
	struct journal_output out, err;
	uint64_t started_ms, ended_ms;
	char *error;
};

enum journal_job_status {
	JOURNAL_JOBST_PENDING, /* intent only (live only: replay turns it
				  into UNKNOWN) */
	JOURNAL_JOBST_RUNNING, /* started; what it is now is in its directory */
	JOURNAL_JOBST_EXITED,
	JOURNAL_JOBST_KILLED,
	JOURNAL_JOBST_UNKNOWN,
	JOURNAL_JOBST_NOT_RUN,
};

struct journal_job {
	uint64_t job;
	char *command;
	char *dir; /* its directory in the workspace root */
	long pid;
	enum journal_job_status status;
	int exit_code; /* EXITED */
	uint64_t started_ms, ended_ms;
	char *error;
};

struct journal_upload {
	uint64_t upload_id;
	char *path;
	char *cache_file;
	uint64_t size;
	uint32_t checksum;
	bool abandoned; /* the sandbox is gone: kept for rescue */
	char *error;
};

/* A symbolic link of the workspace the mount knows of. */
struct journal_link {
	char *path;   /* workspace-relative */
	char *target; /* as readlink gives it */
	bool queued;  /* made through the mount, not yet in the sandbox */
};

struct journal_sandbox {
	char *id;
	enum journal_sandbox_state state;
	bool owned;   /* created by this mount (else attached or foreign) */
	bool foreign; /* listed by the orchestrator, created elsewhere */
	char *url;    /* NULL until known */
	char *spec;   /* the create spec sent, NULL when none */
	long bound_s; /* request bound sent at create: as journal_record */
	char *pool, *image;
	int port;
	long idle_s;
	long timeout_s; /* per-sandbox command timeout, 0 = unset */
	char *env;	/* "KEY=VALUE\n" lines for later commands, or NULL */
	char *cwd;	/* their working directory in the workspace, or NULL */
	uint64_t created_ms;
	uint64_t last_seq;     /* highest sequence number ever used */
	uint64_t commands_run; /* total, including runs dropped from history */
	/* oldest first, at most max_runs; internal runs are dropped first */
	struct journal_run *runs;
	size_t nruns;
	struct journal_upload *uploads; /* pending and abandoned */
	size_t nuploads;
	struct journal_link *links; /* sorted by path */
	size_t nlinks;
	char *last_error;
	/* oldest first, at most max_runs */
	struct journal_job *jobs;
	size_t njobs;
	uint64_t last_job; /* highest job number ever used */
};

struct journal_state {
	struct journal_sandbox *sandboxes;
	size_t count;
	size_t max_runs; /* history bound per sandbox, of runs and of jobs
			    (default 100) */
	uint64_t next_upload_id;
};

void journal_state_init(struct journal_state *st, size_t max_runs);
void journal_state_clear(struct journal_state *st);
/* Applies one record; deep-copies what it keeps. Records that do not fit
 * the state (an outcome without its intent) are kept as facts where
 * possible and never crash. */
void journal_state_apply(struct journal_state *st, const struct journal_record *r);
struct journal_sandbox *journal_state_find(struct journal_state *st, const char *id);
/* Deep copy, for callers that build their own model from a snapshot. */
int journal_state_copy(struct journal_state *dst, const struct journal_state *src);

/* --- framing: encode and decode one record -------------------------------*/

/* Encodes r as one framed record (magic, version, length, crc32, payload)
 * into a malloc'ed buffer. Returns 0 or -errno. */
int journal_encode(const struct journal_record *r, uint8_t **buf, size_t *len);

enum journal_decode_result {
	JOURNAL_DECODE_OK,
	JOURNAL_DECODE_SHORT,	/* buffer ends inside the record: torn */
	JOURNAL_DECODE_CORRUPT, /* bad magic, version, length or checksum */
};
/* Decodes one record at the start of buf. On OK, *used is its length. */
enum journal_decode_result journal_decode(const uint8_t *buf, size_t len,
					  struct journal_record *r, size_t *used);

/* --- the journal file ----------------------------------------------------*/

struct journal_options {
	const char *dir;	/* created 0700 when missing */
	uint64_t compact_bytes; /* compaction threshold, default 16 MiB */
	size_t max_runs;	/* default 100 */
	bool repair;		/* cut at the first bad record instead of
				   refusing to open (the bad part is kept
				   aside) */
	bool sync;		/* fdatasync each durable append; default
				   true */
};
void journal_options_defaults(struct journal_options *o);

/* What journal_open found, for the mount's log and health file. */
struct journal_open_report {
	size_t records;
	bool torn_tail; /* a torn last record was cut */
	uint64_t torn_offset;
	char torn_copy[512];   /* where the cut bytes were kept */
	size_t unknown_marked; /* intents turned into *_UNKNOWN records */
	bool repaired;
	char message[512]; /* on failure: names the file and offset */
};

struct journal;

/* Opens (creating when missing) DIR/journal, replays it, cuts a torn tail,
 * appends *_UNKNOWN records for intents left without outcome (exec ->
 * EXEC_UNKNOWN, job -> JOB_UNKNOWN, create -> CREATE_UNKNOWN, delete ->
 * DELETE_UNCONFIRMED;
 * pending uploads stay pending), registers DIR in the user's registry.
 * Returns 0, or -errno with report->message saying why (damage: -EBADMSG). */
int journal_open(const struct journal_options *o, struct journal **out,
		 struct journal_open_report *report);
void journal_close(struct journal *j);

/* Appends r (time_ms 0 = now) and applies it to the live state. With
 * durable, returns only once the record is on disk (fdatasync). Thread
 * safe: durable appends from several threads share one fdatasync (group
 * commit), run without the journal's lock. May compact. Returns 0 or
 * -errno: -EFBIG for a record over 64 MiB (keep large outputs in files);
 * after a failed fdatasync every later append fails with -EIO (what
 * reached the disk is no longer known). */
int journal_append(struct journal *j, const struct journal_record *r, bool durable);

/* Makes every earlier append durable (an append made without durable is
 * on disk once this returns 0). */
int journal_sync(struct journal *j);

/* Device flushes (fdatasync, fsync) the journal made since it was opened. */
uint64_t journal_syncs(struct journal *j);

/* A deep copy of the live state (caller clears it). */
int journal_snapshot(struct journal *j, struct journal_state *out);

/* Next unique upload id (persisted through the records). */
uint64_t journal_next_upload_id(struct journal *j);

/* Compacts now: writes the live state as a new journal and swaps it in
 * atomically. Runs beyond max_runs are dropped. */
int journal_compact(struct journal *j);

/* Size of the journal file in bytes. */
uint64_t journal_size(struct journal *j);

/* --- tools ---------------------------------------------------------------*/

/* Prints the journal at path, one plain line per record: time, kind,
 * sandbox, details (URLs shown only as scheme://host/…, never in full).
 * Reports a torn tail or damage at the end with its offset. Returns 0 when
 * the file is whole, 1 when damaged, -errno when it cannot be read. */
int journal_dump(const char *path, FILE *out);

/* The registry of journals this user has used
 * ($XDG_STATE_HOME/sandboxfs/journals, one directory per line). */
int journal_registry_add(const char *dir);
/* Prints one line per registered journal: "ok DIR" (a torn last record,
 * which the next open cuts, is noted after it), "damaged DIR: <why, with
 * the file and byte offset>" or "missing DIR". Returns the number of
 * journals that are not ok. */
int journal_registry_check(FILE *out);

#endif
