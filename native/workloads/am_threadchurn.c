// am_threadchurn — many short-lived threads that leave blocks behind.
//
// `spawns` threads in all, at most T at a time. Each allocates `allocs`
// blocks of random size, frees all but `keep` of them, and exits; the kept
// blocks outlive their thread and are freed by the main thread at the end.
// Allocators with per-thread caches must reclaim them when threads exit.
// Reports the RSS left after all threads are gone, with and without the kept
// blocks still alive.
//
// usage: am_threadchurn [--threads T] [--spawns N] [--allocs A] [--keep K]
//                       [--size-min B] [--size-max B] [--seed S] [--release 0|1]
#include "am_bench.h"

typedef struct am_tc_cfg {
  am_common c;
  uint64_t spawns, allocs, keep;
  unsigned char **kept;  // spawns * keep blocks, freed by main at the end
  size_t *kept_sizes;
} am_tc_cfg;

typedef struct am_tc_thread {
  const am_tc_cfg *cfg;
  uint64_t worker, spawn, ops;
} am_tc_thread;

static void *am_tc_main(void *arg) {
  am_tc_thread *t = arg;
  const am_tc_cfg *c = t->cfg;
  am_live *live = &am_live_slots[t->worker];
  am_rng r;
  am_rng_seed(&r, c->c.seed, t->spawn);
  unsigned char *mine[64];  // blocks of this thread; allocs is at most 64
  size_t sizes[64];
  for (uint64_t i = 0; i < c->allocs; i++) {
    sizes[i] = am_size_uniform(&r, c->c.size_min, c->c.size_max);
    mine[i] = malloc(sizes[i]);
    if (!mine[i] && sizes[i]) am_die("malloc(%zu) failed", sizes[i]);
    am_touch(mine[i], sizes[i], 0x77);
    am_live_add(live, (int64_t)sizes[i]);
  }
  for (uint64_t i = 0; i < c->allocs; i++) {
    if (i < c->keep) {
      c->kept[t->spawn * c->keep + i] = mine[i];
      c->kept_sizes[t->spawn * c->keep + i] = sizes[i];
    } else {
      free(mine[i]);
      am_live_add(live, -(int64_t)sizes[i]);
    }
  }
  t->ops = c->allocs * 2 - c->keep;
  return NULL;
}

// Run the spawns in waves of T threads.
static uint64_t am_tc_run(am_tc_cfg *cfg, am_tc_thread *ts) {
  uint64_t ops = 0, n = cfg->c.threads;
  for (uint64_t first = 0; first < cfg->spawns; first += n) {
    uint64_t wave = cfg->spawns - first < n ? cfg->spawns - first : n;
    for (uint64_t i = 0; i < wave; i++)
      ts[i] = (am_tc_thread){.cfg = cfg, .worker = i, .spawn = first + i};
    am_run_threads(wave, am_tc_main, ts, sizeof *ts);
    for (uint64_t i = 0; i < wave; i++) ops += ts[i].ops;
  }
  return ops;
}

int main(int argc, char **argv) {
  am_baseline_exit(argc, argv, "threadchurn");
  am_tc_cfg cfg = {
      .c = am_common_args(argc, argv, 16, 4096),
      .spawns = am_arg_u64(argc, argv, "spawns", 2000),
      .allocs = am_arg_u64(argc, argv, "allocs", 64),
      .keep = am_arg_u64(argc, argv, "keep", 4),
  };
  if (cfg.allocs > 64 || cfg.keep > cfg.allocs) am_die("need --keep <= --allocs <= 64");
  am_live_init(cfg.c.threads);
  cfg.kept = calloc(cfg.spawns * cfg.keep + 1, sizeof *cfg.kept);
  cfg.kept_sizes = calloc(cfg.spawns * cfg.keep + 1, sizeof *cfg.kept_sizes);
  am_tc_thread *ts = calloc(cfg.c.threads, sizeof *ts);
  if (!cfg.kept || !cfg.kept_sizes || !ts) am_die("out of memory");
  const char *release_fn;
  double t0 = am_now();
  uint64_t ops = am_tc_run(&cfg, ts);
  uint64_t rss_kept = am_status_kib("VmRSS:"), kept_bytes = 0;
  for (uint64_t i = 0; i < cfg.spawns * cfg.keep; i++) {
    kept_bytes += cfg.kept_sizes[i];
    free(cfg.kept[i]);
    ops++;
  }
  double secs = am_stop(t0, cfg.c.release, &release_fn);
  uint64_t rss_left = am_status_kib("VmRSS:");
  free(ts);
  free(cfg.kept);
  free(cfg.kept_sizes);
  am_result r;
  am_result_standard(&r, "threadchurn", ops, secs, cfg.c.threads, release_fn);
  am_result_u64(&r, "threads_created", cfg.spawns);
  am_result_u64(&r, "kept_bytes", kept_bytes);
  am_result_u64(&r, "rss_with_kept_kib", rss_kept);
  am_result_u64(&r, "rss_left_kib", rss_left);
  am_result_emit(&r);
  return 0;
}
