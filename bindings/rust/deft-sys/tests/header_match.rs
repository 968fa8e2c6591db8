//! The declarations in src/lib.rs against the real C header: every function
//! of the header is declared, and a C file assigning each declared function
//! to a pointer of the declared type compiles (-Werror) against the header.
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// (name, C parameter types, C return type) of each `pub fn` in lib.rs.
fn declared() -> Vec<(String, Vec<String>, String)> {
    let src = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .unwrap();
    let mut out = Vec::new();
    // Declarations may span lines (rustfmt): take each from "pub fn" to ";".
    for decl in src.split("pub fn ").skip(1) {
        let decl = decl[..decl.find(';').unwrap()]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let open = decl.find('(').unwrap();
        let close = decl.rfind(')').unwrap();
        let name = decl[..open].to_string();
        let params = decl[open + 1..close]
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| c_type(p.split_once(": ").unwrap().1))
            .collect();
        let ret = c_type(decl[close + 1..].trim().trim_start_matches("->").trim());
        out.push((name, params, ret));
    }
    out
}

/// (name, value) of each `pub const` in lib.rs: checked against the header too.
fn constants() -> Vec<(String, String)> {
    let src = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .unwrap();
    src.lines()
        .filter_map(|line| line.trim().strip_prefix("pub const "))
        .filter_map(|decl| {
            let (name, rest) = decl.split_once(':')?;
            let value = rest.split_once('=')?.1.trim().trim_end_matches(';');
            Some((name.trim().to_string(), value.to_string()))
        })
        .collect()
}

#[test]
fn constants_are_found() {
    let names: Vec<_> = constants().into_iter().map(|c| c.0).collect();
    assert!(names.contains(&"DEFT_MAX_OUTPUTS".to_string()), "{names:?}");
}

fn c_type(rust: &str) -> String {
    let base = |t: &str| -> String {
        match t {
            "c_int" => "int".into(),
            "i64" => "int64_t".into(),
            "u64" => "uint64_t".into(),
            "usize" => "size_t".into(),
            "c_char" => "char".into(),
            "c_void" => "void".into(),
            other => other.into(), // handles and DLManagedTensor keep their names
        }
    };
    // Pointers nest from the outside in: "*mut *const c_char" is (const char *) *.
    let mut rest = rust.trim();
    let mut layers = Vec::new();
    loop {
        if let Some(r) = rest.strip_prefix("*mut ") {
            layers.push(false);
            rest = r;
        } else if let Some(r) = rest.strip_prefix("*const ") {
            layers.push(true);
            rest = r;
        } else {
            break;
        }
    }
    let mut text = base(rest);
    for (depth, is_const) in layers.iter().rev().enumerate() {
        text = if depth == 0 && *is_const {
            format!("const {text} *")
        } else if *is_const {
            format!("{text} const *")
        } else {
            format!("{text} *")
        };
    }
    text
}

fn header_functions() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let dir = repo().join("capi/include/deft");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        // lib_api.h is for extension libraries written in C, which deft-sys does not serve.
        if path.file_name().unwrap() == "lib_api.h" {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        for part in text.split("DEFT_API ").skip(1) {
            if let Some(open) = part.find('(') {
                let head = &part[..open];
                if let Some(name) = head.split_whitespace().last() {
                    let name = name.trim_start_matches('*');
                    if name.starts_with("Deft") {
                        names.insert(name.to_string());
                    }
                }
            }
        }
    }
    names
}

#[test]
fn every_header_function_is_declared() {
    let declared: BTreeSet<String> = declared().into_iter().map(|d| d.0).collect();
    let header = header_functions();
    let missing: Vec<_> = header.difference(&declared).collect();
    let extra: Vec<_> = declared.difference(&header).collect();
    assert!(
        missing.is_empty(),
        "in the header, not in deft-sys: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "in deft-sys, not in the header: {extra:?}"
    );
}

#[test]
fn declared_types_match_the_header() {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let c_file = out.join("deft_sys_check.c");
    let mut c = String::from("#include <deft/c_api.h>\n");
    for (i, (name, params, ret)) in declared().iter().enumerate() {
        let params = if params.is_empty() {
            "void".to_string()
        } else {
            params.join(", ")
        };
        c.push_str(&format!("{ret} (*const check{i})({params}) = {name};\n"));
    }
    // DLPack's structs, field by field, as Rust lays them out.
    use deft_sys::{DLManagedTensor, DLTensor};
    use std::mem::{offset_of, size_of};
    let layout = [
        ("sizeof(DLTensor)", size_of::<DLTensor>()),
        ("offsetof(DLTensor, device)", offset_of!(DLTensor, device)),
        ("offsetof(DLTensor, ndim)", offset_of!(DLTensor, ndim)),
        ("offsetof(DLTensor, dtype)", offset_of!(DLTensor, dtype)),
        ("offsetof(DLTensor, shape)", offset_of!(DLTensor, shape)),
        ("offsetof(DLTensor, strides)", offset_of!(DLTensor, strides)),
        (
            "offsetof(DLTensor, byte_offset)",
            offset_of!(DLTensor, byte_offset),
        ),
        ("sizeof(DLManagedTensor)", size_of::<DLManagedTensor>()),
        (
            "offsetof(DLManagedTensor, manager_ctx)",
            offset_of!(DLManagedTensor, manager_ctx),
        ),
        (
            "offsetof(DLManagedTensor, deleter)",
            offset_of!(DLManagedTensor, deleter),
        ),
    ];
    c.push_str("#include <stddef.h>\n");
    for (what, value) in layout {
        c.push_str(&format!("_Static_assert({what} == {value}, \"{what}\");\n"));
    }
    for (name, value) in constants() {
        c.push_str(&format!("_Static_assert({name} == {value}, \"{name}\");\n"));
    }
    std::fs::write(&c_file, c).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let result = Command::new(cc)
        .args(["-std=c11", "-Wall", "-Werror", "-c", "-o"])
        .arg(out.join("deft_sys_check.o"))
        .arg("-I")
        .arg(repo().join("capi/include"))
        .arg(&c_file)
        .output()
        .expect("a C compiler (cc) runs");
    assert!(
        result.status.success(),
        "declarations differ from the header:\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
}
