// libam_bump.so — the null allocator: the least work an allocator can do.
//
// Preloaded under a workload, it shows what the workload costs by itself (the
// floor of every allocator's time). Each thread keeps a LIFO stack of free
// blocks per size class and carves new blocks out of its own chunk: no locks,
// no atomics, no frees to the OS. A freed block goes on the stack of the thread
// that frees it (a remote free costs nothing more than a local one) and is
// handed out again by that thread's next malloc of its class, so that the floor
// does not pay a page fault for every fresh page (a pure bump pointer did: it
// was not a floor). The stacks are arrays of pointers, not lists threaded
// through the blocks: malloc never reads a block, whose line may be long gone
// from the cache (a list's next pointer was 94 % of malloc's time on
// samethread); the workload's own first touch pays for that, as it must.
//
// Every block has a 16-byte header holding its class, for free, realloc and
// malloc_usable_size. Classes: 16-byte steps up to 1 KiB, then powers of two.
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define AM_CHUNK (64u << 20)
#define AM_HEADER 16u
#define AM_SMALL 64                // classes 1..64: 16..1024 bytes
#define AM_CLASSES (AM_SMALL + 48)  // then 2 KiB .. 2^57 bytes

typedef struct am_stack {
  void **items;
  size_t n, cap;
} am_stack;

// initial-exec: one %fs-relative load per access, no __tls_get_addr call (a
// preloaded library is loaded at start, so its TLS is in the static block).
#define AM_TLS __thread __attribute__((tls_model("initial-exec")))
static AM_TLS unsigned char *am_cur, *am_end;
static AM_TLS am_stack am_stacks[AM_CLASSES];

static unsigned am_class(size_t n) {
  if (n <= 16 * AM_SMALL) return n ? (unsigned)((n + 15) / 16) : 1;
  unsigned log2 = 64 - (unsigned)__builtin_clzll((unsigned long long)n - 1);  // 2^log2 >= n
  return AM_SMALL + log2 - 10;
}

static size_t am_class_size(unsigned c) {
  return c <= AM_SMALL ? (size_t)c * 16 : (size_t)1 << (c - AM_SMALL + 10);
}

static void *am_map(size_t n) {
  void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

// Doubles a stack's room (from 4 KiB), with mmap: malloc cannot call itself.
static int am_grow(am_stack *s) {
  size_t cap = s->cap ? 2 * s->cap : 4096 / sizeof(void *);
  void **items = am_map(cap * sizeof(void *));
  if (items == NULL) return 0;
  if (s->items) {
    memcpy(items, s->items, s->n * sizeof(void *));
    munmap(s->items, s->cap * sizeof(void *));
  }
  s->items = items;
  s->cap = cap;
  return 1;
}

// A fresh block of class c whose address is a multiple of `align` (a power of
// two of at least 16), with its class stored just below it.
static void *am_carve(unsigned c, size_t align) {
  size_t n = am_class_size(c);
  uintptr_t start = ((uintptr_t)am_cur + AM_HEADER + align - 1) & ~(uintptr_t)(align - 1);
  if (am_cur == NULL || start + n > (uintptr_t)am_end) {
    size_t want = n + align + AM_HEADER > AM_CHUNK / 2 ? n + align + AM_HEADER : AM_CHUNK;
    unsigned char *chunk = am_map(want);
    if (!chunk) return NULL;
    start = ((uintptr_t)chunk + AM_HEADER + align - 1) & ~(uintptr_t)(align - 1);
    if (want == AM_CHUNK) {
      am_end = chunk + want;  // large blocks keep their own mapping; the chunk goes on
    } else {
      ((size_t *)start)[-1] = c;
      return (void *)start;
    }
  }
  am_cur = (unsigned char *)(start + n);
  ((size_t *)start)[-1] = c;
  return (void *)start;
}

static void *am_alloc(size_t n, size_t align) {
  if (n > ((size_t)1 << 56)) {
    errno = ENOMEM;
    return NULL;
  }
  unsigned c = am_class(n);
  am_stack *s = &am_stacks[c];
  if (s->n && ((uintptr_t)s->items[s->n - 1] & (align - 1)) == 0) return s->items[--s->n];
  void *p = am_carve(c, align);
  if (p == NULL) errno = ENOMEM;
  return p;
}

static size_t am_size(const void *p) { return am_class_size((unsigned)((const size_t *)p)[-1]); }

void *malloc(size_t n) { return am_alloc(n, 16); }

void free(void *p) {
  if (p == NULL) return;
  am_stack *s = &am_stacks[((size_t *)p)[-1]];
  if (s->n == s->cap && !am_grow(s)) return;  // no room: the block is not reused
  s->items[s->n++] = p;
}

void *calloc(size_t k, size_t n) {
  if (n && k > SIZE_MAX / n) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = am_alloc(k * n, 16);
  if (p) memset(p, 0, k * n);  // a reused block is not zero
  return p;
}

void *realloc(void *p, size_t n) {
  if (!p) return malloc(n);
  if (am_class(n) == (unsigned)((size_t *)p)[-1]) return p;
  void *q = malloc(n);
  if (q) {
    memcpy(q, p, am_size(p) < n ? am_size(p) : n);
    free(p);
  }
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
void *memalign(size_t a, size_t n) { return am_alloc(n, am_align(a)); }
void *aligned_alloc(size_t a, size_t n) { return am_alloc(n, am_align(a)); }
int posix_memalign(void **out, size_t a, size_t n) {
  if (a < sizeof(void *) || (a & (a - 1))) return EINVAL;
  void *p = am_alloc(n, am_align(a));
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
void *valloc(size_t n) { return am_alloc(n, 4096); }
void *pvalloc(size_t n) { return am_alloc((n + 4095) & ~(size_t)4095, 4096); }
size_t malloc_usable_size(void *p) { return p ? am_size(p) : 0; }
