/*
 * test_tls.c OPENSSL — TLS verification: on by default, satisfied by
 * ca_file, off only with tls_insecure. The peer is `openssl s_server -www`
 * with a throw-away self-signed certificate for 127.0.0.1; it answers any
 * request with an HTML page, so a call that got through the handshake
 * ends as BACKEND_BAD_ANSWER (sent, answered, not JSON).
 */
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend_i.h"
#include "check.h"

static char dir[] = "/tmp/sandboxfs-tls-test-XXXXXX";

static int run(char *const argv[], const char *out)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		int fd =
		    open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	if (out)
		return pid; /* a server: the caller stops it */
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int rm_one(const char *p, const struct stat *sb, int f, struct FTW *ftw)
{
	(void)sb;
	(void)f;
	(void)ftw;
	return remove(p);
}

int main(int argc, char **argv)
{
	char key[128], cert[128], log[128], url[64], accept_arg[] = "127.0.0.1:0";
	struct backend_config cfg;
	struct backend *b;
	struct backend_error e;
	pid_t server;
	int port = 0, status;

	if (argc < 2 || !mkdtemp(dir)) {
		fprintf(stderr, "usage: test_tls OPENSSL\n");
		return 1;
	}
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
	snprintf(log, sizeof(log), "%s/server.log", dir);
	{
		char *req[] = {argv[1],	   "req",
			       "-x509",	   "-newkey",
			       "rsa:2048", "-nodes",
			       "-keyout",  key,
			       "-out",	   cert,
			       "-days",	   "1",
			       "-subj",	   "/CN=127.0.0.1",
			       "-addext",  "subjectAltName=IP:127.0.0.1",
			       NULL};

		if (run(req, NULL) != 0) {
			fprintf(stderr, "openssl req failed\n");
			return 1;
		}
	}
	{
		char *srv[] = {argv[1], "s_server", "-accept", accept_arg, "-cert",
			       cert,	"-key",	    key,       "-www",	   NULL};

		server = run(srv, log);
	}
	for (int i = 0; i < 500 && port == 0; i++) {
		FILE *f = fopen(log, "r");
		char line[256];

		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "ACCEPT 127.0.0.1:%d", &port) == 1)
				break;
		if (f)
			fclose(f);
		if (!port)
			usleep(10000);
	}
	CHECK(port > 0);
	snprintf(url, sizeof(url), "https://127.0.0.1:%d", port);

	/* Verification on: the self-signed peer is refused, nothing sent. */
	backend_config_defaults(&cfg);
	b = backend_new(&cfg);
	CHECK_ST(backend_health(b, url, &e), BACKEND_NOT_SENT);
	printf("verification on: %s\n", e.message);
	CHECK(strstr(e.message, "127.0.0.1") == NULL);
	backend_free(b);

	/* Its certificate as the CA: verified, sent, answered (in HTML). */
	cfg.ca_file = cert;
	b = backend_new(&cfg);
	CHECK_ST(backend_health(b, url, &e), BACKEND_BAD_ANSWER);
	CHECK(e.http_status == 200);
	backend_free(b);

	/* A CA file that does not exist: refused before sending. */
	cfg.ca_file = "/nonexistent/ca.pem";
	b = backend_new(&cfg);
	CHECK_ST(backend_health(b, url, &e), BACKEND_NOT_SENT);
	backend_free(b);

	/* tls_insecure: not verified, sent. */
	backend_config_defaults(&cfg);
	cfg.tls_insecure = true;
	b = backend_new(&cfg);
	CHECK_ST(backend_health(b, url, &e), BACKEND_BAD_ANSWER);
	backend_free(b);

	kill(server, SIGTERM);
	waitpid(server, &status, 0);
	nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
	return check_done("test_tls");
}
