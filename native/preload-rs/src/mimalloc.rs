//! mimalloc (libmimalloc-sys): every C function has a native `mi_` twin.

use crate::generic;
use core::ffi::{c_char, c_int, c_void};

forward! {
    malloc(size: usize) -> *mut c_void = mi_malloc;
    free(ptr: *mut c_void) -> () = mi_free;
    calloc(count: usize, size: usize) -> *mut c_void = mi_calloc;
    realloc(ptr: *mut c_void, size: usize) -> *mut c_void = mi_realloc;
    posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int = mi_posix_memalign;
    aligned_alloc(align: usize, size: usize) -> *mut c_void = mi_aligned_alloc;
    memalign(align: usize, size: usize) -> *mut c_void = mi_memalign;
    valloc(size: usize) -> *mut c_void = mi_valloc;
    pvalloc(size: usize) -> *mut c_void = mi_pvalloc;
    usable_size(ptr: *mut c_void) -> usize = mi_malloc_usable_size;
    reallocarray(ptr: *mut c_void, count: usize, size: usize) -> *mut c_void = mi_reallocarray;
    version_number() -> c_int = mi_version;
    collect(force: bool) -> () = mi_collect;
}

static mut VERSION: [u8; 64] = [0; 64];

pub fn version() -> *const c_char {
    // version_number() is the library's own number (217 for 2.1.7), so a
    // wrong crate-to-version mapping in the catalog shows up here.
    unsafe {
        let buf = &mut *core::ptr::addr_of_mut!(VERSION);
        generic::format_version(buf, b"mimalloc", version_number() as u32);
        buf.as_ptr() as *const c_char
    }
}

pub unsafe fn release() -> *const c_char {
    collect(true);
    c"mi_collect".as_ptr()
}
