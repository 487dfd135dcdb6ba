//! `cpumgr report`: rebuild the HTML report from saved traces (one run per trace file).

use std::path::PathBuf;

use clap::Parser;
use cpumgr_report::{render, Report, Timeline};

use crate::input::InputError;

/// Arguments of `cpumgr report`.
#[derive(Debug, Parser)]
pub struct Args {
    /// Trace files (JSON lines), one run each.
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// Where to write the page.
    #[arg(short, long, default_value = "cpumgr-report.html")]
    output: PathBuf,
}

/// Reads a trace file into a timeline; errors name the file and line.
pub fn load_timeline(path: &std::path::Path) -> anyhow::Result<Timeline> {
    let text = crate::input::read_file(path)?;
    let events = cpumgr_report::parse_trace(&path.display().to_string(), &text).map_err(|e| InputError::new(e.to_string()))?;
    Ok(Timeline::from_events(&events))
}

/// Writes the report.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut report = Report { title: "cpumgr report".into(), ..Report::default() };
    for path in &args.traces {
        let t = load_timeline(path)?;
        report.runs.push((format!("{} ({})", path.display(), t.policy), t));
    }
    std::fs::write(&args.output, render(&report))?;
    println!("wrote {}", args.output.display());
    Ok(())
}
