// The C-level checks' counting: CHECK(name, expr) counts a pass or prints a failure;
// a check's main prints "N passed, N failed" (am_checked) and exits non-zero on failure.
#ifndef AM_CHECK_H
#define AM_CHECK_H

#include <stdio.h>

static int am_passed, am_failed;

#define CHECK(name, expr)                                                \
  do {                                                                   \
    if (expr) {                                                          \
      am_passed++;                                                       \
    } else {                                                             \
      am_failed++;                                                       \
      fprintf(stderr, "FAIL %s: %s (line %d)\n", name, #expr, __LINE__); \
    }                                                                    \
  } while (0)

static inline int am_checked(void) {
  printf("%d passed, %d failed\n", am_passed, am_failed);
  return am_failed != 0;
}

#endif
