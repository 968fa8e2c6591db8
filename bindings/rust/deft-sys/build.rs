//! Records the folder libdeft is in, for the loader (src/loader.rs) to open
//! it there at run time, the way an rpath would. In order:
//!   1. DEFT_LIB_DIR, when set (ctest sets it to its build folder);
//!   2. pkg-config's deft.pc: `cmake --install` writes it under
//!      <prefix>/lib/pkgconfig, a CMake build under <build>/pkgconfig (point
//!      PKG_CONFIG_PATH at the folder unless pkg-config searches it already);
//!   3. the checkout's own build/ folder (these crates inside the checkout);
//!   4. none: libdeft.so.0 is then looked up by the system loader.
//!
//! Nothing is linked: a dependency's link flags never reach the binary of the
//! crate depending on it, so an rpath could not either.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn has_library(dir: &Path) -> bool {
    dir.join("libdeft.so").exists()
}

/// The folder of deft.pc's -L flag, when pkg-config knows deft.
fn from_pkg_config() -> Option<PathBuf> {
    let output = Command::new(env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into()))
        .args(["--libs-only-L", "deft"])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    text.split_whitespace()
        .filter_map(|flag| flag.strip_prefix("-L"))
        .map(PathBuf::from)
        .find(|dir| has_library(dir))
}

fn main() {
    for var in ["DEFT_LIB_DIR", "PKG_CONFIG_PATH", "PKG_CONFIG"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let in_tree = manifest.join("../../../build");
    let dir = match env::var("DEFT_LIB_DIR") {
        Ok(dir) => Some(PathBuf::from(dir)).filter(|d| has_library(d)),
        Err(_) => from_pkg_config().or_else(|| Some(in_tree).filter(|d| has_library(d))),
    };
    match dir {
        Some(dir) => {
            let dir = dir.canonicalize().unwrap_or(dir);
            println!("cargo:rustc-env=DEFT_SYS_LIBDIR={}", dir.display());
            println!(
                "cargo:rerun-if-changed={}",
                dir.join("libdeft.so").display()
            );
            println!("cargo:libdir={}", dir.display());
        }
        None => println!(
            "cargo:warning=deft-sys: libdeft not found (DEFT_LIB_DIR, pkg-config deft, \
             ../build); it will be looked up at run time as libdeft.so.0"
        ),
    }
    // The header folder, for the declaration check (tests/header_match.rs).
    let include = manifest.join("../../../capi/include");
    println!("cargo:include={}", include.display());
}
