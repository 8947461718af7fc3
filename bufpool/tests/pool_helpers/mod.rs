//! What the pool-file tests share: a small geometry, a valid pool file, and the check
//! that a file is refused with an error naming it.

#![allow(dead_code)]

use bufpool::{Pool, PoolConfig, PoolError};
use std::path::{Path, PathBuf};

pub fn small() -> PoolConfig {
    PoolConfig {
        n_subbufs: 4,
        subbuf_size: 8192,
        calibration: std::time::Duration::from_millis(1),
        ..Default::default()
    }
}

/// A valid pool file at `dir/name`, closed again.
pub fn valid(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    drop(Pool::create(&p, &small()).unwrap());
    p
}

/// Opens `path`, expects an error, and checks that its text names the file and says `why`.
pub fn refused(path: &Path, why: &str) -> PoolError {
    let err = match Pool::open(path) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(e) => e,
    };
    let text = err.to_string();
    assert!(
        text.contains(&path.display().to_string()),
        "names the file: {text}"
    );
    assert!(text.contains(why), "says {why:?}: {text}");
    err
}
