//! Names of C functions come from each file as it is now. Every ELF file is read once per
//! process (`culprit watch` names units at every poll), so a binary rebuilt under the same
//! path must be read again: the cache knows a file by its identity, not by its path.

use analyzer::symbolize::{CSym, ElfResolver};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use tests::compile_c;

/// The address `nm` gives for the function `name` of `exe` (a PIE: its lowest segment is at
/// 0, so this is also the address relative to the load base).
fn address_of(exe: &Path, name: &str) -> u64 {
    let out = Command::new("nm")
        .arg("--defined-only")
        .arg(exe)
        .output()
        .expect("run nm");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(2) == Some(name))
        .unwrap_or_else(|| panic!("{name} not in nm's output for {}:\n{text}", exe.display()));
    u64::from_str_radix(line.split_whitespace().next().unwrap(), 16).expect("nm address")
}

fn program(function: &str) -> String {
    format!(
        "__attribute__((noinline)) int {function}(int x) {{ return x * 3 + 1; }}\n\
         int main(int argc, char **argv) {{ (void)argv; return {function}(argc) == 4 ? 0 : 1; }}\n"
    )
}

#[test]
fn a_binary_replaced_under_its_path_is_named_from_its_new_symbols() {
    let first = compile_c("prog", &program("first_name"), &["-fPIE", "-pie"]);
    let path = first.path.clone();
    let module: Arc<str> = Arc::from(path.to_str().expect("a UTF-8 temporary path"));
    let at = |name: &str| CSym {
        module: Some(module.clone()),
        rel: address_of(&path, name),
    };

    let named = ElfResolver.resolve(&at("first_name"));
    assert!(named.starts_with("first_name"), "{named}");
    // Read again from the cache: the same answer.
    assert_eq!(ElfResolver.resolve(&at("first_name")), named);

    // The program rebuilt and installed under the same path (a new file renamed over it, as
    // `install` and linkers do), its function renamed.
    let second = compile_c("prog", &program("second_name"), &["-fPIE", "-pie"]);
    let staged = path.with_extension("new");
    std::fs::copy(&second.path, &staged).expect("stage the rebuilt program");
    std::fs::rename(&staged, &path).expect("install it over the first");
    let renamed = ElfResolver.resolve(&at("second_name"));
    assert!(renamed.starts_with("second_name"), "{renamed}");
}
