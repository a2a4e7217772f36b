// libam_bump.so — the null allocator: a bump pointer that never frees.
//
// Preloaded under a workload, it shows what the workload costs by itself (the
// floor of every allocator's time). Each thread carves blocks out of its own
// chunk (no atomics, no locks on the fast path); a new chunk comes from mmap.
// Every block has a 16-byte header holding its size, for realloc and
// malloc_usable_size. free() does nothing; calloc needs no memset because
// fresh mmap memory is zero and is never reused.
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define AM_CHUNK (64u << 20)
#define AM_HEADER 16u

static __thread unsigned char *am_cur, *am_end;

static void *am_map(size_t n) {
  void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

// A block of n bytes whose address is a multiple of `align` (a power of two
// of at least 16), with the size stored just below it.
static void *am_bump(size_t n, size_t align) {
  if (n > SIZE_MAX - AM_CHUNK) {
    errno = ENOMEM;
    return NULL;
  }
  uintptr_t start = ((uintptr_t)am_cur + AM_HEADER + align - 1) & ~(uintptr_t)(align - 1);
  if (am_cur == NULL || start + n > (uintptr_t)am_end) {
    size_t want = n + align + AM_HEADER > AM_CHUNK / 2 ? n + align + AM_HEADER : AM_CHUNK;
    unsigned char *chunk = am_map(want);
    if (!chunk) {
      errno = ENOMEM;
      return NULL;
    }
    if (want == AM_CHUNK) {  // oversized requests get their own mapping
      am_cur = chunk;
      am_end = chunk + want;
    }
    start = ((uintptr_t)chunk + AM_HEADER + align - 1) & ~(uintptr_t)(align - 1);
    if (want != AM_CHUNK) {
      ((size_t *)start)[-1] = n;
      return (void *)start;
    }
  }
  am_cur = (unsigned char *)(start + n);
  ((size_t *)start)[-1] = n;
  return (void *)start;
}

static size_t am_size(const void *p) { return ((const size_t *)p)[-1]; }

void *malloc(size_t n) { return am_bump(n, 16); }
void free(void *p) { (void)p; }
void *calloc(size_t k, size_t n) {
  if (n && k > SIZE_MAX / n) {
    errno = ENOMEM;
    return NULL;
  }
  return am_bump(k * n, 16);
}
void *realloc(void *p, size_t n) {
  if (!p) return malloc(n);
  void *q = malloc(n);
  if (q) memcpy(q, p, am_size(p) < n ? am_size(p) : n);
  return q;
}
void *reallocarray(void *p, size_t k, size_t n) {
  if (n && k > SIZE_MAX / n) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(p, k * n);
}
static size_t am_align(size_t a) { return a < 16 ? 16 : a; }
void *memalign(size_t a, size_t n) { return am_bump(n, am_align(a)); }
void *aligned_alloc(size_t a, size_t n) { return am_bump(n, am_align(a)); }
int posix_memalign(void **out, size_t a, size_t n) {
  if (a < sizeof(void *) || (a & (a - 1))) return EINVAL;
  void *p = am_bump(n, am_align(a));
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
void *valloc(size_t n) { return am_bump(n, 4096); }
void *pvalloc(size_t n) { return am_bump((n + 4095) & ~(size_t)4095, 4096); }
size_t malloc_usable_size(void *p) { return p ? am_size(p) : 0; }
