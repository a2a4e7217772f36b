// am_run.h — what the launcher's files share: am_run.c (spawn, signals, wait, the
// report), am_run_limit.c (the memory limit: a cgroup, else a watchdog), am_run_rss.c
// (the run's RSS: its tree's sum, sampled over time), am_run_watch.c (what each
// process image had mapped as it ended), am_run_kcount.c (the kernel's count of the
// run's system calls) and am_run_ktime.c (the time inside some of them).
#ifndef AM_RUN_H
#define AM_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

int64_t am_now_ns(void);  // CLOCK_MONOTONIC

// -- the memory limit (am_run_limit.c) ---------------------------------------------
extern long long am_limit;  // bytes; 0: none
extern char am_cgroup[512];  // the run's memory cgroup directory, or ""
extern int am_cgroup_v;      // its cgroup version: 1 or 2
void am_cgroup_make(void);
long am_cgroup_oom_kills(void);
void am_cgroup_remove(void);
void am_join(pid_t pid, const int go[2]);  // the launcher: the child in the cgroup, then go
void am_wait_go(const int go[2]);          // the child: wait until it is in it

// -- RSS over time (am_run_rss.c) --------------------------------------------------
#define AM_SERIES_MAX 512
struct am_series {
  int64_t period_ns;    // 0: no sampling
  int64_t next_ns;      // when the next sample is due
  int64_t t0_ns;        // the run's start
  uint32_t t_ms[AM_SERIES_MAX];
  uint32_t kib[AM_SERIES_MAX];
  int points;           // kept
  uint32_t stride;      // samples per kept point
  uint32_t in_point;    // samples already folded into the open point
  uint64_t samples;
  int64_t spent_ns;     // time the launcher spent sampling
  double integral;      // KiB x s, over every sample
  int64_t last_ns;
  uint32_t last_kib;
  pid_t main_pid;       // the benchmark's first process
  long long thp_kib;    // its AnonHugePages when last read (-1: never read)
  uint32_t start_kib;   // the first sample: the program loaded, before its work grows
  int64_t start_cpu_ns;  // the first process's CPU time at that sample (-1: unread)
  uint32_t peak_kib;    // the largest sample, and its file-backed part (statm's shared)
  uint32_t peak_file_kib;
  // smaps_rollup of the first process, read at new peaks within a time budget
  // (am_read_smaps): the read nearest the peak, and the tree's RSS when it was read.
  long long smaps_at_kib;  // -1: never read
  long long smaps_kib[4];  // Anonymous, Private_Dirty, LazyFree, AnonHugePages
  uint32_t smaps_reads;
  int64_t smaps_ns;     // time spent reading it
  int64_t smaps_last_ns;  // what the last read took: the next one will take about as long
  int near_peak;        // read smaps_rollup at all
};
extern struct am_series am_series;
long long am_run_rss(long long *file);  // the tree's RSS now, bytes (file: its file-backed part)
long long am_sample(int64_t now);     // a sample when due (-1: none taken)
void am_series_write(int fd, int64_t end_ns);

// -- what each process image had mapped as it ended (am_run_watch.c) ---------------
extern int am_watch_fd;     // the seccomp listener; -1: no watch
extern int am_watch_errno;  // why a watch that was asked for is missing (0: none missing)
void am_watch_child(int sock);    // the child: install the filter, send its listener
void am_watch_receive(int sock);  // the launcher: take the listener
// One stopped execve/exit_group: read, record, let it go on.
void am_watch_serve(int status_fd, pid_t main_pid);
// How long the program's first process waited at its exit_group to be read: not the
// program's time, the launcher takes it off the wall time.
extern int64_t am_watch_main_exit_ns;
void am_watch_write(int status_fd);  // the "watch" record

// -- the kernel's count of the run's system calls (am_run_kcount.c) -----------------
// A counting event on a tracepoint ("syscalls/sys_enter_mmap"), inherited by every thread
// and process of the run; -1 (errno set) when tracefs has no such event.
struct perf_event_attr;
int am_tracepoint_attr(struct perf_event_attr *attr, const char *tracepoint);
int am_kcount_open(pid_t pid, int every);  // before the child's exec; -1: not counting
void am_kcount_write(int status_fd);  // the "kernel" record, once the tree has ended

// -- the time inside those calls (am_run_ktime.c) -------------------------------------
int am_ktime_open(pid_t pid);  // before the child's exec; -1: not timing
// The "kernel" record's "times", once the tree has ended; bytes written (snprintf's).
int am_ktime_json(char *out, size_t cap);

#endif
