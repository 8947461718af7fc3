//! Fuzz target: chunk files whose records all have valid checksums but whose entries,
//! headers, sequence numbers and lost counts are whatever the input says — what a bit
//! flipped before the reader checksummed a record, or another user scribbling into a
//! pool, leaves. Reading them back (`TraceDir` with its summary, every thread decoded as
//! the analyses decode it, `learn` over all of it) must never panic, and every record
//! that does not decode is only damage.
//!
//! Input: a flags byte (bit 0: the manifest says complete), then records, each a control
//! byte (bits 0-1: thread, 2: an 8-byte `lost_before` follows, 3: repeat the last seq,
//! 4: a live piece, 5: second process), a 2-byte length (mod 2048), the data.
#![no_main]

use bufpool::layout::SUBBUF_MAGIC;
use bufpool::SubBufInfo;
use libfuzzer_sys::fuzz_target;
use std::path::{Path, PathBuf};

fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("culprit-fuzz-chunk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn take<'a>(data: &mut &'a [u8], n: usize) -> &'a [u8] {
    let n = n.min(data.len());
    let (a, b) = data.split_at(n);
    *data = b;
    a
}

fn write_trace(dir: &Path, mut data: &[u8]) {
    let flags = take(&mut data, 1).first().copied().unwrap_or(0);
    let mut w = reader::ChunkWriter::create(dir, 1, 0, 1).unwrap();
    let mut seqs = [0u64; 8];
    let mut subbufs = 0u64;
    while !data.is_empty() {
        let k = take(&mut data, 1)[0];
        let t = (k & 3) as usize + 4 * ((k >> 5) & 1) as usize;
        let mut lost = 0u64;
        if k & 4 != 0 {
            let b = take(&mut data, 8);
            let mut w8 = [0u8; 8];
            w8[..b.len()].copy_from_slice(b);
            lost = u64::from_le_bytes(w8);
        }
        let l = take(&mut data, 2);
        let len = (l.first().copied().unwrap_or(0) as usize
            | (l.get(1).copied().unwrap_or(0) as usize) << 8)
            % 2048;
        let body = take(&mut data, len);
        if k & 8 == 0 || seqs[t] == 0 {
            seqs[t] += 1;
            subbufs += 1;
        }
        let head = |at: usize| {
            let mut w8 = [0u8; 8];
            let b = body.get(at..(at + 8).min(body.len())).unwrap_or(&[]);
            w8[..b.len()].copy_from_slice(b);
            (u64::from_le_bytes(w8) >> 8) & bufpool::format::TSC_MASK
        };
        let info = SubBufInfo {
            magic: SUBBUF_MAGIC,
            flags: if k & 16 != 0 { bufpool::layout::FLAG_LIVE } else { 0 },
            pid: 100 + (t / 4) as u32,
            tid: 1 + t as u32,
            seq: seqs[t] - 1,
            first_tsc: head(0),
            last_tsc: head(body.len().saturating_sub(16)),
            lost_before: lost,
            bytes_used: body.len() as u32,
            data_size: 2048,
            owner_start_ticks: 7,
        };
        w.append(&info, body).unwrap();
    }
    let m = reader::Manifest {
        format: reader::manifest::MANIFEST_FORMAT.into(),
        version: reader::manifest::MANIFEST_VERSION,
        host: "fuzz".into(),
        boot_id: String::new(),
        net_ns: String::new(),
        slurm: None,
        clock_snapshots: Vec::new(),
        command: Vec::new(),
        start_unix_ns: 1,
        end_unix_ns: Some(2),
        complete: flags & 1 != 0,
        calibration: reader::manifest::CalibrationJson {
            tsc0: 0,
            realtime0_ns: 1_000_000_000,
            monotonic0_ns: 0,
            tsc1: 3_000_000_000,
            realtime1_ns: 2_000_000_000,
            monotonic1_ns: 1_000_000_000,
        },
        pool: Default::default(),
        processes: Vec::new(),
        totals: reader::Totals {
            subbufs,
            ..Default::default()
        },
        snapshot_unix_ns: None,
    };
    // Written without `Manifest::write`'s fsync: a run is thousands of directories.
    std::fs::write(dir.join("manifest.json"), serde_json::to_vec(&m).unwrap()).unwrap();
}

fuzz_target!(|data: &[u8]| {
    let dir = scratch();
    write_trace(&dir, data);
    let quiet = reader::OpenOptions {
        quiet: true,
        ..Default::default()
    };
    let t = reader::TraceDir::open_with(&dir, quiet).expect("a directory of whole records opens");
    reader::summarize(&t).expect("not strict: damage is skipped");
    for k in t.threads().collect::<Vec<_>>() {
        t.for_each_entry(k, |_, _| Ok(())).expect("not strict");
    }
    let set = analyzer::decode::TraceSet::open(&[dir.clone()]).expect("opens");
    for p in &set.processes {
        for th in &p.threads {
            th.for_each(|_| {}).expect("undecodable entries are only damage");
        }
    }
    let opts = analyzer::Options::default();
    // `learn` may refuse a trace it has nothing to learn from, never for its entries.
    if let Err(e) = analyzer::learn(std::slice::from_ref(&set), &opts) {
        assert!(
            !matches!(e, analyzer::Error::Decode { .. } | analyzer::Error::Reader(_)),
            "{e}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
});
