/*
 * fuzz_journal_replay.c — runs the journal fuzz harness without libFuzzer,
 * so the default (gcc) build exercises it in the unit suite:
 *
 *   fuzz_journal_replay [--mutations N] FILE|DIR...
 *
 * Each corpus file is fed as is, then N times mutated (bit flips, byte
 * changes, cuts, duplicated and spliced chunks) with a fixed seed, so a
 * run is repeatable.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint8_t *load(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
	*len = b && n > 0 ? fread(b, 1, (size_t)n, f) : 0;
	fclose(f);
	return b;
}

static size_t mutate(uint8_t *b, size_t len, size_t cap, const uint8_t *other,
		     size_t olen)
{
	int ops = 1 + (int)(next() % 4);
	for (int k = 0; k < ops; k++) {
		size_t at = len ? (size_t)(next() % len) : 0;
		switch (next() % 6) {
		case 0: /* flip a bit */
			if (len)
				b[at] ^= (uint8_t)(1u << (next() % 8));
			break;
		case 1: /* set a byte to an interesting value */
			if (len) {
				static const uint8_t v[] = {0, 1, 0x7f, 0x80, 0xff, 8};
				b[at] = v[next() % sizeof(v)];
			}
			break;
		case 2: /* cut */
			len = at;
			break;
		case 3: { /* duplicate a chunk */
			size_t n = len - at < 64 ? len - at : 64;
			if (len + n <= cap) {
				memmove(b + at + n, b + at, len - at);
				len += n;
			}
			break;
		}
		case 4: { /* splice from another input */
			size_t n = olen < 256 ? olen : 256;
			if (n && at + n <= cap) {
				size_t from = (size_t)(next() % (olen - n + 1));
				memcpy(b + at, other + from, n);
				if (at + n > len)
					len = at + n;
			}
			break;
		}
		default: /* 0xFF 0xFF: a record boundary for the payload mode */
			if (len >= 2 && at + 1 < len)
				b[at] = b[at + 1] = 0xff;
			break;
		}
	}
	return len;
}

struct input {
	uint8_t *b;
	size_t len;
};

static struct input *inputs;
static const char *save_path; /* env FUZZ_SAVE: each input is written there
				 first, to keep the one that aborts */

static void run_one(const uint8_t *b, size_t len)
{
	if (save_path) {
		FILE *f = fopen(save_path, "wb");
		if (f) {
			fwrite(b, 1, len, f);
			fclose(f);
		}
	}
	LLVMFuzzerTestOneInput(b, len);
}
static size_t ninputs;

static void add_path(const char *path)
{
	struct stat st;
	if (stat(path, &st)) {
		perror(path);
		exit(2);
	}
	if (S_ISDIR(st.st_mode)) {
		struct dirent **names;
		int n = scandir(path, &names, NULL, alphasort);
		for (int i = 0; i < n; i++) {
			char p[4096];
			if (names[i]->d_name[0] != '.') {
				snprintf(p, sizeof(p), "%s/%s", path, names[i]->d_name);
				add_path(p);
			}
			free(names[i]);
		}
		free(names);
		return;
	}
	struct input *more = realloc(inputs, (ninputs + 1) * sizeof(*inputs));
	if (!more) {
		perror("realloc");
		exit(2);
	}
	inputs = more;
	inputs[ninputs].b = load(path, &inputs[ninputs].len);
	if (!inputs[ninputs].b) {
		perror(path);
		exit(2);
	}
	ninputs++;
}

int main(int argc, char **argv)
{
	long mutations = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--mutations") == 0 && i + 1 < argc)
			mutations = atol(argv[++i]);
		else
			add_path(argv[i]);
	}
	if (!ninputs) {
		fprintf(stderr, "usage: %s [--mutations N] FILE|DIR...\n", argv[0]);
		return 2;
	}
	long runs = 0;
	save_path = getenv("FUZZ_SAVE");
	for (size_t i = 0; i < ninputs; i++) {
		run_one(inputs[i].b, inputs[i].len);
		runs++;
		size_t cap = inputs[i].len * 2 + 512;
		uint8_t *b = malloc(cap);
		for (long m = 0; m < mutations; m++) {
			const struct input *o = &inputs[next() % ninputs];
			memcpy(b, inputs[i].b, inputs[i].len);
			size_t len = mutate(b, inputs[i].len, cap, o->b, o->len);
			run_one(b, len);
			runs++;
		}
		free(b);
	}
	printf("fuzz_journal_replay: %zu corpus files, %ld runs, no invariant broken\n",
	       ninputs, runs);
	for (size_t i = 0; i < ninputs; i++)
		free(inputs[i].b);
	free(inputs);
	return 0;
}
