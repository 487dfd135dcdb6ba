//! `cpumgr report`: rebuild the HTML report from saved traces (one run per trace file, or per
//! policy of a multi-policy sim trace): the results table read off the traces, and the charts.

use std::path::PathBuf;

use clap::Parser;
use cpumgr_report::{render, Report, Timeline};

use crate::input::InputError;

/// Arguments of `cpumgr report`.
#[derive(Debug, Parser)]
pub struct Args {
    /// Trace files (JSON lines), one or more runs each.
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// Where to write the page.
    #[arg(short, long, default_value = "cpumgr-report.html")]
    output: PathBuf,
}

fn read_events(path: &std::path::Path) -> anyhow::Result<Vec<cpumgr_core::trace::Event>> {
    let text = crate::input::read_file(path)?;
    cpumgr_report::parse_trace(&path.display().to_string(), &text).map_err(|e| InputError::new(e.to_string()))
}

/// Reads a trace file into a timeline; errors name the file and line.
pub fn load_timeline(path: &std::path::Path) -> anyhow::Result<Timeline> {
    Ok(Timeline::from_events(&read_events(path)?))
}

/// Reads a trace file into one timeline per run it holds (`cpumgr sim --trace` with several
/// policies writes one run per policy, each opened by its `start` event).
pub fn load_timelines(path: &std::path::Path) -> anyhow::Result<Vec<Timeline>> {
    Ok(Timeline::runs(&read_events(path)?))
}

/// Writes the report.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut report = Report { title: "cpumgr report".into(), ..Report::default() };
    for path in &args.traces {
        for t in load_timelines(path)? {
            report.runs.push((format!("{} ({})", path.display(), t.policy), t));
        }
    }
    report.table = cpumgr_report::summary::table(&report.runs);
    std::fs::write(&args.output, render(&report))?;
    println!("wrote {}", args.output.display());
    Ok(())
}
