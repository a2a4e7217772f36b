// libam_who.so — which object serves malloc inside a program allocmark did not write?
//
// Native workloads report their own malloc object; real applications (ruby,
// redis, gcc's cc1, ...) cannot. allocmark preloads this library after the
// allocator under test. Its constructor runs in every process of the run that
// keeps LD_PRELOAD (the program, its children, programs it execs) and writes
// one small file into the directory named by AM_WHO_DIR, a "who" record (one
// JSON line, see records.py):
//
//   {"am":"who","v":2,"pid":1234,"exe":"/usr/bin/redis-check-rdb",
//    "served":{"malloc":"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2","free":...,
//              "calloc":...,"realloc":...},
//    "libc":"/lib/x86_64-linux-gnu/libc.so.6",
//    "defines":["/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"]}
//
// "defines" lists every object other than the program that defines malloc,
// serving or not; an object nothing exports is "".
//
// A file per process (created O_EXCL) rather than an inherited descriptor: a
// program may close an inherited fd and reuse its number for its own files.
// Interpretation happens in Python (execute.py); this library never allocates.
//
// It also tells which of the functions a partial allocator may lack the program
// calls. It defines them, forwarding each to the next definition (glibc's): the
// allocator, preloaded first, wins where it has one, so a call reaches this
// library only where the allocator lacks the function (or under glibc itself,
// where nothing is preloaded before it). The first call of each appends a "calls"
// record to calls.PID in AM_WHO_DIR:
//
//   {"am":"calls","v":1,"pid":1234,"fn":"reallocarray"}
//
// When a process exits normally, it writes the statistics of the allocator that
// served its malloc (am_stats.h) and its RSS at that moment to stats.PID:
//
//   {"am":"stats","v":1,"pid":1234,"source":"jemalloc","rss_kib":N,"live_kib":N,...}
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "am_stats.h"

#define AM_WHO_VERSION 2

typedef struct {
  char text[16384];
  size_t used;
  int full;  // something did not fit: the record is not written at all
} am_buf;

static void am_raw(am_buf *b, const char *s) {
  size_t n = strlen(s);
  if (b->used + n >= sizeof b->text) {
    b->full = 1;
    return;
  }
  memcpy(b->text + b->used, s, n);
  b->used += n;
}

// A JSON string: paths may hold quotes, backslashes or control characters.
static void am_str(am_buf *b, const char *s) {
  am_raw(b, "\"");
  for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
    char esc[8] = {(char)*c, 0};
    if (*c == '"' || *c == '\\') snprintf(esc, sizeof esc, "\\%c", *c);
    else if (*c < 0x20) snprintf(esc, sizeof esc, "\\u%04x", *c);
    am_raw(b, esc);
  }
  am_raw(b, "\"");
}

static void am_key(am_buf *b, const char *sep, const char *key) {
  am_raw(b, sep);
  am_str(b, key);
  am_raw(b, ":");
}

// Every loaded shared object whose own symbol table defines malloc: the
// program may link an allocator (Debian's redis links libjemalloc) that the
// preload shadows, or that shadows the preload. Objects are listed first and
// opened after: dlopen inside dl_iterate_phdr's callback could deadlock.
typedef struct {
  const char *name[512];
  size_t count;
} am_objects;

static int am_list_object(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  am_objects *o = data;
  if (info->dlpi_name != NULL && info->dlpi_name[0] != '\0' && o->count < 512) {
    o->name[o->count++] = info->dlpi_name;
  }
  return 0;
}

// Does this loaded object itself define `name`? (dlsym on its handle searches
// the object first, then its dependencies.)
static int am_defines(const char *object, const char *name) {
  void *handle = dlopen(object, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == NULL) return 0;
  void *sym = dlsym(handle, name);
  Dl_info where;
  int own = sym != NULL && dladdr(sym, &where) && strcmp(where.dli_fname, object) == 0;
  dlclose(handle);
  return own;
}

// The object whose `name` the program's calls reach. dlsym(RTLD_DEFAULT) is
// that object, except when a non-PIE program takes the function's address
// (python3 stores malloc in a table, cc1 passes free to obstack): the program
// then exports a "canonical PLT" stub under the name, which dlsym finds, but
// calls still go to the first shared object that really defines it.
static const char *am_owner(const char *name, const am_objects *o, const void *exe_base) {
  void *sym = dlsym(RTLD_DEFAULT, name);
  Dl_info info;
  const ElfW(Sym) *entry = NULL;
  if (sym == NULL || !dladdr1(sym, &info, (void **)&entry, RTLD_DL_SYMENT)) return NULL;
  int stub = info.dli_fbase == exe_base &&
             (entry == NULL || entry->st_shndx == SHN_UNDEF || info.dli_sname == NULL ||
              strcmp(info.dli_sname, name) != 0);
  if (!stub) return info.dli_fname;
  for (size_t i = 0; i < o->count; i++)  // global search order: preloads, then needed
    if (am_defines(o->name[i], name)) return o->name[i];
  return info.dli_fname;
}

static void am_put_definers(am_buf *b, const am_objects *o) {
  am_key(b, ",", "defines");
  const char *sep = "[";
  for (size_t i = 0; i < o->count; i++) {
    if (!am_defines(o->name[i], "malloc")) continue;
    am_raw(b, sep);
    am_str(b, o->name[i]);
    sep = ",";
  }
  am_raw(b, *sep == '[' ? "[]" : "]");
}

// -- calls of the functions a partial allocator may lack ------------------------
enum { AM_REALLOCARRAY, AM_PVALLOC, AM_VALLOC, AM_MEMALIGN, AM_ALIGNED_ALLOC,
       AM_POSIX_MEMALIGN, AM_USABLE_SIZE, AM_TRACKED };
static const char *const am_tracked[AM_TRACKED] = {
    "reallocarray", "pvalloc", "valloc", "memalign", "aligned_alloc", "posix_memalign",
    "malloc_usable_size"};
static void *am_next[AM_TRACKED];  // glibc's definitions (dlsym RTLD_NEXT)
static int am_seen[AM_TRACKED];

static void *am_forward(int f) {
  if (!am_next[f]) am_next[f] = dlsym(RTLD_NEXT, am_tracked[f]);
  return am_next[f];
}

static void am_called(int f) {
  if (__atomic_exchange_n(&am_seen[f], 1, __ATOMIC_RELAXED)) return;
  const char *dir = getenv("AM_WHO_DIR");
  if (dir == NULL || dir[0] == '\0') return;
  char path[4096], line[128];
  snprintf(path, sizeof path, "%s/calls.%d", dir, (int)getpid());
  int n = snprintf(line, sizeof line, "{\"am\":\"calls\",\"v\":1,\"pid\":%d,\"fn\":\"%s\"}\n",
                   (int)getpid(), am_tracked[f]);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ssize_t ignored = write(fd, line, (size_t)n);  // one write: appends stay whole lines
  (void)ignored;
  close(fd);
}

void *reallocarray(void *p, size_t n, size_t size) {
  am_called(AM_REALLOCARRAY);
  void *(*next)(void *, size_t, size_t) = (void *(*)(void *, size_t, size_t))am_forward(
      AM_REALLOCARRAY);
  return next ? next(p, n, size) : NULL;
}

void *pvalloc(size_t size) {
  am_called(AM_PVALLOC);
  void *(*next)(size_t) = (void *(*)(size_t))am_forward(AM_PVALLOC);
  return next ? next(size) : NULL;
}

void *valloc(size_t size) {
  am_called(AM_VALLOC);
  void *(*next)(size_t) = (void *(*)(size_t))am_forward(AM_VALLOC);
  return next ? next(size) : NULL;
}

void *memalign(size_t alignment, size_t size) {
  am_called(AM_MEMALIGN);
  void *(*next)(size_t, size_t) = (void *(*)(size_t, size_t))am_forward(AM_MEMALIGN);
  return next ? next(alignment, size) : NULL;
}

void *aligned_alloc(size_t alignment, size_t size) {
  am_called(AM_ALIGNED_ALLOC);
  void *(*next)(size_t, size_t) = (void *(*)(size_t, size_t))am_forward(AM_ALIGNED_ALLOC);
  return next ? next(alignment, size) : NULL;
}

int posix_memalign(void **out, size_t alignment, size_t size) {
  am_called(AM_POSIX_MEMALIGN);
  int (*next)(void **, size_t, size_t) = (int (*)(void **, size_t, size_t))am_forward(
      AM_POSIX_MEMALIGN);
  return next ? next(out, alignment, size) : 12;  // ENOMEM
}

size_t malloc_usable_size(void *p) {
  am_called(AM_USABLE_SIZE);
  size_t (*next)(void *) = (size_t (*)(void *))am_forward(AM_USABLE_SIZE);
  return next ? next(p) : 0;
}

static int am_create(const char *dir) {
  char path[4096];
  for (int i = 0; i < 1000; i++) {
    // The same pid writes again after an exec: number its files.
    snprintf(path, sizeof path, "%s/%d.%d", dir, (int)getpid(), i);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) return fd;
  }
  return -1;
}

static const char *am_malloc_object;  // as found by the constructor

static long long am_vmrss_kib(void) {
  char buf[4096];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  const char *at = strstr(buf, "VmRSS:");
  return at ? atoll(at + 6) : -1;
}

__attribute__((destructor)) static void am_who_stats(void) {
  const char *dir = getenv("AM_WHO_DIR");
  if (dir == NULL || dir[0] == '\0' || am_malloc_object == NULL) return;
  am_stats st = am_stats_read(am_malloc_object);
  char line[512], path[4096];
  int n = snprintf(line, sizeof line, "{\"am\":\"stats\",\"v\":1,\"pid\":%d,\"source\":\"%s\","
                   "\"rss_kib\":%lld", (int)getpid(), st.source, am_vmrss_kib());
  const struct { const char *key; long long v; int shift; } fields[] = {  // bytes to KiB
      {"live_kib", st.live, 10},         {"held_kib", st.held, 10},
      {"metadata_kib", st.metadata, 10}, {"released_kib", st.released, 10},
      {"mapped_kib", st.mapped, 10},     {"committed_kib", st.committed, 10},
      {"dirty_kib", st.dirty, 10},       {"cached_kib", st.cached, 10},
      {"arenas", st.arenas, 0}};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (fields[i].v >= 0 && n < (int)sizeof line)
      n += snprintf(line + n, sizeof line - (size_t)n, ",\"%s\":%lld", fields[i].key,
                    fields[i].v >> fields[i].shift);
  if (n >= (int)sizeof line - 2) return;
  line[n++] = '}';
  line[n++] = '\n';
  snprintf(path, sizeof path, "%s/stats.%d", dir, (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);  // the last image's
  if (fd < 0) return;
  ssize_t ignored = write(fd, line, (size_t)n);
  (void)ignored;
  close(fd);
}

__attribute__((constructor)) static void am_who_report(void) {
  // Resolved before main: a first call from inside a malloc must not run dlsym.
  for (int f = 0; f < AM_TRACKED; f++) am_forward(f);
  const char *dir = getenv("AM_WHO_DIR");
  if (dir == NULL || dir[0] == '\0') return;
  static am_buf b;
  static char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  char head[64];
  snprintf(head, sizeof head, "{\"am\":\"who\",\"v\":%d,\"pid\":%d", AM_WHO_VERSION,
           (int)getpid());
  b.used = 0;
  b.full = 0;
  am_raw(&b, head);
  am_key(&b, ",", "exe");
  am_str(&b, exe);
  static am_objects objects;
  objects.count = 0;
  dl_iterate_phdr(am_list_object, &objects);
  Dl_info program;  // the mapping that holds the program headers is the program
  const void *exe_base =
      dladdr((void *)getauxval(AT_PHDR), &program) ? program.dli_fbase : NULL;
  static const char *const functions[] = {"malloc", "free", "calloc", "realloc"};
  am_key(&b, ",", "served");
  for (size_t i = 0; i < sizeof functions / sizeof functions[0]; i++) {
    am_key(&b, i ? "," : "{", functions[i]);
    const char *owner = am_owner(functions[i], &objects, exe_base);
    if (i == 0) am_malloc_object = owner;
    am_str(&b, owner);
  }
  am_raw(&b, "}");
  am_key(&b, ",", "libc");
  am_str(&b, am_owner("gnu_get_libc_version", &objects, exe_base));
  am_put_definers(&b, &objects);
  am_raw(&b, "}\n");
  if (b.full) return;  // no report: the run is judged unverified, never misread
  int fd = am_create(dir);
  if (fd < 0) return;
  for (size_t done = 0; done < b.used;) {
    ssize_t w = write(fd, b.text + done, b.used - done);
    if (w <= 0) break;
    done += (size_t)w;
  }
  close(fd);
}
