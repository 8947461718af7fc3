//! Compiles the C hooks (`c/hooks.c`) into a static library linked whole into every
//! binary that depends on this crate — in production, `libtrace.so`.

fn main() {
    println!("cargo:rerun-if-changed=c/hooks.c");
    println!("cargo:rerun-if-changed=../tracer-preload/include/culprit.h");
    cc::Build::new()
        .file("c/hooks.c")
        .include("../tracer-preload/include")
        .opt_level(2)
        .pic(true)
        // The hooks are leaf-like; a frame pointer costs a push and a leave per event.
        .flag("-fomit-frame-pointer")
        .flag_if_supported("-fno-semantic-interposition")
        .warnings(true)
        .extra_warnings(true)
        // +whole-archive: nothing in Rust calls the hooks, yet they must end up in the
        // cdylib.
        .link_lib_modifier("+whole-archive")
        .compile("culprit_gcc_hooks");
    // Test binaries of this crate export the hooks so that instrumented shared objects
    // they dlopen bind to them (instead of glibc's no-ops).
    for s in ["__cyg_profile_func_enter", "__cyg_profile_func_exit"] {
        println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic-symbol={s}");
    }
}
