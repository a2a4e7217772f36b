// am_realloc — buffers grown by realloc, as vectors and strings grow.
//
// `count` buffers per round, each grown from empty to a random final size in
// [size_min, size_max]: by small steps (16..64 bytes, like appending to a
// string), by doubling (like a vector), or half of each (`mode mixed`). The
// contents written so far are checked after every realloc.
//
// usage: am_realloc [--threads T] [--count N] [--rounds R] [--mode M]
//                   [--size-min B] [--size-max B] [--seed S] [--release 0|1]
#include "am_bench.h"

typedef struct am_re_cfg {
  am_common c;
  uint64_t count, rounds;
  int mode;  // 0 small, 1 doubling, 2 mixed
} am_re_cfg;

static size_t am_next_size(am_rng *r, size_t cur, int doubling) {
  return doubling ? (cur ? 2 * cur : 16) : cur + 16 + (size_t)am_rng_below(r, 49);
}

// Grow one buffer to `target` bytes, keeping a byte pattern that is checked
// after each step: the byte at every old end must have survived the move.
static void am_grow(am_worker *t, am_rng *r, size_t target, int doubling) {
  am_live *live = &am_live_slots[t->index];
  unsigned char *p = NULL;
  size_t n = 0;
  while (n < target) {
    size_t next = am_next_size(r, n, doubling);
    if (next > target) next = target;
    p = realloc(p, next);
    if (!p) am_die("realloc(%zu) failed", next);
    t->corrupt |= n && p[n - 1] != (unsigned char)n;
    am_touch(p + n, next - n, 0);
    p[next - 1] = (unsigned char)next;
    am_live_add(live, (int64_t)(next - n));
    n = next;
    t->ops++;
  }
  free(p);
  am_live_add(live, -(int64_t)n);
  t->ops++;
}

static void *am_realloc_main(void *arg) {
  am_worker *t = arg;
  const am_re_cfg *c = t->cfg;
  am_rng r;
  am_rng_seed(&r, c->c.seed, t->index);
  for (uint64_t round = 0; round < c->rounds; round++) {
    for (uint64_t i = 0; i < c->count; i++) {
      size_t target = am_size_uniform(&r, c->c.size_min, c->c.size_max);
      int doubling = c->mode == 2 ? (int)(i & 1) : c->mode;
      am_grow(t, &r, target, doubling);
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  am_baseline_exit(argc, argv, "realloc");
  const char *mode = am_arg_str(argc, argv, "mode", "mixed");
  am_re_cfg cfg = {
      .c = am_common_args(argc, argv, 1, 65536),
      .count = am_arg_u64(argc, argv, "count", 2000),
      .rounds = am_arg_u64(argc, argv, "rounds", 5),
      .mode = !strcmp(mode, "small") ? 0 : !strcmp(mode, "double") ? 1 : 2,
  };
  if (cfg.mode == 2 && strcmp(mode, "mixed") != 0) am_die("--mode must be small, double or mixed");
  am_live_init(cfg.c.threads);
  am_run_workers("realloc", cfg.c.threads, am_realloc_main, sizeof(am_worker), &cfg, cfg.c.release);
  return 0;
}
