// am_churn — random-size churn (the memheap pattern).
//
// Each thread, per round: allocate `count` blocks of uniform random size in
// [size_min, size_max] and touch them, free a random half, allocate those
// slots again, then free everything. The request sequence depends only on
// `seed` and the thread index, so every allocator sees the same requests.
//
// usage: am_churn [--count N] [--size-min B] [--size-max B] [--rounds R]
//                 [--threads T] [--seed S] [--release 0|1] [--baseline 1]
#include "am_bench.h"

typedef struct am_churn_cfg {
  am_common c;
  uint64_t count, rounds;
} am_churn_cfg;

typedef struct am_block {
  unsigned char *p;
  size_t n;
} am_block;

static unsigned char am_tag(uint64_t thread, uint64_t slot) {
  return (unsigned char)(0x5a ^ thread ^ slot);
}

static void am_alloc_slot(am_worker *t, am_rng *r, am_block *b, uint64_t slot) {
  const am_churn_cfg *c = t->cfg;
  b->n = am_size_uniform(r, c->c.size_min, c->c.size_max);
  b->p = malloc(b->n);
  if (b->p == NULL && b->n != 0) am_die("malloc(%zu) failed", b->n);
  am_touch(b->p, b->n, am_tag(t->index, slot));
  am_live_add(&am_live_slots[t->index], (int64_t)b->n);
  t->ops++;
}

static void am_free_slot(am_worker *t, am_block *b, uint64_t slot) {
  if (!am_touch_ok(b->p, b->n, am_tag(t->index, slot))) t->corrupt = 1;
  free(b->p);
  am_live_add(&am_live_slots[t->index], -(int64_t)b->n);
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
  am_worker *t = arg;
  const am_churn_cfg *c = t->cfg;
  am_rng r;
  am_rng_seed(&r, c->c.seed, t->index);
  // Bookkeeping arrays are allocated once, outside the measured pattern.
  am_block *blocks = calloc(c->count, sizeof *blocks);
  uint64_t *order = calloc(c->count, sizeof *order);
  if (!blocks || !order) am_die("out of memory for %" PRIu64 " slots", c->count);
  uint64_t half = c->count / 2;
  for (uint64_t round = 0; round < c->rounds; round++) {
    for (uint64_t i = 0; i < c->count; i++) am_alloc_slot(t, &r, &blocks[i], i);
    am_pick(&r, order, c->count, half);
    for (uint64_t i = 0; i < half; i++) am_free_slot(t, &blocks[order[i]], order[i]);
    for (uint64_t i = 0; i < half; i++) am_alloc_slot(t, &r, &blocks[order[i]], order[i]);
    for (uint64_t i = 0; i < c->count; i++) am_free_slot(t, &blocks[i], i);
  }
  free(order);
  free(blocks);
  return NULL;
}

int main(int argc, char **argv) {
  am_baseline_exit(argc, argv, "churn");
  am_churn_cfg cfg = {
      .c = am_common_args(argc, argv, 16, 512),
      .count = am_arg_u64(argc, argv, "count", 100000),
      .rounds = am_arg_u64(argc, argv, "rounds", 10),
  };
  if (cfg.count == 0) am_die("--count must be > 0");
  am_live_init(cfg.c.threads);
  am_run_workers("churn", cfg.c.threads, am_churn_main, sizeof(am_worker), &cfg, cfg.c.release);
  return 0;
}
