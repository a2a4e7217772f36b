// am_harden.h — what the C++ tests of the hardening battery (am_harden_cxx.cpp)
// share with its C part (am_harden.c, which has the main and the C tests).
#ifndef AM_HARDEN_H
#define AM_HARDEN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void am_stage(const char *stage);     // "setup", "error", "reveal" (see am_harden.c)
void am_reveal(size_t n);             // allocations after the error that show damage
void am_said(int conforming, const char *fmt, ...);  // an API-contract test's finding
void *am_launder(void *p);            // hides a pointer's origin from the compiler

// The C++ tests, each run as `am_harden --test NAME`.
void t_cxx_delete_of_new_array(size_t n);
void t_cxx_delete_of_new_array_dtor(size_t n);
void t_cxx_delete_array_of_new(size_t n);
void t_cxx_double_delete(size_t n);
void t_cxx_sized_delete_wrong_size(size_t n);
void t_cxx_new_huge_throws(size_t n);
void t_cxx_new_array_length_throws(size_t n);

#ifdef __cplusplus
}
#endif

#endif  // AM_HARDEN_H
