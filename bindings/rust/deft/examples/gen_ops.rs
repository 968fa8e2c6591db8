//! Writes `src/ops.rs`: a typed function for every operator of deft's
//! registry (`deft::operators()`), documented from the registry's
//! descriptions. The file is committed, so a crate using deft builds without
//! this step; `tests/ops_current.rs` runs `generate` and fails when the
//! committed file differs from what the library's registry gives now.
//!
//!     cargo run --offline --example gen_ops > deft/src/ops.rs
use deft::{OpInfo, ParamInfo};
use std::collections::BTreeMap;
use std::fmt::Write;

const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
];

/// snake_case of an operator or parameter name ("FullyConnected" ->
/// "fully_connected"; a leading "_" becomes "internal_").
fn snake(name: &str) -> String {
    let (prefix, rest) = match name.strip_prefix('_') {
        Some(rest) => ("internal_", rest.trim_start_matches('_')),
        None => ("", name),
    };
    let mut out = String::from(prefix);
    let chars: Vec<char> = rest.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev_lower =
                i > 0 && (chars[i - 1].is_ascii_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            let prev_upper = i > 0 && chars[i - 1].is_ascii_uppercase();
            if prev_lower || (prev_upper && next_lower) {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else if c.is_ascii_alphanumeric() {
            out.push(c);
        } else {
            out.push('_');
        }
    }
    if out.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

fn ident(name: &str) -> String {
    let s = snake(name);
    if KEYWORDS.contains(&s.as_str()) {
        format!("r#{s}")
    } else {
        s
    }
}

fn camel(snake_name: &str) -> String {
    snake_name
        .split('_')
        .filter(|w| !w.is_empty())
        .map(|w| w[..1].to_ascii_uppercase() + &w[1..])
        .collect()
}

/// The Rust types of a parameter: as an argument, and as an Opts field.
fn rust_types(p: &ParamInfo) -> (&'static str, &'static str) {
    match p.kind.trim_end_matches(" or None") {
        "int" => ("i64", "i64"),
        "float" => ("f64", "f64"),
        "boolean" => ("bool", "bool"),
        "tuple of int" => ("&[i64]", "Vec<i64>"),
        _ => ("&str", "String"), // dtype, device, string, enum: the words the registry takes
    }
}

fn param_doc(p: &ParamInfo) -> String {
    let mut doc = format!("`{}` ({}): {}", p.name, p.kind, p.doc.trim_end_matches('.'));
    if !p.choices.is_empty() {
        let _ = write!(
            doc,
            "; one of {}",
            p.choices
                .iter()
                .map(|c| format!("\"{c}\""))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    match &p.default {
        Some(d) => {
            let _ = write!(doc, ". Default {}.", if d.is_empty() { "\"\"" } else { d });
        }
        None => doc.push_str(". Required."),
    }
    doc
}

fn generate_op(out: &mut String, op: &OpInfo, fn_name: &str) {
    let variadic = op.max_inputs > op.input_names.len();
    let named = op.max_inputs.min(op.input_names.len());
    let required_in: Vec<&String> = op.input_names[..op.min_inputs.min(named)].iter().collect();
    let optional_in: Vec<&String> = op.input_names[op.min_inputs.min(named)..named]
        .iter()
        .collect();
    let required: Vec<&ParamInfo> = op.params.iter().filter(|p| p.default.is_none()).collect();
    let optional: Vec<&ParamInfo> = op.params.iter().filter(|p| p.default.is_some()).collect();
    let multi = match op.outputs {
        Some(n) => n > 1,
        None => !variadic,
    };
    let opts_name = format!("{}Opts", camel(fn_name.trim_start_matches("r#")));
    let mut taken: Vec<String> = vec!["opts".into(), "inputs".into(), "op".into()];
    let mut arg = |name: &str| {
        let mut id = ident(name);
        while taken.contains(&id) {
            id.push_str("_param");
        }
        taken.push(id.clone());
        id
    };

    if !optional.is_empty() {
        let _ = writeln!(
            out,
            "/// The optional parameters of [`{fn_name}`]; `None` keeps the operator's default."
        );
        let _ = writeln!(
            out,
            "#[derive(Clone, Debug, Default, PartialEq)]\npub struct {opts_name} {{"
        );
        for p in &optional {
            let _ = writeln!(out, "    /// {}", param_doc(p));
            let _ = writeln!(
                out,
                "    pub {}: Option<{}>,",
                ident(&p.name),
                rust_types(p).1
            );
        }
        out.push_str("}\n\n");
    }
    let description = op.description.trim();
    let _ = writeln!(
        out,
        "/// {}",
        if description.is_empty() {
            "(no description)"
        } else {
            description
        }
    );
    out.push_str("///\n");
    let inputs_doc = if variadic {
        format!("any number ({} at least)", op.min_inputs)
    } else if op.input_names.is_empty() {
        "none".into()
    } else {
        op.input_names[..named]
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let alias = if op.canonical != op.name {
        format!(" (an alias of `{}`)", op.canonical)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "/// Operator `{}`{alias}. Inputs: {inputs_doc}.",
        op.name
    );
    for p in &required {
        let _ = writeln!(out, "/// - {}", param_doc(p));
    }
    let _ = writeln!(
        out,
        "///\n/// {}",
        if multi {
            "Returns every output."
        } else {
            "Returns the first output ([`Op::invoke`] returns all)."
        }
    );

    let mut args = Vec::new();
    let mut input_ids = Vec::new();
    let mut optional_ids = Vec::new();
    if variadic {
        args.push("inputs: &[&NDArray]".to_string());
    } else {
        for n in &required_in {
            let id = arg(n);
            args.push(format!("{id}: &NDArray"));
            input_ids.push(id);
        }
        for n in &optional_in {
            let id = arg(n);
            args.push(format!("{id}: Option<&NDArray>"));
            optional_ids.push((n.to_string(), id));
        }
    }
    let mut param_ids = Vec::new();
    for p in &required {
        let id = arg(&p.name);
        args.push(format!("{id}: {}", rust_types(p).0));
        param_ids.push((p.name.clone(), id));
    }
    if !optional.is_empty() {
        args.push(format!("opts: &{opts_name}"));
    }
    let ret = if multi { "Vec<NDArray>" } else { "NDArray" };
    let _ = writeln!(
        out,
        "pub fn {fn_name}({}) -> Result<{ret}> {{",
        args.join(", ")
    );
    let _ = writeln!(out, "    static OP: OpCell = OpCell::new({:?});", op.name);
    let inputs_expr = if variadic {
        "inputs".to_string()
    } else if optional_ids.is_empty() {
        format!("&[{}]", input_ids.join(", "))
    } else {
        let _ = writeln!(
            out,
            "    let given = inputs({:?}, &[{}], &[{}])?;",
            op.name,
            input_ids.join(", "),
            optional_ids
                .iter()
                .map(|(n, id)| format!("({n:?}, {id})"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        "&given".to_string()
    };
    let mut given = Vec::new();
    for (name, id) in &param_ids {
        let _ = writeln!(out, "    let {id} = ParamText::from({id});");
        given.push(format!("Some(({name:?}, &{id}))"));
    }
    for p in &optional {
        let id = ident(&p.name);
        let _ = writeln!(
            out,
            "    let opt_{0} = opts.{1}.as_ref().map(ParamText::from);",
            id.trim_start_matches("r#"),
            id
        );
        given.push(format!(
            "opt_{}.as_ref().map(|t| ({:?}, t))",
            id.trim_start_matches("r#"),
            p.name
        ));
    }
    let call = if multi { "invoke" } else { "invoke_one" };
    if given.is_empty() {
        let _ = writeln!(out, "    OP.get()?.{call}({inputs_expr}, &[])");
    } else {
        let _ = writeln!(
            out,
            "    with_params(&[{}], |params| OP.get()?.{call}({inputs_expr}, params))",
            given.join(", ")
        );
    }
    out.push_str("}\n\n");
}

/// The text of ops.rs for these operators.
pub fn generate(ops: &[OpInfo]) -> String {
    let mut out = String::from(
        "// Generated by examples/gen_ops.rs from deft's operator registry: do not edit.\n\
         // Regenerate: cargo run --offline --example gen_ops > deft/src/ops.rs\n\
         // (tests/ops_current.rs fails when this file is out of date).\n\
         //! A typed function for every operator of the registry: `ops::relu(&x)`,\n\
         //! `ops::split(&x, 3, &SplitOpts { axis: Some(0), ..Default::default() })`.\n\
         //! Required parameters are arguments; optional ones are fields of the\n\
         //! operator's `...Opts` struct. Names are snake_case, and operators\n\
         //! whose name starts with `_` are `internal_...`.\n\
         #![allow(clippy::too_many_arguments, clippy::doc_lazy_continuation, unused_variables)]\n\
         use crate::op_support::{inputs, with_params, OpCell, ParamText};\n\
         #[allow(unused_imports)]\n\
         use crate::{NDArray, Op, Result};\n\n",
    );
    // One function per name; an alias whose name gives the same function
    // name as another operator's is left out (e.g. "Flatten" and "flatten").
    let mut names: BTreeMap<String, &OpInfo> = BTreeMap::new();
    for op in ops {
        let id = ident(&op.name);
        match names.get(&id) {
            Some(existing) if existing.name == existing.canonical => continue,
            Some(_) if op.name != op.canonical => continue,
            _ => {
                names.insert(id, op);
            }
        }
    }
    for (id, op) in &names {
        generate_op(&mut out, op, id);
    }
    out
}

#[allow(dead_code)]
fn main() {
    let ops = deft::operators().expect("the registry lists its operators");
    print!("{}", generate(&ops));
}
