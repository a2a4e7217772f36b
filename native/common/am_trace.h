// am_trace.h — the two formats of a recorded allocation stream (docs/replay.md).
//
// The recording (libamrec.so writes it as the program runs): chunks appended to
// one file, each one write() of a thread's buffer, so a chunk is whole or absent
// and a program killed leaves a file readable up to its last whole chunk. A chunk
// says its process image, its thread, and where its events start in one order
// of all the process's events; its events are that thread's, in its order.
//
// The trace (am_trace makes it from a recording): one process's calls, each
// thread's in its own chunks, every block named by a slot (not its address),
// and the orderings between threads that the replay must keep: an op that uses
// a slot another thread used last waits until that thread's op is done (the
// slot's version). A fixed header, the chunks, then a JSON summary.
//
// Both are read as untrusted input: every length is bounded here, every varint
// is read within its buffer, and a reader says where it stopped.
#ifndef AM_TRACE_H
#define AM_TRACE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// The calls: an event's or op's tag holds one in its low 4 bits.
// ---------------------------------------------------------------------------
enum {
  AM_OP_MALLOC = 1,
  AM_OP_CALLOC,
  AM_OP_REALLOC,
  AM_OP_FREE,
  AM_OP_POSIX_MEMALIGN,
  AM_OP_ALIGNED_ALLOC,
  AM_OP_MEMALIGN,
  AM_OP_VALLOC,
  AM_OP_PVALLOC,
  AM_OP_USABLE,
  AM_OP_REALLOCARRAY,
  AM_OP_CREATE,  // the thread made a thread (its index follows)
  AM_OP_END,     // the thread ended
  AM_OP_N
};

#define AM_OP_MASK 0x0f
#define AM_NULL_RESULT 0x10  // the call failed: NULL (posix_memalign: not 0)
#define AM_NULL_ARG 0x20     // the block given was NULL
#define AM_WAIT 0x40         // trace: wait for the slot's version first
#define AM_NOTIFY 0x80       // trace: publish the slot's version after

// The names allocmark reports calls under (index: the op).
static const char *const am_op_names[AM_OP_N] = {
    "", "malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "malloc_usable_size", "reallocarray", "create", "end"};

static inline int am_op_allocates(int op) {
  return op == AM_OP_MALLOC || op == AM_OP_CALLOC || (op >= AM_OP_POSIX_MEMALIGN && op <= AM_OP_PVALLOC);
}

static inline int am_op_aligned(int op) {
  return op == AM_OP_POSIX_MEMALIGN || op == AM_OP_ALIGNED_ALLOC || op == AM_OP_MEMALIGN;
}

// ---------------------------------------------------------------------------
// The recording
// ---------------------------------------------------------------------------
#define AM_REC_MAGIC 0x43524d41u  // "AMRC"
#define AM_REC_VERSION 1
#define AM_REC_BUF (64u << 10)       // a thread's buffer: a chunk's events at most
#define AM_REC_EVENT_MAX 64          // bytes one event takes at most
#define AM_REC_MAX_THREADS 65536     // thread indices of one process
#define AM_REC_MAX_PROCESSES 4096

enum { AM_CHUNK_EVENTS = 1, AM_CHUNK_PROCESS, AM_CHUNK_EXIT };

typedef struct {
  uint32_t magic;    // AM_REC_MAGIC
  uint16_t version;  // AM_REC_VERSION
  uint16_t kind;     // AM_CHUNK_*
  uint64_t process;  // the process image's id (random, drawn at its start)
  uint32_t thread;   // the thread's index in the process
  uint32_t bytes;    // payload bytes after this header (<= AM_REC_BUF)
  uint64_t first;    // events: the order of the chunk's first event
  uint32_t events;   // events: how many
  uint32_t pad;
} am_chunk;  // 40 bytes

// A process image's first chunk.
typedef struct {
  uint32_t pid, ppid;
  uint64_t parent;  // the image forked from (its id), 0 if none
  char exe[256];    // /proc/self/exe, cut
  char next[256];   // the object the recorder's malloc forwards to (dladdr), cut
} am_rec_process;

// A process image's last chunk (its exit): what the recorder timed.
typedef struct {
  uint64_t cpu_ns;       // the process's CPU time at exit
  uint64_t wall_ns;      // from the recorder's start to exit
  uint64_t tsc_per_us;   // the time-stamp counter's rate, measured over that time
  uint64_t calls;        // events recorded
  uint64_t timed;        // calls timed (one in AM_REC_TIMED per thread)
  uint64_t timed_call;   // their cycles inside the allocator
  uint64_t timed_whole;  // their cycles inside the recorder's wrapper, the call included
  uint64_t flush_cycles; // cycles writing chunks
  uint64_t lost;         // events not written (a failed write)
} am_rec_exit;

// An event: its tag, then varints: its step in the order from the thread's
// previous event (a chunk's first event: from the chunk's `first`), then per op:
//   malloc, valloc, pvalloc: size, result
//   calloc: count, size, result
//   posix_memalign, aligned_alloc, memalign: alignment, size, result
//   realloc: block, size, step to its result's order, result
//   reallocarray: block, count, size, step to its result's order, result
//   free: block;  malloc_usable_size: block, its answer
//   create: the new thread's index;  end: nothing
// An address is a zigzag step from the thread's previous one (0 at a chunk's
// start); a NULL result or block is not written (the tag says it). A realloc's
// old block is given back at its own order, before the call; every address
// handed out is ordered after its call, so an address is always given back
// before it is handed out again.

// ---------------------------------------------------------------------------
// The trace
// ---------------------------------------------------------------------------
#define AM_TRACE_MAGIC "AMTRACE"  // 8 bytes with its NUL
#define AM_TRACE_VERSION 1
#define AM_TRACE_WINDOW 4096  // how far in the recorded order a replay thread may run ahead
#define AM_TRACE_CHUNK_MAGIC 0x50524d41u  // "AMRP"
#define AM_TRACE_CHUNK (64u << 10)       // a chunk's ops, bytes at most
#define AM_TRACE_MAX_THREADS 4096
#define AM_TRACE_MAX_SLOTS (1ull << 32)
#define AM_TRACE_MAX_JSON (1u << 20)

typedef struct {
  char magic[8];      // AM_TRACE_MAGIC
  uint32_t version;   // AM_TRACE_VERSION
  uint32_t threads;   // replay threads (<= AM_TRACE_MAX_THREADS)
  uint64_t slots;     // the slot table's size
  uint64_t ops;       // ops in all chunks
  uint64_t chunks;
  uint64_t json_at;   // the JSON summary's offset (after the chunks)
  uint32_t json_bytes;
  uint32_t pad;
} am_trace_head;  // 56 bytes

typedef struct {
  uint32_t magic;  // AM_TRACE_CHUNK_MAGIC
  uint32_t thread;
  uint32_t bytes;  // <= AM_TRACE_CHUNK
  uint32_t ops;
} am_trace_chunk;

// An op: its tag, then varints: its step in the recorded order from the thread's
// previous op in the chunk (the first: its order), the slot (every op but create
// and a free or malloc_usable_size of NULL), then
//   malloc, valloc, pvalloc: size;  calloc: count, size
//   posix_memalign, aligned_alloc, memalign: alignment, size
//   realloc: size (the result goes to the same slot);  reallocarray: count, size
//   free, malloc_usable_size: nothing;  create: the thread's index;  end: nothing
// then, with AM_WAIT, the version to wait for, and with AM_NOTIFY, the version
// to publish. A slot's versions count the ops on it, in the recorded order.

// ---------------------------------------------------------------------------
// Varints (LEB128) and zigzag steps
// ---------------------------------------------------------------------------
static inline uint8_t *am_put(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

static inline uint64_t am_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

static inline int64_t am_unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

// A reader of one buffer: `bad` is set, and 0 returned, past its end or on a
// varint of more than 10 bytes.
typedef struct {
  const uint8_t *p, *end;
  int bad;
} am_reader;

static inline uint64_t am_get(am_reader *r) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (r->p >= r->end) break;
    uint8_t b = *r->p++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  r->bad = 1;
  return 0;
}

static inline int am_get_byte(am_reader *r) {
  if (r->p >= r->end) {
    r->bad = 1;
    return 0;
  }
  return *r->p++;
}

// `n` bytes of `fd` at `at`, whole; 0 if the file ends first or cannot be read.
static inline int am_read_at(int fd, void *buf, size_t n, uint64_t at) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = pread(fd, (char *)buf + done, n - done, (off_t)(at + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return 0;
    done += (size_t)got;
  }
  return 1;
}

#endif  // AM_TRACE_H
