// am_real.h — the next definitions of the allocation API and the calls around it
// (dlsym RTLD_NEXT), for the libraries preloaded in front of the allocator under
// test: the profiler (native/shim) and the recorder (native/record). Each forwards
// every call it wraps to what this finds.
#ifndef AM_REAL_H
#define AM_REAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
  void *(*malloc)(size_t);
  void (*free)(void *);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  void *(*reallocarray)(void *, size_t, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t);
  void *(*memalign)(size_t, size_t);
  void *(*valloc)(size_t);
  void *(*pvalloc)(size_t);
  size_t (*usable_size)(void *);
  void *(*mmap)(void *, size_t, int, int, int, off_t);
  int (*munmap)(void *, size_t);
  void *(*mremap)(void *, size_t, size_t, int, ...);
  int (*madvise)(void *, size_t, int);
  int (*mprotect)(void *, size_t, int);
  int (*brk)(void *);
  void *(*sbrk)(intptr_t);
  int (*mutex_lock)(pthread_mutex_t *);
  int (*mutex_trylock)(pthread_mutex_t *);
  int (*mutex_unlock)(pthread_mutex_t *);
  int (*create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
  void (*exit)(void *) __attribute__((noreturn));
  pid_t (*fork)(void);
} am_real_t;

// Every field of `r`: the definition after the calling library's (NULL where none).
// dlsym may allocate: its caller serves those calls from a static buffer meanwhile.
static inline void am_find_real(am_real_t *r) {
#define AM_NEXT(field, name) *(void **)&r->field = dlsym(RTLD_NEXT, name)
  AM_NEXT(malloc, "malloc");
  AM_NEXT(free, "free");
  AM_NEXT(calloc, "calloc");
  AM_NEXT(realloc, "realloc");
  AM_NEXT(reallocarray, "reallocarray");
  AM_NEXT(posix_memalign, "posix_memalign");
  AM_NEXT(aligned_alloc, "aligned_alloc");
  AM_NEXT(memalign, "memalign");
  AM_NEXT(valloc, "valloc");
  AM_NEXT(pvalloc, "pvalloc");
  AM_NEXT(usable_size, "malloc_usable_size");
  AM_NEXT(mmap, "mmap");
  AM_NEXT(munmap, "munmap");
  AM_NEXT(mremap, "mremap");
  AM_NEXT(madvise, "madvise");
  AM_NEXT(mprotect, "mprotect");
  AM_NEXT(brk, "brk");
  AM_NEXT(sbrk, "sbrk");
  AM_NEXT(mutex_lock, "pthread_mutex_lock");
  AM_NEXT(mutex_trylock, "pthread_mutex_trylock");
  AM_NEXT(mutex_unlock, "pthread_mutex_unlock");
  AM_NEXT(create, "pthread_create");
  AM_NEXT(exit, "pthread_exit");
  AM_NEXT(fork, "fork");
#undef AM_NEXT
}

#endif  // AM_REAL_H
