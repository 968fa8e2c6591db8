//! Finds libdeft at run time, so that a program using these crates runs
//! without LD_LIBRARY_PATH and without flags of its own.
//!
//! Why not link: the rpath that lets a binary find libdeft is a linker flag,
//! and Cargo passes a dependency's linker flags (`cargo:rustc-link-arg`) to
//! that dependency's own tests only, never to the binary of the crate that
//! depends on it. So build.rs records the folder that pkg-config (or the
//! in-tree build) names, and the first call into deft opens the library
//! there with dlopen, the way a binary's rpath would have.
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_void};

extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *mut c_char;
}
const RTLD_NOW: c_int = 2;
const RTLD_GLOBAL: c_int = 0x100;

/// The folder build.rs found libdeft in, if any (compiled in).
pub const LIBDIR: Option<&str> = option_env!("DEFT_SYS_LIBDIR");

/// Where `open` looks, in order: the recorded folder (as an rpath would
/// point), then the loader's own search (LD_LIBRARY_PATH, ld.so.cache,
/// /usr/lib ...), which finds an install in a system library folder.
pub fn candidates() -> Vec<String> {
    let mut paths = Vec::new();
    if let Some(dir) = LIBDIR {
        paths.push(format!("{dir}/libdeft.so"));
    }
    paths.push("libdeft.so.0".to_string());
    paths
}

fn last_dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated message.
    let text = unsafe { dlerror() };
    if text.is_null() {
        "unknown dlopen error".into()
    } else {
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    }
}

/// Opens libdeft from the first candidate that loads.
pub fn open() -> Result<*mut c_void, String> {
    let mut tried = Vec::new();
    for path in candidates() {
        let c_path = CString::new(path.clone()).map_err(|e| e.to_string())?;
        // SAFETY: a NUL-terminated path; the handle is never closed, so the
        // functions resolved from it stay valid for the program's lifetime.
        let lib = unsafe { dlopen(c_path.as_ptr(), RTLD_NOW | RTLD_GLOBAL) };
        if !lib.is_null() {
            return Ok(lib);
        }
        tried.push(format!("  {path}: {}", last_dl_error()));
    }
    Err(format!(
        "deft-sys: cannot load libdeft; tried\n{}\n(build deft and set PKG_CONFIG_PATH to \
         <build>/pkgconfig or <prefix>/lib/pkgconfig before `cargo build`, or install it \
         in a folder the system loader searches)",
        tried.join("\n")
    ))
}

/// The address of `name` (NUL-terminated) in `lib`.
pub fn symbol(lib: *mut c_void, name: &str) -> Result<*mut c_void, String> {
    // SAFETY: lib came from dlopen; name ends with a NUL (the macro adds it).
    let address = unsafe { dlsym(lib, name.as_ptr() as *const c_char) };
    if address.is_null() {
        return Err(format!(
            "deft-sys: libdeft has no {} (a libdeft older than these bindings?)",
            name.trim_end_matches('\0')
        ));
    }
    Ok(address)
}

/// Declares libdeft's functions: a table of their addresses, resolved all at
/// once on first use, and one `pub unsafe fn` per function that calls
/// through it, with the signature of the C declaration.
macro_rules! deft_functions {
    ($(pub fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty;)*) => {
        struct Functions {
            $($name: unsafe extern "C" fn($($ty),*) -> $ret,)*
        }

        impl Functions {
            fn resolve(lib: *mut c_void) -> Result<Functions, String> {
                Ok(Functions {
                    $($name: {
                        let address = loader::symbol(lib, concat!(stringify!($name), "\0"))?;
                        // SAFETY: header_match.rs checks that each signature
                        // here is the C header's.
                        unsafe {
                            std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($ty),*) -> $ret>(
                                address,
                            )
                        }
                    },)*
                })
            }
        }

        /// The table, or why libdeft could not be loaded (kept: every
        /// later call reports the same).
        fn loaded() -> &'static Result<Functions, String> {
            static FUNCTIONS: std::sync::OnceLock<Result<Functions, String>> =
                std::sync::OnceLock::new();
            FUNCTIONS.get_or_init(|| loader::open().and_then(Functions::resolve))
        }

        fn functions() -> &'static Functions {
            match loaded() {
                Ok(functions) => functions,
                // No status can be returned from here: each function's is
                // libdeft's own. A missing library is a setup error, like a
                // loader failure at startup; the message says what was tried.
                Err(message) => panic!("{message}"),
            }
        }

        /// Loads libdeft now (every call does on first use); the error
        /// says which paths were tried.
        pub fn load() -> Result<(), String> {
            loaded().as_ref().map(|_| ()).map_err(Clone::clone)
        }

        $(
            #[inline]
            #[allow(clippy::missing_safety_doc, clippy::too_many_arguments)]
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                (functions().$name)($($arg),*)
            }
        )*
    };
}
