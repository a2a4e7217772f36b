// am_run_watch.c — what each process image of the run had mapped when it ended, read by
// the launcher itself: which allocator served malloc is decided from outside the
// measured program, never from anything it (or its allocator) writes.
//
// The child installs a seccomp filter before its exec; it holds for every thread and
// every process the run starts, and no process can remove it. The filter stops
// execve, execveat and exit_group (SECCOMP_RET_USER_NOTIF) and lets every other call
// through. At each stop the calling process image is still whole: the launcher reads
// its executable, the files it has mapped (/proc/PID/maps) and ld.so's link map (from
// its memory, see am_put_scope), writes an "image" record, then lets the call go on
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE). Threads cost nothing: no stop at clone or at a
// thread's exit, unlike ptrace. allocmark decides which object ld.so bound malloc to
// from these records (run/image.py); libam_who's report is only a cross-check.
//
// What it cannot see: an image killed by a signal ends without a stop (allocmark then
// counts the image as unread), and a program that rewrites its own memory or maps and
// unmaps code at its end can still mislead /proc; nothing it writes to a file or a pipe
// can.
//
// 32-bit (i386) calls are stopped the same way; x32 calls fail with ENOSYS (a second
// ABI would be a second way past the filter). Installing a filter needs no_new_privs
// (set here: the program cannot gain privileges by executing a set-user-ID program).
//
// Records, one JSON line each on STATUS_FD:
//   {"am":"image","v":1,"pid":N,"at":"exec"|"exit","exe":"...",
//    "objects":["/usr/lib/...",...],"scope":["",...]}   (scope: absent without ld.so)
//   {"am":"image","v":1,"pid":N,"at":"...","cut":1}      (did not fit: unread)
//   {"am":"image","v":1,"pid":N,"at":"exec","exe":"...","launcher":1}  (am_run's own
//    fork, on its way to exec the program: named, not read)
//   {"am":"watch","v":1,"errno":E,"reads":N,"again":N,"read_ns":N}
// (at the end; E: why no watch; again: execve stops of an image already read, see
// am_image_key; read_ns: the time the stopped processes waited for the launcher)
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <elf.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "am_run.h"

int am_watch_fd = -1;
int am_watch_errno;
static uint64_t am_watch_reads, am_watch_again;
int64_t am_watch_main_exit_ns;
static int64_t am_watch_ns;

enum { AM_I386_EXECVE = 11, AM_I386_EXIT_GROUP = 252, AM_I386_EXECVEAT = 358 };
#define AM_X32_BIT 0x40000000u

static int am_filter(void) {
  struct sock_filter f[] = {
      /* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      /* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 5),
      /* 2 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      /* 3 */ BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, AM_X32_BIT, 10, 0),
      /* 4 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_execve, 8, 0),
      /* 5 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_execveat, 7, 0),
      /* 6 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_exit_group, 6, 5),
      /* 7 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_I386, 0, 7),
      /* 8 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      /* 9 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AM_I386_EXECVE, 3, 0),
      /* 10 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AM_I386_EXECVEAT, 2, 0),
      /* 11 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AM_I386_EXIT_GROUP, 1, 0),
      /* 12 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      /* 13 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
      /* 14 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      /* 15 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
  };
  struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
                      &prog);
}

// The child: install the filter and hand its listener to the launcher (or why not).
void am_watch_child(int sock) {
  int fd = am_filter();
  int err = fd < 0 ? errno : 0;
  char control[CMSG_SPACE(sizeof(int))];
  memset(control, 0, sizeof control);
  struct iovec io = {.iov_base = &err, .iov_len = sizeof err};
  struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1};
  if (fd >= 0) {
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &fd, sizeof fd);
  }
  ssize_t ignored = sendmsg(sock, &m, MSG_NOSIGNAL);
  (void)ignored;
  if (fd >= 0) close(fd);  // the program must never answer its own stops
  close(sock);
}

// The launcher: the listener, or why there is none (am_watch_errno).
void am_watch_receive(int sock) {
  int err = 0;
  char control[CMSG_SPACE(sizeof(int))];
  struct iovec io = {.iov_base = &err, .iov_len = sizeof err};
  struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = control,
                     .msg_controllen = sizeof control};
  ssize_t n;
  do n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  close(sock);
  struct cmsghdr *h = n == (ssize_t)sizeof err ? CMSG_FIRSTHDR(&m) : NULL;
  if (h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
    memcpy(&am_watch_fd, CMSG_DATA(h), sizeof am_watch_fd);
    return;
  }
  am_watch_errno = n == (ssize_t)sizeof err && err ? err : ECHILD;  // ECHILD: it died first
}

// -- the record --------------------------------------------------------------------
static char am_rec[1 << 18];
static size_t am_used;
static int am_cut;
static int am_loader;  // the image's executable is a dynamic loader run as a program

static void am_put(const char *s, size_t n) {
  if (am_used + n + 2 >= sizeof am_rec) {
    am_cut = 1;
    return;
  }
  memcpy(am_rec + am_used, s, n);
  am_used += n;
}

static void am_raw(const char *s) { am_put(s, strlen(s)); }

static void am_json(const char *s, size_t n) {  // a JSON string of n bytes
  am_raw("\"");
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    char esc[8];
    if (c == '"' || c == '\\') {
      snprintf(esc, sizeof esc, "\\%c", c);
      am_raw(esc);
    } else if (c < 0x20 || c >= 0x7f) {  // paths are bytes: keep them ASCII
      snprintf(esc, sizeof esc, "\\u%04x", c);
      am_raw(esc);
    } else {
      am_put((const char *)&c, 1);
    }
  }
  am_raw("\"");
}

// Reads a /proc file of the process into buf (NUL-terminated); its length, or -1.
static ssize_t am_proc(pid_t pid, const char *name, char *buf, size_t cap) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t used = 0;
  ssize_t n;
  while (used + 1 < cap && (n = read(fd, buf + used, cap - 1 - used)) > 0) used += (size_t)n;
  close(fd);
  buf[used] = 0;
  return (ssize_t)used;
}

// -- ld.so's link map: the order malloc is bound in ------------------------------------
// ld.so lists every object it loaded in its link map, reached from its `_r_debug`
// (what debuggers read): the program, the preloads, their needed libraries breadth-first,
// then what dlopen added. The first of these that defines malloc serves it. Read from
// the process's memory rather than from its environment, which programs rewrite (redis
// and others overwrite it with their process title).
static uint64_t am_ld_start;  // the dynamic loader's first mapping (its load address)
static char am_ld_path[4096];

static int am_peek(pid_t pid, uint64_t at, void *out, size_t n) {
  struct iovec local = {.iov_base = out, .iov_len = n};
  struct iovec remote = {.iov_base = (void *)(uintptr_t)at, .iov_len = n};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

// `_r_debug`'s offset in the loader's file: its dynamic symbol table, read from disk.
static uint64_t am_r_debug_offset(const char *path) {
  static char cached[4096];
  static uint64_t offset;
  if (strcmp(path, cached) == 0) return offset;
  offset = 0;
  snprintf(cached, sizeof cached, "%s", path);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  Elf64_Ehdr eh;
  Elf64_Shdr sh[128];
  if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && eh.e_shnum <= 128 &&
      eh.e_shentsize == sizeof(Elf64_Shdr) &&
      pread(fd, sh, eh.e_shnum * sizeof(Elf64_Shdr), (off_t)eh.e_shoff) ==
          (ssize_t)(eh.e_shnum * sizeof(Elf64_Shdr))) {
    static char syms[1 << 16], strs[1 << 16];  // a loader's tables: a few KiB each
    for (int i = 0; i < eh.e_shnum && !offset; i++) {
      if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh.e_shnum) continue;
      const Elf64_Shdr *names = &sh[sh[i].sh_link];
      size_t nsyms = sh[i].sh_size < sizeof syms ? sh[i].sh_size : sizeof syms;
      size_t nstrs = names->sh_size < sizeof strs - 1 ? names->sh_size : sizeof strs - 1;
      if (pread(fd, syms, nsyms, (off_t)sh[i].sh_offset) != (ssize_t)nsyms ||
          pread(fd, strs, nstrs, (off_t)names->sh_offset) != (ssize_t)nstrs)
        break;
      strs[nstrs] = 0;
      for (size_t at = 0; at + sizeof(Elf64_Sym) <= nsyms; at += sizeof(Elf64_Sym)) {
        Elf64_Sym sym;
        memcpy(&sym, syms + at, sizeof sym);
        if (sym.st_name < nstrs && sym.st_shndx != SHN_UNDEF &&
            strcmp(strs + sym.st_name, "_r_debug") == 0)
          offset = sym.st_value;
      }
    }
  }
  close(fd);
  return offset;
}

// The file mapped at `at` (a loader run as a program maps the program itself: its link
// map names it "", and /proc/PID/exe is the loader).
static void am_mapped_at(pid_t pid, uint64_t at, char *out, size_t cap) {
  char path[64], line[4096 + 256];
  snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
  out[0] = 0;
  FILE *f = fopen(path, "re");
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    unsigned long long start, end;
    char *slash = strchr(line, '/');
    if (!slash || sscanf(line, "%llx-%llx", &start, &end) != 2 || at < start || at >= end) continue;
    line[strcspn(line, "\n")] = 0;
    snprintf(out, cap, "%s", slash);
    break;
  }
  fclose(f);
}

// "scope": the link map's names in order ("" is the program); absent when unread.
static void am_put_scope(pid_t pid, int loader) {
  if (!am_ld_path[0]) return;  // no dynamic loader: a static program
  uint64_t offset = am_r_debug_offset(am_ld_path);
  struct { int32_t version; uint32_t pad; uint64_t map; } r_debug;
  if (!offset || am_peek(pid, am_ld_start + offset, &r_debug, sizeof r_debug) != 0) return;
  am_raw(",\"scope\":[");
  uint64_t at = r_debug.map;
  for (int n = 0; at && n < 1024; n++) {
    uint64_t entry[5];  // l_addr, l_name, l_ld, l_next, l_prev
    char name[4096];
    if (am_peek(pid, at, entry, sizeof entry) != 0) break;
    size_t len = 0;  // read up to each page's end: the next page may not be mapped
    while (len < sizeof name - 1) {
      uint64_t from = entry[1] + len;
      size_t chunk = 4096 - (size_t)(from & 4095);
      if (chunk > sizeof name - 1 - len) chunk = sizeof name - 1 - len;
      if (am_peek(pid, from, name + len, chunk) != 0) break;
      size_t end = strnlen(name + len, chunk);
      len += end;
      if (end < chunk) break;
    }
    if (n == 0 && len == 0 && loader) {
      am_mapped_at(pid, entry[2], name, sizeof name);  // its dynamic section's file
      len = strlen(name);
    }
    if (n) am_raw(",");
    am_json(name, len);
    at = entry[3];
    if (n == 1023) am_cut = 1;  // a loop, or a map no program has
  }
  am_raw("]");
}

// Every file it has mapped, in address order (an object's segments once).
static void am_put_objects(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
  FILE *f = fopen(path, "re");
  am_raw(",\"objects\":[");
  if (!f) {
    am_cut = 1;
    am_raw("]");
    return;
  }
  static char line[4096 + 256], last[4096 + 256];  // a path, after the line's fields
  last[0] = 0;
  am_ld_path[0] = 0;
  const char *sep = "";
  while (fgets(line, sizeof line, f)) {
    char *slash = strchr(line, '/');
    size_t len = strlen(line);
    if (len && line[len - 1] != '\n') am_cut = 1;  // a line longer than a path
    if (!slash) continue;
    line[strcspn(line, "\n")] = 0;
    const char *base = strrchr(slash, '/') + 1;
    unsigned long long start = 0, offset = 1;
    if (!am_ld_path[0] && strncmp(base, "ld-", 3) == 0 &&
        sscanf(line, "%llx-%*x %*s %llx", &start, &offset) == 2 && offset == 0) {
      am_ld_start = start;
      snprintf(am_ld_path, sizeof am_ld_path, "%s", slash);
    }
    if (strcmp(slash, last) == 0) continue;
    snprintf(last, sizeof last, "%s", slash);
    am_raw(sep);
    am_json(slash, strlen(slash));
    sep = ",";
  }
  fclose(f);
  am_raw("]");
}

// An image's key: its executable and the environment it started with, all that ld.so
// binds malloc by (with the files). An execve that fails (a shell trying each directory
// of PATH) leaves the image as it was: read again only when its key changed, so that a
// PATH search costs one reading, not one per directory. A successful exec into an image
// with the same key binds malloc the same way: skipping it loses nothing.
static uint64_t am_image_key(pid_t pid) {
  static char env[1 << 20];
  char path[64], exe[4096];
  snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
  ssize_t n = readlink(path, exe, sizeof exe);
  ssize_t m = am_proc(pid, "environ", env, sizeof env);
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)exe[i]) * 1099511628211ull;
  h = (h ^ 0xff) * 1099511628211ull;
  for (ssize_t i = 0; i < m; i++) h = (h ^ (unsigned char)env[i]) * 1099511628211ull;
  return h | 1;  // never 0: 0 marks an empty slot
}

#define AM_KEYS 4096
static struct { pid_t pid; uint64_t key; } am_keys[AM_KEYS];  // the last "exec" reading's

static int am_unchanged(pid_t pid, uint64_t key) {
  unsigned slot = (unsigned)pid % AM_KEYS;
  if (am_keys[slot].pid == pid && am_keys[slot].key == key) return 1;
  am_keys[slot].pid = pid;
  am_keys[slot].key = key;
  return 0;
}

// A record's start: which process, at which stop, its executable (exe: a path to
// read, /proc/PID/exe or the launcher's own).
static void am_head(pid_t pid, const char *at, const char *link) {
  am_used = 0;
  am_cut = 0;
  char head[96], exe[4096];
  snprintf(head, sizeof head, "{\"am\":\"image\",\"v\":1,\"pid\":%d,\"at\":\"%s\"", (int)pid,
           at);
  am_raw(head);
  ssize_t n = readlink(link, exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = 0;
  am_raw(",\"exe\":");
  am_json(exe, strlen(exe));
  const char *base = strrchr(exe, '/');
  am_loader = strncmp(base ? base + 1 : exe, "ld-", 3) == 0;
}

static void am_read_image(pid_t pid, const char *at) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
  am_head(pid, at, path);
  am_put_objects(pid);
  am_put_scope(pid, am_loader);
  am_raw("}\n");
}

// The launcher's own fork on its way to exec the program (or a step of it): nothing of
// the program runs there, so it is named, not read (a reading costs ~0.2 ms).
static int am_is_launcher(pid_t pid) {
  static struct stat self;
  static int known;
  if (!known) known = stat("/proc/self/exe", &self) == 0 ? 1 : -1;
  char path[64];
  struct stat st;
  snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
  return known == 1 && stat(path, &st) == 0 && st.st_dev == self.st_dev &&
         st.st_ino == self.st_ino;
}

static void am_launcher_image(pid_t pid, const char *at) {
  am_head(pid, at, "/proc/self/exe");
  am_raw(",\"launcher\":1}\n");
}

static void am_write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

// Whether `pid`, stopped at its exit_group, is all that is left of the run: one thread
// (a stopped exit_group has not ended the others yet), no child of its own, and the
// launcher's only child (the launcher is a subreaper: whatever the run started and left
// is its child). /proc's children lists need CONFIG_PROC_CHILDREN: unreadable, it is
// not known to be alone.
static int am_slurp(const char *path, char *buf, size_t n) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t got = read(fd, buf, n - 1);
  close(fd);
  if (got < 0) return -1;
  buf[got] = 0;
  return (int)got;
}

static int am_children(pid_t pid, char *buf, size_t n) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
  return am_slurp(path, buf, n);
}

static int am_alone(pid_t pid) {
  static char buf[4096];
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  if (am_slurp(path, buf, sizeof buf) <= 0) return 0;
  const char *threads = strstr(buf, "\nThreads:");
  if (!threads || strtol(threads + 9, NULL, 10) != 1) return 0;
  if (am_children(pid, buf, sizeof buf) != 0) return 0;  // a child of its own
  if (am_children(getpid(), buf, sizeof buf) < 0) return 0;
  char mine[24];
  snprintf(mine, sizeof mine, "%d ", (int)pid);
  return strcmp(buf, mine) == 0;  // the launcher's one child is the run's main process
}

// One stopped call: read its image, record it, let the call go on.
void am_watch_serve(int status_fd, pid_t main_pid) {
  static struct seccomp_notif req;
  static struct seccomp_notif_resp resp;
  memset(&req, 0, sizeof req);
  if (ioctl(am_watch_fd, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) return;  // it died meanwhile
  int64_t t0 = am_now_ns();
  int x86_64 = req.data.arch == AUDIT_ARCH_X86_64;
  const char *at =
      req.data.nr == (x86_64 ? SYS_exit_group : AM_I386_EXIT_GROUP) ? "exit" : "exec";
  pid_t pid = (pid_t)req.pid;
  // The time of the main image's exit read leaves the run's wall time only when
  // nothing of the run could work meanwhile (am_alone); else it is the run's.
  int alone = pid == main_pid && strcmp(at, "exit") == 0 && am_alone(main_pid);
  int again = 0;
  if (am_is_launcher(pid)) am_launcher_image(pid, at);
  else if ((again = strcmp(at, "exec") == 0 && am_unchanged(pid, am_image_key(pid))))
    am_watch_again++;
  else am_read_image(pid, at);
  // The same call still waits: what was read is that process's, not a new one's.
  if (!again && ioctl(am_watch_fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &req.id) == 0) {
    if (am_cut) {
      char cut[128];
      int n = snprintf(cut, sizeof cut, "{\"am\":\"image\",\"v\":1,\"pid\":%d,\"at\":\"%s\","
                       "\"cut\":1}\n", (int)req.pid, at);
      am_write_all(status_fd, cut, (size_t)n);
    } else {
      am_write_all(status_fd, am_rec, am_used);
    }
    am_watch_reads++;
  }
  memset(&resp, 0, sizeof resp);
  resp.id = req.id;
  resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
  if (ioctl(am_watch_fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0 && errno == EINVAL) {
    // A kernel before 5.5 cannot let the call go on: closing the listener fails the
    // stopped calls (ENOSYS) rather than leaving them waiting; the runs are unverified.
    am_watch_errno = EINVAL;
    close(am_watch_fd);
    am_watch_fd = -1;
  }  // ENOENT: it was killed meanwhile
  int64_t spent = am_now_ns() - t0;
  am_watch_ns += spent;
  if (alone) am_watch_main_exit_ns = spent;
}

void am_watch_write(int status_fd) {
  dprintf(status_fd, "{\"am\":\"watch\",\"v\":1,\"errno\":%d,\"reads\":%" PRIu64
          ",\"again\":%" PRIu64 ",\"read_ns\":%" PRId64 "}\n", am_watch_errno, am_watch_reads,
          am_watch_again, am_watch_ns);
}
