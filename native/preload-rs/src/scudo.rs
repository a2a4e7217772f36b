//! LLVM scudo (scudo-sys). The crate exports only a Rust-shaped
//! allocate/deallocate pair; build.rs compiles scudo's own C wrappers
//! (wrappers_c.inc) from the crate's sources with an `am_scudo_` prefix, so
//! the C semantics (usable size, alignment checks, errno) are scudo's.

use crate::generic;
use core::ffi::{c_char, c_int, c_void};

forward! {
    malloc(size: usize) -> *mut c_void = am_scudo_malloc;
    free(ptr: *mut c_void) -> () = am_scudo_free;
    calloc(count: usize, size: usize) -> *mut c_void = am_scudo_calloc;
    realloc(ptr: *mut c_void, size: usize) -> *mut c_void = am_scudo_realloc;
    posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int = am_scudo_posix_memalign;
    aligned_alloc(align: usize, size: usize) -> *mut c_void = am_scudo_aligned_alloc;
    memalign(align: usize, size: usize) -> *mut c_void = am_scudo_memalign;
    valloc(size: usize) -> *mut c_void = am_scudo_valloc;
    pvalloc(size: usize) -> *mut c_void = am_scudo_pvalloc;
    usable_size(ptr: *mut c_void) -> usize = am_scudo_malloc_usable_size;
}

pub unsafe fn reallocarray(ptr: *mut c_void, count: usize, size: usize) -> *mut c_void {
    generic::reallocarray(realloc, ptr, count, size)
}

pub fn version() -> *const c_char {
    concat!("scudo ", env!("AM_ALLOCATOR_VERSION"), "\0").as_ptr() as *const c_char
}

pub unsafe fn release() -> *const c_char {
    core::ptr::null()
}
