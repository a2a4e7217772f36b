// am_harden_cxx.cpp — the C++ tests of the hardening battery: mismatched new
// and delete, sized delete with the wrong size, and what operator new must do
// when it cannot allocate (throw). See am_harden.c for the protocol.
#include <cstdint>
#include <cstring>
#include <new>

#include "am_harden.h"

namespace {

struct Plain {  // trivially destructible: new[] stores no element count
  long v[4];
};

struct Counted {  // a destructor: new[] stores the count in front of the array
  long v[4];
  ~Counted() { v[0] = 0; }
};

template <typename T>
T *laundered(T *p) {
  return static_cast<T *>(am_launder(p));
}

}  // namespace

extern "C" void t_cxx_delete_of_new_array(size_t n) {
  Plain *a = laundered(new Plain[n / sizeof(Plain) + 2]);
  am_stage("setup");
  delete a;  // should be delete[]
  am_stage("error");
  am_reveal(n);
}

extern "C" void t_cxx_delete_of_new_array_dtor(size_t n) {
  Counted *a = laundered(new Counted[n / sizeof(Counted) + 2]);
  am_stage("setup");
  delete a;  // frees the address after the element count: not the block's start
  am_stage("error");
  am_reveal(n);
}

extern "C" void t_cxx_delete_array_of_new(size_t n) {
  Plain *a = laundered(new Plain);
  am_stage("setup");
  delete[] a;  // should be delete
  am_stage("error");
  am_reveal(n);
}

extern "C" void t_cxx_double_delete(size_t n) {
  Plain *a = laundered(new Plain), *guard = new Plain;
  am_stage("setup");
  delete a;
  delete laundered(a);
  am_stage("error");
  am_reveal(n);
  delete guard;
}

extern "C" void t_cxx_sized_delete_wrong_size(size_t n) {
  void *p = am_launder(::operator new(n));
  std::memset(p, 1, n);
  am_stage("setup");
  ::operator delete(p, 64 * n);  // the size it was allocated with was n
  am_stage("error");
  am_reveal(n);
}

extern "C" void t_cxx_new_huge_throws(size_t) {
  am_stage("setup");
  const char *seen = "returned a block";
  volatile size_t huge = SIZE_MAX - 4096;  // volatile: a constant this big is an error
  try {
    void *p = ::operator new(huge);
    if (am_launder(p) == nullptr) seen = "returned NULL without throwing";
  } catch (const std::bad_alloc &) {
    seen = "threw std::bad_alloc";
  }
  am_stage("error");
  am_said(std::strcmp(seen, "threw std::bad_alloc") == 0, "%s", seen);
}

extern "C" void t_cxx_new_array_length_throws(size_t) {
  am_stage("setup");
  const char *seen = "returned a block";
  volatile size_t count = SIZE_MAX / 2;  // times sizeof(Plain) does not fit in size_t
  try {
    Plain *a = new Plain[count];
    if (am_launder(a) == nullptr) seen = "returned NULL without throwing";
  } catch (const std::bad_array_new_length &) {
    seen = "threw std::bad_array_new_length";
  } catch (const std::bad_alloc &) {
    seen = "threw std::bad_alloc";
  }
  am_stage("error");
  am_said(std::strncmp(seen, "threw", 5) == 0, "%s", seen);
}
