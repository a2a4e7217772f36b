// The C allocation API over libpas (WebKit's allocator, its bmalloc heap: the one
// WebKit's own bmalloc::api::malloc uses): libpas has no malloc layer of its own
// besides a benchmark's (mbmalloc), so this is allocmark's, built by debian.py with
// libpas's C sources from Debian's webkit2gtk source package.
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "bmalloc_heap.h"
#include "pas_system_heap.h"

#define AM_PAS_MODE pas_non_compact_allocation_mode
#define AM_PAGE ((size_t)4096)

static void *am_pas_nomem(void) {
  errno = ENOMEM;
  return NULL;
}

void *malloc(size_t n) {
  void *p = bmalloc_try_allocate(n, AM_PAS_MODE);
  return p ? p : am_pas_nomem();
}

void free(void *p) {
  if (p) bmalloc_deallocate(p);
}

void *calloc(size_t m, size_t n) {
  if (n && m > SIZE_MAX / n) return am_pas_nomem();
  void *p = bmalloc_try_allocate_zeroed(m * n, AM_PAS_MODE);
  return p ? p : am_pas_nomem();
}

void *realloc(void *p, size_t n) {
  if (!p) return malloc(n);
  void *q = bmalloc_try_reallocate(p, n, AM_PAS_MODE, pas_reallocate_free_if_successful);
  return q ? q : am_pas_nomem();
}

void *reallocarray(void *p, size_t m, size_t n) {
  if (n && m > SIZE_MAX / n) return am_pas_nomem();
  return realloc(p, m * n);
}

void *aligned_alloc(size_t align, size_t n) {
  if (!align || (align & (align - 1))) {
    errno = EINVAL;
    return NULL;
  }
  void *p = bmalloc_try_allocate_with_alignment(n, align, AM_PAS_MODE);
  return p ? p : am_pas_nomem();
}

int posix_memalign(void **out, size_t align, size_t n) {
  if (align < sizeof(void *) || (align & (align - 1))) return EINVAL;
  void *p = bmalloc_try_allocate_with_alignment(n, align, AM_PAS_MODE);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

// glibc's memalign takes any alignment, rounding it up to a power of two.
void *memalign(size_t align, size_t n) {
  size_t a = sizeof(void *);
  while (a < align && a) a <<= 1;
  return a ? aligned_alloc(a, n) : am_pas_nomem();
}

void *valloc(size_t n) { return aligned_alloc(AM_PAGE, n); }

void *pvalloc(size_t n) {
  if (n > SIZE_MAX - AM_PAGE) return am_pas_nomem();
  return aligned_alloc(AM_PAGE, (n + AM_PAGE - 1) & ~(AM_PAGE - 1));
}

size_t malloc_usable_size(void *p) { return p ? bmalloc_get_allocation_size(p) : 0; }

// bmalloc (WebKit's C++ side, not built here) may divert libpas to the system's
// malloc (its SystemHeap, for Malloc=1 or a debugger); libpas asks it through
// these. Here libpas is the system's malloc: never divert.
bool pas_system_heap_is_enabled(pas_heap_config_kind kind) {
  (void)kind;
  return false;
}
bool pas_system_heap_should_supplant_bmalloc(pas_heap_config_kind kind) {
  (void)kind;
  return false;
}
// Never reached while the two above say false.
void *pas_system_heap_malloc(size_t n) {
  (void)n;
  abort();
}
void *pas_system_heap_memalign(size_t align, size_t n) {
  (void)align, (void)n;
  abort();
}
void *pas_system_heap_realloc(void *p, size_t n) {
  (void)p, (void)n;
  abort();
}
void *pas_system_heap_malloc_compact(size_t n) {
  (void)n;
  abort();
}
void *pas_system_heap_memalign_compact(size_t align, size_t n) {
  (void)align, (void)n;
  abort();
}
void *pas_system_heap_realloc_compact(void *p, size_t n) {
  (void)p, (void)n;
  abort();
}
void pas_system_heap_free(void *p) {
  (void)p;
  abort();
}
