//! `cpumgr`: the command-line front end of the CPU manager. Each subcommand lives in its own
//! module under `cmd/`; this file only parses the command line and maps errors to exit codes
//! (0 ok, 1 runtime failure, 2 bad usage or bad input).

mod cmd;
mod input;
mod manager_args;
mod topology_arg;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A CPU manager for multicore machines that run several parallel programs at once.
#[derive(Debug, Parser)]
#[command(name = "cpumgr", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the machine's topology (or a synthetic or XML one) as a tree.
    Topology(cmd::topology::Args),
    /// List every scheduling policy with its parameters and defaults.
    Policies(cmd::policies::Args),
    /// Run a policy and the placer for a few quanta over a list of programs.
    Decide(cmd::decide::Args),
    /// Manage a process that already runs, until it ends.
    Attach(cmd::run::AttachArgs),
    /// Run the manager in the foreground.
    Daemon(cmd::daemon::Args),
    /// Run a command as a managed program (starts a manager if none runs).
    Run(cmd::run::Args),
    /// Show the manager's state.
    Status(cmd::control::StatusArgs),
    /// Switch the manager's policy: `cpumgr policy set NAME[:k=v,...]`.
    Policy(cmd::control::SetArgs),
    /// Change the manager's quantum: `cpumgr quantum set 50ms`.
    Quantum(cmd::control::SetArgs),
    /// The main job: build the test kernels, run a mixed workload under baselines and policies, compare.
    Demo(cmd::demo::Args),
    /// Run a workload of real programs under several configurations and compare them.
    Launch(cmd::launch::Args),
    /// Rebuild an HTML report from saved traces.
    Report(cmd::report::Args),
    /// Work with traces (export to Perfetto or Paraver).
    Trace(cmd::trace::Args),
    /// Simulate policies on a modelled workload (TOML, SWF trace or paper preset) and compare them.
    Sim(cmd::sim::Args),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CPUMGR_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(a) => match cmd::run::run(a) {
            Ok(code) => return ExitCode::from(code.clamp(0, 255) as u8),
            Err(e) => Err(e),
        },
        Command::Attach(a) => cmd::run::attach(a),
        Command::Daemon(a) => cmd::daemon::run(a),
        Command::Status(a) => cmd::control::status(a),
        Command::Policy(a) => cmd::control::policy(a),
        Command::Quantum(a) => cmd::control::quantum(a),
        Command::Topology(a) => cmd::topology::run(a),
        Command::Policies(a) => cmd::policies::run(a),
        Command::Decide(a) => cmd::decide::run(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Launch(a) => cmd::launch::run_launch(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Trace(a) => cmd::trace::run(a),
        Command::Sim(a) => cmd::sim::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cpumgr: {e:#}");
            if e.downcast_ref::<input::InputError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
