// am_run_limit.c — the launcher's memory limit: the run's processes in a memory
// cgroup of their own (v2, else v1); without one, am_run.c's watchdog (see am_run.c).
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

// -- the memory limit ----------------------------------------------------------
long long am_limit;
char am_cgroup[512];
int am_cgroup_v;

static int am_write_text(const char *dir, const char *name, const char *text) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = (ssize_t)strlen(text);
  int ok = write(fd, text, (size_t)n) == n;
  close(fd);
  return ok ? 0 : -1;
}

static int am_write_file(const char *dir, const char *name, long long value) {
  char text[32];
  snprintf(text, sizeof text, "%lld\n", value);
  return am_write_text(dir, name, text);
}

// A memory cgroup (v1) below the launcher's own, limited to am_limit.
static void am_cgroup1_make(void) {
  FILE *f = fopen("/proc/self/cgroup", "re");
  if (!f) return;
  char line[512], own[400] = "";
  while (fgets(line, sizeof line, f)) {
    char *p = strstr(line, ":memory:");
    if (p && sscanf(p + 8, "%399s", own) == 1) break;
  }
  fclose(f);
  if (!own[0]) return;
  snprintf(am_cgroup, sizeof am_cgroup, "/sys/fs/cgroup/memory%s/allocmark-run-%d",
           strcmp(own, "/") == 0 ? "" : own, (int)getpid());
  if (mkdir(am_cgroup, 0755) != 0 ||
      am_write_file(am_cgroup, "memory.limit_in_bytes", am_limit) != 0) {
    rmdir(am_cgroup);
    am_cgroup[0] = 0;
    return;
  }
  am_write_file(am_cgroup, "memory.memsw.limit_in_bytes", am_limit);  // no swapping past it
  am_cgroup_v = 1;
}

// Whether the cgroup v2 directory `dir` offers the memory controller.
static int am_cgroup2_has_memory(const char *dir) {
  char path[600], word[64];
  snprintf(path, sizeof path, "%s/cgroup.controllers", dir);
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  int found = 0;
  while (!found && fscanf(f, "%63s", word) == 1) found = strcmp(word, "memory") == 0;
  fclose(f);
  return found;
}

// A memory cgroup (v2) at <root>/allocmark/run-PID, limited to am_limit.
static void am_cgroup2_make(void) {
  const char *root = "/sys/fs/cgroup";
  char parent[480];
  snprintf(parent, sizeof parent, "%s/allocmark", root);
  if (!am_cgroup2_has_memory(root)) return;  // not v2, or memory is not offered
  if (mkdir(parent, 0755) != 0 && errno != EEXIST) return;
  am_write_text(root, "cgroup.subtree_control", "+memory");  // often on already
  if (am_write_text(parent, "cgroup.subtree_control", "+memory") != 0) {
    rmdir(parent);  // of no use here (e.g. a container's root holds processes); fails if in use
    return;
  }
  snprintf(am_cgroup, sizeof am_cgroup, "%s/run-%d", parent, (int)getpid());
  if (mkdir(am_cgroup, 0755) != 0 || am_write_file(am_cgroup, "memory.max", am_limit) != 0) {
    rmdir(am_cgroup);
    am_cgroup[0] = 0;
    return;
  }
  am_write_text(am_cgroup, "memory.swap.max", "0");  // no swapping past it
  am_cgroup_v = 2;
}

void am_cgroup_make(void) {
  if (getenv("AM_RUN_NO_CGROUP")) return;  // tests of the watchdog
  am_cgroup1_make();
  if (!am_cgroup[0]) am_cgroup2_make();
}

// How many processes the kernel killed in the cgroup for want of memory.
long am_cgroup_oom_kills(void) {
  char path[600], line[128];
  snprintf(path, sizeof path, "%s/%s", am_cgroup,
           am_cgroup_v == 1 ? "memory.oom_control" : "memory.events");
  FILE *f = fopen(path, "re");
  long kills = 0;
  if (!f) return 0;
  while (fgets(line, sizeof line, f)) sscanf(line, "oom_kill %ld", &kills);
  fclose(f);
  return kills;
}

void am_cgroup_remove(void) {
  for (int i = 0; i < 100 && rmdir(am_cgroup) != 0 && errno == EBUSY; i++) usleep(1000);
}

// The launcher moves the benchmark's first process into the cgroup while it
// waits, before it runs anything: a process that joined by itself could not
// tell the launcher that it failed to, and would run unlimited under a label
// saying otherwise. If the move fails, the watchdog holds the limit instead.
void am_join(pid_t pid, const int go[2]) {
  if (am_cgroup[0] && am_write_file(am_cgroup, "cgroup.procs", pid) != 0) {
    am_cgroup_remove();
    am_cgroup[0] = 0;
  }
  ssize_t ignored = write(go[1], "g", 1);
  (void)ignored;
  close(go[0]);
  close(go[1]);
}

void am_wait_go(const int go[2]) {
  char c;
  close(go[1]);
  while (read(go[0], &c, 1) < 0 && errno == EINTR) continue;  // 0: the launcher died
  close(go[0]);
}
