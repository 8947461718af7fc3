//! `culprit cluster learn` / `culprit cluster rank`: the analysis of a whole job as steps of
//! plain `culprit` commands, submitted to Slurm as `sbatch` array jobs chained by
//! dependencies (`afterok`), or run on this machine (`--local`) — the same commands either
//! way.
//!
//! - learn: a `culprit learn` per host (its traces under the directories given), then the
//!   per-host models merged pairwise along a binary tree (`culprit merge`, associative bit
//!   for bit: any tree gives the model one `culprit learn` over everything gives), the root
//!   written to `-o`.
//! - rank: `culprit rank --write-index WORK/run.index` once (the run's processes and
//!   clocks), `culprit rank --index WORK/run.index --shard K/N` for every K, then `culprit
//!   rank --merge` of the N part files into `WORK/ranking.json` (or `.txt`): the ranking one
//!   `culprit rank --no-messages` over every trace gives.
//!
//! Every step reads the traces under the directories given: with Slurm, they must be on
//! storage the compute nodes share (a job that records on node-local storage copies its
//! `DIR/<host>/` there at its end; see the README).

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `culprit cluster`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

/// The analyses `culprit cluster` runs.
#[derive(clap::Subcommand)]
pub enum What {
    /// Learn a model: `culprit learn` per host, models merged along a binary tree.
    Learn(LearnArgs),
    /// Rank a run: `culprit rank --write-index`, `culprit rank --shard K/N` for every K,
    /// then `--merge`.
    Rank(RankArgs),
}

/// Where and how the steps run.
#[derive(clap::Args, Clone)]
pub struct Run {
    /// Working directory for the steps' files (models, part files, scripts, logs); on
    /// storage every node sees when submitting to Slurm.
    #[arg(long, value_name = "DIR")]
    pub work: PathBuf,
    /// Run the steps here, one level after another, up to --jobs at once (default:
    /// submit them to Slurm with `sbatch`).
    #[arg(long)]
    pub local: bool,
    /// Steps run at once with --local (default: one per core).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// With Slurm: wait until the last job ends (`sbatch --wait` on it) and print its
    /// result.
    #[arg(long)]
    pub wait: bool,
    /// With Slurm: one more `sbatch` option for every job (repeatable), e.g.
    /// `--sbatch=--partition=debug`.
    #[arg(long = "sbatch", value_name = "OPTION", allow_hyphen_values = true)]
    pub sbatch: Vec<String>,
}

/// Arguments of `culprit cluster learn`.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  \
    culprit cluster learn --work /shared/w -o normal.model /shared/normal-run/   # sbatch jobs\n  \
    culprit cluster learn --work w --local -o normal.model normal-run/           # here")]
pub struct LearnArgs {
    /// The model to write.
    #[arg(short, long, value_name = "MODEL")]
    pub output: PathBuf,
    /// Trace directories of normal runs, or trees of them (`DIR/<host>/<job.step.task>/`).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    #[command(flatten)]
    pub run: Run,
}

/// Arguments of `culprit cluster rank`.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  \
    culprit cluster rank --work /shared/w --model normal.model --shards 16 --json /shared/bad/")]
pub struct RankArgs {
    /// The model.
    #[arg(long, value_name = "MODEL")]
    pub model: PathBuf,
    /// Shards (default: one per host).
    #[arg(long, value_name = "N")]
    pub shards: Option<usize>,
    /// The ranking as JSON (`WORK/ranking.json`; default text, `WORK/ranking.txt`).
    #[arg(long)]
    pub json: bool,
    /// Units listed (as `culprit rank --top`).
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Trace directories of the run, or trees of them.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    #[command(flatten)]
    pub run: Run,
}

/// One step: a `culprit` command line, its standard output optionally to a file.
#[derive(Clone, Debug)]
struct Step {
    args: Vec<String>,
    stdout: Option<PathBuf>,
}

/// Steps in levels: every step of a level may start once the level before ended well.
type Plan = Vec<Vec<Step>>;

/// Runs `culprit cluster`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.what {
        What::Learn(a) => learn(a),
        What::Rank(a) => rank(a),
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// The trace directories under `dirs`, by host (in host order).
fn by_host(dirs: &[PathBuf]) -> anyhow::Result<Vec<(String, Vec<PathBuf>)>> {
    let mut hosts: std::collections::BTreeMap<String, Vec<PathBuf>> = Default::default();
    for d in analyzer::trace::discover::trace_dirs(dirs)? {
        let m = reader::Manifest::read(&d).with_context(|| format!("{}", d.display()))?;
        hosts
            .entry(m.host)
            .or_default()
            .push(std::path::absolute(&d)?);
    }
    if hosts.is_empty() {
        bail!(
            "no trace under {}",
            dirs.iter().map(|d| s(d)).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(hosts.into_iter().collect())
}

fn learn(a: LearnArgs) -> anyhow::Result<ExitCode> {
    super::outpath::check_output_file(&a.output, "model file (-o)")?;
    let work = prepare_work(&a.run.work)?;
    let hosts = by_host(&a.dirs)?;
    eprintln!(
        "culprit: {} hosts: {}",
        hosts.len(),
        hosts
            .iter()
            .map(|h| h.0.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let output = std::path::absolute(&a.output)?;
    let mut plan: Plan = Vec::new();
    let mut models: Vec<PathBuf> = Vec::new();
    let mut level = Vec::new();
    for (i, (_, dirs)) in hosts.iter().enumerate() {
        let m = work.join(format!("learn-0-{i}.model"));
        let mut args = vec!["learn".to_string()];
        args.extend(dirs.iter().map(|d| s(d)));
        args.extend(["-o".into(), s(&m)]);
        level.push(Step { args, stdout: None });
        models.push(m);
    }
    plan.push(level);
    // Pairwise merges up a binary tree; the root is the output.
    let mut depth = 0;
    loop {
        depth += 1;
        let last = models.len() <= 2;
        let mut next = Vec::new();
        let mut level = Vec::new();
        for (j, pair) in models.chunks(2).enumerate() {
            let m = if last {
                output.clone()
            } else {
                work.join(format!("learn-{depth}-{j}.model"))
            };
            let mut args = vec!["merge".to_string()];
            args.extend(pair.iter().map(|p| s(p)));
            args.extend(["-o".into(), s(&m)]);
            level.push(Step { args, stdout: None });
            next.push(m);
        }
        plan.push(level);
        models = next;
        if last {
            break;
        }
    }
    eprintln!("culprit: merge tree of depth {depth}");
    execute(&plan, &a.run, "learn", &output)
}

fn rank(a: RankArgs) -> anyhow::Result<ExitCode> {
    let work = prepare_work(&a.run.work)?;
    let hosts = by_host(&a.dirs)?;
    let n = a.shards.unwrap_or(hosts.len()).max(1);
    let model = std::path::absolute(&a.model)?;
    let dirs: Vec<String> = a
        .dirs
        .iter()
        .map(|d| std::path::absolute(d).map(|p| s(&p)))
        .collect::<Result<_, _>>()?;
    // The run's processes and clocks, worked out once for every shard.
    let index = work.join("run.index");
    let mut args = vec!["rank".to_string(), "--write-index".into(), s(&index)];
    args.extend(dirs.iter().cloned());
    let write_index = Step { args, stdout: None };
    let mut shards = Vec::new();
    let mut parts = Vec::new();
    for k in 1..=n {
        let part = work.join(format!("part-{k}"));
        let args = vec![
            "rank".into(),
            "--model".into(),
            s(&model),
            "--index".into(),
            s(&index),
            "--shard".into(),
            format!("{k}/{n}"),
            "-o".into(),
            s(&part),
        ];
        shards.push(Step { args, stdout: None });
        parts.push(s(&part));
    }
    let result = work.join(if a.json {
        "ranking.json"
    } else {
        "ranking.txt"
    });
    let mut args = vec!["rank".to_string(), "--merge".into()];
    args.extend(parts);
    if a.json {
        args.push("--json".into());
    }
    if let Some(t) = a.top {
        args.extend(["--top".into(), t.to_string()]);
    }
    let merge = Step {
        args,
        stdout: Some(result.clone()),
    };
    eprintln!("culprit: {} hosts, {n} shards", hosts.len());
    execute(
        &vec![vec![write_index], shards, vec![merge]],
        &a.run,
        "rank",
        &result,
    )
}

fn prepare_work(w: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(w.join("log"))
        .with_context(|| format!("{}: cannot create", w.display()))?;
    Ok(std::path::absolute(w)?)
}

/// Runs the plan here or submits it; `result` is the file the last step writes.
fn execute(plan: &Plan, run: &Run, what: &str, result: &Path) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("cannot find the culprit executable")?;
    if run.local {
        let jobs = run
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1);
        for (l, level) in plan.iter().enumerate() {
            run_level(&exe, level, jobs).with_context(|| format!("level {l} of {what}"))?;
        }
        eprintln!("culprit: {what}: done → {}", result.display());
        if result.extension().is_some_and(|e| e != "model") {
            print!("{}", std::fs::read_to_string(result)?);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let work = std::path::absolute(&run.work)?;
    let mut prev: Option<String> = None;
    for (l, level) in plan.iter().enumerate() {
        let script = work.join(format!("{what}-{l}.sh"));
        std::fs::write(&script, array_script(&exe, level))
            .with_context(|| format!("{}: cannot write", script.display()))?;
        let mut c = std::process::Command::new("sbatch");
        c.arg("--parsable")
            .arg(format!("--job-name=culprit-{what}-{l}"))
            .arg(format!("--array=0-{}", level.len() - 1))
            .arg(format!("--output={}/log/{what}-{l}-%a.out", work.display()));
        if let Some(p) = &prev {
            c.arg(format!("--dependency=afterok:{p}"))
                .arg("--kill-on-invalid-dep=yes");
        }
        let last = l + 1 == plan.len();
        if last && run.wait {
            c.arg("--wait");
        }
        c.args(&run.sbatch).arg(&script);
        let out = c
            .output()
            .context("cannot run sbatch (is Slurm installed? --local runs the steps here)")?;
        if !out.status.success() {
            bail!(
                "sbatch {}: {}",
                script.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let id = String::from_utf8_lossy(&out.stdout)
            .trim()
            .split(';')
            .next()
            .unwrap_or("")
            .to_string();
        eprintln!("culprit: level {l}: job {id} ({} tasks)", level.len());
        prev = Some(id);
    }
    if run.wait {
        if !result.exists() {
            bail!(
                "the jobs ended without writing {} (logs in {}/log/)",
                result.display(),
                work.display()
            );
        }
        eprintln!("culprit: {what}: done → {}", result.display());
        if result.extension().is_some_and(|e| e != "model") {
            print!("{}", std::fs::read_to_string(result)?);
        }
    } else {
        eprintln!(
            "culprit: {what}: submitted; the result will be {}",
            result.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Quotes a word for `sh`.
fn quote(w: &str) -> String {
    format!("'{}'", w.replace('\'', r"'\''"))
}

/// An `sbatch` array script running step `$SLURM_ARRAY_TASK_ID` of `level`.
fn array_script(exe: &Path, level: &[Step]) -> String {
    let mut sh = String::from("#!/bin/sh\n# Written by `culprit cluster`: one step per array task.\nset -e\ncase \"$SLURM_ARRAY_TASK_ID\" in\n");
    for (i, st) in level.iter().enumerate() {
        let mut line = quote(&exe.display().to_string());
        for a in &st.args {
            line.push(' ');
            line.push_str(&quote(a));
        }
        if let Some(o) = &st.stdout {
            line.push_str(&format!(" > {}", quote(&o.display().to_string())));
        }
        sh.push_str(&format!("{i}) {line} ;;\n"));
    }
    sh.push_str("*) echo \"culprit cluster: no step $SLURM_ARRAY_TASK_ID\" >&2; exit 1 ;;\nesac\n");
    sh
}

/// Runs a level's steps here, up to `jobs` at once; the first failure is the error.
fn run_level(exe: &Path, level: &[Step], jobs: usize) -> anyhow::Result<()> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed: std::sync::Mutex<Option<anyhow::Error>> = Default::default();
    std::thread::scope(|sc| {
        for _ in 0..jobs.min(level.len()) {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(st) = level.get(i) else { break };
                if let Err(e) = run_step(exe, st) {
                    failed
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_or_insert(e);
                    break;
                }
            });
        }
    });
    match failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn run_step(exe: &Path, st: &Step) -> anyhow::Result<()> {
    let mut c = std::process::Command::new(exe);
    c.args(&st.args).stdin(std::process::Stdio::null());
    let out = c
        .output()
        .with_context(|| format!("cannot run culprit {}", st.args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "culprit {}: {}\n{}",
            st.args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    if let Some(f) = &st.stdout {
        std::fs::write(f, &out.stdout).with_context(|| format!("{}: cannot write", f.display()))?;
    }
    Ok(())
}
