//! What the generated operator functions (ops.rs) call: the operator looked
//! up once, and parameter values formatted on the stack.
use std::fmt::{self, Write};
use std::sync::OnceLock;

use crate::{Error, ErrorKind, NDArray, Op, Result};

/// An operator found by name on first use, then kept.
pub struct OpCell {
    name: &'static str,
    op: OnceLock<Op>,
}

impl OpCell {
    pub const fn new(name: &'static str) -> OpCell {
        OpCell {
            name,
            op: OnceLock::new(),
        }
    }

    pub fn get(&self) -> Result<Op> {
        if let Some(op) = self.op.get() {
            return Ok(*op);
        }
        let op = Op::find(self.name)?;
        Ok(*self.op.get_or_init(|| op))
    }
}

/// A parameter's value as the registry parses it, formatted without
/// allocating when short (numbers always are).
pub enum ParamText {
    Inline { len: u8, bytes: [u8; 38] },
    Heap(String),
}

impl ParamText {
    pub fn as_str(&self) -> &str {
        match self {
            // SAFETY: only whole UTF-8 strings are written (see write_str).
            ParamText::Inline { len, bytes } => unsafe {
                std::str::from_utf8_unchecked(&bytes[..*len as usize])
            },
            ParamText::Heap(text) => text,
        }
    }

    fn format(args: fmt::Arguments<'_>) -> ParamText {
        let mut text = ParamText::Inline {
            len: 0,
            bytes: [0; 38],
        };
        text.write_fmt(args)
            .expect("formatting a parameter cannot fail");
        text
    }
}

impl Write for ParamText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        match self {
            ParamText::Inline { len, bytes } => {
                let at = *len as usize;
                if at + s.len() <= bytes.len() {
                    bytes[at..at + s.len()].copy_from_slice(s.as_bytes());
                    *len += s.len() as u8;
                } else {
                    let mut text = String::with_capacity(at + s.len());
                    text.push_str(unsafe { std::str::from_utf8_unchecked(&bytes[..at]) });
                    text.push_str(s);
                    *self = ParamText::Heap(text);
                }
            }
            ParamText::Heap(text) => text.push_str(s),
        }
        Ok(())
    }
}

impl From<i64> for ParamText {
    /// By hand: the formatting machinery costs more than the call's own
    /// marshalling, and numbers are most parameters.
    fn from(v: i64) -> ParamText {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut rest = v.unsigned_abs();
        loop {
            at -= 1;
            digits[at] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        let mut bytes = [0u8; 38];
        let sign = usize::from(v < 0);
        bytes[0] = b'-';
        let len = digits.len() - at;
        bytes[sign..sign + len].copy_from_slice(&digits[at..]);
        ParamText::Inline {
            len: (sign + len) as u8,
            bytes,
        }
    }
}
impl From<f64> for ParamText {
    fn from(v: f64) -> ParamText {
        // Whole numbers, the usual case (1.0, 0.0, 255.0), format as
        // integers: several times faster than the shortest-float algorithm,
        // and the same value for the registry's parser.
        if v.fract() == 0.0 && v.abs() < 1e15 {
            return ParamText::from(v as i64);
        }
        ParamText::format(format_args!("{v}"))
    }
}
impl From<bool> for ParamText {
    fn from(v: bool) -> ParamText {
        ParamText::format(format_args!("{}", if v { "true" } else { "false" }))
    }
}
impl From<&str> for ParamText {
    fn from(v: &str) -> ParamText {
        ParamText::format(format_args!("{v}"))
    }
}
impl From<&String> for ParamText {
    fn from(v: &String) -> ParamText {
        ParamText::from(v.as_str())
    }
}
/// A tuple: "(2,)" for one value, "(2,3)" for more.
impl From<&[i64]> for ParamText {
    fn from(v: &[i64]) -> ParamText {
        let mut text = ParamText::format(format_args!("("));
        for (i, x) in v.iter().enumerate() {
            let _ = write!(text, "{}{x}", if i > 0 { "," } else { "" });
        }
        let _ = text.write_str(if v.len() == 1 { ",)" } else { ")" });
        text
    }
}
impl From<&Vec<i64>> for ParamText {
    fn from(v: &Vec<i64>) -> ParamText {
        ParamText::from(v.as_slice())
    }
}
impl From<&i64> for ParamText {
    fn from(v: &i64) -> ParamText {
        ParamText::from(*v)
    }
}
impl From<&f64> for ParamText {
    fn from(v: &f64) -> ParamText {
        ParamText::from(*v)
    }
}
impl From<&bool> for ParamText {
    fn from(v: &bool) -> ParamText {
        ParamText::from(*v)
    }
}

/// The inputs given: the required ones, then the optional ones up to the
/// first missing (inputs go by position, so none may follow a gap).
pub fn inputs<'a>(
    op: &str,
    required: &[&'a NDArray],
    optional: &[(&str, Option<&'a NDArray>)],
) -> Result<Vec<&'a NDArray>> {
    let mut out = required.to_vec();
    let mut gap = None;
    for (name, input) in optional {
        match (input, gap) {
            (Some(array), None) => out.push(*array),
            (Some(_), Some(missing)) => {
                return Err(Error {
                    kind: ErrorKind::Argument,
                    message: format!(
                        "{op}: input {name} given without {missing}, which comes before it"
                    ),
                })
            }
            (None, None) => gap = Some(*name),
            (None, Some(_)) => {}
        }
    }
    Ok(out)
}

/// The parameters given, as (name, text) pairs, on the stack for up to 16.
pub fn with_params<T>(
    given: &[Option<(&str, &ParamText)>],
    f: impl FnOnce(&[(&str, &str)]) -> Result<T>,
) -> Result<T> {
    let mut inline = [("", ""); 16];
    let mut n = 0;
    if given.len() <= inline.len() {
        for (name, text) in given.iter().flatten() {
            inline[n] = (name, text.as_str());
            n += 1;
        }
        f(&inline[..n])
    } else {
        let list: Vec<(&str, &str)> = given
            .iter()
            .flatten()
            .map(|(k, v)| (*k, v.as_str()))
            .collect();
        f(&list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_format_as_the_registry_parses_them() {
        assert_eq!(ParamText::from(-3i64).as_str(), "-3");
        assert_eq!(ParamText::from(0i64).as_str(), "0");
        assert_eq!(ParamText::from(i64::MIN).as_str(), i64::MIN.to_string());
        assert_eq!(ParamText::from(i64::MAX).as_str(), i64::MAX.to_string());
        assert_eq!(ParamText::from(0.5f64).as_str(), "0.5");
        assert_eq!(ParamText::from(-2.0f64).as_str(), "-2");
        assert_eq!(ParamText::from(1e300f64).as_str(), format!("{}", 1e300f64));
        assert_eq!(ParamText::from(f64::NAN).as_str(), "NaN");
        assert_eq!(ParamText::from(1e-5f64).as_str(), "0.00001");
        assert_eq!(ParamText::from(true).as_str(), "true");
        assert_eq!(ParamText::from(&[2i64][..]).as_str(), "(2,)");
        assert_eq!(ParamText::from(&[2i64, 3][..]).as_str(), "(2,3)");
        let long: Vec<i64> = (0..20).collect();
        let text = ParamText::from(long.as_slice());
        assert!(matches!(text, ParamText::Heap(_)));
        assert!(text.as_str().starts_with("(0,1,2,") && text.as_str().ends_with(",19)"));
    }
}
