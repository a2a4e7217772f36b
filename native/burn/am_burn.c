// libam_burn.so — a test allocator: glibc's malloc plus a fixed delay.
//
// Every AM_BURN_EVERY-th malloc of a thread runs AM_BURN_LOOPS steps of a
// dependent multiply-add chain and a fence (no memory, no system call) before
// glibc serves it; every other function goes straight to glibc (its __libc_*
// entry points, so no dlsym is needed). The cost is linear in 1/EVERY: the
// calibration benchmark (bench/calibration.py) measures the slowdown with every
// malloc burning and picks EVERY for a known 5 % or 10 %, then counts how often
// allocmark calls it slower. (A short chain in every malloc was not linear: out
// of order execution hid part of it, and a fence alone cost +12 %; spinning on
// the TSC could not make short delays: reading it costs ~10 ns here.)
//
// AM_BURN_START_US=N spins N microseconds of wall time in the constructor: a
// constant cost, so a program of known length runs a known share slower (the
// calibration's "+2 %": a difference under the margin, whatever the program's
// allocation rate).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

static unsigned long am_loops;      // steps of the chain in a burning malloc
static unsigned long am_every = 1;  // every how many mallocs (per thread) burn
static __thread unsigned long am_count;

static uint64_t am_now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

__attribute__((constructor)) static void am_burn_init(void) {
  const char *loops = getenv("AM_BURN_LOOPS"), *every = getenv("AM_BURN_EVERY");
  const char *start = getenv("AM_BURN_START_US");
  am_loops = loops ? strtoul(loops, NULL, 10) : 0;
  am_every = every && strtoul(every, NULL, 10) > 0 ? strtoul(every, NULL, 10) : 1;
  if (start) {
    // Wall time, not steps: the delay must not shrink on a faster core.
    uint64_t end = am_now_us() + strtoul(start, NULL, 10);
    while (am_now_us() < end) {
    }
  }
}

static void am_burn(uint64_t x) {
  for (unsigned long i = 0; i < am_loops; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    __asm__ volatile("" : "+r"(x));  // keeps every step
  }
#if defined(__x86_64__) || defined(__i386__)
  // Out-of-order execution would overlap the chain with the caller's work and
  // hide part of it; a fence exposes all of it, so the cost is linear.
  __asm__ volatile("lfence" ::: "memory");
#endif
}

void *malloc(size_t n) {
  if (am_loops && ++am_count >= am_every) {
    am_count = 0;
    am_burn(n);
  }
  return __libc_malloc(n);
}

void free(void *p) { __libc_free(p); }
void *calloc(size_t k, size_t n) { return __libc_calloc(k, n); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
void *reallocarray(void *p, size_t k, size_t n) {
  if (n && k > SIZE_MAX / n) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_realloc(p, k * n);
}
void *memalign(size_t a, size_t n) { return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { return __libc_memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
  if (a < sizeof(void *) || (a & (a - 1))) return EINVAL;
  void *p = __libc_memalign(a, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
void *valloc(size_t n) { return __libc_valloc(n); }
void *pvalloc(size_t n) { return __libc_pvalloc(n); }

// glibc has no __libc_ name for it: the next definition, looked up once.
size_t malloc_usable_size(void *p) {
  static size_t (*next)(void *);
  if (next == NULL) next = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
  return next ? next(p) : 0;
}
