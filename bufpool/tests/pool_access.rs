//! Who may use a pool file (issue 27): a pool is created with exactly the mode asked for,
//! whatever the umask, never through a planted link, and only a pool nobody else could
//! truncate is mapped. In a test binary of its own: it changes the process's umask and
//! the process-wide `--shared-writers` setting, which would race with tests that create
//! files in parallel.

mod pool_helpers;

use bufpool::{layout, Pool, PoolConfig};
use pool_helpers::{refused, small, valid};

/// Issue 27: a pool is created 0600 whatever the umask, never through a planted link,
/// and only a pool nobody else could truncate is mapped (SIGBUS in the traced program).
#[test]
fn pools_are_private_and_foreign_or_loose_ones_are_refused() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: umask has no memory effects; restored below.
    let old = unsafe { libc::umask(0) };
    let p = valid(dir.path(), "mine");
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
    Pool::open(&p).unwrap();
    for loose in [0o666, 0o620] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(loose)).unwrap();
        refused(&p, "writable by");
    }
    // --overwrite replaces a link planted at the name; it never writes through it.
    let target = dir.path().join("target");
    std::fs::write(&target, b"keep").unwrap();
    let link = dir.path().join("link.pool");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert!(
        Pool::create(&link, &small()).is_err(),
        "created through a link"
    );
    let over = PoolConfig {
        overwrite: true,
        ..small()
    };
    Pool::create(&link, &over).unwrap();
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    // Made writable by all on purpose (--shared-writers): accepted, as its header says.
    bufpool::access::set_shared_writers(true);
    let s = valid(dir.path(), "shared");
    bufpool::access::set_shared_writers(false);
    assert_eq!(std::fs::metadata(&s).unwrap().mode() & 0o777, 0o666);
    let opened = Pool::open(&s).unwrap();
    assert_eq!(
        opened.info().flags & layout::POOL_FLAG_SHARED_WRITERS,
        layout::POOL_FLAG_SHARED_WRITERS
    );
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let q = valid(dir.path(), "theirs");
        std::os::unix::fs::chown(&q, Some(65534), Some(65534)).unwrap();
        refused(&q, "owned by uid 65534");
    } else {
        eprintln!("pools_are_private_and_foreign_or_loose_ones_are_refused: SKIPPED another user's pool: not root");
    }
}
