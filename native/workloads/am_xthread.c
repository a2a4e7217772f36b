// am_xthread — blocks freed by threads that did not allocate them.
//
// A shared array of slots; each of T threads visits slots in its own random
// order. An empty slot gets a new block of random size; a full one is taken
// (atomic exchange), freed and left empty. With T > 1 most blocks are freed by
// another thread. Blocks carry their size and owner in a 16-byte header, so
// requests below 17 bytes are raised to 17.
//
// usage: am_xthread [--threads T] [--slots N] [--steps S] [--size-min B]
//                   [--size-max B] [--seed S] [--release 0|1] [--baseline 1]
#include "am_bench.h"

typedef struct am_xt_head {
  uint64_t size;
  uint64_t owner;
} am_xt_head;

typedef struct am_xt_cfg {
  am_common c;
  uint64_t slots, steps;
  am_xt_head **slot;  // shared: atomically exchanged
} am_xt_cfg;

typedef struct am_xt_thread {
  am_xt_cfg *cfg;
  uint64_t index, ops, remote_frees;
  int corrupt;
} am_xt_thread;

static void am_xt_free(am_xt_thread *t, am_xt_head *h) {
  unsigned char *b = (unsigned char *)h;
  t->corrupt |= b[h->size - 1] != (unsigned char)h->owner;
  t->remote_frees += h->owner != t->index;
  am_live_add(&am_live_slots[t->index], -(int64_t)h->size);
  free(h);
}

static am_xt_head *am_xt_alloc(am_xt_thread *t, am_rng *r) {
  const am_common *c = &t->cfg->c;
  size_t n = am_size_uniform(r, c->size_min, c->size_max);
  if (n <= sizeof(am_xt_head)) n = sizeof(am_xt_head) + 1;  // header + check byte
  am_xt_head *h = malloc(n);
  if (!h) am_die("malloc(%zu) failed", n);
  am_touch(h, n, (unsigned char)t->index);
  h->size = n;
  h->owner = t->index;
  am_live_add(&am_live_slots[t->index], (int64_t)n);
  return h;
}

static void *am_xthread_main(void *arg) {
  am_xt_thread *t = arg;
  am_xt_cfg *c = t->cfg;
  am_rng r;
  am_rng_seed(&r, c->c.seed, t->index);
  for (uint64_t s = 0; s < c->steps; s++) {
    am_xt_head **slot = &c->slot[am_rng_below(&r, c->slots)];
    am_xt_head *old = __atomic_exchange_n(slot, NULL, __ATOMIC_ACQ_REL);
    if (old) {
      am_xt_free(t, old);
    } else {
      am_xt_head *h = am_xt_alloc(t, &r);
      am_xt_head *expected = NULL;
      // Another thread may have filled the slot meanwhile: then free ours.
      if (!__atomic_compare_exchange_n(slot, &expected, h, 0, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE)) {
        am_xt_free(t, h);
        t->ops++;
      }
    }
    t->ops++;
  }
  return NULL;
}

int main(int argc, char **argv) {
  am_baseline_exit(argc, argv, "xthread");
  am_xt_cfg cfg = {
      .c = am_common_args(argc, argv, 1, 500),
      .slots = am_arg_u64(argc, argv, "slots", 10000),
      .steps = am_arg_u64(argc, argv, "steps", 2000000),
  };
  if (cfg.slots == 0) am_die("--slots must be > 0");
  am_live_init(cfg.c.threads);
  cfg.slot = calloc(cfg.slots, sizeof *cfg.slot);
  am_xt_thread *ts = calloc(cfg.c.threads, sizeof *ts);
  if (!cfg.slot || !ts) am_die("out of memory");
  for (uint64_t i = 0; i < cfg.c.threads; i++) ts[i] = (am_xt_thread){.cfg = &cfg, .index = i};
  const char *release_fn;
  double t0 = am_now();
  am_run_threads_kept(cfg.c.threads, am_xthread_main, ts, sizeof *ts);
  am_xt_thread drain = {.cfg = &cfg, .index = 0};  // frees what is left
  for (uint64_t i = 0; i < cfg.slots; i++) {
    if (cfg.slot[i]) {
      am_xt_free(&drain, cfg.slot[i]);
      drain.ops++;
    }
  }
  double secs = am_stop(t0, cfg.c.release, &release_fn);
  uint64_t ops = drain.ops, remote = 0;
  int corrupt = drain.corrupt;
  for (uint64_t i = 0; i < cfg.c.threads; i++) {
    ops += ts[i].ops;
    remote += ts[i].remote_frees;
    corrupt |= ts[i].corrupt;
  }
  free(ts);
  free(cfg.slot);
  if (corrupt) am_die("memory corruption: a block's contents changed before it was freed");
  am_result r;
  am_result_standard(&r, "xthread", ops, secs, cfg.c.threads, release_fn);
  am_result_u64(&r, "remote_frees", remote);
  am_result_emit(&r);
  return 0;
}
