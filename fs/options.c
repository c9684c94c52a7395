/*
 * options.c — the command line: fuse_opt tables built from offsetof, the
 * environment defaults, fstab noise discarded, --help.
 */
#include "options_i.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <stddef.h>
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
};

static const struct fuse_opt fs_opt_table[] = {
    OPT("orchestrator=%s", orchestrator, 0), OPT("token_file=%s", token_file, 0),
    OPT("pool=%s", pool, 0), OPT("sandboxes=%s", sandboxes, 0), OPT("state=%s", state, 0),
    OPT("server=%s", server, 0), OPT("timeout=%d", timeout, 0),
    OPT("listing_ttl=%d", listing_ttl_ms, 0), OPT("attr_timeout=%lf", attr_timeout, 0),
    OPT("cache_max=%s", cache_max, 0), OPT("max_runs=%d", max_runs, 0),
    OPT("max_threads=%d", max_threads, 0), OPT("show_machinery", show_machinery, 1),
    OPT("no_auto_unmount", no_auto_unmount, 1), OPT("repair_journal", repair_journal, 1),
    OPT("--local", local, 1), OPT("--check", check, 1),
    OPT("--dump-journal %s", dump_journal, 0), OPT("--dump-journal=%s", dump_journal, 0),
    /* fstab and mount(8) noise: accepted and ignored */
    FUSE_OPT_KEY("_netdev", KEY_DISCARD), FUSE_OPT_KEY("auto", KEY_DISCARD),
    FUSE_OPT_KEY("noauto", KEY_DISCARD), FUSE_OPT_KEY("user", KEY_DISCARD),
    FUSE_OPT_KEY("users", KEY_DISCARD), FUSE_OPT_KEY("nouser", KEY_DISCARD),
    FUSE_OPT_KEY("nofail", KEY_DISCARD), FUSE_OPT_KEY("rw", KEY_DISCARD),
    FUSE_OPT_KEY("defaults", KEY_DISCARD), FUSE_OPT_KEY("-h", KEY_HELP),
    FUSE_OPT_KEY("--help", KEY_HELP), FUSE_OPT_KEY("-V", KEY_VERSION),
    FUSE_OPT_KEY("--version", KEY_VERSION), FUSE_OPT_END};

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
	default:
		return 1; /* keep: libfuse's options and the mountpoint */
	}
}

/* "1G", "512M", "4096" -> bytes; 0 on error. */
static uint64_t fs_parse_size(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return 0;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	case 't':
	case 'T':
		v <<= 40;
		end++;
		break;
	default:
		break;
	}
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

	struct fuse_cmdline_opts c;
	memset(&c, 0, sizeof(c));
	if (!o->show_help && !o->show_version) {
		if (fuse_parse_cmdline(args, &c) != 0)
			return -1;
		o->mountpoint = c.mountpoint;
		o->foreground = c.foreground;
		o->debug = c.debug;
		o->singlethread = c.singlethread;
	}

	if (!o->orchestrator) {
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
	    "usage: %s [OPTIONS] MOUNTPOINT\n"
	    "\n"
	    "Mounts remote sandboxes as directories (see DESIGN.md).\n"
	    "\n"
	    "sandboxfs options:\n"
	    "    -o orchestrator=URL    base URL of the orchestrator's /v1/sandbox API\n"
	    "                           (default: env SANDBOXFS_ORCHESTRATOR, else "
	    "none)\n"
	    "    -o token_file=PATH     orchestrator bearer token, read from a file\n"
	    "                           (default: env SANDBOXFS_TOKEN holds the token)\n"
	    "    -o pool=NAME           pool used by mkdir (default: default)\n"
	    "    -o sandboxes=PATH      attach the sandboxes listed there, one \"ID "
	    "URL\" a line\n"
	    "    -o state=DIR           journal and cache (default:\n"
	    "                           $XDG_STATE_HOME/sandboxfs/<mountpoint key>, mode "
	    "0700)\n"
	    "    -o timeout=SECONDS     default timeoutSeconds of commands, 0 = none "
	    "(60)\n"
	    "    -o listing_ttl=MS      orchestrator and workspace listing cache (1000)\n"
	    "    -o attr_timeout=SECS   kernel attribute cache; names are looked up\n"
	    "                           at every use (1)\n"
	    "    -o cache_max=SIZE      bound of the workspace file cache (1G)\n"
	    "    -o max_runs=N          command history kept per sandbox in runs/ (100)\n"
	    "    -o max_threads=N       FUSE worker threads; waiting readers hold one "
	    "(64)\n"
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
	    "user_allow_other)\n"
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
	free(o->sandboxes);
	free(o->state);
	free(o->server);
	free(o->cache_max);
	free(o->dump_journal);
	free(o->mountpoint);
}
