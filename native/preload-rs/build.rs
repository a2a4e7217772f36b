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
    // snmalloc and scudo are C++; their runtime support comes from these.
    if env::var_os("CARGO_FEATURE_BACKEND_SCUDO").is_some()
        || env::var_os("CARGO_FEATURE_BACKEND_SNMALLOC").is_some()
    {
        println!("cargo:rustc-link-lib=dylib=stdc++");
        println!("cargo:rustc-link-lib=dylib=gcc_s");
    }
    println!("cargo:rustc-link-lib=dylib=pthread");
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
