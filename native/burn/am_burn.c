// libam_burn.so — a test allocator: glibc's malloc plus a fixed delay.
//
// Every AM_BURN_EVERY-th malloc of a thread runs AM_BURN_LOOPS steps of a
// dependent multiply-add chain and a fence (no memory, no system call) before
// glibc serves it; every other function goes straight to glibc (its __libc_*
// entry points, so no dlsym is needed). The cost is linear in 1/EVERY: the
// calibration benchmark (bench/calibration.py) measures the slowdown with every
// malloc burning and picks EVERY for a known 5 % or 10 %, then counts how often
// allocmark calls it slower. (A short chain in every malloc was not linear: out
// of order execution hid part of it, and a fence alone cost +12 %; spinning on
// the TSC could not make short delays: reading it costs ~10 ns here.)
//
// AM_BURN_START_US=N spins N microseconds of wall time in the constructor: a
// constant cost, so a program of known length runs a known share slower (the
// calibration's "+2 %": a difference under the margin, whatever the program's
// allocation rate).
//
// AM_BURN_PLANT plants a cause inside the allocator, for the why's calibration (issue
// 68): system calls made the way glibc makes its own, where no interposed symbol sees
// them, so that only the kernel's count can name them (run/kernel.py):
//   madvise  a freed block of 8 KiB or more has its whole pages given back first
//            (a raw madvise(MADV_DONTNEED)): the next use of them faults again
//   futex    every call holds one global lock made of raw futex calls: threads that
//            find it taken wait in the kernel
//   mmap     every block of a page or more gets a mapping of its own (a raw mmap), as glibc
//            does above its mmap threshold (a program of small blocks ran 60 times
//            slower with all of them mapped), laid out as glibc lays
//            out its own mapped blocks, so that glibc's free (a munmap), realloc and
//            malloc_usable_size serve it as one of theirs
//   trim     glibc told to give the heap's top back on every free that reaches it
//            (M_TRIM_THRESHOLD and M_TOP_PAD 0): brk calls made inside libc
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static unsigned long am_loops;      // steps of the chain in a burning malloc
static unsigned long am_every = 1;  // every how many mallocs (per thread) burn
static __thread unsigned long am_count;
// glibc has no __libc_ name for malloc_usable_size: the next definition, looked up in the
// constructor (dlsym may free, so a free must never be the first to look it up).
static size_t (*am_usable)(void *);

enum am_plant { AM_NONE, AM_MADVISE, AM_FUTEX, AM_MMAP, AM_TRIM };
static enum am_plant am_plant;

static uint64_t am_now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

__attribute__((constructor)) static void am_burn_init(void) {
  const char *loops = getenv("AM_BURN_LOOPS"), *every = getenv("AM_BURN_EVERY");
  const char *start = getenv("AM_BURN_START_US");
  am_loops = loops ? strtoul(loops, NULL, 10) : 0;
  am_every = every && strtoul(every, NULL, 10) > 0 ? strtoul(every, NULL, 10) : 1;
  am_usable = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
  const char *plant = getenv("AM_BURN_PLANT");
  static const char *names[] = {"", "madvise", "futex", "mmap", "trim"};
  for (int i = 1; plant && i < (int)(sizeof names / sizeof names[0]); i++)
    if (strcmp(plant, names[i]) == 0) am_plant = (enum am_plant)i;
  if (am_plant == AM_TRIM) {
    mallopt(M_TRIM_THRESHOLD, 0);
    mallopt(M_TOP_PAD, 0);
  }
  if (start) {
    // Wall time, not steps: the delay must not shrink on a faster core.
    uint64_t end = am_now_us() + strtoul(start, NULL, 10);
    while (am_now_us() < end) {
    }
  }
}

static void am_burn(uint64_t x) {
  for (unsigned long i = 0; i < am_loops; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    __asm__ volatile("" : "+r"(x));  // keeps every step
  }
#if defined(__x86_64__) || defined(__i386__)
  // Out-of-order execution would overlap the chain with the caller's work and
  // hide part of it; a fence exposes all of it, so the cost is linear.
  __asm__ volatile("lfence" ::: "memory");
#endif
}

// -- the planted causes ------------------------------------------------------------
// futex: Drepper's mutex ("Futexes are tricky"): 0 free, 1 taken, 2 taken with waiters.
static int am_word;

static void am_lock(void) {
  if (am_plant != AM_FUTEX) return;
  int c = 0;
  if (__atomic_compare_exchange_n(&am_word, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
  if (c != 2) c = __atomic_exchange_n(&am_word, 2, __ATOMIC_ACQUIRE);
  while (c != 0) {
    syscall(SYS_futex, &am_word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
    c = __atomic_exchange_n(&am_word, 2, __ATOMIC_ACQUIRE);
  }
}

static void am_unlock(void) {
  if (am_plant != AM_FUTEX) return;
  if (__atomic_fetch_sub(&am_word, 1, __ATOMIC_RELEASE) != 1) {
    __atomic_store_n(&am_word, 0, __ATOMIC_RELEASE);
    syscall(SYS_futex, &am_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  }
}

// mmap: a block in a mapping of its own, in glibc's layout for a mapped chunk: the
// mapping starts with the chunk's header (prev_size 0, then its size with IS_MMAPPED),
// the block follows it.
#define AM_HEADER (2 * sizeof(size_t))
#define AM_IS_MMAPPED 2
#define AM_MAPPED_MIN 4096

static void *am_mapped(size_t n) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (n > SIZE_MAX - AM_HEADER - page) {
    errno = ENOMEM;
    return NULL;
  }
  size_t total = (n + AM_HEADER + page - 1) & ~(page - 1);
  long got = syscall(SYS_mmap, NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
  if (got < 0 && got > -4096) {
    errno = ENOMEM;
    return NULL;
  }
  size_t *header = (size_t *)got;
  header[0] = 0;
  header[1] = total | AM_IS_MMAPPED;
  return (char *)got + AM_HEADER;
}

// madvise: the whole pages inside a freed block of 8 KiB or more, given back before
// glibc takes the block (its own writes, after, fault a page in again).
static void am_give_back(void *p) {
  size_t n = am_usable ? am_usable(p) : 0;
  if (n < 8192) return;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1), hi = ((uintptr_t)p + n) & ~(page - 1);
  if (hi > lo) syscall(SYS_madvise, (void *)lo, hi - lo, MADV_DONTNEED);
}

void *malloc(size_t n) {
  if (am_loops && ++am_count >= am_every) {
    am_count = 0;
    am_burn(n);
  }
  if (am_plant == AM_MMAP && n >= AM_MAPPED_MIN) return am_mapped(n);
  am_lock();
  void *p = __libc_malloc(n);
  am_unlock();
  return p;
}

void free(void *p) {
  if (p && am_plant == AM_MADVISE) am_give_back(p);
  am_lock();
  __libc_free(p);
  am_unlock();
}

void *calloc(size_t k, size_t n) {
  if (am_plant == AM_MMAP && (!n || k <= SIZE_MAX / n) && k * n >= AM_MAPPED_MIN)
    return am_mapped(k * n);  // a new mapping is zeroed
  am_lock();
  void *p = __libc_calloc(k, n);
  am_unlock();
  return p;
}

void *realloc(void *p, size_t n) {
  am_lock();
  void *q = __libc_realloc(p, n);
  am_unlock();
  return q;
}

void *reallocarray(void *p, size_t k, size_t n) {
  if (n && k > SIZE_MAX / n) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(p, k * n);
}

static void *am_memalign(size_t a, size_t n) {
  am_lock();
  void *p = __libc_memalign(a, n);
  am_unlock();
  return p;
}

void *memalign(size_t a, size_t n) { return am_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { return am_memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
  if (a < sizeof(void *) || (a & (a - 1))) return EINVAL;
  void *p = am_memalign(a, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
void *valloc(size_t n) { return am_memalign((size_t)sysconf(_SC_PAGESIZE), n); }
void *pvalloc(size_t n) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return am_memalign(page, (n + page - 1) & ~(page - 1));
}

size_t malloc_usable_size(void *p) {
  if (am_usable == NULL) am_usable = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
  return am_usable ? am_usable(p) : 0;
}
