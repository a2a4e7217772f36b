//! jemalloc (tikv-jemalloc-sys, prefixed `_rjem_` build). It has no
//! memalign, valloc, pvalloc or reallocarray; `mallctl` is re-exported so
//! jemalloc's own tools (and allocmark's version probe and purge) work.

use crate::generic;
use core::ffi::{c_char, c_int, c_void};

forward! {
    malloc(size: usize) -> *mut c_void = _rjem_malloc;
    free(ptr: *mut c_void) -> () = _rjem_free;
    calloc(count: usize, size: usize) -> *mut c_void = _rjem_calloc;
    realloc(ptr: *mut c_void, size: usize) -> *mut c_void = _rjem_realloc;
    posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int = _rjem_posix_memalign;
    aligned_alloc(align: usize, size: usize) -> *mut c_void = _rjem_aligned_alloc;
    usable_size(ptr: *mut c_void) -> usize = _rjem_malloc_usable_size;
    ctl(name: *const c_char, oldp: *mut c_void, oldlenp: *mut usize, newp: *mut c_void, newlen: usize) -> c_int = _rjem_mallctl;
}

pub unsafe fn reallocarray(ptr: *mut c_void, count: usize, size: usize) -> *mut c_void {
    generic::reallocarray(realloc, ptr, count, size)
}
over_aligned_alloc!();

pub fn version() -> *const c_char {
    concat!("jemalloc ", env!("AM_ALLOCATOR_VERSION"), "\0").as_ptr() as *const c_char
}

pub unsafe fn release() -> *const c_char {
    core::ptr::null()
}

#[no_mangle]
pub unsafe extern "C" fn mallctl(
    name: *const c_char,
    oldp: *mut c_void,
    oldlenp: *mut usize,
    newp: *mut c_void,
    newlen: usize,
) -> c_int {
    ctl(name, oldp, oldlenp, newp, newlen)
}
