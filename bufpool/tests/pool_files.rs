//! Opening files that are not valid pools: every case is a clear error naming the file,
//! never a panic and never SIGBUS (the header is checked with `pread` before mapping).

mod pool_helpers;

use bufpool::{layout, Pool, PoolConfig, PoolError};
use pool_helpers::{refused, small, valid};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

fn patch(path: &Path, at: u64, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(bytes).unwrap();
}

#[test]
fn a_valid_pool_opens_and_its_header_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let p = valid(dir.path(), "ok");
    let pool = Pool::open(&p).unwrap();
    assert_eq!(pool.info().magic, layout::POOL_MAGIC);
    // Four entry sub-buffers and a metadata area of two after them.
    assert_eq!(pool.entry_subbufs(), 4);
    assert_eq!(pool.meta_area(), 4..6);
    assert_eq!(pool.n_subbufs(), 6);
    assert_eq!(pool.info().file_size, std::fs::metadata(&p).unwrap().len());
    assert!(pool.info().calib.ticks_per_ns() > 0.0);
    assert_eq!(pool.slots().census(), [6, 0, 0, 0, 0]);
}

#[test]
fn truncated_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = valid(dir.path(), "cut");
    let full = std::fs::metadata(&p).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(full - 4096)
        .unwrap();
    refused(&p, &format!("file is {} bytes", full - 4096));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(100)
        .unwrap();
    refused(&p, "smaller than the 4096-byte header");
    std::fs::write(&p, b"").unwrap();
    refused(&p, "file is 0 bytes");
    // Too long is as wrong as too short.
    let q = valid(dir.path(), "long");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&q)
        .unwrap()
        .set_len(full + 1)
        .unwrap();
    refused(&q, "needs");
}

#[test]
fn wrong_magic_and_version_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = valid(dir.path(), "magic");
    patch(&p, 0, b"NOTAPOOL");
    refused(&p, "bad magic");
    patch(&p, 0, &[0; 8]);
    refused(&p, "still being created");
    let q = valid(dir.path(), "version");
    patch(&q, 8, &(layout::FORMAT_VERSION + 1).to_le_bytes());
    refused(&q, "format version 2");
    // Text that happens to be long enough.
    let t = dir.path().join("text");
    std::fs::write(&t, "hello\n".repeat(2000)).unwrap();
    refused(&t, "bad magic");
}

#[test]
fn wrong_geometry_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = valid(dir.path(), "n0");
    patch(&p, 16, &0u32.to_le_bytes());
    refused(&p, "0 sub-buffers");
    let p = valid(dir.path(), "odd");
    patch(&p, 20, &12345u32.to_le_bytes());
    refused(&p, "sub-buffer size 12345");
    let p = valid(dir.path(), "more");
    // A valid geometry that the file is too small for (8 sub-buffers instead of 4):
    // mapping it would SIGBUS on the last ones.
    patch(&p, 16, &8u32.to_le_bytes());
    refused(&p, "header offsets disagree");
    let p = valid(dir.path(), "moved");
    patch(&p, 32, &(1u64 << 40).to_le_bytes());
    refused(&p, "header offsets disagree");
    let p = valid(dir.path(), "size");
    let len = std::fs::metadata(&p).unwrap().len();
    patch(&p, 40, &(len + 8192).to_le_bytes());
    refused(&p, "header offsets disagree");
    // A metadata area (offset 192) that takes every sub-buffer, or more than allowed.
    let p = valid(dir.path(), "all-meta");
    patch(&p, 192, &6u32.to_le_bytes());
    refused(&p, "metadata area of 6 of 6");
    let p = valid(dir.path(), "big-meta");
    patch(&p, 16, &30u32.to_le_bytes());
    patch(&p, 192, &17u32.to_le_bytes());
    refused(&p, "metadata area of 17 of 30");
}

#[test]
fn special_files_are_refused_by_their_kind() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    refused(&fifo, "a FIFO, not a pool file");
    refused(
        Path::new("/dev/zero"),
        "a character device, not a pool file",
    );
}

#[test]
fn a_pool_made_before_the_metadata_area_still_opens() {
    // The field was reserved and zero: such a pool has six entry sub-buffers and no
    // metadata area (its writers fall back to the pending store alone).
    let dir = tempfile::tempdir().unwrap();
    let p = valid(dir.path(), "old");
    patch(&p, 192, &0u32.to_le_bytes());
    let pool = Pool::open(&p).unwrap();
    assert_eq!((pool.entry_subbufs(), pool.meta_area().len()), (6, 0));
}

#[test]
fn unopenable_paths_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let e = refused(&missing, "open read-write");
    assert!(matches!(e, PoolError::Io { .. }));
    refused(dir.path(), "open read-write");
    // Creation where nothing can be created.
    for p in [
        Path::new("/proc/culprit-pool"),
        &dir.path().join("no/such/dir/pool"),
    ] {
        let e = match Pool::create(p, &small()) {
            Ok(_) => panic!("created {}", p.display()),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains(&p.display().to_string()) && e.contains("create"),
            "{e}"
        );
    }
    // An existing file is not replaced unless asked.
    let p = valid(dir.path(), "exists");
    let e = Pool::create(&p, &small()).err().unwrap().to_string();
    assert!(e.contains("exists"), "{e}");
    let over = PoolConfig {
        overwrite: true,
        ..small()
    };
    Pool::create(&p, &over).unwrap();
}

#[test]
fn read_only_files_are_refused_with_their_name() {
    let dir = tempfile::tempdir().unwrap();
    let p = valid(dir.path(), "ro");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        refused(&p, "Permission denied");
    } else {
        // root ignores file modes; a sysfs attribute without a store method is
        // read-only even for root.
        let sys = Path::new("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
        if sys.exists() {
            refused(sys, "Permission denied");
        } else {
            eprintln!(
                "running as root without {}: read-only case not testable here",
                sys.display()
            );
        }
    }
}

#[test]
fn bad_geometry_is_refused_at_creation() {
    let dir = tempfile::tempdir().unwrap();
    for (n, size, why) in [
        (0, 8192, "0 sub-buffers"),
        (2_000_000, 8192, "must be 1 to 1048576"),
        (4, 4096, "sub-buffer size 4096"),
        (4, 10_000, "sub-buffer size 10000"),
    ] {
        let cfg = PoolConfig {
            n_subbufs: n,
            subbuf_size: size,
            ..small()
        };
        let e = Pool::create(dir.path().join("g"), &cfg)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(why), "{e}");
        assert!(!dir.path().join("g").exists(), "nothing is created");
    }
}

/// Child half of `creation_beyond_the_space_available_fails_cleanly`: runs under a small
/// file-size limit (set by the parent), so the pool's blocks cannot all be allocated.
#[test]
#[ignore = "run by creation_beyond_the_space_available_fails_cleanly in a child process"]
fn create_under_a_file_size_limit() {
    let Some(dir) = std::env::var_os("BUFPOOL_TEST_FSIZE_DIR") else {
        eprintln!("not run by its parent test: nothing to do");
        return;
    };
    let p = Path::new(&dir).join("pool");
    let e = match Pool::create(&p, &small()) {
        Ok(_) => panic!("created a pool larger than the file-size limit"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains(&p.display().to_string()), "{e}");
    assert!(e.contains("resize") || e.contains("allocate"), "{e}");
    assert!(!p.exists(), "the half-made file is removed");
    println!("REFUSED: {e}");
}

#[test]
fn creation_beyond_the_space_available_fails_cleanly() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let mut c = std::process::Command::new(std::env::current_exe().unwrap());
    c.args([
        "create_under_a_file_size_limit",
        "--exact",
        "--ignored",
        "--nocapture",
    ])
    .env("BUFPOOL_TEST_FSIZE_DIR", dir.path());
    // SAFETY: only async-signal-safe calls (signal, setrlimit) between fork and exec.
    unsafe {
        c.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: 16384,
                rlim_max: 16384,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = c.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("REFUSED"), "the child ran the check: {text}");
}
