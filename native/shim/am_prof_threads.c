// libamprof.so — threads: merged into the totals when they end, however they end.
// See am_prof.h.
#include "am_prof.h"

// ---------------------------------------------------------------------------
// Threads: merged into the totals when they end, however they end
// ---------------------------------------------------------------------------
void am_add(uint64_t *to, const uint64_t *from, size_t n) {
  for (size_t i = 0; i < n; i++) to[i] += from[i];
}

// Adds a thread's counts to the totals, with its own line (lifetime and its
// estimated cycles inside the allocator: sampled cycles x N).
// No fast path until the thread registers again; every count is in t->c.
void am_stop(am_thread *t) {
  t->mcd = t->fcd = t->saved_mcd = t->saved_fcd = t->mwin = t->fwin = 0;
  t->mleft = t->mleft_was = t->gap_rest = 0;
}

void am_flush(am_thread *t) {
  am_harvest(t);
  uint64_t sampled = 0;
  for (int p = 0; p < AM_PATH_N; p++) sampled += t->c.cycles[p];
  am_flush_live(t);
  am_real.mutex_lock(&am_g.lock);
  if (t->start_tsc != 0) {
    uint64_t i = am_g.threads_seen++, cycles = am_tsc() - t->start_tsc;
    uint64_t estimate = sampled * am_g.sample;
    am_g.threads_cycles += cycles;
    am_g.threads_alloc_cycles += estimate;
    if (i < AM_MAX_THREADS)
      am_g.threads[i] = (am_thread_line){t->tid, cycles, estimate};
    t->start_tsc = 0;
  }
  am_add((uint64_t *)&am_g.c, (const uint64_t *)&t->c, sizeof t->c / sizeof(uint64_t));
  memset(&t->c, 0, sizeof t->c);
  am_real.mutex_unlock(&am_g.lock);
  if (t->slot > 0) atomic_store(&am_living[t->slot - 1], NULL);
  if (t->slot < 0) atomic_fetch_sub(&am_unlisted, 1);
  t->slot = 0;
  t->state = 2;
  am_stop(t);  // its next call registers it again
}

void am_thread_end(void *arg) { am_flush((am_thread *)arg); }

AM_EXPORT void pthread_exit(void *value) {
  if (am_ready() && am_me.state == 1) am_flush(&am_me);
  am_real.exit(value);
}

am_start am_starts[1024];

void *am_trampoline(void *slot) {
  am_start *s = slot;
  void *(*fn)(void *) = s->fn;
  void *arg = s->arg;
  atomic_store(&s->busy, 0);
  am_me.start_tsc = am_tsc();
  am_register(&am_me);
  return fn(arg);
}

AM_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                             void *arg) {
  if (!am_ready()) return EAGAIN;
  for (size_t i = 0; i < sizeof am_starts / sizeof am_starts[0]; i++) {
    int free_slot = 0;
    if (atomic_compare_exchange_strong(&am_starts[i].busy, &free_slot, 1)) {
      am_starts[i].fn = fn;
      am_starts[i].arg = arg;
      int r = am_real.create(th, attr, am_trampoline, &am_starts[i]);
      if (r != 0) atomic_store(&am_starts[i].busy, 0);
      return r;
    }
  }
  return am_real.create(th, attr, fn, arg);  // pool exhausted: clock starts later
}

// ---------------------------------------------------------------------------
// Process start, fork, exit
// ---------------------------------------------------------------------------
uint64_t am_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
