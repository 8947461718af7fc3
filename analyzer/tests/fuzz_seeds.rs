//! Writes the seed corpora of the fuzz targets `chunk`, `cios` and `cputsv`
//! (`bufpool/fuzz/`) from the real formats: the records of a synthetic three-process ring
//! (as the tracer writes them, with a loss), an IO-sample run as `culprit iosample` writes
//! it, and CPU samples as the reader writes them. Run by `bufpool/fuzz/run.sh` with
//! `CULPRIT_FUZZ_SEED_DIR` set; does nothing without it.

use analyzer::decode::ThreadSource;
use analyzer::synth::{ring, Functions, Ring};
use reader::iosample::format::{self, Meta, ProcRecord, Record, SampleRecord};
use reader::iosample::Counters;

/// One record of the `chunk` target's input: control byte, 2-byte length, data.
fn chunk_record(out: &mut Vec<u8>, thread: u8, lost: Option<u64>, data: &[u8]) {
    out.push(thread & 3 | if lost.is_some() { 4 } else { 0 });
    if let Some(n) = lost {
        out.extend_from_slice(&n.to_le_bytes());
    }
    out.extend_from_slice(&(data.len() as u16).to_le_bytes());
    out.extend_from_slice(data);
}

#[test]
#[ignore = "writes fuzz seeds; run by bufpool/fuzz/run.sh"]
fn write_fuzz_seeds() {
    let Some(out) = std::env::var_os("CULPRIT_FUZZ_SEED_DIR") else {
        return;
    };
    let out = std::path::PathBuf::from(out);
    for t in ["chunk", "cios", "cputsv"] {
        std::fs::create_dir_all(out.join(t)).unwrap();
    }
    // chunk: each process of a ring, its entries cut at entry boundaries into records of
    // at most 2 047 bytes (the target's limit), one with a loss before it.
    for (seed, functions) in [Functions::C, Functions::Python].into_iter().enumerate() {
        let cfg = Ring {
            processes: 3,
            iterations: 4,
            functions,
            fault: None,
            seed: seed as u64 + 1,
        };
        for (i, p) in ring(&cfg).into_iter().enumerate() {
            let mut input = vec![1u8];
            for (ti, t) in p.threads.iter().enumerate() {
                let ThreadSource::Memory(chunks) = &t.source else {
                    continue;
                };
                let all: Vec<u8> = chunks
                    .iter()
                    .flat_map(|c| c.bytes.iter().copied())
                    .collect();
                let (mut start, mut at) = (0, 0);
                for e in bufpool::format::Decoder::new(&all).map_while(|e| e.ok()) {
                    if at + e.size - start > 2047 {
                        chunk_record(&mut input, ti as u8, None, &all[start..at]);
                        start = at;
                    }
                    at += e.size;
                }
                let lost = bufpool::format::encode_lost(0, 3);
                let mut last = lost.as_bytes().to_vec();
                last.extend_from_slice(&all[start..at]);
                last.truncate(2047);
                chunk_record(&mut input, ti as u8, Some(3), &last);
            }
            std::fs::write(out.join(format!("chunk/ring{seed}-{i}")), input).unwrap();
        }
    }
    // cios: a header, the metadata, a server and a client, 20 samples.
    let mut recs = vec![
        Record::Meta(Meta {
            host: "h".into(),
            interval_ns: 100_000_000,
            taskstats: "on".into(),
            ..Default::default()
        }),
        Record::Proc(ProcRecord {
            pid: 7,
            ppid: 1,
            comm: "vsftpd".into(),
            flags: format::PROC_SERVER,
            ..Default::default()
        }),
        Record::Proc(ProcRecord {
            pid: 8,
            ppid: 1,
            comm: "client".into(),
            ..Default::default()
        }),
    ];
    for seq in 0..20u64 {
        recs.push(Record::Sample(SampleRecord {
            seq,
            mono_ns: seq * 100_000_000,
            unix_ns: 1_700_000_000_000_000_000 + seq * 100_000_000,
            changed: vec![
                (
                    7,
                    Counters::from_array([seq * 4096, seq * 512, seq, seq, 0, 0, 0]),
                ),
                (8, Counters::from_array([seq * 100, 0, seq, 0, 0, 0, 0])),
            ],
            ..Default::default()
        }));
    }
    let mut cios = format::header().to_vec();
    for r in &recs {
        cios.extend(format::frame(r));
    }
    std::fs::write(out.join("cios/run.cios"), cios).unwrap();
    // cputsv: two processes sampled every 100 ms.
    let mut tsv = String::new();
    for k in 0..20u64 {
        for (pid, rate) in [(7u32, 3u64), (8, 1)] {
            tsv.push_str(&format!(
                "{}\t{pid}\t{}\t{}\t{}\t2\n",
                1_700_000_000_000_000_000 + k * 100_000_000,
                1000 + pid,
                k * rate * 10_000_000,
                k * rate * 9_000_000
            ));
        }
    }
    std::fs::write(out.join("cputsv/cpu.tsv"), tsv).unwrap();
}
