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
  am_find_real(&am_real);
  atomic_store(&am_state, 2);
  am_own_begin(&am_me);
  am_init();
  am_own_end(&am_me);
}
