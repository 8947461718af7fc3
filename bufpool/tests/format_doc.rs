//! `FORMAT.md` must describe the code: every library function id, kind and option tag
//! listed there must be the one the code uses.

use bufpool::format::{Kind, LibFn};

fn doc() -> String {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/FORMAT.md");
    std::fs::read_to_string(p).expect("bufpool/FORMAT.md is readable")
}

#[test]
fn format_md_lists_every_libfn() {
    let doc = doc();
    let mut listed = Vec::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() == 5 && cells[3].starts_with("`") && cells[2].starts_with('`') {
            if let Ok(id) = cells[1].parse::<u64>() {
                listed.push((id, cells[2].trim_matches('`').to_string()));
            }
        }
    }
    let code: Vec<(u64, String)> = LibFn::ALL
        .iter()
        .map(|f| (f.id(), f.name().to_string()))
        .collect();
    assert_eq!(listed, code, "FORMAT.md §1.3 disagrees with format::LibFn");
}

#[test]
fn format_md_lists_every_kind() {
    let doc = doc();
    for b in 0..=255u8 {
        let row = format!("| 0x{b:02x} | `");
        if let Some(k) = Kind::from_u8(b) {
            let line = doc
                .lines()
                .find(|l| l.starts_with(&row))
                .unwrap_or_else(|| panic!("kind 0x{b:02x} ({k:?}) missing from FORMAT.md"));
            assert!(
                line.contains(&format!("`{k:?}`")),
                "FORMAT.md names kind 0x{b:02x} differently from {k:?}: {line}"
            );
        } else {
            assert!(
                !doc.lines()
                    .any(|l| l.starts_with(&row) && l.contains("| 16")),
                "FORMAT.md lists 0x{b:02x}, which the code does not know"
            );
        }
    }
}
