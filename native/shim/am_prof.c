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

#define AM_PROF_VERSION 4
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
  int hw_errno;
  int bitmap_full;
} am_g = {.lock = PTHREAD_MUTEX_INITIALIZER, .sample = 1024};

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
  am_own_begin(&am_me);
  am_init();
  am_own_end(&am_me);
}

static inline int am_ready(void) {
  if (AM_LIKELY(atomic_load_explicit(&am_state, memory_order_acquire) == 2)) return 1;
  am_resolve();
  return atomic_load(&am_state) == 2;
}

// ---------------------------------------------------------------------------
// Whose call is it? The allocator's code: the object that serves malloc and
// the libraries it needs beyond the C runtime (tbbmalloc's proxy needs
// libtbbmalloc.so.2, which makes the mmaps).
// ---------------------------------------------------------------------------
#define AM_CODE_MAX 16
static struct {
  uintptr_t lo, hi;
} am_code[AM_CODE_MAX];
static int am_ncode;
static uintptr_t am_alloc_base;
static const char *am_needed[32];
static int am_nneeded;

static int am_system_library(const char *name) {
  static const char *const system[] = {"libc.so",   "libm.so",      "libdl.so",  "libpthread.so",
                                       "librt.so",  "libgcc_s.so",  "ld-linux",  "libstdc++.so",
                                       "libatomic.so"};
  for (size_t i = 0; i < sizeof system / sizeof system[0]; i++)
    if (strncmp(name, system[i], strlen(system[i])) == 0) return 1;
  return 0;
}

static int am_code_of(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size, (void)arg;
  const char *slash = strrchr(info->dlpi_name, '/');
  const char *name = slash ? slash + 1 : info->dlpi_name;
  int wanted = info->dlpi_addr == am_alloc_base && info->dlpi_addr != 0;
  for (int i = 0; !wanted && i < am_nneeded; i++) wanted = strcmp(name, am_needed[i]) == 0;
  for (int i = 0; wanted && i < info->dlpi_phnum && am_ncode < AM_CODE_MAX; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    am_code[am_ncode].lo = info->dlpi_addr + ph->p_vaddr;
    am_code[am_ncode].hi = am_code[am_ncode].lo + ph->p_memsz;
    am_ncode++;
  }
  return 0;
}

static void am_find_allocator_code(void) {
  Dl_info info;
  struct link_map *lm = NULL;
  if (!am_real.malloc || !dladdr1((void *)am_real.malloc, &info, (void **)&lm, RTLD_DL_LINKMAP) ||
      lm == NULL)
    return;
  am_alloc_base = lm->l_addr;
  uintptr_t strtab = 0;
  for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++)
    if (d->d_tag == DT_STRTAB) strtab = d->d_un.d_ptr;
  if (strtab != 0 && strtab < lm->l_addr) strtab += lm->l_addr;  // not relocated in place
  for (const ElfW(Dyn) *d = lm->l_ld; strtab && d->d_tag != DT_NULL; d++) {
    const char *name = (const char *)strtab + d->d_un.d_val;
    if (d->d_tag == DT_NEEDED && am_nneeded < 32 && !am_system_library(name))
      am_needed[am_nneeded++] = name;
  }
  dl_iterate_phdr(am_code_of, NULL);
}

static inline int am_inside(const void *caller) {
  uintptr_t a = (uintptr_t)caller;
  for (int i = 0; i < am_ncode; i++)
    if (a - am_code[i].lo < am_code[i].hi - am_code[i].lo) return 1;
  return 0;
}

// ---------------------------------------------------------------------------
// The bitmap: per 64 bytes of address space two bytes, "freed" and "tracked",
// one bit per 8-byte granule each, over the whole 47-bit user address space:
// 4 TiB reserved once (MAP_NORESERVE), its pages made on first touch, so it
// takes 1/32 of the heap's span and free finds p's bits without a test.
// ---------------------------------------------------------------------------
#define AM_SHADOW_BYTES ((uintptr_t)1 << 42)
static uint8_t *am_shadow;  // NULL if it could not be mapped: free then always takes its slow path

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

// Sets the "tracked" bits of [lo, lo + n), so that free sends those
// addresses to its slow path.
static void am_mark_tracked(uintptr_t lo, size_t n) {
  unsigned bit;
  for (uintptr_t a = lo & ~(uintptr_t)7; a < lo + n; a += 8)
    am_bits_at(am_shadow, (const void *)a, &bit)[1] |= (uint8_t)bit;
}

// A raw mmap, not our counted one. NULL and our start-up buffer are marked
// tracked: free's fast path needs no test for them.
static void am_map_shadow(void) {
  long got = syscall(SYS_mmap, NULL, AM_SHADOW_BYTES, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (got == -1 || got < 0) {
    am_g.bitmap_full = 1;
    return;
  }
  am_shadow = (uint8_t *)got;
  am_mark_tracked(0, 8);
  am_mark_tracked((uintptr_t)am_boot, sizeof am_boot);
}

// ---------------------------------------------------------------------------
// Tracked blocks: address -> requested size and weight, in 64 striped hash
// tables (linear probing, backward-shift deletion) in raw mmap'd memory.
// ---------------------------------------------------------------------------
typedef struct {
  uintptr_t addr;
  uint64_t req, weight;
  uint64_t part;  // 0 or 1 at random (chance below 1/2), else 2: see am_g.part_live
} am_block;

#define AM_STRIPES 64
static struct {
  pthread_mutex_t lock;
  am_block *e;
  size_t cap, n;
} __attribute__((aligned(64))) am_tab[AM_STRIPES];

static inline uint64_t am_hash(uintptr_t a) { return (uint64_t)(a >> 3) * 0x9E3779B97F4A7C15ull; }

// A stripe's first table is small and static, all of them side by side: a
// tracked block costs a cache miss or two on a table the program's data has
// evicted, so the tables of a small heap should take few lines.
#define AM_TAB_FIRST 16
static am_block am_tab_first[AM_STRIPES][AM_TAB_FIRST];

static void am_tab_drop(int s) {
  if (am_tab[s].e && am_tab[s].e != am_tab_first[s])
    syscall(SYS_munmap, am_tab[s].e, am_tab[s].cap * sizeof(am_block));
}

static am_block *am_map_blocks(size_t cap) {
  long got = syscall(SYS_mmap, NULL, cap * sizeof(am_block), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return got == -1 || got < 0 ? NULL : (am_block *)got;
}

static am_block *am_slot(am_block *e, size_t cap, uintptr_t addr) {
  size_t i = (size_t)(am_hash(addr) >> 20) & (cap - 1);
  while (e[i].addr != 0 && e[i].addr != addr) i = (i + 1) & (cap - 1);
  return &e[i];
}

// With the stripe's lock held. 0 if there was no memory for it.
static int am_tab_put(int s, am_block b, am_block *old) {
  if ((am_tab[s].n + 1) * 2 > am_tab[s].cap) {
    size_t cap = am_tab[s].cap ? am_tab[s].cap * 2 : AM_TAB_FIRST;
    am_block *e = cap == AM_TAB_FIRST ? am_tab_first[s] : am_map_blocks(cap);
    if (e == NULL) return 0;
    for (size_t i = 0; i < am_tab[s].cap; i++)
      if (am_tab[s].e[i].addr) *am_slot(e, cap, am_tab[s].e[i].addr) = am_tab[s].e[i];
    am_tab_drop(s);
    am_tab[s].e = e;
    am_tab[s].cap = cap;
  }
  am_block *slot = am_slot(am_tab[s].e, am_tab[s].cap, b.addr);
  *old = *slot;
  am_tab[s].n += slot->addr == 0;
  *slot = b;
  return 1;
}

// With the stripe's lock held: the block's entry, removed (addr 0 if none).
static am_block am_tab_take(int s, uintptr_t addr) {
  am_block none = {0, 0, 0, 0};
  if (am_tab[s].cap == 0) return none;
  size_t mask = am_tab[s].cap - 1;
  am_block *e = am_tab[s].e, *hole = am_slot(e, am_tab[s].cap, addr);
  am_block got = *hole;
  if (got.addr == 0) return none;
  am_tab[s].n--;
  // Backward shift: move later entries of the run into the hole when they may.
  size_t h = (size_t)(hole - e);
  for (size_t j = (h + 1) & mask; e[j].addr != 0; j = (j + 1) & mask) {
    size_t home = (size_t)(am_hash(e[j].addr) >> 20) & mask;
    if (((j - home) & mask) >= ((j - h) & mask)) {
      e[h] = e[j];
      h = j;
    }
  }
  e[h].addr = 0;
  return got;
}

static inline int am_stripe(uintptr_t addr) { return (int)(am_hash(addr) >> 58); }

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

// Bytes until the next tracked block: exponential with mean `interval`
// (a Poisson process over allocated bytes, so that a block of n bytes is
// tracked with probability 1 - exp(-n / interval) whatever came before it).
static uint64_t am_next_gap(am_thread *t) {
  uint64_t interval = atomic_load_explicit(&am_g.interval, memory_order_relaxed);
  t->gap_interval = interval;
  if (interval == 0) return 0;
  t->rng ^= t->rng >> 12, t->rng ^= t->rng << 25, t->rng ^= t->rng >> 27;  // xorshift64*
  double u = (double)(((t->rng * 0x2545F4914F6CDD1Dull) >> 11) + 1) / 9007199254740992.0;
  return 1 + (uint64_t)(-log(u) * (double)interval);
}

// The bytes a tracked block of `req` bytes stands for: req / its chance.
static uint64_t am_weight(uint64_t req, uint64_t interval) {
  if (interval == 0) return req;
  double x = (double)req / (double)interval;
  if (x < 0.0625) return (uint64_t)((double)interval * (1 + x / 2 + x * x / 12) + 0.5);
  return (uint64_t)((double)req / -expm1(-x) + 0.5);
}

// Calls until the next sampled one: uniform in [1, 2N-1], mean N, so that a
// program whose calls repeat with a period dividing N is not always sampled
// at the same point of its period.
static uint32_t am_window(am_thread *t) {
  uint64_t n = am_g.sample;
  if (n <= 1) return 1;
  t->rng ^= t->rng >> 12, t->rng ^= t->rng << 25, t->rng ^= t->rng >> 27;
  return (uint32_t)(1 + ((t->rng * 0x2545F4914F6CDD1Dull) >> 32) % (2 * n - 1));
}

// The gap to the next tracked block: the part below AM_FAST_BYTES is malloc's
// fast-path budget, so that every malloc of AM_FAST_BYTES or more takes the slow path.
static void am_set_left(am_thread *t, uint64_t left) {
  t->mleft = left < AM_FAST_BYTES ? left : AM_FAST_BYTES;
  t->gap_rest = left - t->mleft;
  t->mleft_was = t->mleft;
}

__attribute__((noinline)) static void am_register(am_thread *t) {
  if (t->state == 0 && t->start_tsc == 0) t->start_tsc = am_tsc();
  t->state = 1;
  t->tid = (uint64_t)syscall(SYS_gettid);  // once per thread
  if (t->rng == 0) t->rng = (t->tid * 0x9E3779B97F4A7C15ull) ^ am_tsc() ^ 1;
  am_own_begin(t);
  pthread_setspecific(am_key, t);  // its destructor flushes at thread exit
  am_own_end(t);
  for (int i = 0; t->slot == 0 && i < AM_LIVING; i++) {
    am_thread *none = NULL;
    if (atomic_compare_exchange_strong(&am_living[i], &none, t)) t->slot = i + 1;
  }
  if (t->slot == 0) {
    t->slot = -1;
    atomic_fetch_add(&am_unlisted, 1);
  }
  am_set_left(t, am_next_gap(t));
  t->mcd = t->mwin = am_window(t);
  t->fcd = t->fwin = am_shadow ? am_window(t) : 0;
  t->ocd = am_window(t);
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

// New highs: of the whole sum (the interval grows with it; the peak itself
// at sample 1) and of a half (see `picked`). RSS (a syscall) is read at the
// moments the first half picks, when it grew by 1/32 since the last reading.
__attribute__((noinline)) static void am_new_peak(int64_t whole, const int64_t half[2]) {
  am_real.mutex_lock(&am_g.lock);
  if (whole > am_g.peak_live) {
    am_g.peak_live = whole;
    uint64_t grown = (uint64_t)whole / 2048;
    if (am_g.base_interval != 0 && grown > atomic_load(&am_g.interval))
      atomic_store(&am_g.interval, grown);
  }
  for (int h = 0; h < 2; h++) {
    if (half[h] <= am_g.picked[h]) continue;
    am_g.picked[h] = half[h];
    am_g.told[h] = half[1 - h];
    am_g.told_var[h] = atomic_load(&am_g.part_var[1 - h]);
    am_g.told_shared_var[h] = atomic_load(&am_g.part_var[2]);
    if (h == 0) am_g.peak_blocks = atomic_load(&am_g.live_blocks);
    if (h == 0 && half[0] > am_g.last_rss_check + am_g.last_rss_check / 32) {
      am_g.rss_at_peak_kib = am_rss_kib();
      am_g.last_rss_check = half[0];
    }
  }
  am_real.mutex_unlock(&am_g.lock);
}

// A thread's tracked blocks reach the totals every 8 events (and when it
// ends): the peak is exact to a few blocks per thread.
static void am_flush_live(am_thread *t) {
  if (t->pending == 0) return;
  atomic_fetch_add(&am_g.live_blocks, (uint64_t)t->blocks_delta);
  int64_t sum[3];
  for (int k = 0; k < 3; k++) {
    atomic_fetch_add(&am_g.part_var[k], (uint64_t)t->part_var_delta[k]);
    sum[k] = atomic_fetch_add(&am_g.part_live[k], t->part_delta[k]) + t->part_delta[k];
    t->part_delta[k] = t->part_var_delta[k] = 0;
  }
  t->blocks_delta = 0;
  t->pending = 0;
  int64_t whole = sum[0] + sum[1] + sum[2];
  int64_t half[2] = {2 * sum[0] + sum[2], 2 * sum[1] + sum[2]};
  if (whole > am_g.peak_live || half[0] > am_g.picked[0] || half[1] > am_g.picked[1])
    am_new_peak(whole, half);
}

static void am_account(am_thread *t, const am_block *b, int sign) {
  // A block's variance: (1 - P) / P^2 * req^2, where P = req / weight, so
  // w (w - req); in a half P is halved: 2 w (2 w - req) for twice its sum.
  int64_t w = (int64_t)b->weight, r = (int64_t)b->req;
  int k = (int)b->part;
  t->part_delta[k] += sign * w;
  t->part_var_delta[k] += sign * ((k == 2 ? w * (w - r) : 2 * w * (2 * w - r)) >> 10);
  t->blocks_delta += sign;
  if (++t->pending >= 8 || am_g.base_interval == 0) am_flush_live(t);
}

// The peak of live requested bytes and its variance.
static void am_peak(int64_t *peak, uint64_t *var) {
  if (am_g.base_interval == 0) {  // every block tracked: exact
    *peak = am_g.peak_live;
    *var = 0;
    return;
  }
  *peak = (am_g.told[0] + am_g.told[1]) / 2;
  // The halves' noise is independent; the third part's is shared by both.
  *var = ((am_g.told_var[0] + am_g.told_var[1]) / 4 +
          (am_g.told_shared_var[0] + am_g.told_shared_var[1]) / 2) * 1024;
}

// Tracks block p of `req` bytes (weight: the bytes it stands for).
static void am_track(am_thread *t, void *p, uint64_t req, uint64_t weight) {
  unsigned bit;
  uint8_t *w = am_bits(p, &bit);
  int s = am_stripe((uintptr_t)p);
  t->rng ^= t->rng >> 12, t->rng ^= t->rng << 25, t->rng ^= t->rng >> 27;
  // A block tracked with a chance of 1/2 or more is in both halves: split, it
  // would add more noise (up to 2 req^2) than its own sampling does.
  uint64_t part = weight <= 2 * req ? 2 : (t->rng * 0x2545F4914F6CDD1Dull) >> 63;
  am_block b = {(uintptr_t)p, req, weight, part}, old;
  am_real.mutex_lock(&am_tab[s].lock);
  int ok = w != NULL && am_tab_put(s, b, &old);
  am_real.mutex_unlock(&am_tab[s].lock);
  if (!ok) {
    atomic_fetch_add(&am_g.untracked, 1);
    return;
  }
  if (old.addr) am_account(t, &old, -1);  // its free was not seen (made inside the allocator)
  am_account(t, &b, 1);
  atomic_fetch_or_explicit((_Atomic uint8_t *)(w + 1), (uint8_t)bit, memory_order_release);
}

// A block handed out, on the slow path: counts, sizes; if sampled, new or
// reuse and the usable size; tracked when the byte countdown runs out.
static void am_allocated(am_thread *t, int api, size_t req, void *p, int sampled, uint64_t cycles,
                         int path) {
  t->c.calls[api]++;
  t->c.bytes[api] += req;
  if (api != AM_MALLOC || req >= AM_FAST_BYTES)
    t->c.sizes[api][am_size_bucket(req)]++;
  else if (sampled)
    t->c.sizes_sampled[am_size_bucket(req)]++;
  if (AM_UNLIKELY(p == NULL)) return;
  if (sampled) {
    unsigned bit;
    uint8_t *w = am_bits(p, &bit);
    int reused = w != NULL && (*w & bit);
    t->c.fresh[api] += !reused;
    t->c.reused[api] += reused;
    if (path < 0) path = reused ? AM_P_MALLOC_REUSE : AM_P_MALLOC_NEW;
    am_cycles(t, path, cycles);
    if (am_real.usable_size) {
      t->c.sampled_req += req;
      t->c.sampled_usable += am_real.usable_size(p);
    }
  }
  uint64_t left = t->mleft + t->gap_rest;
  if (t->gap_interval != 0 && req < left) {
    am_set_left(t, left - req);
    return;
  }
  uint64_t interval = t->gap_interval;
  am_set_left(t, am_next_gap(t));
  if (req > 0) am_track(t, p, req, am_weight(req, interval));
}

// A block about to be given back (slow path): no longer tracked, and its
// address marked freed. Returns its entry if it was tracked.
static am_block am_releasing(am_thread *t, void *p) {
  am_block none = {0, 0, 0, 0};
  unsigned bit;
  uint8_t *w = am_bits(p, &bit);
  if (AM_UNLIKELY(w == NULL)) return none;
  if (!(*w & bit)) atomic_fetch_or_explicit((_Atomic uint8_t *)w, (uint8_t)bit, memory_order_relaxed);
  if (!(w[1] & bit)) return none;
  int s = am_stripe((uintptr_t)p);
  am_real.mutex_lock(&am_tab[s].lock);
  am_block b = am_tab_take(s, (uintptr_t)p);
  am_real.mutex_unlock(&am_tab[s].lock);
  atomic_fetch_and_explicit((_Atomic uint8_t *)(w + 1), (uint8_t)~bit, memory_order_relaxed);
  if (b.addr) am_account(t, &b, -1);
  return b;
}

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

__attribute__((noinline)) static void *am_malloc_slow(am_thread *t, size_t n) {
  if (!am_ready()) return am_boot_alloc(n);
  if (t->depth) return am_real.malloc(n);
  am_enter(t);
  int s = am_tick(t, &t->mcd);
  t->mwin = t->mcd;
  uint64_t c = 0;
  void *p;
  AM_TIMED(s, c, p = am_real.malloc(n));
  am_allocated(t, AM_MALLOC, n, p, s, c, -1);
  return p;
}

// The common case: two fields go down, then a jump to the real malloc.
// Sampled calls, a thread's first, calls of AM_FAST_BYTES or more and those
// whose bytes end the fast budget take the slow path.
AM_EXPORT void *malloc(size_t n) {
  am_thread *t = &am_me;
  if (AM_UNLIKELY(t->mcd <= 1 || n >= t->mleft)) return am_malloc_slow(t, n);
  t->mcd--;
  t->mleft -= n;
  return am_real.malloc(n);
}

__attribute__((noinline)) static void am_free_slow(am_thread *t, void *p) {
  if (p == NULL || am_is_boot(p) || !am_ready()) return;
  if (t->depth) {
    am_real.free(p);
    return;
  }
  am_enter(t);
  int s = am_tick(t, am_shadow ? &t->fcd : &t->ocd);
  t->fwin = t->fcd;
  t->c.calls[AM_FREE]++;
  am_releasing(t, p);
  uint64_t c = 0;
  AM_TIMED(s, c, am_real.free(p));
  if (s) am_cycles(t, AM_P_FREE, c);
}

// The common case: the address marked freed (a plain store: only other
// "freed" bits share its byte, and losing one to a race with another thread
// makes one later reuse count as new), then a jump to the real free.
// NULL and our start-up buffer have their "tracked" bits set (am_map_shadow):
// they take the slow path without a test here.
AM_EXPORT void free(void *p) {
  am_thread *t = &am_me;
  if (AM_UNLIKELY(t->fcd <= 1)) {
    am_free_slow(t, p);
    return;
  }
  unsigned bit;
  uint8_t *w = am_bits_at(am_shadow, p, &bit);  // fcd > 0: the bitmap exists
  if (AM_UNLIKELY(w[1] & bit)) {
    am_free_slow(t, p);
    return;
  }
  t->fcd--;
  if (AM_UNLIKELY(!(*w & bit))) *w = (uint8_t)(*w | bit);
  am_real.free(p);
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
  uint64_t c = 0;
  void *p;
  AM_TIMED(s, c, p = am_real.calloc(n, m));
  size_t bytes;
  am_allocated(t, AM_CALLOC, __builtin_mul_overflow(n, m, &bytes) ? 0 : bytes, p, s, c,
               AM_P_CALLOC);
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
  am_block was = {0, 0, 0, 0};
  if (p) was = am_releasing(t, p);
  uint64_t c = 0;
  void *q;
  AM_TIMED(s, c, q = api == AM_REALLOC ? am_real.realloc(p, n) : am_real.reallocarray(p, n, m));
  if (q == NULL && p != NULL && !overflow && bytes != 0 && was.addr) {
    am_track(t, p, was.req, was.weight);  // failed: the old block is still live
  }
  am_allocated(t, api, overflow ? 0 : bytes, q, s, c, AM_P_REALLOC);
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
#define AM_ALIGNED(api, call, size)              \
  am_thread *t = &am_me;                         \
  if (t->depth) return call;                     \
  int s = am_sampled(t);                         \
  uint64_t c = 0;                                \
  void *p;                                       \
  AM_TIMED(s, c, p = call);                      \
  am_allocated(t, api, size, p, s, c, AM_P_ALIGNED); \
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
  uint64_t c = 0;
  int rc;
  AM_TIMED(s, c, rc = am_real.posix_memalign(out, al, n));
  am_allocated(t, AM_POSIX_MEMALIGN, n, rc == 0 ? *out : NULL, s, c, AM_P_ALIGNED);
  return rc;
}

AM_EXPORT size_t malloc_usable_size(void *p) {
  if (p == NULL) return 0;
  if (am_is_boot(p)) return am_boot_size(p);
  if (!am_ready()) return 0;
  am_thread *t = &am_me;
  if (t->depth) return am_real.usable_size(p);
  int s = am_sampled(t);
  uint64_t c = 0;
  size_t n;
  t->c.calls[AM_USABLE_SIZE]++;
  AM_TIMED(s, c, n = am_real.usable_size(p));
  if (s) am_cycles(t, AM_P_USABLE, c);
  return n;
}

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
// Locks the allocator takes
// ---------------------------------------------------------------------------
AM_EXPORT int pthread_mutex_lock(pthread_mutex_t *m) {
  if (AM_UNLIKELY(!am_ready())) return 0;  // single-threaded start-up
  if (AM_LIKELY(!am_inside(__builtin_return_address(0)))) return am_real.mutex_lock(m);
  am_thread *t = &am_me;
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
  if (am_inside(__builtin_return_address(0))) {
    am_me.c.try_calls++;
    am_me.c.try_failed += r != 0;
  }
  return r;
}

AM_EXPORT int pthread_mutex_unlock(pthread_mutex_t *m) {
  if (AM_UNLIKELY(!am_ready())) return 0;
  am_me.c.unlock_calls += am_inside(__builtin_return_address(0));
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
// No fast path until the thread registers again; every count is in t->c.
static void am_stop(am_thread *t) {
  t->mcd = t->fcd = t->saved_mcd = t->saved_fcd = t->mwin = t->fwin = 0;
  t->mleft = t->mleft_was = t->gap_rest = 0;
}

static void am_flush(am_thread *t) {
  am_harvest(t);
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
  am_stop(t);  // its next call registers it again
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
  // The child starts clean: its record holds only what it does itself, the
  // parent's other threads do not exist in it, and the blocks it inherited
  // are not tracked (their frees count, their bytes do not).
  for (int i = 0; i < AM_LIVING; i++) atomic_store(&am_living[i], NULL);
  atomic_store(&am_unlisted, 0);
  for (int s = 0; s < AM_STRIPES; s++) {
    pthread_mutex_init(&am_tab[s].lock, NULL);
    am_tab_drop(s);
    memset(am_tab_first[s], 0, sizeof am_tab_first[s]);
    am_tab[s].e = NULL;
    am_tab[s].cap = am_tab[s].n = 0;
  }
  memset(&am_g.c, 0, sizeof am_g.c);
  memset(am_g.threads, 0, sizeof am_g.threads);
  am_g.threads_seen = am_g.threads_cycles = am_g.threads_alloc_cycles = 0;
  for (int k = 0; k < 3; k++) {
    atomic_store(&am_g.part_live[k], 0);
    atomic_store(&am_g.part_var[k], 0);
  }
  for (int h = 0; h < 2; h++) {
    am_g.picked[h] = am_g.told[h] = 0;
    am_g.told_var[h] = am_g.told_shared_var[h] = 0;
  }
  atomic_store(&am_g.live_blocks, 0);
  atomic_store(&am_g.untracked, 0);
  am_g.peak_live = am_g.last_rss_check = 0;
  am_g.peak_blocks = am_g.rss_at_peak_kib = 0;
  pthread_mutex_init(&am_g.lock, NULL);
  memset(&am_me.c, 0, sizeof am_me.c);
  am_me.slot = 0;
  am_stop(&am_me);  // registers again at its next call
  am_me.state = 0;
  memset(am_me.part_delta, 0, sizeof am_me.part_delta);
  memset(am_me.part_var_delta, 0, sizeof am_me.part_var_delta);
  am_me.blocks_delta = 0;
  am_me.pending = 0;
  atomic_store(&am_g.interval, am_g.base_interval);
  am_me.start_tsc = am_tsc();
  am_g.tsc0 = am_tsc();
  am_g.ns0 = am_now_ns();
}

static void am_init(void) {
  const char *s = getenv("AM_PROF_SAMPLE");
  if (s && *s) {
    uint64_t n = 0;
    for (; *s >= '0' && *s <= '9'; s++) n = n * 10 + (uint64_t)(*s - '0');
    am_g.sample = n == 0 ? 1 : n > (1u << 30) ? (1u << 30) : n;  // windows fit 32 bits
  }
  // One tracked block per 32 x sample bytes on average (32 KiB by default: a
  // tracked block costs some 400 ns of cold misses); sample 1: every block.
  am_g.base_interval = am_g.sample == 1 ? 0 : 32 * am_g.sample;
  am_map_shadow();
  atomic_store(&am_g.interval, am_g.base_interval);
  am_find_allocator_code();
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

// The record: one JSON line (a "prof" record, see records.py), built in a
// static buffer without stdio.
static char am_out[1 << 20];
static size_t am_len;
static int am_cut;  // something did not fit

static void am_s(const char *s) {
  size_t n = strlen(s);
  if (am_len + n < sizeof am_out) {
    memcpy(am_out + am_len, s, n);
    am_len += n;
  } else {
    am_cut = 1;
  }
}

static void am_u(uint64_t v) {
  char digits[24];
  int i = 0;
  do digits[i++] = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  digits[i] = 0;
  for (int j = 0; j < i / 2; j++) {
    char t = digits[j];
    digits[j] = digits[i - 1 - j];
    digits[i - 1 - j] = t;
  }
  am_s(digits);
}

static void am_i(int64_t v) {
  if (v < 0) {
    am_s("-");
    am_u((uint64_t)(-v));
  } else {
    am_u((uint64_t)v);
  }
}

// A JSON string: a program's path may hold quotes, backslashes or controls.
static void am_js(const char *s) {
  static const char hex[] = "0123456789abcdef";
  am_s("\"");
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    char esc[7] = {(char)*c, 0};
    if (*c == '"' || *c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)*c;
      esc[2] = 0;
    } else if (*c < 0x20) {
      memcpy(esc, "\\u00", 4);
      esc[4] = hex[*c >> 4];
      esc[5] = hex[*c & 15];
      esc[6] = 0;
    }
    am_s(esc);
  }
  am_s("\"");
}

// `sep` then "key": — sep is "{" for an object's first key, else ",".
static void am_k(const char *sep, const char *key) {
  am_s(sep);
  am_js(key);
  am_s(":");
}

static void am_kv(const char *sep, const char *key, uint64_t v) {
  am_k(sep, key);
  am_u(v);
}

// "name":[v0,v1,...] without the trailing zeros.
static void am_list(const char *sep, const char *name, const uint64_t *v, int n) {
  int last = n - 1;
  while (last > 0 && v[last] == 0) last--;
  am_k(sep, name);
  for (int i = 0; i <= last; i++) {
    am_s(i ? "," : "[");
    am_u(v[i]);
  }
  am_s("]");
}

// An object closes with "}" or, when nothing was in it, is "{}".
static void am_close(const char *sep) { am_s(*sep == '{' ? "{}" : "}"); }

// "key":{"name":[...],...}: row i of `rows` (`width` values each) under names[i],
// for the rows whose `present` count is not zero.
static void am_lists(const char *key, const char *const *names, int n, const uint64_t *present,
                     const uint64_t *rows, int width) {
  const char *sep = "{";
  am_k(",", key);
  for (int i = 0; i < n; i++) {
    if (!present[i]) continue;
    am_list(sep, names[i], rows + (size_t)i * (size_t)width, width);
    sep = ",";
  }
  am_close(sep);
}

static void am_write_threads(void) {
  am_k(",", "threads");
  am_kv("{", "count", am_g.threads_seen);
  am_kv(",", "cycles", am_g.threads_cycles);
  am_kv(",", "alloc_cycles", am_g.threads_alloc_cycles);
  am_s("}");
  am_k(",", "threads_list");
  am_s("[");
  for (uint64_t i = 0; i < am_g.threads_seen && i < AM_MAX_THREADS; i++) {
    am_kv(i ? ",{" : "{", "tid", am_g.threads[i].tid);
    am_kv(",", "cycles", am_g.threads[i].cycles);
    am_kv(",", "alloc_cycles", am_g.threads[i].alloc_cycles);
    am_s("}");
  }
  am_s("]");
}

// "key":{"name":{"field":v,...},...}: entry i holds columns[f][i] under
// fields[f], for the entries whose first column is not zero.
static void am_counters(const char *key, const char *const *names, int n,
                        const char *const *fields, const uint64_t *const *columns, int nfields) {
  const char *sep = "{";
  am_k(",", key);
  for (int i = 0; i < n; i++) {
    if (!columns[0][i]) continue;
    am_k(sep, names[i]);
    for (int f = 0; f < nfields; f++) am_kv(f ? "," : "{", fields[f], columns[f][i]);
    am_s("}");
    sep = ",";
  }
  am_close(sep);
}

static void am_write_api(const am_counts *c) {
  static const char *const fields[] = {"calls", "bytes", "sampled_new", "sampled_reuse"};
  const uint64_t *const columns[] = {c->calls, c->bytes, c->fresh, c->reused};
  am_counters("api", am_api_names, AM_API_N, fields, columns, 4);
  am_lists("sizes", am_api_names, AM_API_N, c->calls, &c->sizes[0][0], AM_SIZE_BUCKETS);
  am_k(",", "sizes_sampled");
  if (c->calls[AM_MALLOC]) {
    am_list("{", am_api_names[AM_MALLOC], c->sizes_sampled, AM_SIZE_BUCKETS);
    am_s("}");
  } else {
    am_s("{}");
  }
}

static void am_write_paths(const am_counts *c) {
  static const char *const fields[] = {"samples", "cycles"};
  const uint64_t *const columns[] = {c->samples, c->cycles};
  am_counters("path", am_path_names, AM_PATH_N, fields, columns, 2);
  am_lists("hist", am_path_names, AM_PATH_N, c->samples, &c->hist[0][0], AM_HIST);
}

static void am_write_sys(const am_counts *c) {
  am_k(",", "sys");
  for (int k = 0; k < AM_SYS_N; k++) {
    am_k(k ? "," : "{", am_sys_names[k]);
    am_kv("{", "in_calls", c->sys_calls[k][1]);
    am_kv(",", "in_cycles", c->sys_cycles[k][1]);
    am_kv(",", "in_bytes", c->sys_bytes[k][1]);
    am_kv(",", "out_calls", c->sys_calls[k][0]);
    am_kv(",", "out_cycles", c->sys_cycles[k][0]);
    am_kv(",", "out_bytes", c->sys_bytes[k][0]);
    am_s("}");
  }
  am_s("}");
  am_k(",", "locks");
  am_kv("{", "lock_calls", c->lock_calls);
  am_kv(",", "contended", c->lock_contended);
  am_kv(",", "wait_cycles", c->lock_wait);
  am_kv(",", "trylock_calls", c->try_calls);
  am_kv(",", "trylock_failed", c->try_failed);
  am_kv(",", "unlock_calls", c->unlock_calls);
  am_s("}");
}

static void am_write_memory(const am_counts *c) {
  int64_t peak;
  uint64_t var;
  am_peak(&peak, &var);
  am_k(",", "memory");
  am_kv("{", "peak_requested", (uint64_t)(peak > 0 ? peak : 0));
  am_kv(",", "peak_requested_sd", (uint64_t)sqrt((double)var));
  am_kv(",", "peak_tracked_blocks", am_g.peak_blocks);
  am_kv(",", "rss_at_peak_kib", am_g.rss_at_peak_kib);
  am_k(",", "final_requested");
  am_i(atomic_load(&am_g.part_live[0]) + atomic_load(&am_g.part_live[1]) +
       atomic_load(&am_g.part_live[2]));
  am_kv(",", "track_interval", atomic_load(&am_g.interval));
  am_kv(",", "sampled_requested", c->sampled_req);
  am_kv(",", "sampled_usable", c->sampled_usable);
  am_kv(",", "untracked", atomic_load(&am_g.untracked));
  am_kv(",", "bitmap_full", (uint64_t)am_g.bitmap_full);
  am_kv(",", "threads_unmerged", atomic_load(&am_unlisted));
  am_s("}");
}

static void am_write_record(void) {
  const am_counts *c = &am_g.c;
  char exe[1024];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  Dl_info next;
  const char *served = am_real.malloc && dladdr((void *)am_real.malloc, &next) ? next.dli_fname : "";
  uint64_t ns = am_now_ns() - am_g.ns0, tsc = am_tsc() - am_g.tsc0;
  am_len = 0;
  am_cut = 0;
  am_k("{", "am");
  am_js("prof");
  am_kv(",", "v", AM_PROF_VERSION);
  am_kv(",", "pid", (uint64_t)getpid());
  am_kv(",", "ppid", (uint64_t)getppid());
  am_k(",", "exe");
  am_js(exe);
  am_k(",", "next_malloc");
  am_js(served);
  am_kv(",", "sample", am_g.sample);
  am_kv(",", "fast_bytes", AM_FAST_BYTES);
  am_kv(",", "tsc_per_us", ns ? tsc * 1000 / ns : 0);
  am_kv(",", "hw_errno", (uint64_t)am_g.hw_errno);
  am_write_threads();
  am_write_api(c);
  am_write_paths(c);
  am_write_sys(c);
  am_write_memory(c);
  am_s("}\n");
  // A record that did not fit is not written: half a line would not parse, and
  // the run then says it has no profile rather than a wrong one.
  if (am_cut) am_len = 0;
}

// A program that never allocates still gets its record (and its clock).
__attribute__((constructor)) static void am_begin(void) { am_ready(); }

__attribute__((destructor)) static void am_exit(void) {
  if (atomic_load(&am_state) != 2) return;
  const char *path = getenv("AM_PROF_OUT");
  am_thread *t = &am_me;
  am_own_begin(t);  // whatever runs from here on is not the program's
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
