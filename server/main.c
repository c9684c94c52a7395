/*
 * sandbox-server — the project's own sandbox contract server and local
 * orchestrator. See --help (usage() below) for every flag.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "faults.h"
#include "orch.h"
#include "sandbox.h"
#include "unixsock.h"

#include "common/files.h"
#include "common/log.h"

#define MAX_POOLS 64

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: sandbox-server [OPTIONS]\n"
	    "       sandbox-server --orchestrator --root DIR [OPTIONS]\n"
	    "\n"
	    "Without --orchestrator, serves one sandbox's contract (POST /execute,\n"
	    "GET|PUT|DELETE /files/PATH, GET /healthz) over a workspace directory,\n"
	    "configured like the reference server by SANDBOX_WORKSPACE (default\n"
	    "/workspace), SANDBOX_PORT (3000) and SANDBOX_SHELL (/bin/sh).\n"
	    "\n"
	    "With --orchestrator, serves /v1/sandbox and /v1/sandbox-pool; each\n"
	    "sandbox is a contract server on its own 127.0.0.1 port (with --unix: its\n"
	    "own Unix socket) with its workspace in ROOT/ID/workspace, and is served\n"
	    "again on the same port or socket after a restart.\n"
	    "\n"
	    "Options (both modes):\n"
	    "  --listen ADDR        address to listen on (default 127.0.0.1); an\n"
	    "                       orchestrator's sandboxes always use 127.0.0.1\n"
	    "  --port N             port (0: ephemeral; overrides SANDBOX_PORT)\n"
	    "  --port-file PATH     write the bound port there, atomically, once\n"
	    "                       connections are accepted\n"
	    "  --unix PATH          listen on the Unix socket PATH (mode 0600) instead\n"
	    "                       of TCP: no TCP port at all; a request whose peer\n"
	    "                       runs as another uid (SO_PEERCRED) is refused with\n"
	    "                       403. With --orchestrator, PATH's directory must be\n"
	    "                       private (created 0700; owned by this user) and each\n"
	    "                       sandbox listens on a socket of its own there, its\n"
	    "                       URL http+unix://%%2FDIR%%2FXXXXXXXX (its path\n"
	    "                       percent-encoded as the host)\n"
	    "  --url-file PATH      write the URL clients use (http://ADDR:PORT or\n"
	    "                       http+unix://...) there, mode 0600, atomically, once\n"
	    "                       connections are accepted\n"
	    "  --workspace DIR      the workspace (overrides SANDBOX_WORKSPACE)\n"
	    "  --shell PATH         the shell for commands (overrides SANDBOX_SHELL)\n"
	    "  --faults             serve the test routes /_admin/faults (GET, POST),\n"
	    "                       /_admin/stats and /_admin/log; in orchestrator mode\n"
	    "                       every sandbox serves them too, and a POST to the\n"
	    "                       orchestrator's /_admin/faults sets every sandbox's\n"
	    "  --fault NAME[=VALUE] switch a fault on from the start (repeatable):\n"
	    "                       lose_answer, drop_before, malformed_json,\n"
	    "                       hostile_listing, truncate_answer,\n"
	    "                       create_lose_answer (true|false, default true),\n"
	    "                       error_rate=0..1, delay_ms=N, hide_new_ms=N,\n"
	    "                       body_rate_kbps=N (file bodies at N KiB/s),\n"
	    "                       refuse_chunked (411 to a chunked PUT body),\n"
	    "                       drop_chunked_kb=N (close a chunked PUT after\n"
	    "                       N KiB of its body),\n"
	    "                       routes=all|execute|files|orchestrator\n"
	    "  --sandbox-timeout S  the per-request bound, in seconds (0: none): a\n"
	    "                       request to a sandbox (/execute, /files, /healthz)\n"
	    "                       still unanswered S seconds after it began is\n"
	    "                       answered 504 {\"error\": \"request exceeded the\n"
	    "                       sandbox's timeoutSeconds (S s)\"}, as an\n"
	    "                       orchestrator's proxy does; the command goes on to\n"
	    "                       its own end and its seat stays busy (409) until\n"
	    "                       then. Alone: the bound of this server (default 0).\n"
	    "                       With --orchestrator: the timeoutSeconds of a\n"
	    "                       create that gives none (default 300); each\n"
	    "                       sandbox is bounded by its create's value\n"
	    "  --help, --version\n"
	    "\n"
	    "Orchestrator mode:\n"
	    "  --orchestrator       serve the orchestrator API\n"
	    "  --root DIR           where sandboxes live (created, mode 0700)\n"
	    "  --token-file PATH    require 'Authorization: Bearer TOKEN' with the\n"
	    "                       token read from PATH (first line)\n"
	    "  --pool NAME[:MAX]    a pool, at most MAX live sandboxes (then 429)\n"
	    "                       (repeatable; default: one pool 'default')\n"
	    "  --image-start-ms N   an image (poolless) create's cold start: the\n"
	    "                       sandbox is listed as \"creating\", without url,\n"
	    "                       for N ms before it serves and the create answers\n"
	    "                       201 (default 1000; pool creates are immediate)\n"
	    "  --machinery          new workspaces hold what a real orchestrator's\n"
	    "                       agent leaves in the root: .pool/, .sandbox-agent,\n"
	    "                       .pool-exec.fifo, .pool-shim.log\n"
	    "A create's environment is given to the sandbox's commands,\n"
	    "idleTimeoutSeconds tears it down after that long without a request and\n"
	    "timeoutSeconds (0..3600) bounds each request to its URL (see\n"
	    "--sandbox-timeout); image, cpu (a number) and memory (an integer) are\n"
	    "recorded and shown; ports, artifacts, command, runtimeClass and volumes\n"
	    "are checked and ignored. Pools are listed as {\"id\", \"image\": "
	    "\"local\",\n"
	    "\"size\" (MAX, else the live count), \"warm\" (free seats), \"claimed\"\n"
	    "(live sandboxes)}.\n"
	    "\n"
	    "Faults (JSON of /_admin/faults; POST replaces the whole set):\n"
	    "  lose_answer          do the work, then close without answering\n"
	    "  drop_before          close the connection before doing the work\n"
	    "  error_rate           answer 500 at this rate, without doing the work\n"
	    "  delay_ms             wait this long before every answer\n"
	    "  malformed_json       JSON answers are cut short\n"
	    "  hostile_listing      listings also hold entries named '..', '.', 'a/b',\n"
	    "                       '' and '/etc/passwd', a negative size, a number as\n"
	    "                       a name and a missing size\n"
	    "  truncate_answer      answers announce their whole length, send half\n"
	    "                       of it, then close the connection (after the work)\n"
	    "  routes               the routes they apply to (never /_admin/)\n"
	    "  create_lose_answer   orchestrator: a create is done (the sandbox is\n"
	    "                       live), then the connection is closed unanswered\n"
	    "  hide_new_ms          orchestrator: for N ms after a sandbox was\n"
	    "                       created, GET /v1/sandbox/ID answers 404 and\n"
	    "                       GET /v1/sandbox omits it (a lagging read model);\n"
	    "                       a create of its id is still 409, DELETE works\n"
	    "/_admin/stats counts connections, requests, executes, commands, timeouts,\n"
	    "busy, puts, gets, lists, deletes, health, creates, destroys, errors,\n"
	    "faults, bounded (504s past the request bound). /_admin/log lists the\n"
	    "last 1000 commands started by /execute. The orchestrator's\n"
	    "GET /_admin/creates is the JSON array of the last 1000 create bodies it\n"
	    "received (each that parsed as JSON, valid or not), oldest first.\n");
}

/* Write a line to path (mode 0600) atomically, so a reader never sees a
 * partial one. Returns 0, or -1 with errno set. */
static int write_line_file(const char *path, const char *line)
{
	char *s = NULL;
	int n = asprintf(&s, "%s\n", line);
	int rc = n < 0 ? -1 : common_write_secret(path, s, (size_t)n);

	free(s);
	return rc < 0 ? -1 : 0;
}

/* What clients connect to: http://ADDR:PORT or the Unix form. */
static char *server_url(const char *unix_path, const char *listen, unsigned port)
{
	char *url = NULL;

	if (unix_path)
		return unixsock_url(unix_path);
	if (asprintf(&url, strchr(listen, ':') ? "http://[%s]:%u" : "http://%s:%u",
		     listen, port) < 0)
		return NULL;
	return url;
}

/* --unix PATH made absolute, so that its URL names it from anywhere.
 * Returns 0, or -1 with errno set. */
static int absolute_path(const char *path, char *out, size_t len)
{
	char cwd[4096];

	if (path[0] == '/') {
		cwd[0] = '\0';
	} else if (!getcwd(cwd, sizeof(cwd))) {
		return -1;
	}
	if (snprintf(out, len, "%s%s%s", cwd, cwd[0] ? "/" : "", path) >= (int)len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

static char *read_token(const char *path)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (!f)
		return NULL;
	n = getline(&line, &cap, f);
	fclose(f);
	if (n <= 0) {
		free(line);
		return NULL;
	}
	while (n > 0 &&
	       (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
		line[--n] = '\0';
	if (n == 0) {
		free(line);
		return NULL;
	}
	return line;
}

static int parse_port(const char *s, uint16_t *port)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (!*s || *end || v < 0 || v > 65535)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

static int parse_long(const char *s, long max, long *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (!*s || *end || v < 0 || v > max)
		return -1;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	enum {
		O_LISTEN = 256,
		O_PORT,
		O_PORT_FILE,
		O_UNIX,
		O_URL_FILE,
		O_WORKSPACE,
		O_SHELL,
		O_FAULTS,
		O_FAULT,
		O_ORCH,
		O_ROOT,
		O_MACHINERY,
		O_TOKEN_FILE,
		O_POOL,
		O_SANDBOX_TIMEOUT,
		O_IMAGE_START_MS,
		O_HELP,
		O_VERSION
	};
	static const struct option opts[] = {
	    {"listen", required_argument, NULL, O_LISTEN},
	    {"port", required_argument, NULL, O_PORT},
	    {"port-file", required_argument, NULL, O_PORT_FILE},
	    {"unix", required_argument, NULL, O_UNIX},
	    {"url-file", required_argument, NULL, O_URL_FILE},
	    {"workspace", required_argument, NULL, O_WORKSPACE},
	    {"shell", required_argument, NULL, O_SHELL},
	    {"faults", no_argument, NULL, O_FAULTS},
	    {"fault", required_argument, NULL, O_FAULT},
	    {"orchestrator", no_argument, NULL, O_ORCH},
	    {"root", required_argument, NULL, O_ROOT},
	    {"machinery", no_argument, NULL, O_MACHINERY},
	    {"token-file", required_argument, NULL, O_TOKEN_FILE},
	    {"pool", required_argument, NULL, O_POOL},
	    {"sandbox-timeout", required_argument, NULL, O_SANDBOX_TIMEOUT},
	    {"image-start-ms", required_argument, NULL, O_IMAGE_START_MS},
	    {"help", no_argument, NULL, O_HELP},
	    {"version", no_argument, NULL, O_VERSION},
	    {NULL, 0, NULL, 0},
	};
	const char *listen = "127.0.0.1", *port_file = NULL, *root = NULL,
		   *token_file = NULL, *unix_arg = NULL, *url_file = NULL;
	bool tcp_given = false;
	const char *workspace = getenv("SANDBOX_WORKSPACE");
	const char *shell = getenv("SANDBOX_SHELL");
	const char *env_port = getenv("SANDBOX_PORT");
	const char *pools[MAX_POOLS];
	size_t npools = 0;
	uint16_t port = 3000;
	bool admin = false, orchestrator = false, machinery = false;
	struct faults faults = {0};
	long sandbox_timeout = -1, image_start_ms = 1000;
	char err[256];
	int c, sig;
	sigset_t set;

	common_log_init("sandbox-server");
	/* an orchestrator holds a few descriptors per sandbox */
	(void)common_raise_nofile();
	if (env_port && *env_port && parse_port(env_port, &port)) {
		common_log("SANDBOX_PORT is not a port number");
		return 2;
	}
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		const char *e;

		switch (c) {
		case O_LISTEN:
			listen = optarg;
			tcp_given = true;
			break;
		case O_PORT:
			if (parse_port(optarg, &port)) {
				common_log("bad --port");
				return 2;
			}
			tcp_given = true;
			break;
		case O_UNIX:
			unix_arg = optarg;
			break;
		case O_URL_FILE:
			url_file = optarg;
			break;
		case O_PORT_FILE:
			port_file = optarg;
			break;
		case O_WORKSPACE:
			workspace = optarg;
			break;
		case O_SHELL:
			shell = optarg;
			break;
		case O_FAULTS:
			admin = true;
			break;
		case O_FAULT:
			e = faults_set(&faults, optarg);
			if (e) {
				common_log("--fault %s: %s", optarg, e);
				return 2;
			}
			break;
		case O_ORCH:
			orchestrator = true;
			break;
		case O_ROOT:
			root = optarg;
			break;
		case O_MACHINERY:
			machinery = true;
			break;
		case O_TOKEN_FILE:
			token_file = optarg;
			break;
		case O_POOL: {
			const char *colon = strchr(optarg, ':');
			char name[64];
			char *end = NULL;
			size_t n = colon ? (size_t)(colon - optarg) : strlen(optarg);

			snprintf(name, sizeof(name), "%.*s", (int)(n < 63 ? n : 63),
				 optarg);
			if (npools == MAX_POOLS || n > 54 || !orch_valid_id(name) ||
			    (colon && (strtol(colon + 1, &end, 10) <= 0 || *end))) {
				common_log("--pool NAME[:MAX]: NAME is a lowercase "
					   "label of at most 54 characters, MAX a "
					   "positive number (at most %d pools)",
					   MAX_POOLS);
				return 2;
			}
			pools[npools++] = optarg;
			break;
		}
		case O_SANDBOX_TIMEOUT:
			if (parse_long(optarg, 3600, &sandbox_timeout)) {
				common_log("--sandbox-timeout: seconds from 0 to 3600");
				return 2;
			}
			break;
		case O_IMAGE_START_MS:
			if (parse_long(optarg, 600000, &image_start_ms)) {
				common_log(
				    "--image-start-ms: milliseconds from 0 to 600000");
				return 2;
			}
			break;
		case O_HELP:
			usage(stdout);
			return 0;
		case O_VERSION:
			printf("sandbox-server %s\n", SANDBOXFS_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		common_log("unexpected argument %s", argv[optind]);
		return 2;
	}
	if (!shell || !*shell)
		shell = "/bin/sh";
	if (!workspace || !*workspace)
		workspace = "/workspace";
	if (orchestrator && !root) {
		common_log("--orchestrator needs --root DIR");
		return 2;
	}
	if (unix_arg && (tcp_given || port_file)) {
		common_log("--unix excludes --listen, --port and "
			   "--port-file (use --url-file)");
		return 2;
	}
	static char unix_buf[8192];
	const char *unix_path = unix_arg ? unix_buf : NULL;

	if (unix_arg && absolute_path(unix_arg, unix_buf, sizeof(unix_buf))) {
		common_log("--unix %s: %s", unix_arg, strerror(errno));
		return 1;
	}
	if (!orchestrator && (root || token_file || npools || machinery)) {
		fprintf(
		    stderr,
		    "sandbox-server: --root, --token-file, --pool and --machinery need "
		    "--orchestrator\n");
		return 2;
	}
	if (!orchestrator && faults.create_lose_answer) {
		common_log("--fault create_lose_answer needs --orchestrator");
		return 2;
	}

	/* Signals go to the main thread's sigwait; threads inherit the mask,
	 * commands get a clean one from exec_run. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	struct sandbox *sb = NULL;
	struct orch *o = NULL;
	unsigned bound;

	if (orchestrator) {
		char *token = NULL;

		if (token_file && !(token = read_token(token_file))) {
			/* The path is not secret; the token is never printed. */
			common_log("cannot read a token from %s", token_file);
			return 1;
		}
		if (!npools)
			pools[npools++] = "default";
		struct orch_config oc = {
		    .root = root,
		    .token = token,
		    .pools = pools,
		    .npools = npools,
		    .listen = listen,
		    .port = port,
		    .unix_path = unix_path,
		    .shell = shell,
		    .admin = admin,
		    .machinery = machinery,
		    .default_timeout_s = sandbox_timeout >= 0 ? sandbox_timeout : 300,
		    .image_start_ms = image_start_ms,
		    .faults = faults,
		};

		o = orch_start(&oc, err, sizeof(err));
		if (token) {
			explicit_bzero(token, strlen(token));
			free(token);
		}
		if (!o) {
			common_log("%s", err);
			return 1;
		}
		bound = orch_port(o);
	} else {
		struct sandbox_config sc = {
		    .workspace = workspace,
		    .shell = shell,
		    .listen = listen,
		    .port = port,
		    .unix_path = unix_path,
		    .admin = admin,
		    .bound_s = sandbox_timeout > 0 ? sandbox_timeout : 0,
		    .faults = faults,
		};

		sb = sandbox_start(&sc, err, sizeof(err));
		if (!sb) {
			common_log("%s", err);
			return 1;
		}
		bound = sandbox_port(sb);
	}
	char portline[16], *url = url_file ? server_url(unix_path, listen, bound) : NULL;
	const char *failed = NULL;

	snprintf(portline, sizeof(portline), "%u", bound);
	if (port_file && write_line_file(port_file, portline))
		failed = port_file;
	else if (url_file && (!url || write_line_file(url_file, url)))
		failed = url_file;
	free(url);
	if (failed) {
		common_log("cannot write %s: %s", failed, strerror(errno));
	} else {
		sigwait(&set, &sig);
	}
	if (o)
		orch_stop(o);
	if (sb)
		sandbox_stop(sb);
	return failed ? 1 : 0;
}
