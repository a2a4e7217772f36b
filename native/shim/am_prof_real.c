// libamprof.so — the real functions, and a static buffer for dlsym's own allocations.
// See am_prof.h.
#include "am_prof.h"

am_real_t am_real;

_Atomic int am_state;  // 0 unresolved, 1 resolving, 2 ready
_Alignas(64) char am_boot[1 << 16];
_Atomic size_t am_boot_used;

int am_is_boot(const void *p) {
  return (const char *)p >= am_boot && (const char *)p < am_boot + sizeof am_boot;
}

// Zeroed (static) memory with its size in the 16 bytes before it; never freed.
void *am_boot_alloc(size_t n) {
  size_t need = 16 + ((n + 15) & ~(size_t)15);
  size_t at = atomic_fetch_add(&am_boot_used, need);
  if (n > sizeof am_boot || at + need > sizeof am_boot) return NULL;
  memcpy(am_boot + at, &n, sizeof n);
  return am_boot + at + 16;
}

size_t am_boot_size(const void *p) {
  size_t n;
  memcpy(&n, (const char *)p - 16, sizeof n);
  return n;
}

void am_resolve(void) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&am_state, &expected, 1)) return;
#define AM_NEXT(field, name) *(void **)&am_real.field = dlsym(RTLD_NEXT, name)
  AM_NEXT(malloc, "malloc");
  AM_NEXT(free, "free");
  AM_NEXT(calloc, "calloc");
  AM_NEXT(realloc, "realloc");
  AM_NEXT(reallocarray, "reallocarray");
  AM_NEXT(posix_memalign, "posix_memalign");
  AM_NEXT(aligned_alloc, "aligned_alloc");
  AM_NEXT(memalign, "memalign");
  AM_NEXT(valloc, "valloc");
  AM_NEXT(pvalloc, "pvalloc");
  AM_NEXT(usable_size, "malloc_usable_size");
  AM_NEXT(mmap, "mmap");
  AM_NEXT(munmap, "munmap");
  AM_NEXT(mremap, "mremap");
  AM_NEXT(madvise, "madvise");
  AM_NEXT(mprotect, "mprotect");
  AM_NEXT(brk, "brk");
  AM_NEXT(sbrk, "sbrk");
  AM_NEXT(mutex_lock, "pthread_mutex_lock");
  AM_NEXT(mutex_trylock, "pthread_mutex_trylock");
  AM_NEXT(mutex_unlock, "pthread_mutex_unlock");
  AM_NEXT(create, "pthread_create");
  AM_NEXT(exit, "pthread_exit");
  AM_NEXT(fork, "fork");
#undef AM_NEXT
  atomic_store(&am_state, 2);
  am_own_begin(&am_me);
  am_init();
  am_own_end(&am_me);
}
