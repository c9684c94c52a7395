/*
 * options.c — the command line: fuse_opt tables built from offsetof, the
 * environment defaults, fstab noise discarded, --help.
 */
#include "fuse_i.h"
#include "preflight_i.h"

#include <ctype.h>
#include <errno.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPT(t, p, v)                                                                     \
	{                                                                                \
		t, offsetof(struct fs_options, p), v                                     \
	}

enum {
	KEY_DISCARD,
	KEY_HELP,
	KEY_VERSION,
	KEY_OTHER_USERS,
};

static const struct fuse_opt fs_opt_table[] = {
    OPT("orchestrator=%s", orchestrator, 0), OPT("token_file=%s", token_file, 0),
    OPT("pool=%s", pool, 0), OPT("sandboxes=%s", sandboxes, 0), OPT("state=%s", state, 0),
    OPT("template=%s", template_path, 0), OPT("keepalive=%s", keepalive, 0),
    OPT("stream=%s", stream, 0), OPT("max_output=%s", max_output, 0),
    OPT("server=%s", server, 0), OPT("timeout=%d", timeout, 0), OPT("proxy=%s", proxy, 0),
    OPT("listing_ttl=%d", listing_ttl_ms, 0), OPT("attr_timeout=%lf", attr_timeout, 0),
    OPT("cache_max=%s", cache_max, 0), OPT("max_runs=%d", max_runs, 0),
    OPT("journal_max=%s", journal_max, 0), OPT("listing_max=%s", listing_max, 0),
    OPT("max_threads=%d", max_threads, 0), OPT("show_machinery", show_machinery, 1),
    OPT("no_auto_unmount", no_auto_unmount, 1), OPT("repair_journal", repair_journal, 1),
    OPT("--local", local, 1), OPT("local", local, 1), OPT("nonempty", nonempty, 1),
    OPT("--check", check, 1), OPT("--dump-journal %s", dump_journal, 0),
    OPT("--dump-journal=%s", dump_journal, 0),
    /* fstab and mount(8) noise: accepted and ignored */
    FUSE_OPT_KEY("_netdev", KEY_DISCARD), FUSE_OPT_KEY("auto", KEY_DISCARD),
    FUSE_OPT_KEY("noauto", KEY_DISCARD), FUSE_OPT_KEY("user", KEY_DISCARD),
    FUSE_OPT_KEY("users", KEY_DISCARD), FUSE_OPT_KEY("nouser", KEY_DISCARD),
    FUSE_OPT_KEY("nofail", KEY_DISCARD), FUSE_OPT_KEY("rw", KEY_DISCARD),
    FUSE_OPT_KEY("defaults", KEY_DISCARD), FUSE_OPT_KEY("-h", KEY_HELP),
    FUSE_OPT_KEY("--help", KEY_HELP), FUSE_OPT_KEY("-V", KEY_VERSION),
    FUSE_OPT_KEY("--version", KEY_VERSION),
    /* recorded, and kept for libfuse */
    FUSE_OPT_KEY("allow_other", KEY_OTHER_USERS),
    FUSE_OPT_KEY("allow_root", KEY_OTHER_USERS), FUSE_OPT_END};

static int fs_opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct fs_options *o = data;

	switch (key) {
	case KEY_DISCARD:
		return 0;
	case KEY_HELP:
		o->show_help = 1;
		return 0;
	case KEY_VERSION:
		o->show_version = 1;
		return 0;
	case KEY_OTHER_USERS:
		o->other_users = 1;
		return 1;
	case FUSE_OPT_KEY_NONOPT:
		/* [SOURCE] MOUNTPOINT, as mount.fuse3 runs "sandboxfs SOURCE
		 * MOUNTPOINT -o opts": with two, the first is the source */
		if (o->source) {
			fprintf(stderr,
				"sandboxfs: unexpected argument %s: usage: sandboxfs "
				"[SOURCE] MOUNTPOINT [-o OPTIONS] (see --help)\n",
				arg);
			return -1;
		}
		o->source = o->mountpoint;
		o->mountpoint = strdup(arg);
		return o->mountpoint ? 0 : -1;
	default:
		return 1; /* keep: libfuse's options */
	}
}

/* "1G", "512M", "4096" -> bytes; 0 on error (a size that overflows too). */
static uint64_t fs_parse_size(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return 0;
	static const char units[] = "KMGT";
	const char *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
	unsigned int shift = u ? 10 * (unsigned int)(u - units + 1) : 0;
	if (u)
		end++;
	if (v > (UINT64_MAX >> shift))
		return 0;
	v <<= shift;
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end == 'B')
		end++;
	return *end ? 0 : v;
}

int fs_options_parse(struct fuse_args *args, struct fs_options *o)
{
	memset(o, 0, sizeof(*o));
	o->timeout = 60;
	o->listing_ttl_ms = 1000;
	o->attr_timeout = 1.0;
	o->max_runs = 100;
	o->max_threads = 64;

	if (fuse_opt_parse(args, o, fs_opt_table, fs_opt_proc) == -1)
		return -1;

	/* SOURCE: "local" is --local, an http(s) URL is orchestrator=URL,
	 * anything else (e.g. "sandboxfs" in fstab) leaves it to the options */
	if (o->source && !strcmp(o->source, "local")) {
		o->local = 1;
	} else if (o->source && (!strncmp(o->source, "http://", 7) ||
				 !strncmp(o->source, "https://", 8) ||
				 !strncmp(o->source, "http+unix://", 12))) {
		if (o->orchestrator) {
			fprintf(stderr,
				"sandboxfs: SOURCE %s and orchestrator= both name "
				"an orchestrator: give one\n",
				o->source);
			return -1;
		}
		o->orchestrator = strdup(o->source);
	}

	struct fuse_cmdline_opts c;
	memset(&c, 0, sizeof(c));
	if (!o->show_help && !o->show_version) {
		/* the mountpoint is checked here, not by libfuse, so that its
		 * problems come as one line saying what to do */
		if (o->mountpoint && !o->check && !o->dump_journal) {
			if (fs_preflight_mountpoint(o->mountpoint, o->nonempty) < 0)
				return -1;
			char real[PATH_MAX];
			if (!realpath(o->mountpoint, real)) {
				fprintf(stderr, "sandboxfs: mountpoint %s: %s\n",
					o->mountpoint, strerror(errno));
				return -1;
			}
			free(o->mountpoint);
			o->mountpoint = strdup(real);
		}
		if (fuse_parse_cmdline(args, &c) != 0)
			return -1;
		o->foreground = c.foreground;
		o->debug = c.debug;
		o->singlethread = c.singlethread;
	}

	if (!o->orchestrator && !o->local) {
		const char *e = getenv("SANDBOXFS_ORCHESTRATOR");
		if (e && *e)
			o->orchestrator = strdup(e);
	}
	if (!o->pool)
		o->pool = strdup("default");
	if (!o->cache_max)
		o->cache_max = strdup("1G");
	o->cache_max_bytes = fs_parse_size(o->cache_max);
	if (!o->cache_max_bytes) {
		fprintf(stderr, "sandboxfs: cache_max: not a size: %s\n", o->cache_max);
		return -1;
	}
	o->listing_max_bytes = 64ULL << 20;
	if (o->listing_max) {
		o->listing_max_bytes = fs_parse_size(o->listing_max);
		if (o->listing_max_bytes < 4096) {
			fprintf(stderr,
				"sandboxfs: listing_max: a size of at least 4K: %s\n",
				o->listing_max);
			return -1;
		}
	}
	if (o->journal_max) {
		o->journal_max_bytes = fs_parse_size(o->journal_max);
		if (o->journal_max_bytes < 4096) {
			fprintf(stderr,
				"sandboxfs: journal_max: a size of at least 4K: %s\n",
				o->journal_max);
			return -1;
		}
	}
	if (!o->stream || strcmp(o->stream, "yes") == 0)
		o->stream_on = true;
	else if (strcmp(o->stream, "no") == 0)
		o->stream_on = false;
	else {
		fprintf(stderr, "sandboxfs: stream must be yes or no\n");
		return -1;
	}
	o->max_output_bytes = 256ULL << 20;
	if (o->max_output) {
		o->max_output_bytes = fs_parse_size(o->max_output);
		if (o->max_output_bytes < 4096) {
			fprintf(stderr,
				"sandboxfs: max_output: a size of at least 4K: %s\n",
				o->max_output);
			return -1;
		}
	}
	if (!o->keepalive || strcmp(o->keepalive, "yes") == 0)
		o->keepalive_on = true;
	else if (strcmp(o->keepalive, "no") == 0)
		o->keepalive_on = false;
	else {
		fprintf(stderr, "sandboxfs: keepalive must be yes or no\n");
		return -1;
	}
	if (o->timeout < 0 || o->timeout > 86400) {
		fprintf(stderr, "sandboxfs: timeout must be 0..86400 seconds\n");
		return -1;
	}
	if (o->listing_ttl_ms < 0 || o->attr_timeout < 0) {
		fprintf(stderr,
			"sandboxfs: listing_ttl and attr_timeout must not be negative\n");
		return -1;
	}
	if (o->max_runs < 1 || o->max_runs > 100000) {
		fprintf(stderr, "sandboxfs: max_runs must be 1..100000\n");
		return -1;
	}
	if (o->max_threads < 2 || o->max_threads > 10000) {
		fprintf(stderr, "sandboxfs: max_threads must be 2..10000\n");
		return -1;
	}
	if (o->local && o->orchestrator) {
		fprintf(stderr,
			"sandboxfs: --local and orchestrator= exclude each other\n");
		return -1;
	}
	return 0;
}

void fs_options_help(const char *prog)
{
	printf(
	    "usage: %s [OPTIONS] [SOURCE] MOUNTPOINT\n"
	    "\n"
	    "Mounts remote sandboxes as directories (man sandboxfs).\n"
	    "SOURCE (as fstab gives it): \"local\" is --local, an http(s) URL is\n"
	    "orchestrator=URL, anything else (e.g. \"sandboxfs\") leaves it to -o.\n"
	    "\n"
	    "sandboxfs options:\n"
	    "    -o orchestrator=URL    base URL of the orchestrator's /v1/sandbox API\n"
	    "                           (default: env SANDBOXFS_ORCHESTRATOR, else "
	    "none)\n"
	    "    -o token_file=PATH     orchestrator bearer token, read from a file\n"
	    "                           (default: env SANDBOXFS_TOKEN holds the token)\n"
	    "    -o pool=NAME           pool used by mkdir (default: default)\n"
	    "    -o template=PATH       the create spec (a JSON object of the\n"
	    "                           orchestrator's create fields) of every mkdir\n"
	    "                           (none)\n"
	    "    -o keepalive=yes|no    keep sandboxes this mount holds something of\n"
	    "                           from their idle teardown (default: yes)\n"
	    "    -o sandboxes=PATH      attach the sandboxes listed there, one \"ID "
	    "URL\" a line\n"
	    "                           (none)\n"
	    "    -o state=DIR           journal and cache (default:\n"
	    "                           $XDG_STATE_HOME/sandboxfs/<mountpoint key>, mode "
	    "0700)\n"
	    "    -o timeout=SECONDS     default timeoutSeconds of commands, 0 = none "
	    "(60)\n"
	    "    -o listing_ttl=MS      orchestrator and workspace listing cache (1000)\n"
	    "    -o attr_timeout=SECS   kernel attribute and name cache (1)\n"
	    "    -o cache_max=SIZE      bound of the workspace file cache (1G)\n"
	    "    -o listing_max=SIZE    bound of the workspace listing cache (64M)\n"
	    "    -o max_runs=N          command history kept per sandbox in runs/ (100)\n"
	    "    -o stream=yes|no       stdout and stderr readable while a command runs\n"
	    "                           (default: yes)\n"
	    "    -o max_output=SIZE     output kept of each stream of a command (256M)\n"
	    "    -o journal_max=SIZE    compact the journal past this size (16M)\n"
	    "    -o max_threads=N       FUSE worker threads; requests that wait for a\n"
	    "                           sandbox hold none (64)\n"
	    "    -o proxy=URL           send every request through this proxy (none:\n"
	    "                           http_proxy and the like are never used)\n"
	    "    -o show_machinery      show the orchestrator's files in workspace/ "
	    "(off)\n"
	    "    -o no_auto_unmount     do not unmount when the daemon dies "
	    "(auto_unmount on)\n"
	    "    -o repair_journal      open a damaged journal by cutting it at the "
	    "first\n"
	    "                           bad record (the rest is kept aside) (off)\n"
	    "    -o server=PATH         sandbox-server binary for --local (default: env\n"
	    "                           SANDBOXFS_SERVER, beside sandboxfs, then PATH)\n"
	    "    -o allow_other         let other users in (off; needs "
	    "user_allow_other);\n"
	    "                           the kernel then enforces the modes shown\n"
	    "                           (default_permissions): control files and\n"
	    "                           workspace files stay writable by you only\n"
	    "    -o nonempty            mount over a non-empty directory (off: refused)\n"
	    "    -o local               same as --local, for fstab (off)\n"
	    "    --local                start the local orchestrator (sandbox-server) "
	    "with\n"
	    "                           a random token, sandboxes under STATE/local\n"
	    "    --check                preflight: journals of this user, orchestrator\n"
	    "                           health and token; mounts nothing\n"
	    "    --dump-journal DIR     print the journal in DIR as plain text\n"
	    "    -f                     foreground\n"
	    "    -d                     debug (implies -f); never prints URLs or tokens\n"
	    "    -s                     single-threaded (waiting reads then block all)\n"
	    "    -V, --version          print the version\n"
	    "    -h, --help             print this help\n"
	    "\n"
	    "fstab noise (_netdev, auto, noauto, user, users, nofail, rw, defaults) is\n"
	    "ignored. Unmount with fusermount3 -u MOUNTPOINT or SIGTERM.\n",
	    prog);
}

void fs_options_free(struct fs_options *o)
{
	free(o->orchestrator);
	free(o->token_file);
	free(o->pool);
	free(o->template_path);
	free(o->keepalive);
	free(o->stream);
	free(o->max_output);
	free(o->sandboxes);
	free(o->state);
	free(o->server);
	free(o->proxy);
	free(o->cache_max);
	free(o->journal_max);
	free(o->listing_max);
	free(o->dump_journal);
	free(o->mountpoint);
	free(o->source);
}
