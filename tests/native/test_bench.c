// C-level checks of am_bench.h: PRNG determinism and ranges, touching, the
// JSON result record, the allocator statistics (am_stats.h) and kept threads. Prints "N passed, N failed"; exits non-zero on failure.
#include "am_bench.h"

#include "am_check.h"

static void test_rng_determinism(void) {
  am_rng a, b, c;
  am_rng_seed(&a, 42, 0);
  am_rng_seed(&b, 42, 0);
  am_rng_seed(&c, 42, 1);
  int same = 1, differs = 0;
  for (int i = 0; i < 1000; i++) {
    uint64_t x = am_rng_next(&a), y = am_rng_next(&b), z = am_rng_next(&c);
    same &= x == y;
    differs |= x != z;
  }
  CHECK("same seed, same stream", same);
  CHECK("other stream differs", differs);
}

static void test_size_bounds(void) {
  am_rng r;
  am_rng_seed(&r, 7, 0);
  size_t lo = 1000, hi = 0;
  for (int i = 0; i < 100000; i++) {
    size_t s = am_size_uniform(&r, 16, 512);
    if (s < lo) lo = s;
    if (s > hi) hi = s;
  }
  CHECK("uniform reaches min", lo == 16);
  CHECK("uniform reaches max", hi == 512);
  CHECK("degenerate range", am_size_uniform(&r, 5, 5) == 5);
}

static void test_touch(void) {
  size_t n = 3 * AM_PAGE + 17;
  unsigned char *p = calloc(1, n);
  am_touch(p, n, 0xab);
  CHECK("first byte", p[0] == 0xab);
  CHECK("last byte", p[n - 1] == 0xab);
  CHECK("page bytes", p[AM_PAGE] == 0xab && p[2 * AM_PAGE] == 0xab);
  CHECK("touch ok", am_touch_ok(p, n, 0xab));
  p[n - 1] = 0;
  CHECK("corruption seen", !am_touch_ok(p, n, 0xab));
  free(p);
}

static void test_result(void) {
  am_result r;
  am_result_begin(&r, "t");
  am_result_u64(&r, "ops", 12);
  am_result_f64(&r, "seconds", 0.5);
  am_result_str(&r, "s", "a\"b");
  am_result_add(&r, "}");
  CHECK("json record", strcmp(r.buf, "{\"am\": \"result\", \"v\": 2, \"workload\": \"t\", \"ops\": 12, "
                                     "\"seconds\": 0.5, \"s\": \"a?b\"}") == 0);
}

// Under glibc (no preload in ctest), the statistics come from mallinfo2 in
// libc, and a live block shows in them; nothing is read from another object.
static void test_stats(void) {
  const char *libc = am_object_of(dlsym(RTLD_DEFAULT, "malloc"));
  am_stats before = am_stats_read(libc);
  char *volatile p = malloc(4 << 20);  // volatile: the compiler may not elide the pair
  p[0] = 1;
  am_stats during = am_stats_read(libc);
  free(p);
  CHECK("glibc source", strcmp(before.source, "glibc") == 0);
  CHECK("live grows by the block", during.live - before.live >= (4 << 20));
  CHECK("held and mapped known", during.held >= 0 && during.mapped >= during.live);
  CHECK("glibc has no metadata figure", during.metadata == -1 && during.committed == -1);
  CHECK("no object, no statistics", strcmp(am_stats_read("").source, "none") == 0);
  CHECK("a symbol of another object is not taken",
        am_stats_sym(libc, "am_stats_read") == NULL && am_stats_sym(libc, "mallinfo2") != NULL);
}

static uint64_t am_ran;
static void *am_count(void *arg) {
  (void)arg;
  __atomic_add_fetch(&am_ran, 1, __ATOMIC_RELAXED);
  return NULL;
}

// Kept workers have all finished their function when am_run_threads_kept returns,
// and it can be called again.
static void test_kept_threads(void) {
  char args[4];
  am_run_threads_kept(4, am_count, args, 1);
  CHECK("every kept worker ran", __atomic_load_n(&am_ran, __ATOMIC_RELAXED) == 4);
  am_run_threads_kept(2, am_count, args, 1);
  CHECK("a second round waits for its own", __atomic_load_n(&am_ran, __ATOMIC_RELAXED) == 6);
}

int main(void) {
  test_rng_determinism();
  test_size_bounds();
  test_touch();
  test_result();
  test_stats();
  test_kept_threads();
  return am_checked();
}
