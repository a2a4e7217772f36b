//! GrapheneOS hardened_malloc (hardened-malloc-sys built with
//! `-DH_MALLOC_PREFIX`): `h_` functions for the whole C API.

use core::ffi::{c_char, c_int, c_void};

forward! {
    malloc(size: usize) -> *mut c_void = h_malloc;
    free(ptr: *mut c_void) -> () = h_free;
    calloc(count: usize, size: usize) -> *mut c_void = h_calloc;
    realloc(ptr: *mut c_void, size: usize) -> *mut c_void = h_realloc;
    posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int = h_posix_memalign;
    aligned_alloc(align: usize, size: usize) -> *mut c_void = h_aligned_alloc;
    memalign(align: usize, size: usize) -> *mut c_void = h_memalign;
    valloc(size: usize) -> *mut c_void = h_valloc;
    pvalloc(size: usize) -> *mut c_void = h_pvalloc;
    usable_size(ptr: *mut c_void) -> usize = h_malloc_usable_size;
    reallocarray(ptr: *mut c_void, count: usize, size: usize) -> *mut c_void = h_reallocarray;
    trim(pad: usize) -> c_int = h_malloc_trim;
}

pub fn version() -> *const c_char {
    concat!("hardened_malloc ", env!("AM_ALLOCATOR_VERSION"), "\0").as_ptr() as *const c_char
}

pub unsafe fn release() -> *const c_char {
    trim(0);
    c"h_malloc_trim".as_ptr()
}
