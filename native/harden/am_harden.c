// am_harden — the hardening battery: one deliberate heap error (or one call at
// the edge of the allocation API) per run, then a few allocations that would
// show damage.
//
// The run tells allocmark how far it got with "stage" records on AM_RESULT_FD
// ({"am":"stage","v":1,"stage":"error"}), each written by one write() as the
// stage is reached: "setup" (the blocks are ready), "error" (the erroneous
// call or store has returned), "reveal" (the allocations after it are done).
// A run that dies before "error" was caught at the error; after it, later.
// Its final "result" record holds what the reveal saw: the same block handed
// out twice (same_block), two live blocks overlapping (overlap), a live block
// whose contents changed (wrong_contents), a freed pointer that reads the next
// owner's data (leaked); and for an API-contract test
// (contract = 1) whether the allocator kept the contract (conforming) and what
// it did (seen). harden.py classifies the outcome; catalog/hardening.toml
// lists the tests, the C++ ones (cxx_*) are in am_harden_cxx.cpp; `am_harden
// --list` prints the names this program knows.
//
// usage: am_harden --test NAME [--size B]
#include "am_bench.h"  // first: it defines _GNU_SOURCE

#include <malloc.h>
#include <stddef.h>
#include <sys/mman.h>

#include "am_harden.h"

// Through volatile pointers, so that the compiler can neither see an error
// (and reject or delete it) nor elide an allocation it thinks unused.
static void *(*volatile am_malloc_fn)(size_t) = malloc;
static void (*volatile am_free_fn)(void *) = free;
static void *(*volatile am_realloc_fn)(void *, size_t) = realloc;
static void *(*volatile am_calloc_fn)(size_t, size_t) = calloc;
static int (*volatile am_memalign_fn)(void **, size_t, size_t) = posix_memalign;
static void *(*volatile am_aligned_fn)(size_t, size_t) = aligned_alloc;
static size_t (*volatile am_usable_fn)(void *) = malloc_usable_size;
static void *(*volatile am_memcpy_fn)(void *, const void *, size_t) = memcpy;

typedef struct am_seen {
  int same_block, overlap, wrong_contents, leaked;
  int contract, conforming;
  char what[200];  // what a contract test saw, in words
} am_seen;

static am_seen am_obs;

void *am_launder(void *p) {
  __asm__ volatile("" : : "r"(p) : "memory");
  return p;
}

void am_stage(const char *stage) {
  char line[96];
  int n = snprintf(line, sizeof line, "{\"am\":\"stage\",\"v\":1,\"stage\":\"%s\"}\n", stage);
  const char *fd_s = getenv("AM_RESULT_FD");
  ssize_t ignored = write(fd_s ? atoi(fd_s) : STDOUT_FILENO, line, (size_t)n);
  (void)ignored;
}

void am_said(int conforming, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(am_obs.what, sizeof am_obs.what, fmt, ap);
  va_end(ap);
  am_obs.contract = 1;
  am_obs.conforming = conforming;
}

static char *am_get(size_t n) {
  char *p = am_malloc_fn(n);
  if (p == NULL) am_die("malloc(%zu) failed before the error", n);
  memset(p, 0x5a, n);
  return p;
}

// -- the reveal: allocations after the error that would show damage ----------------
#define AM_REVEAL 8

static int am_filled(const unsigned char *p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v) return 0;
  return 1;
}

// Allocates AM_REVEAL blocks of `n` bytes (and as many of 2n), fills each with
// its own byte, then looks for a block handed out twice, overlapping blocks and
// contents that changed; frees them.
void am_reveal(size_t n) {
  char *b[2 * AM_REVEAL];
  size_t len[2 * AM_REVEAL];
  for (int i = 0; i < 2 * AM_REVEAL; i++) {
    len[i] = i < AM_REVEAL ? n : 2 * n;
    b[i] = am_malloc_fn(len[i]);
    if (b[i]) memset(b[i], 0x10 + i, len[i]);
  }
  for (int i = 0; i < 2 * AM_REVEAL; i++) {
    for (int j = i + 1; j < 2 * AM_REVEAL && b[i]; j++) {
      if (!b[j]) continue;
      if (b[i] == b[j]) am_obs.same_block = 1;
      else if (b[i] < b[j] + len[j] && b[j] < b[i] + len[i]) am_obs.overlap = 1;
    }
  }
  for (int i = 0; i < 2 * AM_REVEAL; i++)
    if (b[i] && !am_filled((unsigned char *)b[i], len[i], (unsigned char)(0x10 + i)))
      am_obs.wrong_contents = 1;
  am_stage("reveal");
  for (int i = 0; i < 2 * AM_REVEAL; i++)
    if (b[i] && !(am_obs.same_block || am_obs.overlap)) am_free_fn(b[i]);
}

// A block that must keep its contents whatever the error did; checked at the end.
static char *am_witness;
static size_t am_witness_n;

static void am_check_witness(void) {
  if (am_witness && !am_filled((unsigned char *)am_witness, am_witness_n, 0x5a))
    am_obs.wrong_contents = 1;
}

// -- double frees --------------------------------------------------------------------
// The common shape of a misuse test: a block p (and a guard after it, so that p
// is not at the top of a heap), freed first if `freed`, then the error, then
// the reveal.
static void am_frame(size_t n, int freed, void (*error)(char *p, size_t n)) {
  char *p = am_get(n), *guard = am_get(n);
  (void)guard;
  if (freed) am_free_fn(p);
  am_stage("setup");
  error(p, n);
  am_stage("error");
  am_reveal(n);
}

static void e_free_twice(char *p, size_t n) {
  (void)n;
  am_free_fn(p);
  am_free_fn(p);
}

static void t_double_free(size_t n) { am_frame(n, 0, e_free_twice); }

static void t_double_free_after_others(size_t n) {
  char *p = am_get(n), *q[4];
  for (int i = 0; i < 4; i++) q[i] = am_get(n);
  am_stage("setup");
  am_free_fn(p);
  for (int i = 0; i < 4; i++) am_free_fn(q[i]);
  am_free_fn(p);
  am_stage("error");
  am_reveal(n);
}

static void *am_free_it(void *p) {
  am_free_fn(p);
  return NULL;
}

static void t_double_free_thread(size_t n) {
  char *p = am_get(n), *guard = am_get(n);
  (void)guard;
  am_stage("setup");
  pthread_t t;
  if (pthread_create(&t, NULL, am_free_it, p) != 0) am_die("pthread_create failed");
  pthread_join(t, NULL);
  am_free_fn(p);  // again, from another thread than the first free
  am_stage("error");
  am_reveal(n);
}

static void t_double_free_large(size_t n) {
  (void)n;
  t_double_free(1 << 20);
}

static void t_double_free_calloc(size_t n) {
  char *p = am_calloc_fn(1, n), *guard = am_get(n);
  (void)guard;
  if (!p) am_die("calloc failed before the error");
  am_stage("setup");
  am_free_fn(p);
  am_free_fn(p);
  am_stage("error");
  am_reveal(n);
}

static void t_free_after_realloc_moved(size_t n) {
  char *p = am_get(n), *guard = am_get(n);
  (void)guard;
  char *q = am_realloc_fn(p, 64 * n + 4096);  // grows far: the block moves
  if (!q) am_die("realloc failed before the error");
  am_stage("setup");
  if (q != p) am_free_fn(p);  // p was freed by realloc
  am_stage("error");
  am_reveal(n);
  am_free_fn(q);
}

static void t_free_of_reused_block(size_t n) {
  char *p = am_get(n);
  am_free_fn(p);
  char *q = am_get(n);  // may be p again: a dangling free then frees q
  am_stage("setup");
  am_free_fn(p);
  am_stage("error");
  am_reveal(n);
  if (q != p) am_free_fn(q);
}

// -- invalid frees ---------------------------------------------------------------------
static char am_global[256];

static void e_free_interior(char *p, size_t n) {
  (void)n;
  am_free_fn(p + 16);
}
static void t_invalid_free_interior(size_t n) { am_frame(n, 0, e_free_interior); }

static void e_free_unaligned(char *p, size_t n) {
  (void)n;
  am_free_fn(p + 1);
}
static void t_invalid_free_unaligned(size_t n) { am_frame(n, 0, e_free_unaligned); }

static void t_invalid_free_stack(size_t n) {
  char local[256];
  memset(local, 1, sizeof local);
  am_stage("setup");
  am_free_fn(local + 16);
  am_stage("error");
  am_reveal(n);
}

static void t_invalid_free_global(size_t n) {
  am_stage("setup");
  am_free_fn(am_global + 16);
  am_stage("error");
  am_reveal(n);
}

static void t_invalid_free_mmap(size_t n) {
  char *m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) am_die("mmap failed");
  memset(m, 1, 1 << 16);
  am_stage("setup");
  am_free_fn(m + 4096);
  am_stage("error");
  am_reveal(n);
}

static void t_invalid_free_wild(size_t n) {
  am_stage("setup");
  am_free_fn((void *)(uintptr_t)0x12345670);
  am_stage("error");
  am_reveal(n);
}

static void e_realloc(char *p, size_t n) { am_launder(am_realloc_fn(p, 2 * n)); }
static void t_realloc_freed(size_t n) { am_frame(n, 1, e_realloc); }

static void e_realloc_interior(char *p, size_t n) { e_realloc(p + 16, n); }
static void t_realloc_interior(size_t n) { am_frame(n, 0, e_realloc_interior); }

static void e_realloc_zero_then_free(char *p, size_t n) {
  (void)n;
  char *q = am_realloc_fn(p, 0);  // glibc frees p and returns NULL
  if (q == NULL) am_free_fn(p);   // what a program that believed p still live does
  am_launder(q);
}
static void t_free_after_realloc_zero(size_t n) { am_frame(n, 0, e_realloc_zero_then_free); }

// -- overflows and underflows -----------------------------------------------------------
// `a` and its neighbour `b` (allocated right after it, the witness); then `k`
// bytes written past a's end (or before its start), by stores or by memcpy.
static void am_overrun(size_t n, ptrdiff_t from, size_t k, int by_memcpy) {
  char *a = am_get(n);
  am_witness = am_get(n);
  am_witness_n = n;
  unsigned char junk[1 << 16];
  memset(junk, 0xee, sizeof junk);
  am_stage("setup");
  char *at = from >= 0 ? a + n + from : a + from;
  if (by_memcpy) {
    for (size_t done = 0; done < k; done += sizeof junk)
      am_memcpy_fn(at + done, junk, k - done < sizeof junk ? k - done : sizeof junk);
  } else {
    for (size_t i = 0; i < k; i++) ((volatile char *)at)[i] = (char)0xee;
  }
  am_stage("error");
  am_free_fn(a);
  am_reveal(n);
  am_check_witness();
}

static void t_overflow_1(size_t n) { am_overrun(n, 0, 1, 0); }
static void t_overflow_16(size_t n) { am_overrun(n, 0, 16, 0); }
static void t_overflow_32_memcpy(size_t n) { am_overrun(n, 0, 32, 1); }
static void t_overflow_1mib(size_t n) {
  (void)n;
  am_overrun(1 << 20, 0, 1 << 20, 1);
}
static void t_overflow_16_large(size_t n) {
  (void)n;
  am_overrun(1 << 16, 0, 16, 0);
}
static void t_underflow_1(size_t n) { am_overrun(n, -1, 1, 0); }
static void t_underflow_16(size_t n) { am_overrun(n, -16, 16, 0); }
static void t_underflow_32_memcpy(size_t n) { am_overrun(n, -32, 32, 1); }
static void t_underflow_1mib(size_t n) {
  (void)n;
  am_overrun(1 << 20, -(1 << 20), 1 << 20, 1);
}

// Writes into a malloc(0) block, as a program that forgot the size would.
static void t_zero_size_write(size_t n) {
  char *z = am_malloc_fn(0);
  am_witness = am_get(n);
  am_witness_n = n;
  am_stage("setup");
  if (z) memset(z, 0xee, 16);
  am_stage("error");
  am_free_fn(z);
  am_reveal(n);
  am_check_witness();
}

static void t_zero_size_read(size_t n) {
  char *z = am_malloc_fn(0);
  am_stage("setup");
  volatile char sink = 0;
  if (z)
    for (int i = 0; i < 16; i++) sink ^= ((volatile char *)z)[i];
  (void)sink;
  am_stage("error");
  am_free_fn(z);
  am_reveal(n);
}

// -- use after free -----------------------------------------------------------------------
static void e_write_all(char *p, size_t n) { memset(p, 0xee, n); }
static void t_uaf_write(size_t n) { am_frame(n, 1, e_write_all); }  // free-list links too

static void t_uaf_write_after_reuse(size_t n) {
  char *p = am_get(n);
  am_free_fn(p);
  am_witness = am_get(n);  // a new block, maybe p again
  am_witness_n = n;
  am_stage("setup");
  memset(p, 0xee, n);
  am_stage("error");
  am_reveal(n);
  am_check_witness();
}

static void t_uaf_read_after_reuse(size_t n) {
  char *p = am_get(n);
  am_free_fn(p);
  char *q = am_malloc_fn(n);
  if (q) memset(q, 0x77, n);
  am_stage("setup");
  char sink = ((volatile char *)p)[n / 2];
  am_stage("error");
  // The old pointer reads the new owner's data: an information leak.
  am_obs.leaked = q == p && sink == 0x77;
  am_reveal(n);
}

static void e_usable_size(char *p, size_t n) {
  (void)n;
  am_launder((void *)(uintptr_t)am_usable_fn(p));
}
static void t_usable_size_freed(size_t n) { am_frame(n, 1, e_usable_size); }

// -- the API's contract ---------------------------------------------------------------------
static const char *am_errno_name(int e) {
  const char *name = strerrorname_np(e);
  return name ? name : "0";
}

// An allocation that cannot be satisfied: NULL, with errno ENOMEM.
static void am_expect_enomem(void *p) {
  int e = errno;
  am_stage("error");
  am_said(p == NULL && e == ENOMEM, "returned %s, errno %s", p ? "a block" : "NULL",
          am_errno_name(e));
}

static void t_malloc_huge(size_t n) {
  (void)n;
  am_stage("setup");
  errno = 0;
  am_expect_enomem(am_malloc_fn(SIZE_MAX - 4096));
}

static void t_malloc_over_ptrdiff(size_t n) {
  (void)n;
  am_stage("setup");
  errno = 0;
  am_expect_enomem(am_malloc_fn((size_t)PTRDIFF_MAX + 1));
}

static void t_calloc_overflow(size_t n) {
  (void)n;
  am_stage("setup");
  errno = 0;
  am_expect_enomem(am_calloc_fn(SIZE_MAX / 2 + 2, 2));  // n * size wraps to 2
}

static void t_realloc_huge(size_t n) {
  char *p = am_get(n);
  am_stage("setup");
  errno = 0;
  void *q = am_realloc_fn(p, SIZE_MAX - 4096);
  am_stage("error");
  int kept = q == NULL && am_filled((unsigned char *)p, n, 0x5a);
  am_said(kept && errno == ENOMEM, "returned %s, errno %s, the old block %s",
          q ? "a block" : "NULL", am_errno_name(errno), kept ? "intact" : "lost or changed");
}

static void t_posix_memalign_not_power_of_two(size_t n) {
  am_stage("setup");
  void *p = (void *)1;
  int rc = am_memalign_fn(&p, 24, n);
  am_stage("error");
  am_said(rc == EINVAL, "returned %s", rc ? am_errno_name(rc) : "0 (a block)");
}

static void t_posix_memalign_below_pointer(size_t n) {
  am_stage("setup");
  void *p = (void *)1;
  int rc = am_memalign_fn(&p, sizeof(void *) / 2, n);
  am_stage("error");
  am_said(rc == EINVAL, "returned %s", rc ? am_errno_name(rc) : "0 (a block)");
}

static void t_posix_memalign_huge(size_t n) {
  (void)n;
  am_stage("setup");
  void *p = (void *)1;
  int rc = am_memalign_fn(&p, 64, SIZE_MAX - 4096);
  am_stage("error");
  am_said(rc == ENOMEM, "returned %s", rc ? am_errno_name(rc) : "0 (a block)");
}

static void t_aligned_alloc_bad_alignment(size_t n) {
  am_stage("setup");
  errno = 0;
  void *p = am_aligned_fn(24, n);
  am_stage("error");
  // C17 (DR 460): an unsupported alignment fails with a null pointer.
  am_said(p == NULL, "returned %s, errno %s", p ? "a block" : "NULL", am_errno_name(errno));
}

static void t_aligned_alloc_odd_size(size_t n) {
  (void)n;
  am_stage("setup");
  char *p = am_aligned_fn(64, 100);  // size not a multiple of the alignment
  am_stage("error");
  // Either answer keeps the contract, as long as a block is aligned and usable.
  int ok = p == NULL || ((uintptr_t)p % 64 == 0);
  if (p) memset(p, 1, 100);
  am_said(ok, p ? "returned a block aligned to %s" : "returned NULL%s",
          p ? ((uintptr_t)p % 64 == 0 ? "64" : "less than 64") : "");
  am_free_fn(p);
}

static void t_malloc_zero_unique(size_t n) {
  (void)n;
  am_stage("setup");
  void *a = am_malloc_fn(0), *b = am_malloc_fn(0);
  am_stage("error");
  am_said(a == NULL || b == NULL || a != b, "returned %s",
          a && b ? (a != b ? "two distinct blocks" : "the same block twice") : "NULL");
  am_free_fn(a);
  am_free_fn(b);
}

static void am_calloc_zero(size_t n) {
  char *p = am_get(n);
  memset(p, 0xff, n);
  am_free_fn(p);
  am_stage("setup");
  unsigned char *q = am_calloc_fn(1, n);
  am_stage("error");
  int zero = q != NULL && am_filled(q, n, 0);
  am_said(zero, q ? (zero ? "all zero" : "not all zero (the old contents showed)") : "NULL");
  am_free_fn(q);
}

static void t_calloc_zero_after_reuse(size_t n) { am_calloc_zero(n); }
static void t_calloc_zero_after_reuse_large(size_t n) {
  (void)n;
  am_calloc_zero(256 << 10);
}

static void t_free_null(size_t n) {
  (void)n;
  am_stage("setup");
  am_free_fn(NULL);
  am_stage("error");
  am_said(1, "returned");
}

// Is heap memory executable? A block's mapping, as /proc/self/maps shows it.
static void t_exec_heap(size_t n) {
  char *p = am_get(n);
  am_stage("setup");
  char line[512], perms[8] = "";
  FILE *f = fopen("/proc/self/maps", "re");
  if (!f) am_die("cannot read /proc/self/maps");
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char pr[8];
    if (sscanf(line, "%lx-%lx %7s", &lo, &hi, pr) == 3 && (uintptr_t)p >= lo && (uintptr_t)p < hi)
      snprintf(perms, sizeof perms, "%s", pr);
  }
  fclose(f);
  am_stage("error");
  am_said(perms[0] && perms[2] != 'x', "the block's mapping is %s", perms[0] ? perms : "unknown");
  am_free_fn(p);
}

// -- the table --------------------------------------------------------------------------------
typedef struct am_test {
  const char *name;
  void (*run)(size_t);
} am_test;

static const am_test am_tests[] = {
    {"double_free", t_double_free},
    {"double_free_after_others", t_double_free_after_others},
    {"double_free_thread", t_double_free_thread},
    {"double_free_large", t_double_free_large},
    {"double_free_calloc", t_double_free_calloc},
    {"free_after_realloc_moved", t_free_after_realloc_moved},
    {"free_after_realloc_zero", t_free_after_realloc_zero},
    {"free_of_reused_block", t_free_of_reused_block},
    {"invalid_free_interior", t_invalid_free_interior},
    {"invalid_free_unaligned", t_invalid_free_unaligned},
    {"invalid_free_stack", t_invalid_free_stack},
    {"invalid_free_global", t_invalid_free_global},
    {"invalid_free_mmap", t_invalid_free_mmap},
    {"invalid_free_wild", t_invalid_free_wild},
    {"realloc_freed", t_realloc_freed},
    {"realloc_interior", t_realloc_interior},
    {"overflow_1", t_overflow_1},
    {"overflow_16", t_overflow_16},
    {"overflow_32_memcpy", t_overflow_32_memcpy},
    {"overflow_16_large", t_overflow_16_large},
    {"overflow_1mib", t_overflow_1mib},
    {"underflow_1", t_underflow_1},
    {"underflow_16", t_underflow_16},
    {"underflow_32_memcpy", t_underflow_32_memcpy},
    {"underflow_1mib", t_underflow_1mib},
    {"zero_size_write", t_zero_size_write},
    {"zero_size_read", t_zero_size_read},
    {"uaf_write", t_uaf_write},
    {"uaf_write_after_reuse", t_uaf_write_after_reuse},
    {"uaf_read_after_reuse", t_uaf_read_after_reuse},
    {"usable_size_freed", t_usable_size_freed},
    {"malloc_huge", t_malloc_huge},
    {"malloc_over_ptrdiff", t_malloc_over_ptrdiff},
    {"calloc_overflow", t_calloc_overflow},
    {"realloc_huge", t_realloc_huge},
    {"posix_memalign_not_power_of_two", t_posix_memalign_not_power_of_two},
    {"posix_memalign_below_pointer", t_posix_memalign_below_pointer},
    {"posix_memalign_huge", t_posix_memalign_huge},
    {"aligned_alloc_bad_alignment", t_aligned_alloc_bad_alignment},
    {"aligned_alloc_odd_size", t_aligned_alloc_odd_size},
    {"malloc_zero_unique", t_malloc_zero_unique},
    {"calloc_zero_after_reuse", t_calloc_zero_after_reuse},
    {"calloc_zero_after_reuse_large", t_calloc_zero_after_reuse_large},
    {"free_null", t_free_null},
    {"exec_heap", t_exec_heap},
    {"cxx_delete_of_new_array", t_cxx_delete_of_new_array},
    {"cxx_delete_of_new_array_dtor", t_cxx_delete_of_new_array_dtor},
    {"cxx_delete_array_of_new", t_cxx_delete_array_of_new},
    {"cxx_double_delete", t_cxx_double_delete},
    {"cxx_sized_delete_wrong_size", t_cxx_sized_delete_wrong_size},
    {"cxx_new_huge_throws", t_cxx_new_huge_throws},
    {"cxx_new_array_length_throws", t_cxx_new_array_length_throws},
};

int main(int argc, char **argv) {
  am_baseline_exit(argc, argv, "harden");
  size_t count = sizeof am_tests / sizeof am_tests[0];
  if (argc == 2 && !strcmp(argv[1], "--list")) {
    for (size_t i = 0; i < count; i++) puts(am_tests[i].name);
    return 0;
  }
  const char *name = am_arg_str(argc, argv, "test", "");
  size_t n = (size_t)am_arg_u64(argc, argv, "size", 64);
  if (n < 32 || n > (1 << 20)) am_die("--size must be in 32..1048576");
  const am_test *t = NULL;
  for (size_t i = 0; i < count && !t; i++)
    if (!strcmp(am_tests[i].name, name)) t = &am_tests[i];
  if (!t) am_die("--test %s: unknown; `am_harden --list` names the tests", name);
  double t0 = am_now();
  t->run(n);
  am_result r;
  am_result_begin(&r, "harden");
  am_result_u64(&r, "ops", 1);
  am_result_f64(&r, "seconds", am_now() - t0);
  am_result_str(&r, "test", name);
  am_result_u64(&r, "same_block", (uint64_t)am_obs.same_block);
  am_result_u64(&r, "overlap", (uint64_t)am_obs.overlap);
  am_result_u64(&r, "wrong_contents", (uint64_t)am_obs.wrong_contents);
  am_result_u64(&r, "leaked", (uint64_t)am_obs.leaked);
  if (am_obs.contract) {
    am_result_u64(&r, "conforming", (uint64_t)am_obs.conforming);
    am_result_str(&r, "seen", am_obs.what);
  }
  am_result_malloc_object(&r);
  am_result_emit(&r);
  return 0;
}
