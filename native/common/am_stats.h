// am_stats.h — what an allocator says about its own memory, in one schema.
//
// Used at the end of a run by the native workloads (am_bench.h) and by
// libam_who.so in programs allocmark did not write. Each allocator's own call is
// looked up in the object that serves malloc only, so that glibc's mallinfo2 is
// never read for a heap that another allocator serves (their order: the
// first the object has):
//
//   glibc     mallinfo2()                     live, held, mapped
//   others    mallinfo2() (scudo's layout)    live, held, mapped
//   jemalloc  mallctl("stats.*")              live, held, metadata, released, mapped, committed
//   tcmalloc  MallocExtension_GetNumericProperty   live, held, metadata, released, mapped
//   mimalloc  mi_process_info()               committed
//
// In bytes: live = handed to the program and not freed; held = resident in the
// allocator but free (free lists, caches, dirty pages); metadata = its own
// bookkeeping; released = mapped but given back to the OS; mapped = address
// space it maps; committed = memory it has committed. -1: not known.
// Nothing here allocates.
#ifndef AM_STATS_H
#define AM_STATS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <string.h>

typedef struct am_stats {
  const char *source;  // "jemalloc", "tcmalloc", "mimalloc", "glibc", "mallinfo2" or "none"
  long long live, held, metadata, released, mapped, committed;
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
  am_stats s = {"none", -1, -1, -1, -1, -1, -1};
  if (malloc_object == NULL || malloc_object[0] == '\0') return s;
  if (!am_stats_jemalloc(malloc_object, &s) && !am_stats_tcmalloc(malloc_object, &s) &&
      !am_stats_mimalloc(malloc_object, &s))
    am_stats_mallinfo2(malloc_object, &s);
  return s;
}

#endif  // AM_STATS_H
