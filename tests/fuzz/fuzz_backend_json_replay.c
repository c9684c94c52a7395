/*
 * fuzz_backend_json_replay.c — runs a backend fuzz harness (the JSON
 * decoders, or backend_scrub) without libFuzzer, in the unit suite with
 * any compiler: every input of the given corpus directories, then N
 * repeatable mutations of each (byte flips, cuts, insertions of JSON
 * tokens, truncations). A harness that crashes or breaks an invariant
 * aborts the test.
 *
 *   fuzz_backend_json_replay [--mutations N] DIR...
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static const char *tokens[] = {
    "{",	"}",	      "[",	 "]",	    ",",	   ":",
    "\"",	"null",	      "true",	 "-1",	    "1e999",	   "0.5",
    "\"name\"", "\"..\"",     "\"a/b\"", "\\u0000", "\"entries\"", "\"url\"",
    "\"id\"",	"\"status\"", "\\ud800", "\\udcff", "\"stdout\""};

/* One mutation of in (n bytes) into out (room for n + 64 bytes). */
static size_t mutate(const uint8_t *in, size_t n, uint8_t *out)
{
	size_t pos = n ? (size_t)(next() % n) : 0, m = n;

	memcpy(out, in, n);
	switch (next() % 4) {
	case 0: /* flip a byte */
		if (n)
			out[pos] ^= (uint8_t)(1u << (next() % 8));
		break;
	case 1: { /* cut a range */
		size_t len = n - pos ? (size_t)(next() % (n - pos)) % 16 + 1 : 0;

		if (pos + len > n)
			len = n - pos;
		memmove(out + pos, out + pos + len, n - pos - len);
		m = n - len;
		break;
	}
	case 2: { /* insert a token */
		const char *t = tokens[next() % (sizeof(tokens) / sizeof(tokens[0]))];
		size_t tl = strlen(t);

		if (n == 0)
			pos = 0;
		memmove(out + pos + tl, in + pos, n - pos);
		memcpy(out + pos, t, tl);
		m = n + tl;
		break;
	}
	default: /* truncate */
		m = pos;
		break;
	}
	return m;
}

int main(int argc, char **argv)
{
	long mutations = 0;
	unsigned long inputs = 0, runs = 0;
	const char *name;

	for (int i = 1; i < argc; i++) {
		DIR *d;
		struct dirent *de;

		if (strcmp(argv[i], "--mutations") == 0 && i + 1 < argc) {
			mutations = strtol(argv[++i], NULL, 10);
			continue;
		}
		d = opendir(argv[i]);
		if (!d) {
			perror(argv[i]);
			return 1;
		}
		while ((de = readdir(d))) {
			char path[4096];
			uint8_t *buf, *mut;
			FILE *f;
			long n;

			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
			f = fopen(path, "rb");
			if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0) {
				perror(path);
				return 1;
			}
			rewind(f);
			buf = malloc((size_t)n + 1);
			mut = malloc((size_t)n + 64);
			if (!buf || !mut || fread(buf, 1, (size_t)n, f) != (size_t)n) {
				perror(path);
				return 1;
			}
			fclose(f);
			LLVMFuzzerTestOneInput(buf, (size_t)n);
			inputs++;
			runs++;
			for (long k = 0; k < mutations; k++) {
				size_t m = mutate(buf, (size_t)n, mut);

				LLVMFuzzerTestOneInput(mut, m);
				runs++;
			}
			free(buf);
			free(mut);
		}
		closedir(d);
	}
	name = strrchr(argv[0], '/');
	printf("%s: %lu inputs, %lu runs, no failure\n", name ? name + 1 : argv[0],
	       inputs, runs);
	return inputs > 0 ? 0 : 1;
}
