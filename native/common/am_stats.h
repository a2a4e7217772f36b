// am_stats.h — what an allocator says about its own memory, in one schema.
//
// Used at the end of a run by the native workloads (am_bench.h) and by
// libam_who.so in programs allocmark did not write. Each allocator's own call is
// looked up in the object that serves malloc only, so that glibc's mallinfo2 is
// never read for a heap that another allocator serves (their order: the
// first the object has):
//
//   glibc     mallinfo2()                     live, held, mapped
//             malloc_stats() (am_stats_arenas)  arenas
//   others    mallinfo2() (scudo's layout)    live, held, mapped
//   jemalloc  mallctl("stats.*")              live, held, metadata, released, mapped,
//                                             committed, dirty, cached, arenas
//   tcmalloc  MallocExtension_GetNumericProperty   live, held, metadata, released,
//                                             mapped, dirty, cached
//   mimalloc  mi_process_info()               committed
//
// In bytes: live = handed to the program and not freed; held = resident in the
// allocator but free (free lists, caches, dirty pages); metadata = its own
// bookkeeping; released = mapped but given back to the OS; mapped = address
// space it maps; committed = memory it has committed; dirty = free pages it keeps
// without giving them back (part of held: jemalloc's dirty extents, tcmalloc's free
// page heap); cached = free blocks in thread caches (part of held: jemalloc flushes
// an exiting thread's, tcmalloc keeps them: 14.5 MiB after churn's 4 threads ended).
// arenas: how many (a count). -1: not known. Nothing here allocates.
#ifndef AM_STATS_H
#define AM_STATS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct am_stats {
  const char *source;  // "jemalloc", "tcmalloc", "mimalloc", "glibc", "mallinfo2" or "none"
  long long live, held, metadata, released, mapped, committed, dirty, cached, arenas;
} am_stats;

// `name` as defined by `object` itself (not by one of its dependencies).
static inline void *am_stats_sym(const char *object, const char *name) {
  void *handle = dlopen(object, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == NULL) return NULL;
  void *sym = dlsym(handle, name);
  Dl_info where;
  if (sym != NULL && !(dladdr(sym, &where) && where.dli_fname && !strcmp(where.dli_fname, object)))
    sym = NULL;
  dlclose(handle);
  return sym;
}

typedef int (*am_mallctl_t)(const char *, void *, size_t *, void *, size_t);

static inline long long am_mallctl_size(am_mallctl_t ctl, const char *name) {
  size_t v = 0, n = sizeof v;
  return ctl(name, &v, &n, NULL, 0) == 0 ? (long long)v : -1;
}

static inline int am_stats_jemalloc(const char *object, am_stats *s) {
  am_mallctl_t ctl = (am_mallctl_t)am_stats_sym(object, "mallctl");
  if (ctl == NULL) return 0;
  uint64_t epoch = 1;  // the stats are a snapshot taken when the epoch advances
  size_t n = sizeof epoch;
  ctl("epoch", &epoch, &n, &epoch, n);
  long long allocated = am_mallctl_size(ctl, "stats.allocated");
  long long resident = am_mallctl_size(ctl, "stats.resident");
  s->source = "jemalloc";
  s->live = allocated;
  s->metadata = am_mallctl_size(ctl, "stats.metadata");
  s->released = am_mallctl_size(ctl, "stats.retained");
  s->mapped = am_mallctl_size(ctl, "stats.mapped");
  s->committed = resident;
  // 4096: MALLCTL_ARENAS_ALL, every arena merged
  long long page = am_mallctl_size(ctl, "arenas.page");
  long long dirty = am_mallctl_size(ctl, "stats.arenas.4096.pdirty");
  s->dirty = page > 0 && dirty >= 0 ? dirty * page : -1;
  s->cached = am_mallctl_size(ctl, "stats.arenas.4096.tcache_bytes");
  unsigned narenas = 0;
  size_t un = sizeof narenas;
  s->arenas = ctl("arenas.narenas", &narenas, &un, NULL, 0) == 0 ? (long long)narenas : -1;
  if (allocated >= 0 && resident >= 0 && s->metadata >= 0) {
    long long held = resident - allocated - s->metadata;
    s->held = held > 0 ? held : 0;
  }
  return 1;
}

typedef int (*am_tc_property_t)(const char *, size_t *);

static inline long long am_tc_size(am_tc_property_t get, const char *name) {
  size_t v = 0;
  return get(name, &v) ? (long long)v : -1;
}

static inline int am_stats_tcmalloc(const char *object, am_stats *s) {
  am_tc_property_t get =
      (am_tc_property_t)am_stats_sym(object, "MallocExtension_GetNumericProperty");
  if (get == NULL) return 0;
  s->source = "tcmalloc";
  s->live = am_tc_size(get, "generic.current_allocated_bytes");
  s->released = am_tc_size(get, "tcmalloc.pageheap_unmapped_bytes");
  s->mapped = am_tc_size(get, "generic.heap_size");
  s->dirty = am_tc_size(get, "tcmalloc.pageheap_free_bytes");
  s->cached = am_tc_size(get, "tcmalloc.thread_cache_free_bytes");
  static const char *const caches[] = {"tcmalloc.pageheap_free_bytes",
                                       "tcmalloc.central_cache_free_bytes",
                                       "tcmalloc.transfer_cache_free_bytes",
                                       "tcmalloc.thread_cache_free_bytes"};
  long long held = 0;
  for (size_t i = 0; i < sizeof caches / sizeof caches[0] && held >= 0; i++) {
    long long v = am_tc_size(get, caches[i]);
    held = v >= 0 ? held + v : -1;
  }
  s->held = held;
  // Physical bytes in use include the metadata; the heap's resident part does not.
  long long physical = am_tc_size(get, "generic.total_physical_bytes");
  if (physical >= 0 && s->mapped >= 0 && s->released >= 0) {
    long long meta = physical - (s->mapped - s->released);
    s->metadata = meta > 0 ? meta : 0;
  }
  return 1;
}

typedef void (*am_mi_info_t)(size_t *, size_t *, size_t *, size_t *, size_t *, size_t *,
                             size_t *, size_t *);

static inline int am_stats_mimalloc(const char *object, am_stats *s) {
  am_mi_info_t info = (am_mi_info_t)am_stats_sym(object, "mi_process_info");
  if (info == NULL) return 0;
  size_t elapsed, user, sys, rss, peak_rss, commit = 0, peak_commit, faults;
  info(&elapsed, &user, &sys, &rss, &peak_rss, &commit, &peak_commit, &faults);
  s->source = "mimalloc";
  s->committed = (long long)commit;
  return 1;
}

// glibc counts its mmapped blocks (live) apart from its heaps; scudo's
// mallinfo2 gives allocated, free and mapped bytes in uordblks, fordblks and
// hblkhd, as other allocators that have one are taken to do.
static inline int am_stats_mallinfo2(const char *object, am_stats *s) {
  typedef struct mallinfo2 (*am_mallinfo2_t)(void);
  am_mallinfo2_t mi2 = (am_mallinfo2_t)am_stats_sym(object, "mallinfo2");
  if (mi2 == NULL) return 0;
  struct mallinfo2 m = mi2();
  if (am_stats_sym(object, "gnu_get_libc_version")) {
    s->source = "glibc";
    s->live = (long long)(m.uordblks + m.hblkhd);
    s->mapped = (long long)(m.arena + m.hblkhd);
  } else {
    s->source = "mallinfo2";
    s->live = (long long)m.uordblks;
    s->mapped = (long long)m.hblkhd;
  }
  s->held = (long long)m.fordblks;
  return 1;
}

// The statistics of the allocator in `malloc_object` (the object serving malloc).
static inline am_stats am_stats_read(const char *malloc_object) {
  am_stats s = {"none", -1, -1, -1, -1, -1, -1, -1, -1, -1};
  if (malloc_object == NULL || malloc_object[0] == '\0') return s;
  if (!am_stats_jemalloc(malloc_object, &s) && !am_stats_tcmalloc(malloc_object, &s) &&
      !am_stats_mimalloc(malloc_object, &s))
    am_stats_mallinfo2(malloc_object, &s);
  return s;
}

// glibc's arenas: malloc_stats() writes an "Arena N:" paragraph per arena to stderr,
// which is unbuffered (no allocation); fd 2 points at a pipe for the call. Called by
// allocmark's own workloads only (am_bench.h): in another program a line another
// thread wrote to stderr meanwhile would be lost. -1: not read.
static inline void am_stats_arenas(const char *object, am_stats *s) {
  if (strcmp(s->source, "glibc") != 0) return;
  void (*print)(void) = (void (*)(void))am_stats_sym(object, "malloc_stats");
  int fds[2];
  if (print == NULL || pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return;
  fflush(stderr);
  int saved = dup(2);
  if (saved >= 0 && dup2(fds[1], 2) == 2) {
    print();
    dup2(saved, 2);
  }
  if (saved >= 0) close(saved);
  close(fds[1]);
  // 64 KiB: the pipe's buffer, about 900 arenas' paragraphs (glibc makes at most
  // 8 per core); a longer text is cut and the count says "not known".
  static char text[65536];
  size_t n = 0;
  ssize_t got;
  while (n < sizeof text - 1 && (got = read(fds[0], text + n, sizeof text - 1 - n)) > 0)
    n += (size_t)got;
  close(fds[0]);
  text[n] = 0;
  if (saved < 0 || n == 0 || n >= sizeof text - 1) return;
  long long arenas = 0;
  for (const char *at = text; (at = strstr(at, "Arena ")) != NULL; at++)
    if (at == text || at[-1] == '\n') arenas++;
  s->arenas = arenas;
}

#endif  // AM_STATS_H
