// libamprof.so — allocmark's profiler: what does the allocator do inside a program?
//
// Preloaded in front of the allocator under test
// (LD_PRELOAD="libamprof.so <allocator>.so"), it forwards every call of the
// allocation API to the next definition (dlsym RTLD_NEXT) and counts, per API:
// calls, requested bytes, a power-of-two size histogram; for one call in
// AM_PROF_SAMPLE (default 64: rdtsc costs ~11 ns in a VM) the TSC cycles tight
// around the real call only,
// in a log-scale histogram (4 buckets per power of two). malloc, calloc,
// realloc and the aligned family are split into "new" (the address was never
// returned before in this process) and "reuse". A "shadow" of one byte per
// 8-byte granule of address space keeps that bit and the block's requested
// size (so that a free knows how many requested bytes it gives back): a byte
// or two per call, and an eighth of the heap's span in memory. Usable sizes
// (malloc_usable_size) are asked on sampled calls only, which is where the
// internal fragmentation estimate comes from.
//
// mmap, munmap, mremap, madvise, mprotect, brk and sbrk are counted (calls,
// bytes, cycles) inside and outside allocator calls; pthread_mutex_lock,
// trylock and unlock inside allocator calls (acquisitions, contended ones and
// their wait cycles). Only calls through the PLT are visible: glibc's malloc
// makes its mmaps and takes its arena locks inside libc, unseen.
//
// Nothing on the hot path allocates, locks or makes a system call: counters are
// thread-local (initial-exec TLS) and merged into the totals when the thread
// ends (a pthread key destructor, and pthread_exit explicitly), when the
// process exits, or before fork. A fork's child starts from zero. At exit the
// record (text, first line "am_prof 1") is appended to the file named by
// AM_PROF_OUT under an flock; Python (profile.py) interprets it.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#define AM_PROF_VERSION 1
#define AM_LIKELY(x) __builtin_expect(!!(x), 1)
#define AM_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define AM_EXPORT __attribute__((visibility("default")))
#define AM_TLS __thread __attribute__((tls_model("initial-exec")))

// ---------------------------------------------------------------------------
// What is counted
// ---------------------------------------------------------------------------
enum { AM_MALLOC, AM_CALLOC, AM_REALLOC, AM_REALLOCARRAY, AM_FREE, AM_POSIX_MEMALIGN,
       AM_ALIGNED_ALLOC, AM_MEMALIGN, AM_VALLOC, AM_PVALLOC, AM_USABLE_SIZE, AM_API_N };
static const char *const am_api_names[AM_API_N] = {
    "malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign",
    "aligned_alloc", "memalign", "valloc", "pvalloc", "malloc_usable_size"};

// Paths whose cycles are kept apart: malloc is split by new and reuse.
enum { AM_P_MALLOC_NEW, AM_P_MALLOC_REUSE, AM_P_CALLOC, AM_P_REALLOC, AM_P_FREE, AM_P_ALIGNED,
       AM_P_USABLE, AM_PATH_N };
static const char *const am_path_names[AM_PATH_N] = {
    "malloc_new", "malloc_reuse", "calloc", "realloc", "free", "aligned", "usable_size"};

enum { AM_MMAP, AM_MUNMAP, AM_MREMAP, AM_MADVISE, AM_MPROTECT, AM_BRK, AM_SBRK, AM_SYS_N };
static const char *const am_sys_names[AM_SYS_N] = {"mmap",     "munmap", "mremap", "madvise",
                                                   "mprotect", "brk",    "sbrk"};

#define AM_SIZE_BUCKETS 48  // bucket k: sizes in [2^(k-1), 2^k); 0 holds size 0
#define AM_HIST 256         // cycles: 4 buckets per power of two
#define AM_MAX_THREADS 256  // threads listed one by one; later ones only in the totals

typedef struct {
  uint64_t calls[AM_API_N], bytes[AM_API_N], fresh[AM_API_N], reused[AM_API_N];
  uint64_t sizes[AM_API_N][AM_SIZE_BUCKETS];
  uint64_t samples[AM_PATH_N], cycles[AM_PATH_N];
  uint64_t hist[AM_PATH_N][AM_HIST];
  uint64_t sys_calls[AM_SYS_N][2], sys_cycles[AM_SYS_N][2], sys_bytes[AM_SYS_N][2];
  uint64_t lock_calls, lock_contended, lock_wait, try_calls, try_failed, unlock_calls;
  uint64_t sampled_req, sampled_usable;  // sampled allocations: internal fragmentation
  uint64_t large_frees;  // frees of blocks >= 15 KiB: requested size known within 1/64
  uint64_t unknown_frees;  // frees of blocks without a shadow byte (shadow exhausted)
} am_counts;

// A thread's counters. The first cache line holds all that malloc and free
// touch besides the size bucket: the heap streams through L1, and counters
// spread over many lines would be fetched again from L2 on every call.
typedef struct {
  int depth;  // > 0 inside a call to the allocator
  int state;  // 0 new, 1 registered (key set), 2 flushed
  uint32_t countdown;
  int slot;  // 1 + its index in am_living, 0 if not listed, -1 if the list was full
  int64_t live_delta;  // live requested bytes not yet added to the totals
  uint64_t malloc_calls, malloc_bytes, malloc_fresh, malloc_reused, free_calls;
  am_counts c;  // everything else
  uint64_t start_tsc;
  uint64_t tid;
} __attribute__((aligned(64))) am_thread;

static AM_TLS am_thread am_me;

// Threads that have counters and have not ended: merged at process exit, so
// that threads which never end (a runtime's thread cache, a pool) are counted.
#define AM_LIVING 4096
static _Atomic(am_thread *) am_living[AM_LIVING];
static _Atomic uint64_t am_unlisted;

typedef struct {
  uint64_t tid, cycles, alloc_cycles;
} am_thread_line;

static struct {
  am_counts c;  // merged thread counts
  pthread_mutex_t lock;  // merging (thread exit, process exit, fork) only
  am_thread_line threads[AM_MAX_THREADS];
  uint64_t threads_seen, threads_cycles, threads_alloc_cycles;
  _Atomic int64_t live;  // live requested bytes
  int64_t peak_live, last_rss_check;
  uint64_t rss_at_peak_kib;
  uint64_t sample, tsc0, ns0;
  int hw_errno;
  int shadow_full;
} am_g = {.lock = PTHREAD_MUTEX_INITIALIZER, .sample = 64};

// ---------------------------------------------------------------------------
// The real functions, and a static buffer for dlsym's own allocations
// ---------------------------------------------------------------------------
static struct {
  void *(*malloc)(size_t);
  void (*free)(void *);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  void *(*reallocarray)(void *, size_t, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t);
  void *(*memalign)(size_t, size_t);
  void *(*valloc)(size_t);
  void *(*pvalloc)(size_t);
  size_t (*usable_size)(void *);
  void *(*mmap)(void *, size_t, int, int, int, off_t);
  int (*munmap)(void *, size_t);
  void *(*mremap)(void *, size_t, size_t, int, ...);
  int (*madvise)(void *, size_t, int);
  int (*mprotect)(void *, size_t, int);
  int (*brk)(void *);
  void *(*sbrk)(intptr_t);
  int (*mutex_lock)(pthread_mutex_t *);
  int (*mutex_trylock)(pthread_mutex_t *);
  int (*mutex_unlock)(pthread_mutex_t *);
  int (*create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
  void (*exit)(void *) __attribute__((noreturn));
  pid_t (*fork)(void);
} am_real;

static _Atomic int am_state;  // 0 unresolved, 1 resolving, 2 ready
static _Alignas(64) char am_boot[1 << 16];
static _Atomic size_t am_boot_used;

static int am_is_boot(const void *p) {
  return (const char *)p >= am_boot && (const char *)p < am_boot + sizeof am_boot;
}

// Zeroed (static) memory with its size in the 16 bytes before it; never freed.
static void *am_boot_alloc(size_t n) {
  size_t need = 16 + ((n + 15) & ~(size_t)15);
  size_t at = atomic_fetch_add(&am_boot_used, need);
  if (n > sizeof am_boot || at + need > sizeof am_boot) return NULL;
  memcpy(am_boot + at, &n, sizeof n);
  return am_boot + at + 16;
}

static size_t am_boot_size(const void *p) {
  size_t n;
  memcpy(&n, (const char *)p - 16, sizeof n);
  return n;
}

static void am_init(void);

static void am_resolve(void) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&am_state, &expected, 1)) return;
#define AM_NEXT(field, name) *(void **)&am_real.field = dlsym(RTLD_NEXT, name)
  AM_NEXT(malloc, "malloc");
  AM_NEXT(free, "free");
  AM_NEXT(calloc, "calloc");
  AM_NEXT(realloc, "realloc");
  AM_NEXT(reallocarray, "reallocarray");
  AM_NEXT(posix_memalign, "posix_memalign");
  AM_NEXT(aligned_alloc, "aligned_alloc");
  AM_NEXT(memalign, "memalign");
  AM_NEXT(valloc, "valloc");
  AM_NEXT(pvalloc, "pvalloc");
  AM_NEXT(usable_size, "malloc_usable_size");
  AM_NEXT(mmap, "mmap");
  AM_NEXT(munmap, "munmap");
  AM_NEXT(mremap, "mremap");
  AM_NEXT(madvise, "madvise");
  AM_NEXT(mprotect, "mprotect");
  AM_NEXT(brk, "brk");
  AM_NEXT(sbrk, "sbrk");
  AM_NEXT(mutex_lock, "pthread_mutex_lock");
  AM_NEXT(mutex_trylock, "pthread_mutex_trylock");
  AM_NEXT(mutex_unlock, "pthread_mutex_unlock");
  AM_NEXT(create, "pthread_create");
  AM_NEXT(exit, "pthread_exit");
  AM_NEXT(fork, "fork");
#undef AM_NEXT
  atomic_store(&am_state, 2);
  am_me.depth++;  // pthread_atfork and friends may allocate: not the program's calls
  am_init();
  am_me.depth--;
}

static inline int am_ready(void) {
  if (AM_LIKELY(atomic_load_explicit(&am_state, memory_order_acquire) == 2)) return 1;
  am_resolve();
  return atomic_load(&am_state) == 2;
}

// ---------------------------------------------------------------------------
// Shadow: one byte per 8-byte granule of address space, leaves of 1 GiB each
// made on first touch. Bit 7: the address was returned before. Bits 0-6: the
// requested size of the block that starts there (see am_shadow_put).
// ---------------------------------------------------------------------------
#define AM_REGION_BITS 30
#define AM_REGIONS (1u << 17)  // 47-bit user address space
static _Atomic(uint8_t *) am_leaves[AM_REGIONS];

// Once per GiB region touched: a raw mmap, not our counted one.
__attribute__((noinline)) static uint8_t *am_new_leaf(uintptr_t region) {
  // One page more: a block in the region's last granule writes its second
  // shadow byte just past the end.
  size_t size = ((size_t)1 << (AM_REGION_BITS - 3)) + 4096;
  long got = syscall(SYS_mmap, NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (got == -1 || got < 0) {
    am_g.shadow_full = 1;
    return NULL;
  }
  uint8_t *mine = (uint8_t *)got, *none = NULL;
  if (atomic_compare_exchange_strong(&am_leaves[region], &none, mine)) return mine;
  syscall(SYS_munmap, mine, size);
  return none;
}

static inline uint8_t *am_shadow(const void *p) {
  uintptr_t a = (uintptr_t)p;
  uintptr_t region = a >> AM_REGION_BITS;
  if (AM_UNLIKELY(region >= AM_REGIONS)) return NULL;
  uint8_t *leaf = atomic_load_explicit(&am_leaves[region], memory_order_acquire);
  if (AM_UNLIKELY(leaf == NULL) && (leaf = am_new_leaf(region)) == NULL) return NULL;
  return leaf + ((a & (((uintptr_t)1 << AM_REGION_BITS) - 1)) >> 3);
}

// The block's requested size in its shadow bytes (bits 0-6; bit 7 stays the
// "returned before" flag of each granule). c = first byte's bits:
//   c <= 8     a tiny request of c bytes (the block may own one granule only)
//   9..126     ((c - 9) << 7) | the second byte's bits: up to 15,103 bytes
//   127        large: the second byte holds a log code (within 1/64)
#define AM_TINY 8
#define AM_NORMAL_MAX ((117u << 7) | 127u)

static uint8_t am_log_code(size_t n) {
  int k = 63 - __builtin_clzll(n | 1);
  int code = (k - 13) * 8 + (int)((n >> (k - 3)) & 7);  // k >= 13 here
  return (uint8_t)(code < 0 ? 0 : code > 127 ? 127 : code);
}

static size_t am_log_value(uint8_t code) {
  int k = code / 8 + 13;
  return (size_t)(8 + code % 8) << (k - 3);
}

static inline void am_shadow_put(uint8_t *sh, size_t req) {
  if (AM_UNLIKELY(req <= AM_TINY)) {
    sh[0] = (uint8_t)(0x80 | req);
  } else if (AM_LIKELY(req <= AM_NORMAL_MAX)) {  // the block owns the next granule too
    sh[0] = (uint8_t)(0x80 | ((req >> 7) + 9));
    sh[1] = (uint8_t)((sh[1] & 0x80) | (req & 0x7f));
  } else {
    sh[0] = 0x80 | 127;
    sh[1] = (uint8_t)((sh[1] & 0x80) | am_log_code(req));
  }
}

static inline size_t am_shadow_req(const uint8_t *sh, int *large) {
  unsigned c = sh[0] & 0x7f;
  *large = c == 127;
  if (c <= AM_TINY) return c;
  if (c < 127) return ((size_t)(c - 9) << 7) | (sh[1] & 0x7f);
  return am_log_value(sh[1] & 0x7f);
}

// ---------------------------------------------------------------------------
// Counting
// ---------------------------------------------------------------------------
static pthread_key_t am_key;

static inline uint64_t am_tsc(void) { return __rdtsc(); }

static inline int am_size_bucket(size_t n) {
  int b = n ? 64 - __builtin_clzll(n) : 0;
  return b < AM_SIZE_BUCKETS ? b : AM_SIZE_BUCKETS - 1;
}

static inline int am_cycle_bucket(uint64_t c) {
  if (c < 4) return (int)c;
  int k = 63 - __builtin_clzll(c);
  int b = 4 * k + (int)((c >> (k - 2)) & 3) - 4;
  return b < AM_HIST ? b : AM_HIST - 1;
}

__attribute__((noinline)) static void am_register(am_thread *t) {
  if (t->state == 0 && t->start_tsc == 0) t->start_tsc = am_tsc();
  if (t->countdown == 0) t->countdown = (uint32_t)am_g.sample;
  t->state = 1;
  t->tid = (uint64_t)syscall(SYS_gettid);  // once per thread
  pthread_setspecific(am_key, t);  // its destructor flushes at thread exit
  for (int i = 0; t->slot == 0 && i < AM_LIVING; i++) {
    am_thread *none = NULL;
    if (atomic_compare_exchange_strong(&am_living[i], &none, t)) t->slot = i + 1;
  }
  if (t->slot == 0) {
    t->slot = -1;
    atomic_fetch_add(&am_unlisted, 1);
  }
}

// 1 when this call's cycles are measured.
static inline int am_sampled(am_thread *t) {
  if (AM_UNLIKELY(t->state != 1)) am_register(t);
  if (AM_LIKELY(--t->countdown != 0)) return 0;
  t->countdown = (uint32_t)am_g.sample;
  return 1;
}

static inline void am_cycles(am_thread *t, int path, uint64_t c) {
  t->c.samples[path]++;
  t->c.cycles[path] += c;
  t->c.hist[path][am_cycle_bucket(c)]++;
}

static uint64_t am_rss_kib(void) {
  char buf[128];
  int fd = (int)syscall(SYS_open, "/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
  syscall(SYS_close, fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char *c = buf;
  while (*c && *c != ' ') c++;
  uint64_t pages = 0;
  for (c++; *c >= '0' && *c <= '9'; c++) pages = pages * 10 + (uint64_t)(*c - '0');
  return pages * (uint64_t)sysconf(_SC_PAGESIZE) / 1024;
}

// Live requested bytes reach the totals in steps of 256 KiB per thread: the
// peak is exact to that, and RSS is read (a syscall) only when it grew by 1/32.
__attribute__((noinline)) static void am_flush_live(am_thread *t) {
  int64_t live = atomic_fetch_add(&am_g.live, t->live_delta) + t->live_delta;
  t->live_delta = 0;
  if (live <= am_g.peak_live) return;
  am_real.mutex_lock(&am_g.lock);
  if (live > am_g.peak_live) {
    am_g.peak_live = live;
    if (live > am_g.last_rss_check + am_g.last_rss_check / 32) {
      am_g.rss_at_peak_kib = am_rss_kib();
      am_g.last_rss_check = live;
    }
  }
  am_real.mutex_unlock(&am_g.lock);
}

static inline void am_live(am_thread *t, int64_t req) {
  t->live_delta += req;
  if (AM_UNLIKELY(t->live_delta > (256 << 10) || t->live_delta < -(256 << 10))) am_flush_live(t);
}

// A block handed out: counts, sizes, new or reuse, live requested bytes.
// Returns 1 if new. Sampled calls also ask the block's usable size.
static inline int am_allocated(am_thread *t, int api, size_t req, void *p, int sampled) {
  if (api == AM_MALLOC) {
    t->malloc_calls++;
    t->malloc_bytes += req;
  } else {
    t->c.calls[api]++;
    t->c.bytes[api] += req;
  }
  t->c.sizes[api][am_size_bucket(req)]++;
  if (AM_UNLIKELY(p == NULL)) return 0;
  uint8_t *sh = am_shadow(p);
  int fresh = AM_UNLIKELY(sh == NULL) || !(*sh & 0x80);
  if (AM_LIKELY(sh != NULL)) am_shadow_put(sh, req);
  if (api == AM_MALLOC) {
    t->malloc_fresh += fresh;
    t->malloc_reused += !fresh;
  } else {
    t->c.fresh[api] += fresh;
    t->c.reused[api] += !fresh;
  }
  if (sampled && am_real.usable_size) {
    t->c.sampled_req += req;
    t->c.sampled_usable += am_real.usable_size(p);
  }
  am_live(t, (int64_t)req);
  return fresh;
}

// A block about to be given back: live requested bytes drop by its size.
static inline void am_releasing(am_thread *t, void *p) {
  uint8_t *sh = am_shadow(p);
  if (AM_UNLIKELY(sh == NULL)) {
    t->c.unknown_frees++;
    return;
  }
  int large;
  size_t req = am_shadow_req(sh, &large);
  t->c.large_frees += large;
  am_live(t, -(int64_t)req);
}

// ---------------------------------------------------------------------------
// The allocation API
// ---------------------------------------------------------------------------
// Cycles of the real call only (am_c1), when this call is sampled.
#define AM_CALL(t, sampled, call)            \
  do {                                       \
    uint64_t am_c0 = sampled ? am_tsc() : 0; \
    (t)->depth++;                            \
    call;                                    \
    (t)->depth--;                            \
    if (sampled) am_c1 = am_tsc() - am_c0;   \
  } while (0)

// malloc and free have a lean path for the calls that are not sampled; the
// sampled ones (and a thread's first) take the out-of-line path.
__attribute__((noinline)) static void *am_malloc_sampled(am_thread *t, size_t n) {
  int s = am_sampled(t);
  uint64_t am_c1 = 0;
  void *p;
  AM_CALL(t, s, p = am_real.malloc(n));
  int fresh = am_allocated(t, AM_MALLOC, n, p, s);
  if (s) am_cycles(t, fresh ? AM_P_MALLOC_NEW : AM_P_MALLOC_REUSE, am_c1);
  return p;
}

__attribute__((noinline)) static void *am_malloc_slow(am_thread *t, size_t n) {
  if (!am_ready()) return am_boot_alloc(n);
  if (t->depth) return am_real.malloc(n);
  return am_malloc_sampled(t, n);
}

// The common case first: a registered thread, outside the allocator, not sampled
// (state 1 implies the real functions are resolved).
AM_EXPORT void *malloc(size_t n) {
  am_thread *t = &am_me;
  if (AM_UNLIKELY(t->state != 1 || t->depth != 0 || t->countdown <= 1))
    return am_malloc_slow(t, n);
  t->countdown--;
  t->depth = 1;
  void *p = am_real.malloc(n);
  t->depth = 0;
  am_allocated(t, AM_MALLOC, n, p, 0);
  return p;
}

__attribute__((noinline)) static void am_free_sampled(am_thread *t, void *p) {
  int s = am_sampled(t);
  t->free_calls++;
  am_releasing(t, p);
  uint64_t am_c1 = 0;
  AM_CALL(t, s, am_real.free(p));
  if (s) am_cycles(t, AM_P_FREE, am_c1);
}

__attribute__((noinline)) static void am_free_slow(am_thread *t, void *p) {
  if (!am_ready()) return;
  if (t->depth) {
    am_real.free(p);
    return;
  }
  am_free_sampled(t, p);
}

AM_EXPORT void free(void *p) {
  if (AM_UNLIKELY(p == NULL || am_is_boot(p))) return;
  am_thread *t = &am_me;
  if (AM_UNLIKELY(t->state != 1 || t->depth != 0 || t->countdown <= 1)) {
    am_free_slow(t, p);
    return;
  }
  t->countdown--;
  t->free_calls++;
  am_releasing(t, p);
  t->depth = 1;
  am_real.free(p);
  t->depth = 0;
}

AM_EXPORT void *calloc(size_t n, size_t m) {
  if (AM_UNLIKELY(am_state != 2)) {
    // dlsym allocates (zeroed) while we resolve: serve it from the static buffer.
    if (atomic_load(&am_state) == 1) return am_boot_alloc(n * m);  // static: zeroed
    if (!am_ready()) return am_boot_alloc(n * m);
  }
  am_thread *t = &am_me;
  if (t->depth) return am_real.calloc(n, m);
  int s = am_sampled(t);
  uint64_t am_c1 = 0;
  void *p;
  AM_CALL(t, s, p = am_real.calloc(n, m));
  size_t bytes;
  am_allocated(t, AM_CALLOC, __builtin_mul_overflow(n, m, &bytes) ? 0 : bytes, p, s);
  if (s) am_cycles(t, AM_P_CALLOC, am_c1);
  return p;
}

static void *am_realloc(int api, void *p, size_t n, size_t m) {
  am_thread *t = &am_me;
  size_t bytes;
  int overflow = __builtin_mul_overflow(n, m, &bytes);
  if (p && am_is_boot(p)) {  // a block from before we were ready: copy it out
    void *q = malloc(overflow ? SIZE_MAX : bytes);
    size_t old = am_boot_size(p);
    if (q) memcpy(q, p, bytes < old ? bytes : old);
    return q;
  }
  if (t->depth)
    return api == AM_REALLOC ? am_real.realloc(p, n) : am_real.reallocarray(p, n, m);
  int s = am_sampled(t);
  if (p) am_releasing(t, p);
  uint64_t am_c1 = 0;
  void *q;
  AM_CALL(t, s,
          q = api == AM_REALLOC ? am_real.realloc(p, n) : am_real.reallocarray(p, n, m));
  if (q == NULL && p != NULL && !overflow && bytes != 0) {
    // Failed: the old block is still live, its shadow untouched.
    uint8_t *sh = am_shadow(p);
    int large;
    if (sh) am_live(t, (int64_t)am_shadow_req(sh, &large));
  }
  am_allocated(t, api, overflow ? 0 : bytes, q, s);
  if (s) am_cycles(t, AM_P_REALLOC, am_c1);
  return q;
}

AM_EXPORT void *realloc(void *p, size_t n) {
  if (AM_UNLIKELY(!am_ready())) return am_boot_alloc(n);
  return am_realloc(AM_REALLOC, p, n, 1);
}

AM_EXPORT void *reallocarray(void *p, size_t n, size_t m) {
  if (AM_UNLIKELY(!am_ready())) return NULL;
  return am_realloc(AM_REALLOCARRAY, p, n, m);
}

// The aligned family: one path for cycles, each API counted on its own.
#define AM_ALIGNED(api, call, size)                                   \
  am_thread *t = &am_me;                                              \
  if (t->depth) return call;                                          \
  int s = am_sampled(t);                                              \
  uint64_t am_c1 = 0;                                                 \
  void *p;                                                            \
  AM_CALL(t, s, p = call);                                         \
  am_allocated(t, api, size, p, s);                                   \
  if (s) am_cycles(t, AM_P_ALIGNED, am_c1);                           \
  return p

AM_EXPORT void *aligned_alloc(size_t al, size_t n) {
  if (AM_UNLIKELY(!am_ready())) return NULL;
  AM_ALIGNED(AM_ALIGNED_ALLOC, am_real.aligned_alloc(al, n), n);
}

AM_EXPORT void *memalign(size_t al, size_t n) {
  if (AM_UNLIKELY(!am_ready())) return NULL;
  AM_ALIGNED(AM_MEMALIGN, am_real.memalign(al, n), n);
}

AM_EXPORT void *valloc(size_t n) {
  if (AM_UNLIKELY(!am_ready())) return NULL;
  AM_ALIGNED(AM_VALLOC, am_real.valloc(n), n);
}

AM_EXPORT void *pvalloc(size_t n) {
  if (AM_UNLIKELY(!am_ready())) return NULL;
  AM_ALIGNED(AM_PVALLOC, am_real.pvalloc(n), n);
}

AM_EXPORT int posix_memalign(void **out, size_t al, size_t n) {
  if (AM_UNLIKELY(!am_ready())) return ENOMEM;
  am_thread *t = &am_me;
  if (t->depth) return am_real.posix_memalign(out, al, n);
  int s = am_sampled(t);
  uint64_t am_c1 = 0;
  int rc;
  AM_CALL(t, s, rc = am_real.posix_memalign(out, al, n));
  am_allocated(t, AM_POSIX_MEMALIGN, n, rc == 0 ? *out : NULL, s);
  if (s) am_cycles(t, AM_P_ALIGNED, am_c1);
  return rc;
}

AM_EXPORT size_t malloc_usable_size(void *p) {
  if (p == NULL) return 0;
  if (am_is_boot(p)) return am_boot_size(p);
  if (!am_ready()) return 0;
  am_thread *t = &am_me;
  if (t->depth) return am_real.usable_size(p);
  int s = am_sampled(t);
  uint64_t am_c1 = 0;
  size_t n;
  t->c.calls[AM_USABLE_SIZE]++;
  AM_CALL(t, s, n = am_real.usable_size(p));
  if (s) am_cycles(t, AM_P_USABLE, am_c1);
  return n;
}

// ---------------------------------------------------------------------------
// System calls the allocator makes through the PLT, inside or outside its calls
// ---------------------------------------------------------------------------
#define AM_SYS(kind, bytes, call)                       \
  am_thread *t = &am_me;                                \
  int in = t->depth > 0;                                \
  uint64_t c0 = am_tsc();                               \
  call;                                                 \
  t->c.sys_cycles[kind][in] += am_tsc() - c0;           \
  t->c.sys_calls[kind][in]++;                           \
  t->c.sys_bytes[kind][in] += (uint64_t)(bytes)

AM_EXPORT void *mmap(void *a, size_t len, int prot, int flags, int fd, off_t off) {
  if (AM_UNLIKELY(!am_ready()))
    return (void *)syscall(SYS_mmap, a, len, prot, flags, fd, off);
  void *r;
  AM_SYS(AM_MMAP, len, r = am_real.mmap(a, len, prot, flags, fd, off));
  return r;
}

AM_EXPORT void *mmap64(void *a, size_t len, int prot, int flags, int fd, off_t off)
    __attribute__((alias("mmap")));

AM_EXPORT int munmap(void *a, size_t len) {
  if (AM_UNLIKELY(!am_ready())) return (int)syscall(SYS_munmap, a, len);
  int r;
  AM_SYS(AM_MUNMAP, len, r = am_real.munmap(a, len));
  return r;
}

AM_EXPORT void *mremap(void *a, size_t old, size_t len, int flags, ...) {
  void *to = NULL;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    to = va_arg(ap, void *);
    va_end(ap);
  }
  if (AM_UNLIKELY(!am_ready())) return (void *)syscall(SYS_mremap, a, old, len, flags, to);
  void *r;
  AM_SYS(AM_MREMAP, len, r = am_real.mremap(a, old, len, flags, to));
  return r;
}

AM_EXPORT int madvise(void *a, size_t len, int advice) {
  if (AM_UNLIKELY(!am_ready())) return (int)syscall(SYS_madvise, a, len, advice);
  int r;
  AM_SYS(AM_MADVISE, len, r = am_real.madvise(a, len, advice));
  return r;
}

AM_EXPORT int mprotect(void *a, size_t len, int prot) {
  if (AM_UNLIKELY(!am_ready())) return (int)syscall(SYS_mprotect, a, len, prot);
  int r;
  AM_SYS(AM_MPROTECT, len, r = am_real.mprotect(a, len, prot));
  return r;
}

AM_EXPORT int brk(void *a) {
  if (AM_UNLIKELY(!am_ready())) return -1;
  int r;
  AM_SYS(AM_BRK, 0, r = am_real.brk(a));
  return r;
}

AM_EXPORT void *sbrk(intptr_t inc) {
  if (AM_UNLIKELY(!am_ready())) return (void *)-1;
  void *r;
  AM_SYS(AM_SBRK, inc > 0 ? inc : -inc, r = am_real.sbrk(inc));
  return r;
}

// ---------------------------------------------------------------------------
// Locks taken inside allocator calls
// ---------------------------------------------------------------------------
AM_EXPORT int pthread_mutex_lock(pthread_mutex_t *m) {
  if (AM_UNLIKELY(!am_ready())) return 0;  // single-threaded start-up
  am_thread *t = &am_me;
  if (AM_LIKELY(t->depth == 0)) return am_real.mutex_lock(m);
  t->c.lock_calls++;
  if (am_real.mutex_trylock(m) == 0) return 0;
  t->c.lock_contended++;
  uint64_t c0 = am_tsc();
  int r = am_real.mutex_lock(m);
  t->c.lock_wait += am_tsc() - c0;
  return r;
}

AM_EXPORT int pthread_mutex_trylock(pthread_mutex_t *m) {
  if (AM_UNLIKELY(!am_ready())) return 0;
  int r = am_real.mutex_trylock(m);
  am_thread *t = &am_me;
  if (t->depth) {
    t->c.try_calls++;
    t->c.try_failed += r != 0;
  }
  return r;
}

AM_EXPORT int pthread_mutex_unlock(pthread_mutex_t *m) {
  if (AM_UNLIKELY(!am_ready())) return 0;
  am_thread *t = &am_me;
  t->c.unlock_calls += t->depth > 0;
  return am_real.mutex_unlock(m);
}

// ---------------------------------------------------------------------------
// Threads: merged into the totals when they end, however they end
// ---------------------------------------------------------------------------
static void am_add(uint64_t *to, const uint64_t *from, size_t n) {
  for (size_t i = 0; i < n; i++) to[i] += from[i];
}

// Adds a thread's counts to the totals, with its own line (lifetime and its
// estimated cycles inside the allocator: sampled cycles x N).
static void am_fold_hot(am_thread *t) {
  t->c.calls[AM_MALLOC] += t->malloc_calls;
  t->c.bytes[AM_MALLOC] += t->malloc_bytes;
  t->c.fresh[AM_MALLOC] += t->malloc_fresh;
  t->c.reused[AM_MALLOC] += t->malloc_reused;
  t->c.calls[AM_FREE] += t->free_calls;
  t->malloc_calls = t->malloc_bytes = t->malloc_fresh = t->malloc_reused = t->free_calls = 0;
}

static void am_flush(am_thread *t) {
  am_fold_hot(t);
  uint64_t sampled = 0;
  for (int p = 0; p < AM_PATH_N; p++) sampled += t->c.cycles[p];
  am_flush_live(t);
  am_real.mutex_lock(&am_g.lock);
  if (t->start_tsc != 0) {
    uint64_t i = am_g.threads_seen++, cycles = am_tsc() - t->start_tsc;
    uint64_t estimate = sampled * am_g.sample;
    am_g.threads_cycles += cycles;
    am_g.threads_alloc_cycles += estimate;
    if (i < AM_MAX_THREADS)
      am_g.threads[i] = (am_thread_line){t->tid, cycles, estimate};
    t->start_tsc = 0;
  }
  am_add((uint64_t *)&am_g.c, (const uint64_t *)&t->c, sizeof t->c / sizeof(uint64_t));
  memset(&t->c, 0, sizeof t->c);
  am_real.mutex_unlock(&am_g.lock);
  if (t->slot > 0) atomic_store(&am_living[t->slot - 1], NULL);
  if (t->slot < 0) atomic_fetch_sub(&am_unlisted, 1);
  t->slot = 0;
  t->state = 2;
}

static void am_thread_end(void *arg) { am_flush((am_thread *)arg); }

AM_EXPORT void pthread_exit(void *value) {
  if (am_ready() && am_me.state == 1) am_flush(&am_me);
  am_real.exit(value);
}

// Starts a thread's clock when it starts, not at its first allocation. The
// trampoline's argument comes from a fixed pool: no allocation here.
typedef struct {
  void *(*fn)(void *);
  void *arg;
  _Atomic int busy;
} am_start;
static am_start am_starts[1024];

static void *am_trampoline(void *slot) {
  am_start *s = slot;
  void *(*fn)(void *) = s->fn;
  void *arg = s->arg;
  atomic_store(&s->busy, 0);
  am_me.start_tsc = am_tsc();
  am_register(&am_me);
  return fn(arg);
}

AM_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                             void *arg) {
  if (!am_ready()) return EAGAIN;
  for (size_t i = 0; i < sizeof am_starts / sizeof am_starts[0]; i++) {
    int free_slot = 0;
    if (atomic_compare_exchange_strong(&am_starts[i].busy, &free_slot, 1)) {
      am_starts[i].fn = fn;
      am_starts[i].arg = arg;
      int r = am_real.create(th, attr, am_trampoline, &am_starts[i]);
      if (r != 0) atomic_store(&am_starts[i].busy, 0);
      return r;
    }
  }
  return am_real.create(th, attr, fn, arg);  // pool exhausted: clock starts later
}

// ---------------------------------------------------------------------------
// Process start, fork, exit
// ---------------------------------------------------------------------------
static uint64_t am_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void am_fork_child(void) {
  // The child starts clean: its record holds only what it does itself, and
  // the parent's other threads do not exist in it.
  for (int i = 0; i < AM_LIVING; i++) atomic_store(&am_living[i], NULL);
  atomic_store(&am_unlisted, 0);
  am_me.slot = 0;
  am_me.state = 0;
  memset(&am_g.c, 0, sizeof am_g.c);
  memset(am_g.threads, 0, sizeof am_g.threads);
  am_g.threads_seen = am_g.threads_cycles = am_g.threads_alloc_cycles = 0;
  atomic_store(&am_g.live, 0);
  am_g.peak_live = am_g.last_rss_check = 0;
  am_g.rss_at_peak_kib = 0;
  pthread_mutex_init(&am_g.lock, NULL);
  memset(&am_me.c, 0, sizeof am_me.c);
  am_me.malloc_calls = am_me.malloc_bytes = am_me.malloc_fresh = am_me.malloc_reused = 0;
  am_me.free_calls = 0;
  am_me.live_delta = 0;
  am_me.start_tsc = am_tsc();
  am_g.tsc0 = am_tsc();
  am_g.ns0 = am_now_ns();
}

static void am_init(void) {
  const char *s = getenv("AM_PROF_SAMPLE");
  if (s && *s) {
    uint64_t n = 0;
    for (; *s >= '0' && *s <= '9'; s++) n = n * 10 + (uint64_t)(*s - '0');
    am_g.sample = n ? n : 1;
  }
  pthread_key_create(&am_key, am_thread_end);
  pthread_atfork(NULL, NULL, am_fork_child);
  am_g.tsc0 = am_tsc();
  am_g.ns0 = am_now_ns();
  am_me.start_tsc = am_g.tsc0;  // the thread that starts us is (almost always) main
  // Hardware counters: can this process open one? (This VM: no.)
  struct perf_event_attr pe;
  memset(&pe, 0, sizeof pe);
  pe.type = PERF_TYPE_HARDWARE;
  pe.size = sizeof pe;
  pe.config = PERF_COUNT_HW_INSTRUCTIONS;
  pe.disabled = 1;
  pe.exclude_kernel = 1;
  long fd = syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0);
  am_g.hw_errno = fd < 0 ? errno : 0;
  if (fd >= 0) syscall(SYS_close, fd);
}

// The record: fixed text, built in a static buffer without stdio.
static char am_out[1 << 20];
static size_t am_len;

static void am_s(const char *s) {
  size_t n = strlen(s);
  if (am_len + n < sizeof am_out) {
    memcpy(am_out + am_len, s, n);
    am_len += n;
  }
}

static void am_u(uint64_t v) {
  char digits[24];
  int i = 0;
  do digits[i++] = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  while (i > 0 && am_len < sizeof am_out) am_out[am_len++] = digits[--i];
}

static void am_i(int64_t v) {
  if (v < 0) {
    am_s("-");
    am_u((uint64_t)(-v));
  } else {
    am_u((uint64_t)v);
  }
}

static void am_kv(const char *key, uint64_t v) {
  am_s(" ");
  am_s(key);
  am_s("=");
  am_u(v);
}

static void am_list(const char *label, const char *name, const uint64_t *v, int n) {
  int last = n - 1;
  while (last > 0 && v[last] == 0) last--;
  am_s(label);
  am_s(" ");
  am_s(name);
  for (int i = 0; i <= last; i++) {
    am_s(i ? "," : " ");
    am_u(v[i]);
  }
  am_s("\n");
}

static void am_write_record(void) {
  const am_counts *c = &am_g.c;
  char exe[1024];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  Dl_info next;
  const char *served = am_real.malloc && dladdr((void *)am_real.malloc, &next) ? next.dli_fname : "";
  am_len = 0;
  am_s("am_prof 1\n");
  am_s("pid ");
  am_u((uint64_t)getpid());
  am_s("\nppid ");
  am_u((uint64_t)getppid());
  am_s("\nexe ");
  am_s(exe);
  am_s("\nnext_malloc ");
  am_s(served);
  am_s("\nsample ");
  am_u(am_g.sample);
  am_s("\ntsc_per_us ");
  uint64_t ns = am_now_ns() - am_g.ns0, tsc = am_tsc() - am_g.tsc0;
  am_u(ns ? tsc * 1000 / ns : 0);
  am_s("\nhw_errno ");
  am_u((uint64_t)am_g.hw_errno);
  am_s("\nthreads");
  am_kv("count", am_g.threads_seen);
  am_kv("cycles", am_g.threads_cycles);
  am_kv("alloc_cycles", am_g.threads_alloc_cycles);
  am_s("\n");
  for (uint64_t i = 0; i < am_g.threads_seen && i < AM_MAX_THREADS; i++) {
    am_s("thread");
    am_kv("tid", am_g.threads[i].tid);
    am_kv("cycles", am_g.threads[i].cycles);
    am_kv("alloc_cycles", am_g.threads[i].alloc_cycles);
    am_s("\n");
  }
  for (int a = 0; a < AM_API_N; a++) {
    if (!c->calls[a]) continue;
    am_s("api ");
    am_s(am_api_names[a]);
    am_kv("calls", c->calls[a]);
    am_kv("bytes", c->bytes[a]);
    am_kv("new", c->fresh[a]);
    am_kv("reuse", c->reused[a]);
    am_s("\n");
    am_list("sizes", am_api_names[a], c->sizes[a], AM_SIZE_BUCKETS);
  }
  for (int p = 0; p < AM_PATH_N; p++) {
    if (!c->samples[p]) continue;
    am_s("path ");
    am_s(am_path_names[p]);
    am_kv("samples", c->samples[p]);
    am_kv("cycles", c->cycles[p]);
    am_s("\n");
    am_list("hist", am_path_names[p], c->hist[p], AM_HIST);
  }
  for (int k = 0; k < AM_SYS_N; k++) {
    am_s("sys ");
    am_s(am_sys_names[k]);
    am_kv("in_calls", c->sys_calls[k][1]);
    am_kv("in_cycles", c->sys_cycles[k][1]);
    am_kv("in_bytes", c->sys_bytes[k][1]);
    am_kv("out_calls", c->sys_calls[k][0]);
    am_kv("out_cycles", c->sys_cycles[k][0]);
    am_kv("out_bytes", c->sys_bytes[k][0]);
    am_s("\n");
  }
  am_s("locks");
  am_kv("lock_calls", c->lock_calls);
  am_kv("contended", c->lock_contended);
  am_kv("wait_cycles", c->lock_wait);
  am_kv("trylock_calls", c->try_calls);
  am_kv("trylock_failed", c->try_failed);
  am_kv("unlock_calls", c->unlock_calls);
  am_s("\nmemory");
  am_kv("peak_requested", (uint64_t)am_g.peak_live);
  am_kv("rss_at_peak_kib", am_g.rss_at_peak_kib);
  am_s(" final_requested=");
  am_i(atomic_load(&am_g.live));
  am_kv("sampled_requested", c->sampled_req);
  am_kv("sampled_usable", c->sampled_usable);
  am_kv("large_frees", c->large_frees);
  am_kv("unknown_frees", c->unknown_frees);
  am_kv("shadow_full", (uint64_t)am_g.shadow_full);
  am_kv("threads_unmerged", atomic_load(&am_unlisted));
  am_s("\nend\n");
}

// A program that never allocates still gets its record (and its clock).
__attribute__((constructor)) static void am_begin(void) { am_ready(); }

__attribute__((destructor)) static void am_exit(void) {
  if (atomic_load(&am_state) != 2) return;
  const char *path = getenv("AM_PROF_OUT");
  am_thread *t = &am_me;
  t->depth++;  // whatever runs from here on is not the program's
  if (t->state != 0) am_flush(t);
  // Threads still alive: merged as they are (they may be idle in a pool, or
  // still running, in which case their last few calls may be missed).
  for (int i = 0; i < AM_LIVING; i++) {
    am_thread *other = atomic_exchange(&am_living[i], NULL);
    if (other != NULL && other != t) am_flush(other);
  }
  if (path == NULL || *path == '\0') return;
  am_real.mutex_lock(&am_g.lock);
  am_write_record();
  int fd = (int)syscall(SYS_open, path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) {
    flock(fd, LOCK_EX);  // several processes (fork, exec) append their records
    for (size_t done = 0; done < am_len;) {
      long w = syscall(SYS_write, fd, am_out + done, am_len - done);
      if (w <= 0) break;
      done += (size_t)w;
    }
    flock(fd, LOCK_UN);
    syscall(SYS_close, fd);
  }
  am_real.mutex_unlock(&am_g.lock);
}
