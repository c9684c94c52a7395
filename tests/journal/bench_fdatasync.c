/*
 * bench_fdatasync.c — what one durable journal append costs, by file layout.
 *
 *   bench_fdatasync [DIR [N]]   (default: a scratch directory under
 *                                $XDG_STATE_HOME or ~/.local/state, where the
 *                                journal lives; N = 2000 per layout)
 *
 * Times write + fdatasync of one 230-byte record (an exec intent's size):
 *   append    at the end of an O_APPEND file: every sync also writes the
 *             inode (size change), a jbd2 commit on a journaled ext4
 *   zeroed    inside a region written with zeros and synced beforehand:
 *             the sync writes data only
 *   fallocate inside a fallocate'd region: unwritten extents, so the
 *             first sync into each block also converts an extent (metadata)
 * The layouts alternate in runs of 50 syncs (ABC CBA ...), 1 ms between
 * syncs, so machine noise hits them alike. Whether preallocating the
 * journal pays depends on the file system (ext4 without a journal writes
 * the inode with the data, with no commit): compare the medians on the
 * machine at hand.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum layout { APPEND, ZEROED, FALLOCATED, NLAYOUTS };
static const char *const layout_name[NLAYOUTS] = {"append (file grows)", "zeroed region",
						  "fallocate'd region"};

#define RECORD_BYTES 230
#define BLOCK	     50

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static int open_layout(const char *dir, enum layout l, size_t region)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/layout%d", dir, (int)l);
	int fd =
	    open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | (l == APPEND ? O_APPEND : 0),
		 0600);
	if (fd < 0)
		die(p);
	if (l == ZEROED) {
		char *zeros = calloc(1, region);
		if (!zeros || pwrite(fd, zeros, region, 0) != (ssize_t)region)
			die("zero fill");
		free(zeros);
	} else if (l == FALLOCATED && fallocate(fd, 0, 0, (off_t)region)) {
		die("fallocate");
	}
	if (fsync(fd))
		die("fsync");
	return fd;
}

/* One record written at sample index i, and synced; returns ms. */
static double one_sync(int fd, enum layout l, int i, const char *record)
{
	double t0 = now_ms();
	ssize_t w = l == APPEND
			? write(fd, record, RECORD_BYTES)
			: pwrite(fd, record, RECORD_BYTES, (off_t)i * RECORD_BYTES);
	if (w != RECORD_BYTES)
		die("write");
	if (fdatasync(fd))
		die("fdatasync");
	double dt = now_ms() - t0;
	usleep(1000);
	return dt;
}

static void report(enum layout l, double *v, int n)
{
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += v[i];
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	printf("%-20s n=%d  p10 %.3f  median %.3f  p90 %.3f  mean %.3f ms\n",
	       layout_name[l], n, v[n / 10], v[n / 2], v[n * 9 / 10], sum / n);
}

int main(int argc, char **argv)
{
	char dir[4150];
	int n = argc > 2 ? atoi(argv[2]) : 2000;
	char record[RECORD_BYTES];
	int fd[NLAYOUTS];
	double *t[NLAYOUTS];

	if (n < 10)
		n = 10;
	if (argc > 1) {
		snprintf(dir, sizeof(dir), "%s/fdatasync.XXXXXX", argv[1]);
	} else {
		const char *xdg = getenv("XDG_STATE_HOME");
		const char *home = getenv("HOME");
		char base[4096];
		if (xdg && *xdg)
			snprintf(base, sizeof(base), "%s", xdg);
		else
			snprintf(base, sizeof(base), "%s/.local/state",
				 home ? home : "/tmp");
		if (mkdir(base, 0700) && errno != EEXIST)
			die(base);
		snprintf(dir, sizeof(dir), "%s/sandboxfs-fdatasync.XXXXXX", base);
	}
	if (!mkdtemp(dir))
		die(dir);
	printf("%s: %d syncs of %d bytes per layout\n", dir, n, RECORD_BYTES);

	size_t region = (size_t)n * RECORD_BYTES + 4096;
	memset(record, 'r', sizeof(record));
	for (int l = 0; l < NLAYOUTS; l++) {
		fd[l] = open_layout(dir, (enum layout)l, region);
		t[l] = malloc((size_t)n * sizeof(double));
		if (!t[l])
			die("malloc");
	}
	/* Runs of BLOCK syncs of one layout, in the order ABC CBA ...: a
	 * journaled file system commits every file's pending metadata at once,
	 * so interleaving single syncs would let one layout's commit pay for
	 * another's. */
	for (int i = 0, pass = 0; i < n; i += BLOCK, pass++) {
		for (int k = 0; k < NLAYOUTS; k++) {
			int l = pass % 2 ? NLAYOUTS - 1 - k : k;
			for (int s = i; s < n && s < i + BLOCK; s++)
				t[l][s] = one_sync(fd[l], (enum layout)l, s, record);
		}
	}
	for (int l = 0; l < NLAYOUTS; l++) {
		report((enum layout)l, t[l], n);
		close(fd[l]);
		free(t[l]);
		char p[4200];
		snprintf(p, sizeof(p), "%s/layout%d", dir, l);
		unlink(p);
	}
	rmdir(dir);
	return 0;
}
