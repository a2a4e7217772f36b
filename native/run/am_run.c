// am_run — start one benchmark child and report its resource usage.
//
// usage: am_run STATUS_FD [--memory-limit BYTES] [--steps N1,N2,...] PROGRAM [ARGS...]
//        am_run --calibrate
//
// With --steps, the arguments are several commands (the first N1 words, then
// the next N2, ...) run one after another, each starting only when the one
// before succeeded; the status and usage reported are those of the whole
// sequence (times summed, peak RSS the largest). A workload such as a vips
// pipeline is several programs, and a shell in between would itself run on
// the allocator under test.
//
// Why a native launcher: Linux keeps a process's peak RSS across execve, so a
// child forked (or vforked) straight from Python would report at least the
// Python interpreter's RSS as its own peak. am_run is small; its fork carries
// only its own few hundred KiB into the child. It also moves AM_RUN_LD_PRELOAD
// to LD_PRELOAD for the child only, so the launcher never runs on the
// allocator under test.
//
// Every process the run starts ends with it. The launcher is a subreaper:
// processes orphaned inside the run (a daemon's first fork, a program that
// called setsid) become its children and are reaped by it. Their CPU times do not
// count in the benchmark's usage, but their peak RSS does: the record's maxrss_kib is
// the largest of every process of the tree (the main one's includes the children it
// waited for; each one it never waited for is reaped here), so a child that is never
// reaped cannot hide its memory. When the benchmark ends, the launcher kills what is left
// of its tree. If allocmark dies (even by SIGKILL) the launcher gets SIGTERM
// (PR_SET_PDEATHSIG), and SIGTERM, SIGINT or SIGHUP make it kill the whole tree
// and exit; allocmark's timeout sends SIGTERM too.
//
// With --memory-limit, the run's processes together may use at most BYTES of
// memory: a memory cgroup of its own where the launcher can make one (the kernel
// kills at the limit) -- below its own cgroup in a cgroup v1 memory hierarchy, or
// in cgroup v2 at <root>/allocmark/run-PID (v2 hands a controller down only
// through cgroups that hold no process, so the run cannot sit below the
// launcher's own, which does; the "allocmark" parent is left for later runs) --
// else a watchdog that reads the tree's RSS every 10 ms and kills it past the
// limit. Address-space rlimits are not used: allocators reserve far more address
// space than they touch.
//
// AM_RUN_WATCH=1: the launcher reads what served malloc in every process image of the
// run, from outside it (am_run_watch.c: a seccomp filter stops each execve and
// exit_group until the image has been read), and writes an "image" record for each and
// a "watch" record at the end. AM_RUN_USER=UID:GID: the child becomes that user before
// its exec (allocmark runs as root and the program must not reach its store, its cache
// or its libraries; run/runas.py), with that group only.
//
// AM_RUN_THP=never turns transparent huge pages off for the run's processes
// (PR_SET_THP_DISABLE: no root needed, inherited by children and kept across
// execve); the `:nothp` variant of every allocator sets it.
//
// AM_RUN_KCOUNT=1: the kernel counts the system calls of the run's whole tree by kind
// (am_run_kcount.c; 2: every system call too); the child waits, before its exec, until
// the counters are open.
//
// RSS over time: every AM_RUN_SAMPLE_US microseconds (default 5000; 0: off) the
// launcher reads the resident size of the run's processes from /proc (statm, a
// counter read that takes no lock the measured process needs). It keeps at
// most AM_SERIES_MAX points: when full, neighbouring points merge (the larger
// RSS stays, so spikes survive) and each point then covers twice as many
// samples. The memory-time integral is summed over every sample, not over the
// kept points. Waiting wakes on SIGCHLD, so the benchmark's end is seen at once
// and the wall time is not rounded to the sampling period.
//
// The measured program is not trusted: run as the same user (allocmark not root, or
// --run-as root) it could reach the launcher's STATUS_FD through /proc/PID/fd, or stop
// or kill the launcher.
// The launcher makes itself non-dumpable first (PR_SET_DUMPABLE 0, as ssh-agent
// does), which closes its /proc/PID/fd and memory to processes of the same user
// without CAP_SYS_PTRACE; the benchmark becomes dumpable again at its execve.
// allocmark counts a run only when the launcher exited with status 0 having
// written exactly one "run" record, so a program that kills the launcher after
// writing a record of its own gets an error, not a result. Stopped by SIGTERM,
// SIGINT or SIGHUP, the launcher ends the tree and exits with 100 + the signal,
// writing nothing. Stopped (SIGSTOP) and continued, it says so ("stopped":1): its
// wall time and samples then include time it did not watch the benchmark.
//
// On STATUS_FD it writes the "image" records as the images end (AM_RUN_WATCH), an
// "rss" record (when sampling is on), a "watch" record (AM_RUN_WATCH), a "kernel"
// record (AM_RUN_KCOUNT), then a "run" record, one JSON line each (see
// native/records.py in the package):
//   {"am":"rss","v":3,"period_us":N,"stride":K,"samples":N,"sample_ns":N,
//    "integral_kib_s":X,"last_kib":N,"thp_kib":N,"start_kib":N,"start_cpu_us":N,
//    "peak_kib":N,"peak_file_kib":N,"smaps_at_kib":N,"smaps_kib":[A,D,L,H],
//    "smaps_reads":N,"smaps_ns":N,"t_ms":[...],"kib":[...]}
// thp_kib: the AnonHugePages of the benchmark's first process when last read
// (-1: never; see am_read_thp). start_kib: the first sample's RSS, read when the first
// process had had start_cpu_us of CPU time (-1: unread; am_first_cpu_ns); peak_kib and
// peak_file_kib: the largest sample and its file-backed part (statm's shared);
// smaps_kib: Anonymous, Private_Dirty, LazyFree and AnonHugePages of the first
// process read nearest the peak (when the tree's RSS was smaps_at_kib, -1: never),
// after smaps_reads reads that took smaps_ns (see am_read_smaps).
//   {"am":"kernel","v":1,"errno":E,"failed":"tracefs"|"open"|"filter"|"read"|"",
//    "counts":{"mmap":N,"munmap":N,...}}  (counts only when errno is 0)
//   {"am":"run","v":4,"status":S,"wall_ns":N,"utime_us":N,"stime_us":N,
//    "maxrss_kib":N,"minflt":N,"majflt":N,"nvcsw":N,"nivcsw":N,"exec_errno":E,
//    "oom":0|1,"limit_by":"none"|"cgroup"|"cgroup2"|"watchdog","stopped":0|1}
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "am_run.h"

int64_t am_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t am_us(struct timeval tv) { return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec; }

static char am_children_path[64];  // /proc/PID/task/PID/children of the launcher
static volatile sig_atomic_t am_stopping;

// Sends SIGKILL to each direct child of the launcher; returns how many it found.
// Their own children are then re-parented to the launcher (the subreaper), so
// repeating this ends the whole tree. Async-signal-safe: the handler calls it.
static int am_kill_children(void) {
  int fd = open(am_children_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  static char buf[1 << 16];
  int found = 0;
  long pid = 0;
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < n; i++) {
      if (buf[i] >= '0' && buf[i] <= '9') {
        pid = pid * 10 + (buf[i] - '0');
      } else if (pid > 0) {
        kill((pid_t)pid, SIGKILL);
        found++;
        pid = 0;
      }
    }
  }
  if (pid > 0) {
    kill((pid_t)pid, SIGKILL);
    found++;
  }
  close(fd);
  return found;
}

static void am_on_stop(int sig) {
  am_stopping = sig;
  am_kill_children();
}

static volatile sig_atomic_t am_continued;  // SIGCONT came: the launcher was stopped
static long am_run_uid = -1;                   // the identity the program runs as

// A SIGCONT says the launcher was stopped -- unless the program sent it: any process of
// the launcher's session may send SIGCONT whatever its uid, so one from the run's own
// identity is the program's word, not a stop the launcher saw (nothing of that
// identity may stop the launcher: SIGSTOP needs the launcher's uid). The sender's uid
// is the kernel's for kill() (SI_USER) and tgkill() (SI_TKILL); sigqueue() and
// rt_sigqueueinfo() (SI_QUEUE and the other codes below 0) carry what the sender
// wrote, so such a SIGCONT says nothing of a stop whoever it claims to be from.
static void am_on_continue(int sig, siginfo_t *info, void *ctx) {
  (void)sig;
  (void)ctx;
  if (am_run_uid >= 0 && info && info->si_code <= 0) {
    if (info->si_code != SI_USER && info->si_code != SI_TKILL) return;
    if ((long)info->si_uid == am_run_uid) return;
  }
  am_continued = 1;
}

// The largest peak RSS of any process of the run the launcher reaped: a child the
// program never waited for (or left running) is reaped here, and its memory counts.
static long am_tree_maxrss;

static void am_note_reaped(const struct rusage *r) {
  if (r->ru_maxrss > am_tree_maxrss) am_tree_maxrss = r->ru_maxrss;
}

// After the benchmark: kill and reap every process left in its tree.
static void am_end_tree(void) {
  for (;;) {
    int killed = am_kill_children();
    struct rusage r;
    pid_t got = wait4(-1, NULL, killed ? 0 : WNOHANG, &r);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return;  // none left (ECHILD), or none this launcher can find
    am_note_reaped(&r);
  }
}

static void am_catch_stops(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = am_on_stop;
  sigemptyset(&sa.sa_mask);
  static const int stops[] = {SIGTERM, SIGINT, SIGHUP};
  for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++) sigaction(stops[i], &sa, NULL);
  sa.sa_handler = NULL;
  sa.sa_sigaction = am_on_continue;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGCONT, &sa, NULL);
}

// AM_RUN_GLIBC=DIR runs the program under another glibc (an entry glibc@VERSION,
// allocmark/debian.py): that glibc's own loader, DIR/ld-linux-x86-64.so.2, with
// DIR's libraries first. The loader does not search PATH, so the program is found
// here; it sees its full path as argv[0] (glibc 2.31's loader has no --argv0).
// Programs it starts run under the system's loader again: libam_who says so.
static void am_exec(char **argv) {
  const char *glibc = getenv("AM_RUN_GLIBC");
  if (!glibc || !*glibc) {
    execvp(argv[0], argv);
    return;
  }
  static char loader[PATH_MAX + 32], dir[PATH_MAX], prog[PATH_MAX];
  if (strlen(glibc) >= sizeof dir || strlen(argv[0]) >= sizeof prog) return;  // ENAMETOOLONG
  strcpy(dir, glibc);
  unsetenv("AM_RUN_GLIBC");
  snprintf(loader, sizeof loader, "%s/ld-linux-x86-64.so.2", dir);
  strcpy(prog, argv[0]);
  const char *path = getenv("PATH");
  if (!strchr(argv[0], '/') && path) {
    for (const char *p = path; *p;) {
      const char *end = strchr(p, ':');
      size_t len = end ? (size_t)(end - p) : strlen(p);
      int n = snprintf(prog, sizeof prog, "%.*s/%s", (int)len, p, argv[0]);
      if (len && n < (int)sizeof prog && access(prog, X_OK) == 0) break;
      strcpy(prog, argv[0]);
      if (!end) break;
      p = end + 1;
    }
  }
  size_t n = 0;
  while (argv[n]) n++;
  char **full = calloc(n + 4, sizeof *full);  // the child, just before exec
  if (!full) return;
  full[0] = loader;
  full[1] = "--library-path";
  full[2] = dir;
  full[3] = prog;
  for (size_t i = 1; i < n; i++) full[3 + i] = argv[i];
  execv(loader, full);
}

// The child: set the preload, exec, and on failure send errno up the pipe.
static void am_child(int err_fd, char **argv) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const char *thp = getenv("AM_RUN_THP");
  if (thp && strcmp(thp, "never") == 0 && prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) {
    int e = errno;  // a run that asked for no THP must not run with it
    ssize_t ignored = write(err_fd, &e, sizeof e);
    (void)ignored;
    _exit(127);
  }
  unsetenv("AM_RUN_THP");
  const char *preload = getenv("AM_RUN_LD_PRELOAD");
  if (preload) {
    setenv("LD_PRELOAD", preload, 1);
    unsetenv("AM_RUN_LD_PRELOAD");
  }
  am_exec(argv);
  int e = errno;
  ssize_t ignored = write(err_fd, &e, sizeof e);
  (void)ignored;
  _exit(127);
}

// The child, before its exec: become the unprivileged user allocmark chose (root cannot
// be regained), so that the program cannot write the store, the cache or the built
// libraries. Changing credentials clears the parent-death signal: set again after.
static void am_become(int err_fd, long uid, long gid) {
  if (uid < 0) return;
  gid_t g = (gid_t)gid;
  // No new privileges: a set-user-ID program it runs stays of its identity.
  if (setgroups(1, &g) != 0 || setgid(g) != 0 || setuid((uid_t)uid) != 0 ||
      (uid != 0 && setuid(0) == 0) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    int e = errno ? errno : EPERM;
    ssize_t ignored = write(err_fd, &e, sizeof e);
    (void)ignored;
    _exit(127);
  }
}

static int am_exec_errno(int fd) {
  int e = 0;
  ssize_t n;
  do n = read(fd, &e, sizeof e);
  while (n < 0 && errno == EINTR);
  return n == (ssize_t)sizeof e ? e : 0;
}

// Runs each step in its own child and stops at the first that fails, passing
// on its exit code or signal. Runs in a fork of am_run, never under the preload.
static void am_sequence(int err_fd, char **argv, const char *steps) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  for (const char *p = steps; *p;) {
    char *end;
    long n = strtol(p, &end, 10);
    if (n < 1) _exit(127);
    char **next = argv + n;
    char *saved = *next;
    *next = NULL;  // argv of this step ends here
    pid_t pid = fork();
    if (pid < 0) _exit(127);
    if (pid == 0) am_child(err_fd, argv);
    *next = saved;
    int status;
    while (waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) _exit(127);
    }
    if (WIFSIGNALED(status)) {
      signal(WTERMSIG(status), SIG_DFL);
      raise(WTERMSIG(status));
    }
    if (WEXITSTATUS(status) != 0) _exit(WEXITSTATUS(status));
    argv = next;
    p = *end == ',' ? end + 1 : end;
  }
  _exit(0);
}

// Waits for the benchmark while reaping the orphans it leaves (a daemon's
// first fork, a helper that outlived its parent): as a subreaper am_run adopts
// them, so their usage never counts as the benchmark's, and no zombie outlives
// the run.
static int am_oom_by_watchdog;

// With nothing to sample, watch or serve it blocks in poll until a child ends (SIGCHLD,
// blocked since before the fork so that none is missed, read from a signalfd); else it
// also wakes when the next sample is due or a process of the run stops at an execve or
// exit_group (am_run_watch.c). Sampling starts once the program has started: its exec
// closed the error pipe (or sent its errno), so that the first sample, the start-up
// RSS, is the program's and not the launcher's fork still on its way to exec (whose
// exec waits for the watch). A sequence of steps (`started` already) is sampled as a
// whole from its first fork.
static int am_wait_main(pid_t main_pid, int *status, struct rusage *ru, int status_fd,
                        int err_fd, int *exec_errno, int started) {
  int watch = am_limit > 0 && !am_cgroup[0];
  int poll_rss = watch || am_series.period_ns > 0;
  int64_t watch_ns = am_series.period_ns ? am_series.period_ns : 10000000;
  int64_t next_watch = 0;
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  int sig_fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sig_fd < 0) return -1;
  int errno_read = 0;
  for (;;) {
    int st;
    struct rusage r;
    pid_t got = wait4(-1, &st, WNOHANG | __WALL, &r);
    if (got == main_pid) {
      *status = st;
      *ru = r;
      close(sig_fd);
      if (!errno_read) *exec_errno = am_exec_errno(err_fd);  // steps, or no exec at all
      return 0;
    }
    if (got > 0) {  // an orphan reaped
      am_note_reaped(&r);
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      close(sig_fd);
      return -1;
    }
    int64_t now = am_now_ns();  // all still running
    long long rss = started ? am_sample(now) : -1;
    if (started && watch && now >= next_watch) {
      long long file;
      if (rss < 0) rss = am_run_rss(&file);
      if (!am_oom_by_watchdog && rss > am_limit) {
        am_oom_by_watchdog = 1;
        am_kill_children();
      }
      next_watch = now + watch_ns;
    }
    int64_t due = am_series.period_ns ? am_series.next_ns : next_watch;
    if (watch && next_watch < due) due = next_watch;
    int64_t wait_ns = due - am_now_ns();
    int timed = started && poll_rss;
    if (timed && wait_ns <= 0) continue;
    struct timespec ts = {.tv_sec = wait_ns / 1000000000, .tv_nsec = wait_ns % 1000000000};
    struct pollfd fds[3] = {{.fd = sig_fd, .events = POLLIN},
                            {.fd = am_watch_fd, .events = POLLIN},
                            {.fd = started ? -1 : err_fd, .events = POLLIN}};
    int n = ppoll(fds, 3, timed ? &ts : NULL, NULL);  // a negative fd is skipped
    if (n <= 0) continue;  // the time came, or a stop signal
    if (fds[0].revents) {
      struct signalfd_siginfo info;
      while (read(sig_fd, &info, sizeof info) > 0) continue;
    }
    if (am_watch_fd >= 0 && (fds[1].revents & POLLIN)) am_watch_serve(status_fd, main_pid);
    if (am_watch_fd >= 0 && (fds[1].revents & (POLLHUP | POLLERR | POLLNVAL)) &&
        !(fds[1].revents & POLLIN)) {
      close(am_watch_fd);  // no process under the filter is left
      am_watch_fd = -1;
    }
    if (fds[2].revents) {  // the exec happened (EOF), or failed (its errno)
      *exec_errno = am_exec_errno(err_fd);
      started = errno_read = 1;
    }
  }
}

// `am_run --calibrate`: a fixed CPU loop (~10 ms here), timed. Run between
// blocks, it shows how fast the machine is at that moment (the noise sentinel).
static int am_calibrate(void) {
  int64_t t0 = am_now_ns();
  volatile uint64_t sink;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 8000000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  sink = x;
  (void)sink;
  printf("{\"am\":\"calib\",\"v\":1,\"ns\":%" PRId64 "}\n", am_now_ns() - t0);
  return 0;
}

// Whether a process of this uid other than the caller is alive (a zombie does not count:
// it runs nothing, and its parent reaps it). Read from /proc/PID/status, which every
// process may read.
static int am_any_of_mine(void) {
  DIR *proc = opendir("/proc");
  if (!proc) return 0;
  uid_t me = getuid();
  pid_t self = getpid();
  int found = 0;
  struct dirent *d;
  char path[64], buf[4096];
  while (!found && (d = readdir(proc)) != NULL) {
    long pid = strtol(d->d_name, NULL, 10);
    if (pid <= 1 || pid == self) continue;
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = 0;
    const char *uid = strstr(buf, "\nUid:");
    const char *state = strstr(buf, "\nState:");
    if (!uid || !state) continue;
    long real = strtol(uid + 5, NULL, 10);
    char letter = 0;
    sscanf(state + 7, " %c", &letter);
    found = real == (long)me && letter != 'Z';
  }
  closedir(proc);
  return found;
}

// `am_run --sweep`, run as a campaign's transient identity (native/identity.py): SIGKILL to
// every process of that identity (kill(-1) reaches exactly those of its uid) until
// none is left alive, or 5 s passed. kill(-1) itself cannot say so: it succeeds
// whenever any other process exists.
static int am_sweep(void) {
  for (int i = 0; i < 5000; i++) {
    kill(-1, SIGKILL);
    if (!am_any_of_mine()) return 0;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  return 1;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--calibrate") == 0) return am_calibrate();
  if (argc == 2 && strcmp(argv[1], "--sweep") == 0) return am_sweep();
  const char *steps = NULL;
  int first = 2;  // index of PROGRAM
  if (argc >= 4 && strcmp(argv[first], "--memory-limit") == 0) {
    am_limit = atoll(argv[first + 1]);
    first += 2;
  }
  if (argc >= first + 2 && strcmp(argv[first], "--steps") == 0) {
    steps = argv[first + 1];
    first += 2;
  }
  if (argc <= first) {
    fprintf(stderr,
            "usage: am_run STATUS_FD [--memory-limit BYTES] [--steps N1,N2,...] PROGRAM "
            "[ARGS...]\n");
    return 2;
  }
  // Before anything else: the benchmark must never reach STATUS_FD through /proc.
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return 3;
  pid_t parent = getppid();
  snprintf(am_children_path, sizeof am_children_path, "/proc/%d/task/%d/children", getpid(),
           getpid());
  am_catch_stops();
  // A write to STATUS_FD after allocmark died (an image record at an exec) must fail
  // with EPIPE, not kill the launcher by SIGPIPE before it ends the tree: a killed
  // launcher left the run's background processes to init (tests/test_faults.py, kill
  // -9 of allocmark beside a busy process).
  signal(SIGPIPE, SIG_IGN);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  if (getppid() != parent) return 3;  // allocmark died before the line above
  int status_fd = atoi(argv[1]);
  if (am_limit > 0) am_cgroup_make();
  const char *sample_us = getenv("AM_RUN_SAMPLE_US");
  am_series.period_ns = (sample_us ? atoll(sample_us) : 5000) * 1000;
  if (am_series.period_ns < 0) am_series.period_ns = 0;
  unsetenv("AM_RUN_SAMPLE_US");
  am_series.near_peak = !getenv("AM_RUN_NO_NEAR_PEAK");  // bench/signals_cost.py turns it off
  unsetenv("AM_RUN_NO_NEAR_PEAK");
  const char *watch_env = getenv("AM_RUN_WATCH");
  int watching = watch_env && strcmp(watch_env, "1") == 0;
  unsetenv("AM_RUN_WATCH");
  int watch_sock[2] = {-1, -1};
  if (watching && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, watch_sock) != 0)
    return 3;
  // AM_RUN_USER=UID:GID: the program runs as that user (allocmark runs as root).
  long run_uid = -1, run_gid = -1;
  const char *user = getenv("AM_RUN_USER");
  if (user && *user && (sscanf(user, "%ld:%ld", &run_uid, &run_gid) != 2 || run_uid < 0 ||
                        run_gid < 0)) {
    fprintf(stderr, "am_run: AM_RUN_USER must be UID:GID, not %s\n", user);
    return 2;
  }
  unsetenv("AM_RUN_USER");
  am_run_uid = run_uid;
  const char *kcount_env = getenv("AM_RUN_KCOUNT");
  int kcount = kcount_env ? atoi(kcount_env) : 0;  // 1: the kinds; 2: every call too
  unsetenv("AM_RUN_KCOUNT");
  const char *ktime_env = getenv("AM_RUN_KTIME");
  int ktime = kcount > 0 && ktime_env && strcmp(ktime_env, "1") == 0;  // with the counts only
  unsetenv("AM_RUN_KTIME");
  int errpipe[2];
  if (pipe2(errpipe, O_CLOEXEC) != 0) return 3;
  // With a cgroup or the kernel's count: the child waits until it is in the cgroup and
  // counted, so that nothing of its program escapes either.
  int gopipe[2] = {-1, -1};
  if ((am_cgroup[0] || kcount > 0) && pipe2(gopipe, O_CLOEXEC) != 0) return 3;
  sigset_t chld, before;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &before);
  int64_t t0 = am_now_ns();
  am_series.t0_ns = am_series.next_ns = t0;
  pid_t pid = fork();
  if (pid < 0) return 3;
  am_series.main_pid = pid;
  if (pid == 0) {
    sigprocmask(SIG_SETMASK, &before, NULL);  // the benchmark's mask is allocmark's
    signal(SIGTERM, SIG_DFL);  // the launcher's handlers are not the benchmark's
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGCONT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);  // an ignored signal stays ignored across exec
    close(errpipe[0]);
    close(status_fd);
    if (gopipe[0] >= 0) am_wait_go(gopipe);
    if (watch_sock[1] >= 0) {
      close(watch_sock[0]);
      am_watch_child(watch_sock[1]);
    }
    am_become(errpipe[1], run_uid, run_gid);
    if (steps) am_sequence(errpipe[1], argv + first, steps);
    am_child(errpipe[1], argv + first);
  }
  close(errpipe[1]);
  // Opening the counters registers the kernel's tracepoints, up to 20 ms here: the
  // launcher's time, not the program's (it waits at the go pipe meanwhile).
  int64_t kcount_ns = am_now_ns();
  if (kcount > 0) am_kcount_open(pid, kcount == 2);  // a failure is said in the "kernel" record
  if (ktime) am_ktime_open(pid);  // and in its "times"
  kcount_ns = am_now_ns() - kcount_ns;
  am_series.t0_ns += kcount_ns;  // the samples' times are the program's too
  am_series.next_ns = am_series.t0_ns;
  if (gopipe[0] >= 0) am_join(pid, gopipe);
  if (watch_sock[0] >= 0) {
    close(watch_sock[1]);
    am_watch_receive(watch_sock[0]);
  }
  int status = 0;
  struct rusage ru;
  if (am_stopping) am_kill_children();  // a stop that came before the fork
  int exec_errno = 0;  // read in the wait: the child's exec stops at the watch it serves
  if (am_wait_main(pid, &status, &ru, status_fd, errpipe[0], &exec_errno, steps != NULL) != 0) {
    am_kill_children();  // whatever failed, nothing of the run outlives its launcher
    am_end_tree();
    return 3;
  }
  int64_t end = am_now_ns();
  // Neither the reading at its end nor the counters' opening is the program's time.
  int64_t wall = end - t0 - am_watch_main_exit_ns - kcount_ns;
  am_note_reaped(&ru);
  am_end_tree();
  int oom = am_oom_by_watchdog;
  const char *limit_by = "none";
  if (am_cgroup[0]) {
    oom = am_cgroup_oom_kills() > 0;
    am_cgroup_remove();
    limit_by = am_cgroup_v == 1 ? "cgroup" : "cgroup2";
  } else if (am_limit > 0) {
    limit_by = "watchdog";
  }
  if (am_stopping) return 100 + am_stopping;  // stopped: no usage to report
  if (am_series.period_ns > 0) am_series_write(status_fd, end);
  if (watching) am_watch_write(status_fd);
  am_kcount_write(status_fd);  // after am_end_tree: every process's count is in
  dprintf(status_fd,
          "{\"am\":\"run\",\"v\":4,\"status\":%d,\"wall_ns\":%" PRId64
          ",\"utime_us\":%" PRId64 ",\"stime_us\":%" PRId64
          ",\"maxrss_kib\":%ld,\"minflt\":%ld,\"majflt\":%ld,\"nvcsw\":%ld,\"nivcsw\":%ld"
          ",\"exec_errno\":%d,\"oom\":%d,\"limit_by\":\"%s\",\"stopped\":%d}\n",
          status, wall, am_us(ru.ru_utime), am_us(ru.ru_stime), am_tree_maxrss, ru.ru_minflt,
          ru.ru_majflt, ru.ru_nvcsw, ru.ru_nivcsw, exec_errno, oom, limit_by, (int)am_continued);
  return 0;
}
