//! Following a process tree: as a subreaper, the orphaned grandchildren are reaped too,
//! and the main process's status is reported. (Its own test binary: `wait_tree` reaps
//! every child of the process.)

// The children are reaped by `wait_tree` (waitpid(-1)), not through `Child::wait`.
#![allow(clippy::zombie_processes)]

use reader::tree::{become_subreaper, descendants, wait_tree, Exit};
use std::process::Command;

#[test]
fn the_whole_tree_is_reaped_and_the_main_status_kept() {
    become_subreaper().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("orphan-done");
    // The main process exits 5 at once; its child, orphaned, ends 0.3 s later.
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!("(sleep 0.3; echo > {}) & exit 5", mark.display()))
        .spawn()
        .unwrap();
    let end = wait_tree(child.id(), |_| {}).unwrap();
    assert_eq!(end.main, Exit::Code(5));
    assert!(end.reaped >= 2, "{end:?}");
    assert!(mark.exists(), "returned before the orphan ended");
    assert!(descendants(std::process::id()).is_empty());

    let child = Command::new("sh")
        .args(["-c", "kill -KILL $$"])
        .spawn()
        .unwrap();
    let end = wait_tree(child.id(), |_| {}).unwrap();
    assert_eq!(end.main, Exit::Signal(libc::SIGKILL));
    assert_eq!(end.main.shell_status(), 137);

    // Live descendants are listed, grandchildren included.
    let mut child = Command::new("sh")
        .args(["-c", "sleep 30 & sleep 30; wait"])
        .spawn()
        .unwrap();
    let mut found = Vec::new();
    for _ in 0..500 {
        found = descendants(std::process::id());
        if found.len() >= 3 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(found.contains(&child.id()), "{found:?}");
    assert_eq!(found.len(), 3, "sh and its two sleeps: {found:?}");
    reader::tree::signal_all(&found, libc::SIGKILL);
    child.wait().unwrap();
    let end = wait_tree(child.id(), |_| {});
    // The main process was already reaped by `child.wait()`: only the orphans remain.
    assert!(end.is_err());
    assert!(descendants(std::process::id()).is_empty());
}
