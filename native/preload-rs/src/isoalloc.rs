//! IsoAlloc (libisoalloc-sys): `iso_` functions for allocation, and the
//! alignment rule of IsoAlloc's own malloc hooks (malloc_hook.c): a request
//! is grown to its alignment, and power-of-two chunks in page-aligned zones
//! are then aligned to it. IsoAlloc's hooks skip that growth for memalign
//! and aligned_alloc; here all three share it, and an alignment beyond what
//! the chunk gives (above a page, for large chunks) fails rather than return
//! a misaligned pointer.

use crate::generic;
use core::ffi::{c_char, c_int, c_void};
use core::ptr::null_mut;

forward! {
    malloc(size: usize) -> *mut c_void = iso_alloc;
    free(ptr: *mut c_void) -> () = iso_free;
    calloc(count: usize, size: usize) -> *mut c_void = iso_calloc;
    realloc(ptr: *mut c_void, size: usize) -> *mut c_void = iso_realloc;
    reallocarray(ptr: *mut c_void, count: usize, size: usize) -> *mut c_void = iso_reallocarray;
    usable_size(ptr: *mut c_void) -> usize = iso_chunksz;
    flush() -> () = iso_flush_caches;
}

pub unsafe fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        generic::set_errno(generic::EINVAL);
        return null_mut();
    }
    let p = malloc(if size < align { align } else { size });
    if !p.is_null() && (p as usize) % align != 0 {
        free(p);
        generic::set_errno(generic::ENOMEM);
        return null_mut();
    }
    p
}
pub unsafe fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    generic::posix_memalign(aligned_alloc, out, align, size)
}
over_aligned_alloc!();

pub fn version() -> *const c_char {
    concat!("isoalloc ", env!("AM_ALLOCATOR_VERSION"), "\0").as_ptr() as *const c_char
}

pub unsafe fn release() -> *const c_char {
    flush();
    c"iso_flush_caches".as_ptr()
}
