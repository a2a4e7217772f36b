// allocmark's glue for musl's mallocng, in place of musl's own glue.h (which needs
// musl's internals: its lock, syscall, atomic and libc headers). The same names,
// over glibc and the compiler's atomics; allocmark/debian.py copies it in.
#ifndef MALLOC_GLUE_H
#define MALLOC_GLUE_H

#include <elf.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

// Its internal names, out of the way of the program's.
#define size_classes am_ng_size_classes
#define ctx am_ng_ctx
#define alloc_meta am_ng_alloc_meta
#define is_allzero am_ng_allzero
#define dump_heap am_ng_dump_heap

#define USE_MADV_FREE 0
#undef assert
#define assert(x) \
  do {            \
    if (!(x)) __builtin_trap(); \
  } while (0)

// Meta areas grow by brk, as in musl: glibc's own malloc, the only other brk
// user, never runs once this library is preloaded.
#define brk(p) ((uintptr_t)syscall(SYS_brk, p))
#define DISABLE_ALIGNED_ALLOC 0
#define PAGESIZE 4096
#define MT 1  // musl skips its lock in a single-threaded process; glibc does not say
#define RDLOCK_IS_EXCLUSIVE 1

static inline uint64_t get_random_secret(void) {
  uint64_t secret = (uintptr_t)&secret * 1103515245;
  const char *random = (const char *)getauxval(AT_RANDOM);
  if (random) memcpy(&secret, random + 8, sizeof secret);
  return secret;
}

static inline int a_cas(volatile int *p, int t, int s) {
  __atomic_compare_exchange_n(p, &t, s, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return t;
}
static inline void a_or(volatile int *p, int v) { __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
static inline int a_ctz_32(uint32_t x) { return __builtin_ctz(x); }
static inline int a_clz_32(uint32_t x) { return __builtin_clz(x); }

extern pthread_mutex_t am_ng_lock;
#define LOCK_OBJ_DEF pthread_mutex_t am_ng_lock = PTHREAD_MUTEX_INITIALIZER
static inline void rdlock(void) { pthread_mutex_lock(&am_ng_lock); }
static inline void wrlock(void) { pthread_mutex_lock(&am_ng_lock); }
static inline void unlock(void) { pthread_mutex_unlock(&am_ng_lock); }
static inline void upgradelock(void) {}

#endif
