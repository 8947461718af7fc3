//! Cluster benchmark (issue 29): a synthetic ring of P processes (default 10 000) on H hosts
//! (default 100), learned and ranked through the sharded path (`culprit learn` per host and
//! `culprit merge` up a binary tree; `culprit rank --shard K/N` then `--merge`) against one
//! `culprit learn` / `culprit rank` over everything. Every `culprit` command runs as its own
//! process, measured by `wait4` (wall time, CPU time, peak RSS); the sharded shards run one
//! after another, as N nodes would run them at once. Also: merging P per-process models
//! (learned in this process) along a binary tree, in this process.
//!
//! `cargo run --release -p bench --bin cluster [-- --processes 10000 --hosts 100 --iterations 6 --shards 10,100 --culprit target/release/culprit --root DIR]`
//!
//! The sharded rank is measured both ways a shard can name the run's processes: from the
//! run's index (`rank --write-index` once, its cost counted, then `--index` in every
//! shard) and from the trace directories (every shard reads every manifest).
//!
//! Prints a Markdown report: per-shard peak memory, CPU of the sharded path against the
//! single process, merge-tree depth and times, identical results, and a wall-time model
//! `shard(n) = a + b·P/n`, `merge(n) = c + d·n` fitted on the shard counts measured,
//! evaluated for 1 000 nodes.

use analyzer::decode::{write_trace_dir, TraceSet};
use analyzer::synth::{ring, Fault, Functions, Ring};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn arg(name: &str, default: &str) -> String {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .unwrap_or_else(|| default.to_string())
}

/// What one command cost.
#[derive(Clone, Copy, Debug, Default)]
struct Cost {
    wall: f64,
    cpu: f64,
    rss_mb: f64,
}

/// Runs `culprit ARGS`, stdout to `out` (if any); its wall time, CPU time and peak RSS.
fn run(culprit: &Path, args: &[String], out: Option<&Path>) -> anyhow::Result<Cost> {
    use std::os::unix::process::ExitStatusExt;
    let mut c = std::process::Command::new(culprit);
    c.args(args).stderr(std::process::Stdio::null());
    if let Some(o) = out {
        c.stdout(std::fs::File::create(o)?);
    } else {
        c.stdout(std::process::Stdio::null());
    }
    let t = Instant::now();
    let child = c.spawn()?;
    let mut status = 0;
    // SAFETY: wait4 writes the status and the rusage we pass, for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the pid is our child's, waited for once.
    let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    let wall = t.elapsed().as_secs_f64();
    anyhow::ensure!(r > 0, "wait4 failed");
    let st = std::process::ExitStatus::from_raw(status);
    anyhow::ensure!(st.success(), "culprit {}: {st}", args.join(" "));
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(Cost {
        wall,
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
        rss_mb: ru.ru_maxrss as f64 / 1024.0,
    })
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Writes the ring as `root/h<i mod H>/1.0.<i>/`, one trace directory per process.
fn write(
    root: &Path,
    cfg: &Ring,
    hosts: usize,
) -> anyhow::Result<Vec<analyzer::decode::ProcessTrace>> {
    let mut procs = ring(cfg);
    for (i, p) in procs.iter_mut().enumerate() {
        let host = format!("h{:03}", i % hosts);
        p.host = host.clone();
        write_trace_dir(
            &root.join(&host).join(format!("1.0.{i}")),
            &host,
            std::slice::from_ref(p),
        )?;
    }
    Ok(procs)
}

/// A model file's JSON with the groups' `ending` left out (learned against the rest of
/// each run, so a model learned from part of a run and merged knows only that part's).
fn without_endings(model: &[u8]) -> anyhow::Result<serde_json::Value> {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(o) => {
                o.remove("ending");
                o.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v: serde_json::Value = serde_json::from_slice(model)?;
    strip(&mut v);
    Ok(v)
}

fn main() -> anyhow::Result<()> {
    let procs: usize = arg("--processes", "10000").parse()?;
    let hosts: usize = arg("--hosts", "100").parse()?;
    let iterations: usize = arg("--iterations", "6").parse()?;
    let shard_counts: Vec<usize> = arg("--shards", "10,100")
        .split(',')
        .map(|x| x.parse())
        .collect::<Result<_, _>>()?;
    let culprit = PathBuf::from(arg("--culprit", "target/release/culprit"));
    anyhow::ensure!(
        culprit.is_file(),
        "{}: build it first (cargo build --release -p cli)",
        culprit.display()
    );
    // --root DIR: write the traces there and keep them (else a temporary directory).
    let tmp = tempfile::tempdir()?;
    let kept = std::env::args()
        .any(|a| a == "--root")
        .then(|| PathBuf::from(arg("--root", "")));
    let root = kept.as_deref().unwrap_or(tmp.path());
    let cfg = |fault, seed| Ring {
        processes: procs,
        iterations,
        functions: Functions::C,
        fault,
        seed,
    };
    let t = Instant::now();
    let normal_procs = write(&root.join("normal"), &cfg(None, 1), hosts)?;
    write(
        &root.join("faulty"),
        &cfg(
            Some(Fault {
                process: procs / 3,
                iteration: iterations / 2,
            }),
            2,
        ),
        hosts,
    )?;
    println!(
        "# Cluster benchmark: {procs} processes on {hosts} hosts, {iterations} messages each\n"
    );
    println!("Traces written in {:.1} s.\n", t.elapsed().as_secs_f64());

    // Learning: one process, and per host + merge tree.
    let single_model = root.join("single.model");
    let learn1 = run(
        &culprit,
        &[
            "learn".into(),
            s(&root.join("normal")),
            "-o".into(),
            s(&single_model),
        ],
        None,
    )?;
    let mut per_host = Vec::new();
    let mut level: Vec<PathBuf> = Vec::new();
    for h in 0..hosts {
        let m = root.join(format!("m0-{h}.model"));
        per_host.push(run(
            &culprit,
            &[
                "learn".into(),
                s(&root.join("normal").join(format!("h{h:03}"))),
                "-o".into(),
                s(&m),
            ],
            None,
        )?);
        level.push(m);
    }
    let mut depth = 0;
    let mut critical = 0.0;
    let mut merge_cpu = 0.0;
    let mut merge_rss: f64 = 0.0;
    while level.len() > 1 {
        depth += 1;
        let mut next = Vec::new();
        let mut slowest: f64 = 0.0;
        for (j, pair) in level.chunks(2).enumerate() {
            let m = root.join(format!("m{depth}-{j}.model"));
            let mut a = vec!["merge".to_string()];
            a.extend(pair.iter().map(|p| s(p)));
            a.extend(["-o".into(), s(&m)]);
            let c = run(&culprit, &a, None)?;
            slowest = slowest.max(c.wall);
            merge_cpu += c.cpu;
            merge_rss = merge_rss.max(c.rss_mb);
            next.push(m);
        }
        critical += slowest;
        level = next;
    }
    let single_bytes = std::fs::read(&single_model)?;
    let tree_bytes = std::fs::read(&level[0])?;
    let same_model = tree_bytes == single_bytes;
    let same_model_but_endings = without_endings(&tree_bytes)? == without_endings(&single_bytes)?;
    let host_cpu: f64 = per_host.iter().map(|c| c.cpu).sum();
    let host_wall = per_host.iter().map(|c| c.wall).fold(0.0, f64::max);
    let host_rss = per_host.iter().map(|c| c.rss_mb).fold(0.0, f64::max);
    println!("## Learn\n");
    println!("| path | wall (s) | CPU (s) | peak RSS per process (MB) |\n|---|---|---|---|");
    println!(
        "| one `culprit learn` | {:.2} | {:.2} | {:.0} |",
        learn1.wall, learn1.cpu, learn1.rss_mb
    );
    println!(
        "| {hosts} × `learn` (one per host, slowest) + merge tree (depth {depth}, critical path {critical:.2} s) | {:.2} | {:.2} ({:.2}× one) | {:.0} (merge {:.0}) |",
        host_wall + critical,
        host_cpu + merge_cpu,
        (host_cpu + merge_cpu) / learn1.cpu,
        host_rss,
        merge_rss
    );
    println!(
        "\nMerged model byte-identical to the single learn: **{same_model}**; identical but for the groups' endings: {same_model_but_endings}.\n"
    );

    // In-process: P per-process models merged up a binary tree.
    let opts = analyzer::Options::default();
    let t = Instant::now();
    let mut models: Vec<analyzer::model::Model> = normal_procs
        .iter()
        .map(|p| {
            analyzer::learn(
                &[TraceSet {
                    processes: vec![p.clone()],
                }],
                &opts,
            )
            .map(|l| l.model)
        })
        .collect::<Result<_, _>>()?;
    let learn_each = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut levels = 0;
    while models.len() > 1 {
        levels += 1;
        let mut next = Vec::with_capacity(models.len().div_ceil(2));
        let mut it = models.into_iter();
        while let Some(mut a) = it.next() {
            if let Some(b) = it.next() {
                a.merge(&b).map_err(anyhow::Error::msg)?;
            }
            next.push(a);
        }
        models = next;
    }
    let merge_all = t.elapsed().as_secs_f64();
    let merged = models[0].to_json().into_bytes();
    let same = merged == single_bytes.strip_suffix(b"\n").unwrap_or_default();
    let same_but_endings = without_endings(&merged)? == without_endings(&single_bytes)?;
    println!(
        "{procs} per-process models (learned in {learn_each:.1} s) merged up a binary tree of depth {levels} in **{merge_all:.2} s** (one thread); byte-identical to the single learn: {same}; identical but for the groups' endings: **{same_but_endings}** (how a group's processes ended is learned against the rest of each run, which a model of one process alone does not see: analyzer/MODEL.md, `ending`).\n"
    );

    // Ranking: one process, and N shards + merge.
    let faulty = s(&root.join("faulty"));
    let m = s(&single_model);
    let single_json = root.join("single.json");
    let rank1 = run(
        &culprit,
        &[
            "rank".into(),
            "--model".into(),
            m.clone(),
            faulty.clone(),
            "--json".into(),
            "--no-messages".into(),
        ],
        Some(&single_json),
    )?;
    println!("## Rank\n");
    println!("| path | wall (s) | CPU (s) | CPU vs one | peak RSS per process (MB) | merge (s) | identical JSON |\n|---|---|---|---|---|---|---|");
    println!(
        "| one `culprit rank` | {:.2} | {:.2} | 1.00 | {:.0} | – | – |",
        rank1.wall, rank1.cpu, rank1.rss_mb
    );
    let mut fits = Vec::new();
    let mut breakdown = Vec::new();
    for &n in &shard_counts {
        for indexed in [true, false] {
            // With the run's index: written once, read by every shard.
            let index_file = root.join(format!("run-{n}.index"));
            let index = if indexed {
                Some(run(
                    &culprit,
                    &[
                        "rank".into(),
                        "--write-index".into(),
                        s(&index_file),
                        faulty.clone(),
                    ],
                    None,
                )?)
            } else {
                None
            };
            let mut parts = Vec::new();
            let mut shard = Vec::new();
            for k in 1..=n {
                let part = root.join(format!("part-{k}-{n}-{indexed}"));
                let mut a: Vec<String> = vec![
                    "rank".into(),
                    "--model".into(),
                    m.clone(),
                    "--shard".into(),
                    format!("{k}/{n}"),
                    "-o".into(),
                    s(&part),
                ];
                if indexed {
                    a.extend(["--index".into(), s(&index_file)]);
                } else {
                    a.push(faulty.clone());
                }
                shard.push(run(&culprit, &a, None)?);
                parts.push(s(&part));
            }
            let merged_json = root.join(format!("merged-{n}-{indexed}.json"));
            let mut a = vec!["rank".to_string(), "--merge".into()];
            a.extend(parts);
            a.push("--json".into());
            let merge = run(&culprit, &a, Some(&merged_json))?;
            let same = std::fs::read(&merged_json)? == std::fs::read(&single_json)?;
            let idx = index.unwrap_or_default();
            let cpu: f64 = idx.cpu + shard.iter().map(|c| c.cpu).sum::<f64>() + merge.cpu;
            let rss = shard.iter().map(|c| c.rss_mb).fold(0.0, f64::max);
            let mean_wall = shard.iter().map(|c| c.wall).sum::<f64>() / n as f64;
            let max_wall = shard.iter().map(|c| c.wall).fold(0.0, f64::max);
            let what = if indexed {
                "`--index` (index + slowest shard + merge)"
            } else {
                "DIR… (slowest shard + merge)"
            };
            println!(
                "| {n} shards, {what} | {:.2} | {cpu:.2} | {:.2} | {rss:.0} (merge {:.0}) | {:.2} | {same} |",
                idx.wall + max_wall + merge.wall,
                cpu / rank1.cpu,
                merge.rss_mb,
                merge.wall
            );
            if indexed {
                fits.push((n as f64, mean_wall, merge.wall));
            }
            let shard_cpu: f64 = shard.iter().map(|c| c.cpu).sum();
            let least = shard.iter().map(|c| c.cpu).fold(f64::INFINITY, f64::min);
            breakdown.push(format!(
                "- {n} shards, {}: {}the shards' CPU {shard_cpu:.2} s ({:.3} s a shard on average, {least:.3} s the least), the merge's {:.2} s",
                if indexed { "`--index`" } else { "DIR…" },
                if indexed {
                    format!("the index {:.2} s (wall {:.2} s), ", idx.cpu, idx.wall)
                } else {
                    String::new()
                },
                shard_cpu / n as f64,
                merge.cpu
            ));
        }
    }
    if !breakdown.is_empty() {
        println!(
            "\nCPU of the sharded path by step:\n{}",
            breakdown.join("\n")
        );
    }
    if !fits.is_empty() {
        // The single process is the 1-shard point of the shard model.
        let (n1, s1) = (1.0, rank1.wall);
        let (n2, s2, m2) = fits[fits.len() - 1];
        let m1 = fits[0].2;
        let n1m = fits[0].0;
        let p = procs as f64;
        // shard(n) = a + b·P/n; merge(n) = c + d·n.
        let b = (s1 - s2) / (p / n1 - p / n2);
        let a = s1 - b * p / n1;
        let d = if n2 > n1m {
            ((m2 - m1) / (n2 - n1m)).max(0.0)
        } else {
            0.0
        };
        let c = (m1 - d * n1m).max(0.0);
        println!("\nWall-time model (shards from the single process and {n2} shards, merges from {n1m} and {n2} parts; negative terms set to 0): shard(n) = {a:.3} s + {:.2} µs·P/n, merge(n) = {c:.3} s + {:.2} ms·n.", b * 1e6, d * 1e3);
        for nodes in [100.0, 1000.0] {
            println!(
                "- {nodes} nodes, one shard each, {procs} processes: {:.2} s (shard {:.2} s + merge {:.2} s)",
                a + b * p / nodes + c + d * nodes,
                a + b * p / nodes,
                c + d * nodes
            );
        }
    }
    Ok(())
}
