"""A git repository of a tiny allocator (glibc's malloc behind a delay and an optional
reserve of touched memory), with planted commits, for the git route and bisect.

History (v1.0, then 16 commits; `main` ends at the last):
  1-4   a changelog line each (the library does not change: an A/A range, v1.0..c4)
  5     SLOW: every malloc spins first (the slowdown)
  6-7   changelog
  8     BROKEN: a syntax error (the build fails)
  9     the syntax error fixed
  10    changelog
  11    FAT: a constructor touches RESERVE_KIB KiB it never frees (the footprint)
  12-16 changelog
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

SLOW, BROKEN, FAT, LAST = 5, 8, 11, 16
RESERVE_KIB = 48 * 1024
SPIN = 3000  # steps of a dependent chain before every malloc: several times its cost

_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

#define TINY_SPIN @SPIN@
#define TINY_RESERVE_KIB @RESERVE@

static volatile uint64_t tiny_sink;

__attribute__((constructor)) static void tiny_init(void) {
  if (TINY_RESERVE_KIB) {
    size_t n = (size_t)TINY_RESERVE_KIB << 10;
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) memset(p, 1, n);
  }
}

void *malloc(size_t n) {
  uint64_t x = n;
  for (int i = 0; i < TINY_SPIN; i++) x = x * 6364136223846793005ull + 1;
  tiny_sink = x;
  return __libc_malloc(n);
}
void free(void *p) { __libc_free(p); }
void *calloc(size_t k, size_t n) { return __libc_calloc(k, n); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
void *memalign(size_t a, size_t n) { return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { return __libc_memalign(a, n); }
void *valloc(size_t n) { return __libc_valloc(n); }
void *pvalloc(size_t n) { return __libc_pvalloc(n); }
void *reallocarray(void *p, size_t k, size_t n) {
  if (n && k > SIZE_MAX / n) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_realloc(p, k * n);
}
size_t malloc_usable_size(void *p) {
  static size_t (*next)(void *);
  if (next == NULL) next = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
  return next ? next(p) : 0;
}
int posix_memalign(void **out, size_t a, size_t n) {
  if (a < sizeof(void *) || (a & (a - 1))) return EINVAL;
  void *p = __libc_memalign(a, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
"""

MAKEFILE = "libtiny.so: tiny.c\n\tcc -O2 -shared -fPIC -o libtiny.so tiny.c\n"
BUILD, OUTPUT = "make", "libtiny.so"


def source(spin: int, reserve: int, broken: bool) -> str:
    text = _SOURCE.replace("@SPIN@", str(spin)).replace("@RESERVE@", str(reserve))
    return text + ("this does not compile\n" if broken else "")


@dataclass(frozen=True)
class Repo:
    path: Path
    commits: list[str]  # v1.0 first, then commits 1..16

    def describe(self, i: int) -> str:
        return subprocess.run(
            ["git", "describe", "--tags", "--always", "--abbrev=12", self.commits[i]],
            cwd=self.path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()


def make(
    path: Path,
    slow: int | None = SLOW,
    fat: int | None = FAT,
    broken: int | None = BROKEN,
    last: int = LAST,
    spin: int = SPIN,
    reserve_kib: int = RESERVE_KIB,
) -> Repo:
    """The history above (or another: `slow`, `fat`, `broken` at other commits or None,
    `last` commits after v1.0, `spin` steps before each malloc from `slow` on, `reserve_kib`
    KiB touched from `fat` on)."""
    path.mkdir(parents=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=path, env=env, capture_output=True, text=True, check=True
        ).stdout.strip()

    git("init", "--quiet", "--initial-branch=main")
    (path / "Makefile").write_text(MAKEFILE)
    commits = []
    for i in range(last + 1):
        steps = spin if slow is not None and i >= slow else 0
        reserve = reserve_kib if fat is not None and i >= fat else 0
        (path / "tiny.c").write_text(source(steps, reserve, i == broken))
        with open(path / "CHANGES", "a") as f:
            f.write(f"change {i}\n")
        git("add", "-A")
        git("commit", "--quiet", "-m", f"change {i}")
        commits.append(git("rev-parse", "HEAD"))
        if i == 0:
            git("tag", "v1.0")
    git("tag", "v2.0")
    return Repo(path, commits)
