// am_blowup — memory freed by one thread but needed by another (Hoard's blowup).
//
// T producer/consumer pairs run in phases. Per round, each producer allocates
// a batch of `batch` blocks of random size and hands the whole batch to its
// consumer, which frees it while the producer allocates the next one. Live
// bytes never exceed two batches per pair; an allocator that keeps freed
// memory in the consumer's private heap, out of the producer's reach, grows
// without bound. Reports peak RSS (VmHWM) against peak live bytes.
//
// usage: am_blowup [--threads T] [--batch N] [--rounds R] [--size-min B]
//                  [--size-max B] [--seed S] [--release 0|1] [--baseline 1]
#include "am_bench.h"

typedef struct am_bu_pair {
  const am_common *c;
  uint64_t index, batch, rounds;
  pthread_mutex_t lock;  // guards the hand-off only, once per batch
  pthread_cond_t changed;
  unsigned char **full;  // the batch waiting for the consumer, or NULL
  size_t *full_sizes;
  int done;
} am_bu_pair;

static void am_bu_handoff(am_bu_pair *q, unsigned char **blocks, size_t *sizes) {
  pthread_mutex_lock(&q->lock);
  while (q->full) pthread_cond_wait(&q->changed, &q->lock);
  q->full = blocks;
  q->full_sizes = sizes;
  pthread_cond_broadcast(&q->changed);
  pthread_mutex_unlock(&q->lock);
}

static void *am_bu_producer(void *arg) {
  am_bu_pair *q = arg;
  am_rng r;
  am_rng_seed(&r, q->c->seed, q->index);
  am_live *live = &am_live_slots[2 * q->index];
  for (uint64_t round = 0; round < q->rounds; round++) {
    unsigned char **blocks = calloc(q->batch, sizeof *blocks);
    size_t *sizes = calloc(q->batch, sizeof *sizes);
    if (!blocks || !sizes) am_die("out of memory");
    for (uint64_t i = 0; i < q->batch; i++) {
      sizes[i] = am_size_uniform(&r, q->c->size_min, q->c->size_max);
      blocks[i] = malloc(sizes[i]);
      if (!blocks[i] && sizes[i]) am_die("malloc(%zu) failed", sizes[i]);
      am_touch(blocks[i], sizes[i], 0x3c);
      am_live_add(live, (int64_t)sizes[i]);
    }
    am_bu_handoff(q, blocks, sizes);
  }
  pthread_mutex_lock(&q->lock);
  q->done = 1;
  pthread_cond_broadcast(&q->changed);
  pthread_mutex_unlock(&q->lock);
  return NULL;
}

static unsigned char **am_bu_take(am_bu_pair *q, size_t **sizes) {
  pthread_mutex_lock(&q->lock);
  while (!q->full && !q->done) pthread_cond_wait(&q->changed, &q->lock);
  unsigned char **blocks = q->full;
  *sizes = q->full_sizes;
  q->full = NULL;
  pthread_cond_broadcast(&q->changed);
  pthread_mutex_unlock(&q->lock);
  return blocks;
}

static void *am_bu_consumer(void *arg) {
  am_bu_pair *q = arg;
  am_live *live = &am_live_slots[2 * q->index + 1];
  size_t *sizes;
  unsigned char **blocks;
  while ((blocks = am_bu_take(q, &sizes)) != NULL) {
    for (uint64_t i = 0; i < q->batch; i++) {
      free(blocks[i]);
      am_live_add(live, -(int64_t)sizes[i]);
    }
    free(blocks);
    free(sizes);
  }
  return NULL;
}

static void *am_bu_pair_main(void *arg) {
  pthread_t consumer;
  if (pthread_create(&consumer, NULL, am_bu_consumer, arg) != 0) am_die("pthread_create failed");
  am_bu_producer(arg);
  pthread_join(consumer, NULL);
  return NULL;
}

int main(int argc, char **argv) {
  am_baseline_exit(argc, argv, "blowup");
  am_common c = am_common_args(argc, argv, 16, 4096);
  uint64_t batch = am_arg_u64(argc, argv, "batch", 10000);
  uint64_t rounds = am_arg_u64(argc, argv, "rounds", 100);
  if (batch == 0) am_die("--batch must be > 0");
  if (c.threads > AM_MAX_WORKERS / 2) am_die("--threads must be at most %d", AM_MAX_WORKERS / 2);
  am_live_init(2 * c.threads);
  am_bu_pair *pairs = calloc(c.threads, sizeof *pairs);
  if (!pairs) am_die("out of memory");
  for (uint64_t i = 0; i < c.threads; i++) {
    pairs[i] = (am_bu_pair){.c = &c, .index = i, .batch = batch, .rounds = rounds};
    pthread_mutex_init(&pairs[i].lock, NULL);
    pthread_cond_init(&pairs[i].changed, NULL);
  }
  uint64_t rss0 = am_status_kib("VmRSS:");
  const char *release_fn;
  double t0 = am_now();
  am_run_threads_kept(c.threads, am_bu_pair_main, pairs, sizeof *pairs);
  double secs = am_stop(t0, c.release, &release_fn);
  uint64_t hwm = am_status_kib("VmHWM:"), rss_end = am_status_kib("VmRSS:");
  free(pairs);
  uint64_t peak = am_live_peak();
  am_result r;
  am_result_standard(&r, "blowup", 2 * batch * rounds * c.threads, secs, 2 * c.threads,
                     release_fn);
  am_result_u64(&r, "rss_start_kib", rss0);
  am_result_u64(&r, "rss_peak_kib", hwm);
  am_result_u64(&r, "rss_end_kib", rss_end);
  am_result_f64(&r, "blowup", peak ? (double)(hwm - rss0) * 1024.0 / (double)peak : 0.0);
  am_result_emit(&r);
  return 0;
}
