//! Google's TCMalloc, the per-CPU one (libtcmalloc-sys, built with
//! `TCMALLOC_INTERNAL_METHODS_ONLY`): `TCMallocInternal` functions for the
//! whole C API. Unrelated to gperftools' tcmalloc beyond the name.
//!
//! Its per-CPU caches need to register rseq, which glibc 2.35+ already did
//! for the thread; the catalog's `:rseq` variant turns glibc's off
//! (GLIBC_TUNABLES) so TCMalloc can.

use core::ffi::{c_char, c_int, c_void};

forward! {
    malloc(size: usize) -> *mut c_void = TCMallocInternalMalloc;
    free(ptr: *mut c_void) -> () = TCMallocInternalFree;
    calloc(count: usize, size: usize) -> *mut c_void = TCMallocInternalCalloc;
    realloc(ptr: *mut c_void, size: usize) -> *mut c_void = TCMallocInternalRealloc;
    reallocarray(ptr: *mut c_void, count: usize, size: usize) -> *mut c_void = TCMallocInternalReallocArray;
    posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int = TCMallocInternalPosixMemalign;
    aligned_alloc(align: usize, size: usize) -> *mut c_void = TCMallocInternalAlignedAlloc;
    memalign(align: usize, size: usize) -> *mut c_void = TCMallocInternalMemalign;
    valloc(size: usize) -> *mut c_void = TCMallocInternalValloc;
    pvalloc(size: usize) -> *mut c_void = TCMallocInternalPvalloc;
    usable_size(ptr: *mut c_void) -> usize = TCMallocInternalMallocSize;
    release_bytes(bytes: usize) -> usize = MallocExtension_Internal_ReleaseMemoryToSystem;
}

pub fn version() -> *const c_char {
    concat!("google-tcmalloc ", env!("AM_ALLOCATOR_VERSION"), "\0").as_ptr() as *const c_char
}

pub unsafe fn release() -> *const c_char {
    // TCMalloc's malloc_trim asks for 0 bytes; this asks for all it can give.
    release_bytes(usize::MAX);
    c"MallocExtension::ReleaseMemoryToSystem".as_ptr()
}
