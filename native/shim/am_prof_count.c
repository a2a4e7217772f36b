// libamprof.so — counting: sampling windows, tracked blocks, peaks.
// See am_prof.h.
#include "am_prof.h"

// ---------------------------------------------------------------------------
// Counting
// ---------------------------------------------------------------------------
pthread_key_t am_key;

// Bytes until the next tracked block: exponential with mean `interval`
// (a Poisson process over allocated bytes, so that a block of n bytes is
// tracked with probability 1 - exp(-n / interval) whatever came before it).
uint64_t am_next_gap(am_thread *t) {
  uint64_t interval = atomic_load_explicit(&am_g.interval, memory_order_relaxed);
  t->gap_interval = interval;
  if (interval == 0) return 0;
  t->rng ^= t->rng >> 12, t->rng ^= t->rng << 25, t->rng ^= t->rng >> 27;  // xorshift64*
  double u = (double)(((t->rng * 0x2545F4914F6CDD1Dull) >> 11) + 1) / 9007199254740992.0;
  return 1 + (uint64_t)(-log(u) * (double)interval);
}

// The bytes a tracked block of `req` bytes stands for: req / its chance.
uint64_t am_weight(uint64_t req, uint64_t interval) {
  if (interval == 0) return req;
  double x = (double)req / (double)interval;
  if (x < 0.0625) return (uint64_t)((double)interval * (1 + x / 2 + x * x / 12) + 0.5);
  return (uint64_t)((double)req / -expm1(-x) + 0.5);
}

// Calls until the next sampled one: uniform in [1, 2N-1], mean N, so that a
// program whose calls repeat with a period dividing N is not always sampled
// at the same point of its period.
uint32_t am_window(am_thread *t) {
  uint64_t n = am_g.sample;
  if (n <= 1) return 1;
  t->rng ^= t->rng >> 12, t->rng ^= t->rng << 25, t->rng ^= t->rng >> 27;
  return (uint32_t)(1 + ((t->rng * 0x2545F4914F6CDD1Dull) >> 32) % (2 * n - 1));
}

// The gap to the next tracked block: the part below AM_FAST_BYTES is malloc's
// fast-path budget, so that every malloc of AM_FAST_BYTES or more takes the slow path.
void am_set_left(am_thread *t, uint64_t left) {
  t->mleft = left < AM_FAST_BYTES ? left : AM_FAST_BYTES;
  t->gap_rest = left - t->mleft;
  t->mleft_was = t->mleft;
}

__attribute__((noinline)) void am_register(am_thread *t) {
  if (t->state == 0 && t->start_tsc == 0) t->start_tsc = am_tsc();
  t->state = 1;
  t->tid = (uint64_t)syscall(SYS_gettid);  // once per thread
  if (t->rng == 0) t->rng = (t->tid * 0x9E3779B97F4A7C15ull) ^ am_tsc() ^ 1;
  am_own_begin(t);
  pthread_setspecific(am_key, t);  // its destructor flushes at thread exit
  am_own_end(t);
  for (int i = 0; t->slot == 0 && i < AM_LIVING; i++) {
    am_thread *none = NULL;
    if (atomic_compare_exchange_strong(&am_living[i], &none, t)) t->slot = i + 1;
  }
  if (t->slot == 0) {
    t->slot = -1;
    atomic_fetch_add(&am_unlisted, 1);
  }
  am_set_left(t, am_next_gap(t));
  t->mcd = t->mwin = am_window(t);
  t->fcd = t->fwin = am_shadow ? am_window(t) : 0;
  t->ocd = am_window(t);
}

uint64_t am_rss_kib(void) {
  char buf[128];
  int fd = (int)syscall(SYS_open, "/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
  syscall(SYS_close, fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char *c = buf;
  while (*c && *c != ' ') c++;
  uint64_t pages = 0;
  for (c++; *c >= '0' && *c <= '9'; c++) pages = pages * 10 + (uint64_t)(*c - '0');
  return pages * (uint64_t)sysconf(_SC_PAGESIZE) / 1024;
}

// New highs: of the whole sum (the interval grows with it; the peak itself
// at sample 1) and of a half (see `picked`). RSS (a syscall) is read at the
// moments the first half picks, when it grew by 1/32 since the last reading.
// The layout is taken after the lock is let go: its sweep must not hold up every
// other thread's new peaks (one taking at a time).
__attribute__((noinline)) void am_new_peak(int64_t whole, const int64_t half[2]) {
  int take = 0;
  am_real.mutex_lock(&am_g.lock);
  if (whole > am_g.peak_live) {
    am_g.peak_live = whole;
    uint64_t at = am_g.layout.live;
    if (am_g.sample == 1 && !am_g.layout_taking && (uint64_t)whole >= at + at / 16 + 1)
      take = am_g.layout_taking = 1;
    uint64_t grown = (uint64_t)whole / 2048;
    if (am_g.base_interval != 0 && grown > atomic_load(&am_g.interval))
      atomic_store(&am_g.interval, grown);
  }
  for (int h = 0; h < 2; h++) {
    if (half[h] <= am_g.picked[h]) continue;
    am_g.picked[h] = half[h];
    am_g.told[h] = half[1 - h];
    am_g.told_var[h] = atomic_load(&am_g.part_var[1 - h]);
    am_g.told_shared_var[h] = atomic_load(&am_g.part_var[2]);
    if (h == 0) am_g.peak_blocks = atomic_load(&am_g.live_blocks);
    if (h == 0 && half[0] > am_g.last_rss_check + am_g.last_rss_check / 32) {
      am_g.rss_at_peak_kib = am_rss_kib();
      am_g.last_rss_check = half[0];
    }
  }
  am_real.mutex_unlock(&am_g.lock);
  if (take) am_take_layout(whole);
}

// A thread's tracked blocks reach the totals every 8 events (and when it
// ends): the peak is exact to a few blocks per thread.
void am_flush_live(am_thread *t) {
  if (t->pending == 0) return;
  atomic_fetch_add(&am_g.live_blocks, (uint64_t)t->blocks_delta);
  int64_t sum[3];
  for (int k = 0; k < 3; k++) {
    atomic_fetch_add(&am_g.part_var[k], (uint64_t)t->part_var_delta[k]);
    sum[k] = atomic_fetch_add(&am_g.part_live[k], t->part_delta[k]) + t->part_delta[k];
    t->part_delta[k] = t->part_var_delta[k] = 0;
  }
  t->blocks_delta = 0;
  t->pending = 0;
  int64_t whole = sum[0] + sum[1] + sum[2];
  int64_t half[2] = {2 * sum[0] + sum[2], 2 * sum[1] + sum[2]};
  if (whole > am_g.peak_live || half[0] > am_g.picked[0] || half[1] > am_g.picked[1])
    am_new_peak(whole, half);
}

void am_account(am_thread *t, const am_block *b, int sign) {
  // A block's variance: (1 - P) / P^2 * req^2, where P = req / weight, so
  // w (w - req); in a half P is halved: 2 w (2 w - req) for twice its sum.
  int64_t w = (int64_t)b->weight, r = (int64_t)b->req;
  int k = (int)b->part;
  t->part_delta[k] += sign * w;
  t->part_var_delta[k] += sign * ((k == 2 ? w * (w - r) : 2 * w * (2 * w - r)) >> 10);
  t->blocks_delta += sign;
  if (++t->pending >= 8 || am_g.base_interval == 0) am_flush_live(t);
}

// The peak of live requested bytes and its variance.
void am_peak(int64_t *peak, uint64_t *var) {
  if (am_g.base_interval == 0) {  // every block tracked: exact
    *peak = am_g.peak_live;
    *var = 0;
    return;
  }
  *peak = (am_g.told[0] + am_g.told[1]) / 2;
  // The halves' noise is independent; the third part's is shared by both.
  *var = ((am_g.told_var[0] + am_g.told_var[1]) / 4 +
          (am_g.told_shared_var[0] + am_g.told_shared_var[1]) / 2) * 1024;
}

// Tracks block p of `req` bytes (weight: the bytes it stands for).
void am_track(am_thread *t, void *p, uint64_t req, uint64_t weight) {
  unsigned bit;
  uint8_t *w = am_bits(p, &bit);
  int s = am_stripe((uintptr_t)p);
  t->rng ^= t->rng >> 12, t->rng ^= t->rng << 25, t->rng ^= t->rng >> 27;
  // A block tracked with a chance of 1/2 or more is in both halves: split, it
  // would add more noise (up to 2 req^2) than its own sampling does.
  uint32_t part = weight <= 2 * req ? 2 : (uint32_t)((t->rng * 0x2545F4914F6CDD1Dull) >> 63);
  am_block b = {(uintptr_t)p, req, weight, part, (uint32_t)t->tid}, old;
  am_real.mutex_lock(&am_tab[s].lock);
  int ok = w != NULL && am_tab_put(s, b, &old);
  am_real.mutex_unlock(&am_tab[s].lock);
  if (!ok) {
    atomic_fetch_add(&am_g.untracked, 1);
    return;
  }
  if (old.addr) am_account(t, &old, -1);  // its free was not seen (made inside the allocator)
  am_account(t, &b, 1);
  atomic_fetch_or_explicit((_Atomic uint8_t *)(w + 1), (uint8_t)bit, memory_order_release);
}

// A block handed out, on the slow path: counts, sizes; if sampled, new or
// reuse and the usable size; tracked when the byte countdown runs out.
void am_allocated(am_thread *t, int api, size_t req, void *p, int sampled, uint64_t cycles,
                         int path) {
  t->c.calls[api]++;
  t->c.bytes[api] += req;
  if (api != AM_MALLOC || req >= AM_FAST_BYTES)
    t->c.sizes[api][am_size_bucket(req)]++;
  else if (sampled)
    t->c.sizes_sampled[am_size_bucket(req)]++;
  if (AM_UNLIKELY(p == NULL)) return;
  if (sampled) {
    unsigned bit;
    uint8_t *w = am_bits(p, &bit);
    int reused = w != NULL && (*w & bit);
    t->c.fresh[api] += !reused;
    t->c.reused[api] += reused;
    if (path < 0) path = reused ? AM_P_MALLOC_REUSE : AM_P_MALLOC_NEW;
    am_cycles(t, path, cycles);
    if (am_real.usable_size) {
      t->c.sampled_req += req;
      t->c.sampled_usable += am_real.usable_size(p);
    }
  }
  uint64_t left = t->mleft + t->gap_rest;
  if (t->gap_interval != 0 && req < left) {
    am_set_left(t, left - req);
    return;
  }
  uint64_t interval = t->gap_interval;
  am_set_left(t, am_next_gap(t));
  if (req > 0) am_track(t, p, req, am_weight(req, interval));
}

// A block about to be given back (slow path): no longer tracked, and its
// address marked freed. Returns its entry if it was tracked.
am_block am_releasing(am_thread *t, void *p) {
  am_block none = {0, 0, 0, 0, 0};
  unsigned bit;
  uint8_t *w = am_bits(p, &bit);
  if (AM_UNLIKELY(w == NULL)) return none;
  if (!(*w & bit)) atomic_fetch_or_explicit((_Atomic uint8_t *)w, (uint8_t)bit, memory_order_relaxed);
  if (!(w[1] & bit)) return none;
  int s = am_stripe((uintptr_t)p);
  am_real.mutex_lock(&am_tab[s].lock);
  am_block b = am_tab_take(s, (uintptr_t)p);
  am_real.mutex_unlock(&am_tab[s].lock);
  atomic_fetch_and_explicit((_Atomic uint8_t *)(w + 1), (uint8_t)~bit, memory_order_relaxed);
  if (b.addr) am_account(t, &b, -1);
  return b;
}
