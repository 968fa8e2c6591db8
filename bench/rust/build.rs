//! Compiles the C reference loop (bench/plus_scalar_loop.c) with the system's cc and links it
//! with libdeft: the same library deft-sys opens (dlopen of an already
//! loaded file returns it), so both loops call one copy of deft.
use std::env;
use std::path::PathBuf;
use std::process::Command;

fn run(command: &mut Command) {
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(status.success(), "{command:?} failed");
}

fn main() {
    println!("cargo:rerun-if-changed=../plus_scalar_loop.c");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let libdir = env::var("DEP_DEFT_LIBDIR").expect("deft-sys found no libdeft (see its build.rs)");
    let include = env::var("DEP_DEFT_INCLUDE").unwrap();
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    run(Command::new(cc)
        .args([
            "-std=c11",
            "-O2",
            "-Wall",
            "-Werror",
            "-fPIC",
            "-c",
            "../plus_scalar_loop.c",
            "-I",
            &include,
            "-o",
        ])
        .arg(out.join("c_loop.o")));
    run(Command::new("ar")
        .arg("rcs")
        .arg(out.join("libc_loop.a"))
        .arg(out.join("c_loop.o")));
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=c_loop");
    println!("cargo:rustc-link-search=native={libdir}");
    println!("cargo:rustc-link-lib=dylib=deft");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{libdir}");
}
