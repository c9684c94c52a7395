/*
 * main.c — sandboxfs [OPTIONS] MOUNTPOINT (DESIGN.md §7).
 *
 * Everything that can fail is checked before the mount appears: options,
 * the state directory, the journal, the local server, the orchestrator and
 * its token. Then the mount, the multithreaded loop, and a clean stop on
 * SIGTERM or fusermount3 -u.
 */
#include "local_i.h"
#include "fuse_i.h"
#include "preflight_i.h"

#include "common/crc.h"
#include "common/files.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* $XDG_STATE_HOME/sandboxfs/<key of the mountpoint> */
static char *fs_default_state(const char *mountpoint)
{
	char base[PATH_MAX];
	const char *xdg = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	if (xdg && xdg[0] == '/')
		snprintf(base, sizeof(base), "%s/sandboxfs", xdg);
	else if (home && home[0] == '/')
		snprintf(base, sizeof(base), "%s/.local/state/sandboxfs", home);
	else
		return NULL;
	char real[PATH_MAX];
	if (!realpath(mountpoint, real))
		snprintf(real, sizeof(real), "%s", mountpoint);
	char key[96];
	size_t k = 0;
	for (const char *p = real; *p && k < 60; p++) {
		if (isalnum((unsigned char)*p) || *p == '-' || *p == '.')
			key[k++] = *p;
		else if (k && key[k - 1] != '_')
			key[k++] = '_';
	}
	key[k] = '\0';
	uint32_t c = (uint32_t)crc32(0L, (const Bytef *)real, (uInt)strlen(real));
	char out[PATH_MAX + 200];
	snprintf(out, sizeof(out), "%s/%s-%08x", base, k ? key : "root", c);
	return strdup(out);
}

static int fs_prepare_state(struct fs_mount *m)
{
	if (!m->opt.state) {
		m->opt.state = fs_default_state(m->opt.mountpoint);
		if (!m->opt.state) {
			fs_log("state: set -o state=DIR (no XDG_STATE_HOME or HOME)");
			return -1;
		}
	}
	int rc = common_mkdirs(m->opt.state, 0700);
	if (rc < 0) {
		fs_log("state directory %s: %s", m->opt.state, strerror(-rc));
		return -1;
	}
	char real[PATH_MAX];
	if (!realpath(m->opt.state, real)) {
		fs_log("state directory %s: %s", m->opt.state, strerror(errno));
		return -1;
	}
	struct stat st;
	if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fs_log("state directory %s: not a directory", real);
		return -1;
	}
	if (st.st_uid != getuid()) {
		fs_log("state directory %s: owned by another user", real);
		return -1;
	}
	if ((st.st_mode & 0077) && chmod(real, 0700) < 0) {
		fs_log("state directory %s: cannot make it 0700: %s", real,
		       strerror(errno));
		return -1;
	}
	m->state_dir = strdup(real);
	return m->state_dir ? 0 : -1;
}

/* The daemon's memory holds the token and every sandbox URL: no core
 * file, and no other process of the same user reads or traces it (as
 * ssh-agent does), unless -d asks for a debuggable daemon. */
static void fs_protect_memory(const struct fs_options *o)
{
	if (o->debug)
		return;
	struct rlimit no_core = {0, 0};
	if (setrlimit(RLIMIT_CORE, &no_core) < 0)
		fs_log("warning: cannot turn core files off: %s", strerror(errno));
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		fs_log("warning: cannot make the daemon non-dumpable: %s",
		       strerror(errno));
}

/* A token file others can read is refused, as ssh refuses such a key:
 * the token lets anyone create and delete sandboxes. 0 or -1 (printed). */
static int fs_check_token_file_mode(const char *path, int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0) {
		fs_log("token_file %s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		fs_log("token_file %s: not a regular file", path);
		return -1;
	}
	if (st.st_mode & 077) {
		fs_log("token_file %s: mode %04o lets others read the token; "
		       "make it private: chmod 600 %s",
		       path, (unsigned)(st.st_mode & 07777), path);
		return -1;
	}
	if (st.st_uid != getuid() && st.st_uid != 0) {
		fs_log("token_file %s: owned by uid %u, not by you (uid %u) or root; "
		       "use a file of your own",
		       path, (unsigned)st.st_uid, (unsigned)getuid());
		return -1;
	}
	return 0;
}

/* The bearer token: token_file, else env SANDBOXFS_TOKEN. Never printed. */
static int fs_read_token(struct fs_mount *m)
{
	if (m->opt.token_file) {
		int fd = open(m->opt.token_file, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fs_log("token_file %s: %s", m->opt.token_file, strerror(errno));
			return -1;
		}
		if (fs_check_token_file_mode(m->opt.token_file, fd) < 0) {
			close(fd);
			return -1;
		}
		char buf[4096];
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n < 0) {
			fs_log("token_file %s: %s", m->opt.token_file, strerror(errno));
			return -1;
		}
		buf[n] = '\0';
		while (n > 0 && isspace((unsigned char)buf[n - 1]))
			buf[--n] = '\0';
		if (n == 0) {
			fs_log("token_file %s: empty", m->opt.token_file);
			return -1;
		}
		m->token = strdup(buf);
		memset(buf, 0, sizeof(buf));
		return 0;
	}
	const char *e = getenv("SANDBOXFS_TOKEN");
	if (e && *e)
		m->token = strdup(e);
	return 0;
}

/* Lists the orchestrator's sandboxes: reachable, token accepted. */
static int fs_check_orchestrator(struct fs_mount *m, char *msg, size_t len)
{
	struct backend_sandbox_list l = {0};
	struct backend_error err = {0};
	enum backend_status st = BACKEND_NOT_SENT;
	for (int i = 0; i < 3; i++) {
		st = backend_orch_list(m->backend, &m->orch, &l, &err);
		backend_sandbox_list_clear(&l);
		if (st != BACKEND_NOT_SENT && st != BACKEND_SERVER_ERROR)
			break;
		usleep(200000u << i);
	}
	if (st == BACKEND_OK)
		return 0;
	if (st == BACKEND_DENIED)
		snprintf(msg, len,
			 "orchestrator refused the token (%s): put a valid token in "
			 "the file given by -o token_file=PATH (or env SANDBOXFS_TOKEN)",
			 err.message);
	else if (st == BACKEND_NOT_SENT)
		snprintf(msg, len,
			 "orchestrator unreachable (%s): start it, or fix -o "
			 "orchestrator=URL (env SANDBOXFS_ORCHESTRATOR)",
			 err.message);
	else
		snprintf(msg, len, "orchestrator not usable (%s): %s",
			 backend_status_name(st), err.message);
	return -1;
}

static int fs_setup_backend(struct fs_mount *m)
{
	struct backend_config bc;
	backend_config_defaults(&bc);
	bc.proxy = m->opt.proxy && *m->opt.proxy ? m->opt.proxy : NULL;
	/* A file no listing sized lands in the cache all the same. */
	bc.max_download_bytes = m->opt.cache_max_bytes;
	m->backend = backend_new(&bc);
	if (!m->backend) {
		fs_log("out of memory");
		return -1;
	}
	return 0;
}

static int fs_run_check(struct fs_mount *m)
{
	int bad = journal_registry_check(stdout);
	if (m->opt.orchestrator) {
		if (fs_read_token(m) < 0 || fs_setup_backend(m) < 0)
			return 1;
		m->orch.base_url = m->opt.orchestrator;
		m->orch.token = m->token;
		char msg[512];
		if (fs_check_orchestrator(m, msg, sizeof(msg)) < 0) {
			printf("orchestrator: %s\n", msg);
			bad++;
		} else {
			printf("orchestrator: ok\n");
		}
	}
	return bad ? 1 : 0;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	static struct fs_mount mount;
	struct fs_mount *m = &mount;
	struct fs_local local = {0};
	int ret = 1;
	int running = 0;

	common_log_init("sandboxfs");
	fs_mount_global = m;
	pthread_mutex_init(&m->lock, NULL);
	common_cond_init(&m->cond);
	pthread_mutex_init(&m->list_lock, NULL);
	m->uid = getuid();
	m->gid = getgid();
	m->mount_ms = common_wall_ms();

	if (fs_options_parse(&args, &m->opt) < 0) {
		ret = 2;
		goto out_args;
	}
	fs_protect_memory(&m->opt);
	/* hundreds of running commands hold a few descriptors each */
	if (common_raise_nofile() < 0)
		fs_log("cannot raise the open-file limit: %s", strerror(errno));
	if (m->opt.show_help) {
		fs_options_help(argv[0]);
		ret = 0;
		goto out_args;
	}
	if (m->opt.show_version) {
		/* what computes the cache files' sums: it bounds a large
		 * write's CPU (common/crc.h) */
		printf("sandboxfs %s (libfuse %s, crc32 %s)\n", SANDBOXFS_VERSION,
		       fuse_pkgversion(), common_crc32_impl());
		ret = 0;
		goto out_args;
	}
	if (m->opt.dump_journal) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/journal", m->opt.dump_journal);
		int rc = journal_dump(path, stdout);
		if (rc < 0)
			fs_log("%s: %s", path, strerror(-rc));
		ret = rc == 0 ? 0 : 1;
		goto out_args;
	}
	if (m->opt.check) {
		ret = fs_run_check(m);
		if (m->backend)
			backend_free(m->backend);
		goto out_args;
	}
	if (!m->opt.mountpoint) {
		fs_log("no mountpoint (see --help)");
		ret = 2;
		goto out_args;
	}
	struct stat mst;
	if (stat(m->opt.mountpoint, &mst) < 0 || !S_ISDIR(mst.st_mode)) {
		fs_log("mountpoint %s: %s", m->opt.mountpoint,
		       errno ? strerror(errno) : "not a directory");
		goto out_args;
	}

	if (fs_preflight_fuse(getuid() != 0 || !m->opt.no_auto_unmount) < 0)
		goto out_args;
	if (!m->opt.no_auto_unmount)
		fuse_opt_add_arg(&args, "-oauto_unmount");
	/* Other users may come in: the kernel checks the modes shown, so
	 * ctl, .sandboxfs/ctl, timeout and every workspace file stay
	 * writable by the mounting user only (the daemon never looks at the
	 * caller's uid itself). */
	if (m->opt.other_users)
		fuse_opt_add_arg(&args, "-odefault_permissions");
	fuse_opt_add_arg(&args, "-osubtype=sandboxfs");
	fuse_opt_add_arg(&args, "-ofsname=sandboxfs");
	/* fuse_session_new checks the remaining options before anything
	 * starts */
	if (fs_ll_setup(m->opt.debug != 0) < 0) {
		fs_log("out of memory");
		goto out_args;
	}
	m->session = fuse_session_new(&args, &fs_ll_ops, sizeof(fs_ll_ops), m);
	if (!fs_session(m))
		goto out_args;
	m->kernel = &fs_kernel_fuse;

	if (fs_prepare_state(m) < 0)
		goto out_fuse;

	struct journal_options jo;
	journal_options_defaults(&jo);
	jo.dir = m->state_dir;
	jo.max_runs = (size_t)m->opt.max_runs;
	if (m->opt.journal_max_bytes)
		jo.compact_bytes = m->opt.journal_max_bytes;
	jo.repair = m->opt.repair_journal != 0;
	int rc = journal_open(&jo, &m->journal, &m->jreport);
	if (rc < 0) {
		fs_log("journal: %s%s",
		       m->jreport.message[0] ? m->jreport.message : strerror(-rc),
		       rc == -EBADMSG ? " (sandboxfs --dump-journal STATE shows it; "
					"remount with -o repair_journal)"
				      : "");
		goto out_fuse;
	}
	if (m->jreport.unknown_marked)
		fs_log("journal: %zu requests had no recorded outcome; marked "
		       "unknown, never resent",
		       m->jreport.unknown_marked);
	if (m->jreport.repaired)
		fs_log("journal: repaired: %s", m->jreport.message);
	if (m->jreport.torn_tail)
		fs_log("journal: a torn last record was cut at offset %llu "
		       "(kept in %s)",
		       (unsigned long long)m->jreport.torn_offset, m->jreport.torn_copy);

	if (fs_setup_backend(m) < 0)
		goto out_journal;
	char msg[512];
	if (m->opt.local) {
		/* The local server and every command it runs inherit this
		 * environment: an orchestrator token there is not theirs. */
		unsetenv("SANDBOXFS_TOKEN");
		if (fs_local_start(&local, m->state_dir, m->opt.server, m->opt.foreground,
				   msg, sizeof(msg)) < 0) {
			fs_log("%s", msg);
			goto out_backend;
		}
		m->opt.orchestrator = strdup(local.url);
		m->token = strdup(local.token);
	} else if (fs_read_token(m) < 0) {
		goto out_backend;
	}
	if (m->opt.template_path &&
	    fs_template_load(m->opt.template_path, &m->template_json, msg, sizeof(msg)) < 0) {
		fs_log("%s", msg);
		goto out_local;
	}
	if (m->opt.orchestrator) {
		m->have_orch = true;
		m->orch.base_url = m->opt.orchestrator;
		m->orch.token = m->token;
		if (fs_check_orchestrator(m, msg, sizeof(msg)) < 0) {
			fs_log("%s", msg);
			goto out_local;
		}
	}

	struct journal_state st;
	if (journal_snapshot(m->journal, &st) < 0) {
		fs_log("journal: cannot read its state");
		goto out_local;
	}
	if (m->opt.local) /* before anything can send to them */
		fs_local_forget_foreign(&local, &st);
	fs_model_load(m, &st);

	char cache_dir[PATH_MAX];
	snprintf(cache_dir, sizeof(cache_dir), "%s/cache", m->state_dir);
	struct wscache_config wc = {
	    .backend = m->backend,
	    .journal = m->journal,
	    .cache_dir = cache_dir,
	    .max_bytes = m->opt.cache_max_bytes,
	    .listing_ttl_ms = m->opt.listing_ttl_ms,
	    .listing_max_bytes = m->opt.listing_max_bytes,
	    .show_machinery = m->opt.show_machinery != 0,
	    .uid = m->uid,
	    .gid = m->gid,
	    .exec = fs_command_exec_cb,
	    .exec_ctx = m,
	    .invalidate = fs_ws_invalidate,
	    .interrupted = fs_ws_interrupted,
	    .exited = fs_ws_exited,
	    .kernel_ctx = m,
	};
	m->wscache = wscache_new(&wc);
	if (!m->wscache) {
		fs_log("workspace cache %s: cannot set it up", cache_dir);
		journal_state_clear(&st);
		goto out_local;
	}
	rc = wscache_restore(m->wscache, &st);
	if (rc < 0)
		fs_log("workspace cache: restoring pending uploads: %s", strerror(-rc));
	journal_state_clear(&st);

	if (m->opt.sandboxes &&
	    fs_attach_file(m, m->opt.sandboxes, msg, sizeof(msg)) < 0) {
		fs_log("%s", msg);
		goto out_ws;
	}
	if (m->have_orch) {
		fs_reconcile_creates(m);
		fs_orch_refresh(m, true);
	}

	struct fuse_session *se = fs_session(m);
	if (fuse_session_mount(se, m->opt.mountpoint) != 0)
		goto out_ws;
	int drc = fs_dirops_parallel(se);
	if (drc < 0)
		fs_log("parallel directory operations: %s; lookups in a directory wait "
		       "for each other", strerror(-drc));
	if (fuse_daemonize(m->opt.foreground) != 0)
		goto out_unmount;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_unmount;

	if (m->opt.singlethread) {
		ret = fuse_session_loop(se);
	} else {
		struct fuse_loop_config *lc = fuse_loop_cfg_create();
		fuse_loop_cfg_set_max_threads(lc, (unsigned)m->opt.max_threads);
		fuse_loop_cfg_set_idle_threads(lc, 16);
		ret = fuse_session_loop_mt(se, lc);
		fuse_loop_cfg_destroy(lc);
	}
	ret = ret < 0 ? 1 : 0;
	atomic_store(&m->stopping, true);
	fuse_remove_signal_handlers(se);

out_unmount:
	atomic_store(&m->stopping, true);
	fs_ll_gate_close(); /* no reply or notification after the close */
	fuse_session_unmount(fs_session(m));
out_ws:
	fs_keepalive_stop(m);
	running = fs_command_drain(m, 10);
	/* requests answered from threads of their own end with the session
	 * (fs_should_stop_waiting); none may answer after it is destroyed */
	for (int i = 0; i < 1000 && atomic_load(&m->ll_waiters) > 0; i++)
		usleep(10000);
	if (atomic_load(&m->ll_waiters) > 0 && running == 0)
		running = atomic_load(&m->ll_waiters);
	/* a command thread still running may yet touch its workspace; the
	 * pending uploads are journaled and retried by the next mount */
	if (m->wscache && running == 0)
		wscache_free(m->wscache);
out_local:
	if (local.pid > 0)
		fs_local_stop(local.pid);
out_backend:
	if (running > 0) {
		/* their intents stay open: the next mount marks them unknown */
		fs_log("%d commands still running at unmount; their outcome "
		       "will be recorded as unknown",
		       running);
		_exit(ret);
	}
	backend_free(m->backend);
out_journal:
	journal_close(m->journal);
out_fuse:
	fuse_session_destroy(fs_session(m));
out_args:
	fuse_opt_free_args(&args);
	if (m->token)
		memset(m->token, 0, strlen(m->token));
	free(m->token);
	free(m->state_dir);
	free(m->template_json);
	fs_options_free(&m->opt);
	return ret;
}
