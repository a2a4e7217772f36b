// am_pareto — Pareto-distributed sizes and lifetimes.
//
// Most blocks are small and short-lived, a few are large or live long: sizes
// follow a Pareto law with minimum size_min and shape `alpha` (capped at
// size_max); each block's lifetime, in allocations, follows a Pareto law with
// minimum life_min and the same shape (capped at 65535). A timing wheel frees every
// block when its lifetime is over.
//
// usage: am_pareto [--threads T] [--steps N] [--alpha-x100 A] [--life-min L] [--size-min B]
//                  [--size-max B] [--seed S] [--release 0|1] [--baseline 1]
#include "am_bench.h"

#include <math.h>

#define AM_WHEEL 65536
#define AM_QUANTILES 4096

typedef struct am_pa_cfg {
  am_common c;
  uint64_t steps, life_min;
  double quantile[AM_QUANTILES + 1];  // Pareto(1, alpha) inverse CDF table
} am_pa_cfg;

typedef struct am_pa_block {
  struct am_pa_block *next;  // the wheel's bucket list lives in the blocks
  size_t size;
} am_pa_block;

// Inverse transform through a table, so the hot path has no pow().
static double am_pareto(am_rng *r, const am_pa_cfg *c) {
  uint64_t x = am_rng_next(r);
  uint64_t i = x >> 52;  // 12 bits: table index
  double frac = (double)(x & ((1ULL << 52) - 1)) * 0x1.0p-52;
  return c->quantile[i] + frac * (c->quantile[i + 1] - c->quantile[i]);
}

static void am_pa_free_bucket(am_worker *t, am_pa_block **bucket) {
  am_live *live = &am_live_slots[t->index];
  for (am_pa_block *b = *bucket, *next; b; b = next) {
    next = b->next;
    t->corrupt |= ((unsigned char *)b)[b->size - 1] != 0x42;
    am_live_add(live, -(int64_t)b->size);
    free(b);
    t->ops++;
  }
  *bucket = NULL;
}

static void *am_pareto_main(void *arg) {
  am_worker *t = arg;
  const am_pa_cfg *c = t->cfg;
  am_rng r;
  am_rng_seed(&r, c->c.seed, t->index);
  am_pa_block **wheel = calloc(AM_WHEEL, sizeof *wheel);
  if (!wheel) am_die("out of memory");
  for (uint64_t s = 0; s < c->steps; s++) {
    double want = (double)c->c.size_min * am_pareto(&r, c);
    size_t n = want > (double)c->c.size_max ? c->c.size_max : (size_t)want;
    double life = (double)c->life_min * am_pareto(&r, c);
    uint64_t ttl = life >= AM_WHEEL - 1 ? AM_WHEEL - 1 : (uint64_t)life;
    am_pa_block *b = malloc(n);
    if (!b) am_die("malloc(%zu) failed", n);
    am_touch(b, n, 0x42);
    b->size = n;
    am_live_add(&am_live_slots[t->index], (int64_t)n);
    t->ops++;
    am_pa_block **bucket = &wheel[(s + ttl) % AM_WHEEL];
    b->next = *bucket;
    *bucket = b;
    am_pa_free_bucket(t, &wheel[(s + 1) % AM_WHEEL]);
  }
  for (uint64_t i = 0; i < AM_WHEEL; i++) am_pa_free_bucket(t, &wheel[i]);
  free(wheel);
  return NULL;
}

int main(int argc, char **argv) {
  am_baseline_exit(argc, argv, "pareto");
  static am_pa_cfg cfg;
  cfg.c = am_common_args(argc, argv, 32, 1048576);
  cfg.steps = am_arg_u64(argc, argv, "steps", 2000000);
  cfg.life_min = am_arg_u64(argc, argv, "life-min", 1000);
  if (cfg.life_min == 0) am_die("--life-min must be > 0");
  double alpha = (double)am_arg_u64(argc, argv, "alpha-x100", 130) / 100.0;
  if (alpha <= 0.0) am_die("--alpha-x100 must be > 0");
  if (cfg.c.size_min <= sizeof(am_pa_block)) am_die("--size-min must be at least 17 (header + check byte)");
  // Quantile q of Pareto(1, alpha) is (1 - q)^(-1/alpha); the last entry is
  // taken at q = 1 - 1/(2*AM_QUANTILES) rather than at infinity.
  for (int i = 0; i <= AM_QUANTILES; i++) {
    double q = i < AM_QUANTILES ? (double)i / AM_QUANTILES : 1.0 - 0.5 / AM_QUANTILES;
    cfg.quantile[i] = pow(1.0 - q, -1.0 / alpha);
  }
  am_live_init(cfg.c.threads);
  am_run_workers("pareto", cfg.c.threads, am_pareto_main, sizeof(am_worker), &cfg, cfg.c.release);
  return 0;
}
