// am_ab — the profiler's slowdown measured inside one process (bench/profile_overhead.py).
//
// Run with LD_PRELOAD="libamprof.so <allocator>": malloc and free found by
// the dynamic linker are the profiler's, the allocator's own are looked up in
// the object that serves malloc (argv[1]). Phases of samethread's loop (K
// blocks of 16..64 bytes: allocate them all, writing their first and last
// byte, then check those and free them in order) alternate between the two
// pairs of entry points, so both see
// the same machine, layout and caches; a process-level comparison on a shared
// VM varies by tens of percent from run to run. Prints one JSON line: the
// median of the paired ratios and its quartiles.
//
// It understates by what the profiler's footprint costs the plain phases too
// (its bitmap and tables share the caches with them).
//
// usage: am_ab MALLOC_OBJECT [PAIRS]
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define AM_K 100000

typedef void *(*am_malloc_fn)(size_t);
typedef void (*am_free_fn)(void *);

static unsigned char *am_blocks[AM_K];
static size_t am_sizes[AM_K];

static double am_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t am_next(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

static double am_phase(am_malloc_fn m, am_free_fn f, uint64_t *rng) {
  double t0 = am_now();
  for (int i = 0; i < AM_K; i++) {
    am_sizes[i] = 16 + am_next(rng) % 49;
    am_blocks[i] = m(am_sizes[i]);
    if (am_blocks[i] == NULL) abort();
    am_blocks[i][0] = am_blocks[i][am_sizes[i] - 1] = 0xa5;  // as am_touch: < 1 page
  }
  for (int i = 0; i < AM_K; i++) {
    if (am_blocks[i][0] != 0xa5 || am_blocks[i][am_sizes[i] - 1] != 0xa5) abort();
    f(am_blocks[i]);
  }
  return am_now() - t0;
}

static int am_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: am_ab MALLOC_OBJECT [PAIRS]\n");
    return 2;
  }
  int pairs = argc > 2 ? atoi(argv[2]) : 200;
  void *own = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
  if (own == NULL || pairs < 4) {
    fprintf(stderr, "am_ab: %s is not loaded (or PAIRS < 4)\n", argv[1]);
    return 2;
  }
  am_malloc_fn plain_m = (am_malloc_fn)dlsym(own, "malloc");
  am_free_fn plain_f = (am_free_fn)dlsym(own, "free");
  am_malloc_fn prof_m = (am_malloc_fn)dlsym(RTLD_DEFAULT, "malloc");
  am_free_fn prof_f = (am_free_fn)dlsym(RTLD_DEFAULT, "free");
  if (!plain_m || !plain_f || plain_m == prof_m) {
    fprintf(stderr, "am_ab: the profiler is not in front of %s\n", argv[1]);
    return 2;
  }
  uint64_t rng = 88172645463325252ull;
  for (int i = 0; i < 10; i++) am_phase(plain_m, plain_f, &rng), am_phase(prof_m, prof_f, &rng);
  double *ratio = calloc((size_t)pairs, sizeof *ratio);
  double *plain = calloc((size_t)pairs, sizeof *plain);
  if (!ratio || !plain) return 1;
  for (int i = 0; i < pairs; i++) {
    double a, b;  // the order alternates: neither side always runs on warmer caches
    if (i & 1) {
      a = am_phase(plain_m, plain_f, &rng);
      b = am_phase(prof_m, prof_f, &rng);
    } else {
      b = am_phase(prof_m, prof_f, &rng);
      a = am_phase(plain_m, plain_f, &rng);
    }
    ratio[i] = b / a;
    plain[i] = a;
  }
  qsort(ratio, (size_t)pairs, sizeof *ratio, am_cmp);
  qsort(plain, (size_t)pairs, sizeof *plain, am_cmp);
  printf("{\"ratio\": %.4f, \"q1\": %.4f, \"q3\": %.4f, \"plain_ns_per_pair\": %.2f}\n",
         ratio[pairs / 2], ratio[pairs / 4], ratio[3 * pairs / 4], plain[pairs / 2] / AM_K * 1e9);
  return 0;
}
