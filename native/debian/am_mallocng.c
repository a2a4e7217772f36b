// The rest of the C allocation API over musl's mallocng (malloc, free, realloc,
// aligned_alloc and malloc_usable_size are its own), with musl's rules; and the
// lock held across fork, as musl's libc does for its malloc.
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/malloc/mallocng/glue.h"

int am_ng_allzero(void *p);

void *calloc(size_t m, size_t n) {
  if (n && m > SIZE_MAX / n) {
    errno = ENOMEM;
    return NULL;
  }
  n *= m;
  void *p = malloc(n);
  // mallocng knows a slot fresh from mmap is zero already (musl's calloc asks too).
  if (!p || am_ng_allzero(p)) return p;
  return memset(p, 0, n);
}

void *reallocarray(void *p, size_t m, size_t n) {
  if (n && m > SIZE_MAX / n) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(p, m * n);
}

int posix_memalign(void **out, size_t align, size_t len) {
  if (align < sizeof(void *)) return EINVAL;
  void *p = aligned_alloc(align, len);
  if (!p) return errno;
  *out = p;
  return 0;
}

void *memalign(size_t align, size_t len) { return aligned_alloc(align, len); }

void *valloc(size_t len) { return aligned_alloc(PAGESIZE, len); }

void *pvalloc(size_t len) {
  if (len > SIZE_MAX - PAGESIZE) {
    errno = ENOMEM;
    return NULL;
  }
  return aligned_alloc(PAGESIZE, (len + PAGESIZE - 1) & -(size_t)PAGESIZE);
}

static void am_ng_prepare(void) { pthread_mutex_lock(&am_ng_lock); }
static void am_ng_parent(void) { pthread_mutex_unlock(&am_ng_lock); }
static void am_ng_child(void) { pthread_mutex_init(&am_ng_lock, NULL); }

__attribute__((constructor)) static void am_ng_init(void) {
  pthread_atfork(am_ng_prepare, am_ng_parent, am_ng_child);
}
