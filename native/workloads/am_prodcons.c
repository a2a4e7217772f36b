// am_prodcons — producers only allocate, consumers only free.
//
// T producer/consumer pairs. Each producer allocates `count` blocks of random
// size, touches them and passes them through a single-producer single-consumer
// ring (lock-free, 1024 entries) to its consumer, which checks and frees them.
// Every block is freed by a thread that did not allocate it (xmalloc-test).
//
// With --pin 1 (the default) producer i and consumer i run on the (2i)-th and
// (2i+1)-th allowed CPUs (modulo their count): left to the scheduler, a pair on
// one core ran 40 % faster than a pair on two (blocks handed over in a shared
// cache), and runs flipped between the two at random (CV 21 % against 6 % for
// samethread).
//
// usage: am_prodcons [--threads T] [--count N] [--size-min B] [--size-max B]
//                    [--seed S] [--release 0|1] [--pin 0|1] [--baseline 1]
#include "am_bench.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#define AM_RING 1024

typedef struct am_item {
  unsigned char *p;
  size_t n;
} am_item;

typedef struct am_pair {
  _Alignas(64) uint64_t head;  // written by the producer
  uint32_t consumer_waits;     // the consumer sleeps on head
  _Alignas(64) uint64_t tail;  // written by the consumer
  uint32_t producer_waits;     // the producer sleeps on tail
  _Alignas(64) am_item ring[AM_RING];
  const am_common *c;
  uint64_t index, count;
  int cpu[2];  // producer's and consumer's CPU, or -1: not pinned
  int corrupt;
} am_pair;

static void am_pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // best effort
}

// The allowed CPUs in order; their count (0 when there is only one).
static int am_cpus(int *out, int room) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  int n = 0;
  for (int c = 0; c < CPU_SETSIZE && n < room; c++)
    if (CPU_ISSET(c, &set)) out[n++] = c;
  return n >= 2 ? n : 0;
}

// ---------------------------------------------------------------------------
// Waiting: spin a little, then sleep on a futex. sched_yield() made the
// scheduler part of the measurement (0.17-1.17 s under glibc, most of it
// system time); a sleeping waiter costs its partner nothing. A sleeper is woken
// once per AM_WAKE_EVERY items, so the two threads do not wake each other per
// block.
// ---------------------------------------------------------------------------
#define AM_SPINS 256
#define AM_WAKE_EVERY 64

static void am_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Sleeps until *word changes from `seen` (or a spurious wake-up). The flag is
// set before the last look at the word, and the publisher reads the flag after
// storing: one of the two sees the other (both sequentially consistent). Only
// the sleeper clears its flag, so no wake-up meant for a later sleep is spent
// on an earlier one.
static void am_sleep(uint64_t *word, uint64_t seen, uint32_t *waits) {
  __atomic_store_n(waits, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(word, __ATOMIC_SEQ_CST) == seen)
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, (uint32_t)seen, NULL, NULL, 0);
  __atomic_store_n(waits, 0, __ATOMIC_RELAXED);
}

static void am_publish(uint64_t *word, uint64_t v, uint32_t *waits, uint64_t last) {
  __atomic_store_n(word, v, __ATOMIC_SEQ_CST);
  if ((v % AM_WAKE_EVERY == 0 || v == last) && __atomic_load_n(waits, __ATOMIC_SEQ_CST))
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

// Waits until *word >= want.
static void am_await(uint64_t *word, uint64_t want, uint32_t *waits) {
  for (unsigned spins = 0;; spins++) {
    uint64_t now = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    if (now >= want) return;
    if (spins < AM_SPINS)
      am_pause();
    else
      am_sleep(word, now, waits);
  }
}

static void *am_producer(void *arg) {
  am_pair *q = arg;
  am_pin(q->cpu[0]);
  am_rng r;
  am_rng_seed(&r, q->c->seed, q->index);
  am_live *live = &am_live_slots[2 * q->index];
  for (uint64_t i = 0; i < q->count; i++) {
    size_t n = am_size_uniform(&r, q->c->size_min, q->c->size_max);
    unsigned char *p = malloc(n);
    if (!p && n) am_die("malloc(%zu) failed", n);
    am_touch(p, n, (unsigned char)i);
    am_live_add(live, (int64_t)n);
    if (i - __atomic_load_n(&q->tail, __ATOMIC_ACQUIRE) >= AM_RING)  // full: wait for half
      am_await(&q->tail, i - AM_RING / 2, &q->producer_waits);
    q->ring[i % AM_RING] = (am_item){p, n};
    am_publish(&q->head, i + 1, &q->consumer_waits, q->count);
  }
  return NULL;
}

static void *am_consumer(void *arg) {
  am_pair *q = arg;
  am_pin(q->cpu[1]);
  am_live *live = &am_live_slots[2 * q->index + 1];
  for (uint64_t i = 0; i < q->count; i++) {
    am_await(&q->head, i + 1, &q->consumer_waits);
    am_item it = q->ring[i % AM_RING];
    am_publish(&q->tail, i + 1, &q->producer_waits, q->count);
    q->corrupt |= !am_touch_ok(it.p, it.n, (unsigned char)i);
    free(it.p);
    am_live_add(live, -(int64_t)it.n);
  }
  return NULL;
}

static void *am_pair_main(void *arg) {
  pthread_t consumer;
  if (pthread_create(&consumer, NULL, am_consumer, arg) != 0) am_die("pthread_create failed");
  am_producer(arg);
  pthread_join(consumer, NULL);
  return NULL;
}

int main(int argc, char **argv) {
  am_baseline_exit(argc, argv, "prodcons");
  am_common c = am_common_args(argc, argv, 16, 512);
  uint64_t count = am_arg_u64(argc, argv, "count", 3000000);
  if (c.threads > AM_MAX_WORKERS / 2) am_die("--threads must be at most %d", AM_MAX_WORKERS / 2);
  am_live_init(2 * c.threads);
  am_pair *pairs = aligned_alloc(64, c.threads * sizeof *pairs);
  if (!pairs) am_die("out of memory");
  static int cpus[CPU_SETSIZE];
  int ncpu = am_arg_u64(argc, argv, "pin", 1) ? am_cpus(cpus, CPU_SETSIZE) : 0;
  for (uint64_t i = 0; i < c.threads; i++) {
    pairs[i] = (am_pair){.c = &c, .index = i, .count = count, .cpu = {-1, -1}};
    if (ncpu) {
      pairs[i].cpu[0] = cpus[(2 * i) % (uint64_t)ncpu];
      pairs[i].cpu[1] = cpus[(2 * i + 1) % (uint64_t)ncpu];
    }
  }
  const char *release_fn;
  double t0 = am_now();
  am_run_threads_kept(c.threads, am_pair_main, pairs, sizeof *pairs);
  double secs = am_stop(t0, c.release, &release_fn);
  int corrupt = 0;
  for (uint64_t i = 0; i < c.threads; i++) corrupt |= pairs[i].corrupt;
  free(pairs);
  if (corrupt) am_die("memory corruption: a block's contents changed before it was freed");
  am_result r;
  am_result_standard(&r, "prodcons", 2 * count * c.threads, secs, 2 * c.threads, release_fn);
  am_result_emit(&r);
  return 0;
}
