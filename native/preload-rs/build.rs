//! Link settings of the preload library, and scudo's C wrappers.
use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=AM_ALLOCATOR_VERSION");
    println!("cargo:rerun-if-env-changed=AM_SYS_SOURCE");
    // A symbol missing from the allocator fails the build here, not every
    // process that preloads the library.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,defs");
    println!("cargo:rustc-link-lib=dylib=c");
    if env::var_os("CARGO_FEATURE_BACKEND_SCUDO").is_some() {
        build_scudo_wrappers();
    }
    if env::var_os("CARGO_FEATURE_BACKEND_HOARD").is_some() {
        build_hoard();
    }
    if env::var_os("CARGO_FEATURE_BACKEND_DLMALLOC").is_some() {
        build_dlmalloc();
    }
    // These are C++; their runtime support comes from these.
    if ["SCUDO", "SNMALLOC", "TCMALLOC", "HOARD"]
        .iter()
        .any(|b| env::var_os(format!("CARGO_FEATURE_BACKEND_{b}")).is_some())
    {
        println!("cargo:rustc-link-lib=dylib=stdc++");
        println!("cargo:rustc-link-lib=dylib=gcc_s");
    }
    println!("cargo:rustc-link-lib=dylib=pthread");
    // TCMalloc's sampler calls log2; linked only where used (--as-needed).
    println!("cargo:rustc-link-lib=dylib=m");
}

fn build_scudo_wrappers() {
    let source = env::var("AM_SYS_SOURCE")
        .expect("AM_SYS_SOURCE must name the scudo-sys source directory (allocmark sets it)");
    let scudo = PathBuf::from(source).join("scudo-standalone");
    println!("cargo:rerun-if-changed=cxx/am_scudo.cpp");
    cc::Build::new()
        .cpp(true)
        .pic(true)
        .file("cxx/am_scudo.cpp")
        .include(&scudo)
        .include(scudo.join("include"))
        .compile("am_scudo");
}

/// Hoard from the sources alloc_hoard bundles, compiled as its build script
/// would: that crate's own Rust code needs long-removed nightly features, so
/// allocmark takes only its sources (`source_only` in the catalog).
fn build_hoard() {
    let source = env::var("AM_SYS_SOURCE")
        .expect("AM_SYS_SOURCE must name the alloc_hoard source directory (allocmark sets it)");
    let src = PathBuf::from(source).join("Hoard").join("src");
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .pic(true)
        .opt_level(3)
        // alloc_hoard says c++11; gnu++11 is that plus GNU extensions, and spares a
        // std::map whose allocator's value_type differs (Heap Layers' debug heap)
        // the static_assert that libstdc++ 12 makes under strict ANSI only.
        .flag("-std=gnu++11")
        .flag("-fno-builtin-malloc")
        .define("NDEBUG", None)
        .define("_REENTRANT", Some("1"));
    for dir in [
        "",
        "include",
        "include/util",
        "include/hoard",
        "include/superblocks",
        "Heap-Layers",
    ] {
        build.include(src.join(dir));
    }
    for file in [
        "source/libhoard.cpp",
        "source/unixtls.cpp",
        "Heap-Layers/wrappers/gnuwrapper.cpp",
    ] {
        build.file(src.join(file));
    }
    // Old code, new compiler: its warnings are Hoard's, not this layer's.
    build.warnings(false).compile("am_hoard");
}

/// dlmalloc 2.8.6 from portable-dlmalloc's malloc.c, as an ordinary Linux build:
/// that crate's own build defines PORTABLE, which wants its user to supply memory
/// and locks through callbacks.
fn build_dlmalloc() {
    let source = env::var("AM_SYS_SOURCE")
        .expect("AM_SYS_SOURCE must name the portable-dlmalloc source directory");
    cc::Build::new()
        .pic(true)
        .opt_level(3)
        .file(PathBuf::from(source).join("malloc.c"))
        .define("USE_DL_PREFIX", None)
        .define("USE_LOCKS", Some("1"))
        .define("NDEBUG", None)
        // dlmalloc's own code; its warnings are not this layer's.
        .warnings(false)
        .compile("am_dlmalloc");
}
