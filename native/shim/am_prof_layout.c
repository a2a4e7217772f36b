// libamprof.so — the layout at the peak: how full are the pages and cache lines
// that hold live requested bytes, and how many lines hold blocks of two threads.
// See am_prof.h (am_layout_t) and docs/profiler.md ("Layout at the peak").
//
// From am_new_peak, at sample 1 (every block tracked), after it lets am_g.lock go
// (am_g.layout_taking says a taking is under way; the result is written under the
// lock, and the taking ends there): the tracked blocks are copied out of the stripes (one stripe's lock at a time: in a
// program of several threads a block allocated or freed during the copy may be in
// it or not), sorted by address (a radix sort: qsort may allocate), and swept once.
// Scratch memory is mapped and unmapped by raw system calls: nothing here allocates.
#include "am_prof.h"

typedef struct {
  uintptr_t lo, hi;  // [lo, hi): the block's requested bytes
  uint64_t thread;
} am_span;

static am_span *am_map_spans(size_t n) {
  long got = syscall(SYS_mmap, NULL, n * sizeof(am_span), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return got == -1 || got < 0 ? NULL : (am_span *)got;
}

// Least significant byte first, 8 passes: stable, so the order is by the whole address.
static am_span *am_sort_spans(am_span *a, am_span *tmp, size_t n) {
  for (int shift = 0; shift < 64; shift += 8) {
    size_t count[257] = {0};
    for (size_t i = 0; i < n; i++) count[((a[i].lo >> shift) & 255) + 1]++;
    if (count[((a[0].lo >> shift) & 255) + 1] == n) continue;  // one value: nothing moves
    for (int k = 0; k < 256; k++) count[k + 1] += count[k];
    for (size_t i = 0; i < n; i++) tmp[count[(a[i].lo >> shift) & 255]++] = a[i];
    am_span *swap = a;
    a = tmp;
    tmp = swap;
  }
  return a;
}

// The units of 2^bits bytes that hold any of the spans' bytes (sorted, disjoint).
static uint64_t am_units(const am_span *a, size_t n, int bits) {
  uint64_t units = 0;
  uintptr_t next = 0;  // the first unit not counted yet
  for (size_t i = 0; i < n; i++) {
    uintptr_t first = a[i].lo >> bits, last = (a[i].hi - 1) >> bits;
    if (first < next) first = next;
    if (last >= first) units += last - first + 1;
    if (last + 1 > next) next = last + 1;
  }
  return units;
}

// Lines that hold bytes of blocks of two or more threads. Only a block's first and
// last lines can hold another block's bytes, so each block looks at those two.
static uint64_t am_shared_lines(const am_span *a, size_t n) {
  uint64_t shared = 0, thread = 0;
  uintptr_t line = UINTPTR_MAX;
  int counted = 0;
  for (size_t i = 0; i < n; i++) {
    uintptr_t first = a[i].lo >> 6, last = (a[i].hi - 1) >> 6;
    if (first == line) {
      if (a[i].thread != thread && !counted) shared++, counted = 1;
    } else {
      line = first, thread = a[i].thread, counted = 0;
    }
    if (last != first) line = last, thread = a[i].thread, counted = 0;
  }
  return shared;
}

void am_take_layout(int64_t live) {
  size_t n = 0;
  for (int s = 0; s < AM_STRIPES; s++) n += am_tab[s].n;  // a size hint: read unlocked
  size_t cap = n + n / 4 + 64;
  am_span *a = am_map_spans(2 * cap);
  if (a == NULL) {
    am_real.mutex_lock(&am_g.lock);
    am_g.layout.missed++;
    am_g.layout_taking = 0;
    am_real.mutex_unlock(&am_g.lock);
    return;
  }
  size_t got = 0;
  uint64_t bytes = 0;
  for (int s = 0; s < AM_STRIPES && got < cap; s++) {
    am_real.mutex_lock(&am_tab[s].lock);
    for (size_t i = 0; i < am_tab[s].cap && got < cap; i++) {
      const am_block *b = &am_tab[s].e[i];
      if (b->addr == 0) continue;
      a[got++] = (am_span){b->addr, b->addr + b->req, b->thread};
      bytes += b->req;
    }
    am_real.mutex_unlock(&am_tab[s].lock);
  }
  am_layout_t taken = {.live = (uint64_t)live, .bytes = bytes, .blocks = got};
  if (got > 0) {
    am_span *sorted = am_sort_spans(a, a + cap, got);
    taken.pages = am_units(sorted, got, 12);
    taken.lines = am_units(sorted, got, 6);
    taken.shared_lines = am_shared_lines(sorted, got);
  }
  syscall(SYS_munmap, a, 2 * cap * sizeof(am_span));
  am_real.mutex_lock(&am_g.lock);
  if (got > 0) {
    taken.missed = am_g.layout.missed;
    am_g.layout = taken;
  }
  am_g.layout_taking = 0;
  am_real.mutex_unlock(&am_g.lock);
}
