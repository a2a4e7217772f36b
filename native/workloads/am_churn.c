// am_churn — random-size churn (the memheap pattern).
//
// Each thread, per round: allocate `count` blocks of uniform random size in
// [size_min, size_max] and touch them, free a random half, allocate those
// slots again, then free everything. The request sequence depends only on
// `seed` and the thread index, so every allocator sees the same requests.
//
// usage: am_churn [--count N] [--size-min B] [--size-max B] [--rounds R]
//                 [--threads T] [--seed S]
#include "am_bench.h"

#include <pthread.h>

typedef struct am_churn_cfg {
  uint64_t count, size_min, size_max, rounds, seed;
} am_churn_cfg;

typedef struct am_churn_thread {
  const am_churn_cfg *cfg;
  uint64_t index;
  uint64_t ops;
  uint64_t peak_live;  // this thread's peak of requested bytes
  int corrupt;
  pthread_t tid;
} am_churn_thread;

typedef struct am_block {
  unsigned char *p;
  size_t n;
} am_block;

static unsigned char am_tag(uint64_t thread, uint64_t slot) {
  return (unsigned char)(0x5a ^ thread ^ slot);
}

static void am_alloc_slot(am_churn_thread *t, am_rng *r, am_block *b, uint64_t slot,
                          uint64_t *live) {
  b->n = am_size_uniform(r, t->cfg->size_min, t->cfg->size_max);
  b->p = malloc(b->n);
  if (b->p == NULL && b->n != 0) am_die("malloc(%zu) failed", b->n);
  am_touch(b->p, b->n, am_tag(t->index, slot));
  *live += b->n;
  if (*live > t->peak_live) t->peak_live = *live;
  t->ops++;
}

static void am_free_slot(am_churn_thread *t, am_block *b, uint64_t slot, uint64_t *live) {
  if (!am_touch_ok(b->p, b->n, am_tag(t->index, slot))) t->corrupt = 1;
  free(b->p);
  *live -= b->n;
  b->p = NULL;
  b->n = 0;
  t->ops++;
}

// Partial Fisher–Yates: the first `k` entries of `order` become a random
// k-subset of the slots.
static void am_pick(am_rng *r, uint64_t *order, uint64_t n, uint64_t k) {
  for (uint64_t i = 0; i < n; i++) order[i] = i;
  for (uint64_t i = 0; i < k; i++) {
    uint64_t j = i + am_rng_below(r, n - i);
    uint64_t tmp = order[i];
    order[i] = order[j];
    order[j] = tmp;
  }
}

static void *am_churn_main(void *arg) {
  am_churn_thread *t = arg;
  const am_churn_cfg *c = t->cfg;
  am_rng r;
  am_rng_seed(&r, c->seed, t->index);
  // Bookkeeping arrays are allocated once, outside the measured pattern.
  am_block *blocks = calloc(c->count, sizeof *blocks);
  uint64_t *order = calloc(c->count, sizeof *order);
  if (!blocks || !order) am_die("out of memory for %" PRIu64 " slots", c->count);
  uint64_t live = 0, half = c->count / 2;
  for (uint64_t round = 0; round < c->rounds; round++) {
    for (uint64_t i = 0; i < c->count; i++) am_alloc_slot(t, &r, &blocks[i], i, &live);
    am_pick(&r, order, c->count, half);
    for (uint64_t i = 0; i < half; i++) am_free_slot(t, &blocks[order[i]], order[i], &live);
    for (uint64_t i = 0; i < half; i++) am_alloc_slot(t, &r, &blocks[order[i]], order[i], &live);
    for (uint64_t i = 0; i < c->count; i++) am_free_slot(t, &blocks[i], i, &live);
  }
  free(order);
  free(blocks);
  return NULL;
}

static am_churn_cfg am_churn_parse(int argc, char **argv, uint64_t *threads) {
  am_churn_cfg c = {
      .count = am_arg_u64(argc, argv, "count", 100000),
      .size_min = am_arg_u64(argc, argv, "size-min", 16),
      .size_max = am_arg_u64(argc, argv, "size-max", 512),
      .rounds = am_arg_u64(argc, argv, "rounds", 10),
      .seed = am_arg_u64(argc, argv, "seed", 42),
  };
  *threads = am_arg_u64(argc, argv, "threads", 1);
  if (c.size_min > c.size_max) am_die("--size-min must not exceed --size-max");
  if (c.count == 0 || *threads == 0 || *threads > 1024)
    am_die("--count must be > 0 and --threads in 1..1024");
  return c;
}

int main(int argc, char **argv) {
  uint64_t nthreads;
  am_churn_cfg cfg = am_churn_parse(argc, argv, &nthreads);
  am_churn_thread *ts = calloc(nthreads, sizeof *ts);
  if (!ts) am_die("out of memory");
  double t0 = am_now();
  for (uint64_t i = 0; i < nthreads; i++) {
    ts[i] = (am_churn_thread){.cfg = &cfg, .index = i};
    if (pthread_create(&ts[i].tid, NULL, am_churn_main, &ts[i]) != 0) am_die("pthread_create failed");
  }
  uint64_t ops = 0, peak = 0;
  int corrupt = 0;
  for (uint64_t i = 0; i < nthreads; i++) {
    pthread_join(ts[i].tid, NULL);
    ops += ts[i].ops;
    peak += ts[i].peak_live;  // upper bound: threads need not peak at once
    corrupt |= ts[i].corrupt;
  }
  double secs = am_now() - t0;
  free(ts);
  if (corrupt) am_die("memory corruption: a block's contents changed before it was freed");
  am_result r;
  am_result_begin(&r, "churn");
  am_result_u64(&r, "ops", ops);
  am_result_f64(&r, "seconds", secs);
  am_result_f64(&r, "ops_per_s", secs > 0 ? (double)ops / secs : 0.0);
  am_result_u64(&r, "peak_requested_bytes", peak);
  am_result_u64(&r, "threads", nthreads);
  am_result_malloc_object(&r);
  am_result_emit(&r);
  return 0;
}
