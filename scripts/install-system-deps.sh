#!/usr/bin/env bash
# Install the Debian packages allocmark needs (build tools and the allocators
# it measures), as root or through sudo. (The measured programs need no user of
# their own: run as root, allocmark gives each campaign a transient uid,
# src/allocmark/native/identity.py.) Installs only what is missing, and
# says clearly what it could not install; never fails the caller for that.
#
# usage: install-system-deps.sh [PACKAGE...]
#   with packages (`make setup-apps` passes the real applications' ones),
#   installs those instead of allocmark's own.
set -u

# chromium renders the HTML report in the tests; electric-fence, libdmalloc5 and
# duma are the debugging allocators of the hardening battery; autoconf and
# dpkg-dev (dpkg-source) build allocators from Debian's source packages; git
# builds the user's allocator from its repository (-a NAME@git:..., bisect).
packages=(build-essential cmake python3-venv time autoconf dpkg-dev git
          libjemalloc2 libtcmalloc-minimal4 libgoogle-perftools4 libmimalloc2.0
          libtbbmalloc2 libclang-rt-16-dev electric-fence libdmalloc5 duma chromium)

# cargo builds the allocators that come from crates.io (`allocmark alloc
# build`); a rustup toolchain counts, else Debian's.
if ! command -v cargo >/dev/null && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
  packages+=(cargo)
fi
if [ $# -gt 0 ]; then
  packages=("$@")
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "allocmark: cannot install ${missing[*]}: not root and no password-less sudo." >&2
  echo "allocmark: run: sudo apt-get install -y ${missing[*]}" >&2
  exit 0
fi

echo "allocmark: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -q >/dev/null || echo "allocmark: apt-get update failed" >&2
if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; then
  # One unavailable package must not block the others.
  for p in "${missing[@]}"; do
    "${as_root[@]}" apt-get install -y -q --no-install-recommends "$p" >/dev/null 2>&1 \
      || echo "allocmark: could not install $p; what needs it shows as missing in `allocmark allocators` or `allocmark workloads`" >&2
  done
fi
