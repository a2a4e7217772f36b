// libamrec.so — allocmark's recorder (allocmark record): every allocation call
// of every thread, in order, as it happens (the recording format: am_trace.h).
//
// Preloaded in front of the allocator (LD_PRELOAD="libamrec.so <allocator>.so"),
// it forwards each call of the allocation API to the next definition and
// appends one event to its thread's buffer: the call, its sizes, the addresses
// it took and gave, and its place in one order of all the process's events (a
// counter, drawn before a block is given back and after one is handed out: an
// address is given back before it is handed out again, in that order, whatever
// the threads). A full buffer is written with one write() to AM_REC_OUT, opened
// O_APPEND: a chunk is never split or interleaved with another thread's, the
// file grows as the program runs, and nothing is held whole.
//
// Threads: each gets an index (0: the first, main); a thread's creation is an
// event of its creator (pthread_create), its end one of its own. Threads still
// alive at exit have the whole events of their buffers written by the exiting
// thread. Processes: every image (a fork's child, an exec) writes a first chunk
// with an id of its own and, at exit, one with what the recorder timed: one call
// in AM_REC_TIMED per thread has the cycles of the real call and of the whole
// wrapper counted, which puts allocation's share of the program's CPU time, with
// the recorder's own cost taken out. C++'s operator new and delete are seen
// where they call malloc and free (libstdc++'s do; an allocator that defines
// its own bypasses them: allocmark records under glibc by default).
//
// Calls made inside the allocator (a realloc made of malloc and free, say) and
// inside pthread_create (a thread's TLS: the replay's threads make their own) are
// not recorded again; a thread's calls after its key destructor ran (glibc
// frees its thread state later) are its own, its record taken again only once
// the thread is gone. Not recorded, and said by allocmark: the program's own
// touches of its memory; the buffers of a process that ends without exit
// (SIGKILL, _exit, exec) or of threads past AM_REC_SLOTS living at once. Nothing
// here allocates: buffers and thread records are mmap'd or static.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "am_real.h"
#include "am_trace.h"

#define AM_EXPORT __attribute__((visibility("default")))
#define AM_TLS __thread __attribute__((tls_model("initial-exec")))
#define AM_LIKELY(x) __builtin_expect(!!(x), 1)
#define AM_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define AM_REC_TIMED 64     // one call in this many per thread is timed
#define AM_REC_OFF_CPU 500000  // cycles (0.1-0.25 ms): a timed call this long was preempted
#define AM_REC_SLOTS 4096   // threads recorded at once
#define AM_REC_FD 900       // the recording's descriptor: above a program's usual ones
#define AM_HEAD ((uint32_t)sizeof(am_chunk))

// One thread's recording. Only its thread writes events; the buffer is written
// out under `flushing`, by its thread or, at exit, by the exiting one.
typedef struct {
  _Atomic int used;      // taken by a thread
  _Atomic int flushing;  // its buffer is being written (or, at exit, was taken)
  _Atomic int ended;     // its thread's key destructor ran: taken again once the thread is gone
  int stopped;           // the process is exiting: nothing more is recorded
  uint32_t index;
  pid_t tid;
  uint8_t *buf;                // AM_HEAD bytes of chunk header, then the events
  uint32_t len, events;        // of the chunk being filled
  _Atomic uint64_t committed;  // events << 32 | len: what is whole in it
  uint64_t first, prev;        // order of the chunk's first event, of the last one
  uintptr_t addr;              // the last address written
  uint32_t countdown;
  uint64_t calls, timed, timed_call, timed_whole;
} am_rthread;


static am_real_t am_real;
static _Atomic int am_state;  // 0 unresolved, 1 resolving, 2 ready
static am_rthread am_threads[AM_REC_SLOTS];
static AM_TLS am_rthread *am_me;
static AM_TLS int am_depth;  // > 0: our own code, or inside operator new
static _Atomic uint64_t am_order;
static _Atomic uint32_t am_next_index;
static _Atomic int am_closing;
static _Atomic uint64_t am_calls, am_timed, am_timed_call, am_timed_whole;
static _Atomic uint64_t am_flush_cycles, am_lost;
static uint64_t am_process, am_tsc0, am_ns0;
static uint64_t am_tsc_cost;  // cycles two back-to-back counter reads differ by (median)
static uint64_t am_tsc_per_ms = 2000000;  // the counter's rate, measured at start
static int am_fd = -1;
static dev_t am_dev;
static ino_t am_ino;
static char am_path[4096];
static pthread_key_t am_key;

// dlsym allocates while the real functions are looked up: a static buffer
// serves it, never freed.
static _Alignas(64) char am_boot[1 << 16];
static _Atomic size_t am_boot_used;

static int am_is_boot(const void *p) {
  return (const char *)p >= am_boot && (const char *)p < am_boot + sizeof am_boot;
}

static void *am_boot_alloc(size_t n) {
  size_t need = (n + 15) & ~(size_t)15;
  size_t at = atomic_fetch_add(&am_boot_used, need);
  return n > sizeof am_boot || at + need > sizeof am_boot ? NULL : am_boot + at;
}

static uint64_t am_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// ---------------------------------------------------------------------------
// The file: written only through our descriptor, checked to be the recording
// still (a program may close descriptors it did not open, and reuse the number).
// ---------------------------------------------------------------------------
static void am_open(void) {
  int fd = (int)syscall(SYS_open, am_path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  int high = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, AM_REC_FD);
  syscall(SYS_close, fd);
  struct stat st;
  if (high < 0 || syscall(SYS_fstat, high, &st) != 0) return;
  am_fd = high;
  am_dev = st.st_dev;
  am_ino = st.st_ino;
}

static int am_ours(void) {
  struct stat st;
  return am_fd >= 0 && syscall(SYS_fstat, am_fd, &st) == 0 && st.st_dev == am_dev &&
         st.st_ino == am_ino;
}

// One chunk, whole, in one write (O_APPEND); 0 if it could not be written.
static int am_write(const void *data, size_t n) {
  if (!am_ours()) {
    am_fd = -1;
    am_open();
    if (am_fd < 0) return 0;
  }
  long w = syscall(SYS_write, am_fd, data, n);
  return w == (long)n;
}

static void am_put_chunk(uint16_t kind, const void *payload, uint32_t bytes) {
  uint8_t out[AM_HEAD + 1024];
  if (bytes > sizeof out - AM_HEAD) return;
  am_chunk h = {AM_REC_MAGIC, AM_REC_VERSION, kind, am_process, 0, bytes, 0, 0, 0};
  memcpy(out, &h, AM_HEAD);
  memcpy(out + AM_HEAD, payload, bytes);
  am_write(out, AM_HEAD + bytes);
}

// The thread's CPU time, in counter cycles at the rate measured at start: a write
// that waits for the disk costs the program nothing of its CPU.
static uint64_t am_thread_cycles(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) * am_tsc_per_ms / 1000000u;
}

// The whole events of a thread's buffer, as a chunk; its caller holds `flushing`.
static void am_write_events(am_rthread *t, uint64_t committed) {
  uint32_t len = (uint32_t)committed, events = (uint32_t)(committed >> 32);
  if (events == 0) return;
  uint64_t c0 = am_thread_cycles();
  am_chunk h = {AM_REC_MAGIC, AM_REC_VERSION, AM_CHUNK_EVENTS, am_process, t->index,
                len - AM_HEAD, t->first, events, 0};
  memcpy(t->buf, &h, AM_HEAD);
  if (!am_write(t->buf, len)) atomic_fetch_add(&am_lost, events);
  atomic_fetch_add(&am_flush_cycles, am_thread_cycles() - c0);
}

static void am_restart(am_rthread *t) {
  t->len = AM_HEAD;
  t->events = 0;
  t->addr = 0;
  atomic_store_explicit(&t->committed, AM_HEAD, memory_order_release);
}

// The thread's buffer written out. At exit the exiting thread holds every other
// thread's `flushing` for good: such a thread stops recording here.
static void am_flush(am_rthread *t) {
  if (atomic_exchange(&t->flushing, 1)) {
    if (atomic_load(&am_closing)) {
      t->stopped = 1;
      return;
    }
    while (atomic_exchange(&t->flushing, 1)) _mm_pause();
  }
  am_write_events(t, atomic_load(&t->committed));
  am_restart(t);
  atomic_store(&t->flushing, 0);
}

// ---------------------------------------------------------------------------
// Threads
// ---------------------------------------------------------------------------
static void am_settle(am_rthread *t);

// A thread that ended still frees after its key destructor ran (glibc frees its
// thread-local state later): its record stays its own until the thread is gone.
static int am_reclaim(am_rthread *t) {
  int was = 1;
  if (!atomic_load(&t->ended) || syscall(SYS_tgkill, getpid(), t->tid, 0) == 0 || errno != ESRCH ||
      !atomic_compare_exchange_strong(&t->ended, &was, 0))
    return 0;
  am_write_events(t, atomic_load(&t->committed));  // its last events, after its end
  am_settle(t);
  return 1;
}

static am_rthread *am_take(uint32_t index) {
  if (atomic_load(&am_closing)) return NULL;
  for (int i = 0; i < AM_REC_SLOTS; i++) {
    am_rthread *t = &am_threads[i];
    int free_slot = 0;
    if (atomic_load(&t->used) ? !am_reclaim(t) : !atomic_compare_exchange_strong(&t->used, &free_slot, 1))
      continue;
    if (t->buf == NULL) {
      void *m = mmap(NULL, AM_REC_BUF + AM_HEAD + AM_REC_EVENT_MAX, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) {
        atomic_store(&t->used, 0);
        return NULL;
      }
      t->buf = m;
    }
    t->index = index;
    t->tid = (pid_t)syscall(SYS_gettid);
    t->stopped = 0;
    t->countdown = AM_REC_TIMED;
    t->calls = t->timed = t->timed_call = t->timed_whole = 0;
    atomic_store(&t->flushing, 0);
    am_restart(t);
    return t;
  }
  return NULL;
}

static void am_settle(am_rthread *t) {  // its counts into the process's
  atomic_fetch_add(&am_calls, t->calls);
  atomic_fetch_add(&am_timed, t->timed);
  atomic_fetch_add(&am_timed_call, t->timed_call);
  atomic_fetch_add(&am_timed_whole, t->timed_whole);
  t->calls = t->timed = t->timed_call = t->timed_whole = 0;
}

static void am_register(uint32_t index) {
  am_depth++;
  am_me = am_take(index);
  if (am_me) pthread_setspecific(am_key, am_me);
  am_depth--;
}

static uint8_t *am_event(am_rthread *t, int tag, uint64_t order);
static void am_commit(am_rthread *t, uint8_t *e, uint64_t c0, uint64_t call);

static void am_thread_end(void *arg) {
  am_rthread *t = arg;
  am_depth++;
  if (!t->stopped) {
    uint8_t *e = am_event(t, AM_OP_END, atomic_fetch_add(&am_order, 1));
    if (e) am_commit(t, e, 0, 0);
  }
  atomic_store(&t->ended, 1);
  am_depth--;
}

typedef struct {
  void *(*fn)(void *);
  void *arg;
  uint32_t index;
  _Atomic int busy;
} am_start;

static am_start am_starts[1024];

static void *am_trampoline(void *slot) {
  am_start *s = slot;
  void *(*fn)(void *) = s->fn;
  void *arg = s->arg;
  uint32_t index = s->index;
  atomic_store(&s->busy, 0);
  am_register(index);
  return fn(arg);
}

// ---------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------
static inline uint64_t am_next(void) {
  return atomic_fetch_add_explicit(&am_order, 1, memory_order_relaxed);
}

// The event's tag and its step in the order; NULL when the thread is not recorded.
static uint8_t *am_event(am_rthread *t, int tag, uint64_t order) {
  if (AM_UNLIKELY(t->len + AM_REC_EVENT_MAX > AM_HEAD + AM_REC_BUF)) am_flush(t);
  if (AM_UNLIKELY(t->stopped)) return NULL;
  if (t->events == 0) t->first = t->prev = order;
  uint8_t *e = t->buf + t->len;
  *e++ = (uint8_t)tag;
  e = am_put(e, order - t->prev);
  t->prev = order;
  return e;
}

static inline uint8_t *am_addr(am_rthread *t, uint8_t *e, const void *p) {
  if (p == NULL) return e;
  e = am_put(e, am_zigzag((int64_t)((uintptr_t)p - t->addr)));
  t->addr = (uintptr_t)p;
  return e;
}

// The event made whole; a timed call (c0: its wrapper's start) adds its cycles
// inside the allocator (`call`) and in the whole wrapper.
// A timed call: its cycles inside the allocator (`call`, ended by one counter read)
// and in the whole wrapper since c0, less what reading the counter cost: the read
// ending `call`, and `reads` more in the wrapper's own time (the last one here).
static void am_time(am_rthread *t, uint64_t c0, uint64_t call, uint64_t reads) {
  uint64_t whole = __rdtsc() - c0, own = whole > call ? whole - call : 0;
  // The thread was off the CPU meantime (the counter runs on): one such sample would
  // count 64 times. Not a call's cost: left out (a call of the allocator's that takes
  // this long, an munmap of gigabytes, is left out with them).
  if (whole > AM_REC_OFF_CPU) return;
  call = call > am_tsc_cost ? call - am_tsc_cost : 0;
  own = own > reads * am_tsc_cost ? own - reads * am_tsc_cost : 0;
  t->timed++;
  t->timed_call += call;
  t->timed_whole += call + own;
}

static void am_commit(am_rthread *t, uint8_t *e, uint64_t c0, uint64_t call) {
  t->len = (uint32_t)(e - t->buf);
  t->events++;
  t->calls++;
  atomic_store_explicit(&t->committed, (uint64_t)t->events << 32 | t->len, memory_order_release);
  if (c0) am_time(t, c0, call, 1);
}

// The calling thread's recording, or NULL: not ready, our own code, no slot.
static inline am_rthread *am_self(void);

// A call: whether it is timed, and its cycles' start.
static inline uint64_t am_clock(am_rthread *t) {
  if (AM_LIKELY(--t->countdown)) return 0;
  t->countdown = AM_REC_TIMED;
  return __rdtsc() | 1;
}

// ---------------------------------------------------------------------------
// Start, fork, exit
// ---------------------------------------------------------------------------
static uint64_t am_random(void) {
  uint64_t v = 0;
  if (syscall(SYS_getrandom, &v, sizeof v, 0) != (long)sizeof v || v == 0)
    v = __rdtsc() ^ ((uint64_t)getpid() << 32) ^ 1;
  return v;
}

static void am_announce(uint64_t parent) {
  am_rec_process p = {(uint32_t)getpid(), (uint32_t)getppid(), parent, {0}, {0}};
  long n = syscall(SYS_readlink, "/proc/self/exe", p.exe, sizeof p.exe - 1);
  if (n < 0) p.exe[0] = 0;
  Dl_info where;  // what serves malloc behind the recorder: allocmark checks it
  if (am_real.malloc && dladdr((void *)am_real.malloc, &where) && where.dli_fname)
    strncpy(p.next, where.dli_fname, sizeof p.next - 1);
  am_put_chunk(AM_CHUNK_PROCESS, &p, sizeof p);
}

static void am_fork_child(void) {
  uint64_t parent = am_process;
  am_process = am_random();
  am_rthread *mine = am_me;
  for (int i = 0; i < AM_REC_SLOTS; i++) {  // the parent's other threads are not here
    atomic_store(&am_threads[i].used, &am_threads[i] == mine);
    atomic_store(&am_threads[i].flushing, 0);
    atomic_store(&am_threads[i].ended, 0);
  }
  atomic_store(&am_next_index, 1);
  atomic_store(&am_calls, 0);
  atomic_store(&am_timed, 0);
  atomic_store(&am_timed_call, 0);
  atomic_store(&am_timed_whole, 0);
  atomic_store(&am_flush_cycles, 0);
  atomic_store(&am_lost, 0);
  am_tsc0 = __rdtsc();
  am_ns0 = am_ns();
  if (mine) {  // what it had not written is the parent's
    mine->index = 0;
    mine->tid = (pid_t)syscall(SYS_gettid);
    mine->calls = mine->timed = mine->timed_call = mine->timed_whole = 0;
    am_restart(mine);
  }
  am_announce(parent);
}

// The counter's cycles per millisecond, over 0.2 ms of spinning (once a process).
static uint64_t am_counter_rate(void) {
  uint64_t n0 = am_ns(), c0 = __rdtsc(), n1;
  while ((n1 = am_ns()) - n0 < 200000) _mm_pause();
  uint64_t rate = (__rdtsc() - c0) * 1000000u / (n1 - n0);
  return rate ? rate : 2000000;
}

// What timing nothing reads: the median of 63 back-to-back counter differences.
static uint64_t am_read_cost(void) {
  uint64_t d[63];
  for (int i = 0; i < 63; i++) {
    uint64_t a = __rdtsc();
    d[i] = __rdtsc() - a;
  }
  for (int i = 1; i < 63; i++)  // insertion sort: 63 values, once
    for (int j = i; j > 0 && d[j] < d[j - 1]; j--) {
      uint64_t x = d[j];
      d[j] = d[j - 1];
      d[j - 1] = x;
    }
  return d[31];
}

static void am_resolve(void) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&am_state, &expected, 1)) return;
  am_find_real(&am_real);
  am_depth++;
  const char *out = getenv("AM_REC_OUT");
  if (out && strlen(out) < sizeof am_path) {
    strcpy(am_path, out);
    am_open();
  }
  am_process = am_random();
  am_tsc_cost = am_read_cost();
  am_tsc_per_ms = am_counter_rate();
  am_tsc0 = __rdtsc();
  am_ns0 = am_ns();
  pthread_key_create(&am_key, am_thread_end);
  pthread_atfork(NULL, NULL, am_fork_child);
  if (am_fd >= 0) am_announce(0);
  atomic_store(&am_state, 2);
  if (am_fd >= 0) am_register(atomic_fetch_add(&am_next_index, 1));  // the first thread: main
  am_depth--;
}

static inline am_rthread *am_self(void) {
  if (AM_UNLIKELY(atomic_load_explicit(&am_state, memory_order_acquire) != 2)) {
    am_resolve();
    if (atomic_load(&am_state) != 2) return NULL;
  }
  am_rthread *t = am_me;
  if (AM_LIKELY(t != NULL && am_depth == 0)) return t;
  if (am_depth || am_fd < 0 || atomic_load(&am_closing)) return NULL;
  am_register(atomic_fetch_add(&am_next_index, 1));  // a thread we did not see start
  return am_me;
}

__attribute__((constructor)) static void am_begin(void) { am_self(); }

__attribute__((destructor)) static void am_exit(void) {
  if (atomic_load(&am_state) != 2 || am_fd < 0) return;
  am_depth++;
  am_rthread *mine = am_me;
  if (mine) am_flush(mine);
  atomic_store(&am_closing, 1);
  // Every other thread's whole events, its buffer then held for good: a thread
  // still running stops recording at its next chunk.
  for (int i = 0; i < AM_REC_SLOTS; i++) {
    am_rthread *t = &am_threads[i];
    if (!atomic_load(&t->used)) continue;
    while (atomic_exchange(&t->flushing, 1)) _mm_pause();
    t->stopped = 1;
    if (t != mine) am_write_events(t, atomic_load_explicit(&t->committed, memory_order_acquire));
    am_settle(t);
  }
  struct timespec cpu;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  uint64_t wall = am_ns() - am_ns0, cycles = __rdtsc() - am_tsc0;
  am_rec_exit x = {
      (uint64_t)cpu.tv_sec * 1000000000u + (uint64_t)cpu.tv_nsec,
      wall,
      wall >= 1000 ? cycles / (wall / 1000) : 0,
      atomic_load(&am_calls),
      atomic_load(&am_timed),
      atomic_load(&am_timed_call),
      atomic_load(&am_timed_whole),
      atomic_load(&am_flush_cycles),
      atomic_load(&am_lost)};
  am_put_chunk(AM_CHUNK_EXIT, &x, sizeof x);
}

// ---------------------------------------------------------------------------
// The allocation API
// ---------------------------------------------------------------------------
// A call that hands out a block: the real call, then its event (ordered after it).
#define AM_HANDS_OUT(op, call, ...)                           \
  am_rthread *t = am_self();                                  \
  if (t == NULL) return call;                                 \
  uint64_t c0 = am_clock(t);                                  \
  am_depth++;                                                 \
  void *p = call;                                             \
  am_depth--;                                                 \
  uint64_t c1 = c0 ? __rdtsc() : 0;                           \
  uint8_t *e = am_event(t, (op) | (p ? 0 : AM_NULL_RESULT), am_next()); \
  if (e) {                                                    \
    uint64_t args[] = {__VA_ARGS__};                          \
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) e = am_put(e, args[i]); \
    am_commit(t, am_addr(t, e, p), c0, c1 - c0);              \
  }                                                           \
  return p

AM_EXPORT void *malloc(size_t n) {
  if (AM_UNLIKELY(atomic_load_explicit(&am_state, memory_order_relaxed) == 1))
    return am_boot_alloc(n);
  AM_HANDS_OUT(AM_OP_MALLOC, am_real.malloc(n), n);
}

AM_EXPORT void *calloc(size_t n, size_t m) {
  if (AM_UNLIKELY(atomic_load_explicit(&am_state, memory_order_relaxed) == 1))
    return am_boot_alloc(n * m);  // static: zeroed
  AM_HANDS_OUT(AM_OP_CALLOC, am_real.calloc(n, m), n, m);
}

AM_EXPORT void *aligned_alloc(size_t a, size_t n) {
  AM_HANDS_OUT(AM_OP_ALIGNED_ALLOC, am_real.aligned_alloc(a, n), a, n);
}

AM_EXPORT void *memalign(size_t a, size_t n) { AM_HANDS_OUT(AM_OP_MEMALIGN, am_real.memalign(a, n), a, n); }

AM_EXPORT void *valloc(size_t n) { AM_HANDS_OUT(AM_OP_VALLOC, am_real.valloc(n), n); }

AM_EXPORT void *pvalloc(size_t n) { AM_HANDS_OUT(AM_OP_PVALLOC, am_real.pvalloc(n), n); }

AM_EXPORT int posix_memalign(void **out, size_t a, size_t n) {
  am_rthread *t = am_self();
  if (t == NULL) return am_real.posix_memalign(out, a, n);
  uint64_t c0 = am_clock(t);
  am_depth++;
  int r = am_real.posix_memalign(out, a, n);
  am_depth--;
  uint64_t c1 = c0 ? __rdtsc() : 0;
  uint8_t *e = am_event(t, AM_OP_POSIX_MEMALIGN | (r ? AM_NULL_RESULT : 0), am_next());
  if (e) am_commit(t, am_addr(t, am_put(am_put(e, a), n), r ? NULL : *out), c0, c1 - c0);
  return r;
}

// A block given back: its event first (ordered before the call), then the call.
AM_EXPORT void free(void *p) {
  if (AM_UNLIKELY(am_is_boot(p))) return;
  am_rthread *t = am_self();
  if (t == NULL) {
    if (am_real.free) am_real.free(p);
    return;
  }
  uint64_t c0 = am_clock(t);
  uint8_t *e = am_event(t, AM_OP_FREE | (p ? 0 : AM_NULL_ARG), am_next());
  if (e) am_commit(t, am_addr(t, e, p), 0, 0);
  uint64_t c1 = c0 ? __rdtsc() : 0;
  am_depth++;
  am_real.free(p);
  am_depth--;
  if (c0 && e) am_time(t, c0, __rdtsc() - c1, 2);
}

// realloc's old block is given back at an order drawn before the call, its new
// one handed out at one drawn after.
static void *am_realloc(int op, void *p, size_t count, size_t n) {
  am_rthread *t = am_self();
  int array = op == AM_OP_REALLOCARRAY;
  if (t == NULL)
    return array ? am_real.reallocarray(p, count, n) : am_real.realloc(p, n);
  uint64_t before = am_next(), c0 = am_clock(t);
  am_depth++;
  void *q = array ? am_real.reallocarray(p, count, n) : am_real.realloc(p, n);
  am_depth--;
  uint64_t c1 = c0 ? __rdtsc() : 0, after = am_next();
  uint8_t *e = am_event(t, op | (p ? 0 : AM_NULL_ARG) | (q ? 0 : AM_NULL_RESULT), before);
  if (e == NULL) return q;
  e = am_addr(t, e, p);
  if (array) e = am_put(e, count);
  e = am_put(am_put(e, n), after - before);
  t->prev = after;
  am_commit(t, am_addr(t, e, q), c0, c1 - c0);
  return q;
}

AM_EXPORT void *realloc(void *p, size_t n) {
  if (AM_UNLIKELY(am_is_boot(p))) {  // dlsym's block: moved out of the static buffer
    void *q = malloc(n);
    if (q) memcpy(q, p, n);
    return q;
  }
  return am_realloc(AM_OP_REALLOC, p, 1, n);
}

AM_EXPORT void *reallocarray(void *p, size_t count, size_t n) {
  return am_realloc(AM_OP_REALLOCARRAY, p, count, n);
}

AM_EXPORT size_t malloc_usable_size(void *p) {
  am_rthread *t = am_self();
  if (t == NULL) return am_is_boot(p) ? 0 : am_real.usable_size(p);
  am_depth++;
  size_t r = am_real.usable_size(p);
  am_depth--;
  uint8_t *e = am_event(t, AM_OP_USABLE | (p ? 0 : AM_NULL_ARG), am_next());
  if (e) am_commit(t, am_put(am_addr(t, e, p), r), 0, 0);
  return r;
}

AM_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                             void *arg) {
  am_rthread *t = am_self();
  if (am_real.create == NULL) return EAGAIN;
  if (t == NULL) return am_real.create(th, attr, fn, arg);
  for (size_t i = 0; i < sizeof am_starts / sizeof am_starts[0]; i++) {
    int free_slot = 0;
    if (!atomic_compare_exchange_strong(&am_starts[i].busy, &free_slot, 1)) continue;
    am_starts[i].fn = fn;
    am_starts[i].arg = arg;
    am_starts[i].index = atomic_fetch_add(&am_next_index, 1);
    uint8_t *e = am_event(t, AM_OP_CREATE, am_next());
    if (e) am_commit(t, am_put(e, am_starts[i].index), 0, 0);
    // What pthread_create allocates (the thread's TLS) is not recorded: the replay's
    // own thread makes its own.
    am_depth++;
    int r = am_real.create(th, attr, am_trampoline, &am_starts[i]);
    am_depth--;
    if (r != 0) atomic_store(&am_starts[i].busy, 0);  // its create event stays: a thread with no calls
    return r;
  }
  return am_real.create(th, attr, fn, arg);  // none free: it registers at its first call
}
