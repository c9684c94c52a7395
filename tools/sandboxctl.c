/*
 * sandboxctl — a small client of the sandbox contract and the orchestrator
 * API on top of backend/, for diagnostics and as the direct-HTTP baseline of
 * the benchmarks. It never prints a sandbox URL or a token.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "backend.h"
#include "common/clock.h"

/* Exit codes (exec exits with the command's own code instead). */
enum {
	EX_OK = 0,
	EX_FAIL = 1,	    /* other failures: server error, bad answer, local */
	EX_USAGE = 2,	    /* bad command line or configuration */
	EX_NOTFOUND = 3,    /* 404 */
	EX_NOTSENT = 4,	    /* not reachable: the request was not sent */
	EX_LOST = 5,	    /* answer lost: the outcome is unknown */
	EX_CONFLICT = 6,    /* 409: busy seat or id already live */
	EX_DENIED = 7,	    /* 401/403 */
	EX_EXEC_FAIL = 125, /* exec: the machinery failed (see stderr) */
};

static const char usage_text[] =
    "usage: sandboxctl [OPTIONS] VERB [ARGS]\n"
    "\n"
    "Sandbox verbs (the sandbox URL comes from --url-file F or env SANDBOX_URL):\n"
    "  exec CMD [--timeout S]   run CMD; print its stdout and stderr; exit with\n"
    "                           its exit code (125 when the machinery failed)\n"
    "  get PATH [OUT]           download a workspace file (to stdout by default)\n"
    "  put PATH [IN]            upload a file (from stdin by default)\n"
    "  ls [PATH]                list a directory: type, size, name\n"
    "  rm PATH                  delete a file or a whole tree\n"
    "  health                   check /healthz\n"
    "  bench-exec N             N executes of ':' on one thread (keep-alive)\n"
    "  bench-put N SIZE         N uploads of SIZE bytes\n"
    "  bench-get N [SIZE]       N downloads of a SIZE-byte file (default 1 MiB)\n"
    "                           benchmarks print median/p99 latency and the\n"
    "                           number of TCP connections opened\n"
    "\n"
    "Orchestrator verbs (--orchestrator URL or env SANDBOXFS_ORCHESTRATOR;\n"
    "token from --token-file F or env SANDBOXFS_TOKEN):\n"
    "  create ID [--pool P] [--idle S] [--request-timeout S] [--spec JSON]\n"
    "         [--save-url F]\n"
    "  list\n"
    "  pools [ID]               the pools (or one): id, image, size, warm,\n"
    "                           claimed (- when the orchestrator gives none)\n"
    "  info ID [--save-url F]\n"
    "  delete ID\n"
    "  --save-url F writes the sandbox's URL to F (mode 0600); URLs are\n"
    "  never printed. --spec JSON is a JSON object of further create fields\n"
    "  (environment, ports, command, cpu, memory, ...) sent as given; --pool,\n"
    "  --idle and --request-timeout (timeoutSeconds: the bound of each request\n"
    "  to the sandbox, 0-3600, 0 = none) win over its fields; without --pool\n"
    "  the spec's pool or image is used, else the pool 'default'.\n"
    "\n"
    "URLs: http://HOST[:PORT][/BASE], https://..., or http+unix://PATH[/BASE]\n"
    "  for a server on a Unix socket, PATH percent-encoded (/ is %2F).\n"
    "\n"
    "Options: --connect-timeout MS, --insecure (no TLS verification),\n"
    "  --ca-file F, -h/--help.\n"
    "\n"
    "Exit codes: 0 ok, 1 failure, 2 usage, 3 not found, 4 not sent\n"
    "  (unreachable), 5 answer lost (outcome unknown), 6 conflict (busy or\n"
    "  exists), 7 denied.\n";

struct opts {
	const char *url_file, *orchestrator, *token_file, *pool, *save_url, *ca_file;
	const char *spec;
	long timeout_s, idle_s, connect_ms, request_timeout_s; /* -1: not given */
	bool insecure;
};

static int exit_for(enum backend_status st)
{
	switch (st) {
	case BACKEND_OK:
		return EX_OK;
	case BACKEND_NOT_FOUND:
		return EX_NOTFOUND;
	case BACKEND_NOT_SENT:
		return EX_NOTSENT;
	case BACKEND_ANSWER_LOST:
		return EX_LOST;
	case BACKEND_CONFLICT:
		return EX_CONFLICT;
	case BACKEND_DENIED:
		return EX_DENIED;
	case BACKEND_BAD_REQUEST:
		return EX_USAGE;
	default:
		return EX_FAIL;
	}
}

static int fail(const char *verb, enum backend_status st, const struct backend_error *e)
{
	fprintf(stderr, "sandboxctl: %s: %s: %s\n", verb, backend_status_name(st),
		e->message);
	return exit_for(st);
}

/* Reads the first line of a file, trimmed; NULL with a message. */
static char *read_secret_file(const char *path, const char *what)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (!f) {
		fprintf(stderr, "sandboxctl: cannot open the %s file: %s\n", what,
			strerror(errno));
		return NULL;
	}
	n = getline(&line, &cap, f);
	fclose(f);
	if (n <= 0) {
		free(line);
		fprintf(stderr, "sandboxctl: the %s file is empty\n", what);
		return NULL;
	}
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' ||
			 line[n - 1] == ' ' || line[n - 1] == '\t'))
		line[--n] = '\0';
	return line;
}

static char *sandbox_url(const struct opts *o)
{
	const char *env;

	if (o->url_file)
		return read_secret_file(o->url_file, "URL");
	env = getenv("SANDBOX_URL");
	if (env && *env)
		return strdup(env);
	fprintf(stderr,
		"sandboxctl: no sandbox URL: use --url-file F or env SANDBOX_URL\n");
	return NULL;
}

static bool orchestrator(const struct opts *o, struct backend_orchestrator *orch,
			 char **token)
{
	const char *env;

	orch->base_url =
	    o->orchestrator ? o->orchestrator : getenv("SANDBOXFS_ORCHESTRATOR");
	if (!orch->base_url || !*orch->base_url) {
		fprintf(stderr, "sandboxctl: no orchestrator: use --orchestrator URL or "
				"env SANDBOXFS_ORCHESTRATOR\n");
		return false;
	}
	*token = NULL;
	if (o->token_file) {
		*token = read_secret_file(o->token_file, "token");
		if (!*token)
			return false;
	} else if ((env = getenv("SANDBOXFS_TOKEN")) && *env) {
		*token = strdup(env);
	}
	orch->token = *token;
	return true;
}

static bool save_url(const char *path, const char *url)
{
	int fd;
	size_t n;
	bool ok;

	if (!url) {
		fprintf(stderr, "sandboxctl: the sandbox has no URL yet\n");
		return false;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || fchmod(fd, 0600) < 0) {
		fprintf(stderr, "sandboxctl: cannot write the URL file: %s\n",
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return false;
	}
	n = strlen(url);
	ok = write(fd, url, n) == (ssize_t)n && write(fd, "\n", 1) == 1;
	ok = (close(fd) == 0) && ok;
	if (!ok)
		fprintf(stderr, "sandboxctl: cannot write the URL file\n");
	return ok;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void bench_report(const char *name, struct backend *b, uint64_t *lat, long n,
			 uint64_t total_us, uint64_t size)
{
	struct backend_stats s;

	backend_get_stats(b, &s);
	qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
	printf("%s: n=%ld median_ms=%.3f p99_ms=%.3f total_s=%.3f", name, n,
	       (double)lat[n / 2] / 1000.0, (double)lat[(n * 99) / 100] / 1000.0,
	       (double)total_us / 1e6);
	if (size)
		printf(" MiB_per_s=%.1f",
		       (double)size * (double)n / (1 << 20) / ((double)total_us / 1e6));
	printf(" connections=%llu\n", (unsigned long long)s.connections_opened);
}

/* A temporary unlinked file of size bytes (pattern), for uploads. */
static int temp_file(uint64_t size)
{
	char tmpl[] = "/tmp/sandboxctl-XXXXXX";
	int fd = mkstemp(tmpl);
	char buf[65536];

	if (fd < 0)
		return -1;
	unlink(tmpl);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)('a' + i % 26);
	for (uint64_t left = size; left > 0;) {
		size_t k = left < sizeof(buf) ? (size_t)left : sizeof(buf);

		if (write(fd, buf, k) != (ssize_t)k) {
			close(fd);
			return -1;
		}
		left -= k;
	}
	return fd;
}

static bool parse_long(const char *s, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	return s[0] && !*end && !errno && *out >= 0;
}

static int run_bench(struct backend *b, const char *url, const char *verb, int argc,
		     char **argv)
{
	long n, size = 1 << 20;
	struct backend_error e;
	enum backend_status st = BACKEND_OK;
	uint64_t *lat, t0;
	int fd = -1;

	if (argc < 1 || !parse_long(argv[0], &n) || n < 1 ||
	    (argc > 1 && !parse_long(argv[1], &size)) ||
	    (strcmp(verb, "bench-put") == 0 && argc < 2)) {
		fprintf(stderr, "sandboxctl: %s: bad arguments\n", verb);
		return EX_USAGE;
	}
	lat = calloc((size_t)n, sizeof(*lat));
	if (!lat)
		return EX_FAIL;
	if (strcmp(verb, "bench-exec") != 0) {
		fd = temp_file((uint64_t)size);
		if (fd < 0) {
			fprintf(stderr, "sandboxctl: cannot make a temporary file\n");
			free(lat);
			return EX_FAIL;
		}
	}
	if (strcmp(verb, "bench-get") == 0) {
		st = backend_file_put(b, url, "sandboxctl-bench/get", fd, (uint64_t)size,
				      &e);
		close(fd);
		fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	}
	t0 = common_now_us();
	for (long i = 0; i < n && st == BACKEND_OK; i++) {
		uint64_t t = common_now_us();

		if (strcmp(verb, "bench-exec") == 0) {
			struct backend_exec_result r;

			st = backend_execute(b, url, ":", 60, &r, &e);
			backend_exec_result_clear(&r);
		} else if (strcmp(verb, "bench-put") == 0) {
			st = backend_file_put(b, url, "sandboxctl-bench/put", fd,
					      (uint64_t)size, &e);
		} else {
			st = backend_file_get(b, url, "sandboxctl-bench/get", fd, NULL,
					      &e);
		}
		lat[i] = common_now_us() - t;
	}
	if (fd >= 0)
		close(fd);
	if (st != BACKEND_OK) {
		free(lat);
		return fail(verb, st, &e);
	}
	bench_report(verb, b, lat, n, common_now_us() - t0,
		     strcmp(verb, "bench-exec") == 0 ? 0 : (uint64_t)size);
	free(lat);
	return EX_OK;
}

static int run_sandbox_verb(struct backend *b, const struct opts *o, const char *verb,
			    int argc, char **argv)
{
	struct backend_error e;
	enum backend_status st;
	char *url = sandbox_url(o);
	int rc = EX_OK;

	if (!url)
		return EX_USAGE;
	if (strcmp(verb, "exec") == 0) {
		struct backend_exec_result r;

		if (argc != 1) {
			fprintf(stderr,
				"sandboxctl: exec takes one command (quote it)\n");
			rc = EX_USAGE;
			goto out;
		}
		st = backend_execute(b, url, argv[0], o->timeout_s, &r, &e);
		if (st != BACKEND_OK) {
			fail("exec", st, &e);
			rc = EX_EXEC_FAIL;
			goto out;
		}
		fwrite(r.out, 1, r.out_len, stdout);
		fwrite(r.err, 1, r.err_len, stderr);
		if (r.truncated)
			fprintf(stderr, "sandboxctl: output truncated by the sandbox\n");
		rc = r.exit_code < 0 || r.exit_code > 255 ? EX_EXEC_FAIL : r.exit_code;
		backend_exec_result_clear(&r);
	} else if (strcmp(verb, "get") == 0) {
		int fd = 1;
		char *tmp = NULL;

		if (argc < 1 || argc > 2) {
			rc = EX_USAGE;
			fprintf(stderr, "sandboxctl: get PATH [OUT]\n");
			goto out;
		}
		if (argc == 2) {
			/* Written aside and renamed, so OUT is never half a file. */
			if (asprintf(&tmp, "%s.sandboxctl-XXXXXX", argv[1]) < 0 ||
			    (fd = mkstemp(tmp)) < 0) {
				fprintf(stderr,
					"sandboxctl: cannot create the output: %s\n",
					strerror(errno));
				free(tmp);
				rc = EX_FAIL;
				goto out;
			}
		}
		st = backend_file_get(b, url, argv[0], fd, NULL, &e);
		if (tmp) {
			if (close(fd) != 0 && st == BACKEND_OK) {
				st = BACKEND_LOCAL;
				snprintf(e.message, sizeof(e.message), "close: %s",
					 strerror(errno));
			}
			if (st == BACKEND_OK && rename(tmp, argv[1]) != 0) {
				st = BACKEND_LOCAL;
				snprintf(e.message, sizeof(e.message), "rename: %s",
					 strerror(errno));
			}
			if (st != BACKEND_OK)
				unlink(tmp);
			free(tmp);
		}
		if (st != BACKEND_OK)
			rc = fail("get", st, &e);
	} else if (strcmp(verb, "put") == 0) {
		int fd = 0;
		struct stat sb;

		if (argc < 1 || argc > 2) {
			rc = EX_USAGE;
			fprintf(stderr, "sandboxctl: put PATH [IN]\n");
			goto out;
		}
		if (argc == 2 && (fd = open(argv[1], O_RDONLY | O_CLOEXEC)) < 0) {
			fprintf(stderr, "sandboxctl: cannot open the input: %s\n",
				strerror(errno));
			rc = EX_FAIL;
			goto out;
		}
		if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
			/* A pipe: spool it to a temporary file to know its
			 * size and to read it with pread. */
			int t = temp_file(0);
			char buf[65536];
			ssize_t n;

			if (t < 0) {
				rc = EX_FAIL;
				goto out;
			}
			while ((n = read(fd, buf, sizeof(buf))) > 0) {
				if (write(t, buf, (size_t)n) != n) {
					n = -1;
					break;
				}
			}
			if (n < 0 || fstat(t, &sb) != 0) {
				fprintf(stderr,
					"sandboxctl: cannot spool the input: %s\n",
					strerror(errno));
				close(t);
				rc = EX_FAIL;
				goto out;
			}
			if (fd != 0)
				close(fd);
			fd = t;
		}
		st = backend_file_put(b, url, argv[0], fd, (uint64_t)sb.st_size, &e);
		if (fd != 0)
			close(fd);
		if (st != BACKEND_OK)
			rc = fail("put", st, &e);
	} else if (strcmp(verb, "ls") == 0) {
		struct backend_listing l;

		st = backend_list(b, url, argc > 0 ? argv[0] : "", &l, &e);
		if (st != BACKEND_OK) {
			rc = fail("ls", st, &e);
			goto out;
		}
		for (size_t i = 0; i < l.count; i++)
			printf("%c %12llu %s\n", l.entries[i].is_dir ? 'd' : '-',
			       (unsigned long long)l.entries[i].size, l.entries[i].name);
		if (l.dropped)
			fprintf(stderr, "sandboxctl: %zu invalid entries dropped\n",
				l.dropped);
		backend_listing_clear(&l);
	} else if (strcmp(verb, "rm") == 0) {
		if (argc != 1) {
			rc = EX_USAGE;
			fprintf(stderr, "sandboxctl: rm PATH\n");
			goto out;
		}
		st = backend_file_delete(b, url, argv[0], &e);
		if (st != BACKEND_OK)
			rc = fail("rm", st, &e);
	} else if (strcmp(verb, "health") == 0) {
		st = backend_health(b, url, &e);
		if (st != BACKEND_OK)
			rc = fail("health", st, &e);
		else
			printf("ok\n");
	} else {
		rc = run_bench(b, url, verb, argc, argv);
	}
out:
	explicit_bzero(url, strlen(url));
	free(url);
	return rc;
}

static const char *state_name(enum backend_sandbox_state s)
{
	static const char *names[] = {"creating", "ready", "failed", "deleting",
				      "unknown"};

	return names[s];
}

/* True when spec (a JSON object's text, or NULL) names a pool or an image:
 * then no default pool is sent over it. A spec that does not parse is
 * refused by backend_orch_create. */
static bool spec_names_one(const char *spec)
{
	cJSON *j = spec ? cJSON_Parse(spec) : NULL;
	bool named = cJSON_GetObjectItemCaseSensitive(j, "pool") ||
		     cJSON_GetObjectItemCaseSensitive(j, "image");

	cJSON_Delete(j);
	return named;
}

static void print_count(long n, const char *end)
{
	if (n < 0)
		printf("-%s", end);
	else
		printf("%ld%s", n, end);
}

/* pools [ID]: one line a pool, "id image size warm claimed". */
static int print_pools(struct backend *b, const struct backend_orchestrator *orch,
		       const char *id)
{
	struct backend_pool_list l;
	struct backend_error e;
	enum backend_status st = backend_orch_pools(b, orch, id, &l, &e);

	if (st != BACKEND_OK)
		return fail("pools", st, &e);
	for (size_t i = 0; i < l.count; i++) {
		const struct backend_pool *p = &l.items[i];

		printf("%s %s ", p->id, p->image ? p->image : "-");
		print_count(p->size, " ");
		print_count(p->warm, " ");
		print_count(p->claimed, "\n");
	}
	if (l.dropped)
		fprintf(stderr, "sandboxctl: %zu malformed entries dropped\n", l.dropped);
	backend_pool_list_clear(&l);
	return EX_OK;
}

static int run_orch_verb(struct backend *b, const struct opts *o, const char *verb,
			 int argc, char **argv)
{
	struct backend_orchestrator orch;
	struct backend_error e;
	struct backend_sandbox s;
	enum backend_status st;
	char *token = NULL;
	int rc = EX_OK;

	if (!orchestrator(o, &orch, &token))
		return EX_USAGE;
	if (strcmp(verb, "pools") == 0 && argc > 1) {
		fprintf(stderr, "sandboxctl: pools [ID]\n");
		rc = EX_USAGE;
		goto out;
	}
	if (strcmp(verb, "list") != 0 && strcmp(verb, "pools") != 0 && argc != 1) {
		fprintf(stderr, "sandboxctl: %s ID\n", verb);
		rc = EX_USAGE;
		goto out;
	}
	if (strcmp(verb, "create") == 0) {
		struct backend_create_request req = {
		    .id = argv[0],
		    .pool = o->pool		      ? o->pool
			    : spec_names_one(o->spec) ? NULL
						      : "default",
		    .idle_timeout_s = o->idle_s,
		    .send_timeout = o->request_timeout_s >= 0,
		    .timeout_s = o->request_timeout_s,
		    .spec_json = o->spec,
		};

		st = backend_orch_create(b, &orch, &req, &s, &e);
		if (st != BACKEND_OK) {
			rc = fail("create", st, &e);
			goto out;
		}
		printf("%s %s\n", s.id, state_name(s.state));
		if (s.error)
			printf("error: %s\n", s.error);
		if (o->save_url && !save_url(o->save_url, s.url))
			rc = EX_FAIL;
		backend_sandbox_clear(&s);
	} else if (strcmp(verb, "info") == 0) {
		st = backend_orch_get(b, &orch, argv[0], &s, &e);
		if (st != BACKEND_OK) {
			rc = fail("info", st, &e);
			goto out;
		}
		printf("id: %s\nstate: %s\npool: %s\n", s.id, state_name(s.state),
		       s.pool ? s.pool : "-");
		if (s.image)
			printf("image: %s\n", s.image);
		printf("url: %s\n", s.url ? "(set; use --save-url F)" : "(none)");
		if (s.error)
			printf("error: %s\n", s.error);
		if (o->save_url && !save_url(o->save_url, s.url))
			rc = EX_FAIL;
		backend_sandbox_clear(&s);
	} else if (strcmp(verb, "pools") == 0) {
		rc = print_pools(b, &orch, argc ? argv[0] : NULL);
	} else if (strcmp(verb, "delete") == 0) {
		st = backend_orch_delete(b, &orch, argv[0], &e);
		if (st != BACKEND_OK)
			rc = fail("delete", st, &e);
	} else {
		struct backend_sandbox_list l;

		st = backend_orch_list(b, &orch, &l, &e);
		if (st != BACKEND_OK) {
			rc = fail("list", st, &e);
			goto out;
		}
		for (size_t i = 0; i < l.count; i++)
			printf("%s %s %s\n", l.items[i].id, state_name(l.items[i].state),
			       l.items[i].pool ? l.items[i].pool : "-");
		if (l.dropped)
			fprintf(stderr, "sandboxctl: %zu malformed entries dropped\n",
				l.dropped);
		backend_sandbox_list_clear(&l);
	}
out:
	if (token) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"url-file", required_argument, NULL, 'u'},
	    {"orchestrator", required_argument, NULL, 'o'},
	    {"token-file", required_argument, NULL, 'k'},
	    {"timeout", required_argument, NULL, 't'},
	    {"pool", required_argument, NULL, 'p'},
	    {"idle", required_argument, NULL, 'i'},
	    {"request-timeout", required_argument, NULL, 'r'},
	    {"spec", required_argument, NULL, 'S'},
	    {"save-url", required_argument, NULL, 's'},
	    {"connect-timeout", required_argument, NULL, 'c'},
	    {"ca-file", required_argument, NULL, 'a'},
	    {"insecure", no_argument, NULL, 'I'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static const char *sandbox_verbs[] = {
	    "exec",   "get",	    "put",	 "ls",	      "rm",
	    "health", "bench-exec", "bench-put", "bench-get", NULL};
	static const char *orch_verbs[] = {"create", "list",   "pools",
					   "info",   "delete", NULL};
	struct opts o = {.timeout_s = 60, .request_timeout_s = -1};
	struct backend_config cfg;
	struct backend *b;
	const char *verb;
	int c, rc;
	bool sandbox = false, orch = false;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'u':
			o.url_file = optarg;
			break;
		case 'o':
			o.orchestrator = optarg;
			break;
		case 'k':
			o.token_file = optarg;
			break;
		case 'p':
			o.pool = optarg;
			break;
		case 'S':
			o.spec = optarg;
			break;
		case 's':
			o.save_url = optarg;
			break;
		case 'a':
			o.ca_file = optarg;
			break;
		case 'I':
			o.insecure = true;
			break;
		case 't':
		case 'i':
		case 'r':
		case 'c': {
			long v;

			if (!parse_long(optarg, &v)) {
				fprintf(stderr, "sandboxctl: bad number for --%s\n",
					c == 't'   ? "timeout"
					: c == 'i' ? "idle"
					: c == 'r' ? "request-timeout"
						   : "connect-timeout");
				return EX_USAGE;
			}
			if (c == 't')
				o.timeout_s = v;
			else if (c == 'i')
				o.idle_s = v;
			else if (c == 'r')
				o.request_timeout_s = v;
			else
				o.connect_ms = v;
			break;
		}
		case 'h':
			fputs(usage_text, stdout);
			return EX_OK;
		default:
			fputs(usage_text, stderr);
			return EX_USAGE;
		}
	}
	if (optind >= argc) {
		fputs(usage_text, stderr);
		return EX_USAGE;
	}
	verb = argv[optind++];
	for (int i = 0; sandbox_verbs[i]; i++)
		sandbox |= strcmp(verb, sandbox_verbs[i]) == 0;
	for (int i = 0; orch_verbs[i]; i++)
		orch |= strcmp(verb, orch_verbs[i]) == 0;
	if (!sandbox && !orch) {
		fprintf(stderr, "sandboxctl: unknown verb '%s' (see --help)\n", verb);
		return EX_USAGE;
	}

	backend_config_defaults(&cfg);
	cfg.tls_insecure = o.insecure;
	cfg.ca_file = o.ca_file;
	if (o.connect_ms > 0)
		cfg.connect_timeout_ms = o.connect_ms;
	b = backend_new(&cfg);
	if (!b) {
		fprintf(stderr, "sandboxctl: cannot initialise the HTTP client\n");
		return EX_FAIL;
	}
	if (sandbox)
		rc = run_sandbox_verb(b, &o, verb, argc - optind, argv + optind);
	else
		rc = run_orch_verb(b, &o, verb, argc - optind, argv + optind);
	fflush(stdout);
	backend_free(b);
	return rc;
}
