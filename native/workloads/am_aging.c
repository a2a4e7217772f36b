// am_aging — a long-running program whose size distribution shifts in phases.
//
// Live data is held near --live-mib in two pools: transient blocks, replaced
// all the time, and survivors, which outlive the phase that made them. Phase p
// allocates from distribution p mod 3: small (16-256 B), large (2-32 KiB),
// then mixed (16 B - 32 KiB, log-uniform). Each phase makes --ops allocations
// into the transient pool (freeing a random block whenever the pool is over its
// share), then promotes a slice of the transient pool to survivors, freeing
// random older survivors to stay within their share. Live bytes therefore stay
// flat from phase to phase while old survivors pin memory of other sizes: an
// allocator that reuses that memory plateaus, one that fragments grows.
//
// At the end of each phase it records the live requested bytes and the RSS
// (phase_NN_live_kib, phase_NN_rss_kib); at the end it frees everything.
//
// usage: am_aging [--phases N] [--ops N] [--live-mib M] [--survivors-pct P]
//                 [--seed S] [--release 0|1] [--idle-ms MS] [--baseline 1]
#include "am_bench.h"  // first: it defines _GNU_SOURCE

#include <sys/mman.h>

#define AM_MAX_PHASES 64

typedef struct am_block {
  unsigned char *p;
  uint32_t n;
  uint32_t tag;
} am_block;

// A pool of blocks; its array is mmap'ed, never from the allocator under test.
typedef struct am_pool {
  am_block *b;
  uint64_t count, cap, bytes;
} am_pool;

static am_pool am_pool_make(uint64_t cap) {
  void *m = mmap(NULL, cap * sizeof(am_block), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) am_die("cannot map room for %" PRIu64 " blocks", cap);
  return (am_pool){.b = m, .cap = cap};
}

static size_t am_phase_size(am_rng *r, uint64_t phase) {
  switch (phase % 3) {
    case 0: return am_size_uniform(r, 16, 256);
    case 1: return am_size_uniform(r, 2048, 32768);
    default: {  // log-uniform: 2^4 .. 2^15
      unsigned k = 4 + (unsigned)am_rng_below(r, 11);
      return am_size_uniform(r, (size_t)1 << k, ((size_t)2 << k) - 1);
    }
  }
}

static int am_corrupt;

static void am_put(am_pool *pool, am_block blk) {
  if (pool->count == pool->cap) am_die("more than %" PRIu64 " live blocks", pool->cap);
  pool->b[pool->count++] = blk;
  pool->bytes += blk.n;
}

// Removes block i (the last one moves into its place) and returns it.
static am_block am_take(am_pool *pool, uint64_t i) {
  am_block blk = pool->b[i];
  pool->b[i] = pool->b[--pool->count];
  pool->bytes -= blk.n;
  return blk;
}

static void am_release_block(am_block blk) {
  if (!am_touch_ok(blk.p, blk.n, (unsigned char)blk.tag)) am_corrupt = 1;
  free(blk.p);
  am_live_add(&am_live_slots[0], -(int64_t)blk.n);
}

static am_block am_new_block(am_rng *r, uint64_t phase) {
  am_block blk = {.n = (uint32_t)am_phase_size(r, phase), .tag = (uint32_t)am_rng_below(r, 255) + 1};
  blk.p = malloc(blk.n);
  if (blk.p == NULL) am_die("malloc(%u) failed", blk.n);
  am_touch(blk.p, blk.n, (unsigned char)blk.tag);
  am_live_add(&am_live_slots[0], (int64_t)blk.n);
  return blk;
}

int main(int argc, char **argv) {
  am_baseline_exit(argc, argv, "aging");
  am_common c = am_common_args(argc, argv, 16, 32768);
  uint64_t phases = am_arg_u64(argc, argv, "phases", 12);
  uint64_t ops = am_arg_u64(argc, argv, "ops", 300000);
  uint64_t live = am_arg_u64(argc, argv, "live-mib", 32) << 20;
  uint64_t survivors_pct = am_arg_u64(argc, argv, "survivors-pct", 30);
  if (phases == 0 || phases > AM_MAX_PHASES) am_die("--phases must be in 1..%d", AM_MAX_PHASES);
  if (live == 0 || live > (64ull << 30)) am_die("--live-mib must be in 1..65536");
  if (survivors_pct > 90) am_die("--survivors-pct must be at most 90");
  am_live_init(1);
  uint64_t survivor_share = live * survivors_pct / 100, transient_share = live - survivor_share;
  am_pool transient = am_pool_make(live / 16 + 1024), survivors = am_pool_make(live / 16 + 1024);
  am_rng r;
  am_rng_seed(&r, c.seed, 0);
  uint64_t live_kib[AM_MAX_PHASES], rss_kib[AM_MAX_PHASES], allocs = 0;
  double t0 = am_now();
  for (uint64_t p = 0; p < phases; p++) {
    for (uint64_t i = 0; i < ops; i++) {
      while (transient.bytes >= transient_share && transient.count > 0)
        am_release_block(am_take(&transient, am_rng_below(&r, transient.count)));
      am_put(&transient, am_new_block(&r, p));
      allocs++;
    }
    // A third of the survivors' share is renewed from this phase's blocks.
    for (uint64_t moved = 0; moved < survivor_share / 3 && transient.count > 0;) {
      am_block blk = am_take(&transient, am_rng_below(&r, transient.count));
      moved += blk.n;
      am_put(&survivors, blk);
    }
    while (survivors.bytes > survivor_share && survivors.count > 0)
      am_release_block(am_take(&survivors, am_rng_below(&r, survivors.count)));
    live_kib[p] = (transient.bytes + survivors.bytes) >> 10;
    rss_kib[p] = am_status_kib("VmRSS:");
  }
  while (transient.count > 0) am_release_block(am_take(&transient, transient.count - 1));
  while (survivors.count > 0) am_release_block(am_take(&survivors, survivors.count - 1));
  const char *release_fn;
  double secs = am_stop(t0, c.release, &release_fn);
  if (am_corrupt) am_die("memory corruption: a block's contents changed before it was freed");
  am_result res;
  am_result_standard(&res, "aging", 2 * allocs, secs, 1, release_fn);
  am_result_u64(&res, "phases", phases);
  char key[32];
  for (uint64_t p = 0; p < phases; p++) {
    snprintf(key, sizeof key, "phase_%02" PRIu64 "_live_kib", p + 1);
    am_result_u64(&res, key, live_kib[p]);
    snprintf(key, sizeof key, "phase_%02" PRIu64 "_rss_kib", p + 1);
    am_result_u64(&res, key, rss_kib[p]);
  }
  am_result_emit(&res);
  return 0;
}
