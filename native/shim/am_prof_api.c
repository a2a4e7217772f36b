// libamprof.so — the allocation API: the hot path (malloc and free first).
// See am_prof.h.
#include "am_prof.h"

__attribute__((noinline)) void *am_malloc_slow(am_thread *t, size_t n) {
  if (!am_ready()) return am_boot_alloc(n);
  if (t->depth) return am_real.malloc(n);
  am_enter(t);
  int s = am_tick(t, &t->mcd);
  t->mwin = t->mcd;
  uint64_t c = 0;
  void *p;
  AM_TIMED(s, c, p = am_real.malloc(n));
  am_allocated(t, AM_MALLOC, n, p, s, c, -1);
  return p;
}

// The common case: two fields go down, then a jump to the real malloc.
// Sampled calls, a thread's first, calls of AM_FAST_BYTES or more and those
// whose bytes end the fast budget take the slow path.
AM_EXPORT void *malloc(size_t n) {
  am_thread *t = &am_me;
  if (AM_UNLIKELY(t->mcd <= 1 || n >= t->mleft)) return am_malloc_slow(t, n);
  t->mcd--;
  t->mleft -= n;
  return am_real.malloc(n);
}

__attribute__((noinline)) void am_free_slow(am_thread *t, void *p) {
  if (p == NULL || am_is_boot(p) || !am_ready()) return;
  if (t->depth) {
    am_real.free(p);
    return;
  }
  am_enter(t);
  int s = am_tick(t, am_shadow ? &t->fcd : &t->ocd);
  t->fwin = t->fcd;
  t->c.calls[AM_FREE]++;
  am_releasing(t, p);
  uint64_t c = 0;
  AM_TIMED(s, c, am_real.free(p));
  if (s) am_cycles(t, AM_P_FREE, c);
}

// The common case: the address marked freed (a plain store: only other
// "freed" bits share its byte, and losing one to a race with another thread
// makes one later reuse count as new), then a jump to the real free.
// NULL and our start-up buffer have their "tracked" bits set (am_map_shadow):
// they take the slow path without a test here.
AM_EXPORT void free(void *p) {
  am_thread *t = &am_me;
  if (AM_UNLIKELY(t->fcd <= 1)) {
    am_free_slow(t, p);
    return;
  }
  unsigned bit;
  uint8_t *w = am_bits_at(am_shadow, p, &bit);  // fcd > 0: the bitmap exists
  if (AM_UNLIKELY(w[1] & bit)) {
    am_free_slow(t, p);
    return;
  }
  t->fcd--;
  if (AM_UNLIKELY(!(*w & bit))) *w = (uint8_t)(*w | bit);
  am_real.free(p);
}

AM_EXPORT void *calloc(size_t n, size_t m) {
  if (AM_UNLIKELY(am_state != 2)) {
    // dlsym allocates (zeroed) while we resolve: serve it from the static buffer.
    if (atomic_load(&am_state) == 1) return am_boot_alloc(n * m);  // static: zeroed
    if (!am_ready()) return am_boot_alloc(n * m);
  }
  am_thread *t = &am_me;
  if (t->depth) return am_real.calloc(n, m);
  int s = am_sampled(t);
  uint64_t c = 0;
  void *p;
  AM_TIMED(s, c, p = am_real.calloc(n, m));
  size_t bytes;
  am_allocated(t, AM_CALLOC, __builtin_mul_overflow(n, m, &bytes) ? 0 : bytes, p, s, c,
               AM_P_CALLOC);
  return p;
}

void *am_realloc(int api, void *p, size_t n, size_t m) {
  am_thread *t = &am_me;
  size_t bytes;
  int overflow = __builtin_mul_overflow(n, m, &bytes);
  if (p && am_is_boot(p)) {  // a block from before we were ready: copy it out
    void *q = malloc(overflow ? SIZE_MAX : bytes);
    size_t old = am_boot_size(p);
    if (q) memcpy(q, p, bytes < old ? bytes : old);
    return q;
  }
  if (t->depth)
    return api == AM_REALLOC ? am_real.realloc(p, n) : am_real.reallocarray(p, n, m);
  int s = am_sampled(t);
  am_block was = {0, 0, 0, 0, 0};
  if (p) was = am_releasing(t, p);
  uint64_t c = 0;
  void *q;
  AM_TIMED(s, c, q = api == AM_REALLOC ? am_real.realloc(p, n) : am_real.reallocarray(p, n, m));
  if (q == NULL && p != NULL && !overflow && bytes != 0 && was.addr) {
    am_track(t, p, was.req, was.weight);  // failed: the old block is still live
  }
  am_allocated(t, api, overflow ? 0 : bytes, q, s, c, AM_P_REALLOC);
  return q;
}

AM_EXPORT void *realloc(void *p, size_t n) {
  if (AM_UNLIKELY(!am_ready())) return am_boot_alloc(n);
  return am_realloc(AM_REALLOC, p, n, 1);
}

AM_EXPORT void *reallocarray(void *p, size_t n, size_t m) {
  if (AM_UNLIKELY(!am_ready())) return NULL;
  return am_realloc(AM_REALLOCARRAY, p, n, m);
}

AM_EXPORT void *aligned_alloc(size_t al, size_t n) {
  if (AM_UNLIKELY(!am_ready())) return NULL;
  AM_ALIGNED(AM_ALIGNED_ALLOC, am_real.aligned_alloc(al, n), n);
}

AM_EXPORT void *memalign(size_t al, size_t n) {
  if (AM_UNLIKELY(!am_ready())) return NULL;
  AM_ALIGNED(AM_MEMALIGN, am_real.memalign(al, n), n);
}

AM_EXPORT void *valloc(size_t n) {
  if (AM_UNLIKELY(!am_ready())) return NULL;
  AM_ALIGNED(AM_VALLOC, am_real.valloc(n), n);
}

AM_EXPORT void *pvalloc(size_t n) {
  if (AM_UNLIKELY(!am_ready())) return NULL;
  AM_ALIGNED(AM_PVALLOC, am_real.pvalloc(n), n);
}

AM_EXPORT int posix_memalign(void **out, size_t al, size_t n) {
  if (AM_UNLIKELY(!am_ready())) return ENOMEM;
  am_thread *t = &am_me;
  if (t->depth) return am_real.posix_memalign(out, al, n);
  int s = am_sampled(t);
  uint64_t c = 0;
  int rc;
  AM_TIMED(s, c, rc = am_real.posix_memalign(out, al, n));
  am_allocated(t, AM_POSIX_MEMALIGN, n, rc == 0 ? *out : NULL, s, c, AM_P_ALIGNED);
  return rc;
}

AM_EXPORT size_t malloc_usable_size(void *p) {
  if (p == NULL) return 0;
  if (am_is_boot(p)) return am_boot_size(p);
  if (!am_ready()) return 0;
  am_thread *t = &am_me;
  if (t->depth) return am_real.usable_size(p);
  int s = am_sampled(t);
  uint64_t c = 0;
  size_t n;
  t->c.calls[AM_USABLE_SIZE]++;
  AM_TIMED(s, c, n = am_real.usable_size(p));
  if (s) am_cycles(t, AM_P_USABLE, c);
  return n;
}
