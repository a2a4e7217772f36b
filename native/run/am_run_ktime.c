// am_run_ktime.c — the time a run spends inside the system calls an allocator makes
// (AM_RUN_KTIME=1, with the counts: the why pass and `profile`, not every run).
//
// The counts (am_run_kcount.c) say how often; these say for how long: from a call's
// entry to its exit, for the kinds below, and lock waits: futex's FUTEX_WAIT, a thread
// asleep on a lock's word (glibc's mutexes and arena locks wait so; its joins and
// condition variables wait with FUTEX_WAIT_BITSET: a thread waiting for another to end
// or to send work is no lock's, and is left out). Per CPU, one sampling event on each kind's
// entry tracepoint (syscalls:sys_enter_<kind>; futex's filtered to its waits) and one on
// raw_syscalls:sys_exit filtered to those calls (one exit tracepoint, not seven: each
// tracepoint the launcher is the last to close costs ~40 ms here to unregister), opened
// on the program's first process before its exec with `inherit` (the kernel sends an
// inherited event's samples to its parent's buffer: every thread and process of the run
// lands in the launcher's ring of the CPU it ran on). A sample is 32 bytes (event id,
// pid/tid, time on CLOCK_MONOTONIC); a thread of the launcher drains the rings when
// one is half full, or every 5 ms. A thread is in one system call at a time, so its
// entry's next exit is that call's: samples are paired in time order, and a drain
// keeps back what is younger than AM_SETTLE_NS (a call that moved CPUs may have its
// entry in a ring read before it was written and its exit in one read after) for the
// next.
//
// What it costs the run: two samples a timed call (bench/kcount_cost.py), and every
// other system call of the run passes the exit filter: why every run counts and only
// these runs time. Samples the rings had no room for are counted ("lost"): the times
// are then a lower bound and the record says so. The exit of a futex wake, whose entry
// the filter drops, finds no entry and is dropped.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "am_run.h"

static const char *const am_tkinds[] = {"mmap", "munmap", "mremap", "mprotect",
                                        "brk",  "madvise", "futex_lock"};
#define AM_TKINDS (sizeof am_tkinds / sizeof am_tkinds[0])
#define AM_FUTEX_LOCK 6  // its index: futex's entry tracepoint, filtered to lock waits
#define AM_EXIT AM_TKINDS  // the event index of raw_syscalls:sys_exit
#define AM_EVENTS (AM_TKINDS + 1)
#define AM_TCPUS 256
// 1 MiB a CPU: 32,768 samples, drained when half full or every 5 ms. A lock storm's
// ~200,000 samples a second filled 256 KiB while the drain waited for a CPU.
#define AM_RING_PAGES 256
#define AM_TIDS 65536     // threads a run may have timed (more: their calls are not)
#define AM_SETTLE_NS 2000000  // a sample this young may still have an older one unread

// FUTEX_WAIT, private or not, realtime clock or not (a filter compares a field with a
// literal, it cannot mask it).
#define AM_LOCK_WAITS "op == 0 || op == 128 || op == 256 || op == 384"

struct am_pending {
  pid_t tid;  // 0: a free slot
  int kind;   // of the entry waiting for its exit; -1: none
  uint64_t t;
};

struct am_sample {
  uint64_t t;
  pid_t tid;
  int kind;  // AM_EXIT: an exit
};

static struct {
  int asked, err;  // err: why not timing (0: timing)
  const char *failed;
  int cpus;
  int fd[AM_TCPUS][AM_EVENTS];
  uint64_t id[AM_TCPUS][AM_EVENTS];
  void *ring[AM_TCPUS];
  size_t page;
  uint64_t ns[AM_TKINDS], calls[AM_TKINDS], lost, unpaired;
  struct am_pending *tids;
  struct am_sample *batch;  // read and not yet paired: the younger part of the last drain
  size_t held, batch_cap;
  pthread_t thread;
  volatile int stop;
} am_kt;

static void am_kt_close(void) {
  for (int c = 0; c < am_kt.cpus; c++) {
    for (size_t e = 0; e < AM_EVENTS; e++)
      if (am_kt.fd[c][e] >= 0) close(am_kt.fd[c][e]);
    if (am_kt.ring[c]) munmap(am_kt.ring[c], (AM_RING_PAGES + 1) * am_kt.page);
    am_kt.ring[c] = NULL;
  }
}

static int am_kt_fail(const char *what) {
  am_kt.err = errno ? errno : EINVAL;
  am_kt.failed = what;
  am_kt_close();
  return -1;
}

// The exit filter: the system calls of the kinds timed (by number: raw_syscalls has no
// names).
static void am_exit_filter(char *out, size_t cap) {
  snprintf(out, cap, "id == %d || id == %d || id == %d || id == %d || id == %d || id == %d || "
           "id == %d", SYS_mmap, SYS_munmap, SYS_mremap, SYS_mprotect, SYS_brk, SYS_madvise,
           SYS_futex);
}

static int am_kt_open_one(pid_t pid, int c, size_t e) {
  char name[64], exits[256];
  if (e == AM_EXIT)
    snprintf(name, sizeof name, "raw_syscalls/sys_exit");
  else
    snprintf(name, sizeof name, "syscalls/sys_enter_%s",
             e == AM_FUTEX_LOCK ? "futex" : am_tkinds[e]);
  struct perf_event_attr attr;
  if (am_tracepoint_attr(&attr, name) != 0) return am_kt_fail("tracefs");
  attr.sample_period = 1;  // every call: a sample at its entry and one at its exit
  attr.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  attr.use_clockid = 1;  // the drain's clock: what is old enough to pair
  attr.clockid = CLOCK_MONOTONIC;
  attr.watermark = 1;  // wake the drain when a ring is half full
  attr.wakeup_watermark = (uint32_t)(AM_RING_PAGES * am_kt.page / 2);
  long fd = syscall(SYS_perf_event_open, &attr, pid, c, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) return am_kt_fail("open");
  am_kt.fd[c][e] = (int)fd;
  if (ioctl((int)fd, PERF_EVENT_IOC_ID, &am_kt.id[c][e]) != 0) return am_kt_fail("open");
  am_exit_filter(exits, sizeof exits);
  const char *filter = e == AM_EXIT ? exits : e == AM_FUTEX_LOCK ? AM_LOCK_WAITS : NULL;
  if (filter && ioctl((int)fd, PERF_EVENT_IOC_SET_FILTER, filter) != 0)
    return am_kt_fail("filter");
  if (e == 0) {
    void *ring = mmap(NULL, (AM_RING_PAGES + 1) * am_kt.page, PROT_READ | PROT_WRITE,
                      MAP_SHARED, (int)fd, 0);
    if (ring == MAP_FAILED) return am_kt_fail("ring");
    am_kt.ring[c] = ring;
  } else if (ioctl((int)fd, PERF_EVENT_IOC_SET_OUTPUT, am_kt.fd[c][0]) != 0) {
    return am_kt_fail("ring");
  }
  return 0;
}

static int am_kt_kind_of(int c, uint64_t id) {
  for (size_t e = 0; e < AM_EVENTS; e++)
    if (am_kt.id[c][e] == id) return (int)e;
  return -1;
}

// Copy out every record of CPU c's ring: samples into the batch, lost counts added.
static void am_kt_read_ring(int c, size_t *n) {
  struct perf_event_mmap_page *meta = am_kt.ring[c];
  const unsigned char *data = (const unsigned char *)meta + am_kt.page;
  uint64_t size = (uint64_t)AM_RING_PAGES * am_kt.page;
  uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = meta->data_tail;
  while (tail < head) {
    unsigned char rec[64];
    struct perf_event_header h;
    for (size_t i = 0; i < sizeof h; i++) ((unsigned char *)&h)[i] = data[(tail + i) % size];
    if (h.size < sizeof h) break;  // not a record: the ring is not what was asked
    size_t copy = h.size < sizeof rec ? h.size : sizeof rec;
    for (size_t i = 0; i < copy; i++) rec[i] = data[(tail + i) % size];
    if (h.type == PERF_RECORD_SAMPLE && copy >= 32) {
      uint64_t id, t;
      uint32_t tid;
      memcpy(&id, rec + 8, 8);
      memcpy(&tid, rec + 20, 4);
      memcpy(&t, rec + 24, 8);
      int kind = am_kt_kind_of(c, id);
      if (*n < am_kt.batch_cap && kind >= 0)
        am_kt.batch[(*n)++] = (struct am_sample){t, (pid_t)tid, kind};
      else
        am_kt.unpaired++;
    } else if (h.type == PERF_RECORD_LOST && copy >= 24) {
      uint64_t lost;
      memcpy(&lost, rec + 16, 8);
      am_kt.lost += lost;
    }
    tail += h.size;
  }
  __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
}

static int am_by_time(const void *a, const void *b) {
  uint64_t x = ((const struct am_sample *)a)->t, y = ((const struct am_sample *)b)->t;
  return (x > y) - (x < y);
}

static struct am_pending *am_kt_slot(pid_t tid) {
  for (size_t i = 0; i < AM_TIDS; i++) {
    struct am_pending *p = &am_kt.tids[((size_t)tid * 2654435761u + i) % AM_TIDS];
    if (p->tid == tid) return p;
    if (p->tid == 0) {
      *p = (struct am_pending){tid, -1, 0};
      return p;
    }
  }
  return NULL;
}

// One sample, in time order: an entry waits for its thread's next exit, which is its
// call's (a thread is in one call at a time).
static void am_kt_pair(const struct am_sample *s) {
  struct am_pending *p = am_kt_slot(s->tid);
  if (!p) {
    am_kt.unpaired++;
    return;
  }
  if (s->kind != (int)AM_EXIT) {
    if (p->kind >= 0) am_kt.unpaired++;  // an entry whose exit never came
    p->kind = s->kind;
    p->t = s->t;
  } else if (p->kind >= 0) {
    am_kt.ns[p->kind] += s->t - p->t;
    am_kt.calls[p->kind]++;
    p->kind = -1;
  }  // else the exit of a futex wake: its entry was filtered out
}

// Reads every ring; pairs, in time order, what is older than AM_SETTLE_NS (everything:
// `all`), and keeps the rest for the next drain.
static void am_kt_drain(int all) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  uint64_t settled = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec - AM_SETTLE_NS;
  size_t n = am_kt.held;
  for (int c = 0; c < am_kt.cpus; c++) am_kt_read_ring(c, &n);
  qsort(am_kt.batch, n, sizeof am_kt.batch[0], am_by_time);
  size_t i = 0;
  for (; i < n && (all || am_kt.batch[i].t < settled); i++) am_kt_pair(&am_kt.batch[i]);
  memmove(am_kt.batch, am_kt.batch + i, (n - i) * sizeof am_kt.batch[0]);
  am_kt.held = n - i;
}

static void *am_kt_loop(void *unused) {
  (void)unused;
  struct pollfd fds[AM_TCPUS];
  for (int c = 0; c < am_kt.cpus; c++) fds[c] = (struct pollfd){am_kt.fd[c][0], POLLIN, 0};
  while (!am_kt.stop) {
    poll(fds, (nfds_t)am_kt.cpus, 5);  // a ring half full, or 5 ms
    am_kt_drain(0);
  }
  return NULL;
}

int am_ktime_open(pid_t pid) {
  am_kt.asked = 1;
  am_kt.page = (size_t)sysconf(_SC_PAGESIZE);
  long cpus = sysconf(_SC_NPROCESSORS_CONF);
  am_kt.cpus = cpus < 1 ? 1 : cpus > AM_TCPUS ? AM_TCPUS : (int)cpus;
  for (int c = 0; c < AM_TCPUS; c++)
    for (size_t e = 0; e < AM_EVENTS; e++) am_kt.fd[c][e] = -1;
  for (int c = 0; c < am_kt.cpus; c++)
    for (size_t e = 0; e < AM_EVENTS; e++)
      if (am_kt_open_one(pid, c, e) != 0) return -1;
  // Full rings, and what the last drain kept back.
  am_kt.batch_cap = 2 * (size_t)am_kt.cpus * AM_RING_PAGES * am_kt.page / 32;
  am_kt.batch = calloc(am_kt.batch_cap, sizeof am_kt.batch[0]);
  am_kt.tids = calloc(AM_TIDS, sizeof am_kt.tids[0]);
  errno = ENOMEM;
  if (!am_kt.batch || !am_kt.tids) return am_kt_fail("memory");
  errno = pthread_create(&am_kt.thread, NULL, am_kt_loop, NULL);
  if (errno) return am_kt_fail("thread");
  return 0;
}

// The times as the "kernel" record's "times" member (am_run_kcount.c writes it), once
// the tree has ended: "null" when not asked for.
int am_ktime_json(char *out, size_t cap) {
  if (!am_kt.asked) return snprintf(out, cap, "null");
  if (am_kt.err)
    return snprintf(out, cap, "{\"errno\":%d,\"failed\":\"%s\"}", am_kt.err, am_kt.failed);
  am_kt.stop = 1;
  pthread_join(am_kt.thread, NULL);
  am_kt_drain(1);  // the tree has ended: what is left in the rings is all there is
  am_kt_close();
  int n = snprintf(out, cap,
                   "{\"errno\":0,\"failed\":\"\",\"lost\":%" PRIu64 ",\"unpaired\":%" PRIu64
                   ",\"ns\":{",
                   am_kt.lost, am_kt.unpaired);
  for (size_t k = 0; k < AM_TKINDS; k++)
    n += snprintf(out + n, cap - (size_t)n, "%s\"%s\":%" PRIu64, k ? "," : "", am_tkinds[k],
                  am_kt.ns[k]);
  n += snprintf(out + n, cap - (size_t)n, "},\"calls\":{");
  for (size_t k = 0; k < AM_TKINDS; k++)
    n += snprintf(out + n, cap - (size_t)n, "%s\"%s\":%" PRIu64, k ? "," : "", am_tkinds[k],
                  am_kt.calls[k]);
  return n + snprintf(out + n, cap - (size_t)n, "}}");
}
