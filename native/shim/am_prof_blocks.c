// libamprof.so — tracked blocks: address -> requested size and weight.
// See am_prof.h.
#include "am_prof.h"

am_tab_t am_tab[AM_STRIPES];

am_block am_tab_first[AM_STRIPES][AM_TAB_FIRST];

void am_tab_drop(int s) {
  if (am_tab[s].e && am_tab[s].e != am_tab_first[s])
    syscall(SYS_munmap, am_tab[s].e, am_tab[s].cap * sizeof(am_block));
}

am_block *am_map_blocks(size_t cap) {
  long got = syscall(SYS_mmap, NULL, cap * sizeof(am_block), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return got == -1 || got < 0 ? NULL : (am_block *)got;
}

am_block *am_slot(am_block *e, size_t cap, uintptr_t addr) {
  size_t i = (size_t)(am_hash(addr) >> 20) & (cap - 1);
  while (e[i].addr != 0 && e[i].addr != addr) i = (i + 1) & (cap - 1);
  return &e[i];
}

// With the stripe's lock held. 0 if there was no memory for it.
int am_tab_put(int s, am_block b, am_block *old) {
  if ((am_tab[s].n + 1) * 2 > am_tab[s].cap) {
    size_t cap = am_tab[s].cap ? am_tab[s].cap * 2 : AM_TAB_FIRST;
    am_block *e = cap == AM_TAB_FIRST ? am_tab_first[s] : am_map_blocks(cap);
    if (e == NULL) return 0;
    for (size_t i = 0; i < am_tab[s].cap; i++)
      if (am_tab[s].e[i].addr) *am_slot(e, cap, am_tab[s].e[i].addr) = am_tab[s].e[i];
    am_tab_drop(s);
    am_tab[s].e = e;
    am_tab[s].cap = cap;
  }
  am_block *slot = am_slot(am_tab[s].e, am_tab[s].cap, b.addr);
  *old = *slot;
  am_tab[s].n += slot->addr == 0;
  *slot = b;
  return 1;
}

// With the stripe's lock held: the block's entry, removed (addr 0 if none).
am_block am_tab_take(int s, uintptr_t addr) {
  am_block none = {0, 0, 0, 0, 0};
  if (am_tab[s].cap == 0) return none;
  size_t mask = am_tab[s].cap - 1;
  am_block *e = am_tab[s].e, *hole = am_slot(e, am_tab[s].cap, addr);
  am_block got = *hole;
  if (got.addr == 0) return none;
  am_tab[s].n--;
  // Backward shift: move later entries of the run into the hole when they may.
  size_t h = (size_t)(hole - e);
  for (size_t j = (h + 1) & mask; e[j].addr != 0; j = (j + 1) & mask) {
    size_t home = (size_t)(am_hash(e[j].addr) >> 20) & mask;
    if (((j - home) & mask) >= ((j - h) & mask)) {
      e[h] = e[j];
      h = j;
    }
  }
  e[h].addr = 0;
  return got;
}
