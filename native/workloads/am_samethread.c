// am_samethread — each thread allocates and frees its own blocks.
//
// T threads; per round each allocates `count` blocks of random size in
// [size_min, size_max], touches them, then frees them in allocation order.
// No block ever crosses a thread: this measures the thread-local fast paths.
//
// usage: am_samethread [--threads T] [--count K] [--rounds R] [--size-min B]
//                      [--size-max B] [--seed S] [--release 0|1] [--baseline 1]
#include "am_bench.h"

typedef struct am_st_cfg {
  am_common c;
  uint64_t count, rounds;
} am_st_cfg;

static void *am_samethread_main(void *arg) {
  am_worker *t = arg;
  const am_st_cfg *c = t->cfg;
  am_live *live = &am_live_slots[t->index];
  am_rng r;
  am_rng_seed(&r, c->c.seed, t->index);
  unsigned char **blocks = calloc(c->count, sizeof *blocks);
  size_t *sizes = calloc(c->count, sizeof *sizes);
  if (!blocks || !sizes) am_die("out of memory for %" PRIu64 " slots", c->count);
  unsigned char tag = (unsigned char)(0xa5 ^ t->index);
  for (uint64_t round = 0; round < c->rounds; round++) {
    for (uint64_t i = 0; i < c->count; i++) {
      sizes[i] = am_size_uniform(&r, c->c.size_min, c->c.size_max);
      blocks[i] = malloc(sizes[i]);
      if (!blocks[i] && sizes[i]) am_die("malloc(%zu) failed", sizes[i]);
      am_touch(blocks[i], sizes[i], tag);
      am_live_add(live, (int64_t)sizes[i]);
    }
    for (uint64_t i = 0; i < c->count; i++) {
      t->corrupt |= !am_touch_ok(blocks[i], sizes[i], tag);
      free(blocks[i]);
      am_live_add(live, -(int64_t)sizes[i]);
    }
    t->ops += 2 * c->count;
  }
  free(sizes);
  free(blocks);
  return NULL;
}

int main(int argc, char **argv) {
  am_baseline_exit(argc, argv, "samethread");
  am_st_cfg cfg = {
      .c = am_common_args(argc, argv, 1, 500),
      .count = am_arg_u64(argc, argv, "count", 100000),
      .rounds = am_arg_u64(argc, argv, "rounds", 10),
  };
  if (cfg.count == 0) am_die("--count must be > 0");
  am_live_init(cfg.c.threads);
  am_run_workers("samethread", cfg.c.threads, am_samethread_main, sizeof(am_worker), &cfg, cfg.c.release);
  return 0;
}
