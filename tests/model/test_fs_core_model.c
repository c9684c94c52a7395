/*
 * test_fs_core_model.c — the mount's options, path resolution and small
 * files without a mount: fs_options_parse, fs_resolve, fs_render,
 * fs_xattrs, the bounded run history.
 */
#include "../lib/check.h"
#include "fuse_i.h"
#include "node_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse(struct fs_options *o, int argc, const char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, (char **)argv);
	struct fuse_args copy = FUSE_ARGS_INIT(0, NULL);
	for (int i = 0; i < argc; i++)
		fuse_opt_add_arg(&copy, args.argv[i]);
	int rc = fs_options_parse(&copy, o);
	fuse_opt_free_args(&copy);
	return rc;
}

static char mnt[] = "/tmp/test_fs_core_XXXXXX";

static void test_options(void)
{
	struct fs_options o;
	if (!mkdtemp(mnt)) {
		perror("mkdtemp");
		exit(1);
	}
	const char *a1[] = {"sandboxfs", "-f", "-o",
			    "_netdev,auto,nofail,rw,defaults,timeout=5,pool=p,"
			    "max_runs=3,cache_max=2M,listing_max=1M,show_machinery",
			    mnt};
	CHECK(parse(&o, 5, a1) == 0);
	CHECK(o.listing_max_bytes == 1u << 20);
	CHECK(o.timeout == 5);
	CHECK(strcmp(o.pool, "p") == 0);
	CHECK(o.max_runs == 3);
	CHECK(o.cache_max_bytes == 2u << 20);
	CHECK(o.show_machinery == 1);
	CHECK(o.foreground == 1);
	CHECK(o.mountpoint && strcmp(o.mountpoint, mnt) == 0);
	fs_options_free(&o);

	const char *a2[] = {"sandboxfs", mnt};
	CHECK(parse(&o, 2, a2) == 0);
	CHECK(o.timeout == 60 && o.max_runs == 100 && o.max_threads >= 20);
	CHECK(o.listing_ttl_ms == 1000 && o.pool && strcmp(o.pool, "default") == 0);
	CHECK(o.listing_max_bytes == 64u << 20);
	fs_options_free(&o);

	const char *a3[] = {"sandboxfs", "-o", "timeout=-1", mnt};
	CHECK(parse(&o, 4, a3) < 0);
	fs_options_free(&o);
	const char *a4[] = {"sandboxfs", "-o", "cache_max=lots", mnt};
	CHECK(parse(&o, 4, a4) < 0);
	fs_options_free(&o);
	const char *a5[] = {"sandboxfs", "--local", "-o", "orchestrator=http://h", mnt};
	CHECK(parse(&o, 5, a5) < 0);
	fs_options_free(&o);
	const char *a6[] = {"sandboxfs", "-o", "listing_max=1", mnt};
	CHECK(parse(&o, 4, a6) < 0);
	fs_options_free(&o);
}

static struct fs_mount mount;

static char *render(const char *path)
{
	struct fs_loc loc;
	if (fs_resolve(&mount, path, &loc) < 0)
		return NULL;
	char *buf;
	size_t len;
	if (fs_render(&mount, &loc, &buf, &len) < 0)
		return NULL;
	return buf;
}

static bool render_is(const char *path, const char *want)
{
	char *got = render(path);
	bool ok = got && strcmp(got, want) == 0;
	if (!ok)
		fprintf(stderr, "%s: got \"%s\", want \"%s\"\n", path,
			got ? got : "(error)", want);
	free(got);
	return ok;
}

static void add_run(struct fs_sandbox *sb, const char *cmd, enum fs_run_status st,
		    int code, const char *out)
{
	struct fs_run *r = fs_sandbox_push_run(&mount, sb);
	r->seq = ++sb->last_seq;
	r->command = strdup(cmd);
	r->status = st;
	r->exit_code = code;
	r->out.data = strdup(out);
	r->out.len = strlen(out);
	r->err.data = strdup("");
	sb->commands_run++;
}

static void test_model(void)
{
	struct fs_mount *m = &mount;
	fs_mount_global = m;
	pthread_mutex_init(&m->lock, NULL);
	common_cond_init(&m->cond);
	pthread_mutex_init(&m->list_lock, NULL);
	m->opt.max_runs = 2;
	m->opt.timeout = 60;
	m->mount_ms = common_wall_ms();

	struct fs_sandbox *sb = fs_sandbox_add(m, "box-1");
	sb->present = true;
	sb->owned = true;
	sb->state = FS_SB_READY;
	fs_set_str(&sb->url, "http://127.0.0.1:1/secret");
	fs_set_str(&sb->pool, "default");
	struct fs_sandbox *hidden = fs_sandbox_add(m, "hidden");
	hidden->present = false;

	struct fs_loc loc;
	CHECK(fs_resolve(m, "/", &loc) == 0 && loc.node == FS_N_ROOT);
	CHECK(fs_resolve(m, "/.sandboxfs/health", &loc) == 0 && loc.node == FS_N_MFILE &&
	      loc.file == FS_F_HEALTH);
	CHECK(fs_resolve(m, "/.sandboxfs/nope", &loc) == -ENOENT);
	CHECK(fs_resolve(m, "/box-1", &loc) == 0 && loc.node == FS_N_SB && loc.sb == sb);
	CHECK(fs_resolve(m, "/hidden", &loc) == -ENOENT);
	CHECK(fs_resolve(m, "/Box-1", &loc) == -ENOENT);
	CHECK(fs_resolve(m, "/box-1/ctl/x", &loc) == -ENOTDIR);
	CHECK(fs_resolve(m, "/box-1/workspace/a/b.txt", &loc) == 0 &&
	      loc.node == FS_N_WS && strcmp(loc.rel, "a/b.txt") == 0);
	CHECK(fs_resolve(m, "/box-1/workspace", &loc) == 0 && loc.rel[0] == 0);
	CHECK(fs_resolve(m, "/box-1/runs/1", &loc) == -ENOENT);

	CHECK(render_is("/box-1/status", "idle\n"));
	CHECK(render_is("/box-1/exit", ""));
	CHECK(render_is("/box-1/last", "0\n"));
	CHECK(render_is("/box-1/timeout", "60\n"));
	CHECK(render_is("/box-1/state", "ready\n"));

	add_run(sb, "exit 3", FS_RUN_EXITED, 3, "");
	add_run(sb, "echo hi", FS_RUN_EXITED, 0, "hi\n");
	add_run(sb, "sleep 9", FS_RUN_TIMEOUT, 124, "");
	add_run(sb, "lost", FS_RUN_UNKNOWN, 0, "");
	/* bounded history: the two newest */
	CHECK(sb->nruns == 2);
	CHECK(fs_resolve(m, "/box-1/runs/2", &loc) == -ENOENT);
	CHECK(render_is("/box-1/runs/3/exit", "124\n"));
	CHECK(render_is("/box-1/runs/3/status", "timeout\n"));
	CHECK(render_is("/box-1/runs/3/command", "sleep 9\n"));
	CHECK(render_is("/box-1/status", "unknown\n"));
	CHECK(render_is("/box-1/exit", "")); /* unknown: no exit code */
	CHECK(render_is("/box-1/last", "4\n"));

	sb->timeout_s = -1;
	CHECK(render_is("/box-1/timeout", "0\n"));
	sb->timeout_s = 7;
	CHECK(render_is("/box-1/timeout", "7\n"));

	char *info = render("/box-1/info");
	CHECK(info && strstr(info, "\"commands_run\":\t4"));
	CHECK(info && !strstr(info, "secret") && !strstr(info, "127.0.0.1"));
	free(info);

	CHECK(fs_resolve(m, "/box-1", &loc) == 0);
	char *x;
	size_t xl;
	CHECK(fs_xattrs(m, &loc, &x, &xl) == 0);
	bool state = false, exitv = false;
	for (size_t i = 0; i < xl;) {
		const char *k = x + i, *v = k + strlen(k) + 1;
		if (strcmp(k, "user.sandbox.state") == 0)
			state = strcmp(v, "ready") == 0;
		if (strcmp(k, "user.sandbox.exit") == 0)
			exitv = true;
		CHECK(!strstr(v, "secret"));
		i = (size_t)(v + strlen(v) + 1 - x);
	}
	CHECK(state && !exitv);
	free(x);
}

/* fs_sandbox_find goes through the index fs_sandbox_add keeps. */
static void test_sandbox_index(void)
{
	static struct fs_mount im;
	enum { N = 5000 };
	char id[32];
	size_t added = 0, found = 0;
	for (int i = 0; i < N; i++) {
		snprintf(id, sizeof(id), "sbx-%d", i);
		struct fs_sandbox *sb = fs_sandbox_add(&im, id);
		added += sb && strcmp(sb->id, id) == 0;
	}
	CHECK_EQ(added, N);
	CHECK_EQ(im.nsbs, N);
	CHECK(!im.sb_index_broken && im.sb_index_cap >= 2 * N);
	for (int i = 0; i < N; i++) {
		snprintf(id, sizeof(id), "sbx-%d", i);
		struct fs_sandbox *sb = fs_sandbox_find(&im, id);
		found += sb == im.sbs[i];
	}
	CHECK_EQ(found, N);
	CHECK(fs_sandbox_find(&im, "sbx-5000") == NULL);
	CHECK(fs_sandbox_find(&im, "") == NULL);
	CHECK(fs_sandbox_add(&im, "sbx-7") == im.sbs[7]);
	CHECK_EQ(im.nsbs, N);
	for (size_t i = 0; i < im.nsbs; i++) {
		free(im.sbs[i]->id);
		free(im.sbs[i]);
	}
	free(im.sbs);
	free(im.sb_index);
}

int main(void)
{
	test_options();
	test_model();
	test_sandbox_index();
	rmdir(mnt);
	return check_done("fs core model");
}
