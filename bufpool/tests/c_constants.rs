//! The C encoders agree with the format's Rust definitions: every entry kind, entry size,
//! address width and code-record kind that `gcc-hooks/c/hooks.c`,
//! `python-hook/src/native.c` and `tracer-preload/include/culprit.h` spell out is checked
//! against `bufpool::format` (a C constant this test does not know fails it too, so a new
//! one gets its Rust counterpart named here).

use bufpool::format::{CodeKind, Kind, CALL_ENTRY, LIB_ENTRY_FIXED, RETURN_ENTRY};
use std::path::PathBuf;

fn read(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A C integer literal: `0x10u`, `20u`, `48`, `UINT64_C(1)`-free forms only.
fn c_int(s: &str) -> Option<u64> {
    let s = s.trim().trim_end_matches(['u', 'U', 'l', 'L']);
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// The Rust value of a C constant of the encoders, by its name; `None` for a name this test
/// does not know.
fn rust_value(name: &str) -> Option<u64> {
    let kind = |k: Kind| Some(k as u64);
    match name {
        "KIND_FN_ENTER" => kind(Kind::FnEnter),
        "KIND_FN_EXIT" => kind(Kind::FnExit),
        "KIND_LOST" => kind(Kind::Lost),
        "K_PYCALL" => kind(Kind::PyCall),
        "K_PYRETURN" => kind(Kind::PyReturn),
        "K_PYEXC" => kind(Kind::PyExc),
        "K_PYCCALL" => kind(Kind::PyCCall),
        "K_PYCRETURN" => kind(Kind::PyCReturn),
        "ENTER_SIZE" => Some(CALL_ENTRY as u64),
        "EXIT_SIZE" => Some(RETURN_ENTRY as u64),
        // A lost marker: head and count.
        "LOST_SIZE" => Some(bufpool::format::encode_lost(0, 0).as_bytes().len() as u64),
        "LIB_ENTRY_FIXED" => Some(LIB_ENTRY_FIXED as u64),
        "CK_CODE" => Some(CodeKind::PyCode as u64),
        "CK_BUILTIN" => Some(CodeKind::PyBuiltin as u64),
        "CK_EXCTYPE" => Some(CodeKind::PyExcType as u64),
        _ => None,
    }
}

/// `(name, value)` of the format constants a C file defines: `#define KIND_… 0x01u`,
/// `#define …_SIZE 20u`, and `K_… = 0x03` / `CK_… = 0` enumerators.
fn c_constants(src: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for line in src.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("#define ") {
            let mut it = rest.split_whitespace();
            let (Some(name), Some(value)) = (it.next(), it.next()) else {
                continue;
            };
            let format_name = name.starts_with("KIND_") || name.ends_with("_SIZE");
            if format_name {
                let v = c_int(value).unwrap_or_else(|| panic!("{name}: value {value:?}"));
                out.push((name.to_string(), v));
            }
        } else {
            // Enumerators, possibly several on a line: `enum { CK_CODE = 0, CK_BUILTIN = 1 };`
            for part in l.split([',', '{', '}', ';']) {
                let Some((name, value)) = part.split_once('=') else {
                    continue;
                };
                let name = name.trim();
                if name.starts_with("K_") || name.starts_with("CK_") {
                    if let Some(v) = c_int(value) {
                        out.push((name.to_string(), v));
                    }
                }
            }
        }
    }
    out
}

fn check_file(rel: &str, at_least: &[&str]) {
    let found = c_constants(&read(rel));
    for (name, v) in &found {
        match rust_value(name) {
            Some(want) => assert_eq!(
                *v, want,
                "{rel}: {name} is {v:#x}, the format says {want:#x}"
            ),
            None => panic!("{rel}: format constant {name} has no Rust counterpart in this test"),
        }
    }
    for name in at_least {
        assert!(
            found.iter().any(|(n, _)| n == name),
            "{rel}: {name} not found (renamed? name its Rust counterpart here)"
        );
    }
}

#[test]
fn the_gcc_hooks_write_the_formats_kinds_and_sizes() {
    check_file(
        "gcc-hooks/c/hooks.c",
        &[
            "KIND_FN_ENTER",
            "KIND_FN_EXIT",
            "KIND_LOST",
            "ENTER_SIZE",
            "EXIT_SIZE",
            "LOST_SIZE",
        ],
    );
    // The 48-bit address fields.
    let src = read("gcc-hooks/c/hooks.c");
    assert!(
        src.contains("#define ADDR_MASK ((UINT64_C(1) << 48) - 1)"),
        "gcc-hooks/c/hooks.c: ADDR_MASK is not the format's 48-bit mask"
    );
    assert_eq!(bufpool::format::ADDR_MASK, (1 << 48) - 1);
}

#[test]
fn the_python_shim_writes_the_formats_kinds() {
    check_file(
        "python-hook/src/native.c",
        &[
            "K_PYCALL",
            "K_PYRETURN",
            "K_PYEXC",
            "K_PYCCALL",
            "K_PYCRETURN",
        ],
    );
}

/// `culprit.h` lists the entry kinds and code-record kinds the C side may write, by value
/// and name: each must be the format's.
#[test]
fn the_c_abi_header_lists_the_formats_kinds() {
    let src = read("tracer-preload/include/culprit.h");
    let kinds = [
        Kind::FnEnter,
        Kind::FnExit,
        Kind::PyCall,
        Kind::PyReturn,
        Kind::PyExc,
        Kind::PyCCall,
        Kind::PyCReturn,
    ];
    for k in kinds {
        let want = format!("{:#04x} {:?}", k as u8, k);
        assert!(src.contains(&want), "culprit.h does not list `{want}`");
    }
    let codes = [CodeKind::PyCode, CodeKind::PyBuiltin, CodeKind::PyExcType];
    for c in codes {
        let want = format!("{} {:?}", c as u8, c);
        assert!(src.contains(&want), "culprit.h does not list `{want}`");
    }
    // Every `0x.. Name` pair it lists is a kind of the format, by that name.
    let words: Vec<&str> = src.split_whitespace().collect();
    for w in words.windows(2) {
        let Some(hex) = w[0].strip_prefix("0x") else {
            continue;
        };
        let Ok(v) = u8::from_str_radix(hex, 16) else {
            continue;
        };
        if w[1].starts_with(|c: char| c.is_ascii_uppercase()) {
            let k = Kind::from_u8(v).unwrap_or_else(|| panic!("culprit.h lists {:#04x}", v));
            assert_eq!(format!("{k:?}"), w[1], "culprit.h: {v:#04x} is {k:?}");
        }
    }
}

#[test]
fn the_constant_reader_reads_what_the_c_files_write() {
    let src = "#define KIND_FN_ENTER 0x01u\n#define ENTER_SIZE 20u\nenum { CK_CODE = 0, CK_BUILTIN = 1 };\n    K_PYCALL = 0x03,\n#define F_DEPTH 1u\n";
    let got = c_constants(src);
    let want: Vec<(String, u64)> = [
        ("KIND_FN_ENTER", 1),
        ("ENTER_SIZE", 20),
        ("CK_CODE", 0),
        ("CK_BUILTIN", 1),
        ("K_PYCALL", 3),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_string(), v))
    .collect();
    assert_eq!(got, want);
}
