// am_run — start one benchmark child and report its resource usage.
//
// usage: am_run STATUS_FD [--steps N1,N2,...] PROGRAM [ARGS...]
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
// If allocmark itself dies (even by SIGKILL) the launcher and the benchmark
// die with it (PR_SET_PDEATHSIG), so no orphaned benchmark keeps running.
// The launcher is a subreaper: processes orphaned inside the run are its
// children, reaped by it, and never counted in the benchmark's usage.
//
// On STATUS_FD it writes one JSON line (a "run" record, see records.py):
//   {"am":"run","v":2,"status":S,"wall_ns":N,"utime_us":N,"stime_us":N,
//    "maxrss_kib":N,"minflt":N,"majflt":N,"nvcsw":N,"nivcsw":N,"exec_errno":E}
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t am_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t am_us(struct timeval tv) { return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec; }

// The child: set the preload, exec, and on failure send errno up the pipe.
static void am_child(int err_fd, char **argv) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const char *preload = getenv("AM_RUN_LD_PRELOAD");
  if (preload) {
    setenv("LD_PRELOAD", preload, 1);
    unsetenv("AM_RUN_LD_PRELOAD");
  }
  execvp(argv[0], argv);
  int e = errno;
  ssize_t ignored = write(err_fd, &e, sizeof e);
  (void)ignored;
  _exit(127);
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
static int am_wait_main(pid_t main_pid, int *status, struct rusage *ru) {
  for (;;) {
    int st;
    struct rusage r;
    pid_t got = wait4(-1, &st, 0, &r);
    if (got < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (got == main_pid) {
      *status = st;
      *ru = r;
      return 0;
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

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--calibrate") == 0) return am_calibrate();
  const char *steps = NULL;
  int first = 2;  // index of PROGRAM
  if (argc >= 4 && strcmp(argv[2], "--steps") == 0) {
    steps = argv[3];
    first = 4;
  }
  if (argc <= first) {
    fprintf(stderr, "usage: am_run STATUS_FD [--steps N1,N2,...] PROGRAM [ARGS...]\n");
    return 2;
  }
  pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  if (getppid() != parent) return 3;  // allocmark died before the line above
  int status_fd = atoi(argv[1]);
  int errpipe[2];
  if (pipe2(errpipe, O_CLOEXEC) != 0) return 3;
  int64_t t0 = am_now_ns();
  pid_t pid = fork();
  if (pid < 0) return 3;
  if (pid == 0) {
    close(errpipe[0]);
    close(status_fd);
    if (steps) am_sequence(errpipe[1], argv + first, steps);
    am_child(errpipe[1], argv + first);
  }
  close(errpipe[1]);
  int exec_errno = am_exec_errno(errpipe[0]);
  int status = 0;
  struct rusage ru;
  if (am_wait_main(pid, &status, &ru) != 0) return 3;
  int64_t wall = am_now_ns() - t0;
  dprintf(status_fd,
          "{\"am\":\"run\",\"v\":2,\"status\":%d,\"wall_ns\":%" PRId64
          ",\"utime_us\":%" PRId64 ",\"stime_us\":%" PRId64
          ",\"maxrss_kib\":%ld,\"minflt\":%ld,\"majflt\":%ld,\"nvcsw\":%ld,\"nivcsw\":%ld"
          ",\"exec_errno\":%d}\n",
          status, wall, am_us(ru.ru_utime), am_us(ru.ru_stime), ru.ru_maxrss, ru.ru_minflt,
          ru.ru_majflt, ru.ru_nvcsw, ru.ru_nivcsw, exec_errno);
  return 0;
}
