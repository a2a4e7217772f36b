// am_misuse — one deliberate heap misuse, to see what a (hardened) allocator
// does about it: abort the program (the run ends with a signal, which
// allocmark records as "crashed" with the signal's name), complain and go on,
// or not notice at all.
//
// After the misuse the program allocates two blocks of the misused size; if
// both are the same block, the allocator's free list was corrupted unnoticed
// (`same_block_twice` = 1): the classic double-free exploit primitive.
//
// usage: am_misuse [--kind double_free|invalid_free] [--size B]
#include "am_bench.h"

// The compiler must not see through these: it may delete or reject an
// obvious double free.
static void *(*volatile am_malloc_fn)(size_t) = malloc;
static void (*volatile am_free_fn)(void *) = free;

int main(int argc, char **argv) {
  am_baseline_exit(argc, argv, "misuse");
  const char *kind = am_arg_str(argc, argv, "kind", "double_free");
  size_t size = (size_t)am_arg_u64(argc, argv, "size", 64);
  if (size == 0) am_die("--size must be at least 1");
  am_live_init(1);
  double t0 = am_now();
  char *p = am_malloc_fn(size);
  char *guard = am_malloc_fn(size);  // keeps p off the top of a heap
  if (!p || !guard) am_die("malloc(%zu) failed", size);
  memset(p, 1, size);
  if (!strcmp(kind, "double_free")) {
    am_free_fn(p);
    am_free_fn(p);
  } else if (!strcmp(kind, "invalid_free")) {
    am_free_fn(p + 16);
  } else {
    am_die("--kind must be double_free or invalid_free");
  }
  char *a = am_malloc_fn(size);
  char *b = am_malloc_fn(size);
  double secs = am_now() - t0;
  am_result r;
  am_result_standard(&r, "misuse", 4, secs, 1, "none");
  am_result_str(&r, "misuse", kind);
  am_result_u64(&r, "survived", 1);
  am_result_u64(&r, "same_block_twice", a != NULL && a == b);
  am_result_emit(&r);
  return 0;
}
