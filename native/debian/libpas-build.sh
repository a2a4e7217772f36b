#!/usr/bin/env bash
# libpas (WebKit's allocator) from webkit2gtk's source tree, with allocmark's malloc
# layer (am_libpas.c), as one preloadable library. The sources are the ones WebKit's
# Source/bmalloc/CMakeLists.txt lists: its bmalloc_C_SOURCES in C, and the few it
# marks LANGUAGE CXX in C++ (GCC rejects their initializers in C). WebKit's C++
# bmalloc is not built: am_libpas.c answers libpas's questions to it.
set -euo pipefail
cd Source/bmalloc
c=$(awk '/^set\(bmalloc_C_SOURCES/{p=1; next} p && /^\)/{p=0} p && /\.c$/{print $1}' CMakeLists.txt)
cxx=$(awk '/^set_source_files_properties\(/{p=1; next} /PROPERTIES LANGUAGE CXX/{p=0}
           p && /\.c$/{print $1}' CMakeLists.txt)
[ -n "$c" ] && [ -n "$cxx" ] || { echo "no libpas sources listed in CMakeLists.txt" >&2; exit 1; }
out=../../am-build
mkdir -p "$out/obj"
flags="-O2 -g0 -fPIC -D_GNU_SOURCE -DPAS_BMALLOC=1 -I. -Ibmalloc -Ilibpas/src/libpas"
{
  for f in $c ../../am_libpas.c; do echo "gcc $flags -c $f -o $out/obj/$(basename "$f").o"; done
  for f in $cxx; do echo "g++ -x c++ -std=c++20 $flags -c $f -o $out/obj/$(basename "$f").o"; done
} | xargs -P "${JOBS:-1}" -I{} sh -c "{}"
g++ -shared -o "$out/libpas_malloc.so" "$out"/obj/*.o -lpthread -latomic -Wl,-z,defs
