/*
 * registry.c — the journals this user has used, for the preflight check.
 *
 * $XDG_STATE_HOME/sandboxfs/journals (or ~/.local/state/...), 0600, one
 * absolute directory per line; appended under an exclusive flock.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "journal_i.h"

static int registry_dir(char *buf, size_t size)
{
	const char *base = getenv("XDG_STATE_HOME");
	int n;

	if (base && base[0] == '/') {
		n = snprintf(buf, size, "%s/sandboxfs", base);
	} else {
		const char *home = getenv("HOME");
		if (!home || home[0] != '/') {
			struct passwd *pw = getpwuid(geteuid());
			home = pw ? pw->pw_dir : NULL;
		}
		if (!home)
			return -ENOENT;
		n = snprintf(buf, size, "%s/.local/state/sandboxfs", home);
	}
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* Reads the whole registry (small) into a NUL-terminated buffer. */
static char *read_all(int fd)
{
	size_t len = 0, cap = 4096;
	char *s = malloc(cap);
	while (s) {
		if (len + 1 >= cap) {
			char *ns = realloc(s, cap * 2);
			if (!ns)
				break;
			s = ns;
			cap *= 2;
		}
		ssize_t n = pread(fd, s + len, cap - len - 1, (off_t)len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			s[len] = '\0';
			return n == 0 ? s : (free(s), NULL);
		}
		len += (size_t)n;
	}
	free(s);
	return NULL;
}

static bool has_line(const char *all, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = all; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (len == n && memcmp(p, line, n) == 0)
			return true;
		p += len + (nl ? 1 : 0);
	}
	return false;
}

int journal_registry_add(const char *dir)
{
	char reg[PATH_MAX], abs[PATH_MAX];
	int rc;

	if (!dir || strchr(dir, '\n') || !realpath(dir, abs))
		return dir && !strchr(dir, '\n') ? -errno : -EINVAL;
	if ((rc = registry_dir(reg, sizeof(reg) - sizeof("/journals"))) ||
	    (rc = common_mkdirs(reg, 0700)))
		return rc;
	strcat(reg, "/journals");
	int fd = open(reg, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	char *all = read_all(fd);
	if (!all) {
		rc = -EIO;
	} else if (!has_line(all, abs)) {
		/* A previous writer that died mid-line leaves no newline. */
		size_t len = strlen(all);
		if (len && all[len - 1] != '\n' && write(fd, "\n", 1) != 1)
			rc = -errno;
		size_t n = strlen(abs);
		abs[n] = '\n';
		if (!rc && write(fd, abs, n + 1) != (ssize_t)(n + 1))
			rc = errno ? -errno : -EIO;
		if (!rc && fsync(fd))
			rc = -errno;
	}
	free(all);
	close(fd);
	return rc;
}

static bool check_one(const char *dir, FILE *out)
{
	char path[PATH_MAX];
	struct journal_scan_result res;

	snprintf(path, sizeof(path), "%s/journal", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		fprintf(out, "missing %s\n", dir);
		return false;
	}
	if (fd < 0) {
		fprintf(out, "damaged %s: cannot read %s: %s\n", dir, path,
			strerror(errno));
		return false;
	}
	journal_scan(fd, NULL, NULL, &res);
	close(fd);
	switch (res.end) {
	case JOURNAL_SCAN_WHOLE:
		fprintf(out, "ok %s\n", dir);
		return true;
	case JOURNAL_SCAN_TORN:
		fprintf(out,
			"ok %s (torn last record at byte %" PRIu64
			" is cut at the next mount)\n",
			dir, res.good_bytes);
		return true;
	case JOURNAL_SCAN_DAMAGED:
		fprintf(out, "damaged %s: %s: damaged record at byte %" PRIu64 " (%s)\n",
			dir, path, res.good_bytes, res.why ? res.why : "bad record");
		return false;
	default:
		fprintf(out, "damaged %s: cannot read %s: %s\n", dir, path,
			strerror(res.err));
		return false;
	}
}

int journal_registry_check(FILE *out)
{
	char reg[PATH_MAX];
	int bad = 0;

	if (registry_dir(reg, sizeof(reg) - sizeof("/journals")))
		return 0;
	strcat(reg, "/journals");
	int fd = open(reg, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0; /* no journal was ever registered */
	flock(fd, LOCK_SH);
	char *all = read_all(fd);
	close(fd);
	if (!all)
		return -EIO;
	char *save = NULL;
	for (char *line = strtok_r(all, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		if (line[0] && !check_one(line, out))
			bad++;
	free(all);
	return bad;
}
