// libamprof.so — allocmark's profiler: what does the allocator do inside a program?
//
// Preloaded in front of the allocator under test
// (LD_PRELOAD="libamprof.so <allocator>.so"), it forwards every call of the
// allocation API to the next definition (dlsym RTLD_NEXT) and counts, per API:
// calls, requested bytes, a power-of-two size histogram. About one call in
// AM_PROF_SAMPLE per API (default 1024: a sampled call costs some 250 ns here,
// two rdtsc of ~12 ns and cold lines for its classification and histograms)
// is "sampled": its TSC cycles, tight around the real call only, go to a
// log-scale histogram (4 buckets per power of two); a sampled allocation is
// classified "new" (its
// address was never freed before in this process, so never handed out before)
// or "reuse", and its usable size is asked (internal fragmentation). The gap
// between sampled calls is uniform in [1, 2N-1], so that a program whose calls
// repeat with a period dividing N is not always sampled at the same point.
//
// Cheap by design: malloc's and free's fast paths count nothing themselves.
// malloc lowers a countdown of calls and a budget of bytes, free a countdown
// of calls, and both jump to the real call (a tail call: no frame of ours
// around the allocator's); the slow path, taken when a countdown or the budget
// runs out, turns how far they went down into exact call and byte counts. The
// budget is below 4 KiB, so every malloc of 4 KiB or more takes the slow path
// and is counted in the size histogram one by one; the sizes of smaller ones
// are split as the sampled calls' are. free tests and sets bits of a bitmap:
// two bits per 8-byte granule of address space, 1/32 of the heap's span,
// "an address freed here" (new vs reuse) and "a tracked block starts here".
// Live requested bytes come from tracked blocks, sampled by bytes as in
// jemalloc's heap profiler: on average one allocated byte in 32 x N (or in
// 1/2048 of the peak, if more) picks the block that holds it, weighted by the
// inverse of its chance; the estimate's variance is kept too. The peak is not
// the estimate's highest value (on a churning heap, the top of many noisy
// values runs high): tracked blocks fall at random in two halves, one picks
// the moment, the other says how much was live then, both ways round.
// AM_PROF_SAMPLE=1 makes everything exact: every call timed, classified and
// sized, every block tracked.
//
// mmap, munmap, mremap, madvise, mprotect, brk and sbrk are counted (calls,
// bytes, cycles), "inside" the allocator when the caller's code belongs to it
// (the object serving malloc and the non-system libraries it needs), else
// "outside"; pthread_mutex_lock, trylock and unlock only when the allocator
// calls them (acquisitions, contended ones and their wait cycles). Only calls
// through the PLT are visible: glibc's malloc makes its mmaps and takes its
// arena locks inside libc, unseen.
//
// Nothing on the hot path allocates, locks or makes a system call: counters are
// thread-local (initial-exec TLS) and merged into the totals when the thread
// ends (a pthread key destructor, and pthread_exit explicitly), when the
// process exits, or before fork. A fork's child starts from zero. At exit the
// record (one JSON line, {"am":"prof","v":4,...}) is appended to the file named
// by AM_PROF_OUT under an flock; Python (records.py, profile.py) interprets it.
//
// This header is private to libamprof.so: the types, the state the sections
// share, and the small functions the hot path inlines. Each section is a file:
// am_prof_api.c (the hot path: malloc, free and the rest of the API),
// am_prof_count.c (sampling and accounting), am_prof_bitmap.c, am_prof_blocks.c,
// am_prof_code.c (whose call is it), am_prof_layout.c (pages and lines at the
// peak), am_prof_real.c (the real functions),
// am_prof_sys.c (syscalls and locks), am_prof_threads.c, am_prof_process.c
// (start, fork, exit) and am_prof_record.c (the record writer).
#ifndef AM_PROF_H

#define AM_PROF_H
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/perf_event.h>
#include <math.h>
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

#include "am_real.h"

#define AM_PROF_VERSION 5
#define AM_LIKELY(x) __builtin_expect(!!(x), 1)
#define AM_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define AM_EXPORT __attribute__((visibility("default")))
#define AM_TLS __thread __attribute__((tls_model("initial-exec")))

// ---------------------------------------------------------------------------
// What is counted
// ---------------------------------------------------------------------------
enum { AM_MALLOC, AM_CALLOC, AM_REALLOC, AM_REALLOCARRAY, AM_FREE, AM_POSIX_MEMALIGN,
       AM_ALIGNED_ALLOC, AM_MEMALIGN, AM_VALLOC, AM_PVALLOC, AM_USABLE_SIZE, AM_API_N };

// Paths whose cycles are kept apart: malloc is split by new and reuse.
enum { AM_P_MALLOC_NEW, AM_P_MALLOC_REUSE, AM_P_CALLOC, AM_P_REALLOC, AM_P_FREE, AM_P_ALIGNED,
       AM_P_USABLE, AM_PATH_N };

enum { AM_MMAP, AM_MUNMAP, AM_MREMAP, AM_MADVISE, AM_MPROTECT, AM_BRK, AM_SBRK, AM_SYS_N };

#define AM_SIZE_BUCKETS 48  // bucket k: sizes in [2^(k-1), 2^k); 0 holds size 0
#define AM_HIST 256         // cycles: 4 buckets per power of two
#define AM_MAX_THREADS 256  // threads listed one by one; later ones only in the totals

// malloc's calls below AM_FAST_BYTES may take the fast path, which does not
// look at the size: their histogram comes from the sampled ones (sizes_sampled).
#define AM_FAST_BYTES 4096

typedef struct {
  uint64_t calls[AM_API_N], bytes[AM_API_N], fresh[AM_API_N], reused[AM_API_N];  // fresh and reused: of the sampled calls
  uint64_t sizes[AM_API_N][AM_SIZE_BUCKETS];  // every call, except malloc's below AM_FAST_BYTES
  uint64_t sizes_sampled[AM_SIZE_BUCKETS];  // malloc's sampled calls below AM_FAST_BYTES
  uint64_t samples[AM_PATH_N], cycles[AM_PATH_N];
  uint64_t hist[AM_PATH_N][AM_HIST];
  uint64_t sys_calls[AM_SYS_N][2], sys_cycles[AM_SYS_N][2], sys_bytes[AM_SYS_N][2];
  uint64_t lock_calls, lock_contended, lock_wait, try_calls, try_failed, unlock_calls;
  uint64_t sampled_req, sampled_usable;  // sampled allocations: internal fragmentation
} am_counts;

// A thread's counters. The first cache line holds all that malloc and free
// touch. The fast paths count nothing themselves: a call's countdown and
// malloc's byte budget go down, and the slow path turns what they went down
// by into exact call and byte counts (am_harvest). A countdown is 0 whenever
// the thread is not registered or runs our own code (depth > 0), which sends
// every call down the slow path. (Each fast path tests its own 32-bit field:
// two adjacent ones tested together become one 64-bit load, which cannot be
// forwarded from the 32-bit store of the previous call, a stall per call.)
typedef struct {
  uint32_t mcd;  // malloc calls until the next sampled one, this one included
  uint32_t fcd;  // the same for free
  uint64_t mleft;  // bytes malloc may hand out on the fast path (< AM_FAST_BYTES)
  uint32_t mwin, fwin;  // mcd and fcd as the slow path left them
  uint64_t mleft_was;  // mleft as the slow path left it
  uint64_t gap_rest;  // bytes of the gap to the next tracked block beyond mleft
  int depth;  // > 0 while our own code runs (it may allocate: not the program's calls)
  uint32_t saved_mcd, saved_fcd;
  uint32_t ocd;  // the other APIs' countdown (always the slow path)
  int state;  // 0 new, 1 registered (key set), 2 flushed
  int slot;  // 1 + its index in am_living, 0 if not listed, -1 if the list was full
  uint64_t rng;
  uint64_t gap_interval;  // the mean of the gap mleft + gap_rest was drawn from
  int64_t part_delta[3], part_var_delta[3], blocks_delta;  // not yet in the totals
  int pending;  // tracked events behind those deltas
  am_counts c;  // everything else
  uint64_t start_tsc;
  uint64_t tid;
} __attribute__((aligned(64))) am_thread;

// Threads that have counters and have not ended: merged at process exit, so
// that threads which never end (a runtime's thread cache, a pool) are counted.
#define AM_LIVING 4096

typedef struct {
  uint64_t tid, cycles, alloc_cycles;
} am_thread_line;

// The layout at the peak (every block tracked: sample 1): the live blocks' requested
// bytes, and the pages and cache lines that hold any of them. Taken when live bytes
// first pass the last taking's by 1/16: so at a moment within 1/16 of the peak, and
// at a cost of about 17 walks of the peak's blocks in all.
typedef struct {
  uint64_t live;  // live requested bytes when taken (the peak's counter)
  uint64_t bytes, blocks;  // the blocks copied out, and their requested bytes
  uint64_t pages, lines, shared_lines;  // 4 KiB pages and 64-byte lines holding any
  uint64_t missed;  // takings with no memory for the copy
} am_layout_t;

typedef struct {
  am_counts c;  // merged thread counts
  pthread_mutex_t lock;  // merging (thread exit, process exit, fork) and new peaks only
  am_thread_line threads[AM_MAX_THREADS];
  uint64_t threads_seen, threads_cycles, threads_alloc_cycles;
  // Live requested bytes: the weights of the tracked blocks, summed per part:
  // the two halves of the blocks tracked with a chance below 1/2, and the
  // others (the estimate is the sum of all three; a half's, twice its own
  // sum plus the third), with their variances in 1024 bytes^2 (a half's: of
  // twice its sum).
  _Atomic int64_t part_live[3];
  _Atomic uint64_t part_var[3];
  _Atomic uint64_t live_blocks;  // tracked blocks
  // The peak without the winner's curse: one half picks the moment (its own
  // highest estimate), the other, independent of that choice, says how much
  // was live then; both ways round, averaged. The highest whole sum would run
  // high on a churning heap (the top of many noisy values).
  int64_t picked[2], told[2];
  uint64_t told_var[2], told_shared_var[2], peak_blocks, rss_at_peak_kib;
  int64_t peak_live, last_rss_check;  // the highest whole sum (exact at sample 1)
  uint64_t sample;
  // Mean bytes between tracked blocks: 0 tracks every block. It grows with the
  // peak (1/2048 of it, at least base_interval): about 2,000 blocks stand for
  // the peak whatever its size, so a big heap costs no more than a small one.
  uint64_t base_interval;
  _Atomic uint64_t interval;
  uint64_t tsc0, ns0;
  _Atomic uint64_t untracked;  // blocks that should have been tracked (no memory for it)
  am_layout_t layout;  // at sample 1 only; written under lock
  int layout_taking;  // a thread is taking it (outside the lock): others do not start one
  int hw_errno;
  int bitmap_full;
} am_g_t;

// ---------------------------------------------------------------------------
// The real functions (am_real.h), and a static buffer for dlsym's own allocations
// ---------------------------------------------------------------------------
// am_real_t: native/common/am_real.h

// ---------------------------------------------------------------------------
// Whose call is it? The allocator's code: the object that serves malloc and
// the libraries it needs beyond the C runtime (tbbmalloc's proxy needs
// libtbbmalloc.so.2, which makes the mmaps).
// ---------------------------------------------------------------------------
#define AM_CODE_MAX 16
typedef struct {
  uintptr_t lo, hi;
} am_code_t;

// ---------------------------------------------------------------------------
// The bitmap: per 64 bytes of address space two bytes, "freed" and "tracked",
// one bit per 8-byte granule each, over the whole 47-bit user address space:
// 4 TiB reserved once (MAP_NORESERVE), its pages made on first touch, so it
// takes 1/32 of the heap's span and free finds p's bits without a test.
// ---------------------------------------------------------------------------
#define AM_SHADOW_BYTES ((uintptr_t)1 << 42)

// ---------------------------------------------------------------------------
// Tracked blocks: address -> requested size and weight, in 64 striped hash
// tables (linear probing, backward-shift deletion) in raw mmap'd memory.
// ---------------------------------------------------------------------------
typedef struct {
  uintptr_t addr;
  uint64_t req, weight;
  uint32_t part;  // 0 or 1 at random (chance below 1/2), else 2: see am_g.part_live
  uint32_t thread;  // the allocating thread's id (gettid, its low 32 bits)
} am_block;

#define AM_STRIPES 64
typedef struct {
  pthread_mutex_t lock;
  am_block *e;
  size_t cap, n;
} __attribute__((aligned(64))) am_tab_t;

// A stripe's first table is small and static, all of them side by side: a
// tracked block costs a cache miss or two on a table the program's data has
// evicted, so the tables of a small heap should take few lines.
#define AM_TAB_FIRST 16

// ---------------------------------------------------------------------------
// The allocation API
// ---------------------------------------------------------------------------
// Cycles of the real call only, when this call is sampled.
#define AM_TIMED(sampled, cycles, call)      \
  do {                                       \
    uint64_t am_c0 = sampled ? am_tsc() : 0; \
    call;                                    \
    if (sampled) cycles = am_tsc() - am_c0;  \
  } while (0)

// The aligned family: one path for cycles, each API counted on its own.
#define AM_ALIGNED(api, call, size)              \
  am_thread *t = &am_me;                         \
  if (t->depth) return call;                     \
  int s = am_sampled(t);                         \
  uint64_t c = 0;                                \
  void *p;                                       \
  AM_TIMED(s, c, p = call);                      \
  am_allocated(t, api, size, p, s, c, AM_P_ALIGNED); \
  return p

// ---------------------------------------------------------------------------
// System calls through the PLT: the allocator's ("inside") or anyone else's
// ---------------------------------------------------------------------------
#define AM_SYS(kind, bytes, call)                                 \
  am_thread *t = &am_me;                                          \
  int in = am_inside(__builtin_return_address(0));                \
  uint64_t c0 = am_tsc();                                         \
  call;                                                           \
  t->c.sys_cycles[kind][in] += am_tsc() - c0;                     \
  t->c.sys_calls[kind][in]++;                                     \
  t->c.sys_bytes[kind][in] += (uint64_t)(bytes)

// Starts a thread's clock when it starts, not at its first allocation. The
// trampoline's argument comes from a fixed pool: no allocation here.
typedef struct {
  void *(*fn)(void *);
  void *arg;
  _Atomic int busy;
} am_start;

// ---------------------------------------------------------------------------
// Shared state (defined in the sections; hidden: -fvisibility=hidden)
// ---------------------------------------------------------------------------
extern const char *const am_api_names[AM_API_N];
extern const char *const am_path_names[AM_PATH_N];
extern const char *const am_sys_names[AM_SYS_N];
extern AM_TLS am_thread am_me;
extern _Atomic(am_thread *) am_living[AM_LIVING];
extern _Atomic uint64_t am_unlisted;
extern am_g_t am_g;
extern am_real_t am_real;
extern _Atomic int am_state;
extern char am_boot[1 << 16];
extern _Atomic size_t am_boot_used;
extern am_code_t am_code[AM_CODE_MAX];
extern int am_ncode;
extern uintptr_t am_alloc_base;
extern const char *am_needed[32];
extern int am_nneeded;
extern uint8_t *am_shadow;
extern am_tab_t am_tab[AM_STRIPES];
extern am_block am_tab_first[AM_STRIPES][AM_TAB_FIRST];
extern pthread_key_t am_key;
extern char am_out[1 << 20];  // the record, am_len bytes (am_write_record)
extern size_t am_len;
extern am_start am_starts[1024];

// ---------------------------------------------------------------------------
// Functions shared between sections
// ---------------------------------------------------------------------------
int am_is_boot(const void *p);
void *am_boot_alloc(size_t n);
size_t am_boot_size(const void *p);
void am_resolve(void);
int am_system_library(const char *name);
int am_code_of(struct dl_phdr_info *info, size_t size, void *arg);
void am_find_allocator_code(void);
void am_mark_tracked(uintptr_t lo, size_t n);
void am_map_shadow(void);
void am_tab_drop(int s);
am_block *am_map_blocks(size_t cap);
am_block *am_slot(am_block *e, size_t cap, uintptr_t addr);
int am_tab_put(int s, am_block b, am_block *old);
am_block am_tab_take(int s, uintptr_t addr);
uint64_t am_next_gap(am_thread *t);
uint64_t am_weight(uint64_t req, uint64_t interval);
uint32_t am_window(am_thread *t);
void am_set_left(am_thread *t, uint64_t left);
__attribute__((noinline)) void am_register(am_thread *t);
uint64_t am_rss_kib(void);
__attribute__((noinline)) void am_new_peak(int64_t whole, const int64_t half[2]);
void am_flush_live(am_thread *t);
void am_account(am_thread *t, const am_block *b, int sign);
void am_peak(int64_t *peak, uint64_t *var);
void am_track(am_thread *t, void *p, uint64_t req, uint64_t weight);
void am_allocated(am_thread *t, int api, size_t req, void *p, int sampled, uint64_t cycles, int path);
am_block am_releasing(am_thread *t, void *p);
__attribute__((noinline)) void *am_malloc_slow(am_thread *t, size_t n);
__attribute__((noinline)) void am_free_slow(am_thread *t, void *p);
void *am_realloc(int api, void *p, size_t n, size_t m);
void am_add(uint64_t *to, const uint64_t *from, size_t n);
void am_stop(am_thread *t);
void am_flush(am_thread *t);
void am_thread_end(void *arg);
void *am_trampoline(void *slot);
uint64_t am_now_ns(void);
void am_fork_child(void);
void am_init(void);
void am_write_record(void);
void am_take_layout(int64_t live);

// ---------------------------------------------------------------------------
// Inlined into the hot path
// ---------------------------------------------------------------------------
// Our own code may allocate (pthread_key_create, pthread_atfork, pthread_setspecific):
// those calls go straight to the allocator, uncounted.
static inline void am_harvest(am_thread *t);

static inline void am_own_begin(am_thread *t) {
  if (t->depth == 0) {
    am_harvest(t);
    t->saved_mcd = t->mcd;
    t->saved_fcd = t->fcd;
    t->mcd = t->fcd = 0;
  }
  t->depth++;
}

static inline void am_own_end(am_thread *t) {
  if (--t->depth == 0) {
    t->mcd = t->saved_mcd;
    t->fcd = t->saved_fcd;
  }
}

// The fast paths' calls and bytes since the last slow path, into the counts.
static inline void am_harvest(am_thread *t) {
  if (t->state != 1 || t->depth != 0) return;
  t->c.calls[AM_MALLOC] += t->mwin - t->mcd;
  t->c.calls[AM_FREE] += t->fwin - t->fcd;
  t->c.bytes[AM_MALLOC] += t->mleft_was - t->mleft;
  t->mwin = t->mcd;
  t->fwin = t->fcd;
  t->mleft_was = t->mleft;
}

static inline int am_ready(void) {
  if (AM_LIKELY(atomic_load_explicit(&am_state, memory_order_acquire) == 2)) return 1;
  am_resolve();
  return atomic_load(&am_state) == 2;
}

static inline int am_inside(const void *caller) {
  uintptr_t a = (uintptr_t)caller;
  for (int i = 0; i < am_ncode; i++)
    if (a - am_code[i].lo < am_code[i].hi - am_code[i].lo) return 1;
  return 0;
}

// The "freed" byte of p's bitmap word (the "tracked" byte follows it).
// Addresses above 47 bits (none a malloc returns) alias lower ones.
static inline uint8_t *am_bits_at(uint8_t *shadow, const void *p, unsigned *bit) {
  uintptr_t a = (uintptr_t)p;
  *bit = 1u << ((a >> 3) & 7);
  return shadow + ((a >> 5) & (AM_SHADOW_BYTES - 2));
}

static inline uint8_t *am_bits(const void *p, unsigned *bit) {
  *bit = 0;
  return am_shadow ? am_bits_at(am_shadow, p, bit) : NULL;
}

static inline uint64_t am_hash(uintptr_t a) { return (uint64_t)(a >> 3) * 0x9E3779B97F4A7C15ull; }

static inline int am_stripe(uintptr_t addr) { return (int)(am_hash(addr) >> 58); }

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

// A slow path's start: the thread registered, the fast paths' counts taken.
static inline void am_enter(am_thread *t) {
  if (AM_UNLIKELY(t->state != 1)) am_register(t);
  am_harvest(t);
}

// 1 when this call's cycles are measured (and its address classified): the
// last call of its window. Called once per call of the API, on the slow path.
static inline int am_tick(am_thread *t, uint32_t *cd) {
  if (AM_LIKELY(*cd > 1)) {
    --*cd;
    return 0;
  }
  *cd = am_window(t);
  return 1;
}

static inline int am_sampled(am_thread *t) {
  am_enter(t);
  return am_tick(t, &t->ocd);
}

static inline void am_cycles(am_thread *t, int path, uint64_t c) {
  t->c.samples[path]++;
  t->c.cycles[path] += c;
  t->c.hist[path][am_cycle_bucket(c)]++;
}

#endif  // AM_PROF_H
