// am_falseshare — does the allocator put different threads' objects on one
// cache line? (the cache-thrash and cache-scratch patterns)
//
// mode active:  each thread allocates its own small object and writes it over
//               and over; if objects of different threads share a line, the
//               writes bounce that line between cores.
// mode passive: the main thread allocates one small object per thread and
//               hands them out; each thread frees the one it got, allocates
//               its own and writes it over and over. An allocator that gives
//               the freed slot to another thread recreates the sharing.
// Per round each thread does `writes` writes; the object is freed at the end
// of the round. Reports writes per second and how many pairs of threads had
// objects on the same 64-byte line.
//
// usage: am_falseshare [--threads T] [--mode active|passive] [--size-min B]
//                      [--size-max B] [--writes W] [--rounds R] [--seed S]
//                      [--release 0|1] [--baseline 1]
#include "am_bench.h"

typedef struct am_fs_cfg {
  am_common c;
  uint64_t writes, rounds;
  int passive;
  pthread_barrier_t ready;  // all objects exist before anyone writes
  unsigned char **objects;  // per round: the object each thread writes
} am_fs_cfg;

typedef struct am_fs_thread {
  am_fs_cfg *cfg;
  uint64_t index, ops;
  unsigned char *handed;  // passive mode: the object the main thread gave us
} am_fs_thread;

static void am_fs_write(volatile unsigned char *p, size_t n, uint64_t writes) {
  for (uint64_t w = 0; w < writes; w++) p[w % n] = (unsigned char)w;
}

static void *am_falseshare_main(void *arg) {
  am_fs_thread *t = arg;
  am_fs_cfg *c = t->cfg;
  am_rng r;
  am_rng_seed(&r, c->c.seed, t->index);
  size_t n = am_size_uniform(&r, c->c.size_min, c->c.size_max);
  if (t->handed) {
    free(t->handed);
    t->ops++;
  }
  unsigned char *p = malloc(n);
  if (!p) am_die("malloc(%zu) failed", n);
  am_live_add(&am_live_slots[t->index], (int64_t)n);
  c->objects[t->index] = p;
  pthread_barrier_wait(&c->ready);
  am_live_sample(&am_live_slots[t->index]);
  am_fs_write(p, n, c->writes);
  pthread_barrier_wait(&c->ready);  // keep every object alive until all are done
  free(p);
  am_live_add(&am_live_slots[t->index], -(int64_t)n);
  t->ops += 2;
  return NULL;
}

static uint64_t am_shared_pairs(unsigned char **objs, uint64_t n) {
  uint64_t pairs = 0;
  for (uint64_t i = 0; i < n; i++)
    for (uint64_t j = i + 1; j < n; j++)
      pairs += ((uintptr_t)objs[i] >> 6) == ((uintptr_t)objs[j] >> 6);
  return pairs;
}

static void am_fs_round(am_fs_cfg *cfg, am_fs_thread *ts, uint64_t *pairs) {
  uint64_t n = cfg->c.threads;
  for (uint64_t i = 0; i < n; i++) {
    ts[i] = (am_fs_thread){.cfg = cfg, .index = i};
    if (cfg->passive) {
      ts[i].handed = malloc(cfg->c.size_max);
      if (!ts[i].handed) am_die("malloc failed");
      ts[i].ops++;
    }
  }
  am_run_threads_kept(n, am_falseshare_main, ts, sizeof *ts);
  *pairs += am_shared_pairs(cfg->objects, n);
}

int main(int argc, char **argv) {
  am_baseline_exit(argc, argv, "falseshare");
  const char *mode = am_arg_str(argc, argv, "mode", "active");
  am_fs_cfg cfg = {
      .c = am_common_args(argc, argv, 8, 8),
      .writes = am_arg_u64(argc, argv, "writes", 10000000),
      .rounds = am_arg_u64(argc, argv, "rounds", 5),
      .passive = strcmp(mode, "passive") == 0,
  };
  if (!cfg.passive && strcmp(mode, "active") != 0) am_die("--mode must be active or passive");
  if (cfg.c.size_min == 0) am_die("--size-min must be at least 1");
  uint64_t n = cfg.c.threads;
  am_live_init(n);
  cfg.objects = calloc(n, sizeof *cfg.objects);
  am_fs_thread *ts = calloc(n, sizeof *ts);
  if (!cfg.objects || !ts) am_die("out of memory");
  pthread_barrier_init(&cfg.ready, NULL, (unsigned)n);
  uint64_t pairs = 0, ops = 0;
  const char *release_fn;
  double t0 = am_now();
  for (uint64_t round = 0; round < cfg.rounds; round++) {
    am_fs_round(&cfg, ts, &pairs);
    for (uint64_t i = 0; i < n; i++) ops += ts[i].ops;
  }
  double secs = am_stop(t0, cfg.c.release, &release_fn);
  pthread_barrier_destroy(&cfg.ready);
  free(ts);
  free(cfg.objects);
  uint64_t writes = cfg.writes * n * cfg.rounds;
  am_result r;
  am_result_standard(&r, "falseshare", ops, secs, n, release_fn);
  am_result_u64(&r, "writes", writes);
  am_result_f64(&r, "writes_per_s", secs > 0 ? (double)writes / secs : 0.0);
  am_result_u64(&r, "same_line_pairs", pairs);
  am_result_emit(&r);
  return 0;
}
