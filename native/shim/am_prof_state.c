// libamprof.so — the state every section shares: names, the thread list, the totals.
// See am_prof.h.
#include "am_prof.h"

const char *const am_api_names[AM_API_N] = {
    "malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign",
    "aligned_alloc", "memalign", "valloc", "pvalloc", "malloc_usable_size"};
const char *const am_path_names[AM_PATH_N] = {
    "malloc_new", "malloc_reuse", "calloc", "realloc", "free", "aligned", "usable_size"};
const char *const am_sys_names[AM_SYS_N] = {"mmap",     "munmap", "mremap", "madvise",
                                                   "mprotect", "brk",    "sbrk"};
AM_TLS am_thread am_me;
_Atomic(am_thread *) am_living[AM_LIVING];
_Atomic uint64_t am_unlisted;
am_g_t am_g = {.lock = PTHREAD_MUTEX_INITIALIZER, .sample = 1024};
