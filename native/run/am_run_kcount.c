// am_run_kcount.c — the kernel's count of what the run asks of it (AM_RUN_KCOUNT=1; 2:
// every system call too).
//
// An allocator's mmap, munmap, madvise, brk and futex calls are made inside libc or as
// raw system calls: no interposed symbol sees glibc's own, nor a lock built on raw
// futexes. The kernel sees every one. The launcher opens one counting perf event per
// kind below, a syscall tracepoint (syscalls:sys_enter_*, some with a filter on the
// call's arguments: madvise by advice, futex waits and wakes by operation; and every
// system call, raw_syscalls:sys_enter), on the
// program's first process before its exec, with `inherit`: every thread and process
// it starts is counted, and the counts of each are added to the first one's as it
// exits, so reading them once the whole tree has ended gives the tree's total. The
// events count in the kernel (no samples, no buffer, nothing the program can reach:
// the descriptors are the launcher's, close-on-exec) and cost the program a slower
// path into each of its system calls while any syscall tracepoint is on
// (bench/kcount_cost.py measures it).
//
// Needs what `perf stat -e syscalls:...` needs: tracefs (the event ids,
// /sys/kernel/tracing or /sys/kernel/debug/tracing) and the right to trace another
// process's tracepoints (root, or perf_event_paranoid -1). Where an event cannot be
// opened the record says why (its errno) and holds no counts: counts from some kinds
// and not others would read as zeros.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "am_run.h"

struct am_kind {
  const char *name;        // the record's key
  const char *tracepoint;  // under tracefs's events/
  const char *filter;      // on the call's arguments (NULL: every call)
};

// Each operation with FUTEX_PRIVATE_FLAG (128) and FUTEX_CLOCK_REALTIME (256) or not: a
// filter compares a field with a literal, it cannot mask it.
#define AM_FUTEX_WAITS                                                                    \
  "op == 0 || op == 128 || op == 256 || op == 384 || op == 9 || op == 137 || op == 265 " \
  "|| op == 393"
#define AM_FUTEX_WAKES                                                                     \
  "op == 1 || op == 129 || op == 257 || op == 385 || op == 10 || op == 138 || op == 266 " \
  "|| op == 394"

static const struct am_kind am_kinds[] = {
    // Every system call (only with AM_RUN_KCOUNT=2): what bench/kcount_cost.py needs.
    // Not on every run: it fires on every call, 5 times the cost of the kinds below
    // (+210 ns a getppid() against +40 ns here).
    {"all", "raw_syscalls/sys_enter", NULL},
    {"mmap", "syscalls/sys_enter_mmap", NULL},
    {"munmap", "syscalls/sys_enter_munmap", NULL},
    {"mremap", "syscalls/sys_enter_mremap", NULL},
    {"mprotect", "syscalls/sys_enter_mprotect", NULL},
    {"brk", "syscalls/sys_enter_brk", NULL},
    {"madvise", "syscalls/sys_enter_madvise", NULL},
    {"madvise_dontneed", "syscalls/sys_enter_madvise", "behavior == 4"},  // MADV_DONTNEED
    {"madvise_free", "syscalls/sys_enter_madvise", "behavior == 8"},      // MADV_FREE
    {"futex", "syscalls/sys_enter_futex", NULL},
    // FUTEX_WAIT (0) and FUTEX_WAIT_BITSET (9): a thread that found the word taken
    {"futex_wait", "syscalls/sys_enter_futex", AM_FUTEX_WAITS},
    // FUTEX_WAKE (1) and FUTEX_WAKE_BITSET (10)
    {"futex_wake", "syscalls/sys_enter_futex", AM_FUTEX_WAKES},
};
#define AM_KINDS (sizeof am_kinds / sizeof am_kinds[0])

static int am_kfd[AM_KINDS];
static int am_kerrno = -1;  // -1: not asked; 0: counting; else why not
static const char *am_kwhat = "";  // what failed: "tracefs", "open" or "filter"

// The tracepoint's id from tracefs, or -1 (errno set).
long am_tracepoint_id(const char *tracepoint) {
  static const char *roots[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};
  for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
    char path[256];
    snprintf(path, sizeof path, "%s/events/%s/id", roots[i], tracepoint);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    char buf[32];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = 0;
    return strtol(buf, NULL, 10);
  }
  errno = ENOENT;
  return -1;
}

static int am_kfail(const char *what) {
  am_kerrno = errno ? errno : EINVAL;
  am_kwhat = what;
  for (size_t i = 0; i < AM_KINDS; i++) {
    if (am_kfd[i] >= 0) close(am_kfd[i]);
    am_kfd[i] = -1;
  }
  return -1;
}

int am_tracepoint_attr(struct perf_event_attr *attr, const char *tracepoint) {
  long id = am_tracepoint_id(tracepoint);
  if (id < 0) return -1;
  memset(attr, 0, sizeof *attr);
  attr->size = sizeof *attr;
  attr->type = PERF_TYPE_TRACEPOINT;
  attr->config = (uint64_t)id;
  attr->inherit = 1;  // every thread and child process of the run
  return 0;
}

int am_kcount_open(pid_t pid, int every) {
  for (size_t i = 0; i < AM_KINDS; i++) am_kfd[i] = -1;
  for (size_t i = every ? 0 : 1; i < AM_KINDS; i++) {
    struct perf_event_attr attr;
    if (am_tracepoint_attr(&attr, am_kinds[i].tracepoint) != 0) return am_kfail("tracefs");
    long fd = syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) return am_kfail("open");
    am_kfd[i] = (int)fd;
    if (am_kinds[i].filter && ioctl(am_kfd[i], PERF_EVENT_IOC_SET_FILTER, am_kinds[i].filter) != 0)
      return am_kfail("filter");
  }
  am_kerrno = 0;
  return 0;
}

void am_kcount_write(int status_fd) {
  if (am_kerrno < 0) return;
  uint64_t counts[AM_KINDS] = {0};
  for (size_t i = 0; i < AM_KINDS && am_kerrno == 0; i++) {
    if (am_kfd[i] >= 0 && read(am_kfd[i], &counts[i], sizeof counts[i]) != (ssize_t)sizeof counts[i])
      am_kfail("read");
  }
  char times[1024];
  am_ktime_json(times, sizeof times);  // ends the timing either way
  if (am_kerrno != 0) {
    dprintf(status_fd,
            "{\"am\":\"kernel\",\"v\":2,\"errno\":%d,\"failed\":\"%s\",\"counts\":{},"
            "\"times\":null}\n",
            am_kerrno, am_kwhat);
    return;
  }
  char line[1024];
  int n = snprintf(line, sizeof line, "{\"am\":\"kernel\",\"v\":2,\"errno\":0,\"failed\":\"\",\"counts\":{");
  for (size_t i = 0; i < AM_KINDS; i++) {
    if (am_kfd[i] < 0) continue;  // "all", not asked for
    n += snprintf(line + n, sizeof line - (size_t)n, "%s\"%s\":%" PRIu64,
                  line[n - 1] == '{' ? "" : ",", am_kinds[i].name, counts[i]);
    close(am_kfd[i]);
  }
  dprintf(status_fd, "%s},\"times\":%s}\n", line, times);
}
