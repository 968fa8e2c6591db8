//! Links libdeft: from DEFT_LIB_DIR when set (ctest sets it to the build
//! folder), else from the repository's `build/` folder, else the system's.
use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=DEFT_LIB_DIR");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let dir = env::var("DEFT_LIB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| manifest.join("../../../build"));
    if dir.join("libdeft.so").exists() {
        let dir = dir.canonicalize().unwrap_or(dir);
        println!("cargo:rustc-link-search=native={}", dir.display());
        // Tests and examples find the library where it was built; crates
        // using this one read the folder as DEP_DEFT_LIBDIR.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
        println!("cargo:libdir={}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=deft");
    // The header folder, for the declaration check (tests/header_match.rs).
    let include = manifest.join("../../../capi/include");
    println!("cargo:include={}", include.display());
}
