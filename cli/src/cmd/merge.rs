//! `culprit merge`: merge models learned on different nodes (the decentralized step).

use analyzer::model::Model;
use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `culprit merge`.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  \
    culprit learn site-a/* -o a.model     # on one site\n  \
    culprit learn site-b/* -o b.model     # on another\n  \
    culprit merge a.model b.model -o global.model\n\n\
    Process groups with the same signature are merged node by node (mean probability over the\n\
    process models that contain each node); merging is associative, so learning everything at\n\
    once or merging per-site models gives the same model.")]
pub struct Args {
    /// Model files.
    #[arg(required = true, value_name = "MODEL")]
    pub models: Vec<PathBuf>,
    /// Where to write the merged model.
    #[arg(short, long, value_name = "MODEL")]
    pub output: PathBuf,
}

/// Runs `culprit merge`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::outpath::check_output_file(&args.output, "model file (-o)")?;
    let mut out: Option<Model> = None;
    for p in &args.models {
        let m = Model::load(p)?;
        match &mut out {
            None => out = Some(m),
            Some(o) => o
                .merge(&m)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("{}: cannot merge", p.display()))?,
        }
    }
    let Some(m) = out else {
        anyhow::bail!("no model given");
    };
    m.save(&args.output)?;
    eprintln!(
        "merged {} models: {} process group(s), {} nodes, {:.1} KB → {}",
        args.models.len(),
        m.groups.len(),
        m.node_count(),
        m.encoded_size() as f64 / 1e3,
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}
