/*
 * options_i.h — the options of a mount (DESIGN.md §7), as the model reads
 * them; fuse/options.c parses the command line into them.
 */
#ifndef SANDBOXFS_MOUNT_OPTIONS_I_H
#define SANDBOXFS_MOUNT_OPTIONS_I_H

#include <stdbool.h>
#include <stdint.h>

struct fs_options {
	char *orchestrator;  /* -o orchestrator=URL, env SANDBOXFS_ORCHESTRATOR */
	char *token_file;    /* -o token_file=PATH (env SANDBOXFS_TOKEN: the token) */
	char *pool;	     /* -o pool=NAME, default "default" */
	char *template_path; /* -o template=PATH: the create spec of mkdir */
	char *keepalive;     /* -o keepalive=yes|no, default yes */
	bool keepalive_on;
	char *stream;	     /* -o stream=yes|no, default yes: streamed output */
	bool stream_on;
	char *max_output;    /* -o max_output=SIZE: kept of each stream, 256M */
	uint64_t max_output_bytes;
	char *sandboxes;     /* -o sandboxes=PATH */
	char *state;	     /* -o state=DIR */
	char *server;	     /* -o server=PATH: sandbox-server for --local */
	char *proxy;	     /* -o proxy=URL: the only proxy ever used */
	int timeout;	     /* -o timeout=SECONDS, default 60 */
	int listing_ttl_ms;  /* -o listing_ttl=MS, default 1000 */
	double attr_timeout; /* -o attr_timeout=SECONDS, default 1 */
	char *cache_max;     /* -o cache_max=SIZE (K, M, G suffixes), 1G */
	uint64_t cache_max_bytes;
	int max_runs;	   /* -o max_runs=N, default 100 */
	char *journal_max; /* -o journal_max=SIZE: compaction threshold, 16M */
	char *listing_max; /* -o listing_max=SIZE: listing cache bound, 64M */
	uint64_t listing_max_bytes;
	uint64_t journal_max_bytes;
	int max_threads;     /* -o max_threads=N, default 64 */
	int show_machinery;  /* -o show_machinery */
	int no_auto_unmount; /* -o no_auto_unmount */
	int repair_journal;  /* -o repair_journal: cut at the first damage */
	int local;	     /* --local, -o local, or SOURCE "local" */
	int nonempty;	     /* -o nonempty: mount over a non-empty directory */
	int other_users;     /* -o allow_other or allow_root: others may enter */
	char *source;	     /* SOURCE of "sandboxfs [SOURCE] MOUNTPOINT" */
	int check;	     /* --check */
	char *dump_journal;  /* --dump-journal=DIR */
	int show_version;
	int show_help;
	int foreground, debug, singlethread;
	char *mountpoint;
};

#endif
