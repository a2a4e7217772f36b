// am_large — large blocks around the usual mmap thresholds.
//
// Each thread keeps a window of `live` blocks; each step frees the oldest and
// allocates a new one whose size is log-uniform in [size_min, size_max]
// (64 KiB to 32 MiB by default), touching every page. This is where
// allocators differ in using mmap/munmap, keeping freed pages, or madvise.
//
// usage: am_large [--threads T] [--count N] [--live W] [--size-min B]
//                 [--size-max B] [--seed S] [--release 0|1] [--baseline 1]
#include "am_bench.h"

#include <math.h>

typedef struct am_lg_cfg {
  am_common c;
  uint64_t count, live;
} am_lg_cfg;

// Log-uniform: every size octave is equally likely, as in real programs.
static size_t am_size_log(am_rng *r, size_t lo, size_t hi) {
  double u = (double)(am_rng_next(r) >> 11) * 0x1.0p-53;
  double v = exp(log((double)lo) + u * (log((double)hi) - log((double)lo)));
  size_t n = (size_t)v;
  return n < lo ? lo : n > hi ? hi : n;
}

static void *am_large_main(void *arg) {
  am_worker *t = arg;
  const am_lg_cfg *c = t->cfg;
  am_live *live = &am_live_slots[t->index];
  am_rng r;
  am_rng_seed(&r, c->c.seed, t->index);
  unsigned char **win = calloc(c->live, sizeof *win);
  size_t *sizes = calloc(c->live, sizeof *sizes);
  if (!win || !sizes) am_die("out of memory");
  for (uint64_t i = 0; i < c->count + c->live; i++) {
    uint64_t k = i % c->live;
    if (win[k]) {
      t->corrupt |= !am_touch_ok(win[k], sizes[k], (unsigned char)k);
      free(win[k]);
      am_live_add(live, -(int64_t)sizes[k]);
      win[k] = NULL;
      t->ops++;
    }
    if (i >= c->count) continue;  // the last `live` steps only drain the window
    sizes[k] = am_size_log(&r, c->c.size_min, c->c.size_max);
    win[k] = malloc(sizes[k]);
    if (!win[k]) am_die("malloc(%zu) failed", sizes[k]);
    am_touch(win[k], sizes[k], (unsigned char)k);
    am_live_add(live, (int64_t)sizes[k]);
    t->ops++;
  }
  free(sizes);
  free(win);
  return NULL;
}

int main(int argc, char **argv) {
  am_baseline_exit(argc, argv, "large");
  am_lg_cfg cfg = {
      .c = am_common_args(argc, argv, 65536, 33554432),
      .count = am_arg_u64(argc, argv, "count", 2000),
      .live = am_arg_u64(argc, argv, "live", 4),
  };
  if (cfg.live == 0 || cfg.c.size_min == 0) am_die("--live and --size-min must be > 0");
  am_live_init(cfg.c.threads);
  am_run_workers("large", cfg.c.threads, am_large_main, sizeof(am_worker), &cfg, cfg.c.release);
  return 0;
}
