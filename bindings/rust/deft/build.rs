//! Programs and tests of this crate find libdeft where deft-sys linked it.
fn main() {
    if let Ok(dir) = std::env::var("DEP_DEFT_LIBDIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
