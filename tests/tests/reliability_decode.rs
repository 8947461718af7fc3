//! A record whose checksum is valid but whose entries are not (issue 27: a bit flipped
//! before the reader checksummed it, another user scribbling into the pool) costs only
//! itself, end to end: every command reads the rest of the trace with one warning naming
//! the chunk file and offset, `--strict` refuses it, and `culprit repair` reports it. The
//! trace is a real `culprit record`; the record is rewritten with `bufpool`'s own encoder,
//! so its CRC-32 matches the bad entry.

use bufpool::disk::{self, RECORD_FIXED_SIZE};
use bufpool::format::Decoder;
use bufpool::SubBufInfo;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tests::*;

const DEADLINE: Duration = Duration::from_secs(90);

fn culprit_run(args: &[&str]) -> RunOutput {
    run_with_deadline(Command::new(culprit()).args(args), DEADLINE)
}

fn warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("culprit: warning:"))
        .collect()
}

/// A client and a server over a socket pair: 200 requests, each answered (so that
/// `messages` and `demand` have something to match).
const PING: &str = r#"
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    int sv[2];
    char b[64];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 1;
    pid_t p = fork();
    if (p == 0) {
        close(sv[0]);
        while (read(sv[1], b, 16) == 16) write(sv[1], b, 32);
        _exit(0);
    }
    close(sv[1]);
    for (int i = 0; i < 200; i++) {
        write(sv[0], "request-request-", 16);
        if (read(sv[0], b, 32) <= 0) return 1;
    }
    close(sv[0]);
    waitpid(p, 0, 0);
    return 0;
}
"#;

fn record(out: &Path, prog: &Path) {
    culprit_run(&[
        "record",
        "--subbufs",
        "16",
        "--subbuf-size",
        "16K",
        "-o",
        out.to_str().unwrap(),
        "--",
        prog.to_str().unwrap(),
    ])
    .assert_success("culprit record");
}

/// One record of a chunk file: offset, sub-buffer header, piece offset, data.
type Rec = (u64, SubBufInfo, u32, Vec<u8>);

/// Every record of a chunk file.
pub fn records(path: &Path) -> Vec<Rec> {
    let b = std::fs::read(path).unwrap();
    let mut off = disk::CHUNK_HEADER_SIZE;
    let mut out = Vec::new();
    while off < b.len() {
        let left = (b.len() - off) as u64;
        let n = (left as usize).min(RECORD_FIXED_SIZE);
        let (h, info) = disk::parse_record_fixed(&b[off..off + n], off as u64, left).unwrap();
        let data =
            b[off + RECORD_FIXED_SIZE..off + RECORD_FIXED_SIZE + h.data_len as usize].to_vec();
        out.push((off as u64, info, h.piece, data.clone()));
        off += RECORD_FIXED_SIZE + data.len();
    }
    out
}

/// Rewrites the record at `offset` of `path` with `info` and `data` (same length), its
/// checksum recomputed by `bufpool::disk`.
pub fn rewrite(path: &Path, offset: u64, info: &SubBufInfo, piece: u32, data: &[u8]) {
    let mut rec = Vec::new();
    disk::encode_piece(info, piece, data, &mut rec);
    let mut b = std::fs::read(path).unwrap();
    let at = offset as usize;
    let old = RECORD_FIXED_SIZE + info.bytes_used as usize;
    assert_eq!(rec.len(), old, "same length");
    b[at..at + old].copy_from_slice(&rec);
    std::fs::write(path, &b).unwrap();
}

/// The chunk files of a trace directory.
fn chunks(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("chunks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// Makes the middle entry of the record with the most entries undecodable (type byte
/// 0x7c), checksum recomputed. Returns the chunk file's name and the entry's file offset.
fn break_an_entry(dir: &Path) -> (String, u64) {
    let mut best: Option<(PathBuf, Rec, Vec<usize>)> = None;
    for c in chunks(dir) {
        for rec in records(&c) {
            let starts: Vec<usize> = Decoder::new(&rec.3)
                .map(|e| e.unwrap().offset as usize)
                .collect();
            if best.as_ref().is_none_or(|b| b.2.len() < starts.len()) {
                best = Some((c.clone(), rec, starts));
            }
        }
    }
    let (path, (off, info, piece, mut data), starts) = best.unwrap();
    assert!(starts.len() > 4, "a record with entries");
    let at = starts[starts.len() / 2];
    data[at] = 0x7c;
    rewrite(&path, off, &info, piece, &data);
    let name = path.file_name().unwrap().to_str().unwrap().to_string();
    (name, off + RECORD_FIXED_SIZE as u64 + at as u64)
}

#[test]
fn an_undecodable_record_with_a_valid_checksum_costs_only_itself_in_every_command() {
    if libtrace_or_skip("an_undecodable_record_with_a_valid_checksum").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good");
    let bad = tmp.path().join("bad");
    let prog = compile_c("ping", PING, &[]);
    record(&good, &prog.path);
    record(&bad, &prog.path);
    let (g, d) = (good.to_str().unwrap(), bad.to_str().unwrap());
    let full = culprit_run(&["dump", "--json", d]);
    full.assert_success("dump before the damage");
    let (name, at) = break_an_entry(&bad);
    let mentions = |stderr: &str| {
        let w = warnings(stderr);
        w.len() == 1
            && w[0].contains(&name)
            && w[0].contains(&format!("from byte offset {at}"))
            && w[0].contains("unknown entry type 0x7c")
    };

    let dump = culprit_run(&["dump", "--json", d]);
    dump.assert_success("dump");
    assert!(mentions(&dump.stderr), "{}", dump.stderr);
    let (before, after) = (full.stdout.lines().count(), dump.stdout.lines().count());
    assert!(
        after < before && after > before / 2,
        "{after} of {before} entries"
    );

    let model = tmp.path().join("m.model");
    let m = model.to_str().unwrap();
    let learn = culprit_run(&["learn", d, g, "-o", m]);
    learn.assert_success("learn from the damaged and a good trace");
    assert!(mentions(&learn.stderr), "{}", learn.stderr);

    let rank = culprit_run(&["rank", "--json", "--model", m, d]);
    rank.assert_success("rank");
    assert!(mentions(&rank.stderr), "{}", rank.stderr);
    let ranked: serde_json::Value = serde_json::from_str(&rank.stdout).unwrap();
    let id = ranked[0]["id"].as_str().expect("a ranked unit").to_string();
    let show = culprit_run(&["show", "--model", m, "--unit", &id, d]);
    show.assert_success("show");
    assert!(mentions(&show.stderr), "{}", show.stderr);

    let out = tmp.path().join("out");
    let o = out.to_str().unwrap();
    for args in [
        vec!["messages", d],
        vec!["export", "--format", "chrome", "--output", o, d],
        vec!["timeline", "--output", o, d],
        vec!["demand", d],
    ] {
        let r = culprit_run(&args);
        r.assert_success(&format!("{args:?}"));
        assert!(mentions(&r.stderr), "{args:?}: {}", r.stderr);
    }

    for args in [
        vec!["dump", "--strict", d],
        vec!["learn", "--strict", d, "-o", "/dev/null"],
        vec!["rank", "--strict", "--model", m, d],
    ] {
        let r = culprit_run(&args);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains(&name) && r.stderr.contains("unknown entry type 0x7c"),
            "{args:?}: {}",
            r.stderr
        );
    }

    // `repair` cannot mend it (nothing of the record can be rebuilt) but says so, and
    // leaves every byte in place.
    let before = std::fs::read(bad.join("chunks").join(&name)).unwrap();
    let r = culprit_run(&["repair", d]);
    r.assert_success("repair");
    assert!(
        r.stderr.lines().any(|l| l.contains("left as it is")
            && l.contains(&name)
            && l.contains("unknown entry type 0x7c")),
        "{}",
        r.stderr
    );
    assert_eq!(
        std::fs::read(bad.join("chunks").join(&name)).unwrap(),
        before
    );
}
