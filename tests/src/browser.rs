//! Rendering Culprit's pages (reports, timeline, charts) in a real headless browser,
//! Debian's `chromium` (installed by `scripts/setup.d/chromium.sh`), so that tests check
//! the DOM the page's scripts built — not the HTML string the program wrote.
//!
//! ```no_run
//! let page = std::path::Path::new("report.html");
//! let r = tests::browser::render(page).expect("chromium");
//! assert!(r.errors.is_empty(), "script errors: {:?}", r.errors);
//! assert!(r.dom.contains("class=\"lane\""));
//! ```

use crate::run_with_deadline;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long one page may take to load, run its scripts and be dumped.
const DEADLINE: Duration = Duration::from_secs(60);

/// A page after its scripts ran.
#[derive(Debug)]
pub struct Rendered {
    /// The serialized DOM (`document.documentElement.outerHTML`) after load.
    pub dom: String,
    /// Every console message the page logged (`CONSOLE` lines of Chromium's log).
    pub console: Vec<String>,
    /// The console messages that report a script error (uncaught exceptions, `console.error`).
    pub errors: Vec<String>,
}

/// The browser, or `None` when it is not installed. Under CI (`CI=true`) a missing browser
/// is a failure, never a silent skip.
pub fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        })
    });
    if found.is_none() && std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "chromium is not installed: scripts/setup.sh installs it (scripts/setup.d/chromium.sh)"
        );
    }
    found
}

/// `chromium`, or `None` after printing why the calling test skips its page checks.
pub fn chromium_or_skip(test: &str) -> Option<PathBuf> {
    let c = chromium();
    if c.is_none() {
        crate::skip(
            test,
            "the page checks",
            "chromium not found (scripts/setup.sh installs it)",
        );
    }
    c
}

/// The flags every run uses: headless, no sandbox (root), no network chatter, a fresh profile.
fn base_command(browser: &Path, profile: &Path) -> Command {
    let mut c = Command::new(browser);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--allow-file-access-from-files",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=5000",
    ]);
    c.arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// Loads `page` (a local file), lets its scripts run, and returns the resulting DOM and
/// what the page logged. `None` when chromium is missing outside CI.
pub fn render(page: &Path) -> Option<Rendered> {
    let browser = chromium()?;
    let profile = tempfile::tempdir().expect("temp dir");
    let page = page
        .canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    let mut c = base_command(&browser, profile.path());
    c.arg("--dump-dom")
        .arg(format!("file://{}", page.display()));
    let out = run_with_deadline(&mut c, DEADLINE);
    assert!(
        !out.timed_out,
        "chromium did not finish {} within {DEADLINE:?}",
        page.display()
    );
    assert!(
        out.status.success() && !out.stdout.is_empty(),
        "chromium failed on {} ({}): {}",
        page.display(),
        out.status,
        out.stderr
    );
    let console: Vec<String> = out
        .stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_owned)
        .collect();
    let errors = console
        .iter()
        .filter(|l| l.contains("Uncaught") || l.contains(":ERROR:CONSOLE") || l.contains("Error:"))
        .cloned()
        .collect();
    Some(Rendered {
        dom: out.stdout,
        console,
        errors,
    })
}

/// Takes a `width`×`height` PNG screenshot of `page` into `png` (for the README, or to
/// look at). Returns false when chromium is missing outside CI.
pub fn screenshot(page: &Path, png: &Path, width: u32, height: u32) -> bool {
    let Some(browser) = chromium() else {
        return false;
    };
    let profile = tempfile::tempdir().expect("temp dir");
    let page = page
        .canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    let png = std::path::absolute(png).expect("absolute path");
    let mut c = base_command(&browser, profile.path());
    c.arg(format!("--screenshot={}", png.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg("--hide-scrollbars")
        .arg(format!("file://{}", page.display()));
    let out = run_with_deadline(&mut c, DEADLINE);
    assert!(
        !out.timed_out && png.is_file(),
        "chromium screenshot of {} failed: {}",
        page.display(),
        out.stderr
    );
    true
}
