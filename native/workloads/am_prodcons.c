// am_prodcons — producers only allocate, consumers only free.
//
// T producer/consumer pairs. Each producer allocates `count` blocks of random
// size, touches them and passes them through a single-producer single-consumer
// ring (lock-free, 1024 entries) to its consumer, which checks and frees them.
// Every block is freed by a thread that did not allocate it (xmalloc-test).
//
// usage: am_prodcons [--threads T] [--count N] [--size-min B] [--size-max B]
//                    [--seed S] [--release 0|1] [--baseline 1]
#include "am_bench.h"

#include <sched.h>

#define AM_RING 1024

typedef struct am_item {
  unsigned char *p;
  size_t n;
} am_item;

typedef struct am_pair {
  _Alignas(64) uint64_t head;  // written by the producer
  _Alignas(64) uint64_t tail;  // written by the consumer
  _Alignas(64) am_item ring[AM_RING];
  const am_common *c;
  uint64_t index, count;
  int corrupt;
} am_pair;

// Spin briefly, then yield: with more threads than cores a spinning waiter
// would steal the time its partner needs.
static void am_backoff(unsigned *spins) {
  if (++*spins > 64) {
    sched_yield();
    *spins = 0;
  }
}

static void *am_producer(void *arg) {
  am_pair *q = arg;
  am_rng r;
  am_rng_seed(&r, q->c->seed, q->index);
  am_live *live = &am_live_slots[2 * q->index];
  for (uint64_t i = 0; i < q->count; i++) {
    size_t n = am_size_uniform(&r, q->c->size_min, q->c->size_max);
    unsigned char *p = malloc(n);
    if (!p && n) am_die("malloc(%zu) failed", n);
    am_touch(p, n, (unsigned char)i);
    am_live_add(live, (int64_t)n);
    unsigned spins = 0;
    while (i - __atomic_load_n(&q->tail, __ATOMIC_ACQUIRE) >= AM_RING) am_backoff(&spins);
    q->ring[i % AM_RING] = (am_item){p, n};
    __atomic_store_n(&q->head, i + 1, __ATOMIC_RELEASE);
  }
  return NULL;
}

static void *am_consumer(void *arg) {
  am_pair *q = arg;
  am_live *live = &am_live_slots[2 * q->index + 1];
  for (uint64_t i = 0; i < q->count; i++) {
    unsigned spins = 0;
    while (__atomic_load_n(&q->head, __ATOMIC_ACQUIRE) <= i) am_backoff(&spins);
    am_item it = q->ring[i % AM_RING];
    __atomic_store_n(&q->tail, i + 1, __ATOMIC_RELEASE);
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
  for (uint64_t i = 0; i < c.threads; i++)
    pairs[i] = (am_pair){.c = &c, .index = i, .count = count};
  const char *release_fn;
  double t0 = am_now();
  am_run_threads(c.threads, am_pair_main, pairs, sizeof *pairs);
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
