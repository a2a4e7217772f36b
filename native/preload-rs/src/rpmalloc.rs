//! rpmalloc (rpmalloc-sys, built without its `preload` feature, which leaks
//! the heap of every exited thread). A thread gets its heap on its first
//! call; a pthread key's destructor gives it back when the thread exits.

use crate::generic;
use core::ffi::{c_char, c_int, c_uint, c_void};
use core::sync::atomic::{AtomicU32, Ordering};

extern "C" {
    fn rpmalloc_initialize() -> c_int;
    fn rpmalloc_is_thread_initialized() -> c_int;
    fn rpmalloc_thread_initialize();
    // The crate declares it without the argument that rpmalloc.c takes.
    fn rpmalloc_thread_finalize(release_caches: c_int);
    fn rpmalloc(size: usize) -> *mut c_void;
    fn rpfree(ptr: *mut c_void);
    fn rpcalloc(count: usize, size: usize) -> *mut c_void;
    fn rprealloc(ptr: *mut c_void, size: usize) -> *mut c_void;
    fn rpaligned_alloc(align: usize, size: usize) -> *mut c_void;
    fn rpmemalign(align: usize, size: usize) -> *mut c_void;
    fn rpposix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int;
    fn rpmalloc_usable_size(ptr: *mut c_void) -> usize;
    fn pthread_key_create(
        key: *mut c_uint,
        dtor: Option<unsafe extern "C" fn(*mut c_void)>,
    ) -> c_int;
    fn pthread_setspecific(key: c_uint, value: *const c_void) -> c_int;
}

const NO_KEY: u32 = u32::MAX;
const CREATING: u32 = u32::MAX - 1;
static KEY: AtomicU32 = AtomicU32::new(NO_KEY);

unsafe extern "C" fn thread_exit(_: *mut c_void) {
    rpmalloc_thread_finalize(1);
}

#[cold]
unsafe fn init_thread() {
    // rpmalloc_initialize sets up the calling thread too; later threads
    // need their own heap.
    if rpmalloc_initialize() == 0 && rpmalloc_is_thread_initialized() == 0 {
        rpmalloc_thread_initialize();
    }
    let mut key = KEY.load(Ordering::Acquire);
    if key == NO_KEY
        && KEY
            .compare_exchange(NO_KEY, CREATING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        let mut created: c_uint = 0;
        // Keys below PTHREAD_KEY_2NDLEVEL_SIZE (32) never allocate; this is
        // among the first keys of the process.
        if pthread_key_create(&mut created, Some(thread_exit)) != 0 {
            generic::abort();
        }
        KEY.store(created, Ordering::Release);
    }
    while key == NO_KEY || key == CREATING {
        key = KEY.load(Ordering::Acquire);
    }
    // Non-null so that the destructor runs at thread exit.
    pthread_setspecific(key, 1 as *const c_void);
}

#[inline(always)]
unsafe fn ready() {
    if rpmalloc_is_thread_initialized() == 0 {
        init_thread();
    }
}

pub unsafe fn malloc(size: usize) -> *mut c_void {
    ready();
    rpmalloc(size)
}
pub unsafe fn free(ptr: *mut c_void) {
    ready();
    rpfree(ptr)
}
unsafe fn zeroed(total: usize) -> *mut c_void {
    rpcalloc(1, total)
}
pub unsafe fn calloc(count: usize, size: usize) -> *mut c_void {
    ready();
    // rpcalloc multiplies without an overflow check.
    generic::checked_calloc(zeroed, count, size)
}
pub unsafe fn realloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    ready();
    rprealloc(ptr, size)
}
pub unsafe fn reallocarray(ptr: *mut c_void, count: usize, size: usize) -> *mut c_void {
    generic::reallocarray(realloc, ptr, count, size)
}
pub unsafe fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    ready();
    if !generic::valid_posix_alignment(align) {
        return generic::EINVAL;
    }
    rpposix_memalign(out, align, size)
}
pub unsafe fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    ready();
    aligned(align, size)
}
unsafe fn aligned(align: usize, size: usize) -> *mut c_void {
    rpaligned_alloc(align, size)
}
pub unsafe fn memalign(align: usize, size: usize) -> *mut c_void {
    ready();
    rpmemalign(generic::memalign_alignment(align), size)
}
pub unsafe fn valloc(size: usize) -> *mut c_void {
    ready();
    rpaligned_alloc(generic::PAGE, size)
}
pub unsafe fn pvalloc(size: usize) -> *mut c_void {
    ready();
    generic::pvalloc(aligned, size)
}
pub unsafe fn usable_size(ptr: *mut c_void) -> usize {
    rpmalloc_usable_size(ptr)
}

pub fn version() -> *const c_char {
    concat!("rpmalloc ", env!("AM_ALLOCATOR_VERSION"), "\0").as_ptr() as *const c_char
}

pub unsafe fn release() -> *const c_char {
    core::ptr::null()
}
