/*
 * slow_thread_exit.c — an LD_PRELOAD shim for tests: makes the exit of the
 * program's own threads slow, and reports a program that frees what an
 * exiting thread still uses.
 *
 * Every thread-specific data destructor that the main executable registers
 * (pthread_key_create; libraries' keys are left alone) waits SLOW_EXIT_MS
 * (default 300) before it runs, as a thread descheduled at its exit would.
 * A pthread_key_delete of a key whose destructor is running then is
 * reported on stderr ("slow_thread_exit: ... still runs"): the program let a
 * thread's exit run past the teardown of what the destructor uses, instead
 * of joining the thread first. At exit it prints how many destructors it
 * delayed, so a test can tell the shim was in use.
 *
 * Build: cc -shared -fPIC -o slow_thread_exit.so slow_thread_exit.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <time.h>

#define SLOTS 16

struct slot {
	pthread_key_t key;
	void (*dtor)(void *);
	atomic_int running;
	atomic_bool live;
};

static struct slot slots[SLOTS];
static atomic_int nslots;
static atomic_int delayed;

static void run(int i, void *value)
{
	atomic_fetch_add(&slots[i].running, 1);
	const char *e = getenv("SLOW_EXIT_MS");
	long ms = e ? atol(e) : 300;
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
	atomic_fetch_add(&delayed, 1);
	slots[i].dtor(value);
	atomic_fetch_sub(&slots[i].running, 1);
}

#define TRAMP(i)                                                                         \
	static void tramp##i(void *v)                                                    \
	{                                                                                \
		run(i, v);                                                               \
	}
TRAMP(0)
TRAMP(1)
TRAMP(2)
TRAMP(3)
TRAMP(4)
TRAMP(5)
TRAMP(6)
TRAMP(7)
TRAMP(8)
TRAMP(9)
TRAMP(10)
TRAMP(11)
TRAMP(12)
TRAMP(13)
TRAMP(14)
TRAMP(15)
static void (*const tramps[SLOTS])(void *) = {
    tramp0, tramp1, tramp2,  tramp3,  tramp4,  tramp5,	tramp6,	 tramp7,
    tramp8, tramp9, tramp10, tramp11, tramp12, tramp13, tramp14, tramp15,
};

/* Whether code at p belongs to the main executable. */
static int in_main_program(void *p)
{
	Dl_info self, it;
	void *phdr = (void *)getauxval(AT_PHDR);
	if (!phdr || !dladdr(phdr, &self) || !dladdr(p, &it))
		return 0;
	return self.dli_fbase == it.dli_fbase;
}

int pthread_key_create(pthread_key_t *key, void (*dtor)(void *))
{
	static int (*real)(pthread_key_t *, void (*)(void *));
	if (!real)
		real = (int (*)(pthread_key_t *, void (*)(void *)))dlsym(
		    RTLD_NEXT, "pthread_key_create");
	if (!dtor || !in_main_program((void *)dtor))
		return real(key, dtor);
	int i = atomic_fetch_add(&nslots, 1);
	if (i >= SLOTS)
		return real(key, dtor);
	slots[i].dtor = dtor;
	int rc = real(key, tramps[i]);
	if (rc == 0) {
		slots[i].key = *key;
		atomic_store(&slots[i].live, 1);
	}
	return rc;
}

int pthread_key_delete(pthread_key_t key)
{
	static int (*real)(pthread_key_t);
	if (!real)
		real = (int (*)(pthread_key_t))dlsym(RTLD_NEXT, "pthread_key_delete");
	int n = atomic_load(&nslots);
	for (int i = 0; i < n && i < SLOTS; i++) {
		if (!atomic_load(&slots[i].live) || slots[i].key != key)
			continue;
		atomic_store(&slots[i].live, 0);
		if (atomic_load(&slots[i].running) > 0)
			fprintf(stderr,
				"slow_thread_exit: key %u deleted while a thread's "
				"destructor of it still runs\n",
				(unsigned)key);
	}
	return real(key);
}

__attribute__((destructor)) static void report(void)
{
	fprintf(stderr, "slow_thread_exit: %d thread exits delayed\n",
		atomic_load(&delayed));
}
