// libamprof.so — the bitmap of freed and tracked addresses.
// See am_prof.h.
#include "am_prof.h"

uint8_t *am_shadow;  // NULL if it could not be mapped: free then always takes its slow path

// Sets the "tracked" bits of [lo, lo + n), so that free sends those
// addresses to its slow path.
void am_mark_tracked(uintptr_t lo, size_t n) {
  unsigned bit;
  for (uintptr_t a = lo & ~(uintptr_t)7; a < lo + n; a += 8)
    am_bits_at(am_shadow, (const void *)a, &bit)[1] |= (uint8_t)bit;
}

// A raw mmap, not our counted one. NULL and our start-up buffer are marked
// tracked: free's fast path needs no test for them.
void am_map_shadow(void) {
  long got = syscall(SYS_mmap, NULL, AM_SHADOW_BYTES, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (got == -1 || got < 0) {
    am_g.bitmap_full = 1;
    return;
  }
  am_shadow = (uint8_t *)got;
  am_mark_tracked(0, 8);
  am_mark_tracked((uintptr_t)am_boot, sizeof am_boot);
}
