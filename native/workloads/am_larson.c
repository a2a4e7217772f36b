// am_larson — the Larson & Krishnan server simulation.
//
// T lineages run at once. A thread of a lineage replaces `replace` random
// slots of the lineage's array (free the old block, allocate a new one of
// random size), then starts a new thread that inherits the array and exits.
// So blocks are freed by threads that did not allocate them, and threads are
// short-lived. It stops after `duration_ms`, or after `handoffs` threads per
// lineage when duration_ms is 0 (a deterministic run).
//
// usage: am_larson [--threads T] [--slots N] [--replace R] [--duration-ms D]
//                  [--handoffs H] [--size-min B] [--size-max B] [--seed S]
//                  [--release 0|1] [--baseline 1]
#include "am_bench.h"

typedef struct am_la_cfg {
  am_common c;
  uint64_t slots, replace, duration_ms, handoffs;
  int stop;  // set by main when the duration is over
  int running;  // lineages still going
} am_la_cfg;

typedef struct am_la_lineage {
  am_la_cfg *cfg;
  uint64_t index, ops, generations;
  am_rng rng;
  unsigned char **block;
  size_t *size;
} am_la_lineage;

static void am_la_replace(am_la_lineage *l, uint64_t i) {
  const am_common *c = &l->cfg->c;
  am_live *live = &am_live_slots[l->index];
  if (l->block[i]) {
    free(l->block[i]);
    am_live_add(live, -(int64_t)l->size[i]);
    l->ops++;
  }
  size_t n = am_size_uniform(&l->rng, c->size_min, c->size_max);
  l->block[i] = malloc(n);
  if (!l->block[i] && n) am_die("malloc(%zu) failed", n);
  am_touch(l->block[i], n, (unsigned char)i);
  l->size[i] = n;
  am_live_add(live, (int64_t)n);
  l->ops++;
}

static void *am_larson_thread(void *arg);

static int am_la_done(am_la_lineage *l) {
  const am_la_cfg *c = l->cfg;
  if (c->duration_ms) return __atomic_load_n(&c->stop, __ATOMIC_ACQUIRE);
  return l->generations >= c->handoffs;
}

static void *am_larson_thread(void *arg) {
  am_la_lineage *l = arg;
  for (uint64_t k = 0; k < l->cfg->replace; k++)
    am_la_replace(l, am_rng_below(&l->rng, l->cfg->slots));
  l->generations++;
  if (am_la_done(l)) {
    __atomic_fetch_sub(&l->cfg->running, 1, __ATOMIC_ACQ_REL);
    return NULL;
  }
  pthread_t next;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&next, &attr, am_larson_thread, l) != 0) am_die("pthread_create failed");
  pthread_attr_destroy(&attr);
  return NULL;
}

static void am_la_wait(am_la_cfg *cfg, double t0) {
  struct timespec nap = {0, 1000000};
  while (__atomic_load_n(&cfg->running, __ATOMIC_ACQUIRE) > 0) {
    if (cfg->duration_ms && (am_now() - t0) * 1000 >= (double)cfg->duration_ms)
      __atomic_store_n(&cfg->stop, 1, __ATOMIC_RELEASE);
    nanosleep(&nap, NULL);
  }
}

int main(int argc, char **argv) {
  am_baseline_exit(argc, argv, "larson");
  am_la_cfg cfg = {
      .c = am_common_args(argc, argv, 8, 1000),
      .slots = am_arg_u64(argc, argv, "slots", 1000),
      .replace = am_arg_u64(argc, argv, "replace", 10000),
      .duration_ms = am_arg_u64(argc, argv, "duration-ms", 1000),
      .handoffs = am_arg_u64(argc, argv, "handoffs", 100),
  };
  if (cfg.slots == 0) am_die("--slots must be > 0");
  if (cfg.duration_ms == 0 && cfg.handoffs == 0) am_die("give --duration-ms or --handoffs");
  uint64_t n = cfg.c.threads;
  am_live_init(n);
  am_la_lineage *ls = calloc(n, sizeof *ls);
  if (!ls) am_die("out of memory");
  for (uint64_t i = 0; i < n; i++) {
    ls[i] = (am_la_lineage){.cfg = &cfg, .index = i};
    am_rng_seed(&ls[i].rng, cfg.c.seed, i);
    ls[i].block = calloc(cfg.slots, sizeof *ls[i].block);
    ls[i].size = calloc(cfg.slots, sizeof *ls[i].size);
    if (!ls[i].block || !ls[i].size) am_die("out of memory");
  }
  cfg.running = (int)n;
  const char *release_fn;
  double t0 = am_now();
  am_run_threads(n, am_larson_thread, ls, sizeof *ls);  // joins only the first generation
  am_la_wait(&cfg, t0);
  uint64_t ops = 0, generations = 0;
  for (uint64_t i = 0; i < n; i++) {
    for (uint64_t s = 0; s < cfg.slots; s++) {
      ops += ls[i].block[s] != NULL;
      free(ls[i].block[s]);
    }
    ops += ls[i].ops;
    generations += ls[i].generations;
  }
  double secs = am_stop(t0, cfg.c.release, &release_fn);
  am_result r;
  am_result_standard(&r, "larson", ops, secs, n, release_fn);
  am_result_u64(&r, "threads_created", generations);
  am_result_emit(&r);
  return 0;
}
