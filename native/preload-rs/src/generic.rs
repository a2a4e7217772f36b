//! What the C API promises beyond plain allocation, for allocators whose own
//! API lacks a function: overflow checks, alignment rules and errno, as glibc
//! documents them. Built on the backend's malloc, realloc and aligned calls.

use core::ffi::{c_int, c_void};
use core::ptr::null_mut;

pub const EINVAL: c_int = 22;
pub const ENOMEM: c_int = 12;
// x86-64 and aarch64 Linux with 4 KiB pages, the only targets allocmark
// builds for; asking sysconf would cost a libc call per valloc.
pub const PAGE: usize = 4096;

extern "C" {
    fn __errno_location() -> *mut c_int;
    #[link_name = "abort"]
    fn c_abort() -> !;
}

pub unsafe fn abort() -> ! {
    c_abort()
}

pub unsafe fn set_errno(value: c_int) {
    *__errno_location() = value;
}

pub fn valid_posix_alignment(align: usize) -> bool {
    align.is_power_of_two() && align % core::mem::size_of::<*mut c_void>() == 0
}

pub unsafe fn reallocarray(
    realloc: unsafe fn(*mut c_void, usize) -> *mut c_void,
    ptr: *mut c_void,
    count: usize,
    size: usize,
) -> *mut c_void {
    match count.checked_mul(size) {
        Some(total) => realloc(ptr, total),
        None => {
            set_errno(ENOMEM);
            null_mut()
        }
    }
}

pub unsafe fn posix_memalign(
    aligned: unsafe fn(usize, usize) -> *mut c_void,
    out: *mut *mut c_void,
    align: usize,
    size: usize,
) -> c_int {
    if !valid_posix_alignment(align) {
        return EINVAL;
    }
    let p = aligned(align, size);
    if p.is_null() {
        return ENOMEM;
    }
    *out = p;
    0
}

/// glibc's memalign rounds an alignment that is not a power of two up.
pub fn memalign_alignment(align: usize) -> usize {
    if align <= core::mem::size_of::<usize>() * 2 {
        core::mem::size_of::<usize>() * 2
    } else {
        align
            .checked_next_power_of_two()
            .unwrap_or(1 << (usize::BITS - 1))
    }
}

/// pvalloc: page-aligned, the size rounded up to whole pages (at least one).
pub unsafe fn pvalloc(aligned: unsafe fn(usize, usize) -> *mut c_void, size: usize) -> *mut c_void {
    match size.checked_add(PAGE - 1) {
        Some(padded) => aligned(
            PAGE,
            if padded < PAGE {
                PAGE
            } else {
                padded & !(PAGE - 1)
            },
        ),
        None => {
            set_errno(ENOMEM);
            null_mut()
        }
    }
}

pub unsafe fn checked_calloc(
    malloc_zeroed: unsafe fn(usize) -> *mut c_void,
    count: usize,
    size: usize,
) -> *mut c_void {
    match count.checked_mul(size) {
        Some(total) => malloc_zeroed(total),
        None => {
            set_errno(ENOMEM);
            null_mut()
        }
    }
}

/// Splits mimalloc's version number: 217 is 2.1.7 (until 2.2), 20302 is
/// 2.3.2 (major, two digits minor, two digits patch, since).
pub fn split_version(number: u32) -> [u32; 3] {
    if number >= 10000 {
        [number / 10000, (number / 100) % 100, number % 100]
    } else {
        [number / 100, (number / 10) % 10, number % 10]
    }
}

/// Writes "NAME X.Y.Z" and a NUL into `buf`, which is large enough for any
/// name used here and three u32 parts.
pub fn format_version(buf: &mut [u8; 64], name: &[u8], number: u32) {
    let mut n = 0;
    let mut put = |b: u8| {
        buf[n] = b;
        n += 1;
    };
    for &b in name {
        put(b);
    }
    for (i, part) in split_version(number).iter().enumerate() {
        put(if i == 0 { b' ' } else { b'.' });
        let mut digits = [0u8; 10];
        let (mut len, mut v) = (0, *part);
        loop {
            digits[len] = b'0' + (v % 10) as u8;
            len += 1;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        for d in digits[..len].iter().rev() {
            put(*d);
        }
    }
    put(0);
}
