// libamprof.so — system calls and locks: the allocator's (inside) or anyone else's.
// See am_prof.h.
#include "am_prof.h"

AM_EXPORT void *mmap(void *a, size_t len, int prot, int flags, int fd, off_t off) {
  if (AM_UNLIKELY(!am_ready()))
    return (void *)syscall(SYS_mmap, a, len, prot, flags, fd, off);
  void *r;
  AM_SYS(AM_MMAP, len, r = am_real.mmap(a, len, prot, flags, fd, off));
  return r;
}

AM_EXPORT void *mmap64(void *a, size_t len, int prot, int flags, int fd, off_t off)
    __attribute__((alias("mmap")));

AM_EXPORT int munmap(void *a, size_t len) {
  if (AM_UNLIKELY(!am_ready())) return (int)syscall(SYS_munmap, a, len);
  int r;
  AM_SYS(AM_MUNMAP, len, r = am_real.munmap(a, len));
  return r;
}

AM_EXPORT void *mremap(void *a, size_t old, size_t len, int flags, ...) {
  void *to = NULL;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    to = va_arg(ap, void *);
    va_end(ap);
  }
  if (AM_UNLIKELY(!am_ready())) return (void *)syscall(SYS_mremap, a, old, len, flags, to);
  void *r;
  AM_SYS(AM_MREMAP, len, r = am_real.mremap(a, old, len, flags, to));
  return r;
}

AM_EXPORT int madvise(void *a, size_t len, int advice) {
  if (AM_UNLIKELY(!am_ready())) return (int)syscall(SYS_madvise, a, len, advice);
  int r;
  AM_SYS(AM_MADVISE, len, r = am_real.madvise(a, len, advice));
  return r;
}

AM_EXPORT int mprotect(void *a, size_t len, int prot) {
  if (AM_UNLIKELY(!am_ready())) return (int)syscall(SYS_mprotect, a, len, prot);
  int r;
  AM_SYS(AM_MPROTECT, len, r = am_real.mprotect(a, len, prot));
  return r;
}

AM_EXPORT int brk(void *a) {
  if (AM_UNLIKELY(!am_ready())) return -1;
  int r;
  AM_SYS(AM_BRK, 0, r = am_real.brk(a));
  return r;
}

AM_EXPORT void *sbrk(intptr_t inc) {
  if (AM_UNLIKELY(!am_ready())) return (void *)-1;
  void *r;
  AM_SYS(AM_SBRK, inc > 0 ? inc : -inc, r = am_real.sbrk(inc));
  return r;
}

// ---------------------------------------------------------------------------
// Locks the allocator takes
// ---------------------------------------------------------------------------
AM_EXPORT int pthread_mutex_lock(pthread_mutex_t *m) {
  if (AM_UNLIKELY(!am_ready())) return 0;  // single-threaded start-up
  if (AM_LIKELY(!am_inside(__builtin_return_address(0)))) return am_real.mutex_lock(m);
  am_thread *t = &am_me;
  t->c.lock_calls++;
  if (am_real.mutex_trylock(m) == 0) return 0;
  t->c.lock_contended++;
  uint64_t c0 = am_tsc();
  int r = am_real.mutex_lock(m);
  t->c.lock_wait += am_tsc() - c0;
  return r;
}

AM_EXPORT int pthread_mutex_trylock(pthread_mutex_t *m) {
  if (AM_UNLIKELY(!am_ready())) return 0;
  int r = am_real.mutex_trylock(m);
  if (am_inside(__builtin_return_address(0))) {
    am_me.c.try_calls++;
    am_me.c.try_failed += r != 0;
  }
  return r;
}

AM_EXPORT int pthread_mutex_unlock(pthread_mutex_t *m) {
  if (AM_UNLIKELY(!am_ready())) return 0;
  am_me.c.unlock_calls += am_inside(__builtin_return_address(0));
  return am_real.mutex_unlock(m);
}
