// am_probe — which shared object serves each allocation function?
//
// Run under an allocator's LD_PRELOAD and environment; prints one JSON object
// on stdout: for every function of the allocation API, the path of the object
// that the dynamic linker binds it to (null when nothing exports it), the
// versions the allocators report about themselves, and whether a smoke test
// of malloc/calloc/realloc/free passed. Interpretation happens in Python.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AM_PROBE_VERSION 2

// C API first, then the C++ operator new/delete family (mangled names).
static const char *const am_functions[] = {
    "malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign",
    "aligned_alloc", "memalign", "valloc", "pvalloc", "malloc_usable_size",
    "_Znwm", "_Znam", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm",
    "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
    "_ZnwmSt11align_val_t", "_ZdlPvSt11align_val_t",
};

static void am_json_str(const char *s) {
  if (s == NULL) {
    fputs("null", stdout);
    return;
  }
  putchar('"');
  for (const char *c = s; *c; c++) {
    if (*c == '"' || *c == '\\') printf("\\%c", *c);
    else if ((unsigned char)*c < 0x20) printf("\\u%04x", (unsigned char)*c);
    else putchar(*c);
  }
  putchar('"');
}

static const char *am_owner(const char *name) {
  Dl_info info;
  void *sym = dlsym(RTLD_DEFAULT, name);
  if (sym == NULL || !dladdr(sym, &info)) return NULL;
  return info.dli_fname;
}

// ---------------------------------------------------------------------------
// Self-reported versions, each read only if the allocator exports the call.
// ---------------------------------------------------------------------------
typedef int (*am_mallctl_fn)(const char *, void *, size_t *, void *, size_t);
typedef const char *(*am_tc_version_fn)(int *, int *, const char **);
typedef int (*am_mi_version_fn)(void);
typedef const char *(*am_am_version_fn)(void);

static void am_print_versions(void) {
  printf("\"versions\": {\"glibc\": ");
  am_json_str(gnu_get_libc_version());
  am_mallctl_fn mallctl = (am_mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
  const char *je = NULL;
  size_t len = sizeof je;
  if (mallctl && mallctl("version", &je, &len, NULL, 0) == 0 && je) {
    printf(", \"jemalloc\": ");
    am_json_str(je);
  }
  am_tc_version_fn tc = (am_tc_version_fn)dlsym(RTLD_DEFAULT, "tc_version");
  if (tc) {
    int major = 0, minor = 0;
    const char *patch = "";
    tc(&major, &minor, &patch);
    printf(", \"tcmalloc\": \"%d.%d%s\"", major, minor, patch ? patch : "");
  }
  am_mi_version_fn mi = (am_mi_version_fn)dlsym(RTLD_DEFAULT, "mi_version");
  if (mi) {
    int v = mi();
    // 217 is 2.1.7; from 2.2 on, 20302 is 2.3.2 (two digits minor and patch).
    if (v >= 10000)
      printf(", \"mimalloc\": \"%d.%d.%d\"", v / 10000, (v / 100) % 100, v % 100);
    else
      printf(", \"mimalloc\": \"%d.%d.%d\"", v / 100, (v / 10) % 10, v % 10);
  }
  // Libraries built by `allocmark alloc build` (native/preload-rs).
  am_am_version_fn am = (am_am_version_fn)dlsym(RTLD_DEFAULT, "am_allocator_version");
  if (am && am()) {
    printf(", \"allocmark\": ");
    am_json_str(am());
  }
  printf("}");
}

// The core four must work and must not corrupt a block's contents.
static int am_smoke(void) {
  char *p = malloc(100);
  if (!p) return 0;
  memset(p, 7, 100);
  char *q = realloc(p, 100000);
  if (!q || q[0] != 7 || q[99] != 7) return 0;
  int *z = calloc(1000, sizeof *z);
  if (!z) return 0;
  for (int i = 0; i < 1000; i++)
    if (z[i] != 0) return 0;
  free(z);
  free(q);
  return 1;
}

int main(void) {
  printf("{\"am\": \"probe\", \"v\": %d, \"functions\": {", AM_PROBE_VERSION);
  size_t n = sizeof am_functions / sizeof am_functions[0];
  for (size_t i = 0; i < n; i++) {
    printf("%s\"%s\": ", i ? ", " : "", am_functions[i]);
    am_json_str(am_owner(am_functions[i]));
  }
  printf("}, \"libc\": ");
  am_json_str(am_owner("gnu_get_libc_version"));
  printf(", ");
  am_print_versions();
  printf(", \"smoke\": %s}\n", am_smoke() ? "true" : "false");
  return 0;
}
