//! What the registry says about an operator (DeftOpGetInfo, DeftOpGetInputs,
//! DeftOpGetParam): what `ops.rs` is generated from.
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::ptr;

use crate::{check, Op, Result};
use deft_sys as sys;

/// An operator of the registry.
#[derive(Clone, Debug, PartialEq)]
pub struct OpInfo {
    /// The name it was asked for.
    pub name: String,
    /// The operator's own name (differs when `name` is an alias).
    pub canonical: String,
    pub description: String,
    pub min_inputs: usize,
    /// The most inputs: more than `input_names.len()` means any number.
    pub max_inputs: usize,
    pub input_names: Vec<String>,
    pub params: Vec<ParamInfo>,
    /// Outputs made with the default parameters and a placeholder for each
    /// required one; None when that cannot be told. Some operators make a
    /// number that depends on their parameters (split's num_outputs).
    pub outputs: Option<usize>,
}

/// One parameter of an operator.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamInfo {
    pub name: String,
    /// "int", "float", "boolean", "tuple of int", "dtype", "device", "string"
    /// or "enum", with " or None" where None is allowed.
    pub kind: String,
    /// None when the parameter is required.
    pub default: Option<String>,
    pub doc: String,
    /// The words an enum takes.
    pub choices: Vec<String>,
}

unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

unsafe fn texts(count: c_int, p: *const *const c_char) -> Vec<String> {
    (0..count.max(0) as usize)
        .map(|i| text(*p.add(i)))
        .collect()
}

/// Every registered operator, in the registry's (alphabetical) order.
pub fn operators() -> Result<Vec<OpInfo>> {
    Op::list()?
        .iter()
        .map(|name| Op::find(name)?.info(name))
        .collect()
}

impl Op {
    /// What the registry says about this operator, found as `name`.
    pub fn info(&self, name: &str) -> Result<OpInfo> {
        let (mut canonical, mut doc) = (ptr::null(), ptr::null());
        check(unsafe { sys::DeftOpGetInfo(self.handle, &mut canonical, &mut doc) })?;
        let (mut min, mut max, mut num_names, mut names) = (0, 0, 0, ptr::null());
        check(unsafe {
            sys::DeftOpGetInputs(self.handle, &mut min, &mut max, &mut num_names, &mut names)
        })?;
        let mut num_params = 0;
        check(unsafe { sys::DeftOpGetNumParams(self.handle, &mut num_params) })?;
        let params = (0..num_params)
            .map(|i| self.param(i))
            .collect::<Result<Vec<_>>>()?;
        let mut info = OpInfo {
            name: name.to_string(),
            canonical: unsafe { text(canonical) },
            description: unsafe { text(doc) },
            min_inputs: min.max(0) as usize,
            max_inputs: max.max(0) as usize,
            input_names: unsafe { texts(num_names, names) },
            params,
            outputs: None,
        };
        info.outputs = self.count_outputs(&info.params);
        Ok(info)
    }

    fn param(&self, index: c_int) -> Result<ParamInfo> {
        let (mut name, mut kind, mut default, mut doc) =
            (ptr::null(), ptr::null(), ptr::null(), ptr::null());
        check(unsafe {
            sys::DeftOpGetParam(
                self.handle,
                index,
                &mut name,
                &mut kind,
                &mut default,
                &mut doc,
            )
        })?;
        let (mut count, mut words) = (0, ptr::null());
        check(unsafe { sys::DeftOpGetParamChoices(self.handle, index, &mut count, &mut words) })?;
        Ok(ParamInfo {
            name: unsafe { text(name) },
            kind: unsafe { text(kind) },
            default: (!default.is_null()).then(|| unsafe { text(default) }),
            doc: unsafe { text(doc) },
            choices: unsafe { texts(count, words) },
        })
    }

    /// Outputs of the operator's symbol, composed with variables for inputs,
    /// with a placeholder value for each required parameter.
    fn count_outputs(&self, params: &[ParamInfo]) -> Option<usize> {
        let mut given = Vec::new();
        for p in params.iter().filter(|p| p.default.is_none()) {
            let value = match p.kind.trim_end_matches(" or None") {
                "int" => "2",
                "float" => "1",
                "boolean" => "false",
                "tuple of int" => "(2,)",
                "dtype" => "float32",
                "device" => "cpu(0)",
                "string" => "",
                "enum" => p.choices.first()?.as_str(),
                _ => return None,
            };
            given.push((p.name.as_str(), value));
        }
        crate::call::with_c_params(&given, |n, keys, vals| {
            let mut sym = ptr::null_mut();
            let mut count = -1;
            let ok = unsafe {
                sys::DeftSymbolCreateAtomic(self.handle, n, keys, vals, &mut sym) == 0
                    && sys::DeftSymbolCompose(sym, ptr::null(), 0, ptr::null(), ptr::null()) == 0
                    && sys::DeftSymbolGetNumOutputs(sym, &mut count) == 0
            };
            unsafe { sys::DeftSymbolFree(sym) };
            Ok(if ok && count >= 0 {
                Some(count as usize)
            } else {
                None
            })
        })
        .ok()
        .flatten()
    }
}
