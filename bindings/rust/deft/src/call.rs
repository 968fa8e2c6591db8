//! An operator call's arguments in the form C takes them, kept on the stack
//! for the usual few inputs and short parameters: a call's cost is mostly
//! this marshalling, so it allocates nothing in the common case.
use std::os::raw::{c_char, c_int};
use std::ptr;

use crate::{Error, ErrorKind, NDArray, Result};
use deft_sys as sys;

/// Bytes of parameter text, and inputs or parameters, held on the stack.
const INLINE_TEXT: usize = 256;
const INLINE_ITEMS: usize = 8;

fn nul_error(text: &str) -> Error {
    Error {
        kind: ErrorKind::Argument,
        message: format!("{text:?} contains a NUL byte"),
    }
}

/// Calls `f` with `text` as a NUL-terminated C string.
pub(crate) fn with_c_str<T>(text: &str, f: impl FnOnce(*const c_char) -> Result<T>) -> Result<T> {
    if text.as_bytes().contains(&0) {
        return Err(nul_error(text));
    }
    let mut inline = [0u8; 64];
    let mut heap;
    let buffer: &mut [u8] = if text.len() < inline.len() {
        &mut inline
    } else {
        heap = vec![0u8; text.len() + 1];
        &mut heap
    };
    buffer[..text.len()].copy_from_slice(text.as_bytes());
    buffer[text.len()] = 0;
    f(buffer.as_ptr().cast())
}

/// Calls `f` with the parameters as C wants them: their count, and arrays of
/// pointers to the NUL-terminated keys and values.
pub(crate) fn with_c_params<T>(
    params: &[(&str, &str)],
    f: impl FnOnce(c_int, *const *const c_char, *const *const c_char) -> Result<T>,
) -> Result<T> {
    let need: usize = params.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    if need <= INLINE_TEXT && params.len() <= INLINE_ITEMS {
        let mut text = [0u8; INLINE_TEXT];
        let mut keys = [ptr::null(); INLINE_ITEMS];
        let mut vals = [ptr::null(); INLINE_ITEMS];
        fill(params, &mut text, &mut keys, &mut vals)?;
        f(params.len() as c_int, keys.as_ptr(), vals.as_ptr())
    } else {
        let mut text = vec![0u8; need];
        let mut keys = vec![ptr::null(); params.len()];
        let mut vals = vec![ptr::null(); params.len()];
        fill(params, &mut text, &mut keys, &mut vals)?;
        f(params.len() as c_int, keys.as_ptr(), vals.as_ptr())
    }
}

/// Copies each key and value into `text` with a NUL after it, then points
/// `keys` and `vals` at them (all text is written before any pointer is taken).
fn fill(
    params: &[(&str, &str)],
    text: &mut [u8],
    keys: &mut [*const c_char],
    vals: &mut [*const c_char],
) -> Result<()> {
    let mut at = 0;
    let mut offsets = [(0usize, 0usize); INLINE_ITEMS];
    let mut heap_offsets = Vec::new();
    for (i, (key, value)) in params.iter().enumerate() {
        let mut put = |s: &str| -> Result<usize> {
            if s.as_bytes().contains(&0) {
                return Err(nul_error(s));
            }
            let start = at;
            text[at..at + s.len()].copy_from_slice(s.as_bytes());
            text[at + s.len()] = 0;
            at += s.len() + 1;
            Ok(start)
        };
        let pair = (put(key)?, put(value)?);
        if i < INLINE_ITEMS {
            offsets[i] = pair;
        } else {
            heap_offsets.push(pair);
        }
    }
    let base = text.as_ptr();
    for (i, (key, value)) in offsets
        .iter()
        .chain(&heap_offsets)
        .take(params.len())
        .enumerate()
    {
        // SAFETY: each offset is inside `text`, which outlives the call.
        keys[i] = unsafe { base.add(*key) }.cast();
        vals[i] = unsafe { base.add(*value) }.cast();
    }
    Ok(())
}

/// Calls `f` with the inputs' handles as a C array.
pub(crate) fn with_handles<T>(
    inputs: &[&NDArray],
    f: impl FnOnce(c_int, *const sys::DeftNDArrayHandle) -> Result<T>,
) -> Result<T> {
    if inputs.len() <= INLINE_ITEMS {
        let mut handles = [ptr::null_mut(); INLINE_ITEMS];
        for (slot, input) in handles.iter_mut().zip(inputs) {
            *slot = input.as_raw();
        }
        f(inputs.len() as c_int, handles.as_ptr())
    } else {
        let handles: Vec<_> = inputs.iter().map(|a| a.as_raw()).collect();
        f(inputs.len() as c_int, handles.as_ptr())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn read(params: &[(&str, &str)]) -> Vec<(String, String)> {
        with_c_params(params, |n, keys, vals| {
            Ok((0..n as usize)
                .map(|i| unsafe {
                    (
                        CStr::from_ptr(*keys.add(i)).to_str().unwrap().to_string(),
                        CStr::from_ptr(*vals.add(i)).to_str().unwrap().to_string(),
                    )
                })
                .collect())
        })
        .unwrap()
    }

    #[test]
    fn params_cross_inline_and_on_the_heap() {
        let short = [("axis", "0"), ("keepdims", "true")];
        assert_eq!(
            read(&short),
            vec![
                ("axis".into(), "0".into()),
                ("keepdims".into(), "true".into())
            ]
        );
        // More items than fit inline, and more text.
        let keys: Vec<String> = (0..12).map(|i| format!("k{i}")).collect();
        let long_value = "x".repeat(300);
        let many: Vec<(&str, &str)> = keys
            .iter()
            .map(|k| (k.as_str(), long_value.as_str()))
            .collect();
        let back = read(&many);
        assert_eq!(back.len(), 12);
        assert_eq!(back[11], ("k11".to_string(), long_value.clone()));
        let err = with_c_params(&[("a\0", "1")], |_, _, _| Ok(()))
            .err()
            .unwrap();
        assert_eq!(err.kind, ErrorKind::Argument);
    }

    #[test]
    fn c_str_short_and_long() {
        let long = "y".repeat(100);
        for text in ["relu", long.as_str()] {
            let back = with_c_str(text, |p| {
                Ok(unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string())
            });
            assert_eq!(back.unwrap(), text);
        }
        assert!(with_c_str("a\0b", |_| Ok(())).is_err());
    }
}
