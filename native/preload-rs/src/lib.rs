//! allocmark's preload layer: exports the C allocation API of one allocator
//! built from its crates.io `-sys` crate, so that `LD_PRELOAD` can put it in
//! front of glibc.
//!
//! Exactly one `backend_*` feature is enabled per build (allocmark writes the
//! Cargo.toml). The layer is `no_std`, never allocates and never panics: every
//! exported function is a direct call into the allocator's own, prefixed C
//! function, or a few lines of argument checking where the allocator lacks
//! the function (see `generic`).
#![no_std]

use core::ffi::{c_char, c_int, c_void};

/// Declares an allocator's C functions and the backend functions that call
/// them: `name(args) -> ret = target;` per line.
macro_rules! forward {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty = $target:ident;)*) => {
        extern "C" {
            $(fn $target($($arg: $ty),*) -> $ret;)*
        }
        $(
            #[inline(always)]
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                $target($($arg),*)
            }
        )*
    };
}

/// memalign, valloc and pvalloc over the backend's `aligned_alloc`, with
/// glibc's rules (generic), for allocators without their own.
#[allow(unused_macros)]
macro_rules! over_aligned_alloc {
    () => {
        pub unsafe fn memalign(align: usize, size: usize) -> *mut c_void {
            aligned_alloc(crate::generic::memalign_alignment(align), size)
        }
        pub unsafe fn valloc(size: usize) -> *mut c_void {
            aligned_alloc(crate::generic::PAGE, size)
        }
        pub unsafe fn pvalloc(size: usize) -> *mut c_void {
            crate::generic::pvalloc(aligned_alloc, size)
        }
    };
}

#[allow(dead_code)]
mod generic;

#[cfg(feature = "backend_dlmalloc")]
#[path = "dlmalloc.rs"]
mod backend;
#[cfg(feature = "backend_hardened")]
#[path = "hardened.rs"]
mod backend;
#[cfg(feature = "backend_hoard")]
#[path = "hoard.rs"]
mod backend;
#[cfg(feature = "backend_isoalloc")]
#[path = "isoalloc.rs"]
mod backend;
#[cfg(feature = "backend_jemalloc")]
#[path = "jemalloc.rs"]
mod backend;
#[cfg(feature = "backend_mimalloc")]
#[path = "mimalloc.rs"]
mod backend;
#[cfg(feature = "backend_rpmalloc")]
#[path = "rpmalloc.rs"]
mod backend;
#[cfg(feature = "backend_scudo")]
#[path = "scudo.rs"]
mod backend;
#[cfg(feature = "backend_snmalloc")]
#[path = "snmalloc.rs"]
mod backend;
#[cfg(feature = "backend_tcmalloc")]
#[path = "tcmalloc.rs"]
mod backend;

// The sys crate is only linked if named; its static library then resolves
// the prefixed symbols declared in the backend module. A `source_only` crate
// is not built at all: build.rs compiles the allocator from its sources.
#[cfg(not(feature = "source_only"))]
#[allow(unused_imports)]
use sys as _;

// A sys crate that links std (rpmalloc-sys) brings std's panic handler;
// allocmark then enables `sys_std`. Nothing here calls std either way.
#[cfg(feature = "sys_std")]
extern crate std;

// Rust's prebuilt libcore refers to the unwinding personality routine even
// under panic = "abort", where nothing ever calls it.
#[cfg(not(feature = "sys_std"))]
#[no_mangle]
pub extern "C" fn rust_eh_personality() {}

#[cfg(not(feature = "sys_std"))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // Nothing here can panic; if it ever did, die without unwinding into C.
    unsafe { generic::abort() }
}

#[no_mangle]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    backend::malloc(size)
}

#[no_mangle]
pub unsafe extern "C" fn free(ptr: *mut c_void) {
    backend::free(ptr)
}

#[no_mangle]
pub unsafe extern "C" fn calloc(count: usize, size: usize) -> *mut c_void {
    backend::calloc(count, size)
}

#[no_mangle]
pub unsafe extern "C" fn realloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    backend::realloc(ptr, size)
}

#[no_mangle]
pub unsafe extern "C" fn reallocarray(ptr: *mut c_void, count: usize, size: usize) -> *mut c_void {
    backend::reallocarray(ptr, count, size)
}

#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    backend::posix_memalign(out, align, size)
}

#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    backend::aligned_alloc(align, size)
}

#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    backend::memalign(align, size)
}

#[no_mangle]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    backend::valloc(size)
}

#[no_mangle]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    backend::pvalloc(size)
}

#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(ptr: *mut c_void) -> usize {
    if ptr.is_null() {
        0
    } else {
        backend::usable_size(ptr)
    }
}

/// "FAMILY VERSION" as the allocator reports itself where it can (mimalloc's
/// `mi_version`), else as built (allocmark passes it in at build time).
#[no_mangle]
pub extern "C" fn am_allocator_version() -> *const c_char {
    backend::version()
}

/// Returns free memory to the OS where the allocator has a call for it;
/// the name of that call, or null if it has none.
#[no_mangle]
pub unsafe extern "C" fn am_allocator_release() -> *const c_char {
    backend::release()
}
