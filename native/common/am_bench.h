// am_bench.h — shared helpers for allocmark's native workloads.
//
// Every workload is one .c file that includes this header: a seeded PRNG,
// size distributions, timing, page touching, argument parsing and the JSON
// metrics record written to the file descriptor named in AM_RESULT_FD.
#ifndef AM_BENCH_H
#define AM_BENCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "am_stats.h"

#define AM_PAGE 4096u
#define AM_RESULT_VERSION 2

// ---------------------------------------------------------------------------
// PRNG: xoshiro256** seeded through splitmix64, so that the same seed gives
// the same request sequence under every allocator.
// ---------------------------------------------------------------------------
typedef struct am_rng {
  uint64_t s[4];
} am_rng;

static inline uint64_t am_splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static inline void am_rng_seed(am_rng *r, uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL);
  for (int i = 0; i < 4; i++) r->s[i] = am_splitmix64(&x);
}

static inline uint64_t am_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t am_rng_next(am_rng *r) {
  uint64_t *s = r->s;
  uint64_t result = am_rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = am_rotl(s[3], 45);
  return result;
}

// Uniform in [0, n) by multiply-shift (Lemire); bias is negligible for n << 2^64.
static inline uint64_t am_rng_below(am_rng *r, uint64_t n) {
  return (uint64_t)(((unsigned __int128)am_rng_next(r) * n) >> 64);
}

// Uniform size in [lo, hi].
static inline size_t am_size_uniform(am_rng *r, size_t lo, size_t hi) {
  return lo + (size_t)am_rng_below(r, (uint64_t)(hi - lo) + 1);
}

// ---------------------------------------------------------------------------
// Time and memory touching
// ---------------------------------------------------------------------------
static inline double am_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// Write one byte per page plus the first and last byte, so that RSS reflects
// what was allocated; the pattern is checked again before the block is freed.
static inline void am_touch(void *p, size_t n, unsigned char tag) {
  unsigned char *b = (unsigned char *)p;
  if (n == 0) return;
  for (size_t i = 0; i < n; i += AM_PAGE) b[i] = tag;
  b[n - 1] = tag;
}

static inline int am_touch_ok(const void *p, size_t n, unsigned char tag) {
  const unsigned char *b = (const unsigned char *)p;
  return n == 0 || (b[0] == tag && b[n - 1] == tag);
}

// ---------------------------------------------------------------------------
// Errors and arguments: `--name value` pairs, each looked up by name.
// ---------------------------------------------------------------------------
// _exit, not exit: a worker thread may die while others still run, and exit's
// handlers tearing the process down under them could crash it (a signal, not 2).
static inline void am_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("allocmark workload: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  fflush(stderr);
  _exit(2);
}

static inline const char *am_arg_str(int argc, char **argv, const char *name, const char *dflt) {
  for (int i = 1; i + 1 < argc; i++)
    if (argv[i][0] == '-' && argv[i][1] == '-' && strcmp(argv[i] + 2, name) == 0) return argv[i + 1];
  return dflt;
}

static inline uint64_t am_arg_u64(int argc, char **argv, const char *name, uint64_t dflt) {
  for (int i = 1; i + 1 < argc; i++) {
    if (argv[i][0] == '-' && argv[i][1] == '-' && strcmp(argv[i] + 2, name) == 0) {
      char *end = NULL;
      errno = 0;
      unsigned long long v = strtoull(argv[i + 1], &end, 10);
      if (errno != 0 || end == argv[i + 1] || *end != '\0' || argv[i + 1][0] == '-')
        am_die("--%s expects a non-negative integer, got '%s'", name, argv[i + 1]);
      return (uint64_t)v;
    }
  }
  return dflt;
}

// ---------------------------------------------------------------------------
// Result record: one JSON object on the fd named by AM_RESULT_FD (stdout when
// unset, so a workload can be run by hand). Keys are added one by one.
// ---------------------------------------------------------------------------
typedef struct am_result {
  char buf[8192];
  size_t len;
} am_result;

static inline void am_result_add(am_result *r, const char *fmt, ...) {
  if (r->len >= sizeof r->buf) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(r->buf + r->len, sizeof r->buf - r->len, fmt, ap);
  va_end(ap);
  if (n > 0) r->len += (size_t)n;
}

static inline void am_result_begin(am_result *r, const char *workload) {
  r->len = 0;
  am_result_add(r, "{\"am\": \"result\", \"v\": %d, \"workload\": \"%s\"", AM_RESULT_VERSION,
                workload);
}

static inline void am_result_u64(am_result *r, const char *key, uint64_t v) {
  am_result_add(r, ", \"%s\": %" PRIu64, key, v);
}

static inline void am_result_f64(am_result *r, const char *key, double v) {
  am_result_add(r, ", \"%s\": %.9g", key, v);
}

// Adds a string value; bytes that need escaping in JSON are replaced by '?'.
static inline void am_result_str(am_result *r, const char *key, const char *v) {
  am_result_add(r, ", \"%s\": \"", key);
  for (const char *c = v; *c && r->len + 2 < sizeof r->buf; c++)
    r->buf[r->len++] = (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) ? '?' : *c;
  am_result_add(r, "\"");
}

// Which shared object serves malloc in this process: lets allocmark check
// every single run, not only the allocator's first one.
static inline void am_result_malloc_object(am_result *r) {
  Dl_info info;
  void *sym = dlsym(RTLD_DEFAULT, "malloc");
  const char *obj = (sym && dladdr(sym, &info) && info.dli_fname) ? info.dli_fname : "";
  am_result_str(r, "malloc_object", obj);
}

static inline void am_result_emit(am_result *r) {
  am_result_add(r, "}\n");
  const char *fd_s = getenv("AM_RESULT_FD");
  int fd = fd_s ? atoi(fd_s) : STDOUT_FILENO;
  size_t off = 0;
  while (off < r->len) {
    ssize_t n = write(fd, r->buf + off, r->len - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) am_die("cannot write result to fd %d: %s", fd, strerror(errno));
    off += (size_t)n;
  }
}

// ---------------------------------------------------------------------------
// Options every workload shares.
// ---------------------------------------------------------------------------
typedef struct am_common {
  uint64_t threads, seed, size_min, size_max, release;
} am_common;

static uint64_t am_idle_ms;  // --idle-ms: see am_result_idle

static inline am_common am_common_args(int argc, char **argv, uint64_t size_min, uint64_t size_max) {
  am_common c = {
      .threads = am_arg_u64(argc, argv, "threads", 1),
      .seed = am_arg_u64(argc, argv, "seed", 42),
      .size_min = am_arg_u64(argc, argv, "size-min", size_min),
      .size_max = am_arg_u64(argc, argv, "size-max", size_max),
      .release = am_arg_u64(argc, argv, "release", 0),
  };
  am_idle_ms = am_arg_u64(argc, argv, "idle-ms", 0);
  if (am_idle_ms > 600000) am_die("--idle-ms must be at most 600000 (10 minutes)");
  if (c.size_min > c.size_max) am_die("--size-min must not exceed --size-max");
  if (c.threads == 0 || c.threads > 1024) am_die("--threads must be in 1..1024");
  return c;
}

// ---------------------------------------------------------------------------
// Live requested bytes. Each logical worker owns one cache-line-sized slot, so
// counting never contends. With one worker the peak is exact; with several,
// a worker adds up all slots (relaxed loads) every 256 updates and after every
// allocation of 64 KiB or more (whose page touching dwarfs the cost), so the
// peak is sampled and may miss short spikes of small blocks.
// ---------------------------------------------------------------------------
#define AM_MAX_WORKERS 1024
typedef struct am_live {
  _Alignas(64) int64_t bytes;
  int64_t peak;
  uint64_t tick;
} am_live;

static am_live am_live_slots[AM_MAX_WORKERS];
static uint64_t am_live_workers = 1;

static inline void am_live_init(uint64_t workers) {
  if (workers > AM_MAX_WORKERS) am_die("at most %d workers", AM_MAX_WORKERS);
  am_live_workers = workers;
}

static inline int64_t am_live_total(void) {
  int64_t sum = 0;
  for (uint64_t i = 0; i < am_live_workers; i++)
    sum += __atomic_load_n(&am_live_slots[i].bytes, __ATOMIC_RELAXED);
  return sum;
}

// Fold the current total into this worker's peak; workloads call it where all
// their blocks are known to be live (e.g. after a barrier).
static inline void am_live_sample(am_live *s) {
  int64_t total = am_live_total();
  if (total > s->peak) s->peak = total;
}

static inline void am_live_add(am_live *s, int64_t delta) {
  int64_t v = s->bytes + delta;
  __atomic_store_n(&s->bytes, v, __ATOMIC_RELAXED);
  if (am_live_workers == 1) {
    if (v > s->peak) s->peak = v;
  } else if ((++s->tick & 255) == 0 || delta >= 65536) {
    am_live_sample(s);
  }
}

static inline uint64_t am_live_peak(void) {
  int64_t peak = am_live_total();
  for (uint64_t i = 0; i < am_live_workers; i++)
    if (am_live_slots[i].peak > peak) peak = am_live_slots[i].peak;
  return peak > 0 ? (uint64_t)peak : 0;
}

// ---------------------------------------------------------------------------
// Threads: start n workers on `fn`, each with its own argument, and join them.
// ---------------------------------------------------------------------------
static inline void am_run_threads(uint64_t n, void *(*fn)(void *), void *args, size_t stride) {
  pthread_t *tids = calloc(n, sizeof *tids);
  if (!tids) am_die("out of memory for %" PRIu64 " threads", n);
  for (uint64_t i = 0; i < n; i++)
    if (pthread_create(&tids[i], NULL, fn, (char *)args + i * stride) != 0)
      am_die("pthread_create failed");
  for (uint64_t i = 0; i < n; i++) pthread_join(tids[i], NULL);
  free(tids);
}

// The same, but the workers stay alive, parked, until the process exits: a
// program's threads outlive its work, and some allocators give a thread's
// memory back when the thread ends (jemalloc purges an arena its last thread
// leaves), which would hide what they keep while the program idles.
typedef struct am_kept {
  void *(*fn)(void *);
  void *arg;
} am_kept;

static pthread_mutex_t am_kept_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t am_kept_done = PTHREAD_COND_INITIALIZER;
static uint64_t am_kept_finished;

static inline void *am_kept_main(void *arg) {
  const am_kept *k = arg;
  k->fn(k->arg);
  pthread_mutex_lock(&am_kept_lock);
  am_kept_finished++;
  pthread_cond_broadcast(&am_kept_done);
  pthread_mutex_unlock(&am_kept_lock);
  for (;;) pause();
  return NULL;
}

static inline void am_run_threads_kept(uint64_t n, void *(*fn)(void *), void *args,
                                       size_t stride) {
  am_kept *kept = calloc(n, sizeof *kept);  // read by the parked threads: never freed
  if (!kept) am_die("out of memory for %" PRIu64 " threads", n);
  pthread_mutex_lock(&am_kept_lock);
  uint64_t target = am_kept_finished + n;
  pthread_mutex_unlock(&am_kept_lock);
  for (uint64_t i = 0; i < n; i++) {
    kept[i] = (am_kept){fn, (char *)args + i * stride};
    pthread_t tid;
    if (pthread_create(&tid, NULL, am_kept_main, &kept[i]) != 0) am_die("pthread_create failed");
    pthread_detach(tid);
  }
  pthread_mutex_lock(&am_kept_lock);
  while (am_kept_finished < target) pthread_cond_wait(&am_kept_done, &am_kept_lock);
  pthread_mutex_unlock(&am_kept_lock);
}

// ---------------------------------------------------------------------------
// Giving memory back at the end of a run: the allocator's own call, looked up
// with dlsym and used only if it lives in the object that serves malloc (so
// glibc's malloc_trim is never called on another allocator's heap).
// ---------------------------------------------------------------------------
static inline const char *am_object_of(void *sym) {
  Dl_info info;
  return (sym && dladdr(sym, &info) && info.dli_fname) ? info.dli_fname : "";
}

typedef void (*am_mi_collect_fn)(int);
typedef void (*am_void_fn)(void);
typedef int (*am_trim_fn)(size_t);

typedef const char *(*am_release_fn)(void);

static inline const char *am_release(void) {
  const char *obj = am_object_of(dlsym(RTLD_DEFAULT, "malloc"));
  void *sym;
  if ((sym = am_stats_sym(obj, "mi_collect"))) {
    ((am_mi_collect_fn)sym)(1);
    return "mi_collect";
  }
  // Libraries built by `allocmark alloc build` name the call they made.
  if ((sym = am_stats_sym(obj, "am_allocator_release"))) {
    const char *used = ((am_release_fn)sym)();
    if (used) return used;
  }
  if ((sym = am_stats_sym(obj, "mallctl"))) {
    // 4096 is MALLCTL_ARENAS_ALL: purge every arena.
    ((am_mallctl_t)sym)("arena.4096.purge", NULL, NULL, NULL, 0);
    return "mallctl(arena.4096.purge)";
  }
  if ((sym = am_stats_sym(obj, "MallocExtension_ReleaseFreeMemory"))) {
    ((am_void_fn)sym)();
    return "MallocExtension_ReleaseFreeMemory";
  }
  if ((sym = am_stats_sym(obj, "malloc_trim"))) {
    ((am_trim_fn)sym)(0);
    return "malloc_trim";
  }
  return "none";
}

// ---------------------------------------------------------------------------
// /proc/self/status fields (VmRSS, VmHWM) in KiB, read without stdio.
// ---------------------------------------------------------------------------
static inline uint64_t am_status_kib(const char *field) {
  char buf[4096];
  int fd = open("/proc/self/status", O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char *at = strstr(buf, field);
  return at ? strtoull(at + strlen(field), NULL, 10) : 0;
}

// ---------------------------------------------------------------------------
// The transparent huge pages the process holds now (0 where the kernel does not
// say). open/read, not stdio: stdio would allocate with the allocator under test.
static inline uint64_t am_anon_huge_kib(void) {
  char buf[4096];
  int fd = open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char *p = strstr(buf, "AnonHugePages:");
  return p ? strtoull(p + 14, NULL, 10) : 0;
}

// ---------------------------------------------------------------------------
// After the work: what the allocator keeps and how fast it gives memory back.
// Every block is freed by now; the RSS is read at once, and with --idle-ms the
// process then sleeps (no allocator call: only a background thread or a timer
// of the allocator's own can return memory), reading RSS at 100 ms, 1 s and at
// the end of the idle time.
// ---------------------------------------------------------------------------
static inline void am_sleep_until(double t) {
  double left = t - am_now();
  if (left <= 0) return;
  struct timespec ts = {.tv_sec = (time_t)left, .tv_nsec = (long)((left - (double)(time_t)left) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static inline void am_result_idle(am_result *r) {
  double t0 = am_now();
  am_result_u64(r, "live_bytes_end", (uint64_t)(am_live_total() > 0 ? am_live_total() : 0));
  am_result_u64(r, "rss_end_kib", am_status_kib("VmRSS:"));
  if (am_idle_ms == 0) return;
  static const struct { uint64_t ms; const char *key; } marks[] = {
      {100, "rss_idle_100ms_kib"}, {1000, "rss_idle_1s_kib"}};
  for (size_t i = 0; i < sizeof marks / sizeof marks[0] && marks[i].ms <= am_idle_ms; i++) {
    am_sleep_until(t0 + (double)marks[i].ms / 1000);
    am_result_u64(r, marks[i].key, am_status_kib("VmRSS:"));
  }
  am_sleep_until(t0 + (double)am_idle_ms / 1000);
  am_result_u64(r, "rss_idle_end_kib", am_status_kib("VmRSS:"));
  am_result_u64(r, "idle_ms", am_idle_ms);
}

// The allocator's own statistics (am_stats.h) as the run ends, beside the RSS
// read at the same moment: what that RSS is made of.
static inline void am_result_stats(am_result *r) {
  const char *object = am_object_of(dlsym(RTLD_DEFAULT, "malloc"));
  am_stats s = am_stats_read(object);
  am_result_str(r, "alloc_stats", s.source);
  if (!strcmp(s.source, "none")) return;
  am_result_u64(r, "alloc_rss_kib", am_status_kib("VmRSS:"));
  am_stats_arenas(object, &s);
  const struct { const char *key; long long v; } fields[] = {
      {"alloc_live_kib", s.live},         {"alloc_held_kib", s.held},
      {"alloc_metadata_kib", s.metadata}, {"alloc_released_kib", s.released},
      {"alloc_mapped_kib", s.mapped},     {"alloc_committed_kib", s.committed},
      {"alloc_dirty_kib", s.dirty},       {"alloc_cached_kib", s.cached}};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (fields[i].v >= 0) am_result_u64(r, fields[i].key, (uint64_t)fields[i].v >> 10);
  if (s.arenas >= 0) am_result_u64(r, "alloc_arenas", (uint64_t)s.arenas);
}

// The standard record: every workload reports these, then its own extras.
// `--baseline 1` makes a workload report zero operations before allocating
// anything, so allocmark can measure the allocator's baseline RSS.
// ---------------------------------------------------------------------------
static inline void am_result_standard(am_result *r, const char *workload, uint64_t ops,
                                      double secs, uint64_t threads, const char *release_fn) {
  am_result_begin(r, workload);
  am_result_u64(r, "ops", ops);
  am_result_f64(r, "seconds", secs);
  am_result_f64(r, "ops_per_s", secs > 0 ? (double)ops / secs : 0.0);
  am_result_u64(r, "peak_requested_bytes", am_live_peak());
  am_result_u64(r, "threads", threads);
  am_result_u64(r, "anon_huge_kib", am_anon_huge_kib());
  am_result_str(r, "release_fn", release_fn);
  am_result_malloc_object(r);
  am_result_idle(r);
  am_result_stats(r);
}

static inline void am_baseline_exit(int argc, char **argv, const char *workload) {
  if (!am_arg_u64(argc, argv, "baseline", 0)) return;
  am_result r;
  am_result_standard(&r, workload, 0, 0.0, 0, "none");
  am_result_emit(&r);
  exit(0);
}

// Stop the clock: give memory back first when asked, as part of the run.
static inline double am_stop(double t0, uint64_t release, const char **release_fn) {
  *release_fn = release ? am_release() : "none";
  return am_now() - t0;
}

// ---------------------------------------------------------------------------
// Workloads made of n identical workers: each worker's struct starts with an
// am_worker. am_run_workers starts them, times them (release included), checks
// for corruption and writes the standard record.
// ---------------------------------------------------------------------------
typedef struct am_worker {
  const void *cfg;
  uint64_t index, ops;
  int corrupt;
} am_worker;

static inline void am_run_workers(const char *workload, uint64_t n, void *(*fn)(void *),
                                  size_t stride, const void *cfg, uint64_t release) {
  char *ws = calloc(n, stride);
  if (!ws) am_die("out of memory for %" PRIu64 " workers", n);
  for (uint64_t i = 0; i < n; i++) {
    am_worker *w = (am_worker *)(ws + i * stride);
    w->cfg = cfg;
    w->index = i;
  }
  const char *release_fn;
  double t0 = am_now();
  am_run_threads_kept(n, fn, ws, stride);
  double secs = am_stop(t0, release, &release_fn);
  uint64_t ops = 0;
  int corrupt = 0;
  for (uint64_t i = 0; i < n; i++) {
    const am_worker *w = (const am_worker *)(ws + i * stride);
    ops += w->ops;
    corrupt |= w->corrupt;
  }
  free(ws);
  if (corrupt) am_die("memory corruption: a block's contents changed before it was freed");
  am_result r;
  am_result_standard(&r, workload, ops, secs, n, release_fn);
  am_result_emit(&r);
}

#endif  // AM_BENCH_H
