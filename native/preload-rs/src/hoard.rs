//! Hoard (alloc_hoard, Hoard's own sources and Heap Layers' GNU wrapper
//! compiled with the `hoard_` prefix): every C function but reallocarray.
//! Hoard is GPL; so is a library built from it.

use crate::generic;
use core::ffi::{c_char, c_int, c_void};

forward! {
    malloc(size: usize) -> *mut c_void = hoard_malloc;
    free(ptr: *mut c_void) -> () = hoard_free;
    calloc(count: usize, size: usize) -> *mut c_void = hoard_calloc;
    realloc(ptr: *mut c_void, size: usize) -> *mut c_void = hoard_realloc;
    posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int = hoard_posix_memalign;
    aligned_alloc(align: usize, size: usize) -> *mut c_void = hoard_aligned_alloc;
    memalign(align: usize, size: usize) -> *mut c_void = hoard_memalign;
    valloc(size: usize) -> *mut c_void = hoard_valloc;
    pvalloc(size: usize) -> *mut c_void = hoard_pvalloc;
    usable_size(ptr: *mut c_void) -> usize = hoard_malloc_usable_size;
}

pub unsafe fn reallocarray(ptr: *mut c_void, count: usize, size: usize) -> *mut c_void {
    generic::reallocarray(realloc, ptr, count, size)
}

pub fn version() -> *const c_char {
    concat!("hoard ", env!("AM_ALLOCATOR_VERSION"), "\0").as_ptr() as *const c_char
}

pub unsafe fn release() -> *const c_char {
    // Hoard's malloc_trim does nothing; there is no call that returns memory.
    core::ptr::null()
}
