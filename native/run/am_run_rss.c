// am_run_rss.c — the run's RSS: the sum over its process tree, read from /proc,
// sampled over time into a bounded series (see am_run.c for the record it makes).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "am_run.h"

// /proc files of the run's processes, kept open between samples: a pread of an
// open /proc file costs a fraction of open+read+close. A process that ended
// fails its read, and its entry is opened again (a reused pid is a new file).
#define AM_PROCS_MAX 64
static struct am_proc {
  pid_t pid;
  int statm, children;  // fds, -1: closed
  int seen;             // in the last walk of the tree
} am_procs[AM_PROCS_MAX];
static int am_walk;

static ssize_t am_pread(int *fd, const char *path, char *buf, size_t n, int keep) {
  if (*fd < 0) *fd = open(path, O_RDONLY | O_CLOEXEC);
  if (*fd < 0) return -1;
  ssize_t got = pread(*fd, buf, n - 1, 0);
  if (got <= 0 || !keep) {
    close(*fd);
    *fd = -1;
  }
  if (got >= 0) buf[got] = 0;
  return got;
}

static struct am_proc *am_proc_of(pid_t pid) {
  struct am_proc *free_slot = NULL;
  for (int i = 0; i < AM_PROCS_MAX; i++) {
    if (am_procs[i].pid == pid) return &am_procs[i];
    if (!free_slot && am_procs[i].pid == 0) free_slot = &am_procs[i];
  }
  if (free_slot) *free_slot = (struct am_proc){.pid = pid, .statm = -1, .children = -1};
  return free_slot;  // NULL: too many processes to keep files open for
}

// Resident bytes of `pid` and its descendants (through /proc's children lists);
// *file gets their file-backed and shared part (statm's third field: RssFile +
// RssShmem), so resident - file is the anonymous part.
static long long am_tree_rss(pid_t pid, int depth, int self_too, long long *file) {
  char path[64], buf[4096];
  long long total = 0;
  struct am_proc *proc = am_proc_of(pid);
  int none = -1;
  if (proc) proc->seen = am_walk;
  if (self_too) {
    snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
    long size, resident, shared;
    if (am_pread(proc ? &proc->statm : &none, path, buf, sizeof buf, proc != NULL) > 0 &&
        sscanf(buf, "%ld %ld %ld", &size, &resident, &shared) == 3) {
      total = (long long)resident * sysconf(_SC_PAGESIZE);
      *file += (long long)shared * sysconf(_SC_PAGESIZE);
    }
  }
  if (depth > 64) return total;
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
  if (am_pread(proc ? &proc->children : &none, path, buf, sizeof buf, proc != NULL) <= 0)
    return total;
  for (char *p = buf, *end; *p; p = end) {
    long child = strtol(p, &end, 10);
    if (end == p) break;
    total += am_tree_rss((pid_t)child, depth + 1, 1, file);
  }
  return total;
}

// Resident bytes of the run: every process below the launcher, not itself.
long long am_run_rss(long long *file) {
  am_walk++;
  *file = 0;
  long long rss = am_tree_rss(getpid(), 0, 0, file);
  for (int i = 0; i < AM_PROCS_MAX; i++) {  // forget the processes that ended
    struct am_proc *p = &am_procs[i];
    if (p->pid == 0 || p->seen == am_walk) continue;
    if (p->statm >= 0) close(p->statm);
    if (p->children >= 0) close(p->children);
    p->pid = 0;
  }
  return rss;
}

// -- RSS over time ---------------------------------------------------------------
struct am_series am_series = {
    .stride = 1, .thp_kib = -1, .start_cpu_ns = -1, .smaps_at_kib = -1};

// A "Name: N kB" field of a /proc file (-1: not there).
static long long am_proc_kib(const char *path, const char *field) {
  char buf[4096];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t got = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (got <= 0) return -1;
  buf[got] = 0;
  const char *at = strstr(buf, field);
  return at ? atoll(at + strlen(field)) : -1;
}

// The transparent huge pages the benchmark's first process holds. smaps_rollup
// walks every mapping under the process's mmap lock (~0.2 ms for a Python), so
// it is read at samples 2, 8, 32, 64, then every 64th (about every 320 ms),
// and only when the system holds any huge page at all (/proc/meminfo, ~10 us):
// with none in the system, the process holds none either.
static void am_read_thp(void) {
  uint64_t n = am_series.samples;
  if (n != 2 && n != 8 && n != 32 && (n == 0 || n % 64 != 0)) return;
  if (am_proc_kib("/proc/meminfo", "AnonHugePages:") == 0) {
    am_series.thp_kib = 0;
    return;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)am_series.main_pid);
  long long kib = am_proc_kib(path, "AnonHugePages:");
  if (kib >= 0) am_series.thp_kib = kib;
}

// smaps_rollup of the benchmark's first process at a new peak: what its RSS is made
// of there (Anonymous, Private_Dirty, LazyFree, AnonHugePages). The read walks every
// mapping under the process's mmap lock (~0.2 ms for a Python), which its own mmap
// and munmap wait for; so a read is taken only at a sample 1/64 above the last read,
// and only while the reads so far and one more as long as the last stay within
// 1/200 of the run's time so far (the first read is always taken).
static const char *am_smaps_fields[4] = {"\nAnonymous:", "\nPrivate_Dirty:", "\nLazyFree:",
                                          "\nAnonHugePages:"};
static void am_read_smaps(int64_t now, uint32_t kib) {
  if (!am_series.near_peak) return;
  if (am_series.smaps_at_kib >= 0 && kib <= am_series.smaps_at_kib + am_series.smaps_at_kib / 64)
    return;
  int64_t spent = am_series.smaps_ns + am_series.smaps_last_ns;
  if (am_series.smaps_reads > 0 && spent * 200 > now - am_series.t0_ns) return;
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)am_series.main_pid);
  int64_t start = am_now_ns();
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t got = read(fd, buf, sizeof buf - 1);
  close(fd);
  am_series.smaps_reads++;
  am_series.smaps_last_ns = am_now_ns() - start;
  am_series.smaps_ns += am_series.smaps_last_ns;
  if (got <= 0) return;
  buf[got] = 0;
  long long found[4];
  for (int i = 0; i < 4; i++) {
    const char *at = strstr(buf, am_smaps_fields[i]);
    if (!at) return;  // a kernel without the field: keep the last full read
    found[i] = atoll(at + strlen(am_smaps_fields[i]));
  }
  memcpy(am_series.smaps_kib, found, sizeof found);
  am_series.smaps_at_kib = kib;
}

static void am_series_fold(int64_t at_ns, uint32_t kib) {
  if (am_series.in_point == 0) {
    if (am_series.points == AM_SERIES_MAX) {  // full: merge neighbours
      for (int i = 0; i < AM_SERIES_MAX / 2; i++) {
        am_series.t_ms[i] = am_series.t_ms[2 * i];
        uint32_t a = am_series.kib[2 * i], b = am_series.kib[2 * i + 1];
        am_series.kib[i] = a > b ? a : b;
      }
      am_series.points = AM_SERIES_MAX / 2;
      am_series.stride *= 2;
    }
    am_series.t_ms[am_series.points] = (uint32_t)((at_ns - am_series.t0_ns) / 1000000);
    am_series.kib[am_series.points++] = kib;
  } else if (kib > am_series.kib[am_series.points - 1]) {
    am_series.kib[am_series.points - 1] = kib;
  }
  if (++am_series.in_point == am_series.stride) am_series.in_point = 0;
}

// The CPU time the benchmark's first process (its first thread) has had since its fork,
// from schedstat (ns; -1: unreadable). Stamped on the first sample: a launcher that ran
// late (a busy machine) reads the start-up RSS after the program's work began, and this
// says how far in it was.
static int64_t am_first_cpu_ns(void) {
  char path[64], buf[96];
  snprintf(path, sizeof path, "/proc/%d/schedstat", (int)am_series.main_pid);
  int fd = -1;
  if (am_pread(&fd, path, buf, sizeof buf, 0) <= 0) return -1;
  char *end;
  long long ns = strtoll(buf, &end, 10);
  return end == buf || ns < 0 ? -1 : ns;
}

// One sample, if it is due; returns the RSS (bytes) read, or -1 if none was due.
long long am_sample(int64_t now) {
  if (am_series.period_ns == 0 || now < am_series.next_ns) return -1;
  long long file;
  long long rss = am_run_rss(&file);
  if (rss <= 0) {  // the processes are exiting: no reading
    am_series.next_ns = now + am_series.period_ns;
    return -1;
  }
  uint32_t kib = (uint32_t)(rss >> 10);
  if (am_series.samples == 0) {
    am_series.start_kib = kib;
    am_series.start_cpu_ns = am_first_cpu_ns();
  }
  if (kib > am_series.peak_kib) {
    am_series.peak_kib = kib;
    am_series.peak_file_kib = (uint32_t)(file >> 10);
    am_read_smaps(now, kib);
  }
  if (am_series.samples > 0)  // trapezoids between samples
    am_series.integral += (double)(kib + am_series.last_kib) / 2 * (double)(now - am_series.last_ns) / 1e9;
  am_series_fold(now, kib);
  am_series.samples++;
  am_read_thp();
  am_series.last_ns = now;
  am_series.last_kib = kib;
  int64_t done = am_now_ns();
  am_series.spent_ns += done - now;
  am_series.next_ns += am_series.period_ns;
  if (am_series.next_ns <= done) am_series.next_ns = done + am_series.period_ns;  // late: skip
  return rss;
}

// One write: the record is a single line however many points it has.
void am_series_write(int fd, int64_t end_ns) {
  static char text[64 + AM_SERIES_MAX * 24 + 512];
  size_t n = 0;
#define AM_PUT(...) n += (size_t)snprintf(text + n, sizeof text - n, __VA_ARGS__)
  // The last RSS read holds until the end.
  am_series.integral += (double)am_series.last_kib * (double)(end_ns - am_series.last_ns) / 1e9;
  AM_PUT("{\"am\":\"rss\",\"v\":3,\"period_us\":%" PRId64 ",\"stride\":%u,\"samples\":%" PRIu64
         ",\"sample_ns\":%" PRId64 ",\"integral_kib_s\":%.3f,\"last_kib\":%u,\"thp_kib\":%lld"
         ",\"start_kib\":%u,\"start_cpu_us\":%" PRId64 ",\"peak_kib\":%u,\"peak_file_kib\":%u,\"smaps_at_kib\":%lld"
         ",\"smaps_kib\":[%lld,%lld,%lld,%lld],\"smaps_reads\":%u,\"smaps_ns\":%" PRId64
         ",\"t_ms\":[",
         am_series.period_ns / 1000, am_series.stride, am_series.samples, am_series.spent_ns,
         am_series.integral, am_series.last_kib, am_series.thp_kib, am_series.start_kib,
         am_series.start_cpu_ns < 0 ? -1 : am_series.start_cpu_ns / 1000, am_series.peak_kib, am_series.peak_file_kib, am_series.smaps_at_kib,
         am_series.smaps_kib[0], am_series.smaps_kib[1], am_series.smaps_kib[2],
         am_series.smaps_kib[3], am_series.smaps_reads, am_series.smaps_ns);
  for (int i = 0; i < am_series.points; i++) AM_PUT(i ? ",%u" : "%u", am_series.t_ms[i]);
  AM_PUT("],\"kib\":[");
  for (int i = 0; i < am_series.points; i++) AM_PUT(i ? ",%u" : "%u", am_series.kib[i]);
  AM_PUT("]}\n");
#undef AM_PUT
  for (size_t done = 0; done < n;) {
    ssize_t w = write(fd, text + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    done += (size_t)w;
  }
}
