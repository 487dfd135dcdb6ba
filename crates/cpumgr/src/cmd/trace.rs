//! `cpumgr trace export`: convert a trace to Perfetto/Chrome JSON or Paraver files.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use cpumgr_report::export;

/// Arguments of `cpumgr trace`.
#[derive(Debug, Parser)]
pub struct Args {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(Debug, Subcommand)]
enum TraceCommand {
    /// Write a trace in another tool's format.
    Export {
        /// Target format.
        #[arg(long, value_enum)]
        format: Format,
        /// The cpumgr trace (JSON lines).
        trace: PathBuf,
        /// Output: a `.json` file for perfetto; for paraver a path whose `.prv`, `.pcf` and
        /// `.row` siblings are written.
        out: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    /// Chrome trace event JSON, opens in ui.perfetto.dev.
    Perfetto,
    /// Paraver `.prv/.pcf/.row`, opens in wxparaver.
    Paraver,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let TraceCommand::Export { format, trace, out } = args.command;
    let timeline = super::report::load_timeline(&trace)?;
    match format {
        Format::Perfetto => std::fs::write(&out, serde_json::to_string(&export::perfetto(&timeline))?)?,
        Format::Paraver => {
            let p = export::paraver(&timeline);
            for (ext, body) in [("prv", &p.prv), ("pcf", &p.pcf), ("row", &p.row)] {
                std::fs::write(out.with_extension(ext), body)?;
            }
        }
    }
    Ok(())
}
