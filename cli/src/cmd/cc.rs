//! `culprit cc`: a C compiler wrapper that adds the instrumentation flags, for make
//! builds (`make CC="culprit cc"`). Every argument goes to the real compiler unchanged;
//! the real compiler replaces this process (`exec`), so its exit status — or the signal
//! that killed it — is what `make` sees.

use anyhow::Context;
use std::ffi::{OsStr, OsString};
use std::process::ExitCode;

/// Names the real compiler (may hold a command with arguments, e.g. `ccache gcc`).
pub const REAL_CC_ENV: &str = "CULPRIT_REAL_CC";

/// Set in the real compiler's environment: a `culprit cc` started under it means
/// `$CULPRIT_REAL_CC` leads back to `culprit cc`, which would loop forever.
const ACTIVE_ENV: &str = "CULPRIT_CC_ACTIVE";

/// Arguments of `culprit cc`.
#[derive(clap::Args)]
#[command(disable_help_flag = true, disable_version_flag = true)]
pub struct Args {
    /// Compiler arguments, passed through unchanged after the added flags
    /// (-finstrument-functions, -g, -fno-omit-frame-pointer; each only if not given).
    /// The real compiler is $CULPRIT_REAL_CC, else cc.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        num_args = 0..,
        value_name = "CC_ARGS"
    )]
    pub args: Vec<OsString>,
}

/// Arguments that only ask the compiler about itself: passed through with nothing added,
/// so configure scripts see exactly what the real compiler says.
fn is_query(a: &OsStr) -> bool {
    let a = a.as_encoded_bytes();
    matches!(
        a,
        b"--version" | b"-v" | b"--help" | b"-dumpversion" | b"-dumpfullversion" | b"-dumpmachine"
    ) || a.starts_with(b"-print-")
        || a.starts_with(b"--print-")
}

/// The flags `culprit cc` adds in front of `args`.
pub fn added_flags(args: &[OsString]) -> Vec<&'static str> {
    if args.is_empty() || args.iter().any(|a| is_query(a)) {
        return Vec::new();
    }
    let has = |p: &dyn Fn(&[u8]) -> bool| args.iter().any(|a| p(a.as_encoded_bytes()));
    let mut f = Vec::new();
    if !has(&|a| a == b"-finstrument-functions" || a == b"-fno-instrument-functions") {
        f.push("-finstrument-functions");
    }
    if !has(&|a| a.starts_with(b"-g")) {
        f.push("-g");
    }
    if !has(&|a| a == b"-fomit-frame-pointer" || a == b"-fno-omit-frame-pointer") {
        f.push("-fno-omit-frame-pointer");
    }
    f
}

/// The real compiler command: `$CULPRIT_REAL_CC` split on whitespace, else `cc`.
pub fn real_cc() -> anyhow::Result<Vec<OsString>> {
    match std::env::var_os(REAL_CC_ENV) {
        Some(v) if !v.is_empty() => {
            let s = v
                .to_str()
                .with_context(|| format!("{REAL_CC_ENV} is not valid UTF-8"))?;
            let words: Vec<OsString> = s.split_whitespace().map(OsString::from).collect();
            anyhow::ensure!(!words.is_empty(), "{REAL_CC_ENV} names no command");
            Ok(words)
        }
        _ => Ok(vec![OsString::from("cc")]),
    }
}

/// Where `prog` resolves, as `execvp` would find it (a path, or the first match in `PATH`).
fn resolve(prog: &OsStr) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let p = std::path::Path::new(prog);
    if prog.as_encoded_bytes().contains(&b'/') {
        return std::fs::canonicalize(p).ok();
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(p))
        .find(|c| {
            std::fs::metadata(c).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .and_then(|c| std::fs::canonicalize(c).ok())
}

/// True if `prog` is this very `culprit` executable (same file).
fn is_culprit(prog: &OsStr) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Some(target), Ok(me)) = (resolve(prog), std::env::current_exe()) else {
        return false;
    };
    match (std::fs::metadata(&target), std::fs::metadata(&me)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Runs `culprit cc`: execs the real compiler; returns only if that fails.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    use std::os::unix::process::CommandExt;
    anyhow::ensure!(
        std::env::var_os(ACTIVE_ENV).is_none(),
        "{REAL_CC_ENV} runs `culprit cc` again; point it at the real compiler"
    );
    let cc = real_cc()?;
    anyhow::ensure!(
        !is_culprit(&cc[0]),
        "{REAL_CC_ENV}={:?} names culprit itself, which runs `culprit cc` again: point it \
         at the real compiler (e.g. gcc)",
        cc[0]
    );
    let mut cmd = std::process::Command::new(&cc[0]);
    cmd.args(&cc[1..])
        .args(added_flags(&args.args))
        .args(&args.args)
        .env(ACTIVE_ENV, "1");
    let err = cmd.exec();
    Err(err).with_context(|| format!("cannot run the compiler {:?}", cc[0]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn adds_only_missing_flags() {
        assert_eq!(
            added_flags(&v(&["-c", "a.c", "-o", "a.o"])),
            ["-finstrument-functions", "-g", "-fno-omit-frame-pointer"]
        );
        assert_eq!(
            added_flags(&v(&["-O2", "-g3", "-fomit-frame-pointer", "a.c"])),
            ["-finstrument-functions"]
        );
        assert!(added_flags(&v(&[
            "-fno-instrument-functions",
            "-g0",
            "-fno-omit-frame-pointer"
        ]))
        .is_empty());
        assert!(added_flags(&v(&["--version"])).is_empty());
        assert!(added_flags(&v(&["-print-prog-name=ld"])).is_empty());
        assert!(added_flags(&[]).is_empty());
    }

    #[test]
    fn every_argument_reaches_clap_unchanged() {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(subcommand)]
            c: C,
        }
        #[derive(clap::Subcommand)]
        enum C {
            Cc(Args),
        }
        let argv = [
            "x", "cc", "-c", "-h", "--help", "-V", "-o", "a b.o", "--", "a.c",
        ];
        let T { c: C::Cc(a) } = T::try_parse_from(argv).expect("parses");
        assert_eq!(a.args, v(&argv[2..]));
    }
}
