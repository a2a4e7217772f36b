// C-level checks of am_bench.h: PRNG determinism and ranges, touching, and
// the JSON result record. Prints "N passed, N failed"; exits non-zero on failure.
#include "am_bench.h"

static int am_passed, am_failed;

#define CHECK(name, expr)                                   \
  do {                                                      \
    if (expr) {                                             \
      am_passed++;                                          \
    } else {                                                \
      am_failed++;                                          \
      fprintf(stderr, "FAIL %s: %s (line %d)\n", name, #expr, __LINE__); \
    }                                                       \
  } while (0)

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

int main(void) {
  test_rng_determinism();
  test_size_bounds();
  test_touch();
  test_result();
  printf("%d passed, %d failed\n", am_passed, am_failed);
  return am_failed != 0;
}
