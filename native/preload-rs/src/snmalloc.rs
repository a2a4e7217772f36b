//! snmalloc (snmalloc-sys with feature `libc-api`): `sn_` functions for all
//! but reallocarray.

use crate::generic;
use core::ffi::{c_char, c_int, c_void};

forward! {
    malloc(size: usize) -> *mut c_void = sn_malloc;
    free(ptr: *mut c_void) -> () = sn_free;
    calloc(count: usize, size: usize) -> *mut c_void = sn_calloc;
    realloc(ptr: *mut c_void, size: usize) -> *mut c_void = sn_realloc;
    posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int = sn_posix_memalign;
    aligned_alloc(align: usize, size: usize) -> *mut c_void = sn_aligned_alloc;
    memalign(align: usize, size: usize) -> *mut c_void = sn_memalign;
    valloc(size: usize) -> *mut c_void = sn_valloc;
    pvalloc(size: usize) -> *mut c_void = sn_pvalloc;
    usable_size(ptr: *mut c_void) -> usize = sn_malloc_usable_size;
}

pub unsafe fn reallocarray(ptr: *mut c_void, count: usize, size: usize) -> *mut c_void {
    generic::reallocarray(realloc, ptr, count, size)
}

pub fn version() -> *const c_char {
    concat!("snmalloc ", env!("AM_ALLOCATOR_VERSION"), "\0").as_ptr() as *const c_char
}

pub unsafe fn release() -> *const c_char {
    core::ptr::null()
}
