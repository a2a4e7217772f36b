//! Doug Lea's dlmalloc 2.8.6, from the malloc.c that portable-dlmalloc bundles,
//! compiled by build.rs as an ordinary Linux dlmalloc (its `PORTABLE` mode, the
//! crate's own, wants callbacks for memory and locks): the `dl` prefix, one lock
//! for the whole heap (USE_LOCKS), sbrk and mmap for memory. aligned_alloc is
//! dlmemalign with C11's check of the alignment.

use crate::generic;
use core::ffi::{c_char, c_int, c_void};

forward! {
    malloc(size: usize) -> *mut c_void = dlmalloc;
    free(ptr: *mut c_void) -> () = dlfree;
    calloc(count: usize, size: usize) -> *mut c_void = dlcalloc;
    realloc(ptr: *mut c_void, size: usize) -> *mut c_void = dlrealloc;
    posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int = dlposix_memalign;
    memalign(align: usize, size: usize) -> *mut c_void = dlmemalign;
    valloc(size: usize) -> *mut c_void = dlvalloc;
    pvalloc(size: usize) -> *mut c_void = dlpvalloc;
    usable_size(ptr: *mut c_void) -> usize = dlmalloc_usable_size;
    trim(pad: usize) -> c_int = dlmalloc_trim;
}

pub unsafe fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        generic::set_errno(generic::EINVAL);
        return core::ptr::null_mut();
    }
    memalign(align, size)
}

pub unsafe fn reallocarray(ptr: *mut c_void, count: usize, size: usize) -> *mut c_void {
    generic::reallocarray(realloc, ptr, count, size)
}

pub fn version() -> *const c_char {
    concat!("dlmalloc ", env!("AM_ALLOCATOR_VERSION"), "\0").as_ptr() as *const c_char
}

pub unsafe fn release() -> *const c_char {
    trim(0);
    c"dlmalloc_trim".as_ptr()
}
