// am_replay — a recorded program's allocation calls, replayed (the replay workload).
//
// Reads a trace (am_trace.h, made by `allocmark record`) and makes its calls
// again under whatever allocator serves malloc: one thread per recorded thread
// (the first on the main thread, as the program's main; the others started
// where the program started them), each making its own calls in its recorded
// order and waiting only where the recording ordered it after another thread
// (a block that thread handed out or used last). Each block handed out has one
// byte of each of its pages written (the program's own touches are not
// recorded), and its first byte is checked when it is given back. The clock
// runs from the first call to the last thread's end; the record is every
// workload's (time, requested bytes, the allocator's statistics) and the
// replay's own: waits, calls whose outcome differed from the recording's, and
// the slot table's size (the replay's own memory, beside the blocks).
//
// The trace is untrusted input: every field is checked against the header's
// bounds before it is used, a wait no thread can satisfy ends the run with an
// error after --stall-s seconds (10) without any thread making a call, and the
// replay's own tables are mmap'd, never from the allocator under test.
//
// usage: am_replay --trace FILE [--touch 0|1] [--release 0|1] [--idle-ms N]
//                  [--stall-s S] [--baseline 1]
#include "am_bench.h"  // first: it defines _GNU_SOURCE

#include <linux/futex.h>
#include <malloc.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "am_trace.h"


typedef struct {
  void *p;
  uint32_t n;              // the requested size (at most 2^32 - 1: larger ones are touched whole)
  _Atomic uint32_t ver;    // ops done on the slot
  _Atomic uint32_t busy;   // an op is on it: a second one at once is a crafted trace's
  uint32_t pad;
} am_slot;

typedef struct {
  _Alignas(64) uint64_t *chunks;  // its chunks' offsets, in order
  uint64_t nchunks;
  pthread_t tid;
  _Atomic int created;
  _Atomic uint64_t done;  // ops made: the stall check reads it
  _Atomic uint64_t pos;   // the recorded order of the op it is at (UINT64_MAX: not running)
  uint64_t order;         // of its last op read
  uint64_t waits, held, fixups, failed, corrupt, calls;
  uint64_t ops[AM_OP_N];  // calls by function
} am_player;

static int am_fd;
static am_trace_head am_head;
static uint64_t am_file_size;
static am_slot *am_slots;
static am_player *am_players;
static int am_touching = 1;
static _Atomic uint64_t am_waiting, am_running;
static double am_stall_s = 10;  // --stall-s: no call anywhere this long ends the run

static void *am_table(uint64_t count, size_t size) {
  if (count == 0) count = 1;
  if (count > (SIZE_MAX / 2) / size) am_die("trace: a table of %" PRIu64 " entries is too large", count);
  void *p = mmap(NULL, count * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) am_die("trace: no memory for %" PRIu64 " entries", count);
  return p;
}

// ---------------------------------------------------------------------------
// The trace's header and its chunks, checked
// ---------------------------------------------------------------------------
static void am_open_trace(const char *path) {
  am_fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (am_fd < 0 || fstat(am_fd, &st) != 0) am_die("trace %s: cannot open: %s", path, strerror(errno));
  am_file_size = (uint64_t)st.st_size;
  if (!S_ISREG(st.st_mode) || !am_read_at(am_fd, &am_head, sizeof am_head, 0))
    am_die("trace %s: not a trace (too short)", path);
  if (memcmp(am_head.magic, AM_TRACE_MAGIC, sizeof am_head.magic) != 0)
    am_die("trace %s: not a trace (no AMTRACE header)", path);
  if (am_head.version != AM_TRACE_VERSION)
    am_die("trace %s: format %u, this replayer reads %d", path, am_head.version, AM_TRACE_VERSION);
  if (am_head.threads == 0 || am_head.threads > AM_TRACE_MAX_THREADS || am_head.slots > AM_TRACE_MAX_SLOTS ||
      am_head.json_at < sizeof am_head || am_head.json_at > am_file_size ||
      am_head.json_bytes > am_file_size - am_head.json_at)
    am_die("trace %s: a header out of bounds", path);
}

// Every chunk's offset, by thread: two passes over the headers.
static void am_index(void) {
  am_players = am_table(am_head.threads, sizeof *am_players);
  uint64_t chunks = 0, ops = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (uint64_t at = sizeof am_head; at < am_head.json_at;) {
      am_trace_chunk h;
      if (at + sizeof h > am_head.json_at || !am_read_at(am_fd, &h, sizeof h, at) || h.magic != AM_TRACE_CHUNK_MAGIC ||
          h.thread >= am_head.threads || h.bytes > AM_TRACE_CHUNK || h.ops == 0 || h.ops > h.bytes ||
          h.bytes > am_head.json_at - at - sizeof h)
        am_die("trace: a malformed chunk at byte %" PRIu64, at);
      am_player *p = &am_players[h.thread];
      if (pass == 0) {
        p->nchunks++;
        chunks++;
        ops += h.ops;
      } else {
        p->chunks[p->done++] = at;
      }
      at += sizeof h + h.bytes;
    }
    if (pass == 0) {
      if (chunks != am_head.chunks || ops != am_head.ops) am_die("trace: its chunks disagree with its header");
      for (uint32_t t = 0; t < am_head.threads; t++) {
        am_players[t].chunks = am_table(am_players[t].nchunks, sizeof(uint64_t));
        am_players[t].done = 0;
      }
    }
  }
  for (uint32_t t = 0; t < am_head.threads; t++) {
    am_players[t].done = 0;
    am_players[t].pos = t == 0 ? 0 : UINT64_MAX;  // only the first runs from the start
  }
  am_slots = am_table(am_head.slots, sizeof *am_slots);
}

// ---------------------------------------------------------------------------
// Waiting for another thread's op on a slot
// ---------------------------------------------------------------------------
static int am_reached(am_slot *s, uint32_t want) {
  return (int32_t)(atomic_load_explicit(&s->ver, memory_order_acquire) - want) >= 0;
}

static uint64_t am_all_done(void) {
  uint64_t sum = 0;
  for (uint32_t t = 0; t < am_head.threads; t++) sum += atomic_load_explicit(&am_players[t].done, memory_order_relaxed);
  return sum;
}

static void am_wait(am_player *me, am_slot *s, uint32_t want, uint64_t slot) {
  if (am_reached(s, want)) return;
  me->waits++;
  for (int i = 0; i < 512; i++) {
    __builtin_ia32_pause();
    if (am_reached(s, want)) return;
  }
  atomic_fetch_add(&am_waiting, 1);
  uint64_t seen = am_all_done();
  double since = am_now();
  while (!am_reached(s, want)) {
    uint32_t v = atomic_load(&s->ver);
    // A wake lost to the notifier's unordered store costs at most this timeout.
    struct timespec ts = {0, 1000000};
    syscall(SYS_futex, &s->ver, FUTEX_WAIT_PRIVATE, v, &ts, NULL, 0);
    if (am_now() - since < am_stall_s) continue;
    uint64_t now = am_all_done();
    if (now == seen)
      am_die("trace: its orderings cannot be met: no call in %.0f s, a thread waits for slot %" PRIu64
             " to reach version %u", am_stall_s, slot, want);
    seen = now;
    since = am_now();
  }
  atomic_fetch_sub(&am_waiting, 1);
}

static void am_publish(am_slot *s) {
  atomic_store_explicit(&s->busy, 0, memory_order_release);
  atomic_store_explicit(&s->ver, atomic_load_explicit(&s->ver, memory_order_relaxed) + 1, memory_order_release);
  if (__builtin_expect(atomic_load_explicit(&am_waiting, memory_order_relaxed) != 0, 0))
    syscall(SYS_futex, &s->ver, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

// ---------------------------------------------------------------------------
// The calls
// ---------------------------------------------------------------------------
static void *am_play(void *arg);

// ---------------------------------------------------------------------------
// The window: no thread runs more than AM_TRACE_WINDOW ahead, in the recorded
// order, of the thread furthest behind (the program's own synchronization, a queue
// that blocks its producer, is not recorded; this keeps its effect within a window).
// The thread furthest behind always may go on: the window never deadlocks.
// ---------------------------------------------------------------------------
static uint64_t am_frontier(void) {
  uint64_t low = UINT64_MAX;
  for (uint32_t t = 0; t < am_head.threads; t++) {
    uint64_t p = atomic_load_explicit(&am_players[t].pos, memory_order_acquire);
    if (p < low) low = p;
  }
  return low;
}

static void am_window(am_player *me) {
  atomic_store_explicit(&me->pos, me->order, memory_order_release);
  if ((me->calls & 15) != 0 || me->order <= am_frontier() + AM_TRACE_WINDOW) return;
  me->held++;
  uint64_t seen = am_all_done();
  double since = am_now();
  struct timespec pause = {0, 20000};
  while (me->order > am_frontier() + AM_TRACE_WINDOW) {
    nanosleep(&pause, NULL);
    if (am_now() - since < am_stall_s) continue;
    if (am_all_done() == seen) am_die("trace: its threads cannot keep their recorded order: no call in %.0f s", am_stall_s);
    seen = am_all_done();
    since = am_now();
  }
}

static void am_live_note(uint32_t thread, int64_t delta) {
  if (thread < AM_MAX_WORKERS) {
    am_live_add(&am_live_slots[thread], delta);
  } else {  // a slot shared with other threads: its bytes added atomically
    __atomic_fetch_add(&am_live_slots[thread % AM_MAX_WORKERS].bytes, delta, __ATOMIC_RELAXED);
  }
}

static unsigned char am_tag(uint64_t slot) { return (unsigned char)(0xa5 ^ slot ^ (slot >> 8)); }

static void am_touch_grown(void *p, uint64_t from, uint64_t to, unsigned char tag) {
  if (!am_touching || p == NULL || to <= from) return;
  unsigned char *b = p;
  for (uint64_t i = from & ~(uint64_t)(AM_PAGE - 1); i < to; i += AM_PAGE)
    if (i >= from) b[i] = tag;
  b[0] = tag;
  b[to - 1] = tag;
}

static void am_create(am_player *me, uint64_t thread) {
  if (thread == 0 || thread >= am_head.threads) am_die("trace: a thread created out of range (%" PRIu64 ")", thread);
  int no = 0;
  if (!atomic_compare_exchange_strong(&am_players[thread].created, &no, 1))
    am_die("trace: thread %" PRIu64 " created twice", thread);
  atomic_fetch_add(&am_running, 1);
  // It holds the window at its creator's place until it reads its first op.
  atomic_store_explicit(&am_players[thread].pos, me->order, memory_order_release);
  if (pthread_create(&am_players[thread].tid, NULL, am_play, (void *)(uintptr_t)thread) != 0)
    am_die("cannot start thread %" PRIu64 ": %s", thread, strerror(errno));
}

// A block handed out into `s` (or not: the recording's call failed, its slot
// is not used again; a block the allocator gives anyway goes back at once).
static void am_handed(am_player *me, uint32_t thread, am_slot *s, uint64_t slot, void *p, uint64_t n,
                      int recorded_null) {
  if (recorded_null) {
    if (p) {
      free(p);
      me->fixups++;
    }
    s->p = NULL;
    s->n = 0;
    return;
  }
  if (p == NULL && n) me->failed++;
  s->p = p;
  s->n = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
  if (p) {
    am_touch_grown(p, 0, n, am_tag(slot));
    am_live_note(thread, (int64_t)s->n);
  }
}

static void am_given_back(am_player *me, uint32_t thread, am_slot *s, uint64_t slot) {
  if (s->p && s->n && am_touching && *(unsigned char *)s->p != am_tag(slot)) me->corrupt++;
  if (s->p) am_live_note(thread, -(int64_t)s->n);
  free(s->p);
  s->p = NULL;
  s->n = 0;
}

static void am_realloc_op(am_player *me, uint32_t thread, am_slot *s, uint64_t slot, int op, int flags,
                          uint64_t count, uint64_t n) {
  void *old = (flags & AM_NULL_ARG) ? NULL : s->p;
  uint64_t was = old ? s->n : 0, bytes = 0;
  void *q = op == AM_OP_REALLOCARRAY ? reallocarray(old, count, n) : realloc(old, n);
  if (__builtin_mul_overflow(op == AM_OP_REALLOCARRAY ? count : 1, n, &bytes)) bytes = 0;
  if ((flags & AM_NULL_RESULT) && bytes == 0) {  // realloc(p, 0) gave p back when recorded
    if (old) am_live_note(thread, -(int64_t)was);
    if (q) {
      free(q);
      me->fixups++;
    }
    s->p = NULL;
    s->n = 0;
    return;
  }
  if (q == NULL) {  // the old block stays (recorded or not, the program keeps it)
    if (!(flags & AM_NULL_RESULT)) me->failed++;
    if (flags & AM_NULL_ARG) s->p = NULL, s->n = 0;
    return;
  }
  s->p = q;
  s->n = bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
  // One change, not two: the peak is sampled every 256 changes with several threads,
  // and a sample always falling between a block's release and its new size sees none.
  am_live_note(thread, (int64_t)s->n - (int64_t)was);
  am_touch_grown(q, was, bytes, am_tag(slot));
}

// One op; 0 at a malformed one.
static int am_op(am_player *me, uint32_t thread, am_reader *r) {
  int tag = am_get_byte(r), op = tag & AM_OP_MASK;
  me->order += am_get(r);
  if (r->bad) return 0;
  am_window(me);
  if (op == AM_OP_CREATE) {
    uint64_t t = am_get(r);
    if (r->bad) return 0;
    am_create(me, t);
    return 1;
  }
  if ((tag & AM_NULL_ARG) && (op == AM_OP_FREE || op == AM_OP_USABLE)) {
    if (op == AM_OP_FREE)
      free(NULL);
    else
      (void)malloc_usable_size(NULL);
    me->calls++;
    return 1;
  }
  uint64_t slot = am_get(r), a = 0, b = 0;
  if (op == AM_OP_CALLOC || am_op_aligned(op) || op == AM_OP_REALLOCARRAY) a = am_get(r);
  if (op != AM_OP_FREE && op != AM_OP_USABLE) b = am_get(r);
  uint64_t want = (tag & AM_WAIT) ? am_get(r) : 0;
  if (r->bad || slot >= am_head.slots || op == 0 || op >= AM_OP_CREATE || want > UINT32_MAX) return 0;
  am_slot *s = &am_slots[slot];
  if (tag & AM_WAIT) am_wait(me, s, (uint32_t)want, slot);
  // A trace am_trace made orders every slot's ops; one from elsewhere may not: two
  // threads on one block at once would corrupt the heap, so the run ends instead.
  if (atomic_exchange_explicit(&s->busy, 1, memory_order_acquire))
    am_die("trace: two threads use slot %" PRIu64 " at once: its orderings are broken", slot);
  int failed = (tag & AM_NULL_RESULT) != 0;
  void *p = NULL;
  uint64_t bytes = b;
  switch (op) {
    case AM_OP_MALLOC: p = malloc(b); break;
    case AM_OP_CALLOC:
      p = calloc(a, b);
      if (__builtin_mul_overflow(a, b, &bytes)) bytes = 0;
      break;
    case AM_OP_POSIX_MEMALIGN:
      if (posix_memalign(&p, a, b) != 0) p = NULL;
      break;
    case AM_OP_ALIGNED_ALLOC: p = aligned_alloc(a, b); break;
    case AM_OP_MEMALIGN: p = memalign(a, b); break;
    case AM_OP_VALLOC: p = valloc(b); break;
    case AM_OP_PVALLOC: p = pvalloc(b); break;
    case AM_OP_FREE: am_given_back(me, thread, s, slot); break;
    case AM_OP_USABLE: (void)malloc_usable_size(s->p); break;
    case AM_OP_REALLOC: am_realloc_op(me, thread, s, slot, op, tag, 1, b); break;
    case AM_OP_REALLOCARRAY: am_realloc_op(me, thread, s, slot, op, tag, a, b); break;
    default: return 0;
  }
  if (am_op_allocates(op)) am_handed(me, thread, s, slot, p, bytes, failed);
  me->calls++;
  me->ops[op]++;
  am_publish(s);
  return 1;
}

static void *am_play(void *arg) {
  uint32_t thread = (uint32_t)(uintptr_t)arg;
  am_player *me = &am_players[thread];
  uint8_t *buf = am_table(sizeof(am_trace_chunk) + AM_TRACE_CHUNK, 1);
  for (uint64_t c = 0; c < me->nchunks; c++) {
    am_trace_chunk h;
    if (!am_read_at(am_fd, buf, sizeof h, me->chunks[c])) am_die("trace: cannot read a chunk");
    memcpy(&h, buf, sizeof h);
    if (h.thread != thread || h.bytes > AM_TRACE_CHUNK || !am_read_at(am_fd, buf, h.bytes, me->chunks[c] + sizeof h))
      am_die("trace: a chunk changed under the replay");
    am_reader r = {buf, buf + h.bytes, 0};
    me->order = 0;  // a chunk's first op gives its order whole
    for (uint32_t i = 0; i < h.ops; i++) {
      if (!am_op(me, thread, &r)) am_die("trace: a malformed op in thread %u, chunk %" PRIu64, thread, c);
      atomic_store_explicit(&me->done, me->done + 1, memory_order_relaxed);
    }
    if (r.p != r.end) am_die("trace: thread %u, chunk %" PRIu64 ": bytes after its last op", thread, c);
  }
  munmap(buf, sizeof(am_trace_chunk) + AM_TRACE_CHUNK);
  atomic_store_explicit(&me->pos, UINT64_MAX, memory_order_release);  // holds no one back
  if (thread < AM_MAX_WORKERS) am_live_sample(&am_live_slots[thread]);  // its blocks at its end
  if (thread != 0 && atomic_fetch_sub(&am_running, 1) == 1)
    syscall(SYS_futex, &am_running, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
  return NULL;
}

// What the trace says of its recorded run, beside the replay's own numbers: a
// number of its summary after `"key":` (the first one after `within`, if given);
// the summary is the trace's, so these are what the trace claims.
static void am_result_recorded(am_result *r) {
  static const struct { const char *within, *key, *metric; } wanted[] = {
      {NULL, "\"peak_requested_bytes\":", "trace_peak_requested_bytes"},
      {NULL, "\"alloc_share\":", "trace_alloc_share"},
      {"\"recorded\":", "\"maxrss_kib\":", "trace_maxrss_kib"},
      {"\"recorded\":", "\"wall_s\":", "trace_wall_s"}};
  char *json = am_table(am_head.json_bytes + 1, 1);  // zeroed: a string's end
  if (!am_read_at(am_fd, json, am_head.json_bytes, am_head.json_at)) return;
  for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
    const char *from = wanted[i].within ? strstr(json, wanted[i].within) : json;
    const char *at = from ? strstr(from, wanted[i].key) : NULL;
    if (at == NULL) continue;
    char *end;
    double v = strtod(at + strlen(wanted[i].key), &end);
    if (end != at + strlen(wanted[i].key) && v >= 0 && v < 1e18) am_result_f64(r, wanted[i].metric, v);
  }
  munmap(json, am_head.json_bytes + 1);
}

// The functions beyond malloc, calloc, realloc and free the trace made them call,
// comma-separated: a partial allocator is judged by what this trace needs.
static void am_result_calls_made(am_result *r) {
  char made[256] = "";
  for (int op = 1; op < AM_OP_CREATE; op++) {
    uint64_t n = 0;
    for (uint32_t t = 0; t < am_head.threads; t++) n += am_players[t].ops[op];
    if (!n || op == AM_OP_MALLOC || op == AM_OP_CALLOC || op == AM_OP_REALLOC || op == AM_OP_FREE) continue;
    if (*made) strcat(made, ",");
    strcat(made, am_op_names[op]);
  }
  am_result_str(r, "calls_made", made);
}

int main(int argc, char **argv) {
  am_baseline_exit(argc, argv, "replay");
  const char *path = am_arg_str(argc, argv, "trace", NULL);
  if (path == NULL || !*path) am_die("--trace FILE is required");
  am_touching = (int)am_arg_u64(argc, argv, "touch", 1);
  uint64_t release = am_arg_u64(argc, argv, "release", 0);
  am_idle_ms = am_arg_u64(argc, argv, "idle-ms", 0);
  am_stall_s = (double)am_arg_u64(argc, argv, "stall-s", 10);
  am_open_trace(path);
  am_index();
  am_live_init(am_head.threads < AM_MAX_WORKERS ? am_head.threads : AM_MAX_WORKERS);
  const char *release_fn;
  double t0 = am_now();
  am_play((void *)(uintptr_t)0);
  // Every thread started counts in am_running before its creator goes on.
  for (uint64_t left; (left = atomic_load(&am_running)) != 0;)
    syscall(SYS_futex, &am_running, FUTEX_WAIT_PRIVATE, (uint32_t)left, NULL, NULL, 0);
  for (uint32_t t = 1; t < am_head.threads; t++)
    if (atomic_load(&am_players[t].created)) pthread_join(am_players[t].tid, NULL);
  double secs = am_stop(t0, release, &release_fn);
  uint64_t calls = 0, waits = 0, held = 0, fixups = 0, failed = 0, corrupt = 0, unstarted = 0;
  for (uint32_t t = 0; t < am_head.threads; t++) {
    am_player *p = &am_players[t];
    calls += p->calls;
    waits += p->waits;
    held += p->held;
    fixups += p->fixups;
    failed += p->failed;
    corrupt += p->corrupt;
    unstarted += t && p->nchunks && !atomic_load(&p->created);
  }
  if (corrupt) am_die("memory corruption: %" PRIu64 " blocks' first bytes changed before they were freed", corrupt);
  if (unstarted) am_die("trace: %" PRIu64 " threads with calls were never started", unstarted);
  am_result r;
  am_result_standard(&r, "replay", calls, secs, am_head.threads, release_fn);
  am_result_u64(&r, "replay_calls", calls);
  am_result_u64(&r, "replay_waits", waits);
  am_result_u64(&r, "replay_held", held);
  am_result_u64(&r, "replay_fixups", fixups);
  am_result_u64(&r, "replay_failed", failed);
  am_result_u64(&r, "replay_table_kib", (am_head.slots * sizeof(am_slot)) >> 10);
  am_result_calls_made(&r);
  am_result_recorded(&r);
  am_result_emit(&r);
  return 0;
}
