//! The headless-browser helper itself: a page's scripts run before the DOM is read, and a
//! script error is reported, so that page tests relying on it can fail.

use std::fs;

#[test]
fn scripts_run_before_the_dom_is_read_and_errors_are_reported() {
    let Some(_) = tests::browser::chromium_or_skip("browser_helper") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.html");
    fs::write(
        &good,
        "<!doctype html><body><script>\
         const d = document.createElement('div'); d.className = 'made-by-script';\
         d.textContent = String(6 * 7); document.body.appendChild(d);\
         </script></body>",
    )
    .unwrap();
    let r = tests::browser::render(&good).unwrap();
    assert!(
        r.dom.contains("<div class=\"made-by-script\">42</div>"),
        "{}",
        r.dom
    );
    assert!(r.errors.is_empty(), "{:?}", r.errors);

    let bad = dir.path().join("bad.html");
    fs::write(
        &bad,
        "<!doctype html><body><script>undefinedFunction();</script></body>",
    )
    .unwrap();
    let r = tests::browser::render(&bad).unwrap();
    assert!(
        r.errors.iter().any(|e| e.contains("undefinedFunction")),
        "the uncaught error was not reported: {:?}",
        r.console
    );
}
