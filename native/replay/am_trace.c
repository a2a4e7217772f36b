// am_trace — a recording made into a trace (allocmark record; formats: am_trace.h).
//
// usage: am_trace RECORDING TRACE [META_JSON]
//
// Reads the recording libamrec.so wrote (untrusted: it was written by the
// measured program's process), keeps the process image with the most events
// (its others are listed), and merges its threads' events in their recorded
// order: every address becomes a slot, a thread's freed slots are its own to
// reuse (so threads wait on each other only where the program's did: a block
// freed, reallocated or asked about by another thread than the one that used it
// last), and the live requested bytes are summed at every event (their peak is
// exact). Writes TRACE: each thread's ops in chunks, then a JSON summary with
// META_JSON (allocmark's account of the recorded run) under "recorded".
// What cannot be replayed is counted, never guessed: a free of a block the
// recording did not see handed out (made before the recorder started, or in a
// lost chunk) is dropped, a realloc of one becomes a malloc. A recording cut
// short (a program killed, a crafted file) is read up to its last whole chunk
// and the summary says where and why it stopped. Exit 0, or 2 with one line
// on stderr naming the file and what was wrong.
//
// Written by hand in C: a recording may hold hundreds of millions of events,
// decoded once; nothing in Python's standard library merges varint streams at
// that rate, and the format is allocmark's own.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "am_trace.h"

static const char *am_input = "";

__attribute__((noreturn, format(printf, 1, 2))) static void am_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "am_trace: %s: ", am_input);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(2);
}

static void *am_grow(void *p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return p;
  size_t n = *cap ? *cap : 16;
  while (n < need) n *= 2;
  void *q = realloc(p, n * size);
  if (q == NULL) am_fail("out of memory (%zu entries of %zu bytes)", n, size);
  memset((char *)q + *cap * size, 0, (n - *cap) * size);
  *cap = n;
  return q;
}

// ---------------------------------------------------------------------------
// Pass 1: the chunks, their processes and threads
// ---------------------------------------------------------------------------
typedef struct {
  uint64_t id, parent, events;
  uint32_t pid, ppid, threads;  // threads: the highest index seen + 1
  char exe[256], next[256];
  int announced, exited;
  am_rec_exit exit;
} am_process_t;

typedef struct {
  uint64_t offset, first;
  uint32_t process, thread, bytes, events;
} am_piece;

typedef struct {
  int fd;
  uint64_t size, cut_at;
  const char *cut_why;
  am_process_t *procs;
  size_t nprocs, procs_cap;
  am_piece *pieces;
  size_t npieces, pieces_cap;
} am_recording;

static am_process_t *am_process_of(am_recording *r, uint64_t id) {
  for (size_t i = 0; i < r->nprocs; i++)
    if (r->procs[i].id == id) return &r->procs[i];
  if (r->nprocs >= AM_REC_MAX_PROCESSES) return NULL;
  r->procs = am_grow(r->procs, &r->procs_cap, r->nprocs + 1, sizeof *r->procs);
  am_process_t *p = &r->procs[r->nprocs++];
  p->id = id;
  return p;
}

// Why the chunk at `at` is not one to read ("" if it is).
static const char *am_check_chunk(am_recording *r, const am_chunk *h, uint64_t at) {
  if (h->magic != AM_REC_MAGIC) return "not a chunk of a recording";
  if (h->version != AM_REC_VERSION) return "a chunk of another version of the recording format";
  if (at + sizeof *h + h->bytes > r->size) return "a chunk cut short";
  switch (h->kind) {
    case AM_CHUNK_EVENTS:
      if (h->bytes == 0 || h->bytes > AM_REC_BUF || h->events == 0 || h->events > h->bytes / 2)
        return "a chunk of events of an impossible size";
      if (h->thread >= AM_REC_MAX_THREADS) return "a thread index out of range";
      return "";
    case AM_CHUNK_PROCESS:
      return h->bytes == sizeof(am_rec_process) ? "" : "a process chunk of the wrong size";
    case AM_CHUNK_EXIT:
      return h->bytes == sizeof(am_rec_exit) ? "" : "an exit chunk of the wrong size";
    default:
      return "a chunk of an unknown kind";
  }
}

static void am_scan(am_recording *r) {
  uint64_t at = 0;
  r->cut_why = "";
  while (at < r->size) {
    am_chunk h;
    const char *why = "a chunk header cut short";
    if (at + sizeof h <= r->size && am_read_at(r->fd, &h, sizeof h, at)) why = am_check_chunk(r, &h, at);
    am_process_t *p = *why ? NULL : am_process_of(r, h.process);
    if (!*why && p == NULL) why = "more processes than a recording may hold";
    if (*why) {
      r->cut_at = at;
      r->cut_why = why;
      return;
    }
    uint64_t body = at + sizeof h;
    if (h.kind == AM_CHUNK_PROCESS) {
      am_rec_process info;
      if (!am_read_at(r->fd, &info, sizeof info, body)) break;
      p->pid = info.pid;
      p->ppid = info.ppid;
      p->parent = info.parent;
      memcpy(p->exe, info.exe, sizeof p->exe);
      p->exe[sizeof p->exe - 1] = 0;
      memcpy(p->next, info.next, sizeof p->next);
      p->next[sizeof p->next - 1] = 0;
      p->announced = 1;
    } else if (h.kind == AM_CHUNK_EXIT) {
      if (!am_read_at(r->fd, &p->exit, sizeof p->exit, body)) break;
      p->exited = 1;
    } else {
      r->pieces = am_grow(r->pieces, &r->pieces_cap, r->npieces + 1, sizeof *r->pieces);
      r->pieces[r->npieces++] =
          (am_piece){body, h.first, (uint32_t)(p - r->procs), h.thread, h.bytes, h.events};
      p->events += h.events;
      if (h.thread + 1 > p->threads) p->threads = h.thread + 1;
    }
    at = body + h.bytes;
  }
  r->cut_at = at;
}

// ---------------------------------------------------------------------------
// Pass 2: one process's threads merged in the recorded order
// ---------------------------------------------------------------------------
typedef struct {
  int op, flags;
  uint64_t order;
  uint64_t block, args[3];  // block: the address given; args: per op (am_trace.h)
  uint64_t result;          // the address handed out, or malloc_usable_size's answer
} am_event;

// A thread's events, decoded one chunk at a time.
typedef struct {
  size_t *pieces, npieces, pieces_cap, next;  // indices into the recording's pieces
  uint8_t *buf;
  am_reader rd;
  uint64_t prev, addr;
  int has_pending;  // a realloc's second half (its new block) is next
  am_event pending;
  uint32_t left;  // events left in the loaded chunk
  int started, first_in_chunk;
  am_event ahead;  // the next event, decoded: the merge's key is its order
} am_cursor;

// An address: never 0 (a NULL is said by the tag), which the live map keeps for empty.
static uint64_t am_addr_step(am_cursor *c) {
  c->addr += (uint64_t)am_unzigzag(am_get(&c->rd));
  if (c->addr == 0) c->rd.bad = 1;
  return c->addr;
}

static int am_load(am_recording *r, am_cursor *c, uint32_t thread) {
  if (c->next >= c->npieces) return 0;
  const am_piece *p = &r->pieces[c->pieces[c->next++]];
  if (c->buf == NULL && (c->buf = malloc(AM_REC_BUF)) == NULL) am_fail("out of memory");
  if (!am_read_at(r->fd, c->buf, p->bytes, p->offset)) am_fail("cannot read at byte %" PRIu64, p->offset);
  if (c->started && p->first <= c->prev)
    am_fail("thread %u: a chunk at byte %" PRIu64 " goes back in the order", thread, p->offset);
  c->rd = (am_reader){c->buf, c->buf + p->bytes, 0};
  c->prev = p->first;
  c->addr = 0;
  c->left = p->events;
  c->started = c->first_in_chunk = 1;
  return 1;
}

// The thread's next event (a realloc yields its old block's release first, then
// its new block as AM_OP_REALLOC with `order` its second order); 0 at its end.
static int am_decode(am_recording *r, am_cursor *c, uint32_t thread, am_event *ev) {
  if (c->has_pending) {
    *ev = c->pending;
    c->has_pending = 0;
    return 1;
  }
  if (c->left == 0 && !am_load(r, c, thread)) return 0;
  uint64_t at = r->pieces[c->pieces[c->next - 1]].offset + (uint64_t)(c->rd.p - c->buf);
  memset(ev, 0, sizeof *ev);
  int tag = am_get_byte(&c->rd);
  ev->op = tag & AM_OP_MASK;
  ev->flags = tag & ~AM_OP_MASK;
  uint64_t step = am_get(&c->rd);
  if (step > UINT64_MAX - c->prev) c->rd.bad = 1;
  ev->order = c->prev + step;
  int out = !(ev->flags & AM_NULL_RESULT), in = !(ev->flags & AM_NULL_ARG);
  switch (ev->op) {
    case AM_OP_MALLOC:
    case AM_OP_VALLOC:
    case AM_OP_PVALLOC:
      ev->args[0] = am_get(&c->rd);
      if (out) ev->result = am_addr_step(c);
      break;
    case AM_OP_CALLOC:
    case AM_OP_POSIX_MEMALIGN:
    case AM_OP_ALIGNED_ALLOC:
    case AM_OP_MEMALIGN:
      ev->args[0] = am_get(&c->rd);
      ev->args[1] = am_get(&c->rd);
      if (out) ev->result = am_addr_step(c);
      break;
    case AM_OP_REALLOC:
    case AM_OP_REALLOCARRAY: {
      if (in) ev->block = am_addr_step(c);
      ev->args[0] = am_get(&c->rd);
      if (ev->op == AM_OP_REALLOCARRAY) ev->args[1] = am_get(&c->rd);
      uint64_t second = am_get(&c->rd);
      if (second == 0 || second > UINT64_MAX - ev->order) c->rd.bad = 1;
      if (out) ev->result = am_addr_step(c);
      c->pending = *ev;
      c->pending.order = ev->order + second;
      c->has_pending = 1;
      ev->op |= 0x100;  // the release half
      ev->result = 0;
      break;
    }
    case AM_OP_FREE:
      if (in) ev->block = am_addr_step(c);
      break;
    case AM_OP_USABLE:
      if (in) ev->block = am_addr_step(c);
      ev->result = am_get(&c->rd);
      break;
    case AM_OP_CREATE:
      ev->args[0] = am_get(&c->rd);
      if (ev->args[0] >= AM_REC_MAX_THREADS) c->rd.bad = 1;
      break;
    case AM_OP_END:
      break;
    default:
      c->rd.bad = 1;
  }
  // A chunk's first event is at its `first` (step 0); each next one is later.
  if (c->rd.bad || (c->first_in_chunk ? step != 0 : step == 0))
    am_fail("thread %u: a malformed event at byte %" PRIu64, thread, at);
  c->first_in_chunk = 0;
  c->prev = c->has_pending ? c->pending.order : ev->order;
  if (--c->left == 0 && c->rd.p != c->rd.end)
    am_fail("thread %u: a chunk's events end before its bytes, at byte %" PRIu64, thread, at);
  return 1;
}

// ---------------------------------------------------------------------------
// Blocks to slots: an open-addressing map of the live addresses
// ---------------------------------------------------------------------------
typedef struct {
  uint64_t addr;  // 0: empty
  uint64_t size;
  uint32_t slot;
} am_live_block;

typedef struct {
  am_live_block *e;
  size_t cap, n;
} am_map;

static size_t am_hash(uint64_t a, size_t cap) { return (size_t)((a >> 4) * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1); }

static am_live_block *am_find(am_map *m, uint64_t a) {
  if (m->cap == 0) return NULL;
  for (size_t i = am_hash(a, m->cap);; i = (i + 1) & (m->cap - 1)) {
    if (m->e[i].addr == a) return &m->e[i];
    if (m->e[i].addr == 0) return NULL;
  }
}

static void am_insert(am_map *m, am_live_block b);

static void am_rehash(am_map *m) {
  am_map bigger = {calloc(m->cap ? m->cap * 2 : 1024, sizeof *m->e), m->cap ? m->cap * 2 : 1024, 0};
  if (bigger.e == NULL) am_fail("out of memory for %zu live blocks", m->n);
  for (size_t i = 0; i < m->cap; i++)
    if (m->e[i].addr) am_insert(&bigger, m->e[i]);
  free(m->e);
  *m = bigger;
}

static void am_insert(am_map *m, am_live_block b) {
  if ((m->n + 1) * 2 > m->cap) am_rehash(m);
  size_t i = am_hash(b.addr, m->cap);
  while (m->e[i].addr != 0) i = (i + 1) & (m->cap - 1);
  m->e[i] = b;
  m->n++;
}

// Backward-shift deletion: no tombstones.
static void am_remove(am_map *m, am_live_block *at) {
  size_t i = (size_t)(at - m->e), j = i;
  for (;;) {
    j = (j + 1) & (m->cap - 1);
    if (m->e[j].addr == 0) break;
    size_t home = am_hash(m->e[j].addr, m->cap);
    if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
      m->e[i] = m->e[j];
      i = j;
    }
  }
  m->e[i].addr = 0;
  m->n--;
}

// ---------------------------------------------------------------------------
// The trace being written
// ---------------------------------------------------------------------------
typedef struct {
  uint32_t ver;   // ops on the slot so far
  uint32_t last;  // the thread of its last op
} am_slot_state;

typedef struct {
  uint8_t *buf;
  uint32_t len, ops;
  uint32_t *free_slots;
  size_t nfree, free_cap;
  int started, created;
  uint64_t last_order;  // of its last op in the chunk being filled (0 at a chunk's start)
} am_out_thread;

typedef struct {
  FILE *f;
  uint64_t order;  // the recorded order of the event being applied
  uint64_t at, ops, chunks, slots_used, waits;
  am_out_thread *threads;
  uint32_t nthreads;
  am_slot_state *slots;
  size_t slots_cap;
  uint32_t *spill;  // slots threads gave back beyond their own AM_OWN_SLOTS, oldest first
  size_t spill_head, spill_tail, spill_cap;
  am_map live;
  int64_t live_bytes, peak;
  uint64_t calls[AM_OP_N];
  uint64_t unknown_frees, unknown_reallocs, conflicts, failed, orphans;
} am_writer;

static void am_emit_chunk(am_writer *w, uint32_t thread) {
  am_out_thread *t = &w->threads[thread];
  if (t->ops == 0) return;
  am_trace_chunk h = {AM_TRACE_CHUNK_MAGIC, thread, t->len, t->ops};
  if (fwrite(&h, sizeof h, 1, w->f) != 1 || fwrite(t->buf, t->len, 1, w->f) != 1)
    am_fail("cannot write the trace: %s", strerror(errno));
  w->at += sizeof h + t->len;
  w->chunks++;
  t->len = t->ops = 0;
  t->last_order = 0;
}

// An op's tag and its step in the recorded order (from the thread's previous op
// in the chunk): the replay keeps its threads within a window of that order.
static uint8_t *am_op_begin(am_writer *w, uint32_t thread, int tag) {
  am_out_thread *t = &w->threads[thread];
  if (t->buf == NULL && (t->buf = malloc(AM_TRACE_CHUNK)) == NULL) am_fail("out of memory");
  if (t->len + AM_REC_EVENT_MAX > AM_TRACE_CHUNK) am_emit_chunk(w, thread);
  uint8_t *e = t->buf + t->len;
  *e++ = (uint8_t)tag;
  e = am_put(e, w->order - t->last_order);
  t->last_order = w->order;
  return e;
}

static void am_op_end(am_writer *w, uint32_t thread, uint8_t *e) {
  am_out_thread *t = &w->threads[thread];
  t->len = (uint32_t)(e - t->buf);
  t->ops++;
  w->ops++;
}

// A thread's slot for a new block: one it gave back itself (no wait), else the one
// given back longest ago by any thread (its free is then most likely replayed
// already: a producer reuses what its consumer freed, and the table stays the size
// of the live blocks), else a new one.
static uint32_t am_new_slot(am_writer *w, uint32_t thread) {
  am_out_thread *t = &w->threads[thread];
  if (t->nfree) return t->free_slots[--t->nfree];
  if (w->spill_head != w->spill_tail) return w->spill[w->spill_head++ % w->spill_cap];
  if (w->slots_used >= AM_TRACE_MAX_SLOTS) am_fail("more live blocks than a trace may hold");
  w->slots = am_grow(w->slots, &w->slots_cap, w->slots_used + 1, sizeof *w->slots);
  return (uint32_t)w->slots_used++;
}

#define AM_OWN_SLOTS 1024  // free slots a thread keeps for itself

static void am_spill(am_writer *w, uint32_t slot) {
  if (w->spill_tail - w->spill_head == w->spill_cap) {  // full: a ring twice the size
    size_t cap = w->spill_cap ? w->spill_cap * 2 : 1024;
    uint32_t *ring = malloc(cap * sizeof *ring);
    if (ring == NULL) am_fail("out of memory");
    for (size_t i = w->spill_head; i < w->spill_tail; i++) ring[i - w->spill_head] = w->spill[i % w->spill_cap];
    free(w->spill);
    w->spill_tail -= w->spill_head;
    w->spill_head = 0;
    w->spill = ring;
    w->spill_cap = cap;
  }
  w->spill[w->spill_tail++ % w->spill_cap] = slot;
}

static void am_free_slot(am_writer *w, uint32_t thread, uint32_t slot) {
  am_out_thread *t = &w->threads[thread];
  if (t->nfree >= AM_OWN_SLOTS) {
    am_spill(w, slot);
    return;
  }
  t->free_slots = am_grow(t->free_slots, &t->free_cap, t->nfree + 1, sizeof *t->free_slots);
  t->free_slots[t->nfree++] = slot;
}

// An op on `slot` by `thread`: its tag (waiting when another thread used the
// slot last), the slot, then its own fields from `fields`.
static void am_put_op(am_writer *w, uint32_t thread, int tag, uint32_t slot, const uint64_t *fields,
                      int nfields) {
  am_slot_state *s = &w->slots[slot];
  int wait = s->ver != 0 && s->last != thread;
  uint8_t *e = am_op_begin(w, thread, tag | (wait ? AM_WAIT : 0));
  e = am_put(e, slot);
  for (int i = 0; i < nfields; i++) e = am_put(e, fields[i]);
  if (wait) {
    e = am_put(e, s->ver);
    w->waits++;
  }
  s->ver++;
  s->last = thread;
  w->calls[tag & AM_OP_MASK]++;
  am_op_end(w, thread, e);
}

static void am_live_add(am_writer *w, int64_t delta) {
  w->live_bytes += delta;
  if (w->live_bytes > w->peak) w->peak = w->live_bytes;
}

// The bytes a call asked for, at most 2^47 (no larger block is ever handed out: the
// sums of live bytes stay far from overflowing).
static uint64_t am_requested(const am_event *ev) {
  int op = ev->op & AM_OP_MASK;
  uint64_t n = am_op_aligned(op) ? ev->args[1] : ev->args[0];
  if ((op == AM_OP_CALLOC || op == AM_OP_REALLOCARRAY) &&
      __builtin_mul_overflow(ev->args[0], ev->args[op == AM_OP_CALLOC], &n))
    n = 0;
  return n > (1ull << 47) ? 1ull << 47 : n;
}

// A block handed out into `slot`; a failed call's slot is free again at once.
static void am_handed(am_writer *w, uint32_t thread, const am_event *ev, uint32_t slot) {
  if (ev->flags & AM_NULL_RESULT) {
    w->failed++;
    am_free_slot(w, thread, slot);
    return;
  }
  am_live_block *old = am_find(&w->live, ev->result);
  if (old) {  // handed out twice: its free was in a lost chunk
    w->conflicts++;
    am_live_add(w, -(int64_t)old->size);
    am_remove(&w->live, old);
  }
  uint64_t n = am_requested(ev);
  am_insert(&w->live, (am_live_block){ev->result, n, slot});
  am_live_add(w, (int64_t)n);
}

static void am_thread_seen(am_writer *w, uint32_t thread) {
  am_out_thread *t = &w->threads[thread];
  if (t->started) return;
  t->started = 1;
  if (t->created || thread == 0) return;
  // No creation recorded (made before the recorder, or its pool was full): the
  // first thread starts it where it was first seen.
  uint8_t *e = am_op_begin(w, 0, AM_OP_CREATE);
  am_op_end(w, 0, am_put(e, thread));
  w->threads[0].started = 1;
  w->orphans++;
}

// Pending reallocs' slots, by thread: a realloc's release and its new block are
// two events of one thread, in order, with nothing of that thread between.
typedef struct {
  uint32_t slot;
  uint64_t size;
  int has;
} am_held;

static void am_apply(am_writer *w, am_held *held, uint32_t thread, const am_event *ev) {
  int op = ev->op & AM_OP_MASK;
  uint64_t f[2] = {ev->args[0], ev->args[1]};
  w->order = ev->order;
  am_thread_seen(w, thread);
  if (am_op_allocates(op)) {
    uint32_t slot = am_new_slot(w, thread);
    int nf = op == AM_OP_CALLOC || am_op_aligned(op) ? 2 : 1;
    am_put_op(w, thread, op | (ev->flags & AM_NULL_RESULT), slot, f, nf);
    am_handed(w, thread, ev, slot);
    return;
  }
  if (op == AM_OP_CREATE) {
    if (ev->args[0] >= w->nthreads) return;  // a thread with no events
    w->threads[ev->args[0]].created = 1;
    uint8_t *e = am_op_begin(w, thread, AM_OP_CREATE);
    am_op_end(w, thread, am_put(e, ev->args[0]));
    return;
  }
  if (op == AM_OP_END) return;  // a replay thread ends after its last op
  am_live_block *b = (ev->flags & AM_NULL_ARG) ? NULL : am_find(&w->live, ev->block);
  if (op == AM_OP_FREE || op == AM_OP_USABLE) {
    if (ev->flags & AM_NULL_ARG) {  // free(NULL): a call all the same
      uint8_t *e = am_op_begin(w, thread, op | AM_NULL_ARG);
      w->calls[op]++;
      am_op_end(w, thread, e);
      return;
    }
    if (b == NULL) {
      w->unknown_frees++;
      return;
    }
    am_put_op(w, thread, op, b->slot, NULL, 0);
    if (op == AM_OP_FREE) {
      am_live_add(w, -(int64_t)b->size);
      am_free_slot(w, thread, b->slot);
      am_remove(&w->live, b);
    }
    return;
  }
  // realloc: its first half gives the old block back, its second hands out the new
  am_held *h = &held[thread];
  if (ev->op & 0x100) {
    h->has = b != NULL;
    if (b == NULL && !(ev->flags & AM_NULL_ARG)) w->unknown_reallocs++;
    if (b) {
      h->slot = b->slot;
      h->size = b->size;
      am_live_add(w, -(int64_t)b->size);
      am_remove(&w->live, b);
    }
    return;
  }
  if (!h->has) {  // realloc(NULL, n), or of a block never seen: a new block
    am_event as = *ev;
    as.op = AM_OP_MALLOC;
    as.args[0] = am_requested(ev);
    uint32_t slot = am_new_slot(w, thread);
    am_put_op(w, thread, op | AM_NULL_ARG | (ev->flags & AM_NULL_RESULT), slot, f,
              op == AM_OP_REALLOCARRAY ? 2 : 1);
    am_handed(w, thread, &as, slot);
    return;
  }
  h->has = 0;
  int nf = op == AM_OP_REALLOCARRAY ? 2 : 1;
  am_put_op(w, thread, op | (ev->flags & AM_NULL_RESULT), h->slot, f, nf);
  uint64_t n = am_requested(ev);
  if (!(ev->flags & AM_NULL_RESULT)) {
    am_live_block *old = am_find(&w->live, ev->result);
    if (old) {
      w->conflicts++;
      am_live_add(w, -(int64_t)old->size);
      am_remove(&w->live, old);
    }
    am_insert(&w->live, (am_live_block){ev->result, n, h->slot});
    am_live_add(w, (int64_t)n);
  } else if (n == 0) {  // realloc(p, 0) gave p back (glibc)
    am_free_slot(w, thread, h->slot);
  } else {  // it failed: the old block is still the program's
    w->failed++;
    am_insert(&w->live, (am_live_block){ev->block, h->size, h->slot});
    am_live_add(w, (int64_t)h->size);
  }
}

// ---------------------------------------------------------------------------
// The merge: a binary heap of the threads by the order of their next event
// ---------------------------------------------------------------------------
typedef struct {
  uint32_t *h;
  size_t n;
  am_cursor *c;
} am_heap;

static int am_before(am_heap *q, size_t a, size_t b) {
  return q->c[q->h[a]].ahead.order < q->c[q->h[b]].ahead.order;
}

static void am_swap(am_heap *q, size_t a, size_t b) {
  uint32_t t = q->h[a];
  q->h[a] = q->h[b];
  q->h[b] = t;
}

static void am_sift_down(am_heap *q, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < q->n && am_before(q, l, m)) m = l;
    if (r < q->n && am_before(q, r, m)) m = r;
    if (m == i) return;
    am_swap(q, i, m);
    i = m;
  }
}

static void am_merge(am_recording *r, uint32_t proc, am_writer *w) {
  uint32_t n = r->procs[proc].threads;
  am_cursor *c = calloc(n ? n : 1, sizeof *c);
  am_held *held = calloc(n ? n : 1, sizeof *held);
  am_heap q = {calloc(n ? n : 1, sizeof *q.h), 0, c};
  if (!c || !held || !q.h) am_fail("out of memory for %u threads", n);
  for (size_t i = 0; i < r->npieces; i++) {
    am_piece *p = &r->pieces[i];
    if (p->process != proc) continue;
    am_cursor *k = &c[p->thread];
    k->pieces = am_grow(k->pieces, &k->pieces_cap, k->npieces + 1, sizeof *k->pieces);
    k->pieces[k->npieces++] = i;
  }
  for (uint32_t t = 0; t < n; t++)
    if (am_decode(r, &c[t], t, &c[t].ahead)) q.h[q.n++] = t;
  for (size_t i = q.n / 2 + 1; i-- > 0;) am_sift_down(&q, i);
  uint64_t last = 0;
  while (q.n) {
    uint32_t t = q.h[0];
    am_event ev = c[t].ahead;
    if (ev.order < last) am_fail("thread %u: an event before one already merged", t);
    last = ev.order;
    am_apply(w, held, t, &ev);
    if (am_decode(r, &c[t], t, &c[t].ahead)) {
      am_sift_down(&q, 0);
    } else {
      q.h[0] = q.h[--q.n];
      am_sift_down(&q, 0);
      free(c[t].buf);
      c[t].buf = NULL;
    }
  }
  for (uint32_t t = 0; t < n; t++) free(c[t].pieces);
  free(c);
  free(held);
  free(q.h);
}

// ---------------------------------------------------------------------------
// The summary: JSON after the chunks
// ---------------------------------------------------------------------------
static void am_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\')
      fprintf(f, "\\%c", *c);
    else if (*c < 0x20 || *c >= 0x7f)
      fprintf(f, "\\u%04x", *c);  // a path's bytes, not its characters: said plainly
    else
      fputc(*c, f);
  }
  fputc('"', f);
}

static void am_json_process(FILE *f, const am_process_t *p) {
  fprintf(f, "{\"pid\":%u,\"ppid\":%u,\"events\":%" PRIu64 ",\"threads\":%u,\"announced\":%s,\"exe\":",
          p->pid, p->ppid, p->events, p->threads, p->announced ? "true" : "false");
  am_json_string(f, p->exe);
  fprintf(f, ",\"next_malloc\":");
  am_json_string(f, p->next);
  if (p->exited) {
    const am_rec_exit *x = &p->exit;
    fprintf(f,
            ",\"exit\":{\"cpu_ns\":%" PRIu64 ",\"wall_ns\":%" PRIu64 ",\"tsc_per_us\":%" PRIu64
            ",\"calls\":%" PRIu64 ",\"timed\":%" PRIu64 ",\"timed_call_cycles\":%" PRIu64
            ",\"timed_whole_cycles\":%" PRIu64 ",\"flush_cycles\":%" PRIu64 ",\"lost\":%" PRIu64 "}",
            x->cpu_ns, x->wall_ns, x->tsc_per_us, x->calls, x->timed, x->timed_call, x->timed_whole,
            x->flush_cycles, x->lost);
  }
  fputc('}', f);
}

// The share of the process's CPU time inside the allocator: its timed calls' cycles
// scaled to all its calls, over its CPU time less the recorder's own (its wrapper
// around each call, scaled the same way, and its writing); -1 where unknown.
static double am_alloc_share(const am_process_t *p) {
  const am_rec_exit *x = &p->exit;
  if (!p->exited || !x->timed || !x->tsc_per_us || !x->calls) return -1;
  double scale = (double)x->calls / (double)x->timed;
  double inside = (double)x->timed_call * scale;
  double own = ((double)x->timed_whole - (double)x->timed_call) * scale + (double)x->flush_cycles;
  double program = (double)x->cpu_ns * (double)x->tsc_per_us / 1000 - own;
  if (program <= 0 || inside < 0) return -1;
  return inside < program ? inside / program : 1.0;
}

static void am_summary(FILE *f, const am_recording *r, uint32_t proc, const am_writer *w,
                       const char *meta) {
  fprintf(f, "{\"format\":%d,\"recording_bytes\":%" PRIu64 ",\"read_bytes\":%" PRIu64 ",\"cut\":",
          AM_TRACE_VERSION, r->size, r->cut_at);
  am_json_string(f, r->cut_why);
  double share = am_alloc_share(&r->procs[proc]);
  if (share >= 0)
    fprintf(f, ",\"alloc_share\":%.6f", share);
  else
    fprintf(f, ",\"alloc_share\":null");
  fprintf(f, ",\"process\":");
  am_json_process(f, &r->procs[proc]);
  fprintf(f, ",\"processes\":[");
  for (size_t i = 0; i < r->nprocs && i < 64; i++) {
    if (i) fputc(',', f);
    am_json_process(f, &r->procs[i]);
  }
  fprintf(f, "],\"process_count\":%zu,\"threads\":%u,\"ops\":%" PRIu64 ",\"slots\":%" PRIu64
             ",\"peak_requested_bytes\":%" PRId64 ",\"waits\":%" PRIu64 ",\"unknown_frees\":%" PRIu64
             ",\"unknown_reallocs\":%" PRIu64 ",\"conflicts\":%" PRIu64 ",\"failed\":%" PRIu64
             ",\"orphan_threads\":%" PRIu64 ",\"live_at_end\":%zu,\"calls\":{",
          r->nprocs, w->nthreads, w->ops, w->slots_used, w->peak, w->waits, w->unknown_frees,
          w->unknown_reallocs, w->conflicts, w->failed, w->orphans, w->live.n);
  const char *sep = "";
  for (int op = 1; op < AM_OP_CREATE; op++) {
    if (!w->calls[op]) continue;
    fprintf(f, "%s\"%s\":%" PRIu64, sep, am_op_names[op], w->calls[op]);
    sep = ",";
  }
  fprintf(f, "},\"recorded\":%s}", meta && *meta ? meta : "null");
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: am_trace RECORDING TRACE [META_JSON]\n");
    return 2;
  }
  am_input = argv[1];
  am_recording r = {0};
  r.fd = open(argv[1], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  struct stat st;
  if (r.fd < 0 || fstat(r.fd, &st) != 0) am_fail("cannot open: %s", strerror(errno));
  if (!S_ISREG(st.st_mode)) am_fail("not a regular file");
  r.size = (uint64_t)st.st_size;
  am_scan(&r);
  uint32_t proc = 0;
  for (uint32_t i = 1; i < r.nprocs; i++)
    if (r.procs[i].events > r.procs[proc].events) proc = i;
  if (r.nprocs == 0 || r.procs[proc].events == 0)
    am_fail("no allocation call recorded%s%s", *r.cut_why ? ": " : "", r.cut_why);
  if (r.procs[proc].threads > AM_TRACE_MAX_THREADS)
    am_fail("%u threads: a trace replays at most %u", r.procs[proc].threads, AM_TRACE_MAX_THREADS);
  am_input = argv[2];
  am_writer w = {0};
  w.f = fopen(argv[2], "wbx");
  if (w.f == NULL) am_fail("cannot create: %s", strerror(errno));
  w.nthreads = r.procs[proc].threads;
  w.threads = calloc(w.nthreads, sizeof *w.threads);
  if (!w.threads) am_fail("out of memory");
  am_trace_head head = {AM_TRACE_MAGIC, AM_TRACE_VERSION, w.nthreads, 0, 0, 0, 0, 0, 0};
  if (fwrite(&head, sizeof head, 1, w.f) != 1) am_fail("cannot write: %s", strerror(errno));
  w.at = sizeof head;
  am_input = argv[1];
  am_merge(&r, proc, &w);
  am_input = argv[2];
  for (uint32_t t = 0; t < w.nthreads; t++) {
    am_emit_chunk(&w, t);
    free(w.threads[t].buf);
    free(w.threads[t].free_slots);
  }
  free(w.spill);
  head.slots = w.slots_used;
  head.ops = w.ops;
  head.chunks = w.chunks;
  head.json_at = w.at;
  long json_start = ftell(w.f);
  am_summary(w.f, &r, proc, &w, argc > 3 ? argv[3] : "");
  long json_end = ftell(w.f);
  if (json_start < 0 || json_end - json_start > (long)AM_TRACE_MAX_JSON) am_fail("summary too long");
  head.json_bytes = (uint32_t)(json_end - json_start);
  if (fseek(w.f, 0, SEEK_SET) != 0 || fwrite(&head, sizeof head, 1, w.f) != 1 || fclose(w.f) != 0)
    am_fail("cannot write: %s", strerror(errno));
  return 0;
}
